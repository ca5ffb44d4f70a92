//! Warden against its peers, in one run: one toolCallRequest decision (the generator's probe, a
//! `send_email` in a fresh turn) after H events of history, for the one-rule taint-window policy
//! and the 20-rule policy. Every system must reach the same decision (deny), asserted before it
//! is timed. `scripts/bench-peers.sh` runs this and writes benches/RESULTS.md.
//!
//! - `warden`: `decide_event` on the incrementally maintained session state.
//! - `hand_check`: the bare hand-written check (last untrusted turn, match on the tool name).
//! - `hand_decide`: the hand-written host doing Warden's job for this policy (warden_peers docs).
//! - `regorus_history`: the policy in Rego over the history array; engine prepared once,
//!   `set_input` + `eval_rule` per decision (the input document is built once per H).
//! - `regorus_summary`: the policy in Rego given the summary a host maintains; the input is
//!   built from the summary per decision, then `set_input` + `eval_rule`.
//! - `cedar`: the policy in Cedar; per decision the context is built from the summary, then
//!   `Request::new` + `is_authorized`.
//! - `handle`: `Guardian::handle`, envelope bytes in and response bytes out; `handle_audit` the
//!   same with the Guardian keeping the audit chain (`request_hash` of the params and the
//!   chained `entry_hash` of each step, as `warden serve` does).

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::Value;
use warden::acs::fields;
use warden::guardian::{Guardian, Options, Policy, Protocol};
use warden::state::{Event, SessionState};
use warden_peers::{history, rego_history_input, turn_of, HandCheck, HostSession, HS};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn warden_policy(name: &str) -> Policy {
    Policy::load(format!("{ROOT}/benches/policies/{name}.ward")).unwrap_or_else(|d| panic!("{d}"))
}

