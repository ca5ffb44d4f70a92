//! Session state: the current turn, the provenance graph, the per-label "last entered" turn,
//! the history slots and the session's Intent. Everything a history predicate reads is kept
//! here, updated in O(1) amortised per event (O(parents) for a provenance node), so a decision
//! costs the same after ten events as after a million.
//!
//! The state is built from `imbl` persistent maps: a decision works on a cheap clone and the
//! clone replaces the session's state only if the step goes ahead (allow or modify). A denied
//! call never counts as having happened.
//!
//! Owns: storage and transactions — what a step changes, held in a [`Draft`] and applied
//! whole or as taint only. Must not know: how policy code runs. What the policy's code
//! derives from a step (the labels a provenance object earns, which history counters a step
//! moves and under which keys, a call's effect keys) is computed by the step's owner
//! (`guardian::engine`) and handed in: labels through the [`OwnLabels`] function a draft is
//! made with, counters and keys through [`Draft::set_history_updates`] and
//! [`Draft::set_effect_keys`]. The VM reads the session through `vm::Facts`, which a draft
//! implements.

mod approvals;
pub(crate) mod infer;
mod slots;
mod table;
mod user_text;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

pub use approvals::{
    Action, Approval, ApprovalNote, ApprovalStatus, Extension, Found, GrantError,
    DEFAULT_APPROVAL_EXPIRY_MS,
};
pub use slots::Counter;
pub use table::StrTable;
pub use user_text::{UserText, MAX_USER_TEXT};

use crate::acs::{fields, ids};
use crate::compile::{Program, WindowSpec};
use crate::vm::{Facts, Val, UNKNOWN_PLACE};

pub use crate::vm::Node;

/// The VM reads the session through [`Facts`]; a draft (the state as of the event being
/// decided) answers.
impl Facts for Draft<'_> {
    fn node_of(&self, program: &Program, v: &Val<'_>) -> Option<Node> {
        Draft::node_of(self, program, v)
    }
    fn place_name(&self, bit: u32) -> Option<Arc<str>> {
        self.scalars.places.get(bit as usize).cloned()
    }
    fn labels_of(&self, program: &Program, v: &Val<'_>) -> Option<u64> {
        Draft::labels_of(self, program, v)
    }
    fn infer_node(&self, program: &Program, value: &Value, labels_now: u64) -> Node {
        Draft::infer_node(self, program, value, labels_now)
    }
    fn turns_since(&self, bit: u8) -> f64 {
        Draft::turns_since(self, bit)
    }
    fn history_count(&self, program: &Program, slot: u32, key: Option<&str>) -> u64 {
        Draft::history_count(self, program, slot, key)
    }
    fn effect_state(&self, id: u32) -> Option<&'static str> {
        Draft::effect_state(self, id)
    }
    fn requested_now(&self) -> bool {
        self.requested_now
    }
    fn asked_for(&self, class: &str) -> bool {
        Draft::asked_for(self, class)
    }
    fn delegated(&self) -> bool {
        Draft::delegated(self)
    }
    fn named_objects(&self) -> u32 {
        self.scalars.objects
    }
    fn said_by_user(&self, value: &Value) -> bool {
        Draft::said_by_user(self, value)
    }
    fn turn(&self) -> u64 {
        self.scalars.turn
    }
    fn intent_declared(&self) -> bool {
        self.intent().is_some()
    }
    fn intent_raw(&self) -> Option<Arc<str>> {
        self.intent().and_then(|i| i.raw.clone())
    }
    fn intent_scope_mode(&self) -> Option<Arc<str>> {
        self.intent().and_then(|i| i.scope_mode.clone())
    }
    fn intent_parsed(&self) -> Option<Value> {
        let intent = self.intent()?;
        Some(Value::Array(
            intent
                .capabilities
                .iter()
                .map(|c| {
                    let mut m = serde_json::Map::new();
                    for (k, v) in [
                        ("tool", &c.tool),
                        ("operation", &c.operation),
                        ("resource", &c.resource),
                    ] {
                        if let Some(v) = v {
                            m.insert(k.into(), Value::String(v.clone()));
                        }
                    }
                    Value::Object(m)
                })
                .collect(),
        ))
    }
    fn intent_permits(&self, tool: &str, operation: Option<&str>, resource: Option<&str>) -> bool {
        Draft::intent_permits(self, tool, operation, resource)
    }
}

/// What the inference index files for a token of `node`'s content.
fn seen_in(node: &Node) -> infer::Seen {
    infer::Seen {
        origins: node.own_origin,
        labels_any: node.labels,
        labels_all: node.labels,
        places: node.places,
    }
}

/// What lineage inference found for a value: its sources when every token was seen, and the
/// places any token was seen at.
type Inferred = (Option<infer::Seen>, u64);

/// The node content of unknown lineage stands for: every label an `external` origin earns,
/// every origin possible, sources unknown.
fn unknown_node(program: &Program, turn: u64) -> Node {
    Node {
        labels: program.unknown_labels,
        origins: 0x7f,
        depth: 1,
        turn: turn.min(u32::MAX as u64) as u32,
        source_origins: origin_bit("external"),
        source_any: program.unknown_labels,
        source_all: program.unknown_labels,
        own_origin: origin_bit("external"),
        inferred: false,
        places: UNKNOWN_PLACE,
        source_places: UNKNOWN_PLACE,
    }
}

pub use crate::acs::fields::origin_bit;

/// One IBAC capability: globs over tool, operation and resource (absent: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub tool: Option<String>,
    pub operation: Option<String>,
    pub resource: Option<String>,
    /// For a capability an approver added (`intent_extension`): who. Kept apart from the
    /// Intent's `parser_provenance`.
    pub granted_by: Option<String>,
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

/// Why an Intent's `parsed` capabilities were refused: Warden never guesses what a capability
/// it cannot read would grant (docs/state.md, "Intent").
pub fn parse_capability(c: &Value) -> Result<Capability, String> {
    let Some(obj) = c.as_object() else {
        return Err(format!(
            "the capability {c} is not an object; write capabilities as {{\"tool\": …, \"operation\": …, \"resource\": …}}"
        ));
    };
    let mut cap = Capability {
        tool: None,
        operation: None,
        resource: None,
        granted_by: None,
    };
    for (k, v) in obj {
        let slot = match k.as_str() {
            "tool" => &mut cap.tool,
            "operation" => &mut cap.operation,
            "resource" => &mut cap.resource,
            other => {
                return Err(format!(
                    "the capability {c} has the member `{other}`, which is none of tool, operation, resource"
                ))
            }
        };
        match v {
            Value::String(s) if !s.is_empty() => *slot = Some(s.clone()),
            _ => {
                return Err(format!(
                    "the capability {c} has a `{k}` that is not a non-empty string"
                ))
            }
        }
    }
    if cap.tool.is_none() && cap.operation.is_none() && cap.resource.is_none() {
        return Err(format!(
            "the capability {c} names none of tool, operation, resource, so it would grant everything"
        ));
    }
    Ok(cap)
}

