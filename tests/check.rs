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

/// Checks a file with a stable display name, relative to the repository, with what loading it
/// would still refuse (`compile::refusals`), as `warden check` reports it.
fn check_relative(path: &Path) -> check::Checked {
    let rel = path.strip_prefix(root()).unwrap();
    std::env::set_current_dir(root()).unwrap();
    let mut checked = check::check(Loaded::from_path(rel).unwrap());
    warden::compile::check_loadable(&mut checked);
    checked
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

/// Every policy of a folder checks clean, as `warden check DIR` checks it (a `foo_test.ward`
/// together with its `foo.ward`).
fn check_tree_clean(dir: &str) {
    let files = check::collect_files(&[root().join(dir)]).unwrap();
    assert!(!files.is_empty());
    for checked in check::check_files(&files).unwrap() {
        assert!(
            checked.diagnostics.items.is_empty(),
            "{dir} is not clean:\n{}",
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
            "pred", "p", "p(", "x:", "number",
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

// ---------------------------------------------------------------------------------------------
// Issue 14: traps the checker lets through, and named predicates.

/// The error codes of checking `src` as one file.
fn error_codes(src: &str) -> Vec<&'static str> {
    let checked = check::check_source("t.ward", src);
    checked
        .diagnostics
        .items
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code.as_str())
        .collect()
}

/// An empty scratch folder of its own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warden-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Runs `warden ARGS` in `dir`: exit code, stdout, stderr.
fn warden(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `warden check --format json` in `dir`: exit code and the diagnostics' codes.
fn check_codes(args: &[&str], dir: &Path) -> (i32, Vec<String>) {
    let mut all = vec!["check", "--format", "json"];
    all.extend_from_slice(args);
    let (code, out, err) = warden(&all, dir);
    let json: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let codes = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_string())
        .collect();
    (code, codes)
}

#[test]
fn a_quantifier_body_may_not_swallow_a_trailing_or_and() {
    let trap = "use std.taint\nrule r on toolCallRequest when any a in args: a has untrusted or tool.name == \"x\" => deny \"c\"\ndefault allow\n";
    assert_eq!(error_codes(trap), vec!["check::quantifier_scope"]);
    let trap_and = "rule r on toolCallRequest when tool.name == \"x\" and all a in args: a == \"y\" and len(args) > 1 => deny \"c\"\ndefault allow\n";
    assert_eq!(error_codes(trap_and), vec!["check::quantifier_scope"]);
    for ok in [
        "rule r on toolCallRequest when (any a in args: a == \"x\") or tool.name == \"x\" => deny \"c\"\n",
        "rule r on toolCallRequest when any a in args: (a == \"x\" or tool.name == \"x\") => deny \"c\"\n",
        "rule r on toolCallRequest when (any a in args: a == \"x\" or tool.name == \"x\") => deny \"c\"\n",
        "rule r on toolCallRequest when any a in args: ( /* both */ a == \"x\" or tool.name == \"x\" ) => deny \"c\"\n",
        "rule r on toolCallRequest when tool.name == \"x\" and any a in args: a == \"y\" => deny \"c\"\n",
        // Brackets whose operands bring brackets of their own.
        "rule r on toolCallRequest when any a in args: ((a == \"x\") or tool.name == \"x\") => deny \"c\"\n",
        "rule r on toolCallRequest when any a in args: (a == \"x\" and (any b in args: b == a)) => deny \"c\"\n",
    ] {
        assert_eq!(error_codes(ok), Vec::<&str>::new(), "{ok}");
    }
    // The brackets around the operands do not enclose the whole body.
    let split = "rule r on toolCallRequest when any a in args: (a == \"x\") or (tool.name == \"x\") => deny \"c\"\n";
    assert_eq!(error_codes(split), vec!["check::quantifier_scope"]);
}

#[test]
fn names_may_not_hide_roots_fields_enum_words_or_builtins() {
    for (src, hidden) in [
        ("let tool = 3\n", "payload field `tool`"),
        ("let operation = \"read\"\n", "payload field `operation`"),
        ("let production = \"prod\"\n", "enum value `production`"),
        ("let success = true\n", "enum value `success`"),
        (
            "label tool_output when origin == system\n",
            "enum value `tool_output`",
        ),
        ("label metadata\n", "event root `metadata`"),
        ("let len = 1\n", "builtin function `len`"),
        ("pred p(args) = true\n", "event root `args`"),
        (
            "let x = any outputs in [1]: outputs > 0\n",
            "payload field `outputs`",
        ),
        ("let origin = 1\n", "provenance field `origin`"),
    ] {
        let checked = check::check_source("t.ward", src);
        let d = checked
            .diagnostics
            .items
            .iter()
            .find(|d| d.code == "check::shadows")
            .unwrap_or_else(|| panic!("no check::shadows for {src}"));
        assert!(d.message.contains(hidden), "{src}: {}", d.message);
    }
    assert_eq!(
        error_codes("let tool_names = {\"a\"}\nlet _x = tool_names\n"),
        Vec::<&str>::new()
    );
}

#[test]
fn constants_and_labels_belong_to_their_module() {
    let dir = scratch("modules");
    // lib_b's rule reads its own `limit`; main reads lib_a's: main uses lib_c, which uses
    // lib_b, and that does not bring lib_b's names into main.
    write(&dir, "lib_b.ward", "package lib_b\nlet limit = 100\nrule b_big on toolCallRequest when args.n > limit => deny \"b\"\n");
    write(&dir, "lib_c.ward", "package lib_c\nuse lib_b\n");
    write(&dir, "lib_a.ward", "package lib_a\nlet limit = 3\n");
    write(
        &dir,
        "main.ward",
        "use lib_a\nuse lib_c\nrule main_big on toolCallRequest when args.n > limit => deny \"main\"\ndefault allow\n\
         test \"each module reads its own limit\" {\n  call f(n: 5) => deny \"main\"\n  call f(n: 500) => deny \"main\" \"b\"\n}\n",
    );
    let (code, out, err) = warden(&["test", "main.ward"], &dir);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.ends_with("1 passed, 0 failed\n"), "{out}");

    // Not transitively: main does not use lib_b.
    write(
        &dir,
        "main.ward",
        "use lib_c\nlet x = b_only\ndefault allow\n",
    );
    write(
        &dir,
        "lib_b.ward",
        "package lib_b\nlet b_only = 1\nlet limit = 100\n",
    );
    let checked = check::check_path(&dir.join("main.ward")).unwrap();
    let d = checked
        .diagnostics
        .items
        .iter()
        .find(|d| d.code == "check::unknown_name")
        .expect("b_only is not visible in main");
    assert!(
        d.help.as_deref().unwrap_or("").contains("add `use lib_b`"),
        "{d:?}"
    );

    // Two used modules with one name: ambiguous bare, fine qualified.
    write(&dir, "main.ward", "use lib_a\nuse lib_b\nrule r on toolCallRequest when args.n > limit => deny \"c\"\ndefault allow\n");
    let (_, codes) = check_codes(&["main.ward"], &dir);
    assert_eq!(codes, vec!["check::ambiguous"]);
    write(&dir, "main.ward", "use lib_a\nuse lib_b\nrule r on toolCallRequest when args.n > lib_a.limit and args.m > lib_b.limit => deny \"c\"\ndefault allow\n");
    let (code, codes) = check_codes(&["main.ward"], &dir);
    assert_eq!((code, codes), (0, Vec::<String>::new()));

    // The stdlib too: a policy that reads `untrusted` must use std.taint itself.
    let transitive =
        "use std.defaults\nrule r on toolCallRequest when args.to has untrusted => deny \"c\"\n";
    assert_eq!(error_codes(transitive), vec!["check::unknown_label"]);
    let direct = "use std.defaults\nuse std.taint\nrule r on toolCallRequest when args.to has untrusted => deny \"c\"\n";
    assert_eq!(error_codes(direct), Vec::<&str>::new());
}

#[test]
fn warden_check_reports_what_loading_refuses() {
    let dir = scratch("refusals");
    let mut labels = String::new();
    for i in 0..65 {
        labels.push_str(&format!("label _l{i}\n"));
    }
    write(&dir, "labels.ward", &format!("{labels}default allow\n"));
    write(&dir, "fold.ward", "let n = len(\"abc\")\nrule r on toolCallRequest when args.a == n => deny \"c\"\ndefault allow\n");
    for (file, want) in [
        ("labels.ward", "check::too_many_labels"),
        ("fold.ward", "compile::unsupported"),
    ] {
        let (code, codes) = check_codes(&[file], &dir);
        assert_eq!((code, codes), (1, vec![want.to_string()]), "{file}");
        // And it is what compile refuses.
        let (compile_code, _, _) = warden(&["compile", file], &dir);
        assert_eq!(compile_code, 1, "{file}");
    }
}

#[test]
fn warden_check_of_a_folder_pairs_tests_and_knows_libraries() {
    let dir = scratch("folder");
    write(
        &dir,
        "helpers.ward",
        "let helper_limit = 3\nlabel helper_secret when origin == tool_output\n",
    );
    write(
        &dir,
        "mail.ward",
        "use helpers\nrule big on toolCallRequest when args.n > helper_limit or args.x has helper_secret\n  => deny \"mail.big\"\ndefault allow\n",
    );
    write(
        &dir,
        "mail_test.ward",
        "test \"big\" { call f(n: 9) => deny \"mail.big\" }\n",
    );
    let (code, out, err) = warden(&["check", "."], &dir);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.ends_with("checked 3 files: 0 error(s), 0 warning(s)\n"),
        "{out}\n{err}"
    );
    // The test file alone still runs against its policy.
    let (_, codes) = check_codes(&["mail_test.ward"], &dir);
    assert_eq!(codes, Vec::<String>::new());
    // A library is quiet; a policy's own unused constant is still reported.
    write(&dir, "mail.ward", "use helpers\nlet unused_here = 1\nrule big on toolCallRequest when args.n > helper_limit or args.x has helper_secret\n  => deny \"mail.big\"\ndefault allow\n");
    let (_, codes) = check_codes(&["."], &dir);
    assert_eq!(codes, vec!["check::unused"]);
}

