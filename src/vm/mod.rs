//! The VM: runs one compiled [`Code`] against an event and a session state, under an
//! instruction budget. It never panics on input. A field absent from the payload evaluates to
//! *undefined*, which propagates by Kleene logic (docs/language.md §10); a value that is present
//! but of the wrong type for an operation is a [`VmError::Type`], which fails the decision
//! closed. A rule fires only when its condition is `true`.

mod builtins;
mod facts;
mod links;
mod trace;
mod value;

use std::borrow::Cow;
use std::rc::Rc;

use serde_json::Value;
use smallvec::SmallVec;

pub use facts::{Facts, Node, UNKNOWN_PLACE};
pub use trace::{Observation, Operand, Probe};
pub use value::{glob as glob_match, Kind, Val};

use crate::compile::{Code, Const, Op, Program, Root, Seg};

/// Why an evaluation stopped without a result. Every one is a decision failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmError {
    #[error("the instruction budget of {0} was exhausted")]
    Budget(u64),
    #[error("malformed bytecode at instruction {0} (a compiler bug)")]
    Malformed(usize),
    #[error("Rego evaluation failed: {0}")]
    Rego(String),
    /// A present value of the wrong type (`args.amount > 1000` with `"5000"`).
    #[error("type error{}: {message}", rule.as_ref().map(|r| format!(" in rule {r}")).unwrap_or_default())]
    Type {
        message: String,
        span: crate::diagnostics::Span,
        rule: Option<std::sync::Arc<str>>,
    },
}

impl VmError {
    /// Names the rule whose condition raised a type error.
    pub fn in_rule(self, name: &std::sync::Arc<str>) -> VmError {
        match self {
            VmError::Type { message, span, .. } => VmError::Type {
                message,
                span,
                rule: Some(name.clone()),
            },
            other => other,
        }
    }
}

/// A Rego result as a value: undefined and `null` are absent. Read as a condition (the next
/// instruction is `truthy`), a `null` is true, as in a Rego rule body.
fn rego_val<'a>(v: Option<Value>, next: Option<&Op>) -> Val<'a> {
    match v {
        Some(Value::Null) if matches!(next, Some(Op::Truthy)) => Val::Bool(true),
        v => v.map_or(Val::Undef, Val::owned),
    }
}

/// Rego results already computed in this decision, by rule and arguments.
pub type RegoCache = std::cell::RefCell<std::collections::HashMap<(u32, String), Option<Value>>>;

/// What one evaluation can see.
pub struct Env<'a> {
    pub program: &'a Program,
    pub payload: &'a Value,
    pub metadata: &'a Value,
    pub state: &'a dyn Facts,
    /// Rego results of this decision; `None` evaluates without caching.
    pub rego_cache: Option<&'a RegoCache>,
}

impl Env<'_> {
    /// The `input` a Rego rule sees: the payload and metadata, plus Warden's view of the
    /// session (the turn, and the labels of each tool argument).
    fn rego_input(&self) -> Value {
        let mut labels = serde_json::Map::new();
        if let Some(args) = self.payload.get("arguments").and_then(Value::as_object) {
            for (name, arg) in args {
                if let Some(l) = self.state.labels_of(self.program, &Val::Json(arg)) {
                    labels.insert(name.clone(), serde_json::json!(self.program.label_names(l)));
                }
            }
        }
        serde_json::json!({
            "payload": self.payload,
            "metadata": self.metadata,
            "session": {"turn": self.state.turn()},
            "labels": {"arguments": labels},
        })
    }

    /// Evaluates Rego rule `id` (a function, when `args` are given), cached per decision.
    /// `input`: the input the policy built (`org.rule(input: {…})`); `None`: the default one.
    pub fn rego(
        &self,
        id: u32,
        args: &[Value],
        input: Option<&Value>,
    ) -> Result<Option<Value>, VmError> {
        let bridge = self
            .program
            .rego
            .as_ref()
            .ok_or_else(|| VmError::Rego("no Rego engine is loaded".into()))?;
        let path = self
            .program
            .rego_refs
            .get(id as usize)
            .ok_or(VmError::Malformed(0))?;
        let key = (
            id,
            match input {
                Some(i) => format!("{}{i}", Value::Array(args.to_vec())),
                None => Value::Array(args.to_vec()).to_string(),
            },
        );
        if let Some(cache) = self.rego_cache {
            if let Some(hit) = cache.borrow().get(&key) {
                return Ok(hit.clone());
            }
        }
        let input = match input {
            Some(i) => i.clone(),
            None => self.rego_input(),
        };
        let result = if args.is_empty() {
            bridge.eval(path, Some(&input))
        } else {
            bridge.call(path, args, &input)
        }
        .map_err(VmError::Rego)?;
        if let Some(cache) = self.rego_cache {
            cache.borrow_mut().insert(key, result.clone());
        }
        Ok(result)
    }
}

