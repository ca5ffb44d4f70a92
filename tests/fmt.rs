//! The formatter, tested as data: every `tests/fmt/NAME.input.ward` must format to
//! `tests/fmt/NAME.expected.ward` (run with `UPDATE_GOLDEN=1` to rewrite the expected files),
//! every expected file must be a fixed point, and formatting must never change the AST.
//! A property test does the same for random expressions and rules.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use warden::diagnostics::FileId;
use warden::fmt::format_source;
use warden::syntax::{ast::Module, parse};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fmt")
}

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(golden_dir())
        .expect("tests/fmt exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".input.ward"))
        .collect();
    v.sort();
    v
}

/// `Debug` of the module with every `Span { start: N, end: M }` replaced by `Span`.
fn erase_spans(m: &Module) -> String {
    let text = format!("{m:?}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find("Span { start: ") {
        out.push_str(&rest[..i]);
        out.push_str("Span");
        let after = &rest[i..];
        let close = after.find('}').expect("span closes");
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

fn parse_clean(text: &str) -> Result<Module, String> {
    let (m, d) = parse(FileId(0), text);
    if d.is_empty() {
        Ok(m)
    } else {
        Err(format!("{d:#?}"))
    }
}

/// Formats `input` and checks the output parses to the same AST and is a fixed point.
fn check_round_trip(input: &str) -> Result<String, String> {
    let before = parse_clean(input).map_err(|d| format!("input does not parse: {d}"))?;
    let once = format_source(FileId(0), input).map_err(|d| format!("refused: {d:#?}"))?;
    let after = parse_clean(&once).map_err(|d| format!("output does not parse: {d}\n{once}"))?;
    if erase_spans(&before) != erase_spans(&after) {
        return Err(format!(
            "meaning changed.\ninput:\n{input}\noutput:\n{once}\nbefore: {}\nafter:  {}",
            erase_spans(&before),
            erase_spans(&after)
        ));
    }
    let twice = format_source(FileId(0), &once).map_err(|d| format!("refused: {d:#?}"))?;
    if once != twice {
        return Err(format!(
            "not idempotent.\ninput:\n{input}\nonce:\n{once}\ntwice:\n{twice}"
        ));
    }
    Ok(once)
}

fn comments(text: &str) -> Vec<String> {
    warden::syntax::trivia::scan(text, usize::MAX)
        .comments
        .into_iter()
        .map(|c| c.text)
        .collect()
}

#[test]
fn golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let inputs = inputs();
    assert!(inputs.len() >= 8, "expected at least 8 golden pairs");
    let mut failures = Vec::new();
    for input_path in inputs {
        let name = input_path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let expected_path =
            input_path.with_file_name(name.replace(".input.ward", ".expected.ward"));
        let input = fs::read_to_string(&input_path).unwrap();
        let formatted = match check_round_trip(&input) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if comments(&input) != comments(&formatted) {
            failures.push(format!(
                "{name}: comments changed: {:?} vs {:?}",
                comments(&input),
                comments(&formatted)
            ));
        }
        if update {
            fs::write(&expected_path, &formatted).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("missing {}", expected_path.display()));
        if formatted != expected {
            failures.push(format!(
                "{name}: output differs from expected.\n--- expected\n{expected}\n--- got\n{formatted}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn expected_files_are_fixed_points() {
    for input_path in inputs() {
        let name = input_path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let expected_path =
            input_path.with_file_name(name.replace(".input.ward", ".expected.ward"));
        let Ok(expected) = fs::read_to_string(&expected_path) else {
            continue;
        };
        let again = format_source(FileId(0), &expected).expect("expected file parses");
        assert_eq!(
            again,
            expected,
            "{} is not a fixed point",
            expected_path.display()
        );
    }
}

#[test]
fn refuses_files_that_do_not_parse() {
    let err = format_source(FileId(0), "rule a on x when => deny \"c\"\n").unwrap_err();
    assert!(!err.is_empty());
    let err = format_source(FileId(0), "let x = \"bad \\q escape\"\n").unwrap_err();
    assert_eq!(err[0].code, "syntax::bad_escape");
}

#[test]
fn empty_and_comment_only_files() {
    assert_eq!(format_source(FileId(0), "").unwrap(), "");
    assert_eq!(format_source(FileId(0), "\n\n  \n").unwrap(), "");
    assert_eq!(
        format_source(FileId(0), "// a\n\n\n\n// b   \n").unwrap(),
        "// a\n\n// b\n"
    );
}

#[test]
fn deep_chains_do_not_overflow() {
    let chain: Vec<String> = (0..400).map(|i| format!("x{i} == {i}")).collect();
    let src = format!("let big = {}\n", chain.join(" and "));
    check_round_trip(&src).unwrap();
    let nested = format!("let n = {}1{}\n", "(1 + ".repeat(8), ")".repeat(8));
    check_round_trip(&nested).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Property test: random expressions and rules, written with random parentheses and spacing.

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("true".to_string()),
        Just("null".to_string()),
        Just("$".to_string()),
        (0u32..1000).prop_map(|n| n.to_string()),
        (0u32..100, 1u32..100).prop_map(|(a, b)| format!("{a}.{b}")),
        Just("1_000".to_string()),
        Just("2.5e30".to_string()),
        Just("30s".to_string()),
        Just("5m".to_string()),
        prop::sample::select(vec!["a", "tool", "origin", "count", "x_1", "allow"])
            .prop_map(String::from),
        prop::collection::vec(
            prop::sample::select(vec![
                "a", "é", "\\\"", "\\\\", "\\n", "\\t", "\\u{1b}", "\\u{e9}", " ", "日本", "\\0",
            ]),
            0..4
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat())),
    ]
}

fn expr_src() -> impl Strategy<Value = String> {
    leaf().prop_recursive(5, 48, 4, |inner| {
        let binop = prop::sample::select(vec![
            "and", "or", "==", "!=", "<", ">=", "in", "not in", "has", "matches", "+", "-", "*",
            "/", "%",
        ]);
        prop_oneof![
            (inner.clone(), binop, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (inner.clone(), binop_paren(), inner.clone())
                .prop_map(|(a, op, b)| format!("({a}) {op} ({b})")),
            inner.clone().prop_map(|a| format!("not {a}")),
            inner.clone().prop_map(|a| format!("-{a}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("({a}).field")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("xs[{a}][{b}]")),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("f({})", v.join(", "))),
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| format!("{{{}}}", v.join(", "))),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| {
                let entries: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(i, e)| format!("k{i}: {e}"))
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("any v in ({a}): {b}")),
            // Quantifiers as object members and `input:` arguments (Rego inputs, docs/rego.md).
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("{{k: (any k, v in {a}: {b}), \"m n\": {c}}}")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| format!(
                "org.rule(input: {{k: {{q: (all v in {a}: {b})}}, n: null, o: {c}}})"
            )),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| format!("org.f({a}, input: [(any v in {b}: v), null])")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(all v in {a}: {b})")),
            inner
                .clone()
                .prop_map(|a| format!("count(toolCallRequest when {a}, last 3 turns)")),
            inner.prop_map(|a| format!("exists(x/y when {a}, by tool.name)")),
        ]
    })
}

fn binop_paren() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["and", "or", "==", "+", "*", "-"])
}

fn item_src() -> impl Strategy<Value = String> {
    prop_oneof![
        expr_src().prop_map(|e| format!("let c = {e}\n")),
        (expr_src(), expr_src()).prop_map(|(a, b)| format!(
            "rule r on toolCallRequest when {a} // why\n  => ask \"c\": \"q\" timeout 5m else deny\n\n// next\nlabel l when {b}\n"
        )),
        expr_src().prop_map(|e| format!(
            "test \"t\" {{\n  with x.y as {e}\n  call f(a: {e}) => deny \"c\" -> \"out\"\n}}\n"
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, max_global_rejects: 100_000, ..ProptestConfig::default() })]

    #[test]
    fn formatting_is_idempotent_and_meaning_preserving(src in item_src()) {
        // Random text is not always valid Warden (e.g. chained comparisons); skip those.
        prop_assume!(parse_clean(&src).is_ok());
        if let Err(e) = check_round_trip(&src) {
            prop_assert!(false, "{}", e);
        }
    }
}

fn warden_fmt(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut all = vec!["fmt"];
    all.extend_from_slice(args);
    common::warden(&all, stdin.as_bytes())
}

#[test]
fn fmt_dash_formats_standard_input_to_standard_output() {
    let messy = "default   allow\n";
    let (code, out, _) = warden_fmt(&["-"], messy);
    assert_eq!((code, out.as_str()), (0, "default allow\n"));
    let (code, out, _) = warden_fmt(&["--check", "-"], messy);
    assert_eq!((code, out.as_str()), (1, ""), "--check writes nothing");
    let (code, _, _) = warden_fmt(&["--check", "-"], "default allow\n");
    assert_eq!(code, 0);
    let (code, _, err) = warden_fmt(&["-"], "rule r on\n");
    assert_eq!(code, 1);
    assert!(err.contains("syntax errors"), "{err}");
}

#[test]
fn fmt_diff_shows_a_unified_diff_with_context_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("warden-fmt-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.ward");
    // Ten formatted lines, one of them spaced badly in the middle.
    let mut lines: Vec<String> = (0..4).map(|i| format!("let c{i} = {i}\n")).collect();
    lines.push("let    middle = 1\n".into());
    lines.extend((5..9).map(|i| format!("let c{i} = {i}\n")));
    lines.push("default allow\n".into());
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| if i == 9 { format!("\n{l}") } else { l.clone() })
        .collect();
    std::fs::write(&path, &text).unwrap();
    let (code, out, _) = warden_fmt(&["--diff", path.to_str().unwrap()], "");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("@@ -2,7 +2,7 @@"), "{out}");
    assert!(
        out.contains("-let    middle = 1\n+let middle = 1\n"),
        "{out}"
    );
    assert!(out.contains(" let c1 = 1\n"), "context before: {out}");
    assert!(out.contains(" let c7 = 7\n"), "context after: {out}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "--diff writes nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// Corpus: every `.ward` file in the repository and every ```ward block of the docs that parses
// must format to a fixed point with the same AST. New syntax reaches this test as soon as an
// example, a stdlib module, a semantics case or a doc shows it.

/// Every `.ward` file under the repository, but for build output and vendored code.
fn corpus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !name.starts_with('.') && !name.starts_with("target") && name != "vendor" {
                corpus_files(&path, out);
            }
        } else if name.ends_with(".ward") {
            out.push(path);
        }
    }
}

