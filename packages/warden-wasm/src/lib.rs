//! `warden-wasm`: the WebAssembly half of the npm package (docs/wasm.md). It wraps the
//! embedding API (`warden::guardian`), the checker's diagnostics and the formatter for
//! JavaScript; values cross the boundary as JSON text, which the package's JavaScript half
//! (`api.js`) parses. Nothing here touches a file, a thread or a socket: WebAssembly has none.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};
use wasm_bindgen::prelude::*;

use warden::acs::{envelope, ids, time};
use warden::diagnostics::{Diagnostics, FileId, SourceFile, SourceMap};
use warden::guardian::{self, OnDecisionFailure, Options};
use warden::testing::{self, report, Report, RunOptions, Suite};

#[wasm_bindgen]
extern "C" {
    /// `Date.now()`: Unix milliseconds, the clock the library reads (it has no other here).
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn date_now() -> f64;
}

/// Runs when the module is instantiated: installs the clock.
#[wasm_bindgen(start)]
pub fn start() {
    time::set_clock(date_now);
}

/// The diagnostics as a JSON array: each with file, line, column, end_line, end_column
/// (1-based), severity, code, message and help.
fn diagnostics_json(d: &Diagnostics) -> String {
    serde_json::to_string(&d.to_json()).unwrap_or_else(|_| "[]".into())
}

/// A policy that does not load: the thrown error's message is the rendered diagnostics,
/// its `diagnostics` the JSON array (set by api.js from the text after the first line).
fn policy_error(d: &Diagnostics) -> JsError {
    JsError::new(&format!("{}\n{}", d.render(false), diagnostics_json(d)))
}

/// A checked and compiled policy.
#[wasm_bindgen]
pub struct Policy {
    inner: guardian::Policy,
}

#[wasm_bindgen]
impl Policy {
    /// A policy from source text; `name` is its module name (rules fire as `name.rule`).
    #[wasm_bindgen(js_name = fromSource)]
    pub fn from_source(text: &str, name: Option<String>) -> Result<Policy, JsError> {
        let name = name.unwrap_or_else(|| "policy".into());
        guardian::Policy::from_source(&name, text)
            .map(|inner| Policy { inner })
            .map_err(|d| policy_error(&d))
    }

    /// The default policy built into Warden (stdlib/defaults.ward).
    #[wasm_bindgen(js_name = defaultPolicy)]
    pub fn default_policy() -> Policy {
        Policy {
            inner: guardian::Policy::embedded_default(),
        }
    }

    /// SHA-256 of the compiled program.
    #[wasm_bindgen(getter)]
    pub fn digest(&self) -> String {
        self.inner.digest().to_string()
    }

    /// The checker's warnings, as a JSON array of diagnostics.
    #[wasm_bindgen(getter, js_name = warningsJson)]
    pub fn warnings_json(&self) -> String {
        diagnostics_json(&self.inner.warnings)
    }
}

/// Checks a policy's source: its errors and warnings as a JSON array (empty when clean).
#[wasm_bindgen(js_name = checkJson)]
pub fn check_json(text: &str, name: Option<String>) -> String {
    let name = name.unwrap_or_else(|| "policy".into());
    match guardian::Policy::from_source(&name, text) {
        Ok(p) => diagnostics_json(&p.warnings),
        Err(d) => diagnostics_json(&d),
    }
}

/// Formats a policy's source; throws (with the syntax diagnostics) if it does not parse.
#[wasm_bindgen]
pub fn fmt(text: &str) -> Result<String, JsError> {
    warden::fmt::format_source(FileId(0), text).map_err(|items| {
        let mut sources = SourceMap::default();
        sources.add(SourceFile::new("policy", text));
        policy_error(&Diagnostics { sources, items })
    })
}

