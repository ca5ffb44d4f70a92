//! `warden serve`: the Guardian as a process. JSON-RPC over stdio (newline-delimited, or
//! LSP-style `Content-Length` framing, detected per message) or over HTTP/1.1 (`POST /acs` or
//! `POST /`, one envelope per request) on hyper + tokio, with every phase of a request
//! time-boxed and connections capped in total and per peer ([`HttpLimits`]); an optional
//! durable journal (`--state DIR` or `--state postgres://…`, [`super::backend`]). Policy reload is [`super::watch`].
//! The one HTTP status it gives a decided request besides `200` is `503` for `lease_held` (a
//! balancer's cue to try another Guardian); the JSON-RPC body is the same either way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io::{self, BufRead, Read, Write};
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, StatusCode};

use super::backend::{self, Backend};
use crate::guardian::{Guardian, Journal, Options, Policy};

/// Loads the policy (`None`: the embedded default).
pub fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    match path {
        None => Ok(Policy::embedded_default()),
        Some(p) => Policy::load(p).map_err(|d| d.render(false)),
    }
}

/// Journal records read and restored at a time when a server starts.
const RESTORE_CHUNK: usize = 1024;

/// Builds the Guardian: with `state`, opens the journal there and restores every session from
/// it (what the commands that read a stopped Guardian's state need: `warden effects`,
/// `warden approvals`).
pub fn build(
    policy: Policy,
    options: Options,
    state: Option<&Path>,
) -> Result<(Arc<Guardian>, Option<Arc<Backend>>), String> {
    build_with(policy, options, state, false)
}

/// Like [`build`], for a Guardian about to serve: a database several Guardians share is not
/// read at start (its sessions are restored as they arrive); a folder is restored whole.
pub fn build_serving(
    policy: Policy,
    options: Options,
    state: Option<&Path>,
) -> Result<(Arc<Guardian>, Option<Arc<Backend>>), String> {
    build_with(policy, options, state, true)
}

fn build_with(
    policy: Policy,
    options: Options,
    state: Option<&Path>,
    serving: bool,
) -> Result<(Arc<Guardian>, Option<Arc<Backend>>), String> {
    match state {
        None => Ok((Arc::new(Guardian::with_options(policy, options)), None)),
        Some(dir) => {
            let store = Arc::new(Backend::open(dir)?);
            let shown = backend::describe(dir);
            let started = Instant::now();
            let journal: Arc<dyn Journal> = store.clone();
            let g = Guardian::with_journal(policy, options, journal);
            if serving && store.is_shared() {
                // A database several Guardians share: nothing is read at start. Each session
                // is restored from its own records when it first reaches this Guardian and its
                // lease is taken (`Guardian::hold`), so start time and memory follow this
                // Guardian's sessions, not the whole database; a restart under the same
                // --guardian-id takes its own sessions back the same way.
                eprintln!(
                    "warden: {shown}: shared journal: {} session(s) in memory at start; each \
                     is restored when it first arrives here and its lease is taken",
                    g.session_count()
                );
                return Ok((Arc::new(g), Some(store)));
            }
            // In chunks, so a restart holds one chunk of records at a time (plus the sessions
            // it rebuilds: ended and idle ones leave memory again as it goes).
            let mut n = 0;
            let mut next = 0;
            let mut said = Instant::now();
            loop {
                let chunk = store.records_from(next, RESTORE_CHUNK)?;
                let Some((last, _)) = chunk.last() else { break };
                next = last + 1;
                n += g.restore(chunk.into_iter().map(|(_, r)| r));
                if said.elapsed() >= Duration::from_secs(5) {
                    said = Instant::now();
                    eprintln!(
                        "warden: restoring {}: {n} journal record(s) so far, {} session(s) held",
                        shown,
                        g.session_count()
                    );
                }
            }
            // Ended sessions past their tombstone leave memory now; their records are compacted
            // by the server's housekeeping thread, in batches, once it serves.
            g.sweep_memory();
            if n > 0 {
                eprintln!(
                    "warden: restored {n} journal record(s), {} session(s) from {} in {} ms",
                    g.session_count(),
                    shown,
                    started.elapsed().as_millis()
                );
            }
            Ok((Arc::new(g), Some(store)))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// stdio

/// One framed message read from stdio.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A newline-delimited message.
    Line(Vec<u8>),
    /// A `Content-Length` framed message.
    Framed(Vec<u8>),
    /// A message over the size limit (skipped); how it was framed.
    TooLarge {
        /// Its length in bytes.
        len: usize,
        /// Whether it came with a Content-Length header (else as a line).
        framed: bool,
    },
    /// A header block that is not valid `Content-Length` framing.
    BadHeader(String),
}

/// Reads up to (and consuming) the next `\n`, keeping at most `max` bytes; `None` at EOF.
/// Returns the bytes kept and the line's full length.
fn read_line_bounded(r: &mut impl BufRead, max: usize) -> io::Result<Option<(Vec<u8>, usize)>> {
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some((out, total)));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        total += chunk.len();
        if out.len() <= max {
            let room = (max + 1 - out.len()).min(chunk.len());
            out.extend_from_slice(&chunk[..room]);
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            if out.last() == Some(&b'\r') {
                out.pop();
                total -= 1;
            }
            return Ok(Some((out, total)));
        }
    }
}

