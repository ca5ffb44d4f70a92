//! What Warden reads from parsed Rego before handing it to regorus: `import` lines after the
//! first rule (moved up, line numbers kept), calls to functions this build cannot run (a load
//! error, not a decision failure), references through a `data` import alias (rewritten to
//! the full `data.` path, so regorus evaluates only the rule named, as OPA does), and the terms
//! of a negated expression that OPA evaluates before the negation (moved out of the `not`, so
//! that an undefined one fails the body as in OPA).

use std::collections::HashSet;

use regorus::unstable::{Expr, Literal, Module, Query, Rule, RuleHead, Span};

/// Builtins regorus implements behind features Warden leaves out, and why.
const LEFT_OUT: &[(&str, &str)] = &[
    (
        "http.send",
        "regorus has it behind its `http` feature, which Warden leaves out: a policy makes no \
         network calls; put what it needs in a `use rego data` document",
    ),
    (
        "opa.runtime",
        "regorus has it behind its `opa-runtime` feature, which Warden leaves out: it would \
         show the process's environment to the policy",
    ),
    (
        "json.match_schema",
        "regorus has it behind its `jsonschema` feature, which Warden leaves out for its \
         dependencies; check the document's shape with Rego rules instead",
    ),
    (
        "json.verify_schema",
        "regorus has it behind its `jsonschema` feature, which Warden leaves out for its \
         dependencies; check the document's shape with Rego rules instead",
    ),
    (
        "yaml.",
        "regorus has it behind its `yaml` feature, which Warden leaves out; give the policy \
         JSON (`use rego data`) instead",
    ),
    (
        "urlquery.",
        "regorus has it behind its `urlquery` feature, which Warden leaves out for its \
         dependencies (url and ICU); compare or build the query text with string builtins",
    ),
    (
        "uuid.",
        "regorus has it behind its `uuid` feature, which Warden leaves out; the event's \
         identifiers are in `input.metadata`",
    ),
];

/// The builtins this build of regorus runs (every name a Rego call may use without defining
/// it), sorted.
pub fn builtins() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = regorus::unstable::BUILTINS
        .keys()
        .copied()
        .filter(|n| !n.starts_with("__"))
        .chain(["print"])
        .collect();
    names.sort_unstable();
    names
}

fn is_builtin(name: &str) -> bool {
    name == "print" || regorus::unstable::BUILTINS.contains_key(name)
}

/// A call in a Rego file to a function that is neither a builtin of this build nor defined
/// by the package.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    /// Index of the file in [`super::RegoImport::files`].
    pub file: usize,
    /// Byte range of the called name in the file's own text.
    pub span: (usize, usize),
    pub name: String,
    /// The fix: what provides it, or why it is not there.
    pub hint: String,
    /// `with … as NAME`: a builtin this build has, used to replace another function, which
    /// regorus cannot do (it reads the name as an unsafe variable and fails every evaluation
    /// of the package).
    pub replacement: bool,
}

/// The text with comments and string contents replaced by spaces, byte for byte (so offsets
/// and lines match the original).
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_str: Option<char> = None;
    let mut in_comment = false;
    let mut escaped = false;
    for c in text.chars() {
        let keep = if c == '\n' {
            in_comment = false;
            if in_str == Some('"') {
                in_str = None;
            }
            true
        } else if in_comment {
            false
        } else if let Some(q) = in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                in_str = None;
            }
            false
        } else if c == '#' {
            in_comment = true;
            false
        } else if c == '"' || c == '`' {
            in_str = Some(c);
            false
        } else {
            true
        };
        if keep {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    out
}

/// Byte ranges of the lines (without their `\n`).
fn line_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            out.push((start, i));
            start = i + 1;
        }
    }
    out.push((start, text.len()));
    out
}

fn starts_with_word(code: &str, word: &str) -> bool {
    code.strip_prefix(word)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
}

