//! The language server's latency budget: after an edit to a 2 000-line policy, the document is
//! re-checked and its diagnostics are ready within 100 ms.
//!
//! `cargo bench --bench lsp` measures it with criterion, then checks the budget on the median
//! of a separate run and fails if it is exceeded.

use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use warden::lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent, Url};
use warden::lsp::Document;

const BUDGET: Duration = Duration::from_millis(100);

/// A realistic policy of `lines` lines: constants, labels, rules with history and provenance
/// checks, and tests, with one deliberate error near the end.
fn policy(lines: usize) -> String {
    let mut s = String::from(
        "// generated for benches/lsp.rs\npackage bench.big\n\nuse std.taint\n\ndefault allow\n\n",
    );
    let mut i = 0;
    while s.lines().count() < lines - 4 {
        s.push_str(&format!(
            "let tools_{i} = {{\"send_{i}\", \"post_{i}\", \"delete_{i}\"}}\n\n\
             label secret_{i} when origin == tool_output and source == \"vault_{i}\"\n\n\
             rule r{i}_taint on toolCallRequest\n  when tool.name in tools_{i} and turns_since(untrusted) <= 3\n  => deny \"taint.r{i}\": \"recently tainted\"\n\n\
             rule r{i}_rate on toolCallRequest\n  when tool.name in tools_{i}\n   and count(toolCallRequest when tool.name in tools_{i}, last 5 turns, by args.to) >= 2\n  => ask \"rate.r{i}\": \"too many\" approver human \"oncall\" timeout 5m else deny\n\n\
             rule r{i}_secret on toolCallRequest\n  when any a in args: a has secret_{i}\n  => deny \"secret.r{i}\"\n\n\
             test \"rule {i} denies\" {{\n  call read_file(path: \"x\") -> untrusted \"text\"\n  call send_{i}(to: \"a@example.com\") => deny \"taint.r{i}\"\n}}\n\n"
        ));
        i += 1;
    }
    s.push_str("rule broken on toolCallRequest\n  when tool.nmae == \"x\"\n  => deny \"broken\"\n");
    s
}

fn open() -> (Document, usize) {
    let text = policy(2_000);
    let lines = text.lines().count();
    assert!(lines >= 2_000, "generated {lines} lines");
    let uri = Url::parse("file:///bench/big.ward").unwrap();
    (Document::open(uri, 1, text), lines)
}

/// One keystroke and back: insert a space at the start of line 10, then delete it.
fn edit(doc: &mut Document, version: i32) -> usize {
    let at = Position::new(10, 0);
    let change = if version % 2 == 0 {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(at, at)),
            range_length: None,
            text: " ".into(),
        }
    } else {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(at, Position::new(10, 1))),
            range_length: None,
            text: String::new(),
        }
    };
    doc.change(version, vec![change]);
    doc.lsp_diagnostics().len()
}

fn bench(c: &mut Criterion) {
    let (mut doc, lines) = open();
    let mut version = 1;
    c.bench_function(&format!("edit + diagnostics, {lines}-line policy"), |b| {
        b.iter(|| {
            version += 1;
            edit(&mut doc, version)
        })
    });
}

fn check_budget() {
    let (mut doc, lines) = open();
    let mut times: Vec<Duration> = (2..23)
        .map(|v| {
            let t = Instant::now();
            let n = edit(&mut doc, v);
            assert!(n >= 1, "the deliberate error is reported");
            t.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    println!("median edit → diagnostics on {lines} lines: {median:?} (budget {BUDGET:?})");
    assert!(
        median < BUDGET,
        "diagnostics took {median:?}, over the {BUDGET:?} budget"
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = bench
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    check_budget();
}
