//! The ACS protocol around a decision: the handshake, replay protection and the per-session
//! caps. What is on by default is what `warden replay` needs (nothing: no handshake, no clock,
//! no replay set); [`Protocol::strict`] is what `warden serve` runs with.

// Error responses are the rare path, built once per refused request: no need to box them.
#![allow(clippy::result_large_err)]

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::acs::envelope::{self, RpcError};
use crate::acs::{crypto, ids};

/// Protocol strictness and limits. `Default` is the lenient replay mode.
#[derive(Debug, Clone)]
pub struct Protocol {
    /// Hook traffic for a session must follow its `handshake/hello` (-32003 otherwise).
    pub require_handshake: bool,
    /// Input keying material for the per-session HMAC keys (HKDF-SHA256, info = session_id).
    /// When set, every request but `system/ping` must carry a valid signature (-32004) and
    /// every response is signed.
    pub key: Option<Arc<[u8]>>,
    /// `key_id` put on the signatures Warden makes.
    pub key_id: String,
    /// Accepted clock skew of request timestamps against the Guardian's clock; `None` skips
    /// the check (replay of recorded traces).
    pub skew_window_ms: Option<u64>,
    /// Refuse a `request_id` (or `nonce`) already seen in the session (-32005).
    pub replay_protection: bool,
    /// Write a ContextEntry per audited step and return `chain_hash`.
    pub audit: bool,
    /// Sessions whose ClientHello says `provenance_producer: "none"` are refused (-32002).
    pub require_provenance: bool,
    /// The transport the Guardian is reached on (`selected_transport`).
    pub transport: &'static str,
    /// What the ServerHello tells the client to do when no decision arrives.
    pub client_failure_mode: &'static str,
    /// Per-method timeout the ServerHello advertises.
    pub timeout_ms: u64,
    /// Memory bounds per session and per envelope.
    pub caps: Caps,
}

/// Memory bounds per session and per envelope (see docs/serve.md).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Largest envelope accepted, in bytes (-32600, HTTP 413, beyond).
    pub max_envelope_bytes: usize,
    /// Request ids (and nonces) remembered per session within the skew window.
    pub max_request_ids: usize,
    /// Provenance nodes per session; a session beyond it is refused (-32000).
    pub max_nodes: usize,
    /// Distinct history-counter keys, effect keys and approvals per session; beyond it the
    /// session is refused.
    pub max_history_keys: usize,
    /// Sessions held at once (-32000 for a new one beyond it).
    pub max_sessions: usize,
    /// Sessions one agent (`metadata.agent_id`) may hold at once, so that one client cannot
    /// take every slot (-32000 beyond it).
    pub max_sessions_per_agent: usize,
    /// A session with no request for this long leaves memory (with a journal that can give
    /// its records back, it is restored when it returns). `None`: never.
    pub idle_session_ms: Option<u64>,
    /// A session that has only said hello leaves memory this long after it (a hello is not
    /// journalled until the session's first step). `None`: only as an idle session.
    pub hello_timeout_ms: Option<u64>,
    /// Sessions that have only said hello held at once (at most half of `max_sessions` and of
    /// `max_sessions_per_agent`); a new hello beyond it drops the oldest.
    pub max_hello_sessions: usize,
    /// Of those, the most one agent holds; beyond it, a hello of that agent drops that
    /// agent's own oldest hello-only session (so one agent's flood churns only its own).
    pub max_hellos_per_agent: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_envelope_bytes: 1 << 20,
            max_request_ids: 16_384,
            max_nodes: 262_144,
            max_history_keys: 65_536,
            max_sessions: 100_000,
            max_sessions_per_agent: 25_000,
            idle_session_ms: Some(3_600_000),
            hello_timeout_ms: Some(30_000),
            max_hello_sessions: 10_000,
            max_hellos_per_agent: 1_000,
        }
    }
}

impl Caps {
    /// No bound on sessions, provenance nodes or history keys, and no idle eviction (the
    /// envelope size bound stays): the lenient mode's caps, for replaying a recorded trace of any length and for
    /// embedders that bound their own input. `warden serve` runs with [`Caps::default`].
    pub fn unbounded_sessions() -> Caps {
        Caps {
            max_nodes: usize::MAX,
            max_history_keys: usize::MAX,
            max_sessions: usize::MAX,
            max_sessions_per_agent: usize::MAX,
            idle_session_ms: None,
            hello_timeout_ms: None,
            max_hello_sessions: usize::MAX,
            max_hellos_per_agent: usize::MAX,
            ..Caps::default()
        }
    }
}

