//! RFC 8785 JSON Canonicalization Scheme (JCS) for `serde_json::Value`.
//!
//! ACS signs and hashes the canonical form of envelopes and audit entries, so every byte here
//! must match what other implementations produce:
//! - object members sorted by their names as UTF-16 code-unit sequences,
//! - no insignificant whitespace,
//! - strings escaped minimally (only `"`, `\` and the C0 controls),
//! - numbers printed the way ECMAScript's `Number.prototype.toString` prints an IEEE-754 double.
//!
//! Integers held as `u64`/`i64` are converted to `f64` first, as RFC 8785 requires; integers
//! beyond 2^53 therefore lose precision exactly as they would in a JavaScript implementation.

use serde_json::{Map, Number, Value};

use super::json;

/// What an output buffer starts with: an envelope's params or an audit entry fit without
/// growing it more than once or twice.
const START_CAPACITY: usize = 512;

/// The canonical form of `v` as a string.
pub fn canonicalize(v: &Value) -> String {
    let mut out = String::with_capacity(START_CAPACITY);
    write_value(&mut out, v);
    out
}

/// The canonical form of `v` as UTF-8 bytes (the input to signatures and hashes).
pub fn to_vec(v: &Value) -> Vec<u8> {
    canonicalize(v).into_bytes()
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// The canonical form of the object `map` without its members named in `skip`, as UTF-8
/// bytes: what a chain entry's hash covers, computed without copying the entry.
pub fn object_without(map: &Map<String, Value>, skip: &[&str]) -> Vec<u8> {
    let mut out = String::with_capacity(START_CAPACITY);
    write_members(
        &mut out,
        map.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .collect(),
    );
    out.into_bytes()
}

/// The canonical form of the object `map` with the value of its member `key` read from
/// `value` instead (a member `map` does not have is not added): a request's params whose
/// payload was moved out of the tree (`envelope::decode_request_detached`).
pub fn object_replacing(map: &Map<String, Value>, key: &str, value: &Value) -> Vec<u8> {
    let mut out = String::with_capacity(START_CAPACITY);
    write_members(
        &mut out,
        map.iter()
            .map(|(k, v)| (k, if k == key { value } else { v }))
            .collect(),
    );
    out.into_bytes()
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    write_members(out, map.iter().collect());
}

fn write_members(out: &mut String, mut members: Vec<(&String, &Value)>) {
    members.sort_by(|a, b| utf16_order(a.0, b.0));
    out.push('{');
    for (i, (k, v)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

/// `a` against `b` as UTF-16 code-unit sequences. UTF-8 bytes sort in code-point order,
/// which agrees with UTF-16 order except between a character in U+E000..=U+FFFF and one
/// beyond U+FFFF (whose surrogates sort first); so where the first differing bytes are both
/// ASCII (or one string is a prefix of the other) the byte order is the answer, and only
/// the rest is compared in UTF-16.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) if x[i] < 0x80 && y[i] < 0x80 => x[i].cmp(&y[i]),
        Some(_) => a.encode_utf16().cmp(b.encode_utf16()),
    }
}

/// A string with only the escapes RFC 8785 requires: the runs between them are copied whole
/// (found eight bytes at a time; every byte escaped is ASCII, so the runs end on character
/// boundaries).
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut run = 0;
    loop {
        let end = json::plain_run_end(bytes, run);
        out.push_str(&s[run..end]);
        let Some(&b) = bytes.get(end) else { break };
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
        run = end + 1;
    }
    out.push('"');
}

/// Integers up to 2^53 in magnitude are exact as doubles, and ECMAScript prints every integral
/// double below 10^21 as its plain digits: those skip the shortest-digits search.
const EXACT_INTEGER: u64 = 1 << 53;

fn write_number(out: &mut String, n: &Number) {
    use std::fmt::Write as _;
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT_INTEGER) {
        let _ = write!(out, "{u}");
        return;
    }
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT_INTEGER) {
        let _ = write!(out, "{i}");
        return;
    }
    // serde_json (without arbitrary_precision) holds a u64, an i64 or a finite f64.
    let x = if let Some(u) = n.as_u64() {
        u as f64
    } else if let Some(i) = n.as_i64() {
        i as f64
    } else {
        n.as_f64().unwrap_or(0.0)
    };
    out.push_str(&format_f64(x));
}

