//! Helpers for the `warden serve` recovery and load tests: a server process on a loopback
//! port, a keep-alive HTTP/1.1 client, and deterministic session streams.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use warden::acs::{envelope, ids};
use warden::guardian::journal::Record;

pub const WAIT: Duration = Duration::from_secs(60);

pub fn tmp(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "warden-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A loopback port nothing listens on (just released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `warden ARGS` run to the end: whether it succeeded, its stdout and its stderr.
pub fn run_warden(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        read_all(&out.stdout[..]),
        read_all(&out.stderr[..]),
    )
}

/// Asserts that `warden audit verify STATE` succeeds; what it printed on stdout.
pub fn assert_audit_verifies(state: &str) -> String {
    let (ok, out, err) = run_warden(&["audit", "verify", state]);
    assert!(ok, "{out}{err}");
    out
}

/// Each session's chain length and head, every chain verified.
pub fn chain_heads(records: &[Record]) -> HashMap<String, (usize, String)> {
    warden::guardian::journal::chains(records)
        .into_iter()
        .map(|(s, entries)| {
            warden::acs::crypto::verify_chain(&entries)
                .unwrap_or_else(|e| panic!("chain of {s}: {e}"));
            let head = entries.last().unwrap()["entry_hash"]
                .as_str()
                .unwrap()
                .to_string();
            (s, (entries.len(), head))
        })
        .collect()
}

/// `warden serve --policy POLICY --state STATE` with an hour's skew window (room for a run's
/// fixed timestamp), then `extra`.
pub fn serve_policy(policy: &Path, state: &str, extra: &[&str]) -> Server {
    let policy = policy.display().to_string();
    let mut args = vec![
        "--policy",
        &policy,
        "--state",
        state,
        "--skew-window-ms",
        "3600000",
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// The uninterrupted run a test compares against: `srv` (stopped after) takes `sessions`
/// streams of `n` requests from `threads` connections to the end; every answer.
pub fn reference_run(srv: Server, ts: &str, sessions: u64, threads: u64, n: u64) -> Outcomes {
    let zero = vec![0u64; sessions as usize];
    let acked = Arc::new(AtomicU64::new(0));
    let (reference, done) = drive(&srv.addr, ts, &zero, &acked, sessions, threads, n);
    assert!(done.iter().all(|i| *i == n), "the reference run finished");
    reference
}

/// A `warden serve --listen 127.0.0.1:0` process.
pub struct Server {
    pub child: Child,
    pub addr: String,
    /// What it said on stderr, line by line.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        Server::start_at("127.0.0.1:0", args)
    }

    /// On a given address (a fixed port: a server can be down and then up at one URL).
    /// `WARDEN_SERVE_CPUS=LIST` (e.g. `0`) runs the server under `taskset -c LIST`, for the
    /// load test's figures on one core against two.
    pub fn start_at(listen: &str, args: &[&str]) -> Server {
        let mut command = match std::env::var("WARDEN_SERVE_CPUS") {
            Ok(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpus, env!("CARGO_BIN_EXE_warden")]);
                c
            }
            Err(_) => Command::new(env!("CARGO_BIN_EXE_warden")),
        };
        let mut child = command
            .args(["serve", "--listen", listen])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start warden serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let said = Arc::new(Mutex::new(Vec::new()));
        let keep = said.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                keep.lock().unwrap().push(line.clone());
                if let Some(rest) = line.strip_prefix("warden: listening on http://") {
                    let _ = tx.send(rest.trim_end_matches("/acs").to_string());
                } else {
                    eprintln!("[server] {line}");
                }
            }
        });
        let addr = rx
            .recv_timeout(WAIT)
            .expect("the server says where it listens");
        Server {
            child,
            addr,
            stderr: said,
        }
    }

    /// The first stderr line containing `needle`, if any yet.
    pub fn said(&self, needle: &str) -> Option<String> {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(needle))
            .cloned()
    }

    /// A field of `/proc/PID/status` in kB (`VmRSS`: resident now, `VmHWM`: the peak).
    pub fn memory_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// SIGKILL: no chance to flush anything.
    /// CPU time the server has used so far (user + system, from `/proc/PID/stat`), in
    /// seconds; 0 where `/proc` is missing.
    #[allow(dead_code)]
    pub fn cpu_seconds(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return 0.0;
        };
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // utime and stime are fields 14 and 15 (1-based), 11 and 12 after the ')'.
        (ticks(11) + ticks(12)) / 100.0
    }

    /// CPU time by thread name (user + system seconds, from `/proc/PID/task/*/stat`).
    #[allow(dead_code)]
    pub fn cpu_by_thread(&self) -> std::collections::BTreeMap<String, f64> {
        let mut out = std::collections::BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else {
            return out;
        };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            let name = stat
                .split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .map_or("?", |(n, _)| n)
                .to_string();
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            *out.entry(name).or_insert(0.0) += (ticks(11) + ticks(12)) / 100.0;
        }
        out
    }

    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A keep-alive HTTP/1.1 connection.
