//! The keyword lists outside the parser follow the grammar: the language server's
//! (`src/lsp/keywords.rs`) and each editor grammar's hold exactly the keyword-like string
//! literals of `grammar/warden.pest` (its item, decision, expression and test-step rules).
//! A keyword added to the grammar fails here until every list has it; a word dropped from the
//! grammar fails here until every list drops it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use regex::Regex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Grammar rules whose literals are parts of a token, not keywords: the suffixes of a
/// duration (`ms`, `s`, `m`, `h`, `d`) and a number's exponent (`e`).
const LEXICAL_RULES: &[&str] = &["number", "duration"];

/// Every lower-case word written as a string literal in a rule of `grammar/warden.pest`.
fn grammar_keywords() -> BTreeSet<String> {
    let text: String = read("grammar/warden.pest")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let rule = Regex::new(r"(?m)^(\w+)\s*=\s*[_@$!]?\{").unwrap();
    let literal = Regex::new(r#""([a-z][a-z_]*)""#).unwrap();
    let starts: Vec<(usize, &str)> = rule
        .captures_iter(&text)
        .map(|c| (c.get(0).unwrap().start(), c.get(1).unwrap().as_str()))
        .collect();
    let mut words = BTreeSet::new();
    for (i, (start, name)) in starts.iter().enumerate() {
        if LEXICAL_RULES.contains(name) {
            continue;
        }
        let end = starts.get(i + 1).map_or(text.len(), |s| s.0);
        for c in literal.captures_iter(&text[*start..end]) {
            words.insert(c[1].to_string());
        }
    }
    assert!(
        ["rule", "tool", "as", "approve", "this_request"]
            .iter()
            .all(|w| words.contains(*w)),
        "the grammar's keywords were not found: {words:?}"
    );
    words
}

/// The lower-case words a regular expression spells out (escapes and character classes
/// removed): `\b(allow|deny)\b` gives `allow` and `deny`.
fn words_of_pattern(pattern: &str, escape: &Regex) -> Vec<String> {
    let class = Regex::new(r"\[[^\]]*\]").unwrap();
    let word = Regex::new(r"[a-z][a-z_]*").unwrap();
    let p = escape.replace_all(pattern, " ");
    let p = class.replace_all(&p, " ");
    word.find_iter(&p).map(|m| m.as_str().to_string()).collect()
}

fn assert_same(list: &str, grammar: &BTreeSet<String>, found: &BTreeSet<String>) {
    let missing: Vec<&String> = grammar.difference(found).collect();
    let extra: Vec<&String> = found.difference(grammar).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{list} disagrees with grammar/warden.pest:\n  keywords it lacks: {missing:?}\n  words it has that the grammar does not: {extra:?}"
    );
}

#[cfg(feature = "lsp")]
#[test]
fn the_language_servers_keywords_are_the_grammars() {
    let found: BTreeSet<String> = warden::lsp::keywords::all().map(str::to_string).collect();
    assert_same("src/lsp/keywords.rs", &grammar_keywords(), &found);
}

/// `editors/vscode/syntaxes/ward.tmLanguage.json`: the words of every pattern, except the
/// entries that match no keywords (builtin names, numbers, names, members, …).
#[test]
fn the_vscode_grammars_keywords_are_the_grammars() {
    const NOT_KEYWORDS: &[&str] = &[
        "comments",
        "strings",
        "numbers",
        "builtins",
        "operators",
        "members",
        "names",
    ];
    fn walk(v: &serde_json::Value, escape: &Regex, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("match" | "begin" | "end", serde_json::Value::String(p)) => {
                            out.extend(words_of_pattern(p, escape))
                        }
                        _ => walk(x, escape, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, escape, out)),
            _ => {}
        }
    }
    let path = "editors/vscode/syntaxes/ward.tmLanguage.json";
    let grammar: serde_json::Value = serde_json::from_str(&read(path)).unwrap();
    let escape = Regex::new(r"\\.").unwrap();
    let mut found = BTreeSet::new();
    for (name, entry) in grammar["repository"].as_object().unwrap() {
        if !NOT_KEYWORDS.contains(&name.as_str()) {
            walk(entry, &escape, &mut found);
        }
    }
    assert_same(path, &grammar_keywords(), &found);
}

