//! One session as the Guardian holds it, and a step through it as named phases, each in its own
//! file, in this order:
//!
//! 1. the gate (`gate.rs`): signature, hook and payload, lease, the session found, restored
//!    from the journal or admitted, its lifecycle, the handshake, clock skew, the replay
//!    window and the memory caps; it ends in an admitted step or a [`Refusal`] (`refusal.rs`,
//!    the one place a refusal becomes a wire error);
//! 2. the step (`step.rs`): the view of the request a hook decides (`view.rs`: a wrapped MCP
//!    message as the hook it is), the engine (`guardian::engine`), the audit entries, the
//!    journal record;
//! 3. the journal submission (the Guardian's, under the session's lock, so each session's
//!    records are in the order its steps were decided);
//! 4. one commit ([`Session::commit`], `commit.rs`): the replay window, the chain head, the
//!    policy digest, a subagent's effects merged at its stop, then sealing or spawning.
//!
//! Restoring from the journal (`restore.rs`) runs the same view, re-applies the step through
//! the engine instead of deciding it, and ends in the same commit: deciding and restoring
//! cannot drift apart on what a step leaves in the session.
//!
//! Owns: the [`Session`] record and its lifecycle ([`Life`]), the phases above and the
//! restore. Must not know: transports, how the journal stores records, how policy code runs
//! (the engine's), where a session lives in memory (the table's, `guardian::sessions`).

mod commit;
mod gate;
mod refusal;
mod restore;
mod step;
mod view;

use std::sync::Arc;

pub(crate) use commit::{After, Commit, Digest};
pub(crate) use gate::Gated;
pub(crate) use refusal::Refusal;
pub use view::is_known_method;
pub(crate) use view::View;

use serde_json::Value;

use super::audit::Chain;
use super::protocol::{Negotiated, ReplayWindow};
use super::sessions;
use crate::acs::envelope::{self, Metadata};
use crate::state::{EffectEntry, SessionState};

/// The effect keys a subagent's session changed, as its parent merges them.
pub(crate) type Effects = Vec<(Arc<str>, EffectEntry)>;

/// Where a session is in its life.
#[derive(Debug, Default)]
pub(crate) enum Life {
    /// Taking steps.
    #[default]
    Open,
    /// `sessionEnd` was decided: the chain is sealed and the state dropped. What is kept is
    /// what the parent's `subagentStop` reads of an ended subagent.
    Sealed {
        /// When (Guardian clock), for dropping the tombstone later.
        at_ms: i64,
        /// The labels of everything that entered the session's context.
        labels: Option<u64>,
        /// The effect keys the session changed.
        effects: Effects,
    },
    /// The session went over a memory cap: every later request is refused, for this reason.
    Refused(String),
}

/// One session: its state, its protocol bookkeeping and its place in a subagent family.
#[derive(Debug, Default)]
pub(crate) struct Session {
    pub(crate) state: Option<SessionState>,
    pub(crate) life: Life,
    /// For a subagent's session: the session that spawned it.
    pub(crate) parent: Option<String>,
    pub(crate) negotiated: Option<Arc<Negotiated>>,
    pub(crate) window: ReplayWindow,
    pub(crate) chain: Chain,
    /// Digest of the policy the session's last step was decided on.
    pub(crate) policy_digest: Option<Arc<str>>,
    /// For a subagent: the parent's chain head after its `subagentStart` entry, recorded in
    /// the child's root entry.
    pub(crate) parent_link: Option<String>,
    /// When the session last had a request (Guardian clock), for idle eviction.
    pub(crate) last_active_ms: i64,
    /// The agent that opened it (`metadata.agent_id`; a subagent's session counts as its
    /// parent's agent's).
    pub(crate) agent: Arc<str>,
    /// The session is part of a subagent family (it has a parent or spawned a child): its
    /// state depends on the other members', so it stays in memory until it ends.
    pub(crate) family: bool,
    /// Being rebuilt from the journal outside the table: it opens no subagent sessions.
    pub(crate) detached: bool,
    /// Its records are already one compacted `Record::Sealed`.
    pub(crate) compacted: bool,
    /// The fencing token of the lease this copy of the session was decided under (several
    /// Guardians on one database): its records are committed only while the lease still
    /// carries it. `None` with a journal of one Guardian's own.
    pub(crate) lease: Option<i64>,
    /// Said hello (at this time, under this policy) and took no step yet: the handshake is
    /// journalled with the first step, so a session that only said hello costs the journal
    /// nothing.
    pub(crate) hello: Option<(i64, Arc<str>)>,
    /// The last step's metadata and its tree, for a request that came without its tree
    /// (`acs::shell`): a session's steps mostly repeat their metadata (a turn's steps all
    /// do), so the tree is rebuilt only when it changes. Not state: nothing is journalled.
    pub(crate) metadata_seen: Option<Box<(Metadata, Value)>>,
}

