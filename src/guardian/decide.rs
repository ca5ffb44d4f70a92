//! Combining the rules that fired into one ACS decision: deny > defer > ask > modify > allow,
//! reason codes from every firing rule of the winning kind, and the companion fields each
//! decision requires.

use serde_json::{Map, Value};

use crate::acs::envelope::{
    AcsResult, Approver, ApproverType, AskDetails, Decision as Wire, DeferDetails, DeferReason,
    Modifications, PolicyReference, Redaction, ResolutionMethod, ResultMetadata, TimeoutDecision,
    TimeoutDisposition,
};
use crate::acs::fields::{DecisionKind as Legal, HookSpec};
use crate::compile::{CompiledRule, DecisionTemplate, ModTemplate, Program};
use crate::syntax::ast::{ApproverKind, DecisionKind};
use crate::vm::{self, Budget, Env, VmError};

/// Reason code when a decidable hook matches no rule and the policy has no default.
pub const NO_DEFAULT: &str = "warden.no_default";
/// Reason code when rules asked for modifications that cannot be applied together.
pub const CONFLICTING_MODIFICATIONS: &str = "warden.conflicting_modifications";
/// Reason code for a decision failure answered as a deny.
pub const DECISION_FAILURE: &str = "warden.decision_failure";

/// Seconds an `ask` waits when the rule names no timeout.
pub const DEFAULT_ASK_TIMEOUT_S: u64 = 300;
/// Milliseconds a `defer` waits when the rule names no timeout (the checker requires one).
pub const DEFAULT_DEFER_TIMEOUT_MS: u64 = 60_000;

/// The decision for one step, with the rules behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub kind: DecisionKind,
    pub reason_codes: Vec<String>,
    pub reasoning: Option<String>,
    pub modifications: Option<Modifications>,
    pub ask: Option<AskDetails>,
    pub defer: Option<DeferDetails>,
    /// Rules that fired, as `module.rule`.
    pub fired: Vec<String>,
    /// Rules whose decision won (cited in `policy_references`).
    pub winners: Vec<(String, String)>,
    /// With explain on: every rule that ran, whether it fired, and its checks with values.
    pub trace: Vec<super::RuleTrace>,
}

impl Decision {
    /// The explain trace (empty unless the Guardian runs with `Options::explain`).
    pub fn explain(&self) -> &[super::RuleTrace] {
        &self.trace
    }

    /// Whether the step goes ahead (and so counts in history).
    pub fn proceeds(&self) -> bool {
        matches!(self.kind, DecisionKind::Allow | DecisionKind::Modify)
    }

