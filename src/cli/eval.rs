//! `warden eval`: one request decided, with the rules that ran and what each check saw — for a
//! policy author asking "what would this call get?". The request is an envelope (a file, or `-`)
//! or a compact description (`--tool send_money --arg recipient=DE89…`), optionally after a user
//! message, optionally after a recorded history (`--trace`). Owns building the compact request,
//! feeding the history and printing the answer; deciding is the Guardian's.

use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Map, Value};

use crate::acs::{envelope, ids, time};
use crate::guardian::{self, Guardian, Policy};

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A JSON-RPC request envelope to decide (a file, or `-` for standard input); without it,
    /// the request is built from --hook, --tool and --arg
    envelope: Option<PathBuf>,
    /// The policy (default: the embedded default policy)
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The hook of the built request
    #[arg(long, default_value = "toolCallRequest")]
    hook: String,
    /// The tool of the built request
    #[arg(long)]
    tool: Option<String>,
    /// An argument of the built request, `NAME=VALUE` (VALUE is read as JSON when it parses,
    /// as a string otherwise); repeatable. Arguments carry `origin: agent_generated`
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// What the user asked first: a session start with this Intent and a user message
    #[arg(long, value_name = "TEXT")]
    user: Option<String>,
    /// A recorded history (request envelopes, one per line, as `warden replay` reads them)
    /// decided first, in order; the built request (and --user) then joins the session of its
    /// last request
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = EvalFormat::Text)]
    format: EvalFormat,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EvalFormat {
    Text,
    Json,
}

fn usage(message: &str) -> i32 {
    eprintln!("warden eval: {message}");
    2
}

/// The compact request: `--hook`, `--tool`, `--arg`.
fn built(a: &EvalArgs, n: u64, sid: &str) -> Result<Value, String> {
    let method = format!("steps/{}", a.hook.trim_start_matches("steps/"));
    let mut payload = Map::new();
    if let Some(t) = &a.tool {
        payload.insert("tool".into(), json!({"name": t}));
    }
    if !a.args.is_empty() || method == "steps/toolCallRequest" {
        let mut arguments = Map::new();
        for kv in &a.args {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--arg {kv:?}: expected NAME=VALUE"))?;
            let value = serde_json::from_str::<Value>(v).unwrap_or_else(|_| json!(v));
            arguments.insert(
                k.to_string(),
                json!({"value": value, "provenance": {"origin": "agent_generated"}}),
            );
        }
        payload.insert("arguments".into(), Value::Object(arguments));
    }
    Ok(request(n, &method, sid, Value::Object(payload)))
}

fn request(n: u64, method: &str, sid: &str, payload: Value) -> Value {
    envelope::request(
        n,
        method,
        &ids::counter(0xe7a1, n),
        &time::now_rfc3339_ms(),
        json!({"agent_id": "warden-eval", "session_id": sid}),
        payload,
    )
}

