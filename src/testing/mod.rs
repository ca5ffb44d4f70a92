//! The policy test runner behind `warden test`: it owns finding test suites (each `.ward`
//! file's own `test` blocks, and `foo_test.ward` run against `foo.ward`), turning each test's
//! steps into ACS request envelopes sent to a fresh Guardian (`scenario`), replaying fixture
//! traces, applying mocks, checking expectations, collecting rule and condition coverage, and
//! reporting in the pretty, JSON and JUnit formats ([`report`]), plus the `--watch` loop
//! (`watch`, feature `watch`). `docs/testing.md` is the user-facing description.

pub mod report;
mod scenario;
mod value;
#[cfg(feature = "watch")]
pub mod watch;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::acs::DecisionKind;
use crate::check::{self, Checked, Loaded};
use crate::compile::{DecisionTemplate, Op, Program};
use crate::diagnostics::{Code, Diagnostics, FileId, Span};
use crate::guardian::{Policy, RuleTrace};
use crate::syntax::ast::{Item, Test, UseKind};
use crate::vm::Probe;

/// One policy and the tests that run against it.
pub struct Suite {
    /// The file holding the tests, as given on the command line.
    pub display: String,
    /// The policy the tests run against (the same file, or `foo.ward` for `foo_test.ward`).
    pub policy_path: PathBuf,
    /// The policy's checked program and sources.
    pub checked: Checked,
    policy: Policy,
    test_file: FileId,
    test_dir: PathBuf,
    /// Tests in a library module (package `std.…` without a `default`) run with an implicit
    /// `default allow`.
    pub library: bool,
    rego_aliases: Vec<String>,
}

/// Why a suite could not be loaded: the policy's diagnostics (exit code 2).
pub struct LoadError {
    /// The policy (or test file) that failed to load.
    pub path: PathBuf,
    /// Why: its diagnostics.
    pub diagnostics: Diagnostics,
}

impl Suite {
    /// Loads the suite whose tests are in `test_path` (which is also the policy, unless it is
    /// `foo_test.ward` with a `foo.ward` beside it).
    pub fn load(test_path: &Path) -> Result<Suite, LoadError> {
        let err = |diagnostics| LoadError {
            path: test_path.to_path_buf(),
            diagnostics,
        };
        let policy_path = policy_for(test_path);
        let unreadable = |p: &Path, e: std::io::Error| {
            let mut d = Diagnostics::default();
            let file = d.sources.add(crate::diagnostics::SourceFile::new(
                p.display().to_string(),
                "",
            ));
            d.items.push(crate::diagnostics::Diagnostic::error(
                Code::LoadUnreadable,
                file,
                Span::default(),
                format!("cannot read {}: {e}", p.display()),
            ));
            d
        };
        for p in [policy_path.as_path(), test_path] {
            crate::diagnostics::source_within_bounds(p).map_err(|e| {
                err(unreadable(
                    p,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                ))
            })?;
        }
        let mut loaded =
            Loaded::from_path(&policy_path).map_err(|e| err(unreadable(&policy_path, e)))?;
        if policy_path != test_path {
            loaded
                .add_path(test_path)
                .map_err(|e| err(unreadable(test_path, e)))?;
        }
        Suite::from_loaded(loaded, test_path.display().to_string(), policy_path).map_err(err)
    }

    /// The suite of a policy given as text, its tests in the same text; `name` is what
    /// diagnostics and results call the file. Nothing is read from disk: `use` of other files
    /// and fixture traces do not resolve (what the WebAssembly build runs).
    pub fn from_source(name: &str, text: &str) -> Result<Suite, LoadError> {
        let mut loaded = Loaded::from_source(name, text, None);
        loaded.refuse_rego_without_folder();
        Suite::from_loaded(loaded, name.to_string(), PathBuf::from(name)).map_err(|diagnostics| {
            LoadError {
                path: PathBuf::from(name),
                diagnostics,
            }
        })
    }

