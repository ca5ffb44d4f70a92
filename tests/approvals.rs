//! Approvals bound to the exact action, through `Guardian::handle` and `Guardian::approve`:
//! the ask's `action_hash`, a grant consumed once by the same call, a different call denied
//! as a mismatch, approver checks, timeouts and expiry, Intent extension (and its refusal
//! under `scope_mode: strict`), the audit chain, and a restart in the middle (docs/effects.md);
//! an `ask` that carries a `modify`'s changes across the round trip, with the approver shown no
//! secret (docs/language.md §9, "The combination table").

mod common;

use serde_json::{json, Value};
use std::sync::Arc;

use warden::acs::{crypto, envelope, ids, time};
use warden::guardian::{journal, ApproveError, Guardian, MemoryJournal, Options, Policy};
use warden::state::{ApprovalStatus, Extension, GrantError};

const SESSION: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";
/// 2026-12-01T10:00:00Z
const T0: i64 = 1_796_119_200_000;

const POLICY: &str = r#"
use std.effects
effect refund for refund = key(args.payment_id)
rule big_refund on toolCallRequest when tool.name == "refund" and args.amount > 1000
  => ask "refund.large": "a large refund" approver human "finance" timeout 15m expires 10m
rule off_intent on toolCallRequest when intent.declared and not intent.permits(tool)
  => ask "ibac.off_intent": "not in the user's request" approver human "owner" extend intent
default allow
"#;

fn policy() -> Policy {
    Policy::from_source("test.ward", POLICY).unwrap_or_else(|d| panic!("{d}"))
}

struct Session {
    guardian: Guardian,
    n: u32,
    /// The next event's time, Unix ms.
    now: i64,
}

/// A decision as `"decision code,code"`, with the whole result.
struct Answer {
    n: u32,
    summary: String,
    result: Value,
}

impl Session {
    fn new() -> Session {
        Session::with(Guardian::new(policy()), 0)
    }

    fn with(guardian: Guardian, n: u32) -> Session {
        Session {
            guardian,
            n,
            now: T0,
        }
    }

    fn journalled(journal: &Arc<MemoryJournal>, n: u32) -> Session {
        let records = journal.records.lock().unwrap().clone();
        let guardian = Guardian::with_journal(policy(), Options::default(), journal.clone());
        guardian.restore(records);
        Session::with(guardian, n)
    }

    fn request_id(n: u32) -> String {
        ids::counter(0, n.into())
    }

    fn send(&mut self, method: &str, payload: Value) -> Answer {
        self.n += 1;
        let req = envelope::request(
            self.n,
            method,
            &Self::request_id(self.n),
            &time::rfc3339(self.now / 1000),
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1",
                   "user_context": {"user_id": "u1"}, "environment": "production"}),
            payload,
        );
        let out: Value =
            serde_json::from_slice(&self.guardian.handle(&serde_json::to_vec(&req).unwrap()))
                .unwrap();
        let result = out
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{out}"));
        let codes: Vec<&str> = result["reason_codes"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let decision = result["decision"].as_str().unwrap_or("error");
        Answer {
            n: self.n,
            summary: format!("{decision} {}", codes.join(",")).trim().to_string(),
            result,
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Answer {
        let arguments: serde_json::Map<String, Value> = args
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), json!({"value": v})))
            .collect();
        self.send(
            "steps/toolCallRequest",
            json!({"tool": {"name": tool}, "arguments": arguments}),
        )
    }

    fn approve(&self, ask: u32, approver: &str) -> Result<Extension, ApproveError> {
        self.guardian
            .approve(&Self::request_id(ask), approver, Some(self.now))
            .map(|g| g.extension)
    }
}

fn refund(id: &str, amount: u32) -> Value {
    json!({"payment_id": id, "amount": amount})
}

#[test]
fn an_ask_carries_the_action_hash_and_opens_a_pending_approval() {
    let mut s = Session::new();
    let a = s.call("refund", refund("p1", 2000));
    assert_eq!(a.summary, "ask refund.large");
    let approval = &a.result["policy_data"]["approval"];
    assert_eq!(approval["request_id"], Session::request_id(a.n));
    // The hash is SHA-256 of the canonical {principal, tool, operation, arguments, resource,
    // environment}, recomputed here from the spec of the binding.
    let action = json!({
        "principal": {"agent_id": "a", "user_id": "u1"},
        "tool": {"name": "refund"},
        "operation": null,
        "arguments": {"payment_id": "p1", "amount": 2000},
        "resource": null,
        "environment": "production",
    });
    assert_eq!(approval["action_hash"], crypto::canonical_hash(&action));
    assert_eq!(approval["expires_seconds"], 600);
    let context = a.result["ask_details"]["context"].as_str().unwrap();
    assert!(context.contains(approval["action_hash"].as_str().unwrap()));
    let list = s.guardian.approvals(Some(s.now));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].status, ApprovalStatus::Pending);
    assert_eq!(list[0].approval.approver_id, "finance");
}

