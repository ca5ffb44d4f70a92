//! The operator endpoint of `warden serve` (`--operator-listen ADDR --operator-token-file F`,
//! docs/serve.md): a second HTTP listener, never the agent-facing one, on which an operator
//! lists and resolves effect keys and lists and grants approvals while the server runs.
//! Every request carries `Authorization: Bearer TOKEN`; bodies are JSON in and out.
//!
//! | request | answer |
//! |---|---|
//! | `GET /effects` | `[{session, key, state}]` |
//! | `POST /effects/resolve` `{session, key, outcome}` | `{session, key, from, to}` |
//! | `GET /approvals` | `[{session, request_id, status, approver, question, action_hash, action}]` |
//! | `POST /approvals/approve` `{request_id, approver}` | `{session, request_id, action_hash, expires_seconds, intent}` |
//! | `GET /audit` (`?session=ID` for one) | `[{session, entries}]`: the audit chains, read from the journal (`--state`) |
//! | `GET /metrics` | the Guardian's gauges and the decision log's counters, Prometheus text format |

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

use super::serve::{BodyError, ErrorStyle};
use crate::acs::crypto;
use crate::guardian::log::DecisionLog;
use crate::guardian::{ApprovalInfo, ApproveError, Guardian};
use crate::state::{EffectStatus, GrantError};

/// The operator's bearer token, kept as its SHA-256: comparing two digests in constant time
/// reveals neither the token's bytes nor its length.
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl Token {
    /// The token from its text: surrounding whitespace is dropped; what remains must be
    /// non-empty visible ASCII (it travels in an HTTP header).
    pub fn new(text: &[u8]) -> Result<Token, String> {
        let t = text.trim_ascii();
        if t.is_empty() {
            return Err("the operator token file is empty".into());
        }
        if !t.iter().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the operator token must be one word of visible ASCII characters (no spaces, \
                 line breaks or control characters)"
                    .into(),
            );
        }
        Ok(Token {
            digest: crypto::sha256(t),
        })
    }

    /// Reads the token from `path` (`--operator-token-file`).
    pub fn read(path: &Path) -> Result<Token, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Token::new(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub fn matches(&self, given: &[u8]) -> bool {
        let d = crypto::sha256(given);
        let mut diff = 0u8;
        for (a, b) in d.iter().zip(self.digest.iter()) {
            diff |= a ^ b;
        }
        std::hint::black_box(diff) == 0
    }
}

/// What the operator listener serves with.
pub struct Operator {
    /// The Guardian it acts on.
    pub guardian: Arc<Guardian>,
    /// The journal of `--state`, read by `GET /audit` (without it there is no chain to read).
    pub store: Option<Arc<super::backend::Backend>>,
    /// The bearer token requests must carry.
    pub token: Token,
    /// Largest request body accepted (serve's `--max-envelope-bytes`).
    pub max_body: usize,
    /// Time limits and connection caps (serve's, on a listener of its own).
    pub limits: super::serve::HttpLimits,
    /// The `--decision-log` sink, whose counters `GET /metrics` shows.
    pub decision_log: Option<Arc<dyn DecisionLog>>,
}

type Answer = hyper::Response<Full<Bytes>>;

fn answer(status: StatusCode, body: &Value) -> Answer {
    super::serve::json_response(status, body.to_string().into_bytes())
}

fn error(status: StatusCode, message: impl Into<String>) -> Answer {
    answer(status, &json!({"error": message.into()}))
}

