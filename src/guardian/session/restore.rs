//! Sessions rebuilt from the journal: at a restart ([`Guardian::restore`], every record in
//! order), for a session that left memory and comes back, and to compact an ended session. A
//! step's record runs the phases a decided step ran, with the engine re-applying what the
//! decision did instead of deciding: the view (`view.rs`), the engine (`reapply_event` for a
//! step that went ahead, `taint_event` for one whose decision failed), the approval note, and
//! the same [`Session::commit`]. The gate is not run: the journal holds what was admitted.
//!
//! Owns: reading records back into sessions. Must not know: how the journal stores them.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{After, Commit, Digest, Refusal, Session, View};
use crate::acs::{fields, time};
use crate::guardian::protocol;
use crate::guardian::{engine, journal, Guardian, Record};
use crate::state::{EffectStatus, SessionState};

impl Guardian {
    /// Rebuilds sessions from journal records (in the order they were written), without
    /// writing them again: each committed step's effect on the state is re-applied (the
    /// policy's rules are not re-run; the journal says whether the step went ahead), the
    /// replay window, negotiation, chain head and seal are restored. Exact when the policy
    /// is the one the records were decided on. The journal may come in consecutive chunks (one
    /// call each); ended sessions past their tombstone time leave memory as it goes, idle ones
    /// at [`Guardian::sweep_sessions`] after the last chunk.
    pub fn restore(&self, records: impl IntoIterator<Item = Record>) -> usize {
        let now = time::now_ms();
        let proto = &self.options.protocol;
        let mut n = 0;
        for record in records {
            n += 1;
            // Restored whatever the caps say (the journal holds what was admitted).
            // A policy reload belongs to no session.
            let Some(sid) = record.session() else {
                continue;
            };
            let agent = record.agent().unwrap_or("");
            let at_ms = record.at_ms().unwrap_or(now);
            let Ok(session) = self.admit(sid, agent, false, at_ms) else {
                continue;
            };
            let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
            self.restore_record(&mut s, record, now);
        }
        if let Some(w) = proto.skew_window_ms {
            for (_, s) in self.sessions.entries() {
                s.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .window
                    .prune(now, Some(w));
            }
        }
        // Ended sessions past their tombstone time leave as the restore goes; idle ones
        // only when the caller says the journal is done (`sweep_sessions`), since a later
        // record may still continue them.
        self.sessions.sweep_tombstones(now, &self.limits());
        n
    }

    /// A session that left memory and comes back: rebuilt from its own records in the
    /// journal (outside the table, so no request sees it half-built), then admitted like a
    /// new session. `None`: the journal has nothing for it (or cannot look it up).
    pub(crate) fn restore_returning(
        &self,
        sid: &str,
    ) -> Option<Result<Arc<Mutex<Session>>, Refusal>> {
        let records = match self.journal.as_ref()?.session_records(sid)? {
            Ok(r) if r.is_empty() => return None,
            Ok(r) => r,
            Err(e) => return Some(Err(Refusal::RecordsUnreadable(e.to_string()))),
        };
        let s = self.rebuild(records);
        let agent = s.agent.clone();
        let sealed_at = s.sealed_at();
        let last_active = s.last_active_ms;
        let admitted = self.admit_with(sid, &agent, true, last_active, move || s);
        if let (Ok(_), Some(at)) = (&admitted, sealed_at) {
            self.sessions.note_sealed(sid, at);
        }
        Some(admitted)
    }

    /// A session rebuilt from its own records, outside the table.
    pub(crate) fn rebuild(&self, records: Vec<Record>) -> Session {
        let now = time::now_ms();
        let agent = records.iter().find_map(Record::agent).unwrap_or("");
        let mut s = Session {
            detached: true,
            ..Session::new(agent, 0)
        };
        for r in records {
            self.restore_record(&mut s, r, now);
        }
        s.detached = false;
        s.window.prune(now, self.options.protocol.skew_window_ms);
        s
    }

    /// The one record that replaces an ended session's records once its tombstone left
    /// memory: it keeps the audit chain and what the tombstone holds. `None`: nothing to
    /// compact (no journal, already compacted, not ended, or part of a subagent family, whose
    /// records the other members' restores read).
    pub(crate) fn compact_summary(&self, sid: &str) -> Option<Record> {
        let journal = self.journal.as_ref()?;
        let records = match journal.session_records(sid) {
            Some(Ok(r)) => r,
            _ => return None,
        };
        if records.is_empty() || matches!(records[..], [Record::Sealed { .. }]) {
            return None;
        }
        let entries: Vec<Value> = journal::chains(&records)
            .into_iter()
            .flat_map(|(_, e)| e)
            .collect();
        let s = self.rebuild(records);
        let (at_ms, labels) = match &s.life {
            super::Life::Sealed { at_ms, labels, .. } if !s.family => (*at_ms, *labels),
            _ => return None,
        };
        Some(Record::Sealed {
            session: sid.to_string(),
            agent: Some(s.agent.to_string()).filter(|a| !a.is_empty()),
            at_ms,
            labels: labels.unwrap_or(0),
            entries,
        })
    }

