//! What a Guardian has decided, counted for an operator: decisions by kind and by rule, JSON-RPC
//! errors, the time each decision took (a histogram), the policy reloads, and the journal's
//! side of each step: how many decided steps wait for their records to be durable now, and
//! how long each waited (a histogram, from the hand-over to the journal's settling of the
//! step's `Durable`, group commit and fsync included). Counted with
//! atomics on the request path (one mutex, for the rule counts, taken only for a decision that
//! names rules); read as a [`Snapshot`], which a server renders (`warden serve`'s `/metrics`,
//! docs/serve.md). Knows nothing of transports or of the text format.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::acs::envelope::{Decision, Outcome, Response};

/// The decision kinds, in the order [`Snapshot::decisions`] lists them.
pub const KINDS: [&str; 5] = ["allow", "deny", "ask", "defer", "modify"];

/// The upper bounds of the decision-time histogram's buckets, in microseconds (a last bucket
/// holds the rest).
pub const LATENCY_BOUNDS_US: [u64; 10] = [10, 25, 50, 100, 250, 500, 1_000, 5_000, 25_000, 100_000];

/// The upper bounds of the journal-commit histogram's buckets, in microseconds (a last bucket
/// holds the rest): an fsync takes from tens of microseconds to tens of milliseconds.
pub const COMMIT_BOUNDS_US: [u64; 11] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000,
];

/// The counters.
#[derive(Debug, Default)]
pub struct Stats {
    decisions: [AtomicU64; 5],
    errors: AtomicU64,
    by_rule: Mutex<HashMap<String, u64>>,
    buckets: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    latency_sum_us: AtomicU64,
    reloads: AtomicU64,
    journal_pending: AtomicU64,
    commit_buckets: [AtomicU64; COMMIT_BOUNDS_US.len() + 1],
    commit_sum_us: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Decisions answered, by kind (in [`KINDS`] order).
    pub decisions: [u64; 5],
    /// Requests answered with a JSON-RPC error (refused before a decision, or failed).
    pub errors: u64,
    /// Decisions each rule took part in (`policy_references[].rule_id`), sorted by rule.
    pub by_rule: Vec<(String, u64)>,
    /// Decision times: the count in each bucket of [`LATENCY_BOUNDS_US`] (not cumulative),
    /// the last one past the largest bound.
    pub latency_buckets: Vec<u64>,
    /// The sum of all decision times, in microseconds.
    pub latency_sum_us: u64,
    /// Policy reloads since the Guardian was built.
    pub reloads: u64,
    /// Decided steps whose journal records are not durable yet (their answers wait).
    pub journal_pending: u64,
    /// How long each step's records took to become durable (or to fail): the count in each
    /// bucket of [`COMMIT_BOUNDS_US`] (not cumulative), the last one past the largest bound.
    pub commit_buckets: Vec<u64>,
    /// The sum of those times, in microseconds.
    pub commit_sum_us: u64,
}

