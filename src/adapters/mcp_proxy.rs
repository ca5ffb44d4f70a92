//! `warden mcp-proxy`: a gateway between an MCP client and an MCP server (docs/mcp.md).
//!
//! The server is a child process on stdio (newline-delimited JSON-RPC, MCP's stdio transport),
//! or an endpoint reached over Streamable HTTP (`super::mcp_upstream`); the client talks to the
//! proxy on its standard input and output (or over HTTP, `crate::server::mcp_http`). The proxy
//! opens one ACS session on the embedded [`Guardian`] (a `handshake/hello` declaring MCP, then
//! `steps/sessionStart`) and, for each message:
//!
//! | message | what the proxy does |
//! |---|---|
//! | client request `initialize`, `tools/list`, `tools/call`, `resources/read`, `prompts/get` | decided as `protocols/MCP/<method>`; forwarded when allowed, answered by the proxy when not |
//! | any other client request (`ping`, `resources/list`, …) | forwarded (no ACS hook exists for it) |
//! | server response to a forwarded request (but `ping`) | decided as `protocols/MCP/result`; passed back when allowed, replaced when not |
//! | notifications, server-to-client requests and their answers | passed through |
//!
//! A refused `tools/call` is answered with a result whose `isError` is true and whose text
//! content says why (what MCP clients show the model); any other refused request or result
//! with the JSON-RPC error [`DENIED`]. A decision the proxy cannot carry out (`ask`, `defer`,
//! `modify`) refuses too, and so does a Guardian error: the gateway fails closed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::mcp_upstream::{Endpoint, HttpUpstream, Posted};
use crate::acs::{envelope, ids, time};
use crate::guardian::Guardian;

/// Where the MCP server is.
#[derive(Debug, Clone, PartialEq)]
pub enum Upstream {
    /// A command and its arguments, started as a child process speaking MCP on stdio.
    Command(Vec<String>),
    /// An `http://` Streamable HTTP endpoint (`…/mcp`).
    Url(String),
}

impl Upstream {
    /// Whether the server can be addressed at all (a URL Warden can reach), before any
    /// session is opened.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Upstream::Command(c) if c.is_empty() => Err("no MCP server command was given".into()),
            Upstream::Command(_) => Ok(()),
            Upstream::Url(url) => Endpoint::parse(url, "/").map(|_| ()),
        }
    }
}

/// The JSON-RPC error code of a request or result the policy refused (in the range JSON-RPC
/// leaves to implementations).
pub const DENIED: i64 = -32010;

/// The MCP methods ACS wraps (`protocols/MCP/<method>`), each decided on its own hook.
pub const WRAPPED: [&str; 5] = [
    "initialize",
    "tools/list",
    "tools/call",
    "resources/read",
    "prompts/get",
];

/// The method a wrapped MCP result is decided as (Warden's extension).
pub const RESULT_METHOD: &str = "protocols/MCP/result";

/// How the proxy names itself to the Guardian.
#[derive(Debug, Clone)]
pub struct Config {
    /// `metadata.agent_id` of every step.
    pub agent_id: String,
    /// The ACS session; a fresh one when `None`.
    pub session_id: Option<String>,
    /// Print each decision that refused something on standard error.
    pub quiet: bool,
    /// Set (by a signal handler, say) to stop the proxy as if the client had gone: the server
    /// is stopped and the ACS session ended.
    pub stop: Option<&'static AtomicBool>,
    /// When a new ACS turn starts (docs/mcp.md, "Turns").
    pub turns: Turns,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            agent_id: "mcp-proxy".into(),
            session_id: None,
            quiet: false,
            stop: None,
            turns: Turns::PerRequest,
        }
    }
}

/// When the proxy starts a new ACS turn. MCP has no turns of its own: a client's requests are
/// all the proxy sees, so a turn is cut from them, and `turns_since(…)` counts what is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turns {
    /// Each client request the policy decides (`tools/call`, `resources/read`…) opens a turn:
    /// `turns_since(untrusted) <= 3` then means "within the next three requests".
    PerRequest,
    /// A request after this long without one opens a turn: the requests of one burst (an
    /// agent working on one user message) share it.
    IdleGap(std::time::Duration),
    /// Only the client's `initialize` opens a turn: one turn per MCP connection.
    PerInitialize,
}

impl std::str::FromStr for Turns {
    type Err = String;

