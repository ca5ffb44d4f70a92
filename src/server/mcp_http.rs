//! `warden mcp-proxy --listen ADDR`: MCP's Streamable HTTP transport on the client's side of
//! the proxy (`crate::adapters::mcp_proxy`; docs/mcp.md). The MCP server is a child process
//! on stdio or itself over HTTP (`--server-url`).
//!
//! What is served on `/mcp`: the client POSTs one JSON-RPC message; a request is answered in
//! the POST's response as `application/json` (the proxy's refusal, or the server's response
//! once the policy let it through); a notification or a response is answered 202. The answer
//! to `initialize` names a session (`Mcp-Session-Id`); a message naming another session is
//! refused (404). A GET opens the event stream on which what the server sends unasked (its
//! notifications, its own requests) reaches the client; with no stream open such a message is
//! dropped and said on standard error. DELETE is refused (405): the proxy's one session ends
//! with the process. A request with an `Origin` header from anywhere but this machine is
//! refused (403), as MCP asks of a local server against DNS rebinding.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::mpsc as events;

use super::serve::HttpLimits;
use super::serve::{collect_body, json_response, serve_connections, BodyError, ErrorStyle};
use crate::acs::ids;
use crate::adapters::mcp_proxy::{id_key, ClientHandle, ClientSink, Config, Proxy, Upstream};
use crate::guardian::Guardian;

/// The largest message a client may POST.
const MAX_BODY: usize = 4 << 20;

const SESSION_HEADER: &str = "mcp-session-id";

/// Routes each response to the POST waiting for it, and everything else to the event stream.
struct Router {
    waiting: Mutex<HashMap<String, mpsc::SyncSender<Vec<u8>>>>,
    /// The open GET stream, if any (a new one replaces the old).
    stream: Mutex<Option<events::UnboundedSender<Bytes>>>,
    /// The session named in the answer to `initialize`.
    session: String,
}

/// A response body: a whole JSON answer, or the event stream fed by the [`Router`].
enum McpBody {
    Whole(Full<Bytes>),
    Events(events::UnboundedReceiver<Bytes>),
}

impl From<Full<Bytes>> for McpBody {
    fn from(f: Full<Bytes>) -> McpBody {
        McpBody::Whole(f)
    }
}

impl Body for McpBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            McpBody::Whole(f) => Pin::new(f).poll_frame(cx),
            McpBody::Events(rx) => rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            McpBody::Whole(f) => f.is_end_stream(),
            McpBody::Events(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            McpBody::Whole(f) => f.size_hint(),
            McpBody::Events(_) => SizeHint::default(),
        }
    }
}

/// One server message as a Server-Sent Event (JSON text has no line breaks to split).
fn event(message: &[u8]) -> Bytes {
    let mut e = Vec::with_capacity(message.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend(message.iter().filter(|b| **b != b'\n' && **b != b'\r'));
    e.extend_from_slice(b"\n\n");
    Bytes::from(e)
}

impl ClientSink for Router {
    fn send(&self, message: &[u8]) {
        let v: Value = serde_json::from_slice(message).unwrap_or(Value::Null);
        if v.get("method").is_none() {
            if let Some(id) = v.get("id") {
                let tx = self
                    .waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id_key(id));
                if let Some(tx) = tx {
                    let _ = tx.send(message.to_vec());
                    return;
                }
            }
        }
        let mut stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = stream.as_ref() {
            if tx.send(event(message)).is_ok() {
                return;
            }
            *stream = None;
        }
        let what = v
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a message");
        eprintln!(
            "warden mcp-proxy: the server sent {what} that answers no waiting request, and the \
             client has no event stream open (GET /mcp); dropped"
        );
    }
}

fn with_session(mut r: hyper::Response<McpBody>, session: &str) -> hyper::Response<McpBody> {
    if let Ok(v) = HeaderValue::from_str(session) {
        r.headers_mut().insert(SESSION_HEADER, v);
    }
    r
}

fn rpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
) -> hyper::Response<Full<Bytes>> {
    json_response(
        status,
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            .to_string()
            .into_bytes(),
    )
}

fn local_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    let host = if rest.starts_with('[') {
        rest.split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default()
    } else {
        rest.split(':').next().unwrap_or("").to_string()
    };
    matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