#[test]
fn an_approval_is_consumed_once_by_the_same_call() {
    let mut s = Session::new();
    let ask = s.call("refund", refund("p1", 2000));
    assert_eq!(ask.summary, "ask refund.large");
    s.now += 60_000;
    assert_eq!(s.approve(ask.n, "finance"), Ok(Extension::None));
    let again = s.call("refund", refund("p1", 2000));
    assert_eq!(again.summary, "allow warden.approved,refund.large");
    assert_eq!(
        again.result["policy_data"]["approval"]["consumed"],
        Session::request_id(ask.n)
    );
    // The approved call went ahead: it reserved its effect key.
    assert_eq!(s.guardian.effects(SESSION).len(), 1);
    // Single use: the approval is gone; a second refund of p1 is a duplicate effect.
    assert!(s.guardian.approvals(Some(s.now)).is_empty());
    assert_eq!(
        s.call("refund", refund("p1", 2000)).summary,
        "deny warden.duplicate_effect"
    );
    // Another large refund asks afresh.
    assert_eq!(
        s.call("refund", refund("p2", 2000)).summary,
        "ask refund.large"
    );
}

#[test]
fn a_call_with_other_arguments_is_an_approval_mismatch() {
    let mut s = Session::new();
    let ask = s.call("refund", refund("p1", 2000));
    s.approve(ask.n, "finance").unwrap();
    let other = s.call("refund", refund("p1", 5000));
    assert_eq!(other.summary, "deny warden.approval_mismatch");
    assert!(other.result["reasoning"]
        .as_str()
        .unwrap()
        .contains("not the one approved"));
    // A call the policy allows outright is not affected by the outstanding approval.
    assert_eq!(s.call("refund", refund("p3", 10)).summary, "allow");
    // The approved call still goes ahead.
    assert_eq!(
        s.call("refund", refund("p1", 2000)).summary,
        "allow warden.approved,refund.large"
    );
}

#[test]
fn only_the_named_approver_may_grant_and_only_once() {
    let mut s = Session::new();
    let ask = s.call("refund", refund("p1", 2000));
    match s.approve(ask.n, "mallory") {
        Err(ApproveError::Grant(GrantError::WrongApprover { expected, given })) => {
            assert_eq!(expected, "human finance");
            assert_eq!(given, "mallory");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.approve(999, "finance"),
        Err(ApproveError::Grant(GrantError::Unknown(_)))
    ));
    s.approve(ask.n, "finance").unwrap();
    assert_eq!(
        s.approve(ask.n, "finance"),
        Err(ApproveError::Grant(GrantError::AlreadyGranted))
    );
}

#[test]
fn an_unanswered_ask_times_out_and_a_granted_one_expires() {
    let mut s = Session::new();
    let ask = s.call("refund", refund("p1", 2000));
    s.now += 15 * 60_000;
    assert_eq!(
        s.approve(ask.n, "finance"),
        Err(ApproveError::Grant(GrantError::TimedOut))
    );
    assert_eq!(
        s.guardian.approvals(Some(s.now))[0].status,
        ApprovalStatus::Expired
    );
    let ask = s.call("refund", refund("p2", 2000));
    // The expired ask is dropped when a new one comes: unanswered asks do not pile up.
    let list = s.guardian.approvals(Some(s.now));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].request_id, Session::request_id(ask.n));
    s.approve(ask.n, "finance").unwrap();
    s.now += 10 * 60_000;
    // Past `expires 10m`: the grant no longer counts, the call is asked about again.
    assert_eq!(
        s.call("refund", refund("p2", 2000)).summary,
        "ask refund.large"
    );
}

const INTENT: &str = "search the docs";

fn start(s: &mut Session, mode: &str) {
    let a = s.send(
        "steps/sessionStart",
        json!({"intent": {
            "raw": INTENT,
            "parsed": [{"tool": "search"}],
            "parser_provenance": {"origin": "user_input"},
            "scope_mode": mode,
        }}),
    );
    assert_eq!(a.summary, "allow", "{}", a.result);
}

