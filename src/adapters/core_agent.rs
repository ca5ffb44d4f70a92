//! `warden hook --dialect=core-agent`: core-agent's observation hooks mapped onto ACS steps.
//!
//! core-agent runs a command per hook with a JSON envelope on stdin (`hook_event_name`:
//! `tool-start` {tool_name, tool_input}, `tool-end` {tool_name, tool_output}, `model-start`,
//! `agent-end`), through `/bin/sh -c`, possibly several at once. Each invocation is a new
//! process, so the session (its id, whether the Guardian accepted its handshake, the open turn,
//! the last tool call) is kept in a small session file, read, updated and replaced under an
//! exclusive lock ([`lock_session`]). The mapping (docs/serve.md):
//!
//! | core-agent | ACS steps sent |
//! |---|---|
//! | first hook of a session | `handshake/hello`, `steps/sessionStart` |
//! | `model-start`, no open turn | `steps/turnStart` (a new `turn_id`) |
//! | `model-start`, turn open | nothing (a model call inside the turn) |
//! | `tool-start` | (`turnStart` if no turn is open) `steps/toolCallRequest`, each `tool_input` member an argument with `agent_generated` provenance |
//! | `tool-end` | (`turnStart` if needed) `steps/toolCallResult`, `tool_output` as one output with `tool_output` provenance (`source_id` = the tool) |
//! | `agent-end` | `steps/turnEnd` (`outcome: completed`); with [`AgentEnd::Session`], then `steps/sessionEnd` |
//! | `--end-session` | `steps/sessionEnd` (`reason: completed`); the session file is removed |
//!
//! [`run`] sends the steps and moves the session on only over the steps the Guardian
//! accepted: a hook that cannot reach the Guardian leaves the session file as it was.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::acs::{crypto, envelope, ids, time};

/// What the hook remembers between invocations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HookSession {
    /// The ACS session id.
    pub session_id: String,
    /// The turn in progress, if any.
    pub turn_id: Option<String>,
    /// The Guardian accepted `steps/sessionStart`.
    pub started: bool,
    /// The Guardian accepted `handshake/hello` for this session.
    #[serde(default)]
    pub handshaken: bool,
    /// The request id of the last tool call, which its result refers to.
    pub last_tool_request: Option<String>,
    /// Requests sent so far (numbers the JSON-RPC ids).
    #[serde(default)]
    pub seq: u64,
    /// Hook invocations whose steps the Guardian all accepted.
    #[serde(default)]
    pub events: u64,
    /// When the last of them was (ms since the epoch): a session idle for longer than the
    /// hook's `--new-session-after` belongs to an earlier run of core-agent.
    #[serde(default)]
    pub last_at_ms: i64,
}

/// What core-agent's `agent-end` closes. core-agent fires it once per turn, from its
/// post-turn cleanup, and has no other end-of-run event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentEnd {
    /// `turnEnd`, then `sessionEnd`: the session file is removed and the next hook starts a
    /// new ACS session (for an agent run with one prompt).
    Session,
    /// `turnEnd` only (the default): the ACS session, and its taint and history, span
    /// core-agent's turns until `--end-session` or an idle gap ends it.
    #[default]
    Turn,
}

/// One planned request and the session as it is once the Guardian has accepted it.
#[derive(Debug, Clone)]
pub struct Step {
    /// The ACS request to send.
    pub request: Value,
    /// The session as it is after it.
    pub after: HookSession,
}

/// What the hook was asked to do.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A core-agent hook envelope.
    Event(&'a Value),
    /// `--end-session`.
    EndSession,
}

impl HookSession {
    /// A new session with a random id.
    pub fn fresh() -> HookSession {
        HookSession {
            session_id: ids::random_v4(0),
            ..HookSession::default()
        }
    }

