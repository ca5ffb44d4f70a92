//! The reference's expressions: values, and a recursive walk over one checked `Expr` that
//! computes its value the way docs/language.md §2 and §6–§10 say, written for
//! obviousness rather than speed.
//!
//! It owns: the value model (undefined, and JSON-like values), Kleene logic, the run-time type
//! errors, the builtins the generator uses, quantifiers, labels of a carrier. It reads the
//! checker's resolution table for what each name means, and asks the session model
//! ([`super::View`]) for what history and provenance know.
//!
//! It must not know the compiler, the bytecode or the VM: nothing here may be borrowed from
//! `compile` or `vm`, so that a mistake there cannot hide by being copied here.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::check::{Resolution, Type};
use crate::diagnostics::{FileId, Span};
use crate::syntax::ast::{Arg, BinaryOp, Expr, ExprKind, HistoryKind, QuantifierKind, UnaryOp};

use super::View;

/// A value. `Undef` is an absent path (and JSON `null`, which docs/language.md §2 reads as absent) or the
/// result of an operation on undefined: neither true nor false.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    Undef,
    Bool(bool),
    Num(f64),
    Str(String),
    List(Vec<V>),
    /// An object, members in document order.
    Obj(Vec<(String, V)>),
}

impl V {
    /// The JSON a value came from (an integral number as an integer, as it arrived).
    pub fn to_json(&self) -> Value {
        match self {
            V::Undef => Value::Null,
            V::Bool(b) => Value::Bool(*b),
            V::Num(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(*n as i64),
            V::Num(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
            V::Str(s) => Value::String(s.clone()),
            V::List(items) => Value::Array(items.iter().map(V::to_json).collect()),
            V::Obj(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    pub fn from_json(v: &Value) -> V {
        match v {
            Value::Null => V::Undef,
            Value::Bool(b) => V::Bool(*b),
            Value::Number(n) => n.as_f64().map_or(V::Undef, V::Num),
            Value::String(s) => V::Str(s.clone()),
            Value::Array(a) => V::List(a.iter().map(V::from_json).collect()),
            Value::Object(m) => V::Obj(
                m.iter()
                    .map(|(k, v)| (k.clone(), V::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The member `key` of an object; undefined for anything else.
    pub fn get(&self, key: &str) -> V {
        match self {
            // A carrier sent without provenance reads as model output without lineage.
            V::Obj(members)
                if key == "provenance"
                    && members.iter().any(|(k, _)| k == "value")
                    && !members.iter().any(|(k, _)| k == "provenance") =>
            {
                V::Obj(vec![("origin".into(), V::Str("agent_generated".into()))])
            }
            V::Obj(members) => members
                .iter()
                .find(|(k, _)| k == key)
                .map_or(V::Undef, |(_, v)| v.clone()),
            _ => V::Undef,
        }
    }

    pub fn is_undef(&self) -> bool {
        matches!(self, V::Undef)
    }

    /// The JSON kind, for the type rules: two values of different kinds never compare.
    pub fn kind(&self) -> &'static str {
        match self {
            V::Undef => "undefined",
            V::Bool(_) => "bool",
            V::Num(_) => "number",
            V::Str(_) => "string",
            V::List(_) => "list",
            V::Obj(_) => "object",
        }
    }

    /// Structural equality of two values of the same kind: numbers by value, lists item by
    /// item, objects member by member in any order. Values of different kinds are not equal.
    pub fn same(&self, other: &V) -> bool {
        match (self, other) {
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Num(a), V::Num(b)) => a == b,
            (V::Str(a), V::Str(b)) => a == b,
            (V::List(a), V::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (V::Obj(a), V::Obj(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, x)| b.iter().any(|(k2, y)| k == k2 && x.same(y)))
            }
            _ => false,
        }
    }

    /// A tool argument `{value, provenance}` as its value.
    fn argument_value(self) -> V {
        match self {
            V::Obj(_) => self.get("value"),
            other => other,
        }
    }
}

/// Constructs an evaluation ran into that the caller may want to know about (the differential
/// test uses them to skip what the VM does not implement yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Touch {
    /// A quantifier over an absent collection (docs/language.md: undefined).
    QuantifierOverAbsent,
    /// `args["name"]`: bracket access to a tool argument (docs/language.md: the same as `args.name`).
    BracketArgument,
    /// `x matches "re"` (docs/language.md: an unanchored regular-expression search).
    Regex,
}

/// Why an evaluation gave no value.
#[derive(Debug, Clone, PartialEq)]
pub enum Fail {
    /// A present value of the wrong type: the decision fails (docs/language.md).
    Type(String),
    /// A construct this reference does not model (intent, effects, Rego, …).
    Unsupported(String),
}

pub type R<T> = Result<T, Fail>;

pub(crate) fn type_error<T>(what: String) -> R<T> {
    Err(Fail::Type(what))
}

/// What an expression is evaluated against.
pub struct Cx<'a> {
    pub view: &'a View<'a>,
    /// The file the expression was written in (resolutions are keyed by file and span).
    pub file: FileId,
    /// The payload (rules, history filters), or the provenance object (labels).
    pub root: &'a V,
    pub metadata: &'a V,
    /// `$`: the event being decided, inside a history filter.
    pub current: Option<&'a V>,
    /// Quantifier variables, innermost last.
    pub vars: Vec<(String, V)>,
}

impl<'a> Cx<'a> {
    fn resolution(&self, span: Span) -> Option<&'a (Resolution, Type)> {
        self.view.policy.checked.resolutions.get(&(self.file, span))
    }

    /// Whether the checker typed `e` as a tool argument (it compares as its value).
    fn is_argument(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Name(_) | ExprKind::Member(..) => {
                matches!(self.resolution(e.span), Some((_, Type::Arg)))
            }
            ExprKind::Index(base, _) => self.is_argument_map(base),
            _ => false,
        }
    }

    /// Whether `e` is the map of tool arguments (`args`, `payload.args`, `$.args`).
    fn is_argument_map(&self, e: &Expr) -> bool {
        matches!(
            self.resolution(e.span),
            Some((_, Type::Object(_, prefix))) if prefix == "arguments" || prefix == "params.arguments"
        )
    }
}

/// `e` in a value position: a tool argument stands for its value.
pub fn value(cx: &mut Cx<'_>, e: &Expr) -> R<V> {
    let v = carrier(cx, e)?;
    Ok(if cx.is_argument(e) {
        v.argument_value()
    } else {
        v
    })
}

/// `e` as a condition: true, false or undefined; any other value is a type error.
pub fn truth(cx: &mut Cx<'_>, e: &Expr) -> R<Option<bool>> {
    match value(cx, e)? {
        V::Undef => Ok(None),
        V::Bool(b) => Ok(Some(b)),
        other => type_error(format!("a condition is a {}, not a bool", other.kind())),
    }
}

/// `e` as written: a tool argument stays the `{value, provenance}` it is (what `has`,
/// `present` and `derived_from` look at).
pub fn carrier(cx: &mut Cx<'_>, e: &Expr) -> R<V> {
    // A constant reached through a qualified name (`mod.NAME`) is resolved on the whole span.
    if let Some((Resolution::Constant { name, .. }, _)) = cx.resolution(e.span) {
        if !matches!(e.kind, ExprKind::Name(_)) {
            return cx.view.policy.constant(cx.view, name);
        }
    }
    match &e.kind {
        ExprKind::Bool(b) => Ok(V::Bool(*b)),
        ExprKind::Null => Ok(V::Undef),
        ExprKind::Number(n) => Ok(V::Num(*n)),
        ExprKind::String(s) => Ok(V::Str(s.clone())),
        ExprKind::Duration(d) => Ok(V::Num(d.millis as f64)),
        ExprKind::Name(n) => name(cx, n, e.span),
        ExprKind::Current => match cx.current {
            Some(c) => Ok(c.clone()),
            None => Err(Fail::Unsupported("`$` outside a history filter".into())),
        },
        ExprKind::Member(base, field) => {
            match cx.resolution(e.span) {
                Some((Resolution::Rego { .. }, _)) => return Err(Fail::Unsupported("Rego".into())),
                Some((Resolution::Label { name: l, .. }, _)) => {
                    return Err(Fail::Unsupported(format!("the label `{l}` as a value")))
                }
                _ => {}
            }
            if let Some((Resolution::Builtin("intent"), _)) = cx.resolution(base.span) {
                return Err(Fail::Unsupported("the session intent".into()));
            }
            let b = carrier(cx, base)?;
            // The member the checker resolved (`source` is `source_id`, `args` is
            // `arguments`), or the name as written for members of maps and JSON values.
            let key = match cx.resolution(e.span) {
                Some((Resolution::Field { path, .. }, _)) => {
                    let last = path.rsplit('.').next().unwrap_or(path);
                    if last == "*" || last.is_empty() {
                        field.name.clone()
                    } else {
                        last.to_string()
                    }
                }
                _ => field.name.clone(),
            };
            match b {
                V::Undef => Ok(V::Undef),
                V::Obj(_) => Ok(b.get(&key)),
                other => type_error(format!("`.{key}` of a {}", other.kind())),
            }
        }
        ExprKind::Index(base, index) => {
            let b = carrier(cx, base)?;
            let i = value(cx, index)?;
            if cx.is_argument_map(base) {
                cx.view.touch(Touch::BracketArgument);
            }
            match (&b, &i) {
                (V::Undef, _) | (_, V::Undef) => Ok(V::Undef),
                (V::List(items), V::Num(n)) => {
                    if n.fract() == 0.0 && *n >= 0.0 && (*n as usize) < items.len() {
                        Ok(items[*n as usize].clone())
                    } else {
                        Ok(V::Undef)
                    }
                }
                (V::Obj(_), V::Str(k)) => Ok(b.get(k)),
                (b, i) => type_error(format!("a {} indexed by a {}", b.kind(), i.kind())),
            }
        }
        ExprKind::Call(callee, args) => call(cx, callee, args),
        ExprKind::Unary(UnaryOp::Not, x) => Ok(match truth(cx, x)? {
            Some(b) => V::Bool(!b),
            None => V::Undef,
        }),
        ExprKind::Unary(UnaryOp::Neg, x) => match value(cx, x)? {
            V::Undef => Ok(V::Undef),
            V::Num(n) => Ok(V::Num(-n)),
            other => type_error(format!("`-` of a {}", other.kind())),
        },
        ExprKind::Binary(op, a, b) => binary(cx, *op, a, b),
        ExprKind::Set(items) | ExprKind::List(items) => {
            let mut out: Vec<V> = Vec::new();
            for item in items {
                let v = value(cx, item)?;
                if v.is_undef() {
                    return Ok(V::Undef);
                }
                // A set holds each element once.
                if matches!(e.kind, ExprKind::Set(_)) && out.iter().any(|o| o.same(&v)) {
                    continue;
                }
                out.push(v);
            }
            Ok(V::List(out))
        }
        ExprKind::Object(entries) => {
            let mut out = Vec::new();
            for (k, v) in entries {
                out.push((k.value.clone(), value(cx, v)?));
            }
            Ok(V::Obj(out))
        }
        ExprKind::Quantifier {
            kind,
            key,
            var,
            over,
            body,
        } => {
            let mut collection = carrier(cx, over)?;
            if cx.is_argument(over) {
                collection = argument_elements(collection)?;
            }
            let elements: Vec<(V, V)> = match collection {
                // `each` over nothing chooses nothing.
                V::Undef if *kind == QuantifierKind::Each => return Ok(V::List(Vec::new())),
                V::Undef => {
                    cx.view.touch(Touch::QuantifierOverAbsent);
                    return Ok(V::Undef);
                }
                V::List(items) => items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (V::Num(i as f64), v))
                    .collect(),
                V::Obj(members) => members.into_iter().map(|(k, v)| (V::Str(k), v)).collect(),
                other => {
                    return type_error(format!(
                        "`{}` ranges over a {}",
                        quantifier_word(*kind),
                        other.kind()
                    ))
                }
            };
            if *kind == QuantifierKind::Each {
                return choose(cx, key.as_ref(), var, body, elements);
            }
            let is_any = *kind == QuantifierKind::Any;
            let mut saw_undefined = false;
            for (name, element) in elements {
                if let Some(k) = key {
                    cx.vars.push((k.name.clone(), name));
                }
                cx.vars.push((var.name.clone(), element));
                let r = truth(cx, body);
                cx.vars.pop();
                if key.is_some() {
                    cx.vars.pop();
                }
                match r? {
                    // `any` stops at the first true body, `all` at the first false one.
                    Some(b) if b == is_any => return Ok(V::Bool(is_any)),
                    Some(_) => {}
                    None => saw_undefined = true,
                }
            }
            Ok(if saw_undefined {
                V::Undef
            } else {
                V::Bool(!is_any)
            })
        }
        ExprKind::History(h) => {
            let count = cx.view.count(cx, h)?;
            Ok(match (count, h.kind) {
                (None, _) => V::Undef,
                (Some(n), HistoryKind::Count) => V::Num(n as f64),
                (Some(n), HistoryKind::Exists) => V::Bool(n > 0),
            })
        }
    }
}

/// A list argument's elements, each `{value, provenance}` with its own record (the list's
/// `provenance.elements[i]`) or else the list's.
fn argument_elements(arg: V) -> R<V> {
    let V::Obj(members) = &arg else {
        return Ok(arg);
    };
    let field = |name: &str| members.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let Some(value) = field("value") else {
        return Ok(arg);
    };
    let prov = field("provenance");
    let items = match value {
        V::Undef => return Ok(V::Undef),
        V::List(items) => items,
        // An argument holding one value ranges over that value.
        _ => return Ok(V::List(vec![arg.clone()])),
    };
    let own = match prov {
        Some(V::Obj(p)) => p.iter().find(|(k, _)| k == "elements").map(|(_, v)| v),
        _ => None,
    };
    Ok(V::List(
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let p = match own {
                    Some(V::List(records)) => match records.get(i) {
                        Some(r @ V::Obj(_)) => Some(r.clone()),
                        _ => prov.cloned(),
                    },
                    _ => prov.cloned(),
                };
                let mut carrier = vec![("value".into(), item.clone())];
                carrier.extend(p.map(|p| ("provenance".into(), p)));
                V::Obj(carrier)
            })
            .collect(),
    ))
}

/// `redact each`'s choice: the keys of the elements whose body is true or undefined (when in
/// doubt, hide).
fn choose(
    cx: &mut Cx<'_>,
    key: Option<&crate::syntax::ast::Ident>,
    var: &crate::syntax::ast::Ident,
    body: &Expr,
    elements: Vec<(V, V)>,
) -> R<V> {
    let mut chosen = Vec::new();
    for (name, element) in elements {
        if let Some(k) = key {
            cx.vars.push((k.name.clone(), name.clone()));
        }
        cx.vars.push((var.name.clone(), element));
        let r = truth(cx, body);
        cx.vars.pop();
        if key.is_some() {
            cx.vars.pop();
        }
        if r? != Some(false) {
            chosen.push(name);
        }
    }
    Ok(V::List(chosen))
}

fn quantifier_word(k: QuantifierKind) -> &'static str {
    match k {
        QuantifierKind::Any => "any",
        QuantifierKind::All => "all",
        QuantifierKind::Each => "each",
    }
}