    /// Checks and compiles what was loaded; `test_name` names the unit holding the tests.
    fn from_loaded(
        loaded: Loaded,
        test_name: String,
        policy_path: PathBuf,
    ) -> Result<Suite, Diagnostics> {
        let checked = check::check(loaded);
        if checked.has_errors() {
            return Err(checked.diagnostics);
        }
        let test_unit = checked
            .loaded
            .units
            .iter()
            .find(|u| u.name == test_name)
            .or_else(|| checked.loaded.units.iter().find(|u| u.is_root))
            .expect("the root unit");
        let test_file = test_unit.file;
        let test_dir = test_unit.dir.clone().unwrap_or_else(|| PathBuf::from("."));
        let root = checked
            .loaded
            .units
            .iter()
            .find(|u| u.is_root)
            .expect("the root unit");
        let library = root
            .module
            .package()
            .is_some_and(|p| p.path.first().is_some_and(|i| i.name == "std"))
            && !root
                .module
                .items
                .iter()
                .any(|i| matches!(i, Item::Default(_)));
        let rego_aliases = checked
            .loaded
            .units
            .iter()
            .flat_map(|u| u.module.items.iter())
            .filter_map(|i| match i {
                Item::Use(u)
                    if matches!(u.kind, UseKind::Rego { .. } | UseKind::RegoData { .. }) =>
                {
                    u.alias.as_ref().map(|a| a.name.clone())
                }
                _ => None,
            })
            .collect();
        let mut suite = Suite {
            display: test_name,
            policy_path,
            checked,
            policy: Policy::embedded_default(),
            test_file,
            test_dir,
            library,
            rego_aliases,
        };
        let mut program = match crate::compile::compile(&suite.checked) {
            Ok(p) => p,
            Err(items) => {
                return Err(Diagnostics {
                    sources: suite.checked.diagnostics.sources.clone(),
                    items,
                })
            }
        };
        suite.adjust(&mut program);
        suite.policy =
            Policy::from_program(program).with_sources(suite.checked.loaded.sources.clone());
        Ok(suite)
    }

