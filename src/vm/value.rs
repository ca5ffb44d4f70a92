//! Run-time values. Most borrow from the event's JSON or the constant pool, so the common
//! predicates (a field compared with a constant, membership in a constant set) allocate nothing.
//!
//! Two ways a value can fail an operation, kept apart on purpose (docs/language.md §10):
//! *undefined* (the field is absent, or JSON `null`) propagates by Kleene logic and makes a
//! rule not apply; a value that is present but of the wrong type is a [`TypeError`], which
//! fails the whole decision closed. An attacker chooses argument types, so a mistyped value
//! must never make a deny rule quietly not fire.

use std::borrow::Cow;
use std::rc::Rc;

use serde_json::Value;

use crate::compile::{Const, Op};

/// A present value of the wrong type for an operation: the message says which.
pub type TypeError = String;

#[derive(Debug, Clone)]
pub enum Val<'a> {
    /// Absent (or JSON `null`): neither true nor false.
    Undef,
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

/// The run-time kinds a present value can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Number,
    String,
    List,
    Object,
}

impl Kind {
    pub fn article(self) -> &'static str {
        match self {
            Kind::Bool => "a bool",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::List => "a list",
            Kind::Object => "an object",
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::List => "list",
            Kind::Object => "object",
        }
    }
}

fn json_kind(v: &Value) -> Option<Kind> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(_) => Kind::Bool,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Object,
    })
}

impl<'a> Val<'a> {
    pub fn from_json(v: &'a Value) -> Val<'a> {
        match v {
            Value::Null => Val::Undef,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => n.as_f64().map_or(Val::Undef, Val::Num),
            Value::String(s) => Val::Str(Cow::Borrowed(s)),
            _ => Val::Json(v),
        }
    }

    /// The same value, owning what it borrowed (so it may outlive what it was read from).
    pub fn detach<'b>(self) -> Val<'b> {
        match self {
            Val::Undef => Val::Undef,
            Val::Bool(b) => Val::Bool(b),
            Val::Num(n) => Val::Num(n),
            Val::Str(s) => Val::Str(Cow::Owned(s.into_owned())),
            Val::Json(v) => Val::owned(v.clone()),
            Val::Const(c) => Val::owned(crate::compile::const_json(c)),
            Val::List(items) => {
                Val::List(Rc::new(items.iter().cloned().map(Val::detach).collect()))
            }
            Val::Owned(v) => Val::Owned(v),
        }
    }

    /// A value computed at run time.
    pub fn owned(v: Value) -> Val<'a> {
        match v {
            Value::Null => Val::Undef,
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
            // `null`: absent, as JSON null is everywhere in Warden.
            Const::Json(v) if v.is_null() => Val::Undef,
            _ => Val::Const(c),
        }
    }

