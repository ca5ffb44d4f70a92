//! The builtin functions. Each is total over undefined (an absent argument gives undefined)
//! and strict over types: a present argument of the wrong type is a type error, never a
//! silent `false`.

use std::borrow::Cow;

use serde_json::Value;

use super::value::TypeError;
use super::Val;
use crate::compile::{Builtin, Const};

/// The name a policy calls it by (the registry's, `check::builtins`).
fn name(b: Builtin) -> &'static str {
    b.name()
}

pub fn call<'a>(b: Builtin, args: &[Val<'a>]) -> Result<Val<'a>, TypeError> {
    // Undefined in, undefined out.
    if args.iter().any(Val::is_undef) || args.is_empty() {
        return Ok(Val::Undef);
    }
    let text = |i: usize| -> Result<&str, TypeError> {
        match args.get(i) {
            Some(Val::Str(s)) => Ok(s),
            Some(other) => Err(format!(
                "{}(…) needs a string as argument {}, not {}",
                name(b),
                i + 1,
                other.what()
            )),
            None => Err(format!("{}(…) is missing argument {}", name(b), i + 1)),
        }
    };
    Ok(match b {
        Builtin::Len => match &args[0] {
            Val::Str(x) => Val::Num(x.chars().count() as f64),
            Val::Json(Value::Array(a)) => Val::Num(a.len() as f64),
            Val::Json(Value::Object(m)) => Val::Num(m.len() as f64),
            Val::Const(Const::List(items) | Const::StrSet(_, items)) => {
                Val::Num(items.len() as f64)
            }
            Val::Const(Const::Json(v)) if v.is_array() || v.is_object() => Val::Num(
                v.as_array()
                    .map(Vec::len)
                    .or_else(|| v.as_object().map(serde_json::Map::len))
                    .unwrap_or(0) as f64,
            ),
            Val::List(items) => Val::Num(items.len() as f64),
            Val::Owned(v) if v.is_array() || v.is_object() => Val::Num(
                v.as_array()
                    .map(Vec::len)
                    .or_else(|| v.as_object().map(serde_json::Map::len))
                    .unwrap_or(0) as f64,
            ),
            other => {
                return Err(format!(
                    "len(…) measures a string, list or object, not {}",
                    other.what()
                ))
            }
        },
        Builtin::Lower => Val::Str(Cow::Owned(text(0)?.to_lowercase())),
        Builtin::Upper => Val::Str(Cow::Owned(text(0)?.to_uppercase())),
        Builtin::StartsWith => Val::Bool(text(0)?.starts_with(text(1)?)),
        Builtin::EndsWith => Val::Bool(text(0)?.ends_with(text(1)?)),
        Builtin::Glob => Val::Bool(super::value::glob(text(1)?, text(0)?)),
        Builtin::Contains => match (&args[0], &args[1]) {
            (Val::Str(x), Val::Str(p)) => Val::Bool(x.contains(&**p)),
            (Val::Str(_), other) => {
                return Err(format!(
                    "contains(text, part) looks for a string in a string, not {}",
                    other.what()
                ))
            }
            (c, item) => super::value::compare(&crate::compile::Op::In, item, c)?
                .map_or(Val::Undef, Val::Bool),
        },
        Builtin::Domain => domain(text(0)?).map_or(Val::Undef, |d| Val::Str(Cow::Owned(d))),
        Builtin::ToString => match &args[0] {
            Val::Str(x) => Val::Str(x.clone()),
            v => v
                .to_json()
                .map_or(Val::Undef, |j| Val::Str(Cow::Owned(j.to_string()))),
        },
        Builtin::TypeOf => match args[0].kind() {
            Some(k) => Val::Str(Cow::Borrowed(k.word())),
            None => Val::Undef,
        },
    })
}

/// The host of a URL, lower-cased, without port or credentials.
fn domain(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if let Some(stripped) = host.strip_prefix('[') {
        stripped.split(']').next()?
    } else {
        host.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert_eq!(
            domain("https://User@Mail.Example.com:8443/x?y").as_deref(),
            Some("mail.example.com")
        );
        assert_eq!(domain("example.org/path").as_deref(), Some("example.org"));
        assert_eq!(domain("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(domain(""), None);
    }

    #[test]
    fn wrong_types_are_errors_and_absent_is_undefined() {
        assert!(call(Builtin::Len, &[Val::Num(3.0)]).is_err());
        assert!(call(Builtin::Lower, &[Val::Num(3.0)]).is_err());
        assert!(matches!(call(Builtin::Len, &[Val::Undef]), Ok(Val::Undef)));
        assert!(matches!(
            call(
                Builtin::Glob,
                &[Val::Str("send_email".into()), Val::Str("send_*".into())]
            ),
            Ok(Val::Bool(true))
        ));
    }
}
