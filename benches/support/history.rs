//! Deterministic session histories for the benchmarks: H events of a plausible agent session
//! (turns of user message, tool call, tool result, agent response), with untrusted content
//! either in the latest turns (`Taint::Recent`) or only at the very start (`Taint::Early`).

#![allow(dead_code)]

use serde_json::{json, Value};
use warden::acs::{envelope, ids};

pub const SESSION: &str = "5e55e55e-0000-4000-8000-00000000be7c";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Taint {
    /// Untrusted tool output in every turn, so the final consequential call is denied.
    Recent,
    /// Untrusted content only in the first turn, so the final call is allowed.
    Early,
}

/// One request envelope.
pub fn envelope(n: u64, method: &str, turn: u64, payload: Value) -> Value {
    envelope::request(
        n,
        method,
        &ids::counter(0, n),
        // The clock wraps each day (2026-12-01, hour n / 3600 % 24).
        &format!(
            "2026-12-01T{:02}:{:02}:{:02}Z",
            (n / 3600) % 24,
            (n / 60) % 60,
            n % 60
        ),
        json!({"agent_id": "bench", "session_id": SESSION, "turn_id": format!("t{turn}")}),
        payload,
    )
}

fn prov(id: u64, origin: &str, parents: &[u64]) -> Value {
    let mut p = json!({"provenance_id": format!("p{id}"), "origin": origin});
    if !parents.is_empty() {
        p["derived_from"] = json!(parents.iter().map(|x| format!("p{x}")).collect::<Vec<_>>());
    }
    p
}

/// The history: `h` envelopes, five per turn.
pub fn history(h: u64, taint: Taint) -> Vec<Value> {
    let mut out = Vec::with_capacity(h as usize);
    let mut n = 0u64;
    while n < h {
        let turn = n / 5 + 1;
        let base = n;
        let untrusted = match taint {
            Taint::Recent => true,
            Taint::Early => turn == 1,
        };
        let kind = n % 5;
        let ev = match kind {
            0 => envelope(
                n,
                "steps/turnStart",
                turn,
                json!({"turn_id": format!("t{turn}")}),
            ),
            1 => envelope(
                n,
                "steps/userMessage",
                turn,
                json!({"content": [{"type": "text", "value": USER_SAYS, "provenance": prov(base, "user_input", &[])}]}),
            ),
            2 => envelope(
                n,
                "steps/toolCallRequest",
                turn,
                json!({"tool": {"name": "search"}, "arguments": {"q": {"value": "rates", "provenance": prov(base, "agent_generated", &[base - 1])}}}),
            ),
            3 => {
                let origin = if untrusted {
                    "tool_output"
                } else {
                    "user_input"
                };
                envelope(
                    n,
                    "steps/toolCallResult",
                    turn,
                    json!({"tool": {"name": "search"}, "exit_status": "success", "outputs": [{"value": "result text", "provenance": prov(base, origin, &[base - 1])}]}),
                )
            }
            _ => envelope(
                n,
                "steps/agentResponse",
                turn,
                json!({"content": [{"type": "text", "value": "here you go", "provenance": prov(base, "agent_generated", &[base - 1])}]}),
            ),
        };
        out.push(ev);
        n += 1;
    }
    out
}

/// What the user writes in every turn: it names the address the probe sends to, so the probe's
/// claim that the user wrote it holds (the claim check finds it in the user's latest words).
pub const USER_SAYS: &str = "look this up and mail it to a@example.com";

/// The decision being measured: a consequential call in a fresh turn after the history, to an
/// address the user wrote (and the call claims so).
pub fn probe(h: u64) -> Value {
    let turn = h / 5 + 2;
    envelope(
        h + 1,
        "steps/toolCallRequest",
        turn,
        json!({"tool": {"name": "send_email"}, "arguments": {"to": {"value": "a@example.com", "provenance": prov(h + 1, "user_input", &[])}}}),
    )
}

/// The probe with a claim that does not hold: the call says the user wrote an address the user
/// never said, so the claim is read as none (`unverified_claims`) and the address's sources are
/// inferred, on a copy of the payload.
pub fn probe_unsaid(h: u64) -> Value {
    let turn = h / 5 + 2;
    envelope(
        h + 1,
        "steps/toolCallRequest",
        turn,
        json!({"tool": {"name": "send_email"}, "arguments": {"to": {"value": "b@example.org", "provenance": prov(h + 1, "user_input", &[])}}}),
    )
}
