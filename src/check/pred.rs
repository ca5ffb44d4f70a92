//! Predicates: `pred NAME(PARAM[: TYPE], …) = BODY`. A predicate is pure, typed and not
//! recursive; the compiler inlines it at every call. Its body is checked at each call, with
//! each parameter typed as its argument (or as declared), in the caller's scope: a predicate
//! called from a rule on toolCallResult may read `exit_status`; one called from a label may read
//! only what a label condition may.

use super::expr::{Ctx, Scope};
use super::{Checker, Resolution, Type};
use crate::acs::fields;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Span};
use crate::syntax::ast::{Arg, Expr, ExprKind, Ident, PredDecl};

/// The parameter types a predicate may declare, and what they mean.
pub const PARAM_TYPES: &[(&str, &str)] = &[
    ("bool", "true or false"),
    ("number", "a number"),
    ("string", "a string (or an enum value)"),
    ("duration", "a duration"),
    (
        "value",
        "any value, checked at run time (a tool argument, a JSON value)",
    ),
];

/// `pred endorsed(v)`, `pred big(x: number)`: the head, for hover and completion.
pub fn signature(p: &PredDecl) -> String {
    let params: Vec<String> = p
        .params
        .iter()
        .map(|q| match &q.ty {
            Some(t) => format!("{}: {}", q.name.name, t.name),
            None => q.name.name.clone(),
        })
        .collect();
    format!("pred {}({})", p.name.name, params.join(", "))
}

fn declared(ty: &Ident) -> Option<Type> {
    Some(match ty.name.as_str() {
        "bool" => Type::Bool,
        "number" => Type::Number,
        "string" => Type::String,
        "duration" => Type::Duration,
        "value" => Type::Json,
        _ => return None,
    })
}

/// Whether an argument of type `t` may be passed for a parameter declared `want`.
fn fits(want: &Type, t: &Type) -> bool {
    match want {
        Type::Bool => t.is_boolish(),
        Type::Number => t.is_numeric(),
        Type::String => t.is_stringish(),
        Type::Duration => *t == Type::Duration || t.is_dynamic(),
        _ => true,
    }
}

