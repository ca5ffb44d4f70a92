//! The audit chain: one ContextEntry per audited step (docs/acs.md#audit-chain), hashed with
//! [`crate::acs::crypto::entry_hash`], and the chain head each session keeps.

// Error responses are the rare path, built once per refused request: no need to box them.
#![allow(clippy::result_large_err)]

use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::acs::crypto;

/// `step_type` of the entry written when a session is first decided on a new policy.
pub const POLICY_RELOAD: &str = "warden/policy_reload";
/// `step_type` of the entry recording an operator's resolution of an effect key.
pub const EFFECT_RESOLVED: &str = "warden/effect_resolved";
/// `step_type` of the entry recording an approver's grant of an ask.
pub const APPROVAL_GRANTED: &str = "warden/approval_granted";

/// A session's chain: its head and length (the entries themselves go to the journal).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    /// The hash of the last entry (`None`: no entry yet).
    pub head: Option<String>,
    /// How many entries the chain has.
    pub len: u64,
}

impl Chain {
    /// Seals `entry` onto the chain: sets `previous_hash` and `entry_hash`, moves the head.
    pub fn append(&mut self, mut entry: Map<String, Value>) -> Value {
        let prev = self.head.clone();
        // The head is always a hash this chain computed, so it parses.
        let hash = crypto::entry_hash_of_map(&entry, prev.as_deref()).unwrap_or_default();
        entry.insert(
            "previous_hash".into(),
            prev.map(Value::String).unwrap_or(Value::Null),
        );
        entry.insert("entry_hash".into(), Value::String(hash.clone()));
        self.head = Some(hash);
        self.len += 1;
        Value::Object(entry)
    }

    /// The next entry's id: `<session_id>/<index>`, deterministic so that a replayed or
    /// restored run produces the same chain.
    pub fn next_id(&self, session: &str) -> String {
        format!("{session}/{}", self.len)
    }
}

/// The entry for a decided step, before hashing. `payload` is the request's payload: its
/// `params` may hold a placeholder where the payload was moved out
/// (`envelope::decode_request_detached`); a `params` without the member has none.
pub fn step_entry(
    entry_id: String,
    method: &str,
    params: &Value,
    payload: &Value,
    decision: &str,
) -> Map<String, Value> {
    let payload = match crate::acs::fields::member(params, "payload") {
        Some(_) => payload,
        None => &Value::Null,
    };
    // Sized for every member a step's entry can get (the hashes and the optional ones
    // included), so that it is never re-hashed while it is filled in.
    let mut e = Map::with_capacity(16);
    e.insert("entry_id".into(), Value::String(entry_id));
    e.insert(
        "step_id".into(),
        params.get("request_id").cloned().unwrap_or(Value::Null),
    );
    e.insert("step_type".into(), Value::String(method.into()));
    if let Some(t) = params.get("timestamp") {
        e.insert("timestamp".into(), t.clone());
    }
    e.insert(
        "request_hash".into(),
        Value::String(crypto::request_hash_with_payload(params, payload)),
    );
    if let Some(s) = provenance_summary(payload) {
        e.insert("provenance_summary".into(), s);
    }
    e.insert("decision".into(), Value::String(decision.into()));
    e
}

/// The start of an entry the Guardian writes on its own (not for a request): its id is also
/// its step id.
pub fn own_entry(entry_id: String, step_type: &str, timestamp: String) -> Map<String, Value> {
    let mut e = Map::new();
    e.insert("entry_id".into(), Value::String(entry_id.clone()));
    e.insert("step_id".into(), Value::String(entry_id));
    e.insert("step_type".into(), Value::String(step_type.into()));
    e.insert("timestamp".into(), Value::String(timestamp));
    e
}

/// The entry recording that a session's later steps are decided by a new policy: its digest,
/// and the digest of the policy the session's previous step was decided on (`null` if the
/// session has none on record).
pub fn reload_entry(
    entry_id: String,
    previous: Option<&str>,
    digest: &str,
    timestamp: String,
) -> Map<String, Value> {
    let mut e = own_entry(entry_id, POLICY_RELOAD, timestamp);
    e.insert(
        "previous_policy_digest".into(),
        previous.map_or(Value::Null, |d| Value::String(d.into())),
    );
    e.insert("policy_digest".into(), Value::String(digest.into()));
    e
}

