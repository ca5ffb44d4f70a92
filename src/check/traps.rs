//! Mistakes that read well and mean something else: a quantifier whose body swallows the rest
//! of the condition (`check::quantifier_scope`), a name that hides a payload field, an enum
//! value or a builtin (`check::shadows`), and more labels than the run time can hold
//! (`check::too_many_labels`).

use super::builtins::builtin;
use super::Checker;
use crate::acs::fields::{self, Field, Ty};
use crate::diagnostics::{Code, Diagnostic, FileId, Span};
use crate::syntax::ast::{
    BinaryOp, Expr, ExprKind, Ident, Item, Modification, Module, QuantifierKind, Step, StepKind,
};
use crate::syntax::trivia;

/// Labels are a 64-bit set at run time.
pub const MAX_LABELS: usize = 64;

/// Every expression written in a module, outermost first.
pub(crate) fn module_exprs(m: &Module) -> Vec<&Expr> {
    let mut out = Vec::new();
    for item in &m.items {
        match item {
            Item::Let(l) => out.push(&l.value),
            Item::Pred(p) => out.push(&p.body),
            Item::Label(l) => out.extend(l.when.as_ref()),
            Item::Rule(r) => {
                out.extend(r.when.as_ref());
                decision_exprs(&r.decision.modifications, &mut out);
            }
            Item::Default(d) => decision_exprs(&d.decision.modifications, &mut out),
            Item::Effect(e) => out.extend(e.key.iter()),
            Item::Test(t) => step_exprs(&t.steps, &mut out),
            Item::Package(_) | Item::Use(_) | Item::Mask(_) | Item::Tool(_) => {}
        }
    }
    out
}

fn decision_exprs<'e>(mods: &'e [Modification], out: &mut Vec<&'e Expr>) {
    for m in mods {
        match m {
            Modification::Set { value, .. } => out.push(value),
            Modification::Replace { content, .. } => out.push(content),
            Modification::Redact { replacement, .. } => out.extend(replacement.iter()),
            Modification::RedactEach {
                select,
                replacement,
                ..
            } => {
                out.push(select);
                out.extend(replacement.iter());
            }
        }
    }
}

fn step_exprs<'e>(steps: &'e [Step], out: &mut Vec<&'e Expr>) {
    for s in steps {
        match &s.kind {
            StepKind::With { target, value } => {
                out.push(target);
                out.push(value);
            }
            StepKind::Session { permits, .. } => out.extend(permits.as_ref()),
            StepKind::Call { args, output, .. } => {
                out.extend(args.iter().map(|a| &a.value));
                out.extend(output.as_ref().map(|o| &o.value));
            }
            StepKind::Result { output, .. } | StepKind::Retrieve { output, .. } => {
                out.push(&output.value)
            }
            StepKind::Memory { output, .. } => out.extend(output.as_ref().map(|o| &o.value)),
            StepKind::Subagent { steps, .. } => step_exprs(steps, out),
            StepKind::Send { payload, .. } => out.push(payload),
            _ => {}
        }
    }
}

/// Calls `f` on `e` and every expression inside it.
pub(crate) fn walk<'e>(e: &'e Expr, f: &mut impl FnMut(&'e Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Member(base, _) => walk(base, f),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
            walk(a, f);
            walk(b, f);
        }
        ExprKind::Call(callee, args) => {
            walk(callee, f);
            for a in args {
                walk(&a.value, f);
            }
        }
        ExprKind::Unary(_, x) => walk(x, f),
        ExprKind::Set(items) | ExprKind::List(items) => {
            for i in items {
                walk(i, f);
            }
        }
        ExprKind::Object(entries) => {
            for (_, v) in entries {
                walk(v, f);
            }
        }
        ExprKind::Quantifier { over, body, .. } => {
            walk(over, f);
            walk(body, f);
        }
        ExprKind::History(h) => {
            for x in h.filter.iter().chain(h.by.iter()) {
                walk(x, f);
            }
        }
        ExprKind::Bool(_)
        | ExprKind::Null
        | ExprKind::Number(_)
        | ExprKind::String(_)
        | ExprKind::Duration(_)
        | ExprKind::Name(_)
        | ExprKind::Current => {}
    }
}

