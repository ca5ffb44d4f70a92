//! A reference evaluator for differential testing: a plain tree walk over the checked AST and a
//! naive session model, written to be obviously right rather than fast, against which the
//! compiled VM is compared (`crate::differential`), as Cedar is compared against its formal model.
//!
//! It owns the meaning of a policy as the documents state it — docs/language.md §2 and
//! §4–§10, docs/state.md: which rules fire on an event, how their decisions
//! combine, whether the step goes ahead, and what the session remembers. The session is kept
//! the naive way: every step that went ahead is recorded whole, and every history question
//! (`count`, `exists`, windows, `by` keys, `$` keys, `turns_since`) is answered by rescanning
//! those records; provenance labels are walked along `derived_from` through the recorded
//! nodes. Everything is O(history) per question, on purpose.
//!
//! It reads the parsed policy and the checker's resolutions (`syntax`, `check`), the ACS
//! hook table (`acs::fields`: names, legal decisions) and the effect-class vocabulary
//! (`actions`: which tool names and which words mean what; when words count it models itself,
//! by rescanning the recorded steps). It must not know `compile`, `vm`,
//! `state` or `guardian`: it shares no code with the path it checks.
//!
//! Not modelled (the generator never writes them; the evaluator answers `Unsupported`):
//! the session intent (`intent.…`), effects, Rego, `domain`, `string`, subagents and MCP.

mod eval;
mod infer;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::acs::fields::{self, HookSpec};
use crate::acs::ids;
use crate::acs::DecisionKind;
use crate::check::Checked;
use crate::diagnostics::FileId;
use crate::syntax::ast::{self, BinaryOp, Expr, ExprKind, History, Item, PlaceSegment, WindowKind};

use eval::{truth, type_error, value, Cx};
pub use eval::{Fail, NodeView, Touch, V};

/// Reason code of a decision that failed (docs/language.md: a type error).
pub const DECISION_FAILURE: &str = "warden.decision_failure";
/// Reason code when no rule decided a hook that can be denied and there is no default.
pub const NO_DEFAULT: &str = "warden.no_default";
/// Reason code when the winning modifications cannot be applied together.
pub const CONFLICTING_MODIFICATIONS: &str = "warden.conflicting_modifications";

/// One event, as the Guardian receives it: the method, the request id, the payload and the
/// envelope metadata, and the envelope's time.
pub struct Event<'e> {
    pub method: &'e str,
    pub request_id: &'e str,
    pub payload: &'e Value,
    pub metadata: &'e Value,
    pub time_ms: Option<i64>,
}

/// docs/language.md §4, "Content without provenance": the payload as it enters, every content
/// item with a provenance record — its hook's own origin when it had none, an id
/// `"{request_id}:{pointer}"` when it had none. Written out plainly, hook by hook.
fn with_provenance(method: &str, request_id: &str, payload: &Value) -> Value {
    let (lists, singles, origin): (&[&str], &[&str], &str) = match method {
        "steps/userMessage" => (&["content"], &[], "user_input"),
        "steps/agentResponse" => (&["content"], &[], "agent_generated"),
        "steps/toolCallResult" => (&["outputs"], &[], "tool_output"),
        "steps/memoryStore" => (&[], &["content"], "agent_generated"),
        "steps/postCompact" | "steps/subagentStop" | "steps/turnEnd" | "steps/sessionEnd" => {
            (&[], &["summary"], "agent_generated")
        }
        "steps/toolCallRequest" => (&[], &[], "agent_generated"),
        "steps/knowledgeRetrieval" => (&["results"], &["query"], "retrieved"),
        "steps/memoryContextRetrieval" => (&["results"], &["query"], "external"),
        _ => return payload.clone(),
    };
    let mut out = payload.clone();
    let tool = payload
        .get("tool")
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let fill = |item: &mut Value, pointer: String, origin: &str| {
        let Value::Object(item) = item else { return };
        let prov = item
            .entry("provenance")
            .or_insert_with(|| serde_json::json!({}));
        let Value::Object(prov) = prov else { return };
        if !matches!(prov.get("provenance_id"), Some(Value::String(_))) {
            prov.insert(
                "provenance_id".into(),
                format!("{request_id}:{pointer}").into(),
            );
        }
        if !matches!(prov.get("origin"), Some(Value::String(_))) {
            prov.insert("origin".into(), origin.into());
            if method == "steps/toolCallResult" {
                if let Some(t) = &tool {
                    prov.entry("source_id").or_insert_with(|| t.clone().into());
                }
            }
        }
    };
    for name in lists {
        if let Some(Value::Array(items)) = out.get_mut(*name) {
            for (i, item) in items.iter_mut().enumerate() {
                fill(item, format!("/{name}/{i}"), origin);
            }
        }
    }
    for name in singles {
        // A query is the agent's own text, whatever hook carries it.
        let origin = if *name == "query" {
            "agent_generated"
        } else {
            origin
        };
        if let Some(item) = out.get_mut(*name) {
            fill(item, format!("/{name}"), origin);
        }
    }
    if method == "steps/toolCallRequest" {
        if let Some(Value::Object(args)) = out.get_mut("arguments") {
            for (k, item) in args.iter_mut() {
                let pointer = format!("/arguments/{}", k.replace('~', "~0").replace('/', "~1"));
                fill(item, pointer, origin);
            }
        }
    }
    out
}

/// What a MODIFY decision changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mods {
    /// `(JSON Pointer, replacement)`, in the order the rules wrote them.
    pub redactions: Vec<(String, String)>,
    /// Argument overrides, by argument name.
    pub overrides: BTreeMap<String, V>,
    pub content: Option<String>,
}

impl Mods {
    /// Nothing to change (every `redact each` chose nothing).
    fn is_empty(&self) -> bool {
        self.redactions.is_empty() && self.overrides.is_empty() && self.content.is_none()
    }

    /// One redaction more; the same place redacted two ways is a conflict.
    fn redact(&mut self, path: String, with: String) -> Result<(), String> {
        match self.redactions.iter().find(|(p, _)| *p == path) {
            Some((_, w)) if *w != with => Err(format!("{path} twice")),
            Some(_) => Ok(()),
            None => {
                self.redactions.push((path, with));
                Ok(())
            }
        }
    }
}

/// A redaction's replacement: its constant expression's string, `[REDACTED]` without one.
fn replacement_text(cx: &mut Cx<'_>, e: Option<&ast::Expr>) -> eval::R<String> {
    match e.map(|e| value(cx, e)).transpose()? {
        None => Ok("[REDACTED]".to_string()),
        Some(V::Str(s)) => Ok(s),
        Some(other) => type_error(format!("a replacement is a {}", other.kind())),
    }
}

/// The places a `redact each` chose, written out again here from the language reference: the
/// chosen keys under the collection's pointer, into a carrier's `value`; an argument that holds
/// one value rather than a list is its own element.
fn chosen_places(payload: &V, base: &str, keys: V) -> Vec<String> {
    let V::List(keys) = keys else {
        return Vec::new();
    };
    let at = |ptr: &str| -> Option<&V> {
        ptr.split('/').skip(1).try_fold(payload, |v, seg| {
            let seg = seg.replace("~1", "/").replace("~0", "~");
            match v {
                V::Obj(members) => members.iter().find(|(k, _)| *k == seg).map(|(_, v)| v),
                V::List(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
        })
    };
    match at(base) {
        Some(V::List(_) | V::Obj(_)) => {}
        Some(V::Undef) | None => return Vec::new(),
        Some(_) => {
            return if keys.is_empty() {
                Vec::new()
            } else {
                vec![base.to_string()]
            }
        }
    }
    keys.iter()
        .filter_map(|k| match k {
            V::Str(name) => Some(name.replace('~', "~0").replace('/', "~1")),
            V::Num(n) if *n >= 0.0 && n.fract() == 0.0 => Some((*n as u64).to_string()),
            _ => None,
        })
        .map(|seg| {
            let place = format!("{base}/{seg}");
            match at(&place) {
                Some(V::Obj(m)) if m.iter().any(|(k, _)| k == "value") => format!("{place}/value"),
                _ => place,
            }
        })
        .collect()
}

/// The decision for one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub kind: DecisionKind,
    pub reason_codes: Vec<String>,
    /// Names of the rules that fired, in declaration order.
    pub fired: Vec<String>,
    pub modifications: Option<Mods>,
    /// Why the decision failed (a type error), if it did.
    pub failure: Option<String>,
    /// Whether the step goes ahead, and so enters history.
    pub proceeds: bool,
    /// Constructs the evaluation ran into (see [`Touch`]).
    pub touched: BTreeSet<Touch>,
}

/// A history window, normalised (no window is `session`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Session,
    ThisTurn,
    LastTurns(u64),
    LastMillis(i64),
}

