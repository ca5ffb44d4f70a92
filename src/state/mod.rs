//! Session state: the current turn, the provenance graph, the per-label "last entered" turn,
//! the history slots and the session's Intent. Everything a history predicate reads is kept
//! here, updated in O(1) amortised per event (O(parents) for a provenance node), so a decision
//! costs the same after ten events as after a million.
//!
//! The state is built from `imbl` persistent maps: a decision works on a cheap clone and the
//! clone replaces the session's state only if the step goes ahead (allow or modify). A denied
//! call never counts as having happened.

mod slots;

use std::sync::Arc;

use serde_json::Value;

pub use slots::Counter;

use crate::compile::{Code, Program, WindowSpec};
use crate::vm::{self, Budget, Env, Val, VmError};

/// One provenance node: what is kept per `provenance_id` (never the content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Node {
    /// Label bits: its own ∪ its parents'.
    pub labels: u64,
    /// Origins anywhere in its lineage, as bits (see [`origin_bit`]).
    pub origins: u8,
    /// Longest `derived_from` chain behind it (1 for content with no parents).
    pub depth: u16,
    /// Turn it entered the context.
    pub turn: u32,
}

const ORIGINS: [&str; 7] = [
    "user_input",
    "system",
    "tool_output",
    "retrieved",
    "agent_generated",
    "a2a_inbound",
    "external",
];

/// The bit of an ACS origin (0 for an unknown word).
pub fn origin_bit(origin: &str) -> u8 {
    ORIGINS
        .iter()
        .position(|o| *o == origin)
        .map_or(0, |i| 1u8 << i)
}

/// One IBAC capability: globs over tool, operation and resource (absent: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub tool: Option<String>,
    pub operation: Option<String>,
    pub resource: Option<String>,
}

/// The session's Intent, fixed at sessionStart (or the first agentTrigger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub raw: Option<Arc<str>>,
    pub capabilities: Vec<Capability>,
    pub scope_mode: Option<Arc<str>>,
    /// False when `parsed` came without a `user_input` parser provenance: such an intent
    /// grants nothing (fail closed) rather than being ignored.
    pub trusted: bool,
}