    /// The suite's test blocks, in source order.
    pub fn tests(&self) -> Vec<&Test> {
        self.checked
            .loaded
            .units
            .iter()
            .filter(|u| u.file == self.test_file)
            .flat_map(|u| u.module.items.iter())
            .filter_map(|i| match i {
                Item::Test(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    /// What the test runner changes in a compiled program: a library module gets an implicit
    /// `default allow`.
    fn adjust(&self, program: &mut Program) {
        if self.library {
            program.defaults.entry(None).or_insert(DecisionTemplate {
                kind: DecisionKind::Allow,
                code: None,
                reasoning: Some("the implicit default of a library module under test".into()),
                approver: None,
                question: None,
                timeout_ms: None,
                on_timeout: None,
                expires_ms: None,
                extend: None,
                resolve: None,
                because: None,
                modifications: Vec::new(),
            });
        }
    }

    /// A `let` constant's value as JSON (for mock type checks).
    fn const_json(&self, name: &str) -> Option<serde_json::Value> {
        let consts = value::Constants::new(&self.checked);
        for unit in &self.checked.loaded.units {
            for item in &unit.module.items {
                if let Item::Let(l) = item {
                    if l.name.name == name {
                        return consts.json(&l.value).ok();
                    }
                }
            }
        }
        None
    }

    /// The rules this suite's policy file defines itself, with their comparisons: the rules
    /// coverage is reported for.
    fn own_rules(&self) -> Vec<RuleInfo> {
        let Ok(program) = crate::compile::compile(&self.checked) else {
            return Vec::new();
        };
        let roots: Vec<FileId> = self
            .checked
            .loaded
            .units
            .iter()
            .filter(|u| u.is_root)
            .map(|u| u.file)
            .collect();
        program
            .rules
            .iter()
            .filter(|r| roots.contains(&r.file))
            .map(|r| {
                let src = self.checked.loaded.sources.get(r.file);
                let mut checks = Vec::new();
                for (op, span) in r.code.ops.iter().zip(&r.code.spans) {
                    if matches!(
                        op,
                        Op::Eq
                            | Op::Ne
                            | Op::Lt
                            | Op::Le
                            | Op::Gt
                            | Op::Ge
                            | Op::In
                            | Op::NotIn
                            | Op::Matches(_)
                            | Op::Has(_)
                    ) && !checks.iter().any(|(s, _)| s == span)
                    {
                        let text = src.text.get(span.range()).unwrap_or("");
                        checks.push((*span, snippet(text)));
                    }
                }
                RuleInfo {
                    key: format!("{}.{}", r.module, r.name),
                    file: src.name.clone(),
                    line: src.line_col(r.span.start as usize).0,
                    checks,
                }
            })
            .collect()
    }
}

/// A condition's source text on one line, without comments (a span that ends an item, such as
/// a predicate's body, runs over the comments after it).
fn snippet(text: &str) -> String {
    let mut rest = text.to_string();
    for c in crate::syntax::trivia::scan(text, usize::MAX)
        .comments
        .iter()
        .rev()
    {
        rest.replace_range(c.span.range(), " ");
    }
    rest.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct RuleInfo {
    key: String,
    file: String,
    line: usize,
    checks: Vec<(Span, String)>,
}

/// `foo_test.ward` tests `foo.ward` when that exists.
fn policy_for(test_path: &Path) -> PathBuf {
    let stem = test_path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if let Some(base) = stem.strip_suffix("_test") {
        let candidate = test_path.with_file_name(format!("{base}.ward"));
        if candidate.is_file() {
            return candidate;
        }
    }
    test_path.to_path_buf()
}

/// The test files under the given paths: the files `warden check` checks
/// (`check::collect_files`: folders recursively, a `foo.ward` named directly with its
/// `foo_test.ward`), so the two commands agree on what loads.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    check::collect_files(paths)
}

// ---------------------------------------------------------------------------------------------
// Results

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TestStatus {
    /// Every step decided as expected.
    Passed,
    /// A step decided otherwise, or the test could not run.
    Failed,
    /// Not run (`--filter`, or a test marked to skip).
    Skipped,
}

/// One check in an explain trace (the same form `warden replay --explain` prints).
pub use crate::guardian::explain::Check as TraceCheck;
/// One rule in an explain trace (the same form `warden replay --explain` prints).
pub use crate::guardian::explain::Rule as TraceRule;

/// A failed step (or a test that could not run).
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The step's first source line.
    pub step: String,
    /// The file of the failing step.
    pub file: String,
    /// Its line (1-based).
    pub line: usize,
    /// Its column (1-based).
    pub column: usize,
    /// The step's hook method, when it got as far as a request.
    pub method: Option<String>,
    /// The request id the step sent.
    pub request_id: Option<String>,
    /// The decision the test expected.
    pub expected: Option<String>,
    /// The decision the policy gave.
    pub actual: Option<String>,
    /// What went wrong, in one line.
    pub message: String,
    /// The rules that fired on the step.
    pub fired: Vec<String>,
    /// The step's explain trace.
    pub trace: Vec<TraceRule>,
    /// The pretty report (a rendered diagnostic plus the explain trace).
    #[serde(skip)]
    pub rendered: String,
}

/// Per rule: whether it fired, and what each comparison evaluated to.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Each rule's hits, by its qualified name.
    pub rules: HashMap<String, RuleHits>,
}

/// One rule's coverage in a run.
#[derive(Debug, Clone, Default)]
pub struct RuleHits {
    /// Whether it fired at least once.
    pub fired: bool,
    /// Comparison span → (seen true, seen false, seen undefined).
    pub checks: HashMap<Span, (bool, bool, bool)>,
}

impl Coverage {
    fn record(&mut self, traces: &[RuleTrace]) {
        for t in traces {
            let hits = self.rules.entry(t.rule.clone()).or_default();
            hits.fired |= t.fired;
            // Coverage counts conditions: comparisons and `has` (calls and quantifiers share
            // spans with them or are not conditions of their own).
            for o in t
                .observations
                .iter()
                .filter(|o| matches!(o.probe, Probe::Compare | Probe::Has))
            {
                let e = hits.checks.entry(o.span).or_default();
                match o.result {
                    Some(true) => e.0 = true,
                    Some(false) => e.1 = true,
                    None => e.2 = true,
                }
            }
        }
    }

    fn merge(&mut self, other: &Coverage) {
        for (rule, h) in &other.rules {
            let mine = self.rules.entry(rule.clone()).or_default();
            mine.fired |= h.fired;
            for (span, (t, f, u)) in &h.checks {
                let e = mine.checks.entry(*span).or_default();
                e.0 |= t;
                e.1 |= f;
                e.2 |= u;
            }
        }
    }
}

/// One test's outcome.
#[derive(Debug, Clone)]
pub struct TestResult {
    /// The test's file.
    pub file: String,
    /// The test's name.
    pub name: String,
    /// How it ended.
    pub status: TestStatus,
    /// Decisions checked.
    pub steps: usize,
    /// The steps that failed (empty when it passed).
    pub failures: Vec<Failure>,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
    /// What its steps covered of the policy.
    pub coverage: Coverage,
}

/// A comparison's coverage.
#[derive(Debug, Clone, Serialize)]
pub struct CheckCoverage {
    /// The comparison's source text.
    pub text: String,
    /// Its line.
    pub line: usize,
    /// Whether it was ever true.
    pub seen_true: bool,
    /// Whether it was ever false.
    pub seen_false: bool,
    /// Whether it was ever undefined (a missing field).
    pub seen_undefined: bool,
}

/// A rule's coverage.
#[derive(Debug, Clone, Serialize)]
pub struct RuleCoverage {
    /// The rule's qualified name.
    pub rule: String,
    /// Its file.
    pub file: String,
    /// Its line.
    pub line: usize,
    /// Whether it fired in any test.
    pub fired: bool,
    /// Its comparisons.
    pub checks: Vec<CheckCoverage>,
}

/// Everything one `warden test` run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Each test's outcome.
    pub results: Vec<TestResult>,
    /// Files that could not be loaded, and why.
    pub load_errors: Vec<(PathBuf, String)>,
    /// Coverage per rule over the whole run (with `--coverage`).
    pub coverage: Vec<RuleCoverage>,
}

impl Report {
    /// Tests that passed.
    pub fn passed(&self) -> usize {
        self.count(TestStatus::Passed)
    }
    /// Tests that failed.
    pub fn failed(&self) -> usize {
        self.count(TestStatus::Failed)
    }
    /// Tests skipped.
    pub fn skipped(&self) -> usize {
        self.count(TestStatus::Skipped)
    }
    fn count(&self, s: TestStatus) -> usize {
        self.results.iter().filter(|r| r.status == s).count()
    }