impl Intent {
    /// The Intent of a `sessionStart` / `agentTrigger` payload. `Ok(None)` when there is none;
    /// an error when `parsed` holds a capability Warden cannot read (it grants nothing).
    pub fn parse(v: &Value) -> Result<Option<Intent>, String> {
        let Some(obj) = v.as_object() else {
            return if v.is_null() {
                Ok(None)
            } else {
                Err(format!("the intent is {v}, not an object"))
            };
        };
        if let Some(parsed) = obj.get("parsed") {
            let Some(items) = parsed.as_array() else {
                return Err(format!(
                    "intent.parsed is {parsed}, not a list of capabilities"
                ));
            };
            for (i, c) in items.iter().enumerate() {
                parse_capability(c).map_err(|e| format!("intent.parsed[{i}]: {e}"))?;
            }
        }
        Ok(Intent::from_json(v))
    }

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
        let readable = parsed.is_none_or(|caps| caps.iter().all(|c| parse_capability(c).is_ok()));
        // A capability that cannot be read grants nothing, and never makes the list "empty".
        let trusted = trusted && readable;
        let capabilities = if trusted || !readable {
            // Callers refuse an unreadable capability first ([`Intent::parse`]); one that slips
            // through here is dropped, never read as "any".
            parsed
                .map(|caps| {
                    caps.iter()
                        .filter_map(|c| parse_capability(c).ok())
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
            (Some(p), Some(v)) => crate::vm::glob_match(p, v),
            _ => true,
        };
        self.capabilities.iter().any(|c| {
            ok(&c.tool, Some(tool)) && ok(&c.operation, operation) && ok(&c.resource, resource)
        })
    }
}

/// The per-session facts that change with nearly every event: small, copied into each draft.
/// (What changes a few entries at a time in large tables is `Recent`, which a draft does
/// not copy.)
#[derive(Debug, Clone, PartialEq)]
pub struct Scalars {
    /// Turn number: 0 before the first turn, then 1, 2, …
    pub turn: u64,
    /// Labels of everything that entered the context in the current turn.
    pub turn_labels: u64,
    /// Labels of everything that ever entered the context (what a subagent's summary carries
    /// back to its parent).
    pub session_labels: u64,
    /// The latest event time seen, in Unix milliseconds.
    pub now_ms: i64,
    pub intent: Option<Arc<Intent>>,
    /// The classes of action the user's own words asked for in this session (the Intent's
    /// `raw`, the user's messages), as `actions::requested_classes` bits: what
    /// `requested(class)` and `delegated()` read.
    pub asked: u16,
    /// The kinds of thing the user's own words named (the same texts, as
    /// `actions::named_objects` bits): what `requested_object()` reads.
    pub objects: u32,
    /// The places content was read at in this session (`read_at`), by bit: the destination
    /// arguments of calls whose results came back, lower-cased, in order of first use; at
    /// most [`MAX_PLACES`] (past them a place reads as [`UNKNOWN_PLACE`]).
    pub places: Arc<Vec<Arc<str>>>,
    /// The places of everything that entered the context this turn.
    pub turn_places: u64,
    /// Everything the user said (the Intent's `raw`, `user_input` content), each piece cut to
    /// its letters and digits, lower-cased, pieces apart: what `found_in(x, user_input)`
    /// searches for `x` as one contiguous run (`infer::compact`, `user_text.rs`).
    user_text: UserText,
}

/// How many requested calls are remembered until their results come back.
pub const REQUESTED_CALLS: usize = 16;

/// The most places a session names (`read_at`); bit 63 is [`UNKNOWN_PLACE`].
pub const MAX_PLACES: usize = 63;

/// The most destination values of one call that name the places its result is read at.
const PLACES_PER_CALL: usize = 8;

/// The per-session facts kept in tables of fixed size, each step changing an entry or two:
/// 1.2 KB a session, which a draft does not copy (it holds [`RecentChanges`]).
#[derive(Debug, Clone, PartialEq)]
struct Recent {
    /// Per label bit: 1 + the last turn content with that label entered the context (0: never).
    label_seen: [u64; 64],
    /// The request ids (as 128 bits) of the latest calls the user requested (every
    /// destination and identifier argument found in the user's request); what
    /// `requested_by_user()` reads when their results come back.
    requested: Ring<u128>,
    /// The place bits of the latest calls, by request id (what their results were read at).
    placed: Ring<(u128, u64)>,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            label_seen: [0; 64],
            requested: Ring::default(),
            placed: Ring::default(),
        }
    }
}

/// The latest [`REQUESTED_CALLS`] entries (calls in flight), the next overwriting the oldest.
#[derive(Debug, Clone, Default, PartialEq)]
struct Ring<T> {
    slots: [T; REQUESTED_CALLS],
    next: usize,
}

impl<T: Copy> Ring<T> {
    fn push(&mut self, entry: T) {
        self.slots[self.next] = entry;
        self.next = (self.next + 1) % REQUESTED_CALLS;
    }

    /// The entries newest first, as they read with `pending` pushed (which pushes the oldest
    /// out).
    fn newest_first(&self, pending: Option<T>) -> impl Iterator<Item = T> + '_ {
        let kept = REQUESTED_CALLS - usize::from(pending.is_some());
        pending.into_iter().chain(
            (1..=kept).map(move |back| {
                self.slots[(self.next + REQUESTED_CALLS - back) % REQUESTED_CALLS]
            }),
        )
    }
}

/// What one step changes of [`Recent`]: the labels that entered (at the step's turn), and the
/// one requested call and the one call's places it adds to the rings (a step is one call).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct RecentChanges {
    entered: u64,
    requested: Option<u128>,
    placed: Option<(u128, u64)>,
}

impl Recent {
    /// Whether call `id` is among the latest calls the user requested, with `changes` made.
    fn requested(&self, changes: &RecentChanges, id: u128) -> bool {
        self.requested
            .newest_first(changes.requested)
            .any(|r| r == id)
    }

    /// The place bits of call `id` among the latest calls, newest first (0: not among them),
    /// with `changes` made.
    fn call_places(&self, changes: &RecentChanges, id: u128) -> u64 {
        self.placed
            .newest_first(changes.placed)
            .find(|(c, _)| *c == id)
            .map_or(0, |(_, bits)| bits)
    }

    /// Makes a step's changes, the labels entering at `turn`.
    fn apply(&mut self, changes: &RecentChanges, turn: u64) {
        let mut bits = changes.entered;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            self.label_seen[b] = turn + 1;
            bits &= bits - 1;
        }
        if let Some(id) = changes.requested {
            self.requested.push(id);
        }
        if let Some(entry) = changes.placed {
            self.placed.push(entry);
        }
    }
}

impl Default for Scalars {
    fn default() -> Self {
        Scalars {
            turn: 0,
            turn_labels: 0,
            session_labels: 0,
            now_ms: 0,
            intent: None,
            asked: 0,
            objects: 0,
            places: Arc::new(Vec::new()),
            turn_places: 0,
            user_text: UserText::default(),
        }
    }
}

/// Everything Warden keeps about one session.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    pub scalars: Scalars,
    recent: Recent,
    /// Lineage inference (`infer.rs`): each token of the content that entered the session,
    /// with where it appeared.
    /// Keyed by the token's 64-bit hash (`infer::token_key`), not its text, in a flat map
    /// shared copy-on-write (a snapshot shares it; the next commit copies it only if a snapshot
    /// is still alive): the index is most of a long session's memory.
    tokens: Arc<infer::TokenIndex>,
    /// The token index went over its cap: inference answers "unknown" from then on.
    tokens_full: bool,
    /// Turn ids and their turn numbers (`table.rs`: flat, copied on write after a clone).
    turn_ids: StrTable<u64>,
    /// The provenance graph, by provenance id (`table.rs`).
    pub nodes: StrTable<Node>,
    /// Labels of the content of each committed step, keyed by the request id (a uuid) as 128
    /// bits: 24 bytes a step, no allocation. Compaction names steps by request id.
    step_labels: table::IdTable<u64>,
    slots: imbl::Vector<slots::Slot>,
    /// Committed events.
    pub events: u64,
    /// Each effect key's state (docs/effects.md). Keys are RFC 8785 JSON of
    /// `[effect name, key values]`.
    effects: imbl::HashMap<Arc<str>, EffectEntry>,
    /// Reservations awaiting their toolCallResult: request id → (effect key,
    /// `not_executed_on_error`).
    effect_requests: imbl::HashMap<Arc<str>, Reservation>,
    /// Approvals by the request id of the `ask` that opened them (`approvals.rs`).
    approvals: imbl::HashMap<Arc<str>, Arc<Approval>>,
    /// Granted approvals by action kind: what a call of that kind may consume or mismatch.
    granted: imbl::HashMap<Arc<str>, imbl::Vector<Arc<str>>>,
    /// Approval ids in the order their asks came: the oldest are dropped once expired.
    approval_order: imbl::Vector<Arc<str>>,
    /// For a subagent's session: the effect keys it changed since it was spawned (what its
    /// `subagentStop` carries back to the parent). `None` for a top-level session.
    effects_changed: Option<imbl::HashSet<Arc<str>>>,
}

