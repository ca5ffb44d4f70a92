//! Expressions: minimal parentheses, and line breaking when a line would pass [`WIDTH`].
//!
//! Binding strengths, loosest first (the grammar's `or_expr` … `postfix`):
//! `or` 1, `and` 2, `not` 3, comparisons 4 (not associative), `+ -` 5, `* / %` 6,
//! unary minus 7, postfix and primaries 8. An operand is parenthesised when it binds looser
//! than its place requires. Quantifiers (`any x in xs: body`) are primaries whose body runs as
//! far right as it can, so they are also parenthesised when anything could follow them, and a
//! body that is an `and`/`or` chain is parenthesised too (`check::quantifier_scope`).

use super::out::{self, width, WIDTH};
use super::{Blanks, Printer};
use crate::diagnostics::Span;
use crate::syntax::ast::*;

pub(super) const P_NOT: u8 = 3;
const P_CMP_OPERAND: u8 = 5;
const P_NEG: u8 = 7;
pub(super) const P_POSTFIX: u8 = 8;

/// How tightly an expression binds, as printed without parentheses.
fn prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, ..) => op.precedence(),
        ExprKind::Unary(UnaryOp::Not, _) => P_NOT,
        ExprKind::Unary(UnaryOp::Neg, _) => P_NEG,
        ExprKind::Number(n) if n.is_sign_negative() => P_NEG,
        _ => P_POSTFIX,
    }
}

/// The binding strength each operand of `op` must have.
fn operand_precs(op: BinaryOp) -> (u8, u8) {
    let p = op.precedence();
    match op {
        BinaryOp::Or | BinaryOp::And => (p, p + 1),
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => (p, p + 1),
        _ => (P_CMP_OPERAND, P_CMP_OPERAND),
    }
}

/// Whether `e` needs parentheses where binding strength `min` is required; `tail` says that
/// nothing can follow the expression there.
fn needs_parens(e: &Expr, min: u8, tail: bool) -> bool {
    prec(e) < min || (matches!(e.kind, ExprKind::Quantifier { .. }) && !tail)
}

/// `and`/`or` chains: broken one operand per line, and bracketed when nested and broken.
pub(super) fn is_chain(e: &Expr) -> Option<BinaryOp> {
    match e.kind {
        ExprKind::Binary(op @ (BinaryOp::And | BinaryOp::Or), ..) => Some(op),
        _ => None,
    }
}

/// Operators that break like a chain (all but the comparisons, which break inside their
/// operands instead).
fn is_chain_op(op: BinaryOp) -> bool {
    !matches!(operand_precs(op), (P_CMP_OPERAND, P_CMP_OPERAND))
}

/// The operands of a left-nested run of operators of one precedence: `a + b - c` gives
/// `[(None, a), (Some(+), b), (Some(-), c)]`.
fn chain_operands(e: &Expr, p: u8) -> Vec<(Option<(BinaryOp, &Expr)>, &Expr)> {
    let mut rights = Vec::new();
    let mut cur = e;
    while let ExprKind::Binary(o, l, r) = &cur.kind {
        if o.precedence() != p {
            break;
        }
        rights.push((Some((*o, &**l)), &**r));
        cur = l;
    }
    rights.push((None, cur));
    rights.reverse();
    rights
}

fn quantifier_word(kind: QuantifierKind) -> &'static str {
    match kind {
        QuantifierKind::Any => "any",
        QuantifierKind::All => "all",
        QuantifierKind::Each => "each",
    }
}

fn history_word(kind: HistoryKind) -> &'static str {
    match kind {
        HistoryKind::Count => "count",
        HistoryKind::Exists => "exists",
    }
}

pub(super) fn window(w: &Window) -> String {
    match &w.kind {
        WindowKind::ThisTurn => "this turn".into(),
        WindowKind::LastTurns(1) => "last 1 turn".into(),
        WindowKind::LastTurns(n) => format!("last {n} turns"),
        WindowKind::LastTime(d) => format!("last {}", out::duration(d)),
        WindowKind::Session => "session".into(),
    }
}

/// An object key: bare when it is an identifier, quoted otherwise.
pub(super) fn key(k: &StringLit) -> String {
    if out::is_bare_ident(&k.value) {
        k.value.clone()
    } else {
        out::quote(&k.value)
    }
}