/// The skew window the ServerHello advertises when none is configured (the spec default).
pub const DEFAULT_SKEW_WINDOW_MS: u64 = 300_000;

impl Default for Protocol {
    fn default() -> Self {
        Protocol {
            require_handshake: false,
            key: None,
            key_id: "warden".into(),
            skew_window_ms: None,
            replay_protection: false,
            audit: false,
            require_provenance: false,
            transport: "stdio",
            client_failure_mode: "deny",
            timeout_ms: 5_000,
            caps: Caps::unbounded_sessions(),
        }
    }
}

impl Protocol {
    /// Everything on: what `warden serve` runs with.
    pub fn strict() -> Protocol {
        Protocol {
            require_handshake: true,
            skew_window_ms: Some(DEFAULT_SKEW_WINDOW_MS),
            replay_protection: true,
            audit: true,
            caps: Caps::default(),
            ..Protocol::default()
        }
    }
}

/// What a session's handshake settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Negotiated {
    /// The ACS version agreed on.
    pub version: String,
    /// Methods the client may send (the ServerHello's `methods_evaluated`).
    pub methods: Vec<String>,
    /// MCP was declared in `wrapped_protocols`.
    pub mcp: bool,
    /// What the client said produces provenance (`provenance_producer`).
    pub provenance_producer: String,
    /// The profiles the client declared.
    pub profiles: Vec<String>,
}

impl Negotiated {
    /// Whether the client may send `method` in this session.
    pub fn allows(&self, method: &str) -> bool {
        if method.starts_with("protocols/MCP/") && !self.mcp {
            return false;
        }
        self.methods.iter().any(|m| m == method)
    }
}

const PROFILES: [&str; 3] = ["acs-core", "acs-audit", "acs-provenance"];

fn string_list(payload: &Value, key: &str) -> Result<Vec<String>, RpcError> {
    let field = format!("params.payload.{key}");
    let arr = payload
        .get(key)
        .ok_or_else(|| RpcError::invalid_params(&field, "is required"))?
        .as_array()
        .ok_or_else(|| RpcError::invalid_params(&field, "must be an array of strings"))?;
    arr.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| RpcError::invalid_params(&field, "must be an array of strings"))
        })
        .collect()
}

/// Reads a ClientHello and settles the session, or says why not.
pub fn negotiate(
    p: &Protocol,
    payload: &Value,
    known: impl Fn(&str) -> bool,
) -> Result<(Negotiated, Map<String, Value>), RpcError> {
    let versions = string_list(payload, "acs_versions_supported")?;
    if versions.is_empty() {
        return Err(RpcError::invalid_params(
            "params.payload.acs_versions_supported",
            "must list at least one version",
        ));
    }
    let ours_major = envelope::ACS_VERSION.split('.').next().unwrap_or("0");
    if !versions
        .iter()
        .any(|v| envelope::is_semver(v) && v.split('.').next() == Some(ours_major))
    {
        return Err(RpcError::unsupported_version(
            format!("no common ACS version in {versions:?}"),
            &[envelope::ACS_VERSION],
        ));
    }
    let implemented = string_list(payload, "methods_implemented")?;
    let transports = string_list(payload, "transports_supported")?;
    if !transports.iter().any(|t| t == p.transport) {
        return Err(RpcError::session_refused(format!(
            "this Guardian is reached over {}, which the client does not list",
            p.transport
        )));
    }
    let producer = match payload.get("provenance_producer").and_then(Value::as_str) {
        Some(s @ ("deterministic" | "none")) => s.to_string(),
        _ => {
            return Err(RpcError::invalid_params(
                "params.payload.provenance_producer",
                "must be \"deterministic\" or \"none\"",
            ))
        }
    };
    if producer == "none" && p.require_provenance {
        return Err(RpcError::provenance_required(
            "the policy requires provenance and the client produces none",
        ));
    }
    let mcp = payload
        .get("wrapped_protocols")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|w| w.get("protocol").and_then(Value::as_str) == Some("MCP"))
        });
    // What this session will evaluate: a wrapped-MCP method only when MCP was declared
    // (otherwise it would be listed here and refused with -32003 later).
    let mut methods: Vec<String> = implemented
        .iter()
        .filter(|m| known(m) && m.as_str() != "handshake/hello")
        .filter(|m| mcp || !m.starts_with("protocols/MCP/"))
        .cloned()
        .collect();
    methods.sort();
    methods.dedup();
    let offered: Vec<String> = payload
        .get("profiles_supported")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_else(|| vec!["acs-core".to_string()]);
    let profiles: Vec<String> = PROFILES
        .iter()
        .filter(|ours| offered.iter().any(|o| o == *ours))
        .filter(|ours| **ours != "acs-provenance" || producer == "deterministic")
        .map(|s| s.to_string())
        .collect();
    let skew = p.skew_window_ms.unwrap_or(DEFAULT_SKEW_WINDOW_MS);
    let hello = json!({
        "negotiated_version": envelope::ACS_VERSION,
        "methods_evaluated": methods,
        "selected_transport": p.transport,
        "timeout_config": {"default_ms": p.timeout_ms, "per_method_ms": {}},
        "signature_algorithms_supported":
            if p.key.is_some() { vec![crate::acs::crypto::HMAC_SHA256] } else { vec![] },
        "skew_window_ms": skew,
        "on_decision_failure": p.client_failure_mode,
        "approver_types_supported": ["human", "agent", "service"],
        "policy_requires_provenance": p.require_provenance,
        "agbom_serializations_supported": ["canonical"],
        "profiles_accepted": profiles,
    });
    let negotiated = Negotiated {
        version: envelope::ACS_VERSION.to_string(),
        methods,
        mcp,
        provenance_producer: producer,
        profiles,
    };
    Ok((negotiated, hello.as_object().cloned().unwrap_or_default()))
}

