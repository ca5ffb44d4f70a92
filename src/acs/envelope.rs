//! ACS request and response envelopes (JSON-RPC 2.0 with ACS members), their error codes, and
//! the decoding entry point that turns untrusted bytes into a [`Request`] or into the error
//! [`Response`] to send back.
//!
//! Decoding checks the envelope the way `request-envelope.json` does, by hand, so that each
//! failure maps onto the right JSON-RPC code and names the offending field:
//!
//! | failure | code |
//! |---|---|
//! | bytes are not strict JSON ([`crate::acs::json`]) | `-32700` |
//! | an array (we do not batch), not an object, bad/missing `id`, `jsonrpc` not `"2.0"`, `method` not a string, unknown top-level member | `-32600` |
//! | `method` outside the ACS namespaces, or rejected by the caller's method list | `-32601` |
//! | `params` missing or violating `AcsParams` | `-32602` |
//!
//! Method knowledge is the caller's: [`decode_request`] checks only the namespace pattern, and
//! [`decode_request_with`] also asks [`DecodeOptions::known_method`].
//!
//! Signatures, replay and skew checks happen after decoding, on the raw value (see
//! [`crate::acs::crypto`]); [`decode_request_with`] returns it alongside the typed request.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use std::fmt;

use crate::acs::json::{self, Limits};
use crate::acs::time::is_rfc3339;

/// The JSON-RPC version every envelope carries.
pub const JSONRPC_VERSION: &str = "2.0";

/// The ACS wire version this crate speaks.
pub const ACS_VERSION: &str = "0.1.0";

/// The method namespaces allowed by `request-envelope.json`.
pub const METHOD_PREFIXES: [&str; 7] = [
    "steps/",
    "protocols/",
    "agbom/",
    "trace/",
    "system/",
    "handshake/",
    "wrapped:",
];

/// The `Signature.algorithm` values allowed by the schema.
pub const SIGNATURE_ALGORITHMS: [&str; 10] = [
    "HMAC-SHA256",
    "ECDSA-P256",
    "RSA-PSS-SHA256",
    "ML-DSA-65",
    "ML-DSA-44",
    "ML-DSA-87",
    "SLH-DSA-128s",
    "SLH-DSA-128f",
    "ML-DSA-65+ECDSA-P256",
    "ML-DSA-65+RSA-PSS-SHA256",
];

// ---------------------------------------------------------------------------------------------
// Building requests

/// A request envelope as JSON, the way a client (the test runner, the core-agent hook, a test)
/// sends one: `{"jsonrpc": "2.0", id, method, "params": {"acs_version": "0.1.0", request_id,
/// timestamp, metadata, payload}}`, members in that order. Optional `params` members (`nonce`,
/// `signature`) are added to the result by the caller.
///
/// ```
/// use serde_json::json;
/// use warden::acs::envelope;
///
/// let req = envelope::request(
///     1,
///     "steps/userMessage",
///     "00000000-0000-4000-8000-000000000001",
///     "2026-01-01T00:00:00Z",
///     json!({"agent_id": "a", "session_id": "5e55e55e-0000-4000-8000-000000000001"}),
///     json!({"message": {"content": "hi"}}),
/// );
/// assert_eq!(req["params"]["acs_version"], envelope::ACS_VERSION);
/// assert!(envelope::decode_request(req.to_string().as_bytes()).is_ok());
/// ```
pub fn request(
    id: impl Into<Value>,
    method: &str,
    request_id: &str,
    timestamp: &str,
    metadata: Value,
    payload: Value,
) -> Value {
    let mut params = Map::new();
    params.insert("acs_version".into(), Value::from(ACS_VERSION));
    params.insert("request_id".into(), Value::from(request_id));
    params.insert("timestamp".into(), Value::from(timestamp));
    params.insert("metadata".into(), metadata);
    params.insert("payload".into(), payload);
    let mut envelope = Map::new();
    envelope.insert("jsonrpc".into(), Value::from(JSONRPC_VERSION));
    envelope.insert("id".into(), id.into());
    envelope.insert("method".into(), Value::from(method));
    envelope.insert("params".into(), Value::Object(params));
    Value::Object(envelope)
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

/// A JSON-RPC correlation id. Requests carry a string or a number; responses may carry null
/// when the request's id could not be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Id {
    /// A string id.
    Str(String),
    /// A numeric id, kept as written.
    Num(Number),
    /// No usable id (error responses only).
    Null,
}

impl Id {
    /// Reads an id from a JSON value: strings and numbers only.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) => Some(Id::Num(n.clone())),
            _ => None,
        }
    }
}

// Read by hand rather than `untagged`: that tries each variant in turn and builds an error for
// every miss, on every envelope with a numeric id.
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Id::Str(s)),
            Value::Number(n) => Ok(Id::Num(n)),
            Value::Null => Ok(Id::Null),
            _ => Err(serde::de::Error::custom(
                "an id is a string, a number or null",
            )),
        }
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id::Str(s)
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n.into())
    }
}

/// A signature block: `params.signature` on requests, `result.signature` (and, as agt-go
/// does, `error.signature`) on responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// One of [`SIGNATURE_ALGORITHMS`].
    pub algorithm: String,
    /// Base64 signature value.
    pub value: String,
    /// Which key verifies it.
    pub key_id: String,
}

// ---------------------------------------------------------------------------------------------
// Requests

/// A decoded ACS request envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The hook or wrapped-protocol method, e.g. `steps/toolCallRequest`.
    pub method: String,
    /// JSON-RPC correlation id (never [`Id::Null`] on a decoded request).
    pub id: Id,
    /// The ACS parameters.
    pub params: Params,
}

/// `AcsParams`: the common ACS members of every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Semver of the sender's ACS version (major 0).
    pub acs_version: String,
    /// UUID of this hook invocation; the replay key.
    pub request_id: String,
    /// RFC 3339 time the hook fired.
    pub timestamp: String,
    /// Optional replay nonce, 16 to 64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// Reserved tenant identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Agent, session and turn identity.
    pub metadata: Metadata,
    /// Method-specific payload (always a JSON object).
    pub payload: Value,
    /// The request signature (mandatory under ACS-Core; checked after decoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// Members this version does not define, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `Metadata`: who is asking, in which session and turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The Observed Agent's identifier.
    pub agent_id: String,
    /// UUID of the session (also the HKDF `info` for the session key).
    pub session_id: String,
    /// The turn this step belongs to, between `turnStart` and `turnEnd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The enclosing turn when turns nest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_turn_id: Option<String>,
    /// Human-readable agent name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// The agent framework or host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// The framework's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_version: Option<String>,
    /// Deployment environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// The end user on whose behalf the agent acts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_context: Option<UserContext>,
    /// The client's view of the session (hints only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_state: Option<SessionState>,
    /// Members this version does not define, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Metadata {
    /// The metadata of an agent and a session, with nothing else set.
    pub fn of(agent_id: String, session_id: String) -> Metadata {
        Metadata {
            agent_id,
            session_id,
            turn_id: None,
            parent_turn_id: None,
            agent_name: None,
            platform: None,
            platform_version: None,
            environment: None,
            user_context: None,
            session_state: None,
            extra: Map::new(),
        }
    }
}

/// `metadata.environment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    /// `development`
    Development,
    /// `staging`
    Staging,
    /// `production`
    Production,
}

/// `metadata.user_context`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserContext {
    /// The user's identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The user's roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// How the user authenticated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_method: Option<String>,
    /// Members this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `metadata.session_state`: the client's view of the chain head.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SessionState {
    /// The chain head the client last saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_hash: Option<String>,
    /// Members this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Responses

