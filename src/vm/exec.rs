//! The machine [`super::run`] drives: the stack, the variables, the open quantifiers, the
//! program counter and the explain recorder, and one method per instruction that needs more
//! than a line, so the dispatch loop reads as the instruction set.
//!
//! Owns: what each instruction does to the machine. Must not know: the budget and the order
//! of instructions (the loop's), the session's storage (read through [`super::Facts`]).

use std::borrow::Cow;
use std::rc::Rc;

use serde_json::Value;
use smallvec::SmallVec;

use super::trace::{self, Operand, Probe};
use super::{builtins, rego_val, value, Env, Observation, Val, VmError};
use crate::acs::fields;
use crate::compile::{Builtin, Code, Const, Op, Program, Root, Seg};

/// An open quantifier (or `redact each` selection).
/// The names of place bits `bits` (`read_at`), in the order the session first named them; an
/// error when one is a place Warden cannot name, so that no rule reads it as some other place.
fn place_names<'a>(facts: &dyn super::Facts, bits: u64) -> Result<Val<'a>, value::TypeError> {
    if bits & super::UNKNOWN_PLACE != 0 {
        return Err(
            "read_at(…): the value was read at a place Warden cannot name (content of \
                    unknown lineage, or a session past 63 places), so no rule may take it for \
                    another"
                .to_string(),
        );
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

/// One run's machine.
pub(super) struct Machine<'e, 'a, 't> {
    env: &'e Env<'a>,
    program: &'a Program,
    code: &'a Code,
    // Inline up to these sizes (most rules and labels): no allocation per run.
    pub stack: SmallVec<[Val<'a>; 16]>,
    vars: SmallVec<[Val<'a>; 8]>,
    iters: Vec<Iter<'a>>,
    /// The next instruction.
    pub pc: usize,
    tracer: Option<trace::Tracer<'t>>,
}

impl<'e, 'a, 't> Machine<'e, 'a, 't> {
    pub fn new(env: &'e Env<'a>, code: &'a Code, trace: Option<&'t mut Vec<Observation>>) -> Self {
        Machine {
            env,
            program: env.program,
            code,
            stack: SmallVec::new(),
            vars: smallvec::smallvec![Val::Undef; code.vars as usize],
            iters: Vec::new(),
            pc: 0,
            tracer: trace.map(trace::Tracer::new),
        }
    }

    /// Bytecode the compiler should never have made, at the instruction just executed.
    pub fn malformed(&self) -> VmError {
        VmError::Malformed(self.pc)
    }

    /// The span of the instruction just executed.
    fn here(&self) -> crate::diagnostics::Span {
        span_at(self.code, self.pc)
    }

    /// A type error at the instruction just executed.
    fn typed<T>(&self, r: Result<T, value::TypeError>) -> Result<T, VmError> {
        r.map_err(|message| VmError::Type {
            message,
            span: self.here(),
            rule: None,
        })
    }

    pub fn pop(&mut self) -> Result<Val<'a>, VmError> {
        self.stack.pop().ok_or(VmError::Malformed(self.pc))
    }

    /// The top `n` values, in order.
    fn pop_n(&mut self, n: usize) -> Result<Vec<Val<'a>>, VmError> {
        if self.stack.len() < n {
            return Err(self.malformed());
        }
        Ok(self.stack.drain(self.stack.len() - n..).collect())
    }

    /// A string constant.
    fn str_const(&self, k: u32) -> Result<&'a Arc, VmError> {
        match self.program.consts.get(k as usize) {
            Some(Const::Str(s)) => Ok(s),
            _ => Err(self.malformed()),
        }
    }

    /// Pushes `r`, the value a call returned, recorded with `args`, which were in the stack
    /// slots from the current top on.
    fn push_call(&mut self, r: Val<'a>, args: &[Val<'a>]) {
        if let Some(t) = self.tracer.as_mut() {
            let operands = t.operands(self.env, self.stack.len(), args);
            t.call(span_at(self.code, self.pc), &r, operands);
        }
        self.stack.push(r);
    }

    /// Pushes the answer to a check, recorded with its operands.
    fn push_check(&mut self, probe: Probe, r: Option<bool>, operands: &[Val<'a>]) {
        if let Some(t) = self.tracer.as_mut() {
            let operands = t.operands(self.env, self.stack.len(), operands);
            t.check(span_at(self.code, self.pc), probe, r, operands);
        }
        self.stack.push(r.map_or(Val::Undef, Val::Bool));
    }

    pub fn constant(&mut self, k: u32) -> Result<(), VmError> {
        let c = self
            .program
            .consts
            .get(k as usize)
            .ok_or(self.malformed())?;
        self.stack.push(Val::from_const(c));
        Ok(())
    }

    pub fn path(&mut self, p: u32) -> Result<(), VmError> {
        let Some(spec) = self.program.paths.get(p as usize) else {
            return Err(self.malformed());
        };
        let mut v: Val<'a> = match spec.root {
            Root::Payload => Val::from_json(self.env.payload),
            Root::Metadata => Val::from_json(self.env.metadata),
            Root::Var(i) => self.vars.get(i as usize).cloned().unwrap_or(Val::Undef),
        };
        if let (Val::Owned(root), true) = (&v, spec.segs.len() > 1) {
            // A path into a value built at run time (a list argument's element): walk it by
            // reference and copy only what it ends at.
            let root = Rc::clone(root);
            let mut at = Val::from_json(&root);
            for seg in &spec.segs {
                at = self.typed(step_local(at, seg))?;
            }
            v = at.detach();
        } else {
            for seg in &spec.segs {
                v = self.typed(step_local(v, seg))?;
            }
        }
        self.stack.push(v);
        Ok(())
    }

    pub fn unwrap(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        match self.tracer.as_mut() {
            Some(t) => {
                let u = v.clone().unwrap_argument();
                t.unwrapped(self.env, self.stack.len(), &v, &u);
                self.stack.push(u);
            }
            None => self.stack.push(v.unwrap_argument()),
        }
        Ok(())
    }

    pub fn member(&mut self, k: u32) -> Result<(), VmError> {
        let v = self.pop()?;
        let key = self.str_const(k)?;
        let m = self.typed(v.member(key))?;
        if let Some(t) = self.tracer.as_mut().filter(|_| &**key == "value") {
            // `x.value` of a carrier keeps, in the trace, the labels `x` carries.
            t.unwrapped(self.env, self.stack.len(), &v, &m);
        }
        self.stack.push(m);
        Ok(())
    }

    pub fn index(&mut self) -> Result<(), VmError> {
        let i = self.pop()?;
        let v = self.pop()?;
        let r = self.typed(v.index(&i))?;
        self.stack.push(r);
        Ok(())
    }

    pub fn not(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        let r = match self.typed(v.truth_checked("`not`'s operand"))? {
            Some(b) => Val::Bool(!b),
            None => Val::Undef,
        };
        self.stack.push(r);
        Ok(())
    }

    pub fn neg(&mut self) -> Result<(), VmError> {
        let r = match self.pop()? {
            Val::Num(n) => Val::Num(-n),
            Val::Undef => Val::Undef,
            other => self.typed(Err(format!("`-` negates a number, not {}", other.what())))?,
        };
        self.stack.push(r);
        Ok(())
    }

    pub fn compare(&mut self, op: &Op) -> Result<(), VmError> {
        let b = self.pop()?;
        let a = self.pop()?;
        let r = self.typed(value::compare(op, &a, &b))?;
        self.push_check(Probe::Compare, r, &[a, b]);
        Ok(())
    }

    pub fn matches(&mut self, re: u32) -> Result<(), VmError> {
        let a = self.pop()?;
        let Some(regex) = self.program.regexes.get(re as usize) else {
            return Err(self.malformed());
        };
        let r = self.typed(value::regex_match(regex, &a))?;
        let pattern = Val::Str(Cow::Borrowed(regex.as_str()));
        self.push_check(Probe::Compare, r, &[a, pattern]);
        Ok(())
    }

    pub fn arith(&mut self, op: &Op) -> Result<(), VmError> {
        let b = self.pop()?;
        let a = self.pop()?;
        let r = self.typed(value::arith(op, a, b))?;
        self.stack.push(r);
        Ok(())
    }

    /// `and` (`or`: `is_or`) of the two values on top, in Kleene logic.
    pub fn join(&mut self, is_or: bool) -> Result<(), VmError> {
        let (right, left) = if is_or {
            ("`or`'s right side", "`or`'s left side")
        } else {
            ("`and`'s right side", "`and`'s left side")
        };
        let b = self.pop()?;
        let b = self.typed(b.truth_checked(right))?;
        let a = self.pop()?;
        let a = self.typed(a.truth_checked(left))?;
        // The side that decides: `false` for `and`, `true` for `or`.
        let r = match (a, b) {
            (Some(x), _) | (_, Some(x)) if x == is_or => Val::Bool(is_or),
            (Some(_), Some(_)) => Val::Bool(!is_or),
            _ => Val::Undef,
        };
        self.stack.push(r);
        Ok(())
    }
}

