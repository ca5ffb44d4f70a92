//! Approvals bound to the exact action (docs/effects.md). An `ask` on a tool call records a
//! pending approval keyed by the asking request's id and bound to the call's `action_hash`:
//! SHA-256 of the RFC 8785 form of {principal, tool, operation, arguments, resource,
//! environment}. An operator grants it; the next call with the same hash consumes it (once);
//! a call of the same tool by the same principal with a different hash is a mismatch.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{Capability, Intent, SessionState};
use crate::acs::{crypto, jcs};

/// How long a granted approval stays usable when the `ask` names no `expires`.
pub const DEFAULT_APPROVAL_EXPIRY_MS: u64 = 10 * 60 * 1000;

/// The action a tool call would perform, as an approval binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// The canonical JSON that is hashed.
    pub canonical: String,
    /// What an operator is shown and approves: `canonical`, with the values an explain trace
    /// would mask masked (the caller masks it: `state` does not know what is secret).
    pub shown: String,
    /// `action_hash`: lowercase hex SHA-256 of `canonical`.
    pub hash: String,
    /// Hash of the action without its arguments and resource: calls of the same kind, by
    /// the same principal, in the same environment. Two calls of one kind with different
    /// hashes are the "approved one thing, tried another" case.
    pub kind: String,
    pub tool: String,
    pub operation: Option<String>,
}

impl Action {
    /// The action of a `toolCallRequest` payload (or a wrapped MCP call's view). ACS has no
    /// resource field; `capability` is the nearest thing it carries and stands in for it.
    pub fn of(payload: &Value, metadata: &Value) -> Option<Action> {
        let tool = payload.get("tool")?;
        let name = tool.get("name")?.as_str()?.to_string();
        let field = |v: Option<&Value>| v.cloned().unwrap_or(Value::Null);
        let principal = json!({
            "agent_id": field(metadata.get("agent_id")),
            "user_id": field(metadata.pointer("/user_context/user_id")),
        });
        let arguments: Map<String, Value> = payload
            .get("arguments")
            .and_then(Value::as_object)
            .map(|args| {
                args.iter()
                    .map(|(k, v)| (k.clone(), field(v.get("value"))))
                    .collect()
            })
            .unwrap_or_default();
        let operation = field(payload.get("operation"));
        let environment = field(metadata.get("environment"));
        let mut action = json!({
            "principal": principal,
            "tool": tool,
            "operation": operation,
            "arguments": arguments,
            "resource": field(payload.get("capability")),
            "environment": environment,
        });
        // A call whose content a `modify` replaced (the guardian's modified payload) is bound
        // with its replacement.
        if let Some(content) = payload.get("modified_content") {
            action["modified_content"] = content.clone();
        }
        let kind = json!({
            "principal": action["principal"],
            "tool": tool,
            "operation": operation,
            "environment": environment,
        });
        let canonical = jcs::canonicalize(&action);
        Some(Action {
            shown: canonical.clone(),
            hash: crypto::canonical_hash(&action),
            kind: crypto::canonical_hash(&kind),
            canonical,
            tool: name,
            operation: operation.as_str().map(str::to_string),
        })
    }
}

/// One approval, from the `ask` that opened it to its use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The action as shown ([`Action::shown`]: secrets masked), its hash and its kind.
    pub action: String,
    pub action_hash: String,
    pub kind: String,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Who may grant it: `ask_details.approver`.
    pub approver_type: String,
    pub approver_id: String,
    pub question: String,
    /// When the ask was made (event time) and when it times out unanswered.
    pub asked_ms: i64,
    pub deadline_ms: i64,
    /// How long it stays usable once granted.
    pub expires_ms: u64,
    /// When it was granted (the operator's clock), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_ms: Option<i64>,
    /// `extend intent`: `session` or `this_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend: Option<String>,
}