#[test]
fn warden_check_of_a_policy_checks_its_test_file_as_warden_test_loads_it() {
    let dir = scratch("pair");
    write(
        &dir,
        "pay.ward",
        "rule big on toolCallRequest when args.n > 3 => deny \"pay.big\"\ndefault allow\n",
    );
    write(
        &dir,
        "pay_test.ward",
        "test \"big\" { call f(n: 9) => deny \"pay.big\" \n",
    );
    // The test file's syntax error fails `check` of the policy, as it fails `test`.
    let (code, codes) = check_codes(&["pay.ward"], &dir);
    assert_eq!(code, 1);
    assert_eq!(codes, vec!["syntax::unexpected"]);
    let (code, _, err) = warden(&["check", "pay.ward"], &dir);
    assert_eq!(code, 1);
    assert!(err.contains("pay_test.ward"), "{err}");
    assert!(
        err.ends_with("checked 2 files: 1 error(s), 0 warning(s)\n"),
        "{err}"
    );
    let (code, _, _) = warden(&["test", "pay.ward"], &dir);
    assert_ne!(code, 0);
    // Mended, both pass.
    write(
        &dir,
        "pay_test.ward",
        "test \"big\" { call f(n: 9) => deny \"pay.big\" }\n",
    );
    let (code, _, err) = warden(&["check", "pay.ward"], &dir);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.ends_with("checked 2 files: 0 error(s), 0 warning(s)\n"),
        "{err}"
    );
    let (code, out, err) = warden(&["test", "pay.ward"], &dir);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn predicates_are_checked_at_each_call() {
    let base = "use std.taint\npred endorsed(v) = v has trusted and not v has untrusted\npred failed_call() = exit_status == failure\n";
    for (rest, want) in [
        ("rule r on toolCallRequest when endorsed(args.to) => deny \"c\"\n", vec![]),
        ("rule r on toolCallResult when failed_call() => deny \"c\"\n", vec![]),
        ("rule r on toolCallRequest when failed_call() => deny \"c\"\n", vec!["check::unknown_name"]),
        ("rule r on toolCallRequest when endorsed(args.to, args.cc) => deny \"c\"\n", vec!["check::arity"]),
        // Both uses of `v` in the body are reported.
        ("rule r on toolCallRequest when endorsed(tool.name) => deny \"c\"\n", vec!["check::no_provenance"; 2]),
        ("label l when failed_call()\nrule r on toolCallRequest when args.a has l => deny \"c\"\n", vec!["check::misplaced"]),
        ("rule r on toolCallRequest when undefined_pred(args.to) => deny \"c\"\n", vec!["check::unknown_function"]),
        ("let x = endorsed(1)\n", vec!["check::misplaced"]),
    ] {
        let src = format!("{base}{rest}default allow\n");
        assert_eq!(error_codes(&src), want, "{rest}");
    }
    assert_eq!(
        error_codes(
            "pred a() = b()\npred b() = a()\nrule r on toolCallRequest when a() => deny \"c\"\n"
        ),
        vec!["check::cycle"]
    );
}

