//! The operator endpoint of a running `warden serve` (`--operator-listen`,
//! `--operator-token-file`; docs/serve.md): approving an ask and resolving an ambiguous
//! effect without stopping the server, over the HTTP and the stdio transports; the bearer
//! token; the error statuses; the body timeout and connection cap (docs/serve.md, "HTTP
//! limits"); that the agent-facing listener does not serve these paths; and
//! that the CLI's operator commands, refused by the lock on a running server's state folder,
//! point at the endpoint.

mod serve_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use serde_json::{json, Value};
use serve_common::{announced, tmp, WAIT};
use warden::acs::{envelope, ids, time};

const TOKEN: &str = "op-7f3a9c2e-b41d-4e8a-9d55-0c6f1e2a3b4c";

const POLICY: &str = r#"use std.effects
effect charge for charge_card = key(args.payment_id, args.amount)
rule big on toolCallRequest when tool.name == "refund" and args.amount > 1000
  => ask "refund.large" approver human "finance"
default allow
"#;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

/// A `warden serve` with an operator endpoint, over HTTP (`--listen 127.0.0.1:0`) or stdio.
struct Warden {
    child: Child,
    /// The ACS listener, for the HTTP transport.
    acs: Option<String>,
    operator: String,
    stdin: Option<ChildStdin>,
    stdout: Option<mpsc::Receiver<Value>>,
}

impl Warden {
    fn start(http: bool, dir: &Path, extra: &[&str]) -> Warden {
        std::fs::write(dir.join("p.ward"), POLICY).unwrap();
        std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
        let mut cmd = Command::new(bin());
        cmd.arg("serve");
        if http {
            cmd.args(["--listen", "127.0.0.1:0"]).stdin(Stdio::null());
        } else {
            cmd.arg("--stdio").stdin(Stdio::piped());
        }
        let mut child = cmd
            .args(["--no-handshake", "--operator-listen", "127.0.0.1:0"])
            .arg("--operator-token-file")
            .arg(dir.join("token"))
            .arg("--policy")
            .arg(dir.join("p.ward"))
            .args(extra)
            .stdout(if http { Stdio::null() } else { Stdio::piped() })
            .stderr(Stdio::piped())
            .spawn()
            .expect("start warden serve");
        let (acs, operator) = announced(child.stderr.take().unwrap(), http, true);
        let stdout = child.stdout.take().map(|out| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { return };
                    let _ = tx.send(serde_json::from_str(&line).unwrap());
                }
            });
            rx
        });
        Warden {
            stdin: child.stdin.take(),
            child,
            acs,
            operator: operator.unwrap(),
            stdout,
        }
    }

    /// One ACS request, over whichever transport the server runs.
    fn acs(&mut self, envelope: &Value) -> Value {
        let body = serde_json::to_vec(envelope).unwrap();
        match (&self.acs, &mut self.stdin) {
            (Some(addr), _) => {
                let (status, r) = http(addr, "POST", "/acs", None, Some(&body));
                assert_eq!(status, 200, "{r}");
                r
            }
            (None, Some(stdin)) => {
                stdin.write_all(&body).unwrap();
                stdin.write_all(b"\n").unwrap();
                stdin.flush().unwrap();
                let rx = self.stdout.as_ref().unwrap();
                rx.recv_timeout(WAIT).expect("a response in time")
            }
            (None, None) => unreachable!(),
        }
    }

    /// An authorized operator request.
    fn op(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| serde_json::to_vec(&b).unwrap());
        http(&self.operator, method, path, Some(TOKEN), body.as_deref())
    }
}

impl Drop for Warden {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on its own connection: the status and the JSON body (null if none).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> (u16, Value) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body = body.unwrap_or(b"");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    raw(addr, head.as_bytes(), body)
}

fn raw(addr: &str, head: &[u8], body: &[u8]) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(head).unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let (status, body) = warden::adapters::core_agent::parse_http_response(&out).unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

static REQ: AtomicU64 = AtomicU64::new(1);

fn request_id() -> String {
    ids::counter(0x0e7a_0000, REQ.fetch_add(1, Ordering::SeqCst))
}