/// A pending reservation: the effect key, and whether the effect is `not_executed_on_error`.
type Reservation = (Arc<str>, bool);

/// One effect key's entry: its state, and when and under which lease it was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectEntry {
    pub status: EffectStatus,
    /// The turn and time of the reservation.
    pub turn: u64,
    pub at_ms: i64,
    pub lease_turns: Option<u64>,
    pub lease_ms: Option<u64>,
}

impl EffectEntry {
    /// The state as read now: a reservation past its lease is ambiguous (the result may
    /// never come, and the tool may have acted).
    pub fn status_at(&self, s: &Scalars) -> EffectStatus {
        let lapsed = self
            .lease_turns
            .is_some_and(|n| s.turn.saturating_sub(self.turn) >= n)
            || self
                .lease_ms
                .is_some_and(|ms| s.now_ms.saturating_sub(self.at_ms) >= ms as i64);
        if self.status == EffectStatus::Reserved && lapsed {
            EffectStatus::Ambiguous
        } else {
            self.status
        }
    }
}

/// The state of one effect key (docs/effects.md). No entry is `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EffectStatus {
    Reserved,
    Committed,
    Failed,
    Ambiguous,
}

impl EffectStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EffectStatus::Reserved => "reserved",
            EffectStatus::Committed => "committed",
            EffectStatus::Failed => "failed",
            EffectStatus::Ambiguous => "ambiguous",
        }
    }

    pub fn parse(s: &str) -> Option<EffectStatus> {
        Some(match s {
            "reserved" => EffectStatus::Reserved,
            "committed" => EffectStatus::Committed,
            "failed" => EffectStatus::Failed,
            "ambiguous" => EffectStatus::Ambiguous,
            _ => return None,
        })
    }

    /// How strongly a state holds a call back, for `effect_state()` over several effects.
    fn weight(s: Option<EffectStatus>) -> u8 {
        match s {
            None => 0,
            Some(EffectStatus::Failed) => 1,
            Some(EffectStatus::Reserved) => 2,
            Some(EffectStatus::Committed) => 3,
            Some(EffectStatus::Ambiguous) => 4,
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
    /// Labels every piece of content in this event inherits besides its own lineage: for
    /// `subagentStop`, everything that entered the subagent's context.
    pub extra_labels: u64,
    /// The method the event arrived as, when it is decided as another: a wrapped MCP
    /// `protocols/MCP/tools/call` is decided as the `steps/toolCallRequest` it is, and the rules
    /// written for either hook run.
    pub wrapped_method: Option<&'static str>,
}

/// A decision's view of the session: the committed state, read-only, plus what the event
/// being decided changes. Nothing is copied from the committed maps, so a decision costs the
/// same whatever the session's length; the changes are applied with
/// [`SessionState::apply`] only if the step goes ahead.
#[derive(Debug)]
pub struct Draft<'a> {
    base: &'a SessionState,
    /// The labels a provenance object earns by itself (the policy's `label … when …`
    /// conditions), evaluated by the step's owner.
    own_labels: OwnLabels,
    pub scalars: Scalars,
    recent: RecentChanges,
    new_turn: Option<(Arc<str>, u64)>,
    new_nodes: Vec<(Arc<str>, Node)>,
    step: Option<(u128, u64)>,
    slot_updates: Vec<(u32, Option<String>)>,
    /// The effect keys of the call being decided: (effect id, key).
    effect_keys: Vec<(u32, Arc<str>, bool)>,
    effect_changes: Vec<(Arc<str>, EffectEntry)>,
    request_changes: Vec<(Arc<str>, Option<Reservation>)>,
    /// Why this event's Intent was refused (a capability Warden cannot read), if it was.
    pub intent_refused: Option<String>,
    /// Tokens this event's content adds to the inference index.
    new_tokens: Vec<(u64, infer::Seen)>,
    /// This event is the result of a call the user requested (`requested_by_user()`).
    requested_now: bool,
    /// The places this event's content (a call's result) was read at (`read_at`).
    result_places: u64,
    /// Inferred sources of the string values looked up in this decision. Valid while the
    /// token index does not change, which it does only before the rules run.
    infer_cache: std::cell::RefCell<HashMap<Box<str>, Inferred>>,
}

/// The labels a provenance object (`prov`) earns by itself under the policy's `label … when …`
/// conditions, read against the draft; `None` when they cannot be computed (the node then
/// gets the labels of unknown lineage). The step's owner supplies it: the conditions are
/// policy code, which `state` does not run.
pub type OwnLabels = fn(&Program, &Draft<'_>, &Value) -> Option<u64>;

/// For a view that reads counters and nodes only: no label condition is evaluated.
fn no_label_conditions(_: &Program, _: &Draft<'_>, _: &Value) -> Option<u64> {
    None
}

/// A draft's changes, detached from the state they were computed against.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    scalars: Scalars,
    recent: RecentChanges,
    new_turn: Option<(Arc<str>, u64)>,
    new_nodes: Vec<(Arc<str>, Node)>,
    step: Option<(u128, u64)>,
    slot_updates: Vec<(u32, Option<String>)>,
    effect_changes: Vec<(Arc<str>, EffectEntry)>,
    request_changes: Vec<(Arc<str>, Option<Reservation>)>,
    new_tokens: Vec<(u64, infer::Seen)>,
}

impl SessionState {
    /// An operator's resolution of an effect key: `committed` or `failed`. Returns the state
    /// it had, or `None` (and changes nothing) if the key is unknown.
    pub fn resolve_effect(&mut self, key: &str, to: EffectStatus) -> Option<EffectStatus> {
        let mut entry = *self.effects.get(key)?;
        let was = entry.status_at(&self.scalars);
        entry.status = to;
        self.set_effect(Arc::from(key), entry);
        Some(was)
    }

    fn set_effect(&mut self, key: Arc<str>, entry: EffectEntry) {
        if let Some(changed) = &mut self.effects_changed {
            changed.insert(key.clone());
        }
        self.effects.insert(key, entry);
    }

    /// A subagent's effect keys changed since it was spawned, with their entries.
    pub fn changed_effects(&self) -> Vec<(Arc<str>, EffectEntry)> {
        let Some(changed) = &self.effects_changed else {
            return Vec::new();
        };
        changed
            .iter()
            .filter_map(|k| Some((k.clone(), *self.effects.get(k)?)))
            .collect()
    }

    /// Takes a finished subagent's effect changes into this (its parent's) session, so the
    /// parent's later calls see what the subagent reserved, committed or left ambiguous.
    pub fn merge_effects(&mut self, entries: &[(Arc<str>, EffectEntry)]) {
        for (key, entry) in entries {
            self.set_effect(key.clone(), *entry);
        }
    }

    /// An effect key's state as read now (`None`: none).
    pub fn effect_status(&self, key: &str) -> Option<EffectStatus> {
        self.effects.get(key).map(|e| e.status_at(&self.scalars))
    }

