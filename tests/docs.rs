//! Keeps docs/language.md honest: every ```ward block in it is checked by the real checker.
//!
//! - A block must check without errors (warnings are fine: blocks may be fragments).
//! - A block whose fence is directly preceded by the line `<!-- fails: CODE -->` must produce
//!   at least one error, and every error it produces must have that diagnostic code.
//! - ```ward-nocheck blocks (and any other language) are skipped.
//!
//! Also: every diagnostic code the parser and checker can emit, every hook, and every builtin
//! function is mentioned in the reference.

use std::path::{Path, PathBuf};

use warden::check::check_source;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn doc() -> String {
    let path = root().join("docs/language.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A ```ward block: the 1-based line of its opening fence, its text, and the code it must fail with.
struct Block {
    line: usize,
    text: String,
    fails: Option<String>,
}

fn blocks(doc: &str) -> Vec<Block> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        if let Some(info) = fence.strip_prefix("```") {
            let info = info.trim();
            let start = i;
            i += 1;
            let mut text = String::new();
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                text.push_str(lines[i]);
                text.push('\n');
                i += 1;
            }
            assert!(
                i < lines.len(),
                "docs/language.md:{}: unclosed code fence",
                start + 1
            );
            if info == "ward" {
                let fails = start
                    .checked_sub(1)
                    .map(|p| lines[p].trim())
                    .and_then(|l| l.strip_prefix("<!-- fails:"))
                    .and_then(|l| l.strip_suffix("-->"))
                    .map(|code| code.trim().to_string());
                out.push(Block {
                    line: start + 1,
                    text,
                    fails,
                });
            }
        }
        i += 1;
    }
    out
}

