//! Parse + check + compile of a generated 1 000-rule policy (target: < 100 ms). The rules mix
//! the kinds of benches/policies/twenty_rules.ward: taint windows, argument provenance,
//! per-turn rate limits, Intent checks and tool classes, each about a different tool.
//!
//! Results: benches/RESULTS.md (`scripts/bench-peers.sh` runs this too).

use std::fmt::Write;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use warden::guardian::Policy;

/// A policy of `n` rules.
fn policy_source(n: usize) -> String {
    let mut s = String::from(
        "package bench.generated\n\nuse std.taint\n\nlabel web when origin in {retrieved, external}\n\n",
    );
    for i in 0..n {
        let tool = format!("tool_{i}");
        let when = match i % 5 {
            0 => format!(
                "tool.name == \"{tool}\" and turns_since(untrusted) <= {}",
                i % 7 + 1
            ),
            1 => format!("tool.name == \"{tool}\" and derived_from(args.target, tool_output)"),
            2 => format!(
                "tool.name == \"{tool}\" and count(toolCallRequest when tool.name == \"{tool}\", this turn) >= {}",
                i % 4 + 1
            ),
            3 => format!("tool.name == \"{tool}\" and intent.declared and not intent.permits(tool)"),
            _ => format!(
                "tool.name in {{\"{tool}\", \"{tool}_b\"}} and any a in args: a has web"
            ),
        };
        writeln!(
            s,
            "rule r{i} on toolCallRequest\n  when {when}\n  => deny \"gen.r{i}\": \"generated rule {i}\"\n"
        )
        .unwrap();
    }
    s.push_str("default allow\n");
    s
}

fn compile(c: &mut Criterion) {
    let src = policy_source(1_000);
    let policy = Policy::from_source("generated.ward", &src).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(policy.program().rules.len(), 1_000);
    let mut g = c.benchmark_group("compile");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("rules_1000", |b| {
        b.iter(|| Policy::from_source("generated.ward", black_box(&src)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, compile);
criterion_main!(benches);
