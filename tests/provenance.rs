//! The incremental session state equals a from-scratch recomputation over the whole history,
//! for random event streams: content of every origin with random (and dangling) lineage,
//! turns, compactions, counted tool calls, and subagents whose summaries come back. That holds
//! for each node's labels and for its direct sources (where it was taken from: their origins,
//! and the union and intersection of their labels), and a Guardian restored from the journal
//! holds the same graph.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};
use warden::acs::{envelope, ids};
use warden::guardian::journal::MemoryJournal;
use warden::guardian::{Guardian, Options, Policy};
use warden::state::origin_bit;

const POLICY: &str = r#"
label untrusted when origin in {tool_output, retrieved, a2a_inbound, external}
label trusted when origin in {user_input, system}
label from_web when source == "web"
rule count_a on toolCallRequest when count(toolCallRequest when tool.name == "a", this turn) < 0 => deny "never"
rule count_b on toolCallRequest when count(toolCallRequest when tool.name == "b", last 2 turns) < 0 => deny "never"
rule count_all on toolCallRequest when count(toolCallRequest, session) < 0 => deny "never"
default allow
"#;

const ORIGINS: [&str; 7] = [
    "user_input",
    "system",
    "tool_output",
    "retrieved",
    "agent_generated",
    "a2a_inbound",
    "external",
];

#[derive(Debug, Clone)]
enum Step {
    Turn,
    /// Content: origin index, from the web?, parents (indices into earlier content, or dangling).
    Content(usize, bool, Vec<Parent>),
    /// A compaction of some earlier steps (indices into earlier steps).
    Compact(Vec<usize>),
    Call(bool),
    /// A subagent that sees content of this origin and reports back.
    Subagent(usize),
}

#[derive(Debug, Clone)]
enum Parent {
    Earlier(usize),
    Dangling,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Turn),
        5 => (0..7usize, any::<bool>(), prop::collection::vec(
            prop_oneof![4 => (0..1000usize).prop_map(Parent::Earlier), 1 => Just(Parent::Dangling)], 0..3))
            .prop_map(|(o, w, p)| Step::Content(o, w, p)),
        1 => prop::collection::vec(0..1000usize, 0..4).prop_map(Step::Compact),
        2 => any::<bool>().prop_map(Step::Call),
        1 => (0..7usize).prop_map(Step::Subagent),
    ]
}

const UNTRUSTED: u64 = 1;
const TRUSTED: u64 = 2;
const WEB: u64 = 4;

fn own_labels(origin: &str, web: bool) -> u64 {
    let mut l = 0;
    if ["tool_output", "retrieved", "a2a_inbound", "external"].contains(&origin) {
        l |= UNTRUSTED;
    }
    if ["user_input", "system"].contains(&origin) {
        l |= TRUSTED;
    }
    if web {
        l |= WEB;
    }
    l
}

/// The naive model: everything recomputed from the full list of what happened.
#[derive(Default)]
struct Model {
    turn: u64,
    /// (provenance id, origin, web, parent ids, turn, step index, position in the stream)
    content: Vec<(String, String, bool, Vec<String>, u64, usize)>,
    /// Per step: the request id.
    steps: Vec<String>,
    /// Per call: (is a, turn).
    calls: Vec<(bool, u64)>,
    /// Extra labels given to content of a step (compaction and subagent summaries).
    extra: HashMap<usize, u64>,
}

impl Model {
    /// Labels of content `i`, from scratch.
    fn labels(&self, i: usize) -> u64 {
        let (_, origin, web, parents, turn, step) = &self.content[i];
        let mut l = own_labels(origin, *web) | self.extra.get(step).copied().unwrap_or(0);
        for p in parents {
            match self.content[..i].iter().position(|c| &c.0 == p) {
                Some(j) => l |= self.labels(j),
                None => l |= UNTRUSTED, // unknown lineage gets what `external` would
            }
        }
        if origin == "agent_generated" && parents.is_empty() {
            for j in 0..i {
                if self.content[j].4 == *turn {
                    l |= self.labels(j);
                }
            }
        }
        l
    }

