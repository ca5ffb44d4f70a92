//! The ACS wire layer against hostile and well-formed input: a malformed-request corpus with
//! the error code each file must produce, generated inputs too awkward for files (invalid
//! UTF-8, extreme nesting, oversize), valid envelopes, and schema validation of every
//! response built here.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::schema::{
    assert_valid_request, assert_valid_response, read_json, response_errors, test_data_dir,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use warden::acs::crypto;
use warden::acs::envelope::{
    codes, decode_request, decode_request_with, AcsResult, Approver, ApproverType, AskDetails,
    Decision, DecodeOptions, DeferDetails, DeferReason, Evaluator, ExtensionScope, Id,
    IntentExtension, Modifications, PolicyReference, Redaction, ResolutionMethod, Response,
    ResultMetadata, RpcError, TimeoutDecision, TimeoutDisposition,
};
use warden::acs::jcs;
use warden::acs::json::{self as strict, Limits, MAX_DEPTH};

const RID: &str = "8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10";
const SID: &str = "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30";
const KNOWN_CODES: [i64; 4] = [
    codes::PARSE_ERROR,
    codes::INVALID_REQUEST,
    codes::METHOD_NOT_FOUND,
    codes::INVALID_PARAMS,
];

fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.insert(name, std::fs::read(&path).unwrap());
        }
    }
    out
}

/// Decodes `bytes`, expecting an error; checks the response is well-formed and schema-valid.
fn expect_error(bytes: &[u8], opts: &DecodeOptions<'_>) -> (Id, RpcError) {
    let resp = match decode_request_with(bytes, opts) {
        Ok((req, _)) => panic!("decoded, but should have failed: {req:?}"),
        Err(resp) => resp,
    };
    let wire = resp.to_vec();
    let v = strict::parse_strict(&wire).expect("error responses are strict JSON");
    assert_eq!(v, resp.to_value());
    assert_valid_response(&v);
    let e = resp.as_error().expect("an error response").clone();
    assert_eq!(Some(e.message.as_str()), Some(RpcError::title(e.code)));
    let data = e.data.as_ref().expect("error data");
    assert!(
        data["reason"].is_string() && data["message"].is_string(),
        "{data}"
    );
    (resp.id.clone(), e)
}

#[test]
fn malformed_corpus_yields_the_expected_codes() {
    let dir = test_data_dir().join("malformed");
    let expected = read_json(&dir.join("expected.json"));
    let expected = expected.as_object().expect("expected.json is a map");
    let mut files = files_in(&dir);
    files.remove("expected.json");
    let listed: Vec<&String> = expected.keys().collect();
    let present: Vec<&String> = files.keys().collect();
    assert_eq!(
        listed, present,
        "expected.json and the corpus must list the same files"
    );
    assert!(files.len() >= 40, "corpus unexpectedly small");

    for (name, bytes) in &files {
        let want = &expected[name];
        let (id, e) = std::panic::catch_unwind(|| expect_error(bytes, &DecodeOptions::default()))
            .unwrap_or_else(|_| panic!("{name}: panicked"));
        assert_eq!(Some(e.code), want["code"].as_i64(), "{name}: {e:?}");
        let want_id = match &want["id"] {
            Value::Null => Id::Null,
            v => Id::from_value(v).unwrap(),
        };
        assert_eq!(id, want_id, "{name}: response id");
        if let Some(field) = want.get("field").and_then(Value::as_str) {
            assert_eq!(e.data.as_ref().unwrap()["field"], field, "{name}: {e:?}");
            assert!(
                e.data.as_ref().unwrap()["message"]
                    .as_str()
                    .unwrap()
                    .starts_with(field),
                "{name}: message should name {field}"
            );
        }
        if e.code == codes::PARSE_ERROR {
            assert!(
                e.data.as_ref().unwrap()["offset"].is_u64(),
                "{name}: offset"
            );
        }
        if e.code == codes::METHOD_NOT_FOUND {
            assert!(e.data.as_ref().unwrap()["method"].is_string(), "{name}");
        }
    }
}