/// Whether a pair of parentheses in the source encloses exactly the expression at `span`, with
/// only whitespace, comments and the brackets of its own first or last operand (`((a) or b)`,
/// whose span starts inside `(a)`) between them and it.
pub(crate) fn parenthesised(text: &str, comments: &[Span], span: Span) -> bool {
    let bytes = text.as_bytes();
    let in_comment = |at: usize| comments.iter().find(|c| c.range().contains(&at)).copied();
    // `(`s just before the span, nearest first.
    let mut opens = Vec::new();
    let mut p = span.start as usize;
    while p > 0 {
        if let Some(c) = in_comment(p - 1) {
            p = c.start as usize;
            continue;
        }
        match bytes[p - 1] {
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'(' => opens.push(p - 1),
            _ => break,
        }
        p -= 1;
    }
    // How far the run of whitespace, comments and `)`s after the span goes.
    let mut q = span.end as usize;
    while q < bytes.len() {
        if let Some(c) = in_comment(q) {
            q = c.end as usize;
            continue;
        }
        match bytes[q] {
            b' ' | b'\t' | b'\r' | b'\n' | b')' => q += 1,
            _ => break,
        }
    }
    let after = span.end as usize..q;
    opens
        .into_iter()
        .any(|open| matching_close(bytes, &in_comment, open).is_some_and(|c| after.contains(&c)))
}

/// The `)` that closes the `(` at `open` (strings and comments skipped).
fn matching_close(
    bytes: &[u8],
    in_comment: &impl Fn(usize) -> Option<Span>,
    open: usize,
) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        if let Some(c) = in_comment(i) {
            i = c.end as usize;
            continue;
        }
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// What a name written as a `let`, `label`, `pred`, parameter or quantifier variable would
/// hide, if anything.
pub fn shadowed(name: &str) -> Option<String> {
    if ["args", "metadata", "payload", "intent"].contains(&name) {
        return Some(format!("the event root `{name}`"));
    }
    let hooks: Vec<&str> = fields::HOOKS
        .iter()
        .filter(|h| fields::lookup(h.fields, name).is_some())
        .map(|h| h.name)
        .collect();
    if !hooks.is_empty() {
        let shown = if hooks.len() > 3 {
            format!("{}, …", hooks[..3].join(", "))
        } else {
            hooks.join(", ")
        };
        return Some(format!("the payload field `{name}` ({shown})"));
    }
    if fields::lookup(fields::PROVENANCE, name).is_some() || name == "source" {
        return Some(format!("the provenance field `{name}` of label conditions"));
    }
    if let Some(field) = enum_field(name) {
        return Some(format!("the enum value `{name}` (of `{field}`)"));
    }
    if builtin(name).is_some() || name == "count" || name == "exists" {
        return Some(format!("the builtin function `{name}`"));
    }
    None
}

/// A field whose enum has `word` among its values.
fn enum_field(word: &str) -> Option<String> {
    if fields::ORIGINS.contains(&word) {
        return Some("origin".into());
    }
    let tables: Vec<&'static [Field]> = fields::HOOKS
        .iter()
        .map(|h| h.fields)
        .chain([fields::METADATA, fields::PROVENANCE, fields::INTENT])
        .collect();
    for table in tables {
        for f in table {
            let values = match (f.ty, f.items) {
                (Ty::Enum(v), _) | (_, Some(Ty::Enum(v))) => v,
                _ => continue,
            };
            if values.contains(&word) {
                return Some(f.path.to_string());
            }
        }
    }
    None
}

