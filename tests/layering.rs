//! The layering of ARCHITECTURE.md ("Layers"), checked: every `src/**/*.rs` is read, its
//! `use crate::…` and `crate::MODULE::…` references are collected per top-level module, and a
//! reference to a module that ARCHITECTURE.md places downstream (or beside: modules of one
//! layer do not know each other) fails. There are no exceptions: two modules read less than
//! their layer allows, and that is checked too — `reference` (`REFERENCE_READS`) and `state`,
//! which names the VM's data types but never runs policy code (`STATE_READS_OF_VM`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// ARCHITECTURE.md's layers, upstream first. A module may refer to the modules of earlier
/// layers only. `diagnostics` and `acs` are shared by every stage.
const LAYERS: &[&[&str]] = &[
    &["diagnostics", "acs"],
    // Vocabularies and loaders the checker reads: the grammar and AST, argument roles, Rego.
    &["syntax", "roles", "actions", "text", "rego"],
    // The checker (and the builtin registry, `check::builtins`); the formatter reads syntax.
    &["check", "fmt"],
    &["compile"],
    &["vm"],
    &["state"],
    // The embedding API: one step through check, compile, vm and state.
    &["guardian"],
    // Over the embedding API: `warden test`'s runner, the platform hook adapters, and (test
    // builds only) the differential test, which drives the compiled side and `reference`.
    &["testing", "adapters", "differential"],
    // Front ends.
    &["server", "lsp"],
    &["cli"],
];

/// `reference` (test builds only) is the independent evaluator the VM is held to, so it reads
/// only the checked AST, the field table and the decision words: these paths (and
/// `diagnostics`), nothing compiled. It sits in no layer: only `differential` reads it.
const REFERENCE_READS: &[&str] = &[
    "diagnostics",
    "syntax",
    "check",
    "acs::fields",
    "acs::DecisionKind",
    // The effect-class vocabulary and the request lexicon are data, like the hook table: the
    // reference reads them, and models on its own which words count and when.
    "actions",
    // How text is cut into tokens and compacted: the reference models inference on its own,
    // over the same cuts.
    "text",
    // Request ids as 128 bits (how a result names its call) and the argument-role catalogue:
    // data the reference reads to model `read_at`'s places on its own.
    "acs::ids",
    "roles",
];

/// The one module that may read `reference`: the differential test that holds the compiled
/// side to it.
const REFERENCE_READER: &str = "differential";

/// What `state` may name of `vm`: the trait the VM reads the session through, which `state`
/// implements, the data it trades in, and a pattern match (Intent capabilities). Never `run`,
/// `Env` or `Budget`: policy code runs in the step's owner (`guardian::engine`), and `state`
/// stores what it is handed. `use crate::vm;` or `vm::{self, …}` would hide a call, so it
/// fails too.
const STATE_READS_OF_VM: &[&str] = &[
    "vm::Facts",
    "vm::Node",
    "vm::Val",
    "vm::glob_match",
    "vm::UNKNOWN_PLACE",
];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without `//` comments (doc comments' intra-doc links are no dependency).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every path a file reaches through `crate::`, to its second segment (`check`,
/// `acs::fields`): `crate::a::b::c` gives `a::b`, `use crate::{a::{b, c}, d}` gives `a::b`,
/// `a::c` and `d`.
fn references(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        for first in elements(rest) {
            let name = ident_at(first);
            let after = &first[name.len()..];
            match after.strip_prefix("::") {
                Some(more) if !ident_at(more).is_empty() => {
                    out.push(format!("{name}::{}", ident_at(more)))
                }
                Some(more) if more.starts_with('{') => {
                    let inner: Vec<&str> = elements(more).into_iter().map(ident_at).collect();
                    if inner.is_empty() {
                        out.push(name.to_string());
                    }
                    out.extend(inner.into_iter().map(|i| format!("{name}::{i}")));
                }
                _ => out.push(name.to_string()),
            }
        }
    }
    out
}

/// `{a, b::{c, d}, e}…` → the text at `a`, `b::{…`, `e`; anything else → itself.
fn elements(s: &str) -> Vec<&str> {
    let Some(group) = s.strip_prefix('{') else {
        return vec![s];
    };
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && (c.is_alphanumeric() || c == '_') => {
                start = false;
                out.push(&group[i..]);
            }
            _ => {}
        }
    }
    out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

#[test]
fn modules_refer_only_upstream() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut modules = BTreeSet::new();
    let mut edges: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        // The crate roots: `lib.rs` declares the modules, `main.rs` is the binary's own crate.
        if rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        let module = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        modules.insert(module.clone());
        let text = std::fs::read_to_string(file).unwrap();
        for path in references(&code(&text)) {
            let target = path.split("::").next().unwrap().to_string();
            if target == module || target.is_empty() {
                continue;
            }
            *edges.entry((module.clone(), target.clone())).or_default() += 1;
            let allowed = if module == "reference" {
                REFERENCE_READS
                    .iter()
                    .any(|r| path == *r || path.starts_with(&format!("{r}::")))
            } else if target == "reference" {
                module == REFERENCE_READER
            } else if module == "state" && target == "vm" {
                STATE_READS_OF_VM.contains(&path.as_str())
            } else {
                match (layer_of(&module), layer_of(&target)) {
                    (Some(from), Some(to)) => to < from,
                    _ => false,
                }
            };
            if !allowed {
                violations.push(format!("src/{rel}: {module} → crate::{path}"));
            }
        }
    }
    let unplaced: Vec<&String> = modules
        .iter()
        .filter(|m| *m != "reference" && layer_of(m).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules with no layer in tests/layering.rs (place them as ARCHITECTURE.md does): {unplaced:?}"
    );
    violations.dedup();
    assert!(
        violations.is_empty(),
        "references against the layering of ARCHITECTURE.md (a module may use only modules of \
         earlier layers; see LAYERS, REFERENCE_READS and STATE_READS_OF_VM in \
         tests/layering.rs):\n  {}",
        violations.join("\n  ")
    );
    // The edges are real: the pipeline is found.
    for (from, to) in [
        ("check", "syntax"),
        ("compile", "check"),
        ("vm", "compile"),
        ("state", "vm"),
        ("differential", "reference"),
    ] {
        assert!(
            edges.contains_key(&(from.to_string(), to.to_string())),
            "no reference {from} → {to} found: is the scan still reading src/?"
        );
    }
}

/// The layers name the modules ARCHITECTURE.md describes, and no others.
#[test]
fn the_layers_mirror_architecture_md() {
    let doc = std::fs::read_to_string(src().join("../ARCHITECTURE.md")).unwrap();
    for module in LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .chain(["reference"].iter())
    {
        assert!(
            doc.contains(&format!("| `{module}` |")),
            "ARCHITECTURE.md's module table has no `{module}`"
        );
    }
    assert!(
        doc.contains("tests/layering.rs"),
        "ARCHITECTURE.md names the test that checks its layers"
    );
}

#[test]
fn references_are_parsed() {
    assert_eq!(
        references("use crate::check::{self, Checked};\nlet x = crate::acs::fields::lookup;"),
        ["check::self", "check::Checked", "acs::fields"]
    );
    assert_eq!(
        references("use crate::{check::{A, b}, vm, acs::jcs};"),
        ["check::A", "check::b", "vm", "acs::jcs"]
    );
    assert!(references("pub(crate) fn f() {} $crate::x").is_empty());
}
