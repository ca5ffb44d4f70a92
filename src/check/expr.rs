//! Typing expressions: resolve every name, type every payload path against the hook's field
//! table, and check that history filters can be kept as O(1) state.

use super::builtins::{builtin, functions, spec, Allowed, Param};
use super::scope::{Lookup, Named};
use super::types::{join, Table, Type};
use super::{Alias, Checker, Resolution};
use crate::acs::fields::{self, HookSpec};
use crate::diagnostics::{did_you_mean, Code, Diagnostic, FileId, Span};
use crate::syntax::ast::{BinaryOp, Expr, ExprKind, History, HistoryKind, UnaryOp, WindowKind};

/// The longest `last N turns` window; the state keeps one counter per turn of it.
pub const MAX_WINDOW_TURNS: u32 = 4096;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    /// A `let` constant: no event in view.
    Const,
    /// A label's condition: the provenance of one piece of content.
    Label,
    /// A rule's condition, on one hook.
    Rule(&'static HookSpec),
    /// A history filter: the past event's fields, and `$` for the current one.
    History {
        past: &'static HookSpec,
        current: Option<&'static HookSpec>,
    },
}

pub(crate) struct Ctx {
    pub unit: usize,
    pub file: FileId,
    pub scope: Scope,
    pub(super) vars: Vec<(String, Type)>,
    /// Inside a history filter: spans of `$` uses that are not part of a key equality.
    pub(super) bad_current: Vec<Span>,
    pub(super) in_history: bool,
}

impl Ctx {
    pub fn new(unit: usize, file: FileId, scope: Scope) -> Self {
        Ctx {
            unit,
            file,
            scope,
            vars: Vec::new(),
            bad_current: Vec::new(),
            in_history: false,
        }
    }
}

/// Roots every rule may use besides its payload's fields.
const RULE_ROOTS: &[&str] = &["args", "metadata", "payload", "intent"];

/// Whether an expression is `false` whatever the event (for the unreachable-rule warning).
pub(crate) fn folds_to_false(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Bool(b) => !b,
        ExprKind::Unary(UnaryOp::Not, x) => folds_to_true(x),
        ExprKind::Binary(BinaryOp::And, a, b) => folds_to_false(a) || folds_to_false(b),
        ExprKind::Binary(BinaryOp::Or, a, b) => folds_to_false(a) && folds_to_false(b),
        _ => false,
    }
}

fn folds_to_true(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Bool(b) => *b,
        ExprKind::Unary(UnaryOp::Not, x) => folds_to_false(x),
        ExprKind::Binary(BinaryOp::Or, a, b) => folds_to_true(a) || folds_to_true(b),
        ExprKind::Binary(BinaryOp::And, a, b) => folds_to_true(a) && folds_to_true(b),
        _ => false,
    }
}