fn name(cx: &mut Cx<'_>, n: &str, span: Span) -> R<V> {
    match cx.resolution(span) {
        Some((Resolution::Variable(v), _)) => Ok(cx
            .vars
            .iter()
            .rev()
            .find(|(name, _)| name == v)
            .map_or(V::Undef, |(_, val)| val.clone())),
        Some((Resolution::Constant { name: c, .. }, _)) => cx.view.policy.constant(cx.view, c),
        Some((Resolution::Field { table, path }, _)) => {
            let root = match table {
                crate::check::Table::Metadata => cx.metadata,
                _ => cx.root,
            };
            let mut v = root.clone();
            for segment in path.split('.').filter(|s| !s.is_empty()) {
                v = v.get(segment);
            }
            Ok(v)
        }
        Some((Resolution::EnumValue(word), _)) => Ok(V::Str(word.clone())),
        Some((Resolution::Builtin("intent"), _)) => {
            Err(Fail::Unsupported("the session intent".into()))
        }
        other => Err(Fail::Unsupported(format!("the name `{n}` ({other:?})"))),
    }
}

/// The label a `has` or `turns_since` names.
fn label_name(cx: &Cx<'_>, e: &Expr) -> R<String> {
    match cx.resolution(e.span) {
        Some((Resolution::Label { name: l, .. }, _)) => Ok(l.clone()),
        _ => Err(Fail::Unsupported(
            "a label expression that is not a label name".into(),
        )),
    }
}