/// The longest header line, and the most header lines, after `Content-Length`.
const MAX_HEADER_LINE: usize = 8192;
const MAX_HEADERS: usize = 32;

/// `Name: value`, the name an HTTP token (a JSON message never starts like that).
fn is_header_line(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|b| *b == b':') else {
        return false;
    };
    colon > 0
        && line[..colon]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
}

/// Reads the next message: a `Content-Length:` header block introduces a framed message,
/// anything else is one message per line. Blank lines are skipped. `None` at EOF.
pub fn read_frame(r: &mut impl BufRead, max: usize) -> io::Result<Option<Frame>> {
    loop {
        let Some((line, total)) = read_line_bounded(r, max)? else {
            return Ok(None);
        };
        if line.iter().all(u8::is_ascii_whitespace) && total == line.len() {
            continue;
        }
        let is_header = line.len() > 15 && line[..15].eq_ignore_ascii_case(b"content-length:");
        if !is_header {
            if total > max {
                return Ok(Some(Frame::TooLarge {
                    len: total,
                    framed: false,
                }));
            }
            return Ok(Some(Frame::Line(line)));
        }
        let text = String::from_utf8_lossy(&line[15..]).trim().to_string();
        let Ok(len) = text.parse::<usize>() else {
            return Ok(Some(Frame::BadHeader(format!(
                "Content-Length {text:?} is not a number"
            ))));
        };
        // Further headers (Content-Type) until the blank line. A line that is not a header
        // means the blank line is missing: that message is answered with a parse error (the
        // line is dropped with it) and reading resumes at the next line, instead of the body
        // and every later message being taken for headers.
        let mut headers = 0;
        loop {
            match read_line_bounded(r, MAX_HEADER_LINE)? {
                None => return Ok(None),
                Some((h, _)) if h.is_empty() => break,
                Some((h, total)) if total <= MAX_HEADER_LINE && is_header_line(&h) => {
                    headers += 1;
                    if headers > MAX_HEADERS {
                        return Ok(Some(Frame::BadHeader(format!(
                            "more than {MAX_HEADERS} headers after Content-Length; a blank line \
                             must end the header block"
                        ))));
                    }
                }
                Some((h, _)) => {
                    let shown: String = String::from_utf8_lossy(&h).chars().take(40).collect();
                    return Ok(Some(Frame::BadHeader(format!(
                        "Content-Length: {len} must be followed by a blank line (\\r\\n\\r\\n) \
                         before the body; found {shown:?} instead"
                    ))));
                }
            }
        }
        if len > max {
            let mut sink = r.take(len as u64);
            io::copy(&mut sink, &mut io::sink())?;
            return Ok(Some(Frame::TooLarge { len, framed: true }));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        return Ok(Some(Frame::Framed(body)));
    }
}

fn write_frame(out: &mut impl Write, body: &[u8], framed: bool) -> io::Result<()> {
    if framed {
        write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
        out.write_all(body)?;
    } else {
        out.write_all(body)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Serves JSON-RPC on a reader and writer until EOF: requests are decided one at a time, in
/// the order they arrive, and each response is written in the framing its request used.
pub fn run_stdio(g: &Guardian, input: impl Read, mut output: impl Write + Send) -> io::Result<()> {
    let mut input = io::BufReader::with_capacity(64 * 1024, input);
    let max = g.options().protocol.caps.max_envelope_bytes;
    // Pipelined: the next message is decided while the answers before it wait for the journal's
    // flush (with `--state`), so a client that sends ahead gets group commit over stdio too.
    // Answers go out in the order the messages came, each once its decision is durable.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(Answer, bool)>(STDIO_AHEAD);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> io::Result<()> {
            for (answer, framed) in rx {
                let body = match answer {
                    Answer::Pending(p) => p.wait().to_vec(),
                    Answer::Ready(b) => b,
                };
                write_frame(&mut output, &body, framed)?;
            }
            Ok(())
        });
        let read = (|| -> io::Result<()> {
            while let Some(frame) = read_frame(&mut input, max)? {
                let item = match frame {
                    Frame::Line(b) => (Answer::Pending(Box::new(g.handle_pending(&b))), false),
                    Frame::Framed(b) => (Answer::Pending(Box::new(g.handle_pending(&b))), true),
                    Frame::TooLarge { len, framed } => (
                        Answer::Ready(crate::guardian::too_large_response(len, max).to_vec()),
                        framed,
                    ),
                    Frame::BadHeader(why) => (
                        Answer::Ready(
                            crate::acs::envelope::Response::error(
                                crate::acs::envelope::Id::Null,
                                crate::acs::envelope::RpcError::parse_error(why, None),
                            )
                            .to_vec(),
                        ),
                        true,
                    ),
                };
                if tx.send(item).is_err() {
                    // The writer stopped (its error is returned below).
                    break;
                }
            }
            Ok(())
        })();
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the stdio writer failed")));
        read.and(written)
    })
}

