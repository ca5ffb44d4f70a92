//! What the Guardian writes down before it answers: the journal records from which every
//! session (state, replay window, negotiation, chain head) is rebuilt after a restart, and the
//! Guardian's own record of each policy reload.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::protocol::Negotiated;
use crate::state::ApprovalNote;

/// One journal record. A session's records, in order, rebuild it exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A handshake settled a session.
    Handshake {
        session: String,
        negotiated: Negotiated,
    },
    /// A decided step: the request (`method`, `params` as received), whether it went ahead,
    /// the labels it inherited from outside the session (a subagent's, at `subagentStop`),
    /// and the chain entries it wrote (a policy-reload entry may come first).
    Step {
        session: String,
        method: String,
        params: Value,
        proceeds: bool,
        /// The decision failed: the step's content still entered the session with its labels
        /// (a decision failure never drops taint), so a restore takes it in too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed: bool,
        #[serde(default)]
        extra_labels: u64,
        entries: Vec<Value>,
        /// What the step did to the session's approvals (an ask opened one, an approved call
        /// used one up).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<ApprovalNote>,
    },
    /// An operator resolved an effect key (docs/effects.md) to `committed` or `failed`, and
    /// the chain entry that records it.
    EffectResolved {
        session: String,
        key: String,
        to: String,
        #[serde(default)]
        entries: Vec<Value>,
    },
    /// An approver granted the ask `request_id` at `at_ms` (docs/effects.md), and the chain
    /// entries that record it (the grant, and an `intent_extension` when it widened the
    /// Intent).
    ApprovalGranted {
        session: String,
        request_id: String,
        at_ms: i64,
        entries: Vec<Value>,
    },
    /// The Guardian swapped its policy (`warden serve --watch`): the digest of the policy it
    /// replaced, the digest of the one it took, and when (server time, RFC 3339). Written
    /// before the swap takes effect, so every step decided on the new policy comes after it in
    /// the journal. It belongs to no session: each session's chain notes the change at its next
    /// audited step (a `warden/policy_reload` entry).
    PolicyReload {
        old: String,
        new: String,
        at: String,
    },
}

impl Record {
    /// The session the record belongs to (`None`: a Guardian-wide record, a policy reload).
    pub fn session(&self) -> Option<&str> {
        match self {
            Record::Handshake { session, .. }
            | Record::Step { session, .. }
            | Record::EffectResolved { session, .. }
            | Record::ApprovalGranted { session, .. } => Some(session),
            Record::PolicyReload { .. } => None,
        }
    }
}

/// Where records go. `append` returns once the records are durable (or fails).
pub trait Journal: Send + Sync {
    fn append(&self, records: Vec<Record>) -> Result<(), String>;
}

/// A journal in memory (for tests and embedding).
#[derive(Debug, Default)]
pub struct MemoryJournal {
    pub records: Mutex<Vec<Record>>,
}

impl Journal for MemoryJournal {
    fn append(&self, records: Vec<Record>) -> Result<(), String> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(records);
        Ok(())
    }
}

impl MemoryJournal {
    pub fn take(&self) -> Vec<Record> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The policy reloads in the records, in order: (old digest, new digest, time).
pub fn reloads<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> Vec<(&'a str, &'a str, &'a str)> {
    records
        .into_iter()
        .filter_map(|r| match r {
            Record::PolicyReload { old, new, at } => {
                Some((old.as_str(), new.as_str(), at.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// Each session's chain entries, in order of first appearance.
pub fn chains<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<(String, Vec<Value>)> {
    let mut order: Vec<(String, Vec<Value>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for r in records {
        let (session, entries) = match r {
            Record::Step {
                session, entries, ..
            }
            | Record::EffectResolved {
                session, entries, ..
            }
            | Record::ApprovalGranted {
                session, entries, ..
            } => (session, entries),
            Record::Handshake { .. } | Record::PolicyReload { .. } => continue,
        };
        {
            let i = *index.entry(session.clone()).or_insert_with(|| {
                order.push((session.clone(), Vec::new()));
                order.len() - 1
            });
            order[i].1.extend(entries.iter().cloned());
        }
    }
    order
}
