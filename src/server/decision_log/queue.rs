//! The HTTP decision-log sink's queue: bounded in records and in bytes, with the batch being
//! sent counted in the same budget, and every record it gives up counted by reason
//! (docs/serve.md, "Decision logs"). Deciding threads push; the shipping thread takes batches
//! and reports how each POST went; a stopping server drains it within a deadline.
//!
//! The policy when full is **drop oldest**: the newest record goes in and the oldest queued
//! ones leave until the queue is within its bounds again. A record larger than a batch may be
//! is dropped on arrival.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the queue may hold: records and bytes, the batch in flight included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most records queued.
    pub records: usize,
    /// The most bytes queued.
    pub bytes: usize,
}

impl Default for Bounds {
    /// [`super::QUEUE_CAPACITY`] records, [`super::QUEUE_BYTES`] bytes.
    fn default() -> Bounds {
        Bounds {
            records: super::QUEUE_CAPACITY,
            bytes: super::QUEUE_BYTES,
        }
    }
}

impl Bounds {
    /// The most bytes one batch (and so one record) may hold: a quarter of the byte bound, so
    /// a batch in flight always leaves room to queue behind it.
    pub fn batch_bytes(&self) -> usize {
        (self.bytes / 4).max(1)
    }
}

/// Records given up, by reason, and sent; read as metrics.
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    /// Pushed out of a full queue (the oldest first).
    pub dropped_full: AtomicU64,
    /// Larger than a batch may be.
    pub dropped_too_large: AtomicU64,
    /// In a POST that failed.
    pub dropped_failed: AtomicU64,
    /// Still queued or in flight when the server stopped and the deadline passed.
    pub unsent_at_stop: AtomicU64,
}