/// The tree of `m`, from `seen` when the last step's metadata was the same, else built and
/// kept there. A new turn id alone (each turn's first step) is written into the kept tree in
/// place, where it stands.
pub(crate) fn metadata_tree<'s>(
    seen: &'s mut Option<Box<(Metadata, Value)>>,
    m: &Metadata,
) -> &'s Value {
    if let Some(kept) = seen.as_mut().filter(|kept| kept.0 != *m) {
        let new_turn_only = match (&kept.0.turn_id, &m.turn_id) {
            (Some(_), Some(turn)) => {
                let was = kept.0.turn_id.replace(turn.clone());
                let same = kept.0 == *m;
                if !same {
                    kept.0.turn_id = was;
                }
                same
            }
            _ => false,
        };
        match (new_turn_only, &mut kept.1) {
            (true, Value::Object(tree)) if tree.contains_key("turn_id") => {
                tree["turn_id"] = Value::String(m.turn_id.clone().unwrap_or_default());
            }
            _ => *seen = None,
        }
    }
    &seen
        .get_or_insert_with(|| Box::new((m.clone(), envelope::metadata_tree(m))))
        .1
}

impl Session {
    /// A new, empty session of `agent`, active at `now_ms`.
    pub(crate) fn new(agent: &str, now_ms: i64) -> Session {
        Session {
            last_active_ms: now_ms,
            agent: Arc::from(agent),
            ..Session::default()
        }
    }

    /// When the session ended, if it has.
    pub(crate) fn sealed_at(&self) -> Option<i64> {
        match self.life {
            Life::Sealed { at_ms, .. } => Some(at_ms),
            _ => None,
        }
    }

    /// The labels and changed effect keys a subagent hands back at its parent's
    /// `subagentStop`: from its state while it lives, from what its seal kept once it ended.
    pub(crate) fn handed_back(&self) -> Option<(u64, Effects)> {
        match (&self.state, &self.life) {
            (Some(st), _) => Some((st.scalars.session_labels, st.changed_effects())),
            (
                None,
                Life::Sealed {
                    labels, effects, ..
                },
            ) => Some(((*labels)?, effects.clone())),
            (None, _) => None,
        }
    }

    /// Ends the session at `at_ms`, keeping `labels` and `effects` for its parent; the state
    /// and the replay window go. The one way a session is sealed, decided or restored.
    pub(crate) fn seal(&mut self, at_ms: i64, labels: Option<u64>, effects: Effects) {
        self.life = Life::Sealed {
            at_ms,
            labels,
            effects,
        };
        self.state = None;
        self.window = ReplayWindow::default();
    }
}

/// Whether a session whose wait in a retirement queue ran out leaves memory: an ended
/// session's tombstone after the skew window; a live one after the idle time without a
/// request, unless it belongs to a subagent family.
impl sessions::Retire for Session {
    fn verdict(
        &self,
        now: i64,
        sealed_queue: bool,
        limits: &sessions::Limits,
    ) -> sessions::Verdict {
        use sessions::Verdict;
        let tombstone = limits.tombstone_ms.unwrap_or(0) as i64;
        if let Some(sealed_at) = self.sealed_at() {
            let due = sealed_at.saturating_add(tombstone);
            return if sealed_queue || due <= now {
                // Outside a subagent family, its records can be compacted.
                if self.family || self.compacted {
                    Verdict::Remove
                } else {
                    Verdict::RemoveAndList
                }
            } else {
                Verdict::Keep(due)
            };
        }
        if sealed_queue {
            return Verdict::Keep(now);
        }
        let Some(idle) = limits.idle_ms else {
            return Verdict::Keep(i64::MAX);
        };
        let due = self.last_active_ms.saturating_add(idle as i64);
        if self.family {
            // Re-examined once per idle period; it leaves when it ends.
            Verdict::Keep(now.saturating_add(idle as i64))
        } else if due <= now {
            Verdict::Remove
        } else {
            Verdict::Keep(due)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(turn: Option<&str>, agent: &str) -> Metadata {
        serde_json::from_value(serde_json::json!({
            "agent_id": agent,
            "session_id": "5e55e55e-0000-4000-8000-00000000be7c",
            "turn_id": turn,
            "platform": "bench",
        }))
        .unwrap()
    }

    /// The kept tree is the tree built afresh, member order too, through a new turn (patched
    /// in place), another change (built again), and a turn id that comes and goes.
    #[test]
    fn the_kept_metadata_tree_is_the_one_built_afresh() {
        let mut seen = None;
        for m in [
            meta(Some("t1"), "a"),
            meta(Some("t1"), "a"),
            meta(Some("t2"), "a"),
            meta(Some("t3"), "b"),
            meta(None, "b"),
            meta(Some("t4"), "b"),
            meta(Some("t5"), "b"),
        ] {
            let kept = serde_json::to_string(metadata_tree(&mut seen, &m)).unwrap();
            assert_eq!(
                kept,
                serde_json::to_string(&envelope::metadata_tree(&m)).unwrap()
            );
            assert!(seen.as_ref().is_some_and(|s| s.0 == m));
        }
    }
}
