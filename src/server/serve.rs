//! `warden serve`: the Guardian as a process. JSON-RPC over stdio (newline-delimited, or
//! LSP-style `Content-Length` framing, detected per message) or over HTTP/1.1 (`POST /acs` or
//! `POST /`, one envelope per request) on hyper + tokio; an optional durable journal
//! (`--state DIR`, [`super::store`]). Policy reload is [`super::watch`].

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, BufRead, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, StatusCode};

use super::store::Store;
use crate::guardian::{Guardian, Journal, Options, Policy};

/// Loads the policy (`None`: the embedded default).
pub fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    match path {
        None => Ok(Policy::embedded_default()),
        Some(p) => Policy::load(p).map_err(|d| d.render(false)),
    }
}

/// Journal records read and restored at a time when a server starts.
const RESTORE_CHUNK: usize = 4096;

/// Builds the Guardian: with `state`, opens the journal there and restores every session
/// from it before serving.
pub fn build(
    policy: Policy,
    options: Options,
    state: Option<&Path>,
) -> Result<(Arc<Guardian>, Option<Arc<Store>>), String> {
    match state {
        None => Ok((Arc::new(Guardian::with_options(policy, options)), None)),
        Some(dir) => {
            let store = Arc::new(Store::open(dir)?);
            let started = Instant::now();
            let journal: Arc<dyn Journal> = store.clone();
            let g = Guardian::with_journal(policy, options, journal);
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
                        dir.display(),
                        g.session_count()
                    );
                }
            }
            g.sweep_sessions();
            if n > 0 {
                eprintln!(
                    "warden: restored {n} journal record(s), {} session(s) from {} in {} ms",
                    g.session_count(),
                    dir.display(),
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
    TooLarge { len: usize, framed: bool },
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
        // Further headers (Content-Type) until the blank line.
        loop {
            match read_line_bounded(r, 8192)? {
                None => return Ok(None),
                Some((h, _)) if h.is_empty() => break,
                Some(_) => {}
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
pub fn run_stdio(g: &Guardian, input: impl Read, mut output: impl Write) -> io::Result<()> {
    let mut input = io::BufReader::with_capacity(64 * 1024, input);
    let max = g.options().protocol.caps.max_envelope_bytes;
    while let Some(frame) = read_frame(&mut input, max)? {
        let (body, framed) = match frame {
            Frame::Line(b) => (g.handle(&b), false),
            Frame::Framed(b) => (g.handle(&b), true),
            Frame::TooLarge { len, framed } => (
                crate::guardian::too_large_response(len, max).to_vec(),
                framed,
            ),
            Frame::BadHeader(why) => (
                crate::acs::envelope::Response::error(
                    crate::acs::envelope::Id::Null,
                    crate::acs::envelope::RpcError::parse_error(why, None),
                )
                .to_vec(),
                true,
            ),
        };
        write_frame(&mut output, &body, framed)?;
    }
    Ok(())
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

async fn handle_http(
    g: Arc<Guardian>,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let max = g.options().protocol.caps.max_envelope_bytes;
    if req.uri().path() != "/acs" && req.uri().path() != "/" {
        return Ok(json_response(
            StatusCode::NOT_FOUND,
            br#"{"error":"not found: POST ACS envelopes to /acs"}"#.to_vec(),
        ));
    }
    if req.method() != Method::POST {
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            br#"{"error":"only POST"}"#.to_vec(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("POST"),
        );
        return Ok(r);
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
    let body = match Limited::new(req.into_body(), max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                crate::guardian::too_large_response(max + 1, max).to_vec(),
            ))
        }
    };
    let out = tokio::task::spawn_blocking(move || g.handle(&body)).await;
    Ok(match out {
        Ok(bytes) => json_response(StatusCode::OK, bytes),
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

/// Serves HTTP on `addr` until the process ends; `ready` gets the bound address (port 0
/// picks a free one).
pub fn run_http(
    g: Arc<Guardian>,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .enable_time()
        .thread_name("warden-http")
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready(listener.local_addr()?);
        serve_connections(listener, move |req| handle_http(g.clone(), req)).await
    })
}

/// Accepts connections on `listener` forever and serves each with `handler` (HTTP/1.1,
/// keep-alive, 30 s to send the headers). Shared by the ACS listener and the operator
/// endpoint ([`super::operator`]).
pub(crate) async fn serve_connections<F, Fut>(
    listener: tokio::net::TcpListener,
    handler: F,
) -> io::Result<()>
where
    F: Fn(hyper::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<hyper::Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors and the like: wait instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let svc = hyper::service::service_fn(handler);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(io, svc)
                .await;
        });
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