fn binary(cx: &mut Cx<'_>, op: BinaryOp, a: &Expr, b: &Expr) -> R<V> {
    match op {
        BinaryOp::And | BinaryOp::Or => {
            let stop = op == BinaryOp::Or; // `and` stops at false, `or` at true
            let x = truth(cx, a)?;
            if x == Some(stop) {
                return Ok(V::Bool(stop));
            }
            let y = truth(cx, b)?;
            Ok(match (x, y) {
                (_, Some(v)) if v == stop => V::Bool(stop),
                (Some(_), Some(_)) => V::Bool(!stop),
                _ => V::Undef,
            })
        }
        BinaryOp::Has => {
            let c = carrier(cx, a)?;
            let label = label_name(cx, b)?;
            Ok(match cx.view.labels_of(&c) {
                Some(labels) => V::Bool(labels.contains(&label)),
                None => V::Undef,
            })
        }
        _ => {
            // Both sides are evaluated, left first: a type error in either fails.
            let x = value(cx, a)?;
            let y = value(cx, b)?;
            let tri = |r: Option<bool>| r.map_or(V::Undef, V::Bool);
            match op {
                BinaryOp::Eq => Ok(tri(equal(&x, &y)?)),
                BinaryOp::Ne => Ok(tri(equal(&x, &y)?.map(|r| !r))),
                BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                    if x.is_undef() || y.is_undef() {
                        return Ok(V::Undef);
                    }
                    let (V::Num(p), V::Num(q)) = (&x, &y) else {
                        return type_error(format!(
                            "`{}` orders a {} and a {}",
                            op.as_str(),
                            x.kind(),
                            y.kind()
                        ));
                    };
                    Ok(V::Bool(match op {
                        BinaryOp::Lt => p < q,
                        BinaryOp::Le => p <= q,
                        BinaryOp::Gt => p > q,
                        _ => p >= q,
                    }))
                }
                BinaryOp::In => Ok(tri(member_of(&x, &y)?)),
                BinaryOp::NotIn => Ok(tri(member_of(&x, &y)?.map(|r| !r))),
                BinaryOp::Matches => {
                    cx.view.touch(Touch::Regex);
                    match (&x, &y) {
                        (V::Undef, _) | (_, V::Undef) => Ok(V::Undef),
                        (V::Str(text), V::Str(pattern)) => Ok(V::Bool(regex_search(pattern, text))),
                        _ => type_error(format!("`matches` on a {} and a {}", x.kind(), y.kind())),
                    }
                }
                _ => arithmetic(op, x, y),
            }
        }
    }
}