    /// `request`, `idle=SECONDS` or `initialize`.
    fn from_str(s: &str) -> Result<Turns, String> {
        match s {
            "request" => Ok(Turns::PerRequest),
            "initialize" => Ok(Turns::PerInitialize),
            _ => match s.strip_prefix("idle=").map(str::parse::<f64>) {
                Some(Ok(secs)) if secs.is_finite() && secs > 0.0 => {
                    Ok(Turns::IdleGap(std::time::Duration::from_secs_f64(secs)))
                }
                _ => Err(format!(
                    "{s:?}: expected `request`, `idle=SECONDS` (a positive number) or `initialize`"
                )),
            },
        }
    }
}

/// The turn a [`Gate`] is in: its id and when the last client request came.
struct Turn {
    id: String,
    number: u64,
    last: std::time::Instant,
}

/// A client request forwarded to the server, waiting for its response.
struct Pending {
    method: String,
    params: Option<Value>,
    request_id: Option<String>,
}

/// The decision on one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `allow` (and only `allow`) lets the message through.
    pub decision: String,
    /// Why, for the client: the reasoning and reason codes, or the Guardian's error.
    pub why: String,
    /// The reason codes the Guardian gave.
    pub reason_codes: Vec<Value>,
    /// The ACS `request_id` of the step.
    pub request_id: String,
}

impl Verdict {
    /// Whether the call may go ahead.
    pub fn allowed(&self) -> bool {
        self.decision == "allow"
    }
}

/// The ACS side of the proxy: one session on an embedded Guardian.
pub struct Gate {
    guardian: Arc<Guardian>,
    session_id: String,
    agent_id: String,
    seq: AtomicU64,
    turns: Turns,
    turn: Mutex<Turn>,
}

impl Gate {
    /// Opens the ACS session: `handshake/hello` declaring MCP, then `steps/sessionStart`.
    pub fn open(guardian: Arc<Guardian>, config: &Config) -> Result<Gate, String> {
        let session_id = config
            .session_id
            .clone()
            .unwrap_or_else(|| ids::random_v4(std::process::id() as u64));
        let gate = Gate {
            guardian,
            turn: Mutex::new(Turn {
                id: ids::random_v4(0x7u64),
                number: 1,
                last: std::time::Instant::now(),
            }),
            session_id,
            agent_id: config.agent_id.clone(),
            seq: AtomicU64::new(0),
            turns: config.turns,
        };
        let mut methods: Vec<String> = [
            "steps/sessionStart",
            "steps/sessionEnd",
            "steps/turnStart",
            "steps/turnEnd",
            "system/ping",
            RESULT_METHOD,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        methods.extend(WRAPPED.iter().map(|m| format!("protocols/MCP/{m}")));
        let hello = gate.send(
            "handshake/hello",
            json!({
                "acs_versions_supported": [envelope::ACS_VERSION],
                "methods_implemented": methods,
                "transports_supported": ["stdio", "http"],
                "provenance_producer": "deterministic",
                "profiles_supported": ["acs-core", "acs-audit", "acs-provenance"],
                "wrapped_protocols": [{"protocol": "MCP", "version": "2025-06-18"}],
            }),
        );
        if let Some(e) = hello.get("error") {
            return Err(format!("the Guardian refused the handshake: {e}"));
        }
        let start = gate.decide(
            "steps/sessionStart",
            json!({"platform_context": {"platform": "mcp-proxy"}}),
        );
        if !start.allowed() {
            return Err(format!("the session was not started: {}", start.why));
        }
        gate.start_turn();
        Ok(gate)
    }

    /// `steps/turnStart` of the current turn.
    fn start_turn(&self) {
        let id = self.turn_id();
        let _ = self.send(
            "steps/turnStart",
            json!({"turn_id": id, "triggered_by": "user_message"}),
        );
    }

    fn turn_id(&self) -> String {
        self.turn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .id
            .clone()
    }

    /// Opens a new turn before a client's request `method` when [`Turns`] says so: the open
    /// turn's `steps/turnEnd`, then the next one's `steps/turnStart`.
    fn advance(&self, method: &str) {
        let ended = {
            let mut t = self.turn.lock().unwrap_or_else(|e| e.into_inner());
            let now = std::time::Instant::now();
            let new = match self.turns {
                Turns::PerRequest => true,
                Turns::IdleGap(gap) => now.duration_since(t.last) >= gap,
                Turns::PerInitialize => method == "initialize",
            };
            t.last = now;
            if !new {
                return;
            }
            let ended = t.id.clone();
            t.number += 1;
            t.id = ids::random_v4(0x7u64 + t.number);
            ended
        };
        let _ = self.send(
            "steps/turnEnd",
            json!({"turn_id": ended, "outcome": "completed"}),
        );
        self.start_turn();
    }

    /// The ACS session id the proxy decides under.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    fn send(&self, method: &str, payload: Value) -> Value {
        self.send_with_id(method, payload).1
    }

