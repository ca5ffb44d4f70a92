//! The compiled form of a policy: what the VM runs and the state keeps. Immutable once built;
//! shared between threads behind an `Arc`.

use std::borrow::Cow;
use std::sync::Arc;

use super::name_hash::{NameMap, NameSet};

use crate::acs::fields::HookSpec;
use crate::acs::DecisionKind;
use crate::diagnostics::Span;
use crate::syntax::ast::ApproverKind;

/// A constant in the pool. Sets are pre-hashed so membership is O(1).
#[derive(Debug, Clone, PartialEq)]
pub enum Const {
    Bool(bool),
    Num(f64),
    Str(Arc<str>),
    /// A set or list whose elements are all strings: membership by hash.
    StrSet(Arc<NameSet<Arc<str>>>, Arc<Vec<Const>>),
    /// Any other collection, kept in order.
    List(Arc<Vec<Const>>),
    /// An object literal, as JSON.
    Json(Arc<serde_json::Value>),
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    Payload,
    Metadata,
    /// A quantifier variable.
    Var(u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(Arc<str>),
    Index(usize),
}

/// A path into the event: `payload.tool.name` is `Payload, [tool, name]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    pub root: Root,
    pub segs: Vec<Seg>,
}

/// The builtin functions the VM implements (`Op::Call`); their names, arities and docs are in
/// the registry, `check::builtins`.
pub use crate::check::builtins::Builtin;