/// `==`: undefined if a side is; a type error if the kinds differ.
pub fn equal(x: &V, y: &V) -> R<Option<bool>> {
    if x.is_undef() || y.is_undef() {
        return Ok(None);
    }
    if x.kind() != y.kind() {
        return type_error(format!("`==` between a {} and a {}", x.kind(), y.kind()));
    }
    Ok(Some(x.same(y)))
}

/// `x in c`: membership in a list or set (every element must be of `x`'s kind), or a key of
/// an object.
fn member_of(x: &V, c: &V) -> R<Option<bool>> {
    if x.is_undef() || c.is_undef() {
        return Ok(None);
    }
    match c {
        V::List(items) => {
            let mut found = false;
            for item in items.iter().filter(|i| !i.is_undef()) {
                if item.kind() != x.kind() {
                    return type_error(format!("a {} looked up among {}s", x.kind(), item.kind()));
                }
                found |= item.same(x);
            }
            Ok(Some(found))
        }
        V::Obj(members) => match x {
            V::Str(k) => Ok(Some(members.iter().any(|(m, _)| m == k))),
            other => type_error(format!(
                "a {} looked up among an object's keys",
                other.kind()
            )),
        },
        other => type_error(format!("`in` a {}", other.kind())),
    }
}

fn arithmetic(op: BinaryOp, x: V, y: V) -> R<V> {
    if x.is_undef() || y.is_undef() {
        return Ok(V::Undef);
    }
    match (op, &x, &y) {
        (BinaryOp::Add, V::Str(p), V::Str(q)) => Ok(V::Str(format!("{p}{q}"))),
        (_, V::Num(p), V::Num(q)) => {
            let r = match op {
                BinaryOp::Add => p + q,
                BinaryOp::Sub => p - q,
                BinaryOp::Mul => p * q,
                BinaryOp::Div => p / q,
                _ => p % q,
            };
            // Division by zero and overflow have no value.
            Ok(if r.is_finite() { V::Num(r) } else { V::Undef })
        }
        _ => type_error(format!(
            "`{}` on a {} and a {}",
            op.as_str(),
            x.kind(),
            y.kind()
        )),
    }
}

