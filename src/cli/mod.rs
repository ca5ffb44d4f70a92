//! The `warden` command line: argument parsing and the subcommands, each a thin layer over the
//! library (`check`, `fmt`, …). Exit codes: 0 success, 1 the input has problems, 2 usage or I/O.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::check::{self, collect_files};
use crate::diagnostics::{Diagnostic, Diagnostics, JsonDiagnostic, SourceFile, SourceMap};
use crate::guardian::Policy;

mod diff;
mod efficacy;
mod eval;
mod explain_text;
mod mcp_proxy;
mod playground;
mod replay;
mod serve;

use replay::{DecisionWord, ReplayFormat, Shown};

#[derive(Parser, Debug)]
#[command(
    name = "warden",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("WARDEN_COMMIT"), ")"),
    about = "Policies for Agent Control Standard Guardians: check, format, test and run them"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check policies for errors (files or folders of .ward files)
    Check {
        /// Files or folders; each .ward file is checked as its own policy (a foo_test.ward
        /// together with its foo.ward; naming foo.ward brings its foo_test.ward along)
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format
        #[arg(long, value_enum, default_value_t = Format::Pretty)]
        format: Format,
    },
    /// Replay a trace of ACS request envelopes (one JSON-RPC request per line) and print one
    /// response per line
    Replay {
        /// The trace, or `-` for standard input
        trace: PathBuf,
        /// The policy (default: the embedded default policy)
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Attach the explain trace (rules run, checks and their values) to each result
        #[arg(long)]
        explain: bool,
        /// Answer decision failures with a JSON-RPC error instead of a deny
        #[arg(long)]
        fail_with_error: bool,
        /// `json`: one response per line; `text`: one short paragraph per decided request
        /// (the decision, the rules that fired with file:line, the deciding checks, the
        /// labels; implies --explain)
        #[arg(long, value_enum, default_value_t = ReplayFormat::Json)]
        format: ReplayFormat,
        /// Print only the answers with these decisions (comma-separated: allow, deny, ask,
        /// defer, modify)
        #[arg(long, value_delimiter = ',', value_name = "DECISIONS")]
        only: Vec<DecisionWord>,
    },
    /// Compile a policy and print its bytecode
    Compile {
        /// The policy file
        path: PathBuf,
        /// Print the compiled program
        #[arg(long)]
        dump: bool,
    },
    /// Run the policies' tests (`test` blocks, `*_test.ward` files, fixture traces)
    Test(TestArgs),
    /// Run the Guardian: ACS JSON-RPC over stdio or HTTP (see docs/serve.md)
    Serve(serve::ServeArgs),
    /// Audit-chain tools
    Audit {
        #[command(subcommand)]
        command: serve::AuditCommand,
    },
    /// Effect tools: list effect keys, resolve an ambiguous one (docs/effects.md)
    Effects {
        #[command(subcommand)]
        command: serve::EffectsCommand,
    },
    /// Grant an ask: the next call of exactly that action may proceed, once (docs/effects.md)
    Approve(serve::ApproveArgs),
    /// List every ask awaiting approval, granted or expired (docs/effects.md)
    Approvals(serve::ApprovalsArgs),
    /// Feed an agent platform's hook envelope (stdin) to a Guardian
    Hook(serve::HookArgs),
    /// Stand between an MCP client (stdin/stdout) and an MCP server (a child process):
    /// decide each request and result with the policy (docs/mcp.md)
    McpProxy(mcp_proxy::McpProxyArgs),
    /// Format policies canonically (in place, or report with --check)
    Fmt {
        /// Files or folders, or `-`: standard input, formatted to standard output
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Do not write; list the files that would change and exit 1 if any
        #[arg(long)]
        check: bool,
        /// Do not write; print what would change as a unified diff and exit 1 if anything would
        #[arg(long, conflicts_with = "check")]
        diff: bool,
    },
    /// Score a policy on the AgentDojo efficacy corpus: attacker calls blocked, attacks
    /// stopped, benign calls blocked, benign tasks disturbed (benches/efficacy/README.md)
    Efficacy(efficacy::EfficacyArgs),
    /// Replay recorded traffic through two policies and report the decisions that change,
    /// grouped by the rule whose firing changed (exit 1 when any does)
    Diff(diff::DiffArgs),
    /// Decide one request and show why: the decision, each rule that ran and what its checks
    /// saw (exit 0 allow/modify, 1 deny/ask/defer, 2 an error)
    Eval(eval::EvalArgs),
    /// Serve the playground (built by scripts/build-playground.sh) on a local port: a page
    /// that checks, tests and replays policies in the browser, in WebAssembly (docs/wasm.md)
    Playground(playground::PlaygroundArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff) on stdout: `warden manpage > warden.1`
    Manpage,
    /// Run the language server on standard input and output (for editors)
    Lsp {
        /// Accepted for clients that pass it; stdio is the only transport
        #[arg(long)]
        stdio: bool,
    },
}

