//! The embedding API: load a [`Policy`], build a [`Guardian`], and hand it ACS request
//! envelopes. This is what `warden replay` and `warden serve` are built on: the protocol
//! (handshake, signatures, replay window, caps: [`Protocol`]), decisions ([`decide`]), explain
//! traces ([`explain`]), the audit chain ([`audit`]) and the journal a Guardian writes before it
//! answers ([`journal`]: the interface and an in-memory one) live here, so every front end
//! shares them. Running a Guardian as a process (transports, the durable journal, the operator
//! endpoint, reload) is the `server` module's, behind feature `server` (docs/serve.md).
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

pub mod audit;
pub mod decide;
pub mod engine;
pub mod explain;
pub mod journal;
pub mod log;
pub mod protocol;
mod sessions;
mod step_code;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

pub use decide::Decision;
pub use engine::{decide_event, reapply_event, taint_event, BAD_ARGUMENTS, BAD_INTENT};
pub use journal::{Claim, Durable, Journal, MemoryJournal, Record};
pub use protocol::{Caps, Negotiated, Protocol};

use audit::Chain;
use protocol::ReplayWindow;

use crate::acs::crypto;
use crate::acs::envelope::{self, DecodeOptions, Id, Request, Response, RpcError};
use crate::acs::fields;
use crate::acs::time;
use crate::acs::DecisionKind;
use crate::check::{self, Loaded};
use crate::compile::{self, Program};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::state::{
    Approval, ApprovalNote, ApprovalStatus, Event, Extension, GrantError, SessionState,
};
use crate::vm::{Observation, VmError};

/// A checked and compiled policy.
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

#[derive(Debug, Clone, Default)]
pub struct Options {
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
    pub span: Span,
    pub fired: bool,
    /// Its checks, in the order they ran, with masked values already masked.
    pub observations: Vec<Observation>,
    /// Texts masked in this decision (`redact` labels, `mask` paths): whoever shows source
    /// text beside the trace masks them there too ([`explain::scrub_text`]).
    pub masked: Arc<[String]>,
}

#[derive(Debug, Default)]
struct Session {
    state: Option<SessionState>,
    /// For a subagent's session: the session that spawned it.
    parent: Option<String>,
    negotiated: Option<Arc<Negotiated>>,
    window: ReplayWindow,
    chain: Chain,
    /// `sessionEnd` was decided: the chain is sealed and the state dropped.
    sealed: bool,
    /// The labels of a sealed session's context (what its parent's `subagentStop` reads).
    final_labels: Option<u64>,
    /// The effect keys a sealed subagent session changed (likewise).
    final_effects: Vec<(Arc<str>, crate::state::EffectEntry)>,
    /// Digest of the policy the session's last step was decided on.
    policy_digest: Option<Arc<str>>,
    /// For a subagent: the parent's chain head after its `subagentStart` entry, recorded in
    /// the child's root entry.
    parent_link: Option<String>,
    /// Set when the session went over a memory cap; every later request is refused.
    refused: Option<String>,
    /// When the session was sealed (Guardian clock), for dropping its tombstone later.
    sealed_at_ms: i64,
    /// When the session last had a request (Guardian clock), for idle eviction.
    last_active_ms: i64,
    /// The agent that opened it (`metadata.agent_id`; a subagent's session counts as its
    /// parent's agent's).
    agent: Arc<str>,
    /// The session is part of a subagent family (it has a parent or spawned a child): its
    /// state depends on the other members', so it stays in memory until it ends.
    family: bool,
    /// Being rebuilt from the journal outside the table: it opens no subagent sessions.
    detached: bool,
    /// Its records are already one compacted [`Record::Sealed`].
    compacted: bool,
    /// The fencing token of the lease this copy of the session was decided under (several
    /// Guardians on one database): its records are committed only while the lease still
    /// carries it. `None` with a journal of one Guardian's own.
    lease: Option<i64>,
    /// Said hello (at this time, under this policy) and took no step yet: the handshake is
    /// journalled with the first step, so a session that only said hello costs the journal
    /// nothing.
    hello: Option<(i64, Arc<str>)>,
}

#[derive(Debug, Clone)]
struct Active {
    program: Arc<Program>,
    digest: Arc<str>,
    sources: Arc<SourceMap>,
}

/// Decides ACS requests for many sessions against one policy.
pub struct Guardian {
    policy: RwLock<Active>,
    sessions: sessions::Table<Session>,
    options: Options,
    journal: Option<Arc<dyn Journal>>,
    /// Where a record of each decision goes ([`Guardian::set_decision_log`]).
    decision_log: std::sync::OnceLock<Arc<dyn log::DecisionLog>>,
    /// The journal failed: nothing more can be acknowledged, every request is refused.
    failed: Arc<AtomicBool>,
}

/// What a subagent's session hands back to its parent at `subagentStop`.
struct ChildFacts {
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
    pub session: String,
    pub approval: Arc<Approval>,
    pub extension: Extension,
}

/// Why [`Guardian::approve`] granted nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApproveError {
    #[error("{0}")]
    Grant(GrantError),
    #[error("{0}")]
    Journal(String),
}