/// `count(x)` written as a call would read back as a history expression.
fn callee_needs_parens(callee: &Expr) -> bool {
    matches!(&callee.kind, ExprKind::Name(n) if n == "count" || n == "exists")
}

/// One element of a bracketed, comma-separated sequence.
pub(super) enum El<'e> {
    Expr(&'e Expr),
    Arg(&'e Arg),
    Entry(&'e StringLit, &'e Expr),
    CallArg(&'e CallArg),
    Mod(&'e Modification),
}

impl El<'_> {
    fn start(&self) -> u32 {
        match self {
            El::Expr(e) => e.span.start,
            El::Arg(a) => a.name.as_ref().map_or(a.value.span.start, |n| n.span.start),
            El::Entry(k, _) => k.span.start,
            El::CallArg(a) => a.name.span.start,
            El::Mod(m) => m.span().start,
        }
    }
}

/// Flat rendering: the whole expression on one line.
pub(super) fn flat(src: &str, e: &Expr, min: u8, tail: bool) -> String {
    let mut s = String::new();
    flat_into(src, e, min, tail, &mut s);
    s
}

fn flat_into(src: &str, e: &Expr, min: u8, tail: bool, s: &mut String) {
    if needs_parens(e, min, tail) {
        s.push('(');
        flat_into(src, e, 0, true, s);
        s.push(')');
        return;
    }
    if let Some(lit) = out::literal(&e.kind) {
        s.push_str(&lit);
        return;
    }
    match &e.kind {
        ExprKind::Member(base, field) => {
            flat_into(src, base, P_POSTFIX, false, s);
            s.push('.');
            s.push_str(&field.name);
        }
        ExprKind::Index(base, index) => {
            flat_into(src, base, P_POSTFIX, false, s);
            s.push('[');
            flat_into(src, index, 0, true, s);
            s.push(']');
        }
        ExprKind::Call(callee, args) => {
            if callee_needs_parens(callee) {
                s.push('(');
                flat_into(src, callee, 0, true, s);
                s.push(')');
            } else {
                flat_into(src, callee, P_POSTFIX, false, s);
            }
            s.push('(');
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                flat_arg(src, a, s);
            }
            s.push(')');
        }
        ExprKind::Unary(UnaryOp::Not, x) => {
            s.push_str("not ");
            flat_into(src, x, P_NOT, tail, s);
        }
        ExprKind::Unary(UnaryOp::Neg, x) => {
            s.push('-');
            flat_into(src, x, P_NEG, tail, s);
        }
        ExprKind::Binary(op, l, r) => {
            let (lp, rp) = operand_precs(*op);
            flat_into(src, l, lp, false, s);
            s.push(' ');
            s.push_str(op_text(src, *op, l, r));
            s.push(' ');
            flat_into(src, r, rp, tail, s);
        }
        ExprKind::Set(items) | ExprKind::List(items) => {
            let (open, close) = if matches!(e.kind, ExprKind::Set(_)) {
                ('{', '}')
            } else {
                ('[', ']')
            };
            s.push(open);
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                flat_into(src, x, 0, true, s);
            }
            s.push(close);
        }
        ExprKind::Object(entries) => {
            if entries.is_empty() {
                s.push_str("{:}");
                return;
            }
            s.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                s.push_str(&key(k));
                s.push_str(": ");
                flat_into(src, v, 0, true, s);
            }
            s.push('}');
        }
        ExprKind::Quantifier {
            kind,
            key,
            var,
            over,
            body,
        } => {
            s.push_str(quantifier_word(*kind));
            s.push(' ');
            if let Some(k) = key {
                s.push_str(&k.name);
                s.push_str(", ");
            }
            s.push_str(&var.name);
            s.push_str(" in ");
            flat_into(src, over, P_CMP_OPERAND, false, s);
            s.push_str(": ");
            flat_into(src, body, P_NOT, tail, s);
        }
        ExprKind::History(h) => {
            s.push_str(history_word(h.kind));
            s.push('(');
            s.push_str(&h.hook.name);
            if let Some(f) = &h.filter {
                s.push_str(" when ");
                flat_into(src, f, 0, true, s);
            }
            if let Some(w) = &h.window {
                s.push_str(", ");
                s.push_str(&window(w));
            }
            if let Some(by) = &h.by {
                s.push_str(", by ");
                flat_into(src, by, 0, true, s);
            }
            s.push(')');
        }
        // Literals were handled above.
        _ => {}
    }
}

