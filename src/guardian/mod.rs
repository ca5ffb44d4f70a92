//! The embedding API: load a [`Policy`], build a [`Guardian`], and hand it ACS request
//! envelopes. This is what `warden replay` and `warden serve` are built on: the protocol
//! (handshake, signatures, replay window, caps: [`Protocol`]), decisions ([`decide`]), explain
//! traces ([`explain`]), the audit chain ([`audit`]) and the journal a Guardian writes before it
//! answers ([`journal`]: the interface and an in-memory one) live here, so every front end
//! shares them. Running a Guardian as a process (transports, the durable journal, the operator
//! endpoint, reload) is the `server` module's, behind feature `server` (docs/serve.md).
//!
//! Inside, a request of a session goes through the phases of `session` (ARCHITECTURE.md, "A
//! step's phases"): the gate, the step (its state moved by `engine`), the journal, and one
//! commit that restoring from the journal ends in too. This file owns the facade: the policy,
//! the Guardian's options, its session table and journal, the operator's actions (approvals,
//! effect resolutions) and what answers look like once decided (signatures, the decision log).
//! It must not know how a transport carries requests or how a journal stores records.
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
//! ([`Guardian::set_policy`], or [`Guardian::reload_policy`], which journals the swap first); a
//! decision in flight finishes on the policy it started with.

// Error responses are the rare path, built once per refused request: no need to box them.
#![allow(clippy::result_large_err)]
#![warn(missing_docs)]

pub mod audit;
pub mod decide;
pub(crate) mod engine;
pub mod explain;
pub mod journal;
pub mod log;
pub mod protocol;
mod session;
mod sessions;
pub mod stats;
mod step_code;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

pub use decide::Decision;
pub use engine::{BAD_ARGUMENTS, BAD_INTENT};
pub use journal::{Claim, Durable, Journal, JournalError, MemoryJournal, Record};
pub use protocol::{Caps, Negotiated, Protocol};
pub use session::is_known_method;

use session::{Commit, Digest, Gated, Refusal, Session};

