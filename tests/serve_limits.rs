//! `warden serve --listen` under hostile connections (docs/serve.md, "HTTP limits"): slow-loris
//! clients that send their headers and never finish the body, more connections than the caps,
//! and clients that never finish their headers. Tiny limits keep each test to a few seconds.

mod serve_common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::*;
use warden::acs::{envelope, ids, time};

fn ping(n: u64) -> Vec<u8> {
    let sid = ids::counter(0x11, 1);
    let env = envelope::request(
        n,
        "system/ping",
        &ids::counter(0x22, n),
        &time::now_rfc3339_ms(),
        json!({"agent_id": "a", "session_id": sid}),
        json!({}),
    );
    serde_json::to_vec(&env).unwrap()
}

/// A connection that sent its headers and part of a body that never ends.
fn slow_loris(addr: &str) -> Conn {
    let mut c = Conn::open(addr).expect("connect");
    c.send_raw(
        b"POST /acs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\":",
    )
    .unwrap();
    c
}

fn reason(v: &Value) -> &str {
    v["error"]["data"]["reason"].as_str().unwrap_or("")
}

#[test]
fn slow_loris_connections_do_not_lock_out_a_well_behaved_client() {
    let srv = Server::start(&[
        "--max-connections-per-peer",
        "4",
        "--body-timeout-ms",
        "1000",
        "--header-timeout-ms",
        "20000",
    ]);
    // Three connections stall in their bodies; a fourth, well-behaved, is answered meanwhile.
    let started = Instant::now();
    let mut loris: Vec<Conn> = (0..3).map(|_| slow_loris(&srv.addr)).collect();
    let mut good = Conn::open(&srv.addr).unwrap();
    let (status, r) = good.post_status(&ping(1)).unwrap();
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["result"]["decision"], "allow", "{r}");

    // The peer is at its cap: one more connection is answered 503 at once, not left hanging.
    let t = Instant::now();
    let mut over = Conn::open(&srv.addr).unwrap();
    let (status, r) = over
        .post_status(&ping(2))
        .expect("an over-cap client gets an answer");
    assert_eq!(status, 503, "{r}");
    assert_eq!(r["jsonrpc"], "2.0");
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(reason(&r), "too_many_connections_from_peer", "{r}");
    assert_eq!(r["error"]["data"]["max_connections_per_peer"], 4);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(over.closed_by_server());

    // Each stalled body is answered 408 once the (short) body timeout passes.
    for c in &mut loris {
        let (status, r) = c.read_answer().expect("a stalled body gets an answer");
        assert_eq!(status, 408, "{r}");
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert_eq!(reason(&r), "body_timeout", "{r}");
        assert_eq!(r["error"]["data"]["body_timeout_ms"], 1000);
        assert!(c.closed_by_server());
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    drop(loris);

    // The well-behaved client's keep-alive connection still works, and so do new ones once
    // the stalled connections are gone.
    let (status, r) = good.post_status(&ping(3)).unwrap();
    assert_eq!((status, &r["result"]["decision"]), (200, &json!("allow")));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut n = 10;
    loop {
        let mut c = Conn::open(&srv.addr).unwrap();
        n += 1;
        let (status, r) = c.post_status(&ping(n)).unwrap();
        if status == 200 {
            assert_eq!(r["result"]["decision"], "allow");
            break;
        }
        // The server may not have seen the closes yet.
        assert_eq!(status, 503, "{r}");
        assert!(
            Instant::now() < deadline,
            "the freed places were never reused"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_total_connection_cap_answers_503() {
    let srv = Server::start(&["--max-connections", "2"]);
    let mut a = Conn::open(&srv.addr).unwrap();
    let mut b = Conn::open(&srv.addr).unwrap();
    assert_eq!(a.post_status(&ping(1)).unwrap().0, 200);
    assert_eq!(b.post_status(&ping(2)).unwrap().0, 200);
    let mut c = Conn::open(&srv.addr).unwrap();
    let (status, r) = c.post_status(&ping(3)).unwrap();
    assert_eq!(status, 503, "{r}");
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(reason(&r), "too_many_connections", "{r}");
    assert_eq!(r["error"]["data"]["max_connections"], 2);
    assert!(r["error"]["data"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 2 connections"));
}

#[test]
fn unfinished_headers_and_idle_connections_are_closed() {
    let srv = Server::start(&["--header-timeout-ms", "300"]);
    let t = Instant::now();
    let mut partial = Conn::open(&srv.addr).unwrap();
    partial
        .send_raw(b"POST /acs HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut idle = Conn::open(&srv.addr).unwrap();
    assert!(partial.closed_by_server());
    assert!(idle.closed_by_server());
    // A keep-alive connection idle past the header timeout is closed too.
    let mut kept = Conn::open(&srv.addr).unwrap();
    assert_eq!(kept.post_status(&ping(1)).unwrap().0, 200);
    assert!(kept.closed_by_server());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