    fn send_with_id(&self, method: &str, payload: Value) -> (String, Value) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let request_id = ids::random_v4(seq);
        let metadata = json!({
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "turn_id": self.turn_id(),
            "platform": "mcp-proxy",
        });
        let mut request = envelope::request(
            seq,
            method,
            &request_id,
            &time::now_rfc3339_ms(),
            metadata,
            payload,
        );
        request["params"]["nonce"] = json!(ids::random_v4(seq).replace('-', ""));
        let bytes = serde_json::to_vec(&request).unwrap_or_default();
        let response = self.guardian.handle(&bytes);
        let value = serde_json::from_slice(&response).unwrap_or(Value::Null);
        (request_id, value)
    }

    /// Decides one step; a Guardian error is a refusal.
    pub fn decide(&self, method: &str, payload: Value) -> Verdict {
        let (request_id, r) = self.send_with_id(method, payload);
        if let Some(result) = r.get("result") {
            let decision = result
                .get("decision")
                .and_then(Value::as_str)
                .unwrap_or("deny")
                .to_string();
            let reason_codes = result
                .get("reason_codes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let reasoning = result.get("reasoning").and_then(Value::as_str);
            let codes: Vec<&str> = reason_codes.iter().filter_map(Value::as_str).collect();
            let why = match (reasoning, codes.is_empty()) {
                (Some(r), true) => r.to_string(),
                (Some(r), false) => format!("{r} ({})", codes.join(", ")),
                (None, false) => codes.join(", "),
                (None, true) => decision.clone(),
            };
            Verdict {
                decision,
                why,
                reason_codes,
                request_id,
            }
        } else {
            let message = r
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no answer from the Guardian");
            Verdict {
                decision: "error".into(),
                why: format!("the Guardian could not decide: {message}"),
                reason_codes: Vec::new(),
                request_id,
            }
        }
    }

    /// Decides a client's MCP request, if ACS wraps its method.
    pub fn decide_request(&self, message: &Value) -> Option<Verdict> {
        let method = message.get("method").and_then(Value::as_str)?;
        if !WRAPPED.contains(&method) {
            return None;
        }
        self.advance(method);
        Some(self.decide(&format!("protocols/MCP/{method}"), message.clone()))
    }

    /// Decides a server's response to a request of `method` (with `params`) that the step
    /// `request_id` decided.
    pub fn decide_result(
        &self,
        message: &Value,
        method: &str,
        params: Option<&Value>,
        request_id: Option<&str>,
    ) -> Verdict {
        let mut payload = match message {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let mut request = json!({"method": method});
        if let Some(p) = params {
            request["params"] = p.clone();
        }
        payload.insert("request".into(), request);
        if let Some(r) = request_id {
            payload.insert("request_id_ref".into(), json!(r));
        }
        self.decide(RESULT_METHOD, Value::Object(payload))
    }

    /// Ends the ACS session (its audit chain is sealed).
    pub fn end(&self) {
        let _ = self.send("steps/sessionEnd", json!({"reason": "completed"}));
    }
}

/// What the client gets in place of a refused request or result.
pub fn refusal(id: &Value, method: &str, verdict: &Verdict, stage: &str) -> Value {
    let text = format!(
        "Warden refused this {stage} ({}): {}",
        verdict.decision, verdict.why
    );
    if method == "tools/call" {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": true,
        }})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": DENIED,
            "message": text,
            "data": {
                "decision": verdict.decision,
                "reason_codes": verdict.reason_codes,
                "request_id": verdict.request_id,
            },
        }})
    }
}

/// Where the proxy sends what the client is to get: one JSON-RPC message at a time, without
/// a line end. The stdio transport writes it as a line on standard output; an HTTP front end
/// routes a response to the request waiting for it.
pub trait ClientSink: Send + Sync {
    /// Sends one message to the client.
    fn send(&self, message: &[u8]);
}

/// The client on the process's standard output.
struct StdoutSink(Mutex<std::io::Stdout>);