/// The bearer token of an `Authorization` header value (`Bearer` in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// Routes one operator request. Authentication comes first: without the token, a client
/// learns nothing, not even which paths exist.
pub async fn handle(
    op: Arc<Operator>,
    req: hyper::Request<Incoming>,
) -> Result<Answer, Infallible> {
    let authorized = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| bearer(v.as_bytes()))
        .is_some_and(|t| op.token.matches(t));
    if !authorized {
        let mut r = error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong operator token: send Authorization: Bearer <token>",
        );
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
        return Ok(r);
    }
    let method = match req.uri().path() {
        "/effects" | "/approvals" | "/audit" | "/metrics" => Method::GET,
        "/effects/resolve" | "/approvals/approve" => Method::POST,
        _ => {
            return Ok(error(
                StatusCode::NOT_FOUND,
                "not found: GET /effects, POST /effects/resolve, GET /approvals, \
                 POST /approvals/approve, GET /audit, GET /metrics",
            ))
        }
    };
    if req.method() != method {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{} takes only {method}", req.uri().path()),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static(if method == Method::GET {
                "GET"
            } else {
                "POST"
            }),
        );
        return Ok(r);
    }
    let path = req.uri().path().to_string();
    if path == "/metrics" {
        return Ok(metrics(&op));
    }
    if path == "/audit" {
        let session = match req.uri().query().map(session_query) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(s))) => Some(s),
            Some(Err(())) => {
                return Ok(error(
                    StatusCode::BAD_REQUEST,
                    "session=: a malformed percent-escape, or not UTF-8 once decoded",
                ))
            }
        };
        let out = tokio::task::spawn_blocking(move || audit(op.store.as_deref(), session)).await;
        return Ok(out.unwrap_or_else(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the operator task failed",
            )
        }));
    }
    let body = if method == Method::POST {
        match read_body(req, op.max_body, op.limits.body_timeout).await {
            Ok(v) => Some(v),
            Err(r) => return Ok(r),
        }
    } else {
        None
    };
    // Operator actions journal (and fsync) before they answer: off the async threads.
    let out = tokio::task::spawn_blocking(move || route(&op.guardian, &path, body)).await;
    Ok(out.unwrap_or_else(|_| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the operator task failed",
        )
    }))
}

/// `GET /metrics`: the Guardian's counters in Prometheus text format ([`super::metrics`]),
/// the same as the agent-facing listener's.
fn metrics(op: &Operator) -> Answer {
    super::serve::metrics_response(&op.guardian)
}

/// The body as a JSON object (strict: duplicate members are refused), within `max` bytes and
/// `limit` time (408 beyond).
async fn read_body(
    req: hyper::Request<Incoming>,
    max: usize,
    limit: std::time::Duration,
) -> Result<Map<String, Value>, Answer> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {max} bytes"),
        )
    };
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|l| l > max) {
        return Err(too_large());
    }
    let bytes = match super::serve::collect_body(req.into_body(), max, limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => return Err(too_large()),
        Err(BodyError::TimedOut) => {
            let e = super::serve::body_timeout_error(limit);
            return Err(answer(
                StatusCode::REQUEST_TIMEOUT,
                &json!({"error": e.data.as_ref().and_then(|d| d.get("message")), "reason": "body_timeout"}),
            ));
        }
    };
    match crate::acs::json::parse_strict(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(error(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        )),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// Takes the string members `names` from `body`, refusing a missing, mistyped or unexpected
/// member with a 400 that names it.
fn fields<'a, const N: usize>(
    body: &'a Map<String, Value>,
    names: [&str; N],
) -> Result<[&'a str; N], Answer> {
    if let Some(extra) = body.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown field `{extra}` (expected {})",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let mut out = [""; N];
    for (slot, name) in out.iter_mut().zip(names) {
        *slot = match body.get(name) {
            None => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    format!("missing field `{name}`"),
                ))
            }
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(_) => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    format!("field `{name}` must be a non-empty string"),
                ))
            }
        };
    }
    Ok(out)
}

fn route(g: &Guardian, path: &str, body: Option<Map<String, Value>>) -> Answer {
    let body = body.unwrap_or_default();
    let r = match path {
        "/effects" => Ok(list_effects(g)),
        "/approvals" => Ok(answer(
            StatusCode::OK,
            &Value::Array(g.approvals(None).iter().map(approval_json).collect()),
        )),
        "/effects/resolve" => resolve(g, &body),
        "/approvals/approve" => approve(g, &body),
        _ => Err(error(StatusCode::NOT_FOUND, "not found")),
    };
    r.unwrap_or_else(|e| e)
}

/// `session=ID` from a query string, percent-decoded (a session id is any string the agent
/// chose; `warden audit --operator --session` encodes it). An undecodable value is an error,
/// never read as "every session".
fn session_query(q: &str) -> Result<Option<String>, ()> {
    match q
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "session")
    {
        None => Ok(None),
        Some((_, v)) => crate::adapters::http::percent_decode(v).map(Some).ok_or(()),
    }
}

