//! Run-time values. Most borrow from the event's JSON or the constant pool, so the common
//! predicates (a field compared with a constant, membership in a constant set) allocate nothing.

use std::borrow::Cow;
use std::rc::Rc;

use serde_json::Value;

use crate::compile::{Const, Op};

#[derive(Debug, Clone)]
pub enum Val<'a> {
    /// Absent, or the result of an operation on the wrong types: neither true nor false.
    Undef,
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    /// A JSON array or object from the event.
    Json(&'a Value),
    /// A collection or object from the constant pool.
    Const(&'a Const),
    /// A collection built at run time.
    List(Rc<Vec<Val<'a>>>),
    /// A JSON array or object computed at run time (a Rego result).
    Owned(Rc<Value>),
}

impl<'a> Val<'a> {
    pub fn from_json(v: &'a Value) -> Val<'a> {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => n.as_f64().map_or(Val::Undef, Val::Num),
            Value::String(s) => Val::Str(Cow::Borrowed(s)),
            _ => Val::Json(v),
        }
    }

    /// A value computed at run time.
    pub fn owned(v: Value) -> Val<'a> {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(b),
            Value::Number(n) => n.as_f64().map_or(Val::Undef, Val::Num),
            Value::String(s) => Val::Str(Cow::Owned(s)),
            other => Val::Owned(Rc::new(other)),
        }
    }

    pub fn from_const(c: &'a Const) -> Val<'a> {
        match c {
            Const::Bool(b) => Val::Bool(*b),
            Const::Num(n) => Val::Num(*n),
            Const::Str(s) => Val::Str(Cow::Borrowed(s)),
            _ => Val::Const(c),
        }
    }

    pub fn truth(&self) -> Option<bool> {
        match self {
            Val::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn member(&self, key: &str) -> Val<'a> {
        match self {
            Val::Json(Value::Object(m)) => m.get(key).map_or(Val::Undef, Val::from_json),
            Val::Const(Const::Json(v)) => match &**v {
                Value::Object(m) => m.get(key).map_or(Val::Undef, Val::from_json),
                _ => Val::Undef,
            },
            Val::Owned(v) => v.get(key).map_or(Val::Undef, |c| Val::owned(c.clone())),
            _ => Val::Undef,
        }
    }

    pub fn index(&self, i: &Val<'_>) -> Val<'a> {
        match (self, i) {
            (Val::Json(Value::Array(a)), Val::Num(n)) if *n >= 0.0 && n.fract() == 0.0 => {
                a.get(*n as usize).map_or(Val::Undef, Val::from_json)
            }
            (Val::Json(Value::Object(m)), Val::Str(k)) => {
                m.get(&**k).map_or(Val::Undef, Val::from_json)
            }
            (Val::Owned(v), Val::Num(n)) if *n >= 0.0 && n.fract() == 0.0 => v
                .get(*n as usize)
                .map_or(Val::Undef, |c| Val::owned(c.clone())),
            (Val::Owned(v), Val::Str(k)) => {
                v.get(&**k).map_or(Val::Undef, |c| Val::owned(c.clone()))
            }
            (Val::List(items), Val::Num(n)) if *n >= 0.0 && n.fract() == 0.0 => {
                items.get(*n as usize).cloned().unwrap_or(Val::Undef)
            }
            (Val::Const(Const::List(items) | Const::StrSet(_, items)), Val::Num(n))
                if *n >= 0.0 && n.fract() == 0.0 =>
            {
                items.get(*n as usize).map_or(Val::Undef, Val::from_const)
            }
            _ => Val::Undef,
        }
    }

    /// A tool argument `{value, provenance}` as its value; anything else unchanged.
    pub fn unwrap_argument(self) -> Val<'a> {
        match self {
            Val::Json(Value::Object(m)) if m.contains_key("value") => {
                m.get("value").map_or(Val::Undef, Val::from_json)
            }
            other => other,
        }
    }

    /// The elements a quantifier ranges over: list items, or an object's values.
    pub fn elements(&self) -> Vec<Val<'a>> {
        match self {
            Val::Json(Value::Array(a)) => a.iter().map(Val::from_json).collect(),
            Val::Json(Value::Object(m)) => m.values().map(Val::from_json).collect(),
            Val::Const(Const::List(items) | Const::StrSet(_, items)) => {
                items.iter().map(Val::from_const).collect()
            }
            Val::List(items) => items.as_ref().clone(),
            Val::Owned(v) => match &**v {
                Value::Array(a) => a.iter().cloned().map(Val::owned).collect(),
                Value::Object(m) => m.values().cloned().map(Val::owned).collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// The JSON form (for modifications and traces).
    pub fn to_json(&self) -> Option<Value> {
        Some(match self {
            Val::Undef => return None,
            Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(*b),
            Val::Num(n) => crate::compile::num_json(*n),
            Val::Str(s) => Value::String(s.to_string()),
            Val::Json(v) => (*v).clone(),
            Val::Const(c) => crate::compile::const_json(c),
            Val::List(items) => Value::Array(items.iter().filter_map(Val::to_json).collect()),
            Val::Owned(v) => (**v).clone(),
        })
    }

    /// The key a keyed history counter is filed under.
    pub fn key_string(&self) -> Option<String> {
        match self {
            Val::Undef => None,
            Val::Str(s) => Some(s.to_string()),
            other => other.to_json().map(|v| crate::acs::jcs::canonicalize(&v)),
        }
    }

    /// A short rendering for explain traces.
    pub fn describe(&self) -> String {
        let text = match self {
            Val::Undef => return "undefined".into(),
            Val::Str(s) => format!("{:?}", &**s),
            other => other
                .to_json()
                .map_or_else(|| "undefined".into(), |v| v.to_string()),
        };
        if text.chars().count() > 80 {
            let cut: String = text.chars().take(77).collect();
            format!("{cut}...")
        } else {
            text
        }
    }

    fn num(&self) -> Option<f64> {
        match self {
            Val::Num(n) => Some(*n),
            _ => None,
        }
    }
}

fn json_eq(a: &Val<'_>, b: &Val<'_>) -> bool {
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        _ => match (a.to_json(), b.to_json()) {
            (Some(x), Some(y)) => !x.is_string() && !x.is_number() && x == y,
            _ => false,
        },
    }
}

fn contains(collection: &Val<'_>, item: &Val<'_>) -> Option<bool> {
    if matches!(item, Val::Undef) {
        return None;
    }
    Some(match collection {
        Val::Undef => return None,
        Val::Const(Const::StrSet(set, _)) => match item {
            Val::Str(s) => set.contains(&**s),
            _ => false,
        },
        Val::Const(Const::List(items)) => items.iter().any(|c| json_eq(&Val::from_const(c), item)),
        Val::Json(Value::Array(a)) => a.iter().any(|v| json_eq(&Val::from_json(v), item)),
        Val::Json(Value::Object(m)) => match item {
            Val::Str(s) => m.contains_key(&**s),
            _ => false,
        },
        Val::List(items) => items.iter().any(|v| json_eq(v, item)),
        Val::Owned(v) => match &**v {
            Value::Array(a) => a.iter().any(|x| json_eq(&Val::from_json(x), item)),
            Value::Object(m) => match item {
                Val::Str(s) => m.contains_key(&**s),
                _ => false,
            },
            _ => return None,
        },
        _ => return None,
    })
}

/// Glob match: `*` matches any run, `?` any one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// A comparison; `None` is undefined.
pub fn compare(op: &Op, a: &Val<'_>, b: &Val<'_>) -> Option<bool> {
    match op {
        Op::In => return contains(b, a),
        Op::NotIn => return contains(b, a).map(|r| !r),
        _ => {}
    }
    if matches!(a, Val::Undef) || matches!(b, Val::Undef) {
        return None;
    }
    match op {
        Op::Eq => Some(json_eq(a, b)),
        Op::Ne => Some(!json_eq(a, b)),
        Op::Matches => match (a, b) {
            (Val::Str(t), Val::Str(p)) => Some(glob(p, t)),
            _ => None,
        },
        _ => {
            let (x, y) = (a.num()?, b.num()?);
            Some(match op {
                Op::Lt => x < y,
                Op::Le => x <= y,
                Op::Gt => x > y,
                _ => x >= y,
            })
        }
    }
}

pub fn arith<'a>(op: &Op, a: Val<'a>, b: Val<'a>) -> Val<'a> {
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => {
            let r = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div if y != 0.0 => x / y,
                Op::Rem if y != 0.0 => x % y,
                _ => return Val::Undef,
            };
            if r.is_finite() {
                Val::Num(r)
            } else {
                Val::Undef
            }
        }
        (Val::Str(x), Val::Str(y)) if matches!(op, Op::Add) => {
            Val::Str(Cow::Owned(format!("{x}{y}")))
        }
        _ => Val::Undef,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("send_*", "send_email"));
        assert!(glob("*", ""));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a*d", "abc"));
        assert!(glob("*.example.com", "mail.example.com"));
    }

    #[test]
    fn undefined_propagates_through_comparisons() {
        assert_eq!(compare(&Op::Eq, &Val::Undef, &Val::Num(1.0)), None);
        assert_eq!(
            compare(&Op::Lt, &Val::Str("a".into()), &Val::Num(1.0)),
            None
        );
        assert_eq!(
            compare(&Op::Eq, &Val::Str("a".into()), &Val::Num(1.0)),
            Some(false)
        );
    }
}