/// Runs the `test` blocks of a policy's source (one after another: WebAssembly has no
/// threads) and returns `warden test --format json`'s document as text: a summary, each test's
/// status and failures (line, column, message, expected and actual decisions, the explain
/// trace), and coverage. A policy that does not load throws, with its diagnostics. Fixture
/// traces and `use` of other files do not resolve here (there are no files).
#[wasm_bindgen(js_name = runTestsJson)]
pub fn run_tests_json(text: &str, name: Option<String>) -> Result<String, JsError> {
    let name = name.unwrap_or_else(|| "policy".into());
    let suite = Suite::from_source(&name, text).map_err(|e| policy_error(&e.diagnostics))?;
    let mut out = Report::default();
    testing::run_suites(
        std::slice::from_ref(&suite),
        &RunOptions::default(),
        &mut out,
    );
    Ok(report::json(&out).to_string())
}

/// Decides ACS requests against a policy, keeping per-session state between steps (the
/// lenient protocol of `warden replay`).
#[wasm_bindgen]
pub struct Guardian {
    inner: guardian::Guardian,
    agent_id: String,
    session_id: String,
    next_id: AtomicU64,
}

#[wasm_bindgen]
impl Guardian {
    /// `explain`: attach the rules that ran and their checks to every result
    /// (`policy_data.warden`), as `warden replay --explain` does.
    #[wasm_bindgen(constructor)]
    pub fn new(policy: &Policy, explain: bool, fail_with_error: bool) -> Guardian {
        let options = Options {
            explain,
            on_decision_failure: if fail_with_error {
                OnDecisionFailure::Error
            } else {
                OnDecisionFailure::Deny
            },
            ..Options::default()
        };
        Guardian {
            inner: guardian::Guardian::with_options(policy.inner.clone(), options),
            agent_id: "javascript".into(),
            session_id: ids::random_v4(0),
            next_id: AtomicU64::new(1),
        }
    }

    /// One JSON-RPC request envelope in (text), its response envelope out. Malformed input
    /// gets the JSON-RPC error ACS prescribes, never an exception.
    pub fn handle(&self, request: &str) -> String {
        String::from_utf8_lossy(&self.inner.handle(request.as_bytes())).into_owned()
    }

    /// A trace (one request per line, blank lines skipped) through this Guardian: the
    /// responses as a JSON array of `{line, response}`, in order, as `warden replay` prints
    /// them one per line.
    #[wasm_bindgen(js_name = replayJson)]
    pub fn replay_json(&self, trace: &str) -> String {
        let mut out = Vec::new();
        for (i, line) in trace.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bytes = self.inner.handle(line.as_bytes());
            let response = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
            out.push(json!({ "line": i + 1, "response": response }));
        }
        Value::Array(out).to_string()
    }

    /// Builds the request envelope for `hook` (`toolCallRequest` or `steps/toolCallRequest`)
    /// with `payload` and `metadata` (JSON objects, as text) and returns the response
    /// envelope as text.
    #[wasm_bindgen(js_name = decideJson)]
    pub fn decide_json(
        &self,
        hook: &str,
        payload: &str,
        metadata: &str,
    ) -> Result<String, JsError> {
        let payload = object("payload", payload)?;
        let mut metadata = object("metadata", metadata)?;
        metadata
            .entry("agent_id")
            .or_insert_with(|| Value::String(self.agent_id.clone()));
        metadata
            .entry("session_id")
            .or_insert_with(|| Value::String(self.session_id.clone()));
        let method = if hook.starts_with("steps/") {
            hook.to_string()
        } else {
            format!("steps/{hook}")
        };
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = envelope::request(
            n,
            &method,
            &ids::random_v4(n),
            &time::now_rfc3339_ms(),
            Value::Object(metadata),
            Value::Object(payload),
        );
        Ok(self.handle(&request.to_string()))
    }
}

fn object(what: &str, text: &str) -> Result<Map<String, Value>, JsError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(JsError::new(&format!("{what} must be an object"))),
        Err(e) => Err(JsError::new(&format!("{what}: {e}"))),
    }
}
