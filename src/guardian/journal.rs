//! What the Guardian writes down before it answers: the journal records from which every
//! session (state, replay window, negotiation, chain head) is rebuilt after a restart, and the
//! Guardian's own record of each policy reload.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

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
        /// The session id.
        session: String,
        /// What was negotiated.
        negotiated: Negotiated,
        /// The agent that opened the session (`metadata.agent_id`), for admission counts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// When it was settled (Guardian clock, ms): a restored session keeps its age.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
        /// The digest of the policy the session started under: a restart under another
        /// policy then writes the session's `warden/policy_reload` entry at its next step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// A decided step: the request (`method`, `params` as received), whether it went ahead,
    /// the labels it inherited from outside the session (a subagent's, at `subagentStop`),
    /// and the chain entries it wrote (a policy-reload entry may come first).
    Step {
        /// The session id.
        session: String,
        /// The method as it arrived.
        method: String,
        /// The request's `params`, as received.
        params: Value,
        /// Whether the step went ahead (allow or modify).
        proceeds: bool,
        /// The decision failed: the step's content still entered the session with its labels
        /// (a decision failure never drops taint), so a restore takes it in too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failed: bool,
        #[serde(default)]
        /// Labels the step's content inherited from outside the session.
        extra_labels: u64,
        /// The chain entries it wrote, hashed.
        entries: Vec<Value>,
        /// What the step did to the session's approvals (an ask opened one, an approved call
        /// used one up).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<ApprovalNote>,
        /// When it was decided (Guardian clock, ms): a restored session keeps its age, and an
        /// ended one its end time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
        /// The digest of the policy it was decided on, when the session knew no policy before
        /// it or another one (its first step without a handshake; its first after a reload):
        /// a restored session then writes the `warden/policy_reload` entries a live one would.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// An operator resolved an effect key (docs/effects.md) to `committed` or `failed`, and
    /// the chain entry that records it.
    EffectResolved {
        /// The session id.
        session: String,
        /// The effect key.
        key: String,
        /// What it was resolved to: `committed` or `failed`.
        to: String,
        #[serde(default)]
        /// The chain entry recording it.
        entries: Vec<Value>,
    },
    /// An approver granted the ask `request_id` at `at_ms` (docs/effects.md), and the chain
    /// entries that record it (the grant, and an `intent_extension` when it widened the
    /// Intent).
    ApprovalGranted {
        /// The session id.
        session: String,
        /// The request id of the ask granted.
        request_id: String,
        /// When it was granted (ms).
        at_ms: i64,
        /// The chain entries recording it.
        entries: Vec<Value>,
    },
    /// The Guardian swapped its policy (`warden serve --watch`): the digest of the policy it
    /// replaced, the digest of the one it took, and when (server time, RFC 3339). Written
    /// before the swap takes effect, so every step decided on the new policy comes after it in
    /// the journal. It belongs to no session: each session's chain notes the change at its next
    /// audited step (a `warden/policy_reload` entry).
    PolicyReload {
        /// The digest of the policy replaced.
        old: String,
        /// The digest of the policy taken.
        new: String,
        /// When (server time, RFC 3339).
        at: String,
    },
    /// An ended session, compacted: written in place of all its records once its tombstone
    /// time has passed. It keeps the whole audit chain (so `warden audit verify` verifies it as
    /// before) and what the tombstone holds; the requests themselves are gone.
    Sealed {
        /// The session id.
        session: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        /// The agent that opened it.
        agent: Option<String>,
        /// When the session ended (Guardian clock, ms).
        at_ms: i64,
        /// The labels of everything that entered its context.
        labels: u64,
        /// The session's whole audit chain.
        entries: Vec<Value>,
    },
}

impl Record {
    /// The session the record belongs to (`None`: a Guardian-wide record, a policy reload).
    pub fn session(&self) -> Option<&str> {
        match self {
            Record::Handshake { session, .. }
            | Record::Step { session, .. }
            | Record::EffectResolved { session, .. }
            | Record::ApprovalGranted { session, .. }
            | Record::Sealed { session, .. } => Some(session),
            Record::PolicyReload { .. } => None,
        }
    }

    /// The agent whose session this is, when the record says.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Record::Handshake { agent, .. } | Record::Sealed { agent, .. } => agent.as_deref(),
            Record::Step { params, .. } => params.pointer("/metadata/agent_id")?.as_str(),
            _ => None,
        }
    }

    /// The audit chain entries the record wrote, in order.
    pub(crate) fn entries(&self) -> &[Value] {
        match self {
            Record::Step { entries, .. }
            | Record::EffectResolved { entries, .. }
            | Record::ApprovalGranted { entries, .. }
            | Record::Sealed { entries, .. } => entries,
            Record::Handshake { .. } | Record::PolicyReload { .. } => &[],
        }
    }

    /// When the record was written (Guardian clock, ms), when it says.
    pub fn at_ms(&self) -> Option<i64> {
        match self {
            Record::Handshake { at_ms, .. } | Record::Step { at_ms, .. } => *at_ms,
            Record::ApprovalGranted { at_ms, .. } | Record::Sealed { at_ms, .. } => Some(*at_ms),
            Record::PolicyReload { at, .. } => crate::acs::time::rfc3339_unix_ms(at),
            Record::EffectResolved { .. } => None,
        }
    }
}