impl Counters {
    /// Every record lost while running (not counting those unsent at stop).
    pub fn dropped(&self) -> u64 {
        self.dropped_full.load(Ordering::Relaxed)
            + self.dropped_too_large.load(Ordering::Relaxed)
            + self.dropped_failed.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct Held {
    lines: VecDeque<Vec<u8>>,
    /// Bytes of `lines`.
    queued_bytes: usize,
    /// Records and bytes of the batch being sent.
    in_flight: (usize, usize),
    /// A stop is draining the queue: send without waiting for a batch to fill.
    urgent: bool,
    /// The stop's deadline passed: what was in flight is already counted as unsent.
    stopped: bool,
}

/// The queue between deciding threads and the shipping thread.
pub struct Queue {
    bounds: Bounds,
    held: Mutex<Held>,
    /// Signalled when lines arrive, when a batch settles, and when a stop begins.
    changed: Condvar,
    pub counters: Counters,
}

/// What [`Queue::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    Queued,
    /// Queued, after dropping this many of the oldest records.
    Evicted(usize),
    /// Not queued: larger than a batch may be.
    TooLarge,
}

/// A batch taken for sending; its bytes count against the queue until [`Queue::settle`].
pub struct Batch {
    pub lines: Vec<Vec<u8>>,
    bytes: usize,
}

impl Queue {
    pub fn new(bounds: Bounds) -> Queue {
        Queue {
            bounds,
            held: Mutex::new(Held::default()),
            changed: Condvar::new(),
            counters: Counters::default(),
        }
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a line, dropping the oldest queued ones while the queue is over its bounds.
    /// Never waits on the collector.
    pub fn push(&self, line: Vec<u8>) -> Pushed {
        if line.len() > self.bounds.batch_bytes() {
            self.counters
                .dropped_too_large
                .fetch_add(1, Ordering::Relaxed);
            return Pushed::TooLarge;
        }
        let mut h = self.lock();
        h.queued_bytes += line.len();
        h.lines.push_back(line);
        let mut evicted = 0;
        while h.lines.len() + h.in_flight.0 > self.bounds.records
            || h.queued_bytes + h.in_flight.1 > self.bounds.bytes
        {
            let Some(old) = h.lines.pop_front() else {
                break;
            };
            h.queued_bytes -= old.len();
            evicted += 1;
        }
        drop(h);
        self.changed.notify_all();
        if evicted == 0 {
            return Pushed::Queued;
        }
        self.counters
            .dropped_full
            .fetch_add(evicted as u64, Ordering::Relaxed);
        Pushed::Evicted(evicted)
    }

    /// Waits (at most `idle`) for a line, then up to `gather` for a batch of `max_records` to
    /// fill (not at all while a stop drains the queue); takes what is there. `None`: nothing
    /// arrived within `idle`.
    pub fn take(&self, max_records: usize, idle: Duration, gather: Duration) -> Option<Batch> {
        let mut h = self.lock();
        if h.lines.is_empty() {
            h = self.wait(h, Instant::now() + idle, |h| !h.lines.is_empty());
            if h.lines.is_empty() {
                return None;
            }
        }
        h = self.wait(h, Instant::now() + gather, |h| {
            h.urgent || h.lines.len() >= max_records
        });
        let mut batch = Batch {
            lines: Vec::new(),
            bytes: 0,
        };
        while batch.lines.len() < max_records {
            let Some(next) = h.lines.front() else { break };
            if !batch.lines.is_empty() && batch.bytes + next.len() > self.bounds.batch_bytes() {
                break;
            }
            let line = h.lines.pop_front().unwrap_or_default();
            h.queued_bytes -= line.len();
            batch.bytes += line.len();
            batch.lines.push(line);
        }
        h.in_flight = (batch.lines.len(), batch.bytes);
        Some(batch)
    }

    /// The batch was sent (`ok`) or lost: its records are counted and its bytes freed.
    pub fn settle(&self, batch: Batch, ok: bool) {
        let n = batch.lines.len() as u64;
        let counter = if ok {
            &self.counters.sent
        } else {
            &self.counters.dropped_failed
        };
        let mut h = self.lock();
        h.in_flight = (0, 0);
        if !h.stopped {
            counter.fetch_add(n, Ordering::Relaxed);
        }
        drop(h);
        drop(batch);
        self.changed.notify_all();
    }

    /// A stop: sends what is queued without waiting for batches to fill, waits until nothing
    /// is queued or in flight or `deadline` passes, then gives up what is left (counted as
    /// unsent at stop). Returns that count.
    pub fn drain(&self, deadline: Instant) -> u64 {
        let mut h = self.lock();
        h.urgent = true;
        self.changed.notify_all();
        h = self.wait(h, deadline, |h| h.lines.is_empty() && h.in_flight.0 == 0);
        let unsent = (h.lines.len() + h.in_flight.0) as u64;
        h.stopped = true;
        h.lines.clear();
        h.queued_bytes = 0;
        drop(h);
        self.counters
            .unsent_at_stop
            .fetch_add(unsent, Ordering::Relaxed);
        unsent
    }

    /// Records and bytes held now: queued and in flight.
    pub fn held(&self) -> (usize, usize) {
        let h = self.lock();
        (
            h.lines.len() + h.in_flight.0,
            h.queued_bytes + h.in_flight.1,
        )
    }

    fn wait<'a>(
        &self,
        mut h: MutexGuard<'a, Held>,
        until: Instant,
        done: impl Fn(&Held) -> bool,
    ) -> MutexGuard<'a, Held> {
        while !done(&h) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            h = self
                .changed
                .wait_timeout(h, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(records: usize, bytes: usize) -> Queue {
        Queue::new(Bounds { records, bytes })
    }

    #[test]
    fn a_full_queue_drops_its_oldest_records_and_counts_them() {
        let q = queue(3, 1000);
        for i in 0..5u8 {
            q.push(vec![i; 10]);
        }
        assert_eq!(q.held(), (3, 30));
        assert_eq!(q.counters.dropped_full.load(Ordering::Relaxed), 2);
        let b = q.take(10, Duration::ZERO, Duration::ZERO).unwrap();
        let firsts: Vec<u8> = b.lines.iter().map(|l| l[0]).collect();
        assert_eq!(firsts, [2, 3, 4]);
    }

    #[test]
    fn bytes_bound_the_queue_with_the_batch_in_flight_counted() {
        let q = queue(100, 100);
        assert_eq!(q.push(vec![0; 26]), Pushed::TooLarge);
        for _ in 0..4 {
            q.push(vec![1; 25]);
        }
        let b = q.take(100, Duration::ZERO, Duration::ZERO).unwrap();
        assert_eq!(
            b.lines.len(),
            1,
            "a batch holds at most a quarter of the bytes"
        );
        assert_eq!(q.held(), (4, 100));
        assert_eq!(q.push(vec![2; 25]), Pushed::Evicted(1));
        assert_eq!(q.held(), (4, 100));
        q.settle(b, false);
        assert_eq!(q.counters.dropped_failed.load(Ordering::Relaxed), 1);
        assert_eq!(q.held(), (3, 75));
    }

    #[test]
    fn a_stop_counts_what_it_could_not_send() {
        let q = queue(10, 1000);
        q.push(vec![0; 10]);
        q.push(vec![0; 10]);
        let b = q.take(1, Duration::ZERO, Duration::ZERO).unwrap();
        assert_eq!(q.drain(Instant::now()), 2, "one queued, one in flight");
        assert_eq!(q.counters.unsent_at_stop.load(Ordering::Relaxed), 2);
        q.settle(b, true);
        assert_eq!(q.held(), (0, 0));
    }
}