/// Origins and counts of the provenance records in a payload (ProvenanceSummary), if any: the
/// records the step takes in (`acs::fields::provenance_records`, the one walk), so the summary
/// counts what the session's lineage holds.
pub fn provenance_summary(payload: &Value) -> Option<Value> {
    // Each origin with its count, in the order first seen (a payload has a handful).
    let mut counts: SmallVec<[(&str, u64); 4]> = SmallVec::new();
    for record in crate::acs::fields::provenance_records(payload) {
        let Some(origin) = crate::acs::fields::member(record, "origin").and_then(Value::as_str)
        else {
            continue;
        };
        match counts.iter_mut().find(|(o, _)| *o == origin) {
            Some((_, n)) => *n += 1,
            None => counts.push((origin, 1)),
        }
    }
    if counts.is_empty() {
        return None;
    }
    let mut summary = Map::with_capacity(3);
    summary.insert(
        "origins_seen".into(),
        Value::Array(counts.iter().map(|(o, _)| Value::from(*o)).collect()),
    );
    summary.insert(
        "entry_count".into(),
        Value::from(counts.iter().map(|(_, n)| n).sum::<u64>()),
    );
    summary.insert(
        "entry_count_by_origin".into(),
        Value::Object(
            counts
                .iter()
                .map(|(o, n)| ((*o).to_owned(), Value::from(*n)))
                .collect(),
        ),
    );
    Some(Value::Object(summary))
}

/// Verifies the stored chain of each session; the first broken link of the first broken
/// chain, as (session, index, entry, reason).
pub fn verify_sessions(
    chains: &[(String, Vec<Value>)],
) -> Result<usize, (String, usize, Value, String)> {
    let mut n = 0;
    for (session, entries) in chains {
        if let Err(e) = crypto::verify_chain(entries) {
            let entry = entries.get(e.index).cloned().unwrap_or(Value::Null);
            return Err((session.clone(), e.index, entry, e.to_string()));
        }
        n += entries.len();
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provenance_summary_counts_each_origin_in_the_order_first_seen() {
        let payload = json!({
            "outputs": [
                {"value": "a", "provenance": {"provenance_id": "p1", "origin": "tool_output"}},
                {"value": "b", "provenance": {"provenance_id": "p2", "origin": "user_input"}},
                {"value": ["c"], "provenance": {"provenance_id": "p3", "origin": "tool_output",
                    "elements": [{"provenance_id": "p4", "origin": "retrieved"}]}},
                // Not a record: no string provenance_id.
                {"value": "d", "provenance": {"origin": "system"}},
            ]
        });
        let summary = provenance_summary(&payload).unwrap();
        assert_eq!(
            serde_json::to_string(&summary).unwrap(),
            r#"{"origins_seen":["tool_output","user_input","retrieved"],"entry_count":4,"entry_count_by_origin":{"tool_output":2,"user_input":1,"retrieved":1}}"#
        );
        assert_eq!(provenance_summary(&json!({"tool": {"name": "x"}})), None);
    }

    /// A step's entry hashes and summarises the payload it is handed where the params tree
    /// holds a placeholder (the payload moved into the typed request), exactly as it would
    /// the whole params; params without a payload member stay without one.
    #[test]
    fn a_step_entry_reads_the_moved_payload_as_the_params_would_hold_it() {
        let payload = json!({"outputs": [{"value": "a",
            "provenance": {"provenance_id": "p1", "origin": "tool_output"}}]});
        let whole = json!({"acs_version": "0.1.0", "request_id": "r1",
            "timestamp": "2026-12-01T00:00:00Z", "payload": payload.clone()});
        let mut detached = whole.clone();
        detached["payload"] = Value::Null;
        let from_whole = step_entry(
            "s/0".into(),
            "steps/toolCallResult",
            &whole,
            &payload,
            "allow",
        );
        let from_detached = step_entry(
            "s/0".into(),
            "steps/toolCallResult",
            &detached,
            &payload,
            "allow",
        );
        assert_eq!(from_whole, from_detached);
        assert_eq!(
            from_whole["request_hash"],
            json!(crypto::request_hash(&whole))
        );
        assert!(from_whole.contains_key("provenance_summary"));

        let bare = json!({"acs_version": "0.1.0", "request_id": "r2"});
        let e = step_entry("s/1".into(), "steps/turnStart", &bare, &payload, "allow");
        assert_eq!(e["request_hash"], json!(crypto::request_hash(&bare)));
        assert!(!e.contains_key("provenance_summary"));
    }
}