/// The request ids and nonces a session has used, within the skew window (or the newest
/// `cap` of them when there is no clock).
#[derive(Debug, Clone, Default)]
pub struct ReplayWindow {
    ids: HashSet<u128>,
    nonces: HashSet<u128>,
    order: VecDeque<(i64, u128, Option<u128>)>,
}

/// The key a request id is remembered by: its 128 uuid bits (any other text: a hash).
pub fn id_key(s: &str) -> u128 {
    ids::uuid_bits(s).unwrap_or_else(|| hash_key(s))
}

/// 128 bits of SHA-256 (nonces are free text of 16 to 64 characters).
pub fn hash_key(s: &str) -> u128 {
    let d = crypto::sha256(s.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    u128::from_be_bytes(b)
}

/// Why a request was refused by the replay window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The request id was used before in the session.
    DuplicateId,
    /// The nonce was used before in the session.
    DuplicateNonce,
    /// The window holds its cap of ids within the skew window.
    Full,
}

impl ReplayWindow {
    /// How many ids the window holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the window holds none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Forgets what is older than the window (it would fail the timestamp check anyway).
    pub fn prune(&mut self, now_ms: i64, window_ms: Option<u64>) {
        let Some(w) = window_ms else { return };
        let oldest = now_ms.saturating_sub(w as i64);
        while let Some(&(t, id, nonce)) = self.order.front() {
            if t >= oldest {
                break;
            }
            self.order.pop_front();
            self.ids.remove(&id);
            if let Some(n) = nonce {
                self.nonces.remove(&n);
            }
        }
    }

    /// Whether a request with this id and nonce may be let through (`clock`: the Guardian checks timestamps, so a full window refuses).
    pub fn check(
        &self,
        id: u128,
        nonce: Option<u128>,
        cap: usize,
        clock: bool,
    ) -> Result<(), Replay> {
        if self.ids.contains(&id) {
            return Err(Replay::DuplicateId);
        }
        if nonce.is_some_and(|n| self.nonces.contains(&n)) {
            return Err(Replay::DuplicateNonce);
        }
        // With a clock, forgetting an id inside the window would let it be replayed: refuse.
        if clock && self.order.len() >= cap {
            return Err(Replay::Full);
        }
        Ok(())
    }