/// One `count(…)`/`exists(…)` of the policy, as the differential test probes it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryInfo {
    /// The hook, the filter's conjuncts, its `$` keys, the `by` key and the window, as text:
    /// two occurrences with the same text ask the same question.
    pub text: String,
    pub method: &'static str,
    pub window: Window,
    /// How many key parts (`$` equalities, then `by`).
    pub key_parts: usize,
    /// Whether it has a filter.
    pub filtered: bool,
}

/// A rule, as the reference needs it.
struct Rule<'c> {
    name: String,
    hooks: Vec<&'static HookSpec>,
    when: Option<&'c Expr>,
    decision: &'c ast::Decision,
    file: FileId,
}

/// A default: for the named hooks, or (empty) for every hook.
struct Default<'c> {
    hooks: Vec<&'static HookSpec>,
    decision: &'c ast::Decision,
    file: FileId,
}

/// The policy's items, collected from every file.
pub(crate) struct Policy<'c> {
    checked: &'c Checked,
    labels: Vec<(String, Option<&'c Expr>, FileId)>,
    rules: Vec<Rule<'c>>,
    defaults: Vec<Default<'c>>,
    constants: BTreeMap<String, (&'c Expr, FileId)>,
    constant_values: eval::Constants,
    /// The labels content of unknown lineage gets: those an `external` origin earns.
    unknown_labels: BTreeSet<String>,
    /// `tool NAME(…) as CLASS`: the classes tool declarations state.
    tool_classes: BTreeMap<String, String>,
    /// `tool NAME(ARG: T as ROLE)`: the roles tool declarations state, by (tool, argument).
    tool_roles: BTreeMap<(String, String), String>,
}

impl<'c> Policy<'c> {
    fn new(checked: &'c Checked) -> Policy<'c> {
        let mut p = Policy {
            checked,
            labels: Vec::new(),
            rules: Vec::new(),
            defaults: Vec::new(),
            constants: BTreeMap::new(),
            constant_values: RefCell::default(),
            unknown_labels: BTreeSet::new(),
            tool_classes: BTreeMap::new(),
            tool_roles: BTreeMap::new(),
        };
        for unit in &checked.loaded.units {
            for item in &unit.module.items {
                match item {
                    Item::Label(l) => {
                        p.labels
                            .push((l.name.name.clone(), l.when.as_ref(), unit.file))
                    }
                    Item::Let(l) => {
                        p.constants
                            .insert(l.name.name.clone(), (&l.value, unit.file));
                    }
                    Item::Tool(t) => {
                        if let Some(c) = &t.class {
                            p.tool_classes.insert(t.name.value.clone(), c.name.clone());
                        }
                        for param in &t.params {
                            if let Some(r) = &param.role {
                                p.tool_roles.insert(
                                    (t.name.value.clone(), param.name.name.clone()),
                                    r.name.clone(),
                                );
                            }
                        }
                    }
                    Item::Rule(r) => p.rules.push(Rule {
                        name: r.name.name.clone(),
                        hooks: r
                            .hooks
                            .iter()
                            .filter_map(|h| fields::hook(&h.name))
                            .collect(),
                        when: r.when.as_ref(),
                        decision: &r.decision,
                        file: unit.file,
                    }),
                    Item::Default(d) => p.defaults.push(Default {
                        hooks: d
                            .hooks
                            .iter()
                            .filter_map(|h| fields::hook(&h.name))
                            .collect(),
                        decision: &d.decision,
                        file: unit.file,
                    }),
                    _ => {}
                }
            }
        }
        p
    }

    /// The value of a `let` constant (evaluated once, with no event in view).
    pub(crate) fn constant(&self, view: &View<'_>, name: &str) -> eval::R<V> {
        if let Some(v) = self.constant_values.borrow().get(name) {
            return Ok(v.clone());
        }
        let Some(&(expr, file)) = self.constants.get(name) else {
            return Err(Fail::Unsupported(format!("the constant `{name}`")));
        };
        let nothing = V::Undef;
        let mut cx = Cx {
            view,
            file,
            root: &nothing,
            metadata: &nothing,
            current: None,
            vars: Vec::new(),
        };
        let v = value(&mut cx, expr)?;
        self.constant_values
            .borrow_mut()
            .insert(name.to_string(), v.clone());
        Ok(v)
    }

    /// The labels a Provenance record earns by itself (its `label … when …` conditions).
    fn own_labels(&self, view: &View<'_>, record: &V) -> eval::R<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        let nothing = V::Undef;
        for (name, when, file) in &self.labels {
            let Some(when) = when else { continue };
            let mut cx = Cx {
                view,
                file: *file,
                root: record,
                metadata: &nothing,
                current: None,
                vars: Vec::new(),
            };
            if truth(&mut cx, when)? == Some(true) {
                out.insert(name.clone());
            }
        }
        Ok(out)
    }

    pub fn label_names(&self) -> Vec<String> {
        self.labels.iter().map(|(n, _, _)| n.clone()).collect()
    }
}

/// The place of content read at a place Warden cannot name (unknown lineage, a call's ninth
/// place, a session's 64th): `read_at` fails on it.
pub(crate) const UNKNOWN_PLACE: &str = "\u{0}unknown place";

/// One provenance node: what the session knows about a `provenance_id`, fixed when it first
/// entered.
#[derive(Debug, Clone, PartialEq)]
struct Node {
    id: String,
    view: NodeView,
}

/// One step that went ahead, recorded whole.
#[derive(Debug, Clone)]
struct Recorded {
    method: &'static str,
    request_id: String,
    payload: V,
    metadata: V,
    /// The session's turn number at this step.
    turn: u64,
    /// The session's time at this step (the latest event time seen, in ms).
    time: i64,
    /// The turn id this step introduced, with the turn number it stands for.
    turn_id: Option<(String, u64)>,
    /// The provenance ids of the records it carried, in document order.
    records: Vec<String>,
    /// The payload as it entered (completed), for lineage inference's tokens.
    json: Value,
    /// Whether history counts it: a step whose decision failed leaves its content (a failure
    /// never drops taint) but no history.
    counts: bool,
}

/// A session, decided by the reference.
pub struct Reference<'c> {
    policy: Policy<'c>,
    committed: Vec<Recorded>,
    /// Provenance nodes, in the order they entered.
    nodes: Vec<Node>,
}

/// What an evaluation sees: the committed session plus what the event being decided brings.
pub struct View<'a> {
    policy: &'a Policy<'a>,
    committed: &'a [Recorded],
    nodes: &'a [Node],
    /// Nodes the event being decided inserted (so far).
    draft: &'a [Node],
    /// Provenance ids of the records of the event being decided (they entered the context).
    current_records: &'a [String],
    turn: u64,
    now: i64,
    touched: RefCell<BTreeSet<Touch>>,
    /// The classes of action the user's words asked for (docs/language.md §4): read afresh
    /// from every recorded step and the event being decided.
    asked: u16,
    /// The kinds of thing the user's words named, read from the same texts.
    objects: u32,
    /// What lineage inference sees: the recorded steps' content and the event's own.
    index: infer::Index,
    /// The labels of everything that entered this turn, the event's content included.
    turn_labels: BTreeSet<String>,
    /// The places the session named, in the order it named them (`read_at` lists in it).
    places: Vec<String>,
}

impl<'a> View<'a> {
    fn touch(&self, t: Touch) {
        self.touched.borrow_mut().insert(t);
    }