/// `warden test`; the runner is `crate::testing` (docs/testing.md).
#[derive(clap::Args, Debug)]
struct TestArgs {
    /// Files or folders (default: the current folder)
    paths: Vec<PathBuf>,
    /// Run only the tests whose name (or `file::name`) contains PATTERN; the rest are skipped
    #[arg(long, value_name = "PATTERN")]
    filter: Option<String>,
    /// Report rule and condition coverage
    #[arg(long)]
    coverage: bool,
    /// Fail (exit 1) when fewer than P percent of the rules fired (implies --coverage)
    #[arg(long, value_name = "P")]
    coverage_min: Option<f64>,
    /// Re-run the tests whenever a file changes
    #[arg(long)]
    watch: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = TestFormat::Pretty)]
    format: TestFormat,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum TestFormat {
    Pretty,
    Json,
    Junit,
}

fn run_test(args: TestArgs) -> i32 {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths
    };
    crate::testing::run_cli(&crate::testing::CliArgs {
        paths,
        filter: args.filter,
        coverage: args.coverage,
        coverage_min: args.coverage_min,
        watch: args.watch,
        format: match args.format {
            TestFormat::Pretty => crate::testing::Format::Pretty,
            TestFormat::Json => crate::testing::Format::Json,
            TestFormat::Junit => crate::testing::Format::Junit,
        },
        color: std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal(),
    })
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Pretty,
    Json,
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // Commands that print a report end quietly when its reader goes away (`warden check … |
    // head`), as other command-line tools do. Not the long-running ones: the server, the
    // hook (it writes to its notify command) and the language server handle a closed pipe
    // themselves.
    if !matches!(
        cli.command,
        Command::Serve(_)
            | Command::Hook(_)
            | Command::McpProxy(_)
            | Command::Lsp { .. }
            | Command::Playground(_)
    ) {
        end_quietly_on_broken_pipe();
    }
    match cli.command {
        Command::Check { paths, format } => run_check(&paths, format),
        Command::Fmt { paths, check, diff } => {
            if paths.len() == 1 && paths[0].as_os_str() == "-" {
                run_fmt_stdin(check, diff)
            } else {
                run_fmt(&paths, check, diff)
            }
        }
        Command::Replay {
            trace,
            policy,
            explain,
            fail_with_error,
            format,
            only,
        } => {
            let shown = Shown { format, only };
            let explain = explain || format == ReplayFormat::Text;
            replay::run(&trace, policy.as_deref(), explain, fail_with_error, &shown)
        }
        Command::Compile { path, dump } => run_compile(&path, dump),
        Command::Test(args) => run_test(args),
        Command::Lsp { stdio: _ } => crate::lsp::run(),
        Command::Serve(args) => serve::run_serve(args),
        Command::Audit { command } => serve::run_audit(command),
        Command::Hook(args) => serve::run_hook(args),
        Command::McpProxy(args) => mcp_proxy::run(args),
        Command::Effects { command } => serve::run_effects(command),
        Command::Approve(args) => serve::run_approve(args),
        Command::Approvals(args) => serve::run_approvals(args),
        Command::Efficacy(args) => efficacy::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Playground(args) => playground::run(args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "warden", &mut std::io::stdout());
            0
        }
        Command::Manpage => {
            let cmd = <Cli as clap::CommandFactory>::command();
            match clap_mangen::Man::new(cmd).render(&mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) => usage_error(&format!("writing the manual page: {e}")),
            }
        }
    }
}

