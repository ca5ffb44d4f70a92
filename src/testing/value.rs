//! Test values: the literal expressions of a test (`send` payloads, call arguments, outputs,
//! mock values) evaluated to JSON, with `let` constants of the policy folded in.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::compile::num_json;
use crate::syntax::ast::{BinaryOp, Expr, ExprKind, Item, UnaryOp};

/// The `let` constants of a policy, by name, as unevaluated expressions.
#[derive(Default)]
pub struct Constants<'a> {
    exprs: HashMap<&'a str, &'a Expr>,
}

impl<'a> Constants<'a> {
    pub fn new(checked: &'a crate::check::Checked) -> Self {
        let mut exprs = HashMap::new();
        for unit in &checked.loaded.units {
            for item in &unit.module.items {
                if let Item::Let(l) = item {
                    exprs.entry(l.name.name.as_str()).or_insert(&l.value);
                }
            }
        }
        Constants { exprs }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.exprs.contains_key(name)
    }

    /// Evaluates a test expression to JSON. Bare names are constants if the policy has one by
    /// that name, else the word itself (`operation: read` is the string `"read"`, as enum
    /// words are in conditions).
    pub fn json(&self, e: &Expr) -> Result<Value, String> {
        self.eval(e, 0)
    }

    fn eval(&self, e: &Expr, depth: usize) -> Result<Value, String> {
        if depth > 64 {
            return Err("constants refer to each other too deeply".into());
        }
        Ok(match &e.kind {
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Number(n) => num_json(*n),
            ExprKind::Duration(d) => Value::from(d.millis),
            ExprKind::String(s) => Value::String(s.clone()),
            ExprKind::Name(n) => match self.exprs.get(n.as_str()) {
                Some(c) => self.eval(c, depth + 1)?,
                None => Value::String(n.clone()),
            },
            ExprKind::Set(items) | ExprKind::List(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.eval(i, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Object(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.value.clone(), self.eval(v, depth + 1)?);
                }
                Value::Object(m)
            }
            ExprKind::Unary(UnaryOp::Neg, x) => match self.eval(x, depth + 1)?.as_f64() {
                Some(n) => num_json(-n),
                None => return Err("`-` needs a number".into()),
            },
            ExprKind::Unary(UnaryOp::Not, x) => match self.eval(x, depth + 1)? {
                Value::Bool(b) => Value::Bool(!b),
                _ => return Err("`not` needs a boolean".into()),
            },
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.eval(a, depth + 1)?, self.eval(b, depth + 1)?);
                match (op, a.as_f64(), b.as_f64()) {
                    (BinaryOp::Add, Some(x), Some(y)) => num_json(x + y),
                    (BinaryOp::Sub, Some(x), Some(y)) => num_json(x - y),
                    (BinaryOp::Mul, Some(x), Some(y)) => num_json(x * y),
                    (BinaryOp::Div, Some(x), Some(y)) if y != 0.0 => num_json(x / y),
                    (BinaryOp::Add, _, _) if a.is_string() && b.is_string() => Value::String(
                        format!("{}{}", a.as_str().unwrap_or(""), b.as_str().unwrap_or("")),
                    ),
                    _ => {
                        return Err(format!(
                            "`{}` cannot be evaluated in a test value",
                            op.as_str()
                        ))
                    }
                }
            }
            _ => return Err(
                "a test value must be a literal: a string, number, boolean, list, set or object"
                    .into(),
            ),
        })
    }
}

/// What kind of value a constant is, for mock type checks.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a collection",
        Value::Object(_) => "an object",
        Value::Null => "null",
    }
}