/// Moves `import` lines that follow a rule (OPA accepts them; regorus's parser stops at them)
/// to the end of the last `import` line before the first rule, or of the `package` line. The
/// moved lines are left empty, so every line keeps its number and every other line its text.
pub fn hoist_imports(text: &str) -> String {
    let masked = mask(text);
    let lines = line_ranges(text);
    let code_end = |(s, e): (usize, usize)| s + masked[s..e].trim_end().len();
    let mut anchor: Option<usize> = None;
    let mut in_rules = false;
    let mut late: Vec<usize> = Vec::new();
    for (i, &(s, e)) in lines.iter().enumerate() {
        let code = masked[s..e].trim();
        if code.is_empty() {
            continue;
        }
        if anchor.is_none() {
            if starts_with_word(code, "package") {
                anchor = Some(i);
            }
            continue;
        }
        let is_import = starts_with_word(code, "import");
        if !in_rules {
            if is_import {
                anchor = Some(i);
            } else {
                in_rules = true;
            }
        } else if is_import {
            late.push(i);
        }
    }
    let Some(anchor) = anchor else {
        return text.to_string();
    };
    if late.is_empty() {
        return text.to_string();
    }
    let moved: Vec<&str> = late
        .iter()
        .map(|&i| {
            let (s, _) = lines[i];
            text[s..code_end(lines[i])].trim()
        })
        .collect();
    let mut out = String::with_capacity(text.len() + 1);
    for (i, &(s, e)) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if i == anchor {
            let end = code_end((s, e));
            out.push_str(&text[s..end]);
            for m in &moved {
                out.push(' ');
                out.push_str(m);
            }
            out.push_str(&text[end..e]);
        } else if late.contains(&i) {
            // Keep a trailing comment where it was.
            out.push_str(&text[code_end((s, e))..e]);
        } else {
            out.push_str(&text[s..e]);
        }
    }
    out
}