async fn handle(
    client: ClientHandle,
    router: Arc<Router>,
    limits: HttpLimits,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<McpBody>, Infallible> {
    let session = router.session.clone();
    Ok(with_session(
        exchange(client, router, limits, req).await,
        &session,
    ))
}

async fn exchange(
    client: ClientHandle,
    router: Arc<Router>,
    limits: HttpLimits,
    req: hyper::Request<Incoming>,
) -> hyper::Response<McpBody> {
    whole(answer(client, router, limits, req).await)
}

fn whole(
    r: Result<hyper::Response<Full<Bytes>>, hyper::Response<McpBody>>,
) -> hyper::Response<McpBody> {
    match r {
        Ok(r) => r.map(McpBody::from),
        Err(stream) => stream,
    }
}

/// Answers one request: `Err` carries an event stream (a GET), `Ok` a whole answer.
async fn answer(
    client: ClientHandle,
    router: Arc<Router>,
    limits: HttpLimits,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Response<McpBody>> {
    if req.uri().path() != "/mcp" {
        return Ok(json_response(
            StatusCode::NOT_FOUND,
            br#"{"error":"not found: the MCP endpoint is /mcp"}"#.to_vec(),
        ));
    }
    if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
        if !origin.to_str().is_ok_and(local_origin) {
            return Ok(json_response(
                StatusCode::FORBIDDEN,
                br#"{"error":"requests from another origin are refused"}"#.to_vec(),
            ));
        }
    }
    if let Some(named) = req.headers().get(SESSION_HEADER) {
        if named.as_bytes() != router.session.as_bytes() {
            return Ok(rpc_error(
                StatusCode::NOT_FOUND,
                Value::Null,
                -32600,
                "no such session: this proxy has one session, named in the answer to initialize",
            ));
        }
    }
    if req.method() == Method::GET {
        let (tx, rx) = events::unbounded_channel();
        *router.stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        let mut r = hyper::Response::new(McpBody::Events(rx));
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut().insert(
            hyper::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        );
        return Err(r);
    }
    if req.method() != Method::POST {
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            br#"{"error":"only POST and GET: the proxy's session ends with the process"}"#.to_vec(),
        );
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, POST"));
        return Ok(r);
    }
    let body = match collect_body(req.into_body(), MAX_BODY, limits.body_timeout).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Ok(rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                "too large",
            ))
        }
        Err(BodyError::TimedOut) => {
            return Ok(rpc_error(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                -32600,
                "body too slow",
            ))
        }
    };
    let message: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => {
            return Ok(rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                "not JSON",
            ))
        }
    };
    if !message.is_object() {
        return Ok(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "warden mcp-proxy takes one JSON-RPC message per POST (no batches)",
        ));
    }
    let id = message.get("id").filter(|v| !v.is_null()).cloned();
    let is_request = message.get("method").is_some() && id.is_some();
    let rx = match (&id, is_request) {
        (Some(id), true) => {
            let (tx, rx) = mpsc::sync_channel(1);
            router
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id_key(id), tx);
            Some(rx)
        }
        _ => None,
    };
    let sent = {
        let client = client.clone();
        tokio::task::spawn_blocking(move || client.from_client(&body)).await
    };
    if !matches!(sent, Ok(Ok(()))) {
        if let Some(id) = &id {
            router
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id_key(id));
        }
        return Ok(rpc_error(
            StatusCode::BAD_GATEWAY,
            id.unwrap_or(Value::Null),
            -32603,
            "the MCP server has ended",
        ));
    }
    let Some(rx) = rx else {
        let mut r = hyper::Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::ACCEPTED;
        return Ok(r);
    };
    let wait = limits
        .request_timeout
        .saturating_sub(Duration::from_secs(1));
    let answer = tokio::task::spawn_blocking(move || rx.recv_timeout(wait)).await;
    Ok(match answer {
        Ok(Ok(bytes)) => json_response(StatusCode::OK, bytes),
        _ => {
            let id = id.unwrap_or(Value::Null);
            router
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id_key(&id));
            rpc_error(
                StatusCode::GATEWAY_TIMEOUT,
                id,
                -32603,
                "the MCP server did not answer in time",
            )
        }
    })
}

/// Runs the proxy with `server` as the MCP server and Streamable HTTP on `addr` for the
/// client, until the server ends or [`Config::stop`] is set; `ready` gets the bound address (port 0 picks a free one).
/// Returns the server's exit code (1 when it had none).
pub fn run(
    guardian: Arc<Guardian>,
    server: &Upstream,
    config: &Config,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
) -> Result<i32, String> {
    let router = Arc::new(Router {
        waiting: Mutex::new(HashMap::new()),
        stream: Mutex::new(None),
        session: ids::random_v4(u64::from(std::process::id())),
    });
    let proxy = Proxy::start(guardian, server, config, router.clone())?;
    let client = proxy.client();
    let limits = HttpLimits::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .enable_time()
        .thread_name("warden-mcp-http")
        .build()
        .map_err(|e| e.to_string())?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| format!("{addr}: {e}"))?;
    ready(listener.local_addr().map_err(|e| e.to_string())?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let streams = router.clone();
    let served = rt.spawn(async move {
        serve_connections(
            listener,
            limits,
            ErrorStyle::JsonRpc,
            move |req| handle(client.clone(), router.clone(), limits, req),
            async {
                let _ = stop_rx.await;
            },
        )
        .await
    });
    while !proxy.server_closed() && !crate::adapters::mcp_proxy::stopped(config) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The stop sequence: no new connections; the requests in flight are answered by the
    // server, which is still running (for up to the stop's grace); only then is it stopped.
    // The event stream (a GET) never ends on its own: it is closed so that its connection
    // can.
    drop(
        streams
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(),
    );
    let _ = stop_tx.send(());
    let still_open = rt.block_on(served).ok().and_then(Result::ok).unwrap_or(0);
    if still_open > 0 {
        eprintln!(
            "warden mcp-proxy: {still_open} connection(s) still had a request in flight when \
             the stop's grace ran out"
        );
    }
    let code = proxy.finish();
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(code)
}
