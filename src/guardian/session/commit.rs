//! The last phase of a step, decided or restored: what the step leaves in the session besides
//! its state (the engine commits the state). In this order: the request's id and nonce enter
//! the replay window, the chain head moves over the step's entries, the policy digest is
//! noted, a subagent's effects are merged at its stop, and the session is sealed
//! (`sessionEnd`) or marked as spawning a subagent (`subagentStart`).
//!
//! Owns: that order. Must not know: where the step came from (a request or a journal
//! record), the session table (spawning a child and noting a seal there is the Guardian's,
//! told by [`After`]), the journal.

use std::sync::Arc;

use serde_json::Value;

use super::{Effects, Session};
use crate::guardian::audit;

/// What a step hands the commit.
pub(crate) struct Commit<'a> {
    /// The hook the step was decided as (a wrapped MCP message's view).
    pub method: &'static str,
    /// The step went ahead (allow or modify).
    pub proceeds: bool,
    /// The request's time, id and nonce keys for the replay window; `None` without replay
    /// protection.
    pub window: Option<(i64, u128, Option<u128>)>,
    /// The window's cap (`Caps::max_request_ids`).
    pub max_request_ids: usize,
    /// The chain entries the step wrote, hashed, in order.
    pub entries: &'a [Value],
    /// Which policy the step was decided on.
    pub digest: Digest,
    /// At a `subagentStop`: the effect keys the subagent changed.
    pub child_effects: Option<&'a Effects>,
    /// When the step was decided (Guardian clock): a seal's time.
    pub at_ms: i64,
}

/// What the commit knows of the policy a step was decided on.
pub(crate) enum Digest {
    /// Decided now, on this policy.
    Decided(Arc<str>),
    /// Restored from the journal, where only a reload entry names the policy: this one (the
    /// policy in force) is noted if the session knows of none.
    Restored(Arc<str>),
}

/// What the commit leaves for the Guardian to do outside the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    Nothing,
    /// A `subagentStart` went ahead: open the child's session.
    Spawn,
    /// `sessionEnd`: note the seal in the table, at this time.
    Sealed(i64),
}

impl Session {
    /// Commits a step (module docs for the order).
    pub(crate) fn commit(&mut self, c: Commit<'_>) -> After {
        if let Some((time_ms, id, nonce)) = c.window {
            self.window.insert(time_ms, id, nonce, c.max_request_ids);
        }
        self.move_chain(c.entries);
        match c.digest {
            Digest::Decided(d) => self.policy_digest = Some(d),
            Digest::Restored(d) => {
                if self.policy_digest.is_none() {
                    self.policy_digest = Some(d);
                }
            }
        }
        if c.proceeds {
            if let (Some(effects), Some(state)) = (c.child_effects, self.state.as_mut()) {
                state.merge_effects(effects);
            }
        }
        if c.proceeds && c.method == "steps/subagentStart" {
            self.family = true;
            return After::Spawn;
        }
        if c.method == "steps/sessionEnd" {
            let (labels, effects) = match &self.state {
                Some(st) => (Some(st.scalars.session_labels), st.changed_effects()),
                None => (None, Vec::new()),
            };
            self.seal(c.at_ms, labels, effects);
            return After::Sealed(c.at_ms);
        }
        After::Nothing
    }

    /// Moves the chain head over entries already hashed (a step's, an operator's, or a
    /// journal's): a policy-reload entry among them names the digest the session is now on.
    pub(crate) fn move_chain(&mut self, entries: &[Value]) {
        for e in entries {
            self.chain.head = e
                .get("entry_hash")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.chain.len += 1;
            if e.get("step_type").and_then(Value::as_str) == Some(audit::POLICY_RELOAD) {
                self.policy_digest = e
                    .get("policy_digest")
                    .and_then(Value::as_str)
                    .map(Arc::from);
            }
        }
    }
}