impl Checker<'_> {
    fn resolved(&mut self, cx: &Ctx, span: Span, r: Resolution, t: Type) -> Type {
        self.resolutions.insert((cx.file, span), (r, t.clone()));
        t
    }

    fn error(&mut self, d: Diagnostic) -> Type {
        self.diagnostics.push(d);
        Type::Error
    }

    /// The type of a `let` constant of namespace `ns`, checking it on first use (and
    /// reporting cycles).
    pub(crate) fn const_type(&mut self, ns: usize, name: &str) -> Type {
        let key = (ns, name.to_string());
        if let Some(t) = self.const_types.get(&key) {
            return t.clone();
        }
        let Some(info) = self.constants[ns].get(name).cloned() else {
            return Type::Error;
        };
        let file = self.file_of(info.unit);
        if self.const_in_progress.contains(&key) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::Cycle,
                    file,
                    info.decl.name.span,
                    format!("the constant `{name}` is defined in terms of itself"),
                )
                .with_label("part of a cycle")
                .with_help("constants must not refer to each other in a loop"),
            );
            return Type::Error;
        }
        self.const_in_progress.push(key.clone());
        let mut cx = Ctx::new(info.unit, file, Scope::Const);
        let t = self.expr(&mut cx, &info.decl.value);
        self.const_in_progress.pop();
        self.const_types.insert(key, t.clone());
        t
    }

    pub(crate) fn expr(&mut self, cx: &mut Ctx, e: &Expr) -> Type {
        match &e.kind {
            ExprKind::Bool(_) => Type::Bool,
            // JSON null: absent to Warden, `null` to Rego.
            ExprKind::Null => Type::Json,
            ExprKind::Number(_) => Type::Number,
            ExprKind::String(_) => Type::String,
            ExprKind::Duration(_) => Type::Duration,
            ExprKind::Name(name) => self.name(cx, name, e.span),
            ExprKind::Current => match cx.scope {
                Scope::History {
                    current: Some(h), ..
                } => {
                    cx.bad_current.push(e.span);
                    Type::Object(Table::Payload(h), String::new())
                }
                _ => self.error(
                    Diagnostic::error(
                        Code::MisplacedCurrent,
                        cx.file,
                        e.span,
                        "`$` only means something inside a history filter",
                    )
                    .with_label("no current event here")
                    .with_help(
                        "`$` is the event being decided, as seen from inside count(…) or exists(…)",
                    ),
                ),
            },
            ExprKind::Member(base, field) => {
                // Qualified names: `org.rule` (Rego) and `taint.untrusted` (a used module).
                if let ExprKind::Name(alias) = &base.kind {
                    if !self.is_local(cx, alias) {
                        if let Some(a) = self.aliases[cx.unit].get(alias).cloned() {
                            return self.qualified(cx, alias, a, &field.name, field.span, e.span);
                        }
                    }
                }
                let bt = self.expr(cx, base);
                self.member(cx, &bt, &field.name, field.span, e.span)
            }
            ExprKind::Index(base, index) => self.index(cx, base, index, e.span),
            ExprKind::Call(callee, args) => self.call(cx, callee, args, e.span),
            ExprKind::Unary(op, x) => self.unary(cx, *op, x),
            ExprKind::Binary(op, a, b) => self.binary(cx, *op, a, b, e.span),
            ExprKind::Set(items) => self.collection(cx, items, true),
            ExprKind::List(items) => self.collection(cx, items, false),
            ExprKind::Object(entries) => {
                for (_, v) in entries {
                    self.expr(cx, v);
                }
                Type::Json
            }
            ExprKind::Quantifier {
                key,
                var,
                over,
                body,
                ..
            } => self.quantifier(cx, key.as_ref(), var, over, body),
            ExprKind::History(h) => self.history(cx, h, e.span),
        }
    }

    /// `base[index]`.
    fn index(&mut self, cx: &mut Ctx, base: &Expr, index: &Expr, span: Span) -> Type {
        let bt = self.expr(cx, base);
        let it = self.expr(cx, index);
        match &bt {
            Type::List(t) => {
                if !it.is_numeric() {
                    return self.error(mismatch(
                        cx.file,
                        index.span,
                        "a list index",
                        "number",
                        &it,
                    ));
                }
                (**t).clone()
            }
            Type::Object(table, prefix) => {
                let t = map_value_type(*table, prefix).unwrap_or(Type::Json);
                // `args["amount"]` is the argument `amount`, exactly as `args.amount`.
                if t == Type::Arg {
                    let name = match &index.kind {
                        ExprKind::String(k) => k.clone(),
                        _ => "*".to_string(),
                    };
                    return self.resolved(cx, span, Resolution::Argument(name), t);
                }
                t
            }
            t if t.is_dynamic() => Type::Json,
            other => self.error(
                Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    span,
                    format!("a {other} cannot be indexed"),
                )
                .with_label("not a list or object")
                .with_help("`[…]` reads a list element or an object member"),
            ),
        }
    }

    /// `not x`, `-x`.
    fn unary(&mut self, cx: &mut Ctx, op: UnaryOp, x: &Expr) -> Type {
        let t = self.expr(cx, x);
        match op {
            UnaryOp::Not => {
                if !t.is_boolish() {
                    return self.error(mismatch(cx.file, x.span, "`not`", "true or false", &t));
                }
                Type::Bool
            }
            UnaryOp::Neg => {
                if !t.is_numeric() {
                    return self.error(mismatch(cx.file, x.span, "`-`", "number", &t));
                }
                Type::Number
            }
        }
    }

    /// A list (a set when `set`) written out: its elements of one type.
    fn collection(&mut self, cx: &mut Ctx, items: &[Expr], set: bool) -> Type {
        let mut elem: Option<Type> = None;
        for item in items {
            let t = self.expr(cx, item);
            match &elem {
                None => elem = Some(t),
                Some(prev) if !prev.comparable(&t) => {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::TypeMismatch,
                            cx.file,
                            item.span,
                            format!("this element is a {t}, the ones before are {prev}"),
                        )
                        .with_label("mixed element types")
                        .with_help("keep a collection's elements of one type"),
                    );
                }
                _ => {}
            }
        }
        let elem = Box::new(elem.unwrap_or(Type::Json));
        if set {
            Type::Set(elem)
        } else {
            Type::List(elem)
        }
    }

    /// `any`/`all` (with the element's key, when named) over a collection.
    fn quantifier(
        &mut self,
        cx: &mut Ctx,
        key: Option<&crate::syntax::ast::Ident>,
        var: &crate::syntax::ast::Ident,
        over: &Expr,
        body: &Expr,
    ) -> Type {
        let ot = self.expr(cx, over);
        // A map's or `args`' elements are named; a list's are numbered.
        let key_type = match &ot {
            Type::Object(..) => Type::String,
            Type::Json | Type::Error => Type::Json,
            _ => Type::Number,
        };
        let elem = match &ot {
            // The elements of a list argument are arguments: each has its own sources.
            Type::Arg => Some(Type::Arg),
            Type::Object(table, prefix) => map_value_type(*table, prefix),
            t => t.element(),
        };
        let elem = elem.unwrap_or_else(|| {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    over.span,
                    format!("`any`/`all` range over a collection, not a {ot}"),
                )
                .with_label("not a collection")
                .with_help("range over a list, a set, `args`, or a list field like `outputs`"),
            );
            Type::Error
        });
        self.resolutions.insert(
            (cx.file, var.span),
            (Resolution::Variable(var.name.clone()), elem.clone()),
        );
        if let Some(k) = key {
            self.resolutions.insert(
                (cx.file, k.span),
                (Resolution::Variable(k.name.clone()), key_type.clone()),
            );
            cx.vars.push((k.name.clone(), key_type));
        }
        cx.vars.push((var.name.clone(), elem));
        let bt = self.expr(cx, body);
        cx.vars.pop();
        if key.is_some() {
            cx.vars.pop();
        }
        if !bt.is_boolish() {
            self.diagnostics.push(mismatch(
                cx.file,
                body.span,
                "a quantifier's body",
                "true or false",
                &bt,
            ));
        }
        Type::Bool
    }

    fn is_event_root(&self, cx: &Ctx, word: &str) -> bool {
        match cx.scope {
            Scope::Rule(h) | Scope::History { past: h, .. } => {
                fields::lookup(h.fields, word).is_some() || RULE_ROOTS.contains(&word)
            }
            Scope::Label => fields::lookup(fields::PROVENANCE, word).is_some() || word == "source",
            Scope::Const => false,
        }
    }

    fn is_local(&self, cx: &Ctx, name: &str) -> bool {
        cx.vars.iter().any(|(n, _)| n == name) || self.const_visible(cx.unit, name)
    }

    fn name(&mut self, cx: &mut Ctx, name: &str, span: Span) -> Type {
        if let Some((_, t)) = cx.vars.iter().rev().find(|(n, _)| n == name) {
            let t = t.clone();
            return self.resolved(cx, span, Resolution::Variable(name.into()), t);
        }
        // This module's constants, labels and predicates, and those of the modules it uses.
        if let Some(t) = self.resolve_bare(cx, name, span) {
            return t;
        }
        if let Some(alias) = self.aliases[cx.unit].get(name) {
            let what = match alias {
                Alias::Rego | Alias::RegoData => "a Rego import",
                Alias::Module(_) => "a module",
            };
            return self.error(
                Diagnostic::error(
                    Code::NotAValue,
                    cx.file,
                    span,
                    format!("`{name}` is {what}, not a value"),
                )
                .with_label("needs a member")
                .with_help(match alias {
                    Alias::Module(_) => {
                        format!("name one of its constants or labels: `{name}.NAME`")
                    }
                    _ => format!("name one of its rules: `{name}.NAME`"),
                }),
            );
        }
        // Event roots.
        let table = match cx.scope {
            Scope::Const => None,
            Scope::Label => Some(Table::Provenance),
            Scope::Rule(h) => Some(Table::Payload(h)),
            Scope::History { past, .. } => Some(Table::Payload(past)),
        };
        if let Some(table) = table {
            if let Some(t) = self.root(cx, table, name, span) {
                return t;
            }
        }
        if let Some(b) = builtin(name) {
            return self.error(
                Diagnostic::error(
                    Code::NotAValue,
                    cx.file,
                    span,
                    format!("`{name}` is a function"),
                )
                .with_label("call it")
                // `max`: `effect_state` (0 or 1) has always said 1 here.
                .with_help(format!(
                    "`{name}(…)` takes {} argument(s): {}",
                    b.arity.max, b.doc
                )),
            );
        }
        // Unknown: suggest among everything this scope can see.
        let mut candidates: Vec<String> = cx.vars.iter().map(|(n, _)| n.clone()).collect();
        candidates.extend(
            self.visible(cx.unit, Named::Const)
                .into_iter()
                .chain(self.visible_labels(cx.unit))
                .map(String::from),
        );
        if let Some(table) = table {
            candidates.extend(fields::children(table.fields(), "").map(|f| f.path.to_string()));
            if matches!(table, Table::Payload(_)) {
                candidates.extend(RULE_ROOTS.iter().map(|s| s.to_string()));
            }
            if matches!(table, Table::Provenance) {
                candidates.push("source".into());
            }
        }
        let mut d = Diagnostic::error(
            Code::UnknownName,
            cx.file,
            span,
            format!("unknown name `{name}`"),
        )
        .with_label("not defined");
        if let Some(help) = self.defined_elsewhere(cx.unit, name) {
            return self.error(d.with_help(help));
        }
        match did_you_mean(name, candidates.iter().map(String::as_str)) {
            Some(s) => {
                d = d
                    .with_help(format!("did you mean `{s}`?"))
                    .with_fix(span, s.to_string());
            }
            None => {
                if let Some(other) = hook_with_field(name) {
                    let here = match cx.scope {
                        Scope::Rule(h) | Scope::History { past: h, .. } => h.name,
                        _ => "this context",
                    };
                    d = d.with_help(format!("`{name}` is a field of {other}, not of {here}"));
                } else {
                    d = d.with_help("define it with `let`, or check the spelling");
                }
            }
        }
        self.error(d)
    }

    /// A bare name that starts a path into the event: `tool`, `args`, `metadata`, `origin`…
    fn root(&mut self, cx: &mut Ctx, table: Table, name: &str, span: Span) -> Option<Type> {
        if let Table::Payload(h) = table {
            match name {
                "args" => {
                    let t = if fields::lookup(h.fields, "arguments").is_some() {
                        Type::Object(table, "arguments".into())
                    } else if let (true, Some(call)) = (
                        fields::lookup(h.fields, "params.arguments").is_some(),
                        fields::hook("steps/toolCallRequest"),
                    ) {
                        // A wrapped MCP call is decided as the tool call it is: its arguments
                        // are tool arguments (`{value, provenance}`, docs/language.md §5).
                        Type::Object(Table::Payload(call), "arguments".into())
                    } else {
                        return Some(
                            self.error(
                                Diagnostic::error(
                                    Code::FieldNotOnHook,
                                    cx.file,
                                    span,
                                    format!("{} has no tool arguments", h.name),
                                )
                                .with_label("no `args` on this hook")
                                .with_help(
                                    "`args` exists on toolCallRequest and protocols/MCP/tools/call",
                                ),
                            ),
                        );
                    };
                    return Some(self.resolved(
                        cx,
                        span,
                        Resolution::Field {
                            table,
                            path: "arguments".into(),
                        },
                        t,
                    ));
                }
                "metadata" => {
                    return Some(self.resolved(
                        cx,
                        span,
                        Resolution::Field {
                            table: Table::Metadata,
                            path: String::new(),
                        },
                        Type::Object(Table::Metadata, String::new()),
                    ))
                }
                "payload" => {
                    return Some(self.resolved(
                        cx,
                        span,
                        Resolution::Field {
                            table,
                            path: String::new(),
                        },
                        Type::Object(table, String::new()),
                    ))
                }
                // The session's IBAC intent; toolCallRequest's free-text `intent` field stays
                // reachable as `payload.intent`.
                "intent" => {
                    return Some(self.resolved(
                        cx,
                        span,
                        Resolution::Builtin("intent"),
                        Type::Intent,
                    ))
                }
                _ => {}
            }
        }
        let path = if table == Table::Provenance && name == "source" {
            "source_id"
        } else {
            name
        };
        let f = fields::lookup(table.fields(), path)?;
        let t = Type::of_field(table, f);
        Some(self.resolved(
            cx,
            span,
            Resolution::Field {
                table,
                path: path.to_string(),
            },
            t,
        ))
    }

    fn qualified(
        &mut self,
        cx: &mut Ctx,
        alias: &str,
        a: Alias,
        member: &str,
        member_span: Span,
        whole: Span,
    ) -> Type {
        match a {
            Alias::Rego | Alias::RegoData => {
                // Rego values are JSON; their shape is Rego's business.
                self.check_rego_rule(cx, alias, member, member_span);
                self.resolved(
                    cx,
                    whole,
                    Resolution::Rego {
                        alias: alias.into(),
                        rule: member.into(),
                    },
                    Type::Json,
                )
            }
            Alias::Module(module) => {
                // The module's own definition, whatever the bare name means here.
                let there = self
                    .loaded
                    .units
                    .iter()
                    .position(|u| u.name == module)
                    .map(|u| self.ns[u])
                    .and_then(|ns| self.defined_in(ns, member).map(|k| (k, ns)));
                let Some((kind, ns)) = there.filter(|(k, _)| *k != Named::Pred) else {
                    return self.error(
                        Diagnostic::error(
                            Code::UnknownName,
                            cx.file,
                            member_span,
                            format!("module `{module}` has no constant or label `{member}`"),
                        )
                        .with_label("not in that module")
                        .with_help("check the module's file for the names it defines"),
                    );
                };
                self.resolve_def(cx, kind, ns, member, whole)
            }
        }
    }

    /// A Rego rule named through an alias must exist in the imported package.
    fn check_rego_rule(&mut self, cx: &Ctx, alias: &str, rule: &str, span: Span) {
        let Some((_, import)) = self
            .loaded
            .rego
            .iter()
            .find(|(f, i)| *f == cx.file && i.alias == alias)
        else {
            // The import itself failed to load, and was reported.
            return;
        };
        if import.rules.iter().any(|r| r == rule) {
            return;
        }
        let files: Vec<String> = import
            .files
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        let what = if import.is_data {
            "data document"
        } else {
            "Rego package"
        };
        let mut d = Diagnostic::error(
            Code::UnknownRegoRule,
            cx.file,
            span,
            format!(
                "the {what} `{}` ({}) has no rule `{rule}`",
                import.package.as_deref().unwrap_or("data"),
                files.join(", ")
            ),
        )
        .with_label("not defined there");
        d = match did_you_mean(rule, import.rules.iter().map(String::as_str)) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(span, s.to_string()),
            None if import.rules.is_empty() => d.with_help("that file defines no rules"),
            None => d.with_help(format!("it defines {}", import.rules.join(", "))),
        };
        self.diagnostics.push(d);
    }

    fn member(&mut self, cx: &mut Ctx, base: &Type, name: &str, span: Span, whole: Span) -> Type {
        // `source` is short for `source_id` wherever a provenance is in hand.
        let name = match base {
            Type::Object(Table::Provenance, p) if p.is_empty() && name == "source" => "source_id",
            _ => name,
        };
        match base {
            Type::Error => Type::Error,
            Type::Json => Type::Json,
            Type::Arg => match name {
                "value" => Type::Json,
                "provenance" => Type::Object(Table::Provenance, String::new()),
                _ => Type::Json,
            },
            Type::Intent => match name {
                "raw" | "scope_mode" => Type::String,
                "declared" => Type::Bool,
                "parsed" => Type::List(Box::new(Type::Object(Table::Intent, "parsed[]".into()))),
                "permits" => self.error(
                    Diagnostic::error(
                        Code::NotAValue,
                        cx.file,
                        span,
                        "`intent.permits` is a function",
                    )
                    .with_label("call it")
                    .with_help("write `intent.permits(tool)` or `intent.permits(tool, resource: args.path)`"),
                ),
                _ => self.error(
                    Diagnostic::error(
                        Code::UnknownField,
                        cx.file,
                        span,
                        format!("the intent has no `{name}`"),
                    )
                    .with_label("unknown")
                    .with_help("the intent offers `raw`, `parsed`, `scope_mode`, `declared` and `permits(…)`"),
                ),
            },
            Type::Object(Table::Payload(h), prefix) if prefix.is_empty() && name == "args" => {
                // `$.args` and `payload.args`: the same alias as a bare `args`.
                let mut inner = Ctx::new(cx.unit, cx.file, Scope::Rule(h));
                self.root(&mut inner, Table::Payload(h), name, whole)
                    .unwrap_or(Type::Error)
            }
            Type::Object(table, prefix) => {
                let path = join(prefix, name);
                if let Some(f) = fields::lookup(table.fields(), &path) {
                    let t = Type::of_field(*table, f);
                    return self.resolved(
                        cx,
                        whole,
                        Resolution::Field {
                            table: *table,
                            path,
                        },
                        t,
                    );
                }
                if let Some(t) = map_value_type(*table, prefix) {
                    let r = if t == Type::Arg {
                        Resolution::Argument(name.to_string())
                    } else {
                        Resolution::Field {
                            table: *table,
                            path: format!("{prefix}.*"),
                        }
                    };
                    return self.resolved(cx, whole, r, t);
                }
                // Misspelt, or on another hook?
                let children: Vec<&'static str> = fields::children(table.fields(), prefix)
                    .map(|f| super::last_segment(f.path))
                    .collect();
                let mut d = Diagnostic::error(
                    Code::UnknownField,
                    cx.file,
                    span,
                    format!("{} has no field `{path}`", table.describe()),
                )
                .with_label("unknown field");
                if let Some(s) = did_you_mean(name, children.iter().copied()) {
                    d = d
                        .with_help(format!("did you mean `{}`?", join(prefix, s)))
                        .with_fix(span, s.to_string());
                } else if let (Table::Payload(here), Some(other)) = (table, hook_with_field(&path)) {
                    d.code = Code::FieldNotOnHook;
                    d = d.with_help(format!(
                        "`{path}` is a field of {other}, not of {}",
                        here.name
                    ));
                } else if children.is_empty() {
                    d = d.with_help("this object has no typed fields");
                } else {
                    d = d.with_help(format!("its fields are {}", children.join(", ")));
                }
                self.error(d)
            }
            other => self.error(
                Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    span,
                    format!("a {other} has no fields"),
                )
                .with_label(format!("`.{name}` on a {other}"))
                .with_help("only objects have fields"),
            ),
        }
    }

    fn call(
        &mut self,
        cx: &mut Ctx,
        callee: &Expr,
        args: &[crate::syntax::ast::Arg],
        span: Span,
    ) -> Type {
        if let ExprKind::Member(base, m) = &callee.kind {
            if let Some(t) = self.member_call(cx, callee, base, m, args, span) {
                return t;
            }
        }
        let ExprKind::Name(name) = &callee.kind else {
            return self.error(
                Diagnostic::error(Code::NotCallable, cx.file, callee.span, "this cannot be called")
                    .with_label("not a function")
                    .with_help("functions are builtins (turns_since, len, …), `intent.permits` and Rego functions"),
            );
        };
        if !self.is_local(cx, name) {
            match self.lookup(cx.unit, name) {
                Lookup::One(Named::Pred, ns) => {
                    return self.pred_call(cx, ns, name, callee, args, span)
                }
                Lookup::Ambiguous(found) => {
                    let d = self.ambiguous(cx.file, cx.unit, name, callee.span, &found);
                    for a in args {
                        self.expr(cx, &a.value);
                    }
                    return self.error(d);
                }
                _ => {}
            }
        }
        let Some(b) = builtin(name) else {
            return self.unknown_function(cx, name, callee, args);
        };
        let bname = b.name;
        self.resolutions.insert(
            (cx.file, callee.span),
            (Resolution::Builtin(bname), Type::Error),
        );
        if let Some(named) = args.iter().find_map(|a| a.name.as_ref()) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::BadArgument,
                    cx.file,
                    named.span,
                    format!("`{bname}` takes no named arguments"),
                )
                .with_label("named argument")
                .with_help(format!("write `{bname}(…)` with plain arguments")),
            );
        }
        if bname == "effect_state" {
            return self.effect_state_call(cx, span, args);
        }
        if !b.arity.admits(args.len()) {
            return self.error(arity(cx.file, span, bname, &b.arity.describe()));
        }
        self.builtin_call(cx, b, args, span)
    }

    /// A call of a member (`intent.permits(…)`, `module.pred(…)`, `org.rule(…)` of Rego);
    /// `None` when the callee is no such member.
    fn member_call(
        &mut self,
        cx: &mut Ctx,
        callee: &Expr,
        base: &Expr,
        m: &crate::syntax::ast::Ident,
        args: &[crate::syntax::ast::Arg],
        span: Span,
    ) -> Option<Type> {
        if let ExprKind::Name(root) = &base.kind {
            if root == "intent" && m.name == "permits" && !self.is_local(cx, root) {
                let b = spec("intent.permits").expect("intent.permits is a builtin");
                if !b.allowed.admits(cx.scope) {
                    return Some(self.error(misplaced(cx.file, span, b)));
                }
                if !b.arity.admits(args.len()) {
                    return Some(self.error(arity(cx.file, span, b.name, &b.arity.describe())));
                }
                for a in args {
                    if let Some(n) = &a.name {
                        if n.name != "resource" && n.name != "operation" {
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::BadArgument,
                                    cx.file,
                                    n.span,
                                    format!("`intent.permits` has no argument `{}`", n.name),
                                )
                                .with_label("unknown argument")
                                .with_help("use `resource:` or `operation:`"),
                            );
                        }
                    }
                    self.expr(cx, &a.value);
                }
                self.resolutions.insert(
                    (cx.file, callee.span),
                    (Resolution::Builtin("intent.permits"), Type::Bool),
                );
                return Some(Type::Bool);
            }
            // `module.pred(…)`: a predicate of a used module.
            if let Some(Alias::Module(module)) = self.aliases[cx.unit].get(root.as_str()) {
                if !self.is_local(cx, root) {
                    let module = module.clone();
                    return Some(self.qualified_pred_call(cx, &module, callee, m, args, span));
                }
            }
            if let Some(Alias::Rego | Alias::RegoData) = self.aliases[cx.unit].get(root.as_str()) {
                if !self.is_local(cx, root) {
                    self.check_rego_rule(cx, root, &m.name, m.span);
                    let mut inputs = 0;
                    for a in args {
                        if let Some(name) = &a.name {
                            inputs += 1;
                            if name.name != "input" || inputs > 1 {
                                self.error(
                                    Diagnostic::error(
                                        Code::BadArgument,
                                        cx.file,
                                        name.span,
                                        if name.name == "input" {
                                            "`input:` is given twice; a Rego call takes one input".to_string()
                                        } else {
                                            format!(
                                                "a Rego call takes its arguments in order, and one `input:` at most; `{}:` is neither",
                                                name.name
                                            )
                                        },
                                    )
                                    .with_label("not an argument of a Rego call")
                                    .with_help("`org.rule(input: {…})` evaluates the rule with the input you build (docs/rego.md)"),
                                );
                            }
                        }
                        self.expr(cx, &a.value);
                    }
                    self.resolutions.insert(
                        (cx.file, callee.span),
                        (
                            Resolution::Rego {
                                alias: root.clone(),
                                rule: m.name.clone(),
                            },
                            Type::Json,
                        ),
                    );
                    return Some(Type::Json);
                }
            }
        }
        None
    }

    /// A call of a name that is no function: its arguments are still checked.
    fn unknown_function(
        &mut self,
        cx: &mut Ctx,
        name: &str,
        callee: &Expr,
        args: &[crate::syntax::ast::Arg],
    ) -> Type {
        let preds = self.visible(cx.unit, Named::Pred);
        let names = functions().map(|b| b.name).chain(preds.iter().copied());
        let mut d = Diagnostic::error(
            Code::UnknownFunction,
            cx.file,
            callee.span,
            format!("unknown function `{name}`"),
        )
        .with_label("not a function");
        d = match did_you_mean(name, names) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(callee.span, s.to_string()),
            None => d.with_help(
                "see docs/language.md for the builtin functions; define your own with `pred NAME(…) = …`",
            ),
        };
        for a in args {
            self.expr(cx, &a.value);
        }
        self.error(d)
    }

    /// A call of a builtin of the registry, its arity checked: each argument held to its
    /// parameter's type, then where it may be called; the result's type is the entry's.
    fn builtin_call(
        &mut self,
        cx: &mut Ctx,
        b: &'static super::builtins::BuiltinSpec,
        args: &[crate::syntax::ast::Arg],
        span: Span,
    ) -> Type {
        for (a, param) in args.iter().zip(b.params) {
            self.builtin_arg(cx, b.name, *param, &a.value);
        }
        if !b.allowed.admits(cx.scope) {
            return self.error(misplaced(cx.file, span, b));
        }
        b.returns.ty()
    }

    /// One argument of builtin `name`, held to its parameter.
    fn builtin_arg(&mut self, cx: &mut Ctx, name: &str, param: Param, arg: &Expr) {
        let check = |this: &mut Self, cx: &mut Ctx, wanted: &str, ok: fn(&Type) -> bool| {
            let t = this.expr(cx, arg);
            if !ok(&t) {
                this.diagnostics
                    .push(mismatch(cx.file, arg.span, name, wanted, &t));
            }
        };
        match param {
            Param::Any => {
                self.expr(cx, arg);
            }
            Param::Field => {
                if matches!(cx.scope, Scope::Const) {
                    self.diagnostics.push(
                        Diagnostic::warning(
                            Code::ConstantTest,
                            cx.file,
                            arg.span,
                            format!("`{name}` of a constant is always true"),
                        )
                        .with_label("constant")
                        .with_help(format!("`{name}(x)` tests a payload field")),
                    );
                }
                self.expr(cx, arg);
            }
            Param::Text => check(self, cx, "string", Type::is_stringish),
            Param::TextOrList => check(self, cx, "string", |t| {
                t.is_stringish() || matches!(t, Type::List(_))
            }),
            Param::Sized => check(self, cx, "string or collection", |t| {
                t.is_stringish() || matches!(t, Type::List(_) | Type::Set(_) | Type::Object(..))
            }),
            Param::Provenance => {
                self.provenance_arg(cx, arg);
            }
            Param::Origin => self.origin_arg(cx, arg),
            Param::Label => self.label_arg(cx, arg),
            // A label when one of that name is in view, else an origin.
            Param::OriginOrLabel => match &arg.kind {
                ExprKind::Name(n) if self.label_visible(cx.unit, n) => self.label_arg(cx, arg),
                ExprKind::Member(..) => self.label_arg(cx, arg),
                _ => self.origin_arg(cx, arg),
            },
            Param::EffectClass => self.effect_class_arg(cx, arg),
            Param::Effect => {
                self.expr(cx, arg);
            }
        }
    }

    /// `requested(CLASS)`'s argument: a string, and when it is written out, an effect class.
    fn effect_class_arg(&mut self, cx: &mut Ctx, arg: &Expr) {
        let t = self.expr(cx, arg);
        if !t.is_stringish() {
            let d = mismatch(cx.file, arg.span, "requested", "string", &t);
            self.diagnostics.push(d);
        }
        if let ExprKind::String(word) = &arg.kind {
            if crate::actions::class_word(word).is_none() {
                let classes = crate::actions::CLASSES;
                let d = unknown_enum(cx.file, arg.span, word, classes, "effect class");
                self.diagnostics.push(d);
            }
        }
    }

    /// The value a provenance question is asked about: it must carry provenance.
    fn provenance_arg(&mut self, cx: &mut Ctx, arg: &Expr) -> Type {
        let t = self.expr(cx, arg);
        if !t.carries_provenance() {
            self.diagnostics.push(no_provenance(cx.file, arg.span, &t));
        }
        t
    }

    /// An argument that must name a label.
    /// `effect_state(NAME)` or `effect_state()`: only in rules on toolCallRequest, naming a
    /// declared effect.
    fn effect_state_call(
        &mut self,
        cx: &mut Ctx,
        span: Span,
        args: &[crate::syntax::ast::Arg],
    ) -> Type {
        let b = spec("effect_state").expect("effect_state is a builtin");
        if !b.arity.admits(args.len()) {
            return self.error(arity(cx.file, span, b.name, &b.arity.describe()));
        }
        if !b.allowed.admits(cx.scope) {
            return self.error(misplaced(cx.file, span, b));
        }
        let Some(arg) = args.first() else {
            return Type::String;
        };
        let name = match &arg.value.kind {
            ExprKind::Name(n) | ExprKind::String(n) => n.clone(),
            _ => String::new(),
        };
        let names: Vec<String> = self
            .loaded
            .units
            .iter()
            .flat_map(|u| u.module.items.iter())
            .filter_map(|i| match i {
                crate::syntax::ast::Item::Effect(e) => Some(e.name.name.clone()),
                _ => None,
            })
            .collect();
        if !names.contains(&name) {
            let mut d = Diagnostic::error(
                Code::UnknownEffect,
                cx.file,
                arg.value.span,
                format!("no effect is named `{name}`"),
            )
            .with_label("not an effect");
            d = match did_you_mean(&name, names.iter().map(String::as_str)) {
                Some(s) => d
                    .with_help(format!("did you mean `{s}`?"))
                    .with_fix(arg.value.span, s.to_string()),
                None => d.with_help("declare it with `effect NAME for TOOL = key(…)`"),
            };
            return self.error(d);
        }
        Type::String
    }

    fn label_arg(&mut self, cx: &mut Ctx, e: &Expr) {
        if let ExprKind::Name(name) = &e.kind {
            match self.lookup(cx.unit, name) {
                Lookup::One(Named::Label, ns) => {
                    self.resolve_def(cx, Named::Label, ns, name, e.span);
                    return;
                }
                Lookup::Ambiguous(found) if found.iter().any(|(k, _)| *k == Named::Label) => {
                    let d = self.ambiguous(cx.file, cx.unit, name, e.span, &found);
                    self.diagnostics.push(d);
                    return;
                }
                _ => {}
            }
            let names: Vec<&str> = self.visible_labels(cx.unit);
            let mut d = Diagnostic::error(
                Code::UnknownLabel,
                cx.file,
                e.span,
                format!("unknown label `{name}`"),
            )
            .with_label("not a label");
            let elsewhere = self.defined_elsewhere(cx.unit, name);
            d = match did_you_mean(name, names.iter().copied()) {
                _ if elsewhere.is_some() => d.with_help(elsewhere.unwrap_or_default()),
                Some(s) => d
                    .with_help(format!("did you mean `{s}`?"))
                    .with_fix(e.span, s.to_string()),
                None if names.is_empty() => {
                    d.with_help("declare it with `label NAME when …`, or `use std.taint` for `untrusted` and `trusted`")
                }
                None => d.with_help(format!("the labels are {}", sorted(names).join(", "))),
            };
            self.diagnostics.push(d);
            return;
        }
        let t = self.expr(cx, e);
        if t != Type::Label && !t.is_error() {
            self.diagnostics
                .push(mismatch(cx.file, e.span, "this argument", "label", &t));
        }
    }

    /// An argument that must name an ACS origin (`tool_output`, …).
    fn origin_arg(&mut self, cx: &mut Ctx, e: &Expr) {
        let word = match &e.kind {
            ExprKind::Name(n) => n.as_str(),
            ExprKind::String(s) => s.as_str(),
            _ => {
                self.expr(cx, e);
                return;
            }
        };
        if fields::ORIGINS.contains(&word) {
            self.resolutions.insert(
                (cx.file, e.span),
                (
                    Resolution::EnumValue(word.to_string()),
                    Type::Enum(fields::ORIGINS),
                ),
            );
            return;
        }
        self.diagnostics.push(unknown_enum(
            cx.file,
            e.span,
            word,
            fields::ORIGINS,
            "origin",
        ));
    }

    fn binary(&mut self, cx: &mut Ctx, op: BinaryOp, a: &Expr, b: &Expr, span: Span) -> Type {
        // `x == null` would be undefined whatever `x` is: null is absent to Warden.
        if !matches!(op, BinaryOp::And | BinaryOp::Or) {
            for side in [a, b] {
                if matches!(side.kind, ExprKind::Null) {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::NullComparison,
                            cx.file,
                            side.span,
                            format!("`{}` with `null` is never true or false: Warden reads JSON null as absent", op.as_str()),
                        )
                        .with_label("absent")
                        .with_help("to test for a missing or null value, write `not present(…)`; `null` is for values passed to Rego"),
                    );
                }
            }
        }
        match op {
            BinaryOp::And | BinaryOp::Or => {
                let ta = self.expr(cx, a);
                let tb = self.expr(cx, b);
                for (e, t) in [(a, &ta), (b, &tb)] {
                    if !t.is_boolish() {
                        self.diagnostics.push(mismatch(
                            cx.file,
                            e.span,
                            op.as_str(),
                            "true or false",
                            t,
                        ));
                    }
                }
                Type::Bool
            }
            BinaryOp::Has => {
                let ta = self.expr(cx, a);
                if !ta.carries_provenance() {
                    self.diagnostics.push(no_provenance(cx.file, a.span, &ta));
                }
                self.label_arg(cx, b);
                Type::Bool
            }
            BinaryOp::Eq | BinaryOp::Ne => self.equality(cx, a, b, span),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let ta = self.expr(cx, a);
                let tb = self.expr(cx, b);
                let ok = (ta.is_numeric() && tb.is_numeric())
                    || (ta == Type::Duration && tb == Type::Duration)
                    || (ta.is_dynamic() || tb.is_dynamic());
                if !ok {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::TypeMismatch,
                            cx.file,
                            span,
                            format!("`{}` orders numbers, not a {ta} and a {tb}", op.as_str()),
                        )
                        .with_label("not numbers")
                        .with_help("compare numbers (or durations with durations)"),
                    );
                }
                Type::Bool
            }
            BinaryOp::In | BinaryOp::NotIn => self.membership(cx, a, b, span),
            BinaryOp::Matches => self.matches(cx, a, b),
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                let ta = self.expr(cx, a);
                let tb = self.expr(cx, b);
                if op == BinaryOp::Add && ta == Type::String && tb == Type::String {
                    return Type::String;
                }
                if op == BinaryOp::Add && ta == Type::Duration && tb == Type::Duration {
                    return Type::Duration;
                }
                for (e, t) in [(a, &ta), (b, &tb)] {
                    if !t.is_numeric() {
                        self.diagnostics
                            .push(mismatch(cx.file, e.span, op.as_str(), "number", t));
                    }
                }
                Type::Number
            }
        }
    }

    /// `a == b`, `a != b`: comparable types, and a written-out enum value that exists.
    fn equality(&mut self, cx: &mut Ctx, a: &Expr, b: &Expr, span: Span) -> Type {
        // A bare enum word may stand on either side: `success == exit_status`.
        let bare = |this: &Self, e: &Expr| {
            matches!(&e.kind, ExprKind::Name(w) if !this.is_local(cx, w)
                && !this.label_visible(cx.unit, w)
                && !this.is_event_root(cx, w))
        };
        let bare_left = bare(self, a) && !bare(self, b);
        let (ta, tb) = if bare_left {
            let tb = self.expr(cx, b);
            (self.enum_aware(cx, a, &tb), tb)
        } else {
            let ta = self.expr(cx, a);
            let tb = self.enum_aware(cx, b, &ta);
            (ta, tb)
        };
        if let (Type::Enum(values), ExprKind::String(s)) = (&ta, &b.kind) {
            if !values.contains(&s.as_str()) {
                self.diagnostics
                    .push(unknown_enum(cx.file, b.span, s, values, "value"));
            }
        }
        if let (Type::Enum(values), ExprKind::String(s)) = (&tb, &a.kind) {
            if !values.contains(&s.as_str()) {
                self.diagnostics
                    .push(unknown_enum(cx.file, a.span, s, values, "value"));
            }
        }
        if !ta.comparable(&tb) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    span,
                    format!("cannot compare a {ta} with a {tb}"),
                )
                .with_label("these are never equal")
                .with_help("compare values of the same type"),
            );
        }
        Type::Bool
    }

    /// `a in b`, `a not in b`: a collection on the right, of `a`'s type.
    fn membership(&mut self, cx: &mut Ctx, a: &Expr, b: &Expr, span: Span) -> Type {
        let ta = self.expr(cx, a);
        let tb = match &b.kind {
            ExprKind::Set(items) | ExprKind::List(items) if matches!(ta, Type::Enum(_)) => {
                for item in items {
                    self.enum_aware(cx, item, &ta);
                    if let (Type::Enum(values), ExprKind::String(s)) = (&ta, &item.kind) {
                        if !values.contains(&s.as_str()) {
                            self.diagnostics
                                .push(unknown_enum(cx.file, item.span, s, values, "value"));
                        }
                    }
                }
                Type::Set(Box::new(ta.clone()))
            }
            _ => self.expr(cx, b),
        };
        match tb.element() {
            Some(elem) if elem.comparable(&ta) => {}
            Some(elem) => self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    span,
                    format!("a {ta} is never in a collection of {elem}"),
                )
                .with_label("element types differ")
                .with_help("compare with a collection of the same type"),
            ),
            None => {
                let mut d = Diagnostic::error(
                    Code::TypeMismatch,
                    cx.file,
                    b.span,
                    format!("`in` needs a collection on its right, not a {tb}"),
                )
                .with_label("not a collection");
                d = if tb == Type::String {
                    d.with_help("for text inside a string, write `contains(text, part)`")
                } else {
                    d.with_help("write a set `{…}`, a list `[…]`, or a constant holding one")
                };
                self.diagnostics.push(d);
            }
        }
        Type::Bool
    }

    /// `a matches PATTERN`: strings, and a pattern known when the policy loads.
    fn matches(&mut self, cx: &mut Ctx, a: &Expr, b: &Expr) -> Type {
        let ta = self.expr(cx, a);
        let tb = self.expr(cx, b);
        for (e, t) in [(a, &ta), (b, &tb)] {
            if !t.is_stringish() {
                self.diagnostics
                    .push(mismatch(cx.file, e.span, "`matches`", "string", t));
            }
        }
        // The pattern is compiled when the policy loads, so it must be known then.
        match &b.kind {
            ExprKind::String(p) => {
                if let Err(e) = regex::Regex::new(p) {
                    self.diagnostics
                        .push(bad_regex(cx.file, b.span, &e));
                }
            }
            ExprKind::Name(_) | ExprKind::Member(..)
                if matches!(
                    self.resolutions.get(&(cx.file, b.span)),
                    Some((Resolution::Constant { .. }, _))
                ) => {}
            _ if tb.is_error() => {}
            _ => self.diagnostics.push(
                Diagnostic::error(
                    Code::DynamicRegex,
                    cx.file,
                    b.span,
                    "the pattern of `matches` must be a constant string",
                )
                .with_label("computed at run time")
                .with_help("write the regular expression as a string literal or a `let` constant; to compare with a value from the event, use ==, starts_with or contains"),
            ),
        }
        Type::Bool
    }

    /// Types `e`, treating a bare unknown word as a value of `other`'s enum (`== tool_output`).
    fn enum_aware(&mut self, cx: &mut Ctx, e: &Expr, other: &Type) -> Type {
        // The other side is already reported; a bare word here may be one of its enum values.
        if let (ExprKind::Name(word), Type::Error) = (&e.kind, other) {
            if !self.is_local(cx, word)
                && !self.label_visible(cx.unit, word)
                && !self.is_event_root(cx, word)
            {
                return Type::Error;
            }
        }
        if let (ExprKind::Name(word), Type::Enum(values)) = (&e.kind, other) {
            let shadowed = self.is_local(cx, word) || self.label_visible(cx.unit, word);
            if !shadowed {
                if values.contains(&word.as_str()) {
                    return self.resolved(
                        cx,
                        e.span,
                        Resolution::EnumValue(word.clone()),
                        other.clone(),
                    );
                }
                if !self.is_event_root(cx, word) {
                    return self.error(unknown_enum(cx.file, e.span, word, values, "value"));
                }
            }
        }
        self.expr(cx, e)
    }

    fn history(&mut self, cx: &mut Ctx, h: &History, span: Span) -> Type {
        if cx.in_history {
            return self.error(
                Diagnostic::error(
                    Code::NestedHistory,
                    cx.file,
                    span,
                    "history expressions cannot be nested",
                )
                .with_label("inside another count/exists")
                .with_help("each count/exists is kept as one O(1) counter; a nested one would need the whole history"),
            );
        }
        let current = match cx.scope {
            Scope::Rule(h) => Some(h),
            _ => {
                return self.error(
                    Diagnostic::error(
                        Code::Misplaced,
                        cx.file,
                        span,
                        "history (`count`, `exists`) is only available in rule conditions",
                    )
                    .with_label("not here")
                    .with_help("move this into a rule's `when`"),
                )
            }
        };
        let Some(past) = self.resolve_hook(cx.file, &h.hook) else {
            return Type::Error;
        };
        if let Some(w) = &h.window {
            if let WindowKind::LastTurns(n) = w.kind {
                if n == 0 || n > MAX_WINDOW_TURNS {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::BadWindow,
                            cx.file,
                            w.span,
                            format!("a window spans 1 to {MAX_WINDOW_TURNS} turns, not {n}"),
                        )
                        .with_label("out of range")
                        .with_help("use `session` for the whole session"),
                    );
                }
            }
        }
        let mut hcx = Ctx::new(cx.unit, cx.file, Scope::History { past, current });
        hcx.in_history = true;
        if let Some(filter) = &h.filter {
            let t = self.expr(&mut hcx, filter);
            if !t.is_boolish() {
                self.diagnostics.push(mismatch(
                    cx.file,
                    filter.span,
                    "a history filter",
                    "true or false",
                    &t,
                ));
            }
            // `$` may appear only as one side of a top-level `past == $.field` conjunct.
            let plan = super::plan::HistoryPlan::of(filter);
            let allowed = plan.key_roots(filter);
            self.history_plans.insert((cx.file, filter.span), plan);
            for bad in hcx.bad_current.iter().filter(|s| !allowed.contains(s)) {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::HistoryJoin,
                        cx.file,
                        *bad,
                        "this history filter depends on the current event in a way that cannot be kept in O(1)",
                    )
                    .with_label("`$` used outside a key equality")
                    .with_help(
                        "a filter may compare a past field with the current event only as a top-level `FIELD == $.FIELD` (a key); anything else would need to rescan the whole history on every decision. Move the condition out of the filter, or use `by FIELD`",
                    ),
                );
            }
        }
        if let Some(key) = &h.by {
            let t = self.expr(&mut hcx, key);
            if !(t.is_stringish() || t.is_numeric() || t == Type::Bool) {
                self.diagnostics.push(mismatch(
                    cx.file,
                    key.span,
                    "a `by` key",
                    "string or number",
                    &t,
                ));
            }
            // The same path must exist on the current event, to read the key now.
            let mut ccx = Ctx::new(cx.unit, cx.file, Scope::Rule(current.expect("rule scope")));
            let before = self.diagnostics.len();
            self.expr(&mut ccx, key);
            if self.diagnostics.len() > before {
                self.diagnostics.truncate(before);
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::HistoryJoin,
                        cx.file,
                        key.span,
                        format!(
                            "`by` reads this key from the current {} too, but it has no such field",
                            current.map_or("event", |c| c.name)
                        ),
                    )
                    .with_label("not on the current hook")
                    .with_help("for keys named differently on the two hooks, write `FIELD == $.OTHER` in the filter"),
                );
            }
        }
        match h.kind {
            HistoryKind::Count => Type::Number,
            HistoryKind::Exists => Type::Bool,
        }
    }
}