    fn node(&self, id: &str) -> Option<&'a Node> {
        self.nodes
            .iter()
            .chain(self.draft.iter())
            .find(|n| n.id == id)
    }

    /// The node behind a carrier; a provenance id never seen has unknown lineage: the labels
    /// an `external` origin earns.
    fn node_of(&self, carrier: &V) -> Option<NodeView> {
        if let Some(n) = self.inferred(carrier) {
            return Some(n);
        }
        let id = eval::provenance_id(carrier)?;
        Some(match self.node(&id) {
            Some(n) => n.view.clone(),
            None => self.unknown_node(),
        })
    }

    /// `read_at(x)` of a node with these source places: their names in the order the session
    /// named them; a type error when one is a place Warden cannot name.
    pub(crate) fn read_at(&self, places: &BTreeSet<String>) -> eval::R<V> {
        if places.contains(UNKNOWN_PLACE) {
            return Err(eval::Fail::Type(
                "read_at(…): the value was read at a place Warden cannot name".into(),
            ));
        }
        Ok(V::List(
            self.places
                .iter()
                .filter(|p| places.contains(*p))
                .map(|p| V::Str(p.clone()))
                .collect(),
        ))
    }

    /// A carrier whose value came with no stated lineage (no `derived_from`, and no origin or
    /// `agent_generated`): its sources are inferred from the session's content. It carries
    /// the labels of its own node (or, without one, of everything that entered this turn).
    fn inferred(&self, carrier: &V) -> Option<NodeView> {
        let V::Obj(members) = carrier else {
            return None;
        };
        let value = &members.iter().find(|(k, _)| k == "value")?.1;
        let prov = carrier.get("provenance");
        let declared = matches!(prov.get("derived_from"), V::List(l) if !l.is_empty());
        let unstated = match prov.get("origin") {
            V::Str(o) => o == "agent_generated",
            _ => true,
        };
        if declared || !unstated {
            return None;
        }
        let labels = match prov.get("provenance_id") {
            V::Str(id) => self.node(&id).map(|n| n.view.labels.clone()),
            _ => None,
        };
        Some(self.inferred_node(value, labels.unwrap_or_else(|| self.turn_labels.clone())))
    }

    /// The node of a value of inferred lineage: found in content of some origins, those are its
    /// sources; found nowhere, unknown (an external source, every origin possible).
    fn inferred_node(&self, value: &V, labels: BTreeSet<String>) -> NodeView {
        let gen = "agent_generated".to_string();
        let places = self.index.places(&value.to_json());
        let n = NodeView {
            labels,
            depth: 1,
            own: gen.clone(),
            inferred: true,
            source_places: places.clone(),
            places,
            ..NodeView::default()
        };
        match self.index.sources(&value.to_json()) {
            Some(found) => NodeView {
                origins: found.origins.iter().cloned().chain([gen]).collect(),
                sources: found.origins,
                source_any: found.any,
                source_all: found.all,
                ..n
            },
            None => NodeView {
                origins: fields::ORIGINS.iter().map(|o| o.to_string()).collect(),
                sources: BTreeSet::from(["external".to_string()]),
                source_any: self.policy.unknown_labels.clone(),
                source_all: self.policy.unknown_labels.clone(),
                ..n
            },
        }
    }

    /// `found_in(x, origin)`: every token of the value appeared in content of `origin` (a value
    /// found nowhere has an unknown, `external`, source), and for `user_input` the value occurs
    /// in what the user said as one run.
    pub(crate) fn found_in(&self, value: &V, origin: &str) -> bool {
        let json = value.to_json();
        let sources = self
            .index
            .sources(&json)
            .map_or_else(|| BTreeSet::from(["external".to_string()]), |f| f.origins);
        sources.contains(origin) && (origin != "user_input" || self.index.said_by_user(&json))
    }

    /// What a provenance id never seen stands for: unknown lineage, an `external` source, the
    /// labels an `external` origin earns.
    fn unknown_node(&self) -> NodeView {
        let unknown = self.policy.unknown_labels.clone();
        NodeView {
            labels: unknown.clone(),
            origins: BTreeSet::from(["external".to_string()]),
            depth: 1,
            own: "external".into(),
            sources: BTreeSet::from(["external".to_string()]),
            source_any: unknown.clone(),
            source_all: unknown,
            inferred: false,
            places: BTreeSet::from([UNKNOWN_PLACE.to_string()]),
            source_places: BTreeSet::from([UNKNOWN_PLACE.to_string()]),
        }
    }

    /// The labels a value carries: its node's, or for a list, those of its items that have
    /// provenance. `None` when it has no provenance at all (`has` is then undefined).
    fn labels_of(&self, carrier: &V) -> Option<BTreeSet<String>> {
        if let V::List(items) = carrier {
            let mut out: Option<BTreeSet<String>> = None;
            for item in items {
                if let Some(l) = self.labels_of(item) {
                    out.get_or_insert_with(BTreeSet::new).extend(l);
                }
            }
            return out;
        }
        self.node_of(carrier).map(|n| n.labels)
    }

    fn labels_of_id(&self, id: &str) -> BTreeSet<String> {
        self.node(id)
            .map(|n| n.view.labels.clone())
            .unwrap_or_default()
    }

    /// What the call in `payload` does: its declaration's class, else the catalogue's from
    /// the tool's name and its argument names.
    pub(crate) fn effect_class(&self, payload: &V) -> String {
        let V::Str(tool) = payload.get("tool").get("name") else {
            return "unknown".into();
        };
        if let Some(c) = self.policy.tool_classes.get(&tool) {
            return c.clone();
        }
        let names: Vec<String> = match payload.get("arguments") {
            V::Obj(members) => members.into_iter().map(|(k, _)| k).collect(),
            _ => Vec::new(),
        };
        crate::actions::catalogue_class(&tool, names.iter().map(String::as_str)).to_string()
    }

    pub(crate) fn asked_for(&self, class: &str) -> bool {
        crate::actions::admits(self.asked, class)
    }

    pub(crate) fn delegated(&self) -> bool {
        self.asked & crate::actions::DELEGATES != 0
    }

    /// Whether the user's words named every kind of thing the call in `payload` acts on.
    pub(crate) fn requested_object(&self, payload: &V) -> bool {
        let tool = match payload.get("tool").get("name") {
            V::Str(t) => t,
            _ => String::new(),
        };
        crate::actions::objects_admitted(self.objects, crate::actions::tool_objects(&tool))
    }

    /// Turns since content carrying `label` last entered the context; ∞ if it never did.
    fn turns_since(&self, label: &str) -> f64 {
        let mut last: Option<u64> = None;
        for e in self.committed {
            if e.records
                .iter()
                .any(|id| self.labels_of_id(id).contains(label))
            {
                last = last.max(Some(e.turn));
            }
        }
        if self
            .current_records
            .iter()
            .any(|id| self.labels_of_id(id).contains(label))
        {
            last = Some(self.turn);
        }
        match last {
            Some(t) => self.turn.saturating_sub(t) as f64,
            None => f64::INFINITY,
        }
    }

    fn in_window(&self, e: &Recorded, w: Window) -> bool {
        match w {
            Window::Session => true,
            Window::ThisTurn => e.turn == self.turn,
            Window::LastTurns(n) => self.turn.saturating_sub(e.turn) < n,
            Window::LastMillis(ms) => self.now.saturating_sub(e.time) < ms,
        }
    }

    /// The past steps a query counts, each with its key parts (read from the past step):
    /// steps of the hook, in the window, whose filter (minus its `$` keys) is true and whose
    /// key parts are all defined.
    fn matching(
        &'a self,
        q: &Query<'_>,
        file: FileId,
        current: Option<&'a V>,
    ) -> eval::R<Vec<Vec<V>>> {
        let mut out = Vec::new();
        for e in self.committed {
            if !e.counts || e.method != q.hook.method || !self.in_window(e, q.window) {
                continue;
            }
            let mut cx = Cx {
                view: self,
                file,
                root: &e.payload,
                metadata: &e.metadata,
                current,
                vars: Vec::new(),
            };
            // The conjuncts, left to right (Kleene `and`).
            let mut holds = Some(true);
            for r in &q.rest {
                match truth(&mut cx, r)? {
                    Some(false) => {
                        holds = Some(false);
                        break;
                    }
                    None => holds = None,
                    Some(true) => {}
                }
            }
            if holds != Some(true) {
                continue;
            }
            let mut parts = Vec::new();
            for p in q.keys.iter().map(|(past, _)| *past).chain(q.by) {
                parts.push(value(&mut cx, p)?);
            }
            if parts.iter().any(V::is_undef) {
                continue;
            }
            out.push(parts);
        }
        Ok(out)
    }

    /// `count(…)` for the event being decided; `None` (undefined) when a key of the current
    /// event is undefined.
    fn count(&'a self, cx: &Cx<'a>, h: &History) -> eval::R<Option<u64>> {
        let q = Query::of(h).ok_or_else(|| Fail::Unsupported("history hook".into()))?;
        // The key parts of the current event.
        let mut now_cx = Cx {
            view: self,
            file: cx.file,
            root: cx.root,
            metadata: cx.metadata,
            current: Some(cx.root),
            vars: Vec::new(),
        };
        let mut current = Vec::new();
        for (_, cur) in &q.keys {
            current.push(value(&mut now_cx, cur)?);
        }
        if let Some(by) = q.by {
            current.push(value(&mut now_cx, by)?);
        }
        if current.iter().any(V::is_undef) {
            return Ok(None);
        }
        let mut n = 0;
        for parts in self.matching(&q, cx.file, Some(cx.root))? {
            let mut all = true;
            for (i, (p, c)) in parts.iter().zip(&current).enumerate() {
                let same = if i < q.keys.len() {
                    // `FIELD == $.FIELD` is an equality like any other.
                    eval::equal(p, c)? == Some(true)
                } else {
                    // A `by` key: the same key value.
                    p.same(c)
                };
                all &= same;
            }
            if all {
                n += 1;
            }
        }
        Ok(Some(n))
    }
}

