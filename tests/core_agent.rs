//! `warden hook --dialect=core-agent` run the way core-agent runs it: each hook a
//! `/bin/sh -c COMMAND` with the envelope on stdin, in the agent's working folder, several at
//! once; the Guardian down, then up, then restarted without its state.

mod serve_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_common::{free_port, tmp, Server, WAIT};

const BIN: &str = env!("CARGO_BIN_EXE_warden");

const POLICY: &str = r#"rule no_rm on toolCallRequest
  when tool.name == "rm"
  => deny "destructive": "rm is not allowed here"

default allow
"#;

const TOOL_START: &str = r#"{"hook_event_name":"tool-start","tool_name":"read_file","tool_input":{"path":"/etc/hosts"}}"#;
const RM: &str = r#"{"hook_event_name":"tool-start","tool_name":"rm","tool_input":{"path":"/"}}"#;
const AGENT_END: &str = r#"{"hook_event_name":"agent-end"}"#;

/// Quotes a word for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command line an operator puts in `.agents/config.json`.
fn command(args: &[&str]) -> String {
    let mut c = format!("{} hook --dialect=core-agent", sh_quote(BIN));
    for a in args {
        c.push(' ');
        c.push_str(&sh_quote(a));
    }
    c
}

/// Starts `sh -c COMMAND` in `dir` (the agent's working folder) with `envelope` on stdin.
fn spawn_hook(dir: &Path, cmd: &str, envelope: &str) -> Child {
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(envelope.as_bytes())
        .unwrap();
    child
}