use crate::acs::crypto;
use crate::acs::envelope::{self, DecodeOptions, Id, Request, Response, RpcError};
use crate::acs::fields;
use crate::acs::shell;
use crate::acs::time;
use crate::acs::DecisionKind;
use crate::check::{self, Loaded};
use crate::compile::{self, Program};
use crate::diagnostics::{Code, Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::state::{Approval, ApprovalStatus, Extension, GrantError, SessionState};
use crate::vm::{Observation, VmError};

/// A checked and compiled policy.
///
/// ```
/// use warden::guardian::Policy;
///
/// let policy = Policy::from_source("p", "default allow").unwrap();
/// assert_eq!(policy.digest().len(), 64, "SHA-256, hex: what the audit chain names it by");
///
/// // A policy with an error gives its diagnostics, each with a code, a place and a hint.
/// let text = "rule r on toolCallRequest when tool.nmae == \"rm\" => deny \"x\": \"no\"\ndefault allow";
/// let errors = Policy::from_source("p", text).unwrap_err();
/// assert!(errors.has_errors());
/// assert_eq!(errors.items[0].code.as_str(), "check::unknown_field");
/// ```
#[derive(Debug, Clone)]
pub struct Policy {
    program: Arc<Program>,
    /// SHA-256 of the compiled program's dump: names the policy in the audit chain.
    digest: Arc<str>,
    /// The policy's source files: explain traces show rules and checks by file, line and text.
    sources: Arc<SourceMap>,
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
                program.unknown_labels = step_code::unknown_labels(&program);
                program.labels_by_origin = step_code::labels_by_origin(&program);
                let digest = crypto::sha256_hex(compile::dump(&program).as_bytes());
                Ok(Policy {
                    program: Arc::new(program),
                    digest: Arc::from(digest),
                    sources: Arc::new(checked.loaded.sources.clone()),
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
    /// Give it its sources with [`Policy::with_sources`] for explain traces to show them.
    pub fn from_program(mut program: Program) -> Policy {
        program.unknown_labels = step_code::unknown_labels(&program);
        program.labels_by_origin = step_code::labels_by_origin(&program);
        let digest = crypto::sha256_hex(compile::dump(&program).as_bytes());
        Policy {
            program: Arc::new(program),
            digest: Arc::from(digest),
            sources: Arc::default(),
            warnings: Diagnostics::default(),
        }
    }

    /// The same policy, with the source files its program was compiled from.
    pub fn with_sources(mut self, sources: SourceMap) -> Policy {
        self.sources = Arc::new(sources);
        self
    }

    /// The policy's source files.
    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }

    /// Loads the policy rooted at a `.ward` file. A file over
    /// [`crate::diagnostics::MAX_SOURCE_BYTES`] is refused before it is read.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy, Diagnostics> {
        let path = path.as_ref();
        crate::diagnostics::source_within_bounds(path).map_err(|e| unloadable(path, e))?;
        match Loaded::from_path(path) {
            Ok(loaded) => Policy::build(check::check(loaded)),
            Err(e) => Err(unloadable(
                path,
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }

    /// One policy from several files (and folders of `.ward` files), checked together: their
    /// rules, labels and constants share one namespace. Each file is held to
    /// [`crate::diagnostics::MAX_SOURCE_BYTES`].
    pub fn load_paths(paths: &[PathBuf]) -> Result<Policy, Diagnostics> {
        let first = paths.first().map_or(Path::new("."), |p| p.as_path());
        let files = check::collect_files(paths).map_err(|e| unloadable(first, e))?;
        let mut loaded = Loaded::default();
        for f in &files {
            crate::diagnostics::source_within_bounds(f).map_err(|e| unloadable(f, e))?;
            loaded
                .add_path(f)
                .map_err(|e| unloadable(f, format!("cannot read {}: {e}", f.display())))?;
        }
        if files.is_empty() {
            return Err(unloadable(
                first,
                "no .ward files in the given paths".into(),
            ));
        }
        Policy::build(check::check(loaded))
    }

    /// A policy from source text (`name` is what diagnostics call it).
    pub fn from_source(name: &str, text: &str) -> Result<Policy, Diagnostics> {
        let mut loaded = Loaded::from_source(name, text, None);
        loaded.refuse_rego_without_folder();
        Policy::build(check::check(loaded))
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

    /// The compiled program.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// Decides one event against a session state the caller holds, keeping the event's effect
    /// on the state only if the step goes ahead (allow or modify); with `explain`, the decision
    /// carries its explain trace. This is the decision without the envelope, the protocol's
    /// checks, the audit chain or the journal that [`Guardian::handle`] adds: for a host that
    /// keeps its own sessions, and for the benches that time the decision alone.
    ///
    /// ```
    /// use serde_json::json;
    /// use warden::acs::fields;
    /// use warden::guardian::Policy;
    /// use warden::state::{Event, SessionState};
    ///
    /// let policy = Policy::from_source(
    ///     "p.ward",
    ///     "rule no_mail on toolCallRequest when tool.name == \"send_email\" => deny \"no_mail\"\ndefault allow\n",
    /// )
    /// .unwrap();
    /// let mut state = SessionState::new(policy.program());
    /// let payload = json!({"tool": {"name": "send_email"}, "arguments": {}});
    /// let hook = fields::hook("steps/toolCallRequest").unwrap();
    /// let event = Event {
    ///     method: hook.method,
    ///     request_id: "5e55e55e-0000-4000-8000-000000000001",
    ///     payload: &payload,
    ///     metadata: &json!({}),
    ///     time_ms: None,
    ///     extra_labels: 0,
    ///     wrapped_method: None,
    /// };
    /// let decision = policy.decide_event(&mut state, hook, &event, false).unwrap();
    /// assert_eq!(decision.reason_codes, ["no_mail"]);
    /// ```
    pub fn decide_event(
        &self,
        state: &mut SessionState,
        hook: &'static fields::HookSpec,
        ev: &crate::state::Event<'_>,
        explain: bool,
    ) -> Result<Decision, VmError> {
        engine::decide_event(&self.program, hook, state, ev, explain)
    }

    /// SHA-256 (hex) of the compiled program: what the audit chain records on a reload.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// What to answer when a decision cannot be reached (budget exhausted, evaluation error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDecisionFailure {
    /// Deny, with reason code `warden.decision_failure` (the default: explicit and closed).
    #[default]
    Deny,
    /// Answer a JSON-RPC internal error (-32603); the client applies its own failure mode
    /// (the ServerHello tells it `on_decision_failure: "deny"`).
    Error,
}

/// How a [`Guardian`] decides and answers.
///
/// ```
/// use warden::guardian::{Guardian, OnDecisionFailure, Options, Policy, Protocol};
///
/// // What `warden serve` runs: a handshake first, signatures checked when a key is set,
/// // replay protection, the audit chain and the caps; failures answered as errors.
/// let options = Options {
///     protocol: Protocol::strict(),
///     on_decision_failure: OnDecisionFailure::Error,
///     explain: false,
/// };
/// let guardian = Guardian::with_options(Policy::embedded_default(), options);
/// assert!(guardian.options().protocol.require_handshake);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// What to answer when the policy cannot decide.
    pub on_decision_failure: OnDecisionFailure,
    /// Attach an explain trace to every result (`policy_data.warden`).
    pub explain: bool,
    /// Handshake, signatures, replay protection, audit chain and caps. The default is the
    /// lenient mode `warden replay` uses; `warden serve` runs [`Protocol::strict`].
    pub protocol: Protocol,
}

/// One rule's part in a decision, for explain traces (rendered by [`explain`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTrace {
    /// `module.rule`.
    pub rule: String,
    /// Where the rule is: its file in the policy's sources, and its whole declaration.
    pub file: FileId,
    /// Its whole declaration.
    pub span: Span,
    /// Whether it fired.
    pub fired: bool,
    /// Its checks, in the order they ran, with masked values already masked.
    pub observations: Vec<Observation>,
    /// Texts masked in this decision (`redact` labels, `mask` paths): whoever shows source
    /// text beside the trace masks them there too ([`explain::scrub_text`]).
    pub masked: Arc<[String]>,
}

#[derive(Debug, Clone)]
pub(crate) struct Active {
    program: Arc<Program>,
    digest: Arc<str>,
    sources: Arc<SourceMap>,
}

/// Decides ACS requests for many sessions against one policy.
///
/// ```
/// use serde_json::json;
/// use warden::acs::build::Conversation;
/// use warden::guardian::{Guardian, Policy};
///
/// let policy = Policy::from_source(
///     "p",
///     "rule two_mails on toolCallRequest \
///        when tool.name == \"send_email\" and count(toolCallRequest when tool.name == \"send_email\", this turn) >= 1 \
///        => deny \"mail.once\": \"one mail a turn\"\n\
///      default allow",
/// )
/// .unwrap();
/// let guardian = Guardian::new(policy);
/// let chat = Conversation::new("agent");
/// let decide = |e: &warden::acs::build::Envelope| {
///     let r: serde_json::Value = serde_json::from_slice(&guardian.handle(&e.to_vec())).unwrap();
///     r["result"]["decision"].as_str().unwrap().to_string()
/// };
/// let mail = || chat.tool_call("send_email", json!({"to": "a@example.com"}));
/// assert_eq!(decide(&mail()), "allow");
/// // The session's history is kept between steps: the second mail of the turn is refused.
/// assert_eq!(decide(&mail()), "deny");
/// assert_eq!(guardian.session_count(), 1);
/// ```
pub struct Guardian {
    policy: RwLock<Active>,
    sessions: sessions::Table<Session>,
    options: Options,
    journal: Option<Arc<dyn Journal>>,
    /// Where a record of each decision goes ([`Guardian::set_decision_log`]).
    decision_log: std::sync::OnceLock<Arc<dyn log::DecisionLog>>,
    /// The journal failed: nothing more can be acknowledged, every request is refused.
    failed: Arc<AtomicBool>,
    /// What it has decided, counted ([`Guardian::stats`]); shared with the hooks that count
    /// each step's journal wait as it settles.
    stats: Arc<stats::Stats>,
}

/// What a subagent's session hands back to its parent at `subagentStop`.
pub(crate) struct ChildFacts {
    /// Everything that entered the subagent's context.
    labels: u64,
    /// Its audit chain head.
    head: Option<String>,
    /// The effect keys it changed.
    effects: Vec<(Arc<str>, crate::state::EffectEntry)>,
}

/// A granted approval: its session, the approval as asked, and what it did to the Intent.
#[derive(Debug, Clone, PartialEq)]
pub struct Granted {
    /// The session the approval belongs to.
    pub session: String,
    /// The approval as it was asked.
    pub approval: Arc<Approval>,
    /// What the grant did to the session's Intent.
    pub extension: Extension,
}

/// Why [`Guardian::approve`] granted nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApproveError {
    #[error("{0}")]
    /// The grant was refused (unknown ask, wrong approver, expired, used).
    Grant(GrantError),
    #[error("{0}")]
    /// The grant could not be journalled (or the session's lease taken).
    Journal(String),
}

/// One approval as [`Guardian::approvals`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalInfo {
    /// The session the approval belongs to.
    pub session: String,
    /// The request id of the ask that opened it (what `warden approve` takes).
    pub request_id: String,
    /// The approval as it was asked.
    pub approval: Arc<Approval>,
    /// Where it stands.
    pub status: ApprovalStatus,
}

impl ApprovalInfo {
    /// As `warden approvals --format json`, the operator's `GET /approvals` and the Python
    /// package's `list_approvals` give it: `{session, request_id, status, approver: {type,
    /// id}, question, action_hash, action}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "session": self.session,
            "request_id": self.request_id,
            "status": self.status.as_str(),
            "approver": {"type": self.approval.approver_type, "id": self.approval.approver_id},
            "question": self.approval.question,
            "action_hash": self.approval.action_hash,
            "action": serde_json::from_str::<Value>(&self.approval.action).unwrap_or(Value::Null),
        })
    }
}