fn flat_arg(src: &str, a: &Arg, s: &mut String) {
    if let Some(n) = &a.name {
        s.push_str(&n.name);
        s.push_str(": ");
    }
    flat_into(src, &a.value, 0, true, s);
}

pub(super) fn flat_modification(src: &str, m: &Modification) -> String {
    match m {
        Modification::Redact {
            place, replacement, ..
        } => {
            let mut s = format!("redact {}", place_text(place));
            if let Some(r) = replacement {
                s.push_str(" with ");
                s.push_str(&flat(src, r, 0, true));
            }
            s
        }
        Modification::RedactEach {
            collection,
            select,
            replacement,
            ..
        } => {
            let mut s = String::from("redact each ");
            if let ExprKind::Quantifier { key, var, body, .. } = &select.kind {
                if let Some(k) = key {
                    s.push_str(&format!("{}, ", k.name));
                }
                s.push_str(&format!("{} in {}", var.name, place_text(collection)));
                if !matches!(body.kind, ExprKind::Bool(true)) {
                    s.push_str(" when ");
                    s.push_str(&flat(src, body, 0, true));
                }
            }
            if let Some(r) = replacement {
                s.push_str(" with ");
                s.push_str(&flat(src, r, 0, true));
            }
            s
        }
        Modification::Set { place, value, .. } => {
            format!("set {} = {}", place_text(place), flat(src, value, 0, true))
        }
        Modification::Replace { content, .. } => {
            format!("replace with {}", flat(src, content, 0, true))
        }
    }
}

pub(super) fn place_text(p: &Place) -> String {
    let mut s = String::new();
    for (i, seg) in p.segments.iter().enumerate() {
        match seg {
            PlaceSegment::Field(f) => {
                if i > 0 {
                    s.push('.');
                }
                s.push_str(&f.name);
            }
            PlaceSegment::Index(n, _) => s.push_str(&format!("[{n}]")),
        }
    }
    s
}

pub(super) fn flat_call_arg(src: &str, a: &CallArg) -> String {
    let mut s = format!("{}: {}", a.name.name, flat_arg_value(src, a));
    if !a.from.is_empty() {
        s.push(' ');
        s.push_str(&super::items::sources(&a.from));
    }
    s
}