/// Messages decided ahead of the answer being written (bounds memory under a fast client).
const STDIO_AHEAD: usize = 256;

/// An answer on its way out over stdio.
enum Answer {
    Pending(Box<crate::guardian::Pending>),
    Ready(Vec<u8>),
}

// ---------------------------------------------------------------------------------------------
// HTTP

pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Time limits and connection caps of an HTTP listener (docs/serve.md, "HTTP limits"). Every
/// phase of a request is time-boxed and every connection counts against a cap, so slow or
/// numerous clients cannot hold the descriptors a well-behaved client needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// To send a request's headers, counted from when the connection waits for them: also how
    /// long an idle keep-alive connection is kept. Beyond it the connection is closed.
    pub header_timeout: Duration,
    /// To send a request's body once its headers are in (408 beyond).
    pub body_timeout: Duration,
    /// From a request's headers to its answer (503 beyond); also the longest a write of the
    /// answer may wait on a client that does not read (the connection is closed).
    pub request_timeout: Duration,
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Connections served at once from one IP address; one more is answered 503 and closed.
    pub max_connections_per_peer: usize,
}

/// Connections the operator endpoint serves at once (in total and per peer): a few operators
/// and scripts, never the agent platform.
pub const OPERATOR_MAX_CONNECTIONS: usize = 16;

impl HttpLimits {
    /// The operator endpoint's limits: these time limits, [`OPERATOR_MAX_CONNECTIONS`].
    pub fn for_operator(self) -> HttpLimits {
        HttpLimits {
            max_connections: OPERATOR_MAX_CONNECTIONS,
            max_connections_per_peer: OPERATOR_MAX_CONNECTIONS,
            ..self
        }
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            // Headroom under the usual 1 024 descriptors for the operator endpoint
            // (`OPERATOR_MAX_CONNECTIONS`), the refusals in flight, the listeners, the journal
            // and stdio.
            max_connections: 960,
            max_connections_per_peer: 64,
        }
    }
}

/// How a listener words the errors it makes itself (over a cap, past a deadline): JSON-RPC
/// error responses on the ACS listener, `{"error": …}` on the operator endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorStyle {
    JsonRpc,
    Plain,
}

impl ErrorStyle {
    fn body(self, error: crate::acs::envelope::RpcError) -> Vec<u8> {
        match self {
            ErrorStyle::JsonRpc => {
                crate::acs::envelope::Response::error(crate::acs::envelope::Id::Null, error)
                    .to_vec()
            }
            ErrorStyle::Plain => serde_json::json!({
                "error": error.data.as_ref().and_then(|d| d.get("message")).cloned(),
                "reason": error.reason(),
            })
            .to_string()
            .into_bytes(),
        }
    }
}

fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// The error for a body that did not arrive within `limit` (HTTP 408).
pub(crate) fn body_timeout_error(limit: Duration) -> crate::acs::envelope::RpcError {
    crate::acs::envelope::RpcError::invalid_request(format!(
        "the request body did not arrive within {}; send the whole body at once",
        seconds(limit)
    ))
    .with_data("reason", "body_timeout")
    .with_data("body_timeout_ms", limit.as_millis() as u64)
}

fn request_timeout_error(limit: Duration) -> crate::acs::envelope::RpcError {
    crate::acs::envelope::RpcError::internal(format!(
        "no answer within {} of the request's headers; retry later",
        seconds(limit)
    ))
    .with_data("reason", "request_timeout")
    .with_data("request_timeout_ms", limit.as_millis() as u64)
}

/// Collects a request body within `max` bytes and `limit` time.
pub(crate) enum BodyError {
    TooLarge,
    TimedOut,
}

pub(crate) async fn collect_body(
    body: Incoming,
    max: usize,
    limit: Duration,
) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(limit, Limited::new(body, max).collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(_)) => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::TimedOut),
    }
}

async fn handle_http(
    g: Arc<Guardian>,
    limits: HttpLimits,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let max = g.options().protocol.caps.max_envelope_bytes;
    if let Some(probe) = probe(&g, &req) {
        return Ok(probe);
    }
    if req.uri().path() != "/acs" && req.uri().path() != "/" {
        return Ok(json_response(
            StatusCode::NOT_FOUND,
            br#"{"error":"not found: POST ACS envelopes to /acs (GET /healthz, /readyz, /metrics)"}"#
                .to_vec(),
        ));
    }
    if req.method() != Method::POST {
        return Ok(method_not_allowed("POST"));
    }
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = declared.filter(|l| *l > max) {
        return Ok(json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            crate::guardian::too_large_response(len, max).to_vec(),
        ));
    }
    let body = match collect_body(req.into_body(), max, limits.body_timeout).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Ok(json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                crate::guardian::too_large_response(max + 1, max).to_vec(),
            ))
        }
        Err(BodyError::TimedOut) => {
            return Ok(json_response(
                StatusCode::REQUEST_TIMEOUT,
                ErrorStyle::JsonRpc.body(body_timeout_error(limits.body_timeout)),
            ))
        }
    };
    // Decided here, on the runtime's worker: the decision is CPU work of microseconds, and a
    // hand-off to a blocking thread per request cost more than it did (two context switches).
    // What waits is the journal's group commit, and that wait is asynchronous: the answer
    // goes out once the decision's records are durable.
    let decided =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.handle_pending(&body)));
    Ok(match decided {
        Ok(pending) => answer(pending.settled().await),
        // A bug, not a decision: answer with an error rather than drop the connection.
        Err(_) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            crate::acs::envelope::Response::error(
                crate::acs::envelope::Id::Null,
                crate::acs::envelope::RpcError::internal("the decision task failed"),
            )
            .to_vec(),
        ),
    })
}

/// The operations endpoints of the listener (docs/serve.md, "Health, readiness and metrics"):
/// `GET /healthz` (the process answers), `GET /readyz` (it takes new work: 503 once the
/// journal has failed or a stop was asked for) and `GET /metrics`. `None` for any other
/// request.
fn probe(g: &Guardian, req: &hyper::Request<Incoming>) -> Option<hyper::Response<Full<Bytes>>> {
    let path = req.uri().path();
    if !matches!(path, "/healthz" | "/readyz" | "/metrics") {
        return None;
    }
    if req.method() != Method::GET {
        return Some(method_not_allowed("GET"));
    }
    Some(match path {
        "/healthz" => text_response(StatusCode::OK, "ok\n".into()),
        "/readyz" if g.has_failed() => text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the journal failed; every request is refused\n".into(),
        ),
        // The listener closes at a stop, but a probe can still reach it while the stop
        // begins, or on a connection that was opened before and is being drained.
        "/readyz" if super::stop::requested() => text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: stopping after {}; requests in flight are being answered\n",
                super::stop::signal_name()
            ),
        ),
        "/readyz" => text_response(StatusCode::OK, "ready\n".into()),
        _ => metrics_response(g),
    })
}

