//! One step of a session: the single sequence that deciding an event, replaying a journal and
//! restoring a session all run, so the three cannot drift apart.
//!
//! The sequence, on a draft over the session state:
//! 1. take the event's content in (`Draft::begin_event`: turns, Intent, provenance nodes and
//!    their labels, the inference index) — this cannot fail;
//! 2. when deciding: the call's tool declaration, a refused Intent, then the effect keys
//!    (`step_code::effect_keys`) and the rules and their combination; when re-applying a step
//!    that went ahead, only the effect keys;
//! 3. for a step that goes ahead: the history counters (`step_code::history_updates`) and
//!    effect states it moves;
//! 4. commit the draft's changes, as one pure function (`commit_for`) of what the step came
//!    to chooses ([`Commit`]): all of them when the step goes ahead, only the taint (the
//!    content with its labels) when the decision failed or the Intent was refused — a
//!    failure never drops taint — and nothing when the step does not go ahead; then the
//!    decision's approval note, unless only the taint was committed.
//!
//! Owns: that sequence, the rule loop and the reason codes it answers with on its own
//! (`warden.bad_arguments`, `warden.bad_intent`); with `step_code`, every run of policy code
//! in a step (`state` only stores and transacts what it is handed). Must not know:
//! transports, the journal's storage, envelopes (the caller hands it a decoded [`Event`]).

use std::sync::Arc;

use serde_json::Value;

use super::{decide, explain, step_code, Decision, RuleTrace};
use crate::acs::DecisionKind;
use crate::acs::{fields, payload};
use crate::compile::{self, Program};
use crate::state::{Draft, Event, SessionState};
use crate::vm::{self, Budget, Env, VmError};

/// The reason code of a call that does not match its tool's declaration.
pub const BAD_ARGUMENTS: &str = "warden.bad_arguments";

/// The reason code of a refused Intent: a capability Warden cannot read grants nothing.
pub const BAD_INTENT: &str = "warden.bad_intent";

/// What a step is run for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Decide it with the rules (and keep an explain trace when asked).
    Decide { explain: bool },
    /// Decide it, and mask the call's arguments for a decision-log record.
    DecideLogged { explain: bool },
    /// Re-apply a step that went ahead (a journal, a restore): the rules only decide, so they
    /// do not run.
    Reapply,
    /// Take in the content of a step whose decision failed, with its labels: nothing else.
    Taint,
}

/// What a step commits of its draft: chosen by [`commit_for`] from what the step's policy
/// code came to, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// Every change: the step goes ahead (or a step that went ahead is re-applied).
    All,
    /// Only the taint: the content that entered, with its labels. A failure never drops it,
    /// and a refused Intent stays refused.
    TaintOnly,
    /// Nothing: the step does not go ahead (its changes are not even built).
    Nothing,
}

/// What the step's policy code came to, per mode.
enum Outcome {
    /// Deciding: the decision (its history and effect moves made, when it goes ahead). Boxed
    /// from where it is made to the caller: it is 392 bytes and moves through the step about
    /// six times, which cost more than the one allocation.
    Decided(Box<Decision>),
    /// Re-applying a step that went ahead: its effect keys, history and effect moves made.
    Reapplied,
    /// Policy code failed; deciding keeps the error to answer with.
    Failed(Option<VmError>),
    /// Taking in a failed step's content: nothing ran.
    Tainted,
}

/// The one choice of what a step commits, from its outcome and whether the session's Intent
/// was refused in it.
fn commit_for(outcome: &Outcome, intent_refused: bool) -> Commit {
    match outcome {
        Outcome::Decided(d) if d.proceeds() => Commit::All,
        // A refused Intent stays refused even though the step does not go ahead.
        Outcome::Decided(_) if intent_refused => Commit::TaintOnly,
        Outcome::Decided(_) => Commit::Nothing,
        Outcome::Reapplied => Commit::All,
        // The step's content enters with its labels whatever happened (fail closed).
        Outcome::Failed(_) | Outcome::Tainted => Commit::TaintOnly,
    }
}

