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
    let is_part = |c: char| c.is_alphanumeric() || "@.-_:/+%#?=&~".contains(c);
    for raw in text.split(|c: char| !is_part(c)) {
        let t = raw.trim_matches(|c: char| ".,:;-_/?#&=+%~".contains(c));
        if t.chars().count() < 3 {
            continue;
        }
        let lower: String = t.to_lowercase().chars().take(MAX_TOKEN_LEN).collect();
        let url = lower
            .split_once("://")
            .map(|(_, rest)| rest.to_string())
            .or_else(|| lower.starts_with("www.").then(|| lower.clone()));
        match url {
            Some(rest) => {
                let rest = rest.strip_prefix("www.").unwrap_or(&rest);
                let rest = rest.trim_end_matches('/');
                let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
                if !host.is_empty() {
                    out.push(host.to_string());
                }
                if rest != host && !rest.is_empty() {
                    out.push(rest.to_string());
                }
            }
            None => out.push(lower),
        }
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
