//! The semantics corpus (`tests/semantics/`): policies with `test` blocks that pin down what
//! every construct, builtin and logic rule decides. The whole folder is run through the built
//! `warden test --format json`; `tests/semantics/PENDING` lists the cases that fail today
//! (`FILE.ward :: test name`, or `FILE.ward :: *` for a file that does not check or compile).
//!
//! - At least 200 tests run.
//! - Every test not in PENDING passes, and every file not listed as `*` loads.
//! - Every test in PENDING still fails, and every `*` file still fails to load: a case that
//!   starts passing must be removed from PENDING, so the list never goes stale.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const MIN_TESTS: usize = 200;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A corpus file's name relative to `tests/semantics/`, whatever form the runner printed.
fn corpus_name(file: &str) -> String {
    let file = file.replace('\\', "/");
    match file.rfind("tests/semantics/") {
        Some(i) => file[i + "tests/semantics/".len()..].to_string(),
        None => Path::new(&file)
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned()),
    }
}

/// PENDING: per file, the pending test names, or `None` for the whole file (`:: *`).
struct Pending {
    tests: BTreeSet<(String, String)>,
    files: BTreeSet<String>,
}

fn pending() -> Pending {
    let path = root().join("tests/semantics/PENDING");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut p = Pending {
        tests: BTreeSet::new(),
        files: BTreeSet::new(),
    };
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((file, name)) = line.split_once(" :: ") else {
            panic!(
                "tests/semantics/PENDING:{}: expected `FILE.ward :: test name` or `FILE.ward :: *`, got `{line}`",
                n + 1
            );
        };
        let (file, name) = (file.trim().to_string(), name.trim().to_string());
        let fresh = if name == "*" {
            p.files.insert(file.clone())
        } else {
            p.tests.insert((file.clone(), name.clone()))
        };
        assert!(
            fresh,
            "tests/semantics/PENDING:{}: `{file} :: {name}` is listed twice",
            n + 1
        );
    }
    p
}

/// The `.ward` files of the corpus, relative to `tests/semantics/`.
fn corpus_files() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "ward") {
                out.insert(corpus_name(&p.to_string_lossy()));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root().join("tests/semantics"), &mut out);
    out
}

struct Outcome {
    passed: bool,
    /// The failure messages of a failed test.
    messages: Vec<String>,
}

#[test]
fn semantics_corpus() {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["test", "tests/semantics", "--format", "json"])
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("warden runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "warden test exited with {:?}\n{stderr}",
        out.status.code()
    );
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("warden test --format json printed no JSON report ({e}):\n{stdout}\n{stderr}")
    });

    // Per file and test name: did it pass.
    let mut results: BTreeMap<(String, String), Outcome> = BTreeMap::new();
    for t in report["tests"].as_array().expect("tests[]") {
        let file = corpus_name(t["file"].as_str().unwrap_or(""));
        let name = t["name"].as_str().unwrap_or("").to_string();
        let messages = t["failures"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| {
                        let line = f["line"].as_u64().unwrap_or(0);
                        let msg = f["message"].as_str().unwrap_or("");
                        match f["actual"].as_str() {
                            Some(actual) => format!("line {line}: {msg} (actual: {actual})"),
                            None => format!("line {line}: {msg}"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let passed = t["status"].as_str() == Some("passed");
        results.insert((file, name), Outcome { passed, messages });
    }
    // Files that did not check or compile, with their diagnostics.
    let load_errors: BTreeMap<String, String> = report["load_errors"]
        .as_array()
        .map(|es| {
            es.iter()
                .map(|e| {
                    (
                        corpus_name(e["file"].as_str().unwrap_or("")),
                        e["diagnostics"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();

    let pending = pending();
    let files = corpus_files();
    let mut problems: Vec<String> = Vec::new();

    // PENDING names only what exists.
    for file in &pending.files {
        if !files.contains(file) {
            problems.push(format!(
                "PENDING lists `{file} :: *`, but tests/semantics/{file} does not exist"
            ));
        }
    }
    for (file, name) in &pending.tests {
        if pending.files.contains(file) {
            problems.push(format!(
                "PENDING lists both `{file} :: *` and `{file} :: {name}`"
            ));
        } else if !results.contains_key(&(file.clone(), name.clone()))
            && !load_errors.contains_key(file)
        {
            problems.push(format!(
                "PENDING lists `{file} :: {name}`, but no such test ran"
            ));
        }
    }

    // Whole files: listed as `*` exactly when they do not load.
    for (file, diagnostics) in &load_errors {
        if !pending.files.contains(file) {
            problems.push(format!(
                "{file} does not check or compile (add `{file} :: *` to tests/semantics/PENDING only if this is expected):\n{diagnostics}"
            ));
        }
    }
    for file in &pending.files {
        if files.contains(file) && !load_errors.contains_key(file) {
            let outcomes: Vec<String> = results
                .iter()
                .filter(|((f, _), _)| f == file)
                .map(|((f, n), o)| {
                    format!(
                        "    {} {f} :: {n}",
                        if o.passed { "passes:" } else { "FAILS: " }
                    )
                })
                .collect();
            problems.push(format!(
                "{file} now loads: remove `{file} :: *` from tests/semantics/PENDING (list any of its tests that still fail one by one):\n{}",
                outcomes.join("\n")
            ));
        }
    }

    // Tests: pass unless pending; pending ones still fail.
    for ((file, name), o) in &results {
        let is_pending = pending.tests.contains(&(file.clone(), name.clone()));
        if pending.files.contains(file) {
            continue; // reported above
        }
        match (o.passed, is_pending) {
            (true, true) => problems.push(format!(
                "{file} :: {name}: now passes: remove from tests/semantics/PENDING"
            )),
            (false, false) => problems.push(format!(
                "{file} :: {name}: FAILED\n    {}",
                o.messages.join("\n    ")
            )),
            _ => {}
        }
    }

    let ran = results.len();
    let pending_count = pending.tests.len();
    if ran < MIN_TESTS {
        problems.push(format!(
            "only {ran} tests ran; the corpus must hold at least {MIN_TESTS}"
        ));
    }
    assert!(
        problems.is_empty(),
        "semantics corpus: {} problem(s) ({ran} tests ran, {pending_count} pending, {} pending files)\n\n{}\n",
        problems.len(),
        pending.files.len(),
        problems.join("\n\n")
    );
    eprintln!(
        "semantics corpus: {ran} tests ran, {} passed, {pending_count} pending; {} pending files",
        ran - pending_count,
        pending.files.len()
    );
}