    fn envelope(&mut self, method: &str, payload: Value, in_turn: bool) -> Value {
        self.seq += 1;
        let request_id = ids::random_v4(self.seq);
        let mut metadata = Map::new();
        metadata.insert("agent_id".into(), json!("core-agent"));
        metadata.insert("session_id".into(), json!(self.session_id));
        metadata.insert("platform".into(), json!("core-agent"));
        if in_turn {
            if let Some(t) = &self.turn_id {
                metadata.insert("turn_id".into(), json!(t));
            }
        }
        let mut request = envelope::request(
            self.seq,
            method,
            &request_id,
            &time::now_rfc3339_ms(),
            Value::Object(metadata),
            payload,
        );
        request["params"]["nonce"] = json!(ids::random_v4(self.seq).replace('-', ""));
        request
    }

    fn push(&mut self, out: &mut Vec<Step>, method: &str, payload: Value, in_turn: bool) {
        let request = self.envelope(method, payload, in_turn);
        out.push(Step {
            request,
            after: self.clone(),
        });
    }

    fn open_turn(&mut self, out: &mut Vec<Step>, triggered_by: &str) {
        if self.turn_id.is_none() {
            let t = ids::random_v4(self.seq + 1_000_000);
            self.turn_id = Some(t.clone());
            self.push(
                out,
                "steps/turnStart",
                json!({"turn_id": t, "triggered_by": triggered_by}),
                true,
            );
        }
    }

    fn start(&mut self, out: &mut Vec<Step>) {
        if !self.handshaken {
            let methods = [
                "steps/sessionStart",
                "steps/turnStart",
                "steps/toolCallRequest",
                "steps/toolCallResult",
                "steps/turnEnd",
                "steps/sessionEnd",
                "system/ping",
            ];
            self.handshaken = true;
            self.push(
                out,
                "handshake/hello",
                json!({
                    "acs_versions_supported": [crate::acs::envelope::ACS_VERSION],
                    "methods_implemented": methods,
                    "transports_supported": ["http", "stdio"],
                    "provenance_producer": "deterministic",
                    "profiles_supported": ["acs-core", "acs-provenance"],
                }),
                false,
            );
        }
        if !self.started {
            self.started = true;
            self.push(
                out,
                "steps/sessionStart",
                json!({"platform_context": {"platform": "core-agent"}}),
                false,
            );
        }
    }

    fn end_turn(&mut self, out: &mut Vec<Step>, turn_outcome: &str) {
        if let Some(t) = self.turn_id.clone() {
            let request = self.envelope(
                "steps/turnEnd",
                json!({"turn_id": t, "outcome": turn_outcome}),
                true,
            );
            self.turn_id = None;
            out.push(Step {
                request,
                after: self.clone(),
            });
        }
    }

    fn end(&mut self, out: &mut Vec<Step>, turn_outcome: &str) {
        self.end_turn(out, turn_outcome);
        self.push(
            out,
            "steps/sessionEnd",
            json!({"reason": "completed"}),
            false,
        );
    }
}

/// The hook event's name, checked against core-agent's vocabulary.
pub fn event_name(input: &Value) -> Result<&str, String> {
    let event = input
        .get("hook_event_name")
        .and_then(Value::as_str)
        .ok_or("the hook envelope has no hook_event_name")?;
    match event {
        "tool-start" | "tool-end" | "model-start" | "agent-end" => Ok(event),
        other => Err(format!(
            "unknown core-agent hook event {other:?} (expected tool-start, tool-end, model-start or agent-end)"
        )),
    }
}

/// Maps one core-agent hook envelope onto the ACS requests to send, updating the session
/// (`agent-end` closes the turn only: [`AgentEnd::Turn`]).
pub fn map_core_agent(input: &Value, s: &mut HookSession) -> Result<Vec<Value>, String> {
    let steps = plan(Input::Event(input), s, AgentEnd::Turn)?;
    if let Some(last) = steps.last() {
        *s = last.after.clone();
    }
    Ok(steps.into_iter().map(|st| st.request).collect())
}

