//! Decision-log sinks for `--decision-log` (docs/serve.md, "Decision logs"): the Guardian
//! builds one record per decision (`guardian::log`); these put it somewhere.
//!
//! - a file path: one JSON line appended per record, written before the answer goes out;
//! - `-`: one JSON line on stdout (only when stdout is not the protocol's channel);
//! - `http://HOST:PORT/PATH`: records are queued and POSTed in batches of JSON lines by a
//!   background thread. The queue is bounded in records and bytes, the batch in flight
//!   included (`queue.rs`); when it is full the oldest records are dropped. Every record given
//!   up (full queue, too large, failed POST, unsent at stop) is counted, warned about on
//!   stderr and readable as a metric ([`DecisionLog::metrics`]); a decision never waits for
//!   or fails on the collector.

use std::fs::File;
use std::io::{self, BufRead, Read as _, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::guardian::log::DecisionLog;

mod queue;
pub use queue::Bounds;
use queue::{Pushed, Queue};

/// Records the HTTP collector's queue holds, the batch in flight included.
pub const QUEUE_CAPACITY: usize = 10_000;
/// Bytes (of JSON lines) the HTTP collector's queue holds, the batch in flight included
/// (`--decision-log-queue-bytes`).
pub const QUEUE_BYTES: usize = 64 << 20;
/// Most records in one POST.
pub const BATCH_MAX: usize = 500;
/// How long a batch waits to fill before it is sent.
pub const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Time limit on connecting to the collector and on its answer.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// Where `--decision-log SPEC` sends records. `stdout_free`: stdout does not carry the
/// protocol (`-` is refused otherwise).
pub fn open(spec: &str, stdout_free: bool, bounds: Bounds) -> Result<Arc<dyn DecisionLog>, String> {
    if spec == "-" {
        if !stdout_free {
            return Err(
                "--decision-log -: stdout carries the JSON-RPC protocol on the stdio \
                 transport; write the log to a file or an http:// collector, or serve with \
                 --listen"
                    .into(),
            );
        }
        return Ok(Arc::new(Stdout));
    }
    if spec.starts_with("https://") {
        return Err(format!(
            "--decision-log {spec}: https collectors are not supported (this build has no TLS \
             client); send to a local collector or forwarder over http:// on loopback"
        ));
    }
    if let Some(rest) = spec.strip_prefix("http://") {
        return Ok(Arc::new(Http::start(spec, rest, bounds)?));
    }
    let path = std::path::Path::new(spec);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("--decision-log {}: {e}", path.display()))?;
    Ok(Arc::new(FileSink {
        file: Mutex::new(file),
        name: spec.to_string(),
        failures: AtomicU64::new(0),
    }))
}

fn line(record: &Value) -> Vec<u8> {
    let mut b = record.to_string().into_bytes();
    b.push(b'\n');
    b
}

/// Appends each record as one line, in one write.
struct FileSink {
    file: Mutex<File>,
    name: String,
    failures: AtomicU64,
}

impl DecisionLog for FileSink {
    fn record(&self, record: &Value) {
        let bytes = line(record);
        let r = self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(&bytes);
        if let Err(e) = r {
            let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
            // The first failure and then every thousandth: a full disk must not flood stderr.
            if n == 1 || n.is_multiple_of(1000) {
                eprintln!(
                    "warden: decision log {}: {e} ({n} record(s) lost so far)",
                    self.name
                );
            }
        }
    }

    fn metrics(&self) -> Vec<(&'static str, u64)> {
        vec![("write_failed_total", self.failures.load(Ordering::Relaxed))]
    }
}

/// One line per record on stdout.
struct Stdout;

impl DecisionLog for Stdout {
    fn record(&self, record: &Value) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(&line(record));
        let _ = out.flush();
    }
}

/// Batched POSTs of JSON lines from a background thread, out of a queue bounded in records
/// and bytes ([`queue`]: drop oldest when full).
struct Http {
    queue: Arc<Queue>,
    name: String,
    /// When a drop was last reported (milliseconds since `started`; `u64::MAX`: never), and
    /// the drops counted then.
    warned_ms: AtomicU64,
    reported: AtomicU64,
    started: Instant,
}

/// Where an `http://` collector is.
#[derive(Debug, Clone)]
struct Target {
    host: String,
    authority: String,
    path: String,
}

fn parse_target(rest: &str) -> Result<Target, String> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err("expected http://HOST:PORT/PATH".into());
    }
    let host = if authority.starts_with('[') || authority.rsplit_once(':').is_some() {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok(Target {
        host,
        authority: authority.to_string(),
        path: path.to_string(),
    })
}

