//! The differential test: random policies and event streams (`gen.rs`) decided by the real
//! path — the policy compiled and run through `guardian::Guardian`, exactly as `warden replay`
//! runs it — and by the reference evaluator; after every event both must give the same
//! decision, the same reason codes, the same fired rules and modifications, and hold the same
//! session state: the provenance nodes (labels, origins, depth), the turn, `turns_since` of
//! every label, and the count of every history expression of the policy for every key.
//! Each case also cuts its stream at a random event: a second Guardian decides up to the cut,
//! its journal is restored into a third, which decides the rest; its answers must be the
//! uninterrupted Guardian's, byte for byte.
//!
//! It owns the bridge between the two: building envelopes, reading responses and the
//! Guardian's session snapshot, mapping the policy's history expressions onto the compiled
//! history slots, encoding keys the way the VM files them. It sits downstream of both sides
//! (ARCHITECTURE.md, "Layers") so that neither knows the other: the reference evaluator
//! never sees the compiled path, and nothing on the compiled path knows this test exists.
//!
//! CI runs 64 cases (each a policy and up to 24 events). A longer run, for local use:
//!
//! ```text
//! PROPTEST_CASES=20000 cargo test --release --lib differential -- --nocapture
//! ```
//!
//! Each run draws fresh cases; `PROPTEST_RNG_SEED=N` repeats one. A failure prints the
//! smallest policy and event stream proptest could shrink it to, as a `.ward` file and a
//! `warden replay` trace.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use serde_json::{json, Value};

use crate::acs::{envelope, ids, DecisionKind};
use crate::check;
use crate::compile::{Program, WindowSpec};
use crate::guardian::{Guardian, MemoryJournal, Options, Policy};
use crate::reference::{Event, Mods, Outcome, Reference, Touch, Window, V};
use crate::state::SessionState;
use gen::GenEvent;

mod gen;

/// The one session every generated stream runs in.
pub const SESSION: &str = "5e55e55e-0000-4000-8000-000000000000";
/// 2026-01-01T00:00:00Z in Unix milliseconds.
const BASE_MS: i64 = 1_767_225_600_000;
/// Cases when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 64;
/// Longest event stream.
const MAX_EVENTS: usize = 24;

/// One generated case: a policy and the events sent to it.
#[derive(Clone)]
pub struct Case {
    pub policy: String,
    pub events: Vec<GenEvent>,
    /// Where the stream is cut for a restore from the journal (past the end: never).
    pub cut: usize,
}

fn request_id(i: usize) -> String {
    ids::counter(0, i as u64)
}

impl Case {
    /// The envelopes, in order, with each event's time in milliseconds.
    pub fn envelopes(&self) -> Vec<(Value, i64)> {
        let mut t = 0u64;
        self.events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                t += e.step_s;
                let mut payload = e.payload.clone();
                if e.method == "steps/postCompact" {
                    let n = self.events.len();
                    // Positions past the end name steps that never happened.
                    let ids: Vec<String> = e
                        .compacted
                        .iter()
                        .map(|&j| request_id(if j < n { j } else { 1000 + j }))
                        .collect();
                    payload["entries_compacted"] = json!(ids);
                }
                // A result answers the call at a position (past the end: one never made).
                if let (Some(&j), "steps/toolCallResult") = (e.compacted.first(), e.method) {
                    let n = self.events.len();
                    payload["request_id_ref"] = json!(request_id(if j < n { j } else { 1000 + j }));
                }
                let (h, m, s) = (t / 3600, t / 60 % 60, t % 60);
                let envelope = envelope::request(
                    i,
                    e.method,
                    &request_id(i),
                    &format!("2026-01-01T{h:02}:{m:02}:{s:02}Z"),
                    e.metadata.clone(),
                    payload,
                );
                (envelope, BASE_MS + (t * 1000) as i64)
            })
            .collect()
    }
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "\n--- policy.ward\n{}--- trace.jsonl", self.policy)?;
        if self.cut < self.events.len() {
            writeln!(f, "(restored from the journal before event {})", self.cut)?;
        }
        for (e, _) in self.envelopes() {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

fn case() -> impl Strategy<Value = Case> {
    (gen::policy(), gen::events(MAX_EVENTS), 0..=MAX_EVENTS).prop_map(|(policy, events, cut)| {
        Case {
            policy,
            events,
            cut,
        }
    })
}

/// How far the comparisons got.
#[derive(Debug, Default)]
struct Stats {
    cases: usize,
    events: usize,
    /// Cases cut short at an event that used a construct the VM does not implement yet.
    cut: BTreeMap<String, usize>,
    decisions: BTreeMap<String, usize>,
}

/// Why a stream stopped being compared early: a construct the VM does not implement yet.
fn pending(out: &Outcome) -> Option<&'static str> {
    if gen::PENDING_TYPE_ERRORS && out.failure.is_some() {
        return Some("type error");
    }
    for t in &out.touched {
        match t {
            Touch::QuantifierOverAbsent if gen::PENDING_QUANTIFIER_ABSENT => {
                return Some("quantifier over absent")
            }
            Touch::BracketArgument if gen::PENDING_BRACKET_INDEX => return Some("bracket index"),
            Touch::Regex if gen::PENDING_REGEX_MATCHES => return Some("regex"),
            _ => {}
        }
    }
    None
}