    /// The kind of a present value; `None` when undefined.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Val::Undef => None,
            Val::Bool(_) => Some(Kind::Bool),
            Val::Num(_) => Some(Kind::Number),
            Val::Str(_) => Some(Kind::String),
            Val::Json(v) => json_kind(v),
            Val::Owned(v) => json_kind(v),
            Val::List(_) => Some(Kind::List),
            Val::Const(c) => match c {
                Const::Bool(_) => Some(Kind::Bool),
                Const::Num(_) => Some(Kind::Number),
                Const::Str(_) => Some(Kind::String),
                Const::StrSet(..) | Const::List(_) => Some(Kind::List),
                Const::Json(v) => json_kind(v),
            },
        }
    }

    /// "a string \"5000\"": the kind and a short rendering, for type-error messages.
    /// What a type error says the value is: its kind only, never its content (the message
    /// reaches the answer's reasoning and the decision log, where a secret must not; the explain
    /// trace shows the value, masked).
    pub fn what(&self) -> String {
        match self.kind() {
            None => "undefined".into(),
            Some(k) => k.article().to_string(),
        }
    }

    pub fn is_undef(&self) -> bool {
        matches!(self, Val::Undef)
    }

    /// The truth of a condition: `Ok(None)` when undefined, a type error when present and not
    /// a bool.
    pub fn truth_checked(&self, what: &str) -> Result<Option<bool>, TypeError> {
        match self {
            Val::Bool(b) => Ok(Some(*b)),
            Val::Undef => Ok(None),
            other => Err(format!(
                "{what} must be true or false, not {}",
                other.what()
            )),
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

    /// Member `key` of an object. Undefined if the object lacks it (or is itself undefined);
    /// a type error on a present value that is not an object.
    pub fn member(&self, key: &str) -> Result<Val<'a>, TypeError> {
        match self {
            Val::Undef => Ok(Val::Undef),
            Val::Json(Value::Object(m)) if implicit_provenance(m, key) => {
                Ok(Val::Json(&IMPLICIT_PROVENANCE))
            }
            Val::Owned(v) if v.as_object().is_some_and(|m| implicit_provenance(m, key)) => {
                Ok(Val::Json(&IMPLICIT_PROVENANCE))
            }
            Val::Json(Value::Object(m)) => {
                Ok(crate::acs::fields::map_member(m, key).map_or(Val::Undef, Val::from_json))
            }
            Val::Const(c) => {
                let c: &'a Const = c;
                match c {
                    Const::Json(v) => match &**v {
                        Value::Object(m) => Ok(m.get(key).map_or(Val::Undef, Val::from_json)),
                        _ => Err(format!(
                            "`.{key}` reads an object's member, not {}",
                            self.what()
                        )),
                    },
                    _ => Err(format!(
                        "`.{key}` reads an object's member, not {}",
                        self.what()
                    )),
                }
            }
            Val::Owned(v) => match &**v {
                Value::Object(m) => Ok(m.get(key).map_or(Val::Undef, |c| Val::owned(c.clone()))),
                _ => Err(format!(
                    "`.{key}` reads an object's member, not {}",
                    self.what()
                )),
            },
            other => Err(format!(
                "`.{key}` reads an object's member, not {}",
                other.what()
            )),
        }
    }

    /// `base[i]`: a list element by whole-number index, or an object member by string key.
    /// Undefined when absent or out of range; a type error for a key of the wrong kind or a
    /// base that is neither a list nor an object.
    pub fn index(&self, i: &Val<'_>) -> Result<Val<'a>, TypeError> {
        if self.is_undef() || i.is_undef() {
            return Ok(Val::Undef);
        }
        let whole = |n: f64| (n >= 0.0 && n.fract() == 0.0).then_some(n as usize);
        match (self.kind(), i) {
            (Some(Kind::List), Val::Num(n)) => {
                let Some(n) = whole(*n) else {
                    return Ok(Val::Undef);
                };
                Ok(match self {
                    Val::Json(Value::Array(a)) => a.get(n).map_or(Val::Undef, Val::from_json),
                    Val::Owned(v) => v.get(n).map_or(Val::Undef, |c| Val::owned(c.clone())),
                    Val::List(items) => items.get(n).cloned().unwrap_or(Val::Undef),
                    Val::Const(c) => {
                        let c: &'a Const = c;
                        match c {
                            Const::List(items) | Const::StrSet(_, items) => {
                                items.get(n).map_or(Val::Undef, Val::from_const)
                            }
                            Const::Json(v) => v.get(n).map_or(Val::Undef, Val::from_json),
                            _ => Val::Undef,
                        }
                    }
                    _ => Val::Undef,
                })
            }
            (Some(Kind::Object), Val::Str(k)) => self.member(k),
            (Some(Kind::List), other) => Err(format!(
                "a list is indexed by a whole number, not {}",
                other.what()
            )),
            (Some(Kind::Object), other) => Err(format!(
                "an object is indexed by a string key, not {}",
                other.what()
            )),
            _ => Err(format!(
                "`[…]` indexes a list or an object, not {}",
                self.what()
            )),
        }
    }

    /// A tool argument `{value, provenance}` as its value; anything else unchanged.
    pub fn unwrap_argument(self) -> Val<'a> {
        match self {
            Val::Json(Value::Object(m)) if m.contains_key("value") => {
                m.get("value").map_or(Val::Undef, Val::from_json)
            }
            Val::Owned(v) => match &*v {
                Value::Object(m) if m.contains_key("value") => {
                    m.get("value").cloned().map_or(Val::Undef, Val::owned)
                }
                _ => Val::Owned(v),
            },
            other => other,
        }
    }

    /// The JSON object of a carrier (an event's or one built for a list argument's element).
    pub fn carrier_json(&self) -> Option<&Value> {
        match self {
            Val::Json(j) => Some(j),
            Val::Owned(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of a list argument `{value: [..], provenance}`, each an argument of its own:
    /// `{value: item, provenance: P}`, where P is the item's own record when the platform sends
    /// one (`provenance.elements[i]`, Warden's extension) and the list's otherwise, so each
    /// element's sources are found (or inferred) for it alone. An argument holding one value
    /// (not a list) is a list of itself; anything that is not an argument is returned as it is.
    pub fn argument_elements(self) -> Result<Val<'a>, TypeError> {
        let Some(Value::Object(m)) = self.carrier_json() else {
            return Ok(self);
        };
        let Some(value) = m.get("value") else {
            return Ok(self);
        };
        let prov = m.get("provenance");
        let items = match value {
            Value::Null => return Ok(Val::Undef),
            Value::Array(items) => items,
            // An argument holding one value ranges over that value.
            _ => return Ok(Val::List(Rc::new(vec![self]))),
        };
        let own = prov
            .and_then(|p| p.get("elements"))
            .and_then(Value::as_array);
        let elements = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let p = own
                    .and_then(|o| o.get(i))
                    .filter(|p| p.is_object())
                    .or(prov);
                let mut carrier = serde_json::Map::with_capacity(2);
                carrier.insert("value".into(), item.clone());
                if let Some(p) = p {
                    carrier.insert("provenance".into(), p.clone());
                }
                Val::Owned(Rc::new(Value::Object(carrier)))
            })
            .collect();
        Ok(Val::List(Rc::new(elements)))
    }

    /// `links(x)`: the web and e-mail addresses written in a text (or in the strings of a
    /// list), each `{value: link}`: an argument with no lineage of its own (the text's record
    /// says where the text came from, not each address in it), so where each was taken from is
    /// inferred from its own text.
    pub fn links(&self) -> Result<Val<'a>, TypeError> {
        let value = match self.carrier_json() {
            Some(Value::Object(m)) if m.contains_key("value") => {
                m.get("value").cloned().unwrap_or(Value::Null)
            }
            _ => match self.to_json() {
                Some(v) => v,
                None => return Ok(Val::Undef),
            },
        };
        let mut texts = Vec::new();
        match &value {
            Value::Null => return Ok(Val::Undef),
            Value::String(s) => texts.push(s.as_str()),
            Value::Array(items) => texts.extend(items.iter().filter_map(Value::as_str)),
            other => {
                return Err(format!(
                    "links(…) reads a text, not {}",
                    Val::from_json(other).what()
                ))
            }
        }
        let found = texts
            .into_iter()
            .flat_map(super::links::links)
            .map(|link| {
                let mut carrier = serde_json::Map::with_capacity(1);
                carrier.insert("value".into(), Value::String(link));
                Val::Owned(Rc::new(Value::Object(carrier)))
            })
            .collect();
        Ok(Val::List(Rc::new(found)))
    }

    /// The names (of an object) or positions (of a list) of what `elements` returns, in the
    /// same order.
    pub fn element_keys(&self) -> Vec<Val<'a>> {
        let object_keys = |m: &serde_json::Map<String, Value>| -> Vec<Val<'a>> {
            m.keys().map(|k| Val::Str(Cow::Owned(k.clone()))).collect()
        };
        let positions = |n: usize| (0..n).map(|i| Val::Num(i as f64)).collect();
        match self {
            Val::Json(Value::Object(m)) => object_keys(m),
            Val::Owned(v) if v.is_object() => v.as_object().map(object_keys).unwrap_or_default(),
            Val::Json(Value::Array(a)) => positions(a.len()),
            Val::Owned(v) => positions(v.as_array().map_or(0, Vec::len)),
            Val::Const(Const::Json(v)) => match &**v {
                Value::Object(m) => object_keys(m),
                Value::Array(a) => positions(a.len()),
                _ => Vec::new(),
            },
            Val::Const(Const::List(items) | Const::StrSet(_, items)) => positions(items.len()),
            Val::List(items) => positions(items.len()),
            _ => Vec::new(),
        }
    }

    /// The elements a quantifier ranges over: list items, or an object's values. `Ok(None)`
    /// when the collection is undefined; a type error when it is present but not a collection.
    pub fn elements(&self) -> Result<Option<Vec<Val<'a>>>, TypeError> {
        Ok(Some(match self {
            Val::Undef => return Ok(None),
            Val::Json(Value::Array(a)) => a.iter().map(Val::from_json).collect(),
            Val::Json(Value::Object(m)) => m.values().map(Val::from_json).collect(),
            Val::Const(c) => {
                let c: &'a Const = c;
                match c {
                    Const::List(items) | Const::StrSet(_, items) => {
                        items.iter().map(Val::from_const).collect()
                    }
                    Const::Json(v) => match &**v {
                        Value::Array(a) => a.iter().map(Val::from_json).collect(),
                        Value::Object(m) => m.values().map(Val::from_json).collect(),
                        _ => return Err(not_collection(self)),
                    },
                    _ => return Err(not_collection(self)),
                }
            }
            Val::List(items) => items.as_ref().clone(),
            Val::Owned(v) => match &**v {
                Value::Array(a) => a.iter().cloned().map(Val::owned).collect(),
                Value::Object(m) => m.values().cloned().map(Val::owned).collect(),
                _ => return Err(not_collection(self)),
            },
            other => return Err(not_collection(other)),
        }))
    }

    /// The JSON form (for modifications and traces).
    pub fn to_json(&self) -> Option<Value> {
        Some(match self {
            Val::Undef => return None,
            Val::Bool(b) => Value::Bool(*b),
            Val::Num(n) => crate::compile::num_json(*n),
            Val::Str(s) => Value::String(s.to_string()),
            Val::Json(v) => (*v).clone(),
            Val::Const(c) => crate::compile::const_json(c),
            Val::List(items) => Value::Array(items.iter().filter_map(Val::to_json).collect()),
            Val::Owned(v) => (**v).clone(),
        })
    }

    /// The JSON form of a value passed to Rego: `None` when it is undefined or holds an
    /// undefined element anywhere (Rego makes such a call undefined).
    pub fn to_json_strict(&self) -> Option<Value> {
        match self {
            Val::Undef => None,
            Val::List(items) => items
                .iter()
                .map(Val::to_json_strict)
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            other => other.to_json(),
        }
    }

    /// The key a keyed history counter is filed under.
    pub fn key_string(&self) -> Option<String> {
        match self {
            Val::Undef => None,
            // A key with an undefined part is undefined, not a shorter key.
            Val::List(items) if items.iter().any(Val::is_undef) => None,
            // Every key in its JSON form, so `"1"` and `1` are different keys.
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
}

/// What `x.provenance` reads for a carrier sent without one (`{value}` alone): model output
/// with no stated lineage (docs/language.md §4, rule 6), so that `x.provenance.origin` is
/// defined and a rule over it cannot go unfired.
static IMPLICIT_PROVENANCE: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| serde_json::json!({"origin": "agent_generated"}));

