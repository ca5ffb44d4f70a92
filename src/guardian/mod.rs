//! The embedding API: load a [`Policy`], build a [`Guardian`], and hand it ACS request
//! envelopes. This is what `warden replay` (and later `warden serve`) are built on.
//!
//! ```
//! use warden::guardian::{Guardian, Policy};
//!
//! let policy = Policy::from_source(
//!     "policy.ward",
//!     r#"rule no_rm on toolCallRequest when tool.name == "rm" => deny "no_rm": "never delete"
//!        default allow"#,
//! ).expect("the policy checks");
//! let guardian = Guardian::new(policy);
//! let request = br#"{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{
//!   "acs_version":"0.1.0","request_id":"6f1c1a62-8a55-4a8e-9b8a-3f6f0f0b9b01",
//!   "timestamp":"2026-12-01T10:00:00Z",
//!   "metadata":{"agent_id":"a","session_id":"2b0a5c56-3d3f-4d4f-8c5e-9a3f8b2a1c00"},
//!   "payload":{"tool":{"name":"rm"},"arguments":{}}}}"#;
//! let response: serde_json::Value = serde_json::from_slice(&guardian.handle(request)).unwrap();
//! assert_eq!(response["result"]["decision"], "deny");
//! assert_eq!(response["result"]["reason_codes"][0], "no_rm");
//! ```
//!
//! # Concurrency
//! A `Guardian` is `Send + Sync`. Sessions are independent: each has its own lock, so
//! requests of different sessions are decided in parallel, and requests of one session one at
//! a time, in the order they take the lock. The policy can be swapped atomically
//! ([`Guardian::set_policy`]); a decision in flight finishes on the policy it started with.

pub mod decide;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

pub use decide::Decision;

use crate::acs::envelope::{self, DecodeOptions, Id, Request, Response, RpcError};
use crate::acs::fields;
use crate::check::{self, Loaded};
use crate::compile::{self, Program};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::state::{Draft, Event, SessionState};
use crate::syntax::ast::DecisionKind;
use crate::vm::{self, Budget, Env, Observation, VmError};

/// A checked and compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    program: Arc<Program>,
    /// Warnings from the checker (a policy with errors does not load).
    pub warnings: Diagnostics,
}

impl Policy {
    fn build(checked: check::Checked) -> Result<Policy, Diagnostics> {
        if checked.has_errors() {
            return Err(checked.diagnostics);
        }
        match compile::compile(&checked) {
            Ok(mut program) => {
                program.unknown_labels = crate::state::unknown_labels(&program);
                Ok(Policy {
                    program: Arc::new(program),
                    warnings: checked.diagnostics,
                })
            }
            Err(items) => Err(Diagnostics {
                sources: checked.diagnostics.sources,
                items,
            }),
        }
    }

    /// A policy from a program compiled elsewhere (the test runner compiles with mocks).
    pub fn from_program(mut program: Program) -> Policy {
        program.unknown_labels = crate::state::unknown_labels(&program);
        Policy {
            program: Arc::new(program),
            warnings: Diagnostics::default(),
        }
    }

    /// Loads the policy rooted at a `.ward` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy, Diagnostics> {
        let path = path.as_ref();
        match Loaded::from_path(path) {
            Ok(loaded) => Policy::build(check::check(loaded)),
            Err(e) => {
                let mut d = Diagnostics::default();
                let file = d.sources.add(crate::diagnostics::SourceFile::new(
                    path.display().to_string(),
                    "",
                ));
                d.items.push(
                    Diagnostic::error(
                        "load::unreadable",
                        file,
                        Default::default(),
                        format!("cannot read {}: {e}", path.display()),
                    )
                    .with_help("check the path"),
                );
                Err(d)
            }
        }
    }

    /// A policy from source text (`name` is what diagnostics call it).
    pub fn from_source(name: &str, text: &str) -> Result<Policy, Diagnostics> {
        Policy::build(check::check(Loaded::from_source(name, text, None)))
    }

    /// A policy from source text whose relative paths resolve against `dir`.
    pub fn from_source_in(name: &str, text: &str, dir: PathBuf) -> Result<Policy, Diagnostics> {
        Policy::build(check::check(Loaded::from_source(name, text, Some(dir))))
    }

    /// The default policy compiled into the binary (`stdlib/defaults.ward`).
    pub fn embedded_default() -> Policy {
        Policy::from_source("<std.defaults>", check::DEFAULT_POLICY)
            .expect("the embedded default policy checks (tested)")
    }

    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }
}

