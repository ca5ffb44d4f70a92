//! What the checker decides for the compiler, so that the compiler lowers it instead of
//! deriving it again: how each history filter is kept as O(1) state. A filter's top-level `and`
//! conjuncts are either key joins (`past == $.current`: the counter is kept per key) or
//! conditions on the past event alone; `$` anywhere else is `check::history_join`.

use crate::diagnostics::{FileId, Span};
use crate::syntax::ast::{BinaryOp, Expr, ExprKind};

/// One top-level `and` conjunct of a history filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conjunct {
    /// `PAST == $.CURRENT`: a key of the history counter. `past_left` says which side is the
    /// recorded event's field (`$.to == to` has it on the right).
    Key { past_left: bool },
    /// A condition on the recorded event alone, run once on each event as it is recorded.
    Filter,
}

/// How a history filter is kept: its top-level conjuncts, in order ([`Checked::history_plan`]).
///
/// [`Checked::history_plan`]: super::Checked::history_plan
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryPlan {
    pub conjuncts: Vec<Conjunct>,
}

/// A history filter split by its plan.
pub struct Split<'e> {
    /// The key joins, each as (the recorded event's side, the current event's side).
    pub keys: Vec<(&'e Expr, &'e Expr)>,
    /// The conditions on the recorded event alone.
    pub rest: Vec<&'e Expr>,
}

impl HistoryPlan {
    /// The plan of `filter`: the one place the key joins are recognised.
    pub(crate) fn of(filter: &Expr) -> HistoryPlan {
        HistoryPlan {
            conjuncts: conjuncts(filter).into_iter().map(classify).collect(),
        }
    }

    /// `filter` (the expression this plan was made from) split into keys and the rest.
    pub fn split<'e>(&self, filter: &'e Expr) -> Split<'e> {
        let mut split = Split {
            keys: Vec::new(),
            rest: Vec::new(),
        };
        for (e, c) in conjuncts(filter).into_iter().zip(&self.conjuncts) {
            match (c, &e.kind) {
                (Conjunct::Key { past_left }, ExprKind::Binary(_, a, b)) => {
                    split.keys.push(if *past_left {
                        (&**a, &**b)
                    } else {
                        (&**b, &**a)
                    });
                }
                _ => split.rest.push(e),
            }
        }
        split
    }

    /// The spans of the `$` of each key's current side: where `$` may appear in the filter.
    pub(crate) fn key_roots(&self, filter: &Expr) -> Vec<Span> {
        self.split(filter)
            .keys
            .iter()
            .filter_map(|(_, current)| current_root(current))
            .collect()
    }
}

/// The top-level `and` conjuncts of `e`, left to right.
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::Binary(BinaryOp::And, a, b) => {
                stack.push(b);
                stack.push(a);
            }
            _ => out.push(e),
        }
    }
    out
}

fn classify(e: &Expr) -> Conjunct {
    if let ExprKind::Binary(BinaryOp::Eq, a, b) = &e.kind {
        for (past, current, past_left) in [(a, b, true), (b, a, false)] {
            if current_root(current).is_some() && current_root(past).is_none() && is_path(past) {
                return Conjunct::Key { past_left };
            }
        }
    }
    Conjunct::Filter
}

/// A field path of the recorded event (`tool.name`, `args.to`): the past side of a key.
fn is_path(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(_) => true,
        ExprKind::Member(base, _) => is_path(base),
        _ => false,
    }
}

/// If `e` is a path starting at `$`, the span of the `$`.
fn current_root(e: &Expr) -> Option<Span> {
    match &e.kind {
        ExprKind::Current => Some(e.span),
        ExprKind::Member(base, _) => current_root(base),
        _ => None,
    }
}

/// A top-level `and` conjunct of a rule's condition that limits it to some tools:
/// `tool.name == X` or `tool.name in X`, in the condition itself or in the body of a predicate
/// without parameters that it calls (`payment()`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConjunct {
    /// The file the conjunct is written in (a predicate's, when `via_predicate`).
    pub file: FileId,
    /// `==` or `in`.
    pub op: BinaryOp,
    /// The tool name, or the collection of names; the compiler folds it.
    pub names: Expr,
    /// Written in a called predicate's body, not in the condition.
    pub via_predicate: bool,
    /// Spelled `tool.name` (rather than another path to the same field).
    pub spelled: bool,
}

/// Which tools a rule runs for ([`Checked::tool_plans`]): its tool-name conjuncts, left to
/// right. The compiler indexes the rule under the first whose names fold to constants; the
/// checker holds a rule's argument reads to the tools all the literal ones allow.
///
/// [`Checked::tool_plans`]: super::Checked::tool_plans
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolPlan {
    pub conjuncts: Vec<ToolConjunct>,
}

impl ToolPlan {
    /// The tools the condition's own literal conjuncts limit it to (`tool.name == "x"`,
    /// `tool.name in {"a", "b"}`), intersected; `None` when no conjunct limits it.
    pub(crate) fn literal_tools(&self) -> Option<Vec<String>> {
        let mut acc: Option<Vec<String>> = None;
        for c in self
            .conjuncts
            .iter()
            .filter(|c| c.spelled && !c.via_predicate)
        {
            let names = match (c.op, &c.names.kind) {
                (BinaryOp::Eq, ExprKind::String(s)) => vec![s.clone()],
                (BinaryOp::In, ExprKind::Set(items) | ExprKind::List(items)) => {
                    let Some(v) = items
                        .iter()
                        .map(|i| match &i.kind {
                            ExprKind::String(s) => Some(s.clone()),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()
                    else {
                        continue;
                    };
                    v
                }
                _ => continue,
            };
            acc = Some(match acc {
                None => names,
                Some(x) => x.into_iter().filter(|t| names.contains(t)).collect(),
            });
        }
        acc
    }
}