fn implicit_provenance(m: &serde_json::Map<String, Value>, key: &str) -> bool {
    use crate::acs::fields::map_member;
    key == "provenance" && map_member(m, "value").is_some() && map_member(m, "provenance").is_none()
}

fn not_collection(v: &Val<'_>) -> TypeError {
    format!(
        "`any`/`all` range over a list or an object, not {}",
        v.what()
    )
}

/// Deep equality of two present values of the same kind.
fn same(a: &Val<'_>, b: &Val<'_>) -> bool {
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        _ => match (a.to_json(), b.to_json()) {
            (Some(x), Some(y)) => json_same(&x, &y),
            _ => false,
        },
    }
}

/// JSON equality where numbers compare by value (1 == 1.0).
fn json_same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_same(v, w)))
        }
        _ => a == b,
    }
}

/// `a == b` on present values: a type error when their kinds differ (a string is never
/// silently unequal to a list holding it).
fn equal(a: &Val<'_>, b: &Val<'_>) -> Result<bool, TypeError> {
    match (a.kind(), b.kind()) {
        (Some(x), Some(y)) if x == y => Ok(same(a, b)),
        _ => Err(format!("cannot compare {} with {}", a.what(), b.what())),
    }
}

/// `item in collection`.
fn contains(collection: &Val<'_>, item: &Val<'_>) -> Result<Option<bool>, TypeError> {
    if item.is_undef() || collection.is_undef() {
        return Ok(None);
    }
    let wrong_item = |elem: Kind| {
        Err(format!(
            "`in` looks for {} in a collection of {}s, not for {}",
            elem.article(),
            elem.word(),
            item.what()
        ))
    };
    let key_in = |m: &serde_json::Map<String, Value>| match item {
        Val::Str(s) => Ok(Some(m.contains_key(&**s))),
        _ => Err(format!(
            "`in` on an object looks for a string key, not {}",
            item.what()
        )),
    };
    // Elements of one declared kind (constants, literals): the item must be of that kind.
    let typed = |elems: &mut dyn Iterator<Item = Val<'_>>| -> Result<Option<bool>, TypeError> {
        let mut kind = None;
        for e in elems {
            let k = e.kind();
            if kind.is_none() {
                kind = k;
                if k.is_some() && k != item.kind() {
                    return wrong_item(k.unwrap_or(Kind::String));
                }
            }
            if k == item.kind() && same(&e, item) {
                return Ok(Some(true));
            }
        }
        Ok(Some(false))
    };
    // Elements from the event may mix kinds: an element of another kind is simply not equal.
    let loose = |elems: &mut dyn Iterator<Item = Val<'_>>| {
        for e in elems {
            if e.kind() == item.kind() && same(&e, item) {
                return Ok(Some(true));
            }
        }
        Ok(Some(false))
    };
    match collection {
        Val::Const(Const::StrSet(set, _)) => match item {
            Val::Str(s) => Ok(Some(set.contains(&**s))),
            _ => wrong_item(Kind::String),
        },
        Val::Const(Const::List(items)) => typed(&mut items.iter().map(Val::from_const)),
        Val::Json(Value::Array(a)) => loose(&mut a.iter().map(Val::from_json)),
        Val::Const(Const::Json(v)) if v.is_array() => {
            let a = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
            loose(&mut a.iter().map(Val::from_json))
        }
        Val::Json(Value::Object(m)) => key_in(m),
        Val::Const(Const::Json(v)) if v.is_object() => {
            key_in(v.as_object().expect("checked to be an object"))
        }
        Val::List(items) => typed(&mut items.iter().cloned()),
        Val::Owned(v) => match &**v {
            Value::Array(a) => loose(&mut a.iter().map(Val::from_json)),
            Value::Object(m) => key_in(m),
            _ => Err(format!(
                "`in` needs a collection, not {}",
                collection.what()
            )),
        },
        other => Err(format!("`in` needs a collection, not {}", other.what())),
    }
}

