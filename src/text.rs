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
    each_token(text, &mut |t| out.push(t.to_owned()));
}

/// [`tokens`], each handed to `f` as it is cut instead of collected (nothing is allocated
/// for an ASCII text).
pub fn each_token(text: &str, f: &mut impl FnMut(&str)) {
    if text.is_ascii() {
        tokens_ascii(text, f)
    } else {
        tokens_general(text, f)
    }
}

/// [`tokens`] of an ASCII text, byte by byte: the same cuts without decoding characters or
/// lower-casing through Unicode tables (most of what inference reads is ASCII). A token with
/// no upper-case letter is handed on as a slice of the text; any other is lower-cased into
/// one buffer.
fn tokens_ascii(text: &str, f: &mut impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let class = |b: u8| ASCII_CLASS[b as usize];
    let mut buf = [0u8; MAX_TOKEN_LEN];
    let mut i = 0;
    while i < bytes.len() {
        // One run of token characters, between separators.
        while i < bytes.len() && class(bytes[i]) & PART == 0 {
            i += 1;
        }
        let (mut start, mut end) = (i, i);
        while end < bytes.len() && class(bytes[end]) & PART != 0 {
            end += 1;
        }
        i = end;
        // Its leading and trailing punctuation trimmed.
        while start < end && class(bytes[start]) & TRIMMED != 0 {
            start += 1;
        }
        while end > start && class(bytes[end - 1]) & TRIMMED != 0 {
            end -= 1;
        }
        if end - start < 3 {
            continue;
        }
        // ASCII: every byte index is a character boundary.
        let t = &text[start..end.min(start + MAX_TOKEN_LEN)];
        if !t.bytes().any(|b| b.is_ascii_uppercase()) {
            emit_token(t, f);
            continue;
        }
        for (d, b) in buf.iter_mut().zip(t.bytes()) {
            *d = b.to_ascii_lowercase();
        }
        // ASCII in, ASCII out: always UTF-8.
        if let Ok(lower) = std::str::from_utf8(&buf[..t.len()]) {
            emit_token(lower, f);
        }
    }
}

/// [`ASCII_CLASS`]: a byte that can be part of a token.
const PART: u8 = 1;
/// [`ASCII_CLASS`]: a byte trimmed from either end of a token.
const TRIMMED: u8 = 2;

/// Each ASCII byte's part in the cuts ([`PART`], [`TRIMMED`]): letters and digits and
/// `@.-_:/+%#?=&~` are token characters; `.,:;-_/?#&=+%~` are trimmed from a token's ends.
static ASCII_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        if (b as u8).is_ascii_alphanumeric() {
            t[b] = PART;
        }
        b += 1;
    }
    let part = b"@.-_:/+%#?=&~";
    let mut i = 0;
    while i < part.len() {
        t[part[i] as usize] |= PART;
        i += 1;
    }
    let trimmed = b".,:;-_/?#&=+%~";
    let mut i = 0;
    while i < trimmed.len() {
        t[trimmed[i] as usize] |= TRIMMED;
        i += 1;
    }
    t
};

fn tokens_general(text: &str, f: &mut impl FnMut(&str)) {
    let is_part = |c: char| c.is_alphanumeric() || "@.-_:/+%#?=&~".contains(c);
    for raw in text.split(|c: char| !is_part(c)) {
        let t = raw.trim_matches(|c: char| ".,:;-_/?#&=+%~".contains(c));
        if t.chars().count() < 3 {
            continue;
        }
        let lower: String = t.to_lowercase().chars().take(MAX_TOKEN_LEN).collect();
        emit_token(&lower, f);
    }
}

/// Hands on one lower-cased token: a URL (with a scheme, or from `www.`) as its host and,
/// when it has more, as itself without scheme, `www.` and trailing `/`; anything else as it
/// is.
fn emit_token(lower: &str, f: &mut impl FnMut(&str)) {
    let rest = match scheme_end(lower) {
        Some(i) => &lower[i + 3..],
        None if lower.starts_with("www.") => lower,
        None => {
            f(lower);
            return;
        }
    };
    let rest = rest.strip_prefix("www.").unwrap_or(rest);
    let rest = rest.trim_end_matches('/');
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if !host.is_empty() {
        f(host);
    }
    if rest != host && !rest.is_empty() {
        f(rest);
    }
}

/// The tokens of a JSON value: every string and number leaf.
pub fn value_tokens(v: &Value, out: &mut Vec<String>, depth: usize) {
    each_value_token(v, &mut |t| out.push(t.to_owned()), depth);
}

/// [`value_tokens`], each handed to `f` as it is cut.
pub fn each_value_token(v: &Value, f: &mut impl FnMut(&str), depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::String(s) => each_token(s, f),
        Value::Number(n) => each_token(&n.to_string(), f),
        Value::Array(a) => a.iter().for_each(|x| each_value_token(x, f, depth + 1)),
        Value::Object(m) => m.values().for_each(|x| each_value_token(x, f, depth + 1)),
        _ => {}
    }
}

/// A text cut to its lower-cased letters and digits, for the contiguous match of
/// `found_in(x, user_input)`: a URL first loses its scheme, `www.` and trailing `/`.
pub fn compact(text: &str) -> String {
    let mut out = String::new();
    compact_into(text, &mut out);
    out
}

