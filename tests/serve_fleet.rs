//! Several `warden serve --state postgres://…` Guardians on one database (docs/serve.md,
//! "Fleet"): sessions moving between them when one is `kill -9`ed, every acknowledged decision
//! kept and equal to one Guardian's uninterrupted run, history-dependent rules firing on the
//! Guardian that took a session over, replayed ids refused by the other Guardian, a request
//! sent to the wrong Guardian told who holds the session, and a Guardian paused past its
//! lease (a partition) unable to commit for the session another took. The fencing itself is
//! also checked on the store directly, where the timing is the test's.
//!
//! The database comes from `WARDEN_TEST_POSTGRES_URL`, as for tests/serve_postgres.rs.

mod common;
mod pg_common;
mod serve_common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use pg_common::*;
use serde_json::Value;
use serve_common::*;
use warden::acs::time;
use warden::guardian::journal::{Claim, Journal, JournalError, LEASE_LOST};
use warden::server::pg::{Fleet, PgStore};

const SESSIONS: u64 = 12;
const N: u64 = 26;
/// Where the sessions of the killed Guardian move: mid-turn, right after an untrusted tool
/// result decided on the first Guardian (step 9), so step 10's `send` is denied by the taint
/// rule only if the history moved with the session.
const HALF: u64 = 10;
const LEASE_MS: u64 = 1200;

/// Guardian `name` of the fleet on the database at `url`, with leases of `LEASE_MS`.
fn guardian(policy: &Path, url: &str, name: &str) -> Server {
    serve_policy(
        policy,
        url,
        &["--guardian-id", name, "--lease-ms", &LEASE_MS.to_string()],
    )
}

/// One Guardian on the embedded store in the folder `state`, for the uninterrupted run.
fn reference_guardian(policy: &Path, state: &Path) -> Server {
    serve_policy(policy, &state.display().to_string(), &[])
}

fn post(addr: &str, s: u64, i: u64, ts: &str) -> Value {
    let body = serde_json::to_vec(&stream_request(s, i, N, ts)).unwrap();
    Conn::open(addr).unwrap().post(&body).unwrap()
}

fn lease_held(r: &Value) -> bool {
    r["error"]["code"] == -32000 && r["error"]["data"]["reason"] == "lease_held"
}

/// Posts until the answer is not "another Guardian holds the lease" (it expires within
/// `LEASE_MS` of its holder's death), for at most 10 s.
fn post_until_held(addr: &str, s: u64, i: u64, ts: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = post(addr, s, i, ts);
        if !lease_held(&r) || Instant::now() >= deadline {
            return r;
        }
        wait_as_told(&r);
    }
}

/// Sleeps as long as a lease-held answer `r` says to before a retry (kept to 20-300 ms).
fn wait_as_told(r: &Value) {
    let wait = r["error"]["data"]["retry_after_ms"].as_u64().unwrap_or(100);
    std::thread::sleep(Duration::from_millis(wait.clamp(20, 300)));
}