    /// The closing line CI reads: `N passed, N failed` and `, N skipped` when some are.
    pub fn summary_line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed(), self.failed());
        if self.skipped() > 0 {
            s.push_str(&format!(", {} skipped", self.skipped()));
        }
        s
    }

    /// Percentage of rules (of the files under test) that fired in some test; 100 when there
    /// are no rules.
    pub fn coverage_percent(&self) -> f64 {
        if self.coverage.is_empty() {
            return 100.0;
        }
        let fired = self.coverage.iter().filter(|r| r.fired).count();
        fired as f64 * 100.0 / self.coverage.len() as f64
    }
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run only tests whose name or `file::name` contains this; the others are skipped.
    pub filter: Option<String>,
    /// Colour in rendered failures.
    pub color: bool,
    /// Worker threads (0: the machine's parallelism).
    pub jobs: usize,
}

/// Loads every suite under the paths and runs their tests in parallel.
pub fn run_paths(paths: &[PathBuf], opts: &RunOptions) -> Result<Report, String> {
    let files = collect(paths)?;
    if files.is_empty() {
        return Err("no .ward files found in the given paths".into());
    }
    let mut suites = Vec::new();
    let mut report = Report::default();
    for f in &files {
        match Suite::load(f) {
            Ok(s) => suites.push(s),
            Err(e) => report
                .load_errors
                .push((e.path, e.diagnostics.render(opts.color))),
        }
    }
    run_suites(&suites, opts, &mut report);
    Ok(report)
}

