//! Effect identity through `Guardian::handle`: reservations, outcomes, the duplicate and
//! ambiguous locks, `not_executed_on_error`, operator resolution, and results that match no
//! reservation (docs/effects.md).

use serde_json::{json, Value};
use std::sync::Arc;

use warden::acs::{envelope, ids, time};
use warden::guardian::{Guardian, MemoryJournal, Options, Policy};
use warden::state::EffectStatus;

const SESSION: &str = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f";

const POLICY: &str = r#"
use std.effects
effect charge for charge_card = key(args.payment_id, args.amount)
effect refund for refund not_executed_on_error = key(args.payment_id)
default allow
"#;

fn policy() -> Policy {
    Policy::from_source("test.ward", POLICY).unwrap_or_else(|d| panic!("{d}"))
}

struct Session {
    guardian: Guardian,
    n: u32,
    turn: &'static str,
}

impl Session {
    fn new() -> Session {
        Session {
            guardian: Guardian::new(policy()),
            n: 0,
            turn: "t1",
        }
    }

    /// A Guardian journalling into `journal`, restored from what it already holds.
    fn journalled(journal: &Arc<MemoryJournal>, n: u32) -> Session {
        let records = journal.records.lock().unwrap().clone();
        let guardian = Guardian::with_journal(policy(), Options::default(), journal.clone());
        guardian.restore(records);
        Session {
            guardian,
            n,
            turn: "t1",
        }
    }

    fn request_id(n: u32) -> String {
        ids::counter(0, n.into())
    }

    fn send(&mut self, method: &str, payload: Value) -> (u32, Value) {
        self.send_in(SESSION, method, payload)
    }

    fn send_in(&mut self, session: &str, method: &str, payload: Value) -> (u32, Value) {
        self.n += 1;
        let req = envelope::request(
            self.n,
            method,
            &Self::request_id(self.n),
            "2026-12-01T10:00:00Z",
            json!({"agent_id": "a", "session_id": session, "turn_id": self.turn}),
            payload,
        );
        let out: Value =
            serde_json::from_slice(&self.guardian.handle(&serde_json::to_vec(&req).unwrap()))
                .unwrap();
        (self.n, out)
    }

    /// A call: its number (for results) and its decision with reason codes.
    fn call(&mut self, tool: &str, args: Value) -> (u32, String) {
        let (n, r) = self.send(
            "steps/toolCallRequest",
            json!({"tool": {"name": tool}, "arguments": args}),
        );
        let res = &r["result"];
        let codes: Vec<&str> = res["reason_codes"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let decision = res["decision"].as_str().unwrap_or("error");
        (
            n,
            format!("{decision} {}", codes.join(",")).trim().to_string(),
        )
    }

    fn result(&mut self, tool: &str, request: u32, status: &str) {
        let (_, r) = self.send(
            "steps/toolCallResult",
            json!({
                "tool": {"name": tool},
                "request_id_ref": Self::request_id(request),
                "exit_status": status,
                "outputs": [],
            }),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }

    fn states(&self) -> Vec<(String, EffectStatus)> {
        self.guardian.effects(SESSION)
    }
}

fn charge(id: &str, amount: u32) -> Value {
    json!({"payment_id": id, "amount": amount})
}

#[test]
fn an_allowed_call_reserves_and_a_duplicate_is_denied() {
    let mut s = Session::new();
    let (n, d) = s.call("charge_card", charge("p1", 500));
    assert_eq!(d, "allow");
    assert_eq!(
        s.states(),
        vec![(
            r#"["charge",["p1",500]]"#.to_string(),
            EffectStatus::Reserved
        )]
    );
    // Another request id, same effect: denied while in flight.
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.duplicate_effect"
    );
    s.result("charge_card", n, "success");
    assert_eq!(s.states()[0].1, EffectStatus::Committed);
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.duplicate_effect"
    );
    // A different key is a different effect.
    assert_eq!(s.call("charge_card", charge("p1", 501)).1, "allow");
}

#[test]
fn a_denied_call_reserves_nothing() {
    let mut s = Session::new();
    s.call("charge_card", charge("p1", 500));
    s.call("charge_card", charge("p1", 500));
    assert_eq!(s.states().len(), 1);
    // A call missing a key part has no effect identity.
    assert_eq!(
        s.call("charge_card", json!({"payment_id": "p2"})).1,
        "allow"
    );
    assert_eq!(s.states().len(), 1);
}

#[test]
fn failure_is_ambiguous_and_locks_until_resolved() {
    for status in ["failure", "timeout"] {
        let mut s = Session::new();
        let (n, _) = s.call("charge_card", charge("p1", 500));
        s.result("charge_card", n, status);
        let (key, state) = s.states().remove(0);
        assert_eq!(state, EffectStatus::Ambiguous);
        assert_eq!(
            s.call("charge_card", charge("p1", 500)).1,
            "deny warden.ambiguous_effect"
        );
        // Resolved as failed: it did not happen, so it may be tried again.
        assert_eq!(
            s.guardian
                .resolve_effect(SESSION, &key, EffectStatus::Failed),
            Some(EffectStatus::Ambiguous)
        );
        assert_eq!(s.call("charge_card", charge("p1", 500)).1, "allow");
    }
}