    /// Every effect key and its state as read now, sorted by key.
    pub fn effect_states(&self) -> Vec<(String, EffectStatus)> {
        let mut out: Vec<_> = self
            .effects
            .iter()
            .map(|(k, e)| (k.to_string(), e.status_at(&self.scalars)))
            .collect();
        out.sort();
        out
    }

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

    pub fn turn(&self) -> u64 {
        self.scalars.turn
    }

    /// Distinct keys over all keyed history counters, effect keys and approvals (what `warden
    /// serve` caps per session).
    /// Effect keys and approvals count too: each is one entry a client can make the session
    /// keep.
    pub fn history_keys(&self) -> usize {
        self.slots.iter().map(slots::Slot::key_count).sum::<usize>()
            + self.effects.len()
            + self.approvals.len()
    }

    pub fn intent(&self) -> Option<&Arc<Intent>> {
        self.scalars.intent.as_ref()
    }

    /// A read-only view with no changes, for reading counters, turns and nodes. It evaluates
    /// no label condition: a provenance object outside the graph reads as unknown lineage.
    /// A step works on [`Draft::new`] with the policy's label conditions.
    pub fn view(&self) -> Draft<'_> {
        Draft::new(self, no_label_conditions)
    }

    pub fn turns_since(&self, bit: u8) -> f64 {
        self.view().turns_since(bit)
    }

    /// The tool arguments of a call whose provenance claims the user wrote them and whose value
    /// is not found in what the user said, each as the JSON pointer of what is not believed
    /// (docs/state.md, "Declared claims"). A claim is a platform's word; the text is the
    /// evidence. Two kinds of claim:
    /// - `origin: user_input` (on the argument or on an element of a list argument) for a value
    ///   not found as inference matches it: the pointer names the provenance record, whose
    ///   origin then reads as `agent_generated`;
    /// - lineage naming only the user's own messages (`derived_from` whose every parent is
    ///   `user_input` content) for a value the user never said, some of which other content
    ///   holds:
    ///   the pointer names the `derived_from`, which is then dropped, so the value's sources are
    ///   inferred like those of any value sent without lineage. (A value none of whose tokens
    ///   other content holds, such as an amount the model computed, keeps its lineage.)
    pub fn unverified_claims(&self, method: &str, payload: &Value) -> Vec<String> {
        self.view().unverified_claims(method, payload)
    }

    /// How many distinct tokens the lineage-inference index holds (`infer.rs`).
    pub fn indexed_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn history_count(&self, program: &Program, slot: u32, key: Option<&str>) -> u64 {
        self.view().history_count(program, slot, key)
    }

    /// Keeps what a draft computed: the step went ahead. In place, so the committed maps are
    /// never copied.
    pub fn apply(&mut self, program: &Program, changes: Changes) {
        self.ensure_slots(program);
        self.events += 1;
        for (id, key) in &changes.slot_updates {
            let Some(spec) = program.history.get(*id as usize) else {
                continue;
            };
            let now = window_now(&changes.scalars, spec.window);
            if let Some(slot) = self.slots.get_mut(*id as usize) {
                slot.add(key.as_deref(), now, spec.window);
            }
        }
        self.recent.apply(&changes.recent, changes.scalars.turn);
        self.scalars = changes.scalars;
        // In place: the old scalars, which shared the text, were just dropped.
        self.scalars.user_text.settle();
        if let Some((id, turn)) = changes.new_turn {
            self.turn_ids.insert(&id, turn);
        }
        for (id, node) in changes.new_nodes {
            self.nodes.insert(&id, node);
        }
        if !changes.new_tokens.is_empty() && !self.tokens_full {
            let tokens = Arc::make_mut(&mut self.tokens);
            for (token, seen) in changes.new_tokens {
                let merged = match tokens.get(&token) {
                    Some(old) => old.merge(seen),
                    None => {
                        if tokens.len() >= infer::MAX_TOKENS {
                            // Over the cap: fail closed from here on.
                            self.tokens_full = true;
                            break;
                        }
                        seen
                    }
                };
                tokens.insert(token, merged);
            }
            if self.tokens_full {
                self.tokens = Arc::default();
            }
        }
        if let Some((id, labels)) = changes.step {
            self.step_labels.insert(id, labels);
        }
        for (key, entry) in changes.effect_changes {
            self.set_effect(key, entry);
        }
        for (id, entry) in changes.request_changes {
            match entry {
                Some(e) => {
                    self.effect_requests.insert(id, e);
                }
                None => {
                    self.effect_requests.remove(&id);
                }
            }
        }
    }

    /// Keeps only the content of a step whose decision failed ([`Draft::into_taint_changes`]):
    /// it is not counted as a committed event.
    pub fn apply_taint(&mut self, program: &Program, changes: Changes) {
        let events = self.events;
        self.apply(program, changes);
        self.events = events;
    }

    /// The starting state of a subagent spawned from this session: it sees the parent's
    /// provenance graph and labels (its context starts as the parent's), and the intent the
    /// spawn derives for it.
    pub fn child(&self, intent: Option<Arc<Intent>>) -> SessionState {
        let mut child = self.clone();
        child.turn_ids = StrTable::default();
        child.slots = imbl::Vector::new();
        child.events = 0;
        child.scalars.intent = intent;
        // An approval is for the parent's own call.
        child.approvals = imbl::HashMap::new();
        child.granted = imbl::HashMap::new();
        child.approval_order = imbl::Vector::new();
        child.effects_changed = Some(imbl::HashSet::new());
        child
    }

    /// The intent a `subagentStart` payload derives for the child.
    pub fn child_intent(&self, payload: &Value) -> Option<Arc<Intent>> {
        let own = payload
            .get("subagent_intent")
            .and_then(Intent::from_json)
            .map(Arc::new);
        match payload.get("intent_derivation").and_then(Value::as_str) {
            Some("fresh") => own,
            Some("inherit_full") | None => self.scalars.intent.clone(),
            // A subset or a derivation may only narrow: without a stated child intent, the
            // parent's applies.
            _ => own.or_else(|| self.scalars.intent.clone()),
        }
    }
}

fn window_now(s: &Scalars, w: WindowSpec) -> u64 {
    match w {
        WindowSpec::LastMillis(_) => s.now_ms.max(0) as u64,
        _ => s.turn,
    }
}

impl<'a> Draft<'a> {
    /// A draft over `base`; `own_labels` evaluates the policy's label conditions for the
    /// provenance nodes the step brings in.
    pub fn new(base: &'a SessionState, own_labels: OwnLabels) -> Self {
        Draft {
            base,
            own_labels,
            scalars: base.scalars.clone(),
            recent: RecentChanges::default(),
            new_turn: None,
            new_nodes: Vec::new(),
            step: None,
            slot_updates: Vec::new(),
            effect_keys: Vec::new(),
            effect_changes: Vec::new(),
            request_changes: Vec::new(),
            intent_refused: None,
            new_tokens: Vec::new(),
            requested_now: false,
            result_places: 0,
            infer_cache: Default::default(),
        }
    }

    /// The effect keys of the toolCallRequest being decided, as (effect id, key, whether a
    /// failure or timeout means it did not run), for `effect_state` and
    /// [`Draft::record_effects`].
    pub fn set_effect_keys(&mut self, keys: Vec<(u32, Arc<str>, bool)>) {
        self.effect_keys = keys;
    }

    fn effect_entry(&self, key: &str) -> Option<EffectEntry> {
        self.effect_changes
            .iter()
            .rev()
            .find(|(k, _)| &**k == key)
            .map(|(_, e)| *e)
            .or_else(|| self.base.effects.get(key).copied())
    }

    fn effect_status(&self, key: &str) -> Option<EffectStatus> {
        self.effect_entry(key).map(|e| e.status_at(&self.scalars))
    }