/// The bucket of `bounds` (a last one past the largest) that `us` falls in.
fn bucket(bounds: &[u64], us: u64) -> usize {
    bounds.iter().position(|b| us <= *b).unwrap_or(bounds.len())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Stats {
    /// Counts one answer and the time its decision took (the journal's wait excluded).
    pub fn record(&self, response: &Response, took: Duration) {
        let us = micros(took);
        self.buckets[bucket(&LATENCY_BOUNDS_US, us)].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
        let result = match &response.outcome {
            Outcome::Result(r) => r,
            Outcome::Error(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let i = match result.decision {
            Decision::Allow => 0,
            Decision::Deny => 1,
            Decision::Ask => 2,
            Decision::Defer => 3,
            Decision::Modify => 4,
        };
        self.decisions[i].fetch_add(1, Ordering::Relaxed);
        let rules = result
            .policy_references
            .iter()
            .filter_map(|r| r.rule_id.as_deref());
        let mut rules = rules.peekable();
        if rules.peek().is_some() {
            let mut by_rule = self.by_rule.lock().unwrap_or_else(|e| e.into_inner());
            for rule in rules {
                *by_rule.entry(rule.to_string()).or_default() += 1;
            }
        }
    }

    /// Counts a policy reload.
    pub fn reloaded(&self) {
        self.reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a step's records handed to the journal: one more waiting.
    pub fn journal_submitted(&self) {
        self.journal_pending.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a step's records settled by the journal (durable, or failed) `took` after they
    /// were handed over: one fewer waiting.
    pub fn journal_settled(&self, took: Duration) {
        let us = micros(took);
        self.commit_buckets[bucket(&COMMIT_BOUNDS_US, us)].fetch_add(1, Ordering::Relaxed);
        self.commit_sum_us.fetch_add(us, Ordering::Relaxed);
        // Never below zero, even for a settle counted without its submit.
        let _ = self
            .journal_pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            });
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut by_rule: Vec<(String, u64)> = self
            .by_rule
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        by_rule.sort();
        Snapshot {
            decisions: std::array::from_fn(|i| load(&self.decisions[i])),
            errors: load(&self.errors),
            by_rule,
            latency_buckets: self.buckets.iter().map(load).collect(),
            latency_sum_us: load(&self.latency_sum_us),
            reloads: load(&self.reloads),
            journal_pending: load(&self.journal_pending),
            commit_buckets: self.commit_buckets.iter().map(load).collect(),
            commit_sum_us: load(&self.commit_sum_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acs::envelope::{AcsResult, Id, PolicyReference, RpcError};

    #[test]
    fn answers_are_counted_by_kind_rule_and_time() {
        let stats = Stats::default();
        let mut denied = AcsResult::deny("r1", "no");
        denied.policy_references.push(PolicyReference {
            rule_id: Some("p.r".into()),
            ..Default::default()
        });
        stats.record(
            &Response::result(Id::Null, denied),
            Duration::from_micros(30),
        );
        stats.record(
            &Response::result(Id::Null, AcsResult::allow("r2")),
            Duration::from_micros(5),
        );
        stats.record(
            &Response::error(Id::Null, RpcError::internal("x")),
            Duration::from_secs(1),
        );
        stats.reloaded();
        let s = stats.snapshot();
        assert_eq!(s.decisions, [1, 1, 0, 0, 0]);
        assert_eq!(s.errors, 1);
        assert_eq!(s.by_rule, vec![("p.r".to_string(), 1)]);
        assert_eq!(s.latency_buckets.iter().sum::<u64>(), 3);
        assert_eq!(s.latency_buckets[0], 1, "5 µs");
        assert_eq!(s.latency_buckets[2], 1, "30 µs");
        assert_eq!(s.latency_buckets[LATENCY_BOUNDS_US.len()], 1, "1 s");
        assert_eq!(s.latency_sum_us, 1_000_035);
        assert_eq!(s.reloads, 1);
        assert_eq!(s.journal_pending, 0);
        assert_eq!(s.commit_buckets.iter().sum::<u64>(), 0);
    }

    #[test]
    fn journal_waits_are_counted_while_pending_and_timed_when_settled() {
        let stats = Stats::default();
        stats.journal_submitted();
        stats.journal_submitted();
        assert_eq!(stats.snapshot().journal_pending, 2);
        stats.journal_settled(Duration::from_micros(700));
        let s = stats.snapshot();
        assert_eq!(s.journal_pending, 1);
        assert_eq!(s.commit_buckets[4], 1, "700 µs is under 1 ms");
        assert_eq!(s.commit_sum_us, 700);
        stats.journal_settled(Duration::from_secs(3));
        stats.journal_settled(Duration::ZERO);
        let s = stats.snapshot();
        assert_eq!(s.journal_pending, 0, "never below zero");
        assert_eq!(s.commit_buckets[COMMIT_BOUNDS_US.len()], 1, "3 s");
        assert_eq!(s.commit_buckets[0], 1);
        assert_eq!(s.commit_buckets.iter().sum::<u64>(), 3);
    }
}
