//! `warden hook --dialect=core-agent`: core-agent's observation hooks mapped onto ACS steps.
//!
//! core-agent runs a command per hook with a JSON envelope on stdin (`hook_event_name`:
//! `tool-start` {tool_name, tool_input}, `tool-end` {tool_name, tool_output}, `model-start`,
//! `agent-end`). Each invocation is a new process, so the session (its id, the open turn, the
//! last tool call) is kept in a small session file. The mapping (docs/serve.md):
//!
//! | core-agent | ACS steps sent |
//! |---|---|
//! | first hook of a session | `handshake/hello`, `steps/sessionStart` |
//! | `model-start`, no open turn | `steps/turnStart` (a new `turn_id`) |
//! | `model-start`, turn open | nothing (a model call inside the turn) |
//! | `tool-start` | (`turnStart` if no turn is open) `steps/toolCallRequest`, each `tool_input` member an argument with `agent_generated` provenance |
//! | `tool-end` | (`turnStart` if needed) `steps/toolCallResult`, `tool_output` as one output with `tool_output` provenance (`source_id` = the tool) |
//! | `agent-end` | `steps/turnEnd` (`outcome: completed`) |
//! | `--end-session` | `steps/sessionEnd` (`reason: completed`); the session file is removed |

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::acs::{crypto, envelope, ids, time};

/// What the hook remembers between invocations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HookSession {
    pub session_id: String,
    pub turn_id: Option<String>,
    pub started: bool,
    pub last_tool_request: Option<String>,
    #[serde(default)]
    pub seq: u64,
}

impl HookSession {
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

    fn open_turn(&mut self, out: &mut Vec<Value>, triggered_by: &str) {
        if self.turn_id.is_none() {
            let t = ids::random_v4(self.seq + 1_000_000);
            self.turn_id = Some(t.clone());
            out.push(self.envelope(
                "steps/turnStart",
                json!({"turn_id": t, "triggered_by": triggered_by}),
                true,
            ));
        }
    }

    fn start(&mut self, out: &mut Vec<Value>) {
        if self.started {
            return;
        }
        self.started = true;
        let methods = [
            "steps/sessionStart",
            "steps/turnStart",
            "steps/toolCallRequest",
            "steps/toolCallResult",
            "steps/turnEnd",
            "steps/sessionEnd",
            "system/ping",
        ];
        out.push(self.envelope(
            "handshake/hello",
            json!({
                "acs_versions_supported": [crate::acs::envelope::ACS_VERSION],
                "methods_implemented": methods,
                "transports_supported": ["http", "stdio"],
                "provenance_producer": "deterministic",
                "profiles_supported": ["acs-core", "acs-provenance"],
            }),
            false,
        ));
        out.push(self.envelope(
            "steps/sessionStart",
            json!({"platform_context": {"platform": "core-agent"}}),
            false,
        ));
    }
}

/// Maps one core-agent hook envelope onto the ACS requests to send, updating the session.
pub fn map_core_agent(input: &Value, s: &mut HookSession) -> Result<Vec<Value>, String> {
    let event = input
        .get("hook_event_name")
        .and_then(Value::as_str)
        .ok_or("the hook envelope has no hook_event_name")?;
    let tool = || {
        input
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string()
    };
    let mut out = Vec::new();
    match event {
        "tool-start" | "tool-end" | "model-start" | "agent-end" => s.start(&mut out),
        other => return Err(format!("unknown core-agent hook event {other:?}")),
    }
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
            let req = s.envelope(
                "steps/toolCallRequest",
                json!({"tool": {"name": name}, "arguments": args}),
                true,
            );
            s.last_tool_request = req
                .pointer("/params/request_id")
                .and_then(Value::as_str)
                .map(str::to_string);
            out.push(req);
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
            out.push(s.envelope("steps/toolCallResult", payload, true));
        }
        "agent-end" => {
            if let Some(t) = s.turn_id.clone() {
                out.push(s.envelope(
                    "steps/turnEnd",
                    json!({"turn_id": t, "outcome": "completed"}),
                    true,
                ));
                s.turn_id = None;
            }
        }
        _ => {}
    }
    Ok(out)
}

/// The `steps/sessionEnd` that closes a hook session.
pub fn end_session(s: &mut HookSession) -> Vec<Value> {
    let mut out = Vec::new();
    if s.started {
        if let Some(t) = s.turn_id.take() {
            out.push(s.envelope(
                "steps/turnEnd",
                json!({"turn_id": t, "outcome": "interrupted"}),
                true,
            ));
        }
        out.push(s.envelope("steps/sessionEnd", json!({"reason": "completed"}), false));
    }
    out
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

/// Loads the session file, or starts a new session.
pub fn load_session(path: &Path) -> HookSession {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| HookSession {
            session_id: ids::random_v4(0),
            ..HookSession::default()
        })
}

/// Saves the session file (atomically: write then rename).
pub fn save_session(path: &Path, s: &HookSession) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(s).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The default session file: `.warden/core-agent-session.json` in the working folder.
pub fn default_session_file() -> PathBuf {
    PathBuf::from(".warden/core-agent-session.json")
}

/// A minimal HTTP/1.1 client for loopback Guardians: POSTs one body, returns the response
/// body. `url` is `http://HOST:PORT[/PATH]` (default path `/acs`).
pub fn http_post(url: &str, body: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/acs"),
    };
    let path = if path == "/" { "/acs" } else { path };
    use std::net::ToSocketAddrs as _;
    let addr = hostport
        .to_socket_addrs()
        .map_err(|e| format!("{hostport}: {e}"))?
        .next()
        .ok_or_else(|| format!("{hostport}: no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{url}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body))
        .map_err(|e| format!("{url}: {e}"))?;
    let mut resp = Vec::new();
    stream
        .read_to_end(&mut resp)
        .map_err(|e| format!("{url}: {e}"))?;
    parse_http_response(&resp).map(|(_, b)| b)
}

/// Splits a complete HTTP/1.1 response into status and body (Content-Length or to the end).
pub fn parse_http_response(resp: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("a malformed HTTP response")?;
    let head = String::from_utf8_lossy(&resp[..end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or("a malformed HTTP status line")?;
    let body = &resp[end + 4..];
    let len = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    let body = match len {
        Some(n) if n <= body.len() => body[..n].to_vec(),
        _ => body.to_vec(),
    };
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
