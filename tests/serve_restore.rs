//! `Guardian::restore` is exact: for every cut point of a session stream with a subagent,
//! provenance, history counters and a seal, a Guardian restored from the journal up to the
//! cut answers the rest exactly as the Guardian that never stopped. Also: the time to restore
//! 1M events (ignored; numbers in benches/RESULTS.md).

mod serve_common;

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use serve_common::{outcome, POLICY};
use warden::acs::{envelope, ids, time};
use warden::guardian::{Guardian, MemoryJournal, Options, Policy, Protocol, Record};

fn req(n: u64, method: &str, sid: &str, turn: Option<&str>, payload: Value, ts: &str) -> Value {
    let mut metadata = json!({"agent_id": "a", "session_id": sid});
    if let Some(t) = turn {
        metadata["turn_id"] = json!(t);
    }
    envelope::request(n, method, &ids::counter(7, n), ts, metadata, payload)
}

fn stream(ts: &str) -> Vec<Value> {
    let parent = ids::counter(1, 1);
    let child = ids::counter(2, 2);
    let hello = json!({"acs_versions_supported": ["0.1.0"],
        "methods_implemented": ["steps/sessionStart", "steps/turnStart", "steps/toolCallRequest",
            "steps/toolCallResult", "steps/subagentStart", "steps/subagentStop", "steps/turnEnd",
            "steps/sessionEnd"],
        "transports_supported": ["stdio"], "provenance_producer": "deterministic"});
    let untrusted = |id: &str| {
        json!({"tool": {"name": "fetch"}, "exit_status": "success",
            "outputs": [{"value": "page", "provenance": {"provenance_id": id,
                "origin": "tool_output", "source_id": "fetch"}}]})
    };
    let call = |name: &str| json!({"tool": {"name": name}, "arguments": {"to": {"value": "x"}}});
    let mut v = Vec::new();
    let mut n = 0;
    let mut push = |m: &str, sid: &str, turn: Option<&str>, p: Value| {
        n += 1;
        v.push(req(n, m, sid, turn, p, ts));
    };
    push("handshake/hello", &parent, None, hello);
    push("steps/sessionStart", &parent, None, json!({}));
    push(
        "steps/turnStart",
        &parent,
        Some("t1"),
        json!({"turn_id": "t1"}),
    );
    push("steps/toolCallRequest", &parent, Some("t1"), call("send"));
    push("steps/toolCallResult", &parent, Some("t1"), untrusted("u1"));
    push("steps/toolCallRequest", &parent, Some("t1"), call("send"));
    push(
        "steps/subagentStart",
        &parent,
        Some("t1"),
        json!({"subagent_session_id": child, "parent_session_id": parent,
               "intent_derivation": "inherit_full"}),
    );
    push("steps/sessionStart", &child, None, json!({}));
    push(
        "steps/turnStart",
        &child,
        Some("c1"),
        json!({"turn_id": "c1"}),
    );
    push("steps/toolCallRequest", &child, Some("c1"), call("send"));
    push("steps/toolCallRequest", &child, Some("c1"), call("ls"));
    push("steps/toolCallRequest", &child, Some("c1"), call("ls"));
    push("steps/toolCallRequest", &child, Some("c1"), call("ls"));
    push("steps/toolCallRequest", &child, Some("c1"), call("ls"));
    push(
        "steps/sessionEnd",
        &child,
        None,
        json!({"reason": "completed"}),
    );
    push(
        "steps/subagentStop",
        &parent,
        Some("t1"),
        json!({"subagent_session_id": child, "outcome": "completed"}),
    );
    for t in ["t2", "t3", "t4"] {
        push("steps/turnStart", &parent, Some(t), json!({"turn_id": t}));
        push("steps/toolCallRequest", &parent, Some(t), call("send"));
        push("steps/toolCallRequest", &parent, Some(t), call("ls"));
    }
    push(
        "steps/sessionEnd",
        &parent,
        None,
        json!({"reason": "completed"}),
    );
    push("steps/toolCallRequest", &parent, Some("t4"), call("ls"));
    v
}

fn guardian(journal: Arc<MemoryJournal>) -> Guardian {
    let options = Options {
        protocol: Protocol::strict(),
        ..Options::default()
    };
    Guardian::with_journal(
        Policy::from_source("p.ward", POLICY).unwrap(),
        options,
        journal,
    )
}

/// Records without the Guardian clock times they carry.
fn untimed(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .cloned()
        .map(|mut r| {
            match &mut r {
                Record::Handshake { at_ms, .. } | Record::Step { at_ms, .. } => *at_ms = None,
                _ => {}
            }
            r
        })
        .collect()
}

fn send(g: &Guardian, v: &Value) -> Value {
    serde_json::from_slice(&g.handle(&serde_json::to_vec(v).unwrap())).unwrap()
}