/// One instruction. Stack-based, with jump targets as absolute instruction indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Push constant `k`.
    Const(u32),
    /// Push the value at path `p` (undefined if absent).
    Path(u32),
    /// Replace a tool argument `{value, provenance}` on top by its value.
    Unwrap,
    /// Read member `k` (a string constant) of the JSON value on top.
    Member(u32),
    /// Pop index and base; push `base[index]`.
    Index,
    Not,
    Neg,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    /// Pop a string; push whether regular expression `r` (in [`Program::regexes`]) matches
    /// somewhere in it.
    Matches(u32),
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    /// If the top is false, jump (keeping it); else continue (keeping it).
    JumpIfFalse(u32),
    /// If the top is true, jump (keeping it); else continue (keeping it).
    JumpIfTrue(u32),
    /// Pop b and a; push Kleene `a and b` (a is true or undefined here).
    AndJoin,
    /// Pop b and a; push Kleene `a or b` (a is false or undefined here).
    OrJoin,
    /// Pop a carrier; push whether its provenance carries label bit `n`.
    Has(u8),
    /// Pop a carrier; push whether its lineage includes origin constant `k`.
    DerivedFrom(u32),
    /// Pop a carrier; push the origins of its direct sources, as a list of strings.
    Sources,
    /// Pop a carrier; push whether its sources were inferred rather than declared.
    LineageInferred,
    /// Pop a carrier; push the places its direct sources were read at, as a list of strings
    /// (an error when one of them is a place Warden cannot name).
    ReadAt,
    /// Pop a value (or carrier); push whether every one of its tokens appeared in content of
    /// origin constant `k` (lineage inference, whatever lineage was declared).
    FoundIn(u32),
    /// Pop a carrier; push whether some (`false`) or every (`true`) direct source has origin
    /// constant `k`.
    TakenFromOrigin(u32, bool),
    /// Pop a carrier; push whether some (`false`) or every (`true`) direct source carries label
    /// bit `n`.
    TakenFromLabel(u8, bool),
    /// Pop a carrier; push its lineage depth.
    LineageDepth,
    /// Push the number of turns since label bit `n` last entered the context.
    TurnsSince(u8),
    /// Push the count of history slot `n` (session-wide or windowed).
    History(u32),
    /// Pop a key; push the count of history slot `n` for that key.
    HistoryKeyed(u32),
    /// Pop `argc` values; push the builtin's result.
    Call(Builtin, u8),
    /// Pop tool \[operation\] \[resource\]; push whether the intent permits them. Flags: bit 0
    /// operation present, bit 1 resource present.
    IntentPermits(u8),
    /// Push whether an intent was declared; its raw text; its scope mode.
    IntentDeclared,
    IntentRaw,
    IntentScopeMode,
    /// Push the session Intent's capabilities, `[{tool, operation, resource}, …]` (undefined
    /// without an Intent).
    IntentParsed,
    /// Push the value of Rego rule `n` (of `Program::rego_refs`), evaluated with the event
    /// as input.
    Rego(u32),
    /// Pop `argc` arguments; push Rego function `n` applied to them.
    RegoCall(u32, u8),
    /// Pop an input, then `argc` arguments; push Rego rule or function `n` evaluated with
    /// that value as `input` (`org.rule(input: {…})`).
    RegoInput(u32, u8),
    /// Push JSON `null` for Rego (an argument, an `input:`, or a member or element of one);
    /// every other instruction reads `null` as absent.
    JsonNull,
    /// Pop a value; push its truth as a Rego rule body reads it: undefined and `false` are
    /// false, every other value is true (a Rego value used as a condition).
    Truthy,
    /// Push the state of effect `n`'s key for this call (`u32::MAX`: any effect of the call).
    EffectState(u32),
    /// Pop a value; push whether it is defined.
    Present,
    /// Pop `n` values; push a list of them.
    MakeList(u16),
    /// Pop one value per key of constant `k` (a list of strings); push an object of them.
    /// A member whose value is undefined is left out.
    MakeObject(u32),
    /// Pop a text (or an argument holding one); push the web and e-mail addresses written in
    /// it, each an argument with the text's provenance (`infer::links`).
    Links,
    /// Push whether the event's content is the output of a call the user requested
    /// (`Draft::requested_now`).
    Requested,
    /// Pop an argument name; push its role in this call's tool (`Program::argument_role`).
    Role,
    /// Push this call's effect class (`Program::effect_class`).
    EffectClass,
    /// Pop a class name; push whether the user's words asked for an action of that class
    /// (`Facts::asked_for`).
    AskedFor,
    /// Push whether the user's words handed the choice of actions to content
    /// (`Facts::delegated`).
    Delegated,
    /// `requested_object()`: whether the user's words named every kind of thing this call's
    /// tool acts on (`actions::objects_admitted`).
    RequestedObject,
    /// Pop a list argument; push its elements, each an argument with its own provenance.
    Elements,
    /// Pop a collection; begin iterating it. Each element's name or position goes into variable
    /// `k` (`u16::MAX`: no key variable).
    IterStart(u16),
    /// Bind the next element (and its key) to variable `v`, or jump to `exit` when done.
    IterNext(u16, u32),
    /// Pop the body's result. `any`: true → finish with true, jump to `done`; else loop.
    AnyStep(u32, u32),
    /// Pop the body's result. `all`: false → finish with false, jump to `done`; else loop.
    AllStep(u32, u32),
    /// The loop ran out: push false (`any`) / true (`all`), or undefined if a body was.
    IterEnd(bool),
    /// Pop the body's result. `each` (`redact each`): when it is true or undefined, keep the
    /// element's key (variable `k`); loop to `loop`.
    SelectStep(u16, u32),
    /// The `each` loop ran out: push the list of the keys it kept.
    SelectEnd,
    Return,
}

/// Compiled code with the source span of every instruction (for explain traces).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Code {
    pub ops: Vec<Op>,
    pub spans: Vec<Span>,
    /// Quantifier variables used.
    pub vars: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ModTemplate {
    Redact {
        /// JSON Pointer relative to the payload.
        pointer: String,
        replacement: String,
    },
    /// `redact each`: `select` gives the keys (names or positions) of the elements of the
    /// collection at `base` (a JSON pointer) to redact.
    RedactEach {
        base: String,
        select: Code,
        replacement: String,
    },
    Override {
        argument: String,
        value: Code,
    },
    Replace {
        content: Code,
    },
}