/// A history expression, taken apart: the hook, the filter's conjuncts that are not keys, the
/// `FIELD == $.FIELD` keys (past side, current side), the `by` key and the window.
struct Query<'e> {
    hook: &'static HookSpec,
    rest: Vec<&'e Expr>,
    keys: Vec<(&'e Expr, &'e Expr)>,
    by: Option<&'e Expr>,
    window: Window,
}

impl<'e> Query<'e> {
    fn of(h: &'e History) -> Option<Query<'e>> {
        let mut q = Query {
            hook: fields::hook(&h.hook.name)?,
            rest: Vec::new(),
            keys: Vec::new(),
            by: h.by.as_ref(),
            window: match h.window.as_ref().map(|w| &w.kind) {
                None | Some(WindowKind::Session) => Window::Session,
                Some(WindowKind::ThisTurn) => Window::ThisTurn,
                Some(WindowKind::LastTurns(n)) => Window::LastTurns(u64::from(*n)),
                Some(WindowKind::LastTime(d)) => Window::LastMillis(d.millis.max(1) as i64),
            },
        };
        if let Some(f) = &h.filter {
            q.split(f);
        }
        Some(q)
    }

    fn split(&mut self, e: &'e Expr) {
        fn is_current(e: &Expr) -> bool {
            match &e.kind {
                ExprKind::Current => true,
                ExprKind::Member(b, _) => is_current(b),
                _ => false,
            }
        }
        fn is_past_path(e: &Expr) -> bool {
            match &e.kind {
                ExprKind::Name(_) => true,
                ExprKind::Member(b, _) => is_past_path(b),
                _ => false,
            }
        }
        match &e.kind {
            ExprKind::Binary(BinaryOp::And, a, b) => {
                self.split(a);
                self.split(b);
            }
            ExprKind::Binary(BinaryOp::Eq, a, b) if is_current(b) && is_past_path(a) => {
                self.keys.push((a, b))
            }
            ExprKind::Binary(BinaryOp::Eq, a, b) if is_current(a) && is_past_path(b) => {
                self.keys.push((b, a))
            }
            _ => self.rest.push(e),
        }
    }
}

impl<'c> Reference<'c> {
    /// A fresh session for a checked policy (which must have no errors).
    pub fn new(checked: &'c Checked) -> Result<Reference<'c>, String> {
        let mut policy = Policy::new(checked);
        let external =
            V::from_json(&serde_json::json!({"provenance_id": "", "origin": "external"}));
        let unknown = {
            let view = View {
                policy: &policy,
                committed: &[],
                nodes: &[],
                draft: &[],
                current_records: &[],
                turn: 0,
                now: 0,
                touched: RefCell::default(),
                asked: 0,
                objects: 0,
                index: infer::Index::default(),
                turn_labels: BTreeSet::new(),
                places: Vec::new(),
            };
            policy.own_labels(&view, &external)
        };
        policy.unknown_labels =
            unknown.map_err(|e| format!("the labels of unknown lineage: {e:?}"))?;
        Ok(Reference {
            policy,
            committed: Vec::new(),
            nodes: Vec::new(),
        })
    }

    fn view<'a>(
        &'a self,
        draft: &'a [Node],
        current_records: &'a [String],
        turn: u64,
        now: i64,
    ) -> View<'a> {
        View {
            policy: &self.policy,
            committed: &self.committed,
            nodes: &self.nodes,
            draft,
            current_records,
            turn,
            now,
            touched: RefCell::default(),
            asked: 0,
            objects: 0,
            index: infer::Index::default(),
            turn_labels: BTreeSet::new(),
            places: Vec::new(),
        }
    }