    /// Remembers a request's id and nonce at `time_ms`, dropping the oldest beyond `cap`.
    pub fn insert(&mut self, time_ms: i64, id: u128, nonce: Option<u128>, cap: usize) {
        while self.order.len() >= cap.max(1) {
            if let Some((_, old, n)) = self.order.pop_front() {
                self.ids.remove(&old);
                if let Some(n) = n {
                    self.nonces.remove(&n);
                }
            }
        }
        self.ids.insert(id);
        if let Some(n) = nonce {
            self.nonces.insert(n);
        }
        self.order.push_back((time_ms, id, nonce));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window_refuses_duplicates_and_ages_out() {
        let mut w = ReplayWindow::default();
        let a = id_key("6f1c1a62-8a55-4a8e-9b8a-3f6f0f0b9b01");
        assert_eq!(a, 0x6f1c1a628a554a8e9b8a3f6f0f0b9b01);
        assert_ne!(id_key("not a uuid"), id_key("not a uuid either"));
        w.insert(1_000, a, Some(hash_key("nonce-nonce-nonce")), 10);
        assert_eq!(w.check(a, None, 10, true), Err(Replay::DuplicateId));
        assert_eq!(
            w.check(2, Some(hash_key("nonce-nonce-nonce")), 10, true),
            Err(Replay::DuplicateNonce)
        );
        assert_eq!(w.check(2, None, 10, true), Ok(()));
        // Older than the window: forgotten (the timestamp check refuses it anyway).
        w.prune(1_000 + 301_000, Some(300_000));
        assert!(w.is_empty());
        assert_eq!(w.check(a, None, 10, true), Ok(()));
    }

    #[test]
    fn a_full_window_refuses_with_a_clock_and_evicts_without() {
        let mut w = ReplayWindow::default();
        for i in 0..4 {
            w.insert(0, i, None, 4);
        }
        assert_eq!(w.check(9, None, 4, true), Err(Replay::Full));
        assert_eq!(w.check(9, None, 4, false), Ok(()));
        w.insert(0, 9, None, 4);
        assert_eq!(w.len(), 4);
        assert_eq!(w.check(0, None, 4, false), Ok(()), "the oldest was evicted");
    }

    #[test]
    fn negotiation() {
        let p = Protocol::strict();
        let hello = serde_json::json!({
            "acs_versions_supported": ["0.1.3", "1.0.0"],
            "methods_implemented": ["steps/toolCallRequest", "steps/bogus", "handshake/hello",
                                    "protocols/MCP/tools/call"],
            "transports_supported": ["stdio"],
            "provenance_producer": "none",
            "wrapped_protocols": [{"protocol": "MCP", "version": "2025-06-18"}],
        });
        let known = |m: &str| m.starts_with("steps/toolCall") || m.starts_with("protocols/");
        let (n, h) = negotiate(&p, &hello, known).unwrap();
        assert_eq!(
            n.methods,
            vec!["protocols/MCP/tools/call", "steps/toolCallRequest"]
        );
        assert!(n.mcp && n.allows("protocols/MCP/tools/call"));
        assert!(!n.allows("steps/userMessage"));
        assert_eq!(h["profiles_accepted"], serde_json::json!(["acs-core"]));
        let mut strict = p.clone();
        strict.require_provenance = true;
        assert_eq!(negotiate(&strict, &hello, known).unwrap_err().code, -32002);
        let mut v = hello.clone();
        v["acs_versions_supported"] = serde_json::json!(["1.0.0"]);
        let e = negotiate(&p, &v, known).unwrap_err();
        assert_eq!(e.code, -32001);
        assert_eq!(
            e.data.unwrap()["supported_versions"],
            serde_json::json!(["0.1.0"])
        );
        // Without MCP in wrapped_protocols, the wrapped MCP method is neither listed nor
        // allowed.
        let mut v = hello.clone();
        v.as_object_mut().unwrap().remove("wrapped_protocols");
        let (n, h) = negotiate(&p, &v, known).unwrap();
        assert_eq!(n.methods, vec!["steps/toolCallRequest"]);
        assert_eq!(
            h["methods_evaluated"],
            serde_json::json!(["steps/toolCallRequest"])
        );
        assert!(!n.mcp && !n.allows("protocols/MCP/tools/call"));
        let mut v = hello.clone();
        v["transports_supported"] = serde_json::json!(["http"]);
        assert_eq!(negotiate(&p, &v, known).unwrap_err().code, -32000);
        let mut v = hello;
        v.as_object_mut().unwrap().remove("methods_implemented");
        assert_eq!(negotiate(&p, &v, known).unwrap_err().code, -32602);
    }
}
