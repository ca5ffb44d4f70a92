//! The builtin functions. Each is total: wrong argument types give undefined.

use std::borrow::Cow;

use serde_json::Value;

use super::Val;
use crate::compile::{Builtin, Const};

pub fn call<'a>(b: Builtin, args: &[Val<'a>]) -> Val<'a> {
    let s = |i: usize| args.get(i).and_then(Val::as_str);
    match b {
        Builtin::Len => match args.first() {
            Some(Val::Str(x)) => Val::Num(x.chars().count() as f64),
            Some(Val::Json(Value::Array(a))) => Val::Num(a.len() as f64),
            Some(Val::Json(Value::Object(m))) => Val::Num(m.len() as f64),
            Some(Val::Const(Const::List(items) | Const::StrSet(_, items))) => {
                Val::Num(items.len() as f64)
            }
            Some(Val::List(items)) => Val::Num(items.len() as f64),
            _ => Val::Undef,
        },
        Builtin::Lower => s(0).map_or(Val::Undef, |x| Val::Str(Cow::Owned(x.to_lowercase()))),
        Builtin::Upper => s(0).map_or(Val::Undef, |x| Val::Str(Cow::Owned(x.to_uppercase()))),
        Builtin::StartsWith => match (s(0), s(1)) {
            (Some(x), Some(p)) => Val::Bool(x.starts_with(p)),
            _ => Val::Undef,
        },
        Builtin::EndsWith => match (s(0), s(1)) {
            (Some(x), Some(p)) => Val::Bool(x.ends_with(p)),
            _ => Val::Undef,
        },
        Builtin::Contains => match (args.first(), args.get(1)) {
            (Some(Val::Str(x)), Some(Val::Str(p))) => Val::Bool(x.contains(&**p)),
            (Some(c), Some(item)) => super::value::compare(&crate::compile::Op::In, item, c)
                .map_or(Val::Undef, Val::Bool),
            _ => Val::Undef,
        },
        Builtin::Domain => s(0)
            .and_then(domain)
            .map_or(Val::Undef, |d| Val::Str(Cow::Owned(d))),
        Builtin::ToString => match args.first() {
            Some(Val::Str(x)) => Val::Str(x.clone()),
            Some(v) => v
                .to_json()
                .map_or(Val::Undef, |j| Val::Str(Cow::Owned(j.to_string()))),
            None => Val::Undef,
        },
    }
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
}
