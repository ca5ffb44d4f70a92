//! The Rego bridge: `use rego "…" as org` and `use rego data "…" as d`. Rego modules are
//! loaded once per policy load into one regorus engine. Rules of a package that never reads
//! `input` are evaluated when the policy compiles and inlined as constants; the others (and
//! Rego functions) are called at decision time with the event as `input`, each call bounded by
//! a time limit, and an error is a decision failure.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::diagnostics::{read_import, MAX_IMPORT_BYTES};

mod scan;
pub use scan::{hoist_imports, Missing};

/// Longest a single Rego evaluation may run.
pub const CALL_LIMIT: Duration = Duration::from_millis(50);

/// What one `use rego` brought in.
#[derive(Debug, Clone, PartialEq)]
pub struct RegoImport {
    /// The alias in the Warden file.
    pub alias: String,
    /// `use rego data`: a data document, reached as `data.…`.
    pub is_data: bool,
    /// Files and their text (`.rego` modules, or the one data file).
    pub files: Vec<(PathBuf, String)>,
    /// The Rego package (`data.org.rules`), for modules.
    pub package: Option<String>,
    /// Rule names the package defines (from a scan of the rule heads).
    pub rules: Vec<String>,
    /// Whether any of the package's text mentions `input` (then nothing is folded).
    pub reads_input: bool,
    /// Per file, the text regorus is given: late `import`s moved up and references through
    /// `data` import aliases spelled out (same lines as the file).
    pub prepared: Vec<String>,
    /// Calls to functions that are neither builtins of this build nor defined by the package.
    pub missing: Vec<Missing>,
    /// Multi-value rules keyed by a variable, which are `{}` (not undefined) with no values.
    pub multi_value: Vec<String>,
}

impl RegoImport {
    /// The `data.` path of a rule (or of a member of a data document).
    pub fn path_of(&self, rule: &str) -> String {
        match &self.package {
            Some(pkg) => format!("{pkg}.{rule}"),
            None => format!("data.{rule}"),
        }
    }

    /// The file that defines a rule, for diagnostics.
    pub fn file_of(&self, rule: &str) -> Option<&Path> {
        self.files
            .iter()
            .find(|(_, text)| rule_heads(text).iter().any(|r| r == rule))
            .map(|(p, _)| p.as_path())
    }
}

/// One imported file as text: a regular file within [`MAX_IMPORT_BYTES`], in UTF-8.
fn read_text(path: &Path) -> Result<String, String> {
    let bytes = read_import(path, MAX_IMPORT_BYTES)?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not valid UTF-8", path.display()))
}

/// Loads a `use rego` path: a `.rego` file, a folder of them, or (for data) a JSON file.
pub fn load_import(alias: &str, path: &Path, is_data: bool) -> Result<RegoImport, String> {
    let mut files = Vec::new();
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rego"))
            .collect();
        entries.sort();
        for p in entries {
            let text = read_text(&p)?;
            files.push((p, text));
        }
        if files.is_empty() {
            return Err(format!("{} holds no .rego files", path.display()));
        }
    } else {
        let text = read_text(path)?;
        files.push((path.to_path_buf(), text));
    }
    if is_data {
        let (p, text) = &files[0];
        let v: Value = serde_json::from_str(text).map_err(|e| format!("{}: {e}", p.display()))?;
        let rules = v
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        return Ok(RegoImport {
            alias: alias.to_string(),
            is_data: true,
            files,
            package: None,
            rules,
            reads_input: false,
            prepared: Vec::new(),
            missing: Vec::new(),
            multi_value: Vec::new(),
        });
    }
    let mut packages: Vec<String> = files.iter().filter_map(|(_, t)| package_of(t)).collect();
    packages.sort();
    packages.dedup();
    let package = match packages.as_slice() {
        [one] => one.clone(),
        [] => return Err("no `package` line found".into()),
        many => {
            return Err(format!(
                "the files declare several packages ({}); import each with its own alias",
                many.join(", ")
            ))
        }
    };
    let mut rules: Vec<String> = files.iter().flat_map(|(_, t)| rule_heads(t)).collect();
    rules.sort();
    rules.dedup();
    let reads_input = files.iter().any(|(_, t)| mentions_input(t));
    // Parse now, so a syntax error in the Rego is reported at load; then read the parsed
    // modules for calls this build cannot run and for references through import aliases.
    let hoisted: Vec<String> = files.iter().map(|(_, t)| hoist_imports(t)).collect();
    let mut engine = regorus::Engine::new();
    for ((p, _), text) in files.iter().zip(&hoisted) {
        engine
            .add_policy(p.display().to_string(), text.clone())
            .map_err(|e| e.to_string())?;
    }
    let modules: Vec<&regorus::unstable::Module> =
        engine.get_modules().iter().map(|m| &**m).collect();
    let texts: Vec<&str> = hoisted.iter().map(String::as_str).collect();
    let origins: Vec<&str> = files.iter().map(|(_, t)| t.as_str()).collect();
    let found = scan::scan(&modules, &texts, &origins);
    // The rewritten text must parse as the hoisted one did; if it does not (a bug here), the
    // hoisted text is used as it is.
    let mut check = regorus::Engine::new();
    let prepared = if files
        .iter()
        .zip(&found.rewritten)
        .all(|((p, _), t)| check.add_policy(p.display().to_string(), t.clone()).is_ok())
    {
        found.rewritten
    } else {
        hoisted
    };
    // What OPA evaluates before a `not` moves out of it (`scan::hoist_negated_calls`, over the
    // prepared text parsed again); if the result does not parse (a bug here), the text stays.
    let mut parsed = regorus::Engine::new();
    let prepared = if files.iter().zip(&prepared).all(|((p, _), t)| {
        parsed
            .add_policy(p.display().to_string(), t.clone())
            .is_ok()
    }) {
        let out: Vec<String> = parsed
            .get_modules()
            .iter()
            .zip(&prepared)
            .map(|(m, t)| scan::hoist_negated_calls(m, t))
            .collect();
        let mut check = regorus::Engine::new();
        if files
            .iter()
            .zip(&out)
            .all(|((p, _), t)| check.add_policy(p.display().to_string(), t.clone()).is_ok())
        {
            out
        } else {
            prepared
        }
    } else {
        prepared
    };
    Ok(RegoImport {
        alias: alias.to_string(),
        is_data: false,
        files,
        package: Some(format!("data.{package}")),
        rules,
        reads_input,
        prepared,
        missing: found.missing,
        multi_value: found.multi_value,
    })
}