/// What [`run_step`] gives back: the decision when deciding (or the error it failed with),
/// the commit it made, and, when asked, the arguments a decision log shows.
struct Stepped {
    decided: Result<Option<Box<Decision>>, VmError>,
    commit: Commit,
    masked: Option<Value>,
}

/// Decides one event against a session state, and keeps the event's effect on the state only
/// if the step goes ahead (allow or modify). Returns the decision (with its explain trace when
/// `explain`). Public as [`super::Policy::decide_event`].
pub(crate) fn decide_event(
    program: &Program,
    hook: &'static fields::HookSpec,
    state: &mut SessionState,
    ev: &Event<'_>,
    explain: bool,
) -> Result<Decision, VmError> {
    let stepped = run_step(program, hook, state, ev, Mode::Decide { explain });
    stepped
        .decided
        .map(|d| *d.expect("a decided step has a decision"))
}

/// Like [`decide_event`], and also gives the event's tool-call arguments (`{name: value}`) with
/// the values explain traces would mask masked (`redact` labels, `mask` paths), for a decision
/// log; `None` when the event has no arguments. The arguments come back even when the decision
/// failed.
pub(crate) fn decide_event_logged(
    program: &Program,
    hook: &'static fields::HookSpec,
    state: &mut SessionState,
    ev: &Event<'_>,
    explain: bool,
) -> (Result<Decision, VmError>, Option<Value>) {
    let stepped = run_step(program, hook, state, ev, Mode::DecideLogged { explain });
    let d = stepped
        .decided
        .map(|d| *d.expect("a decided step has a decision"));
    (d, stepped.masked)
}

/// Re-applies a step that went ahead to a state: the same draft changes and history
/// counters [`decide_event`] applies, without running the rules (they only decide). Gives
/// what it committed: all of it, or only the taint when the step's effect or history code
/// failed (`None`: no hook has the event's method).
pub(crate) fn reapply_event(
    program: &Program,
    state: &mut SessionState,
    ev: &Event<'_>,
) -> Option<Commit> {
    let hook = fields::hook(ev.method)?;
    Some(run_step(program, hook, state, ev, Mode::Reapply).commit)
}

/// Takes in the content of a step whose decision failed, with the labels it earns (as
/// [`decide_event`] does on a failure), without running the rules. Gives what it committed
/// (`None`: no hook has the event's method).
pub(crate) fn taint_event(
    program: &Program,
    state: &mut SessionState,
    ev: &Event<'_>,
) -> Option<Commit> {
    let hook = fields::hook(ev.method)?;
    Some(run_step(program, hook, state, ev, Mode::Taint).commit)
}