/// What a rule (or default) answers when it fires.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionTemplate {
    pub kind: DecisionKind,
    pub code: Option<Arc<str>>,
    pub reasoning: Option<Arc<str>>,
    pub approver: Option<(ApproverKind, Arc<str>)>,
    pub question: Option<Arc<str>>,
    pub timeout_ms: Option<u64>,
    pub on_timeout: Option<DecisionKind>,
    /// `expires`: how long a granted approval stays usable (ask only).
    pub expires_ms: Option<u64>,
    /// `extend intent`: the intent extension offered to the approver (ask only).
    pub extend: Option<crate::syntax::ast::ExtendScope>,
    pub resolve: Option<Arc<str>>,
    pub because: Option<Arc<str>>,
    pub modifications: Vec<ModTemplate>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompiledRule {
    pub name: Arc<str>,
    /// The module it came from (`std.taint`, or the policy's package / file).
    pub module: Arc<str>,
    /// `module.name`, as decisions cite it (made once, so a decision allocates no names).
    pub qualified: Arc<str>,
    pub hooks: Vec<&'static HookSpec>,
    pub code: Code,
    pub decision: DecisionTemplate,
    /// `from rego "…"`: the Rego deny set (an index into `Program::rego_refs`) whose messages
    /// are this rule's decisions.
    pub rego_source: Option<u32>,
    pub span: Span,
    pub file: crate::diagnostics::FileId,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LabelSpec {
    pub name: Arc<str>,
    pub bit: u8,
    pub redact: bool,
    /// Runs against a Provenance object as the payload; `None`: never attached directly.
    pub code: Option<Code>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    Session,
    ThisTurn,
    LastTurns(u32),
    LastMillis(u64),
}

/// A `count(...)`/`exists(...)`, kept as a counter updated when a matching event commits.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySlot {
    pub hook: &'static HookSpec,
    /// The filter minus its key equalities, run against the recorded event.
    pub filter: Option<Code>,
    /// Key parts read from the recorded event, and from the event being decided.
    pub key_past: Vec<Code>,
    pub key_current: Vec<Code>,
    pub window: WindowSpec,
}

/// Rules that can fire for one hook, split by the tool name they test (if any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookIndex {
    pub by_tool: NameMap<Arc<str>, Vec<u32>>,
    pub any_tool: Vec<u32>,
    /// Per tool of `by_tool`: its rules and `any_tool`'s, merged in declaration order once
    /// when the program is built ([`Program::merge_rule_index`]), not per decision.
    pub merged_by_tool: NameMap<Arc<str>, Vec<u32>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Program {
    pub consts: Vec<Const>,
    pub paths: Vec<PathSpec>,
    pub rules: Vec<CompiledRule>,
    pub labels: Vec<LabelSpec>,
    /// Label bits given to content whose provenance is unknown (a dangling `derived_from`):
    /// the labels an `external` origin would get. Unknown is never clean.
    pub unknown_labels: u64,
    /// The label bits a provenance record earns from its `origin` alone, one entry per known
    /// origin (in `acs::fields::ORIGINS` order), when no label condition reads anything but
    /// `origin` ([`Program::labels_read_only_origin`]); `None` otherwise. Filled in with
    /// `unknown_labels` by whoever runs the VM (the Guardian), so that a record's own labels
    /// are a table look-up instead of a VM run per condition.
    pub labels_by_origin: Option<[u64; 8]>,
    pub history: Vec<HistorySlot>,
    /// Per method, the rules to run.
    pub index: NameMap<&'static str, HookIndex>,
    /// Per method, and for every hook (`None`).
    pub defaults: NameMap<Option<&'static str>, DecisionTemplate>,
    /// History slots to update, per method.
    pub history_by_hook: NameMap<&'static str, Vec<u32>>,
    /// Instruction budget per decision.
    pub budget: u64,
    /// The Rego engine, when the policy imports Rego.
    pub rego: Option<std::sync::Arc<crate::rego::Bridge>>,
    /// `data.` paths of the Rego rules and functions called at run time.
    pub rego_refs: Vec<String>,
    /// Constants folded from Rego at compile time, with the rule they came from (for --dump).
    pub rego_folded: Vec<(u32, String)>,
    /// `mask` paths into the payload: values there never appear in explain traces.
    pub masked: Vec<Vec<Seg>>,
    /// `effect` declarations, in declaration order (docs/effects.md).
    pub effects: Vec<EffectSpec>,
    /// The regular expressions of `matches`, compiled when the policy loaded.
    pub regexes: Vec<Pattern>,
    /// `tool` declarations by tool name: the arguments each call must carry.
    pub tools: NameMap<Arc<str>, ToolSpec>,
    /// Some rule or label reads `requested_by_user()`: only then does a session remember
    /// which calls the user asked for (work on every `toolCallRequest` otherwise wasted).
    pub reads_requested: bool,
    /// Some rule or label reads `read_at(x)`: only then does a session note the places each
    /// call reads at.
    pub reads_places: bool,
    /// The catalogue's effect class of each tool name seen so far (`effect_class`): the
    /// catalogue reads a name's words against its lists, which costs more than a decision,
    /// so each name is read once per program.
    pub class_memo: ClassMemo,
}

