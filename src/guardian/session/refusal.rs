//! Why a request was not let through to a decision, and the one place each reason becomes the
//! JSON-RPC error the wire carries ([`Refusal::to_rpc`]): the gate (`gate.rs`) and the
//! Guardian's operator paths say what went wrong, this file says how it is answered.
//!
//! Owns: the refusals and their wire form (codes, messages, `data.reason`). Must not know:
//! when a refusal happens.

use crate::acs::envelope::RpcError;
use crate::guardian::sessions;

/// Why a request was refused before any decision.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The journal failed earlier: this Guardian acknowledges nothing any more.
    JournalFailed,
    /// The request's signature does not verify.
    Signature(String),
    /// No hook has this method.
    UnknownMethod(String),
    /// The payload is not what its hook's table says (`params.PATH`, why).
    Payload { path: String, why: String },
    /// Another Guardian holds the session's lease.
    LeaseHeld { holder: String, expires_in_ms: i64 },
    /// The session's lease could not be read or taken.
    LeaseUnreadable(String),
    /// The session's records could not be read back from the journal.
    RecordsUnreadable(String),
    /// The session changed hands while the request waited for its lock.
    ChangedHands,
    /// The table would not admit a new session for this agent.
    Full {
        agent: String,
        why: sessions::Refusal,
    },
    /// A hook before the session's handshake, where one is required.
    HandshakeRequired(String),
    /// A second hello.
    AlreadyNegotiated,
    /// The hello could not be negotiated (the protocol's own error).
    Negotiation(RpcError),
    /// A hook the handshake did not negotiate.
    NotNegotiated(String),
    /// The session has ended.
    Sealed,
    /// The session was refused for good (it went over a memory cap): why.
    Refused(String),
    /// The request's timestamp is off the Guardian's clock by more than the window.
    Skew {
        timestamp: String,
        off_ms: i64,
        window_ms: u64,
    },
    /// The request id was used before in the session.
    DuplicateId(String),
    /// The nonce was used before in the session.
    DuplicateNonce,
    /// The replay window is full (this many ids within the skew window).
    WindowFull(usize),
    /// The session went over its memory caps (nodes, keys), now and for good.
    OverCaps { nodes: usize, keys: usize },
}

impl Refusal {
    /// The error the wire carries for this refusal.
    pub(crate) fn to_rpc(&self) -> RpcError {
        match self {
            Refusal::JournalFailed => {
                RpcError::internal("the journal failed; this Guardian refuses every request")
            }
            Refusal::Signature(why) => RpcError::signature_invalid(why.clone()),
            Refusal::UnknownMethod(m) => RpcError::method_not_found(m),
            Refusal::Payload { path, why } => {
                RpcError::invalid_params(&format!("params.{path}"), why.clone())
            }
            Refusal::LeaseHeld {
                holder,
                expires_in_ms,
            } => {
                let wait = (*expires_in_ms).max(0);
                RpcError::session_refused(format!(
                    "Guardian {holder:?} holds this session's lease: send the request there (or \
                     retry once the lease expires, in about {wait} ms)"
                ))
                .with_data("reason", "lease_held")
                .with_data("holder", holder.clone())
                .with_data("retry_after_ms", wait)
            }
            Refusal::LeaseUnreadable(e) => {
                RpcError::internal(format!("the session's lease could not be taken: {e}"))
            }
            Refusal::RecordsUnreadable(e) => RpcError::internal(format!(
                "the session's records could not be read from the journal: {e}"
            )),
            Refusal::ChangedHands => RpcError::internal(
                "the session changed hands while this request waited; send it again",
            )
            .with_data("reason", "lease_lost"),
            Refusal::Full { agent, why } => RpcError::session_refused(match why {
                sessions::Refusal::Full(n) => {
                    format!("this Guardian holds its maximum of {n} sessions")
                }
                sessions::Refusal::AgentFull(n) => {
                    format!("agent {agent:?} holds its maximum of {n} sessions on this Guardian")
                }
            }),
            Refusal::HandshakeRequired(method) => RpcError::capability_not_negotiated(method)
                .with_data("reason", "handshake_required")
                .with_data("message", "handshake/hello must come first in a session"),
            Refusal::AlreadyNegotiated => RpcError::session_refused(
                "the session is already negotiated (ACS v0.1 has no renegotiation)",
            ),
            Refusal::Negotiation(e) => e.clone(),
            Refusal::NotNegotiated(method) => RpcError::capability_not_negotiated(method),
            Refusal::Sealed => {
                RpcError::session_refused("the session has ended and its audit chain is sealed")
            }
            Refusal::Refused(why) => RpcError::session_refused(why.clone()),
            Refusal::Skew {
                timestamp,
                off_ms,
                window_ms,
            } => RpcError::timestamp_out_of_window(
                format!("timestamp {timestamp} is {off_ms} ms from the Guardian's clock"),
                *window_ms,
            ),
            Refusal::DuplicateId(request_id) => RpcError::replay_detected(format!(
                "request_id {request_id} was already used in this session"
            )),
            Refusal::DuplicateNonce => {
                RpcError::replay_detected("the nonce was already used in this session")
            }
            Refusal::WindowFull(max) => RpcError::session_refused(format!(
                "more than {max} requests within the skew window"
            )),
            Refusal::OverCaps { nodes, keys } => {
                RpcError::session_refused(over_caps(*nodes, *keys))
            }
        }
    }

    /// The error's detail: its `data.message`, or its title (what an operator is told).
    pub(crate) fn detail(&self) -> String {
        let e = self.to_rpc();
        e.data
            .as_ref()
            .and_then(|d| d.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or(&e.message)
            .to_string()
    }
}

/// Why a session over its memory caps is refused (kept as the session's [`super::Life`]).
pub(crate) fn over_caps(nodes: usize, keys: usize) -> String {
    format!(
        "the session went over its memory caps ({nodes} provenance nodes, {keys} history, effect and approval keys)"
    )
}