/// The session a request is for.
fn session_id(req: &Value) -> String {
    req["params"]["metadata"]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn signal(server: &Server, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &server.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// Drives `sessions` from step `from` to step `to` (exclusive) on `addr`, in order.
fn run(addr: &str, sessions: &[u64], from: u64, to: u64, ts: &str) -> Outcomes {
    let mut out = Outcomes::new();
    let mut conn = Conn::open(addr).unwrap();
    for i in from..to {
        for s in sessions {
            let body = serde_json::to_vec(&stream_request(*s, i, N, ts)).unwrap();
            out.insert((*s, i), conn.post(&body).unwrap());
        }
    }
    out
}

/// Drives each `(guardian, sessions)` of `plan` on `addrs[guardian]` from step `from` to step
/// `to` (exclusive), the Guardians at once.
fn run_plan(
    addrs: &[String],
    plan: &[(usize, Vec<u64>)],
    from: u64,
    to: u64,
    ts: &str,
) -> Outcomes {
    let mut out = Outcomes::new();
    std::thread::scope(|scope| {
        let hs: Vec<_> = plan
            .iter()
            .map(|(g, sessions)| {
                let addr = &addrs[*g];
                scope.spawn(move || run(addr, sessions, from, to, ts))
            })
            .collect();
        for h in hs {
            out.extend(h.join().unwrap());
        }
    });
    out
}

#[test]
fn sessions_move_to_another_guardian_when_theirs_is_killed() {
    let Some(server) = server_url() else { return };
    let Scratch { db, dir, policy } = Scratch::new(&server, "fleet", POLICY);
    let ts = time::now_rfc3339_ms();

    // One Guardian's uninterrupted run, on the embedded store.
    let reference_state = dir.join("reference");
    let srv = reference_guardian(&policy, &reference_state);
    let reference = reference_run(srv, &ts, SESSIONS, 4, N);
    // The taint rule denies step 10 of the odd sessions (`send` right after the untrusted
    // result of step 9): what the takeover must carry over.
    assert_eq!(reference[&(3, HALF)]["result"]["decision"], "deny");
    assert_eq!(reference[&(3, HALF - 1)]["result"]["decision"], "allow");

    // Three Guardians on one database; session s lives on Guardian s % 3 at first.
    let names = ["A", "B", "C"];
    let mut fleet: Vec<Option<Server>> = names
        .iter()
        .map(|n| Some(guardian(&policy, &db.url, n)))
        .collect();
    let addrs: Vec<String> = fleet
        .iter()
        .map(|g| g.as_ref().unwrap().addr.clone())
        .collect();
    let home = |g: u64| -> Vec<u64> { (0..SESSIONS).filter(|s| s % 3 == g).collect() };
    let at_first = [(0usize, home(0)), (1, home(1)), (2, home(2))];
    let mut acked = run_plan(&addrs, &at_first, 0, HALF, &ts);

    // A request for a session A holds, sent to B: refused with the holder named, and
    // nothing decided (so the retry on A below is decided as usual).
    let r = post(&addrs[1], 0, HALF, &ts);
    assert!(lease_held(&r), "{r}");
    assert_eq!(r["error"]["data"]["holder"], "A", "{r}");

    // A dies. Its sessions continue on B once their leases expire: first the last request A
    // acknowledged, sent again, is refused as a replay on B (the replay window came with the
    // session), then the rest of each stream.
    fleet[0].take().unwrap().kill9();
    let moved = home(0);
    let killed_at = Instant::now();
    for s in &moved {
        let r = post_until_held(&addrs[1], *s, HALF - 1, &ts);
        assert_eq!(r["error"]["code"], -32005, "session {s}: {r}");
    }
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_millis(LEASE_MS * 4),
        "the takeover waited {took:?}"
    );
    let plan = [(1usize, moved.clone()), (1, home(1)), (2, home(2))];
    acked.extend(run_plan(&addrs, &plan, HALF, N, &ts));

    // Every decision is the uninterrupted run's, chain hashes included; the taint rule fired
    // on B for the odd sessions A started.
    assert_eq!(acked.len() as u64, SESSIONS * N);
    for ((s, i), r) in &acked {
        assert_eq!(
            outcome(r),
            outcome(&reference[&(*s, *i)]),
            "session {s} step {i}"
        );
    }
    for s in moved.iter().filter(|s| *s % 2 == 1) {
        assert_eq!(
            acked[&(*s, HALF)]["result"]["decision"],
            "deny",
            "session {s}"
        );
    }
    // Every chain verifies, and ends where the uninterrupted run's ends.
    assert_chains_match(&db.url, &reference_state);
    let out = assert_audit_verifies(&db.url);
    assert!(
        out.contains(&format!("ok: {SESSIONS} session chain(s)")),
        "{out}"
    );
    // The leases as docs/serve.md describes them: A's sessions are B's now, with a later
    // token than A's.
    let rows = db.sql("SELECT session, guardian, token FROM warden_lease ORDER BY session");
    assert_eq!(rows.len() as u64, SESSIONS);
    let moved_to_b = rows
        .iter()
        .filter(|r| r.get::<_, String>(1) == "B" && r.get::<_, i64>(2) > 1)
        .count();
    assert_eq!(moved_to_b, moved.len());
    eprintln!(
        "fleet: {} sessions moved from A to B in {took:?}",
        moved.len()
    );
}

#[test]
fn a_paused_guardian_cannot_commit_for_a_session_another_took() {
    let Some(server) = server_url() else { return };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_pause", POLICY);
    let ts = time::now_rfc3339_ms();
    let a = guardian(&policy, &db.url, "A");
    let b = guardian(&policy, &db.url, "B");
    for i in 0..5 {
        let r = post(&a.addr, 0, i, &ts);
        assert!(r.get("result").is_some(), "step {i}: {r}");
    }
    // A is cut off (paused: it renews nothing) past its lease; B takes the session.
    signal(&a, "-STOP");
    std::thread::sleep(Duration::from_millis(LEASE_MS + 300));
    let r = post_until_held(&b.addr, 0, 5, &ts);
    assert!(r.get("result").is_some(), "B took the session over: {r}");
    // A comes back believing it holds the session: it decides nothing for it any more.
    signal(&a, "-CONT");
    let r = post(&a.addr, 0, 6, &ts);
    let code = &r["error"]["code"];
    assert!(
        (lease_held(&r) && r["error"]["data"]["holder"] == "B")
            || (code == -32603 && r["error"]["data"]["reason"] == "lease_lost"),
        "A must refuse: {r}"
    );
    eprintln!("the paused Guardian, resumed, answered {}", r["error"]);
    // A is still serving its other sessions: a lost lease fails that session, not A.
    let r = post(&a.addr, 1, 0, &ts);
    assert!(r.get("result").is_some(), "{r}");
    // The session goes on at B; the journal holds B's step 5 and not a step of A's after it.
    let r = post(&b.addr, 0, 6, &ts);
    assert!(r.get("result").is_some(), "{r}");
    let n: i64 = db.sql(
        "SELECT count(*) FROM warden_journal WHERE session = (SELECT session FROM warden_lease \
         WHERE guardian = 'B' LIMIT 1)",
    )[0]
    .get(0);
    assert_eq!(n, 7, "handshake and steps 1 to 6, once each");
    drop(a);
    drop(b);
    assert_audit_verifies(&db.url);
}

/// The store as Guardian `name` sees it, with leases of `lease_ms`.
fn store_as(url: &str, name: &str, lease_ms: u64) -> PgStore {
    PgStore::open_as(
        url,
        Fleet {
            guardian: name.into(),
            lease: Duration::from_millis(lease_ms),
        },
    )
    .unwrap()
}

/// Ends `session`'s lease in the database now, whoever holds it (a partition, as the database
/// sees it).
fn expire_lease(db: &Db, session: &str) {
    db.sql(&format!(
        "UPDATE warden_lease SET expires = now() - interval '1 second' WHERE session = '{session}'"
    ));
}

/// Asserts that a claim found the session held by Guardian `holder`.
fn assert_held_by(claim: Claim, holder: &str) {
    match claim {
        Claim::Busy { holder: h, .. } => assert_eq!(h, holder),
        other => panic!("expected {holder} to hold the lease: {other:?}"),
    }
}

#[test]
fn a_commit_under_a_lost_lease_is_refused_and_the_lease_is_renewed_while_held() {
    let Some(server) = server_url() else { return };
    let db = Db::create(&server, "fleet_fence");
    let open = |name: &str, ms: u64| store_as(&db.url, name, ms);
    // Renewed while its Guardian lives, well past one lease.
    {
        let r = open("R", 300);
        let other = open("O", 300);
        assert!(matches!(r.claim("r"), Claim::Taken { .. }));
        std::thread::sleep(Duration::from_millis(900));
        assert_held_by(other.claim("r"), "R");
    }
    // Long leases from here, so no renewal runs between the test's steps.
    let a = open("A", 60_000);
    let b = open("B", 60_000);
    assert_eq!(a.claim("s"), Claim::Taken { token: 1 });
    assert_eq!(a.claim("s"), Claim::Held { token: Some(1) });
    a.append(vec![sealed("s", 1)]).unwrap();
    assert_held_by(b.claim("s"), "A");
    // A partition: A's lease runs out in the database while A still believes it holds it.
    expire_lease(&db, "s");
    assert_eq!(b.claim("s"), Claim::Taken { token: 2 });
    let e = a.submit(vec![sealed("s", 2)]).wait().unwrap_err();
    assert!(e.starts_with(LEASE_LOST), "{e}");
    // A knows now: the session is B's.
    assert_held_by(a.claim("s"), "B");
    b.append(vec![sealed("s", 3)]).unwrap();
    // A's other sessions commit as before.
    a.append(vec![sealed("t", 4)]).unwrap();
    assert_eq!(b.records_of("s").unwrap(), [sealed("s", 1), sealed("s", 3)]);
    let tokens: Vec<i64> = db
        .sql("SELECT token FROM warden_lease WHERE session = 's'")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tokens, [2], "one takeover, one new token");
    // B's lease runs out in turn and A takes the session back (token 3): a decision A made on
    // its copy from before (token 1) still cannot commit; one made under token 3 can.
    expire_lease(&db, "s");
    assert_eq!(a.claim("s"), Claim::Taken { token: 3 });
    let e = a
        .submit_as(vec![sealed("s", 5)], Some(1))
        .wait()
        .unwrap_err();
    assert!(e.starts_with(LEASE_LOST), "{e}");
    a.submit_as(vec![sealed("s", 6)], Some(3)).wait().unwrap();
    assert_eq!(
        b.records_of("s").unwrap(),
        [sealed("s", 1), sealed("s", 3), sealed("s", 6)]
    );
    // A clean stop lets A's leases go at once.
    drop(a);
    assert!(matches!(b.claim("t"), Claim::Taken { .. }));
}