/// `tool NAME(ARG: TYPE, …)`: what a call of the tool must look like.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub params: Vec<ToolParamSpec>,
    /// What the tool does (`tool … is CLASS`), when its declaration says.
    pub class: Option<&'static str>,
}

impl ToolSpec {
    /// Checks a call's `arguments` (each `{value, provenance}`, or a bare value): every
    /// declared argument that is not optional is present, every present one has its type, and
    /// there is no argument the declaration does not name. The error says what is wrong.
    pub fn check_call(
        &self,
        tool: &str,
        arguments: Option<&serde_json::Value>,
    ) -> Result<(), String> {
        use serde_json::Value;
        let empty = serde_json::Map::new();
        let args = match arguments {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(other) => return Err(format!("{tool}: the arguments are {other}, not an object")),
        };
        let value_of = |v: &'_ Value| -> Option<Value> {
            let v = match v {
                Value::Object(m) if m.contains_key("value") => m.get("value")?.clone(),
                other => other.clone(),
            };
            (!v.is_null()).then_some(v)
        };
        for p in &self.params {
            match args.get(&*p.name).and_then(value_of) {
                None if p.optional => {}
                None => return Err(format!("{tool}: the argument `{}` is missing", p.name)),
                Some(v) if !fits(&p.ty, &v) => {
                    return Err(format!(
                        "{tool}: the argument `{}` must be {}, not {v}",
                        p.name,
                        describe(&p.ty)
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = args
            .keys()
            .find(|k| !self.params.iter().any(|p| &*p.name == k.as_str()))
        {
            let names: Vec<&str> = self.params.iter().map(|p| &*p.name).collect();
            return Err(format!(
                "{tool}: `{extra}` is not one of its declared arguments ({})",
                names.join(", ")
            ));
        }
        Ok(())
    }
}

fn fits(t: &crate::syntax::ast::ArgType, v: &serde_json::Value) -> bool {
    use crate::syntax::ast::ArgType;
    use serde_json::Value;
    match (t, v) {
        (ArgType::Any, _) => true,
        (ArgType::String, Value::String(_)) => true,
        (ArgType::Number, Value::Number(_)) => true,
        (ArgType::Integer, Value::Number(n)) => n.as_f64().is_some_and(|x| x.fract() == 0.0),
        (ArgType::Bool, Value::Bool(_)) => true,
        (ArgType::Object, Value::Object(_)) => true,
        (ArgType::List(e), Value::Array(items)) => items.iter().all(|i| fits(e, i)),
        _ => false,
    }
}

fn describe(t: &crate::syntax::ast::ArgType) -> String {
    use crate::syntax::ast::ArgType;
    match t {
        ArgType::Integer => "a whole number".into(),
        ArgType::Object => "an object".into(),
        ArgType::Any => "any value".into(),
        ArgType::List(e) => format!("a list of {e}"),
        other => format!("a {other}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolParamSpec {
    pub name: Arc<str>,
    pub optional: bool,
    pub ty: crate::syntax::ast::ArgType,
    /// The declared role (`as ROLE`), a word of `roles::ROLES`.
    pub role: Option<&'static str>,
}

impl Program {
    /// Whether any rule or default redacts (`redact`, `redact each`): a failed decision's
    /// arguments are then masked whole in the decision log.
    pub fn redacts(&self) -> bool {
        let redacting = |t: &DecisionTemplate| {
            t.modifications.iter().any(|m| {
                matches!(
                    m,
                    ModTemplate::Redact { .. } | ModTemplate::RedactEach { .. }
                )
            })
        };
        self.rules.iter().any(|r| redacting(&r.decision)) || self.defaults.values().any(redacting)
    }
}

impl Program {
    /// What reads `tool.name` of a `toolCallResult`: the rules on that hook (`module.rule`) and
    /// the history filters over it whose code reads the path. A result that arrives without
    /// `tool` can match none of them, and its answer says so (docs/language.md §5).
    pub fn result_tool_readers(&self) -> Vec<String> {
        let reads = |code: &Code| {
            code.ops.iter().any(|op| match op {
                Op::Path(p) => self.paths.get(*p as usize).is_some_and(|spec| {
                    spec.root == Root::Payload
                        && matches!(spec.segs.as_slice(),
                            [Seg::Key(a), Seg::Key(b), ..] if &**a == "tool" && &**b == "name")
                }),
                _ => false,
            })
        };
        let on_results = |h: &HookSpec| h.method == "steps/toolCallResult";
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.hooks.iter().any(|h| on_results(h)) && reads(&r.code))
            .map(|r| format!("rule {}", r.qualified))
            .collect();
        if self
            .history
            .iter()
            .any(|h| on_results(h.hook) && h.filter.as_ref().is_some_and(reads))
        {
            out.push("a history filter over toolCallResult".to_string());
        }
        out
    }

    /// Whether every label condition depends on nothing but the record's `origin`: it reads
    /// no path but `origin`, no state, no Rego, no builtin, and only compares, tests
    /// membership in constants and combines truth values. Then its value is the same for any
    /// two records of one origin.
    pub fn labels_read_only_origin(&self) -> bool {
        let origin_only = |p: u32| {
            self.paths.get(p as usize).is_some_and(|spec| {
                spec.root == Root::Payload
                    && matches!(spec.segs.as_slice(), [Seg::Key(k)] if &**k == "origin")
            })
        };
        self.labels
            .iter()
            .filter_map(|l| l.code.as_ref())
            .all(|code| {
                code.ops.iter().all(|op| match op {
                    Op::Path(p) => origin_only(*p),
                    Op::Const(_)
                    | Op::Unwrap
                    | Op::Not
                    | Op::Eq
                    | Op::Ne
                    | Op::In
                    | Op::NotIn
                    | Op::JumpIfFalse(_)
                    | Op::JumpIfTrue(_)
                    | Op::AndJoin
                    | Op::OrJoin
                    | Op::Present
                    | Op::Return => true,
                    _ => false,
                })
            })
    }

    /// The effect class of a call of `tool` with these arguments: its declaration's, else the
    /// standard catalogue's (src/actions.rs), which reads the tool's name and, failing that,
    /// its argument names; `unknown` for a tool neither can read.
    pub fn effect_class(
        &self,
        tool: Option<&str>,
        args: Option<&serde_json::Value>,
    ) -> &'static str {
        let Some(tool) = tool else { return "unknown" };
        if let Some(class) = self.tools.get(tool).and_then(|spec| spec.class) {
            return class;
        }
        if let Some(class) = self.class_memo.get(tool) {
            return class;
        }
        // A class read from the name alone holds for every call of the tool, so it is read
        // once per program; one that needs the argument names is read for each call.
        let by_name = crate::actions::catalogue_class(tool, std::iter::empty());
        if by_name != "unknown" {
            self.class_memo.put(tool, by_name);
            return by_name;
        }
        let names = args
            .and_then(serde_json::Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str));
        crate::actions::catalogue_class(tool, names)
    }

    /// The role of argument `arg` in a call of `tool`: its declaration's, else the standard
    /// catalogue's (src/roles.rs).
    pub fn argument_role(&self, tool: Option<&str>, arg: &str) -> &'static str {
        tool.and_then(|t| self.tools.get(t))
            .and_then(|spec| spec.params.iter().find(|p| &*p.name == arg))
            .and_then(|p| p.role)
            .unwrap_or_else(|| crate::roles::catalogue_role(arg))
    }
}

/// A compiled `matches` pattern; two are equal when their source text is.
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl std::ops::Deref for Pattern {
    type Target = regex::Regex;
    fn deref(&self) -> &regex::Regex {
        &self.0
    }
}

/// `effect NAME for TOOL [not_executed_on_error] = key(…)`.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectSpec {
    pub name: Arc<str>,
    pub tool: Arc<str>,
    /// A `failure` / `timeout` result means the tool did not act: failed, not ambiguous.
    pub not_executed_on_error: bool,
    /// Code producing the list of key parts, run on the toolCallRequest.
    pub key: Code,
    /// How many key parts there are (a call missing one has no key).
    pub parts: usize,
    /// `lease N turns`: a reservation older than this many turns reads as ambiguous.
    pub lease_turns: Option<u64>,
    /// `lease DURATION`: a reservation older than this reads as ambiguous.
    pub lease_ms: Option<u64>,
}

impl Program {
    /// The rule indices to run for a method and tool name, in declaration order (borrowed
    /// from the index unless rules for the tool join the ones for any tool).
    pub fn rules_for(&self, method: &str, tool: Option<&str>) -> Cow<'_, [u32]> {
        let Some(ix) = self.index.get(method) else {
            return Cow::Borrowed(&[]);
        };
        if let Some(merged) = tool.and_then(|t| ix.merged_by_tool.get(t)) {
            return Cow::Borrowed(merged);
        }
        match tool.and_then(|t| ix.by_tool.get(t)) {
            Some(t) => {
                let mut out = ix.any_tool.clone();
                out.extend_from_slice(t);
                out.sort_unstable();
                Cow::Owned(out)
            }
            None => Cow::Borrowed(&ix.any_tool),
        }
    }

