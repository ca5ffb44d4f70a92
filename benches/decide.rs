//! One decision after H events of history. `decide`: the evaluator on a session state (state
//! clone, provenance update, rules, combination, history commit). `handle`: envelope bytes in,
//! response bytes out through `Guardian::handle` (strict JSON decode and encode included), without
//! and with the audit chain.
//! `rego`: a Rego value per decision. `effects`: a call with a declared effect and its result,
//! after H effect keys. `inference`: the embedded default policy deciding a payment whose
//! recipient came without lineage, after H tool outputs were indexed for lineage inference.
//!
//! Results and the machine they ran on: benches/RESULTS.md.

#[path = "support/history.rs"]
mod history;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use warden::acs::{envelope, fields, ids, DecisionKind};
use warden::guardian::{Guardian, Options, Policy, Protocol};
use warden::state::{EffectStatus, Event, SessionState};

fn policy() -> Policy {
    Policy::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/policies/taint_window.ward"
    ))
    .unwrap_or_else(|d| panic!("{d}"))
}

/// One envelope, taken apart as `decide_event` wants it.
/// Checks that `step` is allowed on a copy of `state` (a benchmark of the wrong path would
/// measure nothing), then benchmarks deciding it as `id`.
fn bench_allowed(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    program: &Policy,
    state: &mut SessionState,
    step: &Step,
    why: &str,
) {
    let kind = program
        .decide_event(&mut state.clone(), step.hook, &step.event(), false)
        .unwrap()
        .kind;
    assert_eq!(kind, DecisionKind::Allow, "{why}");
    group.bench_function(id, |b| {
        b.iter(|| {
            let ev = step.event();
            let d = program
                .decide_event(black_box(&mut *state), step.hook, &ev, false)
                .unwrap();
            black_box(d.kind)
        })
    });
}

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
            wrapped_method: None,
        }
    }
}

/// The session state after feeding `events` through the evaluator.
fn state_after(policy: &Policy, events: &[serde_json::Value]) -> SessionState {
    let program = policy.program();
    let mut state = SessionState::new(program);
    for v in events {
        let step = Step::new(v);
        policy
            .decide_event(&mut state, step.hook, &step.event(), false)
            .unwrap();
    }
    state
}

/// The N of a count mode: the variable `var` as a number, if set.
fn count_from_env(var: &str) -> Option<u64> {
    std::env::var(var).ok().and_then(|v| v.parse().ok())
}

/// `WARDEN_DECIDE_COUNT=N`: decide the `decide/Recent/1000` probe N times and exit, without
/// criterion, so that `perf stat -e instructions:u` at two values of N gives the instructions
/// of one decision (the difference over the difference of N; setup cancels out).
fn decide_count_mode() {
    let Some(n) = count_from_env("WARDEN_DECIDE_COUNT") else {
        return;
    };
    let policy = policy();
    let mut state = state_after(&policy, &history::history(1_000, history::Taint::Recent));
    let step = Step::new(&history::probe(1_000));
    decide_probe_times(&policy, &mut state, &step, n);
    std::process::exit(0);
}

/// The timed part of the count mode, apart so that a profiler can collect it alone
/// (`valgrind --tool=callgrind --toggle-collect='*decide_probe_times*'`).
#[inline(never)]
fn decide_probe_times(program: &Policy, state: &mut SessionState, step: &Step, n: u64) {
    for _ in 0..n {
        let ev = step.event();
        let d = program
            .decide_event(black_box(&mut *state), step.hook, &ev, false)
            .unwrap();
        black_box(d.kind);
    }
}

/// `WARDEN_HANDLE_COUNT=N` (with `WARDEN_HANDLE_AUDIT=1` for the audit chain): handle the
/// `handle/1000` probe's envelope N times and exit, without criterion, for a profiler
/// (`--toggle-collect='*handle_probe_times*'`).
fn handle_count_mode() {
    let Some(n) = count_from_env("WARDEN_HANDLE_COUNT") else {
        return;
    };
    let audit = std::env::var_os("WARDEN_HANDLE_AUDIT").is_some();
    let guardian = handle_guardian(audit);
    for v in history::history(1_000, history::Taint::Recent) {
        guardian.handle(&serde_json::to_vec(&v).unwrap());
    }
    let probe = serde_json::to_vec(&history::probe(1_000)).unwrap();
    handle_probe_times(&guardian, &probe, n);
    std::process::exit(0);
}