/// The requests one hook sends, each with the session as it is once that request is accepted.
/// `s` itself is not changed.
pub fn plan(input: Input<'_>, s: &HookSession, agent_end: AgentEnd) -> Result<Vec<Step>, String> {
    let mut s = s.clone();
    let mut out = Vec::new();
    let input = match input {
        Input::EndSession => {
            if s.started {
                s.end(&mut out, "interrupted");
            }
            return Ok(out);
        }
        Input::Event(v) => v,
    };
    let event = event_name(input)?;
    let tool = || {
        input
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string()
    };
    if event == "agent-end" && !s.started {
        // Nothing was opened: nothing to close.
        return Ok(out);
    }
    s.start(&mut out);
    match event {
        "model-start" => s.open_turn(&mut out, "user_message"),
        "tool-start" => {
            s.open_turn(&mut out, "agent_loop");
            let name = tool();
            let mut args = Map::new();
            let prefix = ids::random_v4(s.seq + 2_000_000);
            let mut arg = |k: &str, v: &Value| {
                args.insert(
                    k.to_string(),
                    json!({"value": v, "provenance": {
                        "provenance_id": format!("{prefix}:{k}"),
                        "origin": "agent_generated",
                    }}),
                );
            };
            match input.get("tool_input") {
                Some(Value::Object(m)) => {
                    for (k, v) in m {
                        arg(k, v);
                    }
                }
                Some(v) if !v.is_null() => arg("input", v),
                _ => {}
            }
            let request = s.envelope(
                "steps/toolCallRequest",
                json!({"tool": {"name": name}, "arguments": args}),
                true,
            );
            s.last_tool_request = request
                .pointer("/params/request_id")
                .and_then(Value::as_str)
                .map(str::to_string);
            out.push(Step {
                request,
                after: s.clone(),
            });
        }
        "tool-end" => {
            s.open_turn(&mut out, "agent_loop");
            let name = tool();
            let value = input.get("tool_output").cloned().unwrap_or(Value::Null);
            let mut payload = json!({
                "tool": {"name": name},
                "exit_status": "success",
                "outputs": [{"value": value, "provenance": {
                    "provenance_id": ids::random_v4(s.seq + 3_000_000),
                    "origin": "tool_output",
                    "source_id": name,
                }}],
            });
            if let Some(r) = s.last_tool_request.take() {
                payload["request_id_ref"] = json!(r);
            }
            s.push(&mut out, "steps/toolCallResult", payload, true);
        }
        "agent-end" => match agent_end {
            AgentEnd::Session => s.end(&mut out, "completed"),
            AgentEnd::Turn => s.end_turn(&mut out, "completed"),
        },
        _ => {}
    }
    Ok(out)
}

/// The `steps/sessionEnd` that closes a hook session (with a `turnEnd` first if a turn is
/// open), updating the session.
pub fn end_session(s: &mut HookSession) -> Vec<Value> {
    let steps = plan(Input::EndSession, s, AgentEnd::Session).unwrap_or_default();
    if let Some(last) = steps.last() {
        *s = last.after.clone();
    }
    steps.into_iter().map(|st| st.request).collect()
}

/// One request sent and the Guardian's answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The ACS request sent.
    pub request: Value,
    /// The Guardian's answer.
    pub response: Value,
}

/// What [`run`] did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every request sent and its answer, in order (a refused one included).
    pub exchanges: Vec<Exchange>,
    /// The Guardian accepted `steps/sessionEnd`: the session is over.
    pub ended: bool,
    /// Why the hook stopped before its last step, if it did: the Guardian could not be
    /// reached, or refused a request. The session stays at the last accepted step.
    pub error: Option<Failure>,
}

/// Why a hook stopped early.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No answer (connection refused, time-out, not an ACS answer).
    Unreachable(String),
    /// A JSON-RPC error for `method`.
    Refused {
        /// The hook's method.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The error's message.
        message: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(e) => write!(f, "the Guardian could not be reached: {e}"),
            Failure::Refused {
                method,
                code,
                message,
            } => write!(f, "the Guardian refused {method} ({code}): {message}"),
        }
    }
}