/// The span of the instruction before `pc` (the one just executed).
fn span_at(code: &Code, pc: usize) -> crate::diagnostics::Span {
    code.spans.get(pc - 1).copied().unwrap_or_default()
}

/// A path's step into a value built at run time (see [`Machine::path`]).
fn step_local<'r>(at: Val<'r>, seg: &Seg) -> Result<Val<'r>, value::TypeError> {
    match seg {
        Seg::Key(k) => at.member(k),
        Seg::Index(i) => at.index(&Val::Num(*i as f64)),
    }
}

/// The string constants' type.
type Arc = std::sync::Arc<str>;

/// Provenance questions about a value.
impl<'a> Machine<'_, 'a, '_> {
    pub fn has(&mut self, bit: u8) -> Result<(), VmError> {
        let v = self.pop()?;
        self.typed(has_provenance(&v, "`has`"))?;
        let r = self
            .env
            .state
            .labels_of(self.program, &v)
            .map(|l| l & (1u64 << bit) != 0);
        self.push_check(Probe::Has, r, &[v]);
        Ok(())
    }

    pub fn derived_from(&mut self, k: u32) -> Result<(), VmError> {
        let v = self.pop()?;
        self.typed(has_provenance(&v, "derived_from(…)"))?;
        let origin = self.str_const(k)?;
        let r = self
            .env
            .state
            .node_of(self.program, &v)
            .map(|n| n.origins & fields::origin_bit(origin) != 0);
        self.push_call(r.map_or(Val::Undef, Val::Bool), &[v]);
        Ok(())
    }