impl Granted {
    /// As the operator's `POST /approvals/approve` and the Python package's `approve` answer:
    /// `{session, request_id, action_hash, expires_seconds, intent}`, `intent` being
    /// `extended`, `refused_strict` or `unchanged`.
    pub fn to_json(&self, request_id: &str) -> Value {
        let intent = match self.extension {
            Extension::Extended(_) => "extended",
            Extension::RefusedStrict => "refused_strict",
            Extension::None | Extension::Unrestricted => "unchanged",
        };
        serde_json::json!({
            "session": self.session,
            "request_id": request_id,
            "action_hash": self.approval.action_hash,
            "expires_seconds": self.approval.expires_ms.div_ceil(1000),
            "intent": intent,
        })
    }
}

/// What a decided step leaves for the caller: the answer, the rule traces, and the promise
/// that the step's journal records are durable.
struct Decided {
    response: Response,
    traces: Vec<RuleTrace>,
    durable: Option<Durable>,
    /// With a decision log: what the record needs from inside the decision.
    logged: Option<Logged>,
}

/// A decision's part of its decision-log record ([`log`]).
#[derive(Debug, Default)]
pub(crate) struct Logged {
    tool: Option<String>,
    arguments: Option<Value>,
    fired: Vec<Arc<str>>,
    unverified_claims: Vec<String>,
}

/// A decided request whose answer must wait until its journal records are durable
/// ([`Guardian::handle_pending`]). Send the answer only after [`Pending::wait`] (on a thread)
/// or [`Pending::settled`] (in async code) gives it: if the records could not be made
/// durable, the answer becomes a JSON-RPC internal error and the Guardian refuses every
/// later request.
#[must_use = "the answer may be sent only once the decision is durable"]
pub struct Pending {
    response: Response,
    durable: Option<Durable>,
    /// Signs a replacement error like the answer it replaces.
    key: Option<([u8; 32], String)>,
    failed: Arc<AtomicBool>,
}

impl Pending {
    /// Blocks until the decision is durable, then gives the answer.
    pub fn wait(mut self) -> Response {
        let outcome = self.durable.take().map(Durable::wait);
        self.conclude(outcome)
    }

    /// Waits (asynchronously) until the decision is durable, then gives the answer.
    pub async fn settled(mut self) -> Response {
        let outcome = match self.durable.take() {
            Some(d) => Some(d.settled_outcome().await),
            None => None,
        };
        self.conclude(outcome)
    }

    fn conclude(self, outcome: Option<Result<(), JournalError>>) -> Response {
        let Some(Err(e)) = outcome else {
            return self.response;
        };
        // A lost lease fails this session's answer only: another Guardian decides it now,
        // and this one's memory of it is dropped at its next request (`Guardian::hold`).
        let error = match e {
            JournalError::LeaseLost(why) => RpcError::internal(format!(
                "the decision was not committed: this Guardian lost the session's lease ({why})"
            ))
            .with_data("reason", "lease_lost"),
            JournalError::Failed(e) => {
                self.failed.store(true, Ordering::SeqCst);
                RpcError::internal(format!("the decision could not be made durable: {e}"))
            }
        };
        let mut response = Response::error(self.response.id.clone(), error);
        if let Some((k, key_id)) = &self.key {
            sign_response(k, key_id, &mut response);
        }
        response
    }
}

impl Guardian {
    /// A Guardian for `policy` with the default (lenient) options and no journal.
    pub fn new(policy: Policy) -> Guardian {
        Guardian::with_options(policy, Options::default())
    }

    /// A Guardian for `policy` with `options` and no journal.
    pub fn with_options(policy: Policy, options: Options) -> Guardian {
        Guardian {
            policy: RwLock::new(Active {
                program: policy.program,
                digest: policy.digest,
                sources: policy.sources,
            }),
            sessions: sessions::Table::default(),
            options,
            journal: None,
            decision_log: std::sync::OnceLock::new(),
            failed: Arc::new(AtomicBool::new(false)),
            stats: Arc::default(),
        }
    }

    /// A Guardian that writes every decided step (and handshake) to `journal` before it
    /// answers.
    pub fn with_journal(policy: Policy, options: Options, journal: Arc<dyn Journal>) -> Guardian {
        let mut g = Guardian::with_options(policy, options);
        g.journal = Some(journal);
        g
    }

    /// Sends a record of every decided request (and every request answered with an error)
    /// to `sink` from now on ([`log`]). Once per Guardian: a second call returns `false`
    /// and changes nothing.
    pub fn set_decision_log(&self, sink: Arc<dyn log::DecisionLog>) -> bool {
        self.decision_log.set(sink).is_ok()
    }

    /// The decision log's counters and gauges ([`log::DecisionLog::metrics`]); none without
    /// a decision log.
    pub fn decision_log_metrics(&self) -> Vec<(&'static str, u64)> {
        self.decision_log
            .get()
            .map(|l| l.metrics())
            .unwrap_or_default()
    }

    /// The options the Guardian runs with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Swaps the policy; sessions keep their state. Each session's next audited step is
    /// preceded by a `warden/policy_reload` entry naming the new policy's digest.
    pub fn set_policy(&self, policy: Policy) {
        let mut p = self.policy.write().unwrap_or_else(|e| e.into_inner());
        *p = Active {
            program: policy.program,
            digest: policy.digest,
            sources: policy.sources,
        };
    }

