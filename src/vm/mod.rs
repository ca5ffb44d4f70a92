//! The VM: runs one compiled [`Code`] against an event and a session state, under an
//! instruction budget. It never panics on input. A field absent from the payload evaluates to
//! *undefined*, which propagates by Kleene logic (docs/language.md §10); a value that is present
//! but of the wrong type for an operation is a [`VmError::Type`], which fails the decision
//! closed. A rule fires only when its condition is `true`.

mod builtins;
mod exec;
mod facts;
mod links;
mod trace;
mod value;

use std::rc::Rc;

use serde_json::Value;

pub use facts::{Facts, Node, UNKNOWN_PLACE};
pub use trace::{Observation, Operand, Probe};
pub use value::{glob as glob_match, Kind, Val};

use crate::compile::{Code, Op, Program};

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

/// Runs `code` and returns its result value: the dispatch loop over the machine
/// (`exec.rs`), one arm per instruction.
pub fn run<'a>(
    env: &Env<'a>,
    code: &'a Code,
    budget: &mut Budget,
    trace: Option<&mut Vec<Observation>>,
) -> Result<Val<'a>, VmError> {
    let program: &'a Program = env.program;
    let state = env.state;
    let mut m = exec::Machine::new(env, code, trace);
    loop {
        if budget.left == 0 {
            return Err(VmError::Budget(budget.limit));
        }
        budget.left -= 1;
        let Some(op) = code.ops.get(m.pc) else {
            return Err(VmError::Malformed(m.pc));
        };
        m.pc += 1;
        match *op {
            Op::Const(k) => m.constant(k)?,
            Op::Path(p) => m.path(p)?,
            Op::Unwrap => m.unwrap()?,
            Op::Member(k) => m.member(k)?,
            Op::Index => m.index()?,
            Op::Not => m.not()?,
            Op::Neg => m.neg()?,
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::In | Op::NotIn => {
                m.compare(op)?
            }
            Op::Matches(re) => m.matches(re)?,
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Rem => m.arith(op)?,
            Op::JumpIfFalse(t) => {
                if matches!(m.stack.last(), Some(Val::Bool(false))) {
                    m.pc = t as usize;
                }
            }
            Op::JumpIfTrue(t) => {
                if matches!(m.stack.last(), Some(Val::Bool(true))) {
                    m.pc = t as usize;
                }
            }
            Op::AndJoin => m.join(false)?,
            Op::OrJoin => m.join(true)?,
            Op::Has(bit) => m.has(bit)?,
            Op::DerivedFrom(k) => m.derived_from(k)?,
            Op::FoundIn(k) => m.found_in(k)?,
            Op::LineageInferred => m.lineage_inferred()?,
            Op::ReadAt => m.read_at()?,
            Op::Sources => m.sources()?,
            Op::TakenFromOrigin(k, all) => m.taken_from_origin(k, all)?,
            Op::TakenFromLabel(bit, all) => m.taken_from_label(bit, all)?,
            Op::LineageDepth => m.lineage_depth()?,
            Op::TurnsSince(bit) => m.fact(Val::Num(state.turns_since(bit))),
            Op::EffectState(id) => m.effect_state(id),
            Op::History(slot) => m.fact(Val::Num(state.history_count(program, slot, None) as f64)),
            Op::HistoryKeyed(slot) => m.history_keyed(slot)?,
            Op::Call(b, n) => m.call(b, n)?,
            Op::IntentPermits(flags) => m.intent_permits(flags)?,
            Op::IntentDeclared => m.stack.push(Val::Bool(state.intent_declared())),
            Op::IntentRaw => m.text(state.intent_raw()),
            Op::IntentScopeMode => m.text(state.intent_scope_mode()),
            Op::IntentParsed => m
                .stack
                .push(state.intent_parsed().map_or(Val::Undef, Val::owned)),
            Op::Rego(id) => m.rego(id)?,
            Op::RegoCall(id, n) => m.rego_call(id, n, false)?,
            Op::RegoInput(id, n) => m.rego_call(id, n, true)?,
            Op::JsonNull => m.stack.push(Val::Owned(Rc::new(Value::Null))),
            Op::Truthy => m.truthy()?,
            Op::MakeObject(k) => m.make_object(k)?,
            Op::Present => m.present()?,
            Op::MakeList(n) => m.make_list(n)?,
            Op::Links => m.links()?,
            Op::Requested => m.fact(Val::Bool(state.requested_now())),
            Op::Role => m.role()?,
            Op::EffectClass => m.effect_class(),
            Op::AskedFor => m.asked_for()?,
            Op::Delegated => m.fact(Val::Bool(state.delegated())),
            Op::RequestedObject => m.requested_object(),
            Op::Elements => m.elements()?,
            Op::IterStart(key_slot) => m.iter_start(key_slot)?,
            Op::IterNext(var, exit) => m.iter_next(var, exit)?,
            Op::AnyStep(lp, done) => m.quantifier_step(true, lp, done)?,
            Op::AllStep(lp, done) => m.quantifier_step(false, lp, done)?,
            Op::SelectStep(key, lp) => m.select_step(key, lp)?,
            Op::SelectEnd => m.select_end()?,
            Op::IterEnd(is_any) => m.iter_end(is_any)?,
            Op::Return => return Ok(m.stack.pop().unwrap_or(Val::Undef)),
        }
    }
}
