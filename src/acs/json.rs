//! Strict JSON decoding for untrusted envelopes.
//!
//! A signature must cover exactly one reading of the bytes, so before anything else looks at a
//! message we refuse what lenient parsers would interpret silently: invalid UTF-8, a byte-order
//! mark, duplicate member names (compared after unescaping, at any depth), lone surrogate
//! escapes, numbers outside the `f64` range, nesting deeper than [`MAX_DEPTH`], and inputs
//! above a size limit. The grammar is RFC 8259 with nothing added.
//!
//! This is a small recursive-descent parser; the depth is checked before each descent, so the
//! recursion is bounded by [`MAX_DEPTH`] whatever the input.

use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// The deepest nesting of arrays and objects accepted (a top-level object is depth 1).
pub const MAX_DEPTH: usize = 64;

/// The default input size limit of [`parse_strict`], in bytes.
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Limits applied by [`parse_with_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Inputs longer than this many bytes are refused before parsing.
    pub max_bytes: usize,
    /// Nesting limit; values above [`MAX_DEPTH`] are clamped to it.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_depth: MAX_DEPTH,
        }
    }
}

/// What went wrong while decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// The input is larger than the configured limit.
    TooLarge {
        /// Input length in bytes.
        len: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The bytes are not valid UTF-8.
    InvalidUtf8,
    /// A UTF-8 byte-order mark starts the input.
    ByteOrderMark,
    /// The input ended in the middle of a value.
    UnexpectedEnd,
    /// A byte that the grammar does not allow here.
    Unexpected {
        /// What the parser was looking for.
        expected: &'static str,
    },
    /// Non-whitespace after the top-level value.
    TrailingData,
    /// An object names the same member twice.
    DuplicateKey(String),
    /// Arrays/objects nested deeper than the limit.
    TooDeep {
        /// The limit in force.
        limit: usize,
    },
    /// A number whose magnitude does not fit in an `f64`.
    NumberOutOfRange,
    /// A malformed string escape or a raw control character inside a string.
    InvalidString(&'static str),
}

/// A decoding failure with the byte offset where it was detected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset into the input.
    pub offset: usize,
    /// The failure.
    pub kind: JsonErrorKind,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            JsonErrorKind::TooLarge { len, limit } => {
                write!(f, "input is {len} bytes, more than the limit of {limit}")?
            }
            JsonErrorKind::InvalidUtf8 => write!(f, "invalid UTF-8")?,
            JsonErrorKind::ByteOrderMark => write!(f, "byte-order mark is not allowed")?,
            JsonErrorKind::UnexpectedEnd => write!(f, "unexpected end of input")?,
            JsonErrorKind::Unexpected { expected } => write!(f, "expected {expected}")?,
            JsonErrorKind::TrailingData => write!(f, "trailing characters after the JSON value")?,
            JsonErrorKind::DuplicateKey(k) => write!(f, "duplicate object member name {k:?}")?,
            JsonErrorKind::TooDeep { limit } => {
                write!(f, "arrays/objects nested deeper than {limit} levels")?
            }
            JsonErrorKind::NumberOutOfRange => write!(f, "number out of range")?,
            JsonErrorKind::InvalidString(why) => write!(f, "invalid string: {why}")?,
        }
        write!(f, " at byte {}", self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Decodes `bytes` strictly with the default [`Limits`].
pub fn parse_strict(bytes: &[u8]) -> Result<Value, JsonError> {
    parse_with_limits(bytes, Limits::default())
}

/// Decodes `bytes` strictly with the given size and depth limits.
pub fn parse_with_limits(bytes: &[u8], limits: Limits) -> Result<Value, JsonError> {
    let mut r = Reader::new(bytes, limits)?;
    let v = r.p.value(0)?;
    r.finish()?;
    Ok(v)
}

/// The strict parser driven member by member, for a caller that reads an object's members as
/// it meets them instead of building a tree ([`super::shell`]); [`parse_with_limits`] is
/// this reader reading one value. The caller checks duplicate member names itself (a
/// value read with [`Reader::value`] is checked inside, as ever).
pub(crate) struct Reader<'a> {
    p: Parser<'a>,
}

impl<'a> Reader<'a> {
    /// The size, UTF-8 and byte-order-mark checks of [`parse_with_limits`], then the
    /// whitespace before the value.
    pub(crate) fn new(bytes: &'a [u8], limits: Limits) -> Result<Reader<'a>, JsonError> {
        if bytes.len() > limits.max_bytes {
            return Err(JsonError {
                offset: limits.max_bytes,
                kind: JsonErrorKind::TooLarge {
                    len: bytes.len(),
                    limit: limits.max_bytes,
                },
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| JsonError {
            offset: e.valid_up_to(),
            kind: JsonErrorKind::InvalidUtf8,
        })?;
        if text.starts_with('\u{feff}') {
            return Err(JsonError {
                offset: 0,
                kind: JsonErrorKind::ByteOrderMark,
            });
        }
        let mut p = Parser {
            src: text,
            b: bytes,
            pos: 0,
            max_depth: limits.max_depth.min(MAX_DEPTH),
        };
        p.skip_ws();
        Ok(Reader { p })
    }

    /// The next byte after whitespace: what kind of value comes next.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.p.skip_ws();
        self.p.peek()
    }

    /// Opens an object (the next byte is `{`) with `open` containers around it.
    pub(crate) fn open_object(&mut self, open: usize) -> Result<(), JsonError> {
        self.p.check_depth(open)?;
        self.p.skip_ws();
        self.p.expect_byte(b'{', "an object")
    }

    /// The next member name of an open object and the `:` after it, or `None` at its `}`.
    /// `first` says whether a member has been read yet (a `,` must come before the next).
    pub(crate) fn next_key(&mut self, first: bool) -> Result<Option<Cow<'a, str>>, JsonError> {
        self.p.skip_ws();
        match self.p.peek() {
            Some(b'}') => {
                self.p.pos += 1;
                return Ok(None);
            }
            Some(b',') if !first => {
                self.p.pos += 1;
                self.p.skip_ws();
            }
            None => return Err(self.p.err(JsonErrorKind::UnexpectedEnd)),
            Some(_) if !first => {
                return Err(self.p.err(JsonErrorKind::Unexpected {
                    expected: "',' or '}' in an object",
                }))
            }
            Some(_) => {}
        }
        if self.p.peek() != Some(b'"') {
            return Err(self.p.err(JsonErrorKind::Unexpected {
                expected: "a string member name",
            }));
        }
        let key = self.string()?;
        self.p.skip_ws();
        self.p.expect_byte(b':', "':' after a member name")?;
        self.p.skip_ws();
        Ok(Some(key))
    }

    /// A string (the next byte is `"`), borrowed from the input when it has no escape.
    pub(crate) fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let start = self.p.pos + 1;
        let end = plain_run_end(self.p.b, start);
        if self.p.b.get(end) == Some(&b'"') {
            self.p.pos = end + 1;
            return Ok(Cow::Borrowed(&self.p.src[start..end]));
        }
        self.p.string().map(Cow::Owned)
    }

    /// Any value, as a tree, with `open` containers around it.
    pub(crate) fn value(&mut self, open: usize) -> Result<Value, JsonError> {
        self.p.skip_ws();
        self.p.value(open)
    }

    /// Only whitespace is left.
    pub(crate) fn finish(mut self) -> Result<(), JsonError> {
        self.p.skip_ws();
        if self.p.pos != self.p.b.len() {
            return Err(self.p.err(JsonErrorKind::TrailingData));
        }
        Ok(())
    }
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, kind: JsonErrorKind) -> JsonError {
        JsonError {
            offset: self.pos,
            kind,
        }
    }

    fn err_at(&self, offset: usize, kind: JsonErrorKind) -> JsonError {
        JsonError { offset, kind }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_byte(&mut self, want: u8, expected: &'static str) -> Result<(), JsonError> {
        match self.peek() {
            Some(c) if c == want => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.err(JsonErrorKind::Unexpected { expected })),
            None => Err(self.err(JsonErrorKind::UnexpectedEnd)),
        }
    }

    /// `depth` is the number of containers already open around this value.
    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(self.err(JsonErrorKind::UnexpectedEnd)),
            Some(b'{') => {
                self.check_depth(depth)?;
                self.object(depth + 1)
            }
            Some(b'[') => {
                self.check_depth(depth)?;
                self.array(depth + 1)
            }
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err(JsonErrorKind::Unexpected {
                expected: "a JSON value",
            })),
        }
    }

    fn check_depth(&self, open: usize) -> Result<(), JsonError> {
        if open >= self.max_depth {
            Err(self.err(JsonErrorKind::TooDeep {
                limit: self.max_depth,
            }))
        } else {
            Ok(())
        }
    }

    fn literal(&mut self, word: &'static str, v: Value) -> Result<Value, JsonError> {
        let end = self.pos + word.len();
        if self.b.len() >= end && &self.b[self.pos..end] == word.as_bytes() {
            self.pos = end;
            Ok(v)
        } else if word.as_bytes().starts_with(&self.b[self.pos..]) {
            self.pos = self.b.len();
            Err(self.err(JsonErrorKind::UnexpectedEnd))
        } else {
            Err(self.err(JsonErrorKind::Unexpected {
                expected: "a JSON value",
            }))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1; // '{'
        let mut map = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            let key_at = self.pos;
            match self.peek() {
                Some(b'"') => {}
                None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                Some(_) => {
                    return Err(self.err(JsonErrorKind::Unexpected {
                        expected: "a string member name",
                    }))
                }
            }
            let key = self.string()?;
            // One hash of the name both finds a duplicate and places the member.
            let slot = match map.entry(key) {
                Entry::Occupied(dup) => {
                    return Err(self.err_at(key_at, JsonErrorKind::DuplicateKey(dup.key().clone())))
                }
                Entry::Vacant(slot) => slot,
            };
            self.skip_ws();
            self.expect_byte(b':', "':' after a member name")?;
            self.skip_ws();
            slot.insert(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                Some(_) => {
                    return Err(self.err(JsonErrorKind::Unexpected {
                        expected: "',' or '}' in an object",
                    }))
                }
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                Some(_) => {
                    return Err(self.err(JsonErrorKind::Unexpected {
                        expected: "',' or ']' in an array",
                    }))
                }
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut end = plain_run_end(self.b, self.pos);
        // The common case: no escape, so the string is the run itself, allocated once.
        if self.b.get(end) == Some(&b'"') {
            let s = self.src[self.pos..end].to_owned();
            self.pos = end + 1;
            return Ok(s);
        }
        let mut out = String::new();
        loop {
            // The input is valid UTF-8 and the run stops only at ASCII bytes, so this slice
            // lies on character boundaries.
            out.push_str(&self.src[self.pos..end]);
            self.pos = end;
            match self.peek() {
                None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let esc_at = self.pos;
                    self.pos += 1;
                    let c = match self.peek() {
                        None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                        Some(c) => c,
                    };
                    self.pos += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape(esc_at)?),
                        _ => {
                            return Err(self.err_at(
                                esc_at,
                                JsonErrorKind::InvalidString("unknown escape sequence"),
                            ))
                        }
                    }
                    end = plain_run_end(self.b, self.pos);
                }
                Some(_) => {
                    return Err(
                        self.err(JsonErrorKind::InvalidString("unescaped control character"))
                    )
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let c = match self.peek() {
                None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
                Some(c) => c,
            };
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => {
                    return Err(self.err(JsonErrorKind::InvalidString(
                        "\\u must be followed by four hex digits",
                    )))
                }
            };
            v = (v << 4) | u16::from(d);
            self.pos += 1;
        }
        Ok(v)
    }

    /// Called after `\u`; `esc_at` is the offset of the backslash.
    fn unicode_escape(&mut self, esc_at: usize) -> Result<char, JsonError> {
        let hi = self.hex4()?;
        match hi {
            0xD800..=0xDBFF => {
                if self.b.get(self.pos) == Some(&b'\\') && self.b.get(self.pos + 1) == Some(&b'u') {
                    self.pos += 2;
                    let lo = self.hex4()?;
                    if (0xDC00..=0xDFFF).contains(&lo) {
                        let cp =
                            0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                        return char::from_u32(cp).ok_or_else(|| {
                            self.err_at(esc_at, JsonErrorKind::InvalidString("bad surrogate pair"))
                        });
                    }
                }
                Err(self.err_at(
                    esc_at,
                    JsonErrorKind::InvalidString("lone leading surrogate"),
                ))
            }
            0xDC00..=0xDFFF => Err(self.err_at(
                esc_at,
                JsonErrorKind::InvalidString("lone trailing surrogate"),
            )),
            _ => Ok(char::from_u32(u32::from(hi)).unwrap_or('\u{fffd}')),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            None => return Err(self.err(JsonErrorKind::UnexpectedEnd)),
            Some(_) => {
                return Err(self.err(JsonErrorKind::Unexpected {
                    expected: "a digit",
                }))
            }
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            integral = false;
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.number_tail_err());
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integral = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.number_tail_err());
            }
        }
        let text = &self.src[start..self.pos];
        if integral {
            if negative {
                if let Ok(i) = text.parse::<i64>() {
                    // "-0" keeps its sign, as serde_json does.
                    return Ok(if i == 0 {
                        Value::Number(Number::from_f64(-0.0).unwrap_or_else(|| Number::from(0)))
                    } else {
                        Value::Number(Number::from(i))
                    });
                }
            } else if let Ok(u) = text.parse::<u64>() {
                return Ok(Value::Number(Number::from(u)));
            }
        }
        // Rust's float parsing is correctly rounded; it yields ±inf on overflow.
        let f: f64 = text
            .parse()
            .map_err(|_| self.err_at(start, JsonErrorKind::NumberOutOfRange))?;
        Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| self.err_at(start, JsonErrorKind::NumberOutOfRange))
    }

    fn number_tail_err(&self) -> JsonError {
        if self.pos >= self.b.len() {
            self.err(JsonErrorKind::UnexpectedEnd)
        } else {
            self.err(JsonErrorKind::Unexpected {
                expected: "a digit",
            })
        }
    }
}