/// Instructions left for the whole decision.
pub struct Budget {
    pub left: u64,
    pub limit: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Self {
        Budget { left: limit, limit }
    }
}

struct Iter<'a> {
    items: Vec<Val<'a>>,
    /// Each item's name or position, and the variable it goes into (when the quantifier
    /// names one).
    keys: Option<(Vec<Val<'a>>, u16)>,
    pos: usize,
    saw_undef: bool,
    /// The collection, kept for the explain trace (only when tracing).
    of: Option<Val<'a>>,
    /// `each`: the keys of the elements chosen so far.
    selected: Vec<Val<'a>>,
}

/// A provenance question (`has`, `taken_from(…)`, …) about a bare string, number or bool
/// has no answer: it is a type error (the decision fails closed), never an unfired rule.
fn has_provenance(v: &Val<'_>, what: &str) -> Result<(), value::TypeError> {
    match v {
        Val::Str(_) | Val::Num(_) | Val::Bool(_) => Err(format!(
            "{what} asks where a value came from, but {} carries no provenance: pass a tool \
             argument or content (`{{value, provenance}}`), not a bare value",
            v.what()
        )),
        _ => Ok(()),
    }
}

/// The names of place bits `bits` (`read_at`), in the order the session first named them; an
/// error when one is a place Warden cannot name, so that no rule reads it as some other place.
fn place_names<'a>(facts: &dyn Facts, bits: u64) -> Result<Val<'a>, value::TypeError> {
    if bits & UNKNOWN_PLACE != 0 {
        return Err("read_at(…): the value was read at a place Warden cannot name (content of \
                    unknown lineage, or a session past 63 places), so no rule may take it for \
                    another"
            .to_string());
    }
    let mut names = Vec::new();
    let mut rest = bits;
    while rest != 0 {
        let bit = rest.trailing_zeros();
        rest &= rest - 1;
        let name = facts
            .place_name(bit)
            .ok_or_else(|| "read_at(…): a place missing from the session's table".to_string())?;
        names.push(Value::String(name.to_string()));
    }
    Ok(Val::owned(Value::Array(names)))
}