/// An ACS response envelope: a result or an error, never both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request's id, or null when it could not be read.
    pub id: Id,
    /// `result` or `error`.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The body of a [`Response`]; serialises as a `result` or an `error` member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A decision.
    Result(Box<AcsResult>),
    /// A JSON-RPC error.
    Error(RpcError),
}

impl Response {
    /// A decision response.
    pub fn result(id: Id, result: AcsResult) -> Response {
        Response {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id,
            outcome: Outcome::Result(Box::new(result)),
        }
    }

    /// An error response.
    pub fn error(id: Id, error: RpcError) -> Response {
        Response {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id,
            outcome: Outcome::Error(error),
        }
    }

    /// The decision, if this is a result response.
    pub fn as_result(&self) -> Option<&AcsResult> {
        match &self.outcome {
            Outcome::Result(r) => Some(r),
            Outcome::Error(_) => None,
        }
    }

    /// The error, if this is an error response.
    pub fn as_error(&self) -> Option<&RpcError> {
        match &self.outcome {
            Outcome::Error(e) => Some(e),
            Outcome::Result(_) => None,
        }
    }

    /// The response as a JSON value (for signing or hashing).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a Response always serialises")
    }

    /// The response as compact JSON bytes, ready to send.
    pub fn to_vec(&self) -> Vec<u8> {
        // A decision's response is a few hundred bytes: one allocation rather than growing
        // from serde_json's 128.
        let mut out = Vec::with_capacity(512);
        self.write_to(&mut out);
        out
    }

    /// Appends the response's compact JSON to `out` (the bytes `to_vec` returns; written by
    /// hand, `acs::encode`).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        super::encode::write_response(out, self);
    }
}

/// `result.type`: only `final` exists in v0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultType {
    /// `final`
    #[default]
    Final,
}

/// The five dispositions, lowercase on the wire: [`crate::acs::DecisionKind`] under its wire
/// name.
pub use crate::acs::decision::DecisionKind as Decision;

/// `AcsResult`: a Guardian's decision on one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcsResult {
    /// Always [`ResultType::Final`].
    #[serde(rename = "type")]
    pub kind: ResultType,
    /// The ACS version answered with.
    pub acs_version: String,
    /// Echo of the request's `request_id`.
    pub request_id: String,
    /// The disposition.
    pub decision: Decision,
    /// Explanation; required for every decision but allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Machine-readable reasons (unique).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
    /// The policies and rules that fired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_references: Vec<PolicyReference>,
    /// Policy facts, conventionally keyed by paradigm.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub policy_data: Map<String, Value>,
    /// The `provenance_id`s that drove the decision (unique).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cited_provenance_ids: Vec<String>,
    /// Required when the decision is modify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifications: Option<Modifications>,
    /// Required when the decision is ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_details: Option<AskDetails>,
    /// Required when the decision is defer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_details: Option<DeferDetails>,
    /// Method-specific response data (e.g. `system/ping`, ServerHello).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
    /// The audit-chain head after this step's entry (64 lowercase hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_hash: Option<String>,
    /// The response signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// Evaluator facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ResultMetadata>,
}

/// One entry of `policy_references`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PolicyReference {
    /// Policy identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    /// Deployment-defined policy version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
    /// Human-readable policy name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_name: Option<String>,
    /// The rule within the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
}

/// `result.metadata`: how the decision was reached (not policy facts).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultMetadata {
    /// Which layer decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Evaluator>,
    /// Evaluator version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_version: Option<String>,
    /// Evaluation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation_duration_ms: Option<u64>,
    /// Model used; required for the agent and composite evaluators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// Confidence in 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
}

/// `result.metadata.evaluator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evaluator {
    /// The deterministic policy layer.
    Deterministic,
    /// The LLM agent layer.
    Agent,
    /// Both.
    Composite,
}

/// Why an [`AcsResult`] must not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    /// A member required for this decision is absent.
    #[error("decision {decision} requires {member}")]
    MissingCompanion {
        /// The decision.
        decision: Decision,
        /// The missing member.
        member: &'static str,
    },
    /// `modifications` breaks the MODIFY rules.
    #[error("invalid modifications: {0}")]
    Modifications(#[from] ModificationsError),
    /// A member has the wrong shape.
    #[error("{member}: {why}")]
    Invalid {
        /// The member.
        member: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

impl AcsResult {
    /// A bare result for `request_id` (version [`ACS_VERSION`], no companions).
    pub fn new(request_id: impl Into<String>, decision: Decision) -> AcsResult {
        AcsResult {
            kind: ResultType::Final,
            acs_version: ACS_VERSION.to_owned(),
            request_id: request_id.into(),
            decision,
            reasoning: None,
            reason_codes: Vec::new(),
            policy_references: Vec::new(),
            policy_data: Map::new(),
            cited_provenance_ids: Vec::new(),
            modifications: None,
            ask_details: None,
            defer_details: None,
            payload: None,
            chain_hash: None,
            signature: None,
            metadata: None,
        }
    }

    /// An allow decision.
    pub fn allow(request_id: impl Into<String>) -> AcsResult {
        AcsResult::new(request_id, Decision::Allow)
    }

    /// A deny decision with its reasoning.
    pub fn deny(request_id: impl Into<String>, reasoning: impl Into<String>) -> AcsResult {
        AcsResult::new(request_id, Decision::Deny).with_reasoning(reasoning)
    }

    /// A modify decision with its reasoning and modifications.
    pub fn modify(
        request_id: impl Into<String>,
        reasoning: impl Into<String>,
        modifications: Modifications,
    ) -> AcsResult {
        let mut r = AcsResult::new(request_id, Decision::Modify).with_reasoning(reasoning);
        r.modifications = Some(modifications);
        r
    }

    /// An ask decision with its reasoning and approver details.
    pub fn ask(
        request_id: impl Into<String>,
        reasoning: impl Into<String>,
        details: AskDetails,
    ) -> AcsResult {
        let mut r = AcsResult::new(request_id, Decision::Ask).with_reasoning(reasoning);
        r.ask_details = Some(details);
        r
    }

    /// A defer decision with its reasoning and resolution details.
    pub fn defer(
        request_id: impl Into<String>,
        reasoning: impl Into<String>,
        details: DeferDetails,
    ) -> AcsResult {
        let mut r = AcsResult::new(request_id, Decision::Defer).with_reasoning(reasoning);
        r.defer_details = Some(details);
        r
    }

    /// Sets `reasoning`.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> AcsResult {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Adds a reason code unless it is already present.
    pub fn with_reason_code(mut self, code: impl Into<String>) -> AcsResult {
        let code = code.into();
        if !self.reason_codes.contains(&code) {
            self.reason_codes.push(code);
        }
        self
    }

    /// Sets `chain_hash`.
    pub fn with_chain_hash(mut self, chain_hash: impl Into<String>) -> AcsResult {
        self.chain_hash = Some(chain_hash.into());
        self
    }

    /// Checks what the schema and spec require of a result before it is sent: the
    /// per-decision companions, the MODIFY rules, uniqueness of `reason_codes` and
    /// `cited_provenance_ids`, and the shapes of `request_id`, `acs_version`, `chain_hash`
    /// and `metadata`.
    pub fn validate(&self) -> Result<(), ResultError> {
        let need = |present: bool, member: &'static str| {
            if present {
                Ok(())
            } else {
                Err(ResultError::MissingCompanion {
                    decision: self.decision,
                    member,
                })
            }
        };
        if self.decision != Decision::Allow {
            need(self.reasoning.is_some(), "reasoning")?;
        }
        match self.decision {
            Decision::Modify => need(self.modifications.is_some(), "modifications")?,
            Decision::Ask => need(self.ask_details.is_some(), "ask_details")?,
            Decision::Defer => need(self.defer_details.is_some(), "defer_details")?,
            Decision::Allow | Decision::Deny => {}
        }
        if let Some(m) = &self.modifications {
            m.validate()?;
        }
        let invalid = |member, why| Err(ResultError::Invalid { member, why });
        if !is_uuid(&self.request_id) {
            return invalid("request_id", "not a UUID");
        }
        if !is_semver(&self.acs_version) {
            return invalid("acs_version", "not X.Y.Z");
        }
        if !all_unique(&self.reason_codes) {
            return invalid("reason_codes", "items are not unique");
        }
        if !all_unique(&self.cited_provenance_ids) {
            return invalid("cited_provenance_ids", "items are not unique");
        }
        if let Some(h) = &self.chain_hash {
            if !is_sha256_hex(h) {
                return invalid("chain_hash", "not 64 lowercase hex digits");
            }
        }
        if let Some(md) = &self.metadata {
            if matches!(md.evaluator, Some(Evaluator::Agent | Evaluator::Composite))
                && md.model_id.is_none()
            {
                return invalid(
                    "metadata.model_id",
                    "required for agent/composite evaluators",
                );
            }
            if let Some(c) = md.confidence {
                if !(0.0..=1.0).contains(&c) {
                    return invalid("metadata.confidence", "outside 0..=1");
                }
            }
        }
        Ok(())
    }
}

fn all_unique(items: &[String]) -> bool {
    let mut seen = std::collections::HashSet::new();
    items.iter().all(|i| seen.insert(i))
}

// ---------------------------------------------------------------------------------------------
// Decision companions

/// The text a redaction substitutes when it names none.
pub const DEFAULT_REDACTION: &str = "[REDACTED]";

/// The JSON Pointer under which `parameter_overrides` keys are taken to live when checking
/// disjointness with `redactions` (relative to the payload, as redaction paths are).
pub const OVERRIDE_ROOT: &str = "/arguments";

/// `modifications`: what a MODIFY decision changes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Modifications {
    /// Wholesale replacement of the payload; excludes the other two members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_content: Option<String>,
    /// Targeted replacements addressed by JSON Pointer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
    /// Replacement values for tool-call arguments, by argument name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub parameter_overrides: Map<String, Value>,
}