#[test]
fn generated_malformed_inputs() {
    let opts = DecodeOptions::default();
    let valid =
        std::fs::read(test_data_dir().join("valid/tool_call_request_minimal.json")).unwrap();
    let text = String::from_utf8(valid.clone()).unwrap();

    // Invalid UTF-8: a stray continuation byte, an overlong encoding, an encoded surrogate,
    // a truncated sequence, and a bad byte inside a member name.
    for bad in [
        &b"\x80"[..],
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xe2\x82",
        b"\xff",
    ] {
        let mut bytes = text.replacen("echo rm", "echo \u{1}rm", 1).into_bytes();
        let at = bytes.iter().position(|b| *b == 1).unwrap();
        bytes.splice(at..at + 1, bad.iter().copied());
        let (id, e) = expect_error(&bytes, &opts);
        assert_eq!((id, e.code), (Id::Null, codes::PARSE_ERROR));
        assert_eq!(e.data.unwrap()["offset"], at);
        let key = text
            .replacen("\"raw_command\"", "\"raw_\u{1}command\"", 1)
            .into_bytes();
        let at = key.iter().position(|b| *b == 1).unwrap();
        let mut key = key;
        key.splice(at..at + 1, bad.iter().copied());
        assert_eq!(expect_error(&key, &opts).1.code, codes::PARSE_ERROR);
    }

    // A byte-order mark and a NUL byte.
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(&valid);
    assert_eq!(expect_error(&bom, &opts).1.code, codes::PARSE_ERROR);
    let nul = text.replacen("echo rm", "echo \0rm", 1);
    assert_eq!(
        expect_error(nul.as_bytes(), &opts).1.code,
        codes::PARSE_ERROR
    );

    // Nesting: the limit itself is accepted, one more level is not, and absurd depth is
    // refused without exhausting the stack.
    let nest = |levels: usize| {
        text.replacen(
            "\"raw_command\"",
            &format!(
                "\"deep\":{}{},\"raw_command\"",
                "[".repeat(levels),
                "]".repeat(levels)
            ),
            1,
        )
    };
    // The envelope, params and payload already take three levels.
    assert!(decode_request(nest(MAX_DEPTH - 3).as_bytes()).is_ok());
    let (_, e) = expect_error(nest(MAX_DEPTH - 2).as_bytes(), &opts);
    assert_eq!(e.code, codes::PARSE_ERROR);
    assert!(e.data.unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("nested deeper"));
    let abyss = format!("{}{}", "{\"a\":[".repeat(500_000), "]}".repeat(500_000));
    assert_eq!(
        expect_error(abyss.as_bytes(), &opts).1.code,
        codes::PARSE_ERROR
    );
    let unclosed = "[".repeat(1_000_000);
    assert_eq!(
        expect_error(unclosed.as_bytes(), &opts).1.code,
        codes::PARSE_ERROR
    );

    // Size limit.
    let small = DecodeOptions {
        limits: Limits {
            max_bytes: 64,
            max_depth: MAX_DEPTH,
        },
        known_method: None,
    };
    let (_, e) = expect_error(&valid, &small);
    assert_eq!(e.code, codes::PARSE_ERROR);
    assert!(e.data.unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("limit"));

    // Huge but finite numbers are fine; out-of-range ones are not.
    assert!(decode_request(
        text.replacen("\"raw_command\"", "\"n\":1e308,\"raw_command\"", 1)
            .as_bytes()
    )
    .is_ok());
    assert!(decode_request(
        text.replacen(
            "\"raw_command\"",
            "\"n\":123456789012345678901234567890,\"raw_command\"",
            1
        )
        .as_bytes()
    )
    .is_ok());
    assert_eq!(
        expect_error(
            text.replacen("\"raw_command\"", "\"n\":1e309,\"raw_command\"", 1)
                .as_bytes(),
            &opts
        )
        .1
        .code,
        codes::PARSE_ERROR
    );
}