    /// Where content `i` was taken from, from scratch: (origins, labels of some source,
    /// labels of every source). Parents are the sources; a dangling parent is an external
    /// source with the labels of unknown lineage; content with no parents is its own source,
    /// except model output without lineage, whose sources are unknown.
    fn sources(&self, i: usize) -> (u8, u64, u64) {
        let (_, origin, _, parents, _, _) = &self.content[i];
        if parents.is_empty() {
            let l = self.labels(i);
            return if origin == "agent_generated" {
                (origin_bit("external"), l | UNTRUSTED, 0)
            } else {
                (origin_bit(origin), l, l)
            };
        }
        let (mut origins, mut any, mut all) = (0u8, 0u64, u64::MAX);
        for p in parents {
            let (o, l) = match self.content[..i].iter().position(|c| &c.0 == p) {
                Some(j) => (origin_bit(&self.content[j].1), self.labels(j)),
                None => (origin_bit("external"), UNTRUSTED),
            };
            origins |= o;
            any |= l;
            all &= l;
        }
        (origins, any, all)
    }

    fn turns_since(&self, bit: u64) -> f64 {
        (0..self.content.len())
            .filter(|&i| self.labels(i) & bit != 0)
            .map(|i| self.content[i].4)
            .max()
            .map_or(f64::INFINITY, |t| (self.turn - t) as f64)
    }

    fn labels_of_step(&self, step: usize) -> u64 {
        (0..self.content.len())
            .filter(|&i| self.content[i].5 == step)
            .fold(0, |l, i| l | self.labels(i))
    }
}

struct Driver {
    guardian: Guardian,
    n: u64,
    turn: u64,
}

const SESSION: &str = "c0ffee00-0000-4000-8000-000000000001";

impl Driver {
    fn send(&mut self, session: &str, method: &str, payload: Value) -> String {
        self.n += 1;
        let rid = ids::counter(0, self.n);
        let req = envelope::request(
            self.n,
            method,
            &rid,
            "2026-12-01T00:00:00Z",
            json!({"agent_id": "a", "session_id": session, "turn_id": format!("t{}", self.turn)}),
            payload,
        );
        let out: Value =
            serde_json::from_slice(&self.guardian.handle(&serde_json::to_vec(&req).unwrap()))
                .unwrap();
        assert_eq!(out["result"]["decision"], "allow", "{out}");
        rid
    }
}