#[test]
fn every_ward_block_checks_as_documented() {
    let doc = doc();
    let blocks = blocks(&doc);
    assert!(
        blocks.len() >= 40,
        "expected many ```ward blocks, found {}",
        blocks.len()
    );
    assert!(
        blocks.iter().filter(|b| b.fails.is_some()).count() >= 10,
        "expected error examples marked <!-- fails: CODE -->"
    );
    let mut problems = Vec::new();
    for b in &blocks {
        let name = format!("docs/language.md:{}", b.line);
        let checked = check_source(&name, &b.text);
        let errors: Vec<_> = checked
            .diagnostics
            .items
            .iter()
            .filter(|d| d.is_error())
            .collect();
        let listing = || {
            errors
                .iter()
                .map(|d| format!("    {}: {}", d.code, d.message))
                .collect::<Vec<_>>()
                .join("\n")
        };
        match &b.fails {
            None if !errors.is_empty() => {
                problems.push(format!(
                    "{name}: block should check cleanly, but:\n{}",
                    listing()
                ));
            }
            Some(code) if errors.is_empty() => {
                problems.push(format!(
                    "{name}: block should fail with {code}, but it checks"
                ));
            }
            Some(code) if errors.iter().any(|d| d.code.as_str() != code.as_str()) => {
                problems.push(format!(
                    "{name}: block should fail with {code} only, but:\n{}",
                    listing()
                ));
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Every `"check::…"` / `"syntax::…"` code literal in `src/`.
fn emitted_codes(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            emitted_codes(&path, out);
            continue;
        }
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for prefix in ["\"check::", "\"syntax::"] {
            for (at, _) in text.match_indices(prefix) {
                let rest = &text[at + 1..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                out.push(rest[..end].to_string());
            }
        }
    }
}

#[test]
fn every_diagnostic_code_is_documented() {
    let doc = doc();
    let mut codes = Vec::new();
    emitted_codes(&root().join("src"), &mut codes);
    codes.sort();
    codes.dedup();
    assert!(
        codes.len() >= 30,
        "found only {} codes in src/",
        codes.len()
    );
    let missing: Vec<&String> = codes
        .iter()
        .filter(|c| !doc.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from docs/language.md: {missing:?}"
    );
}

/// The codes as one type (`diagnostics::Code`): each one the parser and the checker give is
/// documented, and the code texts in `src/` are the type's and no others.
#[test]
fn every_code_of_the_type_is_documented() {
    use warden::diagnostics::Code;
    let doc = doc();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| c.starts_with("check::") || c.starts_with("syntax::"))
        .filter(|c| !doc.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from docs/language.md: {missing:?}"
    );
    let mut emitted = Vec::new();
    emitted_codes(&root().join("src"), &mut emitted);
    let unknown: Vec<&String> = emitted
        .iter()
        .filter(|c| Code::parse(c).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "code texts in src/ that are no diagnostics::Code: {unknown:?}"
    );
}

#[test]
fn every_hook_is_documented() {
    let doc = doc();
    let missing: Vec<&str> = warden::acs::fields::HOOKS
        .iter()
        .map(|h| h.name)
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "hooks missing from docs/language.md: {missing:?}"
    );
}

/// Every entry of the builtin registry (`check::builtins::BUILTINS`) has a row in the table of
/// docs/language.md §6.5, and every function that table names is in the registry.
#[test]
fn every_builtin_is_documented() {
    let doc = doc();
    let start = doc
        .find("### 6.5 Builtin functions")
        .expect("docs/language.md has §6.5");
    let section = &doc[start..];
    let section = &section[..section.find("\n```").expect("§6.5 has an example")];
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    // The first cell of each row: the calls it documents, each written `NAME(…)`.
    let documented: Vec<String> = rows
        .iter()
        .flat_map(|row| {
            let cell = row.split('|').nth(1).unwrap_or("");
            cell.split('`')
                .skip(1)
                .step_by(2)
                .filter_map(|call| call.split_once('(').map(|(n, _)| n.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let names: Vec<&str> = warden::check::BUILTINS.iter().map(|b| b.name).collect();
    assert!(names.len() >= 10, "found only {} builtins", names.len());
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !documented.iter().any(|d| d == *n))
        .collect();
    assert!(
        missing.is_empty(),
        "builtins missing from the table of docs/language.md §6.5: {missing:?}"
    );
    let unknown: Vec<&String> = documented
        .iter()
        .filter(|d| !names.contains(&d.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/language.md §6.5 documents functions that are no builtin: {unknown:?}"
    );
}

/// The files under `dir` (recursively) whose names end with one of `exts`.
fn files_with(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_with(&path, exts, out);
        } else if exts
            .iter()
            .any(|e| path.to_string_lossy().ends_with(&format!(".{e}")))
        {
            out.push(path);
        }
    }
}

/// The repository is self-contained: docs and code cite the ACS facts they rely on by the
/// stable anchors of docs/acs.md, every such anchor exists, and nothing points outside the
/// repository for them.
#[test]
fn acs_citations_resolve_to_docs_acs_md() {
    let acs = std::fs::read_to_string(root().join("docs/acs.md")).unwrap();
    let anchors: Vec<&str> = acs
        .match_indices("<a id=\"")
        .map(|(at, m)| {
            let rest = &acs[at + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert!(anchors.len() >= 20, "found only {} anchors", anchors.len());
    let mut files = vec![
        root().join("README.md"),
        root().join("ARCHITECTURE.md"),
        root().join("vendor/acs/README.md"),
    ];
    files_with(&root().join("docs"), &["md"], &mut files);
    files_with(&root().join("src"), &["rs"], &mut files);
    files_with(&root().join("stdlib"), &["ward"], &mut files);
    files_with(&root().join("tests/acs/schemas"), &["json"], &mut files);
    let mut problems = Vec::new();
    let mut cited = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.strip_prefix(root()).unwrap().display().to_string();
        for (at, m) in text.match_indices("acs.md#") {
            let rest = &text[at + m.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(rest.len());
            let anchor = &rest[..end];
            cited += 1;
            if !anchors.contains(&anchor) {
                problems.push(format!("{name}: docs/acs.md has no anchor `{anchor}`"));
            }
        }
        // Spelt in pieces so that grepping the repository for them finds nothing.
        for stale in [
            concat!("NOTES", " §"),
            concat!("NOTES", ".md"),
            concat!("shared", "/acs"),
            concat!("..", "/shared"),
        ] {
            if text.contains(stale) {
                problems.push(format!("{name}: cites `{stale}`, outside the repository"));
            }
        }
    }
    assert!(cited >= 20, "found only {cited} citations of docs/acs.md");
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Writes each block to `dir` as `NAME.ward` and loads it (a block that checks clean but cannot
/// load would be a door that looks locked); keeps the files that state behaviour as `test`
/// blocks, then runs `warden test` over them. Returns how many blocks had tests.
fn run_blocks(dir: &Path, source: &str, blocks: &[(String, &Block)]) -> usize {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut with_tests = 0;
    let mut problems = Vec::new();
    for (name, b) in blocks {
        let path = dir.join(format!("{name}.ward"));
        std::fs::write(&path, &b.text).unwrap();
        if let Err(e) = warden::guardian::Policy::load(&path) {
            let codes: Vec<String> = e
                .items
                .iter()
                .map(|d| format!("{}: {}", d.code, d.message))
                .collect();
            problems.push(format!(
                "{source}:{}: checks but does not load: {}",
                b.line,
                codes.join("; ")
            ));
            continue;
        }
        if b.text.contains("test \"") {
            with_tests += 1;
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("test")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{source}: documented behaviour does not hold:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
    with_tests
}

/// The examples that show a behaviour carry `test` blocks stating it; each such block is run by
/// `warden test` and must pass, and every block that checks must also load.
#[test]
fn every_behaviour_example_runs_as_documented() {
    let doc = doc();
    let dir = std::env::temp_dir().join(format!("warden-doc-examples-{}", std::process::id()));
    let all = blocks(&doc);
    // Rego imports name files beside the policy, which a doc block has none of.
    let runnable: Vec<(String, &Block)> = all
        .iter()
        .filter(|b| b.fails.is_none() && !b.text.contains("use rego"))
        .map(|b| (format!("example_{}", b.line), b))
        .collect();
    let with_tests = run_blocks(&dir, "docs/language.md", &runnable);
    assert!(
        with_tests >= 25,
        "only {with_tests} examples state their behaviour as tests"
    );
}

/// The role catalogue table in docs/language.md §5 lists exactly what `src/roles.rs` reads.
#[test]
fn the_role_catalogue_is_documented_as_it_is() {
    let doc = doc();
    let marker = "<!-- role catalogue: kept equal to src/roles.rs by a test -->";
    let start = doc
        .find(marker)
        .expect("the role catalogue marker in docs/language.md");
    let rows: Vec<&str> = doc[start..]
        .lines()
        .skip(3)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let words = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|w| w.trim().trim_matches('`').to_string())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let mut documented = Vec::new();
    let mut endings = Vec::new();
    for row in &rows {
        let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
        let role = cells[0].trim().trim_matches('`').to_string();
        documented.push((role.clone(), words(cells[1])));
        for e in words(cells[2]) {
            endings.push((e, role.clone()));
        }
    }
    let actual: Vec<(String, Vec<String>)> = warden::roles::CATALOGUE
        .iter()
        .map(|(r, names)| (r.to_string(), names.iter().map(|n| n.to_string()).collect()))
        .collect();
    assert_eq!(
        documented, actual,
        "docs/language.md's role catalogue differs from src/roles.rs"
    );
    let mut actual_endings: Vec<(String, String)> = warden::roles::SUFFIXES
        .iter()
        .map(|(s, r)| (s.to_string(), r.to_string()))
        .collect();
    actual_endings.sort();
    endings.sort();
    assert_eq!(
        endings, actual_endings,
        "the documented name endings differ from src/roles.rs"
    );
}

/// Every ```ward block of the guides (docs/guides/*.md) loads, and their tests pass.
#[test]
fn every_guide_example_runs_as_documented() {
    let guides = root().join("docs/guides");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&guides)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no guides in docs/guides");
    let mut with_tests = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        let all = blocks(&text);
        let runnable: Vec<(String, &Block)> = all
            .iter()
            .filter(|b| b.fails.is_none())
            .map(|b| (format!("{stem}_{}", b.line), b))
            .collect();
        let dir = std::env::temp_dir().join(format!(
            "warden-guide-examples-{stem}-{}",
            std::process::id()
        ));
        with_tests += run_blocks(&dir, &file.display().to_string(), &runnable);
    }
    assert!(with_tests > 0, "the guides state no behaviour as tests");
}
