//! The first phase of a step: is the request let through to a decision? In this order, before
//! the session's lock ([`Guardian::enter`]): the signature, the hook and its payload, the
//! facts of a stopping subagent (read first: one session lock at a time), the lease, the
//! session found in memory, restored from the journal or admitted; then under the lock
//! ([`Guardian::gate`]): the lease the copy was decided under, the lifecycle (sealed,
//! refused), the handshake (a hello is answered here), the negotiated capabilities, the clock
//! skew, the replay window and the memory caps. Each check ends the gate with a [`Refusal`];
//! a request that passes them all is [`Admitted`].
//!
//! Owns: the checks and their order. Must not know: deciding (the step's), what a refusal
//! looks like on the wire (`refusal.rs`), the journal's storage.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Life, Refusal, Session};
use crate::acs::envelope::{self, Request};
use crate::acs::{crypto, fields, time, DecisionKind};
use crate::guardian::protocol::{self, Replay};
use crate::guardian::{Active, ChildFacts, Decision, Guardian};
use crate::state::SessionState;

/// A request past the checks made before its session's lock.
pub(crate) struct Entered {
    /// The hook; `None` for a hello.
    pub hook: Option<&'static fields::HookSpec>,
    /// At a `subagentStop`: the subagent's id and what it hands back (`None`: unknown).
    pub child: Option<(String, Option<ChildFacts>)>,
    pub session: Arc<Mutex<Session>>,
    /// The session was admitted by this request.
    pub fresh: bool,
    /// The lease token this Guardian holds the session under.
    pub lease: Option<i64>,
}

/// What the gate lets through under the session's lock.
pub(crate) enum Gated {
    /// A hello, answered with the ServerHello.
    Hello(Box<envelope::AcsResult>),
    /// A hook request, to decide.
    Step(Admitted),
}

/// A hook request let through to a decision.
pub(crate) struct Admitted {
    pub hook: &'static fields::HookSpec,
    /// The policy it is decided on.
    pub active: Active,
    /// The request's timestamp (ms), if it parses.
    pub time_ms: Option<i64>,
    /// The Guardian's clock when it was let through.
    pub now: i64,
    /// The request id's and the nonce's keys in the replay window.
    pub id_key: u128,
    pub nonce_key: Option<u128>,
}

impl Guardian {
    /// The checks before the session's lock (module docs).
    pub(crate) fn enter(
        &self,
        req: &Request,
        raw: &Value,
        key: Option<&[u8; 32]>,
    ) -> Result<Entered, Refusal> {
        let p = &req.params;
        let proto = &self.options.protocol;
        let sid = p.metadata.session_id.as_str();
        if let Some(k) = key {
            if let Err(e) = crypto::verify(k, raw) {
                return Err(Refusal::Signature(e.to_string()));
            }
        }
        let hook = if req.method == "handshake/hello" {
            None
        } else {
            match fields::hook(&req.method) {
                Some(h) => Some(h),
                None => return Err(Refusal::UnknownMethod(req.method.clone())),
            }
        };
        // A payload its hook's table refuses is never decided (nor does it open a session).
        if let Some(h) = hook {
            if let Err(e) = crate::acs::payload::check(h, &p.payload) {
                return Err(Refusal::Payload {
                    path: e.path.to_string(),
                    why: e.why.to_string(),
                });
            }
        }
        // Facts from other sessions, read before this session is locked (one lock at a time).
        let child = match req.method.as_str() {
            "steps/subagentStop" => p
                .payload
                .get("subagent_session_id")
                .and_then(Value::as_str)
                .map(|c| (c.to_string(), self.session_facts(c))),
            _ => None,
        };
        // A request refused for want of a handshake allocates nothing: only a hello (or, in
        // the lenient mode, any hook) opens a session.
        // A hello for a session not in memory only reads the lease (a flood of hellos writes
        // nothing): the session's first step takes it.
        let lease = if hook.is_none() && self.sessions.get(sid).is_none() {
            self.peek(sid)?;
            None
        } else {
            self.hold(sid)?
        };
        // One table lookup on the common path; the journal is asked only for an unknown id.
        let (session, fresh) = match self.sessions.get(sid) {
            Some(s) => (s, false),
            None => match self.restore_returning(sid) {
                Some(s) => (s?, false),
                None if hook.is_some() && proto.require_handshake => {
                    return Err(Refusal::HandshakeRequired(req.method.clone()))
                }
                None => (
                    self.admit_new(sid, &p.metadata.agent_id, hook.is_none())?,
                    true,
                ),
            },
        };
        Ok(Entered {
            hook,
            child,
            session,
            fresh,
            lease,
        })
    }