/// The type of a map's values, if the object at `prefix` is a map; tool arguments (a value
/// with its provenance) become `Type::Arg`.
fn map_value_type(table: Table, prefix: &str) -> Option<Type> {
    let field = fields::lookup(table.fields(), prefix)?;
    if field.ty != fields::Ty::Map {
        return None;
    }
    let star = format!("{prefix}.*");
    let value = format!("{star}.value");
    let prov = format!("{star}.provenance");
    if fields::lookup(table.fields(), &value).is_some()
        && fields::lookup(table.fields(), &prov).is_some()
    {
        return Some(Type::Arg);
    }
    Some(match field.items {
        Some(fields::Ty::Object) => Type::Object(table, star),
        Some(fields::Ty::Provenance) => Type::Object(Table::Provenance, String::new()),
        Some(fields::Ty::String) => Type::String,
        Some(fields::Ty::Number | fields::Ty::Integer) => Type::Number,
        Some(fields::Ty::Bool) => Type::Bool,
        Some(fields::Ty::Enum(v)) => Type::Enum(v),
        _ => Type::Json,
    })
}

fn hook_with_field(path: &str) -> Option<&'static str> {
    fields::HOOKS
        .iter()
        .find(|h| fields::lookup(h.fields, path).is_some())
        .map(|h| h.name)
}

