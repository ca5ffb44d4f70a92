//! `warden serve`, `warden audit verify` and `warden hook`: thin layers over
//! `server::{serve, store, operator}` and `adapters::core_agent`.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use crate::adapters::core_agent as hook;
use crate::guardian::{self, Guardian, OnDecisionFailure, Options, Protocol};
use crate::server::backend::{self, Backend};
use crate::server::{decision_log, operator, serve, stop, watch};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The policy (default: the embedded default policy)
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Serve JSON-RPC on standard input and output (the default)
    #[arg(long, conflicts_with = "listen")]
    stdio: bool,
    /// Serve HTTP on this loopback address, e.g. 127.0.0.1:8700 (port 0: any free port; the
    /// bound address is printed on stderr)
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Keep sessions and the audit chain in this folder (restored on restart), or in a
    /// PostgreSQL database: postgres://USER@HOST[:PORT]/DB (docs/serve.md, "PostgreSQL")
    #[arg(long, value_name = "DIR|URL")]
    state: Option<PathBuf>,
    /// With `--state postgres://…`: this Guardian's name in the session leases it holds,
    /// named to requests that reach another Guardian (default HOST:PORT with a fixed
    /// --listen port, HOST:pid-PID otherwise; docs/serve.md, "Fleet")
    #[arg(long, value_name = "NAME")]
    guardian_id: Option<String>,
    /// With `--state postgres://…`: how long a session's lease lasts unless renewed, in
    /// milliseconds; a session whose Guardian died moves to another after this long
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..))]
    lease_ms: u64,
    /// Recompile the policy when it changes and swap it in if it checks
    #[arg(long, requires = "policy")]
    watch: bool,
    /// With --watch: how long the policy's folder must be quiet (no write, no close) before
    /// its files are read, and the interval between the two reads that must agree
    #[arg(long, value_name = "MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..))]
    watch_debounce_ms: u64,
    /// File holding the HMAC input keying material: every request must be signed with the
    /// per-session key derived from it, and every response is signed
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// `key_id` on the signatures Warden makes
    #[arg(long, default_value = "warden")]
    key_id: String,
    /// Accepted clock skew of request timestamps, in milliseconds
    #[arg(long, default_value_t = guardian::protocol::DEFAULT_SKEW_WINDOW_MS)]
    skew_window_ms: u64,
    /// Refuse clients whose handshake says provenance_producer "none" (-32002)
    #[arg(long)]
    require_provenance: bool,
    /// Accept hook traffic without a prior handshake (as `warden replay` does)
    #[arg(long)]
    no_handshake: bool,
    /// What a decision failure answers: a deny (default) or a JSON-RPC -32603 error
    #[arg(long, value_enum, default_value_t = FailureArg::Deny)]
    on_decision_failure: FailureArg,
    /// Largest envelope accepted, in bytes
    #[arg(long, default_value_t = 1 << 20)]
    max_envelope_bytes: usize,
    /// Sessions held at once; a handshake beyond it is refused (-32000)
    #[arg(long, default_value_t = guardian::Caps::default().max_sessions)]
    max_sessions: usize,
    /// Sessions one agent (`metadata.agent_id`) may hold at once; a handshake beyond it is
    /// refused (-32000). Raise it when every session of the deployment shares one agent id
    #[arg(long, default_value_t = guardian::Caps::default().max_sessions_per_agent)]
    max_sessions_per_agent: usize,
    /// A session with no request for this many seconds leaves memory (0: never). With
    /// `--state` it is restored, chain and all, when it comes back; without, it is gone
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    idle_timeout: u64,
    /// A session that has only said hello leaves memory this many seconds after its hello
    /// unless it takes a step (0: only as an idle session)
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    hello_timeout: u64,
    /// Sessions that have only said hello held at once (at most half of --max-sessions and
    /// of --max-sessions-per-agent); a new hello beyond it drops the oldest
    #[arg(long, value_name = "N", default_value_t = guardian::Caps::default().max_hello_sessions)]
    max_hello_sessions: usize,
    /// Of those, the most one agent (`metadata.agent_id`) holds; beyond it, a hello of that
    /// agent drops that agent's own oldest one
    #[arg(long, value_name = "N", default_value_t = guardian::Caps::default().max_hellos_per_agent)]
    max_hellos_per_agent: usize,
    /// Attach explain traces to results
    #[arg(long)]
    explain: bool,
    /// Write one JSON record per decision (method, tool, masked arguments, decision, rules
    /// fired, policy digest, time taken) to a file (appended), `-` (stdout; with --listen
    /// only) or an http:// collector (batched POSTs of JSON lines; docs/serve.md)
    #[arg(long, value_name = "PATH|-|URL")]
    decision_log: Option<String>,
    /// With an http:// decision log: the most bytes of records queued for the collector
    /// (the batch being sent included); when full, the oldest records are dropped and counted
    #[arg(long, value_name = "BYTES", default_value_t = decision_log::QUEUE_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(4..))]
    decision_log_queue_bytes: usize,
    /// Also serve the operator endpoint (list and resolve effects, list and grant approvals)
    /// on this address: a separate listener from the agent-facing one (docs/serve.md)
    #[arg(long, value_name = "ADDR", requires = "operator_token_file")]
    operator_listen: Option<SocketAddr>,
    /// File holding the operator endpoint's bearer token (surrounding whitespace dropped)
    #[arg(long, value_name = "FILE", requires = "operator_listen")]
    operator_token_file: Option<PathBuf>,
    /// HTTP: milliseconds to send a request's headers, and to keep an idle keep-alive
    /// connection (the connection is closed beyond)
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// HTTP: milliseconds to send a request's body once its headers are in (408 beyond)
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout_ms: u64,
    /// HTTP: milliseconds from a request's headers to its answer (503 beyond), and the
    /// longest a client may leave the answer unread (the connection is closed)
    #[arg(long, value_name = "MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    request_timeout_ms: u64,
    /// HTTP: connections served at once (one more is answered 503 and closed)
    #[arg(long, value_name = "N", default_value_t = 960, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// HTTP: connections served at once from one IP address (one more is answered 503 and
    /// closed)
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_peer: u64,
}