/// One redaction: replace the value at `path` with `replacement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// JSON Pointer to the field.
    pub path: String,
    /// Replacement text; [`DEFAULT_REDACTION`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
}

impl Redaction {
    /// The text that replaces the field.
    pub fn effective_replacement(&self) -> &str {
        self.replacement.as_deref().unwrap_or(DEFAULT_REDACTION)
    }
}

/// A `modifications` object that breaks the MODIFY rules (docs/acs.md#modify).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModificationsError {
    /// None of the three members is present (the schema wants at least one).
    #[error("modifications is empty")]
    Empty,
    /// `modified_content` appears with `redactions` or `parameter_overrides`.
    #[error("modified_content must not be combined with redactions or parameter_overrides")]
    ContentNotExclusive,
    /// A redaction path is not a JSON Pointer.
    #[error("redaction path {0:?} is not a JSON Pointer")]
    BadPointer(String),
    /// A redaction and an override address the same field or nested fields.
    #[error("redaction {redaction:?} overlaps parameter override {parameter:?}")]
    Overlap {
        /// The redaction path.
        redaction: String,
        /// The override key.
        parameter: String,
    },
}

/// Splits a JSON Pointer (RFC 6901) into unescaped reference tokens.
pub fn pointer_tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|tok| {
            let mut out = String::with_capacity(tok.len());
            let mut chars = tok.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(out)
        })
        .collect()
}

impl Modifications {
    /// Checks the MODIFY rules, with override keys addressed as `/arguments/<key>`.
    pub fn validate(&self) -> Result<(), ModificationsError> {
        self.validate_with_root(OVERRIDE_ROOT)
    }

    /// Checks the MODIFY rules: non-empty, `modified_content` exclusive, redaction paths are
    /// JSON Pointers, and no redaction path equals, contains or lies inside the pointer
    /// `override_root/<key>` of any parameter override.
    pub fn validate_with_root(&self, override_root: &str) -> Result<(), ModificationsError> {
        let has_redactions = !self.redactions.is_empty();
        let has_overrides = !self.parameter_overrides.is_empty();
        if self.modified_content.is_none() && !has_redactions && !has_overrides {
            return Err(ModificationsError::Empty);
        }
        if self.modified_content.is_some() && (has_redactions || has_overrides) {
            return Err(ModificationsError::ContentNotExclusive);
        }
        let root = pointer_tokens(override_root)
            .ok_or_else(|| ModificationsError::BadPointer(override_root.to_owned()))?;
        let mut paths = Vec::with_capacity(self.redactions.len());
        for r in &self.redactions {
            paths.push(
                pointer_tokens(&r.path)
                    .ok_or_else(|| ModificationsError::BadPointer(r.path.clone()))?,
            );
        }
        for key in self.parameter_overrides.keys() {
            let mut target = root.clone();
            target.push(key.clone());
            for (r, path) in self.redactions.iter().zip(&paths) {
                let n = path.len().min(target.len());
                if path[..n] == target[..n] {
                    return Err(ModificationsError::Overlap {
                        redaction: r.path.clone(),
                        parameter: key.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// `ask_details`: who must approve and how (rebuilt from agt-go; schema missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskDetails {
    /// The approver to route to.
    pub approver: Approver,
    /// The question put to the approver.
    pub question: String,
    /// Extra context for the approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Answer choices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// How long the approver has.
    pub timeout_seconds: u64,
    /// What happens on timeout; absent means deny.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_disposition: Option<TimeoutDisposition>,
    /// Capabilities an approval would add to the session Intent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_extension: Option<IntentExtension>,
}

/// `ask_details.approver`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    /// Kind of approver.
    #[serde(rename = "type")]
    pub kind: ApproverType,
    /// Approver identifier.
    pub id: String,
    /// Where to reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// How it authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ApproverAuth>,
}

/// `approver.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApproverType {
    /// A person.
    Human,
    /// Another agent.
    Agent,
    /// A service.
    Service,
}

/// `approver.auth`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApproverAuth {
    /// Authentication method name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// `ask_details.timeout_disposition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutDisposition {
    /// Allow on timeout.
    Allow,
    /// Deny on timeout (the default).
    Deny,
}

/// `ask_details.intent_extension`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentExtension {
    /// Capabilities to grant (agt-go shape `{tool, operation, resource}`; kept as JSON).
    pub capabilities: Vec<Value>,
    /// How long the grant lasts.
    pub scope: ExtensionScope,
    /// Provenance of the grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
}

/// `intent_extension.scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtensionScope {
    /// `this_request`
    ThisRequest,
    /// `session`
    Session,
}

/// `defer_details`: why and how a decision is postponed (rebuilt; schema missing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferDetails {
    /// Why no verdict was reached.
    pub reason: DeferReason,
    /// How resolution is expected.
    pub resolution_method: ResolutionMethod,
    /// How long resolution may take.
    pub resolution_timeout_ms: u64,
    /// What happens on timeout (defaults to deny when decoding).
    #[serde(default)]
    pub timeout_decision: TimeoutDecision,
    /// Context that would resolve it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_context: Vec<String>,
}

/// `defer_details.reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferReason {
    /// `insufficient_context`
    InsufficientContext,
    /// `conflicting_policies`
    ConflictingPolicies,
    /// `low_confidence`
    LowConfidence,
    /// `pending_dependency`
    PendingDependency,
}

/// `defer_details.resolution_method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionMethod {
    /// `additional_context`
    AdditionalContext,
    /// `human_approval`
    HumanApproval,
    /// `timeout`
    Timeout,
}

