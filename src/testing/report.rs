//! Reporting a test run: the pretty report (failures as rendered diagnostics with the explain
//! trace, then the summary line), the JSON document (`docs/testing.md` describes it field by
//! field) and JUnit XML.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::{Report, TestStatus};

/// The pretty report. Passing tests are one line each; failing tests show every failed step.
pub fn pretty(report: &Report, coverage: bool) -> String {
    let mut out = String::new();
    for (path, rendered) in &report.load_errors {
        let _ = writeln!(
            out,
            "error: {} does not load; its tests were not run",
            path.display()
        );
        out.push_str(rendered);
    }
    for r in &report.results {
        match r.status {
            TestStatus::Passed => {
                let _ = writeln!(out, "ok      {} :: {}", r.file, r.name);
            }
            TestStatus::Skipped => {
                let _ = writeln!(out, "skipped {} :: {}", r.file, r.name);
            }
            TestStatus::Failed => {
                let _ = writeln!(out, "FAILED  {} :: {}", r.file, r.name);
                for f in &r.failures {
                    out.push_str(&f.rendered);
                    out.push('\n');
                }
            }
        }
    }
    if coverage {
        out.push_str(&coverage_text(report));
    }
    out.push_str(&report.summary_line());
    out.push('\n');
    out
}

/// The coverage section: per rule whether it fired, per comparison which results were seen.
pub fn coverage_text(report: &Report) -> String {
    let mut out = String::from("\ncoverage (rules of the files under test):\n");
    for r in &report.coverage {
        let _ = writeln!(
            out,
            "  {} {}  ({}:{})",
            if r.fired {
                "fired      "
            } else {
                "NEVER FIRED"
            },
            r.rule,
            r.file,
            r.line
        );
        for c in &r.checks {
            let seen = match (c.seen_true, c.seen_false) {
                (true, true) => "true and false",
                (true, false) => "only true",
                (false, true) => "only false",
                (false, false) if c.seen_undefined => "only undefined",
                (false, false) => "never evaluated",
            };
            let _ = writeln!(out, "      {:<16} {}", seen, c.text);
        }
    }
    let fired = report.coverage.iter().filter(|r| r.fired).count();
    let both = report
        .coverage
        .iter()
        .flat_map(|r| &r.checks)
        .filter(|c| c.seen_true && c.seen_false)
        .count();
    let checks: usize = report.coverage.iter().map(|r| r.checks.len()).sum();
    let _ = writeln!(
        out,
        "coverage: {fired}/{} rules fired ({:.1}%), {both}/{checks} conditions seen both true and false\n",
        report.coverage.len(),
        report.coverage_percent()
    );
    out
}

/// The JSON document.
pub fn json(report: &Report) -> Value {
    let tests: Vec<Value> = report
        .results
        .iter()
        .map(|r| {
            json!({
                "file": r.file,
                "name": r.name,
                "status": r.status,
                "steps": r.steps,
                "duration_ms": (r.duration_ms * 1000.0).round() / 1000.0,
                "failures": r.failures,
            })
        })
        .collect();
    let load_errors: Vec<Value> = report
        .load_errors
        .iter()
        .map(|(p, text)| json!({"file": p.display().to_string(), "diagnostics": text}))
        .collect();
    let fired = report.coverage.iter().filter(|r| r.fired).count();
    json!({
        "version": 1,
        "summary": {
            "passed": report.passed(),
            "failed": report.failed(),
            "skipped": report.skipped(),
            "load_errors": report.load_errors.len(),
            "line": report.summary_line(),
        },
        "tests": tests,
        "load_errors": load_errors,
        "coverage": {
            "rules_total": report.coverage.len(),
            "rules_fired": fired,
            "percent": (report.coverage_percent() * 10.0).round() / 10.0,
            "rules": report.coverage,
        },
    })
}

/// Escapes text for XML content and attribute values.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {}
            c => out.push(c),
        }
    }
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// JUnit XML: one `<testsuite>` per test file, one `<testcase>` per test, a `<failure>` per
/// failing test (its message the first failure, its text every failure's report).
pub fn junit(report: &Report) -> String {
    let mut files: Vec<&str> = Vec::new();
    for r in &report.results {
        if !files.contains(&r.file.as_str()) {
            files.push(&r.file);
        }
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total_time: f64 = report.results.iter().map(|r| r.duration_ms).sum::<f64>() / 1000.0;
    let _ = writeln!(
        out,
        "<testsuites name=\"warden test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
        report.results.len(),
        report.failed(),
        report.load_errors.len(),
        report.skipped(),
        total_time
    );
    for (path, text) in &report.load_errors {
        let name = xml_escape(&path.display().to_string());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{name}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n    <testcase name=\"load\" classname=\"{name}\">\n      <error message=\"the policy does not load\">{}</error>\n    </testcase>\n  </testsuite>",
            xml_escape(&strip_ansi(text))
        );
    }
    for file in files {
        let cases: Vec<_> = report.results.iter().filter(|r| r.file == file).collect();
        let failures = cases
            .iter()
            .filter(|r| r.status == TestStatus::Failed)
            .count();
        let skipped = cases
            .iter()
            .filter(|r| r.status == TestStatus::Skipped)
            .count();
        let time: f64 = cases.iter().map(|r| r.duration_ms).sum::<f64>() / 1000.0;
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\">",
            xml_escape(file),
            cases.len()
        );
        for r in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
                xml_escape(&r.name),
                xml_escape(file),
                r.duration_ms / 1000.0
            );
            match r.status {
                TestStatus::Passed => out.push_str("/>\n"),
                TestStatus::Skipped => out.push_str(">\n      <skipped/>\n    </testcase>\n"),
                TestStatus::Failed => {
                    let first = r.failures.first();
                    let message = first.map_or(String::new(), |f| match (&f.expected, &f.actual) {
                        (Some(e), Some(a)) => {
                            format!("line {}: `{}`: expected {e}, got {a}", f.line, f.step)
                        }
                        _ => format!("line {}: `{}`: {}", f.line, f.step, f.message),
                    });
                    let text: String = r.failures.iter().map(|f| strip_ansi(&f.rendered)).collect();
                    let _ = write!(
                        out,
                        ">\n      <failure message=\"{}\" type=\"warden.test\">{}</failure>\n    </testcase>\n",
                        xml_escape(&message),
                        xml_escape(&text)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