    /// The checks under the session's lock (module docs); a hello is answered here.
    pub(crate) fn gate(
        &self,
        s: &mut Session,
        req: &Request,
        entered: &Entered,
    ) -> Result<Gated, Refusal> {
        let p = &req.params;
        let proto = &self.options.protocol;
        match (s.lease, entered.lease) {
            (None, l) => s.lease = l,
            // This copy was decided under an older lease, and the Guardian has since taken the
            // session again (and restored a new copy): nothing decided on it may commit.
            (Some(had), Some(now)) if had != now => return Err(Refusal::ChangedHands),
            _ => {}
        }
        s.last_active_ms = time::now_ms();
        match &s.life {
            Life::Sealed { .. } => return Err(Refusal::Sealed),
            Life::Refused(why) => return Err(Refusal::Refused(why.clone())),
            Life::Open => {}
        }
        let Some(hook) = entered.hook else {
            return self.hello(s, p).map(|r| Gated::Hello(Box::new(r)));
        };
        match &s.negotiated {
            None if proto.require_handshake => {
                return Err(Refusal::HandshakeRequired(req.method.clone()))
            }
            Some(n) if !n.allows(&req.method) => {
                return Err(Refusal::NotNegotiated(req.method.clone()))
            }
            _ => {}
        }
        let time_ms = time::rfc3339_unix_ms(&p.timestamp);
        let now = time::now_ms();
        if let (Some(w), Some(t)) = (proto.skew_window_ms, time_ms) {
            if now.abs_diff(t) > w {
                return Err(Refusal::Skew {
                    timestamp: p.timestamp.clone(),
                    off_ms: now - t,
                    window_ms: w,
                });
            }
        }
        let id_key = protocol::id_key(&p.request_id);
        let nonce_key = p.nonce.as_deref().map(protocol::hash_key);
        if proto.replay_protection {
            s.window.prune(now, proto.skew_window_ms);
            let max = proto.caps.max_request_ids;
            match s
                .window
                .check(id_key, nonce_key, max, proto.skew_window_ms.is_some())
            {
                Ok(()) => {}
                Err(Replay::DuplicateId) => return Err(Refusal::DuplicateId(p.request_id.clone())),
                Err(Replay::DuplicateNonce) => return Err(Refusal::DuplicateNonce),
                Err(Replay::Full) => return Err(Refusal::WindowFull(max)),
            }
        }
        let active = self.active();
        let state = s
            .state
            .get_or_insert_with(|| SessionState::new(&active.program));
        let caps = &proto.caps;
        if state.nodes.len() > caps.max_nodes || state.history_keys() > caps.max_history_keys {
            let refusal = Refusal::OverCaps {
                nodes: caps.max_nodes,
                keys: caps.max_history_keys,
            };
            s.life = Life::Refused(super::refusal::over_caps(
                caps.max_nodes,
                caps.max_history_keys,
            ));
            return Err(refusal);
        }
        Ok(Gated::Step(Admitted {
            hook,
            active,
            time_ms,
            now,
            id_key,
            nonce_key,
        }))
    }

    /// Answers a ClientHello with the ServerHello. Nothing is journalled yet: the handshake
    /// goes with the session's first step (`Guardian::with_hello`).
    fn hello(&self, s: &mut Session, p: &envelope::Params) -> Result<envelope::AcsResult, Refusal> {
        if s.negotiated.is_some() {
            return Err(Refusal::AlreadyNegotiated);
        }
        let (negotiated, hello) =
            protocol::negotiate(&self.options.protocol, &p.payload, super::is_known_method)
                .map_err(Refusal::Negotiation)?;
        s.hello = Some((time::now_ms(), self.policy_digest()));
        s.negotiated = Some(Arc::new(negotiated));
        let mut r = Decision::simple(DecisionKind::Allow, "", "handshake accepted".into())
            .to_result(&p.request_id);
        r.reason_codes.clear();
        r.payload = Some(hello);
        Ok(r)
    }
}