impl ClientSink for StdoutSink {
    fn send(&self, message: &[u8]) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = w
            .write_all(message)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush());
    }
}

fn to_client(sink: &dyn ClientSink, message: &Value) {
    sink.send(&serde_json::to_vec(message).unwrap_or_default());
}

/// How messages reach the server.
enum ServerLink {
    /// The child's standard input (`None` once closed).
    Stdio(Mutex<Option<ChildStdin>>),
    /// POSTs to the server's endpoint; `listening` once the GET stream has been started.
    Http {
        upstream: HttpUpstream,
        url: String,
        listening: AtomicBool,
    },
}

/// The proxy's running parts, shared by its pumps.
struct Shared {
    gate: Gate,
    pending: Mutex<HashMap<String, Pending>>,
    sink: Arc<dyn ClientSink>,
    server: ServerLink,
    quiet: bool,
}

impl Shared {
    fn say(&self, what: &str) {
        if !self.quiet {
            eprintln!("warden mcp-proxy: {what}");
        }
    }
}

/// A running proxy: the ACS session open, the MCP server started (a child process whose
/// output is pumped to the client's sink) or reached over HTTP. The client's messages come in
/// through [`Proxy::from_client`].
pub struct Proxy {
    shared: Arc<Shared>,
    /// The child process and the thread pumping its output (stdio servers only).
    child: Option<(Child, std::thread::JoinHandle<()>)>,
}

impl Proxy {
    /// Opens the ACS session and starts (or, over HTTP, addresses) the server.
    pub fn start(
        guardian: Arc<Guardian>,
        server: &Upstream,
        config: &Config,
        sink: Arc<dyn ClientSink>,
    ) -> Result<Proxy, String> {
        let server = match server {
            Upstream::Command(command) => command,
            Upstream::Url(url) => {
                let endpoint = Endpoint::parse(url, "/")?;
                let gate = Gate::open(guardian, config)?;
                let shared = Arc::new(Shared {
                    gate,
                    pending: Mutex::new(HashMap::new()),
                    sink,
                    server: ServerLink::Http {
                        upstream: HttpUpstream::new(endpoint),
                        url: url.clone(),
                        listening: AtomicBool::new(false),
                    },
                    quiet: config.quiet,
                });
                return Ok(Proxy {
                    shared,
                    child: None,
                });
            }
        };
        let (program, args) = server
            .split_first()
            .ok_or("no MCP server command was given")?;
        // The server first: a command that does not run leaves no session behind.
        let mut child: Child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let gate = match Gate::open(guardian, config) {
            Ok(g) => g,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let server_in = child.stdin.take().ok_or("no stdin for the server")?;
        let server_out = child.stdout.take().ok_or("no stdout for the server")?;
        let shared = Arc::new(Shared {
            gate,
            pending: Mutex::new(HashMap::new()),
            sink,
            server: ServerLink::Stdio(Mutex::new(Some(server_in))),
            quiet: config.quiet,
        });
        let down = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let reader = BufReader::new(server_out);
                for line in reader.split(b'\n') {
                    let Ok(line) = line else { break };
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        from_server(&shared, &line);
                    }
                }
                answer_unanswered(
                    &shared,
                    "the MCP server ended before answering (its standard error says why)",
                );
            })
        };
        Ok(Proxy {
            shared,
            child: Some((child, down)),
        })
    }

    /// One message from the client (a JSON-RPC message, without its line end). An error is
    /// the server's input gone: the server has ended.
    pub fn from_client(&self, line: &[u8]) -> std::io::Result<()> {
        from_client(&self.shared, line)
    }

    /// Whether the server has closed its output (it has ended, or is ending). A server over
    /// HTTP is never closed from here: each exchange stands alone.
    pub fn server_closed(&self) -> bool {
        self.child
            .as_ref()
            .is_some_and(|(_, down)| down.is_finished())
    }

    /// A handle that takes the client's messages, for transports that take them on other
    /// threads.
    pub fn client(&self) -> ClientHandle {
        ClientHandle(self.shared.clone())
    }

    /// The client is gone: closes the server's input, gives it five seconds to end, stops it
    /// otherwise, ends the ACS session (sealing its audit chain). Returns the server's exit
    /// code (1 when it had none; 0 for a server over HTTP, whose session is ended with a
    /// DELETE).
    pub fn finish(self) -> i32 {
        let (mut child, down) = match (&self.shared.server, self.child) {
            (ServerLink::Http { upstream, .. }, _) => {
                upstream.close();
                self.shared.gate.end();
                return 0;
            }
            (ServerLink::Stdio(input), Some(c)) => {
                drop(input.lock().unwrap_or_else(|e| e.into_inner()).take());
                c
            }
            (ServerLink::Stdio(_), None) => {
                self.shared.gate.end();
                return 1;
            }
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    break child.wait().ok();
                }
            }
        };
        let _ = down.join();
        self.shared.gate.end();
        status.and_then(|s| s.code()).unwrap_or(1)
    }
}

