//! The session table under hostile load (docs/serve.md, "Sessions"): a request refused for
//! want of a handshake allocates nothing, a flood of bare hellos locks no new session out (with
//! and without `--key-file`), one agent cannot take every slot, idle sessions leave memory and
//! come back from the journal with their chain and taint, and an ended session's age survives
//! a restart.

mod serve_common;

use std::sync::Arc;

use serde_json::{json, Value};
use serve_common::{Conn, Server, POLICY};
use warden::acs::{envelope, ids, time};
use warden::guardian::{Caps, Guardian, MemoryJournal, Options, Policy, Protocol, Record};

fn guardian(caps: Caps, journal: Option<Arc<MemoryJournal>>) -> Guardian {
    let options = Options {
        protocol: Protocol {
            caps,
            ..Protocol::strict()
        },
        ..Options::default()
    };
    let policy = Policy::from_source("p.ward", POLICY).unwrap();
    match journal {
        Some(j) => Guardian::with_journal(policy, options, j),
        None => Guardian::with_options(policy, options),
    }
}

fn req(n: u64, method: &str, agent: &str, sid: &str, payload: Value) -> Value {
    envelope::request(
        n,
        method,
        &ids::counter(7, n),
        &time::now_rfc3339_ms(),
        json!({"agent_id": agent, "session_id": sid}),
        payload,
    )
}

fn hello() -> Value {
    json!({"acs_versions_supported": ["0.1.0"],
        "methods_implemented": ["steps/sessionStart", "steps/toolCallRequest",
            "steps/toolCallResult", "steps/sessionEnd"],
        "transports_supported": ["stdio", "http"], "provenance_producer": "deterministic"})
}

fn send(g: &Guardian, v: &Value) -> Value {
    serde_json::from_slice(&g.handle(&serde_json::to_vec(v).unwrap())).unwrap()
}

fn post(c: &mut Conn, v: &Value) -> Value {
    c.post(&serde_json::to_vec(v).unwrap()).unwrap()
}

fn error_code(r: &Value) -> Option<i64> {
    r["error"]["code"].as_i64()
}