#[inline(never)]
fn handle_probe_times(guardian: &Guardian, probe: &[u8], n: u64) {
    for _ in 0..n {
        black_box(guardian.handle(black_box(probe)));
    }
}

/// The Guardian of the `handle` benches: the lenient protocol of `warden replay`, with or
/// without the audit chain (which `warden serve` keeps).
fn handle_guardian(audit: bool) -> Guardian {
    Guardian::with_options(
        policy(),
        Options {
            protocol: Protocol {
                audit,
                ..Protocol::default()
            },
            ..Options::default()
        },
    )
}

fn decide(c: &mut Criterion) {
    decide_count_mode();
    handle_count_mode();
    let policy = policy();
    let mut group = c.benchmark_group("decide");
    for &h in &[10u64, 1_000, 100_000, 1_000_000] {
        for taint in [history::Taint::Recent, history::Taint::Early] {
            let mut state = state_after(&policy, &history::history(h, taint));
            let probe = history::probe(h);
            let step = Step::new(&probe);
            let program = policy.clone();
            let id = format!("{taint:?}/{h}");
            group.bench_with_input(BenchmarkId::from_parameter(id), &h, |b, _| {
                b.iter(|| {
                    let ev = step.event();
                    let d = program
                        .decide_event(black_box(&mut state), step.hook, &ev, false)
                        .unwrap();
                    black_box(d.kind)
                })
            });
        }
    }
    group.finish();
    claims(c, &policy);
}