/// A call argument's value; a list whose elements have sources keeps them (`["a" from user]`).
fn flat_arg_value(src: &str, a: &CallArg) -> String {
    match &a.value.kind {
        ExprKind::List(items) if !a.element_from.is_empty() => {
            let parts: Vec<String> = items
                .iter()
                .zip(&a.element_from)
                .map(|(e, from)| {
                    let mut s = flat(src, e, 0, true);
                    if !from.is_empty() {
                        s.push(' ');
                        s.push_str(&super::items::sources(from));
                    }
                    s
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
        _ => flat(src, &a.value, 0, true),
    }
}

fn flat_el(src: &str, el: &El) -> String {
    match el {
        El::Expr(e) => flat(src, e, 0, true),
        El::Arg(a) => {
            let mut s = String::new();
            flat_arg(src, a, &mut s);
            s
        }
        El::Entry(k, v) => format!("{}: {}", key(k), flat(src, v, 0, true)),
        El::CallArg(a) => flat_call_arg(src, a),
        El::Mod(m) => flat_modification(src, m),
    }
}

/// The operator of a binary expression as it is printed.
pub(super) fn op_text<'s>(_src: &'s str, op: BinaryOp, _l: &Expr, _r: &Expr) -> &'s str {
    op.as_str()
}

impl Printer<'_> {
    /// Whether `text` fits on the current line with `reserve` more columns after it.
    pub(super) fn fits(&self, text: &str, reserve: usize) -> bool {
        !text.contains('\n') && self.out.col() + width(text) + reserve <= WIDTH
    }

    /// Prints `e` where binding strength `min` is required, breaking lines if it does not fit.
    /// `indent` is the indentation of the current line (broken brackets indent from it);
    /// `reserve` is how many columns follow the expression on its last line.
    pub(super) fn expr(&mut self, e: &Expr, min: u8, tail: bool, indent: usize, reserve: usize) {
        let text = flat(self.src, e, min, tail);
        if !self.has_comment_in(e.span) && self.fits(&text, reserve) {
            self.out.push(&text);
            return;
        }
        if needs_parens(e, min, tail) {
            self.out.push("(");
            self.broken(e, true, indent, reserve + 1);
            self.out.push(")");
        } else {
            self.broken(e, tail, indent, reserve);
        }
    }

    /// Prints `e` (without parentheses of its own) with its parts broken over lines.
    fn broken(&mut self, e: &Expr, tail: bool, indent: usize, reserve: usize) {
        if let ExprKind::Binary(op, ..) = &e.kind {
            if is_chain_op(*op) {
                self.chain(e, op.precedence(), tail, indent, reserve);
                return;
            }
        }
        if let Some(lit) = out::literal(&e.kind) {
            self.out.push(&lit);
            return;
        }
        match &e.kind {
            ExprKind::Member(base, field) => {
                self.expr(base, P_POSTFIX, false, indent, 0);
                self.out.push(".");
                self.out.push(&field.name);
            }
            ExprKind::Index(base, index) => {
                self.expr(base, P_POSTFIX, false, indent, 0);
                self.out.push("[");
                self.expr(index, 0, true, indent, reserve + 1);
                self.out.push("]");
            }
            ExprKind::Call(callee, args) => {
                if callee_needs_parens(callee) {
                    self.out.push("(");
                    self.expr(callee, 0, true, indent, 1);
                    self.out.push(")");
                } else {
                    self.expr(callee, P_POSTFIX, false, indent, 0);
                }
                let els: Vec<El> = args.iter().map(El::Arg).collect();
                self.seq("(", ")", &els, e.span, indent, reserve);
            }
            ExprKind::Unary(op, x) => {
                let (word, p) = match op {
                    UnaryOp::Not => ("not ", P_NOT),
                    UnaryOp::Neg => ("-", P_NEG),
                };
                self.out.push(word);
                self.expr(x, p, tail, indent, reserve);
            }
            ExprKind::Binary(op, l, r) => {
                let (lp, rp) = operand_precs(*op);
                self.expr(l, lp, false, indent, 0);
                self.out.push(" ");
                self.out.push(op_text(self.src, *op, l, r));
                self.out.push(" ");
                self.expr(r, rp, tail, indent, reserve);
            }
            ExprKind::Set(items) | ExprKind::List(items) => {
                let (open, close) = if matches!(e.kind, ExprKind::Set(_)) {
                    ("{", "}")
                } else {
                    ("[", "]")
                };
                let els: Vec<El> = items.iter().map(El::Expr).collect();
                self.seq(open, close, &els, e.span, indent, reserve);
            }
            ExprKind::Object(entries) => {
                if entries.is_empty() {
                    self.out.push("{:}");
                    return;
                }
                let els: Vec<El> = entries.iter().map(|(k, v)| El::Entry(k, v)).collect();
                self.seq("{", "}", &els, e.span, indent, reserve);
            }
            ExprKind::Quantifier {
                kind,
                key,
                var,
                over,
                body,
            } => {
                self.out.push(quantifier_word(*kind));
                self.out.push(" ");
                if let Some(k) = key {
                    self.out.push(&k.name);
                    self.out.push(", ");
                }
                self.out.push(&var.name);
                self.out.push(" in ");
                self.expr(over, P_CMP_OPERAND, false, indent, 1);
                self.out.push(":");
                let text = flat(self.src, body, P_NOT, tail);
                if !self.has_comment_in(body.span) && self.fits(&text, reserve + 1) {
                    self.out.push(" ");
                    self.out.push(&text);
                } else {
                    // Deep enough that a broken chain's operators sit inside the quantifier.
                    self.anchor(body.span.start, indent + 6, Blanks::Drop);
                    self.expr(body, P_NOT, tail, indent + 6, reserve);
                }
            }
            ExprKind::History(h) => {
                self.out.push(history_word(h.kind));
                self.out.push("(");
                self.out.push(&h.hook.name);
                if let Some(f) = &h.filter {
                    self.out.push(" when ");
                    self.expr(f, 0, true, indent, 1);
                }
                if let Some(w) = &h.window {
                    self.out.push(", ");
                    self.out.push(&window(w));
                }
                if let Some(by) = &h.by {
                    self.out.push(", by ");
                    self.expr(by, 0, true, indent, 1);
                }
                self.out.push(")");
            }
            _ => {}
        }
    }

    /// A chain of operators of one precedence, one operand per line, operators leading and
    /// right-aligned so the operands line up under the first one.
    fn chain(&mut self, e: &Expr, p: u8, tail: bool, indent: usize, reserve: usize) {
        let operands = chain_operands(e, p);
        let col = self.out.col();
        let last = operands.len() - 1;
        for (i, (op, x)) in operands.into_iter().enumerate() {
            let (line_indent, min) = match op {
                None => (indent, p),
                Some((op, l)) => {
                    let word = op_text(self.src, op, l, x);
                    let pad = col.saturating_sub(width(word) + 1);
                    self.anchor(x.span.start, pad, Blanks::Drop);
                    self.out.push(word);
                    self.out.push(" ");
                    (pad, operand_precs(op).1)
                }
            };
            let (x_tail, x_reserve) = if i == last {
                (tail, reserve)
            } else {
                (false, 0)
            };
            match is_chain(x) {
                Some(inner)
                    if inner.precedence() != p
                        && (self.has_comment_in(x.span)
                            || !self.fits(&flat(self.src, x, min, x_tail), x_reserve)) =>
                {
                    // A nested chain that must break is bracketed, so that its operators
                    // cannot be mistaken for this chain's.
                    self.out.push("(");
                    self.chain(x, inner.precedence(), true, line_indent, x_reserve + 1);
                    self.out.push(")");
                }
                _ => self.expr(x, min, x_tail, line_indent, x_reserve),
            }
        }
    }

    fn el(&mut self, el: &El, indent: usize, reserve: usize) {
        match el {
            El::Expr(e) => self.expr(e, 0, true, indent, reserve),
            El::Arg(a) => {
                if let Some(n) = &a.name {
                    self.out.push(&n.name);
                    self.out.push(": ");
                }
                self.expr(&a.value, 0, true, indent, reserve);
            }
            El::Entry(k, v) => {
                self.out.push(&key(k));
                self.out.push(": ");
                self.expr(v, 0, true, indent, reserve);
            }
            El::CallArg(a) => {
                self.out.push(&a.name.name);
                self.out.push(": ");
                if !a.element_from.is_empty() {
                    self.out.push(&flat_arg_value(self.src, a));
                } else if a.from.is_empty() {
                    self.expr(&a.value, 0, true, indent, reserve);
                } else {
                    self.expr(&a.value, 0, true, indent, 0);
                }
                if !a.from.is_empty() {
                    self.out.push(" ");
                    self.out.push(&super::items::sources(&a.from));
                }
            }
            El::Mod(m) => self.modification(m, indent),
        }
    }

    /// A bracketed sequence: on one line if it fits (and holds no comment), else one element
    /// per line, each followed by a comma. `span` runs from the opening to just past the
    /// closing bracket.
    pub(super) fn seq(
        &mut self,
        open: &str,
        close: &str,
        els: &[El],
        span: Span,
        indent: usize,
        reserve: usize,
    ) {
        let close_at = span.end.saturating_sub(1);
        let parts: Vec<String> = els.iter().map(|el| flat_el(self.src, el)).collect();
        let text = format!("{open}{}{close}", parts.join(", "));
        if els.is_empty() || (!self.has_comment_in(span) && self.fits(&text, reserve)) {
            self.out.push(&text);
            return;
        }
        self.out.push(open);
        for el in els {
            self.anchor(el.start(), indent + 2, Blanks::Drop);
            self.el(el, indent + 2, 1);
            self.out.push(",");
        }
        self.flush(close_at, indent + 2, Blanks::Drop);
        self.anchor(close_at, indent, Blanks::Drop);
        self.out.push(close);
    }

    pub(super) fn modification(&mut self, m: &Modification, indent: usize) {
        match m {
            Modification::Set { place, value, .. } => {
                self.out.push("set ");
                self.out.push(&place_text(place));
                self.out.push(" = ");
                self.expr(value, 0, true, indent, 0);
            }
            Modification::Replace { content, .. } => {
                self.out.push("replace with ");
                self.expr(content, 0, true, indent, 0);
            }
            Modification::Redact { .. } | Modification::RedactEach { .. } => {
                self.out.push(&flat_modification(self.src, m))
            }
        }
    }
}
