//! History slot counters. A counter keeps a small ring of buckets (one per turn, or per
//! sixteenth of a time window), so adding is O(1) and reading is O(window), never O(history).

use std::sync::Arc;

use crate::compile::WindowSpec;

/// Buckets a time window is cut into (its resolution is the window / 16).
pub const TIME_BUCKETS: u64 = 16;

/// One counter: a total, or a ring of `(bucket id, count)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counter {
    total: u64,
    ring: Arc<Vec<(u64, u64)>>,
}

fn layout(window: WindowSpec, now: u64) -> Option<(u64, usize)> {
    match window {
        WindowSpec::Session => None,
        WindowSpec::ThisTurn => Some((now, 1)),
        WindowSpec::LastTurns(n) => Some((now, n.max(1) as usize)),
        WindowSpec::LastMillis(ms) => {
            let width = (ms / TIME_BUCKETS).max(1);
            Some((now / width, TIME_BUCKETS as usize))
        }
    }
}

impl Counter {
    pub fn add(&mut self, now: u64, window: WindowSpec) {
        self.total += 1;
        let Some((id, len)) = layout(window, now) else {
            return;
        };
        let ring = Arc::make_mut(&mut self.ring);
        if ring.len() < len {
            ring.resize(len, (u64::MAX, 0));
        }
        let slot = &mut ring[(id % len as u64) as usize];
        if slot.0 != id {
            *slot = (id, 0);
        }
        slot.1 += 1;
    }

    pub fn count(&self, now: u64, window: WindowSpec) -> u64 {
        let Some((id, len)) = layout(window, now) else {
            return self.total;
        };
        let oldest = id.saturating_sub(len as u64 - 1);
        self.ring
            .iter()
            .filter(|(b, _)| *b != u64::MAX && *b >= oldest && *b <= id)
            .map(|(_, c)| c)
            .sum()
    }
}

/// A slot: one counter, or one per key.
#[derive(Debug, Clone, Default)]
pub struct Slot {
    plain: Counter,
    keyed: imbl::HashMap<Arc<str>, Counter>,
}

impl Slot {
    /// Number of distinct keys counted.
    pub fn key_count(&self) -> usize {
        self.keyed.len()
    }

    pub fn add(&mut self, key: Option<&str>, now: u64, window: WindowSpec) {
        match key {
            None => self.plain.add(now, window),
            Some(k) => self.keyed.entry(Arc::from(k)).or_default().add(now, window),
        }
    }

    pub fn count(&self, key: Option<&str>, now: u64, window: WindowSpec) -> u64 {
        match key {
            None => self.plain.count(now, window),
            Some(k) => self.keyed.get(k).map_or(0, |c| c.count(now, window)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_windows_slide() {
        let mut c = Counter::default();
        let w = WindowSpec::LastTurns(3);
        c.add(1, w);
        c.add(2, w);
        c.add(2, w);
        assert_eq!(c.count(2, w), 3);
        assert_eq!(c.count(3, w), 3);
        assert_eq!(c.count(4, w), 2);
        assert_eq!(c.count(5, w), 0);
        c.add(5, w);
        assert_eq!(c.count(5, w), 1);
    }

    #[test]
    fn this_turn_resets() {
        let mut c = Counter::default();
        c.add(1, WindowSpec::ThisTurn);
        assert_eq!(c.count(1, WindowSpec::ThisTurn), 1);
        assert_eq!(c.count(2, WindowSpec::ThisTurn), 0);
        assert_eq!(c.count(9, WindowSpec::Session), 1);
    }
}