#[test]
fn a_granted_session_extension_widens_the_intent_and_is_audited() {
    let journal = Arc::new(MemoryJournal::default());
    let mut s = Session::with(
        Guardian::with_journal(
            policy(),
            Options {
                protocol: warden::guardian::Protocol {
                    audit: true,
                    ..Default::default()
                },
                ..Default::default()
            },
            journal.clone(),
        ),
        0,
    );
    start(&mut s, "permissive");
    let ask = s.call("send_email", json!({"to": "x@corp.example"}));
    assert_eq!(ask.summary, "ask ibac.off_intent");
    assert_eq!(
        ask.result["ask_details"]["intent_extension"],
        json!({"capabilities": [{"tool": "send_email"}], "scope": "session"})
    );
    match s.approve(ask.n, "owner") {
        Ok(Extension::Extended(cap)) => {
            assert_eq!(cap.tool.as_deref(), Some("send_email"));
            assert_eq!(cap.granted_by.as_deref(), Some("human owner"));
        }
        other => panic!("{other:?}"),
    }
    // The tool is in the Intent now: the asked call, and others like it, need no approval.
    assert_eq!(
        s.call("send_email", json!({"to": "x@corp.example"}))
            .summary,
        "allow"
    );
    assert_eq!(
        s.call("send_email", json!({"to": "y@corp.example"}))
            .summary,
        "allow"
    );
    let records = journal.take();
    let chains = journal::chains(&records);
    let entries = &chains[0].1;
    crypto::verify_chain(entries).unwrap();
    let types: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["step_type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "steps/sessionStart",
            "steps/toolCallRequest",
            "warden/approval_granted",
            "intent_extension",
            "steps/toolCallRequest",
            "steps/toolCallRequest",
        ]
    );
    let ext = &entries[3];
    assert_eq!(ext["ask_step_id"], Session::request_id(ask.n));
    assert_eq!(ext["approver"], json!({"type": "human", "id": "owner"}));
    assert_eq!(ext["capabilities"], json!([{"tool": "send_email"}]));
    assert_eq!(ext["provenance"]["origin"], "approver");
    assert_eq!(entries[1]["action_hash"], entries[2]["action_hash"]);
}

#[test]
fn a_strict_intent_is_not_widened_but_the_approved_call_proceeds() {
    let mut s = Session::new();
    start(&mut s, "strict");
    let ask = s.call("send_email", json!({"to": "x@corp.example"}));
    assert_eq!(s.approve(ask.n, "owner"), Ok(Extension::RefusedStrict));
    assert_eq!(
        s.call("send_email", json!({"to": "x@corp.example"}))
            .summary,
        "allow warden.approved,ibac.off_intent"
    );
    assert_eq!(
        s.call("send_email", json!({"to": "y@corp.example"}))
            .summary,
        "ask ibac.off_intent"
    );
}

#[test]
fn approvals_survive_a_restart_at_every_point() {
    let journal = Arc::new(MemoryJournal::default());
    let mut s = Session::journalled(&journal, 0);
    let ask = s.call("refund", refund("p1", 2000));
    // Restart between the ask and the grant.
    let s = Session::journalled(&journal, s.n);
    assert_eq!(
        s.guardian.approvals(Some(s.now))[0].status,
        ApprovalStatus::Pending
    );
    s.approve(ask.n, "finance").unwrap();
    // Restart between the grant and the call.
    let mut s = Session::journalled(&journal, s.n);
    assert_eq!(
        s.call("refund", refund("p1", 5000)).summary,
        "deny warden.approval_mismatch"
    );
    assert_eq!(
        s.call("refund", refund("p1", 2000)).summary,
        "allow warden.approved,refund.large"
    );
    // Restart after the call: the approval stays used up.
    let s = Session::journalled(&journal, s.n);
    assert!(s.guardian.approvals(Some(s.now)).is_empty());
}

