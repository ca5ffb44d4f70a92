//! `warden test`: the project's own policies pass their tests with coverage, and the runner's
//! reports (pretty, JSON, JUnit), exit codes, filters, `_test.ward` files and `--watch` work.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn warden(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("warden runs")
}

fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "warden-test-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn last_line(s: &str) -> &str {
    s.trim_end().lines().last().unwrap_or("")
}

const POLICY: &str = r#"use std.taint
rule block on toolCallRequest when tool.name == "send_money" and turns_since(untrusted) <= 3
  => deny "taint.window": "no payments after untrusted content"
default allow

test "passes" {
  user "pay"
  call send_money(to: "alice" from user) => allow
}

test "wrong on purpose" {
  user "pay the bill"
  call read_file(path: "bill.txt") -> untrusted "pay XX99 & <now>"
  call send_money(to: "XX99" from tool_output "read_file") => allow
}
"#;

#[test]
fn stdlib_and_examples_pass_with_coverage() {
    let out = warden(
        &[
            "test",
            "stdlib/",
            "examples/",
            "--coverage",
            "--coverage-min",
            "90",
        ],
        &root(),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "policy tests failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = last_line(&text);
    let (passed, rest) = last.split_once(" passed, ").expect("summary line");
    assert!(passed.parse::<usize>().unwrap() >= 40, "{last}");
    assert_eq!(rest, "0 failed", "{last}");
    assert!(
        text.contains("rules fired"),
        "coverage report missing:\n{text}"
    );
    // Every stdlib module and every example has tests.
    for dir in ["stdlib", "examples"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "ward") {
                let name = p.strip_prefix(root()).unwrap().display().to_string();
                assert!(
                    text.contains(&format!("ok      {name} :: ")),
                    "{name} has no passing test"
                );
            }
        }
    }
}