    /// docs/language.md §4, "What a call does": the classes the user's words ask for — the
    /// Intent's `raw` of a session start or trigger, the text parts of a user message whose
    /// provenance says `user_input` — over every recorded step and the event being decided.
    fn asked(&self, method: &str, payload: &V) -> (u16, u32) {
        let mut texts: Vec<String> = Vec::new();
        let steps = self
            .committed
            .iter()
            .map(|r| (r.method, &r.payload))
            .chain([(method, payload)]);
        for (m, p) in steps {
            match m {
                "steps/sessionStart" | "steps/agentTrigger" => {
                    if let V::Str(raw) = p.get("intent").get("raw") {
                        texts.push(raw);
                    }
                }
                "steps/userMessage" => {
                    if let V::List(items) = p.get("content") {
                        for item in items {
                            let said =
                                item.get("provenance").get("origin") == V::Str("user_input".into());
                            if let (true, V::Str(t)) = (said, item.get("value")) {
                                texts.push(t);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        texts.iter().fold((0, 0), |(classes, objects), t| {
            (
                classes | crate::actions::requested_classes(t),
                objects | crate::actions::named_objects(t),
            )
        })
    }

    /// What lineage inference sees: for every recorded step (and `current`, the event being
    /// decided with its new nodes), the content whose provenance id first entered with it — a
    /// tool call's own arguments never — and the Intent's text of a session start or trigger.
    fn index(&self, current: Option<(&str, &Value, &[Node])>) -> infer::Index {
        let mut index = infer::Index::default();
        let mut known: BTreeSet<&str> = BTreeSet::new();
        let recorded = self
            .committed
            .iter()
            .map(|r| (r.method, &r.json, &[][..], Some(&r.records)));
        let steps = recorded.chain(current.map(|(m, p, d)| (m, p, d, None)));
        for (method, payload, draft, records) in steps {
            if method != "steps/toolCallRequest" {
                self.index_step(&mut index, &known, method, payload, draft);
            }
            for id in records.into_iter().flatten() {
                known.insert(id);
            }
        }
        index
    }

    fn index_step(
        &self,
        index: &mut infer::Index,
        known: &BTreeSet<&str>,
        method: &str,
        payload: &Value,
        draft: &[Node],
    ) {
        let mut found = Vec::new();
        infer::carriers(payload, &mut found);
        for (id, value) in found {
            if known.contains(id) {
                continue;
            }
            let node = draft.iter().chain(&self.nodes).find(|n| n.id == id);
            if let Some(n) = node {
                index.add(value, &n.view.own, &n.view.labels, &n.view.places);
            }
        }
        if matches!(method, "steps/sessionStart" | "steps/agentTrigger") {
            if let Some(raw) = payload.pointer("/intent/raw").filter(|r| r.is_string()) {
                let record = V::Obj(vec![
                    ("provenance_id".into(), V::Str(String::new())),
                    ("origin".into(), V::Str("user_input".into())),
                ]);
                let view = self.view(draft, &[], self.turn(), 0);
                let labels = self
                    .policy
                    .own_labels(&view, &record)
                    .unwrap_or_else(|_| self.policy.unknown_labels.clone());
                index.add(raw, "user_input", &labels, &BTreeSet::new());
            }
        }
    }

    /// A tool call's arguments (and list elements) that claim the user wrote them but are not
    /// found in what the user said read as no claim: an `origin: user_input` becomes
    /// `agent_generated`; a `derived_from` naming only the user's messages, for a value the user
    /// never said some of which other content holds, is dropped (its sources are then inferred).
    fn without_unfound_claims(&self, mut payload: Value) -> Value {
        let index = self.index(None);
        let user_node = |id: &Value| {
            id.as_str().is_some_and(|id| {
                self.nodes
                    .iter()
                    .any(|n| n.id == id && n.view.own == "user_input")
            })
        };
        let fix = |prov: &mut serde_json::Map<String, Value>, v: &Value| {
            if prov.get("origin").and_then(Value::as_str) == Some("user_input") {
                let found = index
                    .sources(v)
                    .is_some_and(|f| f.origins.contains("user_input"))
                    && index.said_by_user(v);
                if !found {
                    prov.insert("origin".into(), Value::String("agent_generated".into()));
                }
                return;
            }
            let only_user = prov
                .get("derived_from")
                .and_then(Value::as_array)
                .is_some_and(|ps| !ps.is_empty() && ps.iter().all(user_node));
            if only_user && !index.said_by_user(v) && index.seen_elsewhere(v) {
                prov.remove("derived_from");
            }
        };
        let Some(Value::Object(args)) = payload.get_mut("arguments") else {
            return payload;
        };
        for arg in args.values_mut() {
            let value = arg.get("value").cloned().unwrap_or(Value::Null);
            let Some(Value::Object(prov)) = arg.get_mut("provenance") else {
                continue;
            };
            // The elements are read as the platform sent them, before the argument's own fix.
            if let (Some(Value::Array(elements)), Value::Array(values)) =
                (prov.get_mut("elements"), &value)
            {
                for (e, v) in elements.iter_mut().zip(values) {
                    if let Value::Object(e) = e {
                        fix(e, v);
                    }
                }
            }
            fix(prov, &value);
        }
        payload
    }

    /// The session's turn number: 0 before the first turn.
    pub fn turn(&self) -> u64 {
        self.committed.last().map_or(0, |e| e.turn)
    }

    /// The session's time: the latest event time of a step that went ahead.
    fn now(&self) -> i64 {
        self.committed.last().map_or(0, |e| e.time)
    }

    /// The turn an event is in, and the turn id it introduces. A turn advances when a turn id
    /// (`metadata.turn_id`, or a turnStart's `turn_id`) is seen for the first time, or on a
    /// turnStart without one; a new turn id whose `metadata.parent_turn_id` is known belongs
    /// to that parent's turn and does not advance.
    fn turn_of(&self, method: &str, payload: &V, metadata: &V) -> (u64, Option<(String, u64)>) {
        let turn = self.turn();
        let known = |id: &str| {
            self.committed
                .iter()
                .filter_map(|e| e.turn_id.as_ref())
                .find(|(t, _)| t == id)
                .map(|(_, n)| *n)
        };
        let id = match (metadata.get("turn_id"), payload.get("turn_id")) {
            (V::Str(id), _) => Some(id),
            (_, V::Str(id)) if method == "steps/turnStart" => Some(id),
            _ => None,
        };
        match id {
            None if method == "steps/turnStart" => (turn + 1, None),
            None => (turn, None),
            Some(id) if known(&id).is_some() => (turn, None),
            Some(id) => match metadata.get("parent_turn_id") {
                V::Str(parent) if known(&parent).is_some() => {
                    let parent_turn = known(&parent).unwrap_or(turn);
                    (turn, Some((id, parent_turn)))
                }
                _ => (turn + 1, Some((id, turn + 1))),
            },
        }
    }

    /// Labels of everything that entered the context in `turn`: the records of the steps of
    /// that turn, and those of the event being decided seen so far.
    fn entered_in_turn(&self, turn: u64, draft: &[Node], so_far: &[String]) -> BTreeSet<String> {
        let view = self.view(draft, &[], turn, 0);
        let mut out = BTreeSet::new();
        for e in self.committed.iter().filter(|e| e.turn == turn) {
            for id in &e.records {
                out.extend(view.labels_of_id(id));
            }
        }
        for id in so_far {
            out.extend(view.labels_of_id(id));
        }
        out
    }

    /// The labels of a committed step's content, by request id; unknown steps have unknown
    /// lineage.
    fn step_labels(&self, request_id: &str) -> BTreeSet<String> {
        let view = self.view(&[], &[], 0, 0);
        match self.committed.iter().find(|e| e.request_id == request_id) {
            Some(e) => e
                .records
                .iter()
                .flat_map(|id| view.labels_of_id(id))
                .collect(),
            None => self.policy.unknown_labels.clone(),
        }
    }

    /// A node for a record first seen now: its own labels; those of every parent (a parent
    /// never seen has unknown lineage); for `agent_generated` content without parents,
    /// everything that entered this turn; plus `inherited` (a compaction's entries).
    fn make_node(
        &self,
        record: &V,
        draft: &[Node],
        so_far: &[String],
        turn: u64,
        inherited: &BTreeSet<String>,
        read_at: &BTreeSet<String>,
    ) -> eval::R<Node> {
        let view = self.view(draft, &[], turn, 0);
        let origin = match record.get("origin") {
            V::Str(o) => o,
            _ => String::new(),
        };
        let parents: Vec<String> = match record.get("derived_from") {
            V::List(items) => items
                .into_iter()
                .filter_map(|i| match i {
                    V::Str(s) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut n = NodeView {
            labels: self.policy.own_labels(&view, record)?,
            origins: BTreeSet::from([origin.clone()]),
            own: origin.clone(),
            ..NodeView::default()
        };
        n.labels.extend(inherited.iter().cloned());
        if origin == "tool_output" {
            n.places = read_at.clone();
        }
        let mut source_all: Option<BTreeSet<String>> = None;
        for p in &parents {
            let parent = view
                .node(p)
                .map_or_else(|| view.unknown_node(), |p| p.view.clone());
            n.labels.extend(parent.labels.iter().cloned());
            n.places.extend(parent.places.iter().cloned());
            n.source_places.extend(parent.places.iter().cloned());
            n.origins.extend(parent.origins.iter().cloned());
            n.depth = n.depth.max(parent.depth);
            n.sources.insert(parent.own.clone());
            n.source_any.extend(parent.labels.iter().cloned());
            source_all = Some(match source_all {
                Some(all) => all.intersection(&parent.labels).cloned().collect(),
                None => parent.labels.clone(),
            });
        }
        n.source_all = source_all.unwrap_or_default();
        if parents.is_empty() {
            if origin == "agent_generated" {
                // Model output without stated lineage: everything that entered this turn, and
                // sources unknown (an external one, never the user's request).
                n.labels.extend(self.entered_in_turn(turn, draft, so_far));
                n.places
                    .extend(self.entered_places_in_turn(turn, draft, so_far));
                n.sources = BTreeSet::from(["external".to_string()]);
                n.source_any = n.labels.clone();
                n.source_any
                    .extend(self.policy.unknown_labels.iter().cloned());
                n.source_all = BTreeSet::new();
            } else {
                // Content with no parents is its own source.
                n.sources = BTreeSet::from([origin.clone()]);
                n.source_any = n.labels.clone();
                n.source_all = n.labels.clone();
            }
            n.source_places = n.places.clone();
        }
        n.depth += 1;
        let id = match record.get("provenance_id") {
            V::Str(id) => id,
            _ => String::new(),
        };
        Ok(Node { id, view: n })
    }

    // -----------------------------------------------------------------------------------------
    // Places (`read_at`), modelled plainly: every reading call that went ahead names the places
    // its destination arguments give; a result's content was read at its call's places.

    /// The places a call names, lower-cased and trimmed, in argument order, with its request
    /// id as 128 bits; `None` for a call the session does not note (no UUID request id, or
    /// arguments that are not an object).
    fn call_places(&self, request_id: &str, payload: &Value) -> Option<(u128, Vec<String>)> {
        let id = ids::uuid_bits(request_id)?;
        let tool = fields::tool_name(payload);
        let args = payload.get("arguments")?.as_object()?;
        let mut out: Vec<&str> = Vec::new();
        // Only a call that reads (or one whose effect is unknown) reads content at a place; an
        // action's result is its status.
        let class = match tool {
            None => "unknown".to_string(),
            Some(t) => self.policy.tool_classes.get(t).cloned().unwrap_or_else(|| {
                crate::actions::catalogue_class(t, args.keys().map(String::as_str)).to_string()
            }),
        };
        if !matches!(class.as_str(), "read" | "unknown") {
            return Some((id, Vec::new()));
        }
        for (name, arg) in args {
            let declared =
                tool.and_then(|t| self.policy.tool_roles.get(&(t.to_string(), name.clone())));
            let role = declared.map_or_else(|| crate::roles::catalogue_role(name), String::as_str);
            if role != "destination" {
                continue;
            }
            let value = match arg {
                Value::Object(m) if m.contains_key("value") => &m["value"],
                other => other,
            };
            match value {
                Value::String(s) => out.push(s.as_str()),
                Value::Array(items) => out.extend(items.iter().filter_map(Value::as_str)),
                _ => {}
            }
        }
        Some((id, out.iter().map(|s| s.trim().to_lowercase()).collect()))
    }

    /// The calls the session noted, oldest first (the event being decided last, when it is
    /// a call).
    fn noted_calls(&self, current: Option<(&str, &str, &Value)>) -> Vec<(u128, Vec<String>)> {
        self.committed
            .iter()
            .map(|r| (r.method, r.request_id.as_str(), &r.json))
            .chain(current)
            .filter(|(m, _, _)| *m == "steps/toolCallRequest")
            .filter_map(|(_, id, p)| self.call_places(id, p))
            .collect()
    }

    /// The session's places in the order it named them: the first eight of each call's, at
    /// most 63 in all.
    fn place_table(&self, current: Option<(&str, &str, &Value)>) -> Vec<String> {
        let mut table: Vec<String> = Vec::new();
        for (_, names) in self.noted_calls(current) {
            for name in names.into_iter().take(8) {
                if !table.contains(&name) && table.len() < 63 {
                    table.push(name);
                }
            }
        }
        table
    }

    /// The places the content of a `toolCallResult` was read at: its call's (among the 16
    /// latest calls, newest first), each one the table cannot name read as unknown.
    fn result_places(&self, method: &str, payload: &Value) -> BTreeSet<String> {
        let call = (method == "steps/toolCallResult")
            .then(|| payload.get("request_id_ref").and_then(Value::as_str))
            .flatten()
            .and_then(ids::uuid_bits)
            .filter(|id| *id != 0);
        let Some(call) = call else {
            return BTreeSet::new();
        };
        let noted = self.noted_calls(None);
        let table = self.place_table(None);
        let found = noted.iter().rev().take(16).find(|(id, _)| *id == call);
        let Some((_, names)) = found else {
            return BTreeSet::new();
        };
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if i < 8 && table.contains(n) {
                    n.clone()
                } else {
                    UNKNOWN_PLACE.to_string()
                }
            })
            .collect()
    }

    /// The places of everything that entered in `turn` so far (the event's own records in
    /// `so_far`).
    fn entered_places_in_turn(
        &self,
        turn: u64,
        draft: &[Node],
        so_far: &[String],
    ) -> BTreeSet<String> {
        let view = self.view(draft, &[], turn, 0);
        let ids = self
            .committed
            .iter()
            .filter(|e| e.turn == turn)
            .flat_map(|e| e.records.iter())
            .chain(so_far);
        ids.filter_map(|id| view.node(id))
            .flat_map(|n| n.view.places.iter().cloned())
            .collect()
    }

    /// Decides one event, and records it if it goes ahead.
    pub fn step(&mut self, ev: &Event<'_>) -> Result<Outcome, String> {
        let hook = fields::hook(ev.method).ok_or_else(|| format!("no hook {}", ev.method))?;
        let mut completed = with_provenance(hook.method, ev.request_id, ev.payload);
        if hook.method == "steps/toolCallRequest" {
            completed = self.without_unfound_claims(completed);
        }
        let ev = &Event {
            payload: &completed,
            ..*ev
        };
        let payload = V::from_json(ev.payload);
        let metadata = V::from_json(ev.metadata);
        let (turn, turn_id) = self.turn_of(hook.method, &payload, &metadata);
        let now = self.now().max(ev.time_ms.unwrap_or(i64::MIN));

        // The content this event brings into the context.
        let inherited = if hook.method == "steps/postCompact" {
            let mut l = BTreeSet::new();
            if let V::List(entries) = payload.get("entries_compacted") {
                for e in entries {
                    match e {
                        V::Str(id) => l.extend(self.step_labels(&id)),
                        _ => l.extend(self.policy.unknown_labels.iter().cloned()),
                    }
                }
            }
            l
        } else {
            BTreeSet::new()
        };
        let read_at = self.result_places(hook.method, ev.payload);
        let found = fields::provenance_records(ev.payload);
        let mut draft: Vec<Node> = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        for r in &found {
            let record = V::from_json(r);
            let Some(id) = r.get("provenance_id").and_then(Value::as_str) else {
                continue;
            };
            let known = self.nodes.iter().chain(&draft).any(|n| n.id == id);
            if !known {
                match self.make_node(&record, &draft, &ids, turn, &inherited, &read_at) {
                    Ok(n) => draft.push(n),
                    Err(Fail::Type(why)) => {
                        let out = self.failed(hook, why, BTreeSet::new());
                        self.commit_if(
                            &out, hook, ev, payload, metadata, turn, turn_id, now, draft, ids,
                        );
                        return Ok(out);
                    }
                    Err(Fail::Unsupported(what)) => return Err(what),
                }
            }
            ids.push(id.to_string());
        }

        let out = {
            let mut view = self.view(&draft, &ids, turn, now);
            (view.asked, view.objects) = self.asked(hook.method, &payload);
            view.index = self.index(Some((hook.method, ev.payload, &draft)));
            view.turn_labels = self.entered_in_turn(turn, &draft, &ids);
            let current = (hook.method, ev.request_id, ev.payload);
            view.places = self.place_table(Some(current));
            let out = self.decide(hook, &view, &payload, &metadata);
            out.map(|mut o| {
                o.touched.extend(view.touched.take());
                o
            })?
        };
        self.commit_if(
            &out, hook, ev, payload, metadata, turn, turn_id, now, draft, ids,
        );
        Ok(out)
    }

    /// Runs every rule on the event's hook, in declaration order, and combines those that
    /// fired.
    fn decide(
        &self,
        hook: &'static HookSpec,
        view: &View<'_>,
        payload: &V,
        metadata: &V,
    ) -> Result<Outcome, String> {
        let mut fired: Vec<&Rule<'_>> = Vec::new();
        for rule in &self.policy.rules {
            if !rule.hooks.iter().any(|h| h.method == hook.method) {
                continue;
            }
            let fires = match rule.when {
                None => true,
                Some(when) => {
                    let mut cx = Cx {
                        view,
                        file: rule.file,
                        root: payload,
                        metadata,
                        current: None,
                        vars: Vec::new(),
                    };
                    // docs/language.md §10: a rule limited to some tools by a top-level
                    // `tool.name == "X"` / `tool.name in {…}` conjunct (the first one) runs only
                    // for those tools, as if that conjunct were tested first.
                    if let Some(filter) = tool_filter(&mut cx, when) {
                        if !matches!(truth(&mut cx, filter), Ok(Some(true))) {
                            continue;
                        }
                    }
                    match truth(&mut cx, when) {
                        Ok(r) => r == Some(true),
                        Err(Fail::Type(why)) => {
                            let why = format!("rule {}: {why}", rule.name);
                            return Ok(self.failed(hook, why, BTreeSet::new()));
                        }
                        Err(Fail::Unsupported(what)) => return Err(what),
                    }
                }
            };
            if fires {
                fired.push(rule);
            }
        }
        match combine(&self.policy, hook, &fired, view, payload, metadata) {
            Ok(out) => Ok(out),
            Err(Fail::Type(why)) => Ok(self.failed(hook, why, BTreeSet::new())),
            Err(Fail::Unsupported(what)) => Err(what),
        }
    }

    /// A failed decision: deny where deny is legal, else allow; either way with
    /// `warden.decision_failure`. An allowed step goes ahead with its content's labels.
    fn failed(&self, hook: &HookSpec, why: String, touched: BTreeSet<Touch>) -> Outcome {
        let kind = if hook.allows(DecisionKind::Deny) {
            DecisionKind::Deny
        } else {
            DecisionKind::Allow
        };
        Outcome {
            kind,
            reason_codes: vec![DECISION_FAILURE.into()],
            fired: Vec::new(),
            modifications: None,
            failure: Some(why),
            proceeds: kind == DecisionKind::Allow,
            touched,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn commit_if(
        &mut self,
        out: &Outcome,
        hook: &'static HookSpec,
        ev: &Event<'_>,
        payload: V,
        metadata: V,
        turn: u64,
        turn_id: Option<(String, u64)>,
        now: i64,
        draft: Vec<Node>,
        records: Vec<String>,
    ) {
        // A failed decision's content enters whatever the answer (docs/language.md §9).
        let failed = out.failure.is_some();
        if !out.proceeds && !failed {
            return;
        }
        self.committed.push(Recorded {
            counts: out.proceeds && !failed,
            method: hook.method,
            request_id: ev.request_id.to_string(),
            payload,
            metadata,
            turn,
            time: now,
            turn_id,
            records,
            json: ev.payload.clone(),
        });
        self.nodes.extend(draft);
    }

    // -----------------------------------------------------------------------------------------
    // What the session holds, for comparison with the VM's state.

    /// The names of the policy's labels.
    pub fn label_names(&self) -> Vec<String> {
        self.policy.label_names()
    }

    /// Every provenance node: id, labels, origins in its lineage, lineage depth.
    pub fn nodes(&self) -> Vec<(String, NodeView)> {
        self.nodes
            .iter()
            .map(|n| (n.id.clone(), n.view.clone()))
            .collect()
    }

    /// `turns_since(label)` as the next event would see it before its own content enters.
    pub fn turns_since(&self, label: &str) -> f64 {
        self.view(&[], &[], self.turn(), self.now())
            .turns_since(label)
    }

    /// Every `count(…)`/`exists(…)` in the rules' conditions, in the order they are written
    /// (rule by rule, left to right).
    pub fn queries(&self) -> Vec<QueryInfo> {
        let mut out = Vec::new();
        for rule in &self.policy.rules {
            if let Some(w) = rule.when {
                self.collect_queries(rule.file, w, &mut out);
            }
        }
        out
    }

    fn history_exprs<'e>(e: &'e Expr, out: &mut Vec<&'e History>) {
        match &e.kind {
            ExprKind::History(h) => out.push(h),
            ExprKind::Member(b, _) => Self::history_exprs(b, out),
            ExprKind::Index(b, i) => {
                Self::history_exprs(b, out);
                Self::history_exprs(i, out);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| Self::history_exprs(&a.value, out)),
            ExprKind::Unary(_, x) => Self::history_exprs(x, out),
            ExprKind::Binary(_, a, b) => {
                Self::history_exprs(a, out);
                Self::history_exprs(b, out);
            }
            ExprKind::Set(items) | ExprKind::List(items) => {
                items.iter().for_each(|i| Self::history_exprs(i, out))
            }
            ExprKind::Object(entries) => entries
                .iter()
                .for_each(|(_, v)| Self::history_exprs(v, out)),
            ExprKind::Quantifier { over, body, .. } => {
                Self::history_exprs(over, out);
                Self::history_exprs(body, out);
            }
            _ => {}
        }
    }

    fn collect_queries(&self, file: FileId, e: &Expr, out: &mut Vec<QueryInfo>) {
        let text = |e: &Expr| {
            let src = &self.policy.checked.loaded.sources.get(file).text;
            let s = src
                .get(e.span.start as usize..e.span.end as usize)
                .unwrap_or("");
            s.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let mut hs = Vec::new();
        Self::history_exprs(e, &mut hs);
        for h in hs {
            let Some(q) = Query::of(h) else { continue };
            let rest: Vec<String> = q.rest.iter().map(|e| text(e)).collect();
            let keys: Vec<String> = q
                .keys
                .iter()
                .map(|(p, c)| format!("{} == {}", text(p), text(c)))
                .collect();
            out.push(QueryInfo {
                text: format!(
                    "{} | {} | {} | {} | {:?}",
                    q.hook.method,
                    rest.join(" and "),
                    keys.join(" and "),
                    q.by.map(text).unwrap_or_default(),
                    q.window
                ),
                method: q.hook.method,
                window: q.window,
                key_parts: q.keys.len() + usize::from(q.by.is_some()),
                filtered: !q.rest.is_empty(),
            });
        }
    }

    /// For the `i`-th query (of [`Reference::queries`]), as of now (the committed turn and
    /// time): each distinct key (the key parts' values; empty for an unkeyed query) with the
    /// number of steps it counts.
    pub fn probe(&self, i: usize) -> Result<Vec<(Vec<V>, u64)>, String> {
        let mut hs: Vec<(FileId, &History)> = Vec::new();
        for rule in &self.policy.rules {
            if let Some(w) = rule.when {
                let mut found = Vec::new();
                Self::history_exprs(w, &mut found);
                hs.extend(found.into_iter().map(|h| (rule.file, h)));
            }
        }
        let (file, h) = *hs.get(i).ok_or("no such query")?;
        let q = Query::of(h).ok_or("no such hook")?;
        let view = self.view(&[], &[], self.turn(), self.now());
        let matched = view
            .matching(&q, file, None)
            .map_err(|e| format!("{e:?}"))?;
        let mut out: Vec<(Vec<V>, u64)> = Vec::new();
        if q.keys.is_empty() && q.by.is_none() {
            return Ok(vec![(Vec::new(), matched.len() as u64)]);
        }
        for parts in matched {
            match out.iter_mut().find(|(k, _)| {
                k.len() == parts.len() && k.iter().zip(&parts).all(|(a, b)| a.same(b))
            }) {
                Some((_, n)) => *n += 1,
                None => out.push((parts, 1)),
            }
        }
        Ok(out)
    }
}

/// Combines the rules that fired (docs/language.md §9): the strongest kind wins
/// (`deny > defer > ask > modify > allow`) with the codes of every firing rule of that kind;
/// no rule fired: the hook's default, else the catch-all default, else deny with
/// `warden.no_default` where deny is legal.
fn combine(
    policy: &Policy<'_>,
    hook: &'static HookSpec,
    fired: &[&Rule<'_>],
    view: &View<'_>,
    payload: &V,
    metadata: &V,
) -> eval::R<Outcome> {
    let outcome = |kind: DecisionKind, codes: Vec<String>| Outcome {
        kind,
        reason_codes: codes,
        fired: fired.iter().map(|r| r.name.clone()).collect(),
        modifications: None,
        failure: None,
        proceeds: kind.proceeds(),
        touched: BTreeSet::new(),
    };
    let code = |d: &ast::Decision| {
        d.reason
            .iter()
            .map(|r| r.code.value.clone())
            .collect::<Vec<_>>()
    };
    if fired.is_empty() {
        let default = policy
            .defaults
            .iter()
            .find(|d| d.hooks.iter().any(|h| h.method == hook.method))
            .or_else(|| policy.defaults.iter().find(|d| d.hooks.is_empty()));
        return Ok(match default {
            Some(d) if hook.allows(d.decision.kind) => {
                let mut out = outcome(d.decision.kind, code(d.decision));
                if d.decision.kind == DecisionKind::Modify {
                    let winners = [(d.decision, d.file)];
                    match merge(view, &winners, payload, metadata)? {
                        Ok(m) if m.is_empty() => out.kind = DecisionKind::Allow,
                        Ok(m) => out.modifications = Some(m),
                        Err(_) => return Ok(conflict(hook, out)),
                    }
                }
                out
            }
            // A catch-all `default deny` on a hook that cannot be denied is recorded as allow.
            Some(d) => outcome(DecisionKind::Allow, code(d.decision)),
            None if hook.allows(DecisionKind::Deny) => {
                outcome(DecisionKind::Deny, vec![NO_DEFAULT.into()])
            }
            None => outcome(DecisionKind::Allow, Vec::new()),
        });
    }
    let top = fired
        .iter()
        .map(|r| r.decision.kind)
        .max()
        .unwrap_or(DecisionKind::Allow);
    let winners: Vec<(&ast::Decision, FileId)> = fired
        .iter()
        .filter(|r| r.decision.kind == top)
        .map(|r| (r.decision, r.file))
        .collect();
    let mut codes: Vec<String> = Vec::new();
    for (d, _) in &winners {
        for c in code(d) {
            if !codes.contains(&c) {
                codes.push(c);
            }
        }
    }
    // An ask keeps the changes (and codes) of the modify rules beside it (docs/language.md §9).
    let changers: Vec<(&ast::Decision, FileId)> = match top {
        DecisionKind::Modify => winners,
        DecisionKind::Ask => fired
            .iter()
            .filter(|r| r.decision.kind == DecisionKind::Modify)
            .map(|r| (r.decision, r.file))
            .collect(),
        _ => Vec::new(),
    };
    if top == DecisionKind::Ask {
        for c in changers.iter().flat_map(|(d, _)| code(d)) {
            if !codes.contains(&c) {
                codes.push(c);
            }
        }
    }
    // Every fired modify rule's `redact each` chooses its places, whichever decision wins: what
    // it chooses is masked in every output, so a type error there fails the decision.
    let modifiers: Vec<(&ast::Decision, FileId)> = fired
        .iter()
        .filter(|r| r.decision.kind == DecisionKind::Modify)
        .map(|r| (r.decision, r.file))
        .collect();
    redact_each_choices(view, &modifiers, payload, metadata)?;
    let mut out = outcome(top, codes);
    if !changers.is_empty() {
        match merge(view, &changers, payload, metadata)? {
            // Nothing chosen to change: a modify goes ahead as an allow, an ask carries nothing.
            Ok(m) if m.is_empty() => {
                if top == DecisionKind::Modify {
                    out.kind = DecisionKind::Allow;
                }
            }
            Ok(m) => out.modifications = Some(m),
            Err(_) => return Ok(conflict(hook, out)),
        }
    }
    Ok(out)
}

/// The context a rule's decision is evaluated in: the event, no quantifier variables.
fn decision_cx<'a>(view: &'a View<'a>, file: FileId, payload: &'a V, metadata: &'a V) -> Cx<'a> {
    Cx {
        view,
        file,
        root: payload,
        metadata,
        current: None,
        vars: Vec::new(),
    }
}

/// Runs the `redact each` conditions of `rules` (for their type errors; what they choose is
/// merged by [`merge`] when the rules' changes apply).
fn redact_each_choices(
    view: &View<'_>,
    rules: &[(&ast::Decision, FileId)],
    payload: &V,
    metadata: &V,
) -> eval::R<()> {
    for (d, file) in rules {
        let mut cx = decision_cx(view, *file, payload, metadata);
        for change in &d.modifications {
            if let ast::Modification::RedactEach { select, .. } = change {
                value(&mut cx, select)?;
            }
        }
    }
    Ok(())
}

/// Modifications that cannot be applied together: deny (allow where deny is illegal).
fn conflict(hook: &HookSpec, mut out: Outcome) -> Outcome {
    out.kind = if hook.allows(DecisionKind::Deny) {
        DecisionKind::Deny
    } else {
        DecisionKind::Allow
    };
    out.reason_codes = vec![CONFLICTING_MODIFICATIONS.into()];
    out.proceeds = out.kind == DecisionKind::Allow;
    out.modifications = None;
    out
}

/// The winners' modifications, merged; `Err` when they conflict (ACS MODIFY rules: the same
/// place changed two ways, an undefined or non-string new value, a replacement together with
/// anything else, a redaction on or inside an overridden argument).
fn merge(
    view: &View<'_>,
    winners: &[(&ast::Decision, FileId)],
    payload: &V,
    metadata: &V,
) -> eval::R<Result<Mods, String>> {
    let mut m = Mods::default();
    for (d, file) in winners {
        let mut cx = decision_cx(view, *file, payload, metadata);
        for change in &d.modifications {
            match change {
                ast::Modification::Redact {
                    place, replacement, ..
                } => {
                    let with = replacement_text(&mut cx, replacement.as_ref())?;
                    if let Err(why) = m.redact(place.pointer(), with) {
                        return Ok(Err(why));
                    }
                }
                ast::Modification::RedactEach {
                    collection,
                    select,
                    replacement,
                    ..
                } => {
                    let with = replacement_text(&mut cx, replacement.as_ref())?;
                    let keys = value(&mut cx, select)?;
                    for path in chosen_places(payload, &collection.pointer(), keys) {
                        if let Err(why) = m.redact(path, with.clone()) {
                            return Ok(Err(why));
                        }
                    }
                }
                ast::Modification::Set {
                    place, value: e, ..
                } => {
                    let Some(PlaceSegment::Field(arg)) = place.segments.get(1) else {
                        return Err(Fail::Unsupported("a set place".into()));
                    };
                    let v = value(&mut cx, e)?;
                    if v.is_undef() {
                        return Ok(Err(format!("{} is undefined", arg.name)));
                    }
                    match m.overrides.get(&arg.name) {
                        Some(old) if !old.same(&v) => {
                            return Ok(Err(format!("{} twice", arg.name)))
                        }
                        _ => {
                            m.overrides.insert(arg.name.clone(), v);
                        }
                    }
                }
                ast::Modification::Replace { content, .. } => {
                    let V::Str(text) = value(&mut cx, content)? else {
                        return Ok(Err("the replacement is not a string".into()));
                    };
                    match &m.content {
                        Some(old) if *old != text => return Ok(Err("two replacements".into())),
                        _ => m.content = Some(text),
                    }
                }
            }
        }
    }
    if m.content.is_some() && (!m.redactions.is_empty() || !m.overrides.is_empty()) {
        return Ok(Err("a replacement with other changes".into()));
    }
    for arg in m.overrides.keys() {
        let target = format!("/arguments/{}", arg.replace('~', "~0").replace('/', "~1"));
        for (path, _) in &m.redactions {
            let inside = |a: &str, b: &str| a == b || b.starts_with(&format!("{a}/"));
            if inside(&target, path) || inside(path, &target) {
                return Ok(Err(format!("{path} redacted and {arg} overridden")));
            }
        }
    }
    Ok(Ok(m))
}

/// The first top-level conjunct of a condition that limits it to named tools: `tool.name ==
/// "X"` or `tool.name in C` with `C` a constant collection of strings.
fn tool_filter<'e>(cx: &mut Cx<'_>, e: &'e Expr) -> Option<&'e Expr> {
    match &e.kind {
        ExprKind::Binary(BinaryOp::And, a, b) => tool_filter(cx, a).or_else(|| tool_filter(cx, b)),
        ExprKind::Binary(op @ (BinaryOp::Eq | BinaryOp::In), lhs, rhs) => {
            let is_tool_name = matches!(&lhs.kind, ExprKind::Member(base, f)
                if f.name == "name" && matches!(&base.kind, ExprKind::Name(n) if n == "tool"));
            let constant = !matches!(
                rhs.kind,
                ExprKind::Member(..) | ExprKind::Index(..) | ExprKind::Call(..)
            );
            if !is_tool_name || !constant {
                return None;
            }
            match (op, eval::value(cx, rhs)) {
                (BinaryOp::Eq, Ok(eval::V::Str(_))) => Some(e),
                (BinaryOp::In, Ok(eval::V::List(items)))
                    if !items.is_empty() && items.iter().all(|i| matches!(i, eval::V::Str(_))) =>
                {
                    Some(e)
                }
                _ => None,
            }
        }
        _ => None,
    }
}