/// One approval as [`Guardian::approvals`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalInfo {
    pub session: String,
    /// The request id of the ask that opened it (what `warden approve` takes).
    pub request_id: String,
    pub approval: Arc<Approval>,
    pub status: ApprovalStatus,
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
struct Logged {
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
            Some(d) => Some(d.await),
            None => None,
        };
        self.conclude(outcome)
    }

    fn conclude(self, outcome: Option<Result<(), String>>) -> Response {
        let Some(Err(e)) = outcome else {
            return self.response;
        };
        // A lost lease fails this session's answer only: another Guardian decides it now,
        // and this one's memory of it is dropped at its next request (`Guardian::hold`).
        let error = match e.strip_prefix(journal::LEASE_LOST) {
            Some(why) => RpcError::internal(format!(
                "the decision was not committed: this Guardian lost the session's lease ({why})"
            ))
            .with_data("reason", "lease_lost"),
            None => {
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
    pub fn new(policy: Policy) -> Guardian {
        Guardian::with_options(policy, Options::default())
    }

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
        Ok((old, new))
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
        let max = self.options.protocol.caps.max_envelope_bytes;
        if bytes.len() > max {
            return (
                self.ready(Response::error(Id::Null, too_large(bytes.len(), max))),
                Vec::new(),
            );
        }
        let known = |m: &str| is_known_method(m);
        let opts = DecodeOptions {
            known_method: Some(&known),
            limits: crate::acs::json::Limits {
                max_bytes: max,
                ..Default::default()
            },
        };
        match envelope::decode_request_with(bytes, &opts) {
            Ok((req, raw)) => self.process(&req, Some(raw)),
            Err(resp) => (self.ready(*resp), Vec::new()),
        }
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

    fn process(&self, req: &Request, raw: Option<Value>) -> (Pending, Vec<RuleTrace>) {
        let started = std::time::Instant::now();
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
        let mut raw = raw.unwrap_or_else(|| serde_json::to_value(req).unwrap_or(Value::Null));
        let proto = &self.options.protocol;
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
                response: Response::error(
                    id,
                    RpcError::internal("the journal failed; this Guardian refuses every request"),
                ),
                traces: Vec::new(),
                logged: None,
                durable: None,
            }
        } else {
            self.process_session(req, &mut raw, key.as_ref())
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
                tool: logged.tool.or_else(|| {
                    p.payload
                        .pointer("/tool/name")
                        .and_then(Value::as_str)
                        .map(String::from)
                }),
                arguments: logged.arguments,
                fired: logged.fired,
                unverified_claims: logged.unverified_claims,
            };
            let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
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
    ) -> Result<Arc<Mutex<Session>>, RpcError> {
        self.admit_with(sid, agent, counted, now, || Session {
            last_active_ms: now,
            agent: Arc::from(agent),
            ..Session::default()
        })
    }

    /// Holds a session a request opens: a hello's as bare (in the pool of sessions that have
    /// only said hello), any other's (`--no-handshake`) as established.
    fn admit_new(
        &self,
        sid: &str,
        agent: &str,
        hello: bool,
    ) -> Result<Arc<Mutex<Session>>, RpcError> {
        if !hello {
            return self.admit(sid, agent, true, time::now_ms());
        }
        let now = time::now_ms();
        let limits = self.limits();
        self.sessions
            .admit_hello(sid, agent, now, &limits, || Session {
                last_active_ms: now,
                agent: Arc::from(agent),
                ..Session::default()
            })
            .map_err(|r| refusal(agent, r))
    }

    /// Holds `make()` as session `sid` for `agent` (or returns the one held), within the caps.
    fn admit_with(
        &self,
        sid: &str,
        agent: &str,
        counted: bool,
        now: i64,
        make: impl FnOnce() -> Session,
    ) -> Result<Arc<Mutex<Session>>, RpcError> {
        let limits = self.limits();
        self.sessions
            .admit(sid, agent, now, &limits, counted, make)
            .map_err(|r| refusal(agent, r))
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

    fn process_session(&self, req: &Request, raw: &mut Value, key: Option<&[u8; 32]>) -> Decided {
        let id = req.id.clone();
        let fail = |e: RpcError| Decided {
            response: Response::error(id.clone(), e),
            traces: Vec::new(),
            logged: None,
            durable: None,
        };
        let p = &req.params;
        let proto = &self.options.protocol;
        let sid = p.metadata.session_id.as_str();
        if let Some(k) = key {
            if let Err(e) = crypto::verify(k, &*raw) {
                return fail(RpcError::signature_invalid(e.to_string()));
            }
        }
        let hook = if req.method == "handshake/hello" {
            None
        } else {
            match fields::hook(&req.method) {
                Some(h) => Some(h),
                None => return fail(RpcError::method_not_found(&req.method)),
            }
        };
        // A payload its hook's table refuses is never decided (nor does it open a session).
        if let Some(h) = hook {
            if let Err(e) = crate::acs::payload::check(h, &p.payload) {
                return fail(RpcError::invalid_params(
                    &format!("params.{}", e.path),
                    e.why,
                ));
            }
        }
        // Facts from other sessions, read before this session is locked (one lock at a time).
        let child_info = match req.method.as_str() {
            "steps/subagentStop" => p
                .payload
                .get("subagent_session_id")
                .and_then(Value::as_str)
                .map(|c| (c.to_string(), self.session_facts(c))),
            _ => None,
        };
        // A request refused for want of a handshake allocates nothing: only a hello (or, in
        // the lenient mode, any hook) opens a session.
        let lease = match self.hold(sid) {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        // One table lookup on the common path; the journal is asked only for an unknown id.
        let (session, fresh) = match self.sessions.get(sid) {
            Some(s) => (s, false),
            None => match self.restore_returning(sid) {
                Some(Ok(s)) => (s, false),
                Some(Err(e)) => return fail(e),
                None if hook.is_some() && proto.require_handshake => {
                    return fail(handshake_required(&req.method))
                }
                None => match self.admit_new(sid, &p.metadata.agent_id, hook.is_none()) {
                    Ok(s) => (s, true),
                    Err(e) => return fail(e),
                },
            },
        };
        let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
        match (s.lease, lease) {
            (None, l) => s.lease = l,
            // This copy was decided under an older lease, and the Guardian has since taken the
            // session again (and restored a new copy): nothing decided on it may commit.
            (Some(had), Some(now)) if had != now => {
                return fail(
                    RpcError::internal(
                        "the session changed hands while this request waited; send it again",
                    )
                    .with_data("reason", "lease_lost"),
                )
            }
            _ => {}
        }
        s.last_active_ms = time::now_ms();
        if s.sealed {
            return fail(RpcError::session_refused(
                "the session has ended and its audit chain is sealed",
            ));
        }
        if let Some(why) = &s.refused {
            return fail(RpcError::session_refused(why.clone()));
        }
        let Some(hook) = hook else {
            return match self.hello(&mut s, p) {
                Ok(r) => Decided {
                    response: Response::result(id, r),
                    traces: Vec::new(),
                    logged: None,
                    durable: None,
                },
                Err(e) => {
                    // A refused hello leaves nothing behind.
                    if fresh && s.negotiated.is_none() && s.chain.len == 0 {
                        drop(s);
                        self.sessions.remove(sid);
                    }
                    fail(e)
                }
            };
        };
        match &s.negotiated {
            None if proto.require_handshake => return fail(handshake_required(&req.method)),
            Some(n) if !n.allows(&req.method) => {
                return fail(RpcError::capability_not_negotiated(&req.method))
            }
            _ => {}
        }
        let time_ms = time::rfc3339_unix_ms(&p.timestamp);
        let now = time::now_ms();
        if let (Some(w), Some(t)) = (proto.skew_window_ms, time_ms) {
            if now.abs_diff(t) > w {
                return fail(RpcError::timestamp_out_of_window(
                    format!(
                        "timestamp {} is {} ms from the Guardian's clock",
                        p.timestamp,
                        now - t
                    ),
                    w,
                ));
            }
        }
        let id_key = protocol::id_key(&p.request_id);
        let nonce_key = p.nonce.as_deref().map(protocol::hash_key);
        if proto.replay_protection {
            s.window.prune(now, proto.skew_window_ms);
            match s.window.check(
                id_key,
                nonce_key,
                proto.caps.max_request_ids,
                proto.skew_window_ms.is_some(),
            ) {
                Ok(()) => {}
                Err(protocol::Replay::DuplicateId) => {
                    return fail(RpcError::replay_detected(format!(
                        "request_id {} was already used in this session",
                        p.request_id
                    )))
                }
                Err(protocol::Replay::DuplicateNonce) => {
                    return fail(RpcError::replay_detected(
                        "the nonce was already used in this session",
                    ))
                }
                Err(protocol::Replay::Full) => {
                    return fail(RpcError::session_refused(format!(
                        "more than {} requests within the skew window",
                        proto.caps.max_request_ids
                    )))
                }
            }
        }
        let active = self.active();
        let program = &active.program;
        let state = s.state.get_or_insert_with(|| SessionState::new(program));
        if state.nodes.len() > proto.caps.max_nodes
            || state.history_keys() > proto.caps.max_history_keys
        {
            let why = format!(
                "the session went over its memory caps ({} provenance nodes, {} history, effect and approval keys)",
                proto.caps.max_nodes, proto.caps.max_history_keys
            );
            s.refused = Some(why.clone());
            return fail(RpcError::session_refused(why));
        }
        // A subagent's summary carries back everything that entered the subagent's context.
        let extra_labels = match &child_info {
            Some((_, Some(f))) => f.labels,
            Some((_, None)) => program.unknown_labels,
            None => 0,
        };
        // Lent out of the request for the decision and put back after it (the audit entry and
        // the journal record read the request whole): a copy of it cost more than the rest of
        // the event's setup.
        let metadata = params_metadata_mut(raw)
            .map(Value::take)
            .unwrap_or_else(|| serde_json::to_value(&p.metadata).unwrap_or(Value::Null));
        // A wrapped MCP `tools/call` is decided as the tool call it is, a wrapped MCP result
        // as the tool result it is.
        let mcp_view;
        let mut mcp_wrapped = None;
        let (hook, payload) = match mcp_view_of(hook, &p.payload, &p.request_id) {
            Some((h, view)) => {
                mcp_wrapped = Some(hook.method);
                mcp_view = view;
                (h, &mcp_view)
            }
            None => (hook, &p.payload),
        };
        let ev = Event {
            method: hook.method,
            request_id: &p.request_id,
            payload,
            metadata: &metadata,
            time_ms,
            extra_labels,
            wrapped_method: mcp_wrapped,
        };
        let mut failed = false;
        let logging = self.decision_log.get().is_some();
        let (outcome, arguments) = if logging {
            engine::decide_event_logged(program, hook, state, &ev, self.options.explain)
        } else {
            (
                decide_event(program, hook, state, &ev, self.options.explain),
                None,
            )
        };
        if let Some(slot) = params_metadata_mut(raw) {
            *slot = metadata;
        }
        let mut logged = logging.then(|| Logged {
            tool: payload
                .pointer("/tool/name")
                .and_then(Value::as_str)
                .map(String::from),
            arguments,
            fired: Vec::new(),
            unverified_claims: Vec::new(),
        });
        let (mut result, traces, proceeds, approval, effect_outcome) = match outcome {
            Ok(decision) => {
                if let Some(l) = &mut logged {
                    l.fired = decision.fired.clone();
                    l.unverified_claims = decision.unverified_claims.clone();
                }
                let traces = decision.trace.clone();
                let mut result = decision.to_result(&p.request_id);
                if self.options.explain {
                    result.policy_data.insert(
                        "warden".into(),
                        explain::to_json(&decision, &traces, program, &active.sources),
                    );
                }
                let proceeds = decision.proceeds();
                (
                    result,
                    traces,
                    proceeds,
                    decision.approval,
                    decision.effect_outcome,
                )
            }
            Err(e) => match self.failure(id.clone(), &p.request_id, hook, &e) {
                Ok(result) => {
                    failed = true;
                    (result, Vec::new(), false, None, None)
                }
                Err(response) => {
                    // The content that entered with the failed step is journalled too.
                    let record = Record::Step {
                        session: sid.to_string(),
                        method: req.method.clone(),
                        params: raw.get("params").cloned().unwrap_or(Value::Null),
                        proceeds: false,
                        failed: true,
                        extra_labels,
                        entries: Vec::new(),
                        approval: None,
                        at_ms: Some(time::now_ms()),
                    };
                    let records = self.with_hello(&mut s, sid, record);
                    let durable = self.submit_as(records, s.lease);
                    return Decided {
                        response,
                        traces: Vec::new(),
                        logged,
                        durable,
                    };
                }
            },
        };
        if proto.replay_protection {
            s.window.insert(
                time_ms.unwrap_or(now),
                id_key,
                nonce_key,
                proto.caps.max_request_ids,
            );
        }
        let params = raw.get("params").unwrap_or(&Value::Null);
        let mut entries = Vec::new();
        if proto.audit {
            if s.chain.len > 0 && s.policy_digest.as_deref() != Some(&*active.digest) {
                let e = audit::reload_entry(
                    s.chain.next_id(sid),
                    s.policy_digest.as_deref(),
                    &active.digest,
                    time::now_rfc3339(),
                );
                entries.push(s.chain.append(e));
            }
            // The method as it arrived (a wrapped MCP step is recorded as itself, not as the
            // view it was decided as), as the journal record below.
            let mut e = audit::step_entry(
                s.chain.next_id(sid),
                &req.method,
                params,
                result.decision.as_str(),
            );
            if s.chain.len == 0 {
                if let (Some(parent), Some(link)) = (&s.parent, &s.parent_link) {
                    e.insert("parent_session_id".into(), Value::String(parent.clone()));
                    e.insert("parent_chain_hash".into(), Value::String(link.clone()));
                }
            }
            let claimed = |k: &str| p.payload.get(k).and_then(Value::as_str);
            match hook.method {
                "steps/subagentStop" => {
                    let head = child_info
                        .as_ref()
                        .and_then(|(_, f)| f.as_ref())
                        .and_then(|f| f.head.clone());
                    if let (Some(c), Some(h)) = (claimed("final_chain_hash"), &head) {
                        if c != h {
                            push_code(&mut result, "chain_mismatch");
                        }
                    }
                    e.insert(
                        "subagent_chain_hash".into(),
                        head.map(Value::String).unwrap_or(Value::Null),
                    );
                }
                "steps/postCompact" | "steps/sessionEnd" => {
                    let k = if hook.method == "steps/postCompact" {
                        "pre_compact_chain_hash"
                    } else {
                        "final_chain_hash"
                    };
                    if let Some(c) = claimed(k) {
                        if Some(c) != s.chain.head.as_deref() {
                            push_code(&mut result, "chain_mismatch");
                        }
                    }
                }
                _ => {}
            }
            match &approval {
                Some(ApprovalNote::Asked { approval, .. }) => {
                    e.insert("action_hash".into(), approval.action_hash.clone().into());
                }
                Some(ApprovalNote::Consumed { id, action_hash }) => {
                    e.insert("action_hash".into(), action_hash.clone().into());
                    e.insert("approval_consumed".into(), id.clone().into());
                }
                None => {}
            }
            if let Some(outcome) = &effect_outcome {
                e.insert("effect_outcome".into(), outcome.clone());
            }
            entries.push(s.chain.append(e));
            result.chain_hash = s.chain.head.clone();
        }
        s.policy_digest = Some(active.digest.clone());
        // The params move into the record: nothing reads the raw request after this.
        let params = raw
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let record = Record::Step {
            session: sid.to_string(),
            method: req.method.clone(),
            params,
            proceeds,
            failed,
            extra_labels,
            entries,
            approval,
            at_ms: Some(time::now_ms()),
        };
        // Journalled under the session's lock, so the journal holds each session's steps in
        // the order they were decided; the answer waits for the commit (`Pending`).
        let records = self.with_hello(&mut s, sid, record);
        let durable = self.submit_as(records, s.lease);
        if proceeds {
            if let (Some((_, Some(child))), Some(state)) = (&child_info, s.state.as_mut()) {
                state.merge_effects(&child.effects);
            }
        }
        self.after_step(
            &mut s,
            sid,
            hook.method,
            &p.payload,
            proceeds,
            time::now_ms(),
        );
        drop(s);
        Decided {
            response: Response::result(id, result),
            traces,
            durable,
            logged,
        }
    }

    /// What a decided step does to the session besides its state: spawning a subagent's
    /// session, sealing at `sessionEnd`.
    fn after_step(
        &self,
        s: &mut Session,
        sid: &str,
        method: &str,
        payload: &Value,
        proceeds: bool,
        now_ms: i64,
    ) {
        if proceeds && method == "steps/subagentStart" {
            s.family = true;
            if !s.detached {
                self.spawn_child(sid, s, payload);
            }
        }
        if method == "steps/sessionEnd" {
            s.sealed = true;
            s.sealed_at_ms = now_ms;
            self.sessions.note_sealed(sid, now_ms);
            s.final_labels = s.state.as_ref().map(|st| st.scalars.session_labels);
            s.final_effects = s
                .state
                .as_ref()
                .map(|st| st.changed_effects())
                .unwrap_or_default();
            s.state = None;
            s.window = ReplayWindow::default();
        }
    }

    fn journal(&self, records: Vec<Record>) -> Result<(), String> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        j.append(records).map_err(|e| {
            self.failed.store(true, Ordering::SeqCst);
            format!("the decision could not be made durable: {e}")
        })
    }

    /// Hands a session's records, decided under the lease token `lease`, to the journal
    /// without waiting: the answer waits on the [`Durable`]. `None`: there is no journal,
    /// nothing to wait for.
    fn submit_as(&self, records: Vec<Record>, lease: Option<i64>) -> Option<Durable> {
        self.journal.as_ref().map(|j| j.submit_as(records, lease))
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

    /// Answers a ClientHello with the ServerHello. Nothing is journalled yet: the handshake
    /// goes with the session's first step ([`Guardian::with_hello`]).
    fn hello(
        &self,
        s: &mut Session,
        p: &envelope::Params,
    ) -> Result<envelope::AcsResult, RpcError> {
        if s.negotiated.is_some() {
            return Err(RpcError::session_refused(
                "the session is already negotiated (ACS v0.1 has no renegotiation)",
            ));
        }
        let (negotiated, hello) =
            protocol::negotiate(&self.options.protocol, &p.payload, is_known_method)?;
        s.hello = Some((time::now_ms(), self.policy_digest()));
        s.negotiated = Some(Arc::new(negotiated));
        let mut r = Decision::simple(DecisionKind::Allow, "", "handshake accepted".into())
            .to_result(&p.request_id);
        r.reason_codes.clear();
        r.payload = Some(hello);
        Ok(r)
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
    fn hold(&self, sid: &str) -> Result<Option<i64>, RpcError> {
        let Some(j) = &self.journal else {
            return Ok(None);
        };
        match j.claim(sid) {
            Claim::Held { token } => Ok(token),
            Claim::Taken { token } => {
                self.sessions.remove(sid);
                Ok(Some(token))
            }
            Claim::Busy {
                holder,
                expires_in_ms,
            } => {
                // Whatever this Guardian still holds of the session is stale now.
                self.sessions.remove(sid);
                Err(RpcError::session_refused(format!(
                    "Guardian {holder:?} holds this session's lease: send the request there (or \
                 retry once the lease expires, in about {} ms)",
                    expires_in_ms.max(0)
                ))
                .with_data("reason", "lease_held")
                .with_data("holder", holder)
                .with_data("retry_after_ms", expires_in_ms.max(0)))
            }
            Claim::Failed(e) => Err(RpcError::internal(format!(
                "the session's lease could not be taken: {e}"
            ))),
        }
    }

    /// Takes `sid`'s lease for an operator's change made outside a request (`warden effects
    /// resolve` beside a live fleet), or says why not: another Guardian holds the session (the
    /// change belongs on that Guardian's operator endpoint) or the lease could not be read.
    /// Without leases (one Guardian's own journal) it always succeeds.
    pub fn take_session(&self, sid: &str) -> Result<(), String> {
        self.hold(sid).map(|_| ()).map_err(|e| rpc_detail(&e))
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
        let (labels, effects) = match &s.state {
            Some(st) => (st.scalars.session_labels, st.changed_effects()),
            None => (s.final_labels?, s.final_effects.clone()),
        };
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
            .map_err(|e| ApproveError::Journal(rpc_detail(&e)))?;
        let session = match self.existing_session(&sid) {
            Some(s) => s,
            None => match self.restore_returning(&sid) {
                Some(Ok(s)) => s,
                Some(Err(e)) => return Err(ApproveError::Journal(rpc_detail(&e))),
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

    /// Rebuilds sessions from journal records (in the order they were written), without
    /// writing them again: each committed step's effect on the state is re-applied (the
    /// policy's rules are not re-run; the journal says whether the step went ahead), the
    /// replay window, negotiation, chain head and seal are restored. Exact when the policy
    /// is the one the records were decided on. The journal may come in consecutive chunks (one
    /// call each); ended sessions past their tombstone time leave memory as it goes, idle ones
    /// at [`Guardian::sweep_sessions`] after the last chunk.
    pub fn restore(&self, records: impl IntoIterator<Item = Record>) -> usize {
        let now = time::now_ms();
        let proto = &self.options.protocol;
        let mut n = 0;
        for record in records {
            n += 1;
            // Restored whatever the caps say (the journal holds what was admitted).
            // A policy reload belongs to no session.
            let Some(sid) = record.session() else {
                continue;
            };
            let agent = record.agent().unwrap_or("");
            let at_ms = record.at_ms().unwrap_or(now);
            let Ok(session) = self.admit(sid, agent, false, at_ms) else {
                continue;
            };
            let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
            self.restore_record(&mut s, record, now);
        }
        if let Some(w) = proto.skew_window_ms {
            for (_, s) in self.sessions.entries() {
                s.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .window
                    .prune(now, Some(w));
            }
        }
        // Ended sessions past their tombstone time leave as the restore goes; idle ones
        // only when the caller says the journal is done (`sweep_sessions`), since a later
        // record may still continue them.
        self.sessions.sweep_tombstones(now, &self.limits());
        n
    }

    /// A session that left memory and comes back: rebuilt from its own records in the
    /// journal (outside the table, so no request sees it half-built), then admitted like a
    /// new session. `None`: the journal has nothing for it (or cannot look it up).
    fn restore_returning(&self, sid: &str) -> Option<Result<Arc<Mutex<Session>>, RpcError>> {
        let records = match self.journal.as_ref()?.session_records(sid)? {
            Ok(r) if r.is_empty() => return None,
            Ok(r) => r,
            Err(e) => {
                return Some(Err(RpcError::internal(format!(
                    "the session's records could not be read from the journal: {e}"
                ))))
            }
        };
        let s = self.rebuild(records);
        let agent = s.agent.clone();
        let sealed_at = s.sealed.then_some(s.sealed_at_ms);
        let last_active = s.last_active_ms;
        let admitted = self.admit_with(sid, &agent, true, last_active, move || s);
        if let (Ok(_), Some(at)) = (&admitted, sealed_at) {
            self.sessions.note_sealed(sid, at);
        }
        Some(admitted)
    }

    /// A session rebuilt from its own records, outside the table.
    fn rebuild(&self, records: Vec<Record>) -> Session {
        let now = time::now_ms();
        let agent = records.iter().find_map(Record::agent).unwrap_or("");
        let mut s = Session {
            detached: true,
            agent: Arc::from(agent),
            ..Session::default()
        };
        for r in records {
            self.restore_record(&mut s, r, now);
        }
        s.detached = false;
        s.window.prune(now, self.options.protocol.skew_window_ms);
        s
    }

    /// Compacts an ended session whose tombstone left memory: its records are replaced by
    /// one [`Record::Sealed`] that keeps its audit chain and what its tombstone held. Only a
    /// session outside any subagent family (whose records others' restores read) is
    /// compacted. Returns whether it was.
    /// The one record that replaces an ended session's records (`None`: nothing to compact:
    /// no journal, already compacted, not ended, or part of a subagent family).
    fn compact_summary(&self, sid: &str) -> Option<Record> {
        let journal = self.journal.as_ref()?;
        let records = match journal.session_records(sid) {
            Some(Ok(r)) => r,
            _ => return None,
        };
        if records.is_empty() || matches!(records[..], [Record::Sealed { .. }]) {
            return None;
        }
        let entries: Vec<Value> = journal::chains(&records)
            .into_iter()
            .flat_map(|(_, e)| e)
            .collect();
        let s = self.rebuild(records);
        if !s.sealed || s.family {
            return None;
        }
        Some(Record::Sealed {
            session: sid.to_string(),
            agent: Some(s.agent.to_string()).filter(|a| !a.is_empty()),
            at_ms: s.sealed_at_ms,
            labels: s.final_labels.unwrap_or(0),
            entries,
        })
    }

    /// Re-applies one journal record to a session (restart and returning sessions alike).
    /// Ages come from the records, so a restart does not make old sessions young.
    fn restore_record(&self, s: &mut Session, record: Record, now: i64) {
        let active = self.active();
        let program = &active.program;
        let proto = &self.options.protocol;
        // As when it was decided, a subagent's effect changes reach its parent at the stop.
        let child_effects = match &record {
            Record::Step {
                method,
                params,
                proceeds: true,
                ..
            } if method == "steps/subagentStop" => params
                .pointer("/payload/subagent_session_id")
                .and_then(Value::as_str)
                .and_then(|c| self.session_facts(c))
                .map(|f| f.effects),
            _ => None,
        };
        let at_ms = record.at_ms().unwrap_or(now);
        s.last_active_ms = at_ms;
        match record {
            // Guardian-wide: nothing of a session's.
            Record::PolicyReload { .. } => {}
            Record::Sealed {
                session,
                labels,
                entries,
                at_ms,
                ..
            } => {
                restore_chain(s, &entries);
                s.sealed = true;
                s.sealed_at_ms = at_ms;
                s.final_labels = Some(labels);
                s.state = None;
                s.window = ReplayWindow::default();
                s.compacted = true;
                self.sessions.note_sealed(&session, at_ms);
            }
            Record::Handshake {
                negotiated, policy, ..
            } => {
                s.negotiated = Some(Arc::new(negotiated));
                if let Some(d) = policy {
                    s.policy_digest = Some(Arc::from(d));
                }
            }
            Record::EffectResolved {
                key, to, entries, ..
            } => {
                restore_chain(s, &entries);
                if let (Some(state), Some(to)) =
                    (s.state.as_mut(), crate::state::EffectStatus::parse(&to))
                {
                    state.resolve_effect(&key, to);
                }
            }
            Record::ApprovalGranted {
                request_id,
                at_ms,
                entries,
                ..
            } => {
                restore_chain(s, &entries);
                if let Some(state) = s.state.as_mut() {
                    state.grant(&request_id, at_ms);
                }
            }
            Record::Step {
                session: sid,
                method,
                params,
                proceeds,
                failed,
                extra_labels,
                entries,
                approval,
                ..
            } => {
                let Some(hook) = fields::hook(&method) else {
                    return;
                };
                let payload = params.get("payload").unwrap_or(&Value::Null);
                let metadata = params.get("metadata").unwrap_or(&Value::Null);
                let request_id = params
                    .get("request_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let timestamp = params.get("timestamp").and_then(Value::as_str);
                let time_ms = timestamp.and_then(time::rfc3339_unix_ms);
                if proto.replay_protection {
                    s.window.insert(
                        time_ms.unwrap_or(now),
                        protocol::id_key(request_id),
                        params
                            .get("nonce")
                            .and_then(Value::as_str)
                            .map(protocol::hash_key),
                        proto.caps.max_request_ids,
                    );
                }
                restore_chain(s, &entries);
                if s.policy_digest.is_none() {
                    s.policy_digest = Some(active.digest.clone());
                }
                // As when it was decided: a wrapped MCP `tools/call` as its tool call.
                let mcp_view;
                let mut mcp_wrapped = None;
                let (hook, view) = match mcp_view_of(hook, payload, request_id) {
                    Some((h, v)) => {
                        mcp_wrapped = Some(hook.method);
                        mcp_view = v;
                        (h, &mcp_view)
                    }
                    None => (hook, payload),
                };
                let ev = Event {
                    method: hook.method,
                    request_id,
                    payload: view,
                    metadata,
                    time_ms,
                    extra_labels,
                    wrapped_method: mcp_wrapped,
                };
                let state = s.state.get_or_insert_with(|| SessionState::new(program));
                if proceeds {
                    reapply_event(program, state, &ev);
                } else if failed {
                    taint_event(program, state, &ev);
                }
                if let Some(note) = &approval {
                    state.apply_approval(note);
                }
                if let Some(effects) = &child_effects {
                    state.merge_effects(effects);
                }
                self.after_step(s, &sid, hook.method, payload, proceeds, at_ms);
            }
        }
    }
}

/// Whether a session whose wait in a retirement queue ran out leaves memory: an ended
/// session's tombstone after the skew window; a live one after the idle time without a
/// request, unless it belongs to a subagent family.
impl sessions::Retire for Session {
    fn verdict(
        &self,
        now: i64,
        sealed_queue: bool,
        limits: &sessions::Limits,
    ) -> sessions::Verdict {
        let s = self;
        use sessions::Verdict;
        let tombstone = limits.tombstone_ms.unwrap_or(0) as i64;
        if s.sealed {
            let due = s.sealed_at_ms.saturating_add(tombstone);
            return if sealed_queue || due <= now {
                // Outside a subagent family, its records can be compacted.
                if s.family || s.compacted {
                    Verdict::Remove
                } else {
                    Verdict::RemoveAndList
                }
            } else {
                Verdict::Keep(due)
            };
        }
        if sealed_queue {
            return Verdict::Keep(now);
        }
        let Some(idle) = limits.idle_ms else {
            return Verdict::Keep(i64::MAX);
        };
        let due = s.last_active_ms.saturating_add(idle as i64);
        if s.family {
            // Re-examined once per idle period; it leaves when it ends.
            Verdict::Keep(now.saturating_add(idle as i64))
        } else if due <= now {
            Verdict::Remove
        } else {
            Verdict::Keep(due)
        }
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
        Diagnostic::error("load::unreadable", file, Default::default(), message)
            .with_help("check the path"),
    );
    d
}

/// The -32000 of a session the table would not admit.
fn refusal(agent: &str, r: sessions::Refusal) -> RpcError {
    RpcError::session_refused(match r {
        sessions::Refusal::Full(n) => format!("this Guardian holds its maximum of {n} sessions"),
        sessions::Refusal::AgentFull(n) => {
            format!("agent {agent:?} holds its maximum of {n} sessions on this Guardian")
        }
    })
}

fn handshake_required(method: &str) -> RpcError {
    RpcError::capability_not_negotiated(method)
        .with_data("reason", "handshake_required")
        .with_data("message", "handshake/hello must come first in a session")
}

/// Moves a restored session's chain head over journalled entries.
fn restore_chain(s: &mut Session, entries: &[Value]) {
    for e in entries {
        s.chain.head = e
            .get("entry_hash")
            .and_then(Value::as_str)
            .map(str::to_string);
        s.chain.len += 1;
        if e.get("step_type").and_then(Value::as_str) == Some(audit::POLICY_RELOAD) {
            s.policy_digest = e
                .get("policy_digest")
                .and_then(Value::as_str)
                .map(Arc::from);
        }
    }
}

fn push_code(r: &mut envelope::AcsResult, code: &str) {
    if !r.reason_codes.iter().any(|c| c == code) {
        r.reason_codes.push(code.to_string());
    }
}

fn too_large(len: usize, max: usize) -> RpcError {
    RpcError::invalid_request(format!(
        "the envelope is {len} bytes; this Guardian accepts at most {max}"
    ))
    .with_data("reason", "envelope_too_large")
    .with_data("max_envelope_bytes", max as u64)
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

/// A wrapped MCP tool call's method.
const MCP_TOOLS_CALL: &str = "protocols/MCP/tools/call";
/// A wrapped MCP result's method (Warden's extension; docs/mcp.md).
const MCP_RESULT: &str = "protocols/MCP/result";

/// Methods the Guardian answers: every hook, plus ping and the handshake.
pub fn is_known_method(m: &str) -> bool {
    fields::hook(m).is_some() || m == "system/ping" || m == "handshake/hello"
}

/// The view a wrapped MCP message is decided as, if any. The toolCallRequest view of a wrapped MCP `tools/call`: `params.name` is the tool, each of
/// `params.arguments` an argument (with its provenance when the platform gave one as
/// `{value, provenance}`). Rules written `on toolCallRequest` decide MCP calls too.
fn mcp_view_of(
    hook: &'static fields::HookSpec,
    payload: &Value,
    request_id: &str,
) -> Option<(&'static fields::HookSpec, Value)> {
    match hook.method {
        MCP_TOOLS_CALL => mcp_tool_call_view(payload),
        MCP_RESULT => mcp_result_view(payload, request_id),
        _ => None,
    }
}

/// The toolCallResult view of a wrapped MCP result (`protocols/MCP/result`, Warden's
/// extension: the MCP response message, with the MCP request it answers in `request` and
/// the wrapped request's ACS `request_id_ref`), for the methods whose results are content:
/// each content item of a `tools/call` result, each of a `resources/read`'s `contents`, each
/// of a `prompts/get`'s `messages`, or the error, is an output with `tool_output` provenance
/// whose `source_id` is the tool (or the MCP method). The results of other methods (an
/// `initialize`, a `tools/list`) are decided on `protocols/MCP/result` alone and bring no
/// content into the session. The ids are derived from the step's `request_id`, so a replay
/// of the journal rebuilds the same nodes.
fn mcp_result_view(
    payload: &Value,
    request_id: &str,
) -> Option<(&'static fields::HookSpec, Value)> {
    let request = payload.get("request");
    let method = request
        .and_then(|r| r.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if !matches!(method, "tools/call" | "resources/read" | "prompts/get") {
        return None;
    }
    let params = request.and_then(|r| r.get("params"));
    let tool = match method {
        "tools/call" => params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("unknown"),
        other => other,
    };
    let result = payload.get("result");
    let error = payload.get("error");
    let items: Vec<Value> = match (method, result, error) {
        (_, _, Some(e)) => vec![e.clone()],
        ("tools/call", Some(r), None) => {
            let mut v: Vec<Value> = r
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(s) = r.get("structuredContent") {
                v.push(s.clone());
            }
            v
        }
        ("resources/read", Some(r), None) => r
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        ("prompts/get", Some(r), None) => r
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let failed = error.is_some()
        || result
            .and_then(|r| r.get("isError"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let ref_id = payload.get("request_id_ref").and_then(Value::as_str);
    let outputs: Vec<Value> = items
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            serde_json::json!({"value": value, "provenance": {
                "provenance_id": format!("{request_id}:mcp-output:{i}"),
                "origin": "tool_output",
                "source_id": tool,
            }})
        })
        .collect();
    let mut view = payload.as_object().cloned().unwrap_or_default();
    let mut tool_obj = serde_json::json!({"name": tool, "provider": "mcp"});
    if method == "resources/read" {
        if let Some(uri) = params.and_then(|p| p.get("uri")) {
            view.insert("operation".into(), uri.clone());
        }
        tool_obj["name"] = Value::String("resources/read".into());
    }
    view.insert("tool".into(), tool_obj);
    view.insert(
        "exit_status".into(),
        Value::String(if failed { "failure" } else { "success" }.into()),
    );
    view.insert("outputs".into(), Value::Array(outputs));
    if let Some(r) = ref_id {
        view.insert("request_id_ref".into(), Value::String(r.into()));
    }
    Some((fields::hook("steps/toolCallResult")?, Value::Object(view)))
}

/// See [`mcp_view_of`].
fn mcp_tool_call_view(payload: &Value) -> Option<(&'static fields::HookSpec, Value)> {
    let params = payload.get("params");
    let name = params
        .and_then(|p| p.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let arguments: serde_json::Map<String, Value> = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object)
        .map(|args| {
            args.iter()
                .map(|(k, v)| {
                    let wrapped = match v {
                        Value::Object(o)
                            if o.contains_key("value") && o.contains_key("provenance") =>
                        {
                            v.clone()
                        }
                        other => serde_json::json!({"value": other}),
                    };
                    (k.clone(), wrapped)
                })
                .collect()
        })
        .unwrap_or_default();
    // The MCP payload itself stays, so rules written `on protocols/MCP/tools/call` read
    // `params…` from the same payload the toolCallRequest rules read `tool` and `args` from.
    let mut view = payload.as_object().cloned().unwrap_or_default();
    view.insert(
        "tool".into(),
        serde_json::json!({"name": name, "provider": "mcp"}),
    );
    view.insert("arguments".into(), Value::Object(arguments));
    Some((fields::hook("steps/toolCallRequest")?, Value::Object(view)))
}

/// An error's `data.message` (its detail), or its title.
fn rpc_detail(e: &RpcError) -> String {
    e.data
        .as_ref()
        .and_then(|d| d.get("message"))
        .and_then(Value::as_str)
        .unwrap_or(&e.message)
        .to_string()
}

/// The request tree's `params.metadata` (what `pointer_mut("/params/metadata")` finds, without
/// parsing a pointer and allocating its parts for every request).
fn params_metadata_mut(raw: &mut Value) -> Option<&mut Value> {
    raw.as_object_mut()?
        .get_mut("params")?
        .as_object_mut()?
        .get_mut("metadata")
}
