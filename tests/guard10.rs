//! The acceptance of issue 31: examples/guard10's policy decides every request of its acceptance
//! traces right, with provenance on the envelopes and without (traces/make_traces.py writes
//! both and the expected answers), replayed through `warden replay`; every answer is a valid ACS
//! response, and no answer shows a redacted or masked value.

mod common;

use std::path::PathBuf;

use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/guard10")
}

/// The answers to a trace, replayed through the CLI with the guard's policy and explain on.
fn replay(trace: &str) -> Vec<Value> {
    let (code, out, err) = common::warden(
        &[
            "replay",
            dir().join("traces").join(trace).to_str().unwrap(),
            "--policy",
            dir().join("guard10.ward").to_str().unwrap(),
            "--explain",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(request_id, "decision code")`: the decision must match and the code be among the answer's.
fn expected() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir().join("traces/expected.json")).unwrap();
    let map: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    map.into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
        .collect()
}

fn check(trace: &str) {
    let answers = replay(trace);
    let expected = expected();
    assert!(expected.len() >= 30, "the traces cover every requirement");
    let mut wrong = Vec::new();
    for (id, want) in &expected {
        let result = answers
            .iter()
            .map(|a| &a["result"])
            .find(|r| r["request_id"] == id.as_str())
            .unwrap_or_else(|| panic!("no answer to {id} in {trace}"));
        let (decision, code) = want.split_once(' ').unwrap_or((want, ""));
        let codes = result["reason_codes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if result["decision"] != decision || !(code.is_empty() || codes.iter().any(|c| c == code)) {
            wrong.push(format!(
                "{id}: expected {want}, got {} {codes:?}",
                result["decision"]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{trace}: {} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    for a in &answers {
        common::schema::assert_valid_response(a);
        let text = a.to_string();
        for secret in ["AKIA0123456789ABCDEF", "db-password-77"] {
            assert!(!text.contains(secret), "{secret} shown in {text}");
        }
    }
}

#[test]
fn the_acceptance_trace_with_provenance_is_decided_right() {
    check("acceptance.jsonl");
}

#[test]
fn the_acceptance_trace_without_provenance_is_decided_right() {
    check("acceptance_bare.jsonl");
}
