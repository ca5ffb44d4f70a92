//! Explanations for people: one short paragraph per decided call, for `warden replay --format
//! text` and `warden eval --trace`. Owns the wording; the facts come from the result's explain
//! trace (`policy_data.warden`, docs/explain.md), whose values are already masked.

use serde_json::Value;

/// The paragraph for one answered request: the decision and its codes and reasoning; the rules
/// that fired, each with `file:line`; the outermost checks written in the rules whose decision
/// won; the labels those checks saw. `number` is the request's line in the trace; `request` the parsed line
/// (for the hook and the tool), `result` the answer's `result`.
pub fn paragraph(number: usize, request: &Value, result: &Value) -> String {
    let mut out = headline(number, request, result);
    let warden = &result["policy_data"]["warden"];
    let rules: Vec<&Value> = warden["rules"].as_array().into_iter().flatten().collect();
    let fired: Vec<String> = rules
        .iter()
        .filter(|r| r["fired"] == true)
        .map(|r| format!("{}{}", str_of(&r["rule"]), place(r)))
        .collect();
    if !fired.is_empty() {
        out.push_str(&format!("  fired: {}\n", fired.join(", ")));
    }
    let winners = winners(result);
    let deciding: Vec<&Value> = rules
        .iter()
        .filter(|r| r["fired"] == true && winners.iter().any(|w| w == str_of(&r["rule"])))
        .flat_map(|r| deciding_checks(r))
        .collect();
    if !deciding.is_empty() {
        let checks: Vec<String> = deciding.iter().map(|c| check(c)).collect();
        out.push_str(&format!("  because: {}\n", checks.join("; ")));
    }
    let labels = labels(&deciding);
    if !labels.is_empty() {
        out.push_str(&format!("  labels: {}\n", labels.join(", ")));
    }
    let warnings = result["policy_data"]["warnings"].as_array();
    for w in warnings.into_iter().flatten().filter_map(Value::as_str) {
        out.push_str(&format!("  warning: {w}\n"));
    }
    out
}

/// `#N hook tool: decision codes: reasoning`.
fn headline(number: usize, request: &Value, result: &Value) -> String {
    let method = str_of(&request["method"]);
    let hook = method.rsplit('/').next().unwrap_or(method);
    let tool = request
        .pointer("/params/payload/tool/name")
        .and_then(Value::as_str)
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    let codes: Vec<&str> = result["reason_codes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut line = format!("#{number} {hook}{tool}: {}", str_of(&result["decision"]));
    if !codes.is_empty() {
        line.push_str(&format!(" ({})", codes.join(", ")));
    }
    if let Some(why) = result["reasoning"].as_str().filter(|s| !s.is_empty()) {
        line.push_str(&format!(": {why}"));
    }
    line.push('\n');
    line
}

/// The checks that decided a rule: those written in the rule itself (not inside the
/// predicates it calls), and of those only the outermost (a check whose text is part of a later
/// one's, such as a comparison's operand, is left out).
fn deciding_checks(rule: &Value) -> Vec<&Value> {
    let file = rule["file"].as_str().unwrap_or("");
    let first = rule["line"].as_u64().unwrap_or(0);
    let lines = rule["text"]
        .as_str()
        .map_or(1, |t| t.lines().count() as u64);
    let own: Vec<&Value> = rule["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            let at = str_of(&c["at"]);
            let mut parts = at.rsplitn(3, ':');
            let (_, line, f) = (parts.next(), parts.next(), parts.next());
            let line = line.and_then(|l| l.parse::<u64>().ok()).unwrap_or(0);
            f == Some(file) && line >= first && line < first + lines
        })
        .collect();
    own.iter()
        .enumerate()
        .filter(|(i, c)| {
            let text = str_of(&c["text"]);
            !own[i + 1..]
                .iter()
                .any(|later| str_of(&later["text"]).contains(text))
        })
        .map(|(_, c)| *c)
        .collect()
}

/// ` (file:line)` of an explained rule, when its sources were at hand.
fn place(rule: &Value) -> String {
    match (rule["file"].as_str(), rule["line"].as_u64()) {
        (Some(f), Some(l)) => format!(" ({f}:{l})"),
        _ => String::new(),
    }
}

/// The rules whose decision won, as `module.rule` (the result's `policy_references`).
fn winners(result: &Value) -> Vec<String> {
    result["policy_references"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("{}.{}", str_of(&r["policy_name"]), str_of(&r["rule_id"])))
        .collect()
}

/// What a check of an explain trace came to: the value it returned, or its truth, or
/// `undefined`.
pub(crate) fn check_outcome(c: &Value) -> String {
    c.get("returned")
        .or_else(|| c.get("result"))
        .filter(|x| !x.is_null())
        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
        .unwrap_or_else(|| "undefined".into())
}

/// One check: `text → outcome [values]`.
fn check(c: &Value) -> String {
    let outcome = check_outcome(c);
    let values: Vec<String> = c["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(short)
        .collect();
    format!(
        "{} → {} [{}]",
        str_of(&c["text"]),
        short(&outcome),
        values.join(", ")
    )
}

/// The longest value a paragraph shows, in characters.
const SHORT: usize = 60;

/// A value cut to [`SHORT`] characters, ending `…` when cut.
fn short(v: &str) -> String {
    if v.chars().count() <= SHORT {
        return v.to_string();
    }
    let mut s: String = v.chars().take(SHORT).collect();
    s.push('…');
    s
}

/// The labels the checks' operands carry, each once, in the order first seen.
fn labels(checks: &[&Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let all = checks
        .iter()
        .flat_map(|c| c["labels"].as_array().into_iter().flatten())
        .flat_map(|per_operand| per_operand.as_array().into_iter().flatten())
        .filter_map(Value::as_str);
    for l in all {
        if !out.iter().any(|x| x == l) {
            out.push(l.to_string());
        }
    }
    out
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}