/// Where an approval stands, as read at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalStatus {
    /// Asked, not yet answered, not timed out.
    Pending,
    /// Granted and usable.
    Granted,
    /// Unanswered past its timeout, or granted and unused past its expiry.
    Expired,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Granted => "granted",
            ApprovalStatus::Expired => "expired",
        }
    }
}

impl Approval {
    pub fn status_at(&self, now_ms: i64) -> ApprovalStatus {
        match self.granted_ms {
            Some(at) if now_ms < at.saturating_add(self.expires_ms as i64) => {
                ApprovalStatus::Granted
            }
            Some(_) => ApprovalStatus::Expired,
            None if now_ms < self.deadline_ms => ApprovalStatus::Pending,
            None => ApprovalStatus::Expired,
        }
    }
}

/// What a tool call that the policy would `ask` about finds among the session's approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A granted approval for exactly this action (the ask's request id).
    Approved(Arc<str>),
    /// A granted approval for another action of the same kind.
    Mismatch(Arc<str>, String),
    Nothing,
}

/// What a decided step did to the approvals, as journalled with the step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum ApprovalNote {
    /// The step was an `ask`: a pending approval opened under its request id.
    Asked { id: String, approval: Box<Approval> },
    /// The step used up the approval opened by the ask `id`.
    Consumed { id: String, action_hash: String },
}

/// Why an approval could not be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("no ask with request id {0} is waiting for approval")]
    Unknown(String),
    #[error("this ask names approver {expected:?}; {given:?} may not grant it")]
    WrongApprover { expected: String, given: String },
    #[error("the ask was already granted")]
    AlreadyGranted,
    #[error("the ask timed out unanswered; the agent has been told no (ask again)")]
    TimedOut,
}

/// What a grant did to the Intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// The ask offered no session-wide extension.
    None,
    /// The capability joined the session's Intent.
    Extended(Capability),
    /// Refused: the Intent's `scope_mode` is `strict`.
    RefusedStrict,
    /// The session's Intent restricts nothing (none declared, or no parsed capabilities), so
    /// there is nothing to widen.
    Unrestricted,
}

impl SessionState {
    /// A decision's lookup: for an action the policy would ask about.
    pub fn find_approval(&self, action: &Action, now_ms: i64) -> Found {
        let Some(ids) = self.granted.get(action.kind.as_str()) else {
            return Found::Nothing;
        };
        let mut other = None;
        for id in ids {
            let Some(a) = self.approvals.get(id) else {
                continue;
            };
            if a.status_at(now_ms) != ApprovalStatus::Granted {
                continue;
            }
            if a.action_hash == action.hash {
                return Found::Approved(id.clone());
            }
            other.get_or_insert_with(|| (id.clone(), a.action_hash.clone()));
        }
        match other {
            Some((id, hash)) => Found::Mismatch(id, hash),
            None => Found::Nothing,
        }
    }

    /// Applies what a decided step did to the approvals.
    pub fn apply_approval(&mut self, note: &ApprovalNote) {
        match note {
            ApprovalNote::Asked { id, approval } => {
                self.prune_approvals(approval.asked_ms);
                let key: Arc<str> = Arc::from(id.as_str());
                self.approvals
                    .insert(key.clone(), Arc::new((**approval).clone()));
                self.approval_order.push_back(key);
            }
            ApprovalNote::Consumed { id, .. } => {
                if let Some(a) = self.approvals.remove(id.as_str()) {
                    self.unindex_grant(&a.kind, id);
                }
            }
        }
    }

    /// Drops the oldest approvals while they are used up or expired at `now_ms` (amortised
    /// O(1) per ask), so unanswered asks do not pile up in a long session.
    fn prune_approvals(&mut self, now_ms: i64) {
        while let Some(id) = self.approval_order.front().cloned() {
            match self
                .approvals
                .get(&id)
                .map(|a| (a.status_at(now_ms), a.kind.clone()))
            {
                Some((ApprovalStatus::Expired, kind)) => {
                    self.approvals.remove(&id);
                    self.unindex_grant(&kind, &id);
                }
                Some(_) => break,
                None => {}
            }
            self.approval_order.pop_front();
        }
    }