    /// Swaps the policy like [`Guardian::set_policy`], after writing a
    /// [`Record::PolicyReload`] (the digest replaced, the digest taken, server time) to the
    /// journal. Decisions wait for the record to be durable; if the journal refuses it, the
    /// policy is not swapped and the error is returned. Gives back (old, new) digests.
    pub fn reload_policy(&self, policy: Policy) -> Result<(Arc<str>, Arc<str>), String> {
        let mut p = self.policy.write().unwrap_or_else(|e| e.into_inner());
        let old = p.digest.clone();
        let new = policy.digest.clone();
        self.journal(vec![Record::PolicyReload {
            old: old.to_string(),
            new: new.to_string(),
            at: time::now_rfc3339(),
        }])?;
        *p = Active {
            program: policy.program,
            digest: policy.digest,
            sources: policy.sources,
        };
        self.stats.reloaded();
        Ok((old, new))
    }

    /// What this Guardian has decided, counted: decisions by kind and by rule, errors,
    /// decision times, policy reloads, and the steps waiting on the journal and how long each
    /// waited ([`stats::Snapshot`]).
    pub fn stats(&self) -> stats::Snapshot {
        self.stats.snapshot()
    }

    /// Whether the journal has failed: the Guardian then refuses every request (a readiness
    /// probe answers "not ready").
    pub fn has_failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn active(&self) -> Active {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Digest of the policy in force.
    pub fn policy_digest(&self) -> Arc<str> {
        self.active().digest
    }

    /// Envelope bytes in, response bytes out. Never panics; malformed input gets the JSON-RPC
    /// error the protocol prescribes.
    pub fn handle(&self, bytes: &[u8]) -> Vec<u8> {
        self.handle_response(bytes).to_vec()
    }

    /// Like [`Guardian::handle`], returning the typed response.
    pub fn handle_response(&self, bytes: &[u8]) -> Response {
        self.handle_traced(bytes).0
    }

    /// Like [`Guardian::handle_response`], with the trace of every rule that ran (each rule's
    /// checks only when the Guardian was built with `Options::explain`).
    pub fn handle_traced(&self, bytes: &[u8]) -> (Response, Vec<RuleTrace>) {
        let (pending, traces) = self.handle_pending_traced(bytes);
        (pending.wait(), traces)
    }

    /// Decides without waiting for the journal: the [`Pending`] answer settles once the
    /// decision's records are durable. A transport that serves many requests at once answers
    /// each as its group commit lands, instead of parking a thread per request.
    pub fn handle_pending(&self, bytes: &[u8]) -> Pending {
        self.handle_pending_traced(bytes).0
    }

    fn handle_pending_traced(&self, bytes: &[u8]) -> (Pending, Vec<RuleTrace>) {
        let started = time::Stopwatch::start();
        let (pending, traces) = match self.decode(bytes).0 {
            Ok((req, mut raw)) => self.process(&req, raw.as_mut()),
            Err(resp) => (self.ready(*resp), Vec::new()),
        };
        self.stats.record(&pending.response, started.elapsed());
        (pending, traces)
    }

    /// The first half of [`Guardian::handle_response`]: the size bound, the strict JSON parse
    /// and the envelope checks. It reads nothing of the Guardian's sessions, so a caller may
    /// decode on one thread and decide on another ([`Guardian::decide_decoded`]) and get the
    /// answers `handle_response` gives, in the same order.
    pub fn decode(&self, bytes: &[u8]) -> Decoded {
        let max = self.options.protocol.caps.max_envelope_bytes;
        if bytes.len() > max {
            return Decoded(Err(Box::new(Response::error(
                Id::Null,
                too_large(bytes.len(), max),
            ))));
        }
        let known = |m: &str| is_known_method(m);
        let opts = DecodeOptions {
            known_method: Some(&known),
            limits: crate::acs::json::Limits {
                max_bytes: max,
                ..Default::default()
            },
        };
        // Without a signature key or a journal nothing reads the request as received, so the
        // common envelope is read straight into its typed form (`acs::shell`); the rest, and
        // every envelope that does not decode, take the full decode.
        if self.options.protocol.key.is_none() && self.journal.is_none() {
            if let Some(req) = shell::decode(bytes, &opts) {
                return Decoded(Ok((req, None)));
            }
        }
        Decoded(envelope::decode_request_detached(bytes, &opts).map(|(req, raw)| (req, Some(raw))))
    }

    /// The second half of [`Guardian::handle_response`]: the answer to a request
    /// [`Guardian::decode`] gave (an envelope that did not decode is answered with its
    /// error). The request stays the caller's, so it is freed where the caller chooses (on
    /// the thread that decoded it, say).
    pub fn decide_decoded(&self, decoded: &mut Decoded) -> Response {
        let started = time::Stopwatch::start();
        let pending = match &mut decoded.0 {
            Ok((req, raw)) => self.process(req, raw.as_mut()).0,
            Err(resp) => self.ready((**resp).clone()),
        };
        self.stats.record(&pending.response, started.elapsed());
        pending.wait()
    }

    /// An answer that waits for nothing.
    fn ready(&self, response: Response) -> Pending {
        Pending {
            response,
            durable: None,
            key: None,
            failed: self.failed.clone(),
        }
    }

    /// Decides one typed request.
    pub fn decide(&self, req: &Request) -> Response {
        self.decide_traced(req).0
    }

    /// Decides one request and returns the explain trace of every rule that ran.
    pub fn decide_traced(&self, req: &Request) -> (Response, Vec<RuleTrace>) {
        let (pending, traces) = self.process(req, None);
        (pending.wait(), traces)
    }

    /// `raw` is the request as received, its payload moved into `req`
    /// ([`envelope::decode_request_detached`]); `None` rebuilds what is read of it from
    /// `req`.
    fn process(&self, req: &Request, raw: Option<&mut Value>) -> (Pending, Vec<RuleTrace>) {
        let started = time::Stopwatch::start();
        let id = req.id.clone();
        let p = &req.params;
        if req.method == "system/ping" {
            // Always allow, whatever the policy, signature or session: never audited, never
            // signed, never an ACS error.
            let mut r =
                Decision::simple(DecisionKind::Allow, "", "alive".into()).to_result(&p.request_id);
            r.reason_codes.clear();
            r.payload = Some(decide::ping_payload(&p.payload, time::now_rfc3339()));
            return (self.ready(Response::result(id, r)), Vec::new());
        }
        let proto = &self.options.protocol;
        let mut rebuilt;
        let raw = match raw {
            // The payload goes back only for what reads the request whole: the signature
            // check and the journal record (without a journal the record is dropped unread,
            // its payload `null`). The audit entry reads it from `req` in place
            // (`audit::step_entry`).
            Some(raw) => {
                if proto.key.is_some() || self.journal.is_some() {
                    envelope::reattach_payload(raw, &p.payload);
                }
                raw
            }
            // Rebuilt from the typed request only for what reads it: whole for the signature
            // check and the journal, without its payload for the audit entry (which reads the
            // payload from `req`), not at all otherwise.
            None => {
                rebuilt = if proto.key.is_some() || self.journal.is_some() {
                    serde_json::to_value(req).unwrap_or(Value::Null)
                } else if proto.audit {
                    envelope::tree_without_payload(req)
                } else {
                    Value::Null
                };
                &mut rebuilt
            }
        };
        let key = proto
            .key
            .as_ref()
            .map(|ikm| crypto::session_key(ikm, &p.metadata.session_id));
        let Decided {
            mut response,
            traces,
            durable,
            logged,
        } = if self.failed.load(Ordering::SeqCst) {
            Decided {
                response: Response::error(id, Refusal::JournalFailed.to_rpc()),
                traces: Vec::new(),
                logged: None,
                durable: None,
            }
        } else {
            self.process_session(req, raw, key.as_ref())
        };
        if let Some(k) = key {
            sign_response(&k, &proto.key_id, &mut response);
        }
        // A handshake decides nothing: it has no record.
        let sink = self
            .decision_log
            .get()
            .filter(|_| req.method != "handshake/hello");
        if let Some(sink) = sink {
            let logged = logged.unwrap_or_default();
            let facts = log::Facts {
                session: Some(p.metadata.session_id.clone()).filter(|s| !s.is_empty()),
                method: req.method.clone(),
                request_id: Some(p.request_id.clone()).filter(|s| !s.is_empty()),
                tool: logged
                    .tool
                    .or_else(|| fields::tool_name(&p.payload).map(String::from)),
                arguments: logged.arguments,
                fired: logged.fired,
                unverified_claims: logged.unverified_claims,
            };
            let took = started.elapsed_us();
            sink.record(&log::record(&facts, &response, &self.policy_digest(), took));
        }
        let pending = Pending {
            response,
            durable,
            key: key.map(|k| (k, proto.key_id.clone())),
            failed: self.failed.clone(),
        };
        (pending, traces)
    }

    /// The table's limits, from the protocol's caps and skew window.
    fn limits(&self) -> sessions::Limits {
        let proto = &self.options.protocol;
        sessions::Limits {
            max_sessions: proto.caps.max_sessions,
            max_per_agent: proto.caps.max_sessions_per_agent,
            tombstone_ms: proto.skew_window_ms,
            idle_ms: proto.caps.idle_session_ms,
            hello_ms: proto.caps.hello_timeout_ms,
            max_hellos: proto.caps.max_hello_sessions,
            max_hellos_per_agent: proto.caps.max_hellos_per_agent,
        }
    }

    /// Sessions held that have only said hello, and those dropped so far to make room for
    /// newer hellos (docs/serve.md, "Sessions").
    pub fn hello_counts(&self) -> (usize, usize) {
        self.sessions.hello_counts()
    }

    /// Holds a new session `sid` for `agent` (or returns the one held), within the caps,
    /// active at `now` (a restore passes the time its record was written).
    fn admit(
        &self,
        sid: &str,
        agent: &str,
        counted: bool,
        now: i64,
    ) -> Result<Arc<Mutex<Session>>, Refusal> {
        self.admit_with(sid, agent, counted, now, || Session::new(agent, now))
    }

    /// Holds a session a request opens: a hello's as bare (in the pool of sessions that have
    /// only said hello), any other's (`--no-handshake`) as established.
    fn admit_new(
        &self,
        sid: &str,
        agent: &str,
        hello: bool,
    ) -> Result<Arc<Mutex<Session>>, Refusal> {
        if !hello {
            return self.admit(sid, agent, true, time::now_ms());
        }
        let now = time::now_ms();
        let limits = self.limits();
        self.sessions
            .admit_hello(sid, agent, now, &limits, || Session::new(agent, now))
            .map_err(|why| Refusal::Full {
                agent: agent.to_string(),
                why,
            })
    }

    /// Holds `make()` as session `sid` for `agent` (or returns the one held), within the caps.
    fn admit_with(
        &self,
        sid: &str,
        agent: &str,
        counted: bool,
        now: i64,
        make: impl FnOnce() -> Session,
    ) -> Result<Arc<Mutex<Session>>, Refusal> {
        let limits = self.limits();
        self.sessions
            .admit(sid, agent, now, &limits, counted, make)
            .map_err(|why| Refusal::Full {
                agent: agent.to_string(),
                why,
            })
    }

    /// Drops every ended session whose tombstone outlived the skew window and every idle
    /// session from memory (O(1) amortised per session dropped). `warden serve` calls it
    /// every second; admissions sweep a few as they go. Returns how many left.
    pub fn sweep_sessions(&self) -> usize {
        let limits = self.limits();
        let removed = self.sessions.sweep(time::now_ms(), &limits);
        self.compact_ended_sessions();
        removed
    }

    /// Drops ended sessions whose tombstone outlived the skew window and idle sessions from
    /// memory, like [`Guardian::sweep_sessions`], without compacting their records: those
    /// wait for the next [`Guardian::compact_ended_sessions`] (a restart leaves them to the
    /// housekeeping thread, so the listener is not held up by them).
    pub fn sweep_memory(&self) -> usize {
        self.sessions.sweep(time::now_ms(), &self.limits())
    }

    /// Compacts the journal records of every ended session whose tombstone left memory since
    /// the last call (see [`Record::Sealed`]); `sweep_sessions` calls it. Returns how many.
    /// In batches of [`COMPACT_BATCH`]: a batch's summaries are handed to the journal together
    /// and waited for together, so they share commits.
    pub fn compact_ended_sessions(&self) -> usize {
        let listed = self.sessions.take_listed();
        listed
            .chunks(COMPACT_BATCH)
            .map(|batch| self.compact_batch(batch))
            .sum()
    }

    fn compact_batch(&self, ids: &[Arc<str>]) -> usize {
        let Some(journal) = &self.journal else {
            return 0;
        };
        let pending: Vec<Durable> = ids
            .iter()
            .filter_map(|id| Some(journal.compact_submit(id, self.compact_summary(id)?)))
            .collect();
        pending.into_iter().filter_map(|d| d.wait().ok()).count()
    }

    /// One request of a session, through the phases of `session` (its module docs give the
    /// order): the gate, the step, the journal, the commit.
    fn process_session(&self, req: &Request, raw: &mut Value, key: Option<&[u8; 32]>) -> Decided {
        let fail = |refusal: Refusal| Decided {
            response: Response::error(req.id.clone(), refusal.to_rpc()),
            traces: Vec::new(),
            logged: None,
            durable: None,
        };
        let sid = req.params.metadata.session_id.as_str();
        let entered = match self.enter(req, raw, key) {
            Ok(e) => e,
            Err(refusal) => return fail(refusal),
        };
        let mut s = entered.session.lock().unwrap_or_else(|e| e.into_inner());
        let admitted = match self.gate(&mut s, req, &entered) {
            Ok(Gated::Step(admitted)) => admitted,
            Ok(Gated::Hello(result)) => {
                return Decided {
                    response: Response::result(req.id.clone(), *result),
                    traces: Vec::new(),
                    logged: None,
                    durable: None,
                }
            }
            Err(refusal) => {
                // A refused hello leaves nothing behind.
                if entered.hook.is_none()
                    && entered.fresh
                    && s.negotiated.is_none()
                    && s.chain.len == 0
                {
                    drop(s);
                    self.sessions.remove(sid);
                }
                return fail(refusal);
            }
        };
        let stepped = self.step(&mut s, req, raw, &admitted, &entered);
        let after = stepped.commits.then(|| {
            let proto = &self.options.protocol;
            let window = proto.replay_protection.then(|| {
                let time_ms = admitted.time_ms.unwrap_or(admitted.now);
                (time_ms, admitted.id_key, admitted.nonce_key)
            });
            let child_effects = match &entered.child {
                Some((_, Some(child))) => Some(&child.effects),
                _ => None,
            };
            s.commit(Commit {
                method: stepped.method,
                proceeds: stepped.proceeds,
                window,
                max_request_ids: proto.caps.max_request_ids,
                entries: stepped.record.entries(),
                digest: Digest::Decided(admitted.active.digest.clone()),
                child_effects,
                at_ms: time::now_ms(),
            })
        });
        // Journalled under the session's lock, so the journal holds each session's steps in
        // the order they were decided; the answer waits for the commit (`Pending`).
        let records = self.with_hello(&mut s, sid, stepped.record);
        let durable = self.submit_as(records, s.lease);
        if let Some(after) = after {
            self.after_commit(&s, sid, after, &req.params.payload);
        }
        drop(s);
        Decided {
            response: stepped.response,
            traces: stepped.traces,
            durable,
            logged: stepped.logged,
        }
    }

    /// Makes an operator's or a reload's records durable before they take effect. A lost
    /// lease refuses only this action (another Guardian decides the session now); any other
    /// journal failure marks the Guardian failed, like a step's.
    fn journal(&self, records: Vec<Record>) -> Result<(), String> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        j.append(records).map_err(|e| {
            if !matches!(e, JournalError::LeaseLost(_)) {
                self.failed.store(true, Ordering::SeqCst);
            }
            format!("the decision could not be made durable: {e}")
        })
    }

