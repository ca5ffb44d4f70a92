//! `warden replay`, tested as data: each `tests/traces/NAME.jsonl` is replayed through the CLI
//! (with `NAME.ward` as the policy when it exists, else the embedded default) and the output
//! must equal `NAME.expected.jsonl`. `UPDATE_GOLDEN=1` rewrites the expected files. Every
//! response line must validate against the ACS response schema.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn replay(policy: Option<&Path>, trace: &Path, extra: &[&str]) -> (String, i32) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.arg("replay").arg(trace).args(extra);
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    let out = cmd.output().expect("run warden");
    (
        String::from_utf8(out.stdout).expect("utf-8 output"),
        out.status.code().unwrap_or(-1),
    )
}

fn responses(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad response line {l}: {e}")))
        .collect()
}

#[test]
fn replayed_traces_match_golden_output() {
    let dir = root().join("tests/traces");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && !p.to_string_lossy().ends_with(".expected.jsonl")
        })
        .collect();
    traces.sort();
    assert!(traces.len() >= 3);
    for trace in traces {
        let policy = trace.with_extension("ward");
        let (out, code) = replay(policy.is_file().then_some(policy.as_path()), &trace, &[]);
        // Exit 1 says some lines were not requests at all (the malformed-input trace).
        let malformed = trace.file_name().is_some_and(|n| n == "malformed.jsonl");
        assert_eq!(
            code,
            i32::from(malformed),
            "replay of {} exited {code}",
            trace.display()
        );
        let input_lines = std::fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count();
        let rs = responses(&out);
        assert_eq!(
            rs.len(),
            input_lines,
            "one response per request in {}",
            trace.display()
        );
        for r in &rs {
            common::schema::assert_valid_response(r);
        }
        // The ping's server time is the only thing that changes from run to run.
        let out: String = rs
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(t) = r.pointer_mut("/result/payload/server_timestamp") {
                    *t = Value::String("<server time>".into());
                }
                serde_json::to_string(&r).unwrap() + "\n"
            })
            .collect();
        let expected = trace.with_extension("expected.jsonl");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&expected, &out).unwrap();
        } else {
            let want = std::fs::read_to_string(&expected).unwrap_or_else(|_| {
                panic!("missing {} (run with UPDATE_GOLDEN=1)", expected.display())
            });
            assert_eq!(want, out, "golden mismatch for {}", trace.display());
        }
    }
}

/// Values the explain traces of `tests/traces/explain/` must never show: they carry a `redact`
/// label or sit at a `mask` path (also derived: `upper(…)` of a secret).
const MASKED: &[&str] = &["s3cr3t-token-9f2c", "hunter2"];

/// `warden replay --explain`, tested as data: each `tests/traces/explain/NAME.jsonl` is replayed
/// with `--explain` and `NAME.ward`, from the crate root with relative paths (the traces name the
/// policy's files), and must equal `NAME.expected.jsonl` (`UPDATE_GOLDEN=1` rewrites it). No
/// masked value may appear anywhere in the output, in any case.
#[test]
fn explained_traces_match_golden_output() {
    let dir = root().join("tests/traces/explain");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && !p.to_string_lossy().ends_with(".expected.jsonl")
        })
        .collect();
    traces.sort();
    assert!(!traces.is_empty());
    for trace in traces {
        let rel = |p: &Path| p.strip_prefix(root()).unwrap().to_path_buf();
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .current_dir(root())
            .arg("replay")
            .arg(rel(&trace))
            .arg("--explain")
            .arg("--policy")
            .arg(rel(&trace.with_extension("ward")))
            .output()
            .expect("run warden");
        assert!(out.status.success(), "replay of {} failed", trace.display());
        let out = String::from_utf8(out.stdout).expect("utf-8 output");
        for r in &responses(&out) {
            common::schema::assert_valid_response(r);
            assert!(
                r.pointer("/result/policy_data/warden/rules").is_some(),
                "no explain trace in {r}"
            );
        }
        let lower = out.to_lowercase();
        for m in MASKED {
            assert!(
                !lower.contains(&m.to_lowercase()),
                "{m} shows in the explain output of {}:\n{out}",
                trace.display()
            );
        }
        let expected = trace.with_extension("expected.jsonl");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&expected, &out).unwrap();
        } else {
            let want = std::fs::read_to_string(&expected).unwrap_or_else(|_| {
                panic!("missing {} (run with UPDATE_GOLDEN=1)", expected.display())
            });
            assert_eq!(want, out, "golden mismatch for {}", trace.display());
        }
    }
}

