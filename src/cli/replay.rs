//! `warden replay`: a recorded trace through a policy, one answer per request line.
//!
//! Two threads share the work. A reader reads the trace and decodes each line (the strict JSON
//! parse and the envelope checks, which read nothing of the sessions) a batch ahead; this
//! thread decides the decoded lines in order, encodes and writes their answers, and hands each
//! batch back to the reader, which frees it: every request is allocated and freed on the same
//! thread (freeing on the other one cost more than the parse saved when it was tried). The
//! answers are the ones `Guardian::handle_response` gives line by line, in the same order.
//!
//! Owns the command's output forms (`--format`, `--only`), its progress line and its exit
//! code; it must not know how a decision is made.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::sync::mpsc;

use super::{explain_text, load_policy, usage_error};
use crate::acs::envelope::Response;
use crate::guardian::{self, Decoded, Guardian};

/// How `warden replay` prints its answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ReplayFormat {
    Json,
    Text,
}

/// A decision word for `--only`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum DecisionWord {
    Allow,
    Deny,
    Ask,
    Defer,
    Modify,
}

impl DecisionWord {
    fn as_str(self) -> &'static str {
        match self {
            DecisionWord::Allow => "allow",
            DecisionWord::Deny => "deny",
            DecisionWord::Ask => "ask",
            DecisionWord::Defer => "defer",
            DecisionWord::Modify => "modify",
        }
    }
}

/// Which answers `warden replay` prints, and how.
pub(super) struct Shown {
    pub(super) format: ReplayFormat,
    /// Empty: every answer.
    pub(super) only: Vec<DecisionWord>,
}

impl Shown {
    /// Whether every answer is printed as its wire JSON (nothing else reads the line).
    fn plain(&self) -> bool {
        self.format == ReplayFormat::Json && self.only.is_empty()
    }

    /// The bytes to print for one answer (none when `--only` leaves it out). A JSON-RPC error
    /// has no decision: `--only` leaves it out, and the text form names it in one line.
    fn render(&self, number: usize, line: &[u8], response: &Response) -> Vec<u8> {
        let wire = serde_json::to_value(response).unwrap_or(serde_json::Value::Null);
        let decision = wire
            .pointer("/result/decision")
            .and_then(serde_json::Value::as_str);
        if !self.only.is_empty() && !self.only.iter().any(|w| Some(w.as_str()) == decision) {
            return Vec::new();
        }
        match (self.format, wire.get("result")) {
            (ReplayFormat::Json, _) => format!("{wire}\n").into_bytes(),
            (ReplayFormat::Text, Some(result)) => {
                let request = serde_json::from_slice(line).unwrap_or(serde_json::Value::Null);
                format!("{}\n", explain_text::paragraph(number, &request, result)).into_bytes()
            }
            (ReplayFormat::Text, None) => format!(
                "#{number}: error {}: {}\n\n",
                wire["error"]["code"],
                wire["error"]["message"].as_str().unwrap_or("")
            )
            .into_bytes(),
        }
    }
}

/// An answer's warnings (`policy_data.warnings`: what the policy could not read in the step),
/// named on stderr with the trace's line.
fn warn_replay(trace: &std::path::Path, number: usize, response: &Response) {
    let Some(result) = response.as_result() else {
        return;
    };
    let warnings = result
        .policy_data
        .get("warnings")
        .and_then(|w| w.as_array());
    for w in warnings.into_iter().flatten().filter_map(|w| w.as_str()) {
        eprintln!("warden replay: {}:{number}: warning: {w}", trace.display());
    }
}

/// One request line of the trace, decoded: its line number (from 1), its bytes when the output
/// form reads them (`--format text`, `--only`), and what the Guardian decoded.
struct Line {
    number: usize,
    text: Option<Vec<u8>>,
    decoded: Decoded,
}

/// Lines are handed over in batches: one channel message per batch, not per line.
const BATCH: usize = 128;

/// Batches in flight ahead of the decisions: enough to keep both threads busy, few enough that
/// memory does not follow the trace's length.
const AHEAD: usize = 8;

/// What the decisions so far add up to: the exit code and the closing summary read it.
#[derive(Default, Clone, Copy)]
struct Tally {
    lines: u64,
    errors: u64,
    /// Lines that are not JSON (-32700) or not a JSON-RPC request (-32600): named on stderr,
    /// and the exit code is 1. Other errors are answers to well-formed requests.
    malformed: u64,
    /// A progress line was shown (the closing lines start on a line of their own).
    progressed: bool,
}

pub(super) fn run(
    trace: &std::path::Path,
    policy: Option<&std::path::Path>,
    explain: bool,
    fail_with_error: bool,
    shown: &Shown,
) -> i32 {
    let policy = match load_policy(policy) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let options = guardian::Options {
        explain,
        on_decision_failure: if fail_with_error {
            guardian::OnDecisionFailure::Error
        } else {
            guardian::OnDecisionFailure::Deny
        },
        ..guardian::Options::default()
    };
    let guardian = Guardian::with_options(policy, options);
    let input: Box<dyn Read + Send> = if trace.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(trace) {
            Ok(f) => Box::new(f),
            Err(e) => return usage_error(&format!("{}: {e}", trace.display())),
        }
    };
    let input = BufReader::with_capacity(1 << 16, input);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut tally = Tally::default();
    let (ahead_tx, ahead_rx) = mpsc::sync_channel::<Vec<Line>>(AHEAD);
    let (back_tx, back_rx) = mpsc::channel::<Vec<Line>>();
    let keep_text = !shown.plain();
    let outcome = std::thread::scope(|scope| {
        let guardian = &guardian;
        let reader = scope.spawn(move || read_ahead(input, guardian, keep_text, ahead_tx, back_rx));
        let decided = decide_all(
            guardian, trace, shown, &ahead_rx, back_tx, &mut out, &mut tally,
        );
        // Hanging up stops the reader at its next hand-over.
        drop(ahead_rx);
        let read = match reader.join() {
            Ok(read) => read,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        decided.and_then(|()| read.map_err(|e| usage_error(&format!("{}: {e}", trace.display()))))
    });
    if let Err(code) = outcome {
        let _ = out.flush();
        return code;
    }
    if out.flush().is_err() {
        return 2;
    }
    close(&tally)
}