fn color_stderr() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
}

fn usage_error(message: &str) -> i32 {
    eprintln!("error: {message}");
    2
}

/// The `.ward` files under `paths`, each within [`crate::diagnostics::MAX_SOURCE_BYTES`].
fn bounded_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let files = collect_files(paths)?;
    for f in &files {
        crate::diagnostics::source_within_bounds(f)?;
    }
    Ok(files)
}

fn run_check(paths: &[PathBuf], format: Format) -> i32 {
    let files = match bounded_files(paths) {
        Ok(files) => files,
        Err(e) => return usage_error(&e),
    };
    if files.is_empty() {
        return usage_error("no .ward files found in the given paths");
    }
    let mut all_json: Vec<JsonDiagnostic> = Vec::new();
    let (mut errors, mut warnings) = (0, 0);
    let color = color_stderr();
    let policies = match check::check_files(&files) {
        Ok(p) => p,
        Err((path, e)) => return usage_error(&format!("{}: {e}", path.display())),
    };
    for mut checked in policies {
        // Everything loading would refuse, not only what the checker finds.
        crate::compile::check_loadable(&mut checked);
        errors += checked.diagnostics.error_count();
        warnings += checked.diagnostics.warning_count();
        match format {
            Format::Json => all_json.extend(checked.diagnostics.to_json()),
            Format::Pretty => eprint!("{}", checked.diagnostics.render(color)),
        }
    }
    match format {
        Format::Json => {
            let out = serde_json::to_string_pretty(&all_json).unwrap_or_else(|_| "[]".into());
            println!("{out}");
        }
        Format::Pretty => {
            let files_word = if files.len() == 1 { "file" } else { "files" };
            eprintln!(
                "checked {} {files_word}: {errors} error(s), {warnings} warning(s)",
                files.len()
            );
        }
    }
    i32::from(errors > 0)
}

/// Restores the default action of SIGPIPE (end the process), which Rust's runtime sets to
/// "ignore" so that a write to a closed pipe is an error — and `println!` panics on it.
fn end_quietly_on_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default has no preconditions; it runs
    // before this process starts any thread of its own.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `warden fmt -`: standard input formatted to standard output (`--check`: nothing written,
/// exit 1 if it would change; `--diff`: the unified diff instead).
fn run_fmt_stdin(check_only: bool, diff: bool) -> i32 {
    let mut text = String::new();
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
        return usage_error(&format!("standard input: {e}"));
    }
    let mut sources = SourceMap::default();
    let file = sources.add(SourceFile::new("<stdin>", text.as_str()));
    match crate::fmt::format_source(file, &text) {
        Ok(formatted) => {
            let changes = formatted != text;
            if diff {
                print!("{}", unified_diff("<stdin>", &text, &formatted));
            } else if !check_only {
                print!("{formatted}");
            }
            i32::from(changes && (check_only || diff))
        }
        Err(items) => {
            let d = Diagnostics { sources, items };
            eprint!("{}", d.render(color_stderr()));
            eprintln!("standard input could not be formatted: fix its syntax errors first");
            1
        }
    }
}

