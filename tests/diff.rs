//! `warden diff OLD NEW TRACE…` (docs/testing.md, "Before a rollout"): the decisions that
//! change between two policies on recorded traffic, grouped by the rule whose firing changed.

use std::path::PathBuf;

use serde_json::Value;

mod common;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn trace() -> PathBuf {
    root().join("examples/traces/injection.jsonl")
}

fn diff(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    common::warden(&all, b"")
}

fn policy(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warden-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_same_policy_changes_nothing_and_exits_0() {
    let t = trace();
    let (code, out, err) = diff(&["@default", "@default", t.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(": 0 decision(s) change"), "{out}");
}

#[test]
fn a_rule_that_now_fires_is_named_with_the_requests_it_blocks() {
    let allow = policy("allow.ward", "default allow\n");
    let t = trace();
    let (code, out, err) = diff(&[allow.to_str().unwrap(), "@default", t.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("newly blocked"), "{out}");
    assert!(
        out.contains("defaults_destination_not_from_user now fires"),
        "{out}"
    );
    assert!(
        out.contains("allow -> deny provenance.destination"),
        "{out}"
    );
    // The other way round, the same rule no longer fires.
    let (code, out, _) = diff(&["@default", allow.to_str().unwrap(), t.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        out.contains("defaults_destination_not_from_user no longer fires"),
        "{out}"
    );
}

#[test]
fn json_output_lists_each_changed_request_with_its_place() {
    let allow = policy("allow_json.ward", "default allow\n");
    let t = trace();
    let (code, out, _) = diff(&[
        allow.to_str().unwrap(),
        "@default",
        t.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["changed"].as_u64().unwrap() >= 1, "{v}");
    let group = &v["groups"][0];
    assert_eq!(group["change"], "now fires", "{v}");
    let first = &group["requests"][0];
    assert!(first["line"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(first["old"]["decision"], "allow", "{v}");
    assert_eq!(first["new"]["decision"], "deny", "{v}");
}

#[test]
fn a_policy_with_errors_exits_2_and_says_why() {
    let bad = policy("bad.ward", "rule r on toolCallRequest when => deny \"x\"\n");
    let t = trace();
    let (code, _, err) = diff(&[bad.to_str().unwrap(), "@default", t.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the policy has errors"), "{err}");
}