impl ServeArgs {
    fn decision_log_bounds(&self) -> decision_log::Bounds {
        decision_log::Bounds {
            records: decision_log::QUEUE_CAPACITY,
            bytes: self.decision_log_queue_bytes,
        }
    }

    /// The HTTP listeners' time limits and connection caps.
    fn http_limits(&self) -> serve::HttpLimits {
        serve::HttpLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_connections_per_peer: usize::try_from(self.max_connections_per_peer)
                .unwrap_or(usize::MAX),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum FailureArg {
    Deny,
    Error,
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Verify every session's audit chain in a `--state` folder or database; report the first
    /// broken link
    Verify {
        /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
        #[arg(value_name = "DIR|URL")]
        dir: PathBuf,
        /// Print each session's head and length
        #[arg(long)]
        verbose: bool,
    },
    /// Print the audit chain of every session (or one) in a `--state` folder, an entry a line
    Show {
        #[command(flatten)]
        from: ChainSource,
    },
    /// Write the audit chains as JSON lines (each entry with its `session`), for a log store
    Export {
        #[command(flatten)]
        from: ChainSource,
    },
}

/// Where `audit show|export` reads the chains: a stopped server's state folder, or a running
/// server's operator endpoint.
#[derive(Args, Debug)]
pub struct ChainSource {
    /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
    #[arg(
        value_name = "DIR|URL",
        required_unless_present = "operator",
        conflicts_with = "operator"
    )]
    dir: Option<PathBuf>,
    /// Only this session
    #[arg(long)]
    session: Option<String>,
    /// A running server's operator endpoint instead, e.g. http://127.0.0.1:8701
    /// (`warden serve --state DIR --operator-listen ADDR`)
    #[arg(long, value_name = "URL", requires = "operator_token_file")]
    operator: Option<String>,
    /// File holding the operator endpoint's bearer token
    #[arg(long, value_name = "FILE", requires = "operator")]
    operator_token_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum EffectsCommand {
    /// List every session's effect keys and their states (docs/effects.md)
    List {
        /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
        #[arg(long, value_name = "DIR|URL")]
        state: PathBuf,
        /// The policy the server runs (default: the embedded default)
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Resolve an effect key to committed or failed, lifting the ambiguous lock
    Resolve {
        /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
        #[arg(long, value_name = "DIR|URL")]
        state: PathBuf,
        /// The policy the server runs (default: the embedded default)
        #[arg(long)]
        policy: Option<PathBuf>,
        /// The session id
        session: String,
        /// The effect key, as `warden effects list` prints it
        key: String,
        /// What happened
        outcome: Outcome,
    },
}

#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
    #[arg(long, value_name = "DIR|URL")]
    pub state: PathBuf,
    /// The policy the server runs (default: the embedded default)
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The request id of the ask to grant (`policy_data.approval.request_id` of the answer)
    pub request_id: String,
    /// Who grants it: must be the ask's approver id
    #[arg(long = "as", value_name = "APPROVER")]
    pub approver: String,
}

#[derive(Args, Debug)]
pub struct ApprovalsArgs {
    /// The state folder of a (stopped) `warden serve --state DIR`, or its postgres:// URL
    #[arg(long, value_name = "DIR|URL")]
    pub state: PathBuf,
    /// The policy the server runs (default: the embedded default)
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Text,
    Json,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Outcome {
    Committed,
    Failed,
}

/// Restores a stopped server's state folder under its policy, for the operator commands.
fn open_state(
    dir: &std::path::Path,
    policy: Option<&std::path::Path>,
) -> Result<(Arc<Guardian>, Option<Arc<Backend>>), i32> {
    match Backend::exists(dir) {
        Ok(true) => {}
        Ok(false) => {
            return Err(fail(&format!(
                "{}: no Warden state here",
                backend::describe(dir)
            )))
        }
        Err(e) => return Err(fail(&e)),
    }
    let policy = match serve::load_policy(policy) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return Err(fail("the policy has errors"));
        }
    };
    serve::build(policy, Options::default(), Some(dir)).map_err(|e| {
        // redb: "Database already open. Cannot acquire lock." (another process holds it).
        fail(&if e.contains("Database already open") {
            format!(
                "{e}\n  the state folder is in use by a running `warden serve`: stop it, or \
                 use its operator endpoint (`warden serve --operator-listen ADDR \
                 --operator-token-file F`; docs/serve.md, \"Operator endpoint\")"
            )
        } else {
            e
        })
    })
}