/// ECMAScript `Number::toString(x)` (ECMA-262 §6.1.6.1.20) for a finite double.
///
/// The shortest round-tripping digits come from Rust's `{:e}` formatting, which picks the
/// shortest digit string that parses back to `x` (and the closest one when several exist),
/// the same choice ECMAScript mandates. Non-finite input, which JSON cannot carry, prints as
/// `null`.
pub fn format_f64(x: f64) -> String {
    if !x.is_finite() {
        return "null".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mut out = String::new();
    let x = if x < 0.0 {
        out.push('-');
        -x
    } else {
        x
    };
    let (digits, n) = shortest_digits(x);
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        let e = n - 1;
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&e.abs().to_string());
    }
    out
}

/// Splits `{:e}` output (`d.ddde±x`) into its digit string and its exponent.
fn split_sci(sci: &str) -> (String, i32) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    (mantissa.chars().filter(|c| *c != '.').collect(), exp)
}

/// The shortest digits `s` and exponent `n` with `x = 0.s × 10^n` that round-trip to the
/// positive finite `x`, choosing the even `s` when two candidates are equally close
/// (ECMA-262's tie rule; Rust's shortest formatting may pick the other one).
fn shortest_digits(x: f64) -> (String, i32) {
    let (digits, exp) = split_sci(&format!("{x:e}"));
    let k = digits.len();
    // A tie needs the exact value of x to be `digits[..k]` followed by a single 5. The
    // correctly rounded (k+1)-digit form ends in 5 in that case; only then look closer.
    let (rounded, _) = split_sci(&format!("{x:.k$e}"));
    if !rounded.ends_with('5') {
        return (digits, exp + 1);
    }
    // 800 fractional digits hold the exact expansion of any double.
    let (exact, exact_exp) = split_sci(&format!("{x:.800e}"));
    if exact_exp != exp || exact.as_bytes()[k] != b'5' || exact[k + 1..].bytes().any(|c| c != b'0')
    {
        return (digits, exp + 1);
    }
    let lo = exact[..k].to_string();
    if lo.as_bytes()[k - 1] % 2 == 0 {
        // The even candidate is the truncation; use it if it round-trips.
        let candidate = format!("0.{lo}e{}", exp + 1);
        if candidate.parse::<f64>() == Ok(x) {
            let trimmed = lo.trim_end_matches('0');
            return (trimmed.to_string(), exp + 1);
        }
        return (digits, exp + 1);
    }
    // The even candidate is the truncation plus one unit in the last place.
    let mut hi: Vec<u8> = lo.into_bytes();
    let mut i = k;
    let mut carry = true;
    while carry && i > 0 {
        i -= 1;
        if hi[i] == b'9' {
            hi[i] = b'0';
        } else {
            hi[i] += 1;
            carry = false;
        }
    }
    let mut hi_exp = exp + 1;
    if carry {
        hi.insert(0, b'1');
        hi_exp += 1;
    }
    let hi = String::from_utf8(hi).unwrap_or_default();
    let candidate = format!("0.{hi}e{hi_exp}");
    if candidate.parse::<f64>() == Ok(x) {
        (hi.trim_end_matches('0').to_string(), hi_exp)
    } else {
        (digits, exp + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc8785_number_samples() {
        let cases: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, want) in cases {
            assert_eq!(
                format_f64(f64::from_bits(*bits)),
                *want,
                "bits {bits:#018x}"
            );
        }
    }

    #[test]
    fn small_and_boundary_numbers() {
        assert_eq!(format_f64(1e21), "1e+21");
        assert_eq!(format_f64(1e20), "100000000000000000000");
        assert_eq!(format_f64(1e-7), "1e-7");
        assert_eq!(format_f64(0.000001), "0.000001");
        assert_eq!(format_f64(-0.0), "0");
        assert_eq!(format_f64(4.5), "4.5");
        assert_eq!(format_f64(0.002), "0.002");
        assert_eq!(format_f64(1e30), "1e+30");
        assert_eq!(format_f64(123.0), "123");
        assert_eq!(format_f64(1.5e-10), "1.5e-10");
    }

    #[test]
    fn integers_print_without_exponent_or_fraction() {
        assert_eq!(canonicalize(&json!(0)), "0");
        assert_eq!(canonicalize(&json!(-1)), "-1");
        assert_eq!(
            canonicalize(&json!(9007199254740991u64)),
            "9007199254740991"
        );
        assert_eq!(canonicalize(&json!(u64::MAX)), "18446744073709552000");
        assert_eq!(canonicalize(&json!(i64::MIN)), "-9223372036854776000");
    }

    #[test]
    fn rfc8785_string_and_literal_sample() {
        let v: Value = serde_json::from_str(
            r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
                "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals":[null,true,false]}"#,
        )
        .unwrap();
        assert_eq!(
            canonicalize(&v),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        let v: Value = serde_json::from_str(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
                "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control",
                "\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        // The members' order as written in the canonical text (a parsed Map would re-sort).
        let text = canonicalize(&v);
        let mut order: Vec<(usize, String)> = match &v {
            Value::Object(m) => m
                .values()
                .map(|v| {
                    let s = v.as_str().unwrap();
                    (text.find(&format!("\"{s}\"")).unwrap(), s.to_owned())
                })
                .collect(),
            _ => unreachable!(),
        };
        order.sort();
        let order: Vec<String> = order.into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            order,
            [
                "Carriage Return",
                "One",
                "Control",
                "Latin Small Letter O With Diaeresis",
                "Euro Sign",
                "Emoji: Grinning Face",
                "Hebrew Letter Dalet With Dagesh"
            ]
        );
    }

    /// The plain reading of RFC 8785 the fast paths above must agree with: every string
    /// escaped character by character, every key compared in UTF-16, every number through
    /// the shortest-digits search.
    fn reference(out: &mut String, v: &Value) {
        match v {
            Value::String(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\u{08}' => out.push_str("\\b"),
                        '\u{0c}' => out.push_str("\\f"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Value::Number(n) => out.push_str(&format_f64(n.as_f64().unwrap())),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    reference(out, item);
                }
                out.push(']');
            }
            Value::Object(map) => {
                let mut members: Vec<_> = map.iter().collect();
                members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                out.push('{');
                for (i, (k, v)) in members.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    reference(out, &Value::String(k.clone()));
                    out.push(':');
                    reference(out, v);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    fn arbitrary_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        // Characters from every range the fast paths distinguish: C0 controls and the escaped
        // ASCII, plain ASCII, two- and three-byte characters below and above U+E000, and
        // characters beyond U+FFFF.
        let ch = prop_oneof![
            0u32..0x20,
            prop::sample::select(vec![0x22u32, 0x5c, 0x7f]),
            0x20u32..0x7f,
            0x80u32..0x800,
            0xe000u32..0x10000,
            0x10000u32..0x10ffff,
        ]
        .prop_map(|c| char::from_u32(c).unwrap_or('x'));
        let text =
            prop::collection::vec(ch, 0..6).prop_map(|cs| cs.into_iter().collect::<String>());
        let number = prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-(1i64 << 54)..(1i64 << 54)).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(Value::from),
        ];
        let leaf = prop_oneof![
            text.clone().prop_map(Value::String),
            number,
            Just(Value::Null)
        ];
        leaf.prop_recursive(3, 24, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((text.clone(), inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn fast_paths_agree_with_the_plain_reading(v in arbitrary_value()) {
            let mut want = String::new();
            reference(&mut want, &v);
            proptest::prop_assert_eq!(canonicalize(&v), want);
        }
    }

    #[test]
    fn escapes_only_what_rfc8785_requires() {
        let v = json!("\u{1}\u{1f}\u{7f}\u{2028}<>&/é");
        assert_eq!(canonicalize(&v), "\"\\u0001\\u001f\u{7f}\u{2028}<>&/é\"");
    }
}