    fn unindex_grant(&mut self, kind: &str, id: &str) {
        let emptied = match self.granted.get_mut(kind) {
            Some(ids) => {
                ids.retain(|x| &**x != id);
                ids.is_empty()
            }
            None => false,
        };
        if emptied {
            self.granted.remove(kind);
        }
    }

    /// An approval and its status now (the latest event time).
    pub fn approval(&self, id: &str) -> Option<(Arc<Approval>, ApprovalStatus)> {
        let a = self.approvals.get(id)?.clone();
        let status = a.status_at(self.scalars.now_ms);
        Some((a, status))
    }

    /// Every approval and its status at `now_ms`, sorted by request id.
    pub fn approvals_at(&self, now_ms: i64) -> Vec<(String, Arc<Approval>, ApprovalStatus)> {
        let mut out: Vec<_> = self
            .approvals
            .iter()
            .map(|(id, a)| (id.to_string(), a.clone(), a.status_at(now_ms)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Whether `approver_id` may grant the ask `id` at `at_ms` (nothing changes).
    pub fn check_grant(
        &self,
        id: &str,
        approver_id: &str,
        at_ms: i64,
    ) -> Result<Arc<Approval>, GrantError> {
        let a = self
            .approvals
            .get(id)
            .ok_or_else(|| GrantError::Unknown(id.to_string()))?;
        if a.approver_id != approver_id {
            return Err(GrantError::WrongApprover {
                expected: format!("{} {}", a.approver_type, a.approver_id),
                given: approver_id.to_string(),
            });
        }
        if a.granted_ms.is_some() {
            return Err(GrantError::AlreadyGranted);
        }
        if at_ms >= a.deadline_ms {
            return Err(GrantError::TimedOut);
        }
        Ok(a.clone())
    }

    /// What granting the ask `id` would do to the Intent.
    pub fn extension_of(&self, a: &Approval) -> Extension {
        if a.extend.as_deref() != Some("session") {
            return Extension::None;
        }
        let Some(intent) = &self.scalars.intent else {
            return Extension::Unrestricted;
        };
        if intent.trusted && intent.capabilities.is_empty() {
            return Extension::Unrestricted;
        }
        if intent.scope_mode.as_deref() == Some("strict") {
            return Extension::RefusedStrict;
        }
        Extension::Extended(Capability {
            tool: Some(a.tool.clone()),
            operation: a.operation.clone(),
            resource: None,
            granted_by: Some(format!("{} {}", a.approver_type, a.approver_id)),
        })
    }

    /// Grants the ask `id` at `at_ms` (after [`SessionState::check_grant`]), widening the
    /// Intent as [`SessionState::extension_of`] says. Unknown ids change nothing.
    pub fn grant(&mut self, id: &str, at_ms: i64) -> Extension {
        let Some(a) = self.approvals.get(id).cloned() else {
            return Extension::None;
        };
        let extension = self.extension_of(&a);
        if let (Extension::Extended(cap), Some(intent)) = (&extension, &self.scalars.intent) {
            let mut widened: Intent = (**intent).clone();
            widened.capabilities.push(cap.clone());
            self.scalars.intent = Some(Arc::new(widened));
        }
        let mut granted = (*a).clone();
        granted.granted_ms = Some(at_ms);
        let key: Arc<str> = Arc::from(id);
        match self.granted.get_mut(granted.kind.as_str()) {
            Some(ids) => ids.push_back(key.clone()),
            None => {
                self.granted.insert(
                    Arc::from(granted.kind.as_str()),
                    imbl::Vector::unit(key.clone()),
                );
            }
        }
        self.approvals.insert(key, Arc::new(granted));
        extension
    }
}