    pub fn found_in(&mut self, k: u32) -> Result<(), VmError> {
        let v = self.pop()?;
        let origin = fields::origin_bit(self.str_const(k)?);
        let json = v.carrier_json().map(|j| j.get("value").unwrap_or(j));
        let owned = if json.is_none() { v.to_json() } else { None };
        let state = self.env.state;
        let r = match json.or(owned.as_ref()) {
            Some(value) => {
                let n = state.infer_node(self.program, value, 0);
                // What the user said is searched as text: the value must occur in it as one
                // contiguous run, not only token by token.
                let user = fields::origin_bit("user_input");
                Val::Bool(
                    n.source_origins & origin != 0 && (origin != user || state.said_by_user(value)),
                )
            }
            None => Val::Undef,
        };
        self.push_call(r, &[v]);
        Ok(())
    }

    /// A question about the value's provenance node (`lineage_inferred`, `lineage_depth`,
    /// `sources`, `taken_from`): `None` without one.
    fn node_question(
        &mut self,
        what: &str,
        answer: impl FnOnce(&super::Node) -> Val<'a>,
    ) -> Result<(), VmError> {
        let v = self.pop()?;
        self.typed(has_provenance(&v, what))?;
        let r = self
            .env
            .state
            .node_of(self.program, &v)
            .map_or(Val::Undef, |n| answer(&n));
        self.push_call(r, &[v]);
        Ok(())
    }

    /// `read_at(x)`: the names of the places `x`'s direct sources were read at, in the order
    /// the session first named them; a type error for a place Warden cannot name.
    pub fn read_at(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        self.typed(has_provenance(&v, "read_at(…)"))?;
        let r = match self.env.state.node_of(self.program, &v) {
            Some(n) => self.typed(place_names(self.env.state, n.source_places))?,
            None => Val::Undef,
        };
        self.push_call(r, &[v]);
        Ok(())
    }

    pub fn lineage_inferred(&mut self) -> Result<(), VmError> {
        self.node_question("lineage_inferred(…)", |n| Val::Bool(n.inferred))
    }

    pub fn lineage_depth(&mut self) -> Result<(), VmError> {
        self.node_question("lineage_depth(…)", |n| Val::Num(n.depth as f64))
    }