    /// Re-applies one journal record to a session (restart and returning sessions alike).
    /// Ages come from the records, so a restart does not make old sessions young.
    fn restore_record(&self, s: &mut Session, record: Record, now: i64) {
        let at_ms = record.at_ms().unwrap_or(now);
        s.last_active_ms = at_ms;
        match record {
            // Guardian-wide: nothing of a session's.
            Record::PolicyReload { .. } => {}
            Record::Sealed {
                session,
                labels,
                entries,
                at_ms,
                ..
            } => {
                s.move_chain(&entries);
                s.seal(at_ms, Some(labels), Vec::new());
                s.compacted = true;
                self.sessions.note_sealed(&session, at_ms);
            }
            Record::Handshake {
                negotiated, policy, ..
            } => {
                s.negotiated = Some(Arc::new(negotiated));
                if let Some(d) = policy {
                    s.policy_digest = Some(Arc::from(d));
                }
            }
            Record::EffectResolved {
                key, to, entries, ..
            } => {
                s.move_chain(&entries);
                if let (Some(state), Some(to)) = (s.state.as_mut(), EffectStatus::parse(&to)) {
                    state.resolve_effect(&key, to);
                }
            }
            Record::ApprovalGranted {
                request_id,
                at_ms,
                entries,
                ..
            } => {
                s.move_chain(&entries);
                if let Some(state) = s.state.as_mut() {
                    state.grant(&request_id, at_ms);
                }
            }
            Record::Step { .. } => self.restore_step(s, record, now, at_ms),
        }
    }

    /// Re-applies a step's record: the phases a decided step ran, the engine re-applying
    /// instead of deciding, ending in the same commit.
    fn restore_step(&self, s: &mut Session, record: Record, now: i64, at_ms: i64) {
        let Record::Step {
            session: sid,
            method,
            params,
            proceeds,
            failed,
            extra_labels,
            entries,
            approval,
            policy,
            ..
        } = record
        else {
            return;
        };
        // As when it was decided, a subagent's effect changes reach its parent at the stop.
        let child_effects = match (proceeds, method.as_str()) {
            (true, "steps/subagentStop") => params
                .pointer("/payload/subagent_session_id")
                .and_then(Value::as_str)
                .and_then(|c| self.session_facts(c))
                .map(|f| f.effects),
            _ => None,
        };
        let Some(hook) = fields::hook(&method) else {
            return;
        };
        let active = self.active();
        let program = &active.program;
        let proto = &self.options.protocol;
        let payload = params.get("payload").unwrap_or(&Value::Null);
        let metadata = params.get("metadata").unwrap_or(&Value::Null);
        let request_id = params
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let time_ms = params
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(time::rfc3339_unix_ms);
        let view = View::of(hook, payload, request_id);
        let ev = view.event(payload, request_id, metadata, time_ms, extra_labels);
        let state = s.state.get_or_insert_with(|| SessionState::new(program));
        if proceeds {
            engine::reapply_event(program, state, &ev);
        } else if failed {
            engine::taint_event(program, state, &ev);
        }
        if let Some(note) = &approval {
            state.apply_approval(note);
        }
        let window = proto.replay_protection.then(|| {
            let nonce = params.get("nonce").and_then(Value::as_str);
            (
                time_ms.unwrap_or(now),
                protocol::id_key(request_id),
                nonce.map(protocol::hash_key),
            )
        });
        let after = s.commit(Commit {
            method: view.hook.method,
            proceeds,
            window,
            max_request_ids: proto.caps.max_request_ids,
            entries: &entries,
            digest: match policy {
                Some(d) => Digest::Decided(Arc::from(d)),
                None => Digest::Restored(active.digest.clone()),
            },
            child_effects: child_effects.as_ref(),
            at_ms,
        });
        self.after_commit(s, &sid, after, payload);
    }

    /// What a commit leaves to the Guardian, outside the session: a subagent's session opened
    /// (not while the parent is being rebuilt outside the table), a seal noted in the table.
    pub(crate) fn after_commit(&self, s: &Session, sid: &str, after: After, payload: &Value) {
        match after {
            After::Nothing => {}
            After::Spawn => {
                if !s.detached {
                    self.spawn_child(sid, s, payload);
                }
            }
            After::Sealed(at_ms) => self.sessions.note_sealed(sid, at_ms),
        }
    }
}
