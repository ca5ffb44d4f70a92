//! Decision-log sinks for `--decision-log` (docs/serve.md, "Decision logs"): the Guardian
//! builds one record per decision (`guardian::log`); these put it somewhere.
//!
//! - a file path: one JSON line appended per record, written before the answer goes out;
//! - `-`: one JSON line on stdout (only when stdout is not the protocol's channel);
//! - `http://HOST:PORT/PATH`: records are queued (bounded) and POSTed in batches of JSON lines
//!   by a background thread. A full queue or a failed POST drops records: they are counted and
//!   reported on stderr, and a decision never waits for or fails on the collector.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, Read as _, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::guardian::log::DecisionLog;

/// Records held for the HTTP collector before new ones are dropped.
pub const QUEUE_CAPACITY: usize = 10_000;
/// Most records in one POST.
pub const BATCH_MAX: usize = 500;
/// How long a batch waits to fill before it is sent.
pub const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Time limit on connecting to the collector and on its answer.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// Where `--decision-log SPEC` sends records. `stdout_free`: stdout does not carry the
/// protocol (`-` is refused otherwise).
pub fn open(spec: &str, stdout_free: bool) -> Result<Arc<dyn DecisionLog>, String> {
    if spec == "-" {
        if !stdout_free {
            return Err(
                "--decision-log -: stdout carries the JSON-RPC protocol on the stdio \
                 transport; write the log to a file or an http:// collector, or serve with \
                 --listen"
                    .into(),
            );
        }
        return Ok(Arc::new(Stdout));
    }
    if spec.starts_with("https://") {
        return Err(format!(
            "--decision-log {spec}: https collectors are not supported (this build has no TLS \
             client); send to a local collector or forwarder over http:// on loopback"
        ));
    }
    if let Some(rest) = spec.strip_prefix("http://") {
        return Ok(Arc::new(Http::start(spec, rest)?));
    }
    let path = std::path::Path::new(spec);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("--decision-log {}: {e}", path.display()))?;
    Ok(Arc::new(FileSink {
        file: Mutex::new(file),
        name: spec.to_string(),
        failures: AtomicU64::new(0),
    }))
}

fn line(record: &Value) -> Vec<u8> {
    let mut b = record.to_string().into_bytes();
    b.push(b'\n');
    b
}

/// Appends each record as one line, in one write.
struct FileSink {
    file: Mutex<File>,
    name: String,
    failures: AtomicU64,
}

impl DecisionLog for FileSink {
    fn record(&self, record: &Value) {
        let bytes = line(record);
        let r = self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(&bytes);
        if let Err(e) = r {
            let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
            // The first failure and then every thousandth: a full disk must not flood stderr.
            if n == 1 || n.is_multiple_of(1000) {
                eprintln!(
                    "warden: decision log {}: {e} ({n} record(s) lost so far)",
                    self.name
                );
            }
        }
    }
}

/// One line per record on stdout.
struct Stdout;

impl DecisionLog for Stdout {
    fn record(&self, record: &Value) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(&line(record));
        let _ = out.flush();
    }
}

/// Batched POSTs of JSON lines from a background thread.
struct Http {
    queue: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

enum Msg {
    Line(Vec<u8>),
    /// Send what is gathered now, then say so.
    Flush(mpsc::Sender<()>),
}

/// Where an `http://` collector is.
#[derive(Debug, Clone)]
struct Target {
    host: String,
    authority: String,
    path: String,
}

fn parse_target(rest: &str) -> Result<Target, String> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err("expected http://HOST:PORT/PATH".into());
    }
    let host = if authority.starts_with('[') || authority.rsplit_once(':').is_some() {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok(Target {
        host,
        authority: authority.to_string(),
        path: path.to_string(),
    })
}

