//! A clean stop (docs/serve.md, "Stopping"): SIGTERM to a `warden serve --state DIR` under
//! load stops it with exit status 0, every request it decided was answered (none is refused
//! as a replay when sent again after the restart), every acknowledged decision is in the
//! folder and the streams continue as an uninterrupted run does; the same over stdio; a second
//! signal ends the process at once; `warden mcp-proxy` stops the same way; and on PostgreSQL a
//! Guardian under another id takes the stopped one's sessions at their next request, without
//! waiting for the leases; and `GET /readyz` answers 503 on a connection the stop drains.

mod common;
mod pg_common;
mod serve_common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_common::*;
use warden::acs::time;

const SESSIONS: u64 = 16;
const N: u64 = 40;
const THREADS: u64 = 4;

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// Waits for the process to end (failing after [`WAIT`]); its exit code.
fn exit_code(child: &mut std::process::Child) -> Option<i32> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the server has said `needle` on stderr (failing after [`WAIT`]).
fn wait_said(srv: &Server, needle: &str) {
    let deadline = Instant::now() + WAIT;
    while srv.said(needle).is_none() {
        assert!(
            Instant::now() < deadline,
            "the server never said {needle:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends each session's next request (`next[s]`) to `addr`: none may be a replay (which would
/// be a request decided before the stop without its answer); each equals the reference.
fn resume_each(addr: &str, ts: &str, next: &mut [u64], reference: &Outcomes) {
    let mut conn = Conn::open(addr).unwrap();
    for s in 0..SESSIONS {
        let i = next[s as usize];
        if i >= N {
            continue;
        }
        let body = serde_json::to_vec(&stream_request(s, i, N, ts)).unwrap();
        let r = conn.post(&body).unwrap();
        assert_ne!(
            r["error"]["code"], -32005,
            "session {s} step {i} was decided unanswered"
        );
        assert_eq!(
            outcome(&r),
            outcome(&reference[&(s, i)]),
            "session {s} step {i}"
        );
        next[s as usize] = i + 1;
    }
}

#[test]
fn sigterm_under_load_answers_what_it_decided_and_a_restart_continues() {
    let dir = tmp("stop-http");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let ts = time::now_rfc3339_ms();
    let start = |state: &Path| serve_policy(&policy, &state.display().to_string(), &[]);
    let reference_state = dir.join("reference");
    let reference = reference_run(start(&reference_state), &ts, SESSIONS, THREADS, N);

    let state = dir.join("stopped");
    let mut srv = start(&state);
    let acked = Arc::new(AtomicU64::new(0));
    let (before, stopped_at) = std::thread::scope(|scope| {
        let (addr, ts2, acked2) = (srv.addr.clone(), ts.clone(), acked.clone());
        let zero = vec![0u64; SESSIONS as usize];
        let h = scope.spawn(move || drive(&addr, &ts2, &zero, &acked2, SESSIONS, THREADS, N));
        while acked.load(Ordering::SeqCst) < SESSIONS * N / 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        signal(srv.child.id(), "-TERM");
        h.join().unwrap()
    });
    assert_eq!(exit_code(&mut srv.child), Some(0), "a clean stop exits 0");
    assert!(srv.said("stopped after SIGTERM").is_some());
    assert!(
        srv.said("still busy").is_none(),
        "every request in flight was answered"
    );
    drop(srv);
    // (Whether the stop came before the load's end is the machine's timing, not asserted: the
    // checks below hold either way, and the load is long enough that it usually does.)
    eprintln!(
        "stop: {} of {} answered before it",
        before.len(),
        SESSIONS * N
    );

    let srv = start(&state);
    let mut next = stopped_at;
    resume_each(&srv.addr, &ts, &mut next, &reference);
    let (after, done) = drive(
        &srv.addr,
        &ts,
        &next,
        &Arc::new(AtomicU64::new(0)),
        SESSIONS,
        THREADS,
        N,
    );
    assert!(done.iter().all(|i| *i == N), "every stream finished");
    drop(srv);
    for (k, r) in before.iter().chain(after.iter()) {
        assert_eq!(
            outcome(r),
            outcome(&reference[k]),
            "session {} step {}",
            k.0,
            k.1
        );
    }
    let heads = |s: &Path| chain_heads(&warden::server::store::read_dir(s).unwrap());
    assert_eq!(heads(&state), heads(&reference_state));
}

/// Request `i` of session 0's stream, its hello listing stdio.
fn stdio_request(i: u64, ts: &str) -> Value {
    let mut r = stream_request(0, i, N, ts);
    if i == 0 {
        r["params"]["payload"]["transports_supported"] = serde_json::json!(["stdio"]);
    }
    r
}

/// `warden serve --stdio --state STATE`.
fn stdio_server(policy: &Path, state: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args([
            "serve",
            "--stdio",
            "--skew-window-ms",
            "3600000",
            "--policy",
        ])
        .arg(policy)
        .arg("--state")
        .arg(state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigterm_stops_a_stdio_server_cleanly_with_every_answer_durable() {
    let dir = tmp("stop-stdio");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let state = dir.join("state");
    let ts = time::now_rfc3339_ms();
    let mut child = stdio_server(&policy, &state);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    const K: u64 = 6;
    for i in 0..K {
        writeln!(stdin, "{}", stdio_request(i, &ts)).unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let r: Value = serde_json::from_str(&line).unwrap();
        assert!(r.get("result").is_some(), "{r}");
    }
    // The input stays open: only the signal ends the server.
    signal(child.id(), "-TERM");
    assert_eq!(exit_code(&mut child), Some(0), "a clean stop exits 0");
    let stderr = read_all(child.stderr.take().unwrap());
    assert!(stderr.contains("stopped after SIGTERM"), "{stderr}");
    drop(stdin);

    // Every answered step is in the folder: the last one again is a replay, the next decided.
    let mut child = stdio_server(&policy, &state);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", stdio_request(K - 1, &ts)).unwrap();
    writeln!(stdin, "{}", stdio_request(K, &ts)).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[0]["error"]["code"], -32005, "{answers:?}");
    assert!(answers[1].get("result").is_some(), "{answers:?}");
}

#[test]
fn readyz_answers_503_on_a_connection_drained_by_a_stop() {
    let srv = Server::start(&["--no-handshake"]);
    let (status, _) = http(&srv.addr, "GET", "/readyz", "");
    assert_eq!(status, 200, "ready before the stop");
    // A probe whose request is under way when the signal comes (its head half sent): the
    // stop lets the connection finish that request, and the probe reads the stop.
    let mut probe = std::net::TcpStream::connect(&srv.addr).unwrap();
    probe.set_read_timeout(Some(WAIT)).unwrap();
    probe
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    signal(srv.child.id(), "-TERM");
    wait_said(&srv, "SIGTERM: stopping");
    probe.write_all(b"Connection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut probe, &mut answer);
    let (status, body) = warden::adapters::core_agent::parse_http_response(&answer).unwrap();
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("stopping after SIGTERM"), "{body}");
    let mut srv = srv;
    assert_eq!(exit_code(&mut srv.child), Some(0), "a clean stop exits 0");
}

#[test]
fn a_second_signal_stops_at_once() {
    // The stop waits (up to its grace) for a collector that never answers to take the
    // decision log's last record: the second signal cuts that short.
    let dir = tmp("stop-twice");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x", hung.local_addr().unwrap());
    let state = dir.join("state").display().to_string();
    let mut srv = serve_policy(&policy, &state, &["--decision-log", &url]);
    let ts = time::now_rfc3339_ms();
    let mut conn = Conn::open(&srv.addr).unwrap();
    for i in 0..2 {
        let r = conn.post(&serde_json::to_vec(&stream_request(0, i, N, &ts)).unwrap());
        assert!(r.unwrap().get("result").is_some());
    }
    drop(conn);
    signal(srv.child.id(), "-TERM");
    wait_said(&srv, "SIGTERM: stopping");
    signal(srv.child.id(), "-TERM");
    assert_eq!(exit_code(&mut srv.child), Some(128 + 15));
    assert!(srv.said("stopped after").is_none());
    drop(hung);
}

#[test]
fn a_guardian_stopped_by_sigterm_lets_its_sessions_go_to_another_at_once() {
    let Some(server) = pg_common::server_url() else {
        return;
    };
    let scratch = pg_common::Scratch::new(&server, "stop_leases", POLICY);
    let ts = time::now_rfc3339_ms();
    // Leases of a minute: without the release, B would answer `lease_held` for that long.
    let guardian = |name: &str| {
        serve_policy(
            &scratch.policy,
            &scratch.db.url,
            &["--guardian-id", name, "--lease-ms", "60000"],
        )
    };
    let mut a = guardian("A");
    let sessions: Vec<u64> = (0..4).collect();
    let mut conn = Conn::open(&a.addr).unwrap();
    for i in 0..3 {
        for s in &sessions {
            let r = conn.post(&serde_json::to_vec(&stream_request(*s, i, N, &ts)).unwrap());
            assert!(r.unwrap().get("result").is_some());
        }
    }
    drop(conn);
    signal(a.child.id(), "-TERM");
    assert_eq!(exit_code(&mut a.child), Some(0));
    assert!(a.said("let go of 4 session lease(s)").is_some());
    let b = guardian("B");
    let mut conn = Conn::open(&b.addr).unwrap();
    for s in &sessions {
        let r = conn
            .post(&serde_json::to_vec(&stream_request(*s, 3, N, &ts)).unwrap())
            .unwrap();
        assert!(
            r.get("result").is_some(),
            "session {s} was not taken over: {r}"
        );
    }
}

/// `warden mcp-proxy` in front of `server` (a shell command), with a decision log file.
fn mcp_proxy(dir: &Path, server: &str) -> std::process::Child {
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/policy.ward");
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp-proxy", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--decision-log")
        .arg(dir.join("log.jsonl"))
        .args(["--", "sh", "-c", server])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigterm_stops_mcp_proxy_cleanly_and_a_second_signal_at_once() {
    // `cat` answers each request with itself: one exchange, then SIGTERM with the input open.
    let dir = tmp("stop-mcp");
    let mut child = mcp_proxy(&dir, "cat");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    signal(child.id(), "-TERM");
    assert_eq!(exit_code(&mut child), Some(0));
    let stderr = read_all(child.stderr.take().unwrap());
    assert!(stderr.contains("stopped after SIGTERM"), "{stderr}");
    let log = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    assert!(log.contains("protocols/MCP/tools/list"), "{log}");
    drop(stdin);

    // A server that outlives its input (it echoes, then sleeps) holds the stop for its
    // grace: a second signal ends it at once.
    let mut child = mcp_proxy(&dir, "cat; exec sleep 20");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (tx, said) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    signal(child.id(), "-TERM");
    while !said
        .recv_timeout(WAIT)
        .unwrap()
        .contains("SIGTERM: stopping")
    {}
    signal(child.id(), "-TERM");
    assert_eq!(exit_code(&mut child), Some(128 + 15));
    drop(stdin);
}

/// An MCP server over HTTP that answers each POSTed request after `delay`, with an empty
/// tool list under the request's id (7 for the test's one request), and refuses a GET; its
/// address.
fn slow_http_mcp_server(delay: Duration) -> String {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn);
                let mut head = String::new();
                let mut length = 0usize;
                loop {
                    let mut l = String::new();
                    if reader.read_line(&mut l).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(n) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap_or(0);
                    }
                    if l == "\r\n" {
                        break;
                    }
                    head.push_str(&l);
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let mut conn = reader.into_inner();
                let (status, answer) = if head.starts_with("GET") {
                    ("405 Method Not Allowed", String::new())
                } else if body.windows(8).any(|w| w == b"\"method\"")
                    && body.windows(4).any(|w| w == b"\"id\"")
                {
                    std::thread::sleep(delay);
                    let id = serde_json::from_slice::<Value>(&body).unwrap()["id"].clone();
                    (
                        "200 OK",
                        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[]}}}}"#),
                    )
                } else {
                    ("202 Accepted", String::new())
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    addr
}

