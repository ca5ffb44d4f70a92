//! `warden serve` end to end: a whole session over stdio and over HTTP (handshake, hooks,
//! ping, a replay, a stale timestamp, a forged signature, sessionEnd), every response checked
//! against the ACS response schema; the upstream signature vectors through the server; the
//! audit chain verified by `warden audit verify`; the core-agent hook dialect.

mod common;
mod serve_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::schema::{acs_dir, assert_valid_response, read_json};
use serde_json::{json, Value};
use warden::acs::{crypto, envelope, ids, time};

const WAIT: Duration = Duration::from_secs(30);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

fn tmp(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "warden-serve-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

static REQ: AtomicU64 = AtomicU64::new(1);

fn envelope(method: &str, sid: &str, payload: Value, turn: Option<&str>) -> Value {
    let n = REQ.fetch_add(1, Ordering::SeqCst);
    let mut metadata = json!({"agent_id": "agent", "session_id": sid});
    if let Some(t) = turn {
        metadata["turn_id"] = json!(t);
    }
    envelope::request(
        n,
        method,
        &ids::counter(0, n + 0x1000_0000),
        &time::now_rfc3339_ms(),
        metadata,
        payload,
    )
}

fn hello_payload() -> Value {
    json!({
        "acs_versions_supported": ["0.1.0"],
        "methods_implemented": ["steps/sessionStart", "steps/turnStart", "steps/userMessage",
            "steps/toolCallRequest", "steps/toolCallResult", "steps/turnEnd",
            "steps/subagentStart", "steps/subagentStop", "steps/sessionEnd", "system/ping"],
        "transports_supported": ["stdio", "http"],
        "provenance_producer": "deterministic",
        "profiles_supported": ["acs-core", "acs-audit"],
    })
}

fn sign(ikm: &[u8], mut env: Value) -> Value {
    let sid = env["params"]["metadata"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    crypto::attach_signature(&crypto::session_key(ikm, &sid), "k1", &mut env).unwrap();
    env
}

fn verify_response(ikm: &[u8], sid: &str, r: &Value) {
    crypto::verify(&crypto::session_key(ikm, sid), r)
        .unwrap_or_else(|e| panic!("response signature: {e}: {r}"));
}

const POLICY: &str = r#"
rule no_rm on toolCallRequest when tool.name == "rm" => deny "no_rm": "never delete"
default allow
"#;

/// A `warden serve --stdio` child with a reader thread for its responses (either framing).
struct Stdio_ {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<(bool, Value)>,
}

impl Stdio_ {
    fn start(args: &[&str]) -> Stdio_ {
        let mut child = Command::new(bin())
            .arg("serve")
            .arg("--stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start warden serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if let Some(n) = line.strip_prefix("Content-Length:") {
                    let n: usize = n.trim().parse().unwrap();
                    let mut blank = String::new();
                    r.read_line(&mut blank).unwrap();
                    let mut body = vec![0; n];
                    r.read_exact(&mut body).unwrap();
                    let _ = tx.send((true, serde_json::from_slice(&body).unwrap()));
                } else if !line.trim().is_empty() {
                    let _ = tx.send((false, serde_json::from_str(&line).unwrap()));
                }
            }
        });
        Stdio_ {
            stdin: child.stdin.take(),
            child,
            rx,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) -> (bool, Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
        let (framed, v) = self.rx.recv_timeout(WAIT).expect("a response in time");
        assert_valid_response(&v);
        (framed, v)
    }

    fn send(&mut self, v: &Value) -> Value {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        let (framed, r) = self.send_raw(&line);
        assert!(!framed);
        r
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "warden serve exited with {status}");
    }
}

fn code(r: &Value) -> i64 {
    r["error"]["code"].as_i64().unwrap_or(0)
}

