//! Lineage inference: where an argument that arrived without `derived_from` was taken from.
//!
//! Content that enters the session (user messages, the Intent's text, tool outputs, retrieval
//! and memory results, agent replies) is cut into identifier-like tokens, and each token is
//! filed in a per-session index with the origins and labels of the content it appeared in. An
//! argument value is cut the same way; its inferred sources are the origins in which *every*
//! one of its tokens appeared. A value with a token found nowhere, or with no token at all,
//! has unknown sources (read as `external`, never as clean). Lookup costs O(tokens of the
//! value), whatever the history; the index is capped per session, and once full every
//! inference answers "unknown" (fail closed).
//!
//! This module owns tokenising and the index entries; it must not know about rules or the VM.

use serde_json::Value;

/// What the index keeps per token: the own origins (bits) of the content it appeared in, and
/// the union and intersection of that content's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub origins: u8,
    pub labels_any: u64,
    pub labels_all: u64,
}

impl Seen {
    pub fn merge(self, other: Seen) -> Seen {
        Seen {
            origins: self.origins | other.origins,
            labels_any: self.labels_any | other.labels_any,
            labels_all: self.labels_all & other.labels_all,
        }
    }
}

/// The index key of a token: a 64-bit SipHash under keys drawn once per process, so a
/// collision (two tokens read as one) has probability about 2⁻⁶⁴ per pair and cannot be
/// aimed at from outside. The index is rebuilt from the journal on restore, so keys need not
/// survive a restart.
pub fn token_key(token: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::LazyLock<std::collections::hash_map::RandomState> =
        std::sync::LazyLock::new(std::collections::hash_map::RandomState::new);
    KEYS.hash_one(token)
}

/// Tokens indexed per session at most; past it, inference answers "unknown".
pub const MAX_TOKENS: usize = 262_144;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        tokens(s, &mut v);
        v
    }

    #[test]
    fn identifiers_are_normalised() {
        assert_eq!(
            toks("Visit https://www.Example.com/a/ now."),
            vec!["visit", "example.com", "example.com/a", "now"]
        );
        assert_eq!(
            toks("mail bob@x.io, IBAN GB29NWBK60161331926819"),
            vec!["mail", "bob@x.io", "iban", "gb29nwbk60161331926819"]
        );
        assert_eq!(toks("www.true-site.com"), vec!["true-site.com"]);
        assert_eq!(toks("a an of"), Vec::<String>::new());
    }
}