/// The offset of the first byte of `b` from `from` on that ends a plain run of a JSON string:
/// a quote, a backslash or a control character (`b.len()` if none). Eight bytes at a time:
/// most strings in an envelope (ids, names, hashes) have no escapes at all. The canonical
/// form's writer uses it too: it escapes the same bytes.
pub(crate) fn plain_run_end(b: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `w` that is zero (the lowest flagged byte is exact; a
    // borrow can only flag bytes above it, which are not looked at).
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH;
    let mut i = from;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let control = w.wrapping_sub(0x20 * ONES) & !w & HIGH;
        let hits = control | zero(w ^ (b'"' as u64 * ONES)) | zero(w ^ (b'\\' as u64 * ONES));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(s: &[u8]) -> JsonErrorKind {
        parse_strict(s).unwrap_err().kind
    }

    #[test]
    fn parses_like_serde_json() {
        let src =
            r#" {"a":[1,-2,3.5,1e3,-0,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{},"c":[]} "#;
        let ours = parse_strict(src.as_bytes()).unwrap();
        let theirs: Value = serde_json::from_str(src).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(
            parse_strict(b"18446744073709551616").unwrap(),
            json!(18446744073709551616.0)
        );
        assert_eq!(
            parse_strict(b"-9223372036854775808").unwrap(),
            json!(i64::MIN)
        );
    }

    #[test]
    fn refuses_duplicates_at_any_depth() {
        assert_eq!(
            kind(br#"{"a":1,"a":2}"#),
            JsonErrorKind::DuplicateKey("a".into())
        );
        assert_eq!(
            kind(br#"{"x":[{"k":1,"\u006b":2}]}"#),
            JsonErrorKind::DuplicateKey("k".into())
        );
        let e = parse_strict(br#"{"a":1, "a":2}"#).unwrap_err();
        assert_eq!(e.offset, 8);
        assert!(e.to_string().contains("at byte 8"), "{e}");
    }

    #[test]
    fn wide_objects_keep_their_order_and_refuse_duplicates() {
        // An object of n members, each holding a small object, with member `dup` repeated.
        let object = |n: usize, dup: Option<usize>| {
            let mut members: Vec<String> = (0..n)
                .map(|i| format!(r#""m{i}":{{"i":{i},"j":[{{"k":{i}}}]}}"#))
                .collect();
            if let Some(d) = dup {
                members.push(format!(r#""m{d}":0"#));
            }
            format!("{{{}}}", members.join(","))
        };
        for n in [1, 15, 16, 17, 200] {
            let v = parse_strict(object(n, None).as_bytes()).unwrap();
            let names: Vec<&String> = v.as_object().unwrap().keys().collect();
            let wanted: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            assert_eq!(names, wanted.iter().collect::<Vec<_>>(), "n = {n}");
            assert_eq!(v[format!("m{}", n - 1)]["j"][0]["k"], json!(n - 1));
            for d in [0, n - 1] {
                assert_eq!(
                    kind(object(n, Some(d)).as_bytes()),
                    JsonErrorKind::DuplicateKey(format!("m{d}")),
                    "n = {n}, duplicate of member {d}"
                );
            }
        }
        assert!(parse_strict(br#"[{"a":{"b":1,"b":2}},{"a":1}]"#).is_err());
        assert_eq!(
            parse_strict(br#"[{"a":{"b":1}},{"a":1,"c":{}}]"#).unwrap(),
            json!([{"a":{"b":1}},{"a":1,"c":{}}])
        );
    }

    #[test]
    fn depth_limit_is_enforced_without_recursing_past_it() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse_strict(ok.as_bytes()).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(
            kind(deep.as_bytes()),
            JsonErrorKind::TooDeep { limit: MAX_DEPTH }
        );
        let huge = "[{\"a\":".repeat(100_000);
        assert!(matches!(
            kind(huge.as_bytes()),
            JsonErrorKind::TooDeep { .. }
        ));
    }

    #[test]
    fn refuses_bad_bytes_and_grammar() {
        assert_eq!(kind(b"{\"a\":\"\xff\"}"), JsonErrorKind::InvalidUtf8);
        assert_eq!(parse_strict(b"{\"a\":\"\xff\"}").unwrap_err().offset, 6);
        assert_eq!(kind(b"\xef\xbb\xbf{}"), JsonErrorKind::ByteOrderMark);
        assert_eq!(kind(b"{\"a\":1"), JsonErrorKind::UnexpectedEnd);
        assert_eq!(kind(b"{} x"), JsonErrorKind::TrailingData);
        assert_eq!(kind(b"1e400"), JsonErrorKind::NumberOutOfRange);
        assert_eq!(kind(b"-1e400"), JsonErrorKind::NumberOutOfRange);
        assert!(parse_strict(b"1e-400").is_ok());
        for bad in [
            &b"[1,]"[..],
            b"{,}",
            b"01",
            b"1.",
            b".5",
            b"+1",
            b"NaN",
            b"tru",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"a\tb\"",
            b"\"\\x\"",
            b"{'a':1}",
            b"",
            b"   ",
        ] {
            assert!(
                parse_strict(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn size_limit() {
        let limits = Limits {
            max_bytes: 4,
            max_depth: MAX_DEPTH,
        };
        assert!(parse_with_limits(b"[1]", limits).is_ok());
        assert!(matches!(
            parse_with_limits(b"[1,2]", limits).unwrap_err().kind,
            JsonErrorKind::TooLarge { len: 5, limit: 4 }
        ));
    }
}