/// `warden serve --state` with the test policy and `extra` flags; its state folder.
fn stateful_server(name: &str, extra: &[&str]) -> (Server, std::path::PathBuf) {
    let dir = serve_common::tmp(name);
    let state = dir.join("state");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let mut args = vec![
        "--policy",
        policy.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (Server::start(&args), state)
}

/// Ends the session.
fn end_session(g: &Guardian, sid: &str, n: &mut u64) {
    *n += 1;
    let end = req(
        *n,
        "steps/sessionEnd",
        "a",
        sid,
        json!({"reason": "completed"}),
    );
    assert_eq!(send(g, &end)["result"]["decision"], "allow");
}

/// Over HTTP: a handshake, `sessionStart` and an untrusted tool result in session `sid`; the
/// connection and the last request number.
fn tainted_over_http(server: &Server, sid: &str) -> (Conn, u64) {
    let mut c = Conn::open(&server.addr).unwrap();
    let steps = [
        ("handshake/hello", hello()),
        ("steps/sessionStart", json!({})),
        ("steps/toolCallResult", untrusted_result()),
    ];
    for (n, (method, payload)) in (1..).zip(steps) {
        let r = post(&mut c, &req(n, method, "a", sid, payload));
        assert_eq!(r["result"]["decision"], "allow", "{method}: {r}");
    }
    (c, 3)
}

/// A request of an ended session is refused as such.
fn assert_refused_as_ended(g: &Guardian, n: u64, sid: &str) {
    let r = send(g, &req(n, "steps/toolCallRequest", "a", sid, send_call()));
    assert_eq!(error_code(&r), Some(-32000), "{r}");
    assert!(r.to_string().contains("ended"), "{r}");
}

fn untrusted_result() -> Value {
    json!({"tool": {"name": "fetch"}, "exit_status": "success",
        "outputs": [{"value": "page", "provenance": {"provenance_id": "u1",
            "origin": "tool_output", "source_id": "fetch"}}]})
}

fn send_call() -> Value {
    json!({"tool": {"name": "send"}, "arguments": {"to": {"value": "x"}}})
}

#[test]
fn requests_refused_for_want_of_a_handshake_take_no_slot() {
    let caps = Caps {
        max_sessions: 10,
        ..Caps::default()
    };
    let g = guardian(caps, None);
    for n in 0..1_000 {
        let r = send(
            &g,
            &req(
                n + 1,
                "steps/toolCallRequest",
                "a",
                &ids::counter(50, n),
                send_call(),
            ),
        );
        assert_eq!(error_code(&r), Some(-32003), "{r}");
    }
    assert_eq!(g.session_count(), 0, "refused requests allocated sessions");
    // A real client still gets in.
    let r = send(
        &g,
        &req(5_000, "handshake/hello", "a", &ids::counter(51, 1), hello()),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    assert_eq!(g.session_count(), 1);
}

#[test]
fn a_refused_handshake_leaves_nothing_behind() {
    let g = guardian(Caps::default(), None);
    let bad = json!({"acs_versions_supported": ["9.9.9"], "methods_implemented": [],
        "transports_supported": ["stdio"], "provenance_producer": "deterministic"});
    for n in 0..100 {
        let r = send(
            &g,
            &req(
                n + 1,
                "handshake/hello",
                "a",
                &ids::counter(52, n),
                bad.clone(),
            ),
        );
        assert!(r.get("error").is_some(), "{r}");
    }
    assert_eq!(g.session_count(), 0);
}

#[test]
fn one_agent_cannot_take_every_slot() {
    let caps = Caps {
        max_sessions: 100,
        max_sessions_per_agent: 10,
        ..Caps::default()
    };
    let g = guardian(caps, None);
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    for i in 0..10 {
        let r = send(
            &g,
            &req(
                next(),
                "handshake/hello",
                "greedy",
                &ids::counter(53, i),
                hello(),
            ),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
        // A first step: the share counts established sessions (bare hellos give way).
        let sid = ids::counter(53, i);
        let r = send(
            &g,
            &req(next(), "steps/sessionStart", "greedy", &sid, json!({})),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    let r = send(
        &g,
        &req(
            next(),
            "handshake/hello",
            "greedy",
            &ids::counter(53, 10),
            hello(),
        ),
    );
    assert_eq!(error_code(&r), Some(-32000), "{r}");
    assert!(
        r["error"]["message"].to_string().contains("greedy") || r.to_string().contains("greedy"),
        "{r}"
    );
    let r = send(
        &g,
        &req(
            next(),
            "handshake/hello",
            "polite",
            &ids::counter(54, 0),
            hello(),
        ),
    );
    assert_eq!(
        r["result"]["decision"], "allow",
        "another agent still gets in: {r}"
    );
}

/// Opens a session, takes in untrusted content, and checks that sending is denied.
fn tainted_session(g: &Guardian, sid: &str, n: &mut u64) {
    let mut go = |method: &str, payload: Value| {
        *n += 1;
        send(g, &req(*n, method, "a", sid, payload))
    };
    assert_eq!(
        go("handshake/hello", hello())["result"]["decision"],
        "allow"
    );
    assert_eq!(
        go("steps/sessionStart", json!({}))["result"]["decision"],
        "allow"
    );
    assert_eq!(
        go("steps/toolCallResult", untrusted_result())["result"]["decision"],
        "allow"
    );
    assert_eq!(
        go("steps/toolCallRequest", send_call())["result"]["decision"],
        "deny"
    );
}

#[test]
fn an_idle_session_leaves_memory_and_comes_back_with_its_chain_and_taint() {
    let caps = Caps {
        idle_session_ms: Some(1),
        ..Caps::default()
    };
    let journal = Arc::new(MemoryJournal::default());
    let g = guardian(caps, Some(journal.clone()));
    let sid = ids::counter(55, 1);
    let mut n = 0;
    tainted_session(&g, &sid, &mut n);
    let (head, len) = g.chain_head(&sid).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(g.sweep_sessions(), 1);
    assert_eq!(g.session_count(), 0, "the idle session left memory");
    // It comes back: restored from the journal, its chain continues and its taint holds.
    n += 1;
    let r = send(&g, &req(n, "steps/toolCallRequest", "a", &sid, send_call()));
    assert_eq!(r["result"]["decision"], "deny", "{r}");
    assert_eq!(r["result"]["reason_codes"][0], "taint", "{r}");
    let (head2, len2) = g.chain_head(&sid).unwrap();
    assert_eq!(len2, len + 1);
    assert_ne!(head2, head);
    let last = journal.records.lock().unwrap().last().cloned().unwrap();
    let Record::Step { entries, .. } = last else {
        panic!("a step record")
    };
    assert_eq!(
        entries[0]["previous_hash"].as_str(),
        head.as_deref(),
        "the chain links on"
    );
    // A replay of an old request id is still refused.
    let again = req(2, "steps/sessionStart", "a", &sid, json!({}));
    assert_eq!(error_code(&send(&g, &again)), Some(-32005));
}

#[test]
fn without_a_journal_an_idle_session_is_gone_and_says_so() {
    let caps = Caps {
        idle_session_ms: Some(1),
        ..Caps::default()
    };
    let g = guardian(caps, None);
    let sid = ids::counter(56, 1);
    let mut n = 0;
    tainted_session(&g, &sid, &mut n);
    std::thread::sleep(std::time::Duration::from_millis(5));
    g.sweep_sessions();
    // Not decided on an empty state: it must handshake again.
    let r = send(
        &g,
        &req(100, "steps/toolCallRequest", "a", &sid, send_call()),
    );
    assert_eq!(error_code(&r), Some(-32003), "{r}");
}

#[test]
fn an_ended_session_keeps_its_age_across_a_restart_and_stays_ended() {
    let journal = Arc::new(MemoryJournal::default());
    let g = guardian(Caps::default(), Some(journal.clone()));
    let sid = ids::counter(57, 1);
    let mut n = 0;
    tainted_session(&g, &sid, &mut n);
    end_session(&g, &sid, &mut n);
    // The records say the session ended ten minutes ago (beyond the five-minute window).
    let mut records = journal.take();
    for r in &mut records {
        if let Record::Handshake { at_ms, .. } | Record::Step { at_ms, .. } = r {
            *at_ms = Some(at_ms.unwrap() - 600_000);
        }
    }
    let restarted = guardian(Caps::default(), Some(journal.clone()));
    journal
        .records
        .lock()
        .unwrap()
        .extend(records.iter().cloned());
    restarted.restore(records);
    assert_eq!(
        restarted.session_count(),
        0,
        "the old tombstone was not made young"
    );
    // Its requests are still refused: the session comes back from the journal, ended.
    assert_refused_as_ended(&restarted, n + 1, &sid);
}

/// Over HTTP against `warden serve --state`: a flood of handshake-less requests does not fill
/// the table, and an idle session evicted by the housekeeping thread comes back.
#[test]
fn the_server_evicts_idle_sessions_and_restores_them() {
    let (server, _) = stateful_server("sessions", &["--max-sessions", "5", "--idle-timeout", "1"]);
    let mut c = Conn::open(&server.addr).unwrap();
    for n in 0..200 {
        let r = post(
            &mut c,
            &req(
                n + 1,
                "steps/toolCallRequest",
                "a",
                &ids::counter(58, n),
                send_call(),
            ),
        );
        assert_eq!(error_code(&r), Some(-32003), "{r}");
    }
    let sid = ids::counter(59, 1);
    let mut n = 1_000;
    let mut go = |c: &mut Conn, method: &str, payload: Value| {
        n += 1;
        post(c, &req(n, method, "a", &sid, payload))
    };
    assert_eq!(
        go(&mut c, "handshake/hello", hello())["result"]["decision"],
        "allow"
    );
    assert_eq!(
        go(&mut c, "steps/sessionStart", json!({}))["result"]["decision"],
        "allow"
    );
    assert_eq!(
        go(&mut c, "steps/toolCallResult", untrusted_result())["result"]["decision"],
        "allow"
    );
    // Idle for longer than the timeout and a sweep (once a second).
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let r = go(&mut c, "steps/toolCallRequest", send_call());
    assert_eq!(
        r["result"]["decision"], "deny",
        "restored with its taint: {r}"
    );
    assert!(r["result"]["chain_hash"].is_string(), "{r}");
}

#[test]
fn an_ended_session_is_compacted_to_its_chain_once_its_tombstone_leaves() {
    let journal = Arc::new(MemoryJournal::default());
    let options = Options {
        protocol: Protocol {
            skew_window_ms: Some(200),
            ..Protocol::strict()
        },
        ..Options::default()
    };
    let policy = || Policy::from_source("p.ward", POLICY).unwrap();
    let g = Guardian::with_journal(policy(), options.clone(), journal.clone());
    let sid = ids::counter(60, 1);
    let mut n = 0;
    tainted_session(&g, &sid, &mut n);
    end_session(&g, &sid, &mut n);
    let before = journal.records.lock().unwrap().clone();
    let chain_before = warden::guardian::journal::chains(&before);
    assert!(before.len() > 1);
    std::thread::sleep(std::time::Duration::from_millis(250));
    g.sweep_sessions();
    let after = journal.records.lock().unwrap().clone();
    assert!(
        matches!(&after[..], [Record::Sealed { session, .. }] if *session == sid),
        "{after:?}"
    );
    // The chain is whole and verifies.
    let chain_after = warden::guardian::journal::chains(&after);
    assert_eq!(chain_after, chain_before);
    warden::acs::crypto::verify_chain(&chain_after[0].1).unwrap();
    // A restart from the compacted journal still refuses the ended session.
    let restarted = Guardian::with_journal(policy(), options, journal.clone());
    restarted.restore(after);
    assert_refused_as_ended(&restarted, n + 1, &sid);
}

/// The same through `warden serve --state`: the housekeeping thread compacts the ended
/// session in the store, and `warden audit verify` still verifies its chain.
#[test]
fn the_server_compacts_ended_sessions_in_its_store() {
    let (server, state) = stateful_server("compact", &["--skew-window-ms", "500"]);
    let sid = ids::counter(61, 1);
    let (mut c, n) = tainted_over_http(&server, &sid);
    let r = post(
        &mut c,
        &req(
            n + 1,
            "steps/sessionEnd",
            "a",
            &sid,
            json!({"reason": "completed"}),
        ),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    server.kill9();
    let records = warden::server::store::read_dir(&state).unwrap();
    assert!(
        matches!(&records[..], [Record::Sealed { .. }]),
        "{records:?}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["audit", "verify"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_restart_under_another_policy_records_the_reload_in_the_chain() {
    let journal = Arc::new(MemoryJournal::default());
    let g = guardian(Caps::default(), Some(journal.clone()));
    let sid = ids::counter(62, 1);
    let mut n = 0;
    tainted_session(&g, &sid, &mut n);
    let old = g.policy_digest().to_string();
    let records = journal.take();
    // The same journal, restored under another policy.
    let options = Options {
        protocol: Protocol::strict(),
        ..Options::default()
    };
    let other = Policy::from_source("q.ward", "default allow").unwrap();
    let restarted = Guardian::with_journal(other, options, journal.clone());
    restarted.restore(records);
    n += 1;
    let r = send(
        &restarted,
        &req(n, "steps/toolCallRequest", "a", &sid, send_call()),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    let last = journal.records.lock().unwrap().last().cloned().unwrap();
    let Record::Step { entries, .. } = last else {
        panic!("a step record")
    };
    assert_eq!(
        entries[0]["step_type"], "warden/policy_reload",
        "{entries:?}"
    );
    assert_eq!(
        entries[0]["previous_policy_digest"],
        json!(old),
        "{entries:?}"
    );
}

/// `warden audit show` and `export` read the chains of a state folder.
#[test]
fn audit_show_and_export_read_the_chains() {
    let (server, state) = stateful_server("audit-show", &[]);
    let sid = ids::counter(63, 1);
    let (mut c, n) = tainted_over_http(&server, &sid);
    let r = post(
        &mut c,
        &req(n + 1, "steps/toolCallRequest", "a", &sid, send_call()),
    );
    assert_eq!(r["result"]["decision"], "deny", "{r}");
    server.kill9();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
            .arg("audit")
            .args(args)
            .arg(&state)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run(&["show"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("session {sid}: 3 entries")), "{out}");
    assert!(out.contains("steps/toolCallRequest  deny"), "{out}");
    let (code, out) = run(&["export", "--session", &sid]);
    assert_eq!(code, Some(0), "{out}");
    let entries: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(|e| e["session"] == json!(sid)));
    assert_eq!(entries[2]["previous_hash"], entries[1]["entry_hash"]);
    let (code, _) = run(&["show", "--session", "no-such-session"]);
    assert_eq!(code, Some(1));
}

/// `n` hellos of fresh sessions from the agent `agent`, over stdio to `child`, each answered.
fn flood(child: &mut std::process::Child, agent: &str, n: u64) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut stdin = child.stdin.take().unwrap();
    let agent = agent.to_string();
    let writer = std::thread::spawn(move || {
        let mut out = std::io::BufWriter::new(&mut stdin);
        for i in 0..n {
            let e = req(
                i + 1,
                "handshake/hello",
                &agent,
                &ids::counter(60, i),
                hello(),
            );
            writeln!(out, "{e}").unwrap();
        }
        out.flush().unwrap();
        drop(out);
        stdin
    });
    let mut answers = Vec::new();
    let mut out = BufReader::new(child.stdout.as_mut().unwrap());
    for _ in 0..n {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        answers.push(serde_json::from_str(&line).unwrap());
    }
    child.stdin = Some(writer.join().unwrap());
    answers
}

/// One request over stdio to `child`, answered.
fn over_stdio(child: &mut std::process::Child, v: &Value) -> Value {
    use std::io::{BufRead, BufReader, Write};
    writeln!(child.stdin.as_mut().unwrap(), "{v}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

fn stdio_serve(dir: &std::path::Path, extra: &[&str]) -> std::process::Child {
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["serve", "--stdio", "--policy"])
        .arg(dir.join("p.ward"))
        .arg("--state")
        .arg(dir.join("state"))
        .args(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_flood_of_bare_hellos_locks_no_new_session_out() {
    // 100 000 hellos that never take a step, under one agent id, then a client of that same
    // agent: its hello and its steps go through, and after a restart the flood is gone (a
    // hello is journalled only with a first step).
    let dir = serve_common::tmp("hello-flood");
    std::fs::write(dir.join("token"), "flood-metrics-token").unwrap();
    let token = dir.join("token");
    let mut child = stdio_serve(
        &dir,
        &[
            "--operator-listen",
            "127.0.0.1:0",
            "--operator-token-file",
            token.to_str().unwrap(),
            // No bare session expires during the flood, however slow the machine: the
            // counts below are the pool's alone.
            "--hello-timeout",
            "3600",
        ],
    );
    let (_, operator) = serve_common::announced(child.stderr.take().unwrap(), false, true);
    let answers = flood(&mut child, "a", 100_000);
    assert!(answers.iter().all(|r| r["result"]["decision"] == "allow"));
    // What the flood holds: its agent's share of the pool of bare sessions (1 000 of 10 000
    // by default), nothing more.
    let m = serve_common::operator_metrics(&operator.unwrap(), "flood-metrics-token");
    assert_eq!(m["warden_hello_sessions"], 1_000, "{m:?}");
    assert_eq!(m["warden_sessions"], 1_000, "{m:?}");
    assert_eq!(m["warden_hello_sessions_dropped_total"], 99_000, "{m:?}");
    let sid = ids::counter(61, 0);
    let r = over_stdio(
        &mut child,
        &req(200_001, "handshake/hello", "a", &sid, hello()),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    let r = over_stdio(
        &mut child,
        &req(200_002, "steps/sessionStart", "a", &sid, json!({})),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let records = warden::server::store::read_dir(&dir.join("state")).unwrap();
    assert_eq!(
        records.len(),
        2,
        "the client's handshake and step, nothing of the flood"
    );
    assert!(records.iter().all(|r| r.session() == Some(sid.as_str())));
}

#[test]
fn bare_hellos_are_held_in_a_pool_that_drops_the_oldest() {
    let caps = Caps {
        max_hello_sessions: 100,
        hello_timeout_ms: Some(60_000),
        ..Caps::default()
    };
    let g = guardian(caps, Some(Arc::new(MemoryJournal::default())));
    for i in 0..1_000 {
        let r = send(
            &g,
            &req(i + 1, "handshake/hello", "a", &ids::counter(62, i), hello()),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    assert_eq!(g.hello_counts(), (100, 900));
    assert_eq!(g.session_count(), 100);
    // The newest are held: one takes its first step and leaves the pool.
    let sid = ids::counter(62, 999);
    let r = send(&g, &req(2_000, "steps/sessionStart", "a", &sid, json!({})));
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    assert_eq!(g.hello_counts().0, 99);
    // The oldest was dropped: it must say hello again.
    let r = send(
        &g,
        &req(
            2_001,
            "steps/sessionStart",
            "a",
            &ids::counter(62, 0),
            json!({}),
        ),
    );
    assert_eq!(error_code(&r), Some(-32003), "{r}");
}

#[test]
fn a_flood_under_one_agent_id_drops_only_that_agents_hellos() {
    let caps = Caps {
        max_hello_sessions: 100,
        max_hellos_per_agent: 10,
        hello_timeout_ms: Some(60_000),
        ..Caps::default()
    };
    let g = guardian(caps, Some(Arc::new(MemoryJournal::default())));
    // Two clients say hello; then another agent id sends 1 000 hellos that never step.
    let honest: Vec<String> = (0..2).map(|i| ids::counter(63, i)).collect();
    for (i, sid) in honest.iter().enumerate() {
        let r = send(
            &g,
            &req(i as u64 + 1, "handshake/hello", "platform", sid, hello()),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    for i in 0..1_000 {
        let sid = ids::counter(64, i);
        let r = send(&g, &req(i + 10, "handshake/hello", "flood", &sid, hello()));
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    // The flood holds its share (10), the pool is far from full, and both clients' sessions
    // are still there: their first steps go through.
    assert_eq!(g.hello_counts(), (12, 990));
    for (i, sid) in honest.iter().enumerate() {
        let r = send(
            &g,
            &req(
                5_000 + i as u64,
                "steps/sessionStart",
                "platform",
                sid,
                json!({}),
            ),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    // Without --key-file the agent id is the client's word: a flood under the honest
    // clients' own id competes with them for that id's share (documented in docs/serve.md).
    let late = ids::counter(63, 9);
    send(
        &g,
        &req(6_000, "handshake/hello", "platform", &late, hello()),
    );
    for i in 0..10 {
        let sid = ids::counter(65, i);
        send(
            &g,
            &req(7_000 + i, "handshake/hello", "platform", &sid, hello()),
        );
    }
    let r = send(
        &g,
        &req(8_000, "steps/sessionStart", "platform", &late, json!({})),
    );
    assert_eq!(error_code(&r), Some(-32003), "{r}");
}

#[test]
fn with_a_key_file_unsigned_hellos_are_refused_and_hold_nothing() {
    let dir = serve_common::tmp("hello-flood-key");
    std::fs::write(dir.join("key"), "k3y-for-the-flood").unwrap();
    let key = dir.join("key");
    let mut child = stdio_serve(&dir, &["--key-file", key.to_str().unwrap()]);
    let answers = flood(&mut child, "a", 1_000);
    assert!(
        answers.iter().all(|r| r["error"]["code"] == -32004),
        "{:?}",
        answers[0]
    );
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert!(warden::server::store::read_dir(&dir.join("state"))
        .unwrap()
        .is_empty());
}

/// Waits (at most a minute) until the server has said `needle`; the lines it said so far.
fn wait_said(server: &Server, needle: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.said(needle).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "never said {needle:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    server.stderr.lock().unwrap().clone()
}

#[test]
fn a_restart_listens_first_and_compacts_expired_ended_sessions_in_the_background() {
    // 300 sessions end under a one-minute tombstone (nothing is compacted), then the server
    // restarts with a skew window of 1 ms: every tombstone has expired.
    const N: u64 = 300;
    let (server, state) = stateful_server("restart-compact", &["--skew-window-ms", "60000"]);
    let mut c = Conn::open(&server.addr).unwrap();
    for s in 0..N {
        let sid = ids::counter(63, s);
        let r = post(
            &mut c,
            &req(3 * s + 1, "handshake/hello", "a", &sid, hello()),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
        let r = post(
            &mut c,
            &req(3 * s + 2, "steps/sessionStart", "a", &sid, json!({})),
        );
        assert_eq!(r["result"]["decision"], "allow", "{r}");
        let end = json!({"reason": "completed"});
        let r = post(&mut c, &req(3 * s + 3, "steps/sessionEnd", "a", &sid, end));
        assert_eq!(r["result"]["decision"], "allow", "{r}");
    }
    server.kill9();
    let policy = state.parent().unwrap().join("p.ward");
    let server = Server::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--skew-window-ms",
        "1",
    ]);
    // The listener was announced before the journal was read.
    let said = wait_said(&server, "restored");
    let at = |needle: &str| said.iter().position(|l| l.contains(needle)).unwrap();
    assert!(at("listening on") < at("restored"), "{said:?}");
    // The housekeeping thread compacts them all, in batches, while the server serves.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let compacted = || -> u64 {
        server
            .stderr
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("warden: compacted the records of "))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    };
    while compacted() < N {
        assert!(
            std::time::Instant::now() < deadline,
            "compacted {}",
            compacted()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.kill9();
    let records = warden::server::store::read_dir(&state).unwrap();
    assert_eq!(records.len() as u64, N, "one sealed record per session");
    assert!(records.iter().all(|r| matches!(r, Record::Sealed { .. })));
}
