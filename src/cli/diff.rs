//! `warden diff OLD NEW TRACE…`: replays recorded traffic through two policies and reports the
//! decisions that change, grouped by the rule whose firing changed — what a team runs before
//! rolling a policy change out. Owns the comparison and its report; deciding is the
//! Guardian's, reading traces is line by line as `warden replay` does.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use crate::guardian::{self, Guardian, Policy, RuleTrace};

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The policy in use (`@default`: the embedded default policy)
    old: PathBuf,
    /// The policy to roll out (`@default`: the embedded default policy)
    new: PathBuf,
    /// Recorded traces (one JSON-RPC request per line), each replayed as `warden replay` does
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    format: DiffFormat,
    /// Examples shown per group (text output)
    #[arg(long, default_value_t = 3)]
    examples: usize,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DiffFormat {
    Text,
    Json,
}

/// One request whose decision changed.
struct Change {
    trace: String,
    line: usize,
    method: String,
    tool: Option<String>,
    old: Value,
    new: Value,
}

fn load(path: &Path) -> Result<Policy, String> {
    if path.as_os_str() == "@default" {
        return Ok(Policy::embedded_default());
    }
    Policy::load(path).map_err(|d| {
        format!(
            "{}{}: the policy has errors",
            d.render(false),
            path.display()
        )
    })
}

fn guardian(policy: Policy) -> Guardian {
    Guardian::with_options(
        policy,
        guardian::Options {
            // Traces of which rules fired are what the report groups by.
            explain: true,
            ..guardian::Options::default()
        },
    )
}

/// What is compared: the decision word (or the error code) and the reason codes.
fn outcome(r: &Value) -> Value {
    match r.get("result") {
        Some(res) => json!({"decision": res["decision"], "reason_codes": res["reason_codes"]}),
        None => json!({"error": r["error"]["code"]}),
    }
}

fn fired(traces: &[RuleTrace]) -> Vec<String> {
    traces
        .iter()
        .filter(|t| t.fired)
        .map(|t| t.rule.clone())
        .collect()
}

fn blocks(o: &Value) -> bool {
    matches!(
        o["decision"].as_str(),
        Some("deny" | "ask" | "defer") | None
    )
}

pub fn run(a: DiffArgs) -> i32 {
    let (old, new) = match (load(&a.old), load(&a.new)) {
        (Ok(o), Ok(n)) => (o, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let mut requests = 0usize;
    // (rule, "now fires" | "no longer fires") → the changes it explains.
    let mut groups: BTreeMap<(String, &'static str), Vec<usize>> = BTreeMap::new();
    let mut changes: Vec<Change> = Vec::new();
    for trace in &a.traces {
        let file = match std::fs::File::open(trace) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("warden diff: {}: {e}", trace.display());
                return 2;
            }
        };
        // A fresh pair of Guardians per trace: a trace is its own run of sessions.
        let (g_old, g_new) = (guardian(old.clone()), guardian(new.clone()));
        for (i, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("warden diff: {}: {e}", trace.display());
                    return 2;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            requests += 1;
            let (r_old, t_old) = g_old.handle_traced(&line);
            let (r_new, t_new) = g_new.handle_traced(&line);
            let json =
                |r: &crate::acs::envelope::Response| serde_json::to_value(r).unwrap_or(Value::Null);
            let (r_old, r_new) = (json(&r_old), json(&r_new));
            let (o_old, o_new) = (outcome(&r_old), outcome(&r_new));
            if o_old == o_new {
                continue;
            }
            let request: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            let (f_old, f_new) = (fired(&t_old), fired(&t_new));
            let index = changes.len();
            let mut explained = false;
            for rule in f_new.iter().filter(|r| !f_old.contains(r)) {
                groups
                    .entry((rule.clone(), "now fires"))
                    .or_default()
                    .push(index);
                explained = true;
            }
            for rule in f_old.iter().filter(|r| !f_new.contains(r)) {
                groups
                    .entry((rule.clone(), "no longer fires"))
                    .or_default()
                    .push(index);
                explained = true;
            }
            if !explained {
                // The same rules fired and decided differently (a changed reason or
                // decision), or no rule fired and the default changed.
                let key = match f_new.first() {
                    Some(rule) => (rule.clone(), "decides differently"),
                    None => ("(default)".to_string(), "decides differently"),
                };
                groups.entry(key).or_default().push(index);
            }
            changes.push(Change {
                trace: trace.display().to_string(),
                line: i + 1,
                method: request["method"].as_str().unwrap_or("?").to_string(),
                tool: request
                    .pointer("/params/payload/tool/name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                old: o_old,
                new: o_new,
            });
        }
    }
    let newly_blocked = changes
        .iter()
        .filter(|c| blocks(&c.new) && !blocks(&c.old))
        .count();
    let newly_allowed = changes
        .iter()
        .filter(|c| !blocks(&c.new) && blocks(&c.old))
        .count();
    let change_json = |c: &Change| {
        json!({"trace": c.trace, "line": c.line, "method": c.method, "tool": c.tool,
               "old": c.old, "new": c.new})
    };
    match a.format {
        DiffFormat::Json => {
            let out = json!({
                "requests": requests,
                "changed": changes.len(),
                "newly_blocked": newly_blocked,
                "newly_allowed": newly_allowed,
                "groups": groups.iter().map(|((rule, how), ix)| json!({
                    "rule": rule,
                    "change": how,
                    "count": ix.len(),
                    "requests": ix.iter().map(|&i| change_json(&changes[i])).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            });
            println!("{out}");
        }
        DiffFormat::Text => {
            println!(
                "{requests} request(s) in {} trace(s): {} decision(s) change ({newly_blocked} newly blocked, {newly_allowed} newly allowed)",
                a.traces.len(),
                changes.len()
            );
            let word = |o: &Value| match o["decision"].as_str() {
                Some(d) => {
                    let codes: Vec<&str> = o["reason_codes"]
                        .as_array()
                        .map(|v| v.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if codes.is_empty() {
                        d.to_string()
                    } else {
                        format!("{d} {}", codes.join(","))
                    }
                }
                None => format!("error {}", o["error"]),
            };
            for ((rule, how), ix) in &groups {
                println!("\n{rule} {how}: {} request(s)", ix.len());
                for &i in ix.iter().take(a.examples) {
                    let c = &changes[i];
                    println!(
                        "  {}:{}  {}{}  {} -> {}",
                        c.trace,
                        c.line,
                        c.method.trim_start_matches("steps/"),
                        c.tool
                            .as_deref()
                            .map(|t| format!(" {t}"))
                            .unwrap_or_default(),
                        word(&c.old),
                        word(&c.new)
                    );
                }
                if ix.len() > a.examples {
                    println!("  … and {} more", ix.len() - a.examples);
                }
            }
        }
    }
    // As diff(1): 0 when nothing changes, 1 when something does.
    i32::from(!changes.is_empty())
}
