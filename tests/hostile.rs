//! The hostile-load suite (docs/serve.md, "Sessions"): `warden serve` on loopback under a
//! session flood, abandoned sessions across a `kill -9` restart, and a restart over many ended
//! sessions, with what each costs. Bounded: `WARDEN_HOSTILE_SCALE` (default 1) multiplies the
//! counts; CI runs the default, `scripts/hostile-load.sh` a large scale in release, whose
//! figures are in benches/RESULTS.md. (Slow and half-open connections and reload under load
//! have their own tests beside the HTTP limits and `--watch`.)

mod serve_common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{stream_request, tmp, Conn, Server, POLICY};
use warden::acs::{envelope, ids, time};

fn scale() -> u64 {
    std::env::var("WARDEN_HOSTILE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn post(c: &mut Conn, v: &Value) -> Value {
    c.post(&serde_json::to_vec(v).unwrap()).unwrap()
}

fn policy_file(dir: &std::path::Path) -> String {
    let p = dir.join("p.ward");
    std::fs::write(&p, POLICY).unwrap();
    p.to_str().unwrap().to_string()
}

/// `count` requests over `conns` connections in parallel; returns how many got `want`.
fn flood(addr: &str, conns: u64, count: u64, make: impl Fn(u64) -> Value + Sync) -> Vec<Value> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                let make = &make;
                s.spawn(move || {
                    let mut conn = Conn::open(addr).unwrap();
                    (c..count)
                        .step_by(conns as usize)
                        .map(|i| post(&mut conn, &make(i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

#[test]
fn a_session_flood_does_not_lock_out_real_clients() {
    let dir = tmp("hostile-flood");
    let policy = policy_file(&dir);
    let server = Server::start(&["--policy", &policy, "--max-sessions", "100"]);
    let n = 5_000 * scale();
    let started = Instant::now();
    let answers = flood(&server.addr, 4, n, |i| {
        envelope::request(
            i,
            "steps/toolCallRequest",
            &ids::counter(1, i),
            &time::now_rfc3339_ms(),
            json!({"agent_id": "flood", "session_id": ids::counter(0xf100d, i)}),
            json!({"tool": {"name": "ls"}, "arguments": {}}),
        )
    });
    let took = started.elapsed();
    assert!(answers
        .iter()
        .all(|r| r["error"]["code"] == -32003
            && r["error"]["data"]["reason"] == "handshake_required"));
    eprintln!(
        "flood: {n} handshake-less requests in {:.2} s ({:.0}/s), server RSS {} kB",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        server.memory_kb("VmRSS")
    );
    // Every slot is still free for real clients.
    let ts = time::now_rfc3339_ms();
    let mut c = Conn::open(&server.addr).unwrap();
    for s in 0..100 {
        // The hello and the first step: the cap counts sessions that took a step (those that
        // only said hello give way to newer hellos; docs/serve.md, "Hello admission").
        for i in 0..2 {
            let r = post(&mut c, &stream_request(s, i, 10, &ts));
            assert_eq!(r["result"]["decision"], "allow", "session {s}: {r}");
        }
    }
    // And the cap holds: the 101st is refused.
    let r = post(&mut c, &stream_request(100, 0, 10, &ts));
    assert_eq!(r["error"]["code"], -32000, "{r}");
}

#[test]
fn abandoned_sessions_leave_memory_and_stay_old_across_a_restart() {
    let dir = tmp("hostile-abandoned");
    let policy = policy_file(&dir);
    let state = dir.join("state");
    let args = [
        "--policy",
        &policy,
        "--state",
        state.to_str().unwrap(),
        "--idle-timeout",
        "1",
    ];
    let sessions = 200 * scale();
    let ts = time::now_rfc3339_ms();
    let server = Server::start(&args);
    // Each session: handshake, sessionStart, one turn; then the agent "crashes".
    let answers = flood(&server.addr, 4, sessions * 6, |k| {
        stream_request(k % sessions, k / sessions, 50, &ts)
    });
    assert!(
        answers.iter().all(|r| r.get("result").is_some()),
        "{answers:?}"
    );
    let live = server.memory_kb("VmRSS");
    std::thread::sleep(Duration::from_millis(2_500));
    server.kill9();
    // Restarted, the abandoned sessions are as old as they were: restored, then dropped again.
    let server = Server::start(&args);
    // (The listener opens before the journal is read: the line comes once the restore is done.)
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.said("restored").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let restored = server
        .said("restored")
        .expect("the server says what it restored");
    assert!(restored.contains(", 0 session(s)"), "{restored}");
    eprintln!(
        "abandoned: {sessions} sessions, live RSS {live} kB; after restart: {restored}; peak RSS {} kB",
        server.memory_kb("VmHWM")
    );
    // One comes back: restored from the journal, its chain and replay window with it.
    let mut c = Conn::open(&server.addr).unwrap();
    let r = post(&mut c, &stream_request(0, 6, 50, &ts));
    assert!(r.get("result").is_some(), "{r}");
    assert!(r["result"]["chain_hash"].is_string(), "{r}");
    let r = post(&mut c, &stream_request(0, 5, 50, &ts));
    assert_eq!(
        r["error"]["code"], -32005,
        "a replayed id is still refused: {r}"
    );
}

#[test]
fn a_restart_over_many_ended_sessions_needs_little_more_memory_than_live() {
    let dir = tmp("hostile-ended");
    let policy = policy_file(&dir);
    let state = dir.join("state");
    let args = ["--policy", &policy, "--state", state.to_str().unwrap()];
    let sessions = 300 * scale();
    let per = 20;
    let ts = time::now_rfc3339_ms();
    let server = Server::start(&args);
    let answers = flood(&server.addr, 4, sessions * per, |k| {
        stream_request(k % sessions, k / sessions, per, &ts)
    });
    assert!(answers.iter().all(|r| r.get("result").is_some()));
    let live = server.memory_kb("VmRSS");
    server.kill9();
    let journal = std::fs::metadata(state.join("warden.redb")).unwrap().len();
    let started = Instant::now();
    let server = Server::start(&args);
    let took = started.elapsed();
    let peak = server.memory_kb("VmHWM");
    eprintln!(
        "ended: {sessions} sessions × {per} events, journal {} kB; live RSS {live} kB; restart {:.2} s, peak RSS {peak} kB ({:.2}× live)",
        journal / 1024,
        took.as_secs_f64(),
        peak as f64 / live as f64
    );
    assert!(
        peak <= live * 3 / 2 + 8 * 1024,
        "restart peak {peak} kB against {live} kB live"
    );
}