/// [`compact`] written into `out` (cleared first), so one buffer serves many leaves.
fn compact_into(text: &str, out: &mut String) {
    out.clear();
    let text = text.trim();
    if !text.is_ascii() {
        out.push_str(&compact_general(text));
        return;
    }
    let rest = scheme_end(text).map_or(text, |i| &text[i + 3..]);
    let rest = match rest.get(..4) {
        Some(w) if w.eq_ignore_ascii_case("www.") => &rest[4..],
        _ => rest,
    };
    let rest = rest.trim_end_matches('/');
    out.reserve(rest.len());
    out.extend(
        rest.bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|b| char::from(b.to_ascii_lowercase())),
    );
}

/// Leaves this long at most are compacted on the stack.
const SHORT: usize = 128;

/// [`compact`] of an ASCII text of at most [`SHORT`] bytes, written into `buf`; `None` for
/// any other text.
fn compact_ascii<'b>(text: &str, buf: &'b mut [u8; SHORT]) -> Option<&'b str> {
    let text = text.trim();
    if text.len() > SHORT || !text.is_ascii() {
        return None;
    }
    let rest = scheme_end(text).map_or(text, |i| &text[i + 3..]);
    let rest = match rest.get(..4) {
        Some(w) if w.eq_ignore_ascii_case("www.") => &rest[4..],
        _ => rest,
    };
    let mut n = 0;
    for b in rest.trim_end_matches('/').bytes() {
        // Branch-free: every byte is written, and only a letter or digit moves on.
        let c = COMPACT[b as usize];
        buf[n] = c;
        n += usize::from(c != 0);
    }
    std::str::from_utf8(&buf[..n]).ok()
}

/// Where the first `://` of `text` starts: each `:` found by `memchr` (the texts are short,
/// and a substring searcher costs more to build than this costs to run).
fn scheme_end(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut at = 0;
    while let Some(i) = memchr::memchr(b':', &b[at..]) {
        let colon = at + i;
        if b.get(colon + 1..colon + 3) == Some(b"//") {
            return Some(colon);
        }
        at = colon + 1;
    }
    None
}

/// Each ASCII byte as [`compact`] keeps it: a letter or digit lower-cased, anything else 0.
static COMPACT: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    t
};

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

/// Whether `f` holds for the [`compact`] form of every string and number leaf of `v` (at
/// least one), each compacted into `buf` in turn; stops at the first it does not hold for.
/// The same leaves, in the same order, as [`compact_leaves`].
pub fn all_compact_leaves(v: &Value, buf: &mut String, f: &mut impl FnMut(&str) -> bool) -> bool {
    let mut any = false;
    each_compact_leaf(
        v,
        buf,
        &mut |p| {
            any = true;
            f(p)
        },
        0,
    ) && any
}

/// [`all_compact_leaves`] without the at-least-one condition: `false` once `f` says so.
fn each_compact_leaf(
    v: &Value,
    buf: &mut String,
    f: &mut impl FnMut(&str) -> bool,
    depth: usize,
) -> bool {
    if depth > 32 {
        return true;
    }
    match v {
        Value::String(s) => match compact_ascii(s, &mut [0u8; SHORT]) {
            Some(c) => f(c),
            None => {
                compact_into(s, buf);
                f(buf)
            }
        },
        Value::Number(n) => {
            compact_into(&n.to_string(), buf);
            f(buf)
        }
        Value::Array(a) => a.iter().all(|x| each_compact_leaf(x, buf, f, depth + 1)),
        Value::Object(m) => m.values().all(|x| each_compact_leaf(x, buf, f, depth + 1)),
        _ => true,
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
        /// The short-circuiting walk answers as the collected leaves do: at least one leaf,
        /// and the predicate holding for each.
        #[test]
        fn all_compact_leaves_reads_the_leaves_compact_leaves_collects(
            leaves in proptest::collection::vec(text(), 0..5),
            nested in any::<bool>(),
            modulus in 1usize..4,
        ) {
            let v = if nested {
                serde_json::json!({"a": leaves.clone(), "n": [leaves.len()]})
            } else {
                Value::Array(leaves.iter().cloned().map(Value::String).collect())
            };
            let holds = |p: &str| p.len() % modulus != 1;
            let mut pieces = Vec::new();
            compact_leaves(&v, &mut pieces, 0);
            let wanted = !pieces.is_empty() && pieces.iter().all(|p| holds(p));
            prop_assert_eq!(all_compact_leaves(&v, &mut String::new(), &mut |p| holds(p)), wanted);
        }

        #[test]
        fn the_ascii_cuts_agree_with_the_general_ones(t in text()) {
            let (mut fast, mut general) = (Vec::new(), Vec::new());
            tokens(&t, &mut fast);
            tokens_general(&t, &mut |x| general.push(x.to_owned()));
            prop_assert_eq!(&fast, &general);
            // The callback form hands on the same tokens, in order.
            let mut each = Vec::new();
            each_value_token(&Value::String(t.clone()), &mut |x| each.push(x.to_owned()), 0);
            prop_assert_eq!(each, general);
            prop_assert_eq!(compact(&t), compact_general(t.trim()));
            if let Some(c) = compact_ascii(&t, &mut [0u8; SHORT]) {
                prop_assert_eq!(c, compact(&t));
            }
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