/// `GET /metrics`: Prometheus's text format.
pub(crate) fn metrics_response(g: &Guardian) -> hyper::Response<Full<Bytes>> {
    let mut r = text_response(StatusCode::OK, super::metrics::render(g));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

/// 405, naming the one method the path takes (in the body and in `Allow`).
fn method_not_allowed(method: &'static str) -> hyper::Response<Full<Bytes>> {
    let body = format!(r#"{{"error":"only {method}"}}"#);
    let mut r = json_response(StatusCode::METHOD_NOT_ALLOWED, body.into_bytes());
    r.headers_mut().insert(
        hyper::header::ALLOW,
        hyper::header::HeaderValue::from_static(method),
    );
    r
}

fn text_response(status: StatusCode, body: String) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// The HTTP answer to a decided request: `200` with the JSON-RPC response, except a request
/// refused because another Guardian holds its session's lease (`lease_held`): `503` with
/// `Retry-After`, the same JSON-RPC body, so a load balancer can send it to another Guardian
/// (HAProxy's `retry-on 503`; nothing of it was decided here) while an ACS client reads the
/// body as ever. 421 Misdirected Request would say it better, but balancers do not retry on it.
fn answer(r: crate::acs::envelope::Response) -> hyper::Response<Full<Bytes>> {
    let retry_after_ms = match &r.outcome {
        crate::acs::envelope::Outcome::Error(e) if e.reason() == Some("lease_held") => e
            .data
            .as_ref()
            .and_then(|d| d.get("retry_after_ms"))
            .and_then(serde_json::Value::as_u64),
        _ => None,
    };
    let Some(ms) = retry_after_ms else {
        return json_response(StatusCode::OK, r.to_vec());
    };
    let mut out = json_response(StatusCode::SERVICE_UNAVAILABLE, r.to_vec());
    // Whole seconds, rounded up (at least one): the body has the milliseconds.
    let secs = ms.div_ceil(1000).max(1);
    if let Ok(v) = hyper::header::HeaderValue::from_str(&secs.to_string()) {
        out.headers_mut().insert(hyper::header::RETRY_AFTER, v);
    }
    out
}

/// Serves HTTP on `listener` (bound already, so that a restart's listener is open before
/// the journal is read: connections wait in its backlog meanwhile) until a stop is asked for
/// ([`super::stop`]). Returns the number of connections still open when the stop's grace ran
/// out (0: every request in flight was answered).
pub fn run_http(
    g: Arc<Guardian>,
    listener: std::net::TcpListener,
    limits: HttpLimits,
) -> io::Result<usize> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .enable_time()
        .thread_name("warden-http")
        .build()?;
    listener.set_nonblocking(true)?;
    let open = rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let stop = async {
            super::stop::asked().await;
            eprintln!(
                "warden: {}: stopping: no new connections; requests in flight are answered \
                 (for up to {} s); a second signal stops at once",
                super::stop::signal_name(),
                super::stop::ANSWER_GRACE.as_secs()
            );
        };
        serve_connections(
            listener,
            limits,
            ErrorStyle::JsonRpc,
            move |req| handle_http(g.clone(), limits, req),
            stop,
        )
        .await
    })?;
    // Connections still open past the grace are dropped with the runtime.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(open)
}

/// Counts the connections being served, in total and per peer address.
struct ConnLimiter {
    max_total: usize,
    max_per_peer: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OverCap {
    Total,
    Peer,
}

/// One admitted connection; dropping it frees its place.
struct ConnGuard {
    limiter: Arc<ConnLimiter>,
    peer: IpAddr,
}

impl ConnLimiter {
    fn new(max_total: usize, max_per_peer: usize) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            max_total,
            max_per_peer,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<ConnGuard, OverCap> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per_peer) = &mut *open;
        if *total >= self.max_total {
            return Err(OverCap::Total);
        }
        let mine = per_peer.entry(peer).or_insert(0);
        if *mine >= self.max_per_peer {
            return Err(OverCap::Peer);
        }
        *mine += 1;
        *total += 1;
        Ok(ConnGuard {
            limiter: self.clone(),
            peer,
        })
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per_peer) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(n) = per_peer.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per_peer.remove(&self.peer);
            }
        }
    }
}

