//! Decision logs (`warden serve --decision-log`, docs/serve.md "Decision logs"): the record's
//! fields with `mask`ed arguments masked, each sink (a file, stdout with the HTTP transport, an
//! HTTP collector), `-` refused on stdio; and `warden audit show|export --operator` reading a
//! running server's chains through the operator endpoint.

mod common;
mod serve_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Collect;
use serde_json::{json, Value};
use serve_common::{announced, tmp, WAIT};
use warden::acs::{envelope, ids, time};

const TOKEN: &str = "op-0d1e2c3a-decision-log";

const POLICY: &str = r#"mask args.password
rule no_root on toolCallRequest when tool.name == "login" and args.user == "root"
  => deny "login.root": "no root logins"
default allow
"#;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_warden")
}

static REQ: AtomicU64 = AtomicU64::new(1);

fn envelope(sid: &str, method: &str, payload: Value) -> Value {
    let n = REQ.fetch_add(1, Ordering::SeqCst);
    envelope::request(
        n,
        method,
        &ids::counter(0x0d10_0000, n),
        &time::now_rfc3339_ms(),
        json!({"agent_id": "agent", "session_id": sid, "turn_id": "t1"}),
        payload,
    )
}

fn login(user: &str, password: &str) -> Value {
    json!({"tool": {"name": "login"},
           "arguments": {"user": {"value": user}, "password": {"value": password}}})
}

/// A running `warden serve --listen 127.0.0.1:0 ARGS`, its stdout as lines, its stderr kept.
struct Http {
    child: Child,
    addr: String,
    operator: Option<String>,
    stdout: mpsc::Receiver<String>,
}