#[test]
fn sigterm_lets_mcp_proxy_over_http_answer_the_request_in_flight() {
    // The MCP server (over HTTP) takes two seconds to answer; SIGTERM arrives while the
    // client waits. The proxy stops accepting, keeps its link to the server until the answer
    // is through, and only then closes it: the client gets its answer, not a reset.
    let dir = tmp("stop-mcp-http");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/policy.ward");
    let upstream = slow_http_mcp_server(Duration::from_secs(2));
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp-proxy", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--decision-log")
        .arg(dir.join("log.jsonl"))
        .args(["--listen", "127.0.0.1:0", "--server-url"])
        .arg(format!("http://{upstream}/mcp"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the proxy ended");
        if let Some(url) = line.trim().strip_prefix("warden mcp-proxy: listening on ") {
            let hostport = url.trim_start_matches("http://").trim_end_matches("/mcp");
            break hostport.to_string();
        }
    };
    let waiting = std::thread::spawn(move || {
        let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;
        let mut conn = Conn::open(&addr).unwrap();
        conn.send_raw(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
        conn.send_raw(body).unwrap();
        conn.read_answer()
    });
    std::thread::sleep(Duration::from_millis(700));
    signal(child.id(), "-TERM");
    let (status, answer) = waiting.join().unwrap().expect("an answer, not a reset");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(exit_code(&mut child), Some(0));
    let rest = read_all(err.into_inner());
    assert!(rest.contains("stopped after SIGTERM"), "{rest}");
}