pub struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(WAIT))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::new(s),
        })
    }

    pub fn post(&mut self, body: &[u8]) -> std::io::Result<Value> {
        self.post_status(body).map(|(_, v)| v)
    }

    /// POSTs `body` to `/acs`; the answer's status and JSON body.
    pub fn post_status(&mut self, body: &[u8]) -> std::io::Result<(u16, Value)> {
        let head = format!(
            "POST /acs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send_raw(head.as_bytes())?;
        self.send_raw(body)?;
        self.read_answer()
    }

    /// POSTs `body` to `/acs` with extra header lines (each ending in `\r\n`).
    pub fn post_with(&mut self, body: &[u8], headers: &str) -> std::io::Result<(u16, Value)> {
        self.send_post(body, headers)?;
        self.read_answer()
    }

    /// Writes a POST of `body` to `/acs`, with extra header lines, in one write.
    fn send_post(&mut self, body: &[u8], headers: &str) -> std::io::Result<()> {
        let mut request = format!(
            "POST /acs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.send_raw(&request)
    }

    /// Writes bytes as they are (a request in pieces, or a partial one).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.get_mut().write_all(bytes)
    }

    /// POSTs `body` to `/acs` in one write, as HTTP clients do; the answer's status and
    /// body bytes (for load tests, which should not spend the machine on the client).
    #[allow(dead_code)]
    pub fn post_bytes(&mut self, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        self.send_post(body, "")?;
        self.read_answer_bytes()
    }

    /// Reads one HTTP answer: its status and JSON body.
    pub fn read_answer(&mut self) -> std::io::Result<(u16, Value)> {
        let (code, body) = self.read_answer_bytes()?;
        let v = serde_json::from_slice(&body).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok((code, v))
    }

    /// Reads one HTTP answer: its status and body bytes.
    pub fn read_answer_bytes(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let mut len = None;
        let mut status = String::new();
        self.stream.read_line(&mut status)?;
        if status.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP status line: {status:?}")))?;
        loop {
            let mut line = String::new();
            if self.stream.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse::<usize>().ok();
                }
            }
        }
        let mut body = vec![0; len.unwrap_or(0)];
        self.stream.read_exact(&mut body)?;
        Ok((code, body))
    }

    /// Whether the server closed the connection: the next read is end of file (within the
    /// read timeout).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }

    pub fn set_read_timeout(&self, d: Duration) {
        self.stream.get_ref().set_read_timeout(Some(d)).unwrap();
    }
}

pub const POLICY: &str = r#"use std.taint

rule tainted_send on toolCallRequest
  when tool.name == "send" and turns_since(untrusted) <= 1
  => deny "taint": "a send right after untrusted content"

rule rate on toolCallRequest
  when count(toolCallRequest, this turn) >= 3
  => deny "rate": "too many calls this turn"

default allow
"#;

/// The `i`-th request of session `s`'s deterministic stream of `n` requests: handshake,
/// sessionStart, then turns of (turnStart, toolCallResult with tool output, toolCallRequests
/// of `send` and `ls`, turnEnd), and sessionEnd last. `timestamp` is fixed per run.
pub fn stream_request(s: u64, i: u64, n: u64, timestamp: &str) -> Value {
    let sid = ids::counter(0x5e55_0000_u32.wrapping_add(s as u32), s);
    let rid = ids::counter(s as u32, i + 1);
    let turn_no = i.saturating_sub(2) / 6;
    let turn = format!("turn-{turn_no}");
    let (method, payload, in_turn) = if i == 0 {
        (
            "handshake/hello",
            json!({
                "acs_versions_supported": ["0.1.0"],
                "methods_implemented": ["steps/sessionStart", "steps/turnStart",
                    "steps/toolCallRequest", "steps/toolCallResult", "steps/turnEnd",
                    "steps/sessionEnd", "system/ping"],
                "transports_supported": ["http"],
                "provenance_producer": "deterministic",
            }),
            false,
        )
    } else if i == 1 {
        ("steps/sessionStart", json!({}), false)
    } else if i == n - 1 {
        ("steps/sessionEnd", json!({"reason": "completed"}), false)
    } else {
        match (i - 2) % 6 {
            0 => (
                "steps/turnStart",
                json!({"turn_id": turn, "triggered_by": "user_message"}),
                true,
            ),
            1 if (s + turn_no).is_multiple_of(2) => (
                "steps/toolCallResult",
                json!({"tool": {"name": "fetch"}, "exit_status": "success",
                       "outputs": [{"value": "page", "provenance": {
                           "provenance_id": format!("p-{s}-{i}"), "origin": "tool_output",
                           "source_id": "fetch"}}]}),
                true,
            ),
            1 => (
                "steps/toolCallRequest",
                json!({"tool": {"name": "ls"}, "arguments": {}}),
                true,
            ),
            2..=4 => (
                "steps/toolCallRequest",
                json!({"tool": {"name": if i.is_multiple_of(2) { "send" } else { "ls" }},
                       "arguments": {"to": {"value": "x"}}}),
                true,
            ),
            _ => (
                "steps/turnEnd",
                json!({"turn_id": turn, "outcome": "completed"}),
                true,
            ),
        }
    };
    let mut metadata = json!({"agent_id": "agent", "session_id": sid});
    if in_turn {
        metadata["turn_id"] = json!(turn);
    }
    envelope::request(i, method, &rid, timestamp, metadata, payload)
}