/// The sequence (module docs). The decision is `None` when not deciding.
fn run_step(
    program: &Program,
    hook: &'static fields::HookSpec,
    state: &mut SessionState,
    ev: &Event<'_>,
    mode: Mode,
) -> Stepped {
    let mut budget = Budget::new(program.budget);
    state.ensure_slots(program);
    // The content as it enters: missing provenance completed, unfound claims read as none.
    let mut draft = Draft::new(state, step_code::own_labels);
    let entering = entering_payload(hook, &draft, ev);
    let claims = entering.as_ref().map_or(&[][..], |(_, c)| &c[..]);
    let ev = &Event {
        payload: entering.as_ref().map_or(ev.payload, |(p, _)| p),
        ..*ev
    };
    // Taking the content in cannot fail: its labels have a budget of their own.
    draft.begin_event(program, ev);
    let outcome = match mode {
        Mode::Taint => Outcome::Tainted,
        Mode::Reapply => match step_code::effect_keys(program, &mut draft, ev, &mut budget) {
            Ok(()) => go_ahead(program, &mut draft, ev, &mut budget, Outcome::Reapplied),
            Err(_) => Outcome::Failed(None),
        },
        Mode::Decide { explain } | Mode::DecideLogged { explain } => {
            match decide_in_draft(program, hook, &mut draft, ev, explain, &mut budget) {
                Ok(mut d) => {
                    d.unverified_claims = claims.to_vec();
                    if d.proceeds() {
                        go_ahead(program, &mut draft, ev, &mut budget, Outcome::Decided(d))
                    } else {
                        Outcome::Decided(d)
                    }
                }
                Err(e) => Outcome::Failed(Some(e)),
            }
        }
    };
    let masked = match mode {
        Mode::DecideLogged { .. } => logged_arguments(program, &draft, ev.payload, &outcome),
        _ => None,
    };
    let commit = commit_for(&outcome, draft.intent_refused.is_some());
    match commit {
        Commit::All => {
            let changes = draft.into_changes();
            state.apply(program, changes);
        }
        Commit::TaintOnly => {
            let changes = draft.into_taint_changes();
            state.apply_taint(program, changes);
        }
        Commit::Nothing => {}
    }
    let decided = match outcome {
        Outcome::Decided(d) => {
            // An ask's approval, or the one an approved call uses up, unless only the taint
            // was committed.
            if let (Some(note), false) = (&d.approval, commit == Commit::TaintOnly) {
                state.apply_approval(note);
            }
            Ok(Some(d))
        }
        Outcome::Failed(Some(e)) => Err(e),
        Outcome::Reapplied | Outcome::Failed(None) | Outcome::Tainted => Ok(None),
    };
    Stepped {
        decided,
        commit,
        masked,
    }
}

/// A step that goes ahead moves its history counters and effect states; `done` is what it
/// came to if they move, a failure if its history code fails.
fn go_ahead(
    program: &Program,
    draft: &mut Draft<'_>,
    ev: &Event<'_>,
    budget: &mut Budget,
    done: Outcome,
) -> Outcome {
    if let Err(e) = step_code::history_updates(program, draft, ev, budget) {
        return Outcome::Failed(match done {
            Outcome::Decided(_) => Some(e),
            _ => None,
        });
    }
    let effects = draft.record_effects(program, ev);
    match done {
        Outcome::Decided(mut d) => {
            d.effect_outcome = effects;
            Outcome::Decided(d)
        }
        other => other,
    }
}

/// The arguments a decision-log record shows, masked after deciding (what the decision redacts
/// is masked too). When the decision failed, what the policy's redactions would have chosen is
/// unknown: if the policy redacts anything, every argument value is masked (fail closed).
fn logged_arguments(
    program: &Program,
    draft: &Draft<'_>,
    payload: &Value,
    outcome: &Outcome,
) -> Option<Value> {
    match outcome {
        Outcome::Failed(Some(_)) if program.redacts() => explain::all_masked(payload),
        _ => {
            let redacted = match outcome {
                Outcome::Decided(d) => &d.redacted[..],
                _ => &[][..],
            };
            explain::masked_arguments(program, draft, payload, redacted)
        }
    }
}

/// The payload a step takes in, when it differs from the one that arrived, with the claims
/// that were not found (`SessionState::unverified_claims`): every content item completed with
/// the provenance the platform left out (`acs::payload::complete`), and a claim that the user
/// wrote an item whose text the user never said read as no claim (its origin
/// `agent_generated`; lineage naming only the user's messages dropped), so its sources are
/// inferred like any other value's. Every mode runs
/// this, so a replay and a restore take in exactly what the decision did.
fn entering_payload(
    hook: &'static fields::HookSpec,
    draft: &Draft<'_>,
    ev: &Event<'_>,
) -> Option<(Value, Vec<String>)> {
    let carriers = payload::carriers(hook.method, ev.payload);
    let completed = payload::complete_carriers(hook.method, ev.request_id, ev.payload, &carriers);
    let claims = match &completed {
        Some(p) => draft.unverified_claims(hook.method, p),
        None if hook.method == "steps/toolCallRequest" => draft.unverified_claims_of(&carriers),
        None => Vec::new(),
    };
    if claims.is_empty() {
        return completed.map(|p| (p, claims));
    }
    let mut p = completed.unwrap_or_else(|| ev.payload.clone());
    for ptr in &claims {
        match ptr.strip_suffix("/derived_from") {
            // Lineage naming only the user's words, for a value they never held: dropped, so
            // the value's sources are inferred.
            Some(record) => {
                if let Some(Value::Object(prov)) = p.pointer_mut(record) {
                    prov.remove("derived_from");
                }
            }
            None => {
                if let Some(Value::Object(prov)) = p.pointer_mut(ptr) {
                    prov.insert("origin".into(), Value::String("agent_generated".into()));
                }
            }
        }
    }
    Some((p, claims))
}

