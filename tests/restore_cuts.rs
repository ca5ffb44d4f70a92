//! Deciding and restoring end in one commit (ARCHITECTURE.md, "A step's phases"), checked on
//! every golden trace of `tests/traces/`: the trace is decided live, once, through a Guardian
//! that journals; then, at every cut, the first part is decided by one Guardian, its journal
//! restored into a fresh one, and the rest decided there. The restored Guardian must answer
//! the rest exactly as the live one did, and end with the same audit chains. Run with the
//! default (lenient) protocol and with audit chains and replay protection on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use warden::guardian::{Guardian, MemoryJournal, OnDecisionFailure, Options, Policy, Protocol};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every golden trace, with its policy (the embedded default when it has none) and whether
/// it is replayed with explain traces.
fn traces() -> Vec<(PathBuf, Policy, bool)> {
    let mut out = Vec::new();
    for (dir, explain) in [("tests/traces", false), ("tests/traces/explain", true)] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "jsonl")
                    && !p.to_string_lossy().ends_with(".expected.jsonl")
            })
            .collect();
        paths.sort();
        for trace in paths {
            let ward = trace.with_extension("ward");
            let policy = if ward.is_file() {
                Policy::load(&ward).unwrap_or_else(|d| panic!("{}: {d}", ward.display()))
            } else {
                Policy::embedded_default()
            };
            out.push((trace, policy, explain));
        }
    }
    assert!(out.len() >= 4, "the golden traces are found");
    out
}

fn lines(trace: &Path) -> Vec<Vec<u8>> {
    std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.as_bytes().to_vec())
        .collect()
}

/// A response as compared: the ping's server time is the one thing that changes.
fn answer(bytes: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(bytes).unwrap();
    if let Some(t) = v.pointer_mut("/result/payload/server_timestamp") {
        *t = Value::Null;
    }
    v
}

fn options(explain: bool, audited: bool, failure: OnDecisionFailure) -> Options {
    Options {
        explain,
        on_decision_failure: failure,
        protocol: Protocol {
            audit: audited,
            replay_protection: audited,
            ..Protocol::default()
        },
    }
}

/// A session's chain head and length, as `Guardian::chain_head` gives them.
type Head = Option<(Option<String>, u64)>;

/// The session ids the trace names, and each one's chain head and length.
fn chains(g: &Guardian) -> Vec<(String, Head)> {
    g.session_ids()
        .into_iter()
        .map(|s| {
            let head = g.chain_head(&s);
            (s, head)
        })
        .collect()
}

#[test]
fn every_golden_trace_decides_the_same_after_a_restore_at_every_cut() {
    for (trace, policy, explain) in traces() {
        for (audited, failure) in [
            (false, OnDecisionFailure::Deny),
            (true, OnDecisionFailure::Deny),
            (true, OnDecisionFailure::Error),
        ] {
            let requests = lines(&trace);
            let live = Guardian::with_journal(
                policy.clone(),
                options(explain, audited, failure),
                Arc::new(MemoryJournal::default()),
            );
            let expected: Vec<Value> = requests.iter().map(|r| answer(&live.handle(r))).collect();
            for cut in 0..=requests.len() {
                let first = Arc::new(MemoryJournal::default());
                let before = Guardian::with_journal(
                    policy.clone(),
                    options(explain, audited, failure),
                    first.clone(),
                );
                for r in &requests[..cut] {
                    before.handle(r);
                }
                let restored = Guardian::with_journal(
                    policy.clone(),
                    options(explain, audited, failure),
                    Arc::new(MemoryJournal::default()),
                );
                restored.restore(first.take());
                for (i, r) in requests.iter().enumerate().skip(cut) {
                    assert_eq!(
                        answer(&restored.handle(r)),
                        expected[i],
                        "{} (audit {audited}, {failure:?}): request {} after a restore at {cut}",
                        trace.display(),
                        i + 1
                    );
                }
                assert_eq!(
                    chains(&restored),
                    chains(&live),
                    "{} (audit {audited}, {failure:?}): the chains after a restore at {cut}",
                    trace.display()
                );
            }
        }
    }
}

/// A policy reload between two steps: the live Guardian writes a `warden/policy_reload` entry
/// at the session's next step; one restored from the journal (under the new policy, as a
/// restarted Guardian would be) writes the same entry, and no other, whether the cut falls
/// before the reload or after it.
#[test]
fn a_reload_between_steps_writes_one_reload_entry_live_and_restored() {
    let trace = root().join("tests/traces/decision_failure.jsonl");
    let requests = lines(&trace);
    let old = Policy::from_source("p", "default allow").unwrap();
    let new = Policy::from_source("p", "default deny \"closed\": \"closed now\"").unwrap();
    let opts = || options(false, true, OnDecisionFailure::Deny);
    let journal = Arc::new(MemoryJournal::default());
    let live = Guardian::with_journal(old.clone(), opts(), journal.clone());
    live.handle(&requests[0]);
    live.handle(&requests[1]);
    live.reload_policy(new.clone()).unwrap();
    let expected: Vec<Value> = requests[2..]
        .iter()
        .map(|r| answer(&live.handle(r)))
        .collect();
    let records = journal.take();
    // Every prefix of the journal that holds the first two steps: before the reload record
    // and after it.
    let steps = records
        .iter()
        .position(|r| matches!(r, warden::guardian::Record::PolicyReload { .. }))
        .expect("the reload is journalled");
    for cut in [steps, steps + 1] {
        let restored =
            Guardian::with_journal(new.clone(), opts(), Arc::new(MemoryJournal::default()));
        restored.restore(records[..cut].iter().cloned());
        let got: Vec<Value> = requests[2..]
            .iter()
            .map(|r| answer(&restored.handle(r)))
            .collect();
        assert_eq!(got, expected, "answers after a restore cut at record {cut}");
        assert_eq!(
            chains(&restored),
            chains(&live),
            "chains after a restore cut at record {cut}"
        );
    }
}