/// The dotted name a call calls (`regex.match`, `data.pkg.f`, `f`), if it is a plain path.
/// Reference chains can be long: they are followed in a loop, not by recursion.
fn call_path(e: &Expr) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut e = e;
    loop {
        match e {
            Expr::Var { span, .. } => {
                parts.push(span.text().to_string());
                break;
            }
            Expr::RefDot { refr, field, .. } => {
                parts.push(field.0.text().to_string());
                e = refr;
            }
            Expr::RefBrack { refr, index, .. } => match index.as_ref() {
                Expr::String { value, .. } => {
                    parts.push(value.as_string().ok()?.to_string());
                    e = refr;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    parts.reverse();
    Some(parts.join("."))
}

/// The variable a reference starts from.
fn root_var(e: &Expr) -> Option<&Span> {
    let mut e = e;
    loop {
        match e {
            Expr::Var { span, .. } => return Some(span),
            Expr::RefDot { refr, .. } | Expr::RefBrack { refr, .. } => e = refr,
            _ => return None,
        }
    }
}

/// Walks one rule: calls, references through aliases, and the names the rule binds.
#[derive(Default)]
struct Walker {
    calls: Vec<(String, Span)>,
    /// Builtins named as the value of a `with` (`with upper as lower`).
    with_builtins: Vec<(String, Span)>,
    /// (alias, the alias's span) for each `alias.…` reference outside a call's name.
    alias_refs: Vec<(String, Span)>,
    bound: HashSet<String>,
}

impl Walker {
    fn bind_vars(&mut self, e: &Expr) {
        match e {
            Expr::Var { span, .. } => {
                self.bound.insert(span.text().to_string());
            }
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                items.iter().for_each(|i| self.bind_vars(i))
            }
            Expr::Object { fields, .. } => fields.iter().for_each(|(_, k, v)| {
                self.bind_vars(k);
                self.bind_vars(v);
            }),
            _ => {}
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::String { .. }
            | Expr::RawString { .. }
            | Expr::Number { .. }
            | Expr::Bool { .. }
            | Expr::Null { .. }
            | Expr::Var { .. } => {}
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                items.iter().for_each(|i| self.expr(i))
            }
            Expr::Object { fields, .. } => fields.iter().for_each(|(_, k, v)| {
                self.expr(k);
                self.expr(v);
            }),
            Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
                self.expr(term);
                self.query(query);
            }
            Expr::ObjectCompr {
                key, value, query, ..
            } => {
                self.expr(key);
                self.expr(value);
                self.query(query);
            }
            Expr::Call { fcn, params, .. } => {
                if let Some(name) = call_path(fcn) {
                    self.calls.push((name, fcn.span().clone()));
                }
                // Bracketed parts of the called name are expressions too.
                if let Expr::RefBrack { index, .. } = fcn.as_ref() {
                    self.expr(index);
                }
                params.iter().for_each(|p| self.expr(p));
            }
            Expr::UnaryExpr { expr, .. } => self.expr(expr),
            Expr::RefDot { .. } | Expr::RefBrack { .. } => {
                // Down the chain in a loop (chains can be long): indexes are walked, and the
                // variable the chain starts from is noted.
                let mut e = e;
                loop {
                    match e {
                        Expr::RefDot { refr, .. } => e = refr,
                        Expr::RefBrack { refr, index, .. } => {
                            self.expr(index);
                            e = refr;
                        }
                        Expr::Var { span, .. } => {
                            self.alias_refs
                                .push((span.text().to_string(), span.clone()));
                            break;
                        }
                        other => {
                            self.expr(other);
                            break;
                        }
                    }
                }
            }
            Expr::BinExpr { lhs, rhs, .. }
            | Expr::BoolExpr { lhs, rhs, .. }
            | Expr::ArithExpr { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::AssignExpr { op, lhs, rhs, .. } => {
                if matches!(op, regorus::unstable::AssignOp::ColEq) {
                    self.bind_vars(lhs);
                }
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::Membership {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    self.expr(k);
                }
                self.expr(value);
                self.expr(collection);
            }
        }
    }

    fn query(&mut self, q: &Query) {
        for stmt in &q.stmts {
            match &stmt.literal {
                Literal::SomeVars { vars, .. } => {
                    for v in vars {
                        self.bound.insert(v.text().to_string());
                    }
                }
                Literal::SomeIn {
                    key,
                    value,
                    collection,
                    ..
                } => {
                    if let Some(k) = key {
                        self.bind_vars(k);
                        self.expr(k);
                    }
                    self.bind_vars(value);
                    self.expr(value);
                    self.expr(collection);
                }
                Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => self.expr(expr),
                Literal::Every {
                    key,
                    value,
                    domain,
                    query,
                    ..
                } => {
                    if let Some(k) = key {
                        self.bound.insert(k.text().to_string());
                    }
                    self.bound.insert(value.text().to_string());
                    self.expr(domain);
                    self.query(query);
                }
            }
            for w in &stmt.with_mods {
                // `with alias.f as …` is regorus's own to resolve; only the value is walked.
                self.expr(&w.r#as);
                if let Some(name) = call_path(&w.r#as).filter(|n| is_builtin(n)) {
                    self.with_builtins.push((name, w.r#as.span().clone()));
                }
            }
        }
    }

    fn rule(&mut self, r: &Rule) {
        match r {
            Rule::Spec { head, bodies, .. } => {
                match head {
                    RuleHead::Compr { assign, .. } => {
                        if let Some(a) = assign {
                            self.expr(&a.value);
                        }
                    }
                    RuleHead::Set { key, .. } => {
                        if let Some(k) = key {
                            self.expr(k);
                        }
                    }
                    RuleHead::Func { args, assign, .. } => {
                        for a in args {
                            self.bind_vars(a);
                            self.expr(a);
                        }
                        if let Some(a) = assign {
                            self.expr(&a.value);
                        }
                    }
                }
                for b in bodies {
                    if let Some(a) = &b.assign {
                        self.expr(&a.value);
                    }
                    self.query(&b.query);
                }
            }
            Rule::Default { args, value, .. } => {
                for a in args {
                    self.bind_vars(a);
                }
                self.expr(value);
            }
        }
    }
}

/// The first name of a rule's path (`allow` for `allow`, `a` for `a.b.c`).
fn rule_root(r: &Rule) -> Option<String> {
    let refr = match r {
        Rule::Spec { head, .. } => match head {
            RuleHead::Compr { refr, .. }
            | RuleHead::Set { refr, .. }
            | RuleHead::Func { refr, .. } => refr,
        },
        Rule::Default { refr, .. } => refr,
    };
    root_var(refr).map(|s| s.text().to_string())
}

/// A module's `import data.…` aliases: (alias, the import's path as written).
fn data_aliases(m: &Module) -> Vec<(String, String)> {
    m.imports
        .iter()
        .filter_map(|i| {
            let path = i.refr.span().text().to_string();
            if root_var(&i.refr)?.text() != "data" {
                return None;
            }
            let alias = match &i.r#as {
                Some(a) => a.text().to_string(),
                None => match i.refr.as_ref() {
                    Expr::RefDot { field, .. } => field.0.text().to_string(),
                    Expr::RefBrack { index, .. } => match index.as_ref() {
                        Expr::String { value, .. } => value.as_string().ok()?.to_string(),
                        _ => return None,
                    },
                    _ => return None,
                },
            };
            Some((alias, path))
        })
        .collect()
}

/// Every alias an import of the module introduces (`data`, `input`, `future` and `rego`).
fn all_aliases(m: &Module) -> HashSet<String> {
    m.imports
        .iter()
        .filter_map(|i| match &i.r#as {
            Some(a) => Some(a.text().to_string()),
            None => match i.refr.as_ref() {
                Expr::RefDot { field, .. } => Some(field.0.text().to_string()),
                Expr::Var { span, .. } => Some(span.text().to_string()),
                _ => None,
            },
        })
        .collect()
}

/// What the scan of a package's parsed modules found.
pub struct Scan {
    pub missing: Vec<Missing>,
    /// Multi-value rules keyed by a variable (`by_team[team] contains name if …`): with no
    /// values OPA gives `{}` where regorus has none.
    pub multi_value: Vec<String>,
    /// Per module, the text with `alias.…` references spelled `data.….…`.
    pub rewritten: Vec<String>,
}

fn hint_for(name: &str, defined: &HashSet<String>) -> String {
    if let Some((_, why)) = LEFT_OUT
        .iter()
        .find(|(n, _)| name == *n || (n.ends_with('.') && name.starts_with(n)))
    {
        return format!("`{name}` is a builtin of OPA, but {why}");
    }
    let known = builtins();
    let candidates = known
        .iter()
        .copied()
        .chain(defined.iter().map(String::as_str));
    match crate::diagnostics::did_you_mean(name, candidates) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "regorus, which runs Warden's Rego, does not implement `{name}` (docs/rego.md lists \
             the builtins it does); compute the value in Warden or in a `use rego data` document"
        ),
    }
}