/// Deciding a step: its tool declaration and a refused Intent first, then the effect keys,
/// the rules and their combination.
fn decide_in_draft(
    program: &Program,
    hook: &'static fields::HookSpec,
    draft: &mut Draft<'_>,
    ev: &Event<'_>,
    explain: bool,
    budget: &mut Budget,
) -> Result<Box<Decision>, VmError> {
    // A call of a declared tool must match its declaration (docs/language.md §5).
    if hook.method == "steps/toolCallRequest" {
        let tool = fields::tool_name(ev.payload);
        if let Some((name, spec)) = tool.and_then(|t| program.tools.get_key_value(t)) {
            if let Err(why) = spec.check_call(name, ev.payload.get("arguments")) {
                return Ok(Box::new(Decision::simple(
                    DecisionKind::Deny,
                    BAD_ARGUMENTS,
                    why,
                )));
            }
        }
    }
    if let Some(why) = &draft.intent_refused {
        if hook.allows(DecisionKind::Deny) {
            return Ok(Box::new(Decision::simple(
                DecisionKind::Deny,
                BAD_INTENT,
                format!("the session's intent was refused: {why}"),
            )));
        }
    }
    step_code::effect_keys(program, draft, ev, budget)?;
    let tool = fields::tool_name(ev.payload);
    let mut fired = Vec::new();
    let mut traces = Vec::new();
    let rego_cache = vm::RegoCache::default();
    let mut decision = {
        let env = Env {
            program,
            payload: ev.payload,
            metadata: ev.metadata,
            state: draft,
            rego_cache: Some(&rego_cache),
        };
        let mut ids = program.rules_for(hook.method, tool);
        if let Some(method) = ev.wrapped_method {
            let ids = ids.to_mut();
            ids.extend_from_slice(&program.rules_for(method, tool));
            ids.sort_unstable();
            ids.dedup();
        }
        for &id in ids.iter() {
            let rule = &program.rules[id as usize];
            let mut obs = Vec::new();
            let result = vm::run(&env, &rule.code, budget, explain.then_some(&mut obs))
                .map_err(|e| e.in_rule(&rule.qualified))?;
            let truth = result
                .truth_checked("a rule's condition")
                .map_err(|message| VmError::Type {
                    message,
                    span: rule.code.spans.last().copied().unwrap_or_default(),
                    rule: Some(rule.qualified.clone()),
                })?;
            let mut fires = truth == Some(true);
            match (fires, rule.rego_source) {
                (true, Some(source)) => {
                    let messages = rego_messages(rule, env.rego(source, &[], None)?);
                    fires = !messages.is_empty();
                    fired.extend(messages.into_iter().map(|t| (id, Some(t))));
                }
                (true, None) => fired.push((id, None)),
                _ => {}
            }
            if explain {
                traces.push(RuleTrace {
                    rule: format!("{}.{}", rule.module, rule.name),
                    file: rule.file,
                    span: rule.span,
                    fired: fires,
                    observations: obs,
                    masked: Arc::default(),
                });
            }
        }
        let mut d = decide::combine_fired(program, hook, &fired, &env, budget)?;
        d.redacted = decide::fired_redactions(program, &fired, &env, budget)?;
        d
    };
    let secrets = explain::Secrets::of(program, draft, ev.payload)
        .with_redactions(ev.payload, &decision.redacted);
    decision.warnings = result_without_tool(program, hook, ev.payload);
    // An ask on a tool call is bound to the exact action (docs/effects.md).
    if decision.kind == DecisionKind::Ask && ev.method == "steps/toolCallRequest" {
        decision = bind_to_action(draft, ev, decision, &secrets);
    }
    if explain {
        explain::redact(&mut traces, &secrets);
        decision.trace = traces;
    }
    Ok(Box::new(decision))
}

