//! A bounded load test of `warden serve --listen` on loopback: 1 000 concurrent sessions ×
//! 100 hooks each (handshake, sessionStart, turns of tool calls and results, sessionEnd),
//! interleaved over 100 keep-alive connections; in memory and with `--state` (every answer
//! fsynced first). Prints throughput and latency percentiles. Ignored by default; run with
//! `cargo test --release --test serve_load -- --ignored --nocapture` (numbers in
//! benches/RESULTS.md, "serve load").

mod serve_common;

use std::time::{Duration, Instant};

use serve_common::*;
use warden::acs::time;

const SESSIONS: u64 = 1_000;
const HOOKS: u64 = 100;
/// Keep-alive connections (`WARDEN_LOAD_CONNS`, default 100).
fn conns() -> u64 {
    std::env::var("WARDEN_LOAD_CONNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}
const DEADLINE: Duration = Duration::from_secs(600);

/// What the load client reads of an answer: whether it is a result or an error.
#[derive(serde::Deserialize)]
struct Probe {
    result: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

struct Report {
    requests: usize,
    errors: usize,
    wall: Duration,
    lat: Vec<Duration>,
    /// The server's CPU time over the run, seconds.
    cpu: f64,
    /// The server's CPU time by thread name since it started, seconds.
    threads: std::collections::BTreeMap<String, f64>,
}

fn run(extra: &[&str]) -> Report {
    let dir = tmp("load");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let mut args = vec![
        "--policy",
        policy.to_str().unwrap(),
        "--skew-window-ms",
        "3600000",
        // The keep-alive connections all come from loopback (the default cap is 64 per peer).
        "--max-connections-per-peer",
        "1000",
    ];
    args.extend_from_slice(extra);
    let state = dir.join("state");
    let state_s = state.display().to_string();
    if extra.contains(&"--state") {
        args.pop();
        args.push(&state_s);
    }
    let srv = Server::start(&args);
    let cpu_before = srv.cpu_seconds();
    let ts = time::now_rfc3339_ms();
    let started = Instant::now();
    let conns = conns();
    let handles: Vec<_> = (0..conns)
        .map(|c| {
            let addr = srv.addr.clone();
            let ts = ts.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr).expect("connect");
                let mine: Vec<u64> = (0..SESSIONS).filter(|s| s % conns == c).collect();
                let mut lat = Vec::with_capacity(mine.len() * HOOKS as usize);
                let mut errors = 0;
                'outer: for i in 0..HOOKS {
                    // Envelopes are encoded a round ahead, and answers checked without building
                    // a JSON tree: the client shares the two cores, and its work is not the
                    // Guardian's.
                    let bodies: Vec<Vec<u8>> = mine
                        .iter()
                        .map(|s| serde_json::to_vec(&stream_request(*s, i, HOOKS, &ts)).unwrap())
                        .collect();
                    for body in &bodies {
                        if started.elapsed() > DEADLINE {
                            break 'outer;
                        }
                        let t = Instant::now();
                        let (_, answer) = conn.post_bytes(body).expect("a response");
                        lat.push(t.elapsed());
                        let probe: Probe = serde_json::from_slice(&answer).expect("a JSON answer");
                        if probe.error.is_some() || probe.result.is_none() {
                            errors += 1;
                            if errors < 3 {
                                eprintln!("error response: {}", String::from_utf8_lossy(&answer));
                            }
                        }
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut errors = 0;
    for h in handles {
        let (l, e) = h.join().unwrap();
        lat.extend(l);
        errors += e;
    }
    let wall = started.elapsed();
    let cpu = srv.cpu_seconds() - cpu_before;
    let threads = srv.cpu_by_thread();
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
    lat.sort();
    Report {
        requests: lat.len(),
        errors,
        wall,
        lat,
        cpu,
        threads,
    }
}

fn pct(lat: &[Duration], p: f64) -> f64 {
    let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
    lat[i].as_secs_f64() * 1e3
}

fn print(name: &str, r: &Report) {
    println!(
        "serve load [{name}]: {} sessions x {} hooks over {} connections: {} requests in {:.2} s = {:.0} req/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; server CPU {:.1} µs/request; {} errors",
        SESSIONS,
        HOOKS,
        conns(),
        r.requests,
        r.wall.as_secs_f64(),
        r.requests as f64 / r.wall.as_secs_f64(),
        pct(&r.lat, 0.5),
        pct(&r.lat, 0.99),
        pct(&r.lat, 1.0),
        r.cpu * 1e6 / r.requests.max(1) as f64,
        r.errors
    );
    let per_request = |secs: f64| secs * 1e6 / r.requests.max(1) as f64;
    println!(
        "  server CPU by thread, µs/request: {}",
        r.threads
            .iter()
            .map(|(name, secs)| format!("{name} {:.1}", per_request(*secs)))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
#[ignore = "load test: run with --release -- --ignored --nocapture"]
fn serve_load_1000_sessions_x_100_hooks() {
    // `WARDEN_LOAD_MODES=memory` or `=state` runs one mode (for a profile of one).
    let modes = std::env::var("WARDEN_LOAD_MODES").unwrap_or_else(|_| "memory,state".into());
    let mut reports = Vec::new();
    if modes.contains("memory") {
        let mem = run(&[]);
        print("in memory", &mem);
        reports.push(mem);
    }
    if modes.contains("state") {
        let durable = run(&["--state", "DIR"]);
        print("--state (group commit, flushed before answering)", &durable);
        reports.push(durable);
    }
    for r in &reports {
        assert_eq!(r.errors, 0);
        assert_eq!(
            r.requests as u64,
            SESSIONS * HOOKS,
            "finished within the deadline"
        );
    }
}