/// `warden approve --state DIR REQUEST_ID --as APPROVER`: grants one ask (docs/effects.md).
pub fn run_approve(a: ApproveArgs) -> i32 {
    let (g, _store) = match open_state(&a.state, a.policy.as_deref()) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match g.approve(&a.request_id, &a.approver, None) {
        Ok(granted) => {
            println!(
                "approved {} in session {} (action_hash {}): the next call of exactly this \
                 action may proceed, once, within {} s",
                a.request_id,
                granted.session,
                granted.approval.action_hash,
                granted.approval.expires_ms.div_ceil(1000)
            );
            match &granted.extension {
                crate::state::Extension::Extended(c) => println!(
                    "the session's Intent now permits tool {}",
                    c.tool.as_deref().unwrap_or("?")
                ),
                crate::state::Extension::RefusedStrict => println!(
                    "the ask offered an Intent extension; refused: the Intent's scope_mode is \
                     strict"
                ),
                _ => {}
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `warden approvals --state DIR`: every ask and where it stands.
pub fn run_approvals(a: ApprovalsArgs) -> i32 {
    let (g, _store) = match open_state(&a.state, a.policy.as_deref()) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let list = g.approvals(None);
    match a.format {
        ListFormat::Json => {
            let items = list.iter().map(operator::approval_json).collect();
            println!("{}", serde_json::Value::Array(items));
        }
        ListFormat::Text => {
            for i in &list {
                println!(
                    "{}\t{}\t{}\t{} {}\t{}",
                    i.session,
                    i.request_id,
                    i.status.as_str(),
                    i.approval.approver_type,
                    i.approval.approver_id,
                    i.approval.action
                );
            }
        }
    }
    0
}

/// `warden effects list|resolve --state DIR`: restores the journal, reads or resolves, and (for
/// resolve) journals the resolution.
pub fn run_effects(c: EffectsCommand) -> i32 {
    let (dir, policy) = match &c {
        EffectsCommand::List { state, policy } | EffectsCommand::Resolve { state, policy, .. } => {
            (state, policy)
        }
    };
    let (g, _store) = match open_state(dir, policy.as_deref()) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match c {
        EffectsCommand::List { .. } => {
            for sid in g.session_ids() {
                for (key, status) in g.effects(&sid) {
                    println!("{sid}\t{key}\t{}", status.as_str());
                }
            }
            0
        }
        EffectsCommand::Resolve {
            session,
            key,
            outcome,
            ..
        } => {
            let to = match outcome {
                Outcome::Committed => crate::state::EffectStatus::Committed,
                Outcome::Failed => crate::state::EffectStatus::Failed,
            };
            // Beside a live fleet, a session another Guardian holds is resolved there (its
            // operator endpoint): say so, rather than "no effect key". A session not in the
            // journal takes no lease.
            if g.snapshot(&session).is_some() {
                if let Err(e) = g.take_session(&session) {
                    eprintln!("error: session {session}: {e}");
                    return 1;
                }
            }
            match g.resolve_effect(&session, &key, to) {
                Some(was) => {
                    println!("{session}\t{key}\t{} -> {}", was.as_str(), to.as_str());
                    0
                }
                None => {
                    eprintln!("error: session {session} has no effect key {key}");
                    1
                }
            }
        }
    }
}

#[derive(Args, Debug)]
pub struct HookArgs {
    /// The platform's hook dialect
    #[arg(long, value_enum)]
    dialect: Dialect,
    /// A running `warden serve --listen`: http://127.0.0.1:PORT
    #[arg(long, conflicts_with = "state")]
    url: Option<String>,
    /// Decide locally against this state folder instead (not while a server uses it)
    #[arg(long)]
    state: Option<PathBuf>,
    /// The policy for --state (default: the embedded default)
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Where the hook keeps its session between invocations
    /// (default: .warden/core-agent-session.json)
    #[arg(long)]
    session_file: Option<PathBuf>,
    /// Sign requests with keys derived from this input keying material
    #[arg(long)]
    key_file: Option<PathBuf>,
    #[arg(long, default_value = "warden")]
    key_id: String,
    /// Close the session (turnEnd if a turn is open, then sessionEnd); reads no stdin
    #[arg(long)]
    end_session: bool,
    /// What core-agent's `agent-end` (fired once per turn) closes: only the turn (the session,
    /// its taint and history, lasts until --end-session or an idle gap) or the ACS session
    /// (the next hook starts a new one: for an agent run with one prompt)
    #[arg(long, value_enum, default_value_t = AgentEndArg::Turn)]
    agent_end: AgentEndArg,
    /// A session with no hook for this many seconds belongs to an earlier run of core-agent
    /// (which has no end-of-run event): the next hook ends it and starts a new one (0: never)
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    new_session_after: u64,
    /// Seconds to wait for the Guardian
    #[arg(long, default_value_t = 5)]
    timeout: u64,
    /// Seconds to wait for a concurrent hook of the same session to finish
    #[arg(long, default_value_t = 30)]
    lock_timeout: u64,
    /// Append one JSON line per decision here (default: decisions.jsonl beside the session
    /// file)
    #[arg(long, conflicts_with = "no_decision_log")]
    decision_log: Option<PathBuf>,
    /// Keep no decision log
    #[arg(long)]
    no_decision_log: bool,
    /// Run `sh -c CMD` with the decision-log entry on stdin for each deny, ask, defer or
    /// error (its failure is reported, not fatal)
    #[arg(long, value_name = "CMD")]
    notify: Option<String>,
    /// Seconds the --notify command may run before it is killed
    #[arg(long, default_value_t = 5)]
    notify_timeout: u64,
    /// Exit status after a deny (core-agent logs a non-zero exit on its stderr; it cannot
    /// stop the call either way)
    #[arg(long, default_value_t = 0)]
    deny_exit: u8,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum AgentEndArg {
    Session,
    Turn,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Dialect {
    CoreAgent,
}

fn read_key(path: &std::path::Path) -> Result<Arc<[u8]>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // A trailing newline from `echo secret > F` is not part of the key.
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Err(format!("{}: the key file is empty", path.display()));
    }
    Ok(Arc::from(trimmed))
}

/// The end of a serve, whether the input ended or a signal asked for the stop
/// (docs/serve.md, "Stopping"): what the transport could not answer in time is said, the
/// journal is closed (filed, or its leases let go), the decision log sends what it holds within
/// [`stop::LOG_GRACE`] (what it could not send is counted and said).
fn wind_down(
    store: Option<&crate::server::backend::Backend>,
    log: Option<&dyn guardian::log::DecisionLog>,
    still_open: usize,
) {
    let signalled = stop::requested();
    if still_open > 0 {
        eprintln!(
            "warden: stop: {still_open} connection(s) still busy after {} s were closed \
             without an answer",
            stop::ANSWER_GRACE.as_secs()
        );
    }
    if let Some(store) = store {
        match store.close() {
            Ok(0) => {}
            Ok(n) => eprintln!("warden: stop: let go of {n} session lease(s)"),
            Err(e) => eprintln!("warden: stop: the journal could not be closed: {e}"),
        }
    }
    if let Some(log) = log {
        log.flush(stop::LOG_GRACE);
    }
    if signalled {
        eprintln!("warden: stopped after {}", stop::signal_name());
    }
}

/// Housekeeping, once a second off the request path: ended sessions' tombstones and idle
/// sessions leave memory (admissions only sweep a few as they go), and the records of ended
/// sessions that left are compacted in batches (those a restart found expired included).
fn spawn_housekeeping(g: &Arc<guardian::Guardian>) {
    let g = Arc::downgrade(g);
    let _ = std::thread::Builder::new()
        .name("warden-sweep".into())
        .spawn(move || {
            while let Some(g) = g.upgrade() {
                g.sweep_memory();
                let n = g.compact_ended_sessions();
                if n > 0 {
                    eprintln!("warden: compacted the records of {n} ended session(s)");
                }
                drop(g);
                std::thread::sleep(Duration::from_secs(1));
            }
        });
}

/// Binds the ACS listener and says where (port 0 picks a free one).
fn listen(addr: SocketAddr) -> Result<std::net::TcpListener, String> {
    if !addr.ip().is_loopback() {
        eprintln!("warden: warning: {addr} is not a loopback address; ACS traffic should stay on the host or behind TLS");
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| format!("{addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| format!("{addr}: {e}"))?;
    eprintln!("warden: listening on http://{bound}/acs");
    Ok(listener)
}

fn fail(message: &str) -> i32 {
    eprintln!("error: {message}");
    2
}

pub fn run_serve(a: ServeArgs) -> i32 {
    let policy = match serve::load_policy(a.policy.as_deref()) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return fail("the policy has errors; nothing was served");
        }
    };
    // SIGTERM and SIGINT stop the server cleanly from here on (a second one at once).
    stop::install();
    match start(&a, policy) {
        Ok(started) => serve_until_stopped(started, a.http_limits()),
        Err(e) => fail(&e),
    }
}

/// A Guardian ready to serve, with what its stop must close.
struct Started {
    g: Arc<guardian::Guardian>,
    store: Option<Arc<crate::server::backend::Backend>>,
    decision_log: Option<Arc<dyn guardian::log::DecisionLog>>,
    listener: Option<std::net::TcpListener>,
    _watcher: Option<notify::RecommendedWatcher>,
}

/// The protocol `serve` runs: strict, with the flags' caps and key.
fn serve_protocol(a: &ServeArgs) -> Result<Protocol, String> {
    let mut protocol = Protocol::strict();
    protocol.require_handshake = !a.no_handshake;
    protocol.skew_window_ms = Some(a.skew_window_ms);
    protocol.require_provenance = a.require_provenance;
    protocol.key_id = a.key_id.clone();
    protocol.transport = if a.listen.is_some() { "http" } else { "stdio" };
    protocol.caps.max_envelope_bytes = a.max_envelope_bytes;
    protocol.caps.max_sessions = a.max_sessions;
    protocol.caps.max_sessions_per_agent = a.max_sessions_per_agent;
    protocol.caps.idle_session_ms =
        (a.idle_timeout > 0).then(|| a.idle_timeout.saturating_mul(1000));
    protocol.caps.hello_timeout_ms =
        (a.hello_timeout > 0).then(|| a.hello_timeout.saturating_mul(1000));
    protocol.caps.max_hello_sessions = a.max_hello_sessions;
    protocol.caps.max_hellos_per_agent = a.max_hellos_per_agent;
    if let Some(k) = &a.key_file {
        protocol.key = Some(read_key(k)?);
    }
    Ok(protocol)
}

/// Reads the flags, opens the listener (before the journal is read: a restart's clients wait
/// in its backlog rather than being refused), the decision log and the journal (restoring
/// it), and starts housekeeping, `--watch` and the operator endpoint.
fn start(a: &ServeArgs, policy: guardian::Policy) -> Result<Started, String> {
    let protocol = serve_protocol(a)?;
    let operator_token = a
        .operator_token_file
        .as_deref()
        .map(operator::Token::read)
        .transpose()?;
    if let (Some(op), Some(acs)) = (a.operator_listen, a.listen) {
        if op == acs && op.port() != 0 {
            return Err(format!(
                "--operator-listen {op} is the ACS listener's address: the operator endpoint \
                 must be a listener of its own, out of the agent platform's reach"
            ));
        }
    }
    let options = Options {
        on_decision_failure: match a.on_decision_failure {
            FailureArg::Deny => OnDecisionFailure::Deny,
            FailureArg::Error => OnDecisionFailure::Error,
        },
        explain: a.explain,
        protocol,
    };
    let decision_log = a
        .decision_log
        .as_deref()
        .map(|spec| decision_log::open(spec, a.listen.is_some(), a.decision_log_bounds()))
        .transpose()?;
    #[cfg(feature = "postgres")]
    crate::server::pg::set_fleet(crate::server::pg::Fleet {
        guardian: a
            .guardian_id
            .clone()
            .unwrap_or_else(|| crate::server::pg::default_guardian_id(a.listen.map(|l| l.port()))),
        lease: Duration::from_millis(a.lease_ms),
    });
    let listener = a.listen.map(listen).transpose()?;
    let (g, store) = serve::build_serving(policy, options, a.state.as_deref())?;
    if let Some(sink) = &decision_log {
        g.set_decision_log(sink.clone());
    }
    spawn_housekeeping(&g);
    let _watcher = match (a.watch, &a.policy) {
        (true, Some(p)) => Some(watch::watch(
            g.clone(),
            p.clone(),
            Duration::from_millis(a.watch_debounce_ms),
        )?),
        _ => None,
    };
    if let (Some(addr), Some(token)) = (a.operator_listen, operator_token) {
        start_operator(a, addr, token, &g, &store, &decision_log)?;
    }
    Ok(Started {
        g,
        store,
        decision_log,
        listener,
        _watcher,
    })
}

fn start_operator(
    a: &ServeArgs,
    addr: SocketAddr,
    token: operator::Token,
    g: &Arc<guardian::Guardian>,
    store: &Option<Arc<crate::server::backend::Backend>>,
    decision_log: &Option<Arc<dyn guardian::log::DecisionLog>>,
) -> Result<(), String> {
    if !addr.ip().is_loopback() {
        eprintln!("warden: warning: operator endpoint on {addr}, not a loopback address; its bearer token travels in plain HTTP: put TLS in front of it");
    }
    let op = operator::Operator {
        guardian: g.clone(),
        store: store.clone(),
        token,
        max_body: a.max_envelope_bytes,
        limits: a.http_limits().for_operator(),
        decision_log: decision_log.clone(),
    };
    let bound = operator::spawn(op, addr).map_err(|e| format!("--operator-listen {addr}: {e}"))?;
    eprintln!("warden: operator endpoint on http://{bound}/");
    Ok(())
}

/// Serves on the transport until its input ends or a signal stops it, then winds down.
fn serve_until_stopped(s: Started, limits: serve::HttpLimits) -> i32 {
    let (code, still_open) = match s.listener {
        Some(listener) => match serve::run_http(s.g, listener, limits) {
            Ok(open) => (0, open),
            Err(e) => (fail(&e.to_string()), 0),
        },
        None => {
            let r = serve::run_stdio(&s.g, stop::StdinUntilStop, std::io::stdout());
            if stop::requested() {
                eprintln!(
                    "warden: {}: stopped reading; every message read was answered",
                    stop::signal_name()
                );
            }
            match r {
                Ok(()) => (0, 0),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => (0, 0),
                Err(e) => (fail(&e.to_string()), 0),
            }
        }
    };
    wind_down(s.store.as_deref(), s.decision_log.as_deref(), still_open);
    code
}

pub fn run_audit(c: AuditCommand) -> i32 {
    let (dir, verbose) = match c {
        AuditCommand::Verify { dir, verbose } => (dir, verbose),
        AuditCommand::Show { from } => return show_chains(&from, false),
        AuditCommand::Export { from } => return show_chains(&from, true),
    };
    let records = match backend::read(&dir) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let chains = guardian::journal::chains(&records);
    if verbose {
        for (s, entries) in &chains {
            let head = entries
                .last()
                .and_then(|e| e.get("entry_hash"))
                .and_then(Value::as_str)
                .unwrap_or("-");
            println!("{s}: {} entries, head {head}", entries.len());
        }
        let reloads = guardian::journal::reloads(&records);
        println!("{} policy reload(s)", reloads.len());
        for (old, new, at) in reloads {
            println!("policy reload at {at}: {old} -> {new}");
        }
    }
    match guardian::audit::verify_sessions(&chains) {
        Ok(n) => {
            println!(
                "ok: {} session chain(s), {n} entries verified",
                chains.len()
            );
            0
        }
        Err((session, index, entry, reason)) => {
            println!("broken: session {session}, entry {index}: {reason}");
            println!("entry: {entry}");
            1
        }
    }
}

/// `warden audit show|export`: the chains of a state folder or a running server, as lines for
/// people or as JSON lines (each entry with its `session`).
fn show_chains(from: &ChainSource, json: bool) -> i32 {
    let only = from.session.as_deref();
    let chains = match (&from.operator, &from.dir) {
        (Some(url), _) => {
            let token = from
                .operator_token_file
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            match operator_chains(url, token, only) {
                Ok(c) => c,
                Err(e) => return fail(&e),
            }
        }
        (None, Some(dir)) => {
            let records = match backend::read(dir) {
                Ok(r) => r,
                Err(e) => return fail(&e),
            };
            guardian::journal::chains(&records)
        }
        (None, None) => return fail("name a state folder or --operator URL"),
    };
    let chains: Vec<_> = chains
        .iter()
        .filter(|(s, _)| only.is_none_or(|o| o == s))
        .collect();
    if let (Some(o), true) = (only, chains.is_empty()) {
        let place = match (&from.operator, &from.dir) {
            (Some(url), _) => url.clone(),
            (None, d) => backend::describe(d.as_deref().unwrap_or(std::path::Path::new(""))),
        };
        eprintln!("warden: no session {o} in {place}");
        return 1;
    }
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
    for (session, entries) in chains {
        if !json {
            println!("session {session}: {} entries", entries.len());
        }
        for (i, e) in entries.iter().enumerate() {
            if json {
                let mut e = e.clone();
                if let Some(m) = e.as_object_mut() {
                    m.insert("session".into(), Value::String(session.clone()));
                }
                println!("{e}");
            } else {
                let hash = field(e, "entry_hash");
                println!(
                    "  {i:>4}  {}  {}  {}  {}",
                    field(e, "timestamp"),
                    field(e, "step_type"),
                    field(e, "decision"),
                    &hash[..hash.len().min(16)]
                );
            }
        }
    }
    0
}

/// The chains from a running server's `GET /audit` (docs/serve.md, "Operator endpoint").
fn operator_chains(
    url: &str,
    token_file: &std::path::Path,
    only: Option<&str>,
) -> Result<Vec<(String, Vec<Value>)>, String> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|e| format!("{}: {e}", token_file.display()))?;
    let mut endpoint = crate::adapters::http::Endpoint::parse(url, "/")?;
    endpoint.path = "/audit".to_string();
    if let Some(s) = only {
        endpoint.path.push_str("?session=");
        endpoint
            .path
            .push_str(&crate::adapters::http::percent_encode(s));
    }
    let bearer = format!("Bearer {}", token.trim());
    let (status, body) = crate::adapters::http::exchange(
        &endpoint,
        "GET",
        &[("Authorization", bearer.as_str())],
        None,
        Duration::from_secs(30),
    )?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("{url}: an answer that is not JSON: {e}"))?;
    if status == 404
        && only.is_some()
        && v.get("error")
            .is_some_and(|e| e.as_str().is_some_and(|e| e.starts_with("no session")))
    {
        return Ok(Vec::new());
    }
    if status != 200 {
        let why = v.get("error").and_then(Value::as_str).unwrap_or("");
        return Err(format!("{url}: HTTP {status}: {why}"));
    }
    Ok(v.as_array()
        .map(|items| {
            items
                .iter()
                .map(|c| {
                    let s = c["session"].as_str().unwrap_or("").to_string();
                    let e = c["entries"].as_array().cloned().unwrap_or_default();
                    (s, e)
                })
                .collect()
        })
        .unwrap_or_default())
}

pub fn run_hook(a: HookArgs) -> i32 {
    let Dialect::CoreAgent = a.dialect;
    let key = match &a.key_file {
        Some(k) => match read_key(k) {
            Ok(k) => Some(k),
            Err(e) => return fail(&e),
        },
        None => None,
    };
    if a.url.is_none() && a.state.is_none() {
        return fail("give --url of a running warden serve, or --state DIR");
    }
    let session_file = a
        .session_file
        .clone()
        .unwrap_or_else(hook::default_session_file);
    let decision_log = (!a.no_decision_log).then(|| {
        a.decision_log
            .clone()
            .unwrap_or_else(|| hook::default_decision_log(&session_file))
    });
    let agent_end = match a.agent_end {
        AgentEndArg::Session => hook::AgentEnd::Session,
        AgentEndArg::Turn => hook::AgentEnd::Turn,
    };
    // The envelope is read and checked before the session is locked.
    let event = if a.end_session {
        None
    } else {
        let mut input = Vec::new();
        if let Err(e) = std::io::stdin().read_to_end(&mut input) {
            return fail(&format!("stdin: {e}"));
        }
        let v: Value = match serde_json::from_slice(&input) {
            Ok(v) => v,
            Err(e) => return fail(&format!("the hook envelope is not JSON: {e}")),
        };
        if let Err(e) = hook::event_name(&v) {
            return fail(&e);
        }
        Some(v)
    };
    let hook_name = match &event {
        Some(v) => hook::event_name(v).unwrap_or("?").to_string(),
        None => "end-session".to_string(),
    };
    let input = match &event {
        Some(v) => hook::Input::Event(v),
        None => hook::Input::EndSession,
    };
    // Concurrent hooks of one session take turns: read, send, save under one lock, so every
    // event is sent in the order it is recorded and no update is lost.
    let lock = match hook::lock_session(&session_file, Duration::from_secs(a.lock_timeout)) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let loaded = match hook::read_session(&session_file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warden: {e}; starting a new session");
            None
        }
    };
    let had_file = loaded.is_some();
    let mut session = loaded.unwrap_or_else(hook::HookSession::fresh);
    let before = session.clone();
    let timeout = Duration::from_secs(a.timeout.max(1));
    let local = match (&a.url, &a.state) {
        (None, Some(dir)) => match local_guardian(&a, key.clone(), dir) {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!(
                    "warden: core-agent {hook_name}: {e}; the event was not decided or audited"
                );
                return 1;
            }
        },
        _ => None,
    };
    let mut send = |req: &mut Value| -> Result<Value, String> {
        if let Some(k) = &key {
            hook::sign_request(k, &a.key_id, req);
        }
        let body = serde_json::to_vec(req).map_err(|e| e.to_string())?;
        let bytes = match (&local, &a.url) {
            (Some(g), _) => g.handle(&body),
            (None, Some(url)) => {
                let sid = req
                    .pointer("/params/metadata/session_id")
                    .and_then(Value::as_str);
                hook::http_post(url, &body, sid, timeout)?
            }
            (None, None) => return Err("no Guardian".into()),
        };
        serde_json::from_slice(&bytes).map_err(|_| {
            format!(
                "the answer is not JSON: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )
        })
    };
    // A session idle for longer than --new-session-after belongs to an earlier run of
    // core-agent, which has no end-of-run event: end it, and start a new one for this event.
    let now_ms = crate::acs::time::now_ms();
    let idle_ms = i64::try_from(a.new_session_after.saturating_mul(1000)).unwrap_or(i64::MAX);
    let mut idle_end = None;
    if had_file
        && !a.end_session
        && a.new_session_after > 0
        && session.last_at_ms > 0
        && now_ms.saturating_sub(session.last_at_ms) > idle_ms
    {
        match hook::run(&mut session, hook::Input::EndSession, agent_end, &mut send) {
            Ok(o) => idle_end = Some((session.session_id.clone(), o)),
            Err(e) => eprintln!(
                "warden: ending the idle session {}: {e}",
                session.session_id
            ),
        }
        session = hook::HookSession::fresh();
    }
    let outcome = match hook::run(&mut session, input, agent_end, &mut send) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    if outcome.error.is_none() {
        session.last_at_ms = now_ms;
    }
    drop(local);
    let mut code = 0;
    // A session the Guardian has sealed refuses every later step: start a new one.
    let sealed = matches!(&outcome.error, Some(hook::Failure::Refused { message, .. })
        if message.contains("has ended"));
    let over = outcome.ended || sealed || (a.end_session && outcome.error.is_none());
    if over {
        if let Err(e) = std::fs::remove_file(&session_file) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("warden: {}: {e}", session_file.display());
                code = 1;
            }
        }
    } else if session != before && (had_file || session.handshaken) {
        if let Err(e) = hook::save_session(&session_file, &session) {
            eprintln!("warden: {e}");
            code = 1;
        }
    }
    let mut entries = match &idle_end {
        Some((sid, o)) => hook::decision_entries("new-run", sid, o),
        None => Vec::new(),
    };
    entries.extend(hook::decision_entries(
        &hook_name,
        &session.session_id,
        &outcome,
    ));
    if let Some(log) = &decision_log {
        if let Err(e) = hook::append_decisions(log, &entries) {
            eprintln!("warden: decision log: {e}");
        }
    }
    drop(lock);
    for x in &outcome.exchanges {
        println!("{}", x.response);
    }
    let mut denied = false;
    for e in &entries {
        if let Some(line) = hook::describe(e) {
            eprintln!("{line}");
        }
        denied |= e["decision"] == "deny";
    }
    if let Some(f) = &outcome.error {
        let target = a
            .url
            .clone()
            .or_else(|| a.state.as_deref().map(backend::describe))
            .unwrap_or_default();
        let state = if sealed {
            "the session is over: the next hook starts a new one"
        } else if session.started {
            "the session is kept"
        } else {
            "no session was started"
        };
        eprintln!(
            "warden: core-agent {hook_name} at {target}: {f}; this event was not decided or audited ({state})"
        );
        code = 1;
    }
    if let Some(cmd) = &a.notify {
        let limit = Duration::from_secs(a.notify_timeout.max(1));
        for e in entries.iter().filter(|e| hook::is_notable(e)) {
            if let Err(why) = hook::notify(cmd, e.to_string().as_bytes(), limit) {
                eprintln!("warden: the --notify command failed: {why}");
            }
        }
    }
    if code == 0 && denied {
        code = i32::from(a.deny_exit);
    }
    code
}

/// A Guardian over a state folder for one hook: only this session's records are read, on
/// demand (the journal's per-session index), so a hook's cost does not grow with the folder.
fn local_guardian(
    a: &HookArgs,
    key: Option<Arc<[u8]>>,
    dir: &std::path::Path,
) -> Result<Guardian, String> {
    let policy = serve::load_policy(a.policy.as_deref()).map_err(|d| {
        eprint!("{d}");
        "the policy has errors".to_string()
    })?;
    let mut protocol = Protocol::strict();
    protocol.key = key;
    protocol.key_id = a.key_id.clone();
    let options = Options {
        protocol,
        ..Options::default()
    };
    let store = Arc::new(Backend::open(dir)?);
    let journal: Arc<dyn guardian::Journal> = store;
    Ok(Guardian::with_journal(policy, options, journal))
}