    /// Hands a session's records, decided under the lease token `lease`, to the journal
    /// without waiting: the answer waits on the [`Durable`]. `None`: there is no journal,
    /// nothing to wait for.
    /// Counted while it waits, and timed to its settling ([`stats::Stats::journal_settled`]).
    fn submit_as(&self, records: Vec<Record>, lease: Option<i64>) -> Option<Durable> {
        let journal = self.journal.as_ref()?;
        let started = time::Stopwatch::start();
        self.stats.journal_submitted();
        let stats = self.stats.clone();
        let durable = journal.submit_as(records, lease);
        Some(durable.on_settle(move || stats.journal_settled(started.elapsed())))
    }

    /// A step's record, preceded by the session's handshake if this is its first step (the
    /// hello was held back: [`Guardian::hello`]); the session is then no longer bare.
    fn with_hello(&self, s: &mut Session, sid: &str, record: Record) -> Vec<Record> {
        let Some((at_ms, policy)) = s.hello.take() else {
            return vec![record];
        };
        self.sessions
            .established(sid, time::now_ms(), &self.limits());
        let Some(negotiated) = s.negotiated.as_deref() else {
            return vec![record];
        };
        let handshake = Record::Handshake {
            session: sid.to_string(),
            negotiated: negotiated.clone(),
            agent: Some(s.agent.to_string()),
            at_ms: Some(at_ms),
            policy: Some(policy.to_string()),
        };
        vec![handshake, record]
    }