    pub fn sources(&mut self) -> Result<(), VmError> {
        self.node_question("sources(…)", |n| {
            Val::owned(Value::Array(
                fields::ORIGINS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| n.source_origins & (1u8 << i) != 0)
                    .map(|(_, o)| Value::String((*o).to_string()))
                    .collect(),
            ))
        })
    }

    pub fn taken_from_origin(&mut self, k: u32, all: bool) -> Result<(), VmError> {
        let v = self.pop()?;
        self.typed(has_provenance(&v, "taken_from(…)"))?;
        let origin = fields::origin_bit(self.str_const(k)?);
        let r = self.env.state.node_of(self.program, &v).map(|n| {
            if all {
                n.source_origins != 0 && n.source_origins & !origin == 0
            } else {
                n.source_origins & origin != 0
            }
        });
        self.push_call(r.map_or(Val::Undef, Val::Bool), &[v]);
        Ok(())
    }

    pub fn taken_from_label(&mut self, bit: u8, all: bool) -> Result<(), VmError> {
        self.node_question("taken_from(…)", |n| {
            let set = if all { n.source_all } else { n.source_any };
            Val::Bool(set & (1u64 << bit) != 0)
        })
    }
}

/// Questions about the session and the call, and the builtins.
impl<'a> Machine<'_, 'a, '_> {
    /// A value read from the session (or the call) with no operand.
    pub fn fact(&mut self, r: Val<'a>) {
        self.push_call(r, &[]);
    }

    pub fn effect_state(&mut self, id: u32) {
        let r = self
            .env
            .state
            .effect_state(id)
            .map_or(Val::Undef, |s| Val::Str(Cow::Borrowed(s)));
        self.push_call(r, &[]);
    }

    pub fn history_keyed(&mut self, slot: u32) -> Result<(), VmError> {
        let key = self.pop()?;
        let r = match key.key_string() {
            Some(k) => {
                let n = self.env.state.history_count(self.program, slot, Some(&k));
                Val::Num(n as f64)
            }
            None => Val::Undef,
        };
        self.push_call(r, &[key]);
        Ok(())
    }

    pub fn call(&mut self, b: Builtin, n: u8) -> Result<(), VmError> {
        let args = self.pop_n(n as usize)?;
        let r = self.typed(builtins::call(b, &args))?;
        self.push_call(r, &args);
        Ok(())
    }

    pub fn links(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        let r = self.typed(v.links())?;
        self.push_call(r, &[v]);
        Ok(())
    }

    pub fn present(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        let r = Val::Bool(!matches!(v, Val::Undef));
        self.push_call(r, &[v]);
        Ok(())
    }

    /// A builtin that reads a string operand (`role(…)`, `requested(…)`): undefined when it
    /// is absent, a type error when it is not a string.
    fn on_string(
        &mut self,
        needs: &str,
        answer: impl FnOnce(&Self, &str) -> Val<'a>,
    ) -> Result<(), VmError> {
        let v = self.pop()?;
        let r = match &v {
            Val::Str(s) => answer(self, s),
            Val::Undef => Val::Undef,
            other => self.typed(Err(format!("{needs}, not {}", other.what())))?,
        };
        self.push_call(r, &[v]);
        Ok(())
    }

    pub fn role(&mut self) -> Result<(), VmError> {
        self.on_string("role(…) needs an argument name (a string)", |m, arg| {
            let tool = fields::tool_name(m.env.payload);
            Val::Str(Cow::Borrowed(m.program.argument_role(tool, arg)))
        })
    }

    pub fn asked_for(&mut self) -> Result<(), VmError> {
        self.on_string(
            "requested(…) needs an effect class (a string)",
            |m, class| Val::Bool(m.env.state.asked_for(class)),
        )
    }

    pub fn effect_class(&mut self) {
        let tool = fields::tool_name(self.env.payload);
        let args = fields::member(self.env.payload, "arguments");
        let r = Val::Str(Cow::Borrowed(self.program.effect_class(tool, args)));
        self.push_call(r, &[]);
    }

    pub fn requested_object(&mut self) {
        let tool = fields::tool_name(self.env.payload).unwrap_or("");
        let kinds = crate::actions::tool_objects(tool);
        let named = self.env.state.named_objects();
        let r = Val::Bool(crate::actions::objects_admitted(named, kinds));
        self.push_call(r, &[]);
    }