#[test]
fn predicates_are_inlined_with_their_arguments() {
    let dir = scratch("preds");
    // From another module; called with a quantifier variable; a body whose own variable has
    // the caller's name.
    write(
        &dir,
        "words.ward",
        "package words\npred mentions(x, word: string) = contains(lower(string(x)), word)\n",
    );
    write(
        &dir,
        "main.ward",
        "use words\n\
         pred beyond(limit: number) = any a in args: a > limit\n\
         rule secret on toolCallRequest when any a in args: mentions(a, \"secret\") => deny \"secret\"\n\
         rule spread on toolCallRequest when tool.name == \"spread\" and any a in [1]: beyond(a) => deny \"spread\"\n\
         default allow\n\
         test \"inlined\" {\n  call f(x: \"The SECRET plan\") => deny \"secret\"\n  call f(x: \"a plan\") => allow\n  \
         call spread(x: 5) => deny \"spread\"\n  call spread(x: 0) => allow\n}\n",
    );
    let (code, out, err) = warden(&["test", "main.ward"], &dir);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.ends_with("1 passed, 0 failed\n"), "{out}");
    // The compiled rule has no call left, and its spans stay in the rule's file.
    let policy = warden::guardian::Policy::load(dir.join("main.ward")).unwrap();
    let rule = policy
        .program()
        .rules
        .iter()
        .find(|r| &*r.name == "secret")
        .unwrap();
    let text = std::fs::read_to_string(dir.join("main.ward")).unwrap();
    for span in &rule.code.spans {
        assert!(
            (span.end as usize) <= text.len(),
            "{span:?} is not in main.ward"
        );
    }
}