/// The claim check: a call claiming the user wrote its address, where the user did (`said`)
/// and where the user never did (`unsaid`: the claim is read as none, on a copy of the payload,
/// and the address's sources are inferred), after H events.
fn claims(c: &mut Criterion, policy: &Policy) {
    let mut group = c.benchmark_group("claim");
    for &h in &[1_000u64, 1_000_000] {
        let mut state = state_after(policy, &history::history(h, history::Taint::Recent));
        let program = policy.clone();
        for (name, probe, unverified) in [
            ("said", history::probe(h), 0),
            ("unsaid", history::probe_unsaid(h), 1),
        ] {
            let step = Step::new(&probe);
            let d = program
                .decide_event(&mut state.clone(), step.hook, &step.event(), false)
                .unwrap();
            assert_eq!(d.unverified_claims.len(), unverified, "{name}: {d:?}");
            assert_eq!(
                d.kind,
                DecisionKind::Deny,
                "{name}: the taint window denies"
            );
            group.bench_function(BenchmarkId::new(name, h), |b| {
                b.iter(|| {
                    let ev = step.event();
                    let d = program
                        .decide_event(black_box(&mut state), step.hook, &ev, false)
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
        let guardian = handle_guardian(false);
        for v in history::history(h, history::Taint::Recent) {
            guardian.handle(&serde_json::to_vec(&v).unwrap());
        }
        let probe = serde_json::to_vec(&history::probe(h)).unwrap();
        group.bench_with_input(BenchmarkId::from_parameter(h), &h, |b, _| {
            b.iter(|| black_box(guardian.handle(black_box(&probe))))
        });
        if h == 10 {
            // Of that, the decode alone as `handle` takes it without a key or a journal (read
            // straight into the typed request, `acs::shell`), and the full decode every other
            // envelope takes (the JSON tree and the typed request, the payload moved).
            let opts = warden::acs::envelope::DecodeOptions::default();
            assert!(warden::acs::shell::decode(&probe, &opts).is_some());
            group.bench_function("decode", |b| {
                b.iter(|| black_box(warden::acs::shell::decode(black_box(&probe), &opts)))
            });
            assert!(warden::acs::envelope::decode_request_detached(&probe, &opts).is_ok());
            group.bench_function("decode_full", |b| {
                b.iter(|| {
                    black_box(warden::acs::envelope::decode_request_detached(
                        black_box(&probe),
                        &opts,
                    ))
                })
            });
        }
        // The same with the audit chain kept by the Guardian itself (what `warden serve`
        // does): each decided step is hashed (JCS + SHA-256 of its params) and chained.
        let audited = handle_guardian(true);
        for v in history::history(h, history::Taint::Recent) {
            audited.handle(&serde_json::to_vec(&v).unwrap());
        }
        let out: serde_json::Value = serde_json::from_slice(&audited.handle(&probe)).unwrap();
        assert!(
            out["result"]["chain_hash"].is_string(),
            "the audited Guardian returns a chain hash: {out}"
        );
        group.bench_with_input(BenchmarkId::new("audit", h), &h, |b, _| {
            b.iter(|| black_box(audited.handle(black_box(&probe))))
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
        let program = policy.clone();
        let mut state = SessionState::new(program.program());
        let probe = history::probe(10);
        let step = Step::new(&probe);
        group.bench_function(name, |b| {
            b.iter(|| {
                let ev = step.event();
                let d = program
                    .decide_event(black_box(&mut state), step.hook, &ev, false)
                    .unwrap();
                black_box(d.kind)
            })
        });
    }
    group.finish();
}

/// A `charge_card` call for payment `id` (envelope `n`) and its successful result (`n + 1`).
fn charge(n: u64, id: &str) -> (Step, Step) {
    let call = history::envelope(
        n,
        "steps/toolCallRequest",
        1,
        json!({"tool": {"name": "charge_card"}, "arguments": {
            "payment_id": {"value": id},
            "amount": {"value": 500},
        }}),
    );
    let call = Step::new(&call);
    let result = history::envelope(
        n + 1,
        "steps/toolCallResult",
        1,
        json!({"tool": {"name": "charge_card"}, "request_id_ref": call.request_id,
               "exit_status": "success", "outputs": []}),
    );
    (call, Step::new(&result))
}

/// Runs `step` on `state` through the evaluator; its decision.
fn run(program: &Policy, state: &mut SessionState, step: &Step) -> DecisionKind {
    program
        .decide_event(state, step.hook, &step.event(), false)
        .unwrap()
        .kind
}

/// Effect tracking (docs/effects.md): one `charge_card` call whose tool has a declared effect
/// (its key computed, read by std.effects' two rules, reserved) and then that call's
/// `toolCallResult` (the reservation found by request id, the key committed), in a session
/// where H earlier charges, each with its own key, are already committed.
///
/// The session is the bench's own, as a Guardian's is: the decisions update its maps in place.
/// Between iterations, outside the timing, an operator's resolution turns the probe's key back
/// to `failed` (a failed effect may be tried again), so every iteration does the same work on a
/// session of the same size.
fn effects(c: &mut Criterion) {
    let policy = Policy::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/policies/effects.ward"
    ))
    .unwrap_or_else(|d| panic!("{d}"));
    let program = policy.clone();
    let mut group = c.benchmark_group("effects");
    for &h in &[10u64, 1_000, 100_000] {
        let mut state = SessionState::new(program.program());
        for i in 0..h {
            let (call, result) = charge(2 * i, &format!("p{i}"));
            assert_eq!(run(&program, &mut state, &call), DecisionKind::Allow);
            assert_eq!(run(&program, &mut state, &result), DecisionKind::Allow);
        }
        let committed = state
            .effect_states()
            .iter()
            .filter(|(_, s)| *s == EffectStatus::Committed)
            .count();
        assert_eq!(committed, h as usize, "H committed keys");
        let (call, result) = charge(2 * h, "probe");
        let key = r#"["charge",["probe",500]]"#;
        // What is timed, checked once: the call is allowed and reserves its key, the result
        // commits it, the same charge again is then a duplicate; once resolved to failed, the
        // key may be reserved again.
        {
            let mut s = state.clone();
            for _ in 0..2 {
                assert_eq!(run(&program, &mut s, &call), DecisionKind::Allow);
                assert_eq!(s.effect_status(key), Some(EffectStatus::Reserved));
                assert_eq!(run(&program, &mut s, &result), DecisionKind::Allow);
                assert_eq!(s.effect_status(key), Some(EffectStatus::Committed));
                let (again, _) = charge(2 * h + 2, "probe");
                assert_eq!(run(&program, &mut s, &again), DecisionKind::Deny);
                s.resolve_effect(key, EffectStatus::Failed);
            }
        }
        group.bench_with_input(BenchmarkId::from_parameter(h), &h, |b, _| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let a = run(&program, black_box(&mut state), &call);
                    let r = run(&program, &mut state, &result);
                    timed += start.elapsed();
                    black_box((a, r));
                    state.resolve_effect(key, EffectStatus::Failed);
                }
                timed
            })
        });
    }
    group.finish();
}

/// Envelopes of one session (agent `a`, turn `t1`): request N gets id `counter(0, N)`.
fn in_session(sid: &'static str) -> impl Fn(u64, &str, serde_json::Value) -> serde_json::Value {
    move |n, method, payload| {
        envelope::request(
            n,
            method,
            &ids::counter(0, n),
            "2026-01-01T00:00:00Z",
            json!({"agent_id": "a", "session_id": sid, "turn_id": "t1"}),
            payload,
        )
    }
}

/// A call whose destination argument has no declared lineage, decided by the embedded default
/// policy (`taken_from` and `found_in` both infer its sources from the token index), after H
/// tool outputs of distinct identifiers entered the session.
fn inference(c: &mut Criterion) {
    let policy = Policy::embedded_default();
    let program = policy.clone();
    let mut group = c.benchmark_group("inference");
    let env = in_session("5e55e55e-0000-4000-8000-000000000001");
    for &h in &[10u64, 1_000, 100_000] {
        let mut events = vec![env(
            0,
            "steps/userMessage",
            json!({"content": [{"type": "text",
                "value": format!("send 100 to DE89370400440532013000 for the rent, and mail {}",
                    (1..=33).map(|i| format!("friend{i}@home.example")).collect::<Vec<_>>().join(", ")),
                "provenance": {"provenance_id": "u0", "origin": "user_input"}}]}),
        )];
        for i in 1..=h {
            events.push(env(
                i,
                "steps/toolCallResult",
                json!({"tool": {"name": "list"}, "exit_status": "success", "outputs": [{
                    "value": format!("account XX{i:020} of user{i}@corp.example"),
                    "provenance": {"provenance_id": format!("o{i}"), "origin": "tool_output"}}]}),
            ));
        }
        let mut state = state_after(&policy, &events);
        let probe = env(
            h + 1,
            "steps/toolCallRequest",
            json!({"tool": {"name": "send_money"}, "arguments": {
                "recipient": {"value": "DE89370400440532013000",
                              "provenance": {"origin": "agent_generated"}},
                "amount": {"value": 100, "provenance": {"origin": "agent_generated"}}}}),
        );
        let step = Step::new(&probe);
        bench_allowed(
            &mut group,
            BenchmarkId::from_parameter(h),
            &program,
            &mut state,
            &step,
            "the user's own recipient is allowed",
        );
        // Inference alone, for one argument value: its tokens looked up in the index (a fresh
        // draft each time, so nothing is cached).
        let value = json!("friend7@home.example");
        group.bench_with_input(BenchmarkId::new("infer_one", h), &h, |b, _| {
            b.iter(|| {
                let draft = state.view();
                black_box(
                    draft
                        .infer_node(program.program(), black_box(&value), 0)
                        .source_origins,
                )
            })
        });
        // The cost per argument: a mail to K addresses the user typed, sent without lineage,
        // each checked on its own by the default (its sources inferred, twice: `taken_from` and
        // `found_in`). The slope between K = 1 and K = 33 is what one more argument costs.
        for &k in &[1usize, 33] {
            let recipients: Vec<String> =
                (1..=k).map(|i| format!("friend{i}@home.example")).collect();
            let probe = env(
                h + 2,
                "steps/toolCallRequest",
                json!({"tool": {"name": "send_email"}, "arguments": {
                    "recipients": {"value": recipients, "provenance": {"origin": "agent_generated"}}}}),
            );
            let step = Step::new(&probe);
            let args: serde_json::Map<String, serde_json::Value> = (1..=k)
                .map(|i| {
                    (
                        format!("friend{i}_email"),
                        json!({"value": format!("friend{i}@home.example"),
                               "provenance": {"origin": "agent_generated"}}),
                    )
                })
                .collect();
            let probe_args = env(
                h + 3,
                "steps/toolCallRequest",
                json!({"tool": {"name": "notify"}, "arguments": args}),
            );
            let step_args = Step::new(&probe_args);
            bench_allowed(
                &mut group,
                BenchmarkId::new(format!("arguments_{k}"), h),
                &program,
                &mut state,
                &step_args,
                "destinations the user typed are allowed",
            );
            bench_allowed(
                &mut group,
                BenchmarkId::new(format!("elements_{k}"), h),
                &program,
                &mut state,
                &step,
                "addresses the user typed are allowed",
            );
        }
    }
    group.finish();
}

/// Audiences (issue 30, `read_at`): a message whose body has no lineage, decided by
/// `examples/agentdojo` (its `moved_content` rule asks `moved_unasked(body, channel)`, so the
/// body's places are inferred from the token index), after H channel reads of eight channels,
/// each call answered by its result. The places of a session live in a fixed table and the
/// latest 16 calls in a ring: the cost does not grow with H.
fn audience(c: &mut Criterion) {
    let policy = Policy::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/agentdojo/policy.ward"
    ))
    .expect("the example loads");
    let program = policy.clone();
    let mut group = c.benchmark_group("audience");
    let env = in_session("5e55e55e-0000-4000-8000-000000000002");
    for &h in &[10u64, 1_000, 100_000] {
        let mut events = vec![env(
            0,
            "steps/userMessage",
            json!({"content": [{"type": "text", "value": "summarise the general channel and post it to general",
                "provenance": {"provenance_id": "u0", "origin": "user_input"}}]}),
        )];
        for i in 1..=h {
            let channel = format!("c{}", i % 8);
            let call = 2 * i - 1;
            events.push(env(
                call,
                "steps/toolCallRequest",
                json!({"tool": {"name": "read_channel_messages"},
                       "arguments": {"channel": {"value": channel}}}),
            ));
            events.push(env(
                call + 1,
                "steps/toolCallResult",
                json!({"tool": {"name": "read_channel_messages"}, "exit_status": "success",
                       "request_id_ref": ids::counter(0, call),
                       "outputs": [{"value": format!("note{i} from {channel}"),
                                    "provenance": {"provenance_id": format!("o{i}"), "origin": "tool_output"}}]}),
            ));
        }
        let read = env(
            2 * h + 1,
            "steps/toolCallRequest",
            json!({"tool": {"name": "read_channel_messages"},
                   "arguments": {"channel": {"value": "general"}}}),
        );
        let result = env(
            2 * h + 2,
            "steps/toolCallResult",
            json!({"tool": {"name": "read_channel_messages"}, "exit_status": "success",
                   "request_id_ref": ids::counter(0, 2 * h + 1),
                   "outputs": [{"value": "the launch moves to Thursday",
                                "provenance": {"provenance_id": "og", "origin": "tool_output"}}]}),
        );
        events.push(read);
        events.push(result);
        let mut state = state_after(&policy, &events);
        let probe = env(
            2 * h + 3,
            "steps/toolCallRequest",
            json!({"tool": {"name": "send_channel_message"}, "arguments": {
                "channel": {"value": "general"},
                "body": {"value": "summary: launch moves to Thursday"}}}),
        );
        let step = Step::new(&probe);
        bench_allowed(
            &mut group,
            BenchmarkId::from_parameter(h),
            &program,
            &mut state,
            &step,
            "content goes back to the channel it was read in",
        );
    }
    group.finish();
}

