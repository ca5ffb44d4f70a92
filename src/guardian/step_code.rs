//! The policy code a step runs besides its rules, for what the session stores: the labels a
//! provenance object earns (`label … when …`), which history counters a step that goes ahead
//! adds to and under which keys, and a tool call's effect keys.
//!
//! Owns: running that code against a draft and handing `state` the results (`state` stores and
//! transacts them, and never runs policy code). `engine` calls it in the step's sequence.
//! Must not know: the rules, their combination, the journal.

use std::sync::Arc;

use serde_json::Value;

use crate::compile::{Code, Program};
use crate::state::{Draft, Event, SessionState};
use crate::vm::{self, Budget, Env, VmError};

/// The labels a provenance object earns by itself under the policy's label conditions
/// ([`crate::state::OwnLabels`]). Each node's labels get a budget of their own: taking content
/// in costs what the (size-capped) payload costs and never eats the rules' budget. `None`
/// when a condition fails or runs out of budget.
pub(crate) fn own_labels(program: &Program, draft: &Draft<'_>, prov: &Value) -> Option<u64> {
    let env = Env {
        program,
        payload: prov,
        metadata: &Value::Null,
        state: draft,
        rego_cache: None,
    };
    let mut budget = Budget::new(program.budget.max(1));
    let mut bits = 0u64;
    for l in &program.labels {
        if let Some(code) = &l.code {
            if vm::run(&env, code, &mut budget, None).ok()?.truth() == Some(true) {
                bits |= 1u64 << l.bit;
            }
        }
    }
    Some(bits)
}

/// The labels content of unknown lineage gets: what an `external` origin would earn.
pub(crate) fn unknown_labels(program: &Program) -> u64 {
    let prov = serde_json::json!({"provenance_id": "", "origin": "external"});
    let state = SessionState::default();
    own_labels(program, &Draft::new(&state, own_labels), &prov).unwrap_or(u64::MAX)
}

/// Computes the effect keys of a toolCallRequest (one VM run per effect declared for its tool)
/// and hands them to the draft, for `effect_state` and [`Draft::record_effects`].
pub(crate) fn effect_keys(
    program: &Program,
    draft: &mut Draft<'_>,
    ev: &Event<'_>,
    budget: &mut Budget,
) -> Result<(), VmError> {
    if ev.method != "steps/toolCallRequest" || program.effects.is_empty() {
        return Ok(());
    }
    let tool = ev
        .payload
        .get("tool")
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str);
    let Some(tool) = tool else { return Ok(()) };
    let mut keys = Vec::new();
    {
        let env = Env {
            program,
            payload: ev.payload,
            metadata: ev.metadata,
            state: &*draft,
            rego_cache: None,
        };
        for (i, spec) in program.effects.iter().enumerate() {
            if &*spec.tool != tool {
                continue;
            }
            let v = vm::run(&env, &spec.key, budget, None)?;
            // A key part that is absent leaves the call without this effect identity.
            let Some(Value::Array(parts)) = v.to_json() else {
                continue;
            };
            if parts.len() != spec.parts {
                continue;
            }
            let key = crate::acs::jcs::canonicalize(&serde_json::json!([&*spec.name, parts]));
            keys.push((
                i as u32,
                Arc::from(key.as_str()),
                spec.not_executed_on_error,
            ));
        }
    }
    draft.set_effect_keys(keys);
    Ok(())
}

/// For a step that goes ahead: which history counters it adds to, and under which keys (run
/// against the draft, so filters see the step's own content), handed to the draft.
pub(crate) fn history_updates(
    program: &Program,
    draft: &mut Draft<'_>,
    ev: &Event<'_>,
    budget: &mut Budget,
) -> Result<(), VmError> {
    let Some(ids) = program.history_by_hook.get(ev.method) else {
        return Ok(());
    };
    let mut updates: Vec<(u32, Option<String>)> = Vec::new();
    {
        let env = Env {
            program,
            payload: ev.payload,
            metadata: ev.metadata,
            state: &*draft,
            rego_cache: None,
        };
        for &id in ids {
            let spec = &program.history[id as usize];
            if let Some(filter) = &spec.filter {
                if vm::run(&env, filter, budget, None)?.truth() != Some(true) {
                    continue;
                }
            }
            let key = match spec.key_past.as_slice() {
                [] => None,
                [one] => match key_of(&env, one, budget)? {
                    Some(k) => Some(k),
                    None => continue,
                },
                parts => {
                    let mut vals = Vec::new();
                    for p in parts {
                        match vm::run(&env, p, budget, None)?.to_json() {
                            Some(v) => vals.push(v),
                            None => break,
                        }
                    }
                    if vals.len() != parts.len() {
                        continue;
                    }
                    Some(crate::acs::jcs::canonicalize(&Value::Array(vals)))
                }
            };
            updates.push((id, key));
        }
    }
    draft.set_history_updates(updates);
    Ok(())
}

fn key_of(env: &Env<'_>, code: &Code, budget: &mut Budget) -> Result<Option<String>, VmError> {
    Ok(vm::run(env, code, budget, None)?.key_string())
}