/// Glob match over the whole text: `*` matches any run, `?` any one character.
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

fn op_word(op: &Op) -> &'static str {
    match op {
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Add => "+",
        Op::Sub => "-",
        Op::Mul => "*",
        Op::Div => "/",
        Op::Rem => "%",
        Op::Eq => "==",
        Op::Ne => "!=",
        _ => "in",
    }
}

/// A comparison: `Ok(None)` is undefined (an operand is absent); `Err` a type error.
pub fn compare(op: &Op, a: &Val<'_>, b: &Val<'_>) -> Result<Option<bool>, TypeError> {
    match op {
        Op::In => return contains(b, a),
        Op::NotIn => return Ok(contains(b, a)?.map(|r| !r)),
        _ => {}
    }
    if a.is_undef() || b.is_undef() {
        return Ok(None);
    }
    match op {
        Op::Eq => equal(a, b).map(Some),
        Op::Ne => equal(a, b).map(|r| Some(!r)),
        _ => match (a, b) {
            (Val::Num(x), Val::Num(y)) => Ok(Some(match op {
                Op::Lt => x < y,
                Op::Le => x <= y,
                Op::Gt => x > y,
                _ => x >= y,
            })),
            _ => Err(format!(
                "`{}` orders numbers, not {} and {}",
                op_word(op),
                a.what(),
                b.what()
            )),
        },
    }
}

