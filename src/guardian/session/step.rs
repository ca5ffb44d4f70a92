//! The second phase of a step, for a request the gate admitted: the view the hook decides
//! (`view.rs`), the engine (`guardian::engine`: the decision, and the state committed whole,
//! as taint only, or not at all), the failure policy when the policy could not decide, the
//! audit entries (on a copy of the chain: the commit moves the session's head), and the
//! journal record.
//!
//! Owns: turning an admitted request into its answer, its entries and its record. Must not
//! know: the gate's checks, how records are stored, the session table.

use serde_json::Value;

use super::gate::{Admitted, Entered};
use super::{Session, View};
use crate::acs::envelope::{self, Request, Response};
use crate::acs::{fields, time};
use crate::guardian::Decision;
use crate::guardian::{audit, engine, explain, Guardian, Logged, Record, RuleTrace};
use crate::state::ApprovalNote;
use crate::vm::VmError;

/// What the step leaves for the journal and the commit.
pub(crate) struct Stepped {
    /// The answer: a result, or the error a failed decision is answered with
    /// (`OnDecisionFailure::Error`).
    pub response: Response,
    pub traces: Vec<RuleTrace>,
    pub logged: Option<Logged>,
    /// The journal record (its entries are the commit's too).
    pub record: Record,
    /// The hook the step was decided as.
    pub method: &'static str,
    /// The step went ahead.
    pub proceeds: bool,
    /// The step is committed: every step but one whose failed decision is answered with an
    /// error, which is journalled (its content entered the state) and nothing more.
    pub commits: bool,
}

impl Guardian {
    /// The step (module docs), in three phases: decide on the session's state, answer (the
    /// result, or the failure policy's answer), and write the audit entries and the record.
    /// `raw` is the request as received: its params move into the record.
    pub(crate) fn step(
        &self,
        s: &mut Session,
        req: &Request,
        raw: &mut Value,
        admitted: &Admitted,
        entered: &Entered,
    ) -> Stepped {
        let p = &req.params;
        let program = &admitted.active.program;
        // A subagent's summary carries back everything that entered the subagent's context.
        let extra_labels = match &entered.child {
            Some((_, Some(f))) => f.labels,
            Some((_, None)) => program.unknown_labels,
            None => 0,
        };
        let view = View::of(admitted.hook, &p.payload, &p.request_id);
        let hook = view.hook;
        let (outcome, arguments) = self.decide_on_state(s, req, raw, admitted, &view, extra_labels);
        let mut logged = self.decision_log.get().is_some().then(|| Logged {
            tool: fields::at(view.payload(&p.payload), &["tool", "name"])
                .and_then(Value::as_str)
                .map(String::from),
            arguments,
            fired: Vec::new(),
            unverified_claims: Vec::new(),
        });
        let answer = match outcome {
            Ok(decision) => self.answer(decision, &p.request_id, admitted, logged.as_mut()),
            Err(e) => match self.failure(req.id.clone(), &p.request_id, hook, &e) {
                Ok(result) => Answer::failed(result),
                Err(response) => {
                    let record = failed_record(req, raw, extra_labels);
                    return Stepped {
                        response,
                        traces: Vec::new(),
                        logged,
                        record,
                        method: hook.method,
                        proceeds: false,
                        commits: false,
                    };
                }
            },
        };
        self.recorded(
            s,
            req,
            raw,
            admitted,
            entered,
            hook.method,
            extra_labels,
            answer,
            logged,
        )
    }

    /// The decision on the session's state (the engine commits what it keeps), with the
    /// arguments a decision log shows when one is kept.
    fn decide_on_state(
        &self,
        s: &mut Session,
        req: &Request,
        raw: &mut Value,
        admitted: &Admitted,
        view: &View,
        extra_labels: u64,
    ) -> (Result<Decision, VmError>, Option<Value>) {
        let p = &req.params;
        let program = &admitted.active.program;
        // Lent out of the request for the decision and put back after it (the audit entry and
        // the journal record read the request whole): a copy of it cost more than the rest of
        // the event's setup.
        let taken = super::super::params_metadata_mut(raw).map(Value::take);
        let metadata = match &taken {
            Some(tree) => tree,
            None => super::metadata_tree(&mut s.metadata_seen, &p.metadata),
        };
        let ev = view.event(
            &p.payload,
            &p.request_id,
            metadata,
            admitted.time_ms,
            extra_labels,
        );
        let state = s
            .state
            .as_mut()
            .expect("the gate gives an admitted step's session a state");
        let explain = self.options.explain;
        let decided = if self.decision_log.get().is_some() {
            engine::decide_event_logged(program, view.hook, state, &ev, explain)
        } else {
            (
                engine::decide_event(program, view.hook, state, &ev, explain),
                None,
            )
        };
        if let (Some(slot), Some(tree)) = (super::super::params_metadata_mut(raw), taken) {
            *slot = tree;
        }
        decided
    }

