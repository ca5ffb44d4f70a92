//! Text as lineage inference compares it: the identifier-like tokens of a text (`tokens`,
//! `value_tokens`) and its compact form for a contiguous search (`compact`, `compact_leaves`).
//! Pure functions over strings and JSON values, read by `state` (the inference index and
//! `found_in(x, user_input)`) and by the reference evaluator, which models inference on its
//! own but must cut text the same way. Knows nothing of sessions, nodes or policies.

use serde_json::Value;

/// Tokens longer than this are cut (an identifier is rarely longer).
const MAX_TOKEN_LEN: usize = 256;

/// The identifier-like tokens of a text, normalised: lower-cased; URLs without scheme, `www.`
/// and trailing `/` (and their host as a token of its own); e-mail addresses, IBAN-like and
/// account ids, file names and numbers as they stand; words of three or more characters.
/// Spaces inside an IBAN (`DE89 3704 …`) are not joined: such a value's parts are tokens.
pub fn tokens(text: &str, out: &mut Vec<String>) {
    if text.is_ascii() {
        tokens_ascii(text.as_bytes(), out)
    } else {
        tokens_general(text, out)
    }
}

/// [`tokens`] of an ASCII text, byte by byte: the same cuts without decoding characters or
/// lower-casing through Unicode tables (most of what inference reads is ASCII).
fn tokens_ascii(text: &[u8], out: &mut Vec<String>) {
    let is_part = |b: &u8| b.is_ascii_alphanumeric() || b"@.-_:/+%#?=&~".contains(b);
    let trimmed = |b: &u8| b".,:;-_/?#&=+%~".contains(b);
    for raw in text.split(|b| !is_part(b)) {
        let start = raw.iter().position(|b| !trimmed(b)).unwrap_or(raw.len());
        let end = raw
            .iter()
            .rposition(|b| !trimmed(b))
            .map_or(start, |e| e + 1);
        let t = &raw[start..end];
        if t.len() < 3 {
            continue;
        }
        let t = &t[..t.len().min(MAX_TOKEN_LEN)];
        // ASCII in, ASCII out: always UTF-8.
        let lower = String::from_utf8(t.to_ascii_lowercase()).unwrap_or_default();
        push_token(lower, out);
    }
}

fn tokens_general(text: &str, out: &mut Vec<String>) {
    let is_part = |c: char| c.is_alphanumeric() || "@.-_:/+%#?=&~".contains(c);
    for raw in text.split(|c: char| !is_part(c)) {
        let t = raw.trim_matches(|c: char| ".,:;-_/?#&=+%~".contains(c));
        if t.chars().count() < 3 {
            continue;
        }
        let lower: String = t.to_lowercase().chars().take(MAX_TOKEN_LEN).collect();
        push_token(lower, out);
    }
}

/// Adds one lower-cased token: a URL (with a scheme, or from `www.`) as its host and, when it
/// has more, as itself without scheme, `www.` and trailing `/`; anything else as it is.
fn push_token(lower: String, out: &mut Vec<String>) {
    let rest = match lower.find("://") {
        Some(i) => &lower[i + 3..],
        None if lower.starts_with("www.") => &lower[..],
        None => {
            out.push(lower);
            return;
        }
    };
    let rest = rest.strip_prefix("www.").unwrap_or(rest);
    let rest = rest.trim_end_matches('/');
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if !host.is_empty() {
        out.push(host.to_string());
    }
    if rest != host && !rest.is_empty() {
        out.push(rest.to_string());
    }
}

/// The tokens of a JSON value: every string and number leaf.
pub fn value_tokens(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::String(s) => tokens(s, out),
        Value::Number(n) => tokens(&n.to_string(), out),
        Value::Array(a) => a.iter().for_each(|x| value_tokens(x, out, depth + 1)),
        Value::Object(m) => m.values().for_each(|x| value_tokens(x, out, depth + 1)),
        _ => {}
    }
}

/// A text cut to its lower-cased letters and digits, for the contiguous match of
/// `found_in(x, user_input)`: a URL first loses its scheme, `www.` and trailing `/`.
pub fn compact(text: &str) -> String {
    let text = text.trim();
    if !text.is_ascii() {
        return compact_general(text);
    }
    let rest = text.find("://").map_or(text, |i| &text[i + 3..]);
    let rest = match rest.get(..4) {
        Some(w) if w.eq_ignore_ascii_case("www.") => &rest[4..],
        _ => rest,
    };
    let bytes: Vec<u8> = rest
        .trim_end_matches('/')
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase())
        .collect();
    // ASCII letters and digits: always UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

/// [`compact`] of any text, through Unicode's lower-casing and classes.
fn compact_general(text: &str) -> String {
    let lower = text.trim().to_lowercase();
    let rest = lower.split_once("://").map_or(lower.as_str(), |(_, r)| r);
    let rest = rest
        .strip_prefix("www.")
        .unwrap_or(rest)
        .trim_end_matches('/');
    rest.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// [`compact`] of every string and number leaf of a JSON value.
pub fn compact_leaves(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::String(s) => out.push(compact(s)),
        Value::Number(n) => out.push(compact(&n.to_string())),
        Value::Array(a) => a.iter().for_each(|x| compact_leaves(x, out, depth + 1)),
        Value::Object(m) => m.values().for_each(|x| compact_leaves(x, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Texts made mostly of the characters the cuts care about.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::char::range('a', 'z'),
                2 => proptest::char::range('A', 'Z'),
                2 => proptest::char::range('0', '9'),
                3 => proptest::sample::select(
                    " \t\n\x0b@.-_:/+%#?=&~,;!'\"()[]".chars().collect::<Vec<_>>()
                ),
            ],
            0..40,
        )
        .prop_map(|cs| {
            let s: String = cs.into_iter().collect();
            // Now and then a scheme or a `www.` where the cuts treat them specially.
            match s.len() % 5 {
                0 => format!("https://{s}"),
                1 => format!("WWW.{s}"),
                _ => s,
            }
        })
    }

    proptest! {
        #[test]
        fn the_ascii_cuts_agree_with_the_general_ones(t in text()) {
            let (mut fast, mut general) = (Vec::new(), Vec::new());
            tokens(&t, &mut fast);
            tokens_general(&t, &mut general);
            prop_assert_eq!(fast, general);
            prop_assert_eq!(compact(&t), compact_general(t.trim()));
        }
    }

    #[test]
    fn tokens_and_compact_forms() {
        let mut out = Vec::new();
        tokens(
            "Mail A@Example.com, see https://www.Site.org/path/ and IBAN DE89370400440532013000.",
            &mut out,
        );
        assert_eq!(
            out,
            [
                "mail",
                "a@example.com",
                "see",
                "site.org",
                "site.org/path",
                "and",
                "iban",
                "de89370400440532013000"
            ]
        );
        assert_eq!(compact("  https://www.Site.org/Path/ "), "siteorgpath");
        assert_eq!(compact("Grüße an Ö-1"), "grüßeanö1");
    }
}
