//! The evaluator through the embedding API: absent-field semantics, the instruction budget,
//! history that only counts steps that went ahead, bytecode dumps as golden files.

mod common;

use std::path::PathBuf;

use serde_json::{json, Value};
use warden::acs::{envelope, ids};
use warden::guardian::{Guardian, OnDecisionFailure, Options, Policy};

const SESSION: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";

struct Session {
    guardian: Guardian,
    n: u32,
}

impl Session {
    fn new(policy: &str) -> Session {
        Session::with(policy, Options::default())
    }

    fn with(policy: &str, options: Options) -> Session {
        let policy = Policy::from_source("test.ward", policy).unwrap_or_else(|d| panic!("{d}"));
        Session {
            guardian: Guardian::with_options(policy, options),
            n: 0,
        }
    }

    fn send(&mut self, method: &str, payload: Value) -> Value {
        self.n += 1;
        let req = envelope::request(
            self.n,
            method,
            &ids::counter(0, self.n.into()),
            "2026-12-01T10:00:00Z",
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1"}),
            payload,
        );
        let out: Value =
            serde_json::from_slice(&self.guardian.handle(&serde_json::to_vec(&req).unwrap()))
                .unwrap();
        common::schema::assert_valid_response(&out);
        out
    }

    fn call(&mut self, tool: &str, args: Value) -> (String, Vec<String>) {
        let r = self.send(
            "steps/toolCallRequest",
            json!({"tool": {"name": tool}, "arguments": args}),
        );
        let res = &r["result"];
        (
            res["decision"].as_str().unwrap_or("error").to_string(),
            res["reason_codes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }
}

#[test]
fn an_absent_field_is_undefined_not_false() {
    let mut s = Session::new(
        r#"
rule eq_absent on toolCallRequest when args.x == 1 => deny "eq_absent"
rule not_absent on toolCallRequest when not (args.x == 1) => deny "not_absent"
rule or_absent on toolCallRequest when args.x == 1 or tool.name == "t" => deny "or_absent"
rule and_absent on toolCallRequest when args.x == 1 and tool.name == "zzz" => deny "and_absent"
rule present_absent on toolCallRequest when not present(args.x) => deny "present_absent"
rule type_error on toolCallRequest when args.y > 3 => deny "type_error"
default allow
"#,
    );
    let (d, codes) = s.call("t", json!({}));
    assert_eq!(d, "deny");
    // Only the rules whose condition is true fire: `or` with a true side, and `present`.
    assert_eq!(codes, vec!["or_absent", "present_absent"]);
    // A present value of the wrong type is not "absent": it fails the decision closed.
    let (d, codes) = s.call(
        "t",
        json!({"x": {"value": 2}, "y": {"value": "not a number"}}),
    );
    assert_eq!(
        (d.as_str(), codes),
        ("deny", vec!["warden.decision_failure".to_string()])
    );
    let (_, codes) = s.call("t", json!({"x": {"value": 2}, "y": {"value": 4}}));
    assert_eq!(codes, vec!["not_absent", "or_absent", "type_error"]);
}

#[test]
fn an_argument_whose_value_is_null_is_not_present() {
    let mut s = Session::new(
        r#"
rule given on toolCallRequest when present(args.cc) => deny "given"
rule not_given on toolCallRequest when not present(args.cc) => deny "not_given"
default allow
"#,
    );
    let prov = json!({"provenance_id": "p1", "origin": "agent_generated"});
    let (_, codes) = s.call("t", json!({"cc": {"value": null, "provenance": prov}}));
    assert_eq!(codes, vec!["not_given"]);
    let (_, codes) = s.call("t", json!({"cc": {"value": [], "provenance": prov}}));
    assert_eq!(codes, vec!["given"]);
}

#[test]
fn an_exhausted_budget_is_a_decision_failure_never_an_allow() {
    let policy = r#"
rule quadratic on toolCallRequest when any a in args: any b in args: (a == b and false) => deny "never"
default allow
"#;
    let args: serde_json::Map<String, Value> = (0..800)
        .map(|i| (format!("a{i}"), json!({"value": i})))
        .collect();
    let mut s = Session::new(policy);
    let (d, codes) = s.call("t", Value::Object(args.clone()));
    assert_eq!(
        (d.as_str(), codes),
        ("deny", vec!["warden.decision_failure".to_string()])
    );

    let mut s = Session::with(
        policy,
        Options {
            on_decision_failure: OnDecisionFailure::Error,
            ..Options::default()
        },
    );
    let r = s.send(
        "steps/toolCallRequest",
        json!({"tool": {"name": "t"}, "arguments": args}),
    );
    assert_eq!(r["error"]["code"], -32603);
}

#[test]
fn denied_calls_do_not_count_in_history() {
    let mut s = Session::new(
        r#"
rule third_email on toolCallRequest
  when tool.name == "send_email" and count(toolCallRequest when tool.name == "send_email", this turn) >= 2
  => deny "rate.email": "two emails per turn"
rule blocked_address on toolCallRequest when args.to == "blocked@example.com" => deny "blocked"
default allow
"#,
    );
    let email = |to: &str| json!({"to": {"value": to}});
    assert_eq!(s.call("send_email", email("blocked@example.com")).0, "deny");
    assert_eq!(s.call("send_email", email("a@example.com")).0, "allow");
    assert_eq!(s.call("send_email", email("b@example.com")).0, "allow");
    assert_eq!(
        s.call("send_email", email("c@example.com")).1,
        vec!["rate.email"]
    );
}

#[test]
fn keyed_counts_read_the_current_events_key() {
    let mut s = Session::new(
        r#"
rule repeat on toolCallRequest
  when tool.name == "send_email" and count(toolCallRequest when tool.name == "send_email", session, by args.to) >= 1
  => deny "rate.repeat": "one email per recipient"
default allow
"#,
    );
    let email = |to: &str| json!({"to": {"value": to}});
    assert_eq!(s.call("send_email", email("a@example.com")).0, "allow");
    assert_eq!(s.call("send_email", email("b@example.com")).0, "allow");
    assert_eq!(
        s.call("send_email", email("a@example.com")).1,
        vec!["rate.repeat"]
    );
}

#[test]
fn labels_flow_along_derived_from_and_unknown_lineage_is_untrusted() {
    let mut s = Session::new(
        r#"
use std.taint
rule tainted on toolCallRequest when any a in args: a has untrusted => deny "tainted"
default allow
"#,
    );
    s.send(
        "steps/toolCallResult",
        json!({"tool": {"name": "web"}, "exit_status": "success",
               "outputs": [{"value": "x", "provenance": {"provenance_id": "w1", "origin": "tool_output"}}]}),
    );
    let arg = |pid: &str, parents: Value| json!({"q": {"value": "v", "provenance": {"provenance_id": pid, "origin": "agent_generated", "derived_from": parents}}});
    assert_eq!(s.call("search", arg("a1", json!(["w1"]))).0, "deny");
    assert_eq!(s.call("search", arg("a2", json!(["never-seen"]))).0, "deny");
    // A value derived only from the user is clean.
    s.send(
        "steps/userMessage",
        json!({"content": [{"type": "text", "value": "hi", "provenance": {"provenance_id": "u1", "origin": "user_input"}}]}),
    );
    assert_eq!(s.call("search", arg("a3", json!(["u1"]))).0, "allow");
}

#[test]
fn the_rule_index_runs_only_rules_for_the_tool() {
    let policy = Policy::from_source(
        "p.ward",
        r#"
rule a on toolCallRequest when tool.name == "x" => deny "a"
rule b on toolCallRequest when tool.name in {"y", "z"} and true => deny "b"
rule c on toolCallRequest when true => allow "c"
default allow
"#,
    )
    .unwrap();
    let p = policy.program();
    let names = |tool| -> Vec<String> {
        p.rules_for("steps/toolCallRequest", Some(tool))
            .iter()
            .map(|i| p.rules[*i as usize].name.to_string())
            .collect()
    };
    assert_eq!(names("x"), vec!["a", "c"]);
    assert_eq!(names("z"), vec!["b", "c"]);
    assert_eq!(names("other"), vec!["c"]);
}

#[test]
fn bytecode_dumps_match_golden_files() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = warden::check::collect_files(&[root.join("examples")]).unwrap();
    files.push(root.join("stdlib/defaults.ward"));
    // A `foo_test.ward` is foo.ward's tests, not a policy of its own.
    files.retain(|f| !f.to_string_lossy().ends_with("_test.ward"));
    for f in files {
        let policy = Policy::load(&f).unwrap_or_else(|d| panic!("{d}"));
        let dump = warden::compile::dump(policy.program());
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let golden = root.join("tests/bytecode").join(format!("{name}.dump"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &dump).unwrap();
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|_| panic!("missing {} (UPDATE_GOLDEN=1)", golden.display()));
            assert_eq!(want, dump, "bytecode of {} changed", f.display());
        }
    }
}

#[test]
fn the_embedded_default_policy_loads() {
    let p = Policy::embedded_default();
    assert!(!p.program().rules.is_empty());
    assert!(p.warnings.items.is_empty(), "{}", p.warnings);
}

#[test]
fn guardian_is_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Guardian>();
}