/// A response's modifications, in the reference's terms.
fn vm_mods(result: &Value) -> Option<Mods> {
    let m = result.get("modifications")?;
    let mut out = Mods::default();
    for r in m
        .get("redactions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.redactions.push((
            r["path"].as_str().unwrap_or_default().to_string(),
            r.get("replacement")
                .and_then(Value::as_str)
                .unwrap_or("[REDACTED]")
                .to_string(),
        ));
    }
    if let Some(o) = m.get("parameter_overrides").and_then(Value::as_object) {
        for (k, v) in o {
            out.overrides.insert(k.clone(), V::from_json(v));
        }
    }
    out.content = m
        .get("modified_content")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some(out)
}

fn same_mods(a: &Option<Mods>, b: &Option<Mods>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.redactions == b.redactions
                && a.content == b.content
                && a.overrides.len() == b.overrides.len()
                && a.overrides
                    .iter()
                    .all(|(k, v)| b.overrides.get(k).is_some_and(|w| v.same(w)))
        }
        _ => false,
    }
}

/// A reference value as the JSON the VM would hold.
fn json_of(v: &V) -> Value {
    match v {
        V::Undef => Value::Null,
        V::Bool(b) => json!(b),
        V::Num(n) => crate::compile::num_json(*n),
        V::Str(s) => json!(s),
        V::List(items) => Value::Array(items.iter().map(json_of).collect()),
        V::Obj(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), json_of(v)))
                .collect(),
        ),
    }
}

/// The key the VM files a keyed history count under.
fn vm_key(parts: &[V]) -> String {
    match parts {
        [one] => crate::vm::Val::from_json(&json_of(one))
            .key_string()
            .unwrap_or_default(),
        many => crate::acs::jcs::canonicalize(&Value::Array(many.iter().map(json_of).collect())),
    }
}

/// The compiled history slot of each of the reference's queries, numbered in the order they
/// are written. The compiler shares a slot between queries with neither filter nor key on the
/// same hook and window; a filter or key is code with source spans, so no two of those are
/// equal.
fn slots_of(reference: &Reference<'_>, program: &Program) -> Result<Vec<usize>, String> {
    let queries = reference.queries();
    let mut distinct: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let identity = if q.filtered || q.key_parts > 0 {
            format!("#{i}")
        } else {
            q.text.clone()
        };
        let slot = match distinct.iter().position(|t| *t == identity) {
            Some(i) => i,
            None => {
                distinct.push(identity);
                distinct.len() - 1
            }
        };
        let Some(spec) = program.history.get(slot) else {
            return Err(format!("no compiled slot {slot} for `{}`", q.text));
        };
        let window = match q.window {
            Window::Session => WindowSpec::Session,
            Window::ThisTurn => WindowSpec::ThisTurn,
            Window::LastTurns(n) => WindowSpec::LastTurns(n as u32),
            Window::LastMillis(ms) => WindowSpec::LastMillis(ms as u64),
        };
        if spec.hook.method != q.method
            || spec.window != window
            || spec.key_current.len() != q.key_parts
        {
            return Err(format!("slot {slot} does not match `{}`", q.text));
        }
        out.push(slot);
    }
    if distinct.len() != program.history.len() {
        return Err(format!(
            "{} distinct history expressions, {} compiled slots",
            distinct.len(),
            program.history.len()
        ));
    }
    Ok(out)
}

