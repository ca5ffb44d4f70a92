//! Explain traces: what [`super::run`] records, when asked, about the checks a rule makes —
//! comparisons, `has`, quantifiers and builtin calls, with their operands' values and labels.
//! Nothing here runs unless a trace is requested.

use serde_json::Value;

use super::{Env, Val};
use crate::diagnostics::Span;

/// What kind of check an [`Observation`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `not in`, `matches`.
    Compare,
    /// `x has LABEL`.
    Has,
    /// `any x in C: …` (operands: the collection, then the element that decided, if one did).
    Any,
    /// `all x in C: …` (operands: the collection, then the element that decided, if one did).
    All,
    /// A builtin function, a history count, `intent.permits` or a Rego rule or function
    /// (operands: the arguments; [`Observation::returned`]: the result).
    Call,
}

/// One operand of a check.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    /// Its value; `None` when undefined.
    pub value: Option<Value>,
    /// The labels of its provenance (bits, see `Program::label_names`); `None` when it carries
    /// no provenance. A tool argument's value keeps the labels of the argument it came from.
    pub labels: Option<u64>,
}

/// One recorded check, for explain traces and coverage.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The checked expression.
    pub span: Span,
    pub probe: Probe,
    /// The check's truth value (`None`: undefined, or a call that returned no boolean).
    pub result: Option<bool>,
    /// What a [`Probe::Call`] returned (`None`: undefined); `None` for the other probes.
    pub returned: Option<Value>,
    pub operands: Vec<Operand>,
}

/// A value's identity on the stack, to recognise an unwrapped tool argument when it is used.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Id {
    Ptr(usize, usize),
    Num(u64),
    Bool(bool),
}

fn id_of(v: &Val<'_>) -> Option<Id> {
    Some(match v {
        Val::Str(std::borrow::Cow::Borrowed(s)) => Id::Ptr(s.as_ptr() as usize, s.len()),
        Val::Json(j) => Id::Ptr(*j as *const Value as usize, 0),
        Val::Num(n) => Id::Num(n.to_bits()),
        Val::Bool(b) => Id::Bool(*b),
        _ => return None,
    })
}

/// The recorder [`super::run`] writes to.
pub(super) struct Tracer<'t> {
    out: &'t mut Vec<Observation>,
    /// Tool arguments unwrapped to their value: (stack slot, value identity, the argument's
    /// labels), so that a comparison of `args.x` still shows the labels `args.x` carries.
    unwrapped: Vec<(usize, Id, u64)>,
}

impl<'t> Tracer<'t> {
    pub fn new(out: &'t mut Vec<Observation>) -> Self {
        Tracer {
            out,
            unwrapped: Vec::new(),
        }
    }

    /// A tool argument `carrier` was unwrapped to `value`, now in stack slot `slot`.
    pub fn unwrapped(&mut self, env: &Env<'_>, slot: usize, carrier: &Val<'_>, value: &Val<'_>) {
        self.unwrapped.retain(|(s, ..)| *s != slot);
        if let (Some(id), Some(labels)) = (id_of(value), env.state.labels_of(env.program, carrier))
        {
            self.unwrapped.push((slot, id, labels));
        }
    }

    /// The operand `v`, which was in stack slot `slot`.
    pub fn operand(&self, env: &Env<'_>, slot: usize, v: &Val<'_>) -> Operand {
        let id = id_of(v);
        let labels = self
            .unwrapped
            .iter()
            .rev()
            .find(|(s, i, _)| *s == slot && Some(*i) == id)
            .map(|(.., l)| *l)
            .or_else(|| env.state.labels_of(env.program, v));
        Operand {
            value: v.to_json(),
            labels,
        }
    }

    /// Operands that were in consecutive stack slots from `base`, and have been consumed.
    pub fn operands(&mut self, env: &Env<'_>, base: usize, vs: &[Val<'_>]) -> Vec<Operand> {
        let out = vs
            .iter()
            .enumerate()
            .map(|(i, v)| self.operand(env, base + i, v))
            .collect();
        self.unwrapped.retain(|(s, ..)| *s < base);
        out
    }

    /// A check whose truth value is `result`.
    pub fn check(
        &mut self,
        span: Span,
        probe: Probe,
        result: Option<bool>,
        operands: Vec<Operand>,
    ) {
        self.out.push(Observation {
            span,
            probe,
            result,
            returned: None,
            operands,
        });
    }

    /// A call that returned `returned`.
    pub fn call(&mut self, span: Span, returned: &Val<'_>, operands: Vec<Operand>) {
        self.out.push(Observation {
            span,
            probe: Probe::Call,
            result: returned.truth(),
            returned: returned.to_json(),
            operands,
        });
    }
}
