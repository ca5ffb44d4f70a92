//! `warden mcp-proxy --listen ADDR`: MCP's Streamable HTTP transport on the client's side of
//! the proxy (`crate::adapters::mcp_proxy`; docs/mcp.md). The MCP server is still a child
//! process on stdio.
//!
//! The subset served: the client POSTs one JSON-RPC message to `/mcp`; a request is answered
//! in the POST's response as `application/json` (the proxy's refusal, or the server's
//! response once the policy let it through); a notification or a response is answered 202.
//! There is no GET stream (405, which the transport allows), so what the server sends that
//! answers no request (notifications, its own requests) is dropped and said on standard
//! error. A request with an `Origin` header from anywhere but this machine is refused (403),
//! as MCP asks of a local server against DNS rebinding.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use super::serve::HttpLimits;
use super::serve::{collect_body, json_response, serve_connections, BodyError, ErrorStyle};
use crate::adapters::mcp_proxy::{id_key, ClientHandle, ClientSink, Config, Proxy};
use crate::guardian::Guardian;

/// The largest message a client may POST.
const MAX_BODY: usize = 4 << 20;

/// Routes each response to the POST waiting for it.
#[derive(Default)]
struct Router {
    waiting: Mutex<HashMap<String, mpsc::SyncSender<Vec<u8>>>>,
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
        let what = v
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a message");
        eprintln!(
            "warden mcp-proxy: the server sent {what} that answers no waiting request; dropped \
             (no GET stream over HTTP)"
        );
    }
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
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
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
    if req.method() != Method::POST {
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            br#"{"error":"only POST: this endpoint has no GET stream and no session to delete"}"#
                .to_vec(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("POST"),
        );
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
        return Ok(hyper::Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()))
            .unwrap_or_default());
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
    server: &[String],
    config: &Config,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
) -> Result<i32, String> {
    let router = Arc::new(Router::default());
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
    rt.spawn(async move {
        serve_connections(listener, limits, ErrorStyle::JsonRpc, move |req| {
            handle(client.clone(), router.clone(), limits, req)
        })
        .await
    });
    while !proxy.server_closed() && !crate::adapters::mcp_proxy::stopped(config) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = proxy.finish();
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(code)
}