fn content_payload(pid: &str, origin: &str, web: bool, parents: &[String]) -> Value {
    let mut prov = json!({"provenance_id": pid, "origin": origin});
    if web {
        prov["source_id"] = json!("web");
    }
    if !parents.is_empty() {
        prov["derived_from"] = json!(parents);
    }
    json!({"tool": {"name": "t"}, "exit_status": "success", "outputs": [{"value": "x", "provenance": prov}]})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn incremental_state_equals_recomputation(steps in prop::collection::vec(step(), 1..60)) {
        let policy = Policy::from_source("p.ward", POLICY).unwrap();
        let program = policy.program().clone();
        let journal = Arc::new(MemoryJournal::default());
        let mut d = Driver {
            guardian: Guardian::with_journal(policy.clone(), Options::default(), journal.clone()),
            n: 0,
            turn: 1,
        };
        let mut m = Model::default();
        let mut last_turn_seen = 0;
        for (k, s) in steps.iter().enumerate() {
            if let Step::Turn = s {
                d.turn += 1;
            }
            // A turn begins when its turn_id is first seen.
            if d.turn != last_turn_seen {
                last_turn_seen = d.turn;
                m.turn += 1;
            }
            match s {
                Step::Turn => {
                    let rid = d.send(SESSION, "steps/turnStart", json!({"turn_id": format!("t{}", d.turn)}));
                    m.steps.push(rid);
                }
                Step::Content(o, web, parents) => {
                    let pid = format!("c{k}");
                    let parents: Vec<String> = parents.iter().map(|p| match p {
                        Parent::Earlier(i) if !m.content.is_empty() => m.content[i % m.content.len()].0.clone(),
                        _ => format!("dangling{k}"),
                    }).collect();
                    let step_index = m.steps.len();
                    let rid = d.send(SESSION, "steps/toolCallResult", content_payload(&pid, ORIGINS[*o], *web, &parents));
                    m.steps.push(rid);
                    m.content.push((pid, ORIGINS[*o].to_string(), *web, parents, m.turn, step_index));
                }
                Step::Compact(entries) => {
                    let ids: Vec<String> = entries.iter().filter(|_| !m.steps.is_empty())
                        .map(|i| m.steps[i % m.steps.len()].clone()).collect();
                    let extra = ids.iter()
                        .map(|id| m.steps.iter().position(|s| s == id).map_or(UNTRUSTED, |i| m.labels_of_step(i)))
                        .fold(0, |a, b| a | b);
                    let step_index = m.steps.len();
                    let pid = format!("s{k}");
                    let rid = d.send(SESSION, "steps/postCompact", json!({
                        "summary": {"value": "sum", "provenance": {"provenance_id": pid, "origin": "agent_generated", "derived_from": []}},
                        "entries_compacted": ids, "pre_compact_chain_hash": "0".repeat(64), "post_compact_chain_hash": "0".repeat(64)}));
                    m.steps.push(rid);
                    m.extra.insert(step_index, extra);
                    // An empty `derived_from` states no lineage: it also takes the turn's labels.
                    m.content.push((pid, "agent_generated".into(), false, Vec::new(), m.turn, step_index));
                }
                Step::Call(is_a) => {
                    let rid = d.send(SESSION, "steps/toolCallRequest", json!({"tool": {"name": if *is_a {"a"} else {"b"}}, "arguments": {}}));
                    m.steps.push(rid);
                    m.calls.push((*is_a, m.turn));
                }
                Step::Subagent(o) => {
                    let child = ids::counter(0xc0ff_ee00, 100 + k as u64);
                    let rid = d.send(SESSION, "steps/subagentStart", json!({"subagent_session_id": child, "intent_derivation": "inherit_full"}));
                    m.steps.push(rid);
                    let inside = format!("in{k}");
                    d.send(&child, "steps/toolCallResult", content_payload(&inside, ORIGINS[*o], false, &[]));
                    // The child saw everything the parent had seen, plus its own content.
                    let mut child_labels = own_labels(ORIGINS[*o], false);
                    for i in 0..m.content.len() { child_labels |= m.labels(i); }
                    let pid = format!("back{k}");
                    let step_index = m.steps.len();
                    let rid = d.send(SESSION, "steps/subagentStop", json!({
                        "subagent_session_id": child, "outcome": "completed",
                        "summary": {"value": "done", "provenance": {"provenance_id": pid, "origin": "agent_generated", "derived_from": [inside]}}}));
                    m.steps.push(rid);
                    m.extra.insert(step_index, child_labels);
                    // `inside` is unknown to the parent: dangling lineage.
                    m.content.push((pid, "agent_generated".into(), false, vec![inside], m.turn, step_index));
                }
            }
        }
        // Compare the incremental state with the recomputation.
        let state = d.guardian.snapshot(SESSION).unwrap();
        prop_assert_eq!(state.turn(), m.turn);
        for (i, c) in m.content.iter().enumerate() {
            let node = state.nodes.get(c.0.as_str()).copied();
            prop_assert!(node.is_some(), "node {} missing", c.0);
            let node = node.unwrap();
            let want = m.labels(i);
            prop_assert_eq!(node.labels, want, "labels of {}", c.0);
            let (origins, any, all) = m.sources(i);
            prop_assert_eq!(node.source_origins, origins, "source origins of {}", c.0);
            prop_assert_eq!(node.source_any, any, "labels of some source of {}", c.0);
            prop_assert_eq!(node.source_all, all, "labels of every source of {}", c.0);
        }
        // A Guardian restored from the journal holds the same graph.
        let restored = Guardian::new(policy);
        let records = journal.records.lock().unwrap().clone();
        restored.restore(records);
        let again = restored.snapshot(SESSION).unwrap();
        for c in &m.content {
            prop_assert_eq!(
                again.nodes.get(c.0.as_str()).copied(),
                state.nodes.get(c.0.as_str()).copied(),
                "restored node {}", c.0
            );
        }
        for (bit, mask) in [(0u8, UNTRUSTED), (1, TRUSTED), (2, WEB)] {
            prop_assert_eq!(state.turns_since(bit), m.turns_since(mask), "turns_since bit {}", bit);
        }
        let a_this_turn = m.calls.iter().filter(|(a, t)| *a && *t == m.turn).count() as u64;
        let b_last_2 = m.calls.iter().filter(|(a, t)| !*a && *t + 1 >= m.turn).count() as u64;
        prop_assert_eq!(state.history_count(&program, 0, None), a_this_turn);
        prop_assert_eq!(state.history_count(&program, 1, None), b_last_2);
        prop_assert_eq!(state.history_count(&program, 2, None), m.calls.len() as u64);
    }
}