fn fmt_f(x: f64) -> String {
    if x.is_infinite() {
        "∞".into()
    } else {
        format!("{x}")
    }
}

/// Compares the session state the Guardian holds with the reference's.
fn compare_state(
    reference: &Reference<'_>,
    program: &Program,
    state: &SessionState,
    slots: &[usize],
) -> Result<(), String> {
    if state.turn() != reference.turn() {
        return Err(format!(
            "turn: vm {} reference {}",
            state.turn(),
            reference.turn()
        ));
    }
    // Provenance nodes: labels, origins, depth, and the direct sources `taken_from` reads.
    type Seen = (
        BTreeSet<String>,
        BTreeSet<String>,
        u32,
        BTreeSet<String>,
        BTreeSet<String>,
        BTreeSet<String>,
    );
    let labels = |bits: u64| -> BTreeSet<String> {
        program
            .label_names(bits)
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    let origins = |bits: u8| -> BTreeSet<String> {
        crate::acs::fields::ORIGINS
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, o)| o.to_string())
            .collect()
    };
    let mut vm_nodes: BTreeMap<String, Seen> = BTreeMap::new();
    for (id, n) in state.nodes.iter() {
        vm_nodes.insert(
            id.to_string(),
            (
                labels(n.labels),
                origins(n.origins),
                u32::from(n.depth),
                origins(n.source_origins),
                labels(n.source_any),
                labels(n.source_all),
            ),
        );
    }
    let ref_nodes: BTreeMap<String, Seen> = reference
        .nodes()
        .into_iter()
        .map(|(id, n)| {
            let seen = (
                n.labels,
                n.origins,
                n.depth,
                n.sources,
                n.source_any,
                n.source_all,
            );
            (id, seen)
        })
        .collect();
    if vm_nodes != ref_nodes {
        return Err(format!(
            "provenance nodes (labels, origins, depth, sources, labels of some / every source):\n  vm        {vm_nodes:?}\n  reference {ref_nodes:?}"
        ));
    }
    for label in reference.label_names() {
        let Some(bit) = program.label_bit(&label) else {
            return Err(format!("no label bit for {label}"));
        };
        let (vm, r) = (state.turns_since(bit), reference.turns_since(&label));
        if vm != r {
            return Err(format!(
                "turns_since({label}): vm {} reference {}",
                fmt_f(vm),
                fmt_f(r)
            ));
        }
    }
    for (i, &slot) in slots.iter().enumerate() {
        for (parts, n) in reference.probe(i)? {
            let key = (!parts.is_empty()).then(|| vm_key(&parts));
            let vm = state.history_count(program, slot as u32, key.as_deref());
            if vm != n {
                return Err(format!(
                    "history `{}` key {key:?}: vm {vm} reference {n}",
                    reference.queries()[i].text
                ));
            }
        }
    }
    Ok(())
}