/// What the effect guard adds (issue 30): reading the classes a user message asks for (once,
/// when the message comes in: O(its words)) and the class of a call (per call: O(the tool
/// name's words)). Reading `requested(…)` afterwards is a bit test, whatever the history.
fn actions(c: &mut Criterion) {
    let mut group = c.benchmark_group("actions");
    let message =
        "Hi! I moved last week - please update my address to 12 Elm Street, Springfield, \
                   then pay the rent for this month to my landlord and cancel the Friday meeting";
    group.bench_function("requested_classes_per_user_message", |b| {
        b.iter(|| warden::actions::requested_classes(black_box(message)))
    });
    let args = ["recipient", "amount", "subject", "date"];
    group.bench_function("catalogue_class_per_call", |b| {
        b.iter(|| {
            warden::actions::catalogue_class(
                black_box("update_scheduled_transaction"),
                args.iter().copied(),
            )
        })
    });
    group.bench_function("named_objects_per_user_message", |b| {
        b.iter(|| warden::actions::named_objects(black_box(message)))
    });
    // What a step pays per user message: both readings, the words cut once.
    group.bench_function("read_request_per_user_message", |b| {
        b.iter(|| warden::actions::read_request(black_box(message)))
    });
    group.bench_function("tool_objects_per_call", |b| {
        b.iter(|| warden::actions::tool_objects(black_box("reschedule_calendar_event")))
    });
    group.finish();
}

criterion_group!(benches, decide, handle, rego, effects, inference, audience, actions);
criterion_main!(benches);
