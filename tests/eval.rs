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

/// A policy file of its own, under the temporary folder.
fn policy_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("warden-eval-{name}-{}.ward", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_call_is_decided_after_a_recorded_history() {
    let policy = policy_file(
        "window",
        "use std.taint\nrule window on toolCallRequest when tool.name == \"send_money\" and turns_since(untrusted) <= 1\n  => deny \"taint.window\"\ndefault allow\n",
    );
    let full = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/traces/injection.jsonl"),
    )
    .unwrap();
    // The history up to the untrusted file contents.
    let history: Vec<&str> = full.lines().take(5).collect();
    let trace =
        std::env::temp_dir().join(format!("warden-eval-history-{}.jsonl", std::process::id()));
    std::fs::write(&trace, history.join("\n")).unwrap();
    let call = [
        "--tool",
        "send_money",
        "--arg",
        "recipient=UK12",
        "--policy",
    ];
    let mut with = call.to_vec();
    with.extend([policy.to_str().unwrap(), "--trace", trace.to_str().unwrap()]);
    let (code, out, err) = eval(&with, "");
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("deny taint.window"), "{out}");
    // Without the history, the same call is allowed.
    let mut without = call.to_vec();
    without.push(policy.to_str().unwrap());
    let (code, out, _) = eval(&without, "");
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_history_line_that_is_refused_is_named_and_the_rest_is_decided() {
    let trace = std::env::temp_dir().join(format!("warden-eval-bad-{}.jsonl", std::process::id()));
    std::fs::write(&trace, "not json\n").unwrap();
    let (code, out, err) = eval(
        &["--tool", "get_time", "--trace", trace.to_str().unwrap()],
        "",
    );
    assert!(err.contains(":1: refused: "), "{err}");
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn user_text_is_indexed_as_the_user_s_words() {
    let policy = policy_file(
        "user",
        "rule not_user on toolCallRequest when tool.name == \"send\" and not taken_from(args.to, user_input)\n  => deny \"not.user\"\ndefault allow\n",
    );
    let p = policy.to_str().unwrap();
    let typed = [
        "--policy",
        p,
        "--tool",
        "send",
        "--arg",
        "to=bob@example.com",
    ];
    let mut said = typed.to_vec();
    said.extend(["--user", "write to bob@example.com please"]);
    let (code, out, _) = eval(&said, "");
    assert_eq!(code, 0, "{out}");
    let mut other = typed.to_vec();
    other.extend(["--user", "write to alice@example.com please"]);
    let (code, out, _) = eval(&other, "");
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("deny not.user"), "{out}");
}