    /// The answer to a decision failure: a result, or the error response to send.
    fn failure(
        &self,
        id: Id,
        request_id: &str,
        hook: &'static fields::HookSpec,
        e: &VmError,
    ) -> Result<envelope::AcsResult, Response> {
        let why = format!("the policy could not decide: {e}");
        match self.options.on_decision_failure {
            OnDecisionFailure::Error => Err(Response::error(id, RpcError::internal(why))),
            OnDecisionFailure::Deny if hook.allows(DecisionKind::Deny) => {
                Ok(
                    Decision::simple(DecisionKind::Deny, decide::DECISION_FAILURE, why)
                        .to_result(request_id),
                )
            }
            // Hooks that cannot be denied are only recorded; say so loudly.
            OnDecisionFailure::Deny => {
                Ok(
                    Decision::simple(DecisionKind::Allow, decide::DECISION_FAILURE, why)
                        .to_result(request_id),
                )
            }
        }
    }

    /// Creates the child session a `subagentStart` announced (if it is not known yet).
    fn spawn_child(&self, parent_id: &str, parent_session: &Session, payload: &Value) {
        let Some(child_id) = payload.get("subagent_session_id").and_then(Value::as_str) else {
            return;
        };
        let Some(parent) = &parent_session.state else {
            return;
        };
        let child = parent.child(parent.child_intent(payload));
        let agent = parent_session.agent.clone();
        let limits = self.limits();
        let now = time::now_ms();
        // The child's lease goes with its parent's Guardian: its first step then finds it
        // held (a child another Guardian holds fails its steps, closed).
        if let Some(j) = &self.journal {
            let _ = j.claim(child_id);
        }
        // Held whatever the caps say: the parent's step that opened it was already decided.
        let _ = self
            .sessions
            .admit(child_id, &agent, now, &limits, false, || Session {
                state: Some(child),
                parent: Some(parent_id.to_string()),
                negotiated: parent_session.negotiated.clone(),
                parent_link: parent_session.chain.head.clone(),
                policy_digest: parent_session.policy_digest.clone(),
                last_active_ms: now,
                agent: agent.clone(),
                family: true,
                ..Session::default()
            });
    }