#[test]
fn explain_traces_mask_values_with_a_redact_label() {
    let mut s = Session::with(
        r#"
label secret redact when source == "vault"
rule leak on toolCallRequest when args.body == "hunter2" and args.body has secret => deny "leak"
default allow
"#,
        Options {
            explain: true,
            ..Options::default()
        },
    );
    s.send(
        "steps/toolCallResult",
        json!({"tool": {"name": "vault"}, "exit_status": "success",
               "outputs": [{"value": "hunter2", "provenance": {"provenance_id": "v1", "origin": "tool_output", "source_id": "vault"}}]}),
    );
    let r = s.send(
        "steps/toolCallRequest",
        json!({"tool": {"name": "send_email"}, "arguments": {"body": {"value": "hunter2",
               "provenance": {"provenance_id": "b1", "origin": "agent_generated", "derived_from": ["v1"]}}}}),
    );
    assert_eq!(r["result"]["decision"], "deny");
    let explain = r["result"]["policy_data"]["warden"].to_string();
    assert!(!explain.contains("hunter2"), "{explain}");
    assert!(explain.contains("[redacted]"), "{explain}");
}

#[test]
fn a_subagent_summary_carries_the_subagents_labels_back() {
    let mut s = Session::new(
        r#"
use std.taint
rule tainted on toolCallRequest when any a in args: a has untrusted => deny "tainted"
default allow
"#,
    );
    let child = "0b1c2d3e-4f50-4617-8829-000000000002";
    s.send(
        "steps/subagentStart",
        json!({"subagent_session_id": child, "intent_derivation": "inherit_full"}),
    );
    // Inside the child: it reads the web.
    let req = envelope::request(
        99,
        "steps/toolCallResult",
        "00000000-0000-4000-8000-000000009999",
        "2026-12-01T10:00:00Z",
        json!({"agent_id": "sub", "session_id": child}),
        json!({"tool": {"name": "web"}, "exit_status": "success",
               "outputs": [{"value": "x", "provenance": {"provenance_id": "w9", "origin": "tool_output"}}]}),
    );
    s.guardian.handle(&serde_json::to_vec(&req).unwrap());
    assert_eq!(s.guardian.parent_of(child).as_deref(), Some(SESSION));
    s.send(
        "steps/subagentStop",
        json!({"subagent_session_id": child, "outcome": "completed",
               "summary": {"value": "found it", "provenance": {"provenance_id": "sum", "origin": "agent_generated", "derived_from": ["w9"]}}}),
    );
    let arg = json!({"q": {"value": "v", "provenance": {"provenance_id": "q1", "origin": "agent_generated", "derived_from": ["sum"]}}});
    assert_eq!(s.call("post", arg).1, vec!["tainted"]);
}