/// The checker records which tools a rule is limited to (`Checked::tool_plans`); its `tool`
/// declaration checks read the literal conjuncts, and the compiler indexes the rule by them.
#[test]
fn tool_plans_limit_rules_for_the_checker_and_the_index() {
    let src = "tool send(to: string)\n\
               pred sending() = tool.name == \"send\"\n\
               rule r on toolCallRequest when tool.name == \"send\" and args.too == \"x\" => deny \"r\"\n\
               rule p on toolCallRequest when sending() and args.to == \"x\" => deny \"p\"\n\
               default allow\n";
    let checked = check::check_source("t.ward", src);
    let unknown: Vec<_> = checked
        .diagnostics
        .items
        .iter()
        .filter(|d| d.code == "check::unknown_argument")
        .collect();
    assert_eq!(unknown.len(), 1, "{}", checked.diagnostics.render(false));
    let plans: Vec<_> = checked.tool_plans.values().collect();
    assert_eq!(plans.len(), 2);
    assert!(plans
        .iter()
        .any(|p| p.conjuncts.len() == 1 && p.conjuncts[0].via_predicate));
    // Without the misspelt argument the policy compiles, both rules indexed under `send`.
    let fixed = check::check_source("t.ward", &src.replace("args.too", "args.to"));
    assert!(!fixed.has_errors(), "{}", fixed.diagnostics.render(false));
    let program = warden::compile::compile(&fixed).expect("compiles");
    let dump = warden::compile::dump(&program);
    let index = &dump[dump.find("; index").expect("an index")..];
    assert!(index.contains("send"), "{index}");
}

#[test]
fn a_ward_file_over_the_size_limit_is_refused_before_it_is_read() {
    // A sparse file one byte over the limit: costs no disk, and reading it whole would
    // cost 16 MiB and a parse.
    let dir = std::env::temp_dir().join(format!("warden-big-ward-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.ward");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(warden::diagnostics::MAX_SOURCE_BYTES + 1)
        .unwrap();
    let big = big.to_str().unwrap();
    for args in [
        vec!["check", big],
        vec!["fmt", "--check", big],
        vec!["test", big],
        vec!["serve", "--stdio", "--policy", big],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        // What it said (`warden test` reports on stdout), rendering's line breaks undone.
        let said = [out.stdout, out.stderr].concat();
        let said = String::from_utf8_lossy(&said).replace('│', " ");
        let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains("over the limit of 16777216 bytes (16 MiB) for a .ward file"),
            "{args:?}: {said}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A policy handed over as text has no folder to read Rego from: the decision paths refuse it
/// (plain loading, as an editor does, stays quiet), and the same text loads with a folder.
#[test]
fn rego_in_a_policy_given_as_text_is_refused_by_the_decision_paths_only() {
    let text = "use rego \"org.rego\" as org\nuse rego data \"d.json\" as d\ndefault allow\n";
    // Plain loading (an editor buffer, a documentation example) says nothing.
    assert!(Loaded::from_source("p.ward", text, None)
        .diagnostics
        .iter()
        .all(|d| !d.is_error()));
    let Err(err) = warden::guardian::Policy::from_source("p.ward", text) else {
        panic!("a policy given as text loaded Rego");
    };
    let found: Vec<_> = err
        .items
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.code.as_str(), d.message.clone()))
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].0, warden::diagnostics::Code::MissingRego);
    assert!(
        found[0].1.contains("`org.rego`") && found[0].1.contains("no folder"),
        "{}",
        found[0].1
    );
    assert!(warden::testing::Suite::from_source("p.ward", text).is_err());
    // With a folder, the same text loads its Rego from there.
    let dir = std::env::temp_dir().join(format!("warden-text-rego-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("org.rego"), "package org\nx := 1\n").unwrap();
    std::fs::write(dir.join("d.json"), "{}").unwrap();
    let ok = warden::guardian::Policy::from_source_in("p.ward", text, dir.clone());
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(d) = ok {
        panic!("{}", d.render(false));
    }
}