#[test]
fn resolved_as_committed_stays_a_duplicate() {
    let mut s = Session::new();
    let (n, _) = s.call("charge_card", charge("p1", 500));
    s.result("charge_card", n, "timeout");
    let key = s.states().remove(0).0;
    assert_eq!(
        s.guardian
            .resolve_effect(SESSION, &key, EffectStatus::Committed),
        Some(EffectStatus::Ambiguous)
    );
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.duplicate_effect"
    );
    // Only committed and failed are resolutions; unknown keys change nothing.
    assert_eq!(
        s.guardian
            .resolve_effect(SESSION, &key, EffectStatus::Reserved),
        None
    );
    assert_eq!(
        s.guardian
            .resolve_effect(SESSION, "[\"nope\"]", EffectStatus::Failed),
        None
    );
}

#[test]
fn blocked_fails_and_not_executed_on_error_fails() {
    let mut s = Session::new();
    let (n, _) = s.call("charge_card", charge("p1", 500));
    s.result("charge_card", n, "blocked");
    assert_eq!(s.states()[0].1, EffectStatus::Failed);
    assert_eq!(s.call("charge_card", charge("p1", 500)).1, "allow");

    let mut s = Session::new();
    let (n, _) = s.call("refund", json!({"payment_id": "p1"}));
    s.result("refund", n, "failure");
    assert_eq!(
        s.states(),
        vec![(r#"["refund",["p1"]]"#.to_string(), EffectStatus::Failed)]
    );
    assert_eq!(s.call("refund", json!({"payment_id": "p1"})).1, "allow");
}

#[test]
fn a_result_matching_no_reservation_changes_nothing() {
    let mut s = Session::new();
    let (n, _) = s.call("charge_card", charge("p1", 500));
    // No such request; and a request that reserved nothing.
    s.result("charge_card", 999, "timeout");
    let (m, _) = s.call("read_file", json!({"path": "a"}));
    s.result("read_file", m, "timeout");
    assert_eq!(s.states()[0].1, EffectStatus::Reserved);
    // The real result still lands, once.
    s.result("charge_card", n, "success");
    assert_eq!(s.states()[0].1, EffectStatus::Committed);
    s.result("charge_card", n, "timeout");
    assert_eq!(s.states()[0].1, EffectStatus::Committed);
}

#[test]
fn effects_and_resolutions_survive_a_restart() {
    let journal = Arc::new(MemoryJournal::default());
    let mut s = Session::journalled(&journal, 0);
    let (n, _) = s.call("charge_card", charge("p1", 500));
    s.result("charge_card", n, "timeout");
    let key = s.states().remove(0).0;

    // Restarted: still locked.
    let mut s = Session::journalled(&journal, s.n);
    assert_eq!(s.states(), vec![(key.clone(), EffectStatus::Ambiguous)]);
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.ambiguous_effect"
    );
    assert_eq!(
        s.guardian
            .resolve_effect(SESSION, &key, EffectStatus::Committed),
        Some(EffectStatus::Ambiguous)
    );

    // Restarted again: the resolution was journalled.
    let mut s = Session::journalled(&journal, s.n);
    assert_eq!(s.states(), vec![(key, EffectStatus::Committed)]);
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.duplicate_effect"
    );
    // A reservation in flight at the restart still answers its result.
    let (m, _) = s.call("charge_card", charge("p2", 500));
    let mut s = Session::journalled(&journal, s.n);
    s.result("charge_card", m, "success");
    assert_eq!(s.states()[1].1, EffectStatus::Committed);
}

#[test]
fn the_cli_lists_and_resolves_against_a_state_folder() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("warden-effects-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let policy = std::env::temp_dir().join(format!("warden-effects-{}.ward", std::process::id()));
    std::fs::write(&policy, POLICY).unwrap();
    let ts = time::now_rfc3339();
    let req = |n: u32, method: &str, payload: Value| {
        envelope::request(
            n,
            method,
            &Session::request_id(n),
            &ts,
            json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1"}),
            payload,
        )
        .to_string()
    };
    let input = [
        req(
            1,
            "steps/toolCallRequest",
            json!({"tool": {"name": "charge_card"}, "arguments": charge("p1", 500)}),
        ),
        req(
            2,
            "steps/toolCallResult",
            json!({"tool": {"name": "charge_card"}, "request_id_ref": Session::request_id(1),
                   "exit_status": "timeout", "outputs": []}),
        ),
    ]
    .join("\n");
    let bin = env!("CARGO_BIN_EXE_warden");
    let state = dir.to_str().unwrap();
    let pol = policy.to_str().unwrap();
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
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{input}\n").as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let key = r#"["charge",["p1",500]]"#;
    assert_eq!(
        run(&["effects", "list", "--state", state, "--policy", pol]),
        (Some(0), format!("{SESSION}\t{key}\tambiguous\n"))
    );
    assert_eq!(
        run(&["effects", "resolve", "--state", state, "--policy", pol, SESSION, key, "failed"]).0,
        Some(0)
    );
    assert_eq!(
        run(&["effects", "list", "--state", state, "--policy", pol]),
        (Some(0), format!("{SESSION}\t{key}\tfailed\n"))
    );
    assert_eq!(
        run(&["effects", "resolve", "--state", state, "--policy", pol, SESSION, "[]", "failed"]).0,
        Some(1)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&policy);
}