/// What to answer when a decision cannot be reached (budget exhausted, evaluation error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDecisionFailure {
    /// Deny, with reason code `warden.decision_failure` (the default: explicit and closed).
    #[default]
    Deny,
    /// Answer a JSON-RPC internal error (-32603); the client applies its own failure mode.
    Error,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub on_decision_failure: OnDecisionFailure,
    /// Attach an explain trace to every result (`policy_data.warden`).
    pub explain: bool,
}

/// One rule's part in a decision, for explain traces.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTrace {
    pub rule: String,
    pub fired: bool,
    pub observations: Vec<Observation>,
}

#[derive(Debug, Default)]
struct Session {
    state: Option<SessionState>,
    /// For a subagent's session: the session that spawned it.
    parent: Option<String>,
}

/// Decides ACS requests for many sessions against one policy.
pub struct Guardian {
    policy: RwLock<Arc<Program>>,
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    options: Options,
}

impl Guardian {
    pub fn new(policy: Policy) -> Guardian {
        Guardian::with_options(policy, Options::default())
    }

    pub fn with_options(policy: Policy, options: Options) -> Guardian {
        Guardian {
            policy: RwLock::new(policy.program),
            sessions: Mutex::new(HashMap::new()),
            options,
        }
    }

    /// Swaps the policy; sessions keep their state.
    pub fn set_policy(&self, policy: Policy) {
        let mut p = self.policy.write().unwrap_or_else(|e| e.into_inner());
        *p = policy.program;
    }

    fn program(&self) -> Arc<Program> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Envelope bytes in, response bytes out. Never panics; malformed input gets the JSON-RPC
    /// error the protocol prescribes.
    pub fn handle(&self, bytes: &[u8]) -> Vec<u8> {
        self.handle_response(bytes).to_vec()
    }

    /// Like [`Guardian::handle`], returning the typed response.
    pub fn handle_response(&self, bytes: &[u8]) -> Response {
        let known = |m: &str| is_known_method(m);
        let opts = DecodeOptions {
            known_method: Some(&known),
            ..DecodeOptions::default()
        };
        match envelope::decode_request_with(bytes, &opts) {
            Ok((req, _raw)) => self.decide(&req),
            Err(resp) => *resp,
        }
    }

    /// Decides one typed request.
    pub fn decide(&self, req: &Request) -> Response {
        self.decide_traced(req).0
    }