/// `GET /audit`: every session's chain entries (or one session's) from the journal.
fn audit(store: Option<&super::backend::Backend>, session: Option<String>) -> Answer {
    let Some(store) = store else {
        return error(
            StatusCode::NOT_FOUND,
            "this server keeps no journal, so no audit chain to read: serve with --state DIR",
        );
    };
    let records = match &session {
        Some(s) => store.records_of(s),
        None => store.records(),
    };
    let records = match records {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let chains = crate::guardian::journal::chains(&records);
    if let (Some(s), true) = (&session, chains.is_empty()) {
        return error(StatusCode::NOT_FOUND, format!("no session {s}"));
    }
    let items: Vec<Value> = chains
        .into_iter()
        .map(|(session, entries)| json!({"session": session, "entries": entries}))
        .collect();
    answer(StatusCode::OK, &Value::Array(items))
}

fn list_effects(g: &Guardian) -> Answer {
    let mut items = Vec::new();
    for session in g.session_ids() {
        for (key, state) in g.effects(&session) {
            items.push(json!({"session": session, "key": key, "state": state.as_str()}));
        }
    }
    answer(StatusCode::OK, &Value::Array(items))
}

fn resolve(g: &Guardian, body: &Map<String, Value>) -> Result<Answer, Answer> {
    let [session, key, outcome] = fields(body, ["session", "key", "outcome"])?;
    let to = match outcome {
        "committed" => EffectStatus::Committed,
        "failed" => EffectStatus::Failed,
        _ => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "field `outcome` must be \"committed\" or \"failed\"",
            ))
        }
    };
    let Some(state) = g.snapshot(session) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("no session {session}"),
        ));
    };
    if state.effect_status(key).is_none() {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("session {session} has no effect key {key}"),
        ));
    }
    match g.resolve_effect(session, key, to) {
        Some(from) => {
            eprintln!(
                "warden: operator endpoint: resolved {key} in session {session}: {} -> {}",
                from.as_str(),
                to.as_str()
            );
            Ok(answer(
                StatusCode::OK,
                &json!({"session": session, "key": key, "from": from.as_str(), "to": to.as_str()}),
            ))
        }
        // The key was there a moment ago: the journal refused the resolution.
        None => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the resolution could not be journalled; nothing changed",
        )),
    }
}

fn approve(g: &Guardian, body: &Map<String, Value>) -> Result<Answer, Answer> {
    let [request_id, approver] = fields(body, ["request_id", "approver"])?;
    match g.approve(request_id, approver, None) {
        Ok(granted) => {
            eprintln!(
                "warden: operator endpoint: {approver} approved {request_id} in session {} (action_hash {})",
                granted.session, granted.approval.action_hash
            );
            Ok(answer(StatusCode::OK, &granted.to_json(request_id)))
        }
        Err(e) => {
            let status = match &e {
                ApproveError::Grant(GrantError::Unknown(_)) => StatusCode::NOT_FOUND,
                ApproveError::Grant(GrantError::WrongApprover { .. }) => StatusCode::FORBIDDEN,
                ApproveError::Grant(GrantError::AlreadyGranted | GrantError::TimedOut) => {
                    StatusCode::CONFLICT
                }
                ApproveError::Journal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            Err(error(status, e.to_string()))
        }
    }
}

/// One approval as `warden approvals --format json` and `GET /approvals` print it.
pub fn approval_json(i: &ApprovalInfo) -> Value {
    i.to_json()
}

/// Binds the operator listener (so a bad address fails before anything is served) and
/// serves it on a thread of its own, with a small tokio runtime, whatever the ACS transport
/// is. Returns the bound address.
pub fn spawn(op: Operator, addr: SocketAddr) -> io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(4)
        .thread_name("warden-operator")
        .build()?;
    let listener = {
        let _in_runtime = rt.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    let limits = op.limits;
    let op = Arc::new(op);
    std::thread::Builder::new()
        .name("warden-operator".into())
        .spawn(move || {
            rt.block_on(super::serve::serve_connections(
                listener,
                limits,
                ErrorStyle::Plain,
                move |req| handle(op.clone(), req),
                std::future::pending(),
            ))
        })?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_trimmed_checked_and_compared_whole() {
        let t = Token::new(b"  s3cret-token\n").unwrap();
        assert!(t.matches(b"s3cret-token"));
        assert!(!t.matches(b"s3cret-toke"));
        assert!(!t.matches(b"s3cret-token2"));
        assert!(!t.matches(b""));
        assert!(Token::new(b" \n\t").is_err());
        assert!(Token::new(b"two\nlines").is_err());
        assert!(Token::new("caf\u{e9}".as_bytes()).is_err());
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer"), None);
    }
}
