//! The Guardian's counters in Prometheus's text format (version 0.0.4), as `warden serve`
//! answers `GET /metrics` on its listener and on the operator endpoint (docs/serve.md,
//! "Health, readiness and metrics"). Reads [`Guardian::stats`] and the Guardian's gauges;
//! renders only.

use std::fmt::Write as _;

use crate::guardian::stats::{COMMIT_BOUNDS_US, KINDS, LATENCY_BOUNDS_US};
use crate::guardian::Guardian;

/// Every metric, one `# HELP` and `# TYPE` line before each family.
pub fn render(g: &Guardian) -> String {
    let s = g.stats();
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    family(
        &mut out,
        "warden_decisions_total",
        "counter",
        "Decisions answered, by kind.",
    );
    for (kind, n) in KINDS.iter().zip(s.decisions) {
        let _ = writeln!(out, "warden_decisions_total{{decision=\"{kind}\"}} {n}");
    }
    family(
        &mut out,
        "warden_errors_total",
        "counter",
        "Requests answered with a JSON-RPC error instead of a decision.",
    );
    let _ = writeln!(out, "warden_errors_total {}", s.errors);
    family(
        &mut out,
        "warden_rule_decisions_total",
        "counter",
        "Decisions each rule took part in (its policy reference).",
    );
    for (rule, n) in &s.by_rule {
        let _ = writeln!(
            out,
            "warden_rule_decisions_total{{rule=\"{}\"}} {n}",
            label(rule)
        );
    }
    family(
        &mut out,
        "warden_decision_seconds",
        "histogram",
        "Time to decide a request, the journal's wait excluded.",
    );
    histogram(
        &mut out,
        "warden_decision_seconds",
        &LATENCY_BOUNDS_US,
        &s.latency_buckets,
        s.latency_sum_us,
    );
    family(
        &mut out,
        "warden_journal_commit_seconds",
        "histogram",
        "Time from a decided step's records being handed to the journal to their being durable (or failing).",
    );
    histogram(
        &mut out,
        "warden_journal_commit_seconds",
        &COMMIT_BOUNDS_US,
        &s.commit_buckets,
        s.commit_sum_us,
    );
    let (bare, dropped) = g.hello_counts();
    let gauges = [
        (
            "warden_sessions",
            "gauge",
            "Sessions held in memory.",
            g.session_count() as u64,
        ),
        (
            "warden_hello_sessions",
            "gauge",
            "Sessions that have only said hello.",
            bare as u64,
        ),
        (
            "warden_hello_sessions_dropped_total",
            "counter",
            "Hello-only sessions dropped for newer hellos.",
            dropped as u64,
        ),
        (
            "warden_journal_pending",
            "gauge",
            "Decided steps waiting for their journal records to be durable (their answers wait too).",
            s.journal_pending,
        ),
        (
            "warden_policy_reloads_total",
            "counter",
            "Policy reloads.",
            s.reloads,
        ),
        (
            "warden_journal_failed",
            "gauge",
            "1 once the journal has failed (every request is then refused).",
            u64::from(g.has_failed()),
        ),
    ];
    for (name, kind, help, v) in gauges {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    family(
        &mut out,
        "warden_policy_info",
        "gauge",
        "The policy in force, by digest.",
    );
    let _ = writeln!(
        out,
        "warden_policy_info{{digest=\"{}\"}} 1",
        label(&g.policy_digest())
    );
    for (name, v) in g.decision_log_metrics() {
        let kind = if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let full = format!("warden_decision_log_{name}");
        family(
            &mut out,
            &full,
            kind,
            "The decision log's sink (docs/serve.md, Decision logs).",
        );
        let _ = writeln!(out, "{full} {v}");
    }
    out
}

/// A histogram's samples: the cumulative `_bucket` lines (each of `bounds`, in microseconds,
/// then `+Inf`), `_sum` and `_count`, from per-bucket counts (`buckets`, one more than
/// `bounds`) and the sum in microseconds.
fn histogram(out: &mut String, name: &str, bounds: &[u64], buckets: &[u64], sum_us: u64) {
    let mut cumulative = 0;
    for (i, n) in buckets.iter().enumerate() {
        cumulative += n;
        let le = bounds
            .get(i)
            .map_or("+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(
        out,
        "{name}_sum {}\n{name}_count {cumulative}",
        sum_us as f64 / 1e6
    );
}

/// A label value with `\`, `"` and line ends escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