/// Waits for a hook, at most `WAIT`.
fn finish(mut child: Child) -> Output {
    let deadline = Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "a hook ran over {WAIT:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

fn hook(dir: &Path, cmd: &str, envelope: &str) -> Output {
    finish(spawn_hook(dir, cmd, envelope))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn responses(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn session_file(dir: &Path) -> PathBuf {
    dir.join(".warden/core-agent-session.json")
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// The decision log's entries.
fn decisions(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join(".warden/decisions.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `warden serve --listen 127.0.0.1:PORT` (a fixed port, so it can be down and then up at the
/// same URL).
fn serve_at(port: u16, args: &[&str]) -> Server {
    Server::start_at(&format!("127.0.0.1:{port}"), args)
}

/// The methods the decision log shows for one session, in order.
fn methods_of(dir: &Path, session: &Value) -> Vec<String> {
    let log: Vec<Value> = decisions(dir)
        .into_iter()
        .filter(|e| e["session"] == *session)
        .collect();
    methods(&log)
}

fn methods(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter_map(|e| e["method"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_guardian_down_then_up_then_restarted_without_state() {
    let dir = tmp("ca-down-up");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let cmd = command(&["--url", &url]);

    // Down: the hook fails loudly and marks nothing as started.
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("could not be reached"), "{err}");
    assert!(err.contains("not decided or audited"), "{err}");
    assert!(err.contains("no session was started"), "{err}");
    assert!(!session_file(&dir).exists(), "nothing is marked as started");
    let log = decisions(&dir);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["decision"], "error");

    // Up: the next hook handshakes and is decided; the one after goes on in that session.
    let policy = dir.join("p.ward");
    let srv = serve_at(port, &["--policy", policy.to_str().unwrap()]);
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rs = responses(&o);
    assert_eq!(
        rs.len(),
        4,
        "hello, sessionStart, turnStart, toolCallRequest: {rs:?}"
    );
    assert!(rs.iter().all(|r| r.get("result").is_some()), "{rs:?}");
    let s = read_json(&session_file(&dir));
    assert_eq!(
        (s["handshaken"].as_bool(), s["started"].as_bool()),
        (Some(true), Some(true))
    );
    let sid = s["session_id"].clone();
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(responses(&o).len(), 1);
    assert_eq!(responses(&o)[0]["result"]["decision"], "allow");

    // Restarted without state: the session is unknown there (-32003 handshake_required); the
    // hook handshakes again, starts the session again and is decided.
    srv.kill9();
    let _srv = serve_at(port, &["--policy", policy.to_str().unwrap()]);
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rs = responses(&o);
    assert_eq!(rs[0]["error"]["code"], -32003, "{rs:?}");
    assert_eq!(rs[0]["error"]["data"]["reason"], "handshake_required");
    assert_eq!(
        rs.len(),
        5,
        "refused, hello, sessionStart, turnStart, toolCallRequest: {rs:?}"
    );
    assert!(
        rs[1..].iter().all(|r| r["result"]["decision"] == "allow"),
        "{rs:?}"
    );
    let s = read_json(&session_file(&dir));
    assert_eq!(s["session_id"], sid, "the same session, negotiated again");
    assert_eq!(s["events"], 3);
}

#[test]
fn concurrent_sh_c_hooks_lose_no_update() {
    const N: usize = 60;
    let dir = tmp("ca-concurrent");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let srv = Server::start(&["--policy", dir.join("p.ward").to_str().unwrap()]);
    let cmd = command(&["--url", &format!("http://{}", srv.addr)]);
    let children: Vec<Child> = (0..N).map(|_| spawn_hook(&dir, &cmd, TOOL_START)).collect();
    for o in children.into_iter().map(finish) {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let s = read_json(&session_file(&dir));
    assert_eq!(s["events"], N as u64, "{s}");
    // hello, sessionStart, turnStart, then one request per hook: no number reused.
    assert_eq!(s["seq"], N as u64 + 3, "{s}");
    let log = decisions(&dir);
    let m = methods(&log);
    assert_eq!(
        m.iter().filter(|m| *m == "steps/sessionStart").count(),
        1,
        "{m:?}"
    );
    assert_eq!(
        m.iter().filter(|m| *m == "steps/turnStart").count(),
        1,
        "{m:?}"
    );
    let calls: Vec<&Value> = log
        .iter()
        .filter(|e| e["method"] == "steps/toolCallRequest")
        .collect();
    assert_eq!(calls.len(), N, "the Guardian decided every event");
    assert!(calls
        .iter()
        .all(|e| e["decision"] == "allow" && e["session"] == s["session_id"]));
    let mut ids: Vec<&str> = calls
        .iter()
        .filter_map(|e| e["request_id"].as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), N, "request ids never collide");
    let leftovers: Vec<_> = std::fs::read_dir(dir.join(".warden"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn concurrent_hooks_with_a_state_folder_take_turns() {
    const N: usize = 12;
    let dir = tmp("ca-state");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let cmd = command(&["--state", "st", "--policy", "p.ward"]);
    let children: Vec<Child> = (0..N).map(|_| spawn_hook(&dir, &cmd, TOOL_START)).collect();
    for o in children.into_iter().map(finish) {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let s = read_json(&session_file(&dir));
    assert_eq!(s["events"], N as u64, "{s}");
    // The journal holds every step: the audit chain verifies.
    let o = Command::new(BIN)
        .args(["audit", "verify"])
        .arg(dir.join("st"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_deny_is_seen_on_stderr_in_the_log_and_by_the_notify_command() {
    let dir = tmp("ca-deny");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let srv = Server::start(&["--policy", dir.join("p.ward").to_str().unwrap()]);
    let url = format!("http://{}", srv.addr);
    let notified = dir.join("notified.jsonl");
    let notify = format!(
        "cat >> {} && echo >> {}",
        sh_quote(notified.to_str().unwrap()),
        sh_quote(notified.to_str().unwrap())
    );
    let cmd = command(&["--url", &url, "--notify", &notify]);
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), "", "an allow says nothing");
    assert!(!notified.exists(), "an allow notifies nobody");

    let o = hook(&dir, &cmd, RM);
    assert_eq!(
        o.status.code(),
        Some(0),
        "core-agent cannot stop the call: exit 0 by default"
    );
    assert_eq!(responses(&o)[0]["result"]["decision"], "deny");
    let err = stderr(&o);
    assert!(
        err.contains("warden: DENIED tool rm: rm is not allowed here (destructive)"),
        "{err}"
    );
    let log = decisions(&dir);
    let deny = log.last().unwrap();
    assert_eq!(deny["decision"], "deny", "{deny}");
    assert_eq!(deny["tool"], "rm");
    assert_eq!(deny["hook"], "tool-start");
    assert_eq!(deny["reason_codes"][0], "destructive");
    assert!(
        deny["time"].is_string() && deny["session"].is_string(),
        "{deny}"
    );
    let sent: Value =
        serde_json::from_str(std::fs::read_to_string(&notified).unwrap().trim()).unwrap();
    assert_eq!(&sent, deny, "the notify command gets the log entry");

    // --deny-exit makes core-agent log it; a failing or hanging notify is reported, not fatal.
    let cmd = command(&["--url", &url, "--deny-exit", "3", "--notify", "exit 7"]);
    let o = hook(&dir, &cmd, RM);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("the --notify command failed: it exited with"),
        "{}",
        stderr(&o)
    );
    let cmd = command(&[
        "--url",
        &url,
        "--notify",
        "sleep 30",
        "--notify-timeout",
        "1",
    ]);
    let started = Instant::now();
    let o = hook(&dir, &cmd, RM);
    assert_eq!(o.status.code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(stderr(&o).contains("was killed"), "{}", stderr(&o));

    // --decision-log moves the log.
    let elsewhere = dir.join("audit/d.jsonl");
    let cmd = command(&["--url", &url, "--decision-log", elsewhere.to_str().unwrap()]);
    hook(&dir, &cmd, RM);
    let moved = std::fs::read_to_string(&elsewhere).unwrap();
    assert!(moved.contains("\"deny\""), "{moved}");
}

#[test]
fn agent_end_in_session_mode_ends_the_acs_session_and_the_next_hook_starts_another() {
    let dir = tmp("ca-end");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let srv = Server::start(&["--policy", dir.join("p.ward").to_str().unwrap()]);
    let cmd = command(&[
        "--url",
        &format!("http://{}", srv.addr),
        "--agent-end=session",
    ]);
    let o = hook(&dir, &cmd, r#"{"hook_event_name":"model-start"}"#);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    hook(&dir, &cmd, TOOL_START);
    let first = read_json(&session_file(&dir))["session_id"].clone();
    let o = hook(&dir, &cmd, AGENT_END);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(responses(&o).len(), 2, "turnEnd, sessionEnd");
    assert!(!session_file(&dir).exists(), "the session is over");
    let ended = methods_of(&dir, &first);
    assert_eq!(
        ended.last().map(String::as_str),
        Some("steps/sessionEnd"),
        "{ended:?}"
    );
    // A second agent-end has nothing to close.
    let o = hook(&dir, &cmd, AGENT_END);
    assert_eq!(o.status.code(), Some(0));
    assert!(responses(&o).is_empty());

    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(responses(&o).len(), 4, "a new handshake and sessionStart");
    let second = read_json(&session_file(&dir))["session_id"].clone();
    assert_ne!(first, second);
    // The ended session is sealed at the Guardian.
    let log = decisions(&dir);
    assert!(log.iter().all(|e| e["decision"] != "error"), "{log:?}");
}

#[test]
fn by_default_agent_end_closes_the_turn_and_an_idle_gap_starts_a_new_session() {
    let dir = tmp("ca-gap");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let srv = Server::start(&["--policy", dir.join("p.ward").to_str().unwrap()]);
    let cmd = command(&["--url", &format!("http://{}", srv.addr)]);
    hook(&dir, &cmd, TOOL_START);
    let first = read_json(&session_file(&dir))["session_id"].clone();
    let o = hook(&dir, &cmd, AGENT_END);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(responses(&o).len(), 1, "turnEnd only");
    assert_eq!(
        read_json(&session_file(&dir))["session_id"],
        first,
        "the session (and its taint) goes on across turns"
    );
    // The last hook was an hour ago: that was an earlier run of core-agent.
    let mut s = read_json(&session_file(&dir));
    s["last_at_ms"] = serde_json::json!(s["last_at_ms"].as_i64().unwrap() - 3_600_000);
    std::fs::write(session_file(&dir), s.to_string()).unwrap();
    let o = hook(&dir, &cmd, TOOL_START);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let second = read_json(&session_file(&dir))["session_id"].clone();
    assert_ne!(second, first, "a new ACS session for the new run");
    let ended = methods_of(&dir, &first);
    assert_eq!(
        ended.last().map(String::as_str),
        Some("steps/sessionEnd"),
        "the idle session was ended: {ended:?}"
    );
}