fn sorted(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v
}

/// A provenance builtin outside a rule condition: the session's graph is read by rules.
fn misplaced(file: FileId, span: Span, b: &super::builtins::BuiltinSpec) -> Diagnostic {
    let (place, help) = match b.allowed {
        Allowed::Rules => (
            "in rule conditions",
            "it reads the session (its provenance graph, history or intent): move it into a rule's `when`",
        ),
        Allowed::ToolCallRules => (
            "in rules on toolCallRequest",
            "it reads the tool call being decided: write it in a rule `on toolCallRequest`",
        ),
        Allowed::Events | Allowed::Anywhere => (
            "where an event is in view",
            "a constant has no event: use it in a label condition, a rule or a history filter",
        ),
    };
    Diagnostic::error(
        Code::Misplaced,
        file,
        span,
        format!("`{}` is only available {place}", b.name),
    )
    .with_label("not here")
    .with_help(help)
}

fn mismatch(file: FileId, span: Span, what: &str, wanted: &str, got: &Type) -> Diagnostic {
    Diagnostic::error(
        Code::TypeMismatch,
        file,
        span,
        format!("{what} needs a {wanted}, but this is a {got}"),
    )
    .with_label(format!("this is a {got}"))
    .with_help(format!("give {what} a {wanted}"))
}

