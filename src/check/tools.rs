//! `tool` declarations against the rules that read their arguments: a rule limited to declared
//! tools (a top-level `tool.name == "X"` / `tool.name in {…}` conjunct) may only read arguments
//! those tools declare, and may not compare one with a literal of another type. What a call
//! itself must look like is enforced at run time (`compile::ToolSpec::check_call`).

use std::collections::HashMap;

use super::plan::{ToolConjunct, ToolPlan};
use super::{Checker, Resolution, Table};
use crate::diagnostics::{did_you_mean, Code, Diagnostic, FileId};
use crate::syntax::ast::{ArgType, BinaryOp, Expr, ExprKind, Item, ToolDecl};

impl Checker<'_> {
    /// Records each rule's [`ToolPlan`]: its top-level `tool.name` conjuncts, through the
    /// predicates without parameters it calls.
    pub(super) fn plan_tools(&mut self) {
        let loaded = self.loaded;
        for unit in &loaded.units {
            for item in &unit.module.items {
                let Item::Rule(r) = item else { continue };
                let Some(when) = &r.when else { continue };
                let mut plan = ToolPlan::default();
                self.tool_conjuncts(unit.file, when, false, &mut Vec::new(), &mut plan);
                self.tool_plans.insert((unit.file, r.span), plan);
            }
        }
    }

    fn tool_conjuncts(
        &self,
        file: FileId,
        e: &Expr,
        via_predicate: bool,
        seen: &mut Vec<(FileId, String)>,
        plan: &mut ToolPlan,
    ) {
        match &e.kind {
            ExprKind::Binary(BinaryOp::And, a, b) => {
                self.tool_conjuncts(file, a, via_predicate, seen, plan);
                self.tool_conjuncts(file, b, via_predicate, seen, plan);
            }
            ExprKind::Call(callee, args) if args.is_empty() => {
                let Some((Resolution::Predicate { name, file: pf }, _)) =
                    self.resolutions.get(&(file, callee.span))
                else {
                    return;
                };
                // A recursive predicate is an error reported elsewhere; do not loop on it.
                let key = (*pf, name.clone());
                if seen.contains(&key) {
                    return;
                }
                let Some(body) = self
                    .loaded
                    .units
                    .iter()
                    .filter(|u| u.file == *pf)
                    .flat_map(|u| u.module.items.iter())
                    .find_map(|i| match i {
                        Item::Pred(p) if p.name.name == *name => Some(&p.body),
                        _ => None,
                    })
                else {
                    return;
                };
                seen.push(key);
                self.tool_conjuncts(*pf, body, true, seen, plan);
                seen.pop();
            }
            ExprKind::Binary(op @ (BinaryOp::Eq | BinaryOp::In), lhs, rhs) => {
                let is_tool_name = matches!(
                    self.resolutions.get(&(file, lhs.span)),
                    Some((Resolution::Field { table: Table::Payload(_), path }, _)) if path == "tool.name"
                );
                if is_tool_name {
                    plan.conjuncts.push(ToolConjunct {
                        file,
                        op: *op,
                        names: (**rhs).clone(),
                        via_predicate,
                        spelled: spelled_tool_name(lhs),
                    });
                }
            }
            _ => {}
        }
    }

    pub(super) fn check_tool_arguments(&mut self) {
        let loaded = self.loaded;
        for unit in &loaded.units {
            for item in &unit.module.items {
                let Item::Tool(t) = item else { continue };
                if let Some(class) = t.class.as_ref() {
                    if crate::actions::class_word(&class.name).is_none() {
                        let mut d = Diagnostic::error(
                            Code::UnknownClass,
                            unit.file,
                            class.span,
                            format!("`{}` is not an effect class", class.name),
                        )
                        .with_label("not an effect class");
                        d = match did_you_mean(&class.name, crate::actions::CLASSES.iter().copied())
                        {
                            Some(s) => d.with_help(format!("did you mean `{s}`?")),
                            None => d.with_help(format!(
                                "the effect classes are {}",
                                crate::actions::CLASSES.join(", ")
                            )),
                        };
                        self.diagnostics.push(d);
                    }
                }
                for role in t.params.iter().filter_map(|p| p.role.as_ref()) {
                    if crate::roles::role_word(&role.name).is_none() {
                        let mut d = Diagnostic::error(
                            Code::UnknownRole,
                            unit.file,
                            role.span,
                            format!("`{}` is not an argument role", role.name),
                        )
                        .with_label("not a role");
                        d = match did_you_mean(&role.name, crate::roles::ROLES.iter().copied()) {
                            Some(s) => d.with_help(format!("did you mean `{s}`?")),
                            None => d.with_help(format!(
                                "the roles are {}",
                                crate::roles::ROLES.join(", ")
                            )),
                        };
                        self.diagnostics.push(d);
                    }
                }
            }
        }
        let tools: HashMap<&str, &ToolDecl> = loaded
            .units
            .iter()
            .flat_map(|u| &u.module.items)
            .filter_map(|i| match i {
                Item::Tool(t) => Some((t.name.value.as_str(), t)),
                _ => None,
            })
            .collect();
        if tools.is_empty() {
            return;
        }
        for unit in &loaded.units {
            for item in &unit.module.items {
                let Item::Rule(r) = item else { continue };
                if !r
                    .hooks
                    .iter()
                    .any(|h| matches!(h.name.as_str(), "toolCallRequest" | "steps/toolCallRequest"))
                {
                    continue;
                }
                let Some(when) = &r.when else { continue };
                let Some(names) = self
                    .tool_plans
                    .get(&(unit.file, r.span))
                    .and_then(|p| p.literal_tools())
                else {
                    continue;
                };
                let Some(decls) = names
                    .iter()
                    .map(|n| tools.get(n.as_str()).copied())
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                self.check_arg_reads(unit.file, when, &decls);
            }
        }
    }

    fn argument_of(&self, file: FileId, e: &Expr) -> Option<String> {
        match self.resolutions.get(&(file, e.span)) {
            Some((Resolution::Argument(n), _)) if n != "*" => Some(n.clone()),
            _ => None,
        }
    }

    fn check_arg_reads(&mut self, file: FileId, e: &Expr, decls: &[&ToolDecl]) {
        if let Some(name) = self.argument_of(file, e) {
            if let Some(missing) = decls
                .iter()
                .find(|t| !t.params.iter().any(|p| p.name.name == name))
            {
                let mut d = Diagnostic::error(
                    Code::UnknownArgument,
                    file,
                    e.span,
                    format!(
                        "the tool `{}` declares no argument `{name}`",
                        missing.name.value
                    ),
                )
                .with_label("not a declared argument");
                d = match did_you_mean(&name, missing.params.iter().map(|p| p.name.name.as_str())) {
                    Some(s) => d.with_help(format!("did you mean `args.{s}`?")),
                    None => d.with_help(format!(
                        "its arguments are {}",
                        missing
                            .params
                            .iter()
                            .map(|p| p.name.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                };
                self.diagnostics.push(d);
            }
            return;
        }
        match &e.kind {
            ExprKind::Binary(op, a, b) => {
                if op.is_comparison() {
                    for (arg, other) in [(a, b), (b, a)] {
                        if let (Some(name), Some(kind)) =
                            (self.argument_of(file, arg), literal_kind(other, *op))
                        {
                            self.check_literal(file, e, &name, kind, decls);
                        }
                    }
                }
                self.check_arg_reads(file, a, decls);
                self.check_arg_reads(file, b, decls);
            }
            ExprKind::Member(base, _) => self.check_arg_reads(file, base, decls),
            ExprKind::Index(base, i) => {
                self.check_arg_reads(file, base, decls);
                self.check_arg_reads(file, i, decls);
            }
            ExprKind::Call(callee, args) => {
                self.check_arg_reads(file, callee, decls);
                for a in args {
                    self.check_arg_reads(file, &a.value, decls);
                }
            }
            ExprKind::Unary(_, x) => self.check_arg_reads(file, x, decls),
            ExprKind::Set(items) | ExprKind::List(items) => {
                for i in items {
                    self.check_arg_reads(file, i, decls);
                }
            }
            ExprKind::Quantifier { over, body, .. } => {
                self.check_arg_reads(file, over, decls);
                self.check_arg_reads(file, body, decls);
            }
            // A history filter reads past events, which may be of any tool.
            _ => {}
        }
    }

    fn check_literal(
        &mut self,
        file: FileId,
        e: &Expr,
        name: &str,
        kind: &'static str,
        decls: &[&ToolDecl],
    ) {
        for t in decls {
            let Some(p) = t.params.iter().find(|p| p.name.name == name) else {
                continue;
            };
            let fits = matches!(
                (&p.ty, kind),
                (ArgType::Any, _)
                    | (ArgType::String, "string")
                    | (ArgType::Number | ArgType::Integer, "number")
                    | (ArgType::Bool, "bool")
            );
            if !fits {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::TypeMismatch,
                        file,
                        e.span,
                        format!(
                            "`args.{name}` of `{}` is declared {}, and is compared here with a {kind}",
                            t.name.value, p.ty
                        ),
                    )
                    .with_label("never comparable")
                    .with_help(format!(
                        "compare it with a {} (the tool declaration says so), or fix the declaration",
                        p.ty
                    )),
                );
                return;
            }
        }
    }
}

/// The kind of a literal compared with an argument (for `in`, of the collection's elements).
fn literal_kind(e: &Expr, op: BinaryOp) -> Option<&'static str> {
    let scalar = |e: &Expr| match &e.kind {
        ExprKind::String(_) => Some("string"),
        ExprKind::Number(_) => Some("number"),
        ExprKind::Bool(_) => Some("bool"),
        _ => None,
    };
    match (&e.kind, op) {
        (ExprKind::Set(items) | ExprKind::List(items), BinaryOp::In | BinaryOp::NotIn) => {
            items.first().and_then(scalar)
        }
        (_, BinaryOp::In | BinaryOp::NotIn) => None,
        _ => scalar(e),
    }
}

/// `tool.name`, as written (the plan records other paths to the field too).
fn spelled_tool_name(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Member(base, f)
        if f.name == "name" && matches!(&base.kind, ExprKind::Name(n) if n == "tool"))
}