    /// `intent.permits(tool, operation: …, resource: …)`; `flags` say which named parts
    /// were given (1: operation, 2: resource).
    pub fn intent_permits(&mut self, flags: u8) -> Result<(), VmError> {
        let resource = if flags & 2 != 0 {
            Some(self.pop()?)
        } else {
            None
        };
        let operation = if flags & 1 != 0 {
            Some(self.pop()?)
        } else {
            None
        };
        let tool = self.pop()?;
        let tool_name = match &tool {
            Val::Str(s) => Some(s.clone()),
            Val::Undef => None,
            other => match self.typed(other.member("name"))? {
                Val::Str(s) => Some(s),
                Val::Undef => None,
                name => self.typed(Err(format!(
                    "intent.permits(…) needs a tool name, not {}",
                    name.what()
                )))?,
            },
        };
        // A named part that is absent makes the question undefined (it is not "any").
        let part = |v: &Option<Val<'a>>, what: &str| -> Result<Option<Option<String>>, String> {
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
        let op = self.typed(part(&operation, "operation"))?;
        let res = self.typed(part(&resource, "resource"))?;
        let r = match (tool_name, op, res) {
            (Some(t), Some(o), Some(r)) => Val::Bool(self.env.state.intent_permits(
                &t,
                o.as_deref(),
                r.as_deref(),
            )),
            _ => Val::Undef,
        };
        if self.tracer.is_some() {
            let args: Vec<Val<'a>> = std::iter::once(tool)
                .chain(operation)
                .chain(resource)
                .collect();
            self.push_call(r, &args);
        } else {
            self.stack.push(r);
        }
        Ok(())
    }

    /// A piece of the Intent as text (`intent.raw`, `intent.scope_mode`).
    pub fn text(&mut self, s: Option<impl AsRef<str>>) {
        self.stack.push(match s.as_ref().map(AsRef::as_ref) {
            Some(s) => Val::Str(Cow::Owned(s.to_string())),
            None => Val::Undef,
        });
    }
}

/// Rego, and the values the Rego bridge builds.
impl<'a> Machine<'_, 'a, '_> {
    pub fn rego(&mut self, id: u32) -> Result<(), VmError> {
        // Undefined in Rego is absent here (docs/rego.md, "Values"); a condition reads it as
        // false through `truthy`, as Rego's `not` does.
        let v = self.env.rego(id, &[], None)?;
        let r = rego_val(v, self.code.ops.get(self.pc));
        self.push_call(r, &[]);
        Ok(())
    }

    /// A Rego function call (`with_input`: with the input the policy built on top).
    pub fn rego_call(&mut self, id: u32, n: u8, with_input: bool) -> Result<(), VmError> {
        let n = n as usize;
        if self.stack.len() < n + usize::from(with_input) {
            return Err(self.malformed());
        }
        let input = if with_input { Some(self.pop()?) } else { None };
        let args = self.pop_n(n)?;
        // An undefined argument, or an undefined element of a list in one, makes the call
        // undefined, as in Rego.
        let json = args
            .iter()
            .map(Val::to_json_strict)
            .collect::<Option<Vec<_>>>();
        let input_json = match &input {
            Some(i) => i.to_json_strict().map(Some),
            None => Some(None),
        };
        let (Some(json), Some(input_json)) = (json, input_json) else {
            self.push_call(Val::Undef, &args);
            return Ok(());
        };
        let v = self.env.rego(id, &json, input_json.as_ref())?;
        let r = rego_val(v, self.code.ops.get(self.pc));
        self.push_call(r, &args);
        Ok(())
    }

    pub fn truthy(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        self.stack
            .push(Val::Bool(!matches!(v, Val::Undef | Val::Bool(false))));
        Ok(())
    }