fn decision(r: &Value) -> (&str, Vec<&str>) {
    let res = &r["result"];
    (
        res["decision"].as_str().unwrap_or("error"),
        res["reason_codes"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default(),
    )
}

#[test]
fn the_default_policy_denies_the_injected_call_and_allows_the_benign_ones() {
    let (out, code) = replay(None, &root().join("examples/traces/injection.jsonl"), &[]);
    assert_eq!(code, 0);
    let rs = responses(&out);
    assert_eq!(rs.len(), 14);
    for r in &rs {
        common::schema::assert_valid_response(r);
    }
    // Request 6 sends money to an account taken from a file, not from the user: denied.
    assert_eq!(decision(&rs[5]), ("deny", vec!["provenance.destination"]));
    // Every other step, including the user's own payment in turn 2, is allowed.
    for (i, r) in rs.iter().enumerate().filter(|(i, _)| *i != 5) {
        assert_eq!(decision(r).0, "allow", "step {}", i + 1);
    }
    assert_eq!(rs[11]["result"]["payload"]["status"], "ok", "ping answers");
}

#[test]
fn decisions_combine_deny_over_defer_over_ask_over_modify_over_allow() {
    let dir = root().join("tests/traces");
    let (out, _) = replay(
        Some(&dir.join("combination.ward")),
        &dir.join("combination.jsonl"),
        &[],
    );
    let rs = responses(&out);
    let d: Vec<(&str, Vec<&str>)> = rs.iter().map(decision).collect();
    assert_eq!(
        d[1],
        ("allow", vec!["email.ok"]),
        "an allow rule cites its code"
    );
    assert_eq!(d[2].0, "allow", "a small transfer falls to the default");
    assert_eq!(d[3], ("defer", vec!["transfer.check"]), "defer beats ask");
    let defer = &rs[3]["result"]["defer_details"];
    assert_eq!(defer["timeout_decision"], "deny");
    assert_eq!(defer["resolution_timeout_ms"], 30000);
    assert_eq!(defer["reason"], "pending_dependency");
    assert_eq!(d[4], ("deny", vec!["repo.delete"]), "deny beats ask");
    assert_eq!(d[5].0, "allow");
    assert_eq!(d[6], ("modify", vec!["shell.safe"]));
    assert_eq!(
        rs[6]["result"]["modifications"]["parameter_overrides"]["cmd"],
        "echo refused"
    );
    assert_eq!(
        d[7],
        ("modify", vec!["vault.redact"]),
        "labels reach outputs"
    );
    assert_eq!(
        rs[7]["result"]["modifications"]["redactions"][0]["path"],
        "/outputs/0/value"
    );
    assert_eq!(
        d[8],
        ("deny", vec!["warden.conflicting_modifications"]),
        "two different overrides of one argument cannot be merged"
    );
    assert_eq!(
        d[9],
        ("deny", vec!["warden.no_default"]),
        "no default: fail closed"
    );
    assert_eq!(
        d[10].0, "allow",
        "postCompact is never denied, even without a default"
    );
    assert_eq!(
        d[11],
        ("allow", vec!["turn.logged"]),
        "audit-only hooks record rules"
    );
    assert_eq!(d[12], ("deny", vec!["warden.no_default"]));
}

#[test]
fn malformed_lines_get_errors_and_replay_goes_on() {
    let (out, code) = replay(None, &root().join("tests/traces/malformed.jsonl"), &[]);
    // Every line is answered, and the exit code says some were not requests at all.
    assert_eq!(code, 1);
    let rs = responses(&out);
    let codes: Vec<i64> = rs
        .iter()
        .map(|r| r["error"]["code"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(
        codes,
        vec![-32700, -32601, -32700, -32700, -32600, -32602, -32700, 0, -32700]
    );
    // The id is echoed when it can be read, null otherwise.
    assert_eq!(rs[1]["id"], 8);
    assert_eq!(rs[3]["id"], Value::Null);
    assert_eq!(rs[7]["result"]["decision"], "allow");
}

#[test]
fn explain_attaches_the_rules_and_values() {
    let (out, _) = replay(
        None,
        &root().join("examples/traces/injection.jsonl"),
        &["--explain"],
    );
    let rs = responses(&out);
    let explain = &rs[5]["result"]["policy_data"]["warden"];
    assert_eq!(
        explain["fired"][0],
        "std.defaults.defaults_destination_not_from_user"
    );
    let rules = explain["rules"].as_array().unwrap();
    let fired = rules.iter().find(|r| r["fired"] == true).unwrap();
    let checks = fired["checks"].as_array().unwrap();
    // The recipient the rule looked at is shown with the checks that read it.
    assert!(
        checks
            .iter()
            .any(|c| c.to_string().contains("XX99ATTACKER0000")),
        "{checks:?}"
    );
    // The rule and each check by file, line, column and source text.
    assert_eq!(fired["file"], "<std.defaults>", "{fired}");
    assert!(fired["line"].as_u64().unwrap() > 0, "{fired}");
    assert!(
        fired["text"].as_str().unwrap().starts_with("rule "),
        "{fired}"
    );
    assert!(
        checks
            .iter()
            .all(|c| c["at"].as_str().unwrap().starts_with("<std.defaults>:")),
        "{checks:?}"
    );
    for r in &rs {
        common::schema::assert_valid_response(r);
    }
}

#[test]
fn stdin_is_accepted_and_a_broken_policy_is_refused() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["replay", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let rs = responses(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(rs.len(), 1);
    assert!(rs[0]["error"].is_object());

    let bad = std::env::temp_dir().join("warden-broken-policy.ward");
    std::fs::write(
        &bad,
        "rule r on toolCallRequest when tool.nme == 1 => deny \"c\"\n",
    )
    .unwrap();
    let (out, code) = replay(
        Some(&bad),
        &root().join("tests/traces/malformed.jsonl"),
        &[],
    );
    assert_eq!(code, 2);
    assert!(out.is_empty(), "nothing is decided with a broken policy");
}

#[test]
fn malformed_lines_are_named_by_line_on_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("replay")
        .arg(root().join("tests/traces/malformed.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("malformed.jsonl:1: Parse error (-32700): unexpected end of input"),
        "{err}"
    );
    assert!(
        err.contains("malformed.jsonl:5: Invalid Request (-32600)"),
        "{err}"
    );
    // A well-formed request answered with an error (line 2: an unknown method) is not
    // malformed input.
    assert!(!err.contains("malformed.jsonl:2:"), "{err}");
}

#[test]
fn text_explanations_give_one_short_paragraph_per_decided_request() {
    let (out, code) = replay(
        None,
        &root().join("examples/traces/injection.jsonl"),
        &["--format", "text"],
    );
    assert_eq!(code, 0, "{out}");
    let paragraphs: Vec<&str> = out.trim_end().split("\n\n").collect();
    // Every request of the trace is answered (the ping too).
    assert_eq!(paragraphs.len(), 14, "{out}");
    let injected = paragraphs[5];
    assert!(
        injected.starts_with("#6 toolCallRequest send_money: deny (provenance.destination): "),
        "{injected}"
    );
    assert!(
        injected
            .contains("  fired: std.defaults.defaults_destination_not_from_user (<std.defaults>:"),
        "{injected}"
    );
    assert!(injected.contains("\n  because: "), "{injected}");
    assert!(injected.contains("\n  labels: "), "{injected}");
    // Short: the JSON form of the same request is many times longer.
    let (json, _) = replay(
        None,
        &root().join("examples/traces/injection.jsonl"),
        &["--explain"],
    );
    assert!(
        out.len() * 4 < json.len(),
        "{} vs {}",
        out.len(),
        json.len()
    );
}

#[test]
fn only_keeps_the_answers_with_the_named_decisions() {
    let trace = root().join("examples/traces/injection.jsonl");
    let (out, code) = replay(None, &trace, &["--format", "text", "--only", "deny,ask"]);
    assert_eq!(code, 0);
    let paragraphs: Vec<&str> = out.trim_end().split("\n\n").collect();
    assert_eq!(paragraphs.len(), 1, "{out}");
    assert!(
        paragraphs[0].starts_with("#6 toolCallRequest send_money: deny"),
        "{out}"
    );
    // In JSON, too: one line per kept answer.
    let (out, _) = replay(None, &trace, &["--only", "deny"]);
    let rs = responses(&out);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0]["result"]["decision"], "deny");
    let (out, _) = replay(None, &trace, &["--only", "allow"]);
    assert_eq!(responses(&out).len(), 13);
}

#[test]
fn a_result_without_tool_is_answered_with_a_warning_naming_what_reads_tool_name() {
    let dir = std::env::temp_dir().join(format!("warden-notool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("p.ward");
    std::fs::write(
        &policy,
        "package t\nrule vault on toolCallResult when tool.name == \"vault\" => deny \"vault.out\"\n\
         rule after on toolCallRequest when exists(toolCallResult when tool.name == \"vault\") => deny \"after\"\n\
         default allow\n",
    )
    .unwrap();
    let line = |n: u32, payload: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"steps/toolCallResult\",\"params\":{{\"acs_version\":\"0.1.0\",\"request_id\":\"00000000-0000-4000-8000-00000000000{n}\",\"timestamp\":\"2026-12-01T10:00:00Z\",\"metadata\":{{\"agent_id\":\"a\",\"session_id\":\"0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f\"}},\"payload\":{payload}}}}}"
        )
    };
    let trace = dir.join("t.jsonl");
    std::fs::write(
        &trace,
        format!(
            "{}\n{}\n",
            line(1, r#"{"exit_status":"success","outputs":[{"value":"x"}]}"#),
            line(
                2,
                r#"{"tool":{"name":"ls"},"exit_status":"success","outputs":[{"value":"x"}]}"#
            )
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args([
            "replay",
            trace.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let rs = responses(&String::from_utf8(out.stdout).unwrap());
    let err = String::from_utf8(out.stderr).unwrap();
    let warnings = &rs[0]["result"]["policy_data"]["warnings"];
    let text = warnings[0].as_str().unwrap();
    assert!(text.contains("has no `tool`"), "{text}");
    assert!(text.contains("rule t.vault"), "{text}");
    assert!(
        text.contains("a history filter over toolCallResult"),
        "{text}"
    );
    assert!(
        err.contains("t.jsonl:1: warning: this toolCallResult has no `tool`"),
        "{err}"
    );
    // A result with its tool: no warning.
    assert!(
        rs[1]["result"]["policy_data"].get("warnings").is_none(),
        "{}",
        rs[1]
    );
    assert!(!err.contains("t.jsonl:2:"), "{err}");
    for r in &rs {
        common::schema::assert_valid_response(r);
    }
}