/// Refusals answered at once; beyond it an over-cap connection is closed without an answer
/// (each refusal holds its descriptor for up to [`REFUSAL_LINGER`]).
const MAX_REFUSALS: usize = 8;
/// How long a refused connection is kept to read what the client sent, so that closing it
/// does not reset the connection before the client reads the 503.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

fn over_cap_error(why: OverCap, limits: &HttpLimits) -> crate::acs::envelope::RpcError {
    match why {
        OverCap::Total => crate::acs::envelope::RpcError::session_refused(format!(
            "this Guardian serves at most {} connections at once; retry later",
            limits.max_connections
        ))
        .with_data("reason", "too_many_connections")
        .with_data("max_connections", limits.max_connections as u64),
        OverCap::Peer => crate::acs::envelope::RpcError::session_refused(format!(
            "this Guardian serves at most {} connections at once from one address; reuse a \
             keep-alive connection or close idle ones",
            limits.max_connections_per_peer
        ))
        .with_data("reason", "too_many_connections_from_peer")
        .with_data(
            "max_connections_per_peer",
            limits.max_connections_per_peer as u64,
        ),
    }
}

/// Answers an over-cap connection `503` with `body` and closes it, after reading (and
/// dropping) what the client sent for up to [`REFUSAL_LINGER`].
async fn refuse(stream: tokio::net::TcpStream, body: Vec<u8>) {
    let mut msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    msg.extend_from_slice(&body);
    let deadline = tokio::time::Instant::now() + REFUSAL_LINGER;
    let mut sent = 0;
    while sent < msg.len() {
        if tokio::time::timeout_at(deadline, stream.writable())
            .await
            .is_err()
        {
            return;
        }
        match stream.try_write(&msg[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
    // Half-close, then read until the client closes (or the linger ends).
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let _ = std_stream.shutdown(std::net::Shutdown::Write);
    let Ok(stream) = tokio::net::TcpStream::from_std(std_stream) else {
        return;
    };
    let mut sink = [0u8; 4096];
    loop {
        if tokio::time::timeout_at(deadline, stream.readable())
            .await
            .is_err()
        {
            return;
        }
        match stream.try_read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Accepts connections on `listener` until `stop` resolves and serves each with `handler`
/// (HTTP/1.1, keep-alive) within `limits`: a connection over a cap is answered 503 and
/// closed, a request is answered within `request_timeout` (503 otherwise), and a connection
/// whose client neither sends nor reads in time is closed. Shared by the ACS listener and the
/// operator endpoint ([`super::operator`]).
///
/// At `stop`: the listener closes, every connection finishes the request it is serving and
/// closes (an idle one at once), and this returns once none is left or after
/// [`super::stop::ANSWER_GRACE`], with the number still open then.
pub(crate) async fn serve_connections<F, Fut, B>(
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
    style: ErrorStyle,
    handler: F,
    stop: impl Future<Output = ()>,
) -> io::Result<usize>
where
    F: Fn(hyper::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<hyper::Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes, Error = Infallible> + From<Full<Bytes>> + Send + 'static,
{
    let limiter = ConnLimiter::new(limits.max_connections, limits.max_connections_per_peer);
    let refusals = Arc::new(AtomicUsize::new(0));
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = match race(listener.accept(), stop.as_mut()).await {
            Either::Left(a) => a,
            Either::Right(()) => break,
        };
        let (stream, peer) = match accepted {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors and the like: wait instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let guard = match limiter.admit(peer.ip()) {
            Ok(g) => g,
            Err(why) => {
                if refusals.fetch_add(1, Ordering::SeqCst) >= MAX_REFUSALS {
                    refusals.fetch_sub(1, Ordering::SeqCst);
                    drop(stream);
                    continue;
                }
                let body = style.body(over_cap_error(why, &limits));
                let refusals = refusals.clone();
                tokio::spawn(async move {
                    refuse(stream, body).await;
                    refusals.fetch_sub(1, Ordering::SeqCst);
                });
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = serve_one(stream, limits, style, handler.clone(), closing_rx.clone());
        tokio::spawn(async move {
            let _guard = guard;
            conn.await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    Ok(drain(&limiter).await)
}

/// One connection served by hyper with the time limits of `limits`, to its end; if
/// `closing` turns true first, it is asked to finish the request in progress and close
/// (hyper's graceful shutdown: an idle connection closes at once), and that is waited for.
async fn serve_one<F, Fut, B>(
    stream: tokio::net::TcpStream,
    limits: HttpLimits,
    style: ErrorStyle,
    handler: F,
    mut closing: tokio::sync::watch::Receiver<bool>,
) where
    F: Fn(hyper::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<hyper::Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes, Error = Infallible> + From<Full<Bytes>> + Send + 'static,
{
    let io = WriteDeadline {
        inner: hyper_util::rt::TokioIo::new(stream),
        limit: limits.request_timeout,
        sleep: None,
    };
    let svc = hyper::service::service_fn(move |req| {
        let answer = handler(req);
        async move {
            match tokio::time::timeout(limits.request_timeout, answer).await {
                Ok(r) => r,
                Err(_) => Ok(json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    style.body(request_timeout_error(limits.request_timeout)),
                )
                .map(B::from)),
            }
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(io, svc);
    let mut conn = std::pin::pin!(conn);
    let closed = async {
        let _ = closing.wait_for(|c| *c).await;
    };
    if let Either::Right(()) = race(conn.as_mut(), closed).await {
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
}

/// Waits until every admitted connection has closed, for at most the stop's grace; the
/// number still open then.
async fn drain(limiter: &ConnLimiter) -> usize {
    let deadline = tokio::time::Instant::now() + super::stop::ANSWER_GRACE;
    loop {
        let open = limiter.open.lock().unwrap_or_else(|e| e.into_inner()).0;
        if open == 0 || tokio::time::Instant::now() >= deadline {
            return open;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Whichever of `a` and `b` finishes first (`a` when both are ready).
async fn race<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(x) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(x));
        }
        b.as_mut().poll(cx).map(Either::Right)
    })
    .await
}

/// A connection whose writes fail once one has waited `limit` on a client that does not
/// read: hyper then closes it, and its place and descriptor are freed.
struct WriteDeadline<T> {
    inner: T,
    limit: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn stalled<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let limit = self.limit;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the answer in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn settle<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.sleep = None;
                ready
            }
        }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for WriteDeadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for WriteDeadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.settle(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.settle(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.settle(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.settle(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut r = io::BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        while let Some(f) = read_frame(&mut r, max).unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn both_framings_are_detected_per_message() {
        let input = b"{\"a\":1}\r\n\n  \nContent-Length: 7\r\nContent-Type: application/json\r\n\r\n{\"b\":2}{\"c\":3}\n";
        assert_eq!(
            frames(input, 100),
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Framed(b"{\"b\":2}".to_vec()),
                Frame::Line(b"{\"c\":3}".to_vec()),
            ]
        );
    }

    #[test]
    fn a_header_without_its_blank_line_is_refused_and_reading_resumes() {
        // Before: the body and every later message were read as headers, without an answer.
        let input = b"Content-Length: 7\r\n{\"a\":1}\n{\"b\":2}\nContent-Length: 7\r\nContent-Type: x\r\n\r\n{\"c\":3}";
        let f = frames(input, 100);
        assert_eq!(f.len(), 3, "{f:?}");
        let Frame::BadHeader(why) = &f[0] else {
            panic!("{f:?}")
        };
        assert!(why.contains("must be followed by a blank line"), "{why}");
        assert!(why.contains("{\\\"a\\\":1}"), "{why}");
        assert_eq!(f[1], Frame::Line(b"{\"b\":2}".to_vec()));
        assert_eq!(f[2], Frame::Framed(b"{\"c\":3}".to_vec()));
    }

    #[test]
    fn a_stdio_header_without_its_blank_line_gets_a_parse_error() {
        let g = Guardian::new(Policy::embedded_default());
        let mut out = Vec::new();
        run_stdio(&g, &b"Content-Length: 7\r\n{\"a\":1}\n"[..], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], -32700, "{v}");
        assert_eq!(v["id"], serde_json::Value::Null);
    }

    #[test]
    fn one_peer_at_its_cap_leaves_room_for_the_others() {
        let limiter = ConnLimiter::new(5, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = limiter.admit(a).unwrap();
        let _a2 = limiter.admit(a).unwrap();
        assert_eq!(limiter.admit(a).err(), Some(OverCap::Peer));
        let _b1 = limiter.admit(b).unwrap();
        drop(a1);
        let _a3 = limiter.admit(a).unwrap();
        let _b2 = limiter.admit(b).unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let c1 = limiter.admit(c).unwrap();
        assert_eq!(limiter.admit(c).err(), Some(OverCap::Total));
        drop(c1);
        assert!(limiter.admit(c).is_ok());
        let open = limiter.open.lock().unwrap();
        assert_eq!(open.0, 4, "the dropped guards freed their places");
        assert!(
            !open.1.contains_key(&c),
            "a peer with no connection is forgotten"
        );
    }

    /// Settles the durability of every submission at once, newest first, when `n` are held.
    struct ReverseJournal {
        n: usize,
        held: std::sync::Mutex<Vec<crate::guardian::journal::Settle>>,
    }

    impl crate::guardian::Journal for ReverseJournal {
        fn append(
            &self,
            records: Vec<crate::guardian::Record>,
        ) -> Result<(), crate::guardian::journal::JournalError> {
            self.submit(records).wait()
        }

        fn submit(&self, _: Vec<crate::guardian::Record>) -> crate::guardian::Durable {
            let (durable, settle) = crate::guardian::Durable::pending();
            let mut held = self.held.lock().unwrap();
            held.push(settle);
            if held.len() == self.n {
                while let Some(s) = held.pop() {
                    s.settle(Ok(()));
                }
            }
            durable
        }
    }

    #[test]
    fn stdio_decides_ahead_and_answers_in_order() {
        // Five requests are decided before any is durable (the journal settles only when it
        // holds all five, and then the last first): the answers still come out in order.
        let journal = Arc::new(ReverseJournal {
            n: 5,
            held: Default::default(),
        });
        let g = Guardian::with_journal(Policy::embedded_default(), Options::default(), journal);
        let mut input = String::new();
        for i in 1..=5 {
            let req = crate::acs::envelope::request(
                i,
                "steps/turnStart",
                &format!("00000000-0000-4000-8000-{i:012}"),
                &crate::acs::time::now_rfc3339_ms(),
                serde_json::json!({"agent_id": "a", "session_id": "5e55f00d-0000-4000-8000-000000000001", "turn_id": "t"}),
                serde_json::json!({"turn_id": format!("t{i}"), "triggered_by": "user_message"}),
            );
            input.push_str(&serde_json::to_string(&req).unwrap());
            input.push('\n');
        }
        let mut out = Vec::new();
        run_stdio(&g, input.as_bytes(), &mut out).unwrap();
        let ids: Vec<u64> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                assert!(v.get("result").is_some(), "{v}");
                v["id"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_strict_guardian_answers_ping_whatever_its_params() {
        let options = Options {
            protocol: crate::guardian::Protocol::strict(),
            ..Options::default()
        };
        let g = Guardian::with_options(Policy::embedded_default(), options);
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"system/ping","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"system/ping"}"#,
            "\n"
        );
        let mut out = Vec::new();
        run_stdio(&g, input.as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let answers: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(answers.len(), 2);
        for (i, v) in answers.iter().enumerate() {
            assert_eq!(v["id"], i + 1, "{v}");
            assert_eq!(v["result"]["decision"], "allow", "{v}");
            assert_eq!(v["result"]["payload"]["status"], "ok", "{v}");
        }
    }

    #[test]
    fn oversized_messages_are_skipped_in_bounded_memory() {
        let mut input = vec![b'x'; 1000];
        input.extend_from_slice(b"\nContent-Length: 500\r\n\r\n");
        input.extend(vec![b'y'; 500]);
        input.extend_from_slice(b"ok\ncontent-length: zz\n\n");
        let f = frames(&input, 100);
        assert_eq!(
            f[0],
            Frame::TooLarge {
                len: 1000,
                framed: false
            }
        );
        assert_eq!(
            f[1],
            Frame::TooLarge {
                len: 500,
                framed: true
            }
        );
        assert_eq!(f[2], Frame::Line(b"ok".to_vec()));
        assert!(matches!(f[3], Frame::BadHeader(_)));
    }
}
