//! Durability: `kill -9` a `warden serve --state DIR` in the middle of a load of many
//! sessions, restart it on the same folder, continue every stream. Every acknowledged
//! decision survives, the decisions after the restart equal those of an uninterrupted run,
//! and every stored chain verifies and ends where the uninterrupted run's does.

mod serve_common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serve_common::*;
use warden::acs::time;

const SESSIONS: u64 = 48;
const N: u64 = 40;
const THREADS: u64 = 8;

/// Drives every session from `next[s]` to the end (or until the server dies).
fn drive(addr: &str, ts: &str, next: &[u64], acked: &Arc<AtomicU64>) -> (Outcomes, Vec<u64>) {
    serve_common::drive(addr, ts, next, acked, SESSIONS, THREADS, N)
}

fn start(policy: &Path, state: &Path) -> Server {
    serve_policy(policy, &state.display().to_string(), &[])
}

/// Each session's chain length and head in the folder `state`, every chain verified.
fn heads(state: &Path) -> HashMap<String, (usize, String)> {
    chain_heads(&warden::server::store::read_dir(state).unwrap())
}

#[test]
fn kill_9_mid_load_then_resume() {
    let dir = tmp("recovery");
    let policy = dir.join("p.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let ts = time::now_rfc3339_ms();
    let zero = vec![0u64; SESSIONS as usize];

    // The uninterrupted run.
    let reference_state = dir.join("reference");
    let reference = reference_run(start(&policy, &reference_state), &ts, SESSIONS, THREADS, N);
    let denies = reference
        .values()
        .filter(|r| r["result"]["decision"] == "deny")
        .count();
    assert!(denies > 0, "the streams exercise the policy's history");

    // The interrupted run: kill -9 once about half the requests are acknowledged.
    let state = dir.join("crashed");
    let srv = start(&policy, &state);
    let acked = Arc::new(AtomicU64::new(0));
    let target = SESSIONS * N / 2;
    let (before, after_kill) = std::thread::scope(|scope| {
        let acked2 = acked.clone();
        let addr = srv.addr.clone();
        let ts2 = ts.clone();
        let zero2 = zero.clone();
        let h = scope.spawn(move || drive(&addr, &ts2, &zero2, &acked2));
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.load(Ordering::SeqCst) < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        srv.kill9();
        h.join().unwrap()
    });
    let acked_before = before.len() as u64;
    assert!(acked_before < SESSIONS * N, "the kill came before the end");

    // Restart on the same folder and continue each stream where it stopped.
    let srv = start(&policy, &state);
    let mut next = after_kill.clone();
    let mut lost_acks = 0;
    {
        // The request in flight at the kill may have been committed without its answer
        // reaching the client: resending it is then a replay, which is how the client learns
        // it counted.
        let mut conn = Conn::open(&srv.addr).unwrap();
        for s in 0..SESSIONS {
            let i = next[s as usize];
            if i >= N {
                continue;
            }
            let body = serde_json::to_vec(&stream_request(s, i, N, &ts)).unwrap();
            let r = conn.post(&body).unwrap();
            if r["error"]["code"] == -32005 || (i == 0 && r["error"]["code"] == -32000) {
                lost_acks += 1;
            } else {
                assert_eq!(
                    outcome(&r),
                    outcome(&reference[&(s, i)]),
                    "session {s} step {i}"
                );
            }
            next[s as usize] = i + 1;
        }
    }
    let (after, done) = drive(&srv.addr, &ts, &next, &Arc::new(AtomicU64::new(0)));
    assert!(done.iter().all(|i| *i == N), "every stream finished");
    drop(srv);
    assert!(
        lost_acks <= THREADS as usize,
        "at most one request in flight per thread"
    );

    // Every acknowledged decision, before and after the kill, is the uninterrupted run's.
    for (k, r) in before.iter().chain(after.iter()) {
        assert_eq!(
            outcome(r),
            outcome(&reference[k]),
            "session {} step {}",
            k.0,
            k.1
        );
    }
    // Every chain verifies and ends where the uninterrupted run's ends.
    assert_eq!(heads(&state), heads(&reference_state));
    assert_audit_verifies(&state.display().to_string());
    eprintln!(
        "recovery: killed after {acked_before} of {} acknowledged, {lost_acks} answer(s) lost in flight, {} after restart",
        SESSIONS * N,
        after.len()
    );
}