    /// Makes sure this Guardian may decide `sid` (several Guardians on one database hold a
    /// lease per session): a session whose lease it has just taken is dropped from memory,
    /// since another Guardian may have decided it since, and is restored from the journal
    /// by the caller; a session another Guardian holds is refused with the holder named, so
    /// a client or load balancer can go there instead.
    fn hold(&self, sid: &str) -> Result<Option<i64>, Refusal> {
        let Some(j) = &self.journal else {
            return Ok(None);
        };
        match j.claim(sid) {
            Claim::Held { token } => Ok(token),
            Claim::Taken { token } => {
                // A session that has only said hello here, and that no Guardian has written,
                // is current: its hello took no lease (`Guardian::peek`).
                let unwritten = || matches!(j.session_records(sid), Some(Ok(r)) if r.is_empty());
                if !(self.sessions.is_bare(sid) && unwritten()) {
                    self.sessions.remove(sid);
                }
                Ok(Some(token))
            }
            Claim::Busy {
                holder,
                expires_in_ms,
            } => {
                // Whatever this Guardian still holds of the session is stale now.
                self.sessions.remove(sid);
                Err(Refusal::LeaseHeld {
                    holder,
                    expires_in_ms,
                })
            }
            Claim::Failed(e) => Err(Refusal::LeaseUnreadable(e)),
        }
    }

    /// Refuses a hello for a session another Guardian holds (with the holder named), without
    /// writing a lease: only the session's first step takes one ([`Guardian::hold`]).
    fn peek(&self, sid: &str) -> Result<(), Refusal> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        match j.peek(sid) {
            Claim::Held { .. } | Claim::Taken { .. } => Ok(()),
            Claim::Busy {
                holder,
                expires_in_ms,
            } => Err(Refusal::LeaseHeld {
                holder,
                expires_in_ms,
            }),
            Claim::Failed(e) => Err(Refusal::LeaseUnreadable(e)),
        }
    }

    /// Takes `sid`'s lease for an operator's change made outside a request (`warden effects
    /// resolve` beside a live fleet), or says why not: another Guardian holds the session (the
    /// change belongs on that Guardian's operator endpoint) or the lease could not be read.
    /// Without leases (one Guardian's own journal) it always succeeds.
    pub fn take_session(&self, sid: &str) -> Result<(), String> {
        self.hold(sid).map(|_| ()).map_err(|e| e.detail())
    }

    /// The session with this id, if the Guardian has one (the map's lock is held only here).
    fn existing_session(&self, id: &str) -> Option<Arc<Mutex<Session>>> {
        self.sessions.get(id)
    }

    /// What a subagent's session hands back at `subagentStop`; `None` for an unknown session.
    fn session_facts(&self, id: &str) -> Option<ChildFacts> {
        // An ended subagent's tombstone may have left memory: its facts come from the journal.
        let session = match self.existing_session(id) {
            Some(s) => s,
            None => self.restore_returning(id)?.ok()?,
        };
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        let (labels, effects) = s.handed_back()?;
        Some(ChildFacts {
            labels,
            head: s.chain.head.clone(),
            effects,
        })
    }

    /// The session that spawned a subagent session, if it is one.
    pub fn parent_of(&self, id: &str) -> Option<String> {
        let session = self.existing_session(id)?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        s.parent.clone()
    }

    /// A copy of a session's state (for tests, tools and inspection).
    pub fn snapshot(&self, id: &str) -> Option<SessionState> {
        let session = self.existing_session(id)?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        s.state.clone()
    }

    /// An operator's resolution of an effect key (docs/effects.md): sets it to `committed` or
    /// `failed`, which lifts the ambiguous lock. The resolution is journalled (it survives a
    /// restart of `warden serve --state DIR`) before it takes effect. Returns the state the
    /// key had, or `None` if the session or the key is unknown, `to` is not
    /// `committed`/`failed`, or the journal failed.
    pub fn resolve_effect(
        &self,
        session_id: &str,
        key: &str,
        to: crate::state::EffectStatus,
    ) -> Option<crate::state::EffectStatus> {
        use crate::state::EffectStatus;
        if !matches!(to, EffectStatus::Committed | EffectStatus::Failed) {
            return None;
        }
        // The session as the journal holds it now (another Guardian may have decided it);
        // one another Guardian holds is resolved there, not here.
        self.hold(session_id).ok()?;
        let session = match self.existing_session(session_id) {
            Some(s) => s,
            None => self.restore_returning(session_id)?.ok()?,
        };
        let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
        let was = s.state.as_ref()?.effect_status(key)?;
        let mut entries = Vec::new();
        if self.audited(&s) {
            let mut e = audit::own_entry(
                s.chain.next_id(session_id),
                audit::EFFECT_RESOLVED,
                time::now_rfc3339(),
            );
            e.insert("effect_key".into(), key.into());
            e.insert("from".into(), was.as_str().into());
            e.insert("to".into(), to.as_str().into());
            entries.push(s.chain.append(e));
        }
        // Durable before it takes effect, under the session's lock (like a step).
        self.journal(vec![Record::EffectResolved {
            session: session_id.to_string(),
            key: key.to_string(),
            to: to.as_str().to_string(),
            entries,
        }])
        .ok()?;
        s.state.as_mut()?.resolve_effect(key, to);
        Some(was)
    }

    /// An approver grants the ask `request_id` (docs/effects.md): the next call of exactly
    /// the asked action, within the ask's `expires`, goes ahead once. `approver_id` must be
    /// the ask's approver; `at_ms` is the grant's time (`None`: the Guardian's clock). The
    /// grant, and the Intent extension it makes, are written to the audit chain and the
    /// journal before they take effect.
    pub fn approve(
        &self,
        request_id: &str,
        approver_id: &str,
        at_ms: Option<i64>,
    ) -> Result<Granted, ApproveError> {
        let at_ms = at_ms.unwrap_or_else(time::now_ms);
        let (sid, _) = self
            .find_approval(request_id)
            .ok_or_else(|| ApproveError::Grant(GrantError::Unknown(request_id.to_string())))?;
        // The session as the journal holds it now (another Guardian may have decided it).
        self.hold(&sid)
            .map_err(|e| ApproveError::Journal(e.detail()))?;
        let session = match self.existing_session(&sid) {
            Some(s) => s,
            None => match self.restore_returning(&sid) {
                Some(Ok(s)) => s,
                Some(Err(e)) => return Err(ApproveError::Journal(e.detail())),
                None => {
                    return Err(ApproveError::Grant(GrantError::Unknown(
                        request_id.to_string(),
                    )))
                }
            },
        };
        let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
        let unknown = || ApproveError::Grant(GrantError::Unknown(request_id.to_string()));
        let state = s.state.as_ref().ok_or_else(unknown)?;
        let approval = state
            .check_grant(request_id, approver_id, at_ms)
            .map_err(ApproveError::Grant)?;
        let extension = state.extension_of(&approval);
        let mut entries = Vec::new();
        if self.audited(&s) {
            let timestamp = time::rfc3339(at_ms.div_euclid(1000));
            let approver = serde_json::json!({
                "type": approval.approver_type,
                "id": approval.approver_id,
            });
            let mut e = audit::own_entry(
                s.chain.next_id(&sid),
                audit::APPROVAL_GRANTED,
                timestamp.clone(),
            );
            e.insert("ask_step_id".into(), request_id.into());
            e.insert("approver".into(), approver.clone());
            e.insert("action_hash".into(), approval.action_hash.clone().into());
            if extension == Extension::RefusedStrict {
                e.insert(
                    "intent_extension_refused".into(),
                    "scope_mode strict: the Intent may not be widened".into(),
                );
            }
            entries.push(s.chain.append(e));
            if let Extension::Extended(cap) = &extension {
                let mut e = audit::own_entry(s.chain.next_id(&sid), "intent_extension", timestamp);
                e.insert("ask_step_id".into(), request_id.into());
                e.insert("approver".into(), approver.clone());
                let mut c = serde_json::Map::new();
                c.insert("tool".into(), cap.tool.clone().into());
                if let Some(op) = &cap.operation {
                    c.insert("operation".into(), op.clone().into());
                }
                e.insert("capabilities".into(), Value::Array(vec![Value::Object(c)]));
                e.insert("scope".into(), "session".into());
                e.insert(
                    "provenance".into(),
                    serde_json::json!({"origin": "approver", "approver": approver}),
                );
                entries.push(s.chain.append(e));
            }
        }
        self.journal(vec![Record::ApprovalGranted {
            session: sid.clone(),
            request_id: request_id.to_string(),
            at_ms,
            entries,
        }])
        .map_err(ApproveError::Journal)?;
        if let Some(state) = s.state.as_mut() {
            state.grant(request_id, at_ms);
        }
        Ok(Granted {
            session: sid,
            approval,
            extension,
        })
    }

    /// Whether an operator's action on the session goes into its audit chain: when the
    /// Guardian keeps chains, or the session already has one (an operator tool runs with the
    /// default options against a server's state).
    fn audited(&self, s: &Session) -> bool {
        self.options.protocol.audit || s.chain.len > 0
    }

    /// The session holding the approval opened by the ask `request_id`.
    fn find_approval(&self, request_id: &str) -> Option<(String, Arc<Mutex<Session>>)> {
        self.sessions.entries().into_iter().find(|(_, session)| {
            let s = session.lock().unwrap_or_else(|e| e.into_inner());
            s.state
                .as_ref()
                .is_some_and(|st| st.approval(request_id).is_some())
        })
    }

    /// Every session's approvals and their status at `now_ms` (`None`: the Guardian's
    /// clock), sorted by session and request id.
    pub fn approvals(&self, now_ms: Option<i64>) -> Vec<ApprovalInfo> {
        let now = now_ms.unwrap_or_else(time::now_ms);
        let mut out = Vec::new();
        for sid in self.session_ids() {
            if let Some(st) = self.snapshot(&sid) {
                for (request_id, approval, status) in st.approvals_at(now) {
                    out.push(ApprovalInfo {
                        session: sid.clone(),
                        request_id,
                        approval,
                        status,
                    });
                }
            }
        }
        out
    }

    /// A session's effect keys and their states, sorted by key.
    pub fn effects(&self, session_id: &str) -> Vec<(String, crate::state::EffectStatus)> {
        self.snapshot(session_id)
            .map(|st| st.effect_states())
            .unwrap_or_default()
    }

    /// The ids of every session, sorted.
    pub fn session_ids(&self) -> Vec<String> {
        let mut ids = self.sessions.ids();
        ids.sort();
        ids
    }

    /// A session's audit chain head and length.
    pub fn chain_head(&self, id: &str) -> Option<(Option<String>, u64)> {
        let session = self.existing_session(id)?;
        let s = session.lock().unwrap_or_else(|e| e.into_inner());
        Some((s.chain.head.clone(), s.chain.len))
    }

    /// Number of sessions the Guardian holds.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
}