/// `defer_details.timeout_decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutDecision {
    /// Deny on timeout (the default).
    #[default]
    Deny,
    /// Ask on timeout.
    Ask,
}

// ---------------------------------------------------------------------------------------------
// Errors

/// JSON-RPC and ACS error codes.
pub mod codes {
    /// The bytes are not valid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request object (also: a batch array, which we do not support).
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// `params` violates the schema.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The Guardian failed internally.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Policy refuses the session.
    pub const SESSION_REFUSED: i64 = -32000;
    /// No common `acs_version`.
    pub const UNSUPPORTED_VERSION: i64 = -32001;
    /// Provenance is required but the client produces none.
    pub const PROVENANCE_REQUIRED: i64 = -32002;
    /// A method or profile was used without being negotiated.
    pub const CAPABILITY_NOT_NEGOTIATED: i64 = -32003;
    /// Signature missing, malformed or wrong.
    pub const SIGNATURE_INVALID: i64 = -32004;
    /// Duplicate `request_id` or nonce.
    pub const REPLAY_DETECTED: i64 = -32005;
    /// `timestamp` outside the skew window.
    pub const TIMESTAMP_OUT_OF_WINDOW: i64 = -32006;
    /// The client's chain head differs and the Guardian cannot proceed.
    pub const CHAIN_MISMATCH: i64 = -32007;
}

/// A JSON-RPC error object. `data` carries `reason` (machine-readable) and `message`
/// (human-readable) plus per-code fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// One of [`codes`].
    pub code: i64,
    /// Short description.
    pub message: String,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Signature on an error answering an authenticated request (agt-go extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

impl RpcError {
    /// An error whose `data` is `{reason, message}`.
    pub fn new(code: i64, reason: &str, detail: impl Into<String>) -> RpcError {
        let mut data = Map::new();
        data.insert("reason".into(), Value::String(reason.to_owned()));
        data.insert("message".into(), Value::String(detail.into()));
        RpcError {
            code,
            message: Self::title(code).to_owned(),
            data: Some(Value::Object(data)),
            signature: None,
        }
    }

    /// The standard short message for a code.
    pub fn title(code: i64) -> &'static str {
        match code {
            codes::PARSE_ERROR => "Parse error",
            codes::INVALID_REQUEST => "Invalid Request",
            codes::METHOD_NOT_FOUND => "Method not found",
            codes::INVALID_PARAMS => "Invalid params",
            codes::INTERNAL_ERROR => "Internal error",
            codes::SESSION_REFUSED => "Session refused",
            codes::UNSUPPORTED_VERSION => "Unsupported version",
            codes::PROVENANCE_REQUIRED => "Provenance required",
            codes::CAPABILITY_NOT_NEGOTIATED => "Capability not negotiated",
            codes::SIGNATURE_INVALID => "Signature invalid",
            codes::REPLAY_DETECTED => "Replay detected",
            codes::TIMESTAMP_OUT_OF_WINDOW => "Timestamp out of window",
            codes::CHAIN_MISMATCH => "Chain mismatch",
            _ => "Server error",
        }
    }

    /// Adds a member to `data`.
    pub fn with_data(mut self, key: &str, value: impl Into<Value>) -> RpcError {
        if let Some(Value::Object(m)) = &mut self.data {
            m.insert(key.to_owned(), value.into());
        }
        self
    }

    /// `data.reason`, if present.
    pub fn reason(&self) -> Option<&str> {
        self.data.as_ref()?.get("reason")?.as_str()
    }

    /// -32700, with `data.offset` when known.
    pub fn parse_error(detail: impl Into<String>, offset: Option<usize>) -> RpcError {
        let e = RpcError::new(codes::PARSE_ERROR, "parse_error", detail);
        match offset {
            Some(o) => e.with_data("offset", o),
            None => e,
        }
    }

    /// -32600.
    pub fn invalid_request(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::INVALID_REQUEST, "invalid_request", detail)
    }

    /// -32601, with `data.method`.
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            codes::METHOD_NOT_FOUND,
            "method_not_found",
            format!("method {method:?} is not supported"),
        )
        .with_data("method", method)
    }

    /// -32602, with `data.field` naming the offending member.
    pub fn invalid_params(field: &str, detail: impl Into<String>) -> RpcError {
        let detail = detail.into();
        RpcError::new(
            codes::INVALID_PARAMS,
            "invalid_params",
            format!("{field}: {detail}"),
        )
        .with_data("field", field)
    }

    /// -32603.
    pub fn internal(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::INTERNAL_ERROR, "internal_error", detail)
    }

    /// -32000.
    pub fn session_refused(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::SESSION_REFUSED, "session_refused", detail)
    }

    /// -32001, with `data.supported_versions`.
    pub fn unsupported_version(detail: impl Into<String>, supported: &[&str]) -> RpcError {
        RpcError::new(codes::UNSUPPORTED_VERSION, "unsupported_version", detail)
            .with_data("supported_versions", supported.to_vec())
    }

    /// -32002.
    pub fn provenance_required(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::PROVENANCE_REQUIRED, "provenance_required", detail)
    }

    /// -32003, with `data.method`.
    pub fn capability_not_negotiated(method: &str) -> RpcError {
        RpcError::new(
            codes::CAPABILITY_NOT_NEGOTIATED,
            "capability_not_negotiated",
            format!("method {method:?} was not negotiated at handshake"),
        )
        .with_data("method", method)
    }

    /// -32004.
    pub fn signature_invalid(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::SIGNATURE_INVALID, "signature_invalid", detail)
    }

    /// -32005.
    pub fn replay_detected(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::REPLAY_DETECTED, "replay_detected", detail)
    }

    /// -32006, with `data.skew_window_ms`.
    pub fn timestamp_out_of_window(detail: impl Into<String>, skew_window_ms: u64) -> RpcError {
        RpcError::new(
            codes::TIMESTAMP_OUT_OF_WINDOW,
            "timestamp_out_of_window",
            detail,
        )
        .with_data("skew_window_ms", skew_window_ms)
    }

    /// -32007.
    pub fn chain_mismatch(detail: impl Into<String>) -> RpcError {
        RpcError::new(codes::CHAIN_MISMATCH, "chain_mismatch", detail)
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax checks

/// `8-4-4-4-12` hexadecimal UUID syntax (either case); versions are not checked.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `^\d+\.\d+\.\d+$`.
pub fn is_semver(s: &str) -> bool {
    let mut parts = 0;
    s.split('.').all(|p| {
        parts += 1;
        !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())
    }) && parts == 3
}

/// 64 lowercase hex digits (a SHA-256 chain hash).
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The method namespace pattern `^(steps/|protocols/|agbom/|trace/|system/|handshake/|wrapped:).+`
/// with JSON Schema (ECMA-262) semantics: a prefix followed by at least one character that is
/// not a line terminator.
pub fn is_namespaced_method(method: &str) -> bool {
    METHOD_PREFIXES.iter().any(|p| {
        method
            .strip_prefix(p)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| !matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'))
    })
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Settings for [`decode_request_with`].
#[derive(Clone, Copy, Default)]
pub struct DecodeOptions<'a> {
    /// Size and depth limits for the strict JSON parser.
    pub limits: Limits,
    /// Which namespaced methods the caller implements; `None` accepts every method that
    /// matches the namespace pattern.
    pub known_method: Option<&'a dyn Fn(&str) -> bool>,
}

impl fmt::Debug for DecodeOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodeOptions")
            .field("limits", &self.limits)
            .field("known_method", &self.known_method.is_some())
            .finish()
    }
}

/// Decodes a request with default limits, checking only the method namespace pattern.
pub fn decode_request(bytes: &[u8]) -> Result<Request, Box<Response>> {
    decode_request_with(bytes, &DecodeOptions::default()).map(|(r, _)| r)
}

