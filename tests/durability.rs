//! An answer waits for its decision to be durable, and a decision that cannot be made durable
//! is never answered as if it were: `Guardian::handle_pending` against a journal whose commits
//! the test settles by hand (docs/serve.md, "Durability").

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use warden::acs::{envelope, time};
use warden::guardian::journal::{JournalError, Settle};
use warden::guardian::{Durable, Guardian, Journal, Options, Policy, Record};

const SESSION: &str = "6f0e1d2c-3b4a-4596-8877-a6b5c4d3e2f1";

/// A journal that keeps every submission's records and its settle handle for the test.
#[derive(Default)]
struct HeldJournal {
    held: Mutex<Vec<(Vec<Record>, Settle)>>,
}

impl Journal for HeldJournal {
    fn append(&self, records: Vec<Record>) -> Result<(), JournalError> {
        self.submit(records).outcome()
    }

    fn submit(&self, records: Vec<Record>) -> Durable {
        let (durable, settle) = Durable::pending();
        self.held.lock().unwrap().push((records, settle));
        durable
    }
}

impl HeldJournal {
    fn settle_all(&self, outcome: Result<(), String>) -> usize {
        let held: Vec<_> = self.held.lock().unwrap().drain(..).collect();
        let n = held.len();
        for (_, s) in held {
            s.settle(outcome.clone());
        }
        n
    }
}

fn guardian(journal: Arc<HeldJournal>) -> Guardian {
    let policy = Policy::from_source(
        "p.ward",
        r#"rule no_delete on toolCallRequest when tool.name == "delete" => deny "no.delete"
default allow"#,
    )
    .unwrap_or_else(|d| panic!("{d}"));
    Guardian::with_journal(policy, Options::default(), journal)
}

fn request(n: u32, tool: &str) -> Vec<u8> {
    let req = envelope::request(
        n,
        "steps/toolCallRequest",
        &format!("00000000-0000-4000-8000-{n:012}"),
        &time::now_rfc3339_ms(),
        json!({"agent_id": "a", "session_id": SESSION, "turn_id": "t1"}),
        json!({"tool": {"name": tool}, "arguments": {}}),
    );
    serde_json::to_vec(&req).unwrap()
}

fn answer(r: envelope::Response) -> Value {
    serde_json::from_slice(&r.to_vec()).unwrap()
}

#[test]
fn the_answer_waits_until_the_journal_says_durable() {
    let journal = Arc::new(HeldJournal::default());
    let g = guardian(journal.clone());
    let pending = g.handle_pending(&request(1, "delete"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(answer(pending.wait())).unwrap());
    // Decided, journalled, not yet durable: no answer.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    let held = journal.held.lock().unwrap();
    assert_eq!(held.len(), 1);
    assert!(matches!(
        &held[0].0[..],
        [Record::Step {
            proceeds: false,
            ..
        }]
    ));
    drop(held);
    assert_eq!(journal.settle_all(Ok(())), 1);
    let out = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out["result"]["decision"], "deny", "{out}");
}

#[test]
fn a_failed_commit_turns_the_answer_into_an_error_and_stops_the_guardian() {
    let journal = Arc::new(HeldJournal::default());
    let g = guardian(journal.clone());
    // Two decisions in flight in one group; the group fails.
    let first = g.handle_pending(&request(1, "read"));
    let second = g.handle_pending(&request(2, "read"));
    assert_eq!(journal.settle_all(Err("disk full".into())), 2);
    for p in [first, second] {
        let out = answer(p.wait());
        assert_eq!(out["error"]["code"], -32603, "{out}");
        let message = out["error"]["data"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("could not be made durable") && message.contains("disk full"),
            "{out}"
        );
    }
    // Nothing later is answered, even what the journal would now accept.
    let later = g.handle_pending(&request(3, "read"));
    journal.settle_all(Ok(()));
    let out = answer(later.wait());
    assert_eq!(out["error"]["code"], -32603, "{out}");
    assert!(
        out["error"]["data"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("refuses every request"),
        "{out}"
    );
}

#[test]
fn a_journal_writer_that_goes_away_fails_the_answer() {
    let journal = Arc::new(HeldJournal::default());
    let g = guardian(journal.clone());
    let pending = g.handle_pending(&request(1, "read"));
    // The handle is dropped unsettled (a writer thread that died).
    journal.held.lock().unwrap().clear();
    let out = answer(pending.wait());
    assert_eq!(out["error"]["code"], -32603, "{out}");
}

/// Runs a future to completion on this thread (any executor would do; this one has no
/// dependencies, so the test shows `Pending` needs no particular runtime).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn a_pending_answer_can_be_awaited() {
    let journal = Arc::new(HeldJournal::default());
    let g = guardian(journal.clone());
    let pending = g.handle_pending(&request(1, "delete"));
    let settler = {
        let journal = journal.clone();
        std::thread::spawn(move || {
            while journal.held.lock().unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            journal.settle_all(Ok(()))
        })
    };
    let out = answer(block_on(pending.settled()));
    assert_eq!(out["result"]["decision"], "deny", "{out}");
    assert_eq!(settler.join().unwrap(), 1);
}

/// A journal whose direct appends (an operator's action, a reload) find the lease lost, and
/// whose steps commit.
struct LostLease;

impl Journal for LostLease {
    fn append(&self, _: Vec<Record>) -> Result<(), JournalError> {
        Err(JournalError::LeaseLost("session s: taken over".into()))
    }

    fn submit(&self, _: Vec<Record>) -> Durable {
        Durable::settled(Ok(()))
    }
}

#[test]
fn a_lost_lease_refuses_the_one_action_and_the_guardian_keeps_deciding() {
    let policy = || Policy::from_source("p.ward", "default allow").unwrap();
    let g = Guardian::with_journal(policy(), Options::default(), Arc::new(LostLease));
    let refused = g.reload_policy(policy()).unwrap_err();
    assert!(refused.contains("lease lost"), "{refused}");
    assert!(!g.has_failed());
    let out = answer(g.handle_pending(&request(1, "read")).wait());
    assert_eq!(out["result"]["decision"], "allow", "{out}");
}