    /// Decides one request and returns the explain trace of every rule that ran.
    pub fn decide_traced(&self, req: &Request) -> (Response, Vec<RuleTrace>) {
        let id = req.id.clone();
        let p = &req.params;
        match req.method.as_str() {
            "system/ping" => {
                let mut r = Decision::simple(DecisionKind::Allow, "", "alive".into())
                    .to_result(&p.request_id);
                r.reason_codes.clear();
                r.payload = Some(decide::ping_payload(&p.payload, now_rfc3339()));
                return (Response::result(id, r), Vec::new());
            }
            "handshake/hello" => {
                return (
                    Response::result(id, self.server_hello(&p.request_id)),
                    Vec::new(),
                )
            }
            _ => {}
        }
        let Some(hook) = fields::hook(&req.method) else {
            return (
                Response::error(id, RpcError::method_not_found(&req.method)),
                Vec::new(),
            );
        };
        let program = self.program();
        let session = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions
                .entry(p.metadata.session_id.clone())
                .or_default()
                .clone()
        };
        // A subagent's summary carries back everything that entered the subagent's context.
        let extra_labels = if hook.method == "steps/subagentStop" {
            p.payload
                .get("subagent_session_id")
                .and_then(Value::as_str)
                .and_then(|child| self.session_labels(child))
                .unwrap_or(program.unknown_labels)
        } else {
            0
        };
        let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
        let metadata = serde_json::to_value(&p.metadata).unwrap_or(Value::Null);
        let ev = Event {
            method: hook.method,
            request_id: &p.request_id,
            payload: &p.payload,
            metadata: &metadata,
            time_ms: envelope::rfc3339_unix_ms(&p.timestamp),
            extra_labels,
        };
        let state = session
            .state
            .get_or_insert_with(|| SessionState::new(&program));
        match decide_event(&program, hook, state, &ev, self.options.explain) {
            Ok(decision) => {
                if decision.proceeds() && hook.method == "steps/subagentStart" {
                    self.spawn_child(&p.metadata.session_id, state, &p.payload);
                }
                let traces = decision.trace.clone();
                let mut result = decision.to_result(&p.request_id);
                if self.options.explain {
                    result
                        .policy_data
                        .insert("warden".into(), explain_json(&decision, &traces));
                }
                (Response::result(id, result), traces)
            }
            Err(e) => (self.failure(id, &p.request_id, hook, &e), Vec::new()),
        }
    }

    fn failure(
        &self,
        id: Id,
        request_id: &str,
        hook: &'static fields::HookSpec,
        e: &VmError,
    ) -> Response {
        let why = format!("the policy could not decide: {e}");
        match self.options.on_decision_failure {
            OnDecisionFailure::Error => Response::error(id, RpcError::internal(why)),
            OnDecisionFailure::Deny if hook.allows(fields::DecisionKind::Deny) => Response::result(
                id,
                Decision::simple(DecisionKind::Deny, decide::DECISION_FAILURE, why)
                    .to_result(request_id),
            ),
            // Hooks that cannot be denied are only recorded; say so loudly.
            OnDecisionFailure::Deny => Response::result(
                id,
                Decision::simple(DecisionKind::Allow, decide::DECISION_FAILURE, why)
                    .to_result(request_id),
            ),
        }
    }

    fn server_hello(&self, request_id: &str) -> envelope::AcsResult {
        let program = self.program();
        let mut methods: Vec<&str> = fields::HOOKS.iter().map(|h| h.method).collect();
        methods.push("system/ping");
        methods.sort_unstable();
        methods.dedup();
        let hello = serde_json::json!({
            "negotiated_version": "0.1.0",
            "methods_evaluated": methods,
            "selected_transport": "stdio",
            "timeout_config": {"default_ms": 1000},
            "skew_window_ms": 300000,
            "on_decision_failure": match self.options.on_decision_failure {
                OnDecisionFailure::Deny => "deny",
                OnDecisionFailure::Error => "proceed",
            },
            "signature_algorithms_supported": [],
            "policy_requires_provenance": false,
            "profiles_accepted": ["acs-core", "acs-provenance"],
            "rules": program.rules.len(),
        });
        let mut r = Decision::simple(DecisionKind::Allow, "", "handshake accepted".into())
            .to_result(request_id);
        r.reason_codes.clear();
        r.payload = hello.as_object().cloned();
        r
    }

    /// Creates the child session a `subagentStart` announced (if it is not known yet).
    fn spawn_child(&self, parent_id: &str, parent: &SessionState, payload: &Value) {
        let Some(child_id) = payload.get("subagent_session_id").and_then(Value::as_str) else {
            return;
        };
        let child = parent.child(parent.child_intent(payload));
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.entry(child_id.to_string()).or_insert_with(|| {
            Arc::new(Mutex::new(Session {
                state: Some(child),
                parent: Some(parent_id.to_string()),
            }))
        });
    }

    /// Labels of everything that entered a session's context; `None` for an unknown session.
    fn session_labels(&self, id: &str) -> Option<u64> {
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        s.state.as_ref().map(|st| st.scalars.session_labels)
    }

    /// The session that spawned a subagent session, if it is one.
    pub fn parent_of(&self, id: &str) -> Option<String> {
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        s.parent.clone()
    }

    /// A copy of a session's state (for tests, tools and inspection).
    pub fn snapshot(&self, id: &str) -> Option<SessionState> {
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        s.state.clone()
    }

    /// Number of sessions the Guardian holds.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().map(|s| s.len()).unwrap_or(0)
    }
}

/// Methods the Guardian answers: every hook, plus ping and the handshake.
pub fn is_known_method(m: &str) -> bool {
    fields::hook(m).is_some() || m == "system/ping" || m == "handshake/hello"
}