/// `text matches pattern` with a pattern compiled when the policy loaded.
pub fn regex_match(re: &regex::Regex, text: &Val<'_>) -> Result<Option<bool>, TypeError> {
    match text {
        Val::Undef => Ok(None),
        Val::Str(s) => Ok(Some(re.is_match(s))),
        other => Err(format!("`matches` needs a string, not {}", other.what())),
    }
}

pub fn arith<'a>(op: &Op, a: Val<'a>, b: Val<'a>) -> Result<Val<'a>, TypeError> {
    if a.is_undef() || b.is_undef() {
        return Ok(Val::Undef);
    }
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => {
            let r = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div if y != 0.0 => x / y,
                Op::Rem if y != 0.0 => x % y,
                // Division by zero has no value: undefined, like an absent operand.
                _ => return Ok(Val::Undef),
            };
            Ok(if r.is_finite() {
                Val::Num(r)
            } else {
                Val::Undef
            })
        }
        (Val::Str(x), Val::Str(y)) if matches!(op, Op::Add) => {
            Ok(Val::Str(Cow::Owned(format!("{x}{y}"))))
        }
        (a, b) => Err(format!(
            "`{}` works on numbers{}, not {} and {}",
            op_word(op),
            if matches!(op, Op::Add) {
                " (or two strings)"
            } else {
                ""
            },
            a.what(),
            b.what()
        )),
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
    fn undefined_propagates_and_wrong_types_are_errors() {
        assert_eq!(compare(&Op::Eq, &Val::Undef, &Val::Num(1.0)), Ok(None));
        assert!(compare(&Op::Lt, &Val::Str("a".into()), &Val::Num(1.0)).is_err());
        assert!(compare(&Op::Eq, &Val::Str("a".into()), &Val::Num(1.0)).is_err());
        let list = serde_json::json!(["XX99"]);
        let set = Const::StrSet(
            std::sync::Arc::new(["XX99".into()].into_iter().collect()),
            std::sync::Arc::new(vec![Const::Str("XX99".into())]),
        );
        let r = compare(&Op::In, &Val::from_json(&list), &Val::Const(&set));
        assert!(
            r.is_err(),
            "a list is not silently absent from a set of strings: {r:?}"
        );
        assert_eq!(
            compare(
                &Op::Eq,
                &Val::Num(1.0),
                &Val::from_json(&serde_json::json!(1.0))
            ),
            Ok(Some(true))
        );
    }
}