fn peer_policy(name: &str) -> String {
    std::fs::read_to_string(format!("{}/policies/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn parts(v: &Value) -> (&str, &str, &Value, &Value) {
    let p = &v["params"];
    (
        v["method"].as_str().unwrap(),
        p["request_id"].as_str().unwrap(),
        &p["payload"],
        &p["metadata"],
    )
}

fn warden_state(policy: &Policy, events: &[Value]) -> SessionState {
    let program = policy.program();
    let mut state = SessionState::new(program);
    for v in events {
        let (method, rid, payload, metadata) = parts(v);
        let hook = fields::hook(method).unwrap();
        let ev = Event {
            method: hook.method,
            request_id: rid,
            payload,
            metadata,
            time_ms: None,
            extra_labels: 0,
            wrapped_method: None,
        };
        policy.decide_event(&mut state, hook, &ev, false).unwrap();
    }
    state
}

fn bench_warden(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    policy: &Policy,
    state: &mut SessionState,
    probe: &Value,
    h: u64,
) {
    let (method, rid, payload, metadata) = parts(probe);
    let hook = fields::hook(method).unwrap();
    let program = policy.clone();
    let ev = Event {
        method: hook.method,
        request_id: rid,
        payload,
        metadata,
        time_ms: None,
        extra_labels: 0,
        wrapped_method: None,
    };
    let d = program.decide_event(state, hook, &ev, false).unwrap();
    assert_eq!(
        format!("{:?}", d.kind),
        "Deny",
        "warden must deny the probe"
    );
    c.bench_with_input(BenchmarkId::new("warden", h), &h, |b, _| {
        b.iter(|| {
            let d = program
                .decide_event(black_box(&mut *state), hook, &ev, false)
                .unwrap();
            black_box(d.kind)
        })
    });
}

fn rego_engine(file: &str) -> regorus::Engine {
    let mut e = regorus::Engine::new();
    e.add_policy(file.to_string(), peer_policy(file)).unwrap();
    e
}

fn rego_decide(e: &mut regorus::Engine, input: regorus::Value) -> regorus::Value {
    e.set_input(input);
    e.eval_rule("data.bench.decision".to_string()).unwrap()
}

fn bench_rego(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    file: &str,
    h: u64,
    input: impl Fn() -> regorus::Value,
) {
    let mut e = rego_engine(file);
    let got = rego_decide(&mut e, input());
    assert_eq!(
        got,
        regorus::Value::from("deny"),
        "{name} must deny the probe at H={h}"
    );
    g.bench_with_input(BenchmarkId::new(name, h), &h, |b, _| {
        b.iter(|| black_box(rego_decide(&mut e, black_box(input()))))
    });
}

struct Cedar {
    policies: cedar_policy::PolicySet,
    entities: cedar_policy::Entities,
    authorizer: cedar_policy::Authorizer,
    principal: cedar_policy::EntityUid,
    action: cedar_policy::EntityUid,
    resource: cedar_policy::EntityUid,
}

impl Cedar {
    fn new(file: &str) -> Cedar {
        Cedar {
            policies: cedar_policy::PolicySet::from_str(&peer_policy(file)).unwrap(),
            entities: cedar_policy::Entities::empty(),
            authorizer: cedar_policy::Authorizer::new(),
            principal: cedar_policy::EntityUid::from_str(r#"Agent::"bench""#).unwrap(),
            action: cedar_policy::EntityUid::from_str(r#"Action::"call""#).unwrap(),
            resource: cedar_policy::EntityUid::from_str(r#"Tool::"send_email""#).unwrap(),
        }
    }

    fn decide(&self, context: cedar_policy::Context) -> cedar_policy::Decision {
        let req = cedar_policy::Request::new(
            self.principal.clone(),
            self.action.clone(),
            self.resource.clone(),
            context,
            None,
        )
        .unwrap();
        self.authorizer
            .is_authorized(&req, &self.policies, &self.entities)
            .decision()
    }
}

fn bench_cedar(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    file: &str,
    h: u64,
    context: impl Fn() -> cedar_policy::Context,
) {
    let cedar = Cedar::new(file);
    assert_eq!(
        cedar.decide(context()),
        cedar_policy::Decision::Deny,
        "cedar must deny at H={h}"
    );
    g.bench_with_input(BenchmarkId::new("cedar", h), &h, |b, _| {
        b.iter(|| black_box(cedar.decide(black_box(context()))))
    });
}

fn host_after(events: &[Value]) -> HostSession {
    let mut host = HostSession::default();
    for v in events {
        host.observe(v);
    }
    host
}

/// The history lengths: `HS` and 1M; `PEERS_MAX_H` caps them (for a quick try).
fn hs() -> Vec<u64> {
    let max = std::env::var("PEERS_MAX_H")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    HS.iter()
        .copied()
        .chain([1_000_000])
        .filter(|&h| h <= max)
        .collect()
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .without_plots()
}

fn taint_window(c: &mut Criterion) {
    let policy = warden_policy("taint_window");
    let mut g = c.benchmark_group("taint_window");
    for h in hs() {
        let events = history::history(h, history::Taint::Recent);
        let probe = history::probe(h);
        let (method, _, payload, metadata) = parts(&probe);

        let mut state = warden_state(&policy, &events);
        bench_warden(&mut g, &policy, &mut state, &probe, h);
        drop(state);

        let mut host = host_after(&events);
        let check = HandCheck {
            last_untrusted_turn: host.last_seen[0],
        };
        let (tool, turn) = (payload["tool"]["name"].as_str().unwrap(), turn_of(&probe));
        // The host's turn count starts at 1 with the first turn id, as the generator's does.
        assert_eq!(host.turn + 2, turn);
        assert!(check.deny(tool, turn));
        g.bench_with_input(BenchmarkId::new("hand_check", h), &h, |b, _| {
            b.iter(|| black_box(black_box(&check).deny(black_box(tool), black_box(turn))))
        });
        assert!(host.decide_taint_window(method, payload, metadata));
        g.bench_with_input(BenchmarkId::new("hand_decide", h), &h, |b, _| {
            b.iter(|| {
                black_box(black_box(&mut host).decide_taint_window(method, payload, metadata))
            })
        });

        let summary = host.summary(payload, metadata);
        bench_rego(
            &mut g,
            "regorus_summary",
            "taint_window_summary.rego",
            h,
            || summary.to_rego_taint(),
        );
        bench_cedar(&mut g, "taint_window.cedar", h, || summary.to_cedar_taint());
        if h <= 10_000 {
            let input = regorus::Value::from(rego_history_input(&events, &probe));
            bench_rego(&mut g, "regorus_history", "taint_window.rego", h, || {
                input.clone()
            });
        }
    }
    g.finish();
}

fn twenty_rules(c: &mut Criterion) {
    let policy = warden_policy("twenty_rules");
    let mut g = c.benchmark_group("twenty_rules");
    for h in hs() {
        let events = history::history(h, history::Taint::Recent);
        let probe = history::probe(h);
        let (_, _, payload, metadata) = parts(&probe);

        let mut state = warden_state(&policy, &events);
        bench_warden(&mut g, &policy, &mut state, &probe, h);
        drop(state);

        let host = host_after(&events);
        let summary = host.summary(payload, metadata);
        bench_rego(
            &mut g,
            "regorus_summary",
            "twenty_rules_summary.rego",
            h,
            || summary.to_rego(),
        );
        bench_cedar(&mut g, "twenty_rules.cedar", h, || summary.to_cedar());
        if h <= 10_000 {
            let input = regorus::Value::from(rego_history_input(&events, &probe));
            bench_rego(&mut g, "regorus_history", "twenty_rules.rego", h, || {
                input.clone()
            });
        }
    }
    g.finish();
}

fn handle(c: &mut Criterion) {
    let mut g = c.benchmark_group("handle");
    for h in hs().into_iter().filter(|&h| h == 10 || h == 1_000_000) {
        let guardian = Guardian::new(warden_policy("taint_window"));
        for v in history::history(h, history::Taint::Recent) {
            guardian.handle(&serde_json::to_vec(&v).unwrap());
        }
        let probe = serde_json::to_vec(&history::probe(h)).unwrap();
        let out: Value = serde_json::from_slice(&guardian.handle(&probe)).unwrap();
        assert_eq!(out["result"]["decision"], "deny");
        g.bench_with_input(BenchmarkId::new("handle", h), &h, |b, _| {
            b.iter(|| black_box(guardian.handle(black_box(&probe))))
        });
        // The same with the audit chain, kept by the Guardian itself as `warden serve` keeps
        // it: each decided step's params hashed (JCS + SHA-256) into a chained entry.
        let audited = Guardian::with_options(
            warden_policy("taint_window"),
            Options {
                protocol: Protocol {
                    audit: true,
                    ..Protocol::default()
                },
                ..Options::default()
            },
        );
        for v in history::history(h, history::Taint::Recent) {
            audited.handle(&serde_json::to_vec(&v).unwrap());
        }
        let out: Value = serde_json::from_slice(&audited.handle(&probe)).unwrap();
        assert_eq!(out["result"]["decision"], "deny");
        assert!(out["result"]["chain_hash"].is_string(), "{out}");
        g.bench_with_input(BenchmarkId::new("handle_audit", h), &h, |b, _| {
            b.iter(|| black_box(audited.handle(black_box(&probe))))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = taint_window, twenty_rules, handle
}
criterion_main!(benches);