/// Runs the suites' tests over a work queue on `opts.jobs` threads.
pub fn run_suites(suites: &[Suite], opts: &RunOptions, report: &mut Report) {
    let mut work: Vec<(usize, &Test)> = Vec::new();
    for (i, s) in suites.iter().enumerate() {
        for t in s.tests() {
            work.push((i, t));
        }
    }
    let matches = |s: &Suite, t: &Test| match &opts.filter {
        None => true,
        Some(f) => {
            t.name.value.contains(f.as_str())
                || format!("{}::{}", s.display, t.name.value).contains(f.as_str())
        }
    };
    let run_one = |(si, test): &(usize, &Test)| {
        let suite = &suites[*si];
        if matches(suite, test) {
            crate::syntax::on_deep_stack(|| scenario::run_test(suite, test, opts.color))
        } else {
            TestResult {
                file: suite.display.clone(),
                name: test.name.value.clone(),
                status: TestStatus::Skipped,
                steps: 0,
                failures: Vec::new(),
                duration_ms: 0.0,
                coverage: Coverage::default(),
            }
        }
    };
    if cfg!(target_arch = "wasm32") {
        // WebAssembly has no threads: the tests run one after another, in order.
        report.results.extend(work.iter().map(run_one));
    } else {
        let results: Mutex<Vec<Option<TestResult>>> = Mutex::new(vec![None; work.len()]);
        let next = AtomicUsize::new(0);
        let jobs = if opts.jobs == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            opts.jobs
        }
        .min(work.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = work.get(i) else { break };
                    let r = run_one(item);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                });
            }
        });
        report.results.extend(
            results
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .into_iter()
                .flatten(),
        );
    }
    // Coverage: the rules of the files under test, fired anywhere in the run.
    let mut total = Coverage::default();
    for r in &report.results {
        total.merge(&r.coverage);
    }
    let mut rules: BTreeMap<String, RuleCoverage> = BTreeMap::new();
    for s in suites {
        for info in s.own_rules() {
            let hits = total.rules.get(&info.key);
            let entry = rules
                .entry(info.key.clone())
                .or_insert_with(|| RuleCoverage {
                    rule: info.key.clone(),
                    file: info.file.clone(),
                    line: info.line,
                    fired: false,
                    checks: Vec::new(),
                });
            entry.fired |= hits.is_some_and(|h| h.fired);
            if entry.checks.is_empty() {
                let src = s
                    .checked
                    .loaded
                    .sources
                    .iter()
                    .find(|(_, f)| f.name == info.file);
                entry.checks = info
                    .checks
                    .iter()
                    .map(|(span, text)| {
                        let seen = hits
                            .and_then(|h| h.checks.get(span))
                            .copied()
                            .unwrap_or_default();
                        CheckCoverage {
                            text: text.clone(),
                            line: src.map_or(0, |(_, f)| f.line_col(span.start as usize).0),
                            seen_true: seen.0,
                            seen_false: seen.1,
                            seen_undefined: seen.2,
                        }
                    })
                    .collect();
            }
        }
    }
    report.coverage = rules.into_values().collect();
}

// ---------------------------------------------------------------------------------------------
// The command line

/// Output format of `warden test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Readable, with diagnostics and explain traces.
    #[default]
    Pretty,
    /// One JSON document (docs/testing.md).
    Json,
    /// JUnit XML, for CI systems.
    Junit,
}

/// The arguments of `warden test`.
#[derive(Debug, Clone, Default)]
pub struct CliArgs {
    /// Files and folders to test.
    pub paths: Vec<PathBuf>,
    /// Only tests whose name contains this.
    pub filter: Option<String>,
    /// Report coverage.
    pub coverage: bool,
    /// Fail when coverage is below this percentage.
    pub coverage_min: Option<f64>,
    /// Rerun on every change.
    pub watch: bool,
    /// The output format.
    pub format: Format,
    /// Colour the pretty output.
    pub color: bool,
}

/// One run: prints the report, returns the exit code (0 all passed, 1 a test failed or
/// coverage is below the minimum, 2 a policy does not load or the paths are wrong).
pub fn run_once(args: &CliArgs) -> i32 {
    let opts = RunOptions {
        filter: args.filter.clone(),
        color: args.color && args.format == Format::Pretty,
        jobs: 0,
    };
    let report = match run_paths(&args.paths, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let below = args
        .coverage_min
        .filter(|min| report.coverage_percent() < *min);
    match args.format {
        Format::Pretty => {
            let text = report::pretty(&report, args.coverage || args.coverage_min.is_some());
            let (body, last) = text
                .trim_end()
                .rsplit_once('\n')
                .unwrap_or(("", text.trim_end()));
            if !body.is_empty() {
                println!("{body}");
            }
            if let Some(min) = below {
                println!(
                    "coverage {:.1}% is below the minimum {min}%",
                    report.coverage_percent()
                );
            }
            println!("{last}");
        }
        Format::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report::json(&report)).unwrap_or_default()
            );
            eprintln!("{}", report.summary_line());
        }
        Format::Junit => {
            print!("{}", report::junit(&report));
            eprintln!("{}", report.summary_line());
        }
    }
    if !report.load_errors.is_empty() {
        2
    } else if report.failed() > 0 || below.is_some() {
        1
    } else {
        0
    }
}

/// `warden test`, with `--watch` handled.
#[cfg(feature = "watch")]
pub fn run_cli(args: &CliArgs) -> i32 {
    if !args.watch {
        return run_once(args);
    }
    for p in &args.paths {
        if !p.exists() {
            eprintln!("error: {}: no such file or folder", p.display());
            return 2;
        }
    }
    match watch::watch(&args.paths, || {
        run_once(args);
    }) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
