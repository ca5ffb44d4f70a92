//! Combining the rules that fired into one ACS decision: deny > defer > ask > modify > allow,
//! reason codes from every firing rule of the winning kind (an ask also keeps the changes and
//! codes of the modify rules beside it), the companion fields each decision requires, the
//! places `redact` and `redact each` choose, and the modified payload an ask's approval binds to
//! (docs/language.md §9).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::acs::envelope::{
    AcsResult, Approver, ApproverType, AskDetails, DeferDetails, DeferReason, ExtensionScope,
    IntentExtension, Modifications, PolicyReference, Redaction, ResolutionMethod, ResultMetadata,
    TimeoutDecision, TimeoutDisposition,
};
use crate::acs::fields::HookSpec;
use crate::acs::DecisionKind;
use crate::compile::{Code, CompiledRule, DecisionTemplate, ModTemplate, Program};
use crate::state::{Action, Approval, ApprovalNote, Found, DEFAULT_APPROVAL_EXPIRY_MS};
use crate::syntax::ast::{ApproverKind, ExtendScope};
use crate::vm::{self, Budget, Env, VmError};

/// Reason code when a decidable hook matches no rule and the policy has no default.
pub const NO_DEFAULT: &str = "warden.no_default";
/// Reason code when rules asked for modifications that cannot be applied together.
pub const CONFLICTING_MODIFICATIONS: &str = "warden.conflicting_modifications";
/// Reason code for a decision failure answered as a deny.
pub const DECISION_FAILURE: &str = "warden.decision_failure";
/// Reason code of a call allowed because an approver granted exactly this action.
pub const APPROVED: &str = "warden.approved";
/// Reason code of a call denied because the approval outstanding for its kind of action was
/// granted for different arguments.
pub const APPROVAL_MISMATCH: &str = "warden.approval_mismatch";

/// Seconds an `ask` waits when the rule names no timeout.
pub const DEFAULT_ASK_TIMEOUT_S: u64 = 300;
/// Milliseconds a `defer` waits when the rule names no timeout (the checker requires one).
pub const DEFAULT_DEFER_TIMEOUT_MS: u64 = 60_000;

/// The decision for one step, with the rules behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The decision word.
    pub kind: DecisionKind,
    /// The reason codes, in the order the winning rules gave them.
    pub reason_codes: Vec<String>,
    /// The reasoning the answer shows.
    pub reasoning: Option<String>,
    // Boxed: rare, and large (a Decision is moved several times on its way out).
    /// For a `modify`: the changes, merged.
    pub modifications: Option<Box<Modifications>>,
    /// For an `ask`: whom to ask, and what.
    pub ask: Option<Box<AskDetails>>,
    /// For a `defer`: why, and what happens when it expires.
    pub defer: Option<DeferDetails>,
    /// Rules that fired, as `module.rule`.
    pub fired: Vec<Arc<str>>,
    /// Rules whose decision won (cited in `policy_references`).
    pub winners: Vec<(Arc<str>, Arc<str>)>,
    /// With explain on: every rule that ran, whether it fired, and its checks with values.
    pub trace: Vec<super::RuleTrace>,
    /// For an `ask`: how long the approval stays usable once granted.
    pub approval_expires_ms: Option<u64>,
    /// What the step did to the session's approvals (docs/effects.md).
    pub approval: Option<ApprovalNote>,
    /// For a toolCallResult that went ahead, when the policy declares effects: the
    /// reservation it settled, or that it matched none (written into the audit entry).
    pub effect_outcome: Option<Value>,
    /// The content items whose provenance claimed the user wrote them but whose text the user
    /// never said (JSON pointers of their provenance records): read as content with no
    /// lineage, and reported in explain traces and decision logs.
    pub unverified_claims: Vec<String>,
    /// The places (JSON pointers into the payload) that the `modify` rules that fired redact,
    /// whether or not their decision won: their values are masked wherever the step's values
    /// are shown (explain traces, decision logs, approval requests).
    pub redacted: Vec<String>,
    /// What the policy could not read in this step (`policy_data.warnings`): a toolCallResult
    /// without `tool` that rules or history filters test by `tool.name`.
    pub warnings: Vec<String>,
}

impl Decision {
    /// The explain trace (empty unless the Guardian runs with `Options::explain`).
    pub fn explain(&self) -> &[super::RuleTrace] {
        &self.trace
    }

    /// Whether the step goes ahead (and so counts in history).
    pub fn proceeds(&self) -> bool {
        self.kind.proceeds()
    }