/// Ended sessions compacted together: their summaries share the journal's commits.
pub const COMPACT_BATCH: usize = 256;

/// The one diagnostic of a policy file that could not be loaded at all.
fn unloadable(path: &Path, message: String) -> Diagnostics {
    let mut d = Diagnostics::default();
    let file = d.sources.add(crate::diagnostics::SourceFile::new(
        path.display().to_string(),
        "",
    ));
    d.items.push(
        Diagnostic::error(Code::LoadUnreadable, file, Default::default(), message)
            .with_help("check the path"),
    );
    d
}

fn too_large(len: usize, max: usize) -> RpcError {
    RpcError::invalid_request(format!(
        "the envelope is {len} bytes; this Guardian accepts at most {max}"
    ))
    .with_data("reason", "envelope_too_large")
    .with_data("max_envelope_bytes", max as u64)
}

/// An envelope as [`Guardian::decode`] read it: the typed request and the tree it was read
/// from (none when it was read straight into its typed form), or the error response it gets
/// without a decision.
#[derive(Debug)]
pub struct Decoded(Result<(Request, Option<Value>), Box<Response>>);

impl Decoded {
    /// The typed request, when the envelope decoded.
    pub fn request(&self) -> Option<&Request> {
        self.0.as_ref().ok().map(|(req, _)| req)
    }
}

/// The error for an envelope over the size limit (what HTTP answers with status 413).
pub fn too_large_response(len: usize, max: usize) -> Response {
    Response::error(Id::Null, too_large(len, max))
}

/// Signs a response in place: `result.signature` or `error.signature`, over JCS of the whole
/// envelope without it.
pub fn sign_response(key: &[u8], key_id: &str, response: &mut Response) {
    match &mut response.outcome {
        envelope::Outcome::Result(r) => r.signature = None,
        envelope::Outcome::Error(e) => e.signature = None,
    }
    let value = crypto::sign(key, &response.to_value());
    let sig = envelope::Signature {
        algorithm: crypto::HMAC_SHA256.to_string(),
        value,
        key_id: key_id.to_string(),
    };
    match &mut response.outcome {
        envelope::Outcome::Result(r) => r.signature = Some(sig),
        envelope::Outcome::Error(e) => e.signature = Some(sig),
    }
}

/// The request tree's `params.metadata` (what `pointer_mut("/params/metadata")` finds, without
/// parsing a pointer and allocating its parts for every request).
fn params_metadata_mut(raw: &mut Value) -> Option<&mut Value> {
    fields::member_mut(fields::member_mut(raw, "params")?, "metadata")
}
