//! The checker, tested as data: every `tests/diagnostics/*.ward` has its expected diagnostics
//! beside it, rendered (`.txt`) and as JSON (`.json`). `UPDATE_GOLDEN=1 cargo test` rewrites them.
//! Also: examples and stdlib check clean, and no input makes the parser panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use warden::check::{self, Loaded};
use warden::diagnostics::FileId;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {} (run with UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    assert_eq!(
        expected,
        actual,
        "golden mismatch for {} (run with UPDATE_GOLDEN=1 to accept)",
        path.display()
    );
}

/// Checks a file with a stable display name, relative to the repository.
fn check_relative(path: &Path) -> check::Checked {
    let rel = path.strip_prefix(root()).unwrap();
    std::env::set_current_dir(root()).unwrap();
    check::check(Loaded::from_path(rel).unwrap())
}

#[test]
fn diagnostics_match_golden_files() {
    let dir = root().join("tests/diagnostics");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ward"))
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 10,
        "expected the golden corpus in {}",
        dir.display()
    );
    for input in inputs {
        let checked = check_relative(&input);
        assert!(
            !checked.diagnostics.items.is_empty(),
            "{} should produce diagnostics",
            input.display()
        );
        golden(
            &input.with_extension("txt"),
            &checked.diagnostics.render(false),
        );
        let json = serde_json::to_string_pretty(&checked.diagnostics.to_json()).unwrap() + "\n";
        golden(&input.with_extension("json"), &json);
    }
}

#[test]
fn json_diagnostics_have_the_documented_shape() {
    let checked = check_relative(&root().join("tests/diagnostics/non_ascii.ward"));
    let value = serde_json::to_value(checked.diagnostics.to_json()).unwrap();
    let items = value.as_array().unwrap();
    let d = items
        .iter()
        .find(|d| d["code"] == "check::unknown_field")
        .expect("the misspelt field is reported");
    for key in [
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "severity",
        "code",
        "message",
        "help",
    ] {
        assert!(d.get(key).is_some(), "missing {key}");
    }
    // `tool.verison` sits after non-ASCII text on line 2: columns count characters.
    let line = "rule r on toolCallRequest when tool.name == \"дом\" and tool.verison";
    assert_eq!(d["line"], 2);
    assert_eq!(d["column"], line.chars().count() - "verison".len() + 1);
    assert_eq!(d["help"], "did you mean `tool.version`?");
}

fn check_tree_clean(dir: &str) {
    let files = check::collect_files(&[root().join(dir)]).unwrap();
    assert!(!files.is_empty());
    for f in files {
        let checked = check::check_path(&f).unwrap();
        assert!(
            checked.diagnostics.items.is_empty(),
            "{} is not clean:\n{}",
            f.display(),
            checked.diagnostics.render(false)
        );
    }
}

#[test]
fn examples_check_clean() {
    check_tree_clean("examples");
    let count = check::collect_files(&[root().join("examples")])
        .unwrap()
        .len();
    assert!(count >= 5, "at least five examples");
}

#[test]
fn stdlib_checks_clean() {
    check_tree_clean("stdlib");
}

#[test]
fn every_embedded_stdlib_module_is_a_file_in_stdlib() {
    for (name, text) in check::STDLIB {
        let file = root()
            .join("stdlib")
            .join(format!("{}.ward", name.trim_start_matches("std.")));
        assert_eq!(&std::fs::read_to_string(&file).unwrap(), text, "{name}");
    }
}

#[test]
fn misspelt_field_names_file_line_column_and_suggestion() {
    let checked = check::check_source(
        "policy.ward",
        "rule r on toolCallRequest\n  when tool.nmae == \"x\" => deny \"c\"\ndefault allow\n",
    );
    let json = checked.diagnostics.to_json();
    assert_eq!(json.len(), 1);
    let d = &json[0];
    assert_eq!((d.file.as_str(), d.line, d.column), ("policy.ward", 2, 13));
    assert!(d.message.contains("tool.nmae"));
    assert_eq!(d.help.as_deref(), Some("did you mean `tool.name`?"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = warden::syntax::parse(FileId(0), &text);
    }

    #[test]
    fn checker_never_panics_on_token_soup(tokens in proptest::collection::vec(
        prop::sample::select(vec![
            "rule", "r", "on", "toolCallRequest", "toolCallResult", "when", "=>", "deny", "allow",
            "ask", "defer", "modify", "\"c\"", ":", "and", "or", "not", "in", "has", "(", ")", "{",
            "}", "[", "]", ",", ".", "tool", "name", "args", "x", "==", "<", "3", "5m", "count",
            "exists", "this", "turn", "last", "turns", "by", "$", "any", "all", "label", "let",
            "=", "default", "test", "call", "user", "\n", "untrusted", "turns_since", "intent",
            "permits", "redact", "set", "replace", "with", "approver", "human", "timeout", "else",
        ]),
        0..60,
    )) {
        let text = tokens.join(" ");
        let _ = check::check_source("soup.ward", &text);
    }
}

#[test]
fn deeply_nested_input_is_refused_not_crashed() {
    for (src, refused) in [
        (format!("let _x = {}", "(".repeat(100_000)), true),
        (format!("let _x = {}", "not ".repeat(100_000)), true),
        (format!("let _x = {}", "[".repeat(100_000)), true),
        (format!("let _x = 1{}", " and true".repeat(20_000)), true),
        // A long run of negations is flat in the parser and folds; it is fine.
        (format!("let _x = {}1", "-".repeat(100_000)), false),
    ] {
        let checked = check::check_source("deep.ward", &src);
        let too_deep = checked
            .diagnostics
            .items
            .iter()
            .any(|d| d.code == "syntax::too_deep");
        assert_eq!(too_deep, refused, "{}", &src[..40]);
    }
}

#[test]
fn examples_and_stdlib_are_formatted() {
    let files = check::collect_files(&[root().join("examples"), root().join("stdlib")]).unwrap();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let formatted = warden::fmt::format_source(FileId(0), &text)
            .unwrap_or_else(|d| panic!("{} does not parse: {d:?}", f.display()));
        assert_eq!(
            formatted,
            text,
            "{} is not formatted (run `warden fmt`)",
            f.display()
        );
    }
}