/// Code with comments and strings blanked out (so scans do not see `input` in a comment).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_str: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match in_str {
            Some(q) => {
                if c == '\\' && q == '"' {
                    chars.next();
                } else if c == q {
                    in_str = None;
                }
                out.push(if c == '\n' { '\n' } else { ' ' });
            }
            None => match c {
                '#' => {
                    for d in chars.by_ref() {
                        if d == '\n' {
                            out.push('\n');
                            break;
                        }
                    }
                }
                '"' | '`' => {
                    in_str = Some(c);
                    out.push(' ');
                }
                _ => out.push(c),
            },
        }
    }
    out
}

fn package_of(text: &str) -> Option<String> {
    code_only(text).lines().find_map(|l| {
        l.trim()
            .strip_prefix("package ")
            .map(|p| p.trim().to_string())
    })
}

/// Names of the rules a module defines: identifiers at the start of a line that begin a rule
/// head (`name :=`, `name =`, `name if`, `name contains`, `name[`, `name(`, `name {`).
pub fn rule_heads(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code_only(text).lines() {
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || matches!(name.as_str(), "package" | "import" | "default" | "else") {
            // `default name := …` defines `name`.
            if name == "default" {
                let rest = line["default".len()..].trim_start();
                let n: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !n.is_empty() {
                    out.push(n);
                }
            }
            continue;
        }
        let rest = line[name.len()..].trim_start();
        let starts_head = [":=", "=", "if", "contains", "[", "(", "{"]
            .iter()
            .any(|t| rest.starts_with(t));
        if starts_head || rest.is_empty() {
            out.push(name);
        }
    }
    out
}

fn mentions_input(text: &str) -> bool {
    let code = code_only(text);
    let bytes = code.as_bytes();
    code.match_indices("input").any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + 5).copied();
        let ident = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        !ident(before) && !ident(after)
    })
}

/// The loaded Rego of one policy: one engine, shared by every decision.
pub struct Bridge {
    engine: Mutex<regorus::Engine>,
    /// `data.` paths of multi-value rules keyed by a variable: with no values, `{}` as in OPA
    /// (regorus leaves them undefined).
    multi_value: std::collections::HashSet<String>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bridge")
    }
}

impl PartialEq for Bridge {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

fn to_rego(v: &Value) -> Result<regorus::Value, String> {
    regorus::Value::from_json_str(&v.to_string()).map_err(|e| e.to_string())
}

fn from_rego(v: &regorus::Value) -> Result<Option<Value>, String> {
    if *v == regorus::Value::Undefined {
        return Ok(None);
    }
    let text = v.to_json_str().map_err(|e| e.to_string())?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| e.to_string())
}