impl<'a> Checker<'a> {
    /// What can be checked where a predicate is declared: its parameters.
    pub(crate) fn check_pred_decl(&mut self, u: usize, p: &'a PredDecl) {
        let file = self.file_of(u);
        for (i, param) in p.params.iter().enumerate() {
            if let Some(prev) = p.params[..i]
                .iter()
                .find(|q| q.name.name == param.name.name)
            {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::Duplicate,
                        file,
                        param.name.span,
                        format!("the parameter `{}` is declared twice", param.name.name),
                    )
                    .with_label("second parameter of this name")
                    .with_related(prev.name.span, "first declared here")
                    .with_help("give each parameter its own name"),
                );
            }
            if let Some(ty) = &param.ty {
                if declared(ty).is_none() {
                    let names = PARAM_TYPES.iter().map(|t| t.0);
                    let mut d = Diagnostic::error(
                        Code::UnknownType,
                        file,
                        ty.span,
                        format!("there is no type `{}`", ty.name),
                    )
                    .with_label("unknown type");
                    let all: Vec<&str> = PARAM_TYPES.iter().map(|t| t.0).collect();
                    d = match did_you_mean(&ty.name, names) {
                        Some(s) => d
                            .with_help(format!("did you mean `{s}`?"))
                            .with_fix(ty.span, s.to_string()),
                        None => d.with_help(format!(
                            "a parameter's type is one of {}, or leave it out",
                            all.join(", ")
                        )),
                    };
                    self.diagnostics.push(d);
                }
            }
        }
    }

    /// `module.pred(…)`: a predicate of a module this file uses.
    pub(crate) fn qualified_pred_call(
        &mut self,
        cx: &mut Ctx,
        module: &str,
        callee: &Expr,
        member: &Ident,
        args: &[Arg],
        span: Span,
    ) -> Type {
        let ns = self
            .loaded
            .units
            .iter()
            .position(|u| u.name == module)
            .map(|u| self.ns[u]);
        if let Some(ns) = ns {
            if self.preds[ns].contains_key(member.name.as_str()) {
                return self.pred_call(cx, ns, &member.name, callee, args, span);
            }
        }
        for a in args {
            self.expr(cx, &a.value);
        }
        let known: Vec<&str> = ns
            .map(|ns| self.preds[ns].keys().copied().collect())
            .unwrap_or_default();
        let mut d = Diagnostic::error(
            Code::UnknownFunction,
            self.loaded.units[cx.unit].file,
            member.span,
            format!("module `{module}` has no predicate `{}`", member.name),
        )
        .with_label("not a predicate of that module");
        d = match did_you_mean(&member.name, known.iter().copied()) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(member.span, s.to_string()),
            None => d.with_help("check the module's file for the predicates it defines"),
        };
        self.diagnostics.push(d);
        Type::Error
    }

    /// A call of the predicate `name` of namespace `ns`: arguments, arity, recursion, and the
    /// body checked with the parameters bound to the arguments' types.
    pub(crate) fn pred_call(
        &mut self,
        cx: &mut Ctx,
        ns: usize,
        name: &str,
        callee: &Expr,
        args: &[Arg],
        span: Span,
    ) -> Type {
        let Some(info) = self.preds[ns].get(name).cloned() else {
            return Type::Error;
        };
        let decl = info.decl;
        let pred_file = self.file_of(info.unit);
        self.mark_used(ns, name);
        self.resolutions.insert(
            (cx.file, callee.span),
            (
                Resolution::Predicate {
                    name: name.into(),
                    file: pred_file,
                },
                Type::Bool,
            ),
        );
        let arg_types: Vec<Type> = args.iter().map(|a| self.expr(cx, &a.value)).collect();
        if matches!(cx.scope, Scope::Const) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::Misplaced,
                    cx.file,
                    span,
                    format!("the predicate `{name}` can only be called in a condition"),
                )
                .with_label("not in a rule or label condition")
                .with_help("call predicates in a rule's or a label's `when`"),
            );
            return Type::Error;
        }
        if let Some(named) = args.iter().find_map(|a| a.name.as_ref()) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::BadArgument,
                    cx.file,
                    named.span,
                    format!("`{name}` takes no named arguments"),
                )
                .with_label("named argument")
                .with_help(format!(
                    "pass the arguments in order: `{}`",
                    signature(decl)
                )),
            );
            return Type::Bool;
        }
        if args.len() != decl.params.len() {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::Arity,
                    cx.file,
                    span,
                    format!(
                        "the predicate `{name}` takes {} argument(s), not {}",
                        decl.params.len(),
                        args.len()
                    ),
                )
                .with_label("wrong number of arguments")
                .with_help(format!("it is declared `{}`", signature(decl))),
            );
            return Type::Bool;
        }
        let vars = self.bind_params(cx, name, decl, args, &arg_types, pred_file);
        let key = (ns, name.to_string());
        if let Some(at) = self.pred_stack.iter().position(|k| *k == key) {
            let mut chain: Vec<&str> = self.pred_stack[at..].iter().map(|k| k.1.as_str()).collect();
            chain.push(name);
            self.diagnostics.push(
                Diagnostic::error(
                    Code::Cycle,
                    cx.file,
                    span,
                    format!(
                        "the predicate `{name}` is defined in terms of itself ({})",
                        chain.join(" → ")
                    ),
                )
                .with_label("recursive call")
                .with_help("predicates are inlined where they are called, so they cannot call themselves, directly or through others"),
            );
            return Type::Bool;
        }
        if matches!(cx.scope, Scope::Label) {
            let bound: Vec<String> = decl.params.iter().map(|p| p.name.name.clone()).collect();
            if let Some((what, at)) = self.reads_event(info.unit, &decl.body, &bound) {
                let mut d = Diagnostic::error(
                    Code::Misplaced,
                    cx.file,
                    span,
                    format!(
                        "the predicate `{name}` reads {what}, which a label condition cannot see"
                    ),
                )
                .with_label("called in a label condition");
                if pred_file == cx.file {
                    d = d.with_related(at, "read here");
                }
                self.diagnostics.push(d.with_help(
                    "a label condition sees one provenance object (origin, source_id, derived_from, provenance_id), constants and pure builtins; call this predicate from a rule",
                ));
                return Type::Bool;
            }
        }
        self.pred_body(cx, info.unit, pred_file, decl, vars, key, name, span);
        Type::Bool
    }

    /// A predicate's parameters, typed as declared (an argument must fit) or as their
    /// argument, for checking its body at this call.
    fn bind_params(
        &mut self,
        cx: &Ctx,
        name: &str,
        decl: &'a PredDecl,
        args: &[Arg],
        arg_types: &[Type],
        pred_file: crate::diagnostics::FileId,
    ) -> Vec<(String, Type)> {
        // Parameters: typed as declared (an argument must fit), or as their argument.
        let mut vars = Vec::new();
        for ((param, arg), t) in decl.params.iter().zip(args).zip(arg_types) {
            let want = param.ty.as_ref().and_then(declared);
            let bound = match want {
                Some(w) if !fits(&w, t) => {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::TypeMismatch,
                            cx.file,
                            arg.value.span,
                            format!(
                                "the parameter `{}` of `{name}` is a {w}, but this is a {t}",
                                param.name.name
                            ),
                        )
                        .with_label(format!("this is a {t}"))
                        .with_help(format!("it is declared `{}`", signature(decl))),
                    );
                    w
                }
                Some(w) if t.is_dynamic() => w,
                _ => t.clone(),
            };
            self.resolutions.insert(
                (pred_file, param.name.span),
                (Resolution::Variable(param.name.name.clone()), bound.clone()),
            );
            vars.push((param.name.name.clone(), bound));
        }
        vars
    }

    /// A predicate's body, checked for one call (with its parameters bound to `vars`): each
    /// problem reported once, at the first call that shows it.
    #[allow(clippy::too_many_arguments)]
    fn pred_body(
        &mut self,
        cx: &Ctx,
        unit: usize,
        pred_file: crate::diagnostics::FileId,
        decl: &'a PredDecl,
        vars: Vec<(String, Type)>,
        key: (usize, String),
        name: &str,
        span: Span,
    ) {
        let before = self.diagnostics.len();
        let mut bcx = Ctx::new(unit, pred_file, cx.scope);
        bcx.vars = vars;
        bcx.in_history = cx.in_history;
        self.pred_stack.push(key);
        let t = self.expr(&mut bcx, &decl.body);
        self.pred_stack.pop();
        for at in &bcx.bad_current {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::HistoryJoin,
                    pred_file,
                    *at,
                    "`$` inside a predicate cannot be a history key",
                )
                .with_label("`$` in a predicate's body")
                .with_help("write the key equality `FIELD == $.FIELD` in the history filter itself, or use `by FIELD`"),
            );
        }
        if !t.is_boolish() {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    pred_file,
                    decl.body.span,
                    format!("a predicate's body must be true or false, but this is a {t}"),
                )
                .with_label(format!("this is a {t}"))
                .with_help("a predicate is a condition: compare, test or combine values"),
            );
        }
        // The same body checked at several calls reports each problem once, at the first call
        // that shows it (and, in one file, with that call marked).
        let fresh: Vec<Diagnostic> = self.diagnostics.drain(before..).collect();
        for mut d in fresh {
            let seen = self.diagnostics.iter().any(|o| {
                (o.code, o.file, o.span, &o.message) == (d.code, d.file, d.span, &d.message)
            });
            if seen {
                continue;
            }
            if d.file == pred_file && pred_file == cx.file && d.related.is_empty() {
                d = d.with_related(span, format!("checked for this call of `{name}`"));
            }
            self.diagnostics.push(d);
        }
    }

    /// Predicates no call ever checked: a body that reads no event is checked once, as a
    /// label condition would be, so its mistakes show before anyone calls it.
    pub(crate) fn check_uncalled_preds(&mut self) {
        let loaded = self.loaded;
        for (u, unit) in loaded.units.iter().enumerate() {
            for item in &unit.module.items {
                let crate::syntax::ast::Item::Pred(p) = item else {
                    continue;
                };
                let ns = self.ns[u];
                if self.used.contains_key(&(ns, p.name.name.clone())) {
                    continue;
                }
                let bound: Vec<String> = p.params.iter().map(|q| q.name.name.clone()).collect();
                if self.reads_event(u, &p.body, &bound).is_some() {
                    continue;
                }
                let mut cx = Ctx::new(u, unit.file, Scope::Label);
                cx.vars = p
                    .params
                    .iter()
                    .map(|q| {
                        let t = q.ty.as_ref().and_then(declared).unwrap_or(Type::Json);
                        (q.name.name.clone(), t)
                    })
                    .collect();
                self.pred_stack.push((ns, p.name.name.clone()));
                let t = self.expr(&mut cx, &p.body);
                self.pred_stack.pop();
                if !t.is_boolish() {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::TypeMismatch,
                            unit.file,
                            p.body.span,
                            format!("a predicate's body must be true or false, but this is a {t}"),
                        )
                        .with_label(format!("this is a {t}"))
                        .with_help("a predicate is a condition: compare, test or combine values"),
                    );
                }
            }
        }
    }

    /// Whether a predicate's body (of `unit`) reads the event, history or the session: what
    /// it reads and where. Provenance fields, constants, labels and parameters are fine.
    pub(crate) fn reads_event(
        &self,
        unit: usize,
        e: &Expr,
        bound: &[String],
    ) -> Option<(String, Span)> {
        match &e.kind {
            ExprKind::Name(n) => {
                if bound.contains(n) || self.defined_in_scope(unit, n) {
                    return None;
                }
                let provenance = fields::lookup(fields::PROVENANCE, n).is_some() || n == "source";
                if provenance {
                    return None;
                }
                let event_root = ["args", "metadata", "payload", "intent"].contains(&n.as_str())
                    || fields::HOOKS
                        .iter()
                        .any(|h| fields::lookup(h.fields, n).is_some());
                event_root.then(|| (format!("the event's `{n}`"), e.span))
            }
            ExprKind::Current => Some(("the current event (`$`)".into(), e.span)),
            ExprKind::History(_) => Some(("the session's history".into(), e.span)),
            ExprKind::Member(base, _) => self.reads_event(unit, base, bound),
            ExprKind::Index(a, b) => self
                .reads_event(unit, a, bound)
                .or_else(|| self.reads_event(unit, b, bound)),
            ExprKind::Call(callee, args) => {
                let from_callee = match &callee.kind {
                    ExprKind::Name(f) if f == "turns_since" || f == "effect_state" => {
                        Some((format!("`{f}`"), callee.span))
                    }
                    // A builtin only rules may call reads the session as a rule sees it.
                    ExprKind::Name(f)
                        if !self.defined_in_scope(unit, f)
                            && super::builtins::builtin(f)
                                .is_some_and(|b| !b.allowed.admits(Scope::Label)) =>
                    {
                        Some((format!("`{f}`"), callee.span))
                    }
                    ExprKind::Name(_) => None,
                    ExprKind::Member(base, m)
                        if m.name == "permits"
                            && matches!(&base.kind, ExprKind::Name(r) if r == "intent") =>
                    {
                        Some(("the session's intent".into(), callee.span))
                    }
                    _ => self.reads_event(unit, callee, bound),
                };
                from_callee.or_else(|| {
                    args.iter()
                        .find_map(|a| self.reads_event(unit, &a.value, bound))
                })
            }
            ExprKind::Unary(_, x) => self.reads_event(unit, x, bound),
            ExprKind::Binary(_, a, b) => self
                .reads_event(unit, a, bound)
                .or_else(|| self.reads_event(unit, b, bound)),
            ExprKind::Set(items) | ExprKind::List(items) => {
                items.iter().find_map(|i| self.reads_event(unit, i, bound))
            }
            ExprKind::Object(entries) => entries
                .iter()
                .find_map(|(_, v)| self.reads_event(unit, v, bound)),
            ExprKind::Quantifier {
                key,
                var,
                over,
                body,
                ..
            } => self.reads_event(unit, over, bound).or_else(|| {
                let mut inner = bound.to_vec();
                inner.push(var.name.clone());
                inner.extend(key.iter().map(|k| k.name.clone()));
                self.reads_event(unit, body, &inner)
            }),
            ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Duration(_) => None,
        }
    }

    /// Whether `name` is a constant, label or predicate `unit` can see.
    fn defined_in_scope(&self, unit: usize, name: &str) -> bool {
        !matches!(self.lookup(unit, name), super::scope::Lookup::None)
    }
}