#[test]
fn the_cli_lists_and_grants_against_a_state_folder() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("warden-approve-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let policy = std::env::temp_dir().join(format!("warden-approve-{}.ward", std::process::id()));
    std::fs::write(&policy, POLICY).unwrap();
    let bin = env!("CARGO_BIN_EXE_warden");
    let state = dir.to_str().unwrap();
    let pol = policy.to_str().unwrap();
    // Requests are near the wall clock: `warden serve` checks the skew window, and the grant
    // is made on the wall clock.
    let now = time::now_ms() / 1000;
    let serve = |lines: &[Value]| {
        let input: Vec<String> = lines.iter().map(Value::to_string).collect();
        let mut child = Command::new(bin)
            .args([
                "serve",
                "--stdio",
                "--no-handshake",
                "--state",
                state,
                "--policy",
                pol,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{}\n", input.join("\n")).as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let req = |n: u32, amount: u32| {
        envelope::request(
            n,
            "steps/toolCallRequest",
            &Session::request_id(n),
            &time::rfc3339(now),
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1"}),
            json!({"tool": {"name": "refund"},
                   "arguments": {"payment_id": {"value": "p1"}, "amount": {"value": amount}}}),
        )
    };
    let out = serve(&[req(1, 2000)]);
    assert_eq!(out[0]["result"]["decision"], "ask");
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, listed, _) = run(&[
        "approvals",
        "--state",
        state,
        "--policy",
        pol,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["request_id"], Session::request_id(1));
    assert_eq!(listed[0]["status"], "pending");
    assert_eq!(listed[0]["action"]["arguments"]["amount"], 2000);
    let id = Session::request_id(1);
    let (code, _, err) = run(&[
        "approve", "--state", state, "--policy", pol, &id, "--as", "eve",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("human finance"), "{err}");
    let (code, said, _) = run(&[
        "approve", "--state", state, "--policy", pol, &id, "--as", "finance",
    ]);
    assert_eq!(code, Some(0));
    assert!(said.contains("approved"), "{said}");
    let out = serve(&[req(2, 5000), req(3, 2000)]);
    assert_eq!(
        out[0]["result"]["reason_codes"][0],
        "warden.approval_mismatch"
    );
    assert_eq!(out[1]["result"]["decision"], "allow");
    assert_eq!(out[1]["result"]["reason_codes"][0], "warden.approved");
    // The grant is in the audit chain, and the chain verifies.
    let (code, _, err) = run(&["audit", "verify", state]);
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&policy);
}

/// A payment that needs approval and carries an AWS key in its memo, with a masked password.
const ASK_MODIFY: &str = r#"
mask args.password
rule large on toolCallRequest when tool.name == "pay" and args.amount > 1000
  => ask "pay.large" approver human "finance"
rule key on toolCallRequest when tool.name == "pay" and args.memo matches "AKIA[0-9A-Z]{16}"
  => modify "secret.key" redact args.memo with "[KEY]"
default allow
"#;

const KEY: &str = "AKIA0123456789ABCDEF";
const PASSWORD: &str = "hunter2hunter2";

fn ask_modify_session() -> (Session, Arc<common::Collect>) {
    let policy = Policy::from_source("pay.ward", ASK_MODIFY).unwrap_or_else(|d| panic!("{d}"));
    let guardian = Guardian::new(policy);
    let log = Arc::new(common::Collect::default());
    assert!(guardian.set_decision_log(log.clone()));
    (Session::with(guardian, 0), log)
}

fn payment(amount: u32, memo: &str) -> Value {
    json!({"to": "bob", "amount": amount, "memo": memo, "password": PASSWORD})
}

/// The answer as the wire carries it, checked against the ACS response schema.
fn assert_valid(a: &Answer) {
    common::schema::assert_valid_response(
        &json!({"jsonrpc": "2.0", "id": a.n, "result": a.result}),
    );
}

#[test]
fn an_ask_with_a_modify_carries_the_modification_and_binds_the_modified_call() {
    let (mut s, _) = ask_modify_session();
    let a = s.call("pay", payment(2000, KEY));
    assert_eq!(a.summary, "ask pay.large,secret.key");
    assert_valid(&a);
    assert_eq!(
        a.result["modifications"],
        json!({"redactions": [{"path": "/arguments/memo/value", "replacement": "[KEY]"}]})
    );
    // The hash is that of the modified call: the memo holds its replacement.
    let modified = json!({
        "principal": {"agent_id": "a", "user_id": "u1"},
        "tool": {"name": "pay"},
        "operation": null,
        "arguments": {"to": "bob", "amount": 2000, "memo": "[KEY]", "password": PASSWORD},
        "resource": null,
        "environment": "production",
    });
    assert_eq!(
        a.result["policy_data"]["approval"]["action_hash"],
        crypto::canonical_hash(&modified)
    );
}

#[test]
fn the_approver_is_shown_no_secret() {
    let (mut s, _) = ask_modify_session();
    let a = s.call("pay", payment(2000, KEY));
    // The action as the approver sees it: its canonical JSON text.
    let shown: Value = serde_json::from_str(
        a.result["policy_data"]["approval"]["action"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(shown["arguments"]["memo"], "[KEY]");
    assert_eq!(shown["arguments"]["password"], "[redacted]");
    assert_eq!(shown["arguments"]["amount"], 2000);
    let listed = s.guardian.approvals(Some(s.now));
    assert_eq!(listed.len(), 1);
    for text in [a.result.to_string(), listed[0].approval.action.clone()] {
        assert!(!text.contains(KEY), "{text}");
        assert!(!text.contains(PASSWORD), "{text}");
    }
}

#[test]
fn the_approved_call_runs_with_the_modification() {
    let (mut s, _) = ask_modify_session();
    let ask = s.call("pay", payment(2000, KEY));
    s.now += 60_000;
    assert_eq!(s.approve(ask.n, "finance"), Ok(Extension::None));
    let again = s.call("pay", payment(2000, KEY));
    assert_eq!(again.summary, "modify warden.approved,pay.large,secret.key");
    assert_valid(&again);
    assert_eq!(
        again.result["modifications"]["redactions"][0]["path"],
        "/arguments/memo/value"
    );
    assert_eq!(
        again.result["policy_data"]["approval"]["consumed"],
        Session::request_id(ask.n)
    );
    // Used up: the same call asks afresh.
    assert_eq!(
        s.call("pay", payment(2000, KEY)).summary,
        "ask pay.large,secret.key"
    );
}

#[test]
fn a_different_call_after_a_modified_approval_is_a_mismatch() {
    let (mut s, _) = ask_modify_session();
    let ask = s.call("pay", payment(2000, KEY));
    s.approve(ask.n, "finance").unwrap();
    assert_eq!(
        s.call("pay", payment(2500, KEY)).summary,
        "deny warden.approval_mismatch"
    );
}

#[test]
fn the_decision_log_shows_no_redacted_or_masked_value() {
    let (mut s, log) = ask_modify_session();
    let ask = s.call("pay", payment(2000, KEY));
    s.approve(ask.n, "finance").unwrap();
    s.call("pay", payment(2000, KEY));
    let records = log.0.lock().unwrap().clone();
    assert_eq!(records.len(), 2);
    for r in &records {
        assert_eq!(r["arguments"]["memo"], "[redacted]", "{r}");
        assert_eq!(r["arguments"]["password"], "[redacted]", "{r}");
        assert_eq!(r["arguments"]["amount"], 2000, "{r}");
        let text = r.to_string();
        assert!(!text.contains(KEY) && !text.contains(PASSWORD), "{text}");
    }
}

#[test]
fn through_the_server_and_the_cli_the_approver_sees_no_secret_and_the_approved_call_runs_modified()
{
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("warden-ask-modify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("pay.ward");
    std::fs::write(&policy, ASK_MODIFY).unwrap();
    let state = dir.join("state");
    let (bin, state, pol) = (
        env!("CARGO_BIN_EXE_warden"),
        state.to_str().unwrap(),
        policy.to_str().unwrap(),
    );
    let now = time::now_ms() / 1000;
    let serve = |lines: &[Value]| -> Vec<Value> {
        let input: Vec<String> = lines.iter().map(Value::to_string).collect();
        let args = [
            "serve",
            "--stdio",
            "--no-handshake",
            "--state",
            state,
            "--policy",
            pol,
        ];
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{}\n", input.join("\n")).as_bytes())
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let req = |n: u32| {
        let arguments: serde_json::Map<String, Value> = payment(2000, KEY)
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), json!({"value": v})))
            .collect();
        envelope::request(
            n,
            "steps/toolCallRequest",
            &Session::request_id(n),
            &time::rfc3339(now),
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1"}),
            json!({"tool": {"name": "pay"}, "arguments": arguments}),
        )
    };
    let asked = serve(&[req(1)]);
    assert_eq!(asked[0]["result"]["decision"], "ask", "{}", asked[0]);
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let listing = [
        "approvals",
        "--state",
        state,
        "--policy",
        pol,
        "--format",
        "json",
    ];
    let (code, listed) = run(&listing);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed[0]["action"]["arguments"]["memo"], "[KEY]",
        "{listed}"
    );
    assert_eq!(
        listed[0]["action"]["arguments"]["password"], "[redacted]",
        "{listed}"
    );
    let (_, text) = run(&["approvals", "--state", state, "--policy", pol]);
    for shown in [listed.to_string(), text, asked[0].to_string()] {
        assert!(!shown.contains(KEY) && !shown.contains(PASSWORD), "{shown}");
    }
    let id = Session::request_id(1);
    let (code, _) = run(&[
        "approve", "--state", state, "--policy", pol, &id, "--as", "finance",
    ]);
    assert_eq!(code, Some(0));
    let ran = serve(&[req(2)]);
    let result = &ran[0]["result"];
    assert_eq!(result["decision"], "modify", "{result}");
    assert_eq!(result["reason_codes"][0], "warden.approved");
    assert_eq!(
        result["modifications"]["redactions"][0]["path"],
        "/arguments/memo/value"
    );
    common::schema::assert_valid_response(&ran[0]);
    let _ = std::fs::remove_dir_all(&dir);
}
