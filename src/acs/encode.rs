//! A response's wire bytes, written by hand.
//!
//! Every answer a Guardian sends is a [`Response`]; serialising it through serde's derive
//! (a `flatten`ed outcome, so a map serializer, and serde_json's byte-at-a-time string
//! escaping) was a tenth of a replayed step. This writes the same bytes directly: the members
//! in the derive's order with its skip rules, strings escaped a run at a time, and serde only
//! for the members a decision rarely carries (modifications, ask and defer details, payloads,
//! signatures, policy data). `same_bytes_as_serde` holds it to `serde_json::to_vec` on random
//! responses.
//!
//! Owns nothing but the encoding; what a response holds is `envelope`'s.

use serde::Serialize;

use super::envelope::{AcsResult, Evaluator, Id, Outcome, Response, ResultMetadata, ResultType};

/// Appends `response` as compact JSON, byte for byte what `serde_json::to_writer` writes.
pub fn write_response(out: &mut Vec<u8>, response: &Response) {
    out.extend_from_slice(b"{\"jsonrpc\":");
    string(out, &response.jsonrpc);
    out.extend_from_slice(b",\"id\":");
    id(out, &response.id);
    match &response.outcome {
        Outcome::Result(r) => {
            out.extend_from_slice(b",\"result\":");
            result(out, r);
        }
        Outcome::Error(e) => {
            out.extend_from_slice(b",\"error\":");
            serde_value(out, e);
        }
    }
    out.push(b'}');
}

fn id(out: &mut Vec<u8>, id: &Id) {
    match id {
        Id::Str(s) => string(out, s),
        Id::Num(n) => serde_value(out, n),
        Id::Null => out.extend_from_slice(b"null"),
    }
}

/// `AcsResult`'s members in declaration order, each skipped as its `skip_serializing_if` says.
fn result(out: &mut Vec<u8>, r: &AcsResult) {
    out.extend_from_slice(match r.kind {
        ResultType::Final => b"{\"type\":\"final\",\"acs_version\":",
    });
    string(out, &r.acs_version);
    out.extend_from_slice(b",\"request_id\":");
    string(out, &r.request_id);
    out.extend_from_slice(b",\"decision\":\"");
    out.extend_from_slice(r.decision.as_str().as_bytes());
    out.push(b'"');
    if let Some(reasoning) = &r.reasoning {
        out.extend_from_slice(b",\"reasoning\":");
        string(out, reasoning);
    }
    if !r.reason_codes.is_empty() {
        out.extend_from_slice(b",\"reason_codes\":");
        strings(out, &r.reason_codes);
    }
    if !r.policy_references.is_empty() {
        out.extend_from_slice(b",\"policy_references\":");
        serde_value(out, &r.policy_references);
    }
    if !r.policy_data.is_empty() {
        out.extend_from_slice(b",\"policy_data\":");
        serde_value(out, &r.policy_data);
    }
    if !r.cited_provenance_ids.is_empty() {
        out.extend_from_slice(b",\"cited_provenance_ids\":");
        strings(out, &r.cited_provenance_ids);
    }
    optional(out, b",\"modifications\":", r.modifications.as_ref());
    optional(out, b",\"ask_details\":", r.ask_details.as_ref());
    optional(out, b",\"defer_details\":", r.defer_details.as_ref());
    optional(out, b",\"payload\":", r.payload.as_ref());
    if let Some(chain_hash) = &r.chain_hash {
        out.extend_from_slice(b",\"chain_hash\":");
        string(out, chain_hash);
    }
    optional(out, b",\"signature\":", r.signature.as_ref());
    if let Some(m) = &r.metadata {
        out.extend_from_slice(b",\"metadata\":");
        metadata(out, m);
    }
    out.push(b'}');
}