/// Decodes a request, returning it together with the raw JSON value (which signature
/// verification and `request_hash` must use), or the error response to send.
pub fn decode_request_with(
    bytes: &[u8],
    opts: &DecodeOptions<'_>,
) -> Result<(Request, Value), Box<Response>> {
    let v = json::parse_with_limits(bytes, opts.limits).map_err(|e| {
        Box::new(Response::error(
            Id::Null,
            RpcError::parse_error(e.to_string(), Some(e.offset)),
        ))
    })?;
    let req = validate_request(&v, opts)?;
    Ok((req, v))
}

/// [`decode_request_with`] without copying the payload: it moves from the raw value into the
/// typed request, and the raw value keeps `null` in its place. A copy of the payload cost a
/// seventh of a step; a Guardian that reads the request whole (to check its signature, hash it
/// into the audit chain or journal it) puts it back with [`reattach_payload`].
pub fn decode_request_detached(
    bytes: &[u8],
    opts: &DecodeOptions<'_>,
) -> Result<(Request, Value), Box<Response>> {
    let mut v = json::parse_with_limits(bytes, opts.limits).map_err(|e| {
        Box::new(Response::error(
            Id::Null,
            RpcError::parse_error(e.to_string(), Some(e.offset)),
        ))
    })?;
    let mut req = checked_request(&v, opts, false)?;
    if let Some(slot) = payload_slot(&mut v) {
        req.params.payload = slot.take();
    }
    Ok((req, v))
}

/// Puts a payload back into a raw request that [`decode_request_detached`] took it from.
pub fn reattach_payload(raw: &mut Value, payload: &Value) {
    if let Some(slot) = payload_slot(raw) {
        *slot = payload.clone();
    }
}

/// `params.payload` of a request tree (members scanned, not hashed).
fn payload_slot(raw: &mut Value) -> Option<&mut Value> {
    super::fields::member_mut(super::fields::member_mut(raw, "params")?, "payload")
}

/// The tree of a typed request with `params.payload` null: what the audit entry reads of a
/// request decoded without one ([`super::shell`]), the payload read from the request in place
/// (`crypto::request_hash_with_payload`). Its canonical form, the payload put back, is the
/// request's as received when the request came from [`super::shell::decode`], which declines
/// what the typed form does not keep (a property test holds them together).
pub fn tree_without_payload(req: &Request) -> Value {
    let p = &req.params;
    let mut params = Map::new();
    let mut put = |k: &str, v: Value| params.insert(k.to_owned(), v);
    put("acs_version", text(&p.acs_version));
    put("request_id", text(&p.request_id));
    put("timestamp", text(&p.timestamp));
    if let Some(n) = &p.nonce {
        put("nonce", text(n));
    }
    if let Some(t) = &p.tenant_id {
        put("tenant_id", text(t));
    }
    put("metadata", metadata_tree(&p.metadata));
    put("payload", Value::Null);
    if let Some(sig) = &p.signature {
        let mut m = Map::new();
        m.insert("algorithm".into(), text(&sig.algorithm));
        m.insert("value".into(), text(&sig.value));
        m.insert("key_id".into(), text(&sig.key_id));
        put("signature", Value::Object(m));
    }
    for (k, v) in &p.extra {
        put(k, v.clone());
    }
    let mut top = Map::new();
    top.insert("jsonrpc".into(), text(&req.jsonrpc));
    top.insert("method".into(), text(&req.method));
    top.insert(
        "id".into(),
        match &req.id {
            Id::Str(s) => text(s),
            Id::Num(n) => Value::Number(n.clone()),
            Id::Null => Value::Null,
        },
    );
    top.insert("params".into(), Value::Object(params));
    Value::Object(top)
}