/// Where records go. `append` returns once the records are durable (or fails); `submit`
/// hands them over and returns at once, with a [`Durable`] that settles when they are on disk.
/// Records submitted one after the other become durable in that order: a later record is
/// never durable while an earlier one is not.
pub trait Journal: Send + Sync {
    /// Makes `records` durable, in order, and returns once they are (or cannot be).
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError>;

    /// Hands `records` over without waiting for them to be durable. The default appends and
    /// returns a settled [`Durable`].
    fn submit(&self, records: Vec<Record>) -> Durable {
        Durable::settled_as(self.append(records))
    }

    /// Like [`Journal::submit`], for records of one session decided under the lease token
    /// `lease` ([`Claim`]): a journal with leases commits them only while the session's lease
    /// still carries that token. The default ignores the token.
    fn submit_as(&self, records: Vec<Record>, _lease: Option<i64>) -> Durable {
        self.submit(records)
    }

    /// One session's records in the order they were written, for restoring a session that
    /// left memory; `None` when this journal cannot look them up (such sessions are then
    /// gone once they leave memory).
    fn session_records(&self, _session: &str) -> Option<Result<Vec<Record>, JournalError>> {
        None
    }

    /// Replaces every record of `session` with `summary` (a [`Record::Sealed`]), durably;
    /// `Ok(false)` when this journal does not compact.
    fn compact(&self, _session: &str, _summary: Record) -> Result<bool, JournalError> {
        Ok(false)
    }

    /// Like [`Journal::compact`] without waiting: the [`Durable`] settles once the summary
    /// has replaced the records, so many compactions can share one commit. The default
    /// compacts at once.
    fn compact_submit(&self, session: &str, summary: Record) -> Durable {
        Durable::settled_as(self.compact(session, summary).map(|_| ()))
    }

    /// Whether this Guardian may decide `session` now. A journal shared by several Guardians
    /// (PostgreSQL) answers from its lease on the session; one Guardian's own journal always
    /// holds every session (the default).
    fn claim(&self, _session: &str) -> Claim {
        Claim::Held { token: None }
    }

    /// Like [`Journal::claim`], but only reads: whether another Guardian holds `session`'s
    /// lease now ([`Claim::Busy`]), or this one or nobody does ([`Claim::Held`] with no
    /// token). A hello is answered on this, so a flood of hellos writes nothing; the lease is
    /// taken by the session's first step. The default (no leases): [`Claim::Held`].
    fn peek(&self, _session: &str) -> Claim {
        Claim::Held { token: None }
    }
}

/// What [`Journal::claim`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This Guardian holds the session's lease (with this fencing token; `None` for a
    /// journal without leases): what it has in memory is current.
    Held {
        /// The fencing token (`None`: a journal without leases).
        token: Option<i64>,
    },
    /// It has just taken the lease, with this new token (the session was free, expired, or
    /// never held): another Guardian may have written the session since, so what it holds
    /// in memory is stale.
    Taken {
        /// The new fencing token.
        token: i64,
    },
    /// Another Guardian holds the lease, for about `expires_in_ms` more unless renewed.
    Busy {
        /// The Guardian holding it.
        holder: String,
        /// About how long the lease still runs, unless renewed.
        expires_in_ms: i64,
    },
    /// The lease could not be read or taken.
    Failed(String),
}

/// How a [`JournalError::LeaseLost`] reads as text (what [`Durable::wait`] and the
/// `Result<_, String>` methods of [`Journal`] give): this prefix, then why.
pub const LEASE_LOST: &str = "lease lost: ";

/// Why records could not be made durable. What a Guardian does next depends on which: a lost
/// lease fails one session's answer, anything else every later request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalError {
    /// The records' session is no longer this Guardian's: another Guardian took its lease
    /// over (the text says how). Only that session's answer fails: the other Guardian decides
    /// it now.
    LeaseLost(String),
    /// The journal failed: nothing more can be acknowledged.
    Failed(String),
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::LeaseLost(why) => write!(f, "{LEASE_LOST}{why}"),
            JournalError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for JournalError {}

/// A journal's own error text is a failure (a lost lease is always built as one).
impl From<String> for JournalError {
    fn from(why: String) -> JournalError {
        JournalError::Failed(why)
    }
}