#[test]
fn method_knowledge_is_the_callers() {
    let known = |m: &str| matches!(m, "steps/toolCallRequest" | "system/ping");
    let opts = DecodeOptions {
        known_method: Some(&known),
        ..DecodeOptions::default()
    };
    let valid =
        std::fs::read(test_data_dir().join("valid/tool_call_request_minimal.json")).unwrap();
    assert!(decode_request_with(&valid, &opts).is_ok());
    let text = String::from_utf8(valid).unwrap();
    let other = text.replace("steps/toolCallRequest", "steps/noSuchHook");
    // Pattern-only decoding accepts it; the caller's list does not.
    assert!(decode_request(other.as_bytes()).is_ok());
    let (id, e) = expect_error(other.as_bytes(), &opts);
    assert_eq!(e.code, codes::METHOD_NOT_FOUND);
    assert_eq!(id, Id::from(RID));
    assert_eq!(e.data.unwrap()["method"], "steps/noSuchHook");
}

#[test]
fn valid_corpus_decodes_and_round_trips() {
    let files = files_in(&test_data_dir().join("valid"));
    assert!(files.len() >= 5);
    for (name, bytes) in &files {
        let (req, raw) = decode_request_with(bytes, &DecodeOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {:?}", e.as_error()));
        assert_valid_request(&raw);
        assert_ne!(req.id, Id::Null);
        // The typed request keeps every member, so it canonicalises like the raw value.
        let typed = serde_json::to_value(&req).unwrap();
        assert_eq!(jcs::canonicalize(&typed), jcs::canonicalize(&raw), "{name}");
        // Signing the raw value and re-verifying works for every shape.
        let key = crypto::session_key(b"ikm", &req.params.metadata.session_id);
        let mut signed = raw.clone();
        crypto::attach_signature(&key, "k1", &mut signed).unwrap();
        assert_eq!(crypto::verify(&key, &signed), Ok(()), "{name}");
        assert_eq!(
            decode_request(&serde_json::to_vec(&signed).unwrap()).map(|r| r.method),
            Ok(req.method.clone())
        );
        // A result answering it is schema-valid.
        let resp = Response::result(
            req.id.clone(),
            AcsResult::allow(req.params.request_id.clone()),
        );
        assert_valid_response(&resp.to_value());
    }

    let full = decode_request(&files["full_metadata_and_extensions.json"]).unwrap();
    assert_eq!(full.params.extra["x_params_extension"], json!([1, 2, 3]));
    assert_eq!(
        full.params.metadata.extra["x_vendor_trace"],
        json!({"span": "abc"})
    );
    let user = full.params.metadata.user_context.as_ref().unwrap();
    assert_eq!(user.roles.as_deref(), Some(&["admin".to_string()][..]));
    assert_eq!(user.extra["x_user"], 1);
    assert_eq!(
        full.params.nonce.as_deref().map(|n| n.chars().count()),
        Some(16)
    );
    assert_eq!(
        full.params.signature.as_ref().map(|s| s.algorithm.as_str()),
        Some("ML-DSA-65+ECDSA-P256")
    );
    let ping = decode_request(&files["ping_numeric_id.json"]).unwrap();
    assert_eq!(ping.id, Id::from(7));
}

fn modifications() -> Modifications {
    let mut overrides = Map::new();
    overrides.insert("path".into(), json!({"value": "/tmp/safe"}));
    Modifications {
        modified_content: None,
        redactions: vec![Redaction {
            path: "/raw_command".into(),
            replacement: Some("[SECRET]".into()),
        }],
        parameter_overrides: overrides,
    }
}

fn ask_details() -> AskDetails {
    AskDetails {
        approver: Approver {
            kind: ApproverType::Human,
            id: "alice@example.com".into(),
            endpoint: Some("https://approvals.example/acs".into()),
            auth: None,
        },
        question: "Allow deleting /var/log?".into(),
        context: Some("tool call rm".into()),
        options: vec!["approve".into(), "reject".into()],
        timeout_seconds: 300,
        timeout_disposition: Some(TimeoutDisposition::Deny),
        intent_extension: Some(IntentExtension {
            capabilities: vec![
                json!({"tool": "Bash", "operation": "delete", "resource": "/var/log"}),
            ],
            scope: ExtensionScope::ThisRequest,
            provenance: None,
        }),
    }
}

fn defer_details() -> DeferDetails {
    DeferDetails {
        reason: DeferReason::InsufficientContext,
        resolution_method: ResolutionMethod::AdditionalContext,
        resolution_timeout_ms: 30_000,
        timeout_decision: TimeoutDecision::Deny,
        required_context: vec!["ticket_id".into()],
    }
}

/// One result of every kind this crate can build.
fn sample_results() -> Vec<AcsResult> {
    let chain = "14e6d50a913e8295606bc0d86ee9cde870040e0e0a319b13ae15836128d0d111";
    let mut rich = AcsResult::deny(RID, "untrusted data flows into a shell command")
        .with_reason_code("fides_p_t_violation")
        .with_reason_code("untrusted_into_consequential")
        .with_chain_hash(chain);
    rich.policy_references = vec![PolicyReference {
        policy_id: Some("fides".into()),
        policy_version: Some("3".into()),
        policy_name: None,
        rule_id: Some("no-untrusted-shell".into()),
    }];
    rich.policy_data
        .insert("fides".into(), json!({"path": "/arguments/command"}));
    rich.cited_provenance_ids = vec!["p1".into(), "p2".into()];
    rich.metadata = Some(ResultMetadata {
        evaluator: Some(Evaluator::Composite),
        evaluator_version: Some("warden 0.1.0".into()),
        evaluation_duration_ms: Some(3),
        model_id: Some("model-x".into()),
        confidence: Some(0.75),
    });
    let mut ping = AcsResult::allow(RID);
    ping.payload = Some(
        json!({"status": "ok", "echo": "hi", "server_timestamp": "2026-09-19T10:00:00Z"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let whole = Modifications {
        modified_content: Some("[content removed]".into()),
        ..Modifications::default()
    };
    vec![
        AcsResult::allow(RID),
        AcsResult::allow(RID)
            .with_reasoning("nothing matched")
            .with_chain_hash(chain),
        ping,
        rich,
        AcsResult::deny(RID, "MODIFY unsupported: would redact /raw_command")
            .with_reason_code("modify_unsupported"),
        AcsResult::modify(RID, "secret redacted, path pinned", modifications()),
        AcsResult::modify(RID, "replaced", whole),
        AcsResult::ask(RID, "needs approval", ask_details()),
        AcsResult::defer(RID, "need a ticket", defer_details()),
    ]
}

fn sample_errors() -> Vec<RpcError> {
    vec![
        RpcError::parse_error("expected a JSON value at byte 0", Some(0)),
        RpcError::invalid_request("batch requests are not supported"),
        RpcError::method_not_found("steps/nope"),
        RpcError::invalid_params("params.nonce", "must be 16 to 64 characters long"),
        RpcError::internal("engine crashed"),
        RpcError::session_refused("policy requires acs-audit"),
        RpcError::unsupported_version("no common version", &["0.1.0"]),
        RpcError::provenance_required("provenance_producer is none"),
        RpcError::capability_not_negotiated("agbom/snapshot"),
        RpcError::signature_invalid("signature does not match the envelope"),
        RpcError::replay_detected("request_id already seen in this session"),
        RpcError::timestamp_out_of_window("timestamp is 301 s old", 300_000),
        RpcError::chain_mismatch("client chain head differs"),
    ]
}

#[test]
fn every_built_response_is_schema_valid() {
    let key = crypto::session_key(b"ikm", SID);
    for (i, result) in sample_results().into_iter().enumerate() {
        result
            .validate()
            .unwrap_or_else(|e| panic!("result {i}: {e}"));
        for id in [Id::from(RID), Id::from(42)] {
            let resp = Response::result(id, result.clone());
            let mut v = resp.to_value();
            assert_valid_response(&v);
            crypto::attach_signature(&key, "k1", &mut v).unwrap();
            assert_valid_response(&v);
            assert_eq!(crypto::verify(&key, &v), Ok(()));
            // Wire bytes are strict JSON and decode back to the same response.
            let back: Response = serde_json::from_value(
                strict::parse_strict(&serde_json::to_vec(&v).unwrap()).unwrap(),
            )
            .unwrap();
            assert_eq!(back.as_result().unwrap().decision, result.decision);
            assert_eq!(jcs::canonicalize(&back.to_value()), jcs::canonicalize(&v));
        }
    }
    let codes_seen: Vec<i64> = sample_errors().iter().map(|e| e.code).collect();
    assert_eq!(
        codes_seen,
        [
            -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003, -32004, -32005,
            -32006, -32007
        ]
    );
    for e in sample_errors() {
        assert!(e.reason().is_some());
        for id in [Id::Null, Id::from("req-1")] {
            let mut v = Response::error(id, e.clone()).to_value();
            assert_valid_response(&v);
            crypto::attach_signature(&key, "k1", &mut v).unwrap();
            assert!(v["error"]["signature"].is_object());
            assert_valid_response(&v);
            assert_eq!(crypto::verify(&key, &v), Ok(()));
        }
    }
    let e = RpcError::unsupported_version("x", &["0.1.0"]);
    assert_eq!(e.data.unwrap()["supported_versions"], json!(["0.1.0"]));
}

#[test]
fn schema_validator_is_not_vacuous() {
    let good = Response::result(Id::from(RID), AcsResult::deny(RID, "no")).to_value();
    assert_valid_response(&good);
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        assert!(!response_errors(&v).is_empty(), "schema accepted {v}");
    };
    broken(&|v| {
        v["result"].as_object_mut().unwrap().remove("reasoning");
    });
    broken(&|v| v["id"] = Value::Null);
    broken(&|v| v["result"]["decision"] = json!("DENY"));
    broken(&|v| v["result"]["request_id"] = json!("not-a-uuid"));
    broken(&|v| v["result"]["chain_hash"] = json!("ABC"));
    broken(&|v| v["error"] = json!({"code": -32603, "message": "x"}));
    broken(&|v| v["extra"] = json!(1));
    broken(&|v| v["result"]["reason_codes"] = json!(["a", "a"]));
    broken(&|v| {
        v["result"]["decision"] = json!("modify");
        v["result"]["modifications"] = json!({});
    });
    broken(&|v| {
        v["result"]["decision"] = json!("defer");
        v["result"]["defer_details"] = json!({"reason": "low_confidence"});
    });
    broken(&|v| {
        v["result"]["decision"] = json!("ask");
        v["result"]["ask_details"] = json!({"question": "?", "timeout_seconds": 1});
    });
}

#[test]
fn invalid_results_are_caught_before_sending() {
    let mut m = AcsResult::modify(RID, "x", modifications());
    m.modifications.as_mut().unwrap().modified_content = Some("all".into());
    assert!(m.validate().is_err());
    let mut overlap = modifications();
    overlap.redactions.push(Redaction {
        path: "/arguments/path/value".into(),
        replacement: None,
    });
    assert!(AcsResult::modify(RID, "x", overlap).validate().is_err());
    assert!(AcsResult::new(RID, Decision::Ask)
        .with_reasoning("r")
        .validate()
        .is_err());
    assert!(AcsResult::allow("nope").validate().is_err());
    assert!(AcsResult::allow(RID)
        .with_chain_hash("XYZ")
        .validate()
        .is_err());
    let mut agent = AcsResult::allow(RID);
    agent.metadata = Some(ResultMetadata {
        evaluator: Some(Evaluator::Agent),
        ..ResultMetadata::default()
    });
    assert!(agent.validate().is_err());
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Canonical JSON is strict JSON, parses back to the same value (up to the f64 view of
    /// numbers), and canonicalises to itself.
    #[test]
    fn jcs_is_idempotent(v in arb_json()) {
        let c = jcs::canonicalize(&v);
        let back = strict::parse_strict(c.as_bytes()).expect("canonical JSON parses strictly");
        prop_assert_eq!(jcs::canonicalize(&back), c.clone());
        let theirs: Value = serde_json::from_str(&c).unwrap();
        prop_assert_eq!(jcs::canonicalize(&theirs), c);
    }

    /// Any JSON document (objects up to 40 members, so on both sides of the parser's gathered
    /// members and its hashed map) reads as serde_json reads it, members in their order.
    #[test]
    fn documents_parse_like_serde_json_in_order(
        v in arb_json(),
        wide in prop::collection::vec((any::<String>(), any::<i64>()), 0..40),
    ) {
        let wide: serde_json::Map<String, Value> =
            wide.into_iter().map(|(k, n)| (k, json!(n))).collect();
        let doc = json!({"v": v, "wide": wide, "last": [wide.clone()]});
        let text = serde_json::to_string(&doc).unwrap();
        let ours = strict::parse_strict(text.as_bytes()).expect("serde's output parses strictly");
        prop_assert_eq!(serde_json::to_string(&ours).unwrap(), text);
    }

    /// A JSON string literal of any content (quotes, backslashes, control characters and
    /// multi-byte characters at every offset, so on both sides of the parser's eight-byte
    /// scan) reads as serde_json reads it, and raw control characters are refused by both.
    #[test]
    fn strings_parse_like_serde_json(
        chars in proptest::collection::vec(
            prop_oneof![
                Just('"'), Just('\\'), Just('\u{1}'), Just('\n'), Just('\u{1f}'), Just(' '),
                Just('é'), Just('😀'), Just('\u{7f}'), Just('\u{a0}'), proptest::char::range('a', 'z')
            ],
            0..40,
        ),
        raw_too in any::<bool>(),
    ) {
        let s: String = chars.iter().collect();
        // Escaped by serde (so valid), and raw (control characters left in: invalid).
        let escaped = serde_json::to_string(&s).unwrap();
        let parsed = strict::parse_strict(escaped.as_bytes()).unwrap();
        prop_assert_eq!(parsed, Value::String(s.clone()));
        if raw_too {
            let raw = format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
            let ours = strict::parse_strict(raw.as_bytes()).ok();
            let theirs: Option<Value> = serde_json::from_str(&raw).ok();
            prop_assert_eq!(ours, theirs);
        }
    }

    /// Truncating or corrupting a valid envelope never panics, and every failure is one of
    /// the four decoding codes in a schema-valid response.
    #[test]
    fn corrupted_envelopes_never_panic(cut in 0usize..2000, at in 0usize..2000, byte in any::<u8>()) {
        let mut bytes = std::fs::read(test_data_dir().join("valid/full_metadata_and_extensions.json")).unwrap();
        let at = at % bytes.len();
        bytes[at] = byte;
        bytes.truncate(cut.min(bytes.len()));
        if let Err(resp) = decode_request(&bytes) {
            let e = resp.as_error().unwrap();
            prop_assert!(KNOWN_CODES.contains(&e.code), "{:?}", e);
            prop_assert!(response_errors(&resp.to_value()).is_empty());
        }
    }

    /// Arbitrary bytes never panic the strict parser.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = strict::parse_strict(&bytes);
        let _ = decode_request(&bytes);
    }
}

#[test]
fn non_integers_where_integers_belong_are_errors_not_panics() {
    let base = Response::result(Id::from(RID), AcsResult::ask(RID, "r", ask_details())).to_value();
    for bad in [
        json!(1.5),
        json!(-1),
        json!(1e300),
        json!("300"),
        json!(u64::MAX as f64),
    ] {
        let mut v = base.clone();
        v["result"]["ask_details"]["timeout_seconds"] = bad.clone();
        assert!(
            serde_json::from_value::<Response>(v).is_err(),
            "timeout_seconds {bad} was accepted"
        );
    }
    let mut v = base.clone();
    v["result"]["metadata"] = json!({"evaluation_duration_ms": 2.5});
    assert!(serde_json::from_value::<Response>(v).is_err());
    let parsed = strict::parse_strict(br#"{"n":1.0,"m":18446744073709551616}"#).unwrap();
    assert!(parsed["n"].as_u64().is_none() && parsed["n"].as_f64() == Some(1.0));
    assert!(parsed["m"].as_u64().is_none());
}