/// Decides one event against a session state, and keeps the event's effect on the state only
/// if the step goes ahead (allow or modify). Returns the decision (with its explain trace when
/// `explain`).
pub fn decide_event(
    program: &Program,
    hook: &'static fields::HookSpec,
    state: &mut SessionState,
    ev: &Event<'_>,
    explain: bool,
) -> Result<Decision, VmError> {
    let mut budget = Budget::new(program.budget);
    state.ensure_slots(program);
    let (decision, changes) = {
        let mut draft = Draft::new(state);
        draft.begin_event(program, ev, &mut budget)?;
        let tool = ev
            .payload
            .get("tool")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str);
        let mut fired = Vec::new();
        let mut traces = Vec::new();
        let rego_cache = vm::RegoCache::default();
        let mut decision = {
            let env = Env {
                program,
                payload: ev.payload,
                metadata: ev.metadata,
                state: &draft,
                rego_cache: Some(&rego_cache),
            };
            for id in program.rules_for(hook.method, tool) {
                let rule = &program.rules[id as usize];
                let mut obs = Vec::new();
                let result = vm::run(&env, &rule.code, &mut budget, explain.then_some(&mut obs))?;
                let mut fires = result.truth() == Some(true);
                match (fires, rule.rego_source) {
                    (true, Some(source)) => {
                        let messages = rego_messages(rule, env.rego(source, &[])?);
                        fires = !messages.is_empty();
                        fired.extend(messages.into_iter().map(|t| (id, Some(t))));
                    }
                    (true, None) => fired.push((id, None)),
                    _ => {}
                }
                if explain {
                    traces.push(RuleTrace {
                        rule: format!("{}.{}", rule.module, rule.name),
                        fired: fires,
                        observations: obs,
                    });
                }
            }
            decide::combine_fired(program, hook, &fired, &env, &mut budget)?
        };
        if explain {
            redact_traces(program, &draft, ev.payload, &mut traces);
            decision.trace = traces;
        }
        if decision.proceeds() {
            draft.record_history(program, ev, &mut budget)?;
        }
        (decision, draft.into_changes())
    };
    if decision.proceeds() {
        state.apply(program, changes);
    }
    Ok(decision)
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

/// Masks, in explain traces, the values of content that carries a `redact` label.
fn redact_traces(program: &Program, state: &Draft<'_>, payload: &Value, traces: &mut [RuleTrace]) {
    let mask = program
        .labels
        .iter()
        .filter(|l| l.redact)
        .fold(0u64, |m, l| m | (1u64 << l.bit));
    if mask == 0 {
        return;
    }
    let mut secrets = Vec::new();
    collect_secrets(program, state, payload, mask, &mut secrets, 0);
    if secrets.is_empty() {
        return;
    }
    for t in traces {
        for o in &mut t.observations {
            for operand in &mut o.operands {
                if secrets.iter().any(|s| operand.contains(s.as_str())) {
                    *operand = "[redacted]".into();
                }
            }
        }
    }
}

fn collect_secrets(
    program: &Program,
    state: &Draft<'_>,
    v: &Value,
    mask: u64,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            if let (Some(value), Some(_)) = (m.get("value"), m.get("provenance")) {
                let labels = state.labels_of(program, &vm::Val::Json(v)).unwrap_or(0);
                if labels & mask != 0 {
                    let shown = vm::Val::from_json(value).describe();
                    // Strings render quoted; match the bare text too.
                    out.push(shown.trim_matches('"').to_string());
                }
            }
            for child in m.values() {
                collect_secrets(program, state, child, mask, out, depth + 1);
            }
        }
        Value::Array(a) => {
            for child in a {
                collect_secrets(program, state, child, mask, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn explain_json(decision: &Decision, traces: &[RuleTrace]) -> Value {
    let rules: Vec<Value> = traces
        .iter()
        .map(|t| {
            serde_json::json!({
                "rule": t.rule,
                "fired": t.fired,
                "checks": t.observations.iter().map(|o| serde_json::json!({
                    "at": [o.span.start, o.span.end],
                    "result": o.result,
                    "values": o.operands,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({"fired": decision.fired, "rules": rules})
}

fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}