#[test]
fn a_whole_session_over_stdio() {
    let dir = tmp("stdio");
    let ikm = b"a deployment secret of some length";
    std::fs::write(dir.join("key"), ikm).unwrap();
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let state = dir.join("state");
    let mut s = Stdio_::start(&[
        "--policy",
        dir.join("p.ward").to_str().unwrap(),
        "--key-file",
        dir.join("key").to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    let sid = ids::counter(0, 1);
    let turn = "t1";

    // Hook traffic before the handshake.
    let r = s.send(&sign(
        ikm,
        envelope("steps/sessionStart", &sid, json!({}), None),
    ));
    assert_eq!(code(&r), -32003, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "handshake_required");
    verify_response(ikm, &sid, &r);

    // The handshake.
    let r = s.send(&sign(
        ikm,
        envelope("handshake/hello", &sid, hello_payload(), None),
    ));
    let hello = &r["result"]["payload"];
    assert_eq!(hello["negotiated_version"], "0.1.0", "{r}");
    assert_eq!(hello["selected_transport"], "stdio");
    assert_eq!(hello["on_decision_failure"], "deny");
    assert_eq!(hello["skew_window_ms"], 300000);
    assert_eq!(
        hello["signature_algorithms_supported"],
        json!(["HMAC-SHA256"])
    );
    assert!(hello["timeout_config"]["default_ms"].is_u64());
    assert!(hello["methods_evaluated"]
        .as_array()
        .unwrap()
        .contains(&json!("steps/toolCallRequest")));
    assert_eq!(hello["profiles_accepted"], json!(["acs-core", "acs-audit"]));
    verify_response(ikm, &sid, &r);
    // No renegotiation.
    let r = s.send(&sign(
        ikm,
        envelope("handshake/hello", &sid, hello_payload(), None),
    ));
    assert_eq!(code(&r), -32000);

    // Hooks: each audited, chained and signed.
    let r = s.send(&sign(
        ikm,
        envelope("steps/sessionStart", &sid, json!({}), None),
    ));
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    let root = r["result"]["chain_hash"].as_str().unwrap().to_string();
    verify_response(ikm, &sid, &r);
    let r = s.send(&sign(
        ikm,
        envelope(
            "steps/turnStart",
            &sid,
            json!({"turn_id": turn, "triggered_by": "user_message"}),
            Some(turn),
        ),
    ));
    assert_ne!(r["result"]["chain_hash"].as_str().unwrap(), root);
    let call = sign(
        ikm,
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": "rm"}, "arguments": {"path": {"value": "/"}}}),
            Some(turn),
        ),
    );
    let r = s.send(&call);
    assert_eq!(r["result"]["decision"], "deny");
    assert_eq!(r["result"]["reason_codes"], json!(["no_rm"]));
    verify_response(ikm, &sid, &r);

    // The same request again: a replay.
    let r = s.send(&call);
    assert_eq!(code(&r), -32005, "{r}");
    verify_response(ikm, &sid, &r);

    // Ping: unsigned is fine, never audited, never signed.
    let ping = envelope("system/ping", &sid, json!({"echo": "hi"}), None);
    let r = s.send(&ping);
    assert_eq!(r["result"]["decision"], "allow");
    assert_eq!(r["result"]["payload"]["echo"], "hi");
    assert!(r["result"].get("chain_hash").is_none());
    assert!(r["result"].get("signature").is_none());

    // A stale timestamp.
    let mut stale = envelope(
        "steps/userMessage",
        &sid,
        json!({"content": [{"type": "text", "value": "x"}]}),
        Some(turn),
    );
    stale["params"]["timestamp"] = json!("2020-01-01T00:00:00Z");
    let r = s.send(&sign(ikm, stale));
    assert_eq!(code(&r), -32006, "{r}");
    assert_eq!(r["error"]["data"]["skew_window_ms"], 300000);

    // A forged signature (signed with another key), and a missing one.
    let forged = sign(
        b"not the key",
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": "ls"}, "arguments": {}}),
            Some(turn),
        ),
    );
    let r = s.send(&forged);
    assert_eq!(code(&r), -32004, "{r}");
    let r = s.send(&envelope(
        "steps/toolCallRequest",
        &sid,
        json!({"tool": {"name": "ls"}, "arguments": {}}),
        Some(turn),
    ));
    assert_eq!(code(&r), -32004, "{r}");
    // The forged request's id was not burnt: the genuine one goes through.
    let mut genuine = forged.clone();
    genuine["params"]
        .as_object_mut()
        .unwrap()
        .remove("signature");
    let r = s.send(&sign(ikm, genuine));
    assert_eq!(r["result"]["decision"], "allow", "{r}");

    // A method the client did not negotiate.
    let r = s.send(&sign(
        ikm,
        envelope(
            "steps/memoryStore",
            &sid,
            json!({"content": {"value": "x"}}),
            Some(turn),
        ),
    ));
    assert_eq!(code(&r), -32003, "{r}");
    assert_eq!(r["error"]["data"]["method"], "steps/memoryStore");

    // Content-Length framing is answered in kind.
    let body = serde_json::to_vec(&sign(
        ikm,
        envelope(
            "steps/turnEnd",
            &sid,
            json!({"turn_id": turn, "outcome": "completed"}),
            Some(turn),
        ),
    ))
    .unwrap();
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(&body);
    let (was_framed, r) = s.send_raw(&framed);
    assert!(was_framed);
    assert_eq!(r["result"]["decision"], "allow", "{r}");

    // An oversized envelope.
    let mut big = vec![b'x'; (1 << 20) + 10];
    big.push(b'\n');
    let (_, r) = s.send_raw(&big);
    assert_eq!(code(&r), -32600, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "envelope_too_large");

    // sessionEnd seals the chain.
    let r = s.send(&sign(
        ikm,
        envelope(
            "steps/sessionEnd",
            &sid,
            json!({"reason": "completed"}),
            None,
        ),
    ));
    assert_eq!(r["result"]["decision"], "allow");
    let head = r["result"]["chain_hash"].as_str().unwrap().to_string();
    let r = s.send(&sign(
        ikm,
        envelope(
            "steps/userMessage",
            &sid,
            json!({"content": [{"type": "text", "value": "late"}]}),
            None,
        ),
    ));
    assert_eq!(code(&r), -32000, "{r}");
    s.finish();

    // The stored chain verifies and ends at the head the last response named.
    let out = Command::new(bin())
        .args(["audit", "verify", "--verbose"])
        .arg(&state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&head), "{text}");
    assert!(text.contains("6 entries"), "{text}");
}