    pub fn simple(kind: DecisionKind, code: &str, reasoning: String) -> Decision {
        Decision {
            kind,
            reason_codes: vec![code.to_string()],
            reasoning: Some(reasoning),
            modifications: None,
            ask: None,
            defer: None,
            fired: Vec::new(),
            winners: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// The wire result for this decision.
    pub fn to_result(&self, request_id: &str) -> AcsResult {
        let wire = match self.kind {
            DecisionKind::Allow => Wire::Allow,
            DecisionKind::Deny => Wire::Deny,
            DecisionKind::Modify => Wire::Modify,
            DecisionKind::Ask => Wire::Ask,
            DecisionKind::Defer => Wire::Defer,
        };
        let mut r = AcsResult::new(request_id, wire);
        r.reasoning = self.reasoning.clone();
        r.reason_codes = self.reason_codes.clone();
        r.modifications = self.modifications.clone();
        r.ask_details = self.ask.clone();
        r.defer_details = self.defer.clone();
        r.policy_references = self
            .winners
            .iter()
            .map(|(module, rule)| PolicyReference {
                policy_id: None,
                policy_version: None,
                policy_name: Some(module.clone()),
                rule_id: Some(rule.clone()),
            })
            .collect();
        r.metadata = Some(ResultMetadata {
            evaluator: Some(crate::acs::envelope::Evaluator::Deterministic),
            evaluator_version: Some(concat!("warden ", env!("CARGO_PKG_VERSION")).to_string()),
            ..ResultMetadata::default()
        });
        r
    }
}

fn legal(hook: &HookSpec, kind: DecisionKind) -> bool {
    hook.allows(match kind {
        DecisionKind::Allow => Legal::Allow,
        DecisionKind::Deny => Legal::Deny,
        DecisionKind::Modify => Legal::Modify,
        DecisionKind::Ask => Legal::Ask,
        DecisionKind::Defer => Legal::Defer,
    })
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

/// Decides from the rules that fired (indices into `program.rules`, in declaration order).
pub fn combine(
    program: &Program,
    hook: &'static HookSpec,
    fired: &[u32],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Decision, VmError> {
    let fired: Vec<(u32, Option<DecisionTemplate>)> = fired.iter().map(|i| (*i, None)).collect();
    combine_fired(program, hook, &fired, env, budget)
}

/// Like [`combine`], where a firing may carry its own decision (a Rego deny message) in
/// place of its rule's.
pub fn combine_fired(
    program: &Program,
    hook: &'static HookSpec,
    fired: &[(u32, Option<DecisionTemplate>)],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Decision, VmError> {
    let rules: Vec<(&CompiledRule, &DecisionTemplate)> = fired
        .iter()
        .filter_map(|(i, t)| {
            let r = program.rules.get(*i as usize)?;
            Some((r, t.as_ref().unwrap_or(&r.decision)))
        })
        .collect();
    let mut fired_names: Vec<String> = rules
        .iter()
        .map(|(r, _)| format!("{}.{}", r.module, r.name))
        .collect();
    fired_names.dedup();

    if rules.is_empty() {
        let template = program
            .defaults
            .get(&Some(hook.method))
            .or_else(|| program.defaults.get(&None));
        return Ok(match template {
            Some(t) if legal(hook, t.kind) => {
                let mut d = from_templates(program, hook, &[(None, t)], env, budget)?;
                d.fired = fired_names;
                d
            }
            // A catch-all `default deny` on a hook that cannot be denied: it is recorded.
            Some(t) => {
                let mut d = Decision::simple(DecisionKind::Allow, "", String::new());
                d.reason_codes = t.code.iter().map(|c| c.to_string()).collect();
                d.reasoning = Some(format!(
                    "{} cannot be {}; recorded only",
                    hook.name,
                    past_tense(t.kind)
                ));
                d
            }
            None if legal(hook, DecisionKind::Deny) => Decision::simple(
                DecisionKind::Deny,
                NO_DEFAULT,
                format!(
                    "no rule decided {} and the policy has no default",
                    hook.name
                ),
            ),
            None => {
                let mut d = Decision::simple(DecisionKind::Allow, "", String::new());
                d.reason_codes.clear();
                d.reasoning = Some(format!("{} is recorded only", hook.name));
                d
            }
        });
    }

    let top = rules
        .iter()
        .map(|(_, t)| t.kind)
        .max()
        .unwrap_or(DecisionKind::Allow);
    if hook.audit_only || !legal(hook, top) {
        // Audit-only hooks always allow; every firing rule is recorded in the reason codes.
        let mut d = Decision::simple(DecisionKind::Allow, "", String::new());
        d.reason_codes.clear();
        for (_, t) in &rules {
            if let Some(c) = &t.code {
                push_unique(&mut d.reason_codes, c);
            }
        }
        d.reasoning = Some(format!("{} is recorded only", hook.name));
        d.fired = fired_names;
        return Ok(d);
    }
    let winners: Vec<(Option<&CompiledRule>, &DecisionTemplate)> = rules
        .iter()
        .filter(|(_, t)| t.kind == top)
        .map(|(r, t)| (Some(*r), *t))
        .collect();
    let mut d = from_templates(program, hook, &winners, env, budget)?;
    d.fired = fired_names;
    Ok(d)
}

fn past_tense(k: DecisionKind) -> &'static str {
    match k {
        DecisionKind::Allow => "allowed",
        DecisionKind::Deny => "denied",
        DecisionKind::Modify => "modified",
        DecisionKind::Ask => "held for approval",
        DecisionKind::Defer => "deferred",
    }
}

fn from_templates(
    _program: &Program,
    hook: &'static HookSpec,
    winners: &[(Option<&CompiledRule>, &DecisionTemplate)],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Decision, VmError> {
    let kind = winners[0].1.kind;
    let mut codes = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut refs = Vec::new();
    for (rule, t) in winners {
        if let Some(c) = &t.code {
            push_unique(&mut codes, c);
        }
        match (&t.reasoning, rule) {
            (Some(r), _) => push_unique(&mut reasons, r),
            (None, Some(rule)) => push_unique(&mut reasons, &format!("rule {} fired", rule.name)),
            (None, None) => {}
        }
        if let Some(rule) = rule {
            refs.push((rule.module.to_string(), rule.name.to_string()));
        }
    }
    let reasoning = if reasons.is_empty() {
        match kind {
            DecisionKind::Allow if refs.is_empty() => {
                Some("allowed by the policy's default".to_string())
            }
            _ => Some(format!("{} by the policy", past_tense(kind))),
        }
    } else {
        Some(reasons.join("; "))
    };
    let mut d = Decision {
        kind,
        reason_codes: codes,
        reasoning,
        modifications: None,
        ask: None,
        defer: None,
        fired: Vec::new(),
        winners: refs,
        trace: Vec::new(),
    };
    let first = winners[0].1;
    match kind {
        DecisionKind::Ask => {
            let (akind, id) = first
                .approver
                .clone()
                .unwrap_or((ApproverKind::Human, "default".into()));
            d.ask = Some(AskDetails {
                approver: Approver {
                    kind: match akind {
                        ApproverKind::Human => ApproverType::Human,
                        ApproverKind::Agent => ApproverType::Agent,
                        ApproverKind::Service => ApproverType::Service,
                    },
                    id: id.to_string(),
                    endpoint: None,
                    auth: None,
                },
                question: first
                    .question
                    .as_ref()
                    .map(|q| q.to_string())
                    .or_else(|| d.reasoning.clone())
                    .unwrap_or_else(|| "approve this step?".into()),
                context: None,
                options: Vec::new(),
                timeout_seconds: first
                    .timeout_ms
                    .map_or(DEFAULT_ASK_TIMEOUT_S, |ms| ms.div_ceil(1000).max(1)),
                timeout_disposition: Some(match first.on_timeout {
                    Some(DecisionKind::Allow) => TimeoutDisposition::Allow,
                    _ => TimeoutDisposition::Deny,
                }),
                intent_extension: None,
            });
        }
        DecisionKind::Defer => {
            // Any winner that falls back to deny makes the whole deferral fall back to deny.
            let deny = winners
                .iter()
                .any(|(_, t)| t.on_timeout != Some(DecisionKind::Ask));
            d.defer = Some(DeferDetails {
                reason: match first.because.as_deref() {
                    Some("conflicting_policies") => DeferReason::ConflictingPolicies,
                    Some("low_confidence") => DeferReason::LowConfidence,
                    Some("pending_dependency") => DeferReason::PendingDependency,
                    _ => DeferReason::InsufficientContext,
                },
                resolution_method: match first.resolve.as_deref() {
                    Some("additional_context") => ResolutionMethod::AdditionalContext,
                    Some("human_approval") => ResolutionMethod::HumanApproval,
                    _ => ResolutionMethod::Timeout,
                },
                resolution_timeout_ms: winners
                    .iter()
                    .filter_map(|(_, t)| t.timeout_ms)
                    .min()
                    .unwrap_or(DEFAULT_DEFER_TIMEOUT_MS),
                timeout_decision: if deny {
                    TimeoutDecision::Deny
                } else {
                    TimeoutDecision::Ask
                },
                required_context: Vec::new(),
            });
        }
        DecisionKind::Modify => match merge_modifications(winners, env, budget)? {
            Ok(m) => d.modifications = Some(m),
            Err(why) => {
                let mut deny = Decision::simple(
                    DecisionKind::Deny,
                    CONFLICTING_MODIFICATIONS,
                    format!("the policy's modifications cannot be applied together: {why}"),
                );
                deny.winners = d.winners;
                if !legal(hook, DecisionKind::Deny) {
                    deny.kind = DecisionKind::Allow;
                }
                return Ok(deny);
            }
        },
        DecisionKind::Allow | DecisionKind::Deny => {}
    }
    Ok(d)
}

fn merge_modifications(
    winners: &[(Option<&CompiledRule>, &DecisionTemplate)],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Result<Modifications, String>, VmError> {
    let mut m = Modifications::default();
    for (_, t) in winners {
        for tm in &t.modifications {
            match tm {
                ModTemplate::Redact {
                    pointer,
                    replacement,
                } => {
                    let r = Redaction {
                        path: pointer.clone(),
                        replacement: Some(replacement.clone()),
                    };
                    match m.redactions.iter().find(|x| x.path == r.path) {
                        Some(x) if x.replacement != r.replacement => {
                            return Ok(Err(format!("two different redactions of {pointer}")))
                        }
                        Some(_) => {}
                        None => m.redactions.push(r),
                    }
                }
                ModTemplate::Override { argument, value } => {
                    let Some(v) = vm::run(env, value, budget, None)?.to_json() else {
                        return Ok(Err(format!(
                            "the new value of argument `{argument}` is undefined"
                        )));
                    };
                    match m.parameter_overrides.get(argument) {
                        Some(old) if *old != v => {
                            return Ok(Err(format!(
                                "two different values for argument `{argument}`"
                            )))
                        }
                        _ => {
                            m.parameter_overrides.insert(argument.clone(), v);
                        }
                    }
                }
                ModTemplate::Replace { content } => {
                    let v = vm::run(env, content, budget, None)?;
                    let Some(text) = v.as_str().map(str::to_string) else {
                        return Ok(Err("the replacement content is not a string".into()));
                    };
                    match &m.modified_content {
                        Some(old) if *old != text => {
                            return Ok(Err("two different replacements".into()))
                        }
                        _ => m.modified_content = Some(text),
                    }
                }
            }
        }
    }
    Ok(m.validate().map(|()| m).map_err(|e| e.to_string()))
}

/// The payload of a `system/ping` answer.
pub fn ping_payload(request_payload: &Value, now: String) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("status".into(), Value::String("ok".into()));
    if let Some(echo) = request_payload.get("echo") {
        p.insert("echo".into(), echo.clone());
    }
    p.insert("server_timestamp".into(), Value::String(now));
    p
}