fn metadata(out: &mut Vec<u8>, m: &ResultMetadata) {
    // Each member written opens with a comma but the first.
    let mut sep = b'{';
    let mut key = |out: &mut Vec<u8>, name: &[u8]| {
        out.push(sep);
        sep = b',';
        out.push(b'"');
        out.extend_from_slice(name);
        out.extend_from_slice(b"\":");
    };
    if let Some(e) = m.evaluator {
        key(out, b"evaluator");
        out.extend_from_slice(match e {
            Evaluator::Deterministic => b"\"deterministic\"",
            Evaluator::Agent => b"\"agent\"",
            Evaluator::Composite => b"\"composite\"",
        });
    }
    if let Some(v) = &m.evaluator_version {
        key(out, b"evaluator_version");
        string(out, v);
    }
    if let Some(ms) = m.evaluation_duration_ms {
        key(out, b"evaluation_duration_ms");
        decimal(out, ms);
    }
    if let Some(v) = &m.model_id {
        key(out, b"model_id");
        string(out, v);
    }
    if let Some(c) = m.confidence {
        key(out, b"confidence");
        serde_value(out, &c);
    }
    if sep == b'{' {
        out.push(b'{');
    }
    out.push(b'}');
}

/// `n` in decimal, as serde_json writes an unsigned integer.
fn decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

fn optional<T: Serialize>(out: &mut Vec<u8>, key: &[u8], v: Option<&T>) {
    if let Some(v) = v {
        out.extend_from_slice(key);
        serde_value(out, v);
    }
}

/// A member a decision rarely carries, through serde.
fn serde_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    serde_json::to_writer(&mut *out, v).expect("a response member always serialises");
}

fn strings(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, s);
    }
    out.push(b']');
}

/// A JSON string as serde_json writes it: `"` and `\` escaped, the control characters as
/// `\b \t \n \f \r` or `\u00xx` (lowercase hex), everything else (non-ASCII too) as it is.
/// Runs that need no escape are copied whole.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    // Eight bytes at a time while none needs an escape (most strings: ids, digests, words).
    let clean = bytes
        .chunks_exact(8)
        .take_while(|c| !needs_escape(u64::from_le_bytes((*c).try_into().expect("8 bytes"))))
        .count()
        * 8;
    for (i, &b) in bytes.iter().enumerate().skip(clean) {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0A => b"\\n",
            0x0C => b"\\f",
            0x0D => b"\\r",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xF)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether any of eight bytes (a little-endian word) is a control character, `"` or `\\`: the
