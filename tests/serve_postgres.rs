//! `warden serve --state postgres://…` against a real PostgreSQL on loopback: the journal,
//! group commit and compaction through the library; then `kill -9` of a server under load,
//! a restart on the same database, every acknowledged decision kept (equal to an
//! uninterrupted run on the embedded store), replayed ids refused, history-dependent rules
//! still firing, and `warden audit verify|export` reading the database.
//!
//! The database comes from `WARDEN_TEST_POSTGRES_URL` (`scripts/postgres-test-setup.sh start
//! DIR` prints one; `.ci/run` sets it). Each test creates a database of its own there and
//! drops it at the end. Without the variable the tests are skipped with a message, except
//! under CI (`CI` set), where they fail.

mod common;
mod pg_common;
mod serve_common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pg_common::*;
use serve_common::*;
use warden::acs::time;
use warden::guardian::journal::Journal;
use warden::server::pg::PgStore;

const SESSIONS: u64 = 32;
const N: u64 = 30;
const THREADS: u64 = 8;

#[test]
fn the_journal_commits_in_groups_reads_back_and_compacts() {
    let Some(server) = server_url() else { return };
    let db = Db::create(&server, "journal");
    {
        let store = Arc::new(PgStore::open(&db.url).unwrap());
        // Many threads submitting at once: every batch durable, each session's records in
        // the order its thread submitted them.
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let pending: Vec<_> = (0..50)
                        .map(|i| store.submit(vec![sealed(&format!("s{t}"), i)]))
                        .collect();
                    for d in pending {
                        d.wait().unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(store.records().unwrap().len(), 400);
        let s3 = store.records_of("s3").unwrap();
        assert_eq!(s3, (0..50).map(|i| sealed("s3", i)).collect::<Vec<_>>());
        // Compaction replaces a session's records with its summary, in one transaction.
        store.compact("s3", sealed("s3", 999)).unwrap();
        assert_eq!(store.records_of("s3").unwrap(), [sealed("s3", 999)]);
        let chunk = store.records_from(0, 10).unwrap();
        assert_eq!(chunk.len(), 10);
        let seqs: Vec<u64> = chunk.iter().map(|(s, _)| *s).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        let last = store.records_from(0, 1000).unwrap();
        assert_eq!(last.len(), 351);
        assert_eq!(last.last().unwrap().1, sealed("s3", 999));
    }
    // Reopened, it continues after the last record.
    let store = PgStore::open(&db.url).unwrap();
    store.append(vec![sealed("s9", 1)]).unwrap();
    let all = store.records_from(0, 1000).unwrap();
    assert_eq!(all.last().unwrap().1, sealed("s9", 1));
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    // The schema as docs/serve.md describes it.
    let format: String = db.sql("SELECT value FROM warden_meta WHERE key = 'format'")[0].get(0);
    assert_eq!(format, "warden-journal-1");
    let n: i64 = db.sql("SELECT count(*) FROM warden_journal WHERE session = 's9'")[0].get(0);
    assert_eq!(n, 1);
}

/// Drives every session from `next[s]` to the end (or until the server dies).
fn drive(addr: &str, ts: &str, next: &[u64], acked: &Arc<AtomicU64>) -> (Outcomes, Vec<u64>) {
    serve_common::drive(addr, ts, next, acked, SESSIONS, THREADS, N)
}

fn start(policy: &Path, state: &str) -> Server {
    // A restart under the same name takes its sessions' leases back at once.
    serve_policy(policy, state, &["--guardian-id", "restarted"])
}

#[test]
fn kill_9_mid_load_then_resume_on_postgres() {
    let Some(server) = server_url() else { return };
    let Scratch { db, dir, policy } = Scratch::new(&server, "recovery", POLICY);
    let ts = time::now_rfc3339_ms();
    let zero = vec![0u64; SESSIONS as usize];

    // The uninterrupted run, on the embedded store.
    let reference_state: PathBuf = dir.join("reference");
    let srv = start(&policy, &reference_state.display().to_string());
    let reference = reference_run(srv, &ts, SESSIONS, THREADS, N);
    assert!(
        reference
            .values()
            .any(|r| r["result"]["decision"] == "deny"),
        "the streams exercise the policy's history"
    );

    // The interrupted run, on PostgreSQL: kill -9 once about half is acknowledged.
    let srv = start(&policy, &db.url);
    let acked = Arc::new(AtomicU64::new(0));
    let target = SESSIONS * N / 2;
    let (before, after_kill) = std::thread::scope(|scope| {
        let acked2 = acked.clone();
        let addr = srv.addr.clone();
        let (ts2, zero2) = (ts.clone(), zero.clone());
        let h = scope.spawn(move || drive(&addr, &ts2, &zero2, &acked2));
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.load(Ordering::SeqCst) < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        srv.kill9();
        h.join().unwrap()
    });
    assert!((before.len() as u64) < SESSIONS * N, "the kill came first");

    // Restart on the same database.
    let srv = start(&policy, &db.url);
    let mut next = after_kill.clone();
    let mut lost_acks = 0;
    let mut replays = 0;
    {
        let mut conn = Conn::open(&srv.addr).unwrap();
        for s in 0..SESSIONS {
            let i = next[s as usize];
            if i >= N {
                continue;
            }
            // An acknowledged request sent again is refused as a replay: the restart rebuilt
            // the session's replay window from the database.
            if i >= 2 {
                let body = serde_json::to_vec(&stream_request(s, i - 1, N, &ts)).unwrap();
                let r = conn.post(&body).unwrap();
                assert_eq!(
                    r["error"]["code"],
                    -32005,
                    "session {s} step {}: {r}",
                    i - 1
                );
                replays += 1;
            }
            // The request in flight at the kill may have been committed without its answer
            // reaching the client: sent again, it is then a replay.
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
    assert!(replays > 0, "some sessions were mid-stream at the kill");
    let (after, done) = drive(&srv.addr, &ts, &next, &Arc::new(AtomicU64::new(0)));
    assert!(done.iter().all(|i| *i == N), "every stream finished");
    // `warden audit` only reads: it works beside the running server (which holds the lock).
    assert_audit_verifies(&db.url);
    drop(srv);
    // The commands over a stopped Guardian's state take the URL too.
    let (ok, out, err) = run_warden(&["approvals", "--state", &db.url]);
    assert!(ok, "{out}{err}");
    assert!(
        lost_acks <= THREADS as usize,
        "at most one in flight per thread"
    );

    // Every acknowledged decision is the uninterrupted run's; history-dependent rules (the
    // taint and per-turn rate rules) still deny after the restart.
    for (k, r) in before.iter().chain(after.iter()) {
        assert_eq!(
            outcome(r),
            outcome(&reference[k]),
            "session {} step {}",
            k.0,
            k.1
        );
    }
    assert!(
        after.values().any(|r| r["result"]["decision"] == "deny"),
        "history-dependent denies after the restart"
    );
    // Every chain verifies and ends where the uninterrupted run's ends.
    let heads = assert_chains_match(&db.url, &reference_state);

    // `warden audit` reads the database.
    let out = assert_audit_verifies(&db.url);
    assert!(
        out.contains(&format!("ok: {SESSIONS} session chain(s)")),
        "{out}"
    );
    let (ok, out, err) = run_warden(&["audit", "export", &db.url]);
    assert!(ok, "{err}");
    let total: usize = heads.values().map(|(n, _)| n).sum();
    assert_eq!(out.lines().count(), total);
    let (ok, out, err) = run_warden(&["audit", "show", &db.url, "--session", "nope"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("no session nope"), "{err}");
    eprintln!(
        "postgres recovery: killed after {} of {} acknowledged, {lost_acks} lost in flight, \
         {replays} replays refused, {} after restart",
        before.len(),
        SESSIONS * N,
        after.len()
    );
}

#[test]
fn a_database_without_warden_state_is_said_so() {
    let Some(server) = server_url() else { return };
    let db = Db::create(&server, "empty");
    let (ok, _, err) = run_warden(&["audit", "verify", &db.url]);
    assert!(!ok);
    assert!(err.contains("no Warden state here"), "{err}");
    // A URL's password never shows in a message.
    let with_password = db.url.replacen("://warden@", "://warden:hunter2@", 1);
    let (_, out, err) = run_warden(&["audit", "verify", &with_password]);
    assert!(
        !out.contains("hunter2") && !err.contains("hunter2"),
        "{err}"
    );
}

#[test]
fn a_guardian_that_loses_its_database_refuses_instead_of_answering() {
    let Some(server) = server_url() else { return };
    let Scratch { db, policy, .. } = Scratch::new(&server, "lost", POLICY);
    let ts = time::now_rfc3339_ms();
    let srv = start(&policy, &db.url);
    let mut conn = Conn::open(&srv.addr).unwrap();
    let step = |conn: &mut Conn, i: u64| {
        let body = serde_json::to_vec(&stream_request(0, i, N, &ts)).unwrap();
        conn.post(&body).unwrap()
    };
    for i in 0..4 {
        let r = step(&mut conn, i);
        assert!(r.get("result").is_some(), "step {i}: {r}");
    }
    // The database drops the Guardian's connections (a restart, a partition, an operator).
    let mut admin = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'warden' AND datname = current_database()",
            &[],
        )
        .unwrap();
    assert!(!killed.is_empty());
    // The next decision cannot be committed: it is refused (-32603), and so is every later
    // request, rather than answered from memory.
    let r = step(&mut conn, 4);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let r = step(&mut conn, 5);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    drop(srv);
    // Restarted, the Guardian holds what was committed: the refused steps are not in the
    // journal, the session continues from step 4, and the chain verifies.
    let srv = start(&policy, &db.url);
    let mut conn = Conn::open(&srv.addr).unwrap();
    for i in 4..8 {
        let r = step(&mut conn, i);
        assert!(r.get("result").is_some(), "step {i} after the restart: {r}");
    }
    drop(srv);
    assert_audit_verifies(&db.url);
}
