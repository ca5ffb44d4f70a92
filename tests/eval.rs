//! `warden eval`: one request decided, and why (README, "A short tour").

mod common;

use serde_json::Value;

fn eval(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    common::warden(&all, stdin.as_bytes())
}

#[test]
fn a_compact_call_is_decided_and_the_rule_that_fired_is_shown_with_its_checks() {
    let (code, out, err) = eval(
        &[
            "--tool",
            "send_money",
            "--arg",
            "recipient=DE89370400440532013000",
            "--arg",
            "amount=5",
            "--user",
            "pay the rent",
        ],
        "",
    );
    assert_eq!(code, 1, "a deny exits 1: {out}{err}");
    assert!(out.starts_with("deny provenance.destination: "), "{out}");
    assert!(
        out.contains("std.defaults.defaults_destination_not_from_user fired"),
        "{out}"
    );
    assert!(
        out.contains("contains(lower(intent.raw), lower(a))  → false"),
        "{out}"
    );
}

#[test]
fn what_the_user_typed_is_allowed_and_exits_0() {
    let (code, out, _) = eval(
        &[
            "--tool",
            "send_money",
            "--arg",
            "recipient=DE89370400440532013000",
            "--user",
            "send 5 to DE89370400440532013000",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("allow"), "{out}");
}

#[test]
fn an_envelope_on_stdin_is_decided_and_json_output_is_the_response() {
    let envelope = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/injection.jsonl"),
    )
    .unwrap();
    // The trace's first request is a sessionStart: allowed.
    let first = envelope.lines().next().unwrap();
    let (code, out, err) = eval(&["--format", "json", "-"], first);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"]["decision"], "allow", "{v}");
}

#[test]
fn a_bad_argument_is_a_usage_error() {
    let (code, _, err) = eval(&["--tool", "x", "--arg", "no-equals-sign"], "");
    assert_eq!(code, 2);
    assert!(err.contains("expected NAME=VALUE"), "{err}");
}
