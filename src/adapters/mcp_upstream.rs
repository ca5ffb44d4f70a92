//! An MCP server reached over Streamable HTTP (`warden mcp-proxy --server-url URL`), for
//! `crate::adapters::mcp_proxy`: each message the proxy forwards is POSTed to the server's
//! endpoint, and what comes back — one JSON message, or a stream of Server-Sent Events — is
//! handed to the proxy message by message; once the server names a session
//! (`Mcp-Session-Id`), a GET stream carries what the server sends unasked.
//!
//! Owns the HTTP/1.1 exchange only (plain `http://`, one connection per exchange, standard
//! library only, so the core keeps no network crates); what a message means is the proxy's.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long to wait for the server to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a POST may wait between two bytes of its answer (a tool call answered on an event
/// stream may take a while, but not forever).
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest header block or single event accepted from the server.
const MAX_LINE: usize = 64 << 10;
const MAX_MESSAGE: usize = 16 << 20;

/// The MCP protocol version the proxy's handshake names, sent on later requests until the
/// server's `initialize` answer names another.
const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";

/// `http://host[:port]/path`, taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    host: String,
    port: u16,
    path: String,
}

impl Endpoint {
    /// Reads an `http://` URL; `https://` is refused with the reason (put a TLS-terminating
    /// proxy in front, or reach the server on loopback).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported for the MCP server (reach it over http on a \
                 trusted network, or through a local TLS-terminating proxy)"
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: the MCP server URL must start with http://"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url}: unclosed [ in the host"))?;
            (format!("[{h}]"), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        if host.is_empty() || host == "[]" {
            return Err(format!("{url}: no host"));
        }
        let port = match port {
            Some(p) => p
                .parse()
                .map_err(|_| format!("{url}: {p:?} is not a port number"))?,
            None => 80,
        };
        Ok(Endpoint {
            host,
            port,
            path: path.to_string(),
        })
    }

    fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn connect(&self) -> io::Result<TcpStream> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in (host, self.port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

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
        let mut h = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\nConnection: close\r\n\
             MCP-Protocol-Version: {}\r\nUser-Agent: warden-mcp-proxy\r\n",
            self.endpoint.path,
            self.endpoint.authority(),
            self.protocol_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        if let Some(s) = self.session() {
            h.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        if let Some(n) = body_len {
            h.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {n}\r\n"
            ));
        }
        h.push_str("\r\n");
        h
    }

    /// POSTs one JSON-RPC message and hands each message of the answer to `deliver`, in
    /// order. Blocks until the answer is complete (an event stream may carry notifications
    /// before the response).
    pub fn post(&self, message: &[u8], deliver: &mut dyn FnMut(&[u8])) -> io::Result<Posted> {
        let mut conn = self.endpoint.connect()?;
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
        let mut conn = self.endpoint.connect()?;
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
            if let Ok(mut conn) = self.endpoint.connect() {
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

/// A response's status line and headers.
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, framed as the headers say.
    fn body<R: BufRead + 'static>(&self, reader: R) -> Box<dyn Read> {
        if self
            .header("transfer-encoding")
            .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
        {
            Box::new(Chunked {
                inner: reader,
                left: 0,
                done: false,
            })
        } else if let Some(n) = self
            .header("content-length")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            Box::new(reader.take(n))
        } else {
            Box::new(reader)
        }
    }
}

fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    r.take(MAX_LINE as u64).read_until(b'\n', &mut line)?;
    if line.len() >= MAX_LINE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a line from the MCP server is too long",
        ));
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let status_line = read_line(r)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not an HTTP answer from the MCP server: {status_line:?}"),
            )
        })?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(r)?;
        if line.is_empty() {
            break;
        }
        if headers.len() > 100 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too many headers from the MCP server",
            ));
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Head { status, headers })
}

/// A chunked transfer-encoded body, de-chunked as it is read.
struct Chunked<R> {
    inner: R,
    left: u64,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let size = read_line(&mut self.inner)?;
            let size = size.split(';').next().unwrap_or("").trim();
            self.left = u64::from_str_radix(size, 16).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a bad chunk size from the MCP server: {size:?}"),
                )
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n as u64;
        if self.left == 0 {
            // The CRLF after the chunk's data.
            read_line(&mut self.inner)?;
        }
        Ok(n)
    }
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
    fn urls_are_taken_apart_and_https_is_refused_with_the_reason() {
        let e = Endpoint::parse("http://127.0.0.1:8000/mcp").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 8000, "/mcp")
        );
        let e = Endpoint::parse("http://[::1]/").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("[::1]", 80));
        assert_eq!(Endpoint::parse("http://h").unwrap().path, "/");
        assert!(Endpoint::parse("https://h/mcp")
            .unwrap_err()
            .contains("not supported"));
        assert!(Endpoint::parse("h:1/mcp").unwrap_err().contains("http://"));
        assert!(Endpoint::parse("http://h:x/").unwrap_err().contains("port"));
    }

    #[test]
    fn events_are_split_joined_and_filtered_by_type() {
        let stream = b": comment\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
                       event: ping\ndata: x\n\nid: 7\ndata: {\"b\":2}\n\n";
        let mut seen = Vec::new();
        read_events(&mut &stream[..], &mut |m| seen.push(m.to_vec())).unwrap();
        assert_eq!(seen, vec![b"{\"a\":\n1}".to_vec(), b"{\"b\":2}".to_vec()]);
    }

    #[test]
    fn a_chunked_body_is_dechunked() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n\
                    5\r\ndata:\r\n8;ext=1\r\n {\"x\":1}\r\n3\r\n\n\n\n\r\n0\r\n\r\n";
        let mut r = BufReader::new(&raw[..]);
        let head = read_head(&mut r).unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.header("CONTENT-TYPE"), Some("text/event-stream"));
        let mut body = Vec::new();
        head.body(r_static(r)).read_to_end(&mut body).unwrap();
        assert_eq!(body, b"data: {\"x\":1}\n\n\n");
    }

    fn r_static(r: BufReader<&[u8]>) -> BufReader<io::Cursor<Vec<u8>>> {
        let mut rest = Vec::new();
        let mut r = r;
        r.read_to_end(&mut rest).unwrap();
        BufReader::new(io::Cursor::new(rest))
    }
}