/// A builtin's call, held to its registry entry: the arity going in, the kind of value
/// coming out (an entry and a meaning that disagree fail here, not silently).
fn call(cx: &mut Cx<'_>, callee: &Expr, args: &[Arg]) -> R<V> {
    let builtin = match cx.resolution(callee.span) {
        Some((Resolution::Builtin(b), _)) => *b,
        _ => return Err(Fail::Unsupported("a call that is not a builtin".into())),
    };
    let Some(entry) = crate::check::builtins::spec(builtin) else {
        return Err(Fail::Unsupported(format!(
            "`{builtin}` is not in the registry"
        )));
    };
    if !entry.arity.admits(args.len()) {
        return Err(Fail::Unsupported(format!(
            "`{builtin}` with {} argument(s)",
            args.len()
        )));
    }
    let v = meaning(cx, builtin, args)?;
    if !v.is_undef() && !entry.returns.admits_kind(v.kind()) {
        return Err(Fail::Unsupported(format!(
            "`{builtin}` gave a {}, its registry entry says {:?}",
            v.kind(),
            entry.returns
        )));
    }
    Ok(v)
}

/// What builtin `builtin` means, on the arguments `args` (their number checked).
fn meaning(cx: &mut Cx<'_>, builtin: &str, args: &[Arg]) -> R<V> {
    let arg = |i: usize| &args[i].value;
    match builtin {
        "effect_class" => Ok(V::Str(cx.view.effect_class(cx.root))),
        "requested" => match value(cx, arg(0))? {
            V::Str(class) => Ok(V::Bool(cx.view.asked_for(&class))),
            V::Undef => Ok(V::Undef),
            other => Err(Fail::Type(format!(
                "requested(…) needs an effect class, not {}",
                other.kind()
            ))),
        },
        "delegated" => Ok(V::Bool(cx.view.delegated())),
        "requested_object" => Ok(V::Bool(cx.view.requested_object(cx.root))),
        "turns_since" => {
            let label = label_name(cx, arg(0))?;
            Ok(V::Num(cx.view.turns_since(&label)))
        }
        "found_in" => {
            let x = carrier(cx, arg(0))?;
            let value = match &x {
                V::Undef => return Ok(V::Undef),
                V::Obj(m) => m
                    .iter()
                    .find(|(k, _)| k == "value")
                    .map_or(x.clone(), |(_, v)| v.clone()),
                _ => x.clone(),
            };
            let origin = match &arg(1).kind {
                ExprKind::Name(n) | ExprKind::String(n) => n.clone(),
                _ => return Err(Fail::Unsupported("found_in's origin".into())),
            };
            Ok(V::Bool(cx.view.found_in(&value, &origin)))
        }
        "read_at" => {
            let c = carrier(cx, arg(0))?;
            let Some(node) = cx.view.node_of(&c) else {
                return Ok(V::Undef);
            };
            cx.view.read_at(&node.source_places)
        }
        "lineage_inferred" => {
            let c = carrier(cx, arg(0))?;
            Ok(cx
                .view
                .node_of(&c)
                .map_or(V::Undef, |n| V::Bool(n.inferred)))
        }
        "taken_from" | "taken_only_from" | "sources" => {
            let c = carrier(cx, arg(0))?;
            let Some(node) = cx.view.node_of(&c) else {
                return Ok(V::Undef);
            };
            if builtin == "sources" {
                return Ok(V::List(
                    crate::acs::fields::ORIGINS
                        .iter()
                        .filter(|o| node.sources.contains(**o))
                        .map(|o| V::Str(o.to_string()))
                        .collect(),
                ));
            }
            let only = builtin == "taken_only_from";
            Ok(V::Bool(match cx.resolution(arg(1).span) {
                Some((Resolution::Label { name: l, .. }, _)) if only => {
                    node.source_all.contains(l.as_str())
                }
                Some((Resolution::Label { name: l, .. }, _)) => {
                    node.source_any.contains(l.as_str())
                }
                _ => {
                    let origin = match &arg(1).kind {
                        ExprKind::Name(n) | ExprKind::String(n) => n.clone(),
                        _ => return Err(Fail::Unsupported("taken_from's origin".into())),
                    };
                    if only {
                        !node.sources.is_empty() && node.sources.iter().all(|o| *o == origin)
                    } else {
                        node.sources.contains(&origin)
                    }
                }
            }))
        }
        "derived_from" | "lineage_depth" => {
            let c = carrier(cx, arg(0))?;
            let Some(node) = cx.view.node_of(&c) else {
                return Ok(V::Undef);
            };
            if builtin == "lineage_depth" {
                return Ok(V::Num(node.depth as f64));
            }
            let origin = match &arg(1).kind {
                ExprKind::Name(n) | ExprKind::String(n) => n.clone(),
                _ => return Err(Fail::Unsupported("derived_from's origin".into())),
            };
            Ok(V::Bool(node.origins.contains(&origin)))
        }
        "present" => Ok(V::Bool(!value(cx, arg(0))?.is_undef())),
        "len" => match value(cx, arg(0))? {
            V::Undef => Ok(V::Undef),
            V::Str(s) => Ok(V::Num(s.chars().count() as f64)),
            V::List(items) => Ok(V::Num(items.len() as f64)),
            V::Obj(members) => Ok(V::Num(members.len() as f64)),
            other => type_error(format!("len of a {}", other.kind())),
        },
        "lower" | "upper" => match value(cx, arg(0))? {
            V::Undef => Ok(V::Undef),
            V::Str(s) => Ok(V::Str(if builtin == "lower" {
                s.to_lowercase()
            } else {
                s.to_uppercase()
            })),
            other => type_error(format!("{builtin} of a {}", other.kind())),
        },
        "starts_with" | "ends_with" => {
            let s = value(cx, arg(0))?;
            let p = value(cx, arg(1))?;
            match (&s, &p) {
                (V::Undef, _) | (_, V::Undef) => Ok(V::Undef),
                (V::Str(s), V::Str(p)) => Ok(V::Bool(if builtin == "starts_with" {
                    s.starts_with(p.as_str())
                } else {
                    s.ends_with(p.as_str())
                })),
                _ => type_error(format!("{builtin} of a {} and a {}", s.kind(), p.kind())),
            }
        }
        "contains" => {
            let c = value(cx, arg(0))?;
            let x = value(cx, arg(1))?;
            match (&c, &x) {
                (V::Undef, _) | (_, V::Undef) => Ok(V::Undef),
                (V::Str(s), V::Str(part)) => Ok(V::Bool(s.contains(part.as_str()))),
                (V::Str(_), other) => {
                    type_error(format!("contains of a string and a {}", other.kind()))
                }
                (V::List(_) | V::Obj(_), _) => Ok(member_of(&x, &c)?.map_or(V::Undef, V::Bool)),
                (other, _) => type_error(format!("contains of a {}", other.kind())),
            }
        }
        other => Err(Fail::Unsupported(format!("the builtin `{other}`"))),
    }
}