impl Http {
    fn start(dir: &Path, args: &[&str]) -> Http {
        std::fs::write(dir.join("p.ward"), POLICY).unwrap();
        let mut child = Command::new(bin())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--no-handshake",
                "--policy",
            ])
            .arg(dir.join("p.ward"))
            .args(args)
            // glibc gives each thread that allocates its own arena and keeps freed 1 MiB
            // buffers resident in each: with many runtime threads the RSS a test reads then
            // depends on which threads served the requests, not on what Warden holds. Two
            // arenas make the memory bound below measure the queue.
            .env("MALLOC_ARENA_MAX", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let want_op = args.contains(&"--operator-listen");
        let (addr, operator) = announced(child.stderr.take().unwrap(), true, want_op);
        let out = child.stdout.take().unwrap();
        let (tx, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        Http {
            child,
            addr: addr.unwrap(),
            operator,
            stdout,
        }
    }

    fn acs(&self, e: &Value) -> Value {
        let body = serde_json::to_vec(e).unwrap();
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        write!(
            s,
            "POST /acs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(&body).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let (status, body) = warden::adapters::core_agent::parse_http_response(&out).unwrap();
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two records of an allowed and a denied login, whatever sink carried them.
fn check_records(records: &[Value], sid: &str) {
    assert_eq!(records.len(), 2, "{records:?}");
    let (ok, denied) = (&records[0], &records[1]);
    for r in records {
        assert_eq!(r["session"], sid);
        assert_eq!(r["method"], "steps/toolCallRequest");
        assert_eq!(r["tool"], "login");
        // `mask args.password`: the value never appears.
        assert_eq!(r["arguments"]["password"], "[redacted]", "{r}");
        assert!(!r.to_string().contains("hunter2"), "{r}");
        assert_eq!(r["policy_digest"].as_str().unwrap().len(), 64, "{r}");
        assert!(r["duration_us"].is_u64(), "{r}");
        assert!(r["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
        assert!(r["request_id"].is_string(), "{r}");
    }
    assert_eq!(ok["arguments"]["user"], "alice");
    assert_eq!(ok["decision"], "allow");
    assert_eq!(ok["rules"], json!([]));
    assert_eq!(denied["arguments"]["user"], "root");
    assert_eq!(denied["decision"], "deny");
    assert_eq!(denied["reason_codes"], json!(["login.root"]));
    assert_eq!(denied["reasoning"], "no root logins");
    let rules = denied["rules"].as_array().unwrap();
    assert!(
        rules.len() == 1 && rules[0].as_str().unwrap().ends_with("no_root"),
        "{denied}"
    );
}

fn two_logins(mut send: impl FnMut(&Value) -> Value) -> String {
    let sid = ids::random_v4(0);
    let r = send(&envelope(
        &sid,
        "steps/toolCallRequest",
        login("alice", "hunter2"),
    ));
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    let r = send(&envelope(
        &sid,
        "steps/toolCallRequest",
        login("root", "hunter2"),
    ));
    assert_eq!(r["result"]["decision"], "deny", "{r}");
    sid
}

/// `warden serve --stdio` with the test policy and `--decision-log LOG`: [`two_logins`] sent
/// one per line, the input closed, the server's clean exit awaited. Returns the session id.
fn two_logins_over_stdio(dir: &Path, log: &std::ffi::OsStr) -> String {
    let mut child = Command::new(bin())
        .args(["serve", "--stdio", "--no-handshake", "--policy"])
        .arg(dir.join("p.ward"))
        .arg("--decision-log")
        .arg(log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let sid = two_logins(|e| {
        writeln!(stdin, "{e}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // stdout carries only the protocol.
        serde_json::from_str(&line).unwrap()
    });
    drop(stdin);
    assert!(child.wait().unwrap().success());
    sid
}

#[test]
fn a_file_log_over_stdio_has_one_masked_record_per_decision() {
    let dir = tmp("dlog-file");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let log = dir.join("logs/decisions.jsonl");
    let sid = two_logins_over_stdio(&dir, log.as_os_str());
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    check_records(&records, &sid);
}

#[test]
fn stdout_is_refused_on_stdio_and_https_is_refused_everywhere() {
    let out = Command::new(bin())
        .args(["serve", "--stdio", "--decision-log", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stdout carries the JSON-RPC protocol"),
        "{err}"
    );
    let out = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--decision-log", "https://127.0.0.1:1/x"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("https collectors are not supported"), "{err}");
    let out = Command::new(bin())
        .args(["mcp-proxy", "--decision-log", "-", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stdout carries the JSON-RPC protocol"),
        "{err}"
    );
}

#[test]
fn stdout_carries_the_log_with_the_http_transport() {
    let dir = tmp("dlog-stdout");
    let w = Http::start(&dir, &["--decision-log", "-"]);
    let sid = two_logins(|e| w.acs(e));
    let records: Vec<Value> = (0..2)
        .map(|_| serde_json::from_str(&w.stdout.recv_timeout(WAIT).unwrap()).unwrap())
        .collect();
    check_records(&records, &sid);
}

/// A collector on loopback: answers each POST 200 and hands over its body's lines.
fn collector() -> (String, mpsc::Receiver<(String, Vec<Value>)>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let mut r = BufReader::new(s);
            let mut head = Vec::new();
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap();
                    }
                }
                if line == "\r\n" {
                    break;
                }
                head.push(line);
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let mut s = r.into_inner();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .unwrap();
            let lines = String::from_utf8(body)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let _ = tx.send((head.concat(), lines));
        }
    });
    (addr, rx)
}

#[test]
fn an_http_collector_gets_batches_of_json_lines() {
    let dir = tmp("dlog-http");
    let (addr, posts) = collector();
    let url = format!("http://{addr}/ingest");
    let w = Http::start(&dir, &["--decision-log", &url]);
    let sid = two_logins(|e| w.acs(e));
    let mut records = Vec::new();
    let deadline = Instant::now() + WAIT;
    while records.len() < 2 && Instant::now() < deadline {
        let (head, lines) = posts.recv_timeout(WAIT).expect("a POST from the server");
        assert!(head.starts_with("POST /ingest HTTP/1.1"), "{head}");
        assert!(head.contains("application/x-ndjson"), "{head}");
        records.extend(lines);
    }
    check_records(&records, &sid);
}

#[test]
fn an_unreachable_collector_never_holds_up_a_decision() {
    // A port nothing listens on: every batch fails, the records are counted as dropped.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tmp("dlog-down");
    let url = format!("http://127.0.0.1:{port}/x");
    let w = Http::start(&dir, &["--decision-log", &url]);
    let started = Instant::now();
    two_logins(|e| w.acs(e));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn audit_show_and_export_read_a_running_server_through_the_operator_endpoint() {
    let dir = tmp("dlog-audit");
    let state = dir.join("state");
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let token = dir.join("token");
    let w = Http::start(
        &dir,
        &[
            "--state",
            state.to_str().unwrap(),
            "--operator-listen",
            "127.0.0.1:0",
            "--operator-token-file",
            token.to_str().unwrap(),
        ],
    );
    let sid = two_logins(|e| w.acs(e));
    let url = format!("http://{}", w.operator.as_ref().unwrap());
    let run = |args: &[&str]| {
        Command::new(bin())
            .arg("audit")
            .args(args)
            .args(["--operator", &url, "--operator-token-file"])
            .arg(&token)
            .output()
            .unwrap()
    };
    let out = run(&["export"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.iter().all(|e| e["session"] == sid.as_str()));
    assert_eq!(entries[0]["decision"], "allow");
    assert_eq!(entries[1]["decision"], "deny");
    assert_eq!(
        entries[1]["previous_hash"], entries[0]["entry_hash"],
        "{entries:?}"
    );

    let out = run(&["show", "--session", &sid]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("session {sid}: 2 entries")),
        "{text}"
    );

    let out = run(&["show", "--session", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    // A session id with characters a query would misread is sent encoded: one unknown session,
    // not every session.
    let out = run(&["show", "--session", &format!("{sid}&x=1")]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A malformed escape is refused, never read as "every session".
    let mut c = TcpStream::connect(w.operator.as_ref().unwrap()).unwrap();
    write!(
        c,
        "GET /audit?session=%zz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        TOKEN.trim()
    )
    .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let (status, _) = warden::adapters::core_agent::parse_http_response(&got).unwrap();
    assert_eq!(status, 400);

    // A wrong token is refused, and says so.
    std::fs::write(dir.join("bad"), "wrong").unwrap();
    let out = Command::new(bin())
        .args([
            "audit",
            "export",
            "--operator",
            &url,
            "--operator-token-file",
        ])
        .arg(dir.join("bad"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
}

#[test]
fn records_mask_what_explain_masks_redact_labels_and_mask_paths() {
    // The explain corpus: a vault output (label `secret redact`) flows into an email body, and
    // a login carries a `mask`ed password.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/explain");
    let policy = warden::guardian::Policy::load(root.join("explain.ward")).unwrap();
    let g = warden::guardian::Guardian::new(policy);
    let sink = std::sync::Arc::new(Collect::default());
    assert!(g.set_decision_log(sink.clone()));
    let trace = std::fs::read_to_string(root.join("explain.jsonl")).unwrap();
    for line in trace.lines() {
        g.handle(line.as_bytes());
    }
    let records = sink.0.lock().unwrap().clone();
    assert_eq!(
        records.len(),
        trace.lines().count(),
        "one record per decision"
    );
    let all = serde_json::to_string(&records).unwrap();
    assert!(!all.contains("s3cr3t"), "the vault secret leaked: {all}");
    assert!(
        !all.contains("hunter2"),
        "the masked password leaked: {all}"
    );
    let email = records.iter().find(|r| r["tool"] == "send_email").unwrap();
    assert_eq!(email["arguments"]["body"], "[redacted]", "{email}");
    assert_eq!(email["arguments"]["to"], "bob@example.com", "{email}");
    assert_eq!(email["decision"], "deny", "{email}");
    assert!(
        email["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "tests.explain.secret_out"),
        "{email}"
    );
    let login = records.iter().find(|r| r["tool"] == "login").unwrap();
    assert_eq!(login["arguments"]["password"], "[redacted]", "{login}");
}

#[test]
fn a_stdio_server_sends_its_last_records_before_it_exits() {
    let dir = tmp("dlog-flush");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let (addr, posts) = collector();
    // The input ends at once: the batch is still gathering when the server stops.
    let sid = two_logins_over_stdio(&dir, format!("http://{addr}/ingest").as_ref());
    let mut records = Vec::new();
    while let Ok((_, lines)) = posts.recv_timeout(Duration::from_millis(200)) {
        records.extend(lines);
    }
    check_records(&records, &sid);
}

#[test]
fn mcp_proxy_logs_each_decided_request_and_result() {
    // `cat` as the MCP "server": it sends each forwarded line back.
    let dir = tmp("dlog-mcp");
    let log = dir.join("mcp-decisions.jsonl");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/policy.ward");
    let mut child = Command::new(bin())
        .args(["mcp-proxy", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--decision-log")
        .arg(&log)
        .args(["--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"move_file","arguments":{{"source":"a","destination":"b"}}}}}}"#).unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shown = serde_json::to_string_pretty(&records).unwrap();
    let call = records
        .iter()
        .find(|r| r["method"] == "protocols/MCP/tools/call")
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(call["decision"], "deny", "{shown}");
    assert_eq!(call["tool"], "move_file", "{shown}");
    assert_eq!(call["arguments"]["source"], "a", "{shown}");
    assert!(records
        .iter()
        .any(|r| r["method"] == "protocols/MCP/tools/list" && r["decision"] == "allow"));
    assert!(records.iter().all(|r| r["policy_digest"].is_string()));
    // Each record names its step's audit-chain entry, as `warden audit export` writes it.
    let shown_chain = Command::new(bin())
        .args(["audit", "export"])
        .arg(dir.join("state"))
        .output()
        .unwrap();
    let chain = String::from_utf8_lossy(&shown_chain.stdout);
    for r in &records {
        let hash = r["audit_entry_hash"]
            .as_str()
            .unwrap_or_else(|| panic!("{shown}"));
        assert_eq!(hash.len(), 64, "{r}");
        assert!(
            chain.contains(&format!("\"entry_hash\":\"{hash}\"")),
            "{hash} is not in the chain:\n{chain}"
        );
    }
}

/// A collector that accepts connections and never reads from them or answers: every POST
/// waits out its time limits, and nothing is ever taken off the sink's queue.
fn hung_collector() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            held.push(s);
        }
    });
    addr
}

/// `VmRSS` of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A call whose argument is `mib` MiB of text: its record is as large.
fn upload(sid: &str, mib: usize) -> Value {
    envelope(
        sid,
        "steps/toolCallRequest",
        json!({"tool": {"name": "upload"},
               "arguments": {"data": {"value": "a".repeat(mib << 20)}}}),
    )
}

#[test]
fn a_hung_collector_keeps_the_queue_within_its_byte_bound() {
    // 128 records of 1 MiB for a collector that takes none: the queue holds at most 8 MiB
    // (dropping the oldest, counted), and over the second 64 the process grows by far less
    // than the 64 MiB it was sent.
    const BOUND: u64 = 8 << 20;
    let dir = tmp("dlog-hung");
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let url = format!("http://{}/ingest", hung_collector());
    let w = Http::start(
        &dir,
        &[
            "--decision-log",
            &url,
            "--decision-log-queue-bytes",
            &BOUND.to_string(),
            "--max-envelope-bytes",
            &(2u64 << 20).to_string(),
            "--operator-listen",
            "127.0.0.1:0",
            "--operator-token-file",
            dir.join("token").to_str().unwrap(),
        ],
    );
    let operator = w.operator.clone().unwrap();
    let sid = ids::random_v4(0);
    // Fill the queue and warm up (allocator arenas, the runtime's buffers, the high-water
    // mark of one request's transient copies) before the baseline: from here a bounded queue
    // holds steady, an unbounded one grows by the 64 MiB sent next.
    for _ in 0..64 {
        assert_eq!(w.acs(&upload(&sid, 1))["result"]["decision"], "allow");
    }
    let base = rss_kib(w.child.id());
    for _ in 0..64 {
        assert_eq!(w.acs(&upload(&sid, 1))["result"]["decision"], "allow");
    }
    let m = serve_common::operator_metrics(&operator, TOKEN);
    let grown_mib = rss_kib(w.child.id()).saturating_sub(base) / 1024;
    assert_eq!(m["warden_decision_log_queue_max_bytes"], BOUND, "{m:?}");
    assert!(m["warden_decision_log_queued_bytes"] <= BOUND, "{m:?}");
    assert!(
        m["warden_decision_log_dropped_queue_full_total"] > 0,
        "{m:?}"
    );
    assert_eq!(m["warden_decision_log_sent_total"], 0, "{m:?}");
    eprintln!("grew {grown_mib} MiB: {m:?}");
    assert!(grown_mib < 24, "the server grew by {grown_mib} MiB: {m:?}");
}

/// Runs `command` (its stdin piped, fed by `feed`, then closed) to its end; its stderr.
fn stderr_after(mut command: Command, feed: impl FnOnce(&mut std::process::ChildStdin)) -> String {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    feed(&mut stdin);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The counts of the stop line `warden: decision log URL: stopping with U record(s) unsent
/// …; D dropped while running; S sent`: (U, D, S).
fn stop_counts(stderr: &str) -> (u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("stopping with"))
        .unwrap_or_else(|| panic!("no stop line in {stderr}"));
    let n = |after: &str| -> u64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    let dropped = line.split("; ").nth(1).unwrap();
    let dropped = dropped.split_whitespace().next().unwrap().parse().unwrap();
    (n("stopping with "), dropped, n("dropped while running; "))
}

#[test]
fn records_a_stopping_server_could_not_send_are_counted_and_reported() {
    let dir = tmp("dlog-unsent");
    std::fs::write(dir.join("p.ward"), POLICY).unwrap();
    let url = format!("http://{}/ingest", hung_collector());
    let mut c = Command::new(bin());
    c.args(["serve", "--stdio", "--no-handshake", "--policy"])
        .arg(dir.join("p.ward"))
        .args(["--decision-log", &url]);
    let sid = ids::random_v4(0);
    let stderr = stderr_after(c, |stdin| {
        for _ in 0..3 {
            writeln!(
                stdin,
                "{}",
                envelope(&sid, "steps/toolCallRequest", login("a", "b"))
            )
            .unwrap();
        }
    });
    // Every record is accounted for: none reached the collector.
    let (unsent, dropped, sent) = stop_counts(&stderr);
    assert_eq!((unsent + dropped, sent), (3, 0), "{stderr}");
}

#[test]
fn mcp_proxy_counts_and_reports_the_records_it_could_not_send() {
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/policy.ward");
    let url = format!("http://{}/ingest", hung_collector());
    let mut c = Command::new(bin());
    c.args(["mcp-proxy", "--quiet", "--policy"])
        .arg(&policy)
        .args(["--decision-log", &url, "--", "cat"]);
    let stderr = stderr_after(c, |stdin| {
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#).unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    });
    let (unsent, dropped, sent) = stop_counts(&stderr);
    assert!(unsent + dropped >= 2 && sent == 0, "{stderr}");
}
