//! Warden in a real client: Neovim, headless, with `editors/nvim/` on its runtimepath, opens a
//! policy with an error and reads back (through `tests/nvim/lsp_test.lua`) the diagnostics, a
//! hover, a completion and two go-to-definition jumps, and the code lens of a test block added
//! by a normal-mode edit, which are asserted here.
//!
//! Neovim is Debian's `neovim` package (0.7 on bookworm), which `.ci/run` installs. Without
//! it this test is skipped with a line saying so, except under CI, where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const POLICY: &str = r#"// Проверка 🚀: non-ASCII text before the error
package nvim.test

use std.taint

let limit = 10

rule big on toolCallRequest
  when tool.name == "send_money" and args.amount > limit
  => deny "big": "too big"

rule tainted on toolCallRequest
  when args.to has untrusted
  => deny "tainted"

rule crab on toolCallRequest
  when "🦀 краб" == tool.nmae
  => deny "crab"

default allow
"#;

/// Neovim, or `None` after saying why the test is skipped (a failure under CI).
fn nvim() -> Option<PathBuf> {
    match Command::new("nvim").arg("--version").output() {
        Ok(o) if o.status.success() => Some(PathBuf::from("nvim")),
        _ => {
            common::unavailable(
                "`nvim` is not installed: this test drives Warden's language server from a real \
                 Neovim (apt-get install neovim)",
            );
            None
        }
    }
}

/// (1-based row, 0-based byte column) of the `nth` occurrence of `needle` in POLICY, plus `delta`.
fn at(needle: &str, nth: usize, delta: usize) -> (usize, usize) {
    let mut seen = 0;
    for (i, line) in POLICY.lines().enumerate() {
        for (col, _) in line.match_indices(needle) {
            if seen == nth {
                return (i + 1, col + delta);
            }
            seen += 1;
        }
    }
    panic!("{needle} not in the policy");
}

#[test]
fn neovim_shows_diagnostics_hover_completion_and_definitions() {
    let Some(nvim) = nvim() else {
        return;
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/nvim-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let policy = dir.join("policy.ward");
    std::fs::write(&policy, POLICY).unwrap();
    let out = dir.join("out.json");

    let hover = at("name", 0, 1);
    let completion = at("tool.", 0, 5);
    let definition = at("limit", 1, 2);
    let stdlib_definition = at("untrusted", 0, 0);
    let positions = serde_json::json!({
        "hover": [hover.0, hover.1],
        "completion": [completion.0, completion.1],
        "definition": [definition.0, definition.1],
        "stdlib_definition": [stdlib_definition.0, stdlib_definition.1],
    });
    let rtp = root.join("editors/nvim");
    let script = root.join("tests/nvim/lsp_test.lua");
    let mut child = Command::new(nvim)
        .arg("--headless")
        .arg("--clean")
        .arg("--cmd")
        .arg(format!("set rtp^={}", rtp.display()))
        .arg("--cmd")
        .arg(format!(
            "let g:warden_path = '{}'",
            env!("CARGO_BIN_EXE_warden")
        ))
        .arg("-c")
        .arg(format!("luafile {}", script.display()))
        .arg(&policy)
        .env("WARDEN_NVIM_OUT", &out)
        .env("WARDEN_NVIM_POS", positions.to_string())
        .env("TMPDIR", dir.join("tmp"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvim");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "nvim did not finish within 90 s\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_else(|_| {
        panic!(
            "nvim wrote no result\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let r: Value = serde_json::from_str(&text).unwrap();
    let shown = serde_json::to_string_pretty(&r).unwrap();
    assert_eq!(r["errors"], serde_json::json!([]), "{shown}");
    assert_eq!(r["filetype"], "ward", "{shown}");
    assert_eq!(r["clients"], 1, "one warden client attached: {shown}");

    // The error, at the byte column Neovim derives from the UTF-16 position on the wire.
    assert_eq!(r["diagnostics_arrived"], true, "{shown}");
    let diags = r["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{shown}");
    let (row, col) = at("nmae", 0, 0);
    assert_eq!(diags[0]["lnum"], row - 1, "{shown}");
    assert_eq!(diags[0]["col"], col, "{shown}");
    assert_eq!(diags[0]["end_col"], col + 4, "{shown}");
    assert_eq!(diags[0]["severity"], 1, "{shown}");
    assert!(
        diags[0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `tool.name`?"),
        "{shown}"
    );

    let hover = r["hover"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no hover: {shown}"));
    assert!(hover.contains("tool.name: string"), "{shown}");
    assert!(hover.contains("Tool name."), "{shown}");

    let completion: Vec<&str> = r["completion"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for want in ["name", "version", "provider"] {
        assert!(
            completion.contains(&want),
            "{want} missing from {completion:?}"
        );
    }

    // `limit` jumps to its `let` (row 6, after `let `).
    assert_eq!(
        Path::new(r["definition"]["file"].as_str().unwrap()),
        policy,
        "{shown}"
    );
    assert_eq!(r["definition"]["row"], 6, "{shown}");
    assert_eq!(r["definition"]["col"], 4, "{shown}");
    // `untrusted` opens the embedded stdlib module, written to disk by the server.
    let std_file = r["stdlib_definition"]["file"].as_str().unwrap();
    assert!(std_file.ends_with("std/taint.ward"), "{shown}");
    let std_text = std::fs::read_to_string(std_file).unwrap();
    let row = r["stdlib_definition"]["row"].as_u64().unwrap() as usize;
    assert!(
        std_text
            .lines()
            .nth(row - 1)
            .unwrap()
            .starts_with("label untrusted"),
        "{shown}"
    );

    // A normal-mode edit (`:put`, no insert mode) that adds a test block brings its code lens
    // (the plugin refreshes lenses on TextChanged).
    assert_eq!(r["lens_after_edit"], true, "{shown}");
}