impl Checker<'_> {
    pub(crate) fn check_traps(&mut self) {
        let loaded = self.loaded;
        let mut labels = 0usize;
        for unit in &loaded.units {
            let file = unit.file;
            let text = &loaded.sources.get(file).text;
            let comments: Vec<Span> = trivia::scan(text, usize::MAX)
                .comments
                .into_iter()
                .map(|c| c.span)
                .collect();
            for item in &unit.module.items {
                match item {
                    Item::Let(l) => self.check_shadow(file, &l.name, "constant"),
                    Item::Label(l) => {
                        self.check_shadow(file, &l.name, "label");
                        labels += 1;
                        if labels == MAX_LABELS + 1 {
                            self.too_many_labels(file, &l.name);
                        }
                    }
                    Item::Pred(p) => {
                        self.check_shadow(file, &p.name, "predicate");
                        for param in &p.params {
                            self.check_shadow(file, &param.name, "parameter");
                        }
                    }
                    _ => {}
                }
            }
            for root in module_exprs(&unit.module) {
                let mut found: Vec<&Expr> = Vec::new();
                walk(root, &mut |e| {
                    if matches!(e.kind, ExprKind::Quantifier { .. }) {
                        found.push(e);
                    }
                });
                for q in found {
                    let ExprKind::Quantifier {
                        kind,
                        key,
                        var,
                        over,
                        body,
                    } = &q.kind
                    else {
                        continue;
                    };
                    if let Some(k) = key {
                        self.check_shadow(file, k, "quantifier variable");
                    }
                    self.check_shadow(file, var, "quantifier variable");
                    // A `redact each`'s condition ends at `with` or the next change: no scope
                    // to misread.
                    if *kind == QuantifierKind::Each {
                        continue;
                    }
                    let op = match body.kind {
                        ExprKind::Binary(op @ (BinaryOp::Or | BinaryOp::And), ..) => op,
                        _ => continue,
                    };
                    if parenthesised(text, &comments, q.span)
                        || parenthesised(text, &comments, body.span)
                    {
                        continue;
                    }
                    let word = match kind {
                        QuantifierKind::Any => "any",
                        QuantifierKind::All | QuantifierKind::Each => "all",
                    };
                    let over_text = text.get(over.span.range()).unwrap_or("…");
                    let vars = match key {
                        Some(k) => format!("{}, {}", k.name, var.name),
                        None => var.name.clone(),
                    };
                    let head = format!("{word} {vars} in {over_text}:");
                    let body_text = text.get(body.span.range()).unwrap_or("…");
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::QuantifierScope,
                            file,
                            body.span,
                            format!(
                                "the body of `{head}` runs to the end of the condition and takes in this `{}`",
                                op.as_str()
                            ),
                        )
                        .with_label(format!("all of this is the body of `{head}`"))
                        .with_help(format!(
                            "say which you mean: `({head} A) {op} B` ends the quantifier before `{op}`; `{head} (A {op} B)` keeps it in the body",
                            op = op.as_str()
                        ))
                        .with_fix(body.span, format!("({body_text})")),
                    );
                }
            }
        }
    }

    fn check_shadow(&mut self, file: FileId, name: &Ident, what: &str) {
        let Some(hidden) = shadowed(&name.name) else {
            return;
        };
        self.diagnostics.push(
            Diagnostic::error(
                Code::Shadows,
                file,
                name.span,
                format!("the {what} `{}` would shadow {hidden}", name.name),
            )
            .with_label("hides a name every rule can read")
            .with_help(format!(
                "rename it (e.g. `{}_value` or `my_{}`): a bare `{}` would silently mean this {what} instead",
                name.name, name.name, name.name
            )),
        );
    }

    fn too_many_labels(&mut self, file: FileId, name: &Ident) {
        self.diagnostics.push(
            Diagnostic::error(
                Code::TooManyLabels,
                file,
                name.span,
                format!(
                    "a policy has at most {MAX_LABELS} labels, and `{}` is label {}",
                    name.name,
                    MAX_LABELS + 1
                ),
            )
            .with_label("one label too many")
            .with_help("labels are a 64-bit set at run time (counting those of every module the policy uses): merge labels, or drop a `use` whose labels you do not need"),
        );
    }
}
