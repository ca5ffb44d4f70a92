//! An MCP server reached over Streamable HTTP (`warden mcp-proxy --server-url URL`), for
//! `crate::adapters::mcp_proxy`: each message the proxy forwards is POSTed to the server's
//! endpoint, and what comes back — one JSON message, or a stream of Server-Sent Events — is
//! handed to the proxy message by message; once the server names a session
//! (`Mcp-Session-Id`), a GET stream carries what the server sends unasked.
//!
//! Owns the HTTP/1.1 exchange only (plain `http://`, one connection per exchange, standard
//! library only, so the core keeps no network crates); what a message means is the proxy's.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};

pub use super::http::Endpoint;
use super::http::{read_head, request_head};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long to wait for the server to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a POST may wait between two bytes of its answer (a tool call answered on an event
/// stream may take a while, but not forever).
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest single message accepted from the server.
const MAX_MESSAGE: usize = 16 << 20;

/// The MCP protocol version the proxy's handshake names, sent on later requests until the
/// server's `initialize` answer names another.
const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";

/// What the server said to one POST, beyond the messages already handed on.
#[derive(Debug, PartialEq)]
pub enum Posted {
    /// 2xx: the answer (if any) was handed on.
    Delivered,
    /// The server refused the message: its status and a short reason.
    Refused(u16, String),
}

/// The server's side of the proxy over Streamable HTTP.
pub struct HttpUpstream {
    endpoint: Endpoint,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<String>,
    /// The GET stream's connection, to shut it down when the proxy ends.
    stream: Mutex<Option<TcpStream>>,
    closed: AtomicBool,
}

impl HttpUpstream {
    /// An upstream MCP server reached over HTTP at `endpoint`.
    pub fn new(endpoint: Endpoint) -> HttpUpstream {
        HttpUpstream {
            endpoint,
            session: Mutex::new(None),
            protocol_version: Mutex::new(DEFAULT_PROTOCOL_VERSION.into()),
            stream: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// The session the server named, if it named one.
    pub fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether [`HttpUpstream::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Records the protocol version an `initialize` answer settled on (sent as
    /// `MCP-Protocol-Version` from then on).
    pub fn set_protocol_version(&self, version: &str) {
        *self
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version.to_string();
    }

    fn headers(&self, method: &str, accept: &str, body_len: Option<usize>) -> String {
        let version = self
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let session = self.session();
        let mut extra = vec![
            ("Accept", accept),
            ("MCP-Protocol-Version", version.as_str()),
            ("User-Agent", "warden-mcp-proxy"),
        ];
        if let Some(s) = &session {
            extra.push(("Mcp-Session-Id", s.as_str()));
        }
        request_head(&self.endpoint, method, &extra, body_len)
    }

    /// POSTs one JSON-RPC message and hands each message of the answer to `deliver`, in
    /// order. Blocks until the answer is complete (an event stream may carry notifications
    /// before the response).
    pub fn post(&self, message: &[u8], deliver: &mut dyn FnMut(&[u8])) -> io::Result<Posted> {
        let mut conn = self.endpoint.connect(CONNECT_TIMEOUT)?;
        conn.set_read_timeout(Some(READ_TIMEOUT))?;
        let head = self.headers(
            "POST",
            "application/json, text/event-stream",
            Some(message.len()),
        );
        conn.write_all(head.as_bytes())?;
        conn.write_all(message)?;
        conn.flush()?;
        let mut reader = BufReader::new(conn);
        let answer = read_head(&mut reader)?;
        if let Some(s) = answer.header("mcp-session-id") {
            *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.to_string());
        }
        if !(200..300).contains(&answer.status) {
            let mut body = Vec::new();
            let _ = answer.body(reader).take(4096).read_to_end(&mut body);
            let text = String::from_utf8_lossy(&body).trim().to_string();
            return Ok(Posted::Refused(answer.status, text));
        }
        let events = answer
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut body = BufReader::new(answer.body(reader));
        if events {
            read_events(&mut body, deliver)?;
        } else {
            let mut all = Vec::new();
            body.take(MAX_MESSAGE as u64 + 1).read_to_end(&mut all)?;
            if all.len() > MAX_MESSAGE {
                return Err(too_large());
            }
            if !all.iter().all(u8::is_ascii_whitespace) {
                deliver(&all);
            }
        }
        Ok(Posted::Delivered)
    }

    /// Holds the GET stream open and hands each message the server sends unasked to
    /// `deliver`, until the proxy ends or the server closes the stream. `Ok(false)`: the
    /// server offers no such stream (405), which MCP allows.
    pub fn listen(&self, deliver: &mut dyn FnMut(&[u8])) -> io::Result<bool> {
        let mut conn = self.endpoint.connect(CONNECT_TIMEOUT)?;
        conn.write_all(self.headers("GET", "text/event-stream", None).as_bytes())?;
        *self.stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.try_clone()?);
        if self.closed.load(Ordering::SeqCst) {
            let _ = conn.shutdown(Shutdown::Both);
        }
        let mut reader = BufReader::new(conn);
        let answer = read_head(&mut reader)?;
        if !(200..300).contains(&answer.status) {
            return Ok(false);
        }
        let mut body = BufReader::new(answer.body(reader));
        read_events(&mut body, deliver)?;
        Ok(true)
    }

    /// Ends the server's session (DELETE, as MCP asks of a client that is done) and closes
    /// the GET stream.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(s) = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if self.session().is_some() {
            if let Ok(mut conn) = self.endpoint.connect(CONNECT_TIMEOUT) {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                if conn
                    .write_all(self.headers("DELETE", "*/*", None).as_bytes())
                    .is_ok()
                {
                    let _ = read_head(&mut BufReader::new(conn));
                }
            }
        }
    }
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the MCP server sent more than 16 MiB in one message",
    )
}

/// Reads Server-Sent Events until the stream ends, handing the data of each `message` event
/// (the default type) to `deliver`.
fn read_events(r: &mut impl BufRead, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    let mut data: Vec<u8> = Vec::new();
    let mut kind = String::new();
    loop {
        let mut line = Vec::new();
        let n = r.take(MAX_MESSAGE as u64).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.len() >= MAX_MESSAGE {
            return Err(too_large());
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        if line.is_empty() {
            if !data.is_empty() && (kind.is_empty() || kind == "message") {
                deliver(&data);
            }
            data.clear();
            kind.clear();
            continue;
        }
        if line.starts_with(b":") {
            continue;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"data" => {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                if data.len() > MAX_MESSAGE {
                    return Err(too_large());
                }
            }
            b"event" => kind = String::from_utf8_lossy(value).into_owned(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_joined_and_filtered_by_type() {
        let stream = b": comment\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
                       event: ping\ndata: x\n\nid: 7\ndata: {\"b\":2}\n\n";
        let mut seen = Vec::new();
        read_events(&mut &stream[..], &mut |m| seen.push(m.to_vec())).unwrap();
        assert_eq!(seen, vec![b"{\"a\":\n1}".to_vec(), b"{\"b\":2}".to_vec()]);
    }
}