    /// `effect_state(NAME)` (`u32::MAX`: the strongest state over the call's effects):
    /// undefined if the call has no such effect key.
    pub fn effect_state(&self, id: u32) -> Option<&'static str> {
        let mut best: Option<Option<EffectStatus>> = None;
        for (i, key, _) in &self.effect_keys {
            if id != u32::MAX && *i != id {
                continue;
            }
            let s = self.effect_status(key);
            if best.is_none_or(|b| EffectStatus::weight(s) > EffectStatus::weight(b)) {
                best = Some(s);
            }
        }
        best.map(|s| s.map_or("none", EffectStatus::as_str))
    }

    /// The approvals a tool call the policy would ask about finds (at the event's time).
    pub fn find_approval(&self, action: &Action) -> Found {
        self.base.find_approval(action, self.scalars.now_ms)
    }

    /// For a step that goes ahead: an allowed toolCallRequest reserves its effect keys; a
    /// toolCallResult moves the reservation it answers (`request_id_ref`) to its outcome.
    /// For a result (when the policy declares effects), returns what it settled, for the
    /// audit entry: `{request_id_ref, key, from, to}`, or `{request_id_ref, matched: false}`.
    pub fn record_effects(&mut self, program: &Program, ev: &Event<'_>) -> Option<Value> {
        match ev.method {
            "steps/toolCallRequest" => {
                for (id, key, neoe) in std::mem::take(&mut self.effect_keys) {
                    let spec = program.effects.get(id as usize);
                    let entry = EffectEntry {
                        status: EffectStatus::Reserved,
                        turn: self.scalars.turn,
                        at_ms: self.scalars.now_ms,
                        lease_turns: spec.and_then(|s| s.lease_turns),
                        lease_ms: spec.and_then(|s| s.lease_ms),
                    };
                    self.effect_changes.push((key.clone(), entry));
                    self.request_changes
                        .push((Arc::from(ev.request_id), Some((key, neoe))));
                }
                None
            }
            "steps/toolCallResult" if !program.effects.is_empty() => {
                let r = ev.payload.get("request_id_ref").and_then(Value::as_str);
                let unmatched = || Some(serde_json::json!({"request_id_ref": r, "matched": false}));
                let Some(r) = r else {
                    return unmatched();
                };
                let Some((key, neoe)) = self.base.effect_requests.get(r).cloned() else {
                    return unmatched();
                };
                let status = ev.payload.get("exit_status").and_then(Value::as_str);
                let to = match status {
                    Some("success") => EffectStatus::Committed,
                    Some("blocked") => EffectStatus::Failed,
                    Some("failure" | "timeout") if neoe => EffectStatus::Failed,
                    _ => EffectStatus::Ambiguous,
                };
                // Only a reservation moves: an operator may have resolved the key meanwhile.
                // (A late result, after the lease made the key ambiguous, still settles it.)
                let mut outcome = serde_json::json!({"request_id_ref": r, "key": &*key});
                if let Some(mut entry) = self.effect_entry(&key) {
                    let from = entry.status_at(&self.scalars);
                    outcome["from"] = Value::String(from.as_str().into());
                    if entry.status == EffectStatus::Reserved {
                        entry.status = to;
                        self.effect_changes.push((key, entry));
                    }
                    outcome["to"] = Value::String(entry.status.as_str().into());
                }
                self.request_changes.push((Arc::from(r), None));
                Some(outcome)
            }
            _ => None,
        }
    }

    /// What a step whose decision failed still leaves behind: its content, with the labels it
    /// earned, and the turn it came in. A decision failure never drops taint, whatever the
    /// answer was (a platform may run the step anyway); history counters and effect keys, which
    /// only a decided step moves, are left out.
    pub fn into_taint_changes(self) -> Changes {
        Changes {
            scalars: self.scalars,
            recent: self.recent,
            new_turn: self.new_turn,
            new_nodes: self.new_nodes,
            step: self.step,
            slot_updates: Vec::new(),
            effect_changes: Vec::new(),
            request_changes: Vec::new(),
            new_tokens: self.new_tokens,
        }
    }

    pub fn into_changes(self) -> Changes {
        Changes {
            scalars: self.scalars,
            recent: self.recent,
            new_turn: self.new_turn,
            new_nodes: self.new_nodes,
            step: self.step,
            slot_updates: self.slot_updates,
            effect_changes: self.effect_changes,
            request_changes: self.request_changes,
            new_tokens: self.new_tokens,
        }
    }

    /// For a step that goes ahead: the history counters it adds to, as (slot, key), kept
    /// when the draft's changes are applied.
    pub fn set_history_updates(&mut self, updates: Vec<(u32, Option<String>)>) {
        self.slot_updates = updates;
    }

    pub fn intent(&self) -> Option<&Arc<Intent>> {
        self.scalars.intent.as_ref()
    }

    fn node(&self, id: &str) -> Option<Node> {
        self.new_nodes
            .iter()
            .rev()
            .find(|(k, _)| &**k == id)
            .map(|(_, n)| *n)
            .or_else(|| self.base.nodes.get(id).copied())
    }

    fn has_turn(&self, id: &str) -> Option<u64> {
        match &self.new_turn {
            Some((k, t)) if &**k == id => Some(*t),
            _ => self.base.turn_ids.get(id).copied(),
        }
    }

    /// Turns since a label last entered the context; infinite if it never did.
    pub fn turns_since(&self, bit: u8) -> f64 {
        let seen = match self.recent.entered.checked_shr(u32::from(bit)) {
            Some(b) if b & 1 == 1 => self.scalars.turn + 1,
            _ => self
                .base
                .recent
                .label_seen
                .get(bit as usize)
                .copied()
                .unwrap_or(0),
        };
        match seen {
            0 => f64::INFINITY,
            seen => self.scalars.turn.saturating_sub(seen - 1) as f64,
        }
    }

    pub fn intent_permits(
        &self,
        tool: &str,
        operation: Option<&str>,
        resource: Option<&str>,
    ) -> bool {
        self.scalars
            .intent
            .as_ref()
            .is_none_or(|i| i.permits(tool, operation, resource))
    }

    /// The node behind a carrier value: a tool argument / output / message item with a
    /// `provenance`, or a Provenance object itself. Unknown ids get the unknown labels.
    pub fn node_of(&self, program: &Program, v: &Val<'_>) -> Option<Node> {
        let json = v.carrier_json()?;
        if let Some(value) = json.get("value") {
            let prov = json.get("provenance");
            let declared = prov
                .and_then(|p| p.get("derived_from"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            let origin = prov.and_then(|p| p.get("origin")).and_then(Value::as_str);
            if !declared && matches!(origin, None | Some("agent_generated")) {
                let known = prov
                    .and_then(|p| p.get("provenance_id"))
                    .and_then(Value::as_str)
                    .and_then(|id| self.node(id));
                let labels_now = known.map_or(self.scalars.turn_labels, |n| n.labels);
                return Some(self.infer_node(program, value, labels_now));
            }
        }
        let Some(prov) = provenance_of(json) else {
            // A carrier (`{value, …}`) with no provenance at all: unknown lineage, never clean.
            return json
                .get("value")
                .map(|_| unknown_node(program, self.scalars.turn));
        };
        let Some(id) = prov.get("provenance_id").and_then(Value::as_str) else {
            // A provenance without an id is not in the graph: read it as it stands (its origin
            // and parents), as it would have been had it had an id.
            let parents: Vec<&str> = fields::member(prov, "derived_from")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            return Some(self.make_node(program, prov, &parents, 0));
        };
        Some(
            self.node(id)
                .unwrap_or_else(|| unknown_node(program, self.scalars.turn)),
        )
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
        let (Some(s), Some(spec)) = (
            self.base.slots.get(slot as usize),
            program.history.get(slot as usize),
        ) else {
            return 0;
        };
        s.count(key, window_now(&self.scalars, spec.window), spec.window)
    }

    /// Applies the event's effect on turns, intent and the provenance graph, before rules run
    /// (so rules see the content this very event brings in).
    pub fn begin_event(&mut self, program: &Program, ev: &Event<'_>) {
        if let Some(t) = ev.time_ms {
            self.scalars.now_ms = self.scalars.now_ms.max(t);
        }
        self.track_turn(ev);
        if matches!(ev.method, "steps/sessionStart" | "steps/agentTrigger")
            && self.scalars.intent.is_none()
        {
            match ev.payload.get("intent").map(Intent::parse) {
                Some(Ok(Some(intent))) => self.scalars.intent = Some(Arc::new(intent)),
                Some(Err(why)) => {
                    // Refused: the session's intent grants nothing from here on.
                    self.scalars.intent = Some(Arc::new(Intent {
                        raw: ev
                            .payload
                            .pointer("/intent/raw")
                            .and_then(Value::as_str)
                            .map(Arc::from),
                        capabilities: Vec::new(),
                        scope_mode: Some(Arc::from("strict")),
                        trusted: false,
                    }));
                    self.intent_refused = Some(why);
                }
                _ => {}
            }
        }
        self.note_asked(ev);
        match ev.method {
            "steps/toolCallRequest" => {
                if program.reads_requested {
                    self.note_requested(program, ev);
                }
                if program.reads_places {
                    self.note_places(program, ev);
                }
            }
            "steps/toolCallResult" => {
                let call = ev
                    .payload
                    .get("request_id_ref")
                    .and_then(Value::as_str)
                    .and_then(ids::uuid_bits)
                    .filter(|id| *id != 0);
                let recent = &self.base.recent;
                self.requested_now = call.is_some_and(|id| recent.requested(&self.recent, id));
                self.result_places = call.map_or(0, |id| recent.call_places(&self.recent, id));
            }
            _ => {}
        }
        self.insert_provenance(program, ev);
    }

    /// Reads the classes of action the user's words ask for (`actions::requested_classes`) and
    /// the kinds of thing they name (`actions::named_objects`):
    /// the Intent's `raw` at `sessionStart` / `agentTrigger`, and each text part of a user
    /// message whose provenance (completed: `acs::payload`) says `user_input`. O(words).
    fn note_asked(&mut self, ev: &Event<'_>) {
        let mut read = |text: &str| {
            let (asked, objects) = crate::actions::read_request(text);
            self.scalars.asked |= asked;
            self.scalars.objects |= objects;
        };
        match ev.method {
            "steps/sessionStart" | "steps/agentTrigger" => {
                if let Some(raw) =
                    fields::at(ev.payload, &["intent", "raw"]).and_then(Value::as_str)
                {
                    read(raw);
                }
            }
            "steps/userMessage" => {
                let items = fields::member(ev.payload, "content").and_then(Value::as_array);
                for item in items.into_iter().flatten() {
                    let origin =
                        fields::at(item, &["provenance", "origin"]).and_then(Value::as_str);
                    if let (Some("user_input"), Some(text)) =
                        (origin, item.get("value").and_then(Value::as_str))
                    {
                        read(text);
                    }
                }
            }
            _ => {}
        }
    }

    /// Adds what the user said to the text `found_in(x, user_input)` searches (every string and
    /// number in `value`, compacted).
    fn note_user_text(&mut self, value: &Value) {
        let mut pieces = Vec::new();
        infer::compact_leaves(value, &mut pieces, 0);
        self.scalars.user_text.add(&pieces);
    }

    /// Whether every string and number in `value` occurs in what the user said as one
    /// contiguous run, once both are cut to their lower-cased letters and digits (a URL's
    /// scheme, `www.` and trailing `/` aside): `DE89 3704 0044 0532 0130 99` is not in a message
    /// that said `… 0130 00`, nor is a reordered IBAN. A value with no letter or digit is not.
    pub fn said_by_user(&self, value: &Value) -> bool {
        let text = &self.scalars.user_text;
        crate::text::all_compact_leaves(value, &mut String::new(), &mut |p| {
            !p.is_empty() && text.contains(p)
        })
    }

    /// [`SessionState::unverified_claims`], read on a draft that has taken no content in yet
    /// (its state is the session's as committed).
    pub fn unverified_claims(&self, method: &str, payload: &Value) -> Vec<String> {
        if method != "steps/toolCallRequest" {
            return Vec::new();
        }
        self.unverified_claims_of(&crate::acs::payload::carriers(method, payload))
    }

    /// [`Draft::unverified_claims`] of a toolCallRequest's payload, given its carriers.
    pub fn unverified_claims_of(
        &self,
        carriers: &[crate::acs::payload::Carrier<'_>],
    ) -> Vec<String> {
        let mut claims = Vec::new();
        for c in carriers {
            if c.origin == "user_input" {
                continue;
            }
            let (Some(prov), Some(value)) = (
                fields::member(c.item, "provenance"),
                fields::member(c.item, "value"),
            ) else {
                continue;
            };
            if let Some(k) = self.unbelieved(prov, value) {
                claims.push(format!("{}/provenance{k}", c.pointer()));
            }
            if let (Some(Value::Array(elements)), Value::Array(values)) =
                (fields::member(prov, "elements"), value)
            {
                for (i, (e, v)) in elements.iter().zip(values).enumerate() {
                    if let Some(k) = self.unbelieved(e, v) {
                        claims.push(format!("{}/provenance/elements/{i}{k}", c.pointer()));
                    }
                }
            }
        }
        claims
    }

    /// What of a provenance record's claim about the user the text does not bear out
    /// (`SessionState::unverified_claims`): `Some("")` for its origin, `Some("/derived_from")`
    /// for lineage naming only the user's messages; `None` when nothing is claimed or the claim
    /// holds.
    fn unbelieved(&self, prov: &Value, value: &Value) -> Option<&'static str> {
        let user = origin_bit("user_input");
        if fields::member(prov, "origin").and_then(Value::as_str) == Some("user_input") {
            let found = self
                .infer_sources(value)
                .0
                .is_some_and(|s| s.origins & user != 0);
            // The index first: it rules most unfounded claims out in a few look-ups, where the
            // text search would read everything the user said.
            return (!found || !self.said_by_user(value)).then_some("");
        }
        let parents = fields::member(prov, "derived_from").and_then(Value::as_array)?;
        let only_user = !parents.is_empty()
            && parents.iter().all(|p| {
                p.as_str()
                    .and_then(|id| self.node(id))
                    .is_some_and(|n| n.own_origin == user)
            });
        // The index before the text: most values are ruled out in a few look-ups, where the
        // text search would read everything the user said.
        (only_user && self.seen_elsewhere(value) && !self.said_by_user(value))
            .then_some("/derived_from")
    }

    /// Whether some token of `value` entered the session in content the user did not write
    /// (or the index is full, and nothing can be ruled out).
    fn seen_elsewhere(&self, value: &Value) -> bool {
        let user = origin_bit("user_input");
        let keys = infer::value_token_keys(value);
        self.base.tokens_full
            || keys.iter().any(|&key| {
                self.new_tokens
                    .iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, s)| *s)
                    .chain(self.base.tokens.get(&key).copied())
                    .any(|s| s.origins & !user != 0)
            })
    }

    /// Whether the user's words asked for an action of this class (`actions::admits`).
    pub fn asked_for(&self, class: &str) -> bool {
        crate::actions::admits(self.scalars.asked, class)
    }

    /// Whether the user's words handed the choice of actions to content.
    pub fn delegated(&self) -> bool {
        self.scalars.asked & crate::actions::DELEGATES != 0
    }

    /// Whether the event being decided is the result of a call the user requested.
    pub fn requested_now(&self) -> bool {
        self.requested_now
    }

    /// Remembers a call as requested by the user when it has a destination or identifier
    /// argument (its role, src/roles.rs) and every such argument's every token was found in
    /// the user's request: the page at the URL the user typed, the file the user named. What
    /// the platform declares is not enough: the text itself must be the user's.
    fn note_requested(&mut self, program: &Program, ev: &Event<'_>) {
        let Some(id) = ids::uuid_bits(ev.request_id) else {
            return;
        };
        let tool = fields::tool_name(ev.payload);
        let Some(args) = ev.payload.get("arguments").and_then(Value::as_object) else {
            return;
        };
        let user = origin_bit("user_input");
        let mut targets = 0;
        for (name, arg) in args {
            if !matches!(
                program.argument_role(tool, name),
                "destination" | "identifier"
            ) {
                continue;
            }
            let value = match arg {
                Value::Object(m) if m.contains_key("value") => &m["value"],
                other => other,
            };
            targets += 1;
            if self.infer_node(program, value, 0).source_origins & user == 0 {
                return;
            }
        }
        if targets > 0 {
            self.recent.requested = Some(id);
        }
    }

    /// Remembers the places a reading call reads at (its destination arguments' string
    /// values: the channel read, the inbox's owner, the page's address), for its result's
    /// content. A call that acts (any class but `read` and `unknown`) names none.
    fn note_places(&mut self, program: &Program, ev: &Event<'_>) {
        let Some(id) = ids::uuid_bits(ev.request_id) else {
            return;
        };
        let tool = fields::tool_name(ev.payload);
        let Some(args) = ev.payload.get("arguments").and_then(Value::as_object) else {
            return;
        };
        let mut names = Vec::new();
        // Only a call that reads (or one whose effect is unknown) reads content at a place:
        // an action's result is its status, and it names no place.
        let class = program.effect_class(tool, ev.payload.get("arguments"));
        if !matches!(class, "read" | "unknown") {
            return;
        }
        for (name, arg) in args {
            if program.argument_role(tool, name) != "destination" {
                continue;
            }
            let value = match arg {
                Value::Object(m) if m.contains_key("value") => &m["value"],
                other => other,
            };
            match value {
                Value::String(s) => names.push(s.as_str()),
                Value::Array(items) => names.extend(items.iter().filter_map(Value::as_str)),
                _ => {}
            }
        }
        let mut bits = 0u64;
        for (i, name) in names.into_iter().enumerate() {
            bits |= if i < PLACES_PER_CALL {
                self.place_bit(name)
            } else {
                UNKNOWN_PLACE
            };
        }
        self.recent.placed = Some((id, bits));
    }

    /// The bit of a place (lower-cased and trimmed), naming it in the session's table if it
    /// is new and there is room.
    fn place_bit(&mut self, name: &str) -> u64 {
        let name = name.trim().to_lowercase();
        if let Some(i) = self.scalars.places.iter().position(|p| **p == *name) {
            return 1 << i;
        }
        if self.scalars.places.len() >= MAX_PLACES {
            return UNKNOWN_PLACE;
        }
        let places = Arc::make_mut(&mut self.scalars.places);
        places.push(Arc::from(name));
        1 << (places.len() - 1)
    }

    fn track_turn(&mut self, ev: &Event<'_>) {
        let turn_id = fields::member(ev.metadata, "turn_id")
            .and_then(Value::as_str)
            .or_else(|| {
                (ev.method == "steps/turnStart")
                    .then(|| fields::member(ev.payload, "turn_id").and_then(Value::as_str))
                    .flatten()
            });
        let parent = fields::member(ev.metadata, "parent_turn_id").and_then(Value::as_str);
        let Some(turn_id) = turn_id else {
            if ev.method == "steps/turnStart" {
                self.next_turn();
            }
            return;
        };
        if self.has_turn(turn_id).is_some() {
            return;
        }
        // A nested turn (a subagent's) belongs to its parent's turn.
        let turn = match parent.and_then(|p| self.has_turn(p)) {
            Some(parent_turn) => parent_turn,
            None => {
                self.next_turn();
                self.scalars.turn
            }
        };
        self.new_turn = Some((Arc::from(turn_id), turn));
    }

    fn next_turn(&mut self) {
        self.scalars.turn += 1;
        self.scalars.turn_labels = 0;
        self.scalars.turn_places = 0;
    }

    fn insert_provenance(&mut self, program: &Program, ev: &Event<'_>) {
        let found = fields::provenance_records(ev.payload);
        let step_id = ids::uuid_bits(ev.request_id);
        if found.is_empty() {
            // A step with no content is known to carry nothing (compaction may name it).
            self.step = step_id.map(|id| (id, 0));
            // An Intent without a provenance record still says what the user asked.
            if matches!(ev.method, "steps/sessionStart" | "steps/agentTrigger") {
                self.index_content(program, ev);
            }
            return;
        }
        // Compaction: the summary inherits the labels of the steps it replaces.
        let inherited = if ev.method == "steps/postCompact" {
            let mut l = 0u64;
            if let Some(entries) = ev
                .payload
                .get("entries_compacted")
                .and_then(Value::as_array)
            {
                for e in entries {
                    l |= e
                        .as_str()
                        .and_then(ids::uuid_bits)
                        .and_then(|id| self.base.step_labels.get(&id).copied())
                        .unwrap_or(program.unknown_labels);
                }
            }
            l | ev.extra_labels
        } else {
            ev.extra_labels
        };
        let mut step = 0u64;
        for prov in found {
            let Some(id) = fields::member(prov, "provenance_id").and_then(Value::as_str) else {
                continue;
            };
            if let Some(n) = self.node(id) {
                // Known content seen again: it is in the context now.
                self.entered(n.labels);
                self.scalars.turn_places |= n.places;
                step |= n.labels;
                continue;
            }
            let parents: Vec<&str> = fields::member(prov, "derived_from")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let node = self.make_node(program, prov, &parents, inherited);
            self.new_nodes.push((Arc::from(id), node));
            self.entered(node.labels);
            self.scalars.turn_places |= node.places;
            step |= node.labels;
        }
        self.step = step_id.map(|id| (id, step));
        self.index_content(program, ev);
    }

    /// Files the tokens of the content this event brings in (not a call's own arguments: the
    /// model wrote those) for lineage inference.
    fn index_content(&mut self, program: &Program, ev: &Event<'_>) {
        if self.base.tokens_full || matches!(ev.method, "steps/toolCallRequest") {
            return;
        }
        let mut carriers = Vec::new();
        collect_carriers(ev.payload, &mut carriers, 0);
        for (prov, value) in carriers {
            let Some(id) = prov.get("provenance_id").and_then(Value::as_str) else {
                continue;
            };
            if self.base.nodes.contains_key(id) {
                continue;
            }
            let Some(node) = self.node(id) else { continue };
            if node.own_origin == origin_bit("user_input") {
                self.note_user_text(value);
            }
            let seen = seen_in(&node);
            let new_tokens = &mut self.new_tokens;
            infer::each_value_token(
                value,
                &mut |t| new_tokens.push((infer::token_key(t), seen)),
                0,
            );
        }
        // The user's request, as the Intent states it.
        if matches!(ev.method, "steps/sessionStart" | "steps/agentTrigger") {
            if let Some(raw) = fields::at(ev.payload, &["intent", "raw"]).and_then(Value::as_str) {
                self.note_user_text(&Value::String(raw.to_string()));
                let prov = serde_json::json!({"provenance_id": "", "origin": "user_input"});
                let seen = seen_in(&self.make_node(program, &prov, &[], 0));
                let new_tokens = &mut self.new_tokens;
                infer::each_token(raw, &mut |t| new_tokens.push((infer::token_key(t), seen)));
            }
        }
        // What was inferred before this content came in may be out of date.
        self.infer_cache.get_mut().clear();
    }

    /// Where a value the model wrote without stated lineage was taken from, by matching its
    /// tokens against the content that entered the session (`infer.rs`). Unknown (an external
    /// source, the labels of unknown lineage) when any token was seen nowhere. Its places
    /// (`read_at`) are those of the content any of its tokens was seen in, found or not,
    /// apart from tokens the user said.
    pub fn infer_node(&self, program: &Program, value: &Value, labels_now: u64) -> Node {
        let (found, places) = match value {
            // A decision asks about one value several times (`taken_from`, `found_in`, …):
            // strings are looked up once per decision.
            Value::String(text) => {
                let cached = self.infer_cache.borrow().get(text.as_str()).copied();
                match cached {
                    Some(found) => found,
                    None => {
                        let found = self.infer_sources(value);
                        self.infer_cache
                            .borrow_mut()
                            .insert(Box::from(text.as_str()), found);
                        found
                    }
                }
            }
            _ => self.infer_sources(value),
        };
        let mut node = unknown_node(program, self.scalars.turn);
        node.inferred = true;
        // What it carries for `has` stays the ACS rule's (everything that entered the context
        // this turn, or its own node's): inference only says where it was taken from.
        node.labels = labels_now;
        node.own_origin = origin_bit("agent_generated");
        node.places = places;
        node.source_places = places;
        if let Some(a) = found {
            node.source_origins = a.origins;
            node.source_any = a.labels_any;
            node.source_all = a.labels_all;
            node.origins = a.origins | origin_bit("agent_generated");
        }
        node
    }

    /// Where every token of `value` appeared (`None`: some token nowhere, or no token at
    /// all), and the places of the content any of them the user never said appeared in.
    fn infer_sources(&self, value: &Value) -> Inferred {
        let keys = infer::value_token_keys(value);
        let mut acc: Option<infer::Seen> = None;
        let mut places = 0u64;
        let mut unknown = keys.is_empty() || self.base.tokens_full;
        for &key in &keys {
            let seen = self
                .new_tokens
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, s)| *s)
                .chain(self.base.tokens.get(&key).copied())
                .reduce(infer::Seen::merge);
            match seen {
                Some(s) => {
                    // A token the user said may be the user's: it is no sign of a place.
                    if s.origins & origin_bit("user_input") == 0 {
                        places |= s.places;
                    }
                    acc = Some(match acc {
                        // Every token must come from the source: intersect the origins.
                        Some(a) => infer::Seen {
                            origins: a.origins & s.origins,
                            labels_any: a.labels_any | s.labels_any,
                            labels_all: a.labels_all & s.labels_all,
                            places: a.places | s.places,
                        },
                        None => s,
                    })
                }
                None => unknown = true,
            }
        }
        (acc.filter(|a| !unknown && a.origins != 0), places)
    }

    fn make_node(&self, program: &Program, prov: &Value, parents: &[&str], extra: u64) -> Node {
        let origin = fields::member(prov, "origin")
            .and_then(Value::as_str)
            .unwrap_or("");
        // A label condition that cannot finish leaves the node with the labels of unknown
        // lineage.
        let own = (self.own_labels)(program, self, prov).unwrap_or(program.unknown_labels);
        let mut labels = own | extra;
        let own_origin = origin_bit(origin);
        let mut origins = own_origin;
        let mut depth = 0u16;
        let (mut source_origins, mut source_any, mut source_all) = (0u8, 0u64, u64::MAX);
        // A call's result was read at the call's places.
        let mut places = if origin == "tool_output" {
            self.result_places
        } else {
            0
        };
        let mut source_places = 0u64;
        for p in parents {
            match self.node(p) {
                Some(n) => {
                    places |= n.places;
                    source_places |= n.places;
                    labels |= n.labels;
                    origins |= n.origins;
                    depth = depth.max(n.depth);
                    source_origins |= n.own_origin;
                    source_any |= n.labels;
                    source_all &= n.labels;
                }
                // Unknown lineage is never clean.
                None => {
                    places |= UNKNOWN_PLACE;
                    source_places |= UNKNOWN_PLACE;
                    labels |= program.unknown_labels;
                    origins |= origin_bit("external");
                    depth = depth.max(1);
                    source_origins |= origin_bit("external");
                    source_any |= program.unknown_labels;
                    source_all &= program.unknown_labels;
                }
            }
        }
        if parents.is_empty() {
            if origin == "agent_generated" {
                // Model output with no stated lineage carries everything the model could see
                // this turn, and could have been taken from any of it: its sources are unknown,
                // which reads as an external source (never as the user's request).
                labels |= self.scalars.turn_labels;
                places |= self.scalars.turn_places;
                source_origins = origin_bit("external");
                source_any = labels | program.unknown_labels;
                source_all = 0;
            } else {
                // Content with no parents is its own source.
                source_origins = own_origin;
                source_any = labels;
                source_all = labels;
            }
            source_places = places;
        }
        Node {
            labels,
            origins,
            depth: depth.saturating_add(1),
            turn: self.scalars.turn.min(u32::MAX as u64) as u32,
            own_origin,
            inferred: false,
            source_origins,
            source_any,
            source_all,
            places,
            source_places,
        }
    }

    fn entered(&mut self, labels: u64) {
        self.scalars.turn_labels |= labels;
        self.scalars.session_labels |= labels;
        // At the step's turn (only `track_turn`, first in the step, moves it).
        self.recent.entered |= labels;
    }
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