/// `editors/nvim/syntax/ward.vim`: the words of its `syn keyword` and `syn match` lines, except
/// the groups that are no keywords (numbers, strings, comments, hooks, function calls).
#[test]
fn the_neovim_syntaxs_keywords_are_the_grammars() {
    const NOT_KEYWORDS: &[&str] = &[
        "wardNumber",
        "wardString",
        "wardComment",
        "wardHook",
        "wardFunction",
    ];
    let path = "editors/nvim/syntax/ward.vim";
    // Vim's `\zs`, `\ze`, `\@<=` and one-character escapes (`\<`, `\s`, `\(`, `\|`, …).
    let escape = Regex::new(r"\\(z[se]|@<=|@<!|@=|@!|.)").unwrap();
    let mut found = BTreeSet::new();
    for line in read(path).lines() {
        let mut parts = line.splitn(4, ' ');
        let (Some("syn"), Some(kind), Some(group)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rest = parts.next().unwrap_or("");
        if NOT_KEYWORDS.contains(&group) {
            continue;
        }
        match kind {
            "keyword" => found.extend(rest.split_whitespace().map(str::to_string)),
            "match" => {
                let pattern = rest.trim().trim_matches('\'');
                found.extend(words_of_pattern(pattern, &escape));
            }
            _ => {}
        }
    }
    assert_same(path, &grammar_keywords(), &found);
}

/// Helix has no Warden grammar: `editors/helix/` configures the language server, whose
/// semantic tokens (the list checked above) are its highlighting. A highlight query added
/// there needs a check here.
#[test]
fn helix_highlights_through_the_language_server() {
    let files: Vec<String> = std::fs::read_dir(root().join("editors/helix"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        ["languages.toml"],
        "editors/helix/ has a keyword list to check"
    );
    assert!(read("editors/helix/languages.toml").contains("language-servers = [\"warden\"]"));
}

/// The VS Code grammar highlights exactly the builtin functions of the registry
/// (`check::builtins`; `intent.permits` is a member call, highlighted as a name).
#[test]
fn the_vscode_grammars_builtins_are_the_registrys() {
    let grammar: serde_json::Value =
        serde_json::from_str(&read("editors/vscode/syntaxes/ward.tmLanguage.json")).unwrap();
    let pattern = grammar["repository"]["builtins"]["match"]
        .as_str()
        .expect("a builtins pattern");
    let inner = pattern
        .split_once("\\b(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(words, _)| words)
        .expect("a \\b(…) alternation");
    let highlighted: BTreeSet<String> = inner.split('|').map(str::to_string).collect();
    let registry: BTreeSet<String> = warden::check::BUILTINS
        .iter()
        .map(|b| b.name.to_string())
        .filter(|n| !n.contains('.'))
        .collect();
    assert_eq!(
        highlighted, registry,
        "editors/vscode/syntaxes/ward.tmLanguage.json's builtins differ from check::builtins"
    );
}

/// The five decision words are the ACS decision type's: the grammar and the language server
/// spell each one `acs::DecisionKind` names, and no other.
#[test]
fn the_decision_words_are_the_decision_types() {
    let grammar = grammar_keywords();
    let lsp: BTreeSet<String> = warden::lsp::keywords::all().map(str::to_string).collect();
    for d in warden::acs::DecisionKind::ALL {
        assert!(
            grammar.contains(d.as_str()),
            "the grammar lacks {}",
            d.as_str()
        );
        assert!(
            lsp.contains(d.as_str()),
            "the language server lacks {}",
            d.as_str()
        );
    }
}