/// A toolCallResult without `tool`: what tests `tool.name` on results cannot match it (a
/// filter silently skipped otherwise), and the answer says which rules and filters those are.
fn result_without_tool(
    program: &Program,
    hook: &'static fields::HookSpec,
    payload: &Value,
) -> Vec<String> {
    if hook.method != "steps/toolCallResult" || payload.get("tool").is_some() {
        return Vec::new();
    }
    let readers = program.result_tool_readers();
    if readers.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "this toolCallResult has no `tool`, so {} cannot match it on `tool.name`; send `tool` \
         with every result (ACS requires it)",
        readers.join(", ")
    )]
}

/// Binds an ask to the action of the call as it would run: with the modifications the ask
/// carries applied (docs/language.md §9), so the approver approves the modified call and the
/// call that consumes the grant is the modified one. The approver is shown the action with
/// every secret masked.
fn bind_to_action(
    draft: &Draft<'_>,
    ev: &Event<'_>,
    decision: Decision,
    secrets: &explain::Secrets,
) -> Decision {
    let modified = decision
        .modifications
        .as_deref()
        .map(|m| decide::modified_payload(ev.payload, m));
    let Some(mut action) =
        crate::state::Action::of(modified.as_ref().unwrap_or(ev.payload), ev.metadata)
    else {
        return decision;
    };
    action.shown = secrets.mask_canonical(&action.canonical);
    let found = draft.find_approval(&action);
    decision.bind_approval(found, &action, ev.request_id, draft.scalars.now_ms)
}

/// The decisions a Rego deny set asks for: one per message. A message is a string (the
/// reasoning; the reason code is the rule's name) or an object whose `code` / `reason_code`
/// and `msg` / `message` / `reason` members give both.
fn rego_messages(
    rule: &compile::CompiledRule,
    set: Option<Value>,
) -> Vec<compile::DecisionTemplate> {
    let items = match set {
        Some(Value::Array(items)) => items,
        Some(Value::Bool(false)) | Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![other],
    };
    items
        .into_iter()
        .map(|m| {
            let mut t = rule.decision.clone();
            let text =
                |v: Option<&Value>| v.and_then(Value::as_str).map(std::sync::Arc::<str>::from);
            match &m {
                Value::String(s) => t.reasoning = Some(s.as_str().into()),
                Value::Object(o) => {
                    if let Some(code) = text(o.get("code").or_else(|| o.get("reason_code"))) {
                        t.code = Some(code);
                    }
                    t.reasoning = text(
                        o.get("msg")
                            .or_else(|| o.get("message"))
                            .or_else(|| o.get("reason")),
                    )
                    .or_else(|| Some(m.to_string().into()));
                }
                other => t.reasoning = Some(other.to_string().into()),
            }
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_step_commits_follows_from_its_outcome_alone() {
        let allow = || Decision::simple(DecisionKind::Allow, "", String::new());
        let deny = || Decision::simple(DecisionKind::Deny, "x", String::new());
        for refused in [false, true] {
            assert_eq!(
                commit_for(&Outcome::Decided(Box::new(allow())), refused),
                Commit::All
            );
            assert_eq!(commit_for(&Outcome::Reapplied, refused), Commit::All);
            assert_eq!(commit_for(&Outcome::Tainted, refused), Commit::TaintOnly);
            assert_eq!(
                commit_for(&Outcome::Failed(None), refused),
                Commit::TaintOnly
            );
        }
        assert_eq!(
            commit_for(&Outcome::Decided(Box::new(deny())), false),
            Commit::Nothing
        );
        assert_eq!(
            commit_for(&Outcome::Decided(Box::new(deny())), true),
            Commit::TaintOnly
        );
    }
}