/// bytes [`string`] escapes. Each test sets a byte's high bit where it holds (a byte of the
/// word at or over `0x80` is no escape, and is masked out).
fn needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (control | zero_in(w ^ (ONES * u64::from(b'"'))) | zero_in(w ^ (ONES * u64::from(b'\\')))) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acs::envelope::{Decision, Modifications, PolicyReference, RpcError, Signature};
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    fn text() -> impl Strategy<Value = String> {
        // Escapes, controls, quotes, non-ASCII and plain runs, mixed.
        prop::collection::vec(
            prop_oneof![
                Just("\"".to_string()),
                Just("\\".to_string()),
                Just("/".to_string()),
                (0u8..0x20).prop_map(|b| char::from(b).to_string()),
                Just("é€😀".to_string()),
                Just("\u{7f}\u{2028}".to_string()),
                "[a-z0-9 _.-]{0,12}",
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    fn decision() -> impl Strategy<Value = Decision> {
        prop_oneof![
            Just(Decision::Allow),
            Just(Decision::Deny),
            Just(Decision::Ask),
            Just(Decision::Defer),
            Just(Decision::Modify),
        ]
    }

    fn metadata() -> impl Strategy<Value = ResultMetadata> {
        (
            prop::option::of(prop_oneof![
                Just(Evaluator::Deterministic),
                Just(Evaluator::Agent),
                Just(Evaluator::Composite),
            ]),
            prop::option::of(text()),
            prop::option::of(any::<u64>()),
            prop::option::of(text()),
            prop::option::of(0.0f64..=1.0),
        )
            .prop_map(
                |(evaluator, version, ms, model, confidence)| ResultMetadata {
                    evaluator,
                    evaluator_version: version,
                    evaluation_duration_ms: ms,
                    model_id: model,
                    confidence,
                },
            )
    }

    fn result() -> impl Strategy<Value = AcsResult> {
        (
            (text(), text(), decision(), prop::option::of(text())),
            (
                prop::collection::vec(text(), 0..3),
                prop::collection::vec(text(), 0..3),
                prop::option::of(text()),
                prop::option::of(metadata()),
            ),
            (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        )
            .prop_map(|(head, lists, extras)| {
                let (version, request_id, decision, reasoning) = head;
                let (codes, cited, chain, metadata) = lists;
                let (refs, data, rare, signed) = extras;
                let mut r = AcsResult::new(request_id, decision);
                r.acs_version = version;
                r.reasoning = reasoning;
                r.reason_codes = codes;
                r.cited_provenance_ids = cited;
                r.chain_hash = chain;
                r.metadata = metadata;
                if refs {
                    r.policy_references = vec![PolicyReference {
                        policy_id: Some("p\"1".into()),
                        rule_id: Some("r".into()),
                        ..Default::default()
                    }];
                }
                if data {
                    let mut m = Map::new();
                    m.insert("warden".into(), json!({"z": 1, "a": [true, null, 2.5]}));
                    r.policy_data = m;
                }
                if rare {
                    r.modifications = Some(Modifications::default());
                    let mut payload = Map::new();
                    payload.insert("status".into(), Value::from("alive"));
                    r.payload = Some(payload);
                }
                if signed {
                    r.signature = Some(Signature {
                        algorithm: "HMAC-SHA256".into(),
                        value: "abc".into(),
                        key_id: "k\n".into(),
                    });
                }
                r
            })
    }

    fn id() -> impl Strategy<Value = Id> {
        prop_oneof![
            text().prop_map(Id::Str),
            any::<i64>().prop_map(Id::from),
            any::<u64>().prop_map(|n| Id::Num(n.into())),
            (-1e300f64..1e300).prop_map(|f| Id::Num(serde_json::Number::from_f64(f).unwrap())),
            Just(Id::Null),
        ]
    }

    fn response() -> impl Strategy<Value = Response> {
        prop_oneof![
            (id(), result()).prop_map(|(id, r)| Response::result(id, r)),
            (id(), any::<i64>(), text(), text()).prop_map(|(id, code, reason, detail)| {
                Response::error(id, RpcError::new(code, &reason, detail))
            }),
        ]
    }

    proptest! {
        /// The word test says exactly whether one of its eight bytes is escaped.
        #[test]
        fn a_word_needs_an_escape_when_one_of_its_bytes_does(
            bytes in proptest::array::uniform8(prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0u8..0x21]),
        ) {
            let wanted = bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
            prop_assert_eq!(needs_escape(u64::from_le_bytes(bytes)), wanted);
        }

        #[test]
        fn same_bytes_as_serde(response in response()) {
            let mut ours = Vec::new();
            write_response(&mut ours, &response);
            prop_assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&response).unwrap()
            );
        }

        #[test]
        fn strings_escape_as_serde_does(s in text()) {
            let mut ours = Vec::new();
            string(&mut ours, &s);
            prop_assert_eq!(ours, serde_json::to_vec(&s).unwrap());
        }
    }

    #[test]
    fn every_control_character_and_the_empty_metadata() {
        let all: String = (0u8..0x80).map(char::from).collect();
        let mut ours = Vec::new();
        string(&mut ours, &all);
        assert_eq!(ours, serde_json::to_vec(&all).unwrap());
        let mut r = AcsResult::allow("x");
        r.metadata = Some(ResultMetadata::default());
        let response = Response::result(Id::Null, r);
        let mut ours = Vec::new();
        write_response(&mut ours, &response);
        assert_eq!(ours, serde_json::to_vec(&response).unwrap());
    }
}