/// Scans the modules of one package, parsed from `texts` (the text each was parsed from, in
/// order). `origins` gives, per module, the file's own text, for mapping lines back.
pub fn scan(modules: &[&Module], texts: &[&str], origins: &[&str]) -> Scan {
    let defined: HashSet<String> = modules
        .iter()
        .flat_map(|m| m.policy.iter().filter_map(|r| rule_root(r)))
        .collect();
    let mut missing = Vec::new();
    let mut rewritten = Vec::new();
    for (idx, ((m, &text), &origin)) in modules.iter().zip(texts).zip(origins).enumerate() {
        let aliases = all_aliases(m);
        let data = data_aliases(m);
        let mut edits: Vec<(usize, usize, String)> = Vec::new();
        for r in &m.policy {
            let mut w = Walker::default();
            w.rule(r);
            for (name, span) in &w.calls {
                let root = name.split('.').next().unwrap_or_default();
                if is_builtin(name)
                    || root == "data"
                    || aliases.contains(root)
                    || defined.contains(root)
                {
                    continue;
                }
                let span = map_span(text, origin, span);
                missing.push(Missing {
                    file: idx,
                    span,
                    name: name.clone(),
                    hint: hint_for(name, &defined),
                    replacement: false,
                });
            }
            for (name, span) in &w.with_builtins {
                let root = name.split('.').next().unwrap_or_default();
                if w.bound.contains(root) || defined.contains(root) || aliases.contains(root) {
                    continue;
                }
                missing.push(Missing {
                    file: idx,
                    span: map_span(text, origin, span),
                    name: name.clone(),
                    hint: format!(
                        "regorus, which runs Warden's Rego, cannot replace a function with a \
                         builtin (OPA can); replace it with a function of the package that calls \
                         the builtin: `{}_fn(x) := {name}(x)` and `with … as {}_fn`",
                        name.replace('.', "_"),
                        name.replace('.', "_")
                    ),
                    replacement: true,
                });
            }
            for (alias, span) in &w.alias_refs {
                if w.bound.contains(alias) {
                    continue;
                }
                if let Some((_, path)) = data.iter().find(|(a, _)| a == alias) {
                    edits.push((span.start as usize, span.end as usize, path.clone()));
                }
            }
        }
        edits.sort_by_key(|e| std::cmp::Reverse(e.0));
        edits.dedup();
        let mut out = text.to_string();
        for (s, e, path) in edits {
            if s <= e && out.is_char_boundary(s) && out.is_char_boundary(e) && e <= out.len() {
                out.replace_range(s..e, &path);
            }
        }
        rewritten.push(out);
    }
    let mut multi_value: Vec<String> = modules
        .iter()
        .flat_map(|m| m.policy.iter().filter_map(|r| multi_value_rule(r)))
        .collect();
    multi_value.sort();
    multi_value.dedup();
    Scan {
        missing,
        rewritten,
        multi_value,
    }
}