/// The promise that submitted records are durable: wait for it ([`Durable::wait`]) on a
/// thread, or `.await` it (it is a `Future`, with no runtime of its own). A transport answers a
/// request only once its records' `Durable` settled `Ok`, which is what lets one fsync
/// acknowledge many requests (group commit) without a thread parked per request.
#[derive(Debug)]
pub struct Durable(Arc<Slot>);

/// Settles a [`Durable`]; dropping it unsettled settles it with an error (the writer stopped).
#[derive(Debug)]
pub struct Settle(Option<Arc<Slot>>);

#[derive(Debug, Default)]
struct Slot {
    state: Mutex<SlotState>,
    settled: Condvar,
    /// Run once, as the promise settles ([`Durable::on_settle`]); taken under `state`'s lock.
    hook: Mutex<Option<Hook>>,
}

/// What [`Durable::on_settle`] runs.
struct Hook(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

#[derive(Debug, Default)]
enum SlotState {
    #[default]
    Waiting,
    Polled(Waker),
    Done(Result<(), JournalError>),
    Taken,
}

impl Durable {
    /// A promise already kept (or broken).
    pub fn settled(outcome: Result<(), String>) -> Durable {
        Durable::settled_as(outcome.map_err(JournalError::Failed))
    }

    /// A promise already kept, or broken for the reason given.
    pub fn settled_as(outcome: Result<(), JournalError>) -> Durable {
        let slot = Slot::default();
        *slot.state.lock().unwrap_or_else(|e| e.into_inner()) = SlotState::Done(outcome);
        Durable(Arc::new(slot))
    }

    /// A promise and the handle that settles it.
    pub fn pending() -> (Durable, Settle) {
        let slot = Arc::new(Slot::default());
        (Durable(slot.clone()), Settle(Some(slot)))
    }

    /// Runs `hook` once this promise settles, kept or broken, on the thread that settles it
    /// and before any waiter sees the outcome (at once, here, if it has settled already); a
    /// second hook replaces the first. For counting what waits on the journal and for how
    /// long (`Guardian::stats`): the hook runs under the promise's lock, so it must be quick
    /// and must not touch this promise.
    pub fn on_settle(self, hook: impl FnOnce() + Send + 'static) -> Durable {
        let now = {
            let state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(*state, SlotState::Done(_) | SlotState::Taken) {
                Some(hook)
            } else {
                *self.0.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(Hook(Box::new(hook)));
                None
            }
        };
        if let Some(hook) = now {
            hook();
        }
        self
    }

    /// Blocks until the records are durable (or will never be, and why).
    pub fn wait(self) -> Result<(), JournalError> {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match std::mem::take(&mut *state) {
                SlotState::Done(r) => {
                    *state = SlotState::Taken;
                    return r;
                }
                SlotState::Taken => return Err(taken_twice()),
                waiting => {
                    *state = waiting;
                    state = self
                        .0
                        .settled
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
}

impl Durable {
    /// Awaits the outcome (like `.await` on the `Durable`), with the reason it failed.
    pub fn settled_outcome(self) -> Settled {
        Settled(self)
    }

    fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Result<(), JournalError>> {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::take(&mut *state) {
            SlotState::Done(r) => {
                *state = SlotState::Taken;
                Poll::Ready(r)
            }
            SlotState::Taken => Poll::Ready(Err(taken_twice())),
            SlotState::Waiting | SlotState::Polled(_) => {
                *state = SlotState::Polled(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

fn taken_twice() -> JournalError {
    JournalError::Failed("the durability outcome was taken twice".into())
}

/// The error as text, like [`Durable::wait`].
impl Future for Durable {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_outcome(cx).map(|r| r.map_err(|e| e.to_string()))
    }
}

/// [`Durable::settled_outcome`]: a [`Durable`] awaited with its typed error.
#[derive(Debug)]
pub struct Settled(Durable);

impl Future for Settled {
    type Output = Result<(), JournalError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_outcome(cx)
    }
}

impl Settle {
    /// Settles the promise: `Ok` once the records are durable (an error is a failure).
    pub fn settle(self, outcome: Result<(), String>) {
        self.settle_as(outcome.map_err(JournalError::Failed));
    }

    /// Settles the promise, saying why when it is broken.
    pub fn settle_as(mut self, outcome: Result<(), JournalError>) {
        if let Some(slot) = self.0.take() {
            finish(&slot, outcome);
        }
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            finish(
                &slot,
                Err(JournalError::Failed("the journal writer stopped".into())),
            );
        }
    }
}

fn finish(slot: &Slot, outcome: Result<(), JournalError>) {
    let waker = {
        let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
        // Run under the state's lock, before the promise reads as settled: `on_settle` either
        // saw it settled (and ran its hook itself) or left the hook here before this, and no
        // waiter sees the outcome before the hook has run.
        if let Some(Hook(hook)) = slot.hook.lock().unwrap_or_else(|e| e.into_inner()).take() {
            hook();
        }
        match std::mem::replace(&mut *state, SlotState::Done(outcome)) {
            SlotState::Polled(w) => Some(w),
            _ => None,
        }
    };
    slot.settled.notify_all();
    if let Some(w) = waker {
        w.wake();
    }
}

/// Encodes `records` with `encode` (on the caller's thread, so encoding runs in parallel) and
/// queues them, with the session whose records they replace and the promise to settle, for a
/// journal's committer thread; what the durable stores share.
pub fn enqueue<T>(
    tx: Option<&std::sync::mpsc::Sender<Queued<T>>>,
    records: &[Record],
    replaces: Option<String>,
    encode: impl Fn(&Record) -> Result<T, String>,
) -> Durable {
    let encoded: Result<Vec<(Option<String>, T)>, String> = records
        .iter()
        .map(|r| Ok((r.session().map(str::to_string), encode(r)?)))
        .collect();
    let encoded = match encoded {
        Ok(e) => e,
        Err(e) => return Durable::settled(Err(e)),
    };
    let Some(tx) = tx else {
        return Durable::settled(Err("the journal is closed".into()));
    };
    let (durable, settle) = Durable::pending();
    // A send that fails drops `settle`, which settles `durable` with an error.
    let _ = tx.send((encoded, replaces, settle));
    durable
}

/// What [`enqueue`] hands a committer: encoded records with their sessions, the session they
/// replace (a compaction), and the promise to settle once they are durable.
pub type Queued<T> = (Vec<(Option<String>, T)>, Option<String>, Settle);

/// A journal in memory (for tests and embedding).
#[derive(Debug, Default)]
pub struct MemoryJournal {
    /// Every record appended, in order.
    pub records: Mutex<Vec<Record>>,
}

impl Journal for MemoryJournal {
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(records);
        Ok(())
    }

    fn compact(&self, session: &str, summary: Record) -> Result<bool, JournalError> {
        let mut all = self.records.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|r| r.session() != Some(session));
        all.push(summary);
        Ok(true)
    }

    fn session_records(&self, session: &str) -> Option<Result<Vec<Record>, JournalError>> {
        let all = self.records.lock().unwrap_or_else(|e| e.into_inner());
        Some(Ok(all
            .iter()
            .filter(|r| r.session() == Some(session))
            .cloned()
            .collect()))
    }
}

impl MemoryJournal {
    /// Takes every record out (the journal is empty after).
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
            }
            | Record::Sealed {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_lease_is_a_type_and_reads_with_its_prefix() {
        let (durable, settle) = Durable::pending();
        settle.settle_as(Err(JournalError::LeaseLost(
            "another Guardian took s over".into(),
        )));
        assert_eq!(
            durable.wait(),
            Err(JournalError::LeaseLost(
                "another Guardian took s over".into()
            ))
        );
        let lost = Durable::settled_as(Err(JournalError::LeaseLost("why".into())));
        assert_eq!(
            lost.wait().map_err(|e| e.to_string()),
            Err(format!("{LEASE_LOST}why"))
        );
        // Text a journal hands back is a failure, never a lost lease, whatever it says.
        let (durable, settle) = Durable::pending();
        settle.settle(Err(format!("{LEASE_LOST}but only in words")));
        assert!(matches!(durable.wait(), Err(JournalError::Failed(_))));
        let (durable, settle) = Durable::pending();
        drop(settle);
        assert!(matches!(durable.wait(), Err(JournalError::Failed(_))));
    }

    #[test]
    fn a_hook_runs_once_as_the_promise_settles_kept_or_broken() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runs = Arc::new(AtomicUsize::new(0));
        let count = || {
            let runs = runs.clone();
            move || {
                runs.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Settled already: the hook runs at once.
        let done = Durable::settled(Ok(())).on_settle(count());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(done.wait(), Ok(()));
        // Pending: not before the settle, once at it, seen by the waiter on another thread.
        let (durable, settle) = Durable::pending();
        let durable = durable.on_settle(count());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let seen = {
            let runs = runs.clone();
            std::thread::spawn(move || {
                durable.wait().unwrap();
                runs.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        settle.settle(Ok(()));
        assert_eq!(seen.join().unwrap(), 2, "the waiter sees the hook's count");
        // A writer that stopped breaks the promise: the hook still runs.
        let (durable, settle) = Durable::pending();
        let durable = durable.on_settle(count());
        drop(settle);
        assert!(durable.wait().is_err());
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }
}