/// Runs one case; `Err` describes the first difference.
fn run_case(case: &Case, stats: &RefCell<Stats>) -> Result<(), String> {
    let checked = check::check_source("p.ward", &case.policy);
    if checked.has_errors() {
        return Err(format!(
            "the generated policy does not check:\n{:?}",
            checked.diagnostics.items
        ));
    }
    let mut reference = Reference::new(&checked)?;
    let policy =
        Policy::from_source("p.ward", &case.policy).map_err(|d| format!("{:?}", d.items))?;
    let program = policy.program().clone();
    let slots = slots_of(&reference, &program)?;
    let options = Options {
        explain: true,
        ..Options::default()
    };
    let journalled = || {
        let journal = std::sync::Arc::new(MemoryJournal::default());
        let g = Guardian::with_journal(policy.clone(), options.clone(), journal.clone());
        (g, journal)
    };
    let guardian = Guardian::with_options(policy.clone(), options.clone());
    // Decides the stream beside `guardian`, restored from its own journal at the cut.
    let (mut cut, mut journal) = journalled();
    stats.borrow_mut().cases += 1;
    for (i, (envelope, time_ms)) in case.envelopes().into_iter().enumerate() {
        let bytes = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
        let answer = guardian.handle(&bytes);
        if i == case.cut {
            let (restored, its_journal) = journalled();
            restored.restore(journal.take());
            (cut, journal) = (restored, its_journal);
        }
        let cut_answer = cut.handle(&bytes);
        if cut_answer != answer {
            return Err(format!(
                "event {i}: restored from the journal before event {}, the Guardian answers\n  {}\ninstead of\n  {}",
                case.cut,
                String::from_utf8_lossy(&cut_answer),
                String::from_utf8_lossy(&answer)
            ));
        }
        let response: Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
        let Some(result) = response.get("result") else {
            return Err(format!("event {i}: the Guardian refused it: {response}"));
        };
        let params = &envelope["params"];
        let out = reference.step(&Event {
            method: envelope["method"].as_str().unwrap_or_default(),
            request_id: params["request_id"].as_str().unwrap_or_default(),
            payload: &params["payload"],
            metadata: &params["metadata"],
            time_ms: Some(time_ms),
        })?;
        if let Some(why) = pending(&out) {
            *stats.borrow_mut().cut.entry(why.into()).or_default() += 1;
            return Ok(());
        }
        let vm_kind = result["decision"].as_str().and_then(DecisionKind::parse);
        let vm_codes: Vec<String> = result
            .get("reason_codes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect();
        let vm_fired: Vec<String> = result
            .pointer("/policy_data/warden/fired")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str())
            .map(|q| q.rsplit('.').next().unwrap_or(q).to_string())
            .collect();
        let vm_mods = vm_mods(result);
        if vm_kind != Some(out.kind)
            || vm_codes != out.reason_codes
            || vm_fired != out.fired
            || !same_mods(&vm_mods, &out.modifications)
        {
            return Err(format!(
                "event {i} ({}): the decisions differ\n  vm        {} {vm_codes:?} fired {vm_fired:?} {vm_mods:?}\n  reference {} {:?} fired {:?} {:?}{}",
                envelope["method"],
                result["decision"],
                out.kind.as_str(),
                out.reason_codes,
                out.fired,
                out.modifications,
                out.failure.as_deref().map(|f| format!(" (failure: {f})")).unwrap_or_default()
            ));
        }
        {
            let mut s = stats.borrow_mut();
            s.events += 1;
            *s.decisions.entry(out.kind.as_str().into()).or_default() += 1;
        }
        let state = guardian
            .snapshot(SESSION)
            .ok_or_else(|| format!("event {i}: the Guardian has no session"))?;
        compare_state(&reference, &program, &state, &slots)
            .map_err(|e| format!("event {i} ({}): the states differ: {e}", envelope["method"]))?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

#[test]
fn vm_agrees_with_reference() {
    let defaults = Config::default(); // reads PROPTEST_RNG_SEED, PROPTEST_MAX_SHRINK_ITERS, …
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_some() {
            defaults.max_shrink_iters
        } else {
            4096
        },
        ..defaults
    });
    let stats = RefCell::new(Stats::default());
    let result = runner.run(&case(), |c| {
        run_case(&c, &stats).map_err(TestCaseError::fail)
    });
    let stats = stats.into_inner();
    eprintln!(
        "differential: {} cases, {} events compared, decisions {:?}, cut short {:?}",
        stats.cases, stats.events, stats.decisions, stats.cut
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => panic!("{why}\nminimal case:{case:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// Runs a hand-written case through both sides.
#[cfg(test)]
fn check_case(policy: &str, events: Vec<GenEvent>) -> Result<(), String> {
    let stats = RefCell::new(Stats::default());
    run_case(
        &Case {
            policy: policy.into(),
            events,
            cut: usize::MAX,
        },
        &stats,
    )
}

#[cfg(test)]
fn call(tool: &str, args: Value) -> GenEvent {
    GenEvent {
        method: "steps/toolCallRequest",
        payload: json!({"tool": {"name": tool}, "arguments": args}),
        metadata: json!({"agent_id": "agent", "session_id": SESSION}),
        step_s: 4,
        compacted: Vec::new(),
    }
}

#[test]
fn agrees_on_the_readme_policy() {
    let policy = r#"
label untrusted when origin in {tool_output, retrieved, a2a_inbound, external}
let money_tools = {"send_money", "schedule_transaction"}
rule money_after_taint on toolCallRequest
  when tool.name in money_tools and turns_since(untrusted) <= 3
  => deny "taint.window": "a payment within 3 turns of untrusted content"
rule recipient_from_tool_output on toolCallRequest
  when tool.name == "send_money" and derived_from(args.recipient, tool_output)
  => deny "provenance.recipient": "the recipient was taken from a tool output"
rule burst on toolCallRequest
  when count(toolCallRequest when tool.name == $.tool.name, this turn) >= 2
  => ask "rate": "a third call" approver human "oncall"
default allow
"#;
    let read = GenEvent {
        method: "steps/toolCallResult",
        payload: json!({"tool": {"name": "read_file"}, "exit_status": "success", "outputs": [
            {"value": "IBAN XX99", "provenance": {"provenance_id": "o1", "origin": "tool_output"}}]}),
        metadata: json!({"agent_id": "agent", "session_id": SESSION}),
        step_s: 4,
        compacted: Vec::new(),
    };
    let events = vec![
        call("read_file", json!({"path": {"value": "bill.txt"}})),
        read,
        call(
            "send_money",
            json!({"recipient": {"value": "XX99", "provenance": {"provenance_id": "a1", "origin": "agent_generated", "derived_from": ["o1"]}}}),
        ),
        call("read_file", json!({})),
        call("read_file", json!({})),
    ];
    check_case(policy, events).unwrap();
}

// ---------------------------------------------------------------------------------------------
// VM bugs found by this test, fixed since; each reproducer stays as a regression test (their
// `gen::BUG_*` switches are off, so the generator writes these constructs again).

/// `gen::BUG_BARE_ARGUMENT_CONDITION`: `when args.flag` with `flag = true` should fire.
#[test]
fn bug_redact_each_condition_fails_under_a_winning_deny() {
    let policy = "rule r0 on toolCallRequest => modify \"c0\" redact each k, a in args when k == \"to\" or a == \"bob\"\nrule r1 on toolCallRequest => deny \"c0\"\ndefault allow\n";
    check_case(
        policy,
        vec![call("send", json!({"flag": {"value": false}}))],
    )
    .unwrap();
}

#[test]
fn bug_bare_argument_condition() {
    let policy = "rule r on toolCallRequest when args.flag => deny \"c\"\ndefault allow\n";
    check_case(policy, vec![call("t", json!({"flag": {"value": true}}))]).unwrap();
}

/// `gen::BUG_KEY_KINDS_COLLIDE`: a call keyed `"1"` must not count for a call keyed `1`.
#[test]
fn bug_key_kinds_collide() {
    let policy = "rule r on toolCallRequest when count(toolCallRequest, by args.x) >= 1 => deny \"c\"\ndefault allow\n";
    check_case(
        policy,
        vec![
            call("t", json!({"x": {"value": "1"}})),
            call("t", json!({"x": {"value": 1}})),
        ],
    )
    .unwrap();
}

/// `gen::BUG_SET_REPEATS`: a set holds each element once, so `len({"a", "a"})` is 1.
#[test]
fn bug_set_repeats() {
    let policy = "let k = {\"a\", \"a\"}\nrule r on toolCallRequest when len(k) == 1 => deny \"c\"\ndefault allow\n";
    check_case(policy, vec![call("t", json!({}))]).unwrap();
}

/// `gen::BUG_UNDEFINED_KEY_PART`: without `args.to` on the call, its count is undefined, so
/// `not (count(…) != 0)` does not fire (as with `by args.to` alone).
#[test]
fn bug_undefined_key_part() {
    let policy = "rule r on toolCallRequest\n  when not (count(toolCallRequest when tool.name == $.tool.name, by args.to) != 0)\n  => deny \"c\"\ndefault allow\n";
    check_case(policy, vec![call("send", json!({}))]).unwrap();
}

/// Prints a few generated cases, to see what the generator writes:
/// `cargo test --lib differential::print_samples -- --ignored --nocapture`.
#[test]
#[ignore = "prints generated cases"]
fn print_samples() {
    let mut runner = TestRunner::deterministic();
    for _ in 0..3 {
        let c = proptest::strategy::ValueTree::current(&case().new_tree(&mut runner).unwrap());
        eprintln!("{c:?}");
    }
}