/// Takes the client's messages into a running [`Proxy`] (see [`Proxy::from_client`]).
#[derive(Clone)]
pub struct ClientHandle(Arc<Shared>);

impl ClientHandle {
    /// Handles one line from the client.
    pub fn from_client(&self, line: &[u8]) -> std::io::Result<()> {
        from_client(&self.0, line)
    }
}

/// Runs the proxy with the process's standard input and output as the client's side, until
/// the client closes its side or the server closes its output. Returns the exit code (the
/// server's, or 1; 0 for a server over HTTP).
pub fn run(guardian: Arc<Guardian>, server: &Upstream, config: &Config) -> Result<i32, String> {
    let sink: Arc<dyn ClientSink> = Arc::new(StdoutSink(Mutex::new(std::io::stdout())));
    let proxy = Proxy::start(guardian, server, config, sink)?;
    let (done, client_done) = std::sync::mpsc::channel::<()>();
    let shared = proxy.shared.clone();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().split(b'\n') {
            let Ok(line) = line else { break };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if from_client(&shared, &line).is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    loop {
        match client_done.recv_timeout(std::time::Duration::from_millis(50)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                if !proxy.server_closed() && !stopped(config) => {}
            _ => break,
        }
    }
    Ok(proxy.finish())
}

/// Whether [`Config::stop`] was set.
pub fn stopped(config: &Config) -> bool {
    config.stop.is_some_and(|s| s.load(Ordering::Relaxed))
}

/// Sends one client message on to the server. `request` is the id of a client request (its
/// answer is awaited); over HTTP a request is POSTed on a thread of its own, so a long tool
/// call does not hold up the next message, while notifications and answers go in order.
fn to_server(shared: &Arc<Shared>, line: &[u8], request: Option<&Value>) -> std::io::Result<()> {
    match &shared.server {
        ServerLink::Stdio(input) => {
            let mut w = input.lock().unwrap_or_else(|e| e.into_inner());
            match w.as_mut() {
                Some(w) => {
                    w.write_all(line)?;
                    w.write_all(b"\n")?;
                    w.flush()
                }
                None => Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
            }
        }
        ServerLink::Http { .. } => {
            match request {
                Some(id) => {
                    let (shared, line, id) = (shared.clone(), line.to_vec(), id.clone());
                    std::thread::spawn(move || post(&shared, &line, Some(&id)));
                }
                None => post(shared, line, None),
            }
            Ok(())
        }
    }
}

/// One exchange with a server over HTTP: the message POSTed, each message of the answer taken
/// in as if the server had written it on stdio. A request the server did not answer is
/// answered for it, with the reason, so the client is never left waiting.
fn post(shared: &Arc<Shared>, line: &[u8], request: Option<&Value>) {
    let ServerLink::Http {
        upstream,
        url,
        listening,
    } = &shared.server
    else {
        return;
    };
    let posted = upstream.post(line, &mut |message| {
        if let Ok(v) = serde_json::from_slice::<Value>(message) {
            if let Some(version) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
                upstream.set_protocol_version(version);
            }
        }
        from_server(shared, message);
    });
    let failure = match posted {
        Ok(Posted::Delivered) => None,
        Ok(Posted::Refused(status, text)) => Some(format!(
            "the MCP server answered HTTP {status}{}",
            if text.is_empty() {
                String::new()
            } else {
                format!(": {text}")
            }
        )),
        Err(e) => Some(format!("the MCP server at {url} could not be reached: {e}")),
    };
    if let Some(id) = request {
        let unanswered = shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id_key(id))
            .is_some();
        if unanswered || failure.is_some() {
            let why = failure
                .clone()
                .unwrap_or_else(|| "the MCP server ended the exchange without answering".into());
            shared.say(&why);
            to_client(&*shared.sink, &unanswered_error(id, &why));
        }
    } else if let Some(why) = failure {
        shared.say(&why);
    }
    if upstream.session().is_some() && !listening.swap(true, Ordering::SeqCst) {
        let shared = shared.clone();
        std::thread::spawn(move || listen(&shared));
    }
}