    /// A decision of `kind` with one reason code (none when `code` is empty) and its reasoning.
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
            approval_expires_ms: None,
            approval: None,
            effect_outcome: None,
            unverified_claims: Vec::new(),
            redacted: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Binds an `ask` on a tool call to its action (docs/effects.md): a granted approval
    /// for exactly this action turns it into an allow, or a modify when the ask carries
    /// modifications (and is used up); one granted for
    /// another action of the same kind turns it into a deny; otherwise the ask opens a
    /// pending approval under this request's id.
    pub fn bind_approval(
        self,
        found: Found,
        action: &Action,
        request_id: &str,
        now_ms: i64,
    ) -> Self {
        match found {
            Found::Approved(id) => {
                let mut d = self;
                // The approved call runs as it was asked about: modified, if it was.
                d.kind = if d.modifications.is_some() {
                    DecisionKind::Modify
                } else {
                    DecisionKind::Allow
                };
                d.reasoning = Some(format!(
                    "approved (ask {id}) for exactly this call; {}",
                    d.reasoning.as_deref().unwrap_or("the policy asked")
                ));
                d.reason_codes.insert(0, APPROVED.to_string());
                d.ask = None;
                d.approval = Some(ApprovalNote::Consumed {
                    id: id.to_string(),
                    action_hash: action.hash.clone(),
                });
                d
            }
            Found::Mismatch(id, approved) => {
                let mut d = Decision::simple(
                    DecisionKind::Deny,
                    APPROVAL_MISMATCH,
                    format!(
                        "this call is not the one approved under ask {id}: its action_hash is \
                         {}, the approved one is {approved}; only the approved call may \
                         proceed while that approval stands",
                        action.hash
                    ),
                );
                d.winners = self.winners;
                d.fired = self.fired;
                d.redacted = self.redacted;
                d
            }
            Found::Nothing => {
                let mut d = self;
                let Some(ask) = &mut d.ask else { return d };
                let expires_ms = d.approval_expires_ms.unwrap_or(DEFAULT_APPROVAL_EXPIRY_MS);
                ask.context = Some(format!(
                    "Warden holds this call as approval {request_id}. Granting it allows this \
                     exact call (action_hash {}) once, within {} s of the grant; any other \
                     arguments are refused.",
                    action.hash,
                    expires_ms.div_ceil(1000)
                ));
                let approval = Approval {
                    action: action.shown.clone(),
                    action_hash: action.hash.clone(),
                    kind: action.kind.clone(),
                    tool: action.tool.clone(),
                    operation: action.operation.clone(),
                    approver_type: approver_word(ask.approver.kind).to_string(),
                    approver_id: ask.approver.id.clone(),
                    question: ask.question.clone(),
                    asked_ms: now_ms,
                    deadline_ms: now_ms.saturating_add((ask.timeout_seconds * 1000) as i64),
                    expires_ms,
                    granted_ms: None,
                    extend: ask.intent_extension.as_ref().map(|x| {
                        match x.scope {
                            ExtensionScope::Session => "session",
                            ExtensionScope::ThisRequest => "this_request",
                        }
                        .to_string()
                    }),
                };
                d.approval = Some(ApprovalNote::Asked {
                    id: request_id.to_string(),
                    approval: Box::new(approval),
                });
                d
            }
        }
    }