#[test]
fn audit_verify_reports_the_first_broken_link() {
    use warden::guardian::{Journal, Record};
    use warden::server::store::Store;
    let dir = tmp("tamper");
    let mut chain = warden::guardian::audit::Chain::default();
    let mut entries = Vec::new();
    for i in 0..3 {
        let mut e = serde_json::Map::new();
        e.insert("entry_id".into(), json!(format!("s/{i}")));
        e.insert("step_id".into(), json!(ids::counter(0, i)));
        e.insert("step_type".into(), json!("steps/userMessage"));
        entries.push(chain.append(e));
    }
    entries[1]["step_type"] = json!("steps/toolCallRequest");
    {
        let store = Store::open(&dir).unwrap();
        for e in entries {
            store
                .append(vec![Record::Step {
                    policy: None,
                    failed: false,
                    session: "s".into(),
                    method: "steps/userMessage".into(),
                    params: json!({}),
                    proceeds: true,
                    extra_labels: 0,
                    entries: vec![e],
                    approval: None,
                    at_ms: None,
                }])
                .unwrap();
        }
    }
    let out = Command::new(bin())
        .args(["audit", "verify"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("session s, entry 1"), "{text}");
    assert!(text.contains("does not match its content"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// The HTTP listener, started by the shared helper (tests/serve_common).
struct Http {
    server: serve_common::Server,
}

impl Http {
    fn start(args: &[&str]) -> Http {
        Http {
            server: serve_common::Server::start(args),
        }
    }

    fn raw(&self, head: &str, body: &[u8]) -> (u16, Value) {
        let mut s = TcpStream::connect(&self.server.addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let (status, body) = warden::adapters::core_agent::parse_http_response(&out).unwrap();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    fn post(&self, path: &str, v: &Value) -> (u16, Value) {
        let body = serde_json::to_vec(v).unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let (status, r) = self.raw(&head, &body);
        if status == 200 || status == 413 {
            assert_valid_response(&r);
        }
        (status, r)
    }
}

#[test]
fn a_whole_session_over_http() {
    let dir = tmp("http");
    let ikm = b"http secret";
    std::fs::write(dir.join("key"), ikm).unwrap();
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let srv = Http::start(&[
        "--policy",
        dir.join("p.ward").to_str().unwrap(),
        "--key-file",
        dir.join("key").to_str().unwrap(),
    ]);
    let sid = ids::counter(0, 2);
    let (st, r) = srv.post(
        "/acs",
        &sign(
            ikm,
            envelope("handshake/hello", &sid, hello_payload(), None),
        ),
    );
    assert_eq!(st, 200);
    assert_eq!(r["result"]["payload"]["selected_transport"], "http", "{r}");
    let (_, r) = srv.post(
        "/",
        &sign(ikm, envelope("steps/sessionStart", &sid, json!({}), None)),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    verify_response(ikm, &sid, &r);
    let call = sign(
        ikm,
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": "rm"}, "arguments": {}}),
            None,
        ),
    );
    let (_, r) = srv.post("/acs", &call);
    assert_eq!(r["result"]["decision"], "deny", "{r}");
    let (_, r) = srv.post("/acs", &call);
    assert_eq!(code(&r), -32005, "{r}");
    let (_, r) = srv.post("/acs", &envelope("system/ping", &sid, json!({}), None));
    assert_eq!(r["result"]["payload"]["status"], "ok", "{r}");
    let mut stale = envelope(
        "steps/toolCallRequest",
        &sid,
        json!({"tool": {"name": "ls"}, "arguments": {}}),
        None,
    );
    stale["params"]["timestamp"] = json!("2099-01-01T00:00:00Z");
    let (_, r) = srv.post("/acs", &sign(ikm, stale));
    assert_eq!(code(&r), -32006, "{r}");
    let mut forged = sign(
        ikm,
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": "ls"}, "arguments": {}}),
            None,
        ),
    );
    forged["params"]["payload"]["tool"]["name"] = json!("cat");
    let (_, r) = srv.post("/acs", &forged);
    assert_eq!(code(&r), -32004, "{r}");
    let (_, r) = srv.post(
        "/acs",
        &sign(
            ikm,
            envelope(
                "steps/sessionEnd",
                &sid,
                json!({"reason": "completed"}),
                None,
            ),
        ),
    );
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    assert!(r["result"]["chain_hash"].is_string());

    // Oversized: refused from the Content-Length header, with the JSON-RPC error.
    let head = format!(
        "POST /acs HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        5 << 20
    );
    let (st, r) = srv.raw(&head, b"");
    assert_eq!(st, 413);
    assert_eq!(r["error"]["code"], -32600);
    assert_eq!(r["error"]["data"]["reason"], "envelope_too_large");
    // Not JSON: a parse error, not a crash.
    let (st, r) = srv.raw(
        "POST /acs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
        b"{x}",
    );
    assert_eq!((st, code(&r)), (200, -32700));
    let (st, _) = srv.raw(
        "GET /acs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(st, 405);
    let (st, _) = srv.raw(
        "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(st, 404);
}

// ---------------------------------------------------------------------------------------------
// Upstream vectors, end to end

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn upstream_signed_request_verifies_through_the_server() {
    let v =
        read_json(&acs_dir().join(
            "fixtures/reference-implementations/agt-go/internal/envelope/testdata/vectors.json",
        ));
    let ikm = unhex(v["ikm_hex"].as_str().unwrap());
    let sid = v["session_id"].as_str().unwrap();
    assert_eq!(
        crypto::session_key(&ikm, sid).to_vec(),
        unhex(v["session_key_hex"].as_str().unwrap())
    );
    let dir = tmp("vectors");
    std::fs::write(dir.join("key"), &ikm).unwrap();
    // The vector is from 2026-09-19: a skew window wide enough to accept it, no handshake.
    let mut s = Stdio_::start(&[
        "--key-file",
        dir.join("key").to_str().unwrap(),
        "--key-id",
        "k1",
        "--no-handshake",
        "--skew-window-ms",
        "100000000000",
    ]);
    let request = v["request"]["signed"].clone();
    let r = s.send(&request);
    assert!(
        r.get("result").is_some(),
        "the vector's signature verifies: {r}"
    );
    verify_response(&ikm, sid, &r);
    // Tampered by one character, it does not.
    let mut bad = request.clone();
    bad["params"]["payload"]["raw_command"] = json!("echo rm -rf /tmp");
    let r = s.send(&bad);
    assert_eq!(code(&r), -32004, "{r}");
    s.finish();

    // Warden signs the vector's response exactly as agt-go does.
    let expected = v["response"]["signed"].clone();
    let mut resp: warden::acs::envelope::Response =
        serde_json::from_value(expected.clone()).unwrap();
    warden::guardian::sign_response(&crypto::session_key(&ikm, sid), "k1", &mut resp);
    assert_eq!(resp.to_value(), expected);
}

// ---------------------------------------------------------------------------------------------
// Hot reload

#[test]
fn watch_swaps_a_good_policy_and_keeps_the_last_good_one() {
    let dir = tmp("watch");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let srv = Http::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--watch",
        "--state",
        dir.join("state").to_str().unwrap(),
    ]);
    let sid = ids::counter(0, 3);
    srv.post(
        "/acs",
        &envelope("handshake/hello", &sid, hello_payload(), None),
    );
    let (_, r) = srv.post(
        "/acs",
        &envelope("steps/sessionStart", &sid, json!({}), None),
    );
    assert_eq!(r["result"]["decision"], "allow");
    let ls = || {
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": "ls"}, "arguments": {}}),
            None,
        )
    };
    let (_, r) = srv.post("/acs", &ls());
    assert_eq!(r["result"]["decision"], "allow");

    // A broken policy is not swapped in.
    std::fs::write(
        &policy,
        "rule broken on toolCallRequest when tool.nme == 1 => deny \"x\"",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let (_, r) = srv.post("/acs", &ls());
    assert_eq!(r["result"]["decision"], "allow", "{r}");

    // A good one is.
    std::fs::write(
        &policy,
        "rule no_ls on toolCallRequest when tool.name == \"ls\" => deny \"no_ls\": \"no\"\ndefault allow\n",
    )
    .unwrap();
    let mut denied = false;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let (_, r) = srv.post("/acs", &ls());
        if r["result"]["decision"] == "deny" {
            denied = true;
            break;
        }
    }
    assert!(denied, "the new policy was swapped in");
    drop(srv);
    // The reload is in the chain.
    let records = warden::server::store::read_dir(&dir.join("state")).unwrap();
    let chains = warden::guardian::journal::chains(&records);
    let entries = &chains[0].1;
    assert!(
        entries
            .iter()
            .any(|e| e["step_type"] == "warden/policy_reload"),
        "{entries:?}"
    );
    warden::acs::crypto::verify_chain(entries).unwrap();
    // So is the Guardian's record of it: the digest replaced and the one taken.
    let reloads = warden::guardian::journal::reloads(&records);
    assert_eq!(reloads.len(), 1, "{reloads:?}");
    let reload = entries
        .iter()
        .find(|e| e["step_type"] == "warden/policy_reload")
        .unwrap();
    assert_eq!(reload["previous_policy_digest"], reloads[0].0);
    assert_eq!(reload["policy_digest"], reloads[0].1);
    // And `warden audit verify` reads a journal holding it.
    let out = Command::new(bin())
        .args(["audit", "verify", "--verbose"])
        .arg(dir.join("state"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("1 policy reload(s)"), "{text}");
}

#[test]
fn watch_loads_no_policy_saved_in_two_chunks_with_a_close_between() {
    // The first chunk is a whole policy on its own (allow everything), written and closed;
    // the second, appended after a pause shorter than the debounce, makes the real one. Only
    // the finished file may be loaded.
    let dir = tmp("watch-chunks");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let srv = Http::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--watch",
        "--watch-debounce-ms",
        "3000",
        "--no-handshake",
    ]);
    std::fs::write(&policy, "default allow\n").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&policy)
        .unwrap();
    f.write_all(
        b"rule no_ls on toolCallRequest when tool.name == \"ls\" => deny \"no_ls\": \"no\"\n",
    )
    .unwrap();
    drop(f);
    let deadline = std::time::Instant::now() + WAIT;
    while srv.server.said("warden: reloaded").is_none() {
        assert!(std::time::Instant::now() < deadline, "never reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let reloads = srv
        .server
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("warden: reloaded"))
        .count();
    assert_eq!(reloads, 1, "only the finished file was loaded");
    let sid = ids::counter(0, 7);
    let call = |tool: &str| {
        envelope(
            "steps/toolCallRequest",
            &sid,
            json!({"tool": {"name": tool}, "arguments": {}}),
            None,
        )
    };
    assert_eq!(
        srv.post("/acs", &call("ls")).1["result"]["decision"],
        "deny"
    );
}

/// Reload through the library's watcher with a short quiet period: a Guardian that audits and
/// journals in memory, one session, and what it answers for `tool`.
mod reload {
    use super::*;
    use std::sync::Arc;
    use warden::guardian::{journal, Guardian, MemoryJournal, Options, Policy, Protocol, Record};
    use warden::server::watch;

    /// Denies `rm`, allows the rest.
    pub const OLD: &str = "rule no_rm on toolCallRequest when tool.name == \"rm\" => deny \"no_rm\": \"no\"\ndefault allow\n";
    /// Denies `rm` and `ls`; its first line alone is a complete policy that allows both.
    pub const NEW: &str = "default allow\nrule no_rm on toolCallRequest when tool.name == \"rm\" => deny \"no_rm\": \"no\"\nrule no_ls on toolCallRequest when tool.name == \"ls\" => deny \"no_ls\": \"no\"\n";
    pub const QUIET: Duration = Duration::from_millis(300);

    pub struct Rig {
        pub g: Arc<Guardian>,
        pub journal: Arc<MemoryJournal>,
        pub policy: PathBuf,
        pub sid: String,
        _watcher: notify::RecommendedWatcher,
    }

    impl Rig {
        pub fn start(name: &str) -> Rig {
            let dir = tmp(name);
            let policy = dir.join("p.ward");
            std::fs::write(&policy, OLD).unwrap();
            let journal = Arc::new(MemoryJournal::default());
            let options = Options {
                protocol: Protocol {
                    audit: true,
                    ..Protocol::default()
                },
                ..Options::default()
            };
            let g = Arc::new(Guardian::with_journal(
                Policy::load(&policy).unwrap(),
                options,
                journal.clone(),
            ));
            let watcher = watch::watch(g.clone(), policy.clone(), QUIET).unwrap();
            let rig = Rig {
                g,
                journal,
                policy,
                sid: ids::counter(9, REQ.fetch_add(1, Ordering::SeqCst)),
                _watcher: watcher,
            };
            assert_eq!(rig.decide("steps/sessionStart", json!({})), "allow");
            rig
        }

        pub fn decide(&self, method: &str, payload: Value) -> String {
            let env = envelope(method, &self.sid, payload, None);
            let r: Value =
                serde_json::from_slice(&self.g.handle(&serde_json::to_vec(&env).unwrap())).unwrap();
            r["result"]["decision"].as_str().unwrap_or("?").to_string()
        }

        pub fn call(&self, tool: &str) -> String {
            self.decide(
                "steps/toolCallRequest",
                json!({"tool": {"name": tool}, "arguments": {}}),
            )
        }

        /// The digest of the policy file as it is now (a digest names the file too).
        pub fn digest(&self) -> String {
            Policy::load(&self.policy).unwrap().digest().to_string()
        }

        /// Decides `rm` (denied by OLD and NEW alike) until the policy in force is no longer
        /// `old` or `within` has passed, asserting every answer is a deny; whether it changed.
        pub fn rm_is_denied_until_not(&self, old: &str, within: Duration) -> bool {
            let start = std::time::Instant::now();
            while start.elapsed() < within {
                assert_eq!(self.call("rm"), "deny", "rm was allowed");
                if *self.g.policy_digest() != *old {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        }

        /// The reload records journalled so far, and every chain entry.
        pub fn records(&self) -> (Vec<(String, String)>, Vec<Value>) {
            let records: Vec<Record> = self.journal.records.lock().unwrap().clone();
            let reloads = journal::reloads(&records)
                .into_iter()
                .map(|(o, n, _)| (o.to_string(), n.to_string()))
                .collect();
            let chains = journal::chains(&records);
            (reloads, chains.into_iter().flat_map(|(_, e)| e).collect())
        }
    }
}

/// An author saves the policy in place in two chunks, `pause` apart: the first chunk alone
/// (`default allow`) is a complete policy that allows `rm`, which the old and the new policy deny.
/// With `reopen`, the file is closed after the first chunk and opened again to append the second.
/// Every `rm` decided meanwhile must be denied, and the one reload must go straight from the old
/// policy to the finished file, recorded in the journal and in the session's chain.
fn slow_save_is_never_swapped_in_half_written(name: &str, pause: Duration, reopen: bool) {
    use reload::*;
    let rig = Rig::start(name);
    let old = rig.digest();
    assert_eq!(rig.call("rm"), "deny");
    let policy = rig.policy.clone();
    let writer = std::thread::spawn(move || {
        let (a, b) = NEW.split_at(NEW.find('\n').unwrap() + 1);
        let mut f = std::fs::File::create(&policy).unwrap();
        f.write_all(a.as_bytes()).unwrap();
        if reopen {
            drop(f);
            std::thread::sleep(pause);
            f = std::fs::OpenOptions::new()
                .append(true)
                .open(&policy)
                .unwrap();
        } else {
            std::thread::sleep(pause);
        }
        f.write_all(b.as_bytes()).unwrap();
    });
    // Every `rm` decided meanwhile is decided by the old policy, then by the new one.
    let swapped = rig.rm_is_denied_until_not(&old, Duration::from_secs(15));
    writer.join().unwrap();
    assert!(swapped, "the finished file was swapped in");
    assert_eq!(rig.call("ls"), "deny");
    // One reload, straight to the finished file: the first chunk was never in force.
    let new = rig.digest();
    let (reloads, entries) = rig.records();
    assert_eq!(reloads, vec![(old.clone(), new.clone())]);
    let reload = entries
        .iter()
        .find(|e| e["step_type"] == "warden/policy_reload")
        .expect("the session's chain notes the reload");
    assert_eq!(reload["previous_policy_digest"], json!(old));
    assert_eq!(reload["policy_digest"], json!(new));
    warden::acs::crypto::verify_chain(&entries).unwrap();
}

#[test]
fn watch_never_swaps_in_a_file_still_being_written() {
    // The writer closes the file between the chunks, so nothing but the two reads can tell:
    // the pause is longer than the quiet period, shorter than the quiet period and the settle
    // interval together, so the watcher reads the file once before the second chunk and once
    // after.
    slow_save_is_never_swapped_in_half_written("watch-slow", reload::QUIET * 3 / 2, true);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn watch_waits_for_a_file_still_open_for_writing() {
    // A pause the two reads cannot see (longer than the quiet period and the settle interval
    // together), with the file held open: inotify says it is not closed yet.
    slow_save_is_never_swapped_in_half_written("watch-open", reload::QUIET * 4, false);
}

#[test]
fn watch_takes_a_write_then_rename_save() {
    use reload::*;
    let rig = Rig::start("watch-rename");
    let old = rig.digest();
    assert_eq!(rig.call("ls"), "allow");
    // The new text goes to a temporary file beside the policy (not a `.ward`: the watcher
    // ignores it), slowly, then replaces the policy in one rename.
    let tmp = rig.policy.with_extension("ward.tmp");
    {
        let mut f = std::fs::File::create(&tmp).unwrap();
        let (a, b) = NEW.split_at(NEW.find('\n').unwrap() + 1);
        f.write_all(a.as_bytes()).unwrap();
        std::thread::sleep(QUIET * 2);
        f.write_all(b.as_bytes()).unwrap();
        f.sync_all().unwrap();
    }
    assert_eq!(*rig.g.policy_digest(), *old);
    std::fs::rename(&tmp, &rig.policy).unwrap();
    assert!(
        rig.rm_is_denied_until_not(&old, Duration::from_secs(10)),
        "the rename was picked up"
    );
    assert_eq!(rig.call("ls"), "deny");
    let new = rig.digest();
    let (reloads, entries) = rig.records();
    assert_eq!(reloads, vec![(old, new)]);
    warden::acs::crypto::verify_chain(&entries).unwrap();
    // A restore reads past the reload record (it belongs to no session).
    let records = rig.journal.records.lock().unwrap().clone();
    let restored =
        warden::guardian::Guardian::new(warden::guardian::Policy::load(&rig.policy).unwrap());
    assert_eq!(restored.restore(records.clone()), records.len());
    assert_eq!(restored.session_count(), 1);
    assert_eq!(restored.chain_head(&rig.sid), rig.g.chain_head(&rig.sid));
}

// ---------------------------------------------------------------------------------------------
// core-agent

fn hook(args: &[&str], stdin: &str) -> (i32, Vec<Value>) {
    let mut child = Command::new(bin())
        .args(["hook", "--dialect=core-agent"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code().unwrap_or(-1), lines)
}

#[test]
fn core_agent_hooks_feed_a_running_server() {
    let dir = tmp("core-agent");
    std::fs::write(dir.join("key"), b"hook key").unwrap();
    std::fs::write(
        dir.join("p.ward"),
        "use std.taint\nrule after_read on toolCallRequest when tool.name == \"send\" and turns_since(untrusted) <= 1 => deny \"taint\": \"tainted\"\ndefault allow\n",
    )
    .unwrap();
    let srv = Http::start(&[
        "--policy",
        dir.join("p.ward").to_str().unwrap(),
        "--key-file",
        dir.join("key").to_str().unwrap(),
    ]);
    let url = format!("http://{}", srv.server.addr);
    let sf = dir.join("session.json");
    let keyp = dir.join("key");
    let common = [
        "--url",
        url.as_str(),
        "--session-file",
        sf.to_str().unwrap(),
        "--key-file",
        keyp.to_str().unwrap(),
        // agent-end closes the turn only: the session lasts until --end-session.
        "--agent-end=turn",
    ];
    let (c, rs) = hook(&common, r#"{"hook_event_name":"model-start"}"#);
    assert_eq!(c, 0);
    // handshake, sessionStart, turnStart
    assert_eq!(rs.len(), 3, "{rs:?}");
    for r in &rs {
        assert_valid_response(r);
        assert!(r.get("result").is_some(), "{r}");
    }
    let (_, rs) = hook(
        &common,
        r#"{"hook_event_name":"tool-start","tool_name":"read_file","tool_input":{"path":"/etc/hosts"}}"#,
    );
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0]["result"]["decision"], "allow", "{rs:?}");
    let (_, rs) = hook(
        &common,
        r#"{"hook_event_name":"tool-end","tool_name":"read_file","tool_output":"127.0.0.1 localhost"}"#,
    );
    assert_eq!(rs[0]["result"]["decision"], "allow", "{rs:?}");
    let (_, rs) = hook(
        &common,
        r#"{"hook_event_name":"tool-start","tool_name":"send","tool_input":{"to":"x"}}"#,
    );
    assert_eq!(
        rs[0]["result"]["decision"], "deny",
        "provenance flows through the hooks: {rs:?}"
    );
    let (_, rs) = hook(&common, r#"{"hook_event_name":"agent-end"}"#);
    assert_eq!(rs.len(), 1);
    assert!(rs[0]["result"]["chain_hash"].is_string());
    let mut end = common.to_vec();
    end.push("--end-session");
    let (c, rs) = hook(&end, "");
    assert_eq!(c, 0);
    assert_eq!(rs[0]["result"]["decision"], "allow", "{rs:?}");
    assert!(!sf.exists());
    let (c, _) = hook(&common, r#"{"hook_event_name":"nope"}"#);
    assert_ne!(c, 0);
}

#[allow(dead_code)]
fn unused(_: &Path) {}