fn is_handshake_required(err: &Value) -> bool {
    err.get("code").and_then(Value::as_i64) == Some(envelope::codes::CAPABILITY_NOT_NEGOTIATED)
        && err.pointer("/data/reason").and_then(Value::as_str) == Some("handshake_required")
}

fn is_already_negotiated(err: &Value) -> bool {
    err.pointer("/data/message")
        .and_then(Value::as_str)
        .is_some_and(|m| m.contains("already negotiated"))
}

/// Sends one hook's steps through `send` (which signs and transmits a request and returns the
/// parsed answer), moving `s` on over each accepted step. A `handshake_required` answer (the
/// Guardian lost the session: a restart without state) resets the session's negotiation and
/// the hook starts over once: `handshake/hello`, `steps/sessionStart`, then its own steps. A
/// `hello` refused because the session is already negotiated (a hook killed after the Guardian
/// accepted its hello, before it saved) counts as accepted. `s.events` counts hooks whose steps
/// were all accepted. `Err` only for a bad envelope (nothing sent).
pub fn run(
    s: &mut HookSession,
    input: Input<'_>,
    agent_end: AgentEnd,
    send: &mut dyn FnMut(&mut Value) -> Result<Value, String>,
) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let mut retried = false;
    'again: loop {
        for mut step in plan(input, s, agent_end)? {
            let method = step.request["method"].as_str().unwrap_or("").to_string();
            let response = match send(&mut step.request) {
                Ok(r) => r,
                Err(e) => {
                    out.error = Some(Failure::Unreachable(e));
                    return Ok(out);
                }
            };
            let error = response.get("error").cloned();
            out.exchanges.push(Exchange {
                request: step.request,
                response,
            });
            if let Some(err) = error {
                if !retried && method != "handshake/hello" && is_handshake_required(&err) {
                    retried = true;
                    s.handshaken = false;
                    s.started = false;
                    s.turn_id = None;
                    s.last_tool_request = None;
                    continue 'again;
                }
                if method == "handshake/hello" && is_already_negotiated(&err) {
                    *s = step.after;
                    continue;
                }
                out.error = Some(Failure::Refused {
                    method,
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err
                        .pointer("/data/message")
                        .or_else(|| err.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("no message")
                        .to_string(),
                });
                return Ok(out);
            }
            *s = step.after;
            if method == "steps/sessionEnd" {
                out.ended = true;
            }
        }
        s.events += 1;
        return Ok(out);
    }
}

/// Signs a request with the per-session key.
pub fn sign_request(ikm: &[u8], key_id: &str, env: &mut Value) {
    let sid = env
        .pointer("/params/metadata/session_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let key = crypto::session_key(ikm, &sid);
    let _ = crypto::attach_signature(&key, key_id, env);
}

/// Reads the session file: `Ok(None)` when there is none, `Err` when it cannot be read or is
/// not a session (the caller decides whether to start over).
pub fn read_session(path: &Path) -> Result<Option<HookSession>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut s: HookSession = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not a hook session file: {e}", path.display()))?;
    // A file written before `handshaken` existed: a started session was negotiated.
    if s.started {
        s.handshaken = true;
    }
    Ok(Some(s))
}

/// Loads the session file, or starts a new session (also when the file is unreadable).
pub fn load_session(path: &Path) -> HookSession {
    read_session(path)
        .ok()
        .flatten()
        .unwrap_or_else(HookSession::fresh)
}

