//! The policy code a step runs besides its rules, for what the session stores: the labels a
//! provenance object earns (`label … when …`), which history counters a step that goes ahead
//! adds to and under which keys, and a tool call's effect keys.
//!
//! Owns: running that code against a draft and handing `state` the results (`state` stores and
//! transacts them, and never runs policy code). `engine` calls it in the step's sequence.
//! Must not know: the rules, their combination, the journal.

use std::sync::Arc;

use serde_json::Value;

use crate::acs::fields;
use crate::compile::{Code, Program};
use crate::state::{Draft, Event, SessionState};
use crate::vm::{self, Budget, Env, VmError};

/// The labels a provenance object earns by itself under the policy's label conditions
/// ([`crate::state::OwnLabels`]). Each node's labels get a budget of their own: taking content
/// in costs what the (size-capped) payload costs and never eats the rules' budget. `None`
/// when a condition fails or runs out of budget.
pub(crate) fn own_labels(program: &Program, draft: &Draft<'_>, prov: &Value) -> Option<u64> {
    if let Some(table) = &program.labels_by_origin {
        // A known origin: the conditions' value for it, computed once per policy. Any other
        // record (no origin, an unknown one, a non-string) runs the conditions as written.
        let bit = fields::member(prov, "origin")
            .and_then(Value::as_str)
            .map_or(0, fields::origin_bit);
        if bit != 0 {
            return Some(table[bit.trailing_zeros() as usize]);
        }
    }
    conditions_on(program, draft, prov)
}

/// Runs the label conditions on `prov`.
fn conditions_on(program: &Program, draft: &Draft<'_>, prov: &Value) -> Option<u64> {
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

/// [`Program::labels_by_origin`]: each known origin's own labels, when the conditions read
/// nothing but the origin and each finishes on a record of that origin alone.
pub(crate) fn labels_by_origin(program: &Program) -> Option<[u64; 8]> {
    if !program.labels_read_only_origin() {
        return None;
    }
    let state = SessionState::default();
    let draft = Draft::new(&state, own_labels);
    let mut table = [0u64; 8];
    for (slot, origin) in table.iter_mut().zip(fields::ORIGINS) {
        let prov = serde_json::json!({"provenance_id": "", "origin": origin});
        *slot = conditions_on(program, &draft, &prov)?;
    }
    Some(table)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guardian::Policy;

    fn program(labels: &str) -> Arc<Program> {
        let text = format!("package p\n{labels}\ndefault allow\n");
        Policy::from_source("p.ward", &text)
            .unwrap_or_else(|d| panic!("{:?}", d.items))
            .program()
            .clone()
    }

    #[test]
    fn conditions_on_origin_alone_become_a_table_that_agrees_with_running_them() {
        let p = program(
            "label untrusted when origin in {tool_output, retrieved} or origin == external\n\
             label mine when not (origin != user_input)",
        );
        let table = p.labels_by_origin.expect("origin-only conditions fold");
        let state = SessionState::default();
        let draft = Draft::new(&state, own_labels);
        for (i, origin) in fields::ORIGINS.iter().enumerate() {
            // With other members beside the origin, as real records have them.
            let prov = serde_json::json!({"provenance_id": "x", "origin": origin,
                                          "source": "web", "derived_from": ["y"]});
            assert_eq!(Some(table[i]), conditions_on(&p, &draft, &prov), "{origin}");
            assert_eq!(own_labels(&p, &draft, &prov), Some(table[i]), "{origin}");
        }
        let untrusted = 1u64 << p.label_bit("untrusted").unwrap();
        let mine = 1u64 << p.label_bit("mine").unwrap();
        assert_eq!(
            table[fields::origin_bit("tool_output").trailing_zeros() as usize],
            untrusted
        );
        assert_eq!(
            table[fields::origin_bit("user_input").trailing_zeros() as usize],
            mine
        );
        // A record whose origin is not a known one runs the conditions as written.
        for odd in [
            serde_json::json!({"provenance_id": "x", "origin": "telepathy"}),
            serde_json::json!({"provenance_id": "x", "origin": 3}),
            serde_json::json!({"provenance_id": "x"}),
        ] {
            assert_eq!(
                own_labels(&p, &draft, &odd),
                conditions_on(&p, &draft, &odd),
                "{odd}"
            );
        }
    }

    #[test]
    fn conditions_reading_more_than_the_origin_are_run_each_time() {
        for label in [
            "label web when source == \"web\"",
            "label deep when len(derived_from) > 0",
            "label both when origin == tool_output and starts_with(source, \"web\")",
        ] {
            let p = program(label);
            assert!(!p.labels_read_only_origin(), "{label}");
            assert_eq!(p.labels_by_origin, None, "{label}");
        }
    }
}
