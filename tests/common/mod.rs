//! Helpers shared by the integration tests. Each test crate uses a different subset.
#![allow(dead_code)]

pub mod schema;

/// Runs the `warden` binary with `args`, `stdin` on its standard input; returns the exit code
/// (-1 when killed), standard output and standard error.
pub fn warden(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run warden");
    // A command that does not read its input closes the pipe early: not an error here.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    let out = child.wait_with_output().expect("warden's output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A test that needs a real program or service this machine lacks (Neovim, PostgreSQL,
/// HAProxy, the MCP servers, Chromium): under CI (`CI` set, where `.ci/run` installs them) this
/// fails with `why`; elsewhere it prints one line saying what to install and the caller returns,
/// so `cargo test` passes on a machine with only the Rust toolchain. `tests/external.rs` checks
/// that every test driving such a program comes through here.
pub fn unavailable(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{why} (under CI, .ci/run installs it)");
    }
    eprintln!("skipped: {why}");
}

/// Collects decision-log records in memory: an embedder's own sink.
#[derive(Default)]
pub struct Collect(pub std::sync::Mutex<Vec<serde_json::Value>>);

impl warden::guardian::log::DecisionLog for Collect {
    fn record(&self, record: &serde_json::Value) {
        self.0.lock().unwrap().push(record.clone());
    }
}