    /// The wire result for this decision.
    pub fn to_result(&self, request_id: &str) -> AcsResult {
        let mut r = AcsResult::new(request_id, self.kind);
        r.reasoning = self.reasoning.clone();
        r.reason_codes = self.reason_codes.clone();
        r.modifications = self.modifications.as_deref().cloned();
        r.ask_details = self.ask.as_deref().cloned();
        r.defer_details = self.defer.clone();
        r.policy_references = self
            .winners
            .iter()
            .map(|(module, rule)| PolicyReference {
                policy_id: None,
                policy_version: None,
                policy_name: Some(module.to_string()),
                rule_id: Some(rule.to_string()),
            })
            .collect();
        match &self.approval {
            Some(ApprovalNote::Asked { id, approval }) => {
                r.policy_data.insert(
                    "approval".into(),
                    serde_json::json!({
                        "request_id": id,
                        "action_hash": approval.action_hash,
                        "action": approval.action,
                        "expires_seconds": approval.expires_ms.div_ceil(1000),
                    }),
                );
            }
            Some(ApprovalNote::Consumed { id, action_hash }) => {
                r.policy_data.insert(
                    "approval".into(),
                    serde_json::json!({"consumed": id, "action_hash": action_hash}),
                );
            }
            None => {}
        }
        if !self.warnings.is_empty() {
            r.policy_data
                .insert("warnings".into(), serde_json::json!(self.warnings));
        }
        r.metadata = Some(ResultMetadata {
            evaluator: Some(crate::acs::envelope::Evaluator::Deterministic),
            evaluator_version: Some(concat!("warden ", env!("CARGO_PKG_VERSION")).to_string()),
            ..ResultMetadata::default()
        });
        r
    }
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
    // Scratch lists of a few entries: on the stack, not allocated per decision.
    let rules: SmallVec<[(&CompiledRule, &DecisionTemplate); 4]> = fired
        .iter()
        .filter_map(|(i, t)| {
            let r = program.rules.get(*i as usize)?;
            Some((r, t.as_ref().unwrap_or(&r.decision)))
        })
        .collect();
    let mut fired_names: Vec<Arc<str>> = rules.iter().map(|(r, _)| r.qualified.clone()).collect();
    fired_names.dedup();