    /// A decision as the step's answer: its result (with the explain trace when asked for),
    /// and what the audit entry and the record keep of it.
    fn answer(
        &self,
        decision: Decision,
        request_id: &str,
        admitted: &Admitted,
        logged: Option<&mut Logged>,
    ) -> Answer {
        if let Some(l) = logged {
            l.fired = decision.fired.clone();
            l.unverified_claims = decision.unverified_claims.clone();
        }
        let traces = decision.trace.clone();
        let mut result = decision.to_result(request_id);
        if self.options.explain {
            let active = &admitted.active;
            result.policy_data.insert(
                "warden".into(),
                explain::to_json(&decision, &traces, &active.program, &active.sources),
            );
        }
        Answer {
            result,
            traces,
            proceeds: decision.proceeds(),
            approval: decision.approval,
            effect_outcome: decision.effect_outcome,
            failed: false,
        }
    }

    /// The last phase: the audit entries (when the chain is kept) and the journal record, into
    /// which the request's params move.
    #[allow(clippy::too_many_arguments)]
    fn recorded(
        &self,
        s: &Session,
        req: &Request,
        raw: &mut Value,
        admitted: &Admitted,
        entered: &Entered,
        method: &'static str,
        extra_labels: u64,
        answer: Answer,
        logged: Option<Logged>,
    ) -> Stepped {
        let Answer {
            mut result,
            traces,
            proceeds,
            approval,
            effect_outcome,
            failed,
        } = answer;
        let digest = &admitted.active.digest;
        let entries = if self.options.protocol.audit {
            let step = AuditedStep {
                req,
                raw,
                hook_method: method,
                entered,
                approval: approval.as_ref(),
                effect_outcome: effect_outcome.as_ref(),
                digest,
            };
            let (entries, head) = self.audit_entries(s, step, &mut result);
            result.chain_hash = head;
            entries
        } else {
            Vec::new()
        };
        // The params move into the record: nothing reads the raw request after this. Without
        // a journal the record is dropped unread, and the params stay with the request (freed
        // where the caller frees it: `Guardian::decide_decoded`).
        let params = match &self.journal {
            Some(_) => fields::member_mut(raw, "params")
                .map(Value::take)
                .unwrap_or(Value::Null),
            None => Value::Null,
        };
        let record = Record::Step {
            session: req.params.metadata.session_id.clone(),
            method: req.method.clone(),
            params,
            proceeds,
            failed,
            extra_labels,
            entries,
            approval,
            at_ms: Some(time::now_ms()),
            policy: (s.policy_digest.as_deref() != Some(&**digest)).then(|| digest.to_string()),
        };
        Stepped {
            response: Response::result(req.id.clone(), result),
            traces,
            logged,
            record,
            method,
            proceeds,
            commits: true,
        }
    }

