//! Reproduces every known answer in the vendored ACS fixtures (`vendor/acs/fixtures`) byte for
//! byte: canonical JCS forms, `request_hash`, chain `entry_hash`es, HKDF session keys and HMAC
//! signatures.

mod common;

use common::schema::{acs_dir, assert_valid_request, assert_valid_response, read_json};
use serde_json::Value;
use warden::acs::crypto::{self, ChainErrorReason};
use warden::acs::envelope::{decode_request, Decision, Response};
use warden::acs::jcs;

fn fixture(rel: &str) -> Value {
    read_json(&acs_dir().join("fixtures").join(rel))
}

fn chain_vectors() -> Value {
    fixture("reference-implementations/agt-go/internal/chain/testdata/vectors.json")
}

fn envelope_vectors() -> Value {
    fixture("reference-implementations/agt-go/internal/envelope/testdata/vectors.json")
}

fn kat_vectors() -> Value {
    fixture("derived/hmac-kat-adapters-common.json")
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("fixture has no string at {ptr}"))
}

// --- chain/testdata/vectors.json --------------------------------------------------------------

#[test]
fn request_hash_known_answer() {
    let v = chain_vectors();
    let params = &v["request_hash"]["params"];
    assert_eq!(jcs::canonicalize(params), s(&v, "/request_hash/canonical"));
    assert_eq!(crypto::request_hash(params), s(&v, "/request_hash/hash"));
}

/// Each entry with `entry_hash` and `previous_hash` stored in it, as a Guardian keeps them.
fn stored_chain(v: &Value) -> Vec<Value> {
    v["chain"]
        .as_array()
        .expect("chain array")
        .iter()
        .map(|link| {
            let mut e = link["entry"].clone();
            e["entry_hash"] = link["entry_hash"].clone();
            e["previous_hash"] = link["previous_hash"].clone();
            e
        })
        .collect()
}

#[test]
fn chain_entries_known_answers() {
    let v = chain_vectors();
    let links = v["chain"].as_array().expect("chain array");
    assert_eq!(links.len(), 3);
    let mut previous: Option<String> = None;
    for (i, link) in links.iter().enumerate() {
        let entry = &link["entry"];
        assert_eq!(
            jcs::canonicalize(entry),
            link["canonical_content"].as_str().unwrap(),
            "canonical content of entry {i}"
        );
        let prev = link["previous_hash"].as_str();
        assert_eq!(prev.map(str::to_owned), previous, "linkage of entry {i}");
        let h = crypto::entry_hash(entry, prev).expect("valid previous hash");
        assert_eq!(
            h,
            link["entry_hash"].as_str().unwrap(),
            "entry_hash of entry {i}"
        );
        // entry_hash and previous_hash inside the entry are excluded from the content.
        let stored = &stored_chain(&v)[i];
        assert_eq!(crypto::entry_hash(stored, prev).unwrap(), h);
        previous = Some(h);
    }
    // Entry 2 records the request_hash of the request_hash vector.
    assert_eq!(
        s(&v, "/chain/1/entry/request_hash"),
        s(&v, "/request_hash/hash")
    );
}

#[test]
fn chain_verifies_and_reports_tampering() {
    let v = chain_vectors();
    let chain = stored_chain(&v);
    assert_eq!(crypto::verify_chain(&chain), Ok(()));

    let mut tampered = chain.clone();
    tampered[1]["timestamp"] = Value::String("2026-09-19T10:00:09Z".into());
    let err = crypto::verify_chain(&tampered).unwrap_err();
    assert_eq!(err.index, 1);
    assert!(matches!(
        err.reason,
        ChainErrorReason::EntryHashMismatch { .. }
    ));

    let mut relinked = chain.clone();
    relinked[2]["previous_hash"] = chain[0]["entry_hash"].clone();
    let err = crypto::verify_chain(&relinked).unwrap_err();
    assert_eq!(
        (err.index, err.reason),
        (2, ChainErrorReason::PreviousMismatch)
    );

    let dropped = vec![chain[0].clone(), chain[2].clone()];
    assert_eq!(crypto::verify_chain(&dropped).unwrap_err().index, 1);
}

// --- envelope/testdata/vectors.json -----------------------------------------------------------

fn vector_key(v: &Value) -> [u8; 32] {
    let key = crypto::session_key(&unhex(s(v, "/ikm_hex")), s(v, "/session_id"));
    assert_eq!(
        crypto::hex(&key),
        s(v, "/session_key_hex"),
        "HKDF session key"
    );
    key
}