impl Http {
    fn start(spec: &str, rest: &str, bounds: Bounds) -> Result<Http, String> {
        let target = parse_target(rest).map_err(|e| format!("--decision-log {spec}: {e}"))?;
        let queue = Arc::new(Queue::new(bounds));
        let q = queue.clone();
        std::thread::Builder::new()
            .name("warden-decision-log".into())
            .spawn(move || ship(&q, &target))
            .map_err(|e| format!("--decision-log {spec}: {e}"))?;
        Ok(Http {
            queue,
            name: spec.to_string(),
            warned_ms: AtomicU64::new(u64::MAX),
            reported: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// A warning line on stderr for records given up: the first at once, then at most one
    /// every [`WARN_EVERY`].
    fn warn_dropped(&self, why: &str) {
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.warned_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64;
        if !due
            || self
                .warned_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let c = &self.queue.counters;
        self.reported.store(c.dropped(), Ordering::Relaxed);
        let b = self.queue.bounds();
        eprintln!(
            "warden: decision log {}: {why}; {} record(s) dropped so far ({} oldest from the \
             full queue of {} records / {} bytes, {} too large, {} in failed POSTs)",
            self.name,
            c.dropped(),
            c.dropped_full.load(Ordering::Relaxed),
            b.records,
            b.bytes,
            c.dropped_too_large.load(Ordering::Relaxed),
            c.dropped_failed.load(Ordering::Relaxed),
        );
    }
}

/// The most often a warning about dropped records is written.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

impl DecisionLog for Http {
    fn record(&self, record: &Value) {
        let why = match self.queue.push(line(record)) {
            Pushed::Queued => "POSTs to the collector failed",
            Pushed::Evicted(_) => "the queue is full: the oldest records were dropped",
            Pushed::TooLarge => "a record larger than a batch was dropped",
        };
        if self.queue.counters.dropped() > self.reported.load(Ordering::Relaxed) {
            self.warn_dropped(why);
        }
    }

    fn flush(&self, limit: Duration) {
        let unsent = self.queue.drain(Instant::now() + limit);
        let c = &self.queue.counters;
        let dropped = c.dropped();
        if unsent > 0 || dropped > 0 {
            eprintln!(
                "warden: decision log {}: stopping with {unsent} record(s) unsent (not taken \
                 by the collector within {} ms); {dropped} dropped while running; {} sent",
                self.name,
                limit.as_millis(),
                c.sent.load(Ordering::Relaxed),
            );
        }
    }

    fn metrics(&self) -> Vec<(&'static str, u64)> {
        let c = &self.queue.counters;
        let (records, bytes) = self.queue.held();
        let b = self.queue.bounds();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("queued_records", records as u64),
            ("queued_bytes", bytes as u64),
            ("queue_max_records", b.records as u64),
            ("queue_max_bytes", b.bytes as u64),
            ("sent_total", n(&c.sent)),
            ("dropped_queue_full_total", n(&c.dropped_full)),
            ("dropped_too_large_total", n(&c.dropped_too_large)),
            ("dropped_post_failed_total", n(&c.dropped_failed)),
            ("unsent_at_stop_total", n(&c.unsent_at_stop)),
        ]
    }
}

/// The background thread: takes a batch (at most [`BATCH_MAX`] records and a quarter of the
/// byte bound, gathered for up to [`BATCH_WAIT`]), POSTs it, and settles it as sent or lost.
fn ship(queue: &Queue, target: &Target) {
    loop {
        let Some(batch) = queue.take(BATCH_MAX, Duration::from_secs(1), BATCH_WAIT) else {
            continue;
        };
        let ok = post(target, &batch.lines).is_ok();
        queue.settle(batch, ok);
    }
}

/// One POST of `lines` (JSON lines, written one by one: no copy of the batch); `Err` unless
/// the collector answers 2xx.
fn post(t: &Target, lines: &[Vec<u8>]) -> Result<(), String> {
    let len: usize = lines.iter().map(Vec::len).sum();
    let addr = t
        .host
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", t.host))?
        .next()
        .ok_or_else(|| format!("{}: no address", t.host))?;
    let mut s = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(HTTP_TIMEOUT)).ok();
    s.set_write_timeout(Some(HTTP_TIMEOUT)).ok();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-ndjson\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: warden\r\n\r\n",
        t.path, t.authority, len
    );
    s.write_all(head.as_bytes())
        .and_then(|()| lines.iter().try_for_each(|l| s.write_all(l)))
        .map_err(|e| e.to_string())?;
    let mut r = io::BufReader::new(s.take(64 * 1024));
    let mut status = String::new();
    r.read_line(&mut status).map_err(|e| e.to_string())?;
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(format!("the collector answered {:?}", status.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_with_a_default_port_and_path() {
        let t = parse_target("127.0.0.1:9000/logs").unwrap();
        assert_eq!(
            (t.host.as_str(), t.path.as_str()),
            ("127.0.0.1:9000", "/logs")
        );
        let t = parse_target("localhost").unwrap();
        assert_eq!((t.host.as_str(), t.path.as_str()), ("localhost:80", "/"));
        assert!(parse_target("user@host/x").is_err());
    }

    #[test]
    fn stdout_is_refused_when_it_carries_the_protocol() {
        let e = open("-", false, Bounds::default()).err().unwrap();
        assert!(e.contains("stdio"), "{e}");
        let e = open("https://example.com/x", true, Bounds::default())
            .err()
            .unwrap();
        assert!(e.contains("not supported"), "{e}");
    }
}