#[test]
fn restore_is_exact_at_every_cut() {
    let ts = time::now_rfc3339_ms();
    let reqs = stream(&ts);
    let j = Arc::new(MemoryJournal::default());
    let g = guardian(j.clone());
    let reference: Vec<Value> = reqs.iter().map(|r| outcome(&send(&g, r))).collect();
    // The stream is not trivial: taint denies, the rate rule, a subagent, the seal.
    let shown = format!("{reference:?}");
    assert!(shown.contains("taint") && shown.contains("rate"), "{shown}");
    assert_eq!(reference.last().unwrap()[1], -32000, "sealed");
    let all = j.take();
    for cut in 0..reqs.len() {
        // The journal after `cut` requests (each decided step writes one, the first step the
        // handshake too).
        let g0 = guardian(Arc::new(MemoryJournal::default()));
        let mut kept = 0;
        let prefix: Vec<Record> = {
            let j = Arc::new(MemoryJournal::default());
            let g = guardian(j.clone());
            for r in &reqs[..cut] {
                send(&g, r);
            }
            kept += j.records.lock().unwrap().len();
            j.take()
        };
        // The same records, written at other times.
        assert_eq!(untimed(&prefix), untimed(&all[..kept]));
        g0.restore(prefix);
        if cut == 1 {
            // Only the hello: it is journalled with the first step, so a restart forgets a
            // session that has only said hello, and its next request must say hello again.
            assert_eq!(outcome(&send(&g0, &reqs[1]))[1], -32003, "cut 1");
            continue;
        }
        for (i, r) in reqs.iter().enumerate().skip(cut) {
            assert_eq!(
                outcome(&send(&g0, r)),
                reference[i],
                "cut {cut}, request {i}"
            );
        }
    }
}

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
fn restore_one_million_events() {
    const EVENTS: u64 = 1_000_000;
    let ts = time::now_rfc3339_ms();
    let sid = ids::counter(9, 9);
    let j = Arc::new(MemoryJournal::default());
    let mut options = Options {
        protocol: Protocol::strict(),
        ..Options::default()
    };
    options.protocol.require_handshake = false;
    // One long session: the replay window would refuse a million requests within one skew
    // window, so this measures without it.
    options.protocol.replay_protection = false;
    let policy = Policy::from_source("p.ward", POLICY).unwrap();
    let g = Guardian::with_journal(policy.clone(), options.clone(), j.clone());
    let started = Instant::now();
    for n in 0..EVENTS {
        let turn = format!("t{}", n / 10);
        let payload = match n % 10 {
            0 => json!({"turn_id": turn}),
            1 => json!({"tool": {"name": "fetch"}, "exit_status": "success",
                "outputs": [{"value": "v", "provenance": {"provenance_id": format!("p{n}"),
                    "origin": "tool_output"}}]}),
            _ => json!({"tool": {"name": "ls"}, "arguments": {}}),
        };
        let method = match n % 10 {
            0 => "steps/turnStart",
            1 => "steps/toolCallResult",
            _ => "steps/toolCallRequest",
        };
        let r = req(n, method, &sid, Some(&turn), payload, &ts);
        let out = send(&g, &r);
        assert!(out.get("result").is_some(), "{out}");
    }
    let decided = started.elapsed();
    let records = j.take();
    let g2 = Guardian::with_options(policy, options);
    let started = Instant::now();
    let n = g2.restore(records);
    let restored = started.elapsed();
    assert_eq!(n as u64, EVENTS);
    assert_eq!(g2.chain_head(&sid), g.chain_head(&sid));
    println!(
        "restore: {EVENTS} events decided (with chain) in {:.2} s; restored in {:.2} s ({:.2} us/event); {} provenance nodes",
        decided.as_secs_f64(),
        restored.as_secs_f64(),
        restored.as_secs_f64() * 1e6 / EVENTS as f64,
        g2.snapshot(&sid).unwrap().nodes.len()
    );
}

/// Nothing panics in strict mode on mangled envelopes: every truncation and many byte flips of
/// a valid stream get a JSON-RPC answer.
#[test]
fn mangled_envelopes_never_panic() {
    let ts = time::now_rfc3339_ms();
    let mut options = Options {
        protocol: Protocol::strict(),
        ..Options::default()
    };
    options.protocol.key = Some(Arc::from(&b"k"[..]));
    let g = Guardian::with_journal(
        Policy::from_source("p.ward", POLICY).unwrap(),
        options,
        Arc::new(MemoryJournal::default()),
    );
    for r in stream(&ts).iter().take(12) {
        let bytes = serde_json::to_vec(r).unwrap();
        for cut in (0..bytes.len()).step_by(7) {
            let out: Value = serde_json::from_slice(&g.handle(&bytes[..cut])).unwrap();
            assert!(out.get("error").is_some());
        }
        for i in (0..bytes.len()).step_by(3) {
            let mut b = bytes.clone();
            b[i] ^= 0x55;
            let out: Value = serde_json::from_slice(&g.handle(&b)).unwrap();
            assert!(out.get("result").is_some() || out.get("error").is_some());
        }
    }
}