/// Saves the session file atomically: written to a temporary file of its own (process id and
/// a counter in the name, so concurrent writers never share one), then renamed over it.
pub fn save_session(path: &Path, s: &HookSession) -> Result<(), String> {
    static N: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = path.with_file_name(name);
    let bytes = serde_json::to_vec(s).map_err(|e| e.to_string())?;
    let written = std::fs::write(&tmp, bytes)
        .map_err(|e| format!("{}: {e}", tmp.display()))
        .and_then(|_| std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display())));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The default session file: `.warden/core-agent-session.json` in the working folder.
pub fn default_session_file() -> PathBuf {
    PathBuf::from(".warden/core-agent-session.json")
}

/// The default decision log: `decisions.jsonl` beside the session file.
pub fn default_decision_log(session_file: &Path) -> PathBuf {
    match session_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.join("decisions.jsonl"),
        None => PathBuf::from("decisions.jsonl"),
    }
}

/// An exclusive lock on a session file, held until dropped. The lock is on a sibling file
/// (`NAME.lock`, never removed), so replacing or removing the session file does not lose it.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

/// Takes the session file's lock, waiting up to `wait` for the hook that holds it.
pub fn lock_session(path: &Path, wait: Duration) -> Result<SessionLock, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let lock = path.with_file_name(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| format!("{}: {e}", lock.display()))?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(SessionLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "{}: another hook has held the session lock for over {} s",
                        lock.display(),
                        wait.as_secs()
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("{}: cannot lock: {e}", lock.display()))
            }
        }
    }
}