    /// Fills each hook's [`HookIndex::merged_by_tool`] from `by_tool` and `any_tool`.
    pub fn merge_rule_index(&mut self) {
        for ix in self.index.values_mut() {
            ix.merged_by_tool = ix
                .by_tool
                .iter()
                .map(|(tool, ids)| {
                    let mut merged = ix.any_tool.clone();
                    merged.extend_from_slice(ids);
                    merged.sort_unstable();
                    (tool.clone(), merged)
                })
                .collect();
        }
    }

    pub fn label_bit(&self, name: &str) -> Option<u8> {
        self.labels.iter().find(|l| &*l.name == name).map(|l| l.bit)
    }

    pub fn label_names(&self, bits: u64) -> Vec<&str> {
        self.labels
            .iter()
            .filter(|l| bits & (1u64 << l.bit) != 0)
            .map(|l| &*l.name)
            .collect()
    }
}

/// A number as JSON: integral values print without a fraction.
pub fn num_json(n: f64) -> serde_json::Value {
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// A constant as JSON.
pub fn const_json(c: &Const) -> serde_json::Value {
    match c {
        Const::Bool(b) => serde_json::Value::Bool(*b),
        Const::Num(n) => num_json(*n),
        Const::Str(s) => serde_json::Value::String(s.to_string()),
        Const::StrSet(_, items) | Const::List(items) => {
            serde_json::Value::Array(items.iter().map(const_json).collect())
        }
        Const::Json(v) => (**v).clone(),
    }
}

/// A JSON value as a constant: arrays of strings become hashed sets.
pub fn json_const(v: &serde_json::Value) -> Const {
    match v {
        serde_json::Value::Bool(b) => Const::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_f64()
            .map_or(Const::Json(Arc::new(v.clone())), Const::Num),
        serde_json::Value::String(s) => Const::Str(Arc::from(s.as_str())),
        serde_json::Value::Array(items) => collection(items.iter().map(json_const).collect()),
        other => Const::Json(Arc::new(other.clone())),
    }
}

/// Constants as a collection: all strings make a hashed set.
pub(crate) fn collection(items: Vec<Const>) -> Const {
    if items.iter().all(|c| matches!(c, Const::Str(_))) {
        let set: NameSet<Arc<str>> = items
            .iter()
            .filter_map(|c| match c {
                Const::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        Const::StrSet(Arc::new(set), Arc::new(items))
    } else {
        Const::List(Arc::new(items))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn instructions_stay_small() {
        assert!(std::mem::size_of::<super::Op>() <= 16);
    }
}

/// [`Program::effect_class`]'s memo: tool name to the class its name alone gives, at most
/// 4096 names (past that, names are read each time). A clone starts empty; memos never make
/// two programs differ.
#[derive(Default)]
pub struct ClassMemo(std::sync::RwLock<std::collections::HashMap<Box<str>, &'static str>>);

impl ClassMemo {
    const CAP: usize = 4096;

    fn get(&self, tool: &str) -> Option<&'static str> {
        self.0.read().ok()?.get(tool).copied()
    }

    fn put(&self, tool: &str, class: &'static str) {
        if let Ok(mut m) = self.0.write() {
            if m.len() < Self::CAP {
                m.insert(Box::from(tool), class);
            }
        }
    }
}

impl Clone for ClassMemo {
    fn clone(&self) -> Self {
        ClassMemo::default()
    }
}

impl PartialEq for ClassMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for ClassMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClassMemo")
    }
}