/// An unanchored regular-expression search for the subset the generator writes: literal
/// characters, `.`, `*` after a character or `.`, a leading `^` and a trailing `$` (Kernighan
/// and Pike's matcher). Within that subset it means what the `regex` crate means.
pub fn regex_search(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    if p.first() == Some(&'^') {
        return match_here(&p[1..], &t);
    }
    (0..=t.len()).any(|i| match_here(&p, &t[i..]))
}

fn match_here(p: &[char], t: &[char]) -> bool {
    match p {
        [] => true,
        [c, '*', rest @ ..] => {
            // Zero or more of `c`, then the rest.
            let mut i = 0;
            loop {
                if match_here(rest, &t[i..]) {
                    return true;
                }
                if i < t.len() && (*c == '.' || t[i] == *c) {
                    i += 1;
                } else {
                    return false;
                }
            }
        }
        ['$'] => t.is_empty(),
        [c, rest @ ..] => !t.is_empty() && (*c == '.' || t[0] == *c) && match_here(rest, &t[1..]),
    }
}

/// What the provenance graph knows about one node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeView {
    pub labels: BTreeSet<String>,
    pub origins: BTreeSet<String>,
    pub depth: u32,
    /// The node's own origin (what its record says).
    pub own: String,
    /// Its direct sources: their own origins, and the labels some / every one of them
    /// carries (`taken_from`, `taken_only_from`, `sources`).
    pub sources: BTreeSet<String>,
    pub source_any: BTreeSet<String>,
    pub source_all: BTreeSet<String>,
    /// Whether its sources were inferred (no stated lineage).
    pub inferred: bool,
    /// The places its content was read at (`read_at`): its own (a call's result) and its
    /// parents'; and those of its direct sources.
    pub places: BTreeSet<String>,
    pub source_places: BTreeSet<String>,
}