#[test]
fn a_wrapped_mcp_tool_call_is_decided_as_a_tool_call() {
    let mut s = Session::new(
        r#"
rule no_rm on toolCallRequest when tool.name == "rm" and args.path == "/" => deny "no_rm"
default allow
"#,
    );
    let mcp = |path: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "rm", "arguments": {"path": path}}})
    };
    let r = s.send("protocols/MCP/tools/call", mcp("/"));
    assert_eq!(r["result"]["reason_codes"][0], "no_rm", "{r}");
    let r = s.send("protocols/MCP/tools/call", mcp("/tmp/x"));
    assert_eq!(r["result"]["decision"], "allow", "{r}");
}

#[test]
fn a_masked_field_never_shows_in_explain_traces() {
    let mut s = Session::with(
        r#"
mask args.password
rule weak on toolCallRequest when tool.name == "login" and len(args.password) < 8 => deny "weak"
rule leak on toolCallRequest when args.password == "hunter2" => deny "known"
default allow
"#,
        Options {
            explain: true,
            ..Options::default()
        },
    );
    let r = s.send(
        "steps/toolCallRequest",
        json!({"tool": {"name": "login"}, "arguments": {"password": {"value": "hunter2"}}}),
    );
    assert_eq!(r["result"]["decision"], "deny");
    let explain = r["result"]["policy_data"]["warden"].to_string();
    assert!(!explain.contains("hunter2"), "{explain}");
    assert!(explain.contains("[redacted]"), "{explain}");
}