pub fn run(a: EvalArgs) -> i32 {
    let policy = match &a.policy {
        None => Policy::embedded_default(),
        Some(p) => match Policy::load(p) {
            Ok(p) => p,
            Err(d) => {
                eprint!("{}", d.render(false));
                return usage(&format!("{}: the policy has errors", p.display()));
            }
        },
    };
    let g = Guardian::with_options(
        policy,
        guardian::Options {
            explain: true,
            ..guardian::Options::default()
        },
    );
    let mut sid = ids::counter(0xe7a1, 0);
    if let Some(path) = &a.trace {
        match replay_history(&g, path) {
            Ok(Some(session)) => sid = session,
            Ok(None) => {}
            Err(e) => return usage(&e),
        }
    }
    let body: Vec<u8> = match &a.envelope {
        Some(path) => {
            if a.tool.is_some() || !a.args.is_empty() {
                return usage("give an envelope or --tool/--arg, not both");
            }
            let read = if path.as_os_str() == "-" {
                let mut s = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut s).map(|_| s)
            } else {
                std::fs::read(path)
            };
            match read {
                Ok(b) => b,
                Err(e) => return usage(&format!("{}: {e}", path.display())),
            }
        }
        None => match built(&a, 3, &sid) {
            Ok(v) => v.to_string().into_bytes(),
            Err(e) => return usage(&e),
        },
    };
    if let Some(text) = &a.user {
        // The session the request belongs to: the envelope's own, or the built one's.
        let sid = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| {
                v.pointer("/params/metadata/session_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or(sid.clone());
        let user = json!({"type": "text", "value": text, "provenance": {"origin": "user_input"}});
        for (n, (method, payload)) in [
            ("steps/sessionStart", json!({"intent": {"raw": text}})),
            ("steps/userMessage", json!({"content": [user]})),
        ]
        .into_iter()
        .enumerate()
        {
            let r = g.handle_response(
                request(n as u64 + 1, method, &sid, payload)
                    .to_string()
                    .as_bytes(),
            );
            if let Some(e) = r.as_error() {
                return usage(&format!("{method} was refused: {} {}", e.code, e.message));
            }
        }
    }
    let response = g.handle_response(&body);
    let value = serde_json::to_value(&response).unwrap_or(Value::Null);
    match a.format {
        EvalFormat::Json => println!("{value}"),
        EvalFormat::Text => print!("{}", text(&value)),
    }
    match value["result"]["decision"].as_str() {
        Some("allow" | "modify") => 0,
        Some(_) => 1,
        None => 2,
    }
}

/// Decides a recorded history's requests in order, as `warden replay` would, and returns the
/// session of its last request. A request the Guardian refuses (a JSON-RPC error) is named on
/// standard error: the history goes on without it, as it did when it was recorded.
fn replay_history(g: &Guardian, path: &std::path::Path) -> Result<Option<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut session = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let response = g.handle_response(line.as_bytes());
        if let Some(e) = response.as_error() {
            eprintln!(
                "warden eval: {}:{}: refused: {} ({})",
                path.display(),
                i + 1,
                e.message,
                e.code
            );
        }
        let parsed = serde_json::from_str::<Value>(line).ok();
        if let Some(s) = parsed
            .as_ref()
            .and_then(|v| v.pointer("/params/metadata/session_id"))
            .and_then(Value::as_str)
        {
            session = Some(s.to_string());
        }
    }
    Ok(session)
}

/// The answer for people: the decision, its reasons, then each rule that ran and its checks.
fn text(v: &Value) -> String {
    let mut out = String::new();
    let Some(r) = v.get("result") else {
        return format!(
            "error {}: {}\n{}\n",
            v["error"]["code"],
            v["error"]["message"].as_str().unwrap_or(""),
            v["error"]
                .get("data")
                .map(Value::to_string)
                .unwrap_or_default()
        );
    };
    let codes: Vec<&str> = r["reason_codes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.push_str(r["decision"].as_str().unwrap_or("?"));
    if !codes.is_empty() {
        out.push_str(&format!(" {}", codes.join(", ")));
    }
    if let Some(why) = r["reasoning"].as_str().filter(|s| !s.is_empty()) {
        out.push_str(&format!(": {why}"));
    }
    out.push('\n');
    let explain = &r["policy_data"]["warden"];
    for rule in explain["rules"].as_array().into_iter().flatten() {
        let place = match (rule["file"].as_str(), rule["line"].as_u64()) {
            (Some(f), Some(l)) => format!(" ({f}:{l})"),
            _ => String::new(),
        };
        let fired = if rule["fired"] == true {
            "fired"
        } else {
            "did not fire"
        };
        out.push_str(&format!(
            "\n{} {fired}{place}\n",
            rule["rule"].as_str().unwrap_or("?")
        ));
        for c in rule["checks"].as_array().into_iter().flatten() {
            let outcome = super::explain_text::check_outcome(c);
            let values: Vec<String> = c["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect();
            out.push_str(&format!(
                "  {}  {}  → {outcome}  [{}]\n",
                c["at"].as_str().unwrap_or(""),
                c["text"].as_str().unwrap_or(""),
                values.join(", ")
            ));
        }
    }
    out
}
