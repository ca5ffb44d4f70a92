//! The facts about a session the VM reads while it runs: a value's provenance node, labels,
//! inferred sources, history counters, the Intent, effect states. The VM declares them here as a
//! trait and `state` implements it (`state::Draft`), so data flows one way: `state` names this
//! trait and the VM never names `state`. The policy code a step runs for the session (label
//! conditions, history filters, effect keys) runs in `guardian`, not in `state`.

use std::sync::Arc;

use serde_json::Value;

use super::Val;
use crate::compile::Program;

/// One provenance node: what is kept per `provenance_id` (never the content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Node {
    /// Label bits: its own ∪ its parents'.
    pub labels: u64,
    /// Origins anywhere in its lineage, as bits (see `acs::fields::origin_bit`).
    pub origins: u8,
    /// Longest `derived_from` chain behind it (1 for content with no parents).
    pub depth: u16,
    /// Turn it entered the context.
    pub turn: u32,
    /// Where it was *taken from*, apart from what it was computed from: the own origins of its
    /// direct sources (the `derived_from` parents; itself when it has none), as bits.
    pub source_origins: u8,
    /// The union of its direct sources' labels (`taken_from(x, LABEL)`).
    pub source_any: u64,
    /// The intersection of its direct sources' labels (`taken_only_from(x, LABEL)`).
    pub source_all: u64,
    /// Its own origin, as a bit.
    pub own_origin: u8,
    /// Its sources were inferred by matching its value against the session's content, not
    /// declared by the platform (`lineage_inferred(x)`).
    pub inferred: bool,
    /// The places its content was read at, as bits of the session's place table (a tool
    /// output's: the destination arguments of the call that produced it; its parents'):
    /// [`UNKNOWN_PLACE`] for a place Warden cannot name.
    pub places: u64,
    /// The places of its direct sources (`read_at(x)`).
    pub source_places: u64,
}

/// The place bit of content read at a place Warden cannot name: content of unknown lineage, or
/// a place past the 63 a session names.
pub const UNKNOWN_PLACE: u64 = 1 << 63;

/// What a running rule may ask about its session.
pub trait Facts {
    /// The node behind a carrier value (a tool argument, an output, a message item) or a
    /// Provenance object; `None` when the value carries no provenance at all.
    fn node_of(&self, program: &Program, v: &Val<'_>) -> Option<Node>;
    /// The labels of a carrier (a list carries the union of its items').
    fn labels_of(&self, program: &Program, v: &Val<'_>) -> Option<u64>;
    /// Where a value written without stated lineage was taken from (lineage inference).
    fn infer_node(&self, program: &Program, value: &Value, labels_now: u64) -> Node;
    /// Turns since content carrying label `bit` last entered the context.
    fn turns_since(&self, bit: u8) -> f64;
    /// History slot `slot`'s count (for `key`, when the slot is keyed).
    fn history_count(&self, program: &Program, slot: u32, key: Option<&str>) -> u64;
    /// The state of this call's key for effect `id` (`u32::MAX`: the strongest of the call's).
    fn effect_state(&self, id: u32) -> Option<&'static str>;
    /// Whether the event is the result of a call the user requested.
    fn requested_now(&self) -> bool;
    /// Whether the user's words asked for an action of this effect class (`actions::admits`).
    fn asked_for(&self, class: &str) -> bool;
    /// Whether the user's words handed the choice of actions to content.
    fn delegated(&self) -> bool;
    /// The kinds of thing the user's words named (`actions::named_objects` bits).
    fn named_objects(&self) -> u32;
    /// Whether every leaf of a value occurs, as one contiguous run, in what the user said
    /// (after cutting both to lower-cased letters and digits): `found_in(x, user_input)`.
    fn said_by_user(&self, value: &Value) -> bool;
    /// The name of place bit `bit` (0–62) of the session's place table.
    fn place_name(&self, bit: u32) -> Option<Arc<str>>;
    /// The current turn.
    fn turn(&self) -> u64;
    /// Whether the session declared an Intent.
    fn intent_declared(&self) -> bool;
    /// The Intent's `raw` text.
    fn intent_raw(&self) -> Option<Arc<str>>;
    /// The Intent's `scope_mode`.
    fn intent_scope_mode(&self) -> Option<Arc<str>>;
    /// The Intent's capabilities, as `intent.parsed` reads them.
    fn intent_parsed(&self) -> Option<Value>;
    /// Whether the Intent permits this tool, operation and resource (no Intent: yes).
    fn intent_permits(&self, tool: &str, operation: Option<&str>, resource: Option<&str>) -> bool;
}
