//! One decision after H events of history. `decide`: the evaluator on a session state (state
//! clone, provenance update, rules, combination, history commit). `handle`: envelope bytes in,
//! response bytes out through `Guardian::handle` (strict JSON decode and encode included).
//!
//! Results and the machine they ran on: benches/RESULTS.md.

#[path = "support/history.rs"]
mod history;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use warden::acs::fields;
use warden::guardian::{decide_event, Guardian, Policy};
use warden::state::{Event, SessionState};

fn policy() -> Policy {
    Policy::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/policies/taint_window.ward"
    ))
    .unwrap_or_else(|d| panic!("{d}"))
}

/// One envelope, taken apart as `decide_event` wants it.
struct Step {
    hook: &'static fields::HookSpec,
    request_id: String,
    payload: serde_json::Value,
    metadata: serde_json::Value,
}

impl Step {
    fn new(v: &serde_json::Value) -> Step {
        let p = &v["params"];
        Step {
            hook: fields::hook(v["method"].as_str().unwrap()).unwrap(),
            request_id: p["request_id"].as_str().unwrap().to_string(),
            payload: p["payload"].clone(),
            metadata: p["metadata"].clone(),
        }
    }

    fn event(&self) -> Event<'_> {
        Event {
            method: self.hook.method,
            request_id: &self.request_id,
            payload: &self.payload,
            metadata: &self.metadata,
            time_ms: None,
            extra_labels: 0,
        }
    }
}

/// The session state after feeding `events` through the evaluator.
fn state_after(policy: &Policy, events: &[serde_json::Value]) -> SessionState {
    let program = policy.program();
    let mut state = SessionState::new(program);
    for v in events {
        let step = Step::new(v);
        decide_event(program, step.hook, &mut state, &step.event(), false).unwrap();
    }
    state
}

fn decide(c: &mut Criterion) {
    let policy = policy();
    let mut group = c.benchmark_group("decide");
    for &h in &[10u64, 1_000, 100_000, 1_000_000] {
        for taint in [history::Taint::Recent, history::Taint::Early] {
            let mut state = state_after(&policy, &history::history(h, taint));
            let probe = history::probe(h);
            let step = Step::new(&probe);
            let program = policy.program().clone();
            let id = format!("{taint:?}/{h}");
            group.bench_with_input(BenchmarkId::from_parameter(id), &h, |b, _| {
                b.iter(|| {
                    let ev = step.event();
                    let d = decide_event(&program, step.hook, black_box(&mut state), &ev, false)
                        .unwrap();
                    black_box(d.kind)
                })
            });
        }
    }
    group.finish();
}

fn handle(c: &mut Criterion) {
    let mut group = c.benchmark_group("handle");
    for &h in &[10u64, 100_000] {
        let guardian = Guardian::new(policy());
        for v in history::history(h, history::Taint::Recent) {
            guardian.handle(&serde_json::to_vec(&v).unwrap());
        }
        let probe = serde_json::to_vec(&history::probe(h)).unwrap();
        group.bench_with_input(BenchmarkId::from_parameter(h), &h, |b, _| {
            b.iter(|| black_box(guardian.handle(black_box(&probe))))
        });
    }
    group.finish();
}

/// The cost of a Rego value per decision: a native constant, a Rego constant folded at load,
/// and a Rego rule called at run time, side by side.
fn rego(c: &mut Criterion) {
    let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/policies"));
    let policies = [
        (
            "native_constant",
            "let allowed = {\"read_file\", \"search\", \"send_email\", \"list_files\"}\nrule r on toolCallRequest when tool.name in allowed => deny \"r\"\ndefault allow\n",
        ),
        (
            "folded_rego_constant",
            "use rego \"allow.rego\" as org\nrule r on toolCallRequest when tool.name in org.allowed => deny \"r\"\ndefault allow\n",
        ),
        (
            "runtime_rego_rule",
            "use rego \"allow_input.rego\" as org\nrule r on toolCallRequest when org.allowed_tool => deny \"r\"\ndefault allow\n",
        ),
    ];
    let mut group = c.benchmark_group("rego");
    for (name, text) in policies {
        let policy = Policy::from_source_in("bench.ward", text, dir.clone())
            .unwrap_or_else(|d| panic!("{d}"));
        let program = policy.program().clone();
        let mut state = SessionState::new(&program);
        let probe = history::probe(10);
        let step = Step::new(&probe);
        group.bench_function(name, |b| {
            b.iter(|| {
                let ev = step.event();
                let d =
                    decide_event(&program, step.hook, black_box(&mut state), &ev, false).unwrap();
                black_box(d.kind)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decide, handle, rego);
criterion_main!(benches);