impl Bridge {
    pub fn new(imports: &[RegoImport]) -> Result<Bridge, String> {
        let mut engine = regorus::Engine::new();
        for imp in imports {
            for (i, (p, text)) in imp.files.iter().enumerate() {
                let text = imp.prepared.get(i).unwrap_or(text);
                if imp.is_data {
                    let v: Value =
                        serde_json::from_str(text).map_err(|e| format!("{}: {e}", p.display()))?;
                    engine.add_data(to_rego(&v)?).map_err(|e| e.to_string())?;
                } else {
                    engine
                        .add_policy(p.display().to_string(), text.clone())
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
            limit: CALL_LIMIT,
            check_interval: std::num::NonZeroU32::new(64).expect("non-zero"),
        });
        let multi_value = imports
            .iter()
            .flat_map(|imp| imp.multi_value.iter().map(|r| imp.path_of(r)))
            .collect();
        Ok(Bridge {
            engine: Mutex::new(engine),
            multi_value,
        })
    }

    /// Evaluates a rule (`data.pkg.rule`) with the given input (`None`: no input).
    pub fn eval(&self, path: &str, input: Option<&Value>) -> Result<Option<Value>, String> {
        let mut engine = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        match input {
            Some(i) => engine.set_input(to_rego(i)?),
            None => engine.set_input(regorus::Value::new_object()),
        }
        match engine.eval_rule(path.to_string()) {
            Ok(v) if v == regorus::Value::Undefined && self.multi_value.contains(path) => {
                Ok(Some(Value::Object(serde_json::Map::new())))
            }
            Ok(v) => from_rego(&v),
            // Not a rule: a path into a data document.
            Err(e) if e.to_string().contains("not a valid rule path") => {
                let results = engine
                    .eval_query(path.to_string(), false)
                    .map_err(|e| e.to_string())?;
                match results.result.first().and_then(|r| r.expressions.first()) {
                    Some(x) => from_rego(&x.value),
                    None => Ok(None),
                }
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Calls a Rego function (`data.pkg.f(args…)`).
    pub fn call(&self, path: &str, args: &[Value], input: &Value) -> Result<Option<Value>, String> {
        let mut engine = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        engine.set_input(to_rego(input)?);
        let rendered: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let query = format!("{path}({})", rendered.join(", "));
        let results = engine.eval_query(query, false).map_err(|e| e.to_string())?;
        match results.result.first().and_then(|r| r.expressions.first()) {
            Some(e) => from_rego(&e.value),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_rule_heads_and_input() {
        let text = r#"package org.rules
import rego.v1
# input is mentioned only in this comment
default allow := false
trusted_sources := {"vault"}
allowed_domain(d) if endswith(d, ".example.com")
deny contains msg if {
    msg := "x"
}
"#;
        assert_eq!(package_of(text).as_deref(), Some("org.rules"));
        assert_eq!(
            rule_heads(text),
            vec!["allow", "trusted_sources", "allowed_domain", "deny"]
        );
        assert!(!mentions_input(text));
        assert!(mentions_input("package a\nx if input.y\n"));
        assert!(!mentions_input(
            "package a\nx := \"input\"\nmy_input := 1\n"
        ));
    }

    fn load_text(name: &str, text: &str) -> Result<RegoImport, String> {
        let dir = std::env::temp_dir().join(format!("warden-rego-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = load_import("x", &path, false);
        let _ = std::fs::remove_file(&path);
        out
    }

    #[test]
    fn alias_references_are_spelled_out_but_calls_and_bound_names_are_not() {
        let text = "package p\nimport rego.v1\nimport data.q as n\nimport data.r.s\n\
            x := n.a\ny := s[\"b\"].c\nz := n.g(1)\nf(n) := n.b\nw := n\n";
        let imp = load_text("alias.rego", text).unwrap();
        assert!(imp.missing.is_empty(), "{:?}", imp.missing);
        assert_eq!(
            imp.prepared[0],
            "package p\nimport rego.v1\nimport data.q as n\nimport data.r.s\n\
             x := data.q.a\ny := data.r.s[\"b\"].c\nz := n.g(1)\nf(n) := n.b\nw := n\n"
        );
    }

    #[test]
    fn what_opa_evaluates_before_a_negation_moves_out_of_it() {
        let text = "package p\nimport rego.v1\nf(x) if x == 1\n\
            a if not f(input.x)\n\
            b if {\n\tnot startswith(lower(input.s), \"a\")\n}\n\
            c if not input.u == \"x\"\n\
            d := [k | some k in input.ks; not input.m[k]]\n\
            e if not count(input.xs) > 0 with input.xs as [1]\n";
        let imp = load_text("negation.rego", text).unwrap();
        assert_eq!(
            imp.prepared[0],
            "package p\nimport rego.v1\nf(x) if x == 1\n\
             a if { __warden_not_0 := input.x; not f(__warden_not_0) }\n\
             b if {\n\t__warden_not_1 := lower(input.s); not startswith(__warden_not_1, \"a\")\n}\n\
             c if not input.u == \"x\"\n\
             d := [k | some k in input.ks; not input.m[k]]\n\
             e if { __warden_not_2 := count(input.xs) with input.xs as [1]; \
             not __warden_not_2 > 0 with input.xs as [1] }\n"
        );
        assert_eq!(imp.prepared[0].lines().count(), text.lines().count());
    }

    #[test]
    fn a_long_reference_chain_is_scanned_without_recursion() {
        let chain = ".a".repeat(20_000);
        let text = format!("package p\nx := input{chain}\ny := nope(input{chain})\n");
        // regorus may refuse the file (a limit); either way, no crash.
        if let Ok(imp) = load_text("chain.rego", &text) {
            assert_eq!(imp.missing.len(), 1, "{:?}", imp.missing);
            assert_eq!(imp.missing[0].name, "nope");
        }
    }
}