#[test]
fn a_reservation_past_its_lease_is_ambiguous_and_a_late_result_settles_it() {
    let policy = Policy::from_source(
        "lease.ward",
        "use std.effects\neffect ship for ship_order lease 1 turn = key(args.order_id)\ndefault allow\n",
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let mut s = Session {
        guardian: Guardian::new(policy),
        n: 0,
        turn: "t1",
    };
    let (n, d) = s.call("ship_order", json!({"order_id": "o1"}));
    assert_eq!(d, "allow");
    assert_eq!(
        s.call("ship_order", json!({"order_id": "o1"})).1,
        "deny warden.duplicate_effect"
    );
    // The next turn: the lease has run out.
    s.turn = "t2";
    assert_eq!(
        s.call("ship_order", json!({"order_id": "o1"})).1,
        "deny warden.ambiguous_effect"
    );
    // (A denied step commits nothing, not even its turn: the listing reads the state as of
    // the last step that went ahead.)
    assert_eq!(s.call("read_file", json!({"path": "a"})).1, "allow");
    assert_eq!(s.states()[0].1, EffectStatus::Ambiguous);
    s.result("ship_order", n, "success");
    assert_eq!(s.states()[0].1, EffectStatus::Committed);
}

#[test]
fn resolutions_and_unmatched_results_are_in_the_audit_chain() {
    let journal = Arc::new(warden::guardian::MemoryJournal::default());
    let guardian = Guardian::with_journal(
        policy(),
        Options {
            protocol: warden::guardian::Protocol {
                audit: true,
                ..Default::default()
            },
            ..Default::default()
        },
        journal.clone(),
    );
    let mut s = Session {
        guardian,
        n: 0,
        turn: "t1",
    };
    let (n, _) = s.call("charge_card", charge("p1", 500));
    s.result("charge_card", n, "timeout");
    s.result("charge_card", 77, "success");
    let key = r#"["charge",["p1",500]]"#;
    assert_eq!(
        s.guardian
            .resolve_effect(SESSION, key, EffectStatus::Failed),
        Some(EffectStatus::Ambiguous)
    );
    let records = journal.take();
    let chains = warden::guardian::journal::chains(&records);
    let entries = &chains[0].1;
    warden::acs::crypto::verify_chain(entries).unwrap();
    assert_eq!(
        entries[1]["effect_outcome"],
        json!({"request_id_ref": Session::request_id(n), "key": key,
               "from": "reserved", "to": "ambiguous"})
    );
    assert_eq!(
        entries[2]["effect_outcome"],
        json!({"request_id_ref": Session::request_id(77), "matched": false})
    );
    assert_eq!(entries[3]["step_type"], "warden/effect_resolved");
    assert_eq!(entries[3]["effect_key"], key);
    assert_eq!(entries[3]["from"], "ambiguous");
    assert_eq!(entries[3]["to"], "failed");
}

#[test]
fn a_subagents_effects_reach_its_parent_at_the_stop_and_survive_a_restart() {
    const CHILD: &str = "c0ffee00-0000-4000-8000-000000000001";
    let journal = Arc::new(warden::guardian::MemoryJournal::default());
    let mut s = Session::journalled(&journal, 0);
    let start = s.send(
        "steps/subagentStart",
        json!({"subagent_session_id": CHILD, "intent_derivation": "inherit_full"}),
    );
    assert_eq!(start.1["result"]["decision"], "allow", "{}", start.1);
    let (n, r) = s.send_in(
        CHILD,
        "steps/toolCallRequest",
        json!({"tool": {"name": "charge_card"}, "arguments": charge("p1", 500)}),
    );
    assert_eq!(r["result"]["decision"], "allow");
    s.send_in(
        CHILD,
        "steps/toolCallResult",
        json!({"tool": {"name": "charge_card"}, "request_id_ref": Session::request_id(n),
               "exit_status": "success", "outputs": []}),
    );
    // Until the stop, the parent has not heard of it.
    assert!(s.states().is_empty());
    s.send(
        "steps/subagentStop",
        json!({"subagent_session_id": CHILD, "outcome": "completed"}),
    );
    let committed = vec![(
        r#"["charge",["p1",500]]"#.to_string(),
        EffectStatus::Committed,
    )];
    assert_eq!(s.states(), committed);
    assert_eq!(
        s.call("charge_card", charge("p1", 500)).1,
        "deny warden.duplicate_effect"
    );
    let s = Session::journalled(&journal, s.n);
    assert_eq!(s.states(), committed);
}