/// HAProxy's binary, or `None` after saying why the test is skipped (a failure under CI,
/// where `.ci/run` installs Debian's package).
fn haproxy_binary() -> Option<String> {
    for candidate in ["haproxy", "/usr/sbin/haproxy", "/usr/local/sbin/haproxy"] {
        let found = Command::new(candidate)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            return Some(candidate.to_string());
        }
    }
    common::unavailable("haproxy is not installed (apt-get install haproxy)");
    None
}

/// The PostgreSQL server's URL and HAProxy's binary, or `None` after saying why the test is
/// skipped.
fn postgres_and_haproxy() -> Option<(String, String)> {
    let server = server_url()?;
    Some((server, haproxy_binary()?))
}

/// A running `haproxy -db` with examples/fleet/haproxy.cfg, stopped when dropped.
struct Balancer(std::process::Child);

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// HAProxy with examples/fleet/haproxy.cfg as it is, in front of Guardians `a` and `b`; its
/// address once it listens.
fn balance(haproxy: &str, a: &str, b: &str) -> (String, Balancer) {
    let lb = format!("127.0.0.1:{}", free_port());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet/haproxy.cfg");
    let balancer = Balancer(
        Command::new(haproxy)
            .args(["-db", "-f"])
            .arg(&config)
            .env("WARDEN_LB_LISTEN", &lb)
            .env("WARDEN_GUARDIAN_A", a)
            .env("WARDEN_GUARDIAN_B", b)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    let up = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&lb).is_err() {
        assert!(Instant::now() < up, "haproxy did not listen on {lb}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its health checks see both Guardians up before the test relies on the hash.
    std::thread::sleep(Duration::from_millis(500));
    (lb, balancer)
}

/// One HTTP exchange on a connection of its own: the status, the response's headers
/// (names in lower case) and its JSON body.
fn exchange(
    addr: &str,
    body: &Value,
    route: Option<&str>,
) -> (u16, HashMap<String, String>, Value) {
    use std::io::{Read, Write};
    let body = serde_json::to_vec(body).unwrap();
    let route = route.map_or(String::new(), |r| format!("ACS-Session-Id: {r}\r\n"));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST /acs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         {route}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status.parse().unwrap(), headers, body)
}

/// What one request through the balancer came to: the answer, and whether it was sent more
/// than once (its first answer lost to a Guardian's death).
fn through_lb(
    lb: &str,
    s: u64,
    i: u64,
    ts: &str,
    killed: &std::sync::atomic::AtomicBool,
    misrouted: &AtomicU64,
) -> (Value, bool) {
    use std::sync::atomic::Ordering;
    let req = stream_request(s, i, LB_N, ts);
    let header = format!("ACS-Session-Id: {}\r\n", session_id(&req));
    let body = serde_json::to_vec(&req).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut resent = false;
    loop {
        assert!(Instant::now() < deadline, "session {s} step {i}: no answer");
        match Conn::open(lb).and_then(|mut c| c.post_with(&body, &header)) {
            Ok((_, v)) if lease_held(&v) => {
                if !killed.load(Ordering::SeqCst) {
                    misrouted.fetch_add(1, Ordering::SeqCst);
                }
                wait_as_told(&v);
            }
            Ok((_, v)) if v.get("jsonrpc").is_some() => return (v, resent),
            // The balancer's own error page (no Guardian reachable yet), or a connection cut
            // by the kill: the request may or may not have been decided.
            _ => {
                resent = true;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

const LB_SESSIONS: u64 = 16;
const LB_N: u64 = 20;

#[test]
fn two_guardians_behind_haproxy_keep_every_session_when_one_is_killed() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some((server, haproxy)) = postgres_and_haproxy() else {
        return;
    };
    let Scratch { db, dir, policy } = Scratch::new(&server, "fleet_lb", POLICY);
    let ts = time::now_rfc3339_ms();

    let reference_state = dir.join("reference");
    let srv = reference_guardian(&policy, &reference_state);
    let reference = reference_run(srv, &ts, LB_SESSIONS, 4, LB_N);

    let a = guardian(&policy, &db.url, "A");
    let b = guardian(&policy, &db.url, "B");
    let (lb, _balancer) = balance(&haproxy, &a.addr, &b.addr);

    // Four clients, four sessions each, through the balancer; A is killed half-way.
    let killed = AtomicBool::new(false);
    let misrouted = AtomicU64::new(0);
    let acked = AtomicU64::new(0);
    let mut a = Some(a);
    let mut answers: HashMap<(u64, u64), (Value, bool)> = HashMap::new();
    std::thread::scope(|scope| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let (lb, ts, killed, misrouted, acked) = (&lb, &ts, &killed, &misrouted, &acked);
                scope.spawn(move || {
                    let mut out = HashMap::new();
                    for i in 0..LB_N {
                        for s in (0..LB_SESSIONS).filter(|s| s % 4 == t) {
                            out.insert((s, i), through_lb(lb, s, i, ts, killed, misrouted));
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    out
                })
            })
            .collect();
        let half = LB_SESSIONS * LB_N / 2;
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.load(Ordering::SeqCst) < half && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        killed.store(true, Ordering::SeqCst);
        a.take().unwrap().kill9();
        for h in hs {
            answers.extend(h.join().unwrap());
        }
    });

    // Affinity: while both lived, no request reached the Guardian not holding its session.
    assert_eq!(misrouted.load(Ordering::SeqCst), 0);
    // Every answer is the uninterrupted run's, except a request whose first answer was lost
    // in the kill and that, sent again, was refused as the replay it then was.
    let mut lost = 0;
    for ((s, i), (r, resent)) in &answers {
        if *resent && (r["error"]["code"] == -32005 || (*i == 0 && r["error"]["code"] == -32000)) {
            lost += 1;
            continue;
        }
        assert_eq!(
            outcome(r),
            outcome(&reference[&(*s, *i)]),
            "session {s} step {i}: {r}"
        );
    }
    assert!(lost <= 4, "at most one in flight per client");
    assert_chains_match(&db.url, &reference_state);
    // Both Guardians had sessions; A's moved to B with new tokens.
    let rows = db.sql("SELECT guardian, token FROM warden_lease");
    let moved = rows.iter().filter(|r| r.get::<_, i64>(1) > 1).count();
    let stayed = rows.iter().filter(|r| r.get::<_, i64>(1) == 1).count();
    assert!(moved > 0 && stayed > 0, "moved {moved}, stayed {stayed}");
    assert!(rows.iter().all(|r| r.get::<_, String>(0) == "B"));
    drop(b);
    assert_audit_verifies(&db.url);
    eprintln!("haproxy: {moved} sessions moved from A to B, {stayed} stayed, {lost} answers lost in the kill");
}

#[test]
fn a_guardian_with_another_policy_says_so_in_the_chain_of_a_session_it_takes_over() {
    let Some(server) = server_url() else { return };
    let Scratch { db, dir, policy } = Scratch::new(&server, "fleet_policy", POLICY);
    let (old, new) = (policy, dir.join("new.ward"));
    let newer = POLICY.replace(
        "default allow",
        "rule never on toolCallRequest\n  when tool.name == \"nothing\"\n  => deny \"never\": \"never\"\n\ndefault allow",
    );
    std::fs::write(&new, newer).unwrap();
    let ts = time::now_rfc3339_ms();
    let a = guardian(&old, &db.url, "A");
    let b = guardian(&new, &db.url, "B");
    for i in 0..4 {
        assert!(post(&a.addr, 0, i, &ts).get("result").is_some());
    }
    a.kill9();
    let r = post_until_held(&b.addr, 0, 4, &ts);
    assert!(r.get("result").is_some(), "{r}");
    let records = warden::server::backend::read(Path::new(&db.url)).unwrap();
    let chains = warden::guardian::journal::chains(&records);
    let (_, entries) = &chains[0];
    warden::acs::crypto::verify_chain(entries).unwrap();
    let reload = entries
        .iter()
        .find(|e| e["step_type"] == "warden/policy_reload")
        .expect("the takeover under another policy is in the chain");
    assert_ne!(reload["previous_policy_digest"], reload["policy_digest"]);
    assert!(reload["previous_policy_digest"].is_string(), "{reload}");
    drop(b);
}

/// Decisions per second of 1, 2 and 3 Guardians against one database, 32 client connections
/// in all (split evenly), 320 sessions of 60 hooks. On one machine the Guardians, the clients
/// and PostgreSQL share its cores: the figure measures the protocol's overhead, not a fleet's
/// capacity.
#[test]
#[ignore = "throughput: run with --release -- --ignored --nocapture fleet_throughput"]
fn fleet_throughput() {
    let Some(server) = server_url() else { return };
    const SESSIONS: u64 = 320;
    const HOOKS: u64 = 60;
    const CONNS: u64 = 32;
    for k in 1..=3u64 {
        let Scratch { db, policy, .. } = Scratch::new(&server, &format!("fleet_tp{k}"), POLICY);
        let guardians: Vec<Server> = (0..k)
            .map(|g| {
                let id = format!("g{g}");
                let extra = ["--guardian-id", &id, "--max-connections-per-peer", "1000"];
                serve_policy(&policy, &db.url, &extra)
            })
            .collect();
        let addrs: Vec<String> = guardians.iter().map(|g| g.addr.clone()).collect();
        let ts = time::now_rfc3339_ms();
        let started = Instant::now();
        let errors = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for c in 0..CONNS {
                let (addrs, ts, errors) = (&addrs, &ts, &errors);
                scope.spawn(move || {
                    let mine: Vec<u64> = (0..SESSIONS).filter(|s| s % CONNS == c).collect();
                    // Sessions stay on one Guardian (as affinity routing would keep them).
                    let mut conn = Conn::open(&addrs[(c % k) as usize]).unwrap();
                    for i in 0..HOOKS {
                        for s in &mine {
                            let body =
                                serde_json::to_vec(&stream_request(*s, i, HOOKS, ts)).unwrap();
                            let (_, r) = conn.post_bytes(&body).unwrap();
                            if !r.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":")
                                || r.windows(8).any(|w| w == b"\"error\":")
                            {
                                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        let wall = started.elapsed();
        let n = SESSIONS * HOOKS;
        println!(
            "fleet throughput: {k} Guardian(s), {CONNS} connections, {n} requests in {:.2} s = {:.0} decisions/s, {} errors",
            wall.as_secs_f64(),
            n as f64 / wall.as_secs_f64(),
            errors.load(std::sync::atomic::Ordering::Relaxed)
        );
        drop(guardians);
    }
}

#[test]
fn a_guardian_joining_a_busy_database_reads_none_of_its_sessions_at_start() {
    let Some(server) = server_url() else { return };
    let Scratch { db, dir, policy } = Scratch::new(&server, "fleet_lazy", POLICY);
    let ts = time::now_rfc3339_ms();
    let sessions: Vec<u64> = (0..8).collect();
    // One Guardian's uninterrupted run, on the embedded store.
    let srv = reference_guardian(&policy, &dir.join("reference"));
    let reference = run(&srv.addr, &sessions, 0, HALF + 1, &ts);
    drop(srv);
    let a = guardian(&policy, &db.url, "A");
    let acked = run(&a.addr, &sessions, 0, HALF, &ts);
    assert!(acked.values().all(|r| r.get("result").is_some()));
    // B starts beside a live A holding eight sessions: it reads none of them.
    let b = guardian(&policy, &db.url, "B");
    let deadline = Instant::now() + Duration::from_secs(5);
    let said = loop {
        if let Some(line) = b.said("session(s) in memory at start") {
            break line;
        }
        assert!(Instant::now() < deadline, "B said nothing of its start");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(said.contains(": 0 session(s) in memory at start"), "{said}");
    assert!(
        b.said("journal record(s)").is_none(),
        "B restored records at start"
    );
    // While A lives, B refuses A's sessions without reading them.
    let r = post(&b.addr, 1, HALF, &ts);
    assert!(lease_held(&r), "{r}");
    // A dies: B restores each session as it arrives, with its replay window and history.
    a.kill9();
    for s in &sessions {
        let r = post_until_held(&b.addr, *s, HALF - 1, &ts);
        assert_eq!(r["error"]["code"], -32005, "session {s}: {r}");
        let r = post(&b.addr, *s, HALF, &ts);
        assert_eq!(outcome(&r), outcome(&reference[&(*s, HALF)]), "session {s}");
    }
    drop(b);
    assert_audit_verifies(&db.url);
}

#[test]
fn a_lease_held_answer_is_a_503_the_balancer_retries_on_the_holder() {
    let Some((server, haproxy)) = postgres_and_haproxy() else {
        return;
    };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_503", POLICY);
    let ts = time::now_rfc3339_ms();
    let a = guardian(&policy, &db.url, "A");
    let b = guardian(&policy, &db.url, "B");
    // Sixteen sessions start on A directly: A holds them all.
    let sessions: Vec<u64> = (0..16).collect();
    let acked = run(&a.addr, &sessions, 0, 3, &ts);
    assert!(acked.values().all(|r| r.get("result").is_some()));
    // Sent to B: 503 with Retry-After, the JSON-RPC error in the body as before.
    let (status, headers, r) = exchange(&b.addr, &stream_request(0, 3, N, &ts), None);
    assert_eq!(status, 503, "{r}");
    assert!(lease_held(&r) && r["error"]["data"]["holder"] == "A", "{r}");
    let retry: u64 = headers["retry-after"].parse().unwrap();
    assert!((1..=LEASE_MS.div_ceil(1000)).contains(&retry), "{retry}");
    // Through the balancer, hashed on the session id: the sessions the hash gives B are
    // refused there with 503 and sent again, to A, which decides them; the client never
    // sees the refusal.
    let (lb, _balancer) = balance(&haproxy, &a.addr, &b.addr);
    let mut retried = 0;
    for i in 3..6 {
        for s in &sessions {
            let req = stream_request(*s, i, N, &ts);
            let (status, headers, r) = exchange(&lb, &req, Some(&session_id(&req)));
            assert_eq!(status, 200, "session {s} step {i}: {r} {headers:?}");
            assert!(r.get("result").is_some(), "session {s} step {i}: {r}");
            assert_eq!(headers["warden-lb-server"], "a", "session {s}");
            if headers["warden-lb-retries"] != "0" {
                retried += 1;
            }
        }
    }
    assert!(retried > 0, "the hash sent none of 16 sessions to B");
    eprintln!("503: {retried} of 48 requests were refused by B and retried on A");
}

/// Requests of a subagent family: a parent that opens a subagent, the subagent's steps, and
/// the parent's `subagentStop`, each with the session it is for.
fn family(f: u64, ts: &str) -> Vec<(String, Value)> {
    use serde_json::json;
    use warden::acs::{envelope, ids};
    let parent = ids::counter(0xfa00_0000 + f as u32, f);
    let child = ids::counter(0xc100_0000 + f as u32, f);
    let hello = json!({"acs_versions_supported": ["0.1.0"],
        "methods_implemented": ["steps/sessionStart", "steps/turnStart", "steps/toolCallRequest",
            "steps/subagentStart", "steps/subagentStop", "steps/turnEnd", "steps/sessionEnd"],
        "transports_supported": ["http"], "provenance_producer": "deterministic"});
    let call = |name: &str| json!({"tool": {"name": name}, "arguments": {"to": {"value": "x"}}});
    let steps: Vec<(&str, &str, Option<&str>, Value)> = vec![
        ("handshake/hello", &parent, None, hello),
        ("steps/sessionStart", &parent, None, json!({})),
        (
            "steps/turnStart",
            &parent,
            Some("t1"),
            json!({"turn_id": "t1"}),
        ),
        (
            "steps/subagentStart",
            &parent,
            Some("t1"),
            json!({"subagent_session_id": child, "parent_session_id": parent,
                   "intent_derivation": "inherit_full"}),
        ),
        ("steps/sessionStart", &child, None, json!({})),
        (
            "steps/turnStart",
            &child,
            Some("c1"),
            json!({"turn_id": "c1"}),
        ),
        ("steps/toolCallRequest", &child, Some("c1"), call("ls")),
        ("steps/toolCallRequest", &child, Some("c1"), call("send")),
        (
            "steps/turnEnd",
            &child,
            Some("c1"),
            json!({"turn_id": "c1", "outcome": "completed"}),
        ),
        (
            "steps/sessionEnd",
            &child,
            None,
            json!({"reason": "completed"}),
        ),
        (
            "steps/subagentStop",
            &parent,
            Some("t1"),
            json!({"subagent_session_id": child, "outcome": "completed"}),
        ),
        ("steps/toolCallRequest", &parent, Some("t1"), call("ls")),
    ];
    steps
        .into_iter()
        .enumerate()
        .map(|(n, (method, sid, turn, payload))| {
            let mut metadata = json!({"agent_id": "agent", "session_id": sid});
            if let Some(t) = turn {
                metadata["turn_id"] = json!(t);
            }
            let n = n as u64 + 1;
            let rid = ids::counter(0xf000_0000 + f as u32, n);
            let req = envelope::request(n, method, &rid, ts, metadata, payload);
            (sid.to_string(), req)
        })
        .collect()
}

#[test]
fn a_subagent_routed_on_its_family_root_lands_on_its_parents_guardian() {
    let Some((server, haproxy)) = postgres_and_haproxy() else {
        return;
    };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_family", POLICY);
    let ts = time::now_rfc3339_ms();
    let a = guardian(&policy, &db.url, "A");
    let b = guardian(&policy, &db.url, "B");
    let (lb, _balancer) = balance(&haproxy, &a.addr, &b.addr);
    // Eight families; every request routed on its family's root (the parent's id), the
    // subagent's included. Each family's requests all reach one Guardian at the first try.
    let mut on = HashMap::new();
    for f in 0..8 {
        let requests = family(f, &ts);
        let root = requests[0].0.clone();
        for (n, (sid, req)) in requests.iter().enumerate() {
            let (status, headers, r) = exchange(&lb, req, Some(&root));
            assert_eq!(status, 200, "family {f} request {n}: {r}");
            assert!(r.get("result").is_some(), "family {f} request {n}: {r}");
            assert_eq!(headers["warden-lb-retries"], "0", "family {f} request {n}");
            let server = on
                .entry(f)
                .or_insert_with(|| headers["warden-lb-server"].clone());
            assert_eq!(
                &headers["warden-lb-server"], server,
                "family {f}: {sid} left its root's Guardian"
            );
        }
    }
    let servers: std::collections::HashSet<&String> = on.values().collect();
    eprintln!("families: 8 on {} Guardian(s)", servers.len());
    // The leases: each subagent's with its parent's Guardian, and none ever moved.
    let rows = db.sql("SELECT session, guardian, token FROM warden_lease");
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|r| r.get::<_, i64>(2) == 1));
    for f in 0..8u64 {
        let requests = family(f, &ts);
        let (parent, child) = (&requests[0].0, &requests[4].0);
        let holder = |s: &str| {
            rows.iter()
                .find(|r| r.get::<_, String>(0) == s)
                .map(|r| r.get::<_, String>(1))
                .unwrap()
        };
        assert_eq!(holder(child), holder(parent), "family {f}");
        assert_eq!(holder(parent).to_ascii_lowercase(), on[&f], "family {f}");
    }
    assert_audit_verifies(&db.url);
}

#[test]
fn a_compacted_session_takes_its_lease_row_with_it_under_the_fencing() {
    let Some(server) = server_url() else { return };
    let db = Db::create(&server, "fleet_unlease");
    let open = |name: &str| store_as(&db.url, name, 60_000);
    let leases = || -> Vec<(String, String)> {
        db.sql("SELECT session, guardian FROM warden_lease ORDER BY session")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    let a = open("A");
    let b = open("B");
    for s in ["s", "t", "u"] {
        a.append(vec![sealed(s, 1), sealed(s, 2)]).unwrap();
    }
    assert_eq!(leases().len(), 3);
    // Compacting s, in one transaction: its records become the summary and its row goes.
    assert!(a.compact("s", sealed("s", 9)).unwrap());
    assert_eq!(a.records_of("s").unwrap(), [sealed("s", 9)]);
    assert_eq!(
        leases(),
        [("t".into(), "A".into()), ("u".into(), "A".into())]
    );
    // A compaction under a lease another Guardian took is refused whole: t keeps its
    // records and B's row.
    expire_lease(&db, "t");
    assert!(matches!(b.claim("t"), Claim::Taken { token: 2 }));
    let e = a.compact("t", sealed("t", 9)).unwrap_err();
    assert!(matches!(e, JournalError::LeaseLost(_)), "{e}");
    assert_eq!(b.records_of("t").unwrap(), [sealed("t", 1), sealed("t", 2)]);
    assert_eq!(
        leases(),
        [("t".into(), "B".into()), ("u".into(), "A".into())]
    );
    // A session whose row went with its compaction gets a token past every one it had, if it
    // is ever claimed again (a stale copy's token 1 can never match).
    match b.claim("s") {
        Claim::Taken { token } => assert!(token > 1_000_000_000, "{token}"),
        other => panic!("{other:?}"),
    }
    // A new session still starts at 1.
    assert_eq!(b.claim("v"), Claim::Taken { token: 1 });
}

#[test]
fn a_guardian_deletes_the_lease_row_of_a_session_it_compacts() {
    let Some(server) = server_url() else { return };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_compact", POLICY);
    // A one-second skew window: an ended session's tombstone leaves memory a second after its
    // end, and the Guardian compacts it then.
    let a = Server::start(&[
        "--policy",
        &policy.display().to_string(),
        "--state",
        &db.url,
        "--skew-window-ms",
        "1000",
        "--guardian-id",
        "A",
    ]);
    let ts = time::now_rfc3339_ms();
    let mut conn = Conn::open(&a.addr).unwrap();
    for s in 0..2 {
        // Session 0's stream is eight requests, sessionEnd last; session 1 sends four of 20.
        let (n, sent) = if s == 0 { (8, 8) } else { (20, 4) };
        for i in 0..sent {
            let body = serde_json::to_vec(&stream_request(s, i, n, &ts)).unwrap();
            let r = conn.post(&body).unwrap();
            assert!(r.get("result").is_some(), "session {s} step {i}: {r}");
        }
    }
    // Session 0 ended; session 1 goes on. Session 0's row goes with its records.
    let ended = session_id(&stream_request(0, 0, 8, &ts));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let kinds: Vec<String> = db
            .sql(&format!(
                "SELECT record->>'kind' FROM warden_journal WHERE session = '{ended}'"
            ))
            .iter()
            .map(|r| r.get(0))
            .collect();
        let rows = db.sql("SELECT session FROM warden_lease");
        if kinds == ["sealed"] {
            assert_eq!(rows.len(), 1, "only the live session's lease is left");
            assert_ne!(rows[0].get::<_, String>(0), ended);
            break;
        }
        assert!(Instant::now() < deadline, "not compacted: {kinds:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(a);
    assert_audit_verifies(&db.url);
}

const ASK_POLICY: &str = r#"
use std.effects
effect refund for refund = key(args.payment_id)
rule big_refund on toolCallRequest when tool.name == "refund" and args.amount > 1000
  => ask "refund.large": "a large refund" approver human "finance" timeout 15m expires 10m
default allow
"#;

#[test]
fn the_operator_commands_beside_a_live_fleet_leave_a_held_session_to_its_guardian() {
    use serde_json::json;
    use warden::acs::{envelope, ids};
    let Some(server) = server_url() else { return };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_cli", ASK_POLICY);
    let pol = policy.display().to_string();
    let session = ids::counter(0xabcd, 1);
    let req = |n: u64, id: &str, amount: u32| {
        envelope::request(
            n,
            "steps/toolCallRequest",
            &ids::counter(0xabcd, n + 100),
            &time::now_rfc3339_ms(),
            json!({"agent_id": "a", "session_id": session, "turn_id": "t1"}),
            json!({"tool": {"name": "refund"},
                   "arguments": {"payment_id": {"value": id}, "amount": {"value": amount}}}),
        )
    };
    let serve = |name: &str| {
        Server::start(&[
            "--policy",
            &pol,
            "--state",
            &db.url,
            "--no-handshake",
            "--guardian-id",
            name,
            "--lease-ms",
            &LEASE_MS.to_string(),
        ])
    };
    let a = serve("A");
    let mut conn = Conn::open(&a.addr).unwrap();
    let r = conn
        .post(&serde_json::to_vec(&req(1, "p1", 2000)).unwrap())
        .unwrap();
    assert_eq!(r["result"]["decision"], "ask", "{r}");
    let r = conn
        .post(&serde_json::to_vec(&req(2, "p2", 10)).unwrap())
        .unwrap();
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    // Listing reads the database without a lease.
    let (ok, listed, err) = run_warden(&["approvals", "--state", &db.url, "--policy", &pol]);
    assert!(ok && listed.contains("pending"), "{listed}{err}");
    let (ok, effects, err) = run_warden(&["effects", "list", "--state", &db.url, "--policy", &pol]);
    assert!(ok, "{err}");
    let key = effects
        .lines()
        .next()
        .unwrap()
        .split('\t')
        .nth(1)
        .unwrap()
        .to_string();
    // A grant or a resolution for a session A holds is refused, naming A.
    let ask_id = ids::counter(0xabcd, 101);
    let (ok, _, err) = run_warden(&[
        "approve", "--state", &db.url, "--policy", &pol, &ask_id, "--as", "finance",
    ]);
    assert!(!ok && err.contains("Guardian \"A\" holds"), "{err}");
    let resolve = [
        "effects",
        "resolve",
        "--state",
        &db.url,
        "--policy",
        &pol,
        &session,
        &key,
        "committed",
    ];
    let (ok, _, err) = run_warden(&resolve);
    assert!(!ok && err.contains("Guardian \"A\" holds"), "{err}");
    // A is gone (its lease expires): the commands take the session, and the next Guardian to
    // take it sees what they wrote.
    a.kill9();
    std::thread::sleep(Duration::from_millis(LEASE_MS + 200));
    let (ok, out, err) = run_warden(&[
        "approve", "--state", &db.url, "--policy", &pol, &ask_id, "--as", "finance",
    ]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run_warden(&resolve);
    assert!(ok && out.contains("-> committed"), "{out}{err}");
    let b = serve("B");
    let r = Conn::open(&b.addr)
        .unwrap()
        .post(&serde_json::to_vec(&req(3, "p1", 2000)).unwrap())
        .unwrap();
    assert_eq!(
        r["result"]["decision"], "allow",
        "the grant came with the session: {r}"
    );
    drop(b);
    assert_audit_verifies(&db.url);
}

#[test]
fn a_hello_writes_no_lease_and_a_hello_for_a_held_session_names_its_holder() {
    let Some(server) = server_url() else { return };
    let Scratch { db, policy, .. } = Scratch::new(&server, "fleet_hello", POLICY);
    let a = guardian(&policy, &db.url, "A");
    let b = guardian(&policy, &db.url, "B");
    let ts = time::now_rfc3339_ms();
    // A flood of hellos under fresh session ids: answered, and nothing written.
    for s in 0..300 {
        let r = post(&a.addr, s, 0, &ts);
        assert!(r["result"]["payload"].is_object(), "hello {s}: {r}");
    }
    let rows = |db: &Db| db.sql("SELECT count(*) FROM warden_lease")[0].get::<_, i64>(0);
    assert_eq!(rows(&db), 0, "no hello takes a lease");
    // The first step of a session that said hello takes its lease, and the hello holds.
    let r = post(&a.addr, 7, 1, &ts);
    assert_eq!(r["result"]["decision"], "allow", "{r}");
    assert_eq!(rows(&db), 1);
    // A hello to B for the session A holds is told who holds it (and still writes nothing).
    let r = post(&b.addr, 7, 0, &ts);
    assert!(lease_held(&r), "{r}");
    assert_eq!(r["error"]["data"]["holder"], "A", "{r}");
    assert_eq!(rows(&db), 1);
    // Two Guardians greeted under one id: the first to take a step holds the session; the
    // other's bare copy is stale and its step is told who holds it.
    assert!(post(&a.addr, 1000, 0, &ts)["result"].is_object());
    assert!(post(&b.addr, 1000, 0, &ts)["result"].is_object());
    assert_eq!(post(&a.addr, 1000, 1, &ts)["result"]["decision"], "allow");
    assert!(lease_held(&post(&b.addr, 1000, 1, &ts)));
    drop(a);
    drop(b);
    assert_audit_verifies(&db.url);
}