    pub fn make_object(&mut self, k: u32) -> Result<(), VmError> {
        let Some(Const::List(keys) | Const::StrSet(_, keys)) = self.program.consts.get(k as usize)
        else {
            return Err(self.malformed());
        };
        let values = self.pop_n(keys.len())?;
        let mut map = serde_json::Map::new();
        let mut defined = true;
        for (key, v) in keys.iter().zip(&values) {
            let Const::Str(key) = key else {
                return Err(self.malformed());
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
        self.stack.push(if defined {
            Val::Owned(Rc::new(Value::Object(map)))
        } else {
            Val::Undef
        });
        Ok(())
    }

    pub fn make_list(&mut self, n: u16) -> Result<(), VmError> {
        let items = self.pop_n(n as usize)?;
        self.stack.push(Val::List(Rc::new(items)));
        Ok(())
    }

    pub fn elements(&mut self) -> Result<(), VmError> {
        let v = self.pop()?;
        let r = self.typed(v.argument_elements())?;
        self.stack.push(r);
        Ok(())
    }
}

/// Quantifiers (`any`, `all`) and `redact each` selections.
impl Machine<'_, '_, '_> {
    pub fn iter_start(&mut self, key_slot: u16) -> Result<(), VmError> {
        let v = self.pop()?;
        // An absent collection makes the quantifier undefined: it is iterated as empty with
        // the undefined flag already set.
        let (items, absent) = match self.typed(v.elements())? {
            Some(items) => (items, false),
            None => (Vec::new(), true),
        };
        let keys = (key_slot != u16::MAX).then(|| (v.element_keys(), key_slot));
        let of = self.tracer.is_some().then_some(v);
        self.iters.push(Iter {
            items,
            keys,
            pos: 0,
            saw_undef: absent,
            of,
            selected: Vec::new(),
        });
        Ok(())
    }

    pub fn iter_next(&mut self, var: u16, exit: u32) -> Result<(), VmError> {
        let Some(it) = self.iters.last_mut() else {
            return Err(VmError::Malformed(self.pc));
        };
        if it.pos < it.items.len() {
            let item = it.items[it.pos].clone();
            if let Some((keys, k)) = &it.keys {
                if let Some(slot) = self.vars.get_mut(*k as usize) {
                    *slot = keys.get(it.pos).cloned().unwrap_or(Val::Undef);
                }
            }
            it.pos += 1;
            if let Some(slot) = self.vars.get_mut(var as usize) {
                *slot = item;
            }
        } else {
            self.pc = exit as usize;
        }
        Ok(())
    }

    /// One step of `any` (`is_any`) or `all`: done at the first item that decides, back to
    /// `lp` otherwise.
    pub fn quantifier_step(&mut self, is_any: bool, lp: u32, done: u32) -> Result<(), VmError> {
        let r = self.pop()?;
        let r = self.typed(r.truth_checked("a quantifier's body"))?;
        if self.iters.is_empty() {
            return Err(self.malformed());
        }
        match r {
            Some(b) if b == is_any => {
                if let (Some(t), Some(it)) = (self.tracer.as_mut(), self.iters.last()) {
                    let probe = if is_any { Probe::Any } else { Probe::All };
                    let mut operands: Vec<Operand> = it
                        .of
                        .iter()
                        .map(|c| t.operand(self.env, usize::MAX, c))
                        .collect();
                    if let Some(item) = it.pos.checked_sub(1).and_then(|i| it.items.get(i)) {
                        operands.push(t.operand(self.env, usize::MAX, item));
                    }
                    t.check(span_at(self.code, self.pc), probe, Some(is_any), operands);
                }
                self.iters.pop();
                self.stack.push(Val::Bool(is_any));
                self.pc = done as usize;
            }
            None => {
                if let Some(it) = self.iters.last_mut() {
                    it.saw_undef = true;
                }
                self.pc = lp as usize;
            }
            _ => self.pc = lp as usize,
        }
        Ok(())
    }

    pub fn select_step(&mut self, key: u16, lp: u32) -> Result<(), VmError> {
        let r = self.pop()?;
        let r = self.typed(r.truth_checked("a `redact each` condition"))?;
        let Some(it) = self.iters.last_mut() else {
            return Err(VmError::Malformed(self.pc));
        };
        // Undefined is chosen too: when in doubt, hide it.
        if r != Some(false) {
            it.selected
                .push(self.vars.get(key as usize).cloned().unwrap_or(Val::Undef));
        }
        self.pc = lp as usize;
        Ok(())
    }

    pub fn select_end(&mut self) -> Result<(), VmError> {
        let it = self.iters.pop().ok_or(VmError::Malformed(self.pc))?;
        self.stack.push(Val::List(Rc::new(it.selected)));
        Ok(())
    }

    pub fn iter_end(&mut self, is_any: bool) -> Result<(), VmError> {
        let it = self.iters.pop().ok_or(VmError::Malformed(self.pc))?;
        let r = if it.saw_undef { None } else { Some(!is_any) };
        if let Some(t) = self.tracer.as_mut() {
            let probe = if is_any { Probe::Any } else { Probe::All };
            let operands = it
                .of
                .iter()
                .map(|c| t.operand(self.env, usize::MAX, c))
                .collect();
            t.check(span_at(self.code, self.pc), probe, r, operands);
        }
        self.stack.push(r.map_or(Val::Undef, Val::Bool));
        Ok(())
    }
}