/// Runs `code` and returns its result value.
pub fn run<'a>(
    env: &Env<'a>,
    code: &'a Code,
    budget: &mut Budget,
    trace: Option<&mut Vec<Observation>>,
) -> Result<Val<'a>, VmError> {
    let program: &'a Program = env.program;
    // Inline up to these sizes (most rules and labels): no allocation per run.
    let mut stack: SmallVec<[Val<'a>; 16]> = SmallVec::new();
    let mut vars: SmallVec<[Val<'a>; 8]> = smallvec::smallvec![Val::Undef; code.vars as usize];
    let mut iters: Vec<Iter<'a>> = Vec::new();
    let mut pc = 0usize;
    let mut tracer = trace.map(trace::Tracer::new);
    // A type error at the instruction just executed.
    macro_rules! typed {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(message) => {
                    return Err(VmError::Type {
                        message,
                        span: code.spans.get(pc - 1).copied().unwrap_or_default(),
                        rule: None,
                    })
                }
            }
        };
    }
    macro_rules! pop {
        () => {
            match stack.pop() {
                Some(v) => v,
                None => return Err(VmError::Malformed(pc)),
            }
        };
    }
    // The span of the instruction being run (for the explain trace).
    macro_rules! here {
        () => {
            code.spans.get(pc - 1).copied().unwrap_or_default()
        };
    }
    // Records a call that returned `$v` (a value about to be pushed) with `$args`, which were
    // in the stack slots from `$base` on.
    macro_rules! traced_call {
        ($v:expr, $base:expr, $args:expr) => {
            if let Some(t) = tracer.as_mut() {
                let operands = t.operands(env, $base, $args);
                t.call(here!(), &$v, operands);
            }
        };
    }
    loop {
        if budget.left == 0 {
            return Err(VmError::Budget(budget.limit));
        }
        budget.left -= 1;
        let Some(op) = code.ops.get(pc) else {
            return Err(VmError::Malformed(pc));
        };
        pc += 1;
        match *op {
            Op::Const(k) => match program.consts.get(k as usize) {
                Some(c) => stack.push(Val::from_const(c)),
                None => return Err(VmError::Malformed(pc)),
            },
            Op::Path(p) => {
                let Some(spec) = program.paths.get(p as usize) else {
                    return Err(VmError::Malformed(pc));
                };
                let mut v: Val<'a> = match spec.root {
                    Root::Payload => Val::from_json(env.payload),
                    Root::Metadata => Val::from_json(env.metadata),
                    Root::Var(i) => vars.get(i as usize).cloned().unwrap_or(Val::Undef),
                };
                if let (Val::Owned(root), true) = (&v, spec.segs.len() > 1) {
                    // A path into a value built at run time (a list argument's element): walk
                    // it by reference and copy only what it ends at.
                    let root = Rc::clone(root);
                    let mut at = Val::from_json(&root);
                    for seg in &spec.segs {
                        at = typed!(match seg {
                            Seg::Key(k) => at.member(k),
                            Seg::Index(i) => at.index(&Val::Num(*i as f64)),
                        });
                    }
                    v = at.detach();
                } else {
                    for seg in &spec.segs {
                        v = typed!(match seg {
                            Seg::Key(k) => v.member(k),
                            Seg::Index(i) => v.index(&Val::Num(*i as f64)),
                        });
                    }
                }
                stack.push(v);
            }
            Op::Unwrap => {
                let v = pop!();
                match tracer.as_mut() {
                    Some(t) => {
                        let u = v.clone().unwrap_argument();
                        t.unwrapped(env, stack.len(), &v, &u);
                        stack.push(u);
                    }
                    None => stack.push(v.unwrap_argument()),
                }
            }
            Op::Member(k) => {
                let v = pop!();
                let key = match program.consts.get(k as usize) {
                    Some(Const::Str(s)) => s,
                    _ => return Err(VmError::Malformed(pc)),
                };
                let m = typed!(v.member(key));
                if let Some(t) = tracer.as_mut().filter(|_| &**key == "value") {
                    // `x.value` of a carrier keeps, in the trace, the labels `x` carries.
                    t.unwrapped(env, stack.len(), &v, &m);
                }
                stack.push(m);
            }
            Op::Index => {
                let i = pop!();
                let v = pop!();
                stack.push(typed!(v.index(&i)));
            }
            Op::Not => {
                let v = pop!();
                stack.push(match typed!(v.truth_checked("`not`'s operand")) {
                    Some(b) => Val::Bool(!b),
                    None => Val::Undef,
                });
            }
            Op::Neg => {
                let v = pop!();
                stack.push(match v {
                    Val::Num(n) => Val::Num(-n),
                    Val::Undef => Val::Undef,
                    other => typed!(Err(format!("`-` negates a number, not {}", other.what()))),
                });
            }
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::In | Op::NotIn => {
                let b = pop!();
                let a = pop!();
                let r = typed!(value::compare(op, &a, &b));
                if let Some(t) = tracer.as_mut() {
                    let operands = t.operands(env, stack.len(), &[a, b]);
                    t.check(here!(), Probe::Compare, r, operands);
                }
                stack.push(r.map_or(Val::Undef, Val::Bool));
            }
            Op::Matches(re) => {
                let a = pop!();
                let Some(regex) = program.regexes.get(re as usize) else {
                    return Err(VmError::Malformed(pc));
                };
                let r = typed!(value::regex_match(regex, &a));
                if let Some(t) = tracer.as_mut() {
                    let pattern = Val::Str(Cow::Borrowed(regex.as_str()));
                    let operands = t.operands(env, stack.len(), &[a, pattern]);
                    t.check(here!(), Probe::Compare, r, operands);
                }
                stack.push(r.map_or(Val::Undef, Val::Bool));
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Rem => {
                let b = pop!();
                let a = pop!();
                stack.push(typed!(value::arith(op, a, b)));
            }
            Op::JumpIfFalse(t) => {
                if matches!(stack.last(), Some(Val::Bool(false))) {
                    pc = t as usize;
                }
            }
            Op::JumpIfTrue(t) => {
                if matches!(stack.last(), Some(Val::Bool(true))) {
                    pc = t as usize;
                }
            }
            Op::AndJoin => {
                let b = typed!(pop!().truth_checked("`and`'s right side"));
                let a = typed!(pop!().truth_checked("`and`'s left side"));
                stack.push(match (a, b) {
                    (Some(false), _) | (_, Some(false)) => Val::Bool(false),
                    (Some(true), Some(true)) => Val::Bool(true),
                    _ => Val::Undef,
                });
            }
            Op::OrJoin => {
                let b = typed!(pop!().truth_checked("`or`'s right side"));
                let a = typed!(pop!().truth_checked("`or`'s left side"));
                stack.push(match (a, b) {
                    (Some(true), _) | (_, Some(true)) => Val::Bool(true),
                    (Some(false), Some(false)) => Val::Bool(false),
                    _ => Val::Undef,
                });
            }
            Op::Has(bit) => {
                let v = pop!();
                typed!(has_provenance(&v, "`has`"));
                let r = env
                    .state
                    .labels_of(program, &v)
                    .map(|l| l & (1u64 << bit) != 0);
                if let Some(t) = tracer.as_mut() {
                    let operands = t.operands(env, stack.len(), &[v]);
                    t.check(here!(), Probe::Has, r, operands);
                }
                stack.push(r.map_or(Val::Undef, Val::Bool));
            }
            Op::DerivedFrom(k) => {
                let v = pop!();
                typed!(has_provenance(&v, "derived_from(…)"));
                let origin = match program.consts.get(k as usize) {
                    Some(Const::Str(s)) => s,
                    _ => return Err(VmError::Malformed(pc)),
                };
                let r = env
                    .state
                    .node_of(program, &v)
                    .map(|n| n.origins & crate::acs::fields::origin_bit(origin) != 0);
                let r = r.map_or(Val::Undef, Val::Bool);
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::FoundIn(k) => {
                let v = pop!();
                let origin = match program.consts.get(k as usize) {
                    Some(Const::Str(s)) => crate::acs::fields::origin_bit(s),
                    _ => return Err(VmError::Malformed(pc)),
                };
                let json = v.carrier_json().map(|j| j.get("value").unwrap_or(j));
                let owned = if json.is_none() { v.to_json() } else { None };
                let r = match json.or(owned.as_ref()) {
                    Some(value) => {
                        let n = env.state.infer_node(program, value, 0);
                        // What the user said is searched as text: the value must occur in it
                        // as one contiguous run, not only token by token.
                        let user = crate::acs::fields::origin_bit("user_input");
                        Val::Bool(
                            n.source_origins & origin != 0
                                && (origin != user || env.state.said_by_user(value)),
                        )
                    }
                    None => Val::Undef,
                };
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::LineageInferred => {
                let v = pop!();
                typed!(has_provenance(&v, "lineage_inferred(…)"));
                let r = env
                    .state
                    .node_of(program, &v)
                    .map_or(Val::Undef, |n| Val::Bool(n.inferred));
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::ReadAt => {
                let v = pop!();
                typed!(has_provenance(&v, "read_at(…)"));
                let r = match env.state.node_of(program, &v) {
                    Some(n) => typed!(place_names(env.state, n.source_places)),
                    None => Val::Undef,
                };
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::Sources => {
                let v = pop!();
                typed!(has_provenance(&v, "sources(…)"));
                let r = match env.state.node_of(program, &v) {
                    Some(n) => Val::owned(Value::Array(
                        crate::acs::fields::ORIGINS
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| n.source_origins & (1u8 << i) != 0)
                            .map(|(_, o)| Value::String((*o).to_string()))
                            .collect(),
                    )),
                    None => Val::Undef,
                };
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::TakenFromOrigin(k, all) => {
                let v = pop!();
                typed!(has_provenance(&v, "taken_from(…)"));
                let origin = match program.consts.get(k as usize) {
                    Some(Const::Str(s)) => crate::acs::fields::origin_bit(s),
                    _ => return Err(VmError::Malformed(pc)),
                };
                let r = env.state.node_of(program, &v).map(|n| {
                    if all {
                        n.source_origins != 0 && n.source_origins & !origin == 0
                    } else {
                        n.source_origins & origin != 0
                    }
                });
                let r = r.map_or(Val::Undef, Val::Bool);
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::TakenFromLabel(bit, all) => {
                let v = pop!();
                typed!(has_provenance(&v, "taken_from(…)"));
                let r = env.state.node_of(program, &v).map(|n| {
                    let set = if all { n.source_all } else { n.source_any };
                    set & (1u64 << bit) != 0
                });
                let r = r.map_or(Val::Undef, Val::Bool);
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::LineageDepth => {
                let v = pop!();
                typed!(has_provenance(&v, "lineage_depth(…)"));
                let r = env.state.node_of(program, &v).map(|n| n.depth as f64);
                let r = r.map_or(Val::Undef, Val::Num);
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::TurnsSince(bit) => {
                let r = Val::Num(env.state.turns_since(bit));
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::EffectState(id) => {
                let r = env
                    .state
                    .effect_state(id)
                    .map_or(Val::Undef, |s| Val::Str(Cow::Borrowed(s)));
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::History(slot) => {
                let r = Val::Num(env.state.history_count(program, slot, None) as f64);
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::HistoryKeyed(slot) => {
                let key = pop!();
                let r = match key.key_string() {
                    Some(k) => Val::Num(env.state.history_count(program, slot, Some(&k)) as f64),
                    None => Val::Undef,
                };
                traced_call!(r, stack.len(), &[key]);
                stack.push(r);
            }
            Op::Call(b, n) => {
                let n = n as usize;
                if stack.len() < n {
                    return Err(VmError::Malformed(pc));
                }
                let args: Vec<Val<'a>> = stack.drain(stack.len() - n..).collect();
                let r = typed!(builtins::call(b, &args));
                traced_call!(r, stack.len(), &args);
                stack.push(r);
            }
            Op::IntentPermits(flags) => {
                let resource = if flags & 2 != 0 { Some(pop!()) } else { None };
                let operation = if flags & 1 != 0 { Some(pop!()) } else { None };
                let tool = pop!();
                let tool_name = match &tool {
                    Val::Str(s) => Some(s.clone()),
                    Val::Undef => None,
                    other => match typed!(other.member("name")) {
                        Val::Str(s) => Some(s),
                        Val::Undef => None,
                        name => typed!(Err(format!(
                            "intent.permits(…) needs a tool name, not {}",
                            name.what()
                        ))),
                    },
                };
                // A named part that is absent makes the question undefined (it is not "any").
                let part =
                    |v: &Option<Val<'a>>, what: &str| -> Result<Option<Option<String>>, String> {
                        match v {
                            None => Ok(Some(None)),
                            Some(Val::Undef) => Ok(None),
                            Some(Val::Str(s)) => Ok(Some(Some(s.to_string()))),
                            Some(other) => Err(format!(
                                "intent.permits(…, {what}: …) needs a string, not {}",
                                other.what()
                            )),
                        }
                    };
                let op = typed!(part(&operation, "operation"));
                let res = typed!(part(&resource, "resource"));
                let r = match (tool_name, op, res) {
                    (Some(t), Some(o), Some(r)) => {
                        Val::Bool(env.state.intent_permits(&t, o.as_deref(), r.as_deref()))
                    }
                    _ => Val::Undef,
                };
                if tracer.is_some() {
                    let args: Vec<Val<'a>> = std::iter::once(tool)
                        .chain(operation)
                        .chain(resource)
                        .collect();
                    traced_call!(r, stack.len(), &args);
                }
                stack.push(r);
            }
            Op::IntentDeclared => stack.push(Val::Bool(env.state.intent_declared())),
            Op::IntentRaw => stack.push(match env.state.intent_raw() {
                Some(s) => Val::Str(Cow::Owned(s.to_string())),
                None => Val::Undef,
            }),
            Op::IntentScopeMode => stack.push(match env.state.intent_scope_mode() {
                Some(s) => Val::Str(Cow::Owned(s.to_string())),
                None => Val::Undef,
            }),
            Op::IntentParsed => {
                stack.push(env.state.intent_parsed().map_or(Val::Undef, Val::owned))
            }
            Op::Rego(id) => {
                // Undefined in Rego is absent here (docs/rego.md, "Values"); a condition reads
                // it as false through `truthy`, as Rego's `not` does.
                let v = env.rego(id, &[], None)?;
                let r = rego_val(v, code.ops.get(pc));
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::RegoCall(id, n) | Op::RegoInput(id, n) => {
                let n = n as usize;
                let with_input = matches!(op, Op::RegoInput(..));
                if stack.len() < n + usize::from(with_input) {
                    return Err(VmError::Malformed(pc));
                }
                let input = if with_input { Some(pop!()) } else { None };
                let args: Vec<Val<'a>> = stack.drain(stack.len() - n..).collect();
                // An undefined argument, or an undefined element of a list in one, makes the
                // call undefined, as in Rego.
                let json = args
                    .iter()
                    .map(Val::to_json_strict)
                    .collect::<Option<Vec<_>>>();
                let input_json = match &input {
                    Some(i) => i.to_json_strict().map(Some),
                    None => Some(None),
                };
                let (Some(json), Some(input_json)) = (json, input_json) else {
                    traced_call!(Val::Undef, stack.len(), &args);
                    stack.push(Val::Undef);
                    continue;
                };
                let v = env.rego(id, &json, input_json.as_ref())?;
                let r = rego_val(v, code.ops.get(pc));
                traced_call!(r, stack.len(), &args);
                stack.push(r);
            }
            Op::JsonNull => stack.push(Val::Owned(Rc::new(Value::Null))),
            Op::Truthy => {
                let v = pop!();
                stack.push(Val::Bool(!matches!(v, Val::Undef | Val::Bool(false))));
            }
            Op::MakeObject(k) => {
                let Some(Const::List(keys) | Const::StrSet(_, keys)) =
                    env.program.consts.get(k as usize)
                else {
                    return Err(VmError::Malformed(pc));
                };
                let n = keys.len();
                if stack.len() < n {
                    return Err(VmError::Malformed(pc));
                }
                let values: Vec<Val<'a>> = stack.drain(stack.len() - n..).collect();
                let mut map = serde_json::Map::new();
                let mut defined = true;
                for (key, v) in keys.iter().zip(&values) {
                    let Const::Str(key) = key else {
                        return Err(VmError::Malformed(pc));
                    };
                    if v.is_undef() {
                        continue;
                    }
                    match v.to_json_strict() {
                        Some(j) => {
                            map.insert(key.to_string(), j);
                        }
                        // A list with an undefined element: the object is undefined.
                        None => defined = false,
                    }
                }
                stack.push(if defined {
                    Val::Owned(Rc::new(Value::Object(map)))
                } else {
                    Val::Undef
                });
            }
            Op::Present => {
                let v = pop!();
                let r = Val::Bool(!matches!(v, Val::Undef));
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::MakeList(n) => {
                let n = n as usize;
                if stack.len() < n {
                    return Err(VmError::Malformed(pc));
                }
                let items: Vec<Val<'a>> = stack.drain(stack.len() - n..).collect();
                stack.push(Val::List(Rc::new(items)));
            }
            Op::Links => {
                let v = pop!();
                let r = typed!(v.links());
                traced_call!(r, stack.len(), &[v]);
                stack.push(r);
            }
            Op::Requested => {
                let r = Val::Bool(env.state.requested_now());
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::Role => {
                let name = pop!();
                let r = match &name {
                    Val::Str(arg) => {
                        let tool = crate::acs::fields::tool_name(env.payload);
                        Val::Str(Cow::Borrowed(program.argument_role(tool, arg)))
                    }
                    Val::Undef => Val::Undef,
                    other => typed!(Err(format!(
                        "role(…) needs an argument name (a string), not {}",
                        other.what()
                    ))),
                };
                traced_call!(r, stack.len(), &[name]);
                stack.push(r);
            }
            Op::EffectClass => {
                let tool = crate::acs::fields::tool_name(env.payload);
                let args = crate::acs::fields::member(env.payload, "arguments");
                let r = Val::Str(Cow::Borrowed(program.effect_class(tool, args)));
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::AskedFor => {
                let class = pop!();
                let r = match &class {
                    Val::Str(c) => Val::Bool(env.state.asked_for(c)),
                    Val::Undef => Val::Undef,
                    other => typed!(Err(format!(
                        "requested(…) needs an effect class (a string), not {}",
                        other.what()
                    ))),
                };
                traced_call!(r, stack.len(), &[class]);
                stack.push(r);
            }
            Op::Delegated => {
                let r = Val::Bool(env.state.delegated());
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::RequestedObject => {
                let tool = crate::acs::fields::tool_name(env.payload).unwrap_or("");
                let kinds = crate::actions::tool_objects(tool);
                let r = Val::Bool(crate::actions::objects_admitted(
                    env.state.named_objects(),
                    kinds,
                ));
                traced_call!(r, stack.len(), &[]);
                stack.push(r);
            }
            Op::Elements => {
                let v = pop!();
                stack.push(typed!(v.argument_elements()));
            }
            Op::IterStart(key_slot) => {
                let v = pop!();
                // An absent collection makes the quantifier undefined: it is iterated as empty
                // with the undefined flag already set.
                let (items, absent) = match typed!(v.elements()) {
                    Some(items) => (items, false),
                    None => (Vec::new(), true),
                };
                let keys = (key_slot != u16::MAX).then(|| (v.element_keys(), key_slot));
                iters.push(Iter {
                    items,
                    keys,
                    pos: 0,
                    saw_undef: absent,
                    of: tracer.is_some().then_some(v),
                    selected: Vec::new(),
                });
            }
            Op::IterNext(var, exit) => {
                let Some(it) = iters.last_mut() else {
                    return Err(VmError::Malformed(pc));
                };
                if it.pos < it.items.len() {
                    let item = it.items[it.pos].clone();
                    if let Some((keys, k)) = &it.keys {
                        if let Some(slot) = vars.get_mut(*k as usize) {
                            *slot = keys.get(it.pos).cloned().unwrap_or(Val::Undef);
                        }
                    }
                    it.pos += 1;
                    if let Some(slot) = vars.get_mut(var as usize) {
                        *slot = item;
                    }
                } else {
                    pc = exit as usize;
                }
            }
            Op::AnyStep(lp, done) | Op::AllStep(lp, done) => {
                let is_any = matches!(op, Op::AnyStep(..));
                let r = typed!(pop!().truth_checked("a quantifier's body"));
                let Some(it) = iters.last_mut() else {
                    return Err(VmError::Malformed(pc));
                };
                match r {
                    Some(b) if b == is_any => {
                        if let (Some(t), Some(it)) = (tracer.as_mut(), iters.last()) {
                            let probe = if is_any { Probe::Any } else { Probe::All };
                            let mut operands: Vec<Operand> = it
                                .of
                                .iter()
                                .map(|c| t.operand(env, usize::MAX, c))
                                .collect();
                            if let Some(item) = it.pos.checked_sub(1).and_then(|i| it.items.get(i))
                            {
                                operands.push(t.operand(env, usize::MAX, item));
                            }
                            t.check(here!(), probe, Some(is_any), operands);
                        }
                        iters.pop();
                        stack.push(Val::Bool(is_any));
                        pc = done as usize;
                    }
                    None => {
                        it.saw_undef = true;
                        pc = lp as usize;
                    }
                    _ => pc = lp as usize,
                }
            }
            Op::SelectStep(key, lp) => {
                let r = typed!(pop!().truth_checked("a `redact each` condition"));
                let Some(it) = iters.last_mut() else {
                    return Err(VmError::Malformed(pc));
                };
                // Undefined is chosen too: when in doubt, hide it.
                if r != Some(false) {
                    it.selected
                        .push(vars.get(key as usize).cloned().unwrap_or(Val::Undef));
                }
                pc = lp as usize;
            }
            Op::SelectEnd => {
                let Some(it) = iters.pop() else {
                    return Err(VmError::Malformed(pc));
                };
                stack.push(Val::List(std::rc::Rc::new(it.selected)));
            }
            Op::IterEnd(is_any) => {
                let Some(it) = iters.pop() else {
                    return Err(VmError::Malformed(pc));
                };
                let r = if it.saw_undef { None } else { Some(!is_any) };
                if let Some(t) = tracer.as_mut() {
                    let probe = if is_any { Probe::Any } else { Probe::All };
                    let operands = it
                        .of
                        .iter()
                        .map(|c| t.operand(env, usize::MAX, c))
                        .collect();
                    t.check(here!(), probe, r, operands);
                }
                stack.push(r.map_or(Val::Undef, Val::Bool));
            }
            Op::Return => return Ok(stack.pop().unwrap_or(Val::Undef)),
        }
    }
}