#[test]
fn a_redacted_value_never_appears_in_explain_output() {
    // A vault secret longer than the 4 KiB bound on a value's rendering (so a cut cannot leak
    // its start), reaching rules as a tool argument, inside a quantified collection, through
    // builtins that derive new strings from it, and written literally in the policy; and a
    // `mask`ed password without provenance.
    let secret = format!("Tok-{}", "9f2c".repeat(1100));
    let mut s = Session::with(
        &format!(
            r#"
label secret redact when source == "vault"
mask args.password
rule literal on toolCallRequest when args.body == "{secret}" => deny "literal"
rule derived on toolCallRequest
  when upper(args.body) != "X" and lower(string(args.body)) != "x" and domain(args.link) == "vault.example"
  => deny "derived"
rule quantified on toolCallRequest when any a in args: a has secret => deny "quantified"
rule password on toolCallRequest when len(args.password) > 3 and contains(args.password, "unt") => deny "password"
default allow
"#
        ),
        Options {
            explain: true,
            ..Options::default()
        },
    );
    s.send(
        "steps/toolCallResult",
        json!({"tool": {"name": "vault"}, "exit_status": "success", "outputs": [
            {"value": secret, "provenance": {"provenance_id": "v1", "origin": "tool_output", "source_id": "vault"}},
            {"value": "https://vault.example/k/7", "provenance": {"provenance_id": "v2", "origin": "tool_output", "source_id": "vault"}}]}),
    );
    let r = s.send(
        "steps/toolCallRequest",
        json!({"tool": {"name": "send_email"}, "arguments": {
            "body": {"value": secret, "provenance": {"provenance_id": "b1", "origin": "agent_generated", "derived_from": ["v1"]}},
            "link": {"value": "https://vault.example/k/7", "provenance": {"provenance_id": "b2", "origin": "agent_generated", "derived_from": ["v2"]}},
            "password": {"value": "hunter2"}}}),
    );
    assert_eq!(
        r["result"]["reason_codes"],
        json!(["literal", "derived", "quantified", "password"])
    );
    let explain = r["result"]["policy_data"]["warden"].to_string();
    let lower = explain.to_lowercase();
    for shown in ["9f2c9f2c", "vault.example", "hunter2", "unter"] {
        assert!(!lower.contains(shown), "{shown} shows in {explain}");
    }
    assert!(explain.contains("[redacted]"), "{explain}");
    // The rest of the trace is still there: checks, their results, labels.
    let rules = r["result"]["policy_data"]["warden"]["rules"]
        .as_array()
        .unwrap();
    assert_eq!(rules.len(), 4);
    assert!(rules
        .iter()
        .all(|r| r["fired"] == true && r["line"].is_u64()));
    let has = &rules[2]["checks"][0];
    assert_eq!(has["kind"], "has");
    assert_eq!(has["labels"][0], json!(["secret"]));
}

#[test]
fn explain_values_are_shown_whole_up_to_4_kib() {
    let long = "x".repeat(5000);
    let mut s = Session::with(
        r#"rule r on toolCallRequest when args.a == "nope" or args.b == "nope" => deny "r"
default allow"#,
        Options {
            explain: true,
            ..Options::default()
        },
    );
    let r = s.send(
        "steps/toolCallRequest",
        json!({"tool": {"name": "t"}, "arguments": {"a": {"value": "y".repeat(300)}, "b": {"value": long}}}),
    );
    let checks = &r["result"]["policy_data"]["warden"]["rules"][0]["checks"];
    assert_eq!(checks[0]["values"][0], format!("\"{}\"", "y".repeat(300)));
    let cut = checks[1]["values"][0].as_str().unwrap();
    assert!(cut.starts_with("\"xxx"), "{cut}");
    assert!(cut.ends_with("…(906 more bytes)"), "{cut}");
    assert_eq!(checks[1]["at"], "test.ward:1:52");
    assert_eq!(checks[1]["text"], "args.b == \"nope\"");
}

#[test]
fn a_policy_can_span_several_files() {
    let dir = std::env::temp_dir().join("warden-multi-file");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("labels.ward"),
        "label web when origin == tool_output\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("rules.ward"),
        "rule tainted on toolCallRequest when any a in args: a has web => deny \"web\"\ndefault allow\n",
    )
    .unwrap();
    let policy = Policy::load_paths(std::slice::from_ref(&dir)).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(policy.program().labels.len(), 1);
    assert_eq!(policy.program().rules.len(), 1);
    let dup = dir.join("dup.ward");
    std::fs::write(&dup, "label web\n").unwrap();
    let err = Policy::load_paths(std::slice::from_ref(&dir)).unwrap_err();
    assert!(err.items.iter().any(|d| d.code == "check::duplicate"));
    std::fs::remove_file(dup).unwrap();
}