fn arity(file: FileId, span: Span, name: &str, n: &str) -> Diagnostic {
    Diagnostic::error(
        Code::Arity,
        file,
        span,
        format!("`{name}` takes {n} argument(s)"),
    )
    .with_label("wrong number of arguments")
    // `intent.permits` is no `NAME(…)` function: its help stays the docs.
    .with_help(match builtin(name) {
        Some(b) => format!("`{name}`: {}", b.doc),
        None => "see docs/language.md".into(),
    })
}

fn no_provenance(file: FileId, span: Span, t: &Type) -> Diagnostic {
    Diagnostic::error(
        Code::NoProvenance,
        file,
        span,
        format!("a {t} carries no provenance"),
    )
    .with_label("no labels here")
    .with_help(
        "labels live on content: tool arguments (`args.x`), outputs, message content, summaries",
    )
}

fn unknown_enum(file: FileId, span: Span, word: &str, values: &[&str], what: &str) -> Diagnostic {
    let mut d = Diagnostic::error(
        Code::UnknownEnum,
        file,
        span,
        format!("`{word}` is not a possible {what} here"),
    )
    .with_label("never matches");
    d = match did_you_mean(word, values.iter().copied()) {
        Some(s) => d
            .with_help(format!("did you mean `{s}`?"))
            .with_fix(span, s.to_string()),
        None => d.with_help(format!("the possible values are {}", values.join(", "))),
    };
    d
}

/// An invalid `matches` pattern, reported on the pattern.
pub(crate) fn bad_regex(file: FileId, span: Span, e: &regex::Error) -> Diagnostic {
    Diagnostic::error(
        Code::BadRegex,
        file,
        span,
        format!("invalid regular expression: {}", first_line(&e.to_string())),
    )
    .with_label("not a valid pattern")
    .with_help("`matches` takes a regular expression (Rust regex syntax, unanchored: add ^ and $ to match the whole text); for a glob, write glob(text, pattern)")
}

/// The last non-empty line of a multi-line error (regex errors draw the pattern above it).
fn first_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}