/// The decision-log entries of one hook: one per answer carrying a decision or an error, and
/// one for a Guardian that could not be reached.
pub fn decision_entries(hook: &str, session: &str, outcome: &Outcome) -> Vec<Value> {
    let now = time::now_rfc3339_ms();
    let mut out = Vec::new();
    for x in &outcome.exchanges {
        let method = x.request["method"].as_str().unwrap_or("");
        let tool = x.request.pointer("/params/payload/tool/name").cloned();
        let mut e = json!({
            "time": now,
            "session": session,
            "hook": hook,
            "method": method,
            "tool": tool.unwrap_or(Value::Null),
            "request_id": x.request.pointer("/params/request_id").cloned().unwrap_or(Value::Null),
        });
        if let Some(r) = x.response.get("result") {
            let Some(decision) = r.get("decision").filter(|_| method != "handshake/hello") else {
                continue; // a handshake answer decides nothing
            };
            e["decision"] = decision.clone();
            e["reason_codes"] = r.get("reason_codes").cloned().unwrap_or(json!([]));
            if let Some(why) = r.get("reasoning") {
                e["reasoning"] = why.clone();
            }
            let rules: Vec<Value> = r
                .get("policy_references")
                .and_then(Value::as_array)
                .map(|refs| {
                    refs.iter()
                        .filter_map(|p| {
                            let m = p.get("policy_name").and_then(Value::as_str)?;
                            let rule = p.get("rule_id").and_then(Value::as_str)?;
                            Some(json!(format!("{m}.{rule}")))
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !rules.is_empty() {
                e["rules"] = Value::Array(rules);
            }
        } else if let Some(err) = x.response.get("error") {
            e["decision"] = json!("error");
            e["error"] = err.clone();
        } else {
            continue;
        }
        out.push(e);
    }
    if let Some(Failure::Unreachable(why)) = &outcome.error {
        out.push(json!({
            "time": now,
            "session": session,
            "hook": hook,
            "decision": "error",
            "error": {"message": format!("the Guardian could not be reached: {why}")},
        }));
    }
    out
}

/// Whether an entry is one an operator should hear about: a deny, ask or defer, or an error
/// (the event was not decided).
pub fn is_notable(entry: &Value) -> bool {
    matches!(
        entry["decision"].as_str(),
        Some("deny" | "ask" | "defer" | "error")
    )
}

/// The stderr line for a notable entry: `warden: DENIED tool send: why (code)`.
pub fn describe(entry: &Value) -> Option<String> {
    let (word, after) = match entry["decision"].as_str()? {
        "deny" => ("DENIED", ""),
        "ask" => ("ASK", "; no one can be asked here, the call went ahead"),
        "defer" => ("DEFERRED", "; nothing can wait here, the call went ahead"),
        _ => return None,
    };
    let what = match (entry["tool"].as_str(), entry["method"].as_str()) {
        (Some(t), _) => format!("tool {t}"),
        (None, Some(m)) => m.strip_prefix("steps/").unwrap_or(m).to_string(),
        (None, None) => "event".to_string(),
    };
    let why = entry["reasoning"]
        .as_str()
        .filter(|r| !r.is_empty())
        .unwrap_or("no reason given");
    let codes: Vec<&str> = entry["reason_codes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(if codes.is_empty() {
        format!("warden: {word} {what}: {why}{after}")
    } else {
        format!("warden: {word} {what}: {why} ({}){after}", codes.join(", "))
    })
}

/// Appends entries to the decision log, one JSON line each, in one write.
pub fn append_decisions(path: &Path, entries: &[Value]) -> Result<(), String> {
    if entries.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut buf = Vec::new();
    for e in entries {
        buf.extend_from_slice(e.to_string().as_bytes());
        buf.push(b'\n');
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(&buf))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs `sh -c COMMAND` with `input` on stdin, its stdout discarded and its stderr passed
/// through, killed after `limit`. `Err` says why it failed.
pub fn notify(command: &str, input: &[u8], limit: Duration) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let mut sh = Command::new("/bin/sh");
    sh.arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    // Its own process group, so a time-out ends what it started too (a `sleep` left behind
    // would hold the hook's stderr open).
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut sh, 0);
    let mut child = sh
        .spawn()
        .map_err(|e| format!("cannot start /bin/sh: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is not an error.
        let _ = stdin.write_all(input);
    }
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("it exited with {status}")),
            Ok(None) if Instant::now() >= deadline => {
                #[cfg(unix)]
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .stderr(Stdio::null())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it ran over {} s and was killed", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The header carrying the session id on every request the hook sends, so a load balancer
/// in front of several Guardians can route a session to the one holding it (docs/serve.md,
/// "Fleet"). It is the id of the session's family root (a subagent routes on its parent's
/// root, whose Guardian holds its lease); the hook's sessions are all roots, since core-agent
/// has no subagent events.
pub const SESSION_HEADER: &str = "ACS-Session-Id";

/// POSTs one body to a Guardian and returns the response body. `url` is
/// `http://HOST:PORT[/PATH]` (default path `/acs`). `session` (the family root's id) goes in
/// the [`SESSION_HEADER`] header when it is a plain token (it is the client's own string: one
/// with control characters or spaces is left out rather than let it shape the request). The
/// body is returned whatever the status: a Guardian not holding the session answers 503 with
/// its JSON-RPC error (`lease_held`), which the caller reads like any other answer.
pub fn http_post(
    url: &str,
    body: &[u8],
    session: Option<&str>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let endpoint = super::http::Endpoint::parse(url, "/acs")?;
    let affinity: Vec<(&str, &str)> = session
        .filter(|s| !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b.is_ascii_graphic()))
        .map(|s| (SESSION_HEADER, s))
        .into_iter()
        .collect();
    super::http::exchange(&endpoint, "POST", &affinity, Some(body), timeout).map(|(_, b)| b)
}

/// Splits a complete HTTP/1.1 response into status and body (Content-Length, chunked, or to
/// the end).
pub fn parse_http_response(resp: &[u8]) -> Result<(u16, Vec<u8>), String> {
    super::http::parse_response(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request head `http_post` sends for `session`, as a loopback listener reads it.
    fn head_sent(session: Option<&str>) -> String {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/acs", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut out = stream;
            out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
            head
        });
        let body = http_post(&url, b"{}", session, Duration::from_secs(5)).unwrap();
        assert_eq!(body, b"{}");
        server.join().unwrap()
    }

    #[test]
    fn the_session_id_goes_in_the_affinity_header_when_it_is_a_plain_token() {
        let head = head_sent(Some("0b1c2d3e-0000-4000-8000-000000000001"));
        assert!(
            head.contains("ACS-Session-Id: 0b1c2d3e-0000-4000-8000-000000000001\r\n"),
            "{head}"
        );
        // A session id that could shape the request is left out.
        let head = head_sent(Some("a\r\nX-Injected: 1"));
        assert!(
            !head.contains("ACS-Session-Id") && !head.contains("X-Injected"),
            "{head}"
        );
        assert!(!head_sent(None).contains("ACS-Session-Id"));
    }

    #[test]
    fn core_agent_events_map_onto_acs_steps() {
        let mut s = HookSession {
            session_id: ids::random_v4(0),
            ..HookSession::default()
        };
        let methods = |v: &[Value]| -> Vec<String> {
            v.iter()
                .map(|e| e["method"].as_str().unwrap().to_string())
                .collect()
        };
        let out = map_core_agent(
            &json!({"hook_event_name": "tool-start", "tool_name": "read_file",
                    "tool_input": {"path": "/etc/hosts"}}),
            &mut s,
        )
        .unwrap();
        assert_eq!(
            methods(&out),
            [
                "handshake/hello",
                "steps/sessionStart",
                "steps/turnStart",
                "steps/toolCallRequest"
            ]
        );
        let call = &out[3]["params"];
        assert_eq!(call["payload"]["arguments"]["path"]["value"], "/etc/hosts");
        assert_eq!(
            call["payload"]["arguments"]["path"]["provenance"]["origin"],
            "agent_generated"
        );
        assert_eq!(
            call["metadata"]["turn_id"],
            json!(s.turn_id.clone().unwrap())
        );
        assert!(out[1]["params"]["metadata"].get("turn_id").is_none());
        for e in &out {
            assert!(crate::acs::envelope::decode_request(&serde_json::to_vec(e).unwrap()).is_ok());
        }
        let rid = call["request_id"].clone();
        let out = map_core_agent(
            &json!({"hook_event_name": "tool-end", "tool_name": "read_file", "tool_output": "x"}),
            &mut s,
        )
        .unwrap();
        assert_eq!(methods(&out), ["steps/toolCallResult"]);
        assert_eq!(out[0]["params"]["payload"]["request_id_ref"], rid);
        assert_eq!(
            out[0]["params"]["payload"]["outputs"][0]["provenance"]["source_id"],
            "read_file"
        );
        let out = map_core_agent(&json!({"hook_event_name": "model-start"}), &mut s).unwrap();
        assert!(out.is_empty(), "a model call inside a turn is no step");
        let out = map_core_agent(&json!({"hook_event_name": "agent-end"}), &mut s).unwrap();
        assert_eq!(methods(&out), ["steps/turnEnd"]);
        let out = map_core_agent(&json!({"hook_event_name": "model-start"}), &mut s).unwrap();
        assert_eq!(methods(&out), ["steps/turnStart"]);
        assert_eq!(
            methods(&end_session(&mut s)),
            ["steps/turnEnd", "steps/sessionEnd"]
        );
        assert!(map_core_agent(&json!({"hook_event_name": "x"}), &mut s).is_err());
        assert!(map_core_agent(&json!({}), &mut s).is_err());
    }

    fn allow(req: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": req["id"], "result": {"decision": "allow"}})
    }

    #[test]
    fn a_guardian_out_of_reach_moves_the_session_on_by_nothing() {
        let mut s = HookSession::fresh();
        let before = s.clone();
        let ev = json!({"hook_event_name": "tool-start", "tool_name": "t"});
        let mut down = |_: &mut Value| -> Result<Value, String> { Err("refused".into()) };
        let out = run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut down).unwrap();
        assert_eq!(out.error, Some(Failure::Unreachable("refused".into())));
        assert_eq!(s, before);
        // Up after the hello: the session is negotiated, not started.
        let mut n = 0;
        let mut once = |r: &mut Value| -> Result<Value, String> {
            n += 1;
            if n == 1 {
                Ok(allow(r))
            } else {
                Err("gone".into())
            }
        };
        run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut once).unwrap();
        assert!(s.handshaken && !s.started && s.events == 0, "{s:?}");
        let mut up = |r: &mut Value| -> Result<Value, String> { Ok(allow(r)) };
        let out = run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut up).unwrap();
        let sent: Vec<&str> = out
            .exchanges
            .iter()
            .map(|x| x.request["method"].as_str().unwrap())
            .collect();
        assert_eq!(
            sent,
            [
                "steps/sessionStart",
                "steps/turnStart",
                "steps/toolCallRequest"
            ]
        );
        assert_eq!((s.started, s.events), (true, 1));
    }

    #[test]
    fn handshake_required_handshakes_again_once() {
        let mut s = HookSession::fresh();
        let ev = json!({"hook_event_name": "tool-start", "tool_name": "t"});
        let mut up = |r: &mut Value| -> Result<Value, String> { Ok(allow(r)) };
        run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut up).unwrap();
        let mut sent = Vec::new();
        let mut forgot = |r: &mut Value| -> Result<Value, String> {
            let m = r["method"].as_str().unwrap().to_string();
            let first = sent.is_empty();
            sent.push(m);
            Ok(if first {
                json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32003,
                    "message": "Capability not negotiated",
                    "data": {"reason": "handshake_required"}}})
            } else {
                allow(r)
            })
        };
        let out = run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut forgot).unwrap();
        assert!(out.error.is_none());
        assert_eq!(
            sent,
            [
                "steps/toolCallRequest",
                "handshake/hello",
                "steps/sessionStart",
                "steps/turnStart",
                "steps/toolCallRequest"
            ]
        );
        // Twice in a row is an error, not a loop.
        let mut always = |r: &mut Value| -> Result<Value, String> {
            Ok(
                json!({"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32003,
                "message": "Capability not negotiated", "data": {"reason": "handshake_required"}}}),
            )
        };
        let out = run(&mut s, Input::Event(&ev), AgentEnd::Session, &mut always).unwrap();
        assert!(
            matches!(out.error, Some(Failure::Refused { code: -32003, .. })),
            "{:?}",
            out.error
        );
    }

    #[test]
    fn a_deny_is_described_for_people() {
        let e = json!({"decision": "deny", "tool": "send", "method": "steps/toolCallRequest",
                       "reasoning": "tainted", "reason_codes": ["taint"]});
        assert_eq!(
            describe(&e).unwrap(),
            "warden: DENIED tool send: tainted (taint)"
        );
        assert!(is_notable(&e));
        let e = json!({"decision": "allow"});
        assert!(describe(&e).is_none() && !is_notable(&e));
        let e = json!({"decision": "ask", "method": "steps/turnStart"});
        assert!(describe(&e)
            .unwrap()
            .starts_with("warden: ASK turnStart: no reason given"));
    }

    #[test]
    fn agent_end_closes_the_session_unless_told_the_turn() {
        let mut s = HookSession::fresh();
        let end = json!({"hook_event_name": "agent-end"});
        assert!(plan(Input::Event(&end), &s, AgentEnd::Session)
            .unwrap()
            .is_empty());
        map_core_agent(&json!({"hook_event_name": "model-start"}), &mut s).unwrap();
        let m = |v: Vec<Step>| -> Vec<String> {
            v.iter()
                .map(|st| st.request["method"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            m(plan(Input::Event(&end), &s, AgentEnd::Session).unwrap()),
            ["steps/turnEnd", "steps/sessionEnd"]
        );
        assert_eq!(
            m(plan(Input::Event(&end), &s, AgentEnd::Turn).unwrap()),
            ["steps/turnEnd"]
        );
    }
}