/// Holds the server's GET stream open for what it sends unasked, reconnecting a few times
/// when it drops.
fn listen(shared: &Arc<Shared>) {
    let ServerLink::Http { upstream, .. } = &shared.server else {
        return;
    };
    for attempt in 0..5u32 {
        // `Ok(false)`: the server has no GET stream (405), which MCP allows.
        if let Ok(false) = upstream.listen(&mut |message| from_server(shared, message)) {
            return;
        }
        if upstream.is_closed() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200 << attempt));
    }
    shared.say(
        "the MCP server's event stream kept dropping; server notifications are no longer received",
    );
}

fn from_client(shared: &Arc<Shared>, line: &[u8]) -> std::io::Result<()> {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        // Not ours to judge: the server answers a parse error.
        return to_server(shared, line, None);
    };
    if message.is_array() {
        // A JSON-RPC batch (MCP 2025-06-18 has none) would carry requests past the policy.
        to_client(
            &*shared.sink,
            &json!({"jsonrpc": "2.0", "id": null, "error": {
                "code": -32600,
                "message": "warden mcp-proxy does not take JSON-RPC batches: send each message alone",
            }}),
        );
        return Ok(());
    }
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").filter(|v| !v.is_null());
    let (Some(method), Some(id)) = (method, id) else {
        // A notification, or the client's answer to a server's request. A wrapped method
        // sent without an id is decided all the same, and dropped when refused.
        if let Some(v) = shared.gate.decide_request(&message) {
            if !v.allowed() {
                shared.say(&format!(
                    "dropped {} without an id ({}): {}",
                    method.unwrap_or("?"),
                    v.decision,
                    v.why
                ));
                return Ok(());
            }
        }
        return to_server(shared, line, None);
    };
    let verdict = shared.gate.decide_request(&message);
    if let Some(v) = &verdict {
        if !v.allowed() {
            shared.say(&format!("refused {method} ({}): {}", v.decision, v.why));
            to_client(&*shared.sink, &refusal(id, method, v, "request"));
            return Ok(());
        }
    }
    if method != "ping" {
        shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id_key(id),
                Pending {
                    method: method.to_string(),
                    params: message.get("params").cloned(),
                    request_id: verdict.map(|v| v.request_id),
                },
            );
    }
    let sent = to_server(shared, line, Some(id));
    if sent.is_err() {
        // The server's input is gone: it has ended, and will never answer.
        answer_unanswered(shared, "the MCP server is not running (it has ended)");
    }
    sent
}

fn from_server(shared: &Shared, line: &[u8]) {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        shared.say("the server wrote a line that is not JSON; dropped");
        return;
    };
    let is_response = message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some());
    let pending = match (is_response, message.get("id")) {
        (true, Some(id)) => shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id_key(id)),
        _ => None,
    };
    let Some(p) = pending else {
        // Notifications, the server's own requests, answers to `ping`.
        shared.sink.send(line);
        return;
    };
    let v = shared.gate.decide_result(
        &message,
        &p.method,
        p.params.as_ref(),
        p.request_id.as_deref(),
    );
    if v.allowed() {
        shared.sink.send(line);
    } else {
        shared.say(&format!(
            "refused the result of {} ({}): {}",
            p.method, v.decision, v.why
        ));
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        to_client(&*shared.sink, &refusal(&id, &p.method, &v, "result"));
    }
}

/// Answers every request the server still owes with a JSON-RPC error saying why, so that a
/// client is never left waiting on a server that has ended (one that failed to start, such as
/// `npx` asking on a terminal it does not have whether to install a package, included).
fn answer_unanswered(shared: &Shared, why: &str) {
    let owed: Vec<String> = shared
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(key, _)| key)
        .collect();
    if !owed.is_empty() {
        shared.say(why);
    }
    for key in owed {
        let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
        to_client(&*shared.sink, &unanswered_error(&id, why));
    }
}

/// The error the proxy answers, for the server, a request the server will not answer.
fn unanswered_error(id: &Value, why: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": why}})
}

/// The key of a JSON-RPC id in the proxy's tables (its JSON text: `1` and `"1"` differ).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}