/// The name of a multi-value rule keyed by a variable (`name[key] contains value if …`).
fn multi_value_rule(r: &Rule) -> Option<String> {
    let Rule::Spec {
        head: RuleHead::Set { refr, .. },
        ..
    } = r
    else {
        return None;
    };
    match refr.as_ref() {
        Expr::RefBrack { refr, index, .. } => match (refr.as_ref(), index.as_ref()) {
            (Expr::Var { span, .. }, Expr::Var { .. }) => Some(span.text().to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// A span of the parsed text as a byte range of the file's own text: lines are the same, and
/// within a line only text after the code (hoisted imports) differs.
fn map_span(parsed: &str, origin: &str, span: &Span) -> (usize, usize) {
    let line = (span.line as usize).max(1) - 1;
    let pl = line_ranges(parsed);
    let ol = line_ranges(origin);
    let (Some(&(ps, _)), Some(&(os, oe))) = (pl.get(line), ol.get(line)) else {
        return (0, 0);
    };
    let start = os + (span.start as usize).saturating_sub(ps);
    let end = os + (span.end as usize).saturating_sub(ps);
    let clamp = |x: usize| {
        let mut x = x.min(oe);
        while !origin.is_char_boundary(x) {
            x -= 1;
        }
        x
    };
    (clamp(start), clamp(end.max(start)))
}

/// Calls nested in a negated expression, which OPA evaluates before the negation and regorus
/// inside it (docs/rego.md, "`not` over a nested call"): in `not f(g(x))`, `not input.a[g(x)]`
/// and `not count(xs) > 0`, an undefined `g(x)` (or `count(xs)`) makes OPA's body fail, while
/// regorus's `not` holds. Each such call term becomes a statement of its own before the `not`
/// (`__warden_not_0 := g(x); not f(__warden_not_0)`), on the same line, so that regorus answers
/// as OPA does and errors keep their lines.
#[derive(Default)]
struct Negations {
    /// (byte offset, text to insert) and (start, end, replacement) edits.
    edits: Vec<(usize, usize, String)>,
    next: usize,
}

impl Negations {
    fn whole(e: &Expr, out: &mut Vec<(usize, usize)>) {
        let s = e.span();
        out.push((s.start as usize, s.end as usize));
    }

    /// An argument of a call (or an operand of an operator other than `==`): OPA evaluates a
    /// reference or a call there first, and looks inside arrays, sets and objects.
    fn arg(e: &Expr, out: &mut Vec<(usize, usize)>) {
        match e {
            Expr::RefDot { .. }
            | Expr::RefBrack { .. }
            | Expr::Call { .. }
            | Expr::ArithExpr { .. }
            | Expr::BinExpr { .. }
            | Expr::BoolExpr { .. }
            | Expr::UnaryExpr { .. } => Self::whole(e, out),
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                items.iter().for_each(|i| Self::arg(i, out))
            }
            Expr::Object { fields, .. } => fields.iter().for_each(|(_, k, v)| {
                Self::arg(k, out);
                Self::arg(v, out);
            }),
            _ => {}
        }
    }

    /// A term that stays where it is (an operand of `==`, a bare reference): what OPA
    /// evaluates first is inside it — the indexes of a reference, the elements of a
    /// collection, and calls.
    fn inside(e: &Expr, out: &mut Vec<(usize, usize)>) {
        match e {
            Expr::RefDot { .. } | Expr::RefBrack { .. } => {
                let mut e = e;
                loop {
                    match e {
                        Expr::RefDot { refr, .. } => e = refr,
                        Expr::RefBrack { refr, index, .. } => {
                            Self::arg(index, out);
                            e = refr;
                        }
                        Expr::Var { .. } => break,
                        other => {
                            Self::arg(other, out);
                            break;
                        }
                    }
                }
            }
            Expr::Call { .. }
            | Expr::ArithExpr { .. }
            | Expr::BinExpr { .. }
            | Expr::BoolExpr { .. }
            | Expr::UnaryExpr { .. } => Self::whole(e, out),
            Expr::Array { .. } | Expr::Set { .. } | Expr::Object { .. } => Self::arg(e, out),
            _ => {}
        }
    }

    /// The terms of a negated expression that OPA evaluates before the negation.
    fn nested(e: &Expr) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        match e {
            Expr::BoolExpr {
                op: regorus::unstable::BoolOp::Eq,
                lhs,
                rhs,
                ..
            }
            | Expr::AssignExpr { lhs, rhs, .. } => {
                Self::inside(lhs, &mut out);
                Self::inside(rhs, &mut out);
            }
            Expr::Call { params, .. } => params.iter().for_each(|p| Self::arg(p, &mut out)),
            Expr::ArithExpr { lhs, rhs, .. }
            | Expr::BinExpr { lhs, rhs, .. }
            | Expr::BoolExpr { lhs, rhs, .. } => {
                Self::arg(lhs, &mut out);
                Self::arg(rhs, &mut out);
            }
            Expr::Membership {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    Self::arg(k, &mut out);
                }
                Self::arg(value, &mut out);
                Self::arg(collection, &mut out);
            }
            Expr::UnaryExpr { expr, .. } => Self::arg(expr, &mut out),
            other => Self::inside(other, &mut out),
        }
        out
    }

    /// Queries inside an expression (comprehensions).
    fn expr(&mut self, e: &Expr, text: &str) {
        match e {
            Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
                self.expr(term, text);
                self.query(query, text);
            }
            Expr::ObjectCompr {
                key, value, query, ..
            } => {
                self.expr(key, text);
                self.expr(value, text);
                self.query(query, text);
            }
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                items.iter().for_each(|i| self.expr(i, text))
            }
            Expr::Object { fields, .. } => fields.iter().for_each(|(_, k, v)| {
                self.expr(k, text);
                self.expr(v, text);
            }),
            Expr::Call { params, .. } => params.iter().for_each(|p| self.expr(p, text)),
            Expr::UnaryExpr { expr, .. } => self.expr(expr, text),
            Expr::RefDot { .. } | Expr::RefBrack { .. } => {
                let mut e = e;
                loop {
                    match e {
                        Expr::RefDot { refr, .. } => e = refr,
                        Expr::RefBrack { refr, index, .. } => {
                            self.expr(index, text);
                            e = refr;
                        }
                        Expr::Var { .. } => break,
                        other => {
                            self.expr(other, text);
                            break;
                        }
                    }
                }
            }
            Expr::BinExpr { lhs, rhs, .. }
            | Expr::BoolExpr { lhs, rhs, .. }
            | Expr::ArithExpr { lhs, rhs, .. }
            | Expr::AssignExpr { lhs, rhs, .. } => {
                self.expr(lhs, text);
                self.expr(rhs, text);
            }
            Expr::Membership {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    self.expr(k, text);
                }
                self.expr(value, text);
                self.expr(collection, text);
            }
            _ => {}
        }
    }

    fn query(&mut self, q: &Query, text: &str) {
        for stmt in &q.stmts {
            match &stmt.literal {
                Literal::SomeVars { .. } => {}
                Literal::SomeIn {
                    key,
                    value,
                    collection,
                    ..
                } => {
                    if let Some(k) = key {
                        self.expr(k, text);
                    }
                    self.expr(value, text);
                    self.expr(collection, text);
                }
                Literal::Expr { expr, .. } => self.expr(expr, text),
                Literal::Every { domain, query, .. } => {
                    self.expr(domain, text);
                    self.query(query, text);
                }
                Literal::NotExpr { span, expr } => {
                    self.expr(expr, text);
                    self.negation(span, stmt.span.end as usize, expr, text);
                }
            }
        }
    }

    /// `span`: the `not` literal; `end`: the end of its statement (its `with`s included).
    fn negation(&mut self, span: &Span, end: usize, expr: &Expr, text: &str) {
        let mut terms = Self::nested(expr);
        terms.retain(|&(s, e)| s < e && e <= text.len() && !text[s..e].contains('\n'));
        let (start, literal_end) = (span.start as usize, span.end as usize);
        if terms.is_empty()
            || literal_end > end
            || end > text.len()
            || text[start..end].contains('\n')
        {
            return;
        }
        // The statement's `with`s apply to what is evaluated before it, as in OPA.
        let with = &text[literal_end..end];
        let mut lets = String::new();
        for &(s, e) in &terms {
            let var = format!("__warden_not_{}", self.next);
            self.next += 1;
            lets += &format!("{var} := {}{with}; ", &text[s..e]);
            self.edits.push((s, e, var));
        }
        // A body of one expression (`rule if not f(g(x))`) gets braces, so that it can hold
        // the new statements; elsewhere (`{ … }`, a comprehension) `;` separates them.
        let before = text[..start].trim_end();
        let bare = before.ends_with("if")
            && !before[..before.len() - 2]
                .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if bare {
            self.edits.push((start, start, format!("{{ {lets}")));
            self.edits.push((end, end, " }".into()));
        } else {
            self.edits.push((start, start, lets));
        }
    }

    fn rule(&mut self, r: &Rule, text: &str) {
        if let Rule::Spec { head, bodies, .. } = r {
            match head {
                RuleHead::Compr { assign, .. } | RuleHead::Func { assign, .. } => {
                    if let Some(a) = assign {
                        self.expr(&a.value, text);
                    }
                }
                RuleHead::Set { key, .. } => {
                    if let Some(k) = key {
                        self.expr(k, text);
                    }
                }
            }
            for b in bodies {
                if let Some(a) = &b.assign {
                    self.expr(&a.value, text);
                }
                self.query(&b.query, text);
            }
        }
    }
}

