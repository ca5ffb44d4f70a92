//! Decision logs: one structured record per decided request, handed to a [`DecisionLog`] the
//! embedder installs ([`super::Guardian::set_decision_log`]). The Guardian builds the record;
//! where it goes (a file, stdout, an HTTP collector) is the embedder's: `warden serve
//! --decision-log` and `warden mcp-proxy --decision-log` put their sinks in `server`.
//!
//! The record (one JSON object; docs/serve.md, "Decision logs"):
//!
//! | field | |
//! |---|---|
//! | `time` | when the decision was made, RFC 3339 with milliseconds |
//! | `session` | `metadata.session_id` |
//! | `method` | the JSON-RPC method, e.g. `steps/toolCallRequest` |
//! | `request_id` | `params.request_id` |
//! | `tool` | `payload.tool.name`, or `null` |
//! | `arguments` | the call's arguments `{name: value}` masked as explain traces mask them, and wholly for a failed decision of a policy that redacts (only when the payload has arguments) |
//! | `decision` | `allow`, `deny`, `ask`, `defer`, `modify`, or `error` (the answer was a JSON-RPC error) |
//! | `reason_codes`, `reasoning` | the result's |
//! | `rules` | every rule that fired, `module.rule` |
//! | `unverified_claims` | only when there are any: the JSON pointers of the provenance records (or their `derived_from`) that claimed the user wrote content the user never said (read as no claim) |
//! | `audit_entry_hash` | only when the Guardian keeps an audit chain: the `entry_hash` of the step's entry (`warden audit show` prints it), which links the record to the chain |
//! | `policy_digest` | the digest of the policy that decided |
//! | `duration_us` | the time taken to decide, in microseconds (not counting the wait for the journal) |
//! | `error` | for `error`: the JSON-RPC error object |
//!
//! The adapter `warden hook --dialect=core-agent` writes the same field names into its own
//! `decisions.jsonl` (plus `hook`, the core-agent event).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::acs::envelope::Response;

/// Where decision records go. `record` is called on the deciding thread, after the decision
/// and before the answer is sent: an implementation must return at once (queue the record,
/// never wait on a network) and must never fail the decision.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use serde_json::{json, Value};
/// use warden::acs::build::Conversation;
/// use warden::guardian::{log::DecisionLog, Guardian, Policy};
///
/// #[derive(Default)]
/// struct Kept(Mutex<Vec<Value>>);
/// impl DecisionLog for Kept {
///     fn record(&self, record: &Value) {
///         self.0.lock().unwrap().push(record.clone());
///     }
/// }
///
/// let guardian = Guardian::new(Policy::from_source("p", "default allow").unwrap());
/// let kept = Arc::new(Kept::default());
/// guardian.set_decision_log(kept.clone());
/// let chat = Conversation::new("agent");
/// guardian.handle(&chat.tool_call("ls", json!({})).to_vec());
/// let records = kept.0.lock().unwrap();
/// assert_eq!(records[0]["tool"], "ls");
/// assert_eq!(records[0]["decision"], "allow");
/// ```
pub trait DecisionLog: Send + Sync {
    /// Takes one record (a JSON object; docs/serve.md, "Decision log"). Called on the deciding thread: queue, do not block.
    fn record(&self, record: &Value);

    /// Sends what is still queued, waiting at most `limit`: a server that stops calls it so the
    /// last records are not lost. The default has nothing queued.
    fn flush(&self, _limit: std::time::Duration) {}

    /// The sink's counters and gauges as `(name, value)`, e.g. `("dropped_total", 3)`: what an
    /// operator reads to see the sink keeping up (docs/serve.md). The default has none.
    fn metrics(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What the Guardian knows about a decision besides its response.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub session: Option<String>,
    pub method: String,
    pub request_id: Option<String>,
    pub tool: Option<String>,
    pub arguments: Option<Value>,
    pub fired: Vec<Arc<str>>,
    pub unverified_claims: Vec<String>,
}

/// Builds one record from a decision's facts and its response.
pub(crate) fn record(
    facts: &Facts,
    response: &Response,
    policy_digest: &str,
    duration_us: u64,
) -> Value {
    let mut e = Map::new();
    e.insert("time".into(), json!(crate::acs::time::now_rfc3339_ms()));
    e.insert("session".into(), json!(facts.session));
    e.insert("method".into(), json!(facts.method));
    e.insert("request_id".into(), json!(facts.request_id));
    e.insert("tool".into(), json!(facts.tool));
    if let Some(a) = &facts.arguments {
        e.insert("arguments".into(), a.clone());
    }
    let wire = serde_json::to_value(response).unwrap_or(Value::Null);
    if let Some(r) = wire.get("result") {
        e.insert(
            "decision".into(),
            r.get("decision").cloned().unwrap_or(Value::Null),
        );
        e.insert(
            "reason_codes".into(),
            r.get("reason_codes").cloned().unwrap_or(json!([])),
        );
        if let Some(why) = r.get("reasoning") {
            e.insert("reasoning".into(), why.clone());
        }
        // The step's audit-chain entry: its `entry_hash` is the chain head the answer carries.
        if let Some(hash) = r.get("chain_hash") {
            e.insert("audit_entry_hash".into(), hash.clone());
        }
    } else {
        e.insert("decision".into(), json!("error"));
        e.insert(
            "error".into(),
            wire.get("error").cloned().unwrap_or(Value::Null),
        );
    }
    e.insert(
        "rules".into(),
        Value::Array(facts.fired.iter().map(|r| json!(&**r)).collect()),
    );
    if !facts.unverified_claims.is_empty() {
        e.insert("unverified_claims".into(), json!(facts.unverified_claims));
    }
    e.insert("policy_digest".into(), json!(policy_digest));
    e.insert("duration_us".into(), json!(duration_us));
    Value::Object(e)
}