/// `metadata` as a tree, members in the order serde writes them (a test holds the two
/// equal): what a step's event reads when the request came without its tree.
pub fn metadata_tree(m: &Metadata) -> Value {
    let optional = [
        ("turn_id", &m.turn_id),
        ("parent_turn_id", &m.parent_turn_id),
        ("agent_name", &m.agent_name),
        ("platform", &m.platform),
        ("platform_version", &m.platform_version),
    ];
    // Sized once: a map grown member by member reallocates its table and its entries.
    let len = 2
        + optional.iter().filter(|(_, v)| v.is_some()).count()
        + usize::from(m.environment.is_some())
        + usize::from(m.user_context.is_some())
        + usize::from(m.session_state.is_some())
        + m.extra.len();
    let mut out = Map::with_capacity(len);
    let mut put = |k: &str, v: Value| out.insert(k.to_owned(), v);
    put("agent_id", text(&m.agent_id));
    put("session_id", text(&m.session_id));
    for (k, v) in optional {
        if let Some(v) = v {
            put(k, text(v));
        }
    }
    if let Some(env) = m.environment {
        let name = match env {
            Environment::Development => "development",
            Environment::Staging => "staging",
            Environment::Production => "production",
        };
        put("environment", text(name));
    }
    if let Some(u) = &m.user_context {
        let mut user = Map::new();
        if let Some(id) = &u.user_id {
            user.insert("user_id".into(), text(id));
        }
        if let Some(roles) = &u.roles {
            user.insert("roles".into(), roles.iter().map(|r| text(r)).collect());
        }
        if let Some(a) = &u.authentication_method {
            user.insert("authentication_method".into(), text(a));
        }
        user.extend(u.extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        put("user_context", Value::Object(user));
    }
    if let Some(s) = &m.session_state {
        let mut state = Map::new();
        if let Some(h) = &s.chain_hash {
            state.insert("chain_hash".into(), text(h));
        }
        state.extend(s.extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        put("session_state", Value::Object(state));
    }
    for (k, v) in &m.extra {
        put(k, v.clone());
    }
    Value::Object(out)
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

/// Checks an already-parsed value against the request envelope rules and converts it.
pub fn validate_request(v: &Value, opts: &DecodeOptions<'_>) -> Result<Request, Box<Response>> {
    checked_request(v, opts, true)
}

/// [`validate_request`], with the payload copied into the request or (`copy_payload` false)
/// left for the caller to move there.
fn checked_request(
    v: &Value,
    opts: &DecodeOptions<'_>,
    copy_payload: bool,
) -> Result<Request, Box<Response>> {
    let top = match v {
        Value::Object(m) => m,
        Value::Array(_) => {
            return Err(err(
                Id::Null,
                RpcError::invalid_request("batch requests are not supported"),
            ))
        }
        _ => {
            return Err(err(
                Id::Null,
                RpcError::invalid_request("a request must be a JSON object"),
            ))
        }
    };
    // One pass over the members, not a hashed look-up per name (this runs for every request).
    let [id, jsonrpc, method, params] = pick(top, ["id", "jsonrpc", "method", "params"]);
    let id = match id {
        None => {
            return Err(err(
                Id::Null,
                RpcError::invalid_request("id is required (ACS has no notifications)"),
            ))
        }
        Some(raw) => Id::from_value(raw).ok_or_else(|| {
            err(
                Id::Null,
                RpcError::invalid_request("id must be a string or a number"),
            )
        })?,
    };
    if !id_keeps_its_digits(&id) {
        return Err(err(
            Id::Null,
            RpcError::invalid_request(
                "a numeric id must be an integer that fits in 64 bits (from -2^63 to \
                 2^64-1), or a number of magnitude below 2^63; send a larger id as a string",
            )
            .with_data("reason", "id_out_of_range"),
        ));
    }
    let bad_request = |msg: String| err(id.clone(), RpcError::invalid_request(msg));
    if jsonrpc.and_then(Value::as_str) != Some(JSONRPC_VERSION) {
        return Err(bad_request("jsonrpc must be \"2.0\"".into()));
    }
    let method = match method {
        Some(Value::String(m)) => m.as_str(),
        Some(_) => return Err(bad_request("method must be a string".into())),
        None => return Err(bad_request("method is required".into())),
    };
    if let Some(k) = top
        .keys()
        .find(|k| !matches!(k.as_str(), "jsonrpc" | "method" | "id" | "params"))
    {
        return Err(bad_request(format!("unknown top-level member {k:?}")));
    }
    if !is_namespaced_method(method) || opts.known_method.is_some_and(|known| !known(method)) {
        return Err(err(id, RpcError::method_not_found(method)));
    }
    if method == PING {
        // A liveness probe is answered whatever its params: as decoded when they are valid,
        // with what could be read otherwise.
        let decoded = params
            .and_then(Value::as_object)
            .filter(|p| check_params(p).is_ok())
            .and_then(|_| Request::deserialize(v).ok());
        return Ok(decoded.unwrap_or_else(|| lenient_ping(&id, params)));
    }
    let params = match params {
        None => return Err(err(id, RpcError::invalid_params("params", "is required"))),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(err(
                id,
                RpcError::invalid_params("params", "must be an object"),
            ))
        }
    };
    if let [Some(Value::String(v))] = pick(params, ["acs_version"]) {
        if is_semver(v) && !major_is_zero(v) {
            return Err(err(
                id,
                RpcError::unsupported_version(
                    format!(
                        "params.acs_version {v:?}: this Guardian speaks ACS {ACS_VERSION} (major \
                         version 0)"
                    ),
                    &[ACS_VERSION],
                ),
            ));
        }
    }
    check_params(params)
        .map_err(|(field, why)| err(id.clone(), RpcError::invalid_params(&field, why)))?;
    Ok(request_from_checked(id, method, params, copy_payload))
}

/// The typed request, read from params that [`check_params`] accepted (so every member it
/// reads has its type). Built by hand rather than by `Request::deserialize`: serde's
/// `flatten` (the `extra` members) buffers every member and copies the payload through a
/// visitor, which was a fifth of `warden replay`'s instructions. One pass over each object's
/// members, not a keyed look-up per field: a look-up hashes the name (SipHash, in
/// `serde_json`'s map). A test checks the result against serde's.
fn request_from_checked(
    id: Id,
    method: &str,
    p: &Map<String, Value>,
    copy_payload: bool,
) -> Request {
    let mut params = Params::blank();
    for (k, v) in p {
        match k.as_str() {
            "acs_version" => params.acs_version = owned_str(v).unwrap_or_default(),
            "request_id" => params.request_id = owned_str(v).unwrap_or_default(),
            "timestamp" => params.timestamp = owned_str(v).unwrap_or_default(),
            "nonce" => params.nonce = owned_str(v),
            "tenant_id" => params.tenant_id = owned_str(v),
            "metadata" => {
                if let Some(m) = v.as_object() {
                    read_metadata(&mut params.metadata, m);
                }
            }
            "payload" if copy_payload => params.payload = v.clone(),
            "payload" => {}
            "signature" => params.signature = v.as_object().map(read_signature),
            _ => {
                params.extra.insert(k.clone(), v.clone());
            }
        }
    }
    Request {
        jsonrpc: JSONRPC_VERSION.to_owned(),
        method: method.to_owned(),
        id,
        params,
    }
}

fn read_metadata(meta: &mut Metadata, m: &Map<String, Value>) {
    for (k, v) in m {
        match k.as_str() {
            "agent_id" => meta.agent_id = owned_str(v).unwrap_or_default(),
            "session_id" => meta.session_id = owned_str(v).unwrap_or_default(),
            "turn_id" => meta.turn_id = owned_str(v),
            "parent_turn_id" => meta.parent_turn_id = owned_str(v),
            "agent_name" => meta.agent_name = owned_str(v),
            "platform" => meta.platform = owned_str(v),
            "platform_version" => meta.platform_version = owned_str(v),
            "environment" => {
                meta.environment = match v.as_str() {
                    Some("development") => Some(Environment::Development),
                    Some("staging") => Some(Environment::Staging),
                    Some("production") => Some(Environment::Production),
                    _ => None,
                }
            }
            "user_context" => meta.user_context = v.as_object().map(read_user_context),
            "session_state" => meta.session_state = v.as_object().map(read_session_state),
            _ => {
                meta.extra.insert(k.clone(), v.clone());
            }
        }
    }
}

fn read_signature(s: &Map<String, Value>) -> Signature {
    let mut sig = Signature {
        algorithm: String::new(),
        value: String::new(),
        key_id: String::new(),
    };
    for (k, v) in s {
        let field = match k.as_str() {
            "algorithm" => &mut sig.algorithm,
            "value" => &mut sig.value,
            "key_id" => &mut sig.key_id,
            _ => continue,
        };
        *field = owned_str(v).unwrap_or_default();
    }
    sig
}

fn read_user_context(u: &Map<String, Value>) -> UserContext {
    let mut user = UserContext::default();
    for (k, v) in u {
        match k.as_str() {
            "user_id" => user.user_id = owned_str(v),
            "authentication_method" => user.authentication_method = owned_str(v),
            "roles" => {
                user.roles = v
                    .as_array()
                    .map(|roles| roles.iter().filter_map(owned_str).collect())
            }
            _ => {
                user.extra.insert(k.clone(), v.clone());
            }
        }
    }
    user
}

fn read_session_state(s: &Map<String, Value>) -> SessionState {
    let mut state = SessionState::default();
    for (k, v) in s {
        match k.as_str() {
            "chain_hash" => state.chain_hash = owned_str(v),
            _ => {
                state.extra.insert(k.clone(), v.clone());
            }
        }
    }
    state
}

fn owned_str(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

impl Params {
    /// Params with every field empty or absent and an empty payload, for a decode to fill in.
    pub(crate) fn blank() -> Params {
        Params {
            acs_version: String::new(),
            request_id: String::new(),
            timestamp: String::new(),
            nonce: None,
            tenant_id: None,
            metadata: Metadata::of(String::new(), String::new()),
            payload: Value::Object(Map::new()),
            signature: None,
            extra: Map::new(),
        }
    }
}

/// Whether a request's id reads back as sent: not a number that, read as a 64-bit float,
/// lost its digits (the answer could not be matched to the request).
pub(crate) fn id_keeps_its_digits(id: &Id) -> bool {
    match id {
        Id::Num(n) => n.is_i64() || n.is_u64() || n.as_f64().is_none_or(|f| f.abs() < TWO_POW_63),
        _ => true,
    }
}

/// Whether a semantic version's major number is 0 (the ACS versions this Guardian speaks).
pub(crate) fn major_is_zero(version: &str) -> bool {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok())
        == Some(0)
}

/// 2^63: a float id at least this large lost digits (smaller integers are read exactly).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

const PING: &str = "system/ping";

/// A `system/ping` whose params do not make a valid envelope, with what could be read from
/// them (a nil UUID for a missing `request_id` or `session_id`).
fn lenient_ping(id: &Id, params: Option<&Value>) -> Request {
    let empty = Map::new();
    let p = params.and_then(Value::as_object).unwrap_or(&empty);
    let text = |key: &str, valid: fn(&str) -> bool, fallback: &str| {
        p.get(key)
            .and_then(Value::as_str)
            .filter(|s| valid(s))
            .unwrap_or(fallback)
            .to_owned()
    };
    let meta = p.get("metadata").and_then(Value::as_object);
    let session_id = meta
        .and_then(|m| m.get("session_id"))
        .and_then(Value::as_str)
        .filter(|s| is_uuid(s))
        .unwrap_or(NIL_UUID)
        .to_owned();
    let agent_id = meta
        .and_then(|m| m.get("agent_id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Request {
        jsonrpc: JSONRPC_VERSION.to_owned(),
        method: PING.to_owned(),
        id: id.clone(),
        params: Params {
            acs_version: ACS_VERSION.to_owned(),
            request_id: text("request_id", is_uuid, NIL_UUID),
            timestamp: text("timestamp", is_rfc3339, "1970-01-01T00:00:00Z"),
            nonce: None,
            tenant_id: None,
            metadata: Metadata::of(agent_id, session_id),
            payload: match p.get("payload") {
                Some(v @ Value::Object(_)) => v.clone(),
                _ => Value::Object(Map::new()),
            },
            signature: None,
            extra: Map::new(),
        },
    }
}

/// The nil UUID, standing in for a ping's missing `request_id` or `session_id`.
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

fn err(id: Id, e: RpcError) -> Box<Response> {
    Box::new(Response::error(id, e))
}

type FieldError = (String, String);

fn field_err(field: &str, why: &str) -> FieldError {
    (field.to_owned(), why.to_owned())
}

/// The members `names` of an object, in one pass over its members (a keyed look-up per name
/// would hash each name: this runs for every envelope).
fn pick<'v, const N: usize>(
    obj: &'v Map<String, Value>,
    names: [&str; N],
) -> [Option<&'v Value>; N] {
    let mut out = [None; N];
    for (k, v) in obj {
        if let Some(i) = names.iter().position(|n| *n == k.as_str()) {
            out[i] = Some(v);
        }
    }
    out
}

fn required_str<'v>(
    member: Option<&'v Value>,
    prefix: &str,
    key: &str,
) -> Result<&'v str, FieldError> {
    // The field's name is spelled out only for an error: this runs for every field of every
    // envelope.
    match member {
        None => Err(field_err(&format!("{prefix}.{key}"), "is required")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(field_err(&format!("{prefix}.{key}"), "must be a string")),
    }
}

fn optional_str<'v>(
    member: Option<&'v Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<&'v str>, FieldError> {
    match member {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(field_err(&format!("{prefix}.{key}"), "must be a string")),
    }
}

fn optional_object<'v>(
    member: Option<&'v Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<&'v Map<String, Value>>, FieldError> {
    match member {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(field_err(&format!("{prefix}.{key}"), "must be an object")),
    }
}

fn check_params(p: &Map<String, Value>) -> Result<(), FieldError> {
    const P: &str = "params";
    let [acs_version, request_id, timestamp, nonce, tenant_id, metadata, payload, signature] = pick(
        p,
        [
            "acs_version",
            "request_id",
            "timestamp",
            "nonce",
            "tenant_id",
            "metadata",
            "payload",
            "signature",
        ],
    );
    let version = required_str(acs_version, P, "acs_version")?;
    if !is_semver(version) {
        return Err(field_err(
            "params.acs_version",
            "must be a semantic version X.Y.Z",
        ));
    }
    if !major_is_zero(version) {
        return Err(field_err(
            "params.acs_version",
            "major version must be 0 (this Guardian speaks ACS 0.x)",
        ));
    }
    if !is_uuid(required_str(request_id, P, "request_id")?) {
        return Err(field_err("params.request_id", "must be a UUID"));
    }
    if !is_rfc3339(required_str(timestamp, P, "timestamp")?) {
        return Err(field_err(
            "params.timestamp",
            "must be an RFC 3339 date-time",
        ));
    }
    if let Some(nonce) = optional_str(nonce, P, "nonce")? {
        let n = nonce.chars().count();
        if !(16..=64).contains(&n) {
            return Err(field_err(
                "params.nonce",
                "must be 16 to 64 characters long",
            ));
        }
    }
    optional_str(tenant_id, P, "tenant_id")?;
    let metadata = match metadata {
        None => return Err(field_err("params.metadata", "is required")),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(field_err("params.metadata", "must be an object")),
    };
    check_metadata(metadata)?;
    match payload {
        None => return Err(field_err("params.payload", "is required")),
        Some(Value::Object(_)) => {}
        Some(_) => return Err(field_err("params.payload", "must be an object")),
    }
    if let Some(sig) = optional_object(signature, P, "signature")? {
        const S: &str = "params.signature";
        let [algorithm, value, key_id] = pick(sig, ["algorithm", "value", "key_id"]);
        let alg = required_str(algorithm, S, "algorithm")?;
        if !SIGNATURE_ALGORITHMS.contains(&alg) {
            return Err(field_err(
                "params.signature.algorithm",
                "is not a registered signature algorithm",
            ));
        }
        required_str(value, S, "value")?;
        required_str(key_id, S, "key_id")?;
    }
    Ok(())
}

fn check_metadata(m: &Map<String, Value>) -> Result<(), FieldError> {
    const M: &str = "params.metadata";
    const NAMES: [&str; 10] = [
        "agent_id",
        "session_id",
        "agent_name",
        "turn_id",
        "parent_turn_id",
        "platform",
        "platform_version",
        "environment",
        "session_state",
        "user_context",
    ];
    let members = pick(m, NAMES);
    let [agent_id, session_id, .., environment, session_state, user_context] = members;
    required_str(agent_id, M, "agent_id")?;
    if !is_uuid(required_str(session_id, M, "session_id")?) {
        return Err(field_err("params.metadata.session_id", "must be a UUID"));
    }
    // The five between the ids and `environment`: optional strings, nothing more.
    for (member, name) in members[2..7].iter().zip(&NAMES[2..7]) {
        optional_str(*member, M, name)?;
    }
    if let Some(env) = optional_str(environment, M, "environment")? {
        if !matches!(env, "development" | "staging" | "production") {
            return Err(field_err(
                "params.metadata.environment",
                "must be development, staging or production",
            ));
        }
    }
    if let Some(state) = optional_object(session_state, M, "session_state")? {
        let [chain_hash] = pick(state, ["chain_hash"]);
        optional_str(chain_hash, "params.metadata.session_state", "chain_hash")?;
    }
    if let Some(user) = optional_object(user_context, M, "user_context")? {
        const U: &str = "params.metadata.user_context";
        let [user_id, authentication_method, roles] =
            pick(user, ["user_id", "authentication_method", "roles"]);
        optional_str(user_id, U, "user_id")?;
        optional_str(authentication_method, U, "authentication_method")?;
        match roles {
            None => {}
            Some(Value::Array(roles)) if roles.iter().all(Value::is_string) => {}
            Some(_) => {
                return Err(field_err(
                    "params.metadata.user_context.roles",
                    "must be an array of strings",
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ping_text(id: &str, params: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"system/ping","params":{params}}}"#)
            .into_bytes()
    }

    const PARAMS: &str = r#"{"acs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30"},"payload":{}}"#;

    #[test]
    fn ids_beyond_64_bits_are_refused_not_rounded() {
        for id in ["-9223372036854775809", "18446744073709551616", "1e300"] {
            let e = decode_request(&ping_text(id, PARAMS)).unwrap_err();
            let v = e.to_value();
            assert_eq!(v["id"], Value::Null, "{id}: {v}");
            assert_eq!(v["error"]["code"], -32600, "{id}: {v}");
            assert_eq!(v["error"]["data"]["reason"], "id_out_of_range", "{id}");
        }
        // The 64-bit extremes, and fractions, are echoed as sent.
        for id in ["-9223372036854775808", "18446744073709551615", "-3.5", "0"] {
            let r = decode_request(&ping_text(id, PARAMS)).unwrap();
            let echoed = Response::error(r.id, RpcError::internal("x")).to_vec();
            let text = String::from_utf8(echoed).unwrap();
            assert!(text.contains(&format!(r#""id":{id}"#)), "{id}: {text}");
        }
    }

    /// The hand-built request equals what serde's derive reads from the same tree, members
    /// this version does not define (kept in `extra` at each level) included.
    #[test]
    fn the_hand_built_request_agrees_with_serde() {
        let cases = [
            PARAMS.to_string(),
            r#"{"acs_version":"0.1.0","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00Z","nonce":"0123456789abcdef0","tenant_id":"t","x-extra":{"a":[1,2]},"metadata":{"agent_id":"a","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30","turn_id":"t1","parent_turn_id":"t0","agent_name":"n","platform":"p","platform_version":"1","environment":"staging","user_context":{"user_id":"u","roles":["r1","r2"],"authentication_method":"sso","dept":"x"},"session_state":{"chain_hash":"h","seen":3},"custom":true},"payload":{"tool":{"name":"x","arguments":{"k":"v"}}},"signature":{"algorithm":"HMAC-SHA256","value":"dmFsdWU=","key_id":"k","extra":1}}"#.to_string(),
            r#"{"acs_version":"0.2.7","request_id":"8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10","timestamp":"2026-09-19T10:00:00.5+02:00","metadata":{"agent_id":"","session_id":"5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30","environment":"production","user_context":{}},"payload":{"a":null}}"#.to_string(),
        ];
        for (i, params) in cases.iter().enumerate() {
            for id in ["7", "\"x\"", "-3.5"] {
                let text = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"steps/toolCallRequest","params":{params}}}"#
                );
                let tree: Value = serde_json::from_str(&text).unwrap();
                let by_serde = Request::deserialize(&tree).unwrap();
                let decoded = decode_request(text.as_bytes())
                    .unwrap_or_else(|e| panic!("case {i}: {}", e.to_value()));
                assert_eq!(decoded, by_serde, "case {i}, id {id}");
                // Detached: the same request, and the raw value whole once it is put back.
                let opts = DecodeOptions::default();
                let (whole_req, whole) = decode_request_with(text.as_bytes(), &opts).unwrap();
                let (req, mut raw) = decode_request_detached(text.as_bytes(), &opts).unwrap();
                assert_eq!(req, whole_req, "case {i}, id {id}");
                assert_eq!(raw["params"]["payload"], Value::Null);
                assert_ne!(raw, whole);
                reattach_payload(&mut raw, &req.params.payload);
                assert_eq!(raw, whole, "case {i}, id {id}");
            }
        }
    }

    #[test]
    fn a_ping_is_decoded_whatever_its_params() {
        for params in [
            "{}",
            "[]",
            "null",
            r#"{"payload":{"echo":1},"acs_version":"9.9.9"}"#,
        ] {
            let r = decode_request(&ping_text("7", params))
                .unwrap_or_else(|e| panic!("{params}: {}", e.to_value()));
            assert_eq!(r.method, "system/ping");
            assert_eq!(r.id, Id::from(7));
            assert!(is_uuid(&r.params.request_id));
        }
        let r = decode_request(&ping_text("1", r#"{"payload":{"echo":1}}"#)).unwrap();
        assert_eq!(r.params.payload, json!({"echo": 1}));
        // Without params at all, too.
        let r = decode_request(br#"{"jsonrpc":"2.0","id":1,"method":"system/ping"}"#).unwrap();
        assert_eq!(r.params.request_id, NIL_UUID);
        // A valid ping decodes as before.
        let r = decode_request(&ping_text("1", PARAMS)).unwrap();
        assert_eq!(r.params.request_id, "8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10");
    }

    #[test]
    fn another_major_version_is_unsupported_version() {
        let text = PARAMS.replace("0.1.0", "1.0.0");
        let bytes =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"steps/sessionStart","params":{text}}}"#);
        let v = decode_request(bytes.as_bytes()).unwrap_err().to_value();
        assert_eq!(v["error"]["code"], codes::UNSUPPORTED_VERSION, "{v}");
        assert_eq!(v["error"]["data"]["reason"], "unsupported_version");
        assert_eq!(v["error"]["data"]["supported_versions"], json!(["0.1.0"]));
        assert_eq!(v["id"], 3);
        // Not a version at all is still invalid params.
        let bytes = bytes.replace("1.0.0", "one");
        let v = decode_request(bytes.as_bytes()).unwrap_err().to_value();
        assert_eq!(v["error"]["code"], codes::INVALID_PARAMS, "{v}");
    }

    #[test]
    fn uuid_semver_method() {
        assert!(is_uuid("8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10"));
        assert!(is_uuid("8D0B6B0E-4D6B-4F7A-9D1C-1F1C7F0E2A10"));
        assert!(!is_uuid("8d0b6b0e4d6b4f7a9d1c1f1c7f0e2a10"));
        assert!(!is_uuid("8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a1g"));
        assert!(is_semver("0.1.0") && !is_semver("0.1") && !is_semver("v0.1.0"));
        assert!(is_namespaced_method("steps/toolCallRequest"));
        assert!(is_namespaced_method("wrapped:mcp-2025-06-18/tools/call"));
        assert!(!is_namespaced_method("steps/"));
        assert!(!is_namespaced_method("hooks/toolCallRequest"));
        assert!(!is_namespaced_method("steps/\nx"));
    }

    #[test]
    fn modifications_rules() {
        let red = |p: &str| Redaction {
            path: p.into(),
            replacement: None,
        };
        let mut m = Modifications::default();
        assert_eq!(m.validate(), Err(ModificationsError::Empty));
        m.modified_content = Some("x".into());
        assert_eq!(m.validate(), Ok(()));
        m.redactions.push(red("/content/0/value"));
        assert_eq!(m.validate(), Err(ModificationsError::ContentNotExclusive));
        m.modified_content = None;
        m.parameter_overrides.insert("path".into(), json!("/tmp"));
        assert_eq!(m.validate(), Ok(()));
        for overlapping in ["/arguments/path", "/arguments/path/value", "/arguments", ""] {
            m.redactions = vec![red(overlapping)];
            assert!(
                matches!(m.validate(), Err(ModificationsError::Overlap { .. })),
                "{overlapping}"
            );
        }
        m.redactions = vec![red("/arguments/pathx"), red("/arguments/pa~1th")];
        assert_eq!(m.validate(), Ok(()));
        m.redactions = vec![red("arguments/path")];
        assert!(matches!(
            m.validate(),
            Err(ModificationsError::BadPointer(_))
        ));
        m.redactions = vec![red("/a~2")];
        assert!(matches!(
            m.validate(),
            Err(ModificationsError::BadPointer(_))
        ));
        assert_eq!(red("/x").effective_replacement(), DEFAULT_REDACTION);
    }

    #[test]
    fn result_validation_and_serialisation() {
        let rid = "8d0b6b0e-4d6b-4f7a-9d1c-1f1c7f0e2a10";
        let mut r = AcsResult::new(rid, Decision::Deny);
        assert!(matches!(
            r.validate(),
            Err(ResultError::MissingCompanion { .. })
        ));
        r = r
            .with_reasoning("no")
            .with_reason_code("a")
            .with_reason_code("a");
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(r.reason_codes, ["a"]);
        let v = Response::result(Id::from(rid), r).to_value();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":rid,"result":{"type":"final","acs_version":"0.1.0",
                "request_id":rid,"decision":"deny","reasoning":"no","reason_codes":["a"]}})
        );
        let back: Response = serde_json::from_value(v).unwrap();
        assert_eq!(back.as_result().unwrap().decision, Decision::Deny);
        let e = Response::error(Id::Null, RpcError::timestamp_out_of_window("late", 300_000));
        assert_eq!(
            e.to_value()["error"]["data"],
            json!({"reason":"timestamp_out_of_window","message":"late","skew_window_ms":300000})
        );
        assert_eq!(e.to_value()["id"], Value::Null);
    }
}