/// `text` (a module regorus parsed as `module`) with the calls nested in negated expressions
/// moved out before the negation ([`Negations`]).
pub fn hoist_negated_calls(module: &Module, text: &str) -> String {
    let mut n = Negations::default();
    for r in &module.policy {
        n.rule(r, text);
    }
    let mut edits = n.edits;
    // Apply from the end; at one offset, the closing brace before what opens there.
    edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    let mut out = text.to_string();
    for (s, e, with) in edits {
        if s <= e && e <= out.len() && out.is_char_boundary(s) && out.is_char_boundary(e) {
            out.replace_range(s..e, &with);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_imports_move_up_and_lines_stay() {
        let text = "package a # the package\nimport rego.v1\n\nx := 1\nimport data.b as c # why\ny := c.z\n";
        let out = hoist_imports(text);
        assert_eq!(out.lines().count(), text.lines().count());
        assert_eq!(
            out,
            "package a # the package\nimport rego.v1 import data.b as c\n\nx := 1\n # why\ny := c.z\n"
        );
        // Nothing late: unchanged, and a string holding `import` is not an import.
        let text = "package a\nx := `\nimport data.b\n`\n";
        assert_eq!(hoist_imports(text), text);
    }

    #[test]
    fn mask_keeps_offsets() {
        let text = "a := \"é#\" # c\nb := `x\ny`";
        let m = mask(text);
        assert_eq!(m.len(), text.len());
        assert_eq!(m.lines().count(), text.lines().count());
        assert!(!m.contains('#') && !m.contains('é'));
    }
}