/// A unified diff (3 lines of context) from `old` to `new`, labelled `path`; empty when they
/// are equal. Line-based, from a longest common subsequence (policy files are small; a pair
/// too large for that is shown as one hunk replacing the whole file).
fn unified_diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // ops: (kind, line) with kind ' ', '-', '+'.
    let mut ops: Vec<(char, &str)> = Vec::new();
    if a.len().saturating_mul(b.len()) <= 25_000_000 {
        let (n, m) = (a.len(), b.len());
        let mut lcs = vec![0u32; (n + 1) * (m + 1)];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * (m + 1) + j] = if a[i] == b[j] {
                    lcs[(i + 1) * (m + 1) + j + 1] + 1
                } else {
                    lcs[(i + 1) * (m + 1) + j].max(lcs[i * (m + 1) + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && a[i] == b[j] {
                ops.push((' ', a[i]));
                i += 1;
                j += 1;
            } else if i < n && (j == m || lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) {
                // Deletions before insertions, as diff(1) shows them.
                ops.push(('-', a[i]));
                i += 1;
            } else {
                ops.push(('+', b[j]));
                j += 1;
            }
        }
    } else {
        ops.extend(a.iter().map(|l| ('-', *l)));
        ops.extend(b.iter().map(|l| ('+', *l)));
    }
    const CONTEXT: usize = 3;
    let mut out = format!("--- {path}\n+++ {path} (formatted)\n");
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let mut k = 0;
    while k < changed.len() {
        // One hunk: changes closer than two contexts apart run together.
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        // Line numbers of the hunk's first line in each file.
        let before = &ops[..start];
        let old_start = before.iter().filter(|o| o.0 != '+').count() + 1;
        let new_start = before.iter().filter(|o| o.0 != '-').count() + 1;
        let hunk = &ops[start..end];
        let old_len = hunk.iter().filter(|o| o.0 != '+').count();
        let new_len = hunk.iter().filter(|o| o.0 != '-').count();
        out.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for (kind, line) in hunk {
            out.push(*kind);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn run_fmt(paths: &[PathBuf], check_only: bool, diff: bool) -> i32 {
    let files = match bounded_files(paths) {
        Ok(files) => files,
        Err(e) => return usage_error(&e),
    };
    let mut changed = Vec::new();
    let mut failed = false;
    let color = color_stderr();
    for path in &files {
        let (source, bad) = match check::load::read_source(path) {
            Ok(s) => s,
            Err(e) => return usage_error(&format!("{}: {e}", path.display())),
        };
        let mut sources = SourceMap::default();
        let file = sources.add(SourceFile::new(source.name.clone(), source.text.clone()));
        let result: Result<String, Vec<Diagnostic>> = match bad {
            Some(mut d) => {
                d.file = file;
                Err(vec![d])
            }
            None => crate::fmt::format_source(file, &source.text),
        };
        match result {
            Ok(formatted) => {
                if formatted.as_str() != &*source.text {
                    changed.push(path.clone());
                    if diff {
                        print!(
                            "{}",
                            unified_diff(&path.display().to_string(), &source.text, &formatted)
                        );
                    } else if !check_only {
                        if let Err(e) = std::fs::write(path, formatted) {
                            return usage_error(&format!("{}: {e}", path.display()));
                        }
                    }
                }
            }
            Err(items) => {
                failed = true;
                let d = Diagnostics { sources, items };
                eprint!("{}", d.render(color));
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if !diff {
        for p in &changed {
            let _ = writeln!(out, "{}", p.display());
        }
    }
    if failed {
        eprintln!("some files could not be formatted: fix their syntax errors first");
        return 1;
    }
    if (check_only || diff) && !changed.is_empty() {
        eprintln!("{} file(s) would be reformatted", changed.len());
        return 1;
    }
    0
}

fn load_policy(path: Option<&std::path::Path>) -> Result<Policy, i32> {
    match path {
        None => Ok(Policy::embedded_default()),
        Some(p) => Policy::load(p).map_err(|d| {
            eprint!("{}", d.render(color_stderr()));
            eprintln!("the policy has errors; nothing was run");
            2
        }),
    }
}

fn run_compile(path: &std::path::Path, dump: bool) -> i32 {
    // The policy is what is being compiled: its errors exit 1, as `check`'s do; a path that
    // is not there is a usage error (2).
    if !path.exists() {
        return usage_error(&format!("{}: no such file", path.display()));
    }
    let policy = match load_policy(Some(path)) {
        Ok(p) => p,
        Err(code) => return if code == 2 { 1 } else { code },
    };
    if dump {
        print!("{}", crate::compile::dump(policy.program()));
    } else {
        let p = policy.program();
        eprintln!(
            "compiled {}: {} rules, {} labels, {} history slots",
            path.display(),
            p.rules.len(),
            p.labels.len(),
            p.history.len()
        );
    }
    0
}
