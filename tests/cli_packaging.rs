//! What a packager needs from the binary: the commit in `--version`, shell completions and a
//! manual page generated from the same command definitions the parser uses.

mod common;

fn warden(args: &[&str]) -> (i32, String, String) {
    common::warden(args, b"")
}

#[test]
fn the_version_names_the_commit() {
    let (code, out, _) = warden(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("warden 0."), "{out}");
    assert!(out.contains("(commit "), "{out}");
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = warden(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in ["check", "replay", "serve", "diff", "efficacy"] {
            assert!(out.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let (code, _, err) = warden(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error: {err}");
}

#[test]
fn the_manual_page_is_roff_with_the_commands() {
    let (code, out, _) = warden(&["manpage"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(".TH warden 1"),
        "{}",
        &out[..out.len().min(300)]
    );
    assert!(out.contains("serve"), "the manual page lists the commands");
}

/// `warden … | head`: when the reader of a report goes away, the command ends quietly (killed
/// by SIGPIPE, as other tools are), not with a panic.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_a_report_quietly() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let policy = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/payments_effects.ward"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for _ in 0..400 {
            if stdin.write_all(policy.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("//"), "{first}");
    // The reader is gone (stdout was dropped above).
    writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    const SIGPIPE: i32 = 13;
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{:?}", out.status);
}

/// The exit-code convention (README, "Exit codes"): 1 when what a command examines fails,
/// 2 when it cannot run.
#[test]
fn exit_codes_say_failed_or_could_not_run() {
    let dir = std::env::temp_dir().join(format!("warden-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.ward");
    std::fs::write(&bad, "rule r on toolCallRequest when => deny \"x\"\n").unwrap();
    let bad = bad.to_str().unwrap();
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/traces/injection.jsonl"
    );
    for (args, want) in [
        (vec!["check", bad], 1),
        (vec!["compile", bad], 1),
        (vec!["check", "/no/such/policy.ward"], 2),
        (vec!["compile", "/no/such/policy.ward"], 2),
        (vec!["replay", "--policy", bad, trace], 2),
        (vec!["replay", trace], 0),
        (vec!["no-such-command"], 2),
    ] {
        let (code, _, err) = warden(&args);
        assert_eq!(code, want, "warden {args:?}: {err}");
    }
}