/// The ```ward and ```ward-nocheck blocks of `docs/**/*.md`, `README.md` and
/// `ARCHITECTURE.md`, each named by its file and opening line.
fn doc_blocks() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for entry in fs::read_dir(&d).expect("docs folder") {
            let p = entry.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                files.push(p);
            }
        }
    }
    let mut blocks = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap_or_default();
        let mut open: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim_start();
            match &mut open {
                None => {
                    let lang = t.strip_prefix("```").map(str::trim);
                    if matches!(lang, Some("ward" | "ward-nocheck")) {
                        open = Some((i + 1, String::new()));
                    }
                }
                Some((start, body)) => {
                    if t.starts_with("```") {
                        blocks.push((format!("{}:{start}", f.display()), std::mem::take(body)));
                        open = None;
                    } else {
                        body.push_str(line);
                        body.push('\n');
                    }
                }
            }
        }
    }
    blocks
}

#[test]
fn every_ward_file_and_doc_block_formats_to_the_same_ast() {
    let mut files = Vec::new();
    corpus_files(Path::new(env!("CARGO_MANIFEST_DIR")), &mut files);
    files.sort();
    // A file that is not UTF-8 (a diagnostics case) is skipped with those that do not parse.
    let mut cases: Vec<(String, String)> = files
        .iter()
        .filter_map(|p| Some((p.display().to_string(), fs::read_to_string(p).ok()?)))
        .collect();
    let files_found = cases.len();
    cases.extend(doc_blocks());
    assert!(
        files_found >= 100,
        "expected the whole corpus, found {files_found} files"
    );
    let (mut checked, mut failures) = (0, Vec::new());
    for (name, text) in &cases {
        // Files that are meant not to parse (tests/diagnostics) are skipped.
        if parse_clean(text).is_err() {
            continue;
        }
        checked += 1;
        if let Err(e) = check_round_trip(text) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(checked >= 100, "only {checked} cases parse");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A quantifier inside an object, a list, a set or an argument list ends at the next `,` or
/// closing bracket, so the formatter may drop the parentheses around it; whatever it prints
/// must parse back to the same tree, on one line and broken over several.
#[test]
fn quantifiers_inside_brackets_keep_their_meaning() {
    let cases = [
        (
            "let q = {a: (any v in xs: v > 1), b: 2}\n",
            "let q = {a: any v in xs: v > 1, b: 2}\n",
        ),
        (
            "let q = {a: (any v in xs: v)}.a\n",
            "let q = {a: any v in xs: v}.a\n",
        ),
        (
            "let q = {(any k, v in m: v), 1}\n",
            "let q = {any k, v in m: v, 1}\n",
        ),
        (
            "let q = [(all v in xs: v), 1]\n",
            "let q = [all v in xs: v, 1]\n",
        ),
        (
            "let q = org.r(input: {\"a b\": (all k, v in m: v), c: null})\n",
            "let q = org.r(input: {\"a b\": all k, v in m: v, c: null})\n",
        ),
        // A body that is an `and`/`or` chain keeps its own parentheses (check::quantifier_scope).
        (
            "let q = {a: (any v in xs: v has untrusted and v > 1), b: 2}\n",
            "let q = {a: any v in xs: (v has untrusted and v > 1), b: 2}\n",
        ),
        // Anything after the quantifier keeps the parentheses around it.
        (
            "let q = {a: (any v in xs: v) and ok, b: (all v in xs: v) == true}\n",
            "let q = {a: (any v in xs: v) and ok, b: (all v in xs: v) == true}\n",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(check_round_trip(input).unwrap(), expected, "{input}");
    }
    // The same, broken over lines: each member on its own line, the body kept with its member.
    let long = "pred p() = org.allow(input: {annotations: {untrusted: (any a in args: a has untrusted and a has secret), calls: count(toolCallRequest, last 2 turns), n: null}})\n";
    let out = check_round_trip(long).unwrap();
    assert!(
        out.contains("      untrusted: any a in args: (a has untrusted and a has secret),\n"),
        "{out}"
    );
}

/// `tool … as ROLE` once lost its role to the formatter (a change of meaning: the role decides
/// which rules read the argument as a destination).
#[test]
fn tool_argument_roles_are_kept() {
    let src = "tool transfer(beneficiary: string as destination, memo?: string as text)\n";
    assert_eq!(check_round_trip(src).unwrap(), src);
}