impl Intent {
    fn from_json(v: &Value) -> Option<Intent> {
        let obj = v.as_object()?;
        let raw = obj.get("raw").and_then(Value::as_str).map(Arc::from);
        let scope_mode = obj.get("scope_mode").and_then(Value::as_str).map(Arc::from);
        let parsed = obj.get("parsed").and_then(Value::as_array);
        let trusted = match parsed {
            None => true,
            Some(_) => {
                obj.get("parser_provenance")
                    .and_then(|p| p.get("origin"))
                    .and_then(Value::as_str)
                    == Some("user_input")
            }
        };
        let capabilities = if trusted {
            parsed
                .map(|caps| {
                    caps.iter()
                        .map(|c| {
                            let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
                            Capability {
                                tool: s("tool"),
                                operation: s("operation"),
                                resource: s("resource"),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        if raw.is_none() && parsed.is_none() {
            return None;
        }
        Some(Intent {
            raw,
            capabilities,
            scope_mode,
            trusted,
        })
    }

    /// Whether some capability covers the tool (and operation / resource, when given). An
    /// intent with only `raw` text and no parsed capabilities restricts nothing.
    pub fn permits(&self, tool: &str, operation: Option<&str>, resource: Option<&str>) -> bool {
        if self.trusted && self.capabilities.is_empty() {
            return true;
        }
        let ok = |pattern: &Option<String>, value: Option<&str>| match (pattern, value) {
            (Some(p), Some(v)) => vm::glob_match(p, v),
            _ => true,
        };
        self.capabilities.iter().any(|c| {
            ok(&c.tool, Some(tool)) && ok(&c.operation, operation) && ok(&c.resource, resource)
        })
    }
}

/// Everything Warden keeps about one session.
#[derive(Debug, Clone)]
pub struct SessionState {
    /// Turn number: 0 before the first turn, then 1, 2, …
    pub turn: u64,
    turn_ids: imbl::HashMap<Arc<str>, u64>,
    /// Per label bit: 1 + the last turn content with that label entered the context (0: never).
    label_seen: [u64; 64],
    /// Labels of everything that entered the context in the current turn.
    pub turn_labels: u64,
    /// The provenance graph.
    pub nodes: imbl::HashMap<Arc<str>, Node>,
    /// Labels of the content of each committed step, by request id (for compaction).
    step_labels: imbl::HashMap<Arc<str>, u64>,
    slots: imbl::Vector<slots::Slot>,
    pub intent: Option<Arc<Intent>>,
    /// Committed events.
    pub events: u64,
    /// The latest event time seen, in Unix milliseconds.
    pub now_ms: i64,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            turn: 0,
            turn_ids: imbl::HashMap::new(),
            label_seen: [0; 64],
            turn_labels: 0,
            nodes: imbl::HashMap::new(),
            step_labels: imbl::HashMap::new(),
            slots: imbl::Vector::new(),
            intent: None,
            events: 0,
            now_ms: 0,
        }
    }
}

/// The event being decided, as the state sees it.
pub struct Event<'a> {
    pub method: &'a str,
    pub request_id: &'a str,
    pub payload: &'a Value,
    pub metadata: &'a Value,
    pub time_ms: Option<i64>,
}

impl SessionState {
    pub fn new(program: &Program) -> Self {
        let mut s = SessionState::default();
        s.ensure_slots(program);
        s
    }

    /// Makes room for every history slot of the program (after a policy reload, too).
    pub fn ensure_slots(&mut self, program: &Program) {
        while self.slots.len() < program.history.len() {
            self.slots.push_back(slots::Slot::default());
        }
    }

    /// Turns since a label last entered the context; infinite if it never did.
    pub fn turns_since(&self, bit: u8) -> f64 {
        match self.label_seen.get(bit as usize).copied().unwrap_or(0) {
            0 => f64::INFINITY,
            seen => self.turn.saturating_sub(seen - 1) as f64,
        }
    }

    pub fn label_seen_turn(&self, bit: u8) -> Option<u64> {
        match self.label_seen.get(bit as usize).copied().unwrap_or(0) {
            0 => None,
            seen => Some(seen - 1),
        }
    }

    pub fn intent_permits(&self, tool: &str, operation: Option<&str>, resource: Option<&str>) -> bool {
        self.intent
            .as_ref()
            .is_none_or(|i| i.permits(tool, operation, resource))
    }

    /// The node behind a carrier value: a tool argument / output / message item with a
    /// `provenance`, or a Provenance object itself.
    pub fn node_of(&self, program: &Program, v: &Val<'_>) -> Option<Node> {
        let Val::Json(json) = v else { return None };
        let prov = provenance_of(json)?;
        let id = prov.get("provenance_id").and_then(Value::as_str)?;
        match self.nodes.get(id) {
            Some(n) => Some(*n),
            None => Some(Node {
                labels: program.unknown_labels,
                origins: 0x7f,
                depth: 1,
                turn: self.turn as u32,
            }),
        }
    }

    /// The labels of a carrier; a list carries the union of its items'. `None` when the value
    /// has no provenance at all (undefined, not clean).
    pub fn labels_of(&self, program: &Program, v: &Val<'_>) -> Option<u64> {
        if let Val::Json(Value::Array(items)) = v {
            let mut any = None;
            for item in items {
                if let Some(l) = self.labels_of(program, &Val::Json(item)) {
                    any = Some(any.unwrap_or(0) | l);
                }
            }
            return any;
        }
        self.node_of(program, v).map(|n| n.labels)
    }

    pub fn history_count(&self, program: &Program, slot: u32, key: Option<&str>) -> u64 {
        let (Some(s), Some(spec)) = (self.slots.get(slot as usize), program.history.get(slot as usize)) else {
            return 0;
        };
        s.count(key, self.window_now(spec.window), spec.window)
    }

    fn window_now(&self, w: WindowSpec) -> u64 {
        match w {
            WindowSpec::LastMillis(_) => self.now_ms.max(0) as u64,
            _ => self.turn,
        }
    }

    /// Applies the event's effect on turns, intent and the provenance graph, before rules run
    /// (so rules see the content this very event brings in).
    pub fn begin_event(&mut self, program: &Program, ev: &Event<'_>, budget: &mut Budget) -> Result<(), VmError> {
        self.ensure_slots(program);
        if let Some(t) = ev.time_ms {
            self.now_ms = self.now_ms.max(t);
        }
        self.track_turn(ev);
        if matches!(ev.method, "steps/sessionStart" | "steps/agentTrigger") && self.intent.is_none() {
            if let Some(intent) = ev.payload.get("intent").and_then(Intent::from_json) {
                self.intent = Some(Arc::new(intent));
            }
        }
        self.insert_provenance(program, ev, budget)
    }

    fn track_turn(&mut self, ev: &Event<'_>) {
        let turn_id = ev
            .metadata
            .get("turn_id")
            .and_then(Value::as_str)
            .or_else(|| {
                (ev.method == "steps/turnStart")
                    .then(|| ev.payload.get("turn_id").and_then(Value::as_str))
                    .flatten()
            });
        let parent = ev.metadata.get("parent_turn_id").and_then(Value::as_str);
        let Some(turn_id) = turn_id else {
            if ev.method == "steps/turnStart" {
                self.next_turn();
            }
            return;
        };
        if self.turn_ids.contains_key(turn_id) {
            return;
        }
        // A nested turn (a subagent's) belongs to its parent's turn.
        let turn = match parent.and_then(|p| self.turn_ids.get(p)).copied() {
            Some(parent_turn) => parent_turn,
            None => {
                self.next_turn();
                self.turn
            }
        };
        self.turn_ids.insert(Arc::from(turn_id), turn);
    }

    fn next_turn(&mut self) {
        self.turn += 1;
        self.turn_labels = 0;
    }

    fn insert_provenance(&mut self, program: &Program, ev: &Event<'_>, budget: &mut Budget) -> Result<(), VmError> {
        let mut found: Vec<&Value> = Vec::new();
        collect_provenance(ev.payload, &mut found, 0);
        if found.is_empty() {
            return Ok(());
        }
        // Compaction: the summary inherits the labels of the steps it replaces.
        let compacted_labels = if ev.method == "steps/postCompact" {
            let mut l = 0u64;
            if let Some(entries) = ev.payload.get("entries_compacted").and_then(Value::as_array) {
                for e in entries {
                    l |= e
                        .as_str()
                        .and_then(|id| self.step_labels.get(id).copied())
                        .unwrap_or(program.unknown_labels);
                }
            }
            l
        } else {
            0
        };
        // Parents inside the same event are inserted first: a few passes settle any order.
        let mut pending = found;
        let mut step = 0u64;
        for _ in 0..8 {
            let mut later = Vec::new();
            for prov in pending {
                let Some(id) = prov.get("provenance_id").and_then(Value::as_str) else { continue };
                if self.nodes.contains_key(id) {
                    // Known content seen again: it is in the context now.
                    let n = self.nodes[id];
                    self.entered(n.labels);
                    step |= n.labels;
                    continue;
                }
                let parents: Vec<&str> = prov
                    .get("derived_from")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let waits = parents.iter().any(|p| {
                    !self.nodes.contains_key(*p) && later_ids(&later).all(|l| l != *p)
                });
                let _ = waits;
                let node = self.make_node(program, prov, &parents, compacted_labels, budget)?;
                self.nodes.insert(Arc::from(id), node);
                self.entered(node.labels);
                step |= node.labels;
            }
            if later.is_empty() {
                break;
            }
            pending = std::mem::take(&mut later);
        }
        if !ev.request_id.is_empty() {
            self.step_labels.insert(Arc::from(ev.request_id), step);
        }
        Ok(())
    }

    fn make_node(
        &self,
        program: &Program,
        prov: &Value,
        parents: &[&str],
        extra: u64,
        budget: &mut Budget,
    ) -> Result<Node, VmError> {
        let origin = prov.get("origin").and_then(Value::as_str).unwrap_or("");
        let mut labels = own_labels(program, self, prov, budget)? | extra;
        let mut origins = origin_bit(origin);
        let mut depth = 0u16;
        for p in parents {
            match self.nodes.get(*p) {
                Some(n) => {
                    labels |= n.labels;
                    origins |= n.origins;
                    depth = depth.max(n.depth);
                }
                // Unknown lineage is never clean.
                None => {
                    labels |= program.unknown_labels;
                    origins |= origin_bit("external");
                    depth = depth.max(1);
                }
            }
        }
        // Model output with no stated lineage carries everything the model could see this turn.
        if origin == "agent_generated" && parents.is_empty() {
            labels |= self.turn_labels;
        }
        Ok(Node {
            labels,
            origins,
            depth: depth.saturating_add(1),
            turn: self.turn.min(u32::MAX as u64) as u32,
        })
    }

    fn entered(&mut self, labels: u64) {
        self.turn_labels |= labels;
        let mut bits = labels;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            self.label_seen[b] = self.turn + 1;
            bits &= bits - 1;
        }
    }

    /// Records a step that went ahead: updates every history slot that watches its hook.
    pub fn commit_event(&mut self, program: &Program, ev: &Event<'_>, budget: &mut Budget) -> Result<(), VmError> {
        self.ensure_slots(program);
        self.events += 1;
        let Some(ids) = program.history_by_hook.get(ev.method) else {
            return Ok(());
        };
        let env = Env {
            program,
            payload: ev.payload,
            metadata: ev.metadata,
            state: self,
        };
        let mut updates: Vec<(u32, Option<String>)> = Vec::new();
        for &id in ids {
            let spec = &program.history[id as usize];
            if let Some(filter) = &spec.filter {
                if vm::run(&env, filter, budget, None)?.truth() != Some(true) {
                    continue;
                }
            }
            let key = match spec.key_past.as_slice() {
                [] => None,
                [one] => match key_of(&env, one, budget)? {
                    Some(k) => Some(k),
                    None => continue,
                },
                parts => {
                    let mut vals = Vec::new();
                    for p in parts {
                        match vm::run(&env, p, budget, None)?.to_json() {
                            Some(v) => vals.push(v),
                            None => break,
                        }
                    }
                    if vals.len() != parts.len() {
                        continue;
                    }
                    Some(crate::acs::jcs::canonicalize(&Value::Array(vals)))
                }
            };
            updates.push((id, key));
        }
        for (id, key) in updates {
            let window = program.history[id as usize].window;
            let now = self.window_now(window);
            if let Some(slot) = self.slots.get_mut(id as usize) {
                slot.add(key.as_deref(), now, window);
            }
        }
        Ok(())
    }
}

fn key_of(env: &Env<'_>, code: &Code, budget: &mut Budget) -> Result<Option<String>, VmError> {
    Ok(vm::run(env, code, budget, None)?.key_string())
}

fn later_ids<'v>(later: &'v [&'v Value]) -> impl Iterator<Item = &'v str> + 'v {
    later
        .iter()
        .filter_map(|p| p.get("provenance_id").and_then(Value::as_str))
}

/// Labels a provenance object earns by itself, from the policy's `label … when …` rules.
fn own_labels(program: &Program, state: &SessionState, prov: &Value, budget: &mut Budget) -> Result<u64, VmError> {
    let env = Env {
        program,
        payload: prov,
        metadata: &Value::Null,
        state,
    };
    let mut bits = 0u64;
    for l in &program.labels {
        if let Some(code) = &l.code {
            if vm::run(&env, code, budget, None)?.truth() == Some(true) {
                bits |= 1u64 << l.bit;
            }
        }
    }
    Ok(bits)
}

/// The labels content of unknown lineage gets: what an `external` origin would earn.
pub fn unknown_labels(program: &Program) -> u64 {
    let prov = serde_json::json!({"provenance_id": "", "origin": "external"});
    let state = SessionState::default();
    let mut budget = Budget::new(program.budget.max(1));
    own_labels(program, &state, &prov, &mut budget).unwrap_or(u64::MAX)
}

/// The Provenance object of a carrier (`{…, provenance: {…}}`), or the value itself if it is one.
fn provenance_of(v: &Value) -> Option<&Value> {
    let obj = v.as_object()?;
    if obj.contains_key("provenance_id") && obj.contains_key("origin") {
        return Some(v);
    }
    obj.get("provenance")
        .filter(|p| p.get("provenance_id").is_some())
}

/// Every Provenance-shaped object in a payload, in document order.
fn collect_provenance<'v>(v: &'v Value, out: &mut Vec<&'v Value>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            if m.get("provenance_id").is_some_and(Value::is_string) && m.get("origin").is_some_and(Value::is_string) {
                out.push(v);
                return;
            }
            for child in m.values() {
                collect_provenance(child, out, depth + 1);
            }
        }
        Value::Array(a) => {
            for child in a {
                collect_provenance(child, out, depth + 1);
            }
        }
        _ => {}
    }
}