    /// A step's audit entries, hashed on a copy of the session's chain (the commit moves the
    /// chain itself), and the head after them. A chain-hash claim the step's payload makes
    /// that does not match adds the reason code `chain_mismatch` to `result`.
    fn audit_entries(
        &self,
        s: &Session,
        step: AuditedStep<'_>,
        result: &mut envelope::AcsResult,
    ) -> (Vec<Value>, Option<String>) {
        let p = &step.req.params;
        let sid = p.metadata.session_id.as_str();
        let digest = step.digest;
        let mut chain = s.chain.clone();
        let mut entries = Vec::new();
        if chain.len > 0 && s.policy_digest.as_deref() != Some(digest) {
            // Timed as the step it precedes, so a session restored from the journal writes
            // the same entry.
            let e = audit::reload_entry(
                chain.next_id(sid),
                s.policy_digest.as_deref(),
                digest,
                p.timestamp.clone(),
            );
            entries.push(chain.append(e));
        }
        // The method as it arrived (a wrapped MCP step is recorded as itself, not as the view
        // it was decided as), as the journal record is.
        let params = step.raw.get("params").unwrap_or(&Value::Null);
        let mut e = audit::step_entry(
            chain.next_id(sid),
            &step.req.method,
            params,
            &p.payload,
            result.decision.as_str(),
        );
        if chain.len == 0 {
            if let (Some(parent), Some(link)) = (&s.parent, &s.parent_link) {
                e.insert("parent_session_id".into(), Value::String(parent.clone()));
                e.insert("parent_chain_hash".into(), Value::String(link.clone()));
            }
        }
        let claimed = |k: &str| p.payload.get(k).and_then(Value::as_str);
        match step.hook_method {
            "steps/subagentStop" => {
                let head = step
                    .entered
                    .child
                    .as_ref()
                    .and_then(|(_, f)| f.as_ref())
                    .and_then(|f| f.head.clone());
                if let (Some(c), Some(h)) = (claimed("final_chain_hash"), &head) {
                    if c != h {
                        push_code(result, "chain_mismatch");
                    }
                }
                e.insert(
                    "subagent_chain_hash".into(),
                    head.map(Value::String).unwrap_or(Value::Null),
                );
            }
            "steps/postCompact" | "steps/sessionEnd" => {
                let k = if step.hook_method == "steps/postCompact" {
                    "pre_compact_chain_hash"
                } else {
                    "final_chain_hash"
                };
                if let Some(c) = claimed(k) {
                    if Some(c) != chain.head.as_deref() {
                        push_code(result, "chain_mismatch");
                    }
                }
            }
            _ => {}
        }
        match step.approval {
            Some(ApprovalNote::Asked { approval, .. }) => {
                e.insert("action_hash".into(), approval.action_hash.clone().into());
            }
            Some(ApprovalNote::Consumed { id, action_hash }) => {
                e.insert("action_hash".into(), action_hash.clone().into());
                e.insert("approval_consumed".into(), id.clone().into());
            }
            None => {}
        }
        if let Some(outcome) = step.effect_outcome {
            e.insert("effect_outcome".into(), outcome.clone());
        }
        entries.push(chain.append(e));
        (entries, chain.head)
    }
}

/// A step's answer, and what its audit entry and record keep of the decision.
struct Answer {
    result: envelope::AcsResult,
    traces: Vec<RuleTrace>,
    proceeds: bool,
    approval: Option<ApprovalNote>,
    effect_outcome: Option<Value>,
    /// The policy could not decide; `result` is the failure policy's answer.
    failed: bool,
}

impl Answer {
    /// The failure policy's answer to a decision that failed.
    fn failed(result: envelope::AcsResult) -> Answer {
        Answer {
            result,
            traces: Vec::new(),
            proceeds: false,
            approval: None,
            effect_outcome: None,
            failed: true,
        }
    }
}

/// The record of a step whose failed decision is answered with an error: the content that
/// entered with it is journalled too (it entered the state as taint).
fn failed_record(req: &Request, raw: &Value, extra_labels: u64) -> Record {
    Record::Step {
        session: req.params.metadata.session_id.clone(),
        method: req.method.clone(),
        params: raw.get("params").cloned().unwrap_or(Value::Null),
        proceeds: false,
        failed: true,
        extra_labels,
        entries: Vec::new(),
        approval: None,
        at_ms: Some(time::now_ms()),
        // Nothing of it commits but its taint: the session's policy is as it was.
        policy: None,
    }
}

/// What a step's audit entry is made of.
struct AuditedStep<'a> {
    req: &'a Request,
    raw: &'a Value,
    /// The hook it was decided as.
    hook_method: &'static str,
    entered: &'a Entered,
    approval: Option<&'a ApprovalNote>,
    effect_outcome: Option<&'a Value>,
    /// The policy it was decided on.
    digest: &'a str,
}

/// Adds a reason code to a result, once.
fn push_code(r: &mut envelope::AcsResult, code: &str) {
    if !r.reason_codes.iter().any(|c| c == code) {
        r.reason_codes.push(code.to_string());
    }
}