#[test]
fn session_key_known_answer() {
    vector_key(&envelope_vectors());
}

#[test]
fn request_signature_known_answer() {
    let v = envelope_vectors();
    let key = vector_key(&v);
    let signed = &v["request"]["signed"];
    let input = crypto::signing_input(signed);
    assert_eq!(
        String::from_utf8(input).unwrap(),
        s(&v, "/request/signing_input")
    );
    assert_eq!(
        crypto::sign(&key, signed),
        s(&v, "/request/signed/params/signature/value")
    );
    assert_eq!(crypto::verify(&key, signed), Ok(()));
    assert_eq!(
        s(&v, "/request/signed/params/signature/key_id"),
        s(&v, "/key_id")
    );

    // The wire bytes decode, and the typed request re-serialises to the same signing input.
    assert_valid_request(signed);
    let bytes = serde_json::to_vec(signed).unwrap();
    let req = decode_request(&bytes).expect("vector request decodes");
    assert_eq!(req.params.metadata.session_id, s(&v, "/session_id"));
    let round = serde_json::to_value(&req).unwrap();
    assert_eq!(crypto::signing_input(&round), crypto::signing_input(signed));

    let mut tampered = signed.clone();
    tampered["params"]["payload"]["raw_command"] = Value::String("ls".into());
    assert_eq!(
        crypto::verify(&key, &tampered),
        Err(crypto::SignatureError::Mismatch)
    );
}

#[test]
fn response_signature_known_answer() {
    let v = envelope_vectors();
    let key = vector_key(&v);
    let signed = &v["response"]["signed"];
    assert_eq!(
        String::from_utf8(crypto::signing_input(signed)).unwrap(),
        s(&v, "/response/signing_input")
    );
    assert_eq!(
        crypto::sign(&key, signed),
        s(&v, "/response/signed/result/signature/value")
    );
    assert_eq!(crypto::verify(&key, signed), Ok(()));
    assert_valid_response(signed);

    // The typed response carries the same bytes, and rebuilding it from our own types and
    // signing it reproduces the vector exactly.
    let typed: Response = serde_json::from_value(signed.clone()).expect("typed response");
    let result = typed.as_result().expect("a result");
    assert_eq!(result.decision, Decision::Deny);
    result.validate().expect("vector result obeys the rules");
    let mut rebuilt = Response::result(
        typed.id.clone(),
        warden::acs::envelope::AcsResult::deny(result.request_id.clone(), "blocked")
            .with_reason_code("destructive_shell_command_blocked")
            .with_chain_hash(result.chain_hash.clone().unwrap()),
    )
    .to_value();
    crypto::attach_signature(&key, s(&v, "/key_id"), &mut rebuilt).unwrap();
    assert_eq!(jcs::canonicalize(&rebuilt), jcs::canonicalize(signed));
    assert_valid_response(&rebuilt);

    // The published chain head is entry 2's entry_hash in the chain vectors.
    assert_eq!(
        result.chain_hash.as_deref(),
        Some(s(&chain_vectors(), "/chain/1/entry_hash"))
    );
}

// --- derived/hmac-kat-adapters-common.json ----------------------------------------------------

#[test]
fn adapters_common_known_answer() {
    let v = kat_vectors();
    let key = crypto::session_key(s(&v, "/ikm_utf8").as_bytes(), s(&v, "/session_id"));
    assert_eq!(crypto::hex(&key), s(&v, "/session_key_hex"));
    let envelope = &v["unsigned_envelope"];
    let value = crypto::sign(&key, envelope);
    assert_eq!(value, s(&v, "/expected_signature/value"));
    assert_eq!(s(&v, "/expected_signature/algorithm"), crypto::HMAC_SHA256);

    let mut signed = envelope.clone();
    crypto::attach_signature(&key, "kat", &mut signed).unwrap();
    assert_eq!(s(&signed, "/params/signature/value"), value);
    assert_eq!(crypto::verify(&key, &signed), Ok(()));
    assert_valid_request(&signed);
    let req = decode_request(&serde_json::to_vec(&signed).unwrap()).expect("decodes");
    assert_eq!(req.method, "steps/sessionStart");
    assert_eq!(req.params.metadata.platform.as_deref(), Some("test"));
}