/// The closing lines on stderr, and the exit code.
fn close(tally: &Tally) -> i32 {
    let Tally {
        lines,
        errors,
        malformed,
        progressed,
    } = *tally;
    if progressed {
        eprintln!();
    }
    if malformed > 20 {
        eprintln!(
            "warden replay: … and {} more malformed line(s)",
            malformed - 20
        );
    }
    if errors > 0 {
        eprintln!("replayed {lines} request(s); {errors} answered with a JSON-RPC error");
    }
    i32::from(malformed > 0)
}

/// This thread's half: each decoded line decided in order, its answer written, each batch
/// handed back to the reader to be freed. `Err(2)`: the output could not be written.
fn decide_all(
    guardian: &Guardian,
    trace: &std::path::Path,
    shown: &Shown,
    ahead: &mpsc::Receiver<Vec<Line>>,
    back: mpsc::Sender<Vec<Line>>,
    out: &mut impl Write,
    tally: &mut Tally,
) -> Result<(), i32> {
    let started = std::time::Instant::now();
    let mut progress_at = started + std::time::Duration::from_secs(2);
    let show_progress = std::io::stderr().is_terminal();
    let mut bytes = Vec::with_capacity(1024);
    loop {
        // Nothing decoded is waiting: what was answered goes out before this thread waits
        // (a trace fed line by line sees each answer without waiting for a full buffer).
        let mut batch = match ahead.try_recv() {
            Ok(batch) => batch,
            Err(mpsc::TryRecvError::Empty) => {
                out.flush().map_err(|_| 2)?;
                match ahead.recv() {
                    Ok(batch) => batch,
                    Err(_) => return Ok(()),
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => return Ok(()),
        };
        for line in &mut batch {
            let response = guardian.decide_decoded(&mut line.decoded);
            tally.count(trace, line.number, &response);
            if show_progress
                && tally.lines.is_multiple_of(1024)
                && std::time::Instant::now() >= progress_at
            {
                progress_at = std::time::Instant::now() + std::time::Duration::from_secs(1);
                tally.progressed = true;
                eprint!(
                    "\rreplayed {} request(s) in {:.0} s…",
                    tally.lines,
                    started.elapsed().as_secs_f64()
                );
            }
            if shown.plain() {
                bytes.clear();
                response.write_to(&mut bytes);
                bytes.push(b'\n');
            } else {
                let text = line.text.as_deref().unwrap_or_default();
                bytes = shown.render(line.number, text, &response);
            }
            warn_replay(trace, line.number, &response);
            out.write_all(&bytes).map_err(|_| 2)?;
        }
        // The reader may have stopped (a read error): then this thread frees the batch.
        let _ = back.send(batch);
    }
}

impl Tally {
    /// Counts one answer; a malformed line is named on stderr (the first 20 of them).
    fn count(&mut self, trace: &std::path::Path, number: usize, response: &Response) {
        self.lines += 1;
        let Some(e) = response.as_error() else {
            return;
        };
        self.errors += 1;
        if !matches!(e.code, -32700 | -32600) {
            return;
        }
        self.malformed += 1;
        if self.malformed <= 20 {
            let why = e
                .data
                .as_ref()
                .and_then(|d| d.get("message"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or(&e.message);
            eprintln!(
                "warden replay: {}:{number}: {} ({}): {why}",
                trace.display(),
                e.message,
                e.code
            );
        }
    }
}

/// The reader's half: reads the trace line by line (one buffer, reused), skips blank lines,
/// decodes the rest and sends them in batches, until the end or until the decider hangs up;
/// frees the batches the decider hands back. A batch goes as soon as the input has nothing
/// more buffered, so a trace fed line by line is not held back to fill one.
fn read_ahead(
    mut input: BufReader<Box<dyn Read + Send>>,
    guardian: &Guardian,
    keep_text: bool,
    ahead: mpsc::SyncSender<Vec<Line>>,
    back: mpsc::Receiver<Vec<Line>>,
) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(4096);
    let mut batch = Vec::with_capacity(BATCH);
    let mut number = 0usize;
    loop {
        line.clear();
        let read = input.read_until(b'\n', &mut line);
        // Freed here, where they were allocated; a read error still sends what was decoded.
        while let Ok(done) = back.try_recv() {
            drop(done);
        }
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                let _ = ahead.send(batch);
                return Err(e);
            }
        };
        if n == 0 {
            break;
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        // Blank lines separate nothing and carry no request: they are the only lines skipped.
        if !line.iter().all(u8::is_ascii_whitespace) {
            batch.push(Line {
                number,
                text: keep_text.then(|| line.clone()),
                decoded: guardian.decode(&line),
            });
        }
        // Nothing more buffered: the next read may wait on the input.
        let drained = input.buffer().is_empty();
        if batch.len() == BATCH || (drained && !batch.is_empty()) {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if ahead.send(full).is_err() {
                return Ok(());
            }
        }
    }
    if !batch.is_empty() {
        let _ = ahead.send(batch);
    }
    // The last batches come back once decided (the decider hangs up when it is done).
    drop(ahead);
    for done in back {
        drop(done);
    }
    Ok(())
}
