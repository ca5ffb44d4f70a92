//! Code lenses on `test` blocks ("▶ run test", "debug test") and the commands they invoke.
//!
//! `warden.runTest [uri, name]` runs one test of the document and shows the outcome inline, as
//! a diagnostic on the test's name (kept until the next edit), and as a `window/showMessage`.
//! `warden.debugTest` does the same with the explain trace of every step in the message.
//! The command's result is `{ "name", "passed", "run", "message" }` for clients that want
//! it. Tests run through `warden::testing` (the runner behind `warden test`).

use lsp_types as lt;
use serde_json::json;

use super::document::Document;
use crate::syntax::ast::Item;

pub const RUN_TEST: &str = "warden.runTest";
pub const DEBUG_TEST: &str = "warden.debugTest";

/// What running one test gave.
#[derive(Debug, Clone, PartialEq)]
pub enum TestOutcome {
    Passed {
        detail: String,
    },
    Failed {
        message: String,
        detail: String,
    },
    /// The test could not be run at all (no such test, no test runner, policy errors).
    NotRun(String),
}

impl TestOutcome {
    pub fn message(&self, name: &str) -> (lt::MessageType, String) {
        match self {
            TestOutcome::Passed { detail } => (
                lt::MessageType::INFO,
                join(format!("test \"{name}\" passed"), detail),
            ),
            TestOutcome::Failed { message, detail } => (
                lt::MessageType::ERROR,
                join(format!("test \"{name}\" failed: {message}"), detail),
            ),
            TestOutcome::NotRun(why) => (
                lt::MessageType::WARNING,
                format!("test \"{name}\" was not run: {why}"),
            ),
        }
    }

    pub fn to_json(&self, name: &str) -> serde_json::Value {
        let (_, message) = self.message(name);
        json!({
            "name": name,
            "passed": matches!(self, TestOutcome::Passed { .. }),
            "run": !matches!(self, TestOutcome::NotRun(_)),
            "message": message,
        })
    }
}

fn join(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}\n{detail}")
    }
}

fn tests(doc: &Document) -> Vec<(&str, crate::diagnostics::Span)> {
    let Some(unit) = doc.analysis.checked.loaded.units.first() else {
        return Vec::new();
    };
    unit.module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Test(t) => Some((t.name.value.as_str(), t.name.span)),
            _ => None,
        })
        .collect()
}

pub fn code_lenses(doc: &Document) -> Vec<lt::CodeLens> {
    let mut out = Vec::new();
    for (name, span) in tests(doc) {
        let range = doc.range(span);
        for (title, command) in [("▶ run test", RUN_TEST), ("debug test", DEBUG_TEST)] {
            out.push(lt::CodeLens {
                range,
                command: Some(lt::Command {
                    title: title.to_string(),
                    command: command.to_string(),
                    arguments: Some(vec![json!(doc.uri.as_str()), json!(name)]),
                }),
                data: None,
            });
        }
    }
    out
}

/// The inline form of the outcomes of tests run since the last edit.
pub fn result_diagnostics(doc: &Document) -> Vec<lt::Diagnostic> {
    let mut out = Vec::new();
    for (name, span) in tests(doc) {
        let Some(outcome) = doc.test_results.get(name) else {
            continue;
        };
        let (severity, message) = match outcome {
            TestOutcome::Passed { .. } => (
                lt::DiagnosticSeverity::INFORMATION,
                "✔ test passed".to_string(),
            ),
            TestOutcome::Failed { message, .. } => (
                lt::DiagnosticSeverity::ERROR,
                format!("✘ test failed: {message}"),
            ),
            TestOutcome::NotRun(why) => (
                lt::DiagnosticSeverity::WARNING,
                format!("test not run: {why}"),
            ),
        };
        out.push(lt::Diagnostic {
            range: doc.range(span),
            severity: Some(severity),
            code: Some(lt::NumberOrString::String("warden::test".into())),
            source: Some("warden test".into()),
            message,
            ..Default::default()
        });
    }
    out
}

/// Runs the test `name` of the document's current text.
pub fn run_test(doc: &Document, name: &str, debug: bool) -> TestOutcome {
    if !tests(doc).iter().any(|(n, _)| *n == name) {
        return TestOutcome::NotRun(format!("the document has no test \"{name}\""));
    }
    if doc.analysis.checked.has_errors() {
        return TestOutcome::NotRun("the policy has errors; fix them first".into());
    }
    run_with_test_runner(doc, name, debug)
}

/// Runs the test through `warden::testing`, as `warden test --filter NAME FILE` would. The
/// runner reads the policy (and its modules, fixtures and Rego files) from disk, so a document
/// with unsaved changes is not run. `debug` adds the runner's full report of each failed step
/// (the rendered diagnostic and the explain trace of every rule) to the message.
fn run_with_test_runner(doc: &Document, name: &str, debug: bool) -> TestOutcome {
    use crate::testing::{self, RunOptions, Suite, TestStatus};
    let Some(path) = doc.path.as_ref() else {
        return TestOutcome::NotRun("only files on disk can be run".into());
    };
    match std::fs::read_to_string(path) {
        Ok(disk) if disk == doc.text() => {}
        Ok(_) => {
            return TestOutcome::NotRun(
                "the document has unsaved changes; save it to run its tests".into(),
            )
        }
        Err(e) => return TestOutcome::NotRun(format!("cannot read {}: {e}", path.display())),
    }
    let suite = match Suite::load(path) {
        Ok(s) => s,
        Err(e) => {
            return TestOutcome::NotRun(format!(
                "the policy does not load:\n{}",
                e.diagnostics.render(false)
            ))
        }
    };
    let mut report = testing::Report::default();
    let opts = RunOptions {
        filter: Some(name.to_string()),
        color: false,
        jobs: 1,
    };
    testing::run_suites(std::slice::from_ref(&suite), &opts, &mut report);
    let Some(result) = report.results.iter().find(|r| r.name == name) else {
        return TestOutcome::NotRun(format!("the runner found no test \"{name}\""));
    };
    let summary = format!("{} decision(s) checked", result.steps);
    match result.status {
        TestStatus::Passed => TestOutcome::Passed {
            detail: if debug { summary } else { String::new() },
        },
        TestStatus::Failed => {
            let first = result.failures.first();
            let message = first.map_or_else(|| "failed".to_string(), |f| f.message.clone());
            let detail = if debug {
                let mut d: Vec<String> =
                    result.failures.iter().map(|f| f.rendered.clone()).collect();
                d.push(summary);
                d.join("\n")
            } else {
                first.map_or_else(String::new, |f| format!("at line {}: {}", f.line, f.step))
            };
            TestOutcome::Failed { message, detail }
        }
        TestStatus::Skipped => TestOutcome::NotRun("the runner skipped it".into()),
    }
}