impl Http {
    fn start(spec: &str, rest: &str) -> Result<Http, String> {
        let target = parse_target(rest).map_err(|e| format!("--decision-log {spec}: {e}"))?;
        let (tx, rx) = mpsc::sync_channel(QUEUE_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        let name = spec.to_string();
        std::thread::Builder::new()
            .name("warden-decision-log".into())
            .spawn(move || ship(rx, target, name, d))
            .map_err(|e| format!("--decision-log {spec}: {e}"))?;
        Ok(Http { queue: tx, dropped })
    }
}

impl DecisionLog for Http {
    fn record(&self, record: &Value) {
        match self.queue.try_send(Msg::Line(line(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn flush(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (tx, rx) = mpsc::channel();
        let mut msg = Msg::Flush(tx);
        loop {
            match self.queue.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
        let _ = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let lost = self.dropped.load(Ordering::Relaxed);
        if lost > 0 {
            eprintln!("warden: decision log: {lost} record(s) dropped in all");
        }
    }
}

/// The background thread: gathers a batch, POSTs it, counts what was lost, and says so on
/// stderr (at most every 10 seconds).
fn ship(rx: Receiver<Msg>, target: Target, name: String, dropped: Arc<AtomicU64>) {
    let mut reported = 0u64;
    let mut last_report = Instant::now() - Duration::from_secs(60);
    let mut batch: VecDeque<Vec<u8>> = VecDeque::new();
    let send = |batch: &mut VecDeque<Vec<u8>>, last_report: Instant| {
        if batch.is_empty() {
            return;
        }
        let body: Vec<u8> = batch.drain(..).flatten().collect();
        let n = body.iter().filter(|b| **b == b'\n').count() as u64;
        if let Err(e) = post(&target, &body) {
            dropped.fetch_add(n, Ordering::Relaxed);
            if last_report.elapsed() >= Duration::from_secs(10) {
                eprintln!("warden: decision log {name}: {e}");
            }
        }
    };
    loop {
        let mut flushed = None;
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(Msg::Line(r)) => {
                batch.push_back(r);
                let until = Instant::now() + BATCH_WAIT;
                while batch.len() < BATCH_MAX {
                    let left = until.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(Msg::Line(r)) => batch.push_back(r),
                        Ok(Msg::Flush(done)) => {
                            flushed = Some(done);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                send(&mut batch, last_report);
            }
            Ok(Msg::Flush(done)) => flushed = Some(done),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if let Some(done) = flushed {
            let _ = done.send(());
        }
        let lost = dropped.load(Ordering::Relaxed);
        if lost > reported && last_report.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "warden: decision log {name}: {} record(s) dropped ({lost} in all): the \
                 collector was unreachable or the queue of {QUEUE_CAPACITY} was full",
                lost - reported
            );
            reported = lost;
            last_report = Instant::now();
        }
    }
}

/// One POST of `body` (JSON lines); `Err` unless the collector answers 2xx.
fn post(t: &Target, body: &[u8]) -> Result<(), String> {
    let addr = t
        .host
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", t.host))?
        .next()
        .ok_or_else(|| format!("{}: no address", t.host))?;
    let mut s = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(HTTP_TIMEOUT)).ok();
    s.set_write_timeout(Some(HTTP_TIMEOUT)).ok();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-ndjson\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: warden\r\n\r\n",
        t.path,
        t.authority,
        body.len()
    );
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .map_err(|e| e.to_string())?;
    let mut r = io::BufReader::new(s.take(64 * 1024));
    let mut status = String::new();
    r.read_line(&mut status).map_err(|e| e.to_string())?;
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(format!("the collector answered {:?}", status.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_with_a_default_port_and_path() {
        let t = parse_target("127.0.0.1:9000/logs").unwrap();
        assert_eq!(
            (t.host.as_str(), t.path.as_str()),
            ("127.0.0.1:9000", "/logs")
        );
        let t = parse_target("localhost").unwrap();
        assert_eq!((t.host.as_str(), t.path.as_str()), ("localhost:80", "/"));
        assert!(parse_target("user@host/x").is_err());
    }

    #[test]
    fn stdout_is_refused_when_it_carries_the_protocol() {
        let e = open("-", false).err().unwrap();
        assert!(e.contains("stdio"), "{e}");
        let e = open("https://example.com/x", true).err().unwrap();
        assert!(e.contains("not supported"), "{e}");
    }
}