/// Every carrier (`{value, provenance: {provenance_id, …}}`) in a payload, with its value.
fn collect_carriers<'v>(v: &'v Value, out: &mut Vec<(&'v Value, &'v Value)>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            let member = |k| fields::map_member(m, k);
            if let (Some(value), Some(prov)) = (member("value"), member("provenance")) {
                if fields::member(prov, "provenance_id").is_some_and(Value::is_string) {
                    out.push((prov, value));
                    return;
                }
            }
            for child in m.values() {
                collect_carriers(child, out, depth + 1);
            }
        }
        Value::Array(a) => {
            for child in a {
                collect_carriers(child, out, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A draft reads the rings with its one step's changes as the state reads them once
        /// the changes are applied: the added call first, the oldest pushed out.
        #[test]
        fn the_rings_read_with_changes_as_after_applying_them(
            before in proptest::collection::vec((0u128..24, 0u64..4), 0..40),
            added in proptest::option::of((0u128..24, 0u64..4)),
            entered in any::<u64>(),
            turn in 0u64..9,
        ) {
            let mut recent = Recent::default();
            for &(id, bits) in &before {
                let c = RecentChanges { requested: Some(id), placed: Some((id, bits)), ..Default::default() };
                recent.apply(&c, 0);
            }
            let changes = RecentChanges { entered, requested: added.map(|a| a.0), placed: added };
            let mut after = recent.clone();
            after.apply(&changes, turn);
            let none = RecentChanges::default();
            for id in 0u128..24 {
                prop_assert_eq!(recent.requested(&changes, id), after.requested(&none, id));
                prop_assert_eq!(recent.call_places(&changes, id), after.call_places(&none, id));
            }
            for b in 0..64 {
                let seen = after.label_seen[b];
                if entered >> b & 1 == 1 {
                    prop_assert_eq!(seen, turn + 1);
                } else {
                    prop_assert_eq!(seen, recent.label_seen[b]);
                }
            }
        }
    }
}