/// An envelope with a fresh request id and a wall-clock timestamp (serve checks the skew).
fn envelope(sid: &str, method: &str, payload: Value) -> (String, Value) {
    let rid = request_id();
    let n = REQ.load(Ordering::SeqCst);
    let v = envelope::request(
        n,
        method,
        &rid,
        &time::now_rfc3339_ms(),
        json!({"agent_id": "agent", "session_id": sid, "turn_id": "t1"}),
        payload,
    );
    (rid, v)
}

fn call(tool: &str, args: Value) -> Value {
    let arguments: serde_json::Map<String, Value> = args
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), json!({"value": v})))
        .collect();
    json!({"tool": {"name": tool}, "arguments": arguments})
}

/// `"decision code,code"`.
fn summary(r: &Value) -> String {
    let res = r.get("result").unwrap_or_else(|| panic!("{r}"));
    let codes: Vec<&str> = res["reason_codes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!("{} {}", res["decision"].as_str().unwrap(), codes.join(","))
        .trim()
        .to_string()
}

fn refund(amount: u32) -> Value {
    call("refund", json!({"payment_id": "p1", "amount": amount}))
}

fn charge() -> Value {
    call("charge_card", json!({"payment_id": "p1", "amount": 500}))
}

const CHARGE_KEY: &str = r#"["charge",["p1",500]]"#;

/// A call, then its result with `exit_status: timeout`: the effect is ambiguous and locked.
fn make_ambiguous(w: &mut Warden, sid: &str) {
    let (rid, e) = envelope(sid, "steps/toolCallRequest", charge());
    assert_eq!(summary(&w.acs(&e)), "allow");
    let (_, e) = envelope(
        sid,
        "steps/toolCallResult",
        json!({"tool": {"name": "charge_card"}, "request_id_ref": rid,
               "exit_status": "timeout", "outputs": []}),
    );
    assert_eq!(summary(&w.acs(&e)), "allow");
    let (_, e) = envelope(sid, "steps/toolCallRequest", charge());
    assert_eq!(summary(&w.acs(&e)), "deny warden.ambiguous_effect");
}

/// Asks about a large refund; returns the ask's request id (the approval's handle).
fn ask(w: &mut Warden, sid: &str, amount: u32) -> String {
    let (rid, e) = envelope(sid, "steps/toolCallRequest", refund(amount));
    let r = w.acs(&e);
    assert_eq!(summary(&r), "ask refund.large");
    assert_eq!(r["result"]["policy_data"]["approval"]["request_id"], rid);
    rid
}

#[test]
fn an_operator_approves_and_resolves_on_a_running_http_server() {
    let dir = tmp("operator-http");
    let state = dir.join("state");
    let mut w = Warden::start(true, &dir, &["--state", state.to_str().unwrap()]);
    let sid = ids::counter(0x0e7a_5e55, 1);

    // The ask, as the operator sees it.
    let (ask_id, e) = envelope(&sid, "steps/toolCallRequest", refund(2000));
    let asked = w.acs(&e);
    assert_eq!(summary(&asked), "ask refund.large");
    let action_hash = asked["result"]["policy_data"]["approval"]["action_hash"].clone();
    let (st, list) = w.op("GET", "/approvals", None);
    assert_eq!(st, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let item = &list[0];
    assert_eq!(item["session"], sid.as_str());
    assert_eq!(item["request_id"], ask_id.as_str());
    assert_eq!(item["status"], "pending");
    assert_eq!(item["approver"], json!({"type": "human", "id": "finance"}));
    assert_eq!(item["action_hash"], action_hash);
    assert_eq!(
        item["action"]["arguments"],
        json!({"payment_id": "p1", "amount": 2000})
    );
    assert!(item["question"].is_string());

    // Refusals: the wrong approver, an unknown ask, bad bodies.
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id, "approver": "mallory"})),
    );
    assert_eq!(st, 403, "{r}");
    assert!(r["error"].as_str().unwrap().contains("mallory"), "{r}");
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": request_id(), "approver": "finance"})),
    );
    assert_eq!(st, 404, "{r}");
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id})),
    );
    assert_eq!(st, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`approver`"), "{r}");
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": 7, "approver": "finance"})),
    );
    assert_eq!(st, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`request_id`"), "{r}");
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id, "approver": "finance", "as": "x"})),
    );
    assert_eq!(st, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`as`"), "{r}");
    for bad in [&b"{not json"[..], b"[1]", br#"{"a":1,"a":2}"#] {
        let (st, r) = http(
            &w.operator,
            "POST",
            "/approvals/approve",
            Some(TOKEN),
            Some(bad),
        );
        assert_eq!(st, 400, "{}: {r}", String::from_utf8_lossy(bad));
        assert!(r["error"].is_string(), "{r}");
    }
    let head = format!(
        "POST /approvals/approve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        2 << 20
    );
    let (st, r) = raw(&w.operator, head.as_bytes(), b"");
    assert_eq!(st, 413, "{r}");

    // The grant.
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id, "approver": "finance"})),
    );
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["session"], sid.as_str());
    assert_eq!(r["request_id"], ask_id.as_str());
    assert_eq!(r["action_hash"], action_hash);
    assert!(r["expires_seconds"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["intent"], "unchanged");
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id, "approver": "finance"})),
    );
    assert_eq!(st, 409, "{r}");
    let (_, list) = w.op("GET", "/approvals", None);
    assert_eq!(list[0]["status"], "granted", "{list}");

    // Another amount is not what was approved; the approved call goes ahead, once.
    let (_, e) = envelope(&sid, "steps/toolCallRequest", refund(5000));
    assert_eq!(summary(&w.acs(&e)), "deny warden.approval_mismatch");
    let (_, e) = envelope(&sid, "steps/toolCallRequest", refund(2000));
    let r = w.acs(&e);
    assert_eq!(summary(&r), "allow warden.approved,refund.large");
    assert_eq!(r["result"]["policy_data"]["approval"]["consumed"], ask_id);
    let (_, e) = envelope(&sid, "steps/toolCallRequest", refund(2000));
    assert_eq!(summary(&w.acs(&e)), "ask refund.large");

    // An ambiguous effect, resolved through the endpoint: the lock lifts.
    make_ambiguous(&mut w, &sid);
    let (st, effects) = w.op("GET", "/effects", None);
    assert_eq!(st, 200, "{effects}");
    assert_eq!(
        effects,
        json!([{"session": sid, "key": CHARGE_KEY, "state": "ambiguous"}])
    );
    let resolve = |session: &str, key: &str, outcome: &str| {
        w.op(
            "POST",
            "/effects/resolve",
            Some(json!({"session": session, "key": key, "outcome": outcome})),
        )
    };
    let (st, r) = resolve(&sid, CHARGE_KEY, "maybe");
    assert_eq!(st, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`outcome`"), "{r}");
    let (st, r) = resolve(&ids::counter(0x0e7a_5e55, 99), CHARGE_KEY, "failed");
    assert_eq!(st, 404, "{r}");
    let (st, r) = resolve(&sid, r#"["charge",["p2",1]]"#, "failed");
    assert_eq!(st, 404, "{r}");
    let (st, r) = w.op(
        "POST",
        "/effects/resolve",
        Some(json!({"session": sid, "outcome": "failed"})),
    );
    assert_eq!(st, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`key`"), "{r}");
    let (st, r) = resolve(&sid, CHARGE_KEY, "failed");
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r,
        json!({"session": sid, "key": CHARGE_KEY, "from": "ambiguous", "to": "failed"})
    );
    let (_, e) = envelope(&sid, "steps/toolCallRequest", charge());
    assert_eq!(summary(&w.acs(&e)), "allow");
    let (_, effects) = w.op("GET", "/effects", None);
    assert_eq!(effects[0]["state"], "reserved", "{effects}");

    // Unknown paths and wrong methods.
    let (st, _) = w.op("GET", "/sessions", None);
    assert_eq!(st, 404);
    let (st, _) = w.op("POST", "/effects", Some(json!({})));
    assert_eq!(st, 405);
    let (st, _) = w.op("GET", "/approvals/approve", None);
    assert_eq!(st, 405);

    // While the server holds the folder, the CLI says where to go instead.
    let out = Command::new(bin())
        .args(["approvals", "--state"])
        .arg(&state)
        .arg("--policy")
        .arg(dir.join("p.ward"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("already open"), "{err}");
    assert!(err.contains("operator endpoint"), "{err}");
    assert!(err.contains("--operator-listen"), "{err}");

    // The endpoint's list is the CLI's `--format json`, read from the journal after a stop.
    let (_, before) = w.op("GET", "/approvals", None);
    assert_eq!(before.as_array().unwrap().len(), 1, "{before}");
    drop(w);
    let out = Command::new(bin())
        .args(["approvals", "--format", "json", "--state"])
        .arg(&state)
        .arg("--policy")
        .arg(dir.join("p.ward"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli, before);
    // The resolution was journalled: it survived the stop.
    let out = Command::new(bin())
        .args(["effects", "list", "--state"])
        .arg(&state)
        .arg("--policy")
        .arg(dir.join("p.ward"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{sid}\t{CHARGE_KEY}\treserved\n")
    );
    // Both operator actions are in the session's audit chain, which still verifies.
    let records = warden::server::store::read_dir(&state).unwrap();
    let chains = warden::guardian::journal::chains(&records);
    let entries = &chains[0].1;
    warden::acs::crypto::verify_chain(entries).unwrap();
    let granted = entries
        .iter()
        .find(|e| e["step_type"] == "warden/approval_granted")
        .expect("the grant is audited");
    assert_eq!(granted["ask_step_id"], ask_id.as_str());
    assert_eq!(
        granted["approver"],
        json!({"type": "human", "id": "finance"})
    );
    let resolved = entries
        .iter()
        .find(|e| e["step_type"] == "warden/effect_resolved")
        .expect("the resolution is audited");
    assert_eq!(resolved["effect_key"], CHARGE_KEY);
    assert_eq!(
        (&resolved["from"], &resolved["to"]),
        (&json!("ambiguous"), &json!("failed"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn only_the_token_opens_the_endpoint_and_only_on_its_own_listener() {
    let dir = tmp("operator-auth");
    let mut w = Warden::start(true, &dir, &[]);
    let sid = ids::counter(0x0e7a_5e55, 2);
    let ask_id = ask(&mut w, &sid, 3000);
    let grant = serde_json::to_vec(&json!({"request_id": ask_id, "approver": "finance"})).unwrap();
    for token in [
        None,
        Some("wrong"),
        Some(&TOKEN[..TOKEN.len() - 1]),
        Some(""),
    ] {
        for (method, path, body) in [
            ("GET", "/effects", None),
            ("GET", "/approvals", None),
            ("POST", "/approvals/approve", Some(&grant[..])),
            ("GET", "/nothing-here", None),
        ] {
            let (st, r) = http(&w.operator, method, path, token, body);
            assert_eq!(st, 401, "{method} {path} with {token:?}: {r}");
            assert!(r["error"].is_string(), "{r}");
        }
    }
    for scheme in ["Basic", "Token", ""] {
        let head = format!(
            "GET /approvals HTTP/1.1\r\nHost: x\r\nAuthorization: {scheme} {TOKEN}\r\nConnection: close\r\n\r\n"
        );
        let (st, _) = raw(&w.operator, head.as_bytes(), b"");
        assert_eq!(st, 401, "{scheme}");
    }
    // The scheme's case does not matter.
    let head = format!(
        "GET /approvals HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(raw(&w.operator, head.as_bytes(), b"").0, 200);

    // The agent-facing listener has no operator paths, token or not.
    let acs = w.acs.clone().unwrap();
    for (method, path, body) in [
        ("GET", "/effects", None),
        ("GET", "/approvals", None),
        ("POST", "/approvals/approve", Some(&grant[..])),
        ("POST", "/effects/resolve", Some(&b"{}"[..])),
    ] {
        let (st, _) = http(&acs, method, path, Some(TOKEN), body);
        assert_eq!(st, 404, "{method} {path} on the ACS listener");
    }
    // Nothing was granted along the way.
    let (st, list) = w.op("GET", "/approvals", None);
    assert_eq!(st, 200);
    assert_eq!(list[0]["status"], "pending", "{list}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_operator_endpoint_runs_beside_stdio() {
    let dir = tmp("operator-stdio");
    let mut w = Warden::start(false, &dir, &[]);
    let sid = ids::counter(0x0e7a_5e55, 3);
    let ask_id = ask(&mut w, &sid, 2000);
    let (st, r) = w.op(
        "POST",
        "/approvals/approve",
        Some(json!({"request_id": ask_id, "approver": "finance"})),
    );
    assert_eq!(st, 200, "{r}");
    let (_, e) = envelope(&sid, "steps/toolCallRequest", refund(2000));
    assert_eq!(summary(&w.acs(&e)), "allow warden.approved,refund.large");

    make_ambiguous(&mut w, &sid);
    let (st, r) = w.op(
        "POST",
        "/effects/resolve",
        Some(json!({"session": sid, "key": CHARGE_KEY, "outcome": "committed"})),
    );
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["from"], "ambiguous");
    assert_eq!(r["to"], "committed");
    // Committed: the lock is lifted, and a repeat is now a duplicate.
    let (_, e) = envelope(&sid, "steps/toolCallRequest", charge());
    assert_eq!(summary(&w.acs(&e)), "deny warden.duplicate_effect");

    // End of input still ends the server, operator thread and all.
    drop(w.stdin.take());
    let status = w.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_operator_flags_go_together_and_need_a_usable_token() {
    let dir = tmp("operator-flags");
    std::fs::write(dir.join("empty"), " \n").unwrap();
    std::fs::write(dir.join("good"), "t0ken\n").unwrap();
    let empty = dir.join("empty");
    let good = dir.join("good");
    let missing = dir.join("missing");
    let serve = |args: &[&str]| {
        let out = Command::new(bin())
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = serve(&["--operator-listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--operator-token-file"), "{err}");
    let (code, err) = serve(&["--operator-token-file", good.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--operator-listen"), "{err}");
    let (code, err) = serve(&[
        "--operator-listen",
        "127.0.0.1:0",
        "--operator-token-file",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("empty"), "{err}");
    let (code, err) = serve(&[
        "--operator-listen",
        "127.0.0.1:0",
        "--operator-token-file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("missing"), "{err}");
    // Not the agent-facing listener's address.
    let (code, err) = serve(&[
        "--listen",
        "127.0.0.1:47391",
        "--operator-listen",
        "127.0.0.1:47391",
        "--operator-token-file",
        good.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("listener of its own"), "{err}");
    // Both, with a good token: it serves (stdio, ends at end of input).
    let (code, err) = serve(&[
        "--operator-listen",
        "127.0.0.1:0",
        "--operator-token-file",
        good.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warden: operator endpoint on http://127.0.0.1:"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stalled_operator_body_gets_408_and_the_endpoint_is_capped() {
    let dir = tmp("operator-limits");
    let w = Warden::start(true, &dir, &["--body-timeout-ms", "300"]);
    let head = format!(
        "POST /approvals/approve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n"
    );
    let (st, r) = raw(&w.operator, head.as_bytes(), b"{\"request_id\":");
    assert_eq!(st, 408, "{r}");
    assert_eq!(r["reason"], "body_timeout", "{r}");
    assert!(r["error"].as_str().unwrap().contains("300 ms"), "{r}");
    // The endpoint serves 16 connections at once; the 17th is answered 503, not left waiting.
    let idle: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(&w.operator).unwrap())
        .collect();
    let (st, r) = http(&w.operator, "GET", "/approvals", Some(TOKEN), None);
    assert_eq!(st, 503, "{r}");
    assert_eq!(r["reason"], "too_many_connections", "{r}");
    drop(idle);
    let _ = std::fs::remove_dir_all(&dir);
}
