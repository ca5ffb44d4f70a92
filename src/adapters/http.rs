//! The HTTP/1.1 client the adapters and the command line share: plain `http://`, one
//! connection per exchange (`Connection: close`), standard library only, so the core links no
//! network crates. Used for the core-agent hook's POSTs to a Guardian, the operator commands'
//! GETs against a running server, and an MCP server over Streamable HTTP
//! (`super::mcp_upstream`, which reads event streams through [`Head::body`]).
//!
//! Owns: URLs taken apart, the request head, the response's status, headers and body framing
//! (Content-Length, chunked, or to the end). Must not know what is exchanged.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The largest status or header line accepted.
const MAX_LINE: usize = 64 << 10;
/// The largest whole body [`exchange`] reads.
const MAX_BODY: u64 = 64 << 20;

/// `http://host[:port]/path`, taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The path requests go to.
    pub path: String,
}

impl Endpoint {
    /// Reads an `http://` URL, with `default_path` when it names none (or only `/`);
    /// `https://` is refused with the reason (reach the peer on loopback or a trusted network,
    /// or through a local TLS-terminating proxy).
    pub fn parse(url: &str, default_path: &str) -> Result<Endpoint, String> {
        if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported (reach it over http on loopback or a trusted \
                 network, or through a local TLS-terminating proxy)"
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: the URL must start with http://"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) if &rest[i..] != "/" => (&rest[..i], &rest[i..]),
            Some(i) => (&rest[..i], default_path),
            None => (rest, default_path),
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

    /// `host:port`, for the `Host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Connects to the first of the host's addresses that answers within `timeout`.
    pub fn connect(&self, timeout: Duration) -> io::Result<TcpStream> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in (host, self.port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, timeout) {
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

/// A response's status line and headers.
pub struct Head {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, framed as the headers say.
    pub fn body<R: BufRead + 'static>(&self, reader: R) -> Box<dyn Read> {
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

/// One line (at most 64 KiB), without its line end.
pub fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    r.take(MAX_LINE as u64).read_until(b'\n', &mut line)?;
    if line.len() >= MAX_LINE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a line of the HTTP answer is too long",
        ));
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Reads a response's status line and headers.
pub fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let status_line = read_line(r)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not an HTTP answer: {status_line:?}"),
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
                "too many headers in the HTTP answer",
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
                    format!("a bad chunk size in the HTTP answer: {size:?}"),
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

/// One whole exchange: `method` on `endpoint` with `headers` and an optional JSON `body`;
/// the answer's status and body. Every phase waits at most `timeout`; errors name the URL.
pub fn exchange(
    endpoint: &Endpoint,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let url = format!("http://{}{}", endpoint.authority(), endpoint.path);
    let fail = |e: io::Error| format!("{url}: {e}");
    let mut conn = endpoint.connect(timeout).map_err(fail)?;
    conn.set_read_timeout(Some(timeout))
        .and_then(|()| conn.set_write_timeout(Some(timeout)))
        .map_err(fail)?;
    conn.write_all(request_head(endpoint, method, headers, body.map(<[u8]>::len)).as_bytes())
        .and_then(|()| conn.write_all(body.unwrap_or_default()))
        .map_err(fail)?;
    let mut reader = BufReader::new(conn);
    let head = read_head(&mut reader).map_err(fail)?;
    let mut out = Vec::new();
    head.body(reader)
        .take(MAX_BODY)
        .read_to_end(&mut out)
        .map_err(fail)?;
    Ok((head.status, out))
}

/// The request line and headers (`Connection: close`; a JSON body's type and length).
pub fn request_head(
    endpoint: &Endpoint,
    method: &str,
    headers: &[(&str, &str)],
    body_len: Option<usize>,
) -> String {
    let mut h = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        endpoint.path,
        endpoint.authority()
    );
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(n) = body_len {
        h.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {n}\r\n"
        ));
    }
    h.push_str("\r\n");
    h
}

/// `text` for a URL's query: every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as
/// `%XX`.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`percent_encode`] (any `%XX`; other bytes as they are); `None` for a
/// malformed escape or a result that is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Splits a complete HTTP/1.1 response held in memory into status and body.
pub fn parse_response(resp: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let mut reader = BufReader::new(io::Cursor::new(resp.to_vec()));
    let head = read_head(&mut reader).map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    head.body(reader)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    Ok((head.status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart_and_https_is_refused_with_the_reason() {
        let e = Endpoint::parse("http://127.0.0.1:8000/mcp", "/").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 8000, "/mcp")
        );
        let e = Endpoint::parse("http://[::1]/", "/acs").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("[::1]", 80, "/acs")
        );
        assert_eq!(Endpoint::parse("http://h", "/acs").unwrap().path, "/acs");
        assert!(Endpoint::parse("https://h/mcp", "/")
            .unwrap_err()
            .contains("not supported"));
        assert!(Endpoint::parse("h:1/mcp", "/")
            .unwrap_err()
            .contains("http://"));
        assert!(Endpoint::parse("http://h:x/", "/")
            .unwrap_err()
            .contains("port"));
    }

    #[test]
    fn a_chunked_body_is_dechunked() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n\
                    5\r\ndata:\r\n8;ext=1\r\n {\"x\":1}\r\n3\r\n\n\n\n\r\n0\r\n\r\n";
        let (status, body) = parse_response(raw).unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, b"data: {\"x\":1}\n\n\n");
        let head = read_head(&mut &raw[..]).unwrap();
        assert_eq!(head.header("CONTENT-TYPE"), Some("text/event-stream"));
    }

    #[test]
    fn percent_encoding_round_trips_any_session_id() {
        for id in ["7d3c5a1e-2f4b-4c6d", "a b&c=d%e/f?g#h", "sessão", ""] {
            assert_eq!(percent_decode(&percent_encode(id)).as_deref(), Some(id));
        }
        assert_eq!(percent_encode("a b&c"), "a%20b%26c");
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%FF"), None);
    }

    #[test]
    fn a_body_is_cut_at_its_length() {
        let raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}trailing";
        assert_eq!(parse_response(raw).unwrap(), (404, b"{}".to_vec()));
        assert!(parse_response(b"garbage").is_err());
    }
}
