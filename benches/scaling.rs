//! Scaling with history length, measured end to end (not a criterion bench: one long run each).
//!
//! 1. Memory: the live heap a Guardian holds for one session after H events, measured with a
//!    counting allocator, per session, per provenance node and per event.
//! 2. `warden replay` wall time on traces of 10 000 and 1 000 000 events (the release binary),
//!    per event, and the ratio between the two (linear time means a ratio near 1); the peak
//!    resident set of the replaying process.
//!
//! Run: `cargo bench --bench scaling`. Prints a Markdown table for benches/RESULTS.md.
//! `WARDEN_SCALING_H=100000,1000000` picks the history lengths (default 10 000 and 1 000 000);
//! `WARDEN_SCALING_MEMORY_ONLY=1` runs only the session memory, `WARDEN_SCALING_REPLAY_ONLY=1`
//! only the replay runs. `WARDEN_SCALING_KEEP_TRACE=DIR` writes each replayed trace to
//! `DIR/history-H.jsonl` and keeps it (for profiling `warden replay` on the same input).

#[path = "support/history.rs"]
mod history;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use serde_json::json;
use warden::acs::{envelope, ids};
use warden::guardian::{Guardian, Policy};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn policy_path() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/policies/taint_window.ward"
    )
    .to_string()
}

fn memory(h: u64) -> (f64, usize, f64, f64) {
    let policy = Policy::load(policy_path()).unwrap_or_else(|d| panic!("{d}"));
    let guardian = Guardian::new(policy);
    let events = history::history(h, history::Taint::Recent);
    let lines: Vec<Vec<u8>> = events
        .iter()
        .map(|v| serde_json::to_vec(v).unwrap())
        .collect();
    drop(events);
    let before = LIVE.load(Ordering::Relaxed);
    for l in &lines {
        guardian.handle(l);
    }
    let after = LIVE.load(Ordering::Relaxed);
    let state = guardian.snapshot(history::SESSION).unwrap();
    let nodes = state.nodes.len();
    drop(state);
    let bytes = (after - before) as f64;
    (bytes, nodes, bytes / nodes.max(1) as f64, bytes / h as f64)
}

/// The inference index's share of a session's heap: `n` tool outputs of five distinct
/// identifier tokens each, against `n` outputs with no token at all; bytes per indexed token.
fn inference_memory(n: u64) -> (usize, f64) {
    let run = |with_tokens: bool| -> (isize, usize) {
        let guardian = Guardian::new(Policy::embedded_default());
        let lines: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let value = if with_tokens {
                    format!("user{i}@corp.example XX{i:020} file{i}.pdf https://site{i}.example/p id{i}x")
                } else {
                    "ok".to_string()
                };
                serde_json::to_vec(&envelope::request(
                    i,
                    "steps/toolCallResult",
                    &ids::counter(0, i),
                    "2026-01-01T00:00:00Z",
                    json!({"agent_id": "a", "session_id": history::SESSION, "turn_id": "t1"}),
                    json!({"tool": {"name": "list"}, "exit_status": "success",
                        "outputs": [{"value": value, "provenance": {
                            "provenance_id": format!("o{i}"), "origin": "tool_output"}}]}),
                ))
                .unwrap()
            })
            .collect();
        let before = LIVE.load(Ordering::Relaxed);
        for l in &lines {
            guardian.handle(l);
        }
        let after = LIVE.load(Ordering::Relaxed);
        let tokens = guardian
            .snapshot(history::SESSION)
            .unwrap()
            .indexed_tokens();
        (after - before, tokens)
    };
    let (with, tokens) = run(true);
    let (without, _) = run(false);
    (
        tokens,
        (with as f64 - without as f64) / tokens.max(1) as f64,
    )
}

/// The median wall time (s) of three `warden replay` runs of an H-event trace, and the largest
/// peak resident set (MB) among them.
fn replay_run(h: u64) -> (f64, f64) {
    let keep = std::env::var_os("WARDEN_SCALING_KEEP_TRACE").map(std::path::PathBuf::from);
    let path = match &keep {
        Some(dir) => dir.join(format!("history-{h}.jsonl")),
        None => std::env::temp_dir().join(format!("warden-scaling-{h}.jsonl")),
    };
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for v in history::history(h, history::Taint::Recent) {
            serde_json::to_writer(&mut f, &v).unwrap();
            f.write_all(b"\n").unwrap();
        }
    }
    let mut runs = Vec::new();
    let mut peak_kib = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["replay", "--policy", &policy_path()])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let (ok, kib) = wait_with_peak(child);
        assert!(ok, "warden replay failed");
        runs.push(start.elapsed().as_secs_f64());
        peak_kib = peak_kib.max(kib);
    }
    if keep.is_none() {
        let _ = std::fs::remove_file(&path);
    }
    runs.sort_by(f64::total_cmp);
    (runs[1], peak_kib as f64 * 1024.0 / 1e6)
}

/// Waits for `child` and returns whether it exited with 0 and its peak resident set (KiB): the
/// `VmHWM` of its own address space, read every few milliseconds while it runs. (`wait4`'s
/// `ru_maxrss` would count this bench's own memory too: the child is spawned by a `vfork`
/// that shares it until the `exec`.)
fn wait_with_peak(mut child: std::process::Child) -> (bool, u64) {
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.success(), peak);
        }
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
            peak = peak.max(hwm.unwrap_or(0));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn lengths() -> Vec<u64> {
    match std::env::var("WARDEN_SCALING_H") {
        Ok(v) => v
            .split(',')
            .map(|h| h.trim().parse().expect("WARDEN_SCALING_H: numbers"))
            .collect(),
        Err(_) => vec![10_000, 1_000_000],
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` passes nothing and should
    // not spend minutes here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let only = |v: &str| std::env::var_os(v).is_some();
    if !only("WARDEN_SCALING_REPLAY_ONLY") && !only("WARDEN_SCALING_MEMORY_ONLY") {
        println!("| tool outputs | indexed tokens | bytes / indexed token |");
        println!("|---|---|---|");
        for n in [10_000u64, 40_000] {
            let (tokens, per) = inference_memory(n);
            println!("| {n} | {tokens} | {per:.0} |");
        }
        println!();
    }
    if only("WARDEN_SCALING_INFERENCE_ONLY") {
        return;
    }
    if !only("WARDEN_SCALING_REPLAY_ONLY") {
        memory_table();
    }
    if !only("WARDEN_SCALING_MEMORY_ONLY") {
        replay_table();
    }
}

fn memory_table() {
    println!("| H | live heap | nodes | bytes / node | bytes / event |");
    println!("|---|---|---|---|---|");
    for h in lengths() {
        let (bytes, nodes, per_node, per_event) = memory(h);
        println!(
            "| {h} | {:.1} MiB | {nodes} | {per_node:.0} | {per_event:.0} |",
            bytes / (1024.0 * 1024.0)
        );
    }
    println!();
}

fn replay_table() {
    println!("| H | replay wall time (median of 3) | per event | peak RSS |");
    println!("|---|---|---|---|");
    let mut per = Vec::new();
    for h in lengths() {
        let (s, peak_mb) = replay_run(h);
        let us = s * 1e6 / h as f64;
        per.push(us);
        println!("| {h} | {s:.2} s | {us:.2} µs | {peak_mb:.0} MB |");
    }
    println!();
    if per.len() > 1 {
        println!(
            "per-event cost at the longest / at the shortest: {:.2}",
            per[per.len() - 1] / per[0]
        );
    }
}