/// The provenance id a carrier names: the object itself when it is a Provenance record, or its
/// `provenance` member.
pub fn provenance_id(c: &V) -> Option<String> {
    let V::Obj(members) = c else { return None };
    let has = |k: &str| members.iter().any(|(m, _)| m == k);
    let prov = if has("provenance_id") && has("origin") {
        c.clone()
    } else {
        c.get("provenance")
    };
    match prov.get("provenance_id") {
        V::Str(id) => Some(id),
        _ => None,
    }
}

/// Memo of constants' values, by name.
pub type Constants = std::cell::RefCell<HashMap<String, V>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_subset() {
        assert!(regex_search("^/etc/shadow", "/etc/shadow"));
        assert!(regex_search("rm -rf.*", "sudo rm -rf /"));
        assert!(!regex_search("^rm", "sudo rm"));
        assert!(regex_search("b.b$", "xbob"));
        assert!(!regex_search("b.b$", "bobx"));
        assert!(regex_search("x*", ""));
        assert!(regex_search("^se*nd", "snd"));
    }

    #[test]
    fn kleene_and_kinds() {
        assert_eq!(equal(&V::Undef, &V::Num(1.0)), Ok(None));
        assert!(matches!(
            equal(&V::Str("1".into()), &V::Num(1.0)),
            Err(Fail::Type(_))
        ));
        assert_eq!(
            equal(&V::List(vec![V::Num(1.0)]), &V::List(vec![V::Num(1.0)])),
            Ok(Some(true))
        );
        assert!(matches!(
            member_of(&V::List(vec![]), &V::List(vec![V::Str("a".into())])),
            Err(Fail::Type(_))
        ));
    }
}