    if rules.is_empty() {
        let template = program
            .defaults
            .get(&Some(hook.method))
            .or_else(|| program.defaults.get(&None));
        return Ok(match template {
            Some(t) if hook.allows(t.kind) => {
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
                    t.kind.past_tense()
                ));
                d
            }
            None if hook.allows(DecisionKind::Deny) => Decision::simple(
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
    if hook.audit_only || !hook.allows(top) {
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
    let winners: SmallVec<[(Option<&CompiledRule>, &DecisionTemplate); 4]> = rules
        .iter()
        .filter(|(_, t)| t.kind == top)
        .map(|(r, t)| (Some(*r), *t))
        .collect();
    let mut d = from_templates(program, hook, &winners, env, budget)?;
    if top == DecisionKind::Ask {
        d = carry_modifications(d, hook, &rules, env, budget)?;
    }
    d.fired = fired_names;
    Ok(d)
}

/// An `ask` keeps the modifications of the `modify` rules that fired beside it (docs/language.md
/// §9): the approver is asked about the modified call, and the call that runs once approved
/// carries them. Their codes follow the ask's, and their rules are cited too. Modifications that
/// cannot be applied together make the step a deny, as they would without the ask.
fn carry_modifications(
    mut d: Decision,
    hook: &'static HookSpec,
    rules: &[(&CompiledRule, &DecisionTemplate)],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Decision, VmError> {
    let modifiers: SmallVec<[(Option<&CompiledRule>, &DecisionTemplate); 4]> = rules
        .iter()
        .filter(|(_, t)| t.kind == DecisionKind::Modify)
        .map(|(r, t)| (Some(*r), *t))
        .collect();
    if modifiers.is_empty() {
        return Ok(d);
    }
    match merge_modifications(&modifiers, env, budget)? {
        Ok(m) if is_unchanged(&m) => {}
        Ok(m) => d.modifications = Some(Box::new(m)),
        Err(why) => return Ok(conflict_deny(d.winners, hook, &why)),
    }
    for (rule, t) in &modifiers {
        if let Some(c) = &t.code {
            push_unique(&mut d.reason_codes, c);
        }
        if let Some(rule) = rule {
            let cited = (rule.module.clone(), rule.name.clone());
            if !d.winners.contains(&cited) {
                d.winners.push(cited);
            }
        }
    }
    Ok(d)
}

/// The deny (an allow where deny is illegal) for modifications that cannot be applied together.
fn conflict_deny(
    winners: Vec<(Arc<str>, Arc<str>)>,
    hook: &'static HookSpec,
    why: &str,
) -> Decision {
    let mut deny = Decision::simple(
        DecisionKind::Deny,
        CONFLICTING_MODIFICATIONS,
        format!("the policy's modifications cannot be applied together: {why}"),
    );
    deny.winners = winners;
    if !hook.allows(DecisionKind::Deny) {
        deny.kind = DecisionKind::Allow;
    }
    deny
}

fn approver_word(t: ApproverType) -> &'static str {
    match t {
        ApproverType::Human => "human",
        ApproverType::Agent => "agent",
        ApproverType::Service => "service",
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
    let mut codes = Vec::with_capacity(winners.len());
    // Borrowed from the templates: the text is built once, below.
    let mut reasons: SmallVec<[Cow<'_, str>; 2]> = SmallVec::new();
    let mut refs = Vec::with_capacity(winners.len());
    for (rule, t) in winners {
        if let Some(c) = &t.code {
            push_unique(&mut codes, c);
        }
        let reason = match (&t.reasoning, rule) {
            (Some(r), _) => Some(Cow::Borrowed(&**r)),
            (None, Some(rule)) => Some(Cow::Owned(format!("rule {} fired", rule.name))),
            (None, None) => None,
        };
        if let Some(reason) = reason.filter(|r| !reasons.contains(r)) {
            reasons.push(reason);
        }
        if let Some(rule) = rule {
            refs.push((rule.module.clone(), rule.name.clone()));
        }
    }
    let reasoning = match reasons.len() {
        0 => match kind {
            DecisionKind::Allow if refs.is_empty() => {
                Some("allowed by the policy's default".to_string())
            }
            _ => Some(format!("{} by the policy", kind.past_tense())),
        },
        1 => reasons.pop().map(Cow::into_owned),
        _ => Some(reasons.join("; ")),
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
        approval_expires_ms: winners.iter().filter_map(|(_, t)| t.expires_ms).min(),
        approval: None,
        effect_outcome: None,
        unverified_claims: Vec::new(),
        redacted: Vec::new(),
        warnings: Vec::new(),
    };
    let first = winners[0].1;
    match kind {
        DecisionKind::Ask => {
            let (akind, id) = first
                .approver
                .clone()
                .unwrap_or((ApproverKind::Human, "default".into()));
            d.ask = Some(Box::new(AskDetails {
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
                intent_extension: intent_extension(winners, env.payload),
            }));
        }
        DecisionKind::Defer => d.defer = Some(defer_details(winners)),
        DecisionKind::Modify => match merge_modifications(winners, env, budget)? {
            // A `redact each` that chose nothing changes nothing: the step goes ahead as it is.
            Ok(m) if is_unchanged(&m) => {
                d.kind = DecisionKind::Allow;
                d.reasoning = Some(format!(
                    "{}; nothing to change",
                    d.reasoning.as_deref().unwrap_or("modified by the policy")
                ));
            }
            Ok(m) => d.modifications = Some(Box::new(m)),
            Err(why) => return Ok(conflict_deny(d.winners, hook, &why)),
        },
        DecisionKind::Allow | DecisionKind::Deny => {}
    }
    Ok(d)
}

/// The capability an ask offers to add to the Intent (`extend intent`): the called tool (and
/// operation), when a winner asks for it.
fn intent_extension(
    winners: &[(Option<&CompiledRule>, &DecisionTemplate)],
    payload: &Value,
) -> Option<IntentExtension> {
    let scope = winners.iter().find_map(|(_, t)| t.extend)?;
    let tool = crate::acs::fields::tool_name(payload)?;
    let mut cap = Map::new();
    cap.insert("tool".into(), Value::String(tool.into()));
    if let Some(op) = payload.get("operation").and_then(Value::as_str) {
        cap.insert("operation".into(), Value::String(op.into()));
    }
    Some(IntentExtension {
        capabilities: vec![Value::Object(cap)],
        scope: match scope {
            ExtendScope::Session => ExtensionScope::Session,
            ExtendScope::ThisRequest => ExtensionScope::ThisRequest,
        },
        provenance: None,
    })
}

/// What a deferral carries, from its winners (the first one's reason and method).
fn defer_details(winners: &[(Option<&CompiledRule>, &DecisionTemplate)]) -> DeferDetails {
    let first = winners[0].1;
    // Any winner that falls back to deny makes the whole deferral fall back to deny.
    let deny = winners
        .iter()
        .any(|(_, t)| t.on_timeout != Some(DecisionKind::Ask));
    DeferDetails {
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
    }
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
                    if let Err(why) = add_redaction(&mut m, pointer, replacement) {
                        return Ok(Err(why));
                    }
                }
                ModTemplate::RedactEach {
                    base,
                    select,
                    replacement,
                } => {
                    for pointer in each_pointers(env, base, select, budget)? {
                        if let Err(why) = add_redaction(&mut m, &pointer, replacement) {
                            return Ok(Err(why));
                        }
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
    if is_unchanged(&m) {
        return Ok(Ok(m));
    }
    Ok(m.validate().map(|()| m).map_err(|e| e.to_string()))
}

/// Modifications that change nothing (every `redact each` chose nothing).
fn is_unchanged(m: &Modifications) -> bool {
    m.redactions.is_empty() && m.parameter_overrides.is_empty() && m.modified_content.is_none()
}

/// Adds one redaction; the same place redacted two ways is a conflict.
fn add_redaction(m: &mut Modifications, pointer: &str, replacement: &str) -> Result<(), String> {
    match m.redactions.iter().find(|x| x.path == pointer) {
        Some(x) if x.replacement.as_deref() != Some(replacement) => {
            Err(format!("two different redactions of {pointer}"))
        }
        Some(_) => Ok(()),
        None => {
            m.redactions.push(Redaction {
                path: pointer.to_string(),
                replacement: Some(replacement.to_string()),
            });
            Ok(())
        }
    }
}

/// The places a `redact each` chooses: `select` gives the keys of the chosen elements of the
/// collection at `base`; each place is `base/KEY`, and its `value` when the element is a
/// carrier (`{value, provenance}`: an argument, an output). An argument holding one value
/// rather than a list is its own single element.
fn each_pointers(
    env: &Env<'_>,
    base: &str,
    select: &Code,
    budget: &mut Budget,
) -> Result<Vec<String>, VmError> {
    let keys = match vm::run(env, select, budget, None)? {
        vm::Val::List(keys) => keys,
        _ => return Ok(Vec::new()),
    };
    let Some(collection) = env.payload.pointer(base) else {
        return Ok(Vec::new());
    };
    if !collection.is_array() && !collection.is_object() {
        return Ok(if keys.is_empty() {
            Vec::new()
        } else {
            vec![base.to_string()]
        });
    }
    let mut out = Vec::new();
    for key in keys.iter() {
        let segment = match key {
            vm::Val::Str(name) => name.replace('~', "~0").replace('/', "~1"),
            vm::Val::Num(n) if *n >= 0.0 && n.fract() == 0.0 => (*n as u64).to_string(),
            _ => continue,
        };
        let mut pointer = format!("{base}/{segment}");
        if env
            .payload
            .pointer(&pointer)
            .is_some_and(|v| v.get("value").is_some())
        {
            pointer.push_str("/value");
        }
        out.push(pointer);
    }
    Ok(out)
}

/// A tool call's payload with modifications applied: each redaction's place (a JSON pointer
/// into the payload) holds its replacement, each overridden argument its new value, and a
/// replaced content is kept under `modified_content`. An approval binds to the action of this
/// payload (docs/language.md §9). A redaction whose place is absent changes nothing.
pub(crate) fn modified_payload(payload: &Value, m: &Modifications) -> Value {
    let mut p = payload.clone();
    for r in &m.redactions {
        if let Some(at) = p.pointer_mut(&r.path) {
            *at = Value::String(r.effective_replacement().to_string());
        }
    }
    if !m.parameter_overrides.is_empty() {
        if let Some(obj) = p.as_object_mut() {
            let args = obj
                .entry("arguments")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(args) = args.as_object_mut() {
                for (name, v) in &m.parameter_overrides {
                    match args.get_mut(name) {
                        Some(Value::Object(a)) => {
                            a.insert("value".into(), v.clone());
                        }
                        _ => {
                            args.insert(name.clone(), serde_json::json!({ "value": v }));
                        }
                    }
                }
            }
        }
    }
    if let (Some(text), Some(obj)) = (&m.modified_content, p.as_object_mut()) {
        obj.insert("modified_content".into(), Value::String(text.clone()));
    }
    p
}

/// The places the `modify` rules among `fired` redact (their static `redact` places), each
/// once: what [`Decision::redacted`] holds.
pub(crate) fn fired_redactions(
    program: &Program,
    fired: &[(u32, Option<DecisionTemplate>)],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Result<Vec<String>, VmError> {
    let mut out: Vec<String> = Vec::new();
    for (i, t) in fired {
        let Some(t) = t
            .as_ref()
            .or_else(|| program.rules.get(*i as usize).map(|r| &r.decision))
        else {
            continue;
        };
        for m in t
            .modifications
            .iter()
            .filter(|_| t.kind == DecisionKind::Modify)
        {
            let places = match m {
                ModTemplate::Redact { pointer, .. } => vec![pointer.clone()],
                ModTemplate::RedactEach { base, select, .. } => {
                    each_pointers(env, base, select, budget)?
                }
                ModTemplate::Override { .. } | ModTemplate::Replace { .. } => Vec::new(),
            };
            for p in places {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    Ok(out)
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
