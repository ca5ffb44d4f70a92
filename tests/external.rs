//! The README's test command passes on a machine with only the Rust toolchain: a test that
//! drives a real program or service (Neovim, PostgreSQL, HAProxy, the MCP servers, Node,
//! Chromium) skips with one line when it is missing, and fails only under CI, where `.ci/run`
//! installs it. This checks that every such test goes through the one helper that says so,
//! `common::unavailable` (tests/common/mod.rs).

use std::path::{Path, PathBuf};

/// What marks a test as needing a program this machine may lack.
const MARKERS: &[&str] = &[
    "Command::new(\"nvim\")",
    "haproxy",
    "WARDEN_TEST_POSTGRES_URL",
    "Command::new(\"node\")",
    "Command::new(\"npx\")",
    "chromium",
];

/// A test crate's own text with that of the helper modules it declares (`mod pg_common;`).
fn crate_text(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    let mut all = text.clone();
    for line in text.lines() {
        let Some(name) = line.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else {
            continue;
        };
        for helper in [
            dir.join(name).join("mod.rs"),
            dir.join(format!("{name}.rs")),
        ] {
            if let Ok(t) = std::fs::read_to_string(helper) {
                all.push_str(&t);
            }
        }
    }
    all
}

#[test]
fn every_test_needing_an_outside_program_skips_through_the_helper() {
    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&tests).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("external.rs") {
            continue;
        }
        let own = std::fs::read_to_string(&path).unwrap();
        if !MARKERS.iter().any(|m| own.contains(m)) {
            continue;
        }
        checked += 1;
        let all = crate_text(&path);
        let skips = all.contains("common::unavailable(");
        let bypasses = all.contains("\"CI\").is_none()") || all.contains("fails rather than skip");
        if !skips || bypasses {
            wrong.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(
        checked >= 4,
        "expected the Neovim, PostgreSQL, HAProxy and MCP tests, found {checked}"
    );
    assert!(
        wrong.is_empty(),
        "these tests need an outside program but do not skip through common::unavailable: {wrong:?}"
    );
}

#[test]
fn the_helper_skips_outside_ci_and_fails_under_it() {
    // Run in a child process of this test binary so the environment is its own.
    let me = std::env::current_exe().unwrap();
    let run = |ci: bool| {
        let mut c = std::process::Command::new(&me);
        c.args([
            "--exact",
            "probe_unavailable",
            "--nocapture",
            "--include-ignored",
        ]);
        c.env("WARDEN_PROBE_UNAVAILABLE", "1");
        if ci {
            c.env("CI", "true");
        } else {
            c.env_remove("CI");
        }
        c.output().unwrap()
    };
    let outside = run(false);
    assert!(outside.status.success());
    assert!(String::from_utf8_lossy(&outside.stderr).contains("skipped: probe is not installed"));
    assert!(!run(true).status.success());
}

mod common;

#[test]
#[ignore = "run by the_helper_skips_outside_ci_and_fails_under_it"]
fn probe_unavailable() {
    if std::env::var_os("WARDEN_PROBE_UNAVAILABLE").is_some() {
        common::unavailable("probe is not installed");
    }
}