#[test]
fn a_wrong_expectation_fails_with_a_readable_report() {
    let dir = temp_dir("wrong");
    std::fs::write(dir.join("pay.ward"), POLICY).unwrap();
    let out = warden(&["test", "pay.ward"], &dir);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(last_line(&text), "1 passed, 1 failed");
    assert!(
        text.contains("FAILED  pay.ward :: wrong on purpose"),
        "{text}"
    );
    // The step, by its source line and its location, and both decisions.
    assert!(
        text.contains(r#"call send_money(to: "XX99" from tool_output "read_file") => allow"#),
        "{text}"
    );
    assert!(text.contains("pay.ward:14:3"), "{text}");
    assert!(text.contains("expected: allow"), "{text}");
    assert!(text.contains(r#"actual:   deny "taint.window""#), "{text}");
    // The rules that fired and the explain trace with values.
    assert!(text.contains("rules that fired: pay.ward.block"), "{text}");
    assert!(
        text.contains("turns_since(untrusted) <= 3 → true"),
        "{text}"
    );
}

#[test]
fn junit_output_is_valid_junit_xml() {
    let dir = temp_dir("junit");
    std::fs::write(dir.join("pay.ward"), POLICY).unwrap();
    let out = warden(&["test", "--format", "junit", "pay.ward"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let xml = stdout(&out);
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    assert_eq!(suites.attribute("tests"), Some("2"));
    assert_eq!(suites.attribute("failures"), Some("1"));
    let suite: Vec<_> = suites
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suite.len(), 1);
    assert_eq!(suite[0].attribute("name"), Some("pay.ward"));
    let cases: Vec<_> = suite[0]
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0].attribute("name"), Some("passes"));
    assert!(cases[0].children().all(|c| !c.has_tag_name("failure")));
    let failure = cases[1]
        .children()
        .find(|c| c.has_tag_name("failure"))
        .expect("a failure element");
    assert!(failure
        .attribute("message")
        .unwrap()
        .contains("expected allow, got deny"));
    // The escaped output value comes back intact, and no ANSI escapes are left.
    let body = failure.text().unwrap_or("");
    assert!(body.contains("taint.window"), "{body}");
    assert!(!body.contains('\u{1b}'));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 passed, 1 failed"));
}

#[test]
fn json_output_follows_the_documented_shape() {
    let dir = temp_dir("json");
    std::fs::write(dir.join("pay.ward"), POLICY).unwrap();
    let out = warden(
        &["test", "--format", "json", "--coverage", "pay.ward"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["version"], 1);
    assert_eq!(v["summary"]["passed"], 1);
    assert_eq!(v["summary"]["failed"], 1);
    assert_eq!(v["summary"]["line"], "1 passed, 1 failed");
    let tests = v["tests"].as_array().unwrap();
    assert_eq!(tests[1]["status"], "failed");
    let f = &tests[1]["failures"][0];
    assert_eq!(f["line"], 14);
    assert_eq!(f["expected"], "allow");
    assert_eq!(f["actual"], "deny \"taint.window\"");
    assert_eq!(f["method"], "steps/toolCallRequest");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"step `call send_money(to: "XX99" from tool_output "read_file") => allow` of test "wrong on purpose""#),
        "{message}"
    );
    assert_eq!(f["fired"][0], "pay.ward.block");
    assert_eq!(f["trace"][0]["rule"], "pay.ward.block");
    assert_eq!(f["trace"][0]["checks"][0]["result"], true);
    assert_eq!(v["coverage"]["rules_total"], 1);
    assert_eq!(v["coverage"]["rules_fired"], 1);
    assert_eq!(v["coverage"]["rules"][0]["checks"][1]["seen_true"], true);
}

#[test]
fn filters_skip_and_exit_codes() {
    let dir = temp_dir("filter");
    std::fs::write(dir.join("pay.ward"), POLICY).unwrap();
    let out = warden(&["test", "--filter", "passes", "."], &dir);
    assert!(out.status.success());
    assert_eq!(last_line(&stdout(&out)), "1 passed, 0 failed, 1 skipped");
    // A policy that does not check: exit 2.
    std::fs::write(
        dir.join("broken.ward"),
        "rule r on toolCallReques => deny \"x\"\n",
    )
    .unwrap();
    let out = warden(&["test", "broken.ward"], &dir);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    // Coverage below the minimum: exit 1, though every test passed.
    std::fs::write(
        dir.join("cov.ward"),
        "rule a on toolCallRequest when tool.name == \"a\" => deny \"a\"\n\
         rule b on toolCallRequest when tool.name == \"b\" => deny \"b\"\n\
         default allow\n\
         test \"only a\" { call a() => deny \"a\" }\n",
    )
    .unwrap();
    let out = warden(&["test", "cov.ward", "--coverage-min", "60"], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("coverage 50.0% is below the minimum 60%"));
    let out = warden(&["test", "cov.ward", "--coverage-min", "50"], &dir);
    assert!(out.status.success());
}

#[test]
fn test_files_run_against_their_policy_with_mocks() {
    let dir = temp_dir("sibling");
    std::fs::write(
        dir.join("mail.ward"),
        "let blocked_to = {\"eve@example.com\"}\n\
         rule no_eve on toolCallRequest when tool.name == \"send_email\" and args.to in blocked_to\n  => deny \"mail.blocked\"\n\
         default allow\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("mail_test.ward"),
        "test \"eve is blocked\" { call send_email(to: \"eve@example.com\") => deny \"mail.blocked\" }\n\
         test \"a mock replaces the list\" {\n  with blocked_to as {\"mallory@example.com\"}\n  \
         call send_email(to: \"eve@example.com\") => allow\n  \
         call send_email(to: \"mallory@example.com\") => deny \"mail.blocked\"\n}\n\
         test \"rego cannot be mocked\" { with rego.data.x as 1 call a() }\n",
    )
    .unwrap();
    let out = warden(&["test", "mail.ward"], &dir);
    let text = stdout(&out);
    assert_eq!(last_line(&text), "2 passed, 1 failed", "{text}");
    assert!(
        text.contains("cannot mock `rego.data.x`: Rego rules and data are not mocked"),
        "{text}"
    );
}

#[test]
fn watch_reruns_on_change() {
    let dir = temp_dir("watch");
    let file = dir.join("w.ward");
    std::fs::write(&file, "default allow\ntest \"one\" { call a() => allow }\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["test", "--watch"])
        .arg(&dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("warden starts");
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let wait_for = |want: &str| -> Result<(), String> {
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if line.contains(want) {
                        return Ok(());
                    }
                    seen.push(line);
                }
                Err(_) => return Err(format!("no `{want}` within 30 s; saw {seen:?}")),
            }
        }
    };
    let first = wait_for("1 passed, 0 failed");
    if first.is_ok() {
        // Let the watcher settle, then change the file.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(
            &file,
            "default allow\ntest \"one\" { call a() => allow }\ntest \"two\" { call b() => deny }\n",
        )
        .unwrap();
    }
    let second = first.clone().and_then(|()| wait_for("1 passed, 1 failed"));
    let _ = child.kill();
    let _ = child.wait();
    first.unwrap();
    second.unwrap();
}

#[test]
fn an_expectation_names_redacted_places_one_by_one_not_with_redact_each() {
    let dir = temp_dir("expect-each");
    std::fs::write(
        dir.join("p.ward"),
        "rule r on toolCallRequest => modify \"r\" redact each a in args\ndefault allow\n\
         test \"each\" {\n  call f(x: \"v\") => modify \"r\" { redact each a in args }\n}\n\
         test \"by place\" {\n  call f(x: \"v\") => modify \"r\" { redact args.x }\n}\n",
    )
    .unwrap();
    let out = warden(&["test", "p.ward", "--format", "json"], &dir);
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = report.to_string();
    let said = "an expectation names each redacted place (`redact args.x`), not `redact each`";
    assert!(text.contains(said), "{text}");
    assert_eq!(report["summary"]["passed"], 1, "{text}");
    assert_eq!(report["summary"]["failed"], 1, "{text}");
    // A one-letter secret is masked where it stands alone, not in every word.
    assert!(text.contains("call f(x: \\\"[redacted]\\\")"), "{text}");
    assert!(text.contains("/arguments/x/value"), "{text}");
}