/// What is compared between runs: the decision (or error code), reason codes, chain head.
pub fn outcome(r: &Value) -> Value {
    match r.get("result") {
        Some(res) => json!([res["decision"], res["reason_codes"], res["chain_hash"]]),
        None => json!(["error", r["error"]["code"]]),
    }
}

pub fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// What a driven load received: (session, request index) → answer.
pub type Outcomes = std::collections::HashMap<(u64, u64), Value>;

/// Drives every session from `next[s]` to the end (or until the server dies). Returns the
/// outcomes received and where each session stopped.
#[allow(dead_code)]
pub fn drive(
    addr: &str,
    ts: &str,
    next: &[u64],
    acked: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    sessions: u64,
    threads: u64,
    n: u64,
) -> (Outcomes, Vec<u64>) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let addr = addr.to_string();
            let ts = ts.to_string();
            let mine: Vec<(u64, u64)> = (0..sessions)
                .filter(|s| s % threads == t)
                .map(|s| (s, next[s as usize]))
                .collect();
            let acked = acked.clone();
            std::thread::spawn(move || {
                let mut out = Outcomes::new();
                let mut pos: HashMap<u64, u64> = mine.iter().copied().collect();
                let Ok(mut conn) = Conn::open(&addr) else {
                    return (out, pos);
                };
                for i in 0..n {
                    for (s, _) in &mine {
                        if pos[s] != i {
                            continue;
                        }
                        let body = serde_json::to_vec(&stream_request(*s, i, n, &ts)).unwrap();
                        match conn.post(&body) {
                            Ok(r) => {
                                out.insert((*s, i), r);
                                pos.insert(*s, i + 1);
                                acked.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(_) => return (out, pos),
                        }
                    }
                }
                (out, pos)
            })
        })
        .collect();
    let mut all = Outcomes::new();
    let mut pos = next.to_vec();
    for h in handles {
        let (o, p) = h.join().unwrap();
        all.extend(o);
        for (s, i) in p {
            pos[s as usize] = i;
        }
    }
    (all, pos)
}

/// Reads a starting server's stderr (echoed as `[server] …`) for the addresses it announces,
/// and waits for the ones wanted: the ACS listener (`warden: listening on http://…`) and the
/// operator endpoint (`warden: operator endpoint on http://…`), as `HOST:PORT`.
pub fn announced(
    stderr: std::process::ChildStderr,
    want_acs: bool,
    want_operator: bool,
) -> (Option<String>, Option<String>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if let Some(a) = line.strip_prefix("warden: listening on http://") {
                let _ = tx.send((true, a.trim_end_matches("/acs").to_string()));
            } else if let Some(a) = line.strip_prefix("warden: operator endpoint on http://") {
                let _ = tx.send((false, a.trim_end_matches('/').to_string()));
            }
            eprintln!("[server] {line}");
        }
    });
    let (mut acs, mut operator) = (None, None);
    while (want_acs && acs.is_none()) || (want_operator && operator.is_none()) {
        let (is_acs, addr) = rx
            .recv_timeout(WAIT)
            .expect("the server says where it listens");
        if is_acs {
            acs = Some(addr);
        } else {
            operator = Some(addr);
        }
    }
    (acs, operator)
}

/// One request (`METHOD path`, with `headers` — each ending in `\r\n` — and no body) on a
/// connection of its own to `addr`: the status and the body as text.
pub fn http(addr: &str, method: &str, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let (status, body) = warden::adapters::core_agent::parse_http_response(&out).unwrap();
    (status, String::from_utf8(body).unwrap())
}

/// `GET /metrics` on an operator endpoint at `operator` (`HOST:PORT`) with `token`:
/// `name → value`.
#[allow(dead_code)]
pub fn operator_metrics(operator: &str, token: &str) -> HashMap<String, u64> {
    let auth = format!("Authorization: Bearer {token}\r\n");
    let (status, body) = http(operator, "GET", "/metrics", &auth);
    assert_eq!(status, 200);
    body.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}
