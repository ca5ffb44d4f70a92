//! The checker: name resolution across a policy's modules, typing of every payload path against
//! the ACS v0.1.0 field table (`acs::fields`), decision legality per hook, history analysis,
//! and the warnings a policy author wants (unused names, unreachable rules).
//!
//! Its output, [`Checked`], is what the compiler and the language server read: the units, the
//! diagnostics, and a resolution table saying what every name in the source refers to.

pub mod builtins;
mod expr;
pub(crate) mod load;
mod plan;
mod pred;
mod scope;
mod tools;
mod traps;
pub(crate) mod types;

use std::collections::HashMap;

use crate::acs::fields::{self, HookSpec};
use crate::acs::DecisionKind;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Diagnostics, FileId, Span};
use crate::syntax::ast::{self, Item};

pub use builtins::{builtin, Builtin, BuiltinSpec, BUILTINS};
pub(crate) use expr::bad_regex;
pub use load::{collect_files, Loaded, Unit, DEFAULT_POLICY, STDLIB};
pub use plan::{Conjunct, HistoryPlan, Split, ToolConjunct, ToolPlan};
pub use types::{Table, Type};

/// What a name in the source was resolved to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// A payload, metadata, provenance or intent field, by normalised path.
    Field {
        table: Table,
        path: String,
    },
    /// A tool argument (`args.NAME`).
    Argument(String),
    /// A `let` constant, by name and the file that defines it (each module has its own).
    Constant {
        name: String,
        file: FileId,
    },
    /// A label, by name and the file that defines it.
    Label {
        name: String,
        file: FileId,
    },
    /// A predicate (`pred NAME(…) = …`), by name and the file that defines it.
    Predicate {
        name: String,
        file: FileId,
    },
    /// A quantifier variable or a predicate's parameter, by name.
    Variable(String),
    /// A bare word standing for one of an enum's values (`origin == tool_output`).
    EnumValue(String),
    /// A Rego rule or function reached through a `use rego` alias.
    Rego {
        alias: String,
        rule: String,
    },
    Builtin(&'static str),
    Hook(&'static HookSpec),
}

/// A definition the language server can jump to.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub kind: DefKind,
    pub name: String,
    pub file: FileId,
    /// The name's own span.
    pub span: Span,
    /// The whole item.
    pub item_span: Span,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefKind {
    Rule,
    Label,
    Constant,
    Predicate,
    Test,
    Module,
}

impl DefKind {
    /// Constants, labels and predicates belong to their module (docs/language.md §3).
    pub fn is_scoped(self) -> bool {
        matches!(
            self,
            DefKind::Constant | DefKind::Label | DefKind::Predicate
        )
    }

    pub fn word(self) -> &'static str {
        match self {
            DefKind::Rule => "rule",
            DefKind::Label => "label",
            DefKind::Constant => "constant",
            DefKind::Predicate => "predicate",
            DefKind::Test => "test",
            DefKind::Module => "module",
        }
    }
}

/// Everything the checker learned, keyed for the compiler and the language server.
#[derive(Debug, Default)]
pub struct Checked {
    pub loaded: Loaded,
    pub diagnostics: Diagnostics,
    pub definitions: Vec<Definition>,
    /// What each name occurrence resolved to, with its type.
    pub resolutions: HashMap<(FileId, Span), (Resolution, Type)>,
    /// Every reason code a rule or default can produce.
    pub reason_codes: Vec<String>,
    /// How each history filter is kept in O(1), by the filter's file and span: the plan the
    /// compiler lowers ([`HistoryPlan`]).
    pub history_plans: HashMap<(FileId, Span), HistoryPlan>,
    /// Which tools each rule runs for, by the rule's file and span ([`ToolPlan`]): the rule
    /// index's tool filter and the checker's `tool` declaration checks both read it.
    pub tool_plans: HashMap<(FileId, Span), ToolPlan>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.has_errors()
    }

    pub fn definition(&self, kind: DefKind, name: &str) -> Option<&Definition> {
        self.definitions
            .iter()
            .find(|d| d.kind == kind && d.name == name)
    }

    /// The plan of the history filter `filter` of `file`; one the checker did not reach (code
    /// behind an error) is made the same way.
    pub fn history_plan(&self, file: FileId, filter: &crate::syntax::ast::Expr) -> HistoryPlan {
        self.history_plans
            .get(&(file, filter.span))
            .cloned()
            .unwrap_or_else(|| HistoryPlan::of(filter))
    }

    /// The definition of a constant, label or predicate of one file (what a
    /// [`Resolution::Constant`], `Label` or `Predicate` names).
    pub fn definition_in(&self, kind: DefKind, name: &str, file: FileId) -> Option<&Definition> {
        self.definitions
            .iter()
            .find(|d| d.kind == kind && d.name == name && d.file == file)
    }
}

/// Checks a loaded policy.
pub fn check(loaded: Loaded) -> Checked {
    crate::syntax::on_deep_stack(move || check_here(loaded))
}

fn check_here(loaded: Loaded) -> Checked {
    let mut cx = Checker::new(&loaded);
    cx.collect_definitions();
    cx.check_import_clashes();
    cx.check_traps();
    cx.check_items();
    cx.check_uncalled_preds();
    cx.plan_tools();
    cx.check_tool_arguments();
    cx.check_expected_codes();
    cx.report_unused();
    let Checker {
        mut diagnostics,
        definitions,
        resolutions,
        reason_codes,
        history_plans,
        tool_plans,
        ..
    } = cx;
    diagnostics.extend(loaded.diagnostics.iter().cloned());
    let mut out = Diagnostics {
        sources: loaded.sources.clone(),
        items: diagnostics,
    };
    out.sort();
    let mut reason_codes: Vec<String> = reason_codes.into_iter().collect();
    reason_codes.sort();
    reason_codes.dedup();
    Checked {
        loaded,
        diagnostics: out,
        definitions,
        resolutions,
        reason_codes,
        history_plans,
        tool_plans,
    }
}

/// Loads and checks the policy rooted at a file.
pub fn check_path(path: &std::path::Path) -> Result<Checked, std::io::Error> {
    Ok(check(Loaded::from_path(path)?))
}

/// `foo_test.ward` is checked (and run) with the `foo.ward` beside it, if there is one.
pub fn policy_of_test(test: &std::path::Path) -> Option<std::path::PathBuf> {
    let stem = test.file_stem()?.to_str()?;
    let base = stem.strip_suffix("_test")?;
    let policy = test.with_file_name(format!("{base}.ward"));
    policy.is_file().then_some(policy)
}

/// What `warden check FILES…` checks: each file as its own policy, except that a
/// `foo_test.ward` is checked together with the `foo.ward` beside it (as `warden test` runs
/// it; once, if both are given). A file that another given file `use`s as a module and that
/// has no `default` is a library: its exports are not `check::unused`, and it needs no default.
pub fn check_files(
    files: &[std::path::PathBuf],
) -> Result<Vec<Checked>, (std::path::PathBuf, std::io::Error)> {
    let mut groups: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)> = Vec::new();
    for f in files {
        let (policy, test) = match policy_of_test(f) {
            Some(p) => (p, Some(f.clone())),
            None => (f.clone(), None),
        };
        let same = |p: &std::path::PathBuf| same_file(p, &policy);
        match groups.iter_mut().find(|(p, _)| same(p)) {
            Some((_, tests)) => tests.extend(test),
            None => groups.push((policy, test.into_iter().collect())),
        }
    }
    let mut out = Vec::new();
    for (policy, tests) in &groups {
        let mut loaded = Loaded::from_path(policy).map_err(|e| (policy.clone(), e))?;
        for t in tests {
            loaded.add_path(t).map_err(|e| (t.clone(), e))?;
        }
        out.push(check(loaded));
    }
    // Files some policy loaded as a module.
    let mut used: Vec<std::path::PathBuf> = Vec::new();
    for c in &out {
        for u in c.loaded.units.iter().filter(|u| !u.is_root && !u.is_std) {
            let name = &c.loaded.sources.get(u.file).name;
            used.extend(std::fs::canonicalize(name).ok());
        }
    }
    for c in &mut out {
        let libraries: Vec<FileId> = c
            .loaded
            .units
            .iter()
            .filter(|u| u.is_root && !has_default(u))
            .filter(|u| {
                let name = &c.loaded.sources.get(u.file).name;
                std::fs::canonicalize(name).is_ok_and(|p| used.contains(&p))
            })
            .map(|u| u.file)
            .collect();
        c.diagnostics.items.retain(|d| {
            !(libraries.contains(&d.file) && matches!(d.code, Code::Unused | Code::NoDefault))
        });
    }
    Ok(out)
}

fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn has_default(unit: &Unit) -> bool {
    unit.module
        .items
        .iter()
        .any(|i| matches!(i, Item::Default(_)))
}

/// Loads and checks a policy given as text.
pub fn check_source(name: &str, text: &str) -> Checked {
    check(Loaded::from_source(name, text, None))
}

#[derive(Debug, Clone)]
struct ConstInfo<'a> {
    unit: usize,
    decl: &'a ast::Let,
}

#[derive(Debug, Clone)]
struct PredInfo<'a> {
    unit: usize,
    decl: &'a ast::PredDecl,
}

#[derive(Debug, Clone)]
enum Alias {
    Rego,
    RegoData,
    Module(String),
}

pub(crate) struct Checker<'a> {
    loaded: &'a Loaded,
    diagnostics: Vec<Diagnostic>,
    definitions: Vec<Definition>,
    resolutions: HashMap<(FileId, Span), (Resolution, Type)>,
    history_plans: HashMap<(FileId, Span), HistoryPlan>,
    tool_plans: HashMap<(FileId, Span), ToolPlan>,
    reason_codes: Vec<String>,
    /// Per unit: its namespace. The files the user named (the roots) share namespace 0; every
    /// module reached by `use` has its own.
    ns: Vec<usize>,
    /// Per unit: the namespaces of the modules it `use`s directly.
    imports: Vec<Vec<usize>>,
    /// Per namespace: constant name → its declaration.
    constants: Vec<HashMap<&'a str, ConstInfo<'a>>>,
    const_types: HashMap<(usize, String), Type>,
    const_in_progress: Vec<(usize, String)>,
    /// Per namespace: label name → the unit that declares it.
    labels: Vec<HashMap<&'a str, usize>>,
    /// Per namespace: predicate name → its declaration.
    preds: Vec<HashMap<&'a str, PredInfo<'a>>>,
    /// Predicates being expanded (for `check::cycle`).
    pred_stack: Vec<(usize, String)>,
    /// Per unit: local alias → what it names.
    aliases: Vec<HashMap<String, Alias>>,
    /// Uses of each constant, label and predicate, by namespace and name.
    used: HashMap<(usize, String), usize>,
    /// Reason codes that tests expect, checked once every rule is known.
    expected_codes: Vec<(FileId, ast::StringLit)>,
}

impl<'a> Checker<'a> {
    fn new(loaded: &'a Loaded) -> Self {
        let units = loaded.units.len();
        let ns: Vec<usize> = loaded
            .units
            .iter()
            .enumerate()
            .map(|(u, unit)| if unit.is_root { 0 } else { u + 1 })
            .collect();
        let imports = loaded
            .units
            .iter()
            .enumerate()
            .map(|(u, unit)| {
                let mut v: Vec<usize> = Vec::new();
                for item in &unit.module.items {
                    let Item::Use(use_) = item else { continue };
                    let ast::UseKind::Module { path } = &use_.kind else {
                        continue;
                    };
                    let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
                    let name = name.join(".");
                    if let Some(t) = loaded.units.iter().position(|x| x.name == name) {
                        if ns[t] != ns[u] && !v.contains(&ns[t]) {
                            v.push(ns[t]);
                        }
                    }
                }
                v
            })
            .collect();
        Checker {
            loaded,
            diagnostics: Vec::new(),
            definitions: Vec::new(),
            resolutions: HashMap::new(),
            history_plans: HashMap::new(),
            tool_plans: HashMap::new(),
            reason_codes: Vec::new(),
            ns,
            imports,
            constants: vec![HashMap::new(); units + 1],
            const_types: HashMap::new(),
            const_in_progress: Vec::new(),
            labels: vec![HashMap::new(); units + 1],
            preds: vec![HashMap::new(); units + 1],
            pred_stack: Vec::new(),
            aliases: vec![HashMap::new(); units],
            used: HashMap::new(),
            expected_codes: Vec::new(),
        }
    }

    fn file_of(&self, unit: usize) -> FileId {
        self.loaded.units[unit].file
    }

    fn define(
        &mut self,
        unit: usize,
        kind: DefKind,
        name: &ast::Ident,
        item: Span,
        detail: String,
    ) {
        let file = self.file_of(unit);
        // Constants, labels and predicates share their module's namespace: a bare name must
        // mean one thing there. Rules and tests are named once per policy.
        let ns = self.ns[unit];
        let clashes = |d: &Definition| {
            if kind.is_scoped() {
                d.kind.is_scoped() && self.ns_of_file(d.file) == Some(ns)
            } else {
                d.kind == kind
            }
        };
        if let Some(prev) = self
            .definitions
            .iter()
            .find(|d| clashes(d) && d.name == name.name)
        {
            let what = kind.word();
            let mut d = Diagnostic::error(
                Code::Duplicate,
                file,
                name.span,
                format!("the {what} `{}` is defined twice", name.name),
            )
            .with_label(format!("second definition of `{}`", name.name));
            if prev.file == file {
                d = d
                    .with_related(prev.span, "first defined here")
                    .with_help(format!("rename one of the two {what}s"));
            } else {
                let other = &self.loaded.sources.get(prev.file).name;
                d = d.with_help(format!(
                    "`{}` is already defined in {other}; rename this one",
                    name.name
                ));
            }
            self.diagnostics.push(d);
            return;
        }
        self.definitions.push(Definition {
            kind,
            name: name.name.clone(),
            file,
            span: name.span,
            item_span: item,
            detail,
        });
    }

    fn collect_definitions(&mut self) {
        let loaded = self.loaded;
        for (u, unit) in loaded.units.iter().enumerate() {
            for item in &unit.module.items {
                match item {
                    Item::Let(l) => {
                        self.define(u, DefKind::Constant, &l.name, l.span, "constant".into());
                        self.constants[self.ns[u]]
                            .entry(l.name.name.as_str())
                            .or_insert(ConstInfo { unit: u, decl: l });
                    }
                    Item::Label(l) => {
                        self.define(u, DefKind::Label, &l.name, l.span, "label".into());
                        self.labels[self.ns[u]]
                            .entry(l.name.name.as_str())
                            .or_insert(u);
                    }
                    Item::Pred(p) => {
                        let detail = pred::signature(p);
                        self.define(u, DefKind::Predicate, &p.name, p.span, detail);
                        self.preds[self.ns[u]]
                            .entry(p.name.name.as_str())
                            .or_insert(PredInfo { unit: u, decl: p });
                    }
                    Item::Rule(r) => {
                        let hooks: Vec<&str> = r.hooks.iter().map(|h| h.name.as_str()).collect();
                        let detail = format!(
                            "rule on {} => {}",
                            hooks.join(", "),
                            r.decision.kind.as_str()
                        );
                        self.define(u, DefKind::Rule, &r.name, r.span, detail);
                    }
                    Item::Test(t) => {
                        let ident = ast::Ident {
                            name: t.name.value.clone(),
                            span: t.name.span,
                        };
                        self.define(u, DefKind::Test, &ident, t.span, "test".into());
                    }
                    Item::Use(use_) => {
                        let Some(local) = use_.local_name() else {
                            continue;
                        };
                        let alias = match &use_.kind {
                            ast::UseKind::Rego { .. } => Alias::Rego,
                            ast::UseKind::RegoData { .. } => Alias::RegoData,
                            ast::UseKind::Module { path } => Alias::Module(
                                path.iter()
                                    .map(|i| i.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join("."),
                            ),
                        };
                        if self.aliases[u].insert(local.name.clone(), alias).is_some() {
                            let file = self.file_of(u);
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::Duplicate,
                                    file,
                                    local.span,
                                    format!("`{}` is imported twice", local.name),
                                )
                                .with_label("second import")
                                .with_help("give one of them a different name with `as`"),
                            );
                        }
                    }
                    Item::Package(_)
                    | Item::Default(_)
                    | Item::Mask(_)
                    | Item::Effect(_)
                    | Item::Tool(_) => {}
                }
            }
        }
    }

    fn check_items(&mut self) {
        let loaded = self.loaded;
        let mut defaults: HashMap<&str, (FileId, Span)> = HashMap::new();
        let mut any_rules_in_root = false;
        let mut any_default = false;
        let mut effect_names: HashMap<&str, ()> = HashMap::new();
        let mut tool_names: HashMap<&str, ()> = HashMap::new();
        for (u, unit) in loaded.units.iter().enumerate() {
            let file = unit.file;
            let mut package_seen = false;
            for item in &unit.module.items {
                match item {
                    Item::Mask(m) => self.check_mask(file, &m.place),
                    Item::Tool(t) => {
                        if tool_names.insert(&t.name.value, ()).is_some() {
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::Duplicate,
                                    file,
                                    t.name.span,
                                    format!("the tool `{}` is declared twice", t.name.value),
                                )
                                .with_label("second declaration")
                                .with_help("declare each tool once, with all its arguments"),
                            );
                        }
                        let mut seen: HashMap<&str, ()> = HashMap::new();
                        for p in &t.params {
                            if seen.insert(&p.name.name, ()).is_some() {
                                self.diagnostics.push(
                                    Diagnostic::error(
                                        Code::Duplicate,
                                        file,
                                        p.name.span,
                                        format!("the argument `{}` is declared twice", p.name.name),
                                    )
                                    .with_label("second declaration")
                                    .with_help("give each argument one name and one type"),
                                );
                            }
                        }
                    }
                    Item::Effect(e) => {
                        if effect_names.insert(&e.name.name, ()).is_some() {
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::Duplicate,
                                    file,
                                    e.name.span,
                                    format!("the effect `{}` is declared twice", e.name.name),
                                )
                                .with_label("second declaration")
                                .with_help("give each effect its own name"),
                            );
                        }
                        self.check_effect(u, e);
                    }
                    Item::Package(p) => {
                        if package_seen {
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::Duplicate,
                                    file,
                                    p.span,
                                    "a file has one `package` line",
                                )
                                .with_label("second package")
                                .with_help("remove this line"),
                            );
                        }
                        package_seen = true;
                    }
                    Item::Let(l) => {
                        self.const_type(self.ns[u], &l.name.name);
                    }
                    Item::Pred(p) => self.check_pred_decl(u, p),
                    Item::Label(l) => {
                        if let Some(when) = &l.when {
                            let mut ecx = expr::Ctx::new(u, file, expr::Scope::Label);
                            let t = self.expr(&mut ecx, when);
                            self.expect_bool(file, when, &t, "a label's condition");
                        }
                    }
                    Item::Rule(r) => {
                        if unit.is_root {
                            any_rules_in_root = true;
                        }
                        self.check_rule(u, r);
                    }
                    Item::Default(d) => {
                        any_default = true;
                        let hooks = self.resolve_hooks(file, &d.hooks);
                        if d.hooks.is_empty() {
                            self.check_catch_all_default(file, &d.decision);
                            self.check_decision(u, &d.decision, None, true);
                            if let Some((pf, ps)) = defaults.insert("*", (file, d.span)) {
                                self.duplicate_default(file, d.span, pf, ps, "every hook");
                            }
                        }
                        for h in hooks {
                            self.check_decision(u, &d.decision, Some(h), true);
                            if let Some((pf, ps)) = defaults.insert(h.name, (file, d.span)) {
                                self.duplicate_default(file, d.span, pf, ps, h.name);
                            }
                        }
                    }
                    Item::Test(t) => self.check_test(u, t),
                    Item::Use(_) => {}
                }
            }
        }
        if any_rules_in_root && !any_default {
            if let Some(root) = loaded.units.iter().find(|u| u.is_root && !is_library(u)) {
                let span = root
                    .module
                    .items
                    .first()
                    .map(|i| {
                        let s = i.span();
                        Span::new(s.start as usize, s.start as usize)
                    })
                    .unwrap_or_default();
                self.diagnostics.push(
                    Diagnostic::warning(
                        Code::NoDefault,
                        root.file,
                        span,
                        "this policy has no `default`",
                    )
                    .with_label("requests no rule decides will be denied")
                    .with_help(
                        "add `default allow` (or `default deny \"…\"`); without one, undecided hooks fail closed with `warden.no_default`",
                    ),
                );
            }
        }
    }

    fn check_catch_all_default(&mut self, file: FileId, d: &ast::Decision) {
        if matches!(d.kind, DecisionKind::Allow | DecisionKind::Deny) {
            return;
        }
        self.diagnostics.push(
            Diagnostic::error(
                Code::IllegalDecision,
                file,
                d.span,
                format!(
                    "a default for every hook can only allow or deny, not `{}`",
                    d.kind.as_str()
                ),
            )
            .with_label("most hooks cannot answer this")
            .with_help(format!(
                "name the hooks it is for: `default on toolCallRequest {} …`",
                d.kind.as_str()
            )),
        );
    }

    fn duplicate_default(&mut self, file: FileId, span: Span, pf: FileId, ps: Span, what: &str) {
        let mut d = Diagnostic::error(
            Code::Duplicate,
            file,
            span,
            format!("two defaults apply to {what}"),
        )
        .with_label("second default")
        .with_help("keep one default per hook");
        if pf == file {
            d = d.with_related(ps, "first default");
        }
        self.diagnostics.push(d);
    }

    pub(crate) fn resolve_hooks(
        &mut self,
        file: FileId,
        hooks: &[ast::Hook],
    ) -> Vec<&'static HookSpec> {
        hooks
            .iter()
            .filter_map(|h| self.resolve_hook(file, h))
            .collect()
    }

    pub(crate) fn resolve_hook(
        &mut self,
        file: FileId,
        h: &ast::Hook,
    ) -> Option<&'static HookSpec> {
        if let Some(spec) = fields::hook(&h.name) {
            self.resolutions.insert(
                (file, h.span),
                (
                    Resolution::Hook(spec),
                    Type::Object(Table::Payload(spec), String::new()),
                ),
            );
            return Some(spec);
        }
        let names = fields::HOOKS.iter().map(|s| s.name);
        let mut d = Diagnostic::error(
            Code::UnknownHook,
            file,
            h.span,
            format!("there is no hook `{}`", h.name),
        )
        .with_label("unknown hook");
        d = match did_you_mean(&h.name, names) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(h.span, s.to_string()),
            None => d.with_help(
                "hooks are the ACS methods: toolCallRequest, toolCallResult, userMessage, … (see docs/language.md)",
            ),
        };
        self.diagnostics.push(d);
        None
    }

    fn check_rule(&mut self, u: usize, r: &'a ast::RuleDecl) {
        let file = self.file_of(u);
        let hooks = self.resolve_hooks(file, &r.hooks);
        if let Some(query) = &r.rego {
            self.check_rego_source(file, query);
        }
        let mut always_false = false;
        for hook in &hooks {
            if let Some(when) = &r.when {
                let mut ecx = expr::Ctx::new(u, file, expr::Scope::Rule(hook));
                let t = self.expr(&mut ecx, when);
                self.expect_bool(file, when, &t, "a rule's condition");
                always_false |= expr::folds_to_false(when);
            }
            self.check_decision(u, &r.decision, Some(hook), false);
        }
        if hooks.is_empty() {
            self.check_decision(u, &r.decision, None, false);
        }
        if always_false {
            if let Some(when) = &r.when {
                self.diagnostics.push(
                    Diagnostic::warning(
                        Code::Unreachable,
                        file,
                        when.span,
                        format!("rule `{}` can never fire", r.name.name),
                    )
                    .with_label("this condition is always false")
                    .with_help("remove the rule, or fix its condition"),
                );
            }
        }
    }

    /// `effect NAME for TOOL = key(…)`: the key parts are typed as on toolCallRequest.
    fn check_effect(&mut self, u: usize, e: &'a ast::EffectDecl) {
        let file = self.file_of(u);
        let Some(hook) = fields::hook("toolCallRequest") else {
            return;
        };
        for part in &e.key {
            let mut ecx = expr::Ctx::new(u, file, expr::Scope::Rule(hook));
            self.expr(&mut ecx, part);
        }
    }

    /// `mask PATH` names a tool argument or a field some hook has.
    fn check_mask(&mut self, file: FileId, place: &ast::Place) {
        let Some(ast::PlaceSegment::Field(first)) = place.segments.first() else {
            return;
        };
        if first.name == "args"
            || fields::HOOKS
                .iter()
                .any(|h| fields::lookup(h.fields, &first.name).is_some())
        {
            return;
        }
        let names: Vec<&str> = fields::HOOKS
            .iter()
            .flat_map(|h| fields::children(h.fields, ""))
            .map(|f| f.path)
            .chain(["args"])
            .collect();
        let mut d = Diagnostic::error(
            Code::UnknownField,
            file,
            first.span,
            format!("no hook has a field `{}`", first.name),
        )
        .with_label("unknown field");
        d = match did_you_mean(&first.name, names.iter().copied()) {
            Some(s) => d
                .with_help(format!("did you mean `{s}`?"))
                .with_fix(first.span, s.to_string()),
            None => d.with_help("mask a tool argument (`args.NAME`) or a payload field"),
        };
        self.diagnostics.push(d);
    }

    /// `from rego "data.pkg.rule"` must name a rule of a package this file imports.
    fn check_rego_source(&mut self, file: FileId, query: &ast::StringLit) {
        let imports: Vec<&crate::rego::RegoImport> = self
            .loaded
            .rego
            .iter()
            .filter(|(f, i)| *f == file && !i.is_data)
            .map(|(_, i)| i)
            .collect();
        let found = imports.iter().any(|i| {
            i.package.as_deref().is_some_and(|p| {
                query
                    .value
                    .strip_prefix(p)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|rule| i.rules.iter().any(|r| r == rule))
            })
        });
        if found {
            return;
        }
        let known: Vec<String> = imports
            .iter()
            .flat_map(|i| {
                let p = i.package.clone().unwrap_or_default();
                i.rules.iter().map(move |r| format!("{p}.{r}"))
            })
            .collect();
        let mut d = Diagnostic::error(
            Code::UnknownRegoRule,
            file,
            query.span,
            format!("no Rego package imported here defines `{}`", query.value),
        )
        .with_label("unknown Rego rule");
        d = match did_you_mean(&query.value, known.iter().map(String::as_str)) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None if known.is_empty() => {
                d.with_help("import the Rego file first: `use rego \"rules.rego\" as org`")
            }
            None => d.with_help(format!("the imported rules are {}", known.join(", "))),
        };
        self.diagnostics.push(d);
    }

    fn expect_bool(&mut self, file: FileId, e: &ast::Expr, t: &Type, what: &str) {
        if !t.is_boolish() {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    file,
                    e.span,
                    format!("{what} must be true or false, but this is a {t}"),
                )
                .with_label(format!("this is a {t}"))
                .with_help("compare it with something, e.g. `x == \"value\"` or `x in {…}`"),
            );
        }
    }

    /// Checks a decision's parts, and that `hook` (if known) may return it.
    fn check_decision(
        &mut self,
        u: usize,
        d: &'a ast::Decision,
        hook: Option<&'static HookSpec>,
        is_default: bool,
    ) {
        let file = self.file_of(u);
        if let Some(reason) = &d.reason {
            self.reason_codes.push(reason.code.value.clone());
            if reason.code.value.trim().is_empty()
                || reason.code.value.contains(char::is_whitespace)
            {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::BadReasonCode,
                        file,
                        reason.code.span,
                        "a reason code is one word with no spaces",
                    )
                    .with_label("not a reason code")
                    .with_help("write `deny \"code.name\": \"the reasoning, in words\"`"),
                );
            }
        }
        if let Some(h) = hook {
            // A catch-all default may say deny: it applies as allow where deny is impossible.
            let recorded_default = is_default && d.kind == DecisionKind::Deny && h.audit_only;
            if !h.allows(d.kind) && !recorded_default {
                let why = if h.audit_only {
                    format!("{} is audit-only: it is recorded, never blocked", h.name)
                } else {
                    format!("{} may return {}", h.name, h.decision_words())
                };
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::IllegalDecision,
                        file,
                        d.span,
                        format!("{} cannot answer `{}`", h.name, d.kind.as_str()),
                    )
                    .with_label(format!("`{}` is not allowed here", d.kind.as_str()))
                    .with_help(why),
                );
            }
        }
        match d.kind {
            DecisionKind::Ask => self.check_ask(file, d, hook),
            DecisionKind::Defer => self.check_defer(file, d),
            DecisionKind::Modify => {
                if d.modifications.is_empty() {
                    self.diagnostics.push(part_error(
                        file,
                        Code::MissingPart,
                        d.span,
                        "a `modify` needs at least one change".into(),
                        "nothing to modify",
                        "add `redact args.x`, `set args.x = …` or `replace with \"…\"`",
                    ));
                }
                self.check_modifications(u, &d.modifications, hook);
            }
            DecisionKind::Allow | DecisionKind::Deny => {}
        }
    }

    /// An `ask`'s parts: an approver, `extend intent` only on a tool call, an unanswered
    /// ask falling back to allow or deny.
    fn check_ask(&mut self, file: FileId, d: &'a ast::Decision, hook: Option<&'static HookSpec>) {
        if d.approver.is_none() {
            self.diagnostics.push(part_error(
                file,
                Code::MissingPart,
                d.span,
                "an `ask` needs an approver".into(),
                "no approver",
                "add `approver human \"oncall\"` (or agent / service)",
            ));
        }
        if let Some((_, s)) = d.extend {
            let tool_call = hook.is_some_and(|h| {
                matches!(
                    h.method,
                    "steps/toolCallRequest" | "protocols/MCP/tools/call"
                )
            });
            if !tool_call {
                self.diagnostics.push(part_error(
                    file,
                    Code::BadPart,
                    s,
                    "only an ask on a tool call can extend the intent".into(),
                    "not a toolCallRequest rule",
                    "`extend intent` offers the approver the called tool as a new \
                     capability; write it in a rule `on toolCallRequest`",
                ));
            }
        }
        if let Some((k, s)) = d.on_timeout {
            if !matches!(k, DecisionKind::Allow | DecisionKind::Deny) {
                self.diagnostics.push(part_error(
                    file,
                    Code::BadPart,
                    s,
                    format!(
                        "an unanswered ask can fall back to allow or deny, not {}",
                        k.as_str()
                    ),
                    "not allow or deny",
                    "write `else deny` (the default) or `else allow`",
                ));
            }
        }
    }

    /// A `defer`'s parts: a timeout and what it becomes, its resolution method and reason.
    fn check_defer(&mut self, file: FileId, d: &'a ast::Decision) {
        if d.timeout.is_none() || d.on_timeout.is_none() {
            self.diagnostics.push(part_error(
                file,
                Code::MissingPart,
                d.span,
                "a `defer` needs a timeout and what happens when it expires".into(),
                "no timeout decision",
                "add `timeout 30s else deny` (or `else ask`)",
            ));
        }
        if let Some((k, s)) = d.on_timeout {
            if !matches!(k, DecisionKind::Deny | DecisionKind::Ask) {
                self.diagnostics.push(part_error(
                    file,
                    Code::BadPart,
                    s,
                    format!(
                        "an expired defer can become deny or ask, not {}",
                        k.as_str()
                    ),
                    "not deny or ask",
                    "write `else deny` or `else ask`",
                ));
            }
        }
        const METHODS: &[&str] = &["additional_context", "human_approval", "timeout"];
        const REASONS: &[&str] = &[
            "insufficient_context",
            "conflicting_policies",
            "low_confidence",
            "pending_dependency",
        ];
        for (word, allowed, what) in [
            (&d.resolve, METHODS, "resolution method"),
            (&d.because, REASONS, "defer reason"),
        ] {
            if let Some(w) = word {
                if !allowed.contains(&w.name.as_str()) {
                    let mut diag = part_error(
                        file,
                        Code::BadPart,
                        w.span,
                        format!("`{}` is not a {what}", w.name),
                        "unknown",
                        "",
                    );
                    diag.help = Some(match did_you_mean(&w.name, allowed.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("use one of {}", allowed.join(", ")),
                    });
                    self.diagnostics.push(diag);
                }
            }
        }
    }

    fn check_modifications(
        &mut self,
        u: usize,
        mods: &'a [ast::Modification],
        hook: Option<&'static HookSpec>,
    ) {
        let file = self.file_of(u);
        let mut targets: Vec<(String, Span)> = Vec::new();
        let mut replace: Option<Span> = None;
        for m in mods {
            match m {
                ast::Modification::Replace { content, span } => {
                    if let Some(first) = replace {
                        self.diagnostics.push(
                            Diagnostic::error(
                                Code::ConflictingModifications,
                                file,
                                *span,
                                "the payload is replaced twice",
                            )
                            .with_label("second replacement")
                            .with_related(first, "first replacement")
                            .with_help("keep one `replace with`"),
                        );
                    }
                    replace = Some(*span);
                    if let Some(h) = hook {
                        let mut ecx = expr::Ctx::new(u, file, expr::Scope::Rule(h));
                        let t = self.expr(&mut ecx, content);
                        if !t.is_stringish() {
                            self.diagnostics.push(
                                Diagnostic::error(
                                    Code::TypeMismatch,
                                    file,
                                    content.span,
                                    format!("replacement content must be a string, not a {t}"),
                                )
                                .with_label("not a string")
                                .with_help(
                                    "`replace with \"…\"` swaps the whole payload for this text",
                                ),
                            );
                        }
                    }
                }
                ast::Modification::Redact { place, .. } | ast::Modification::Set { place, .. } => {
                    let is_set = matches!(m, ast::Modification::Set { .. });
                    if let Some(h) = hook {
                        self.check_place(file, place, h, is_set);
                        if let ast::Modification::Set { value, .. } = m {
                            let mut ecx = expr::Ctx::new(u, file, expr::Scope::Rule(h));
                            self.expr(&mut ecx, value);
                        }
                    }
                    if let ast::Modification::Redact { replacement, .. } = m {
                        self.check_replacement(u, replacement.as_ref());
                    }
                    self.note_target(file, place, &mut targets);
                }
                ast::Modification::RedactEach {
                    collection,
                    select,
                    replacement,
                    ..
                } => {
                    if let Some(h) = hook {
                        self.check_place(file, collection, h, false);
                        let mut ecx = expr::Ctx::new(u, file, expr::Scope::Rule(h));
                        self.expr(&mut ecx, select);
                    }
                    self.check_replacement(u, replacement.as_ref());
                    // Any element may be redacted: the target is the whole collection.
                    self.note_target(file, collection, &mut targets);
                }
            }
        }
        if let (Some(span), false) = (replace, targets.is_empty()) {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::ConflictingModifications,
                    file,
                    span,
                    "`replace with` cannot be combined with `redact` or `set`",
                )
                .with_label("replaces the whole payload")
                .with_help("ACS makes a wholesale replacement exclusive; keep one kind of change"),
            );
        }
    }

    /// A change's target, held against the targets before it: ACS wants them disjoint.
    fn note_target(&mut self, file: FileId, place: &ast::Place, targets: &mut Vec<(String, Span)>) {
        let text = place_text(place);
        for (other, other_span) in targets.iter() {
            if overlaps(&text, other) {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::ConflictingModifications,
                        file,
                        place.span,
                        format!("`{text}` overlaps `{other}`, which is already modified"),
                    )
                    .with_label("overlapping target")
                    .with_related(*other_span, "modified here too")
                    .with_help("ACS requires redactions and overrides to touch disjoint paths"),
                );
            }
        }
        targets.push((text, place.span));
    }

    /// A redaction's `with EXPR`: a constant (literals, `let`s and what folds from them) whose
    /// value is a string.
    fn check_replacement(&mut self, u: usize, replacement: Option<&'a ast::Expr>) {
        let Some(r) = replacement else { return };
        let file = self.file_of(u);
        let mut ecx = expr::Ctx::new(u, file, expr::Scope::Const);
        let t = self.expr(&mut ecx, r);
        if !t.is_stringish() {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::TypeMismatch,
                    file,
                    r.span,
                    format!("a redaction's replacement must be a string, not a {t}"),
                )
                .with_label("not a string")
                .with_help("write a string, or a constant that is one: `with \"[KEY]\"`"),
            );
        }
    }

    fn check_place(
        &mut self,
        file: FileId,
        place: &ast::Place,
        hook: &'static HookSpec,
        is_set: bool,
    ) {
        let Some(ast::PlaceSegment::Field(first)) = place.segments.first() else {
            return;
        };
        let has_args = fields::lookup(hook.fields, "arguments").is_some()
            || fields::lookup(hook.fields, "params.arguments").is_some();
        if first.name == "args" {
            if !has_args {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::UnknownField,
                        file,
                        first.span,
                        format!("{} has no tool arguments", hook.name),
                    )
                    .with_label("no `args` here")
                    .with_help("`args` exists on toolCallRequest and protocols/MCP/tools/call"),
                );
            }
            return;
        }
        if is_set {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::BadPart,
                    file,
                    place.span,
                    "`set` overrides tool arguments only",
                )
                .with_label("not a tool argument")
                .with_help("ACS parameter overrides replace arguments: write `set args.NAME = …`; use `redact` for other fields"),
            );
            return;
        }
        // Walk the typed path; indices step into list items.
        let mut path = String::new();
        for seg in &place.segments {
            match seg {
                ast::PlaceSegment::Field(id) => {
                    let next = types::join(&path, &id.name);
                    let alt = format!("{path}.*");
                    if fields::lookup(hook.fields, &next).is_none()
                        && fields::lookup(hook.fields, &alt).is_none()
                    {
                        let children: Vec<&str> = fields::children(hook.fields, &path)
                            .map(|f| last_segment(f.path))
                            .collect();
                        let mut d = Diagnostic::error(
                            Code::UnknownField,
                            file,
                            id.span,
                            format!("{} has no field `{next}`", hook.name),
                        )
                        .with_label("unknown field");
                        if let Some(s) = did_you_mean(&id.name, children.iter().copied()) {
                            d = d
                                .with_help(format!("did you mean `{s}`?"))
                                .with_fix(id.span, s.to_string());
                        }
                        self.diagnostics.push(d);
                        return;
                    }
                    path = next;
                }
                ast::PlaceSegment::Index(..) => path.push_str("[]"),
            }
        }
    }

    fn check_test(&mut self, u: usize, t: &'a ast::Test) {
        let file = self.file_of(u);
        if let (Some(fixture), Some(dir)) = (&t.fixture, &self.loaded.units[u].dir) {
            if !dir.join(&fixture.value).is_file() {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::MissingFixture,
                        file,
                        fixture.span,
                        format!("cannot find the trace `{}`", fixture.value),
                    )
                    .with_label("no such file")
                    .with_help(format!("fixture paths are relative to {}", dir.display())),
                );
            }
        }
        self.check_steps(u, &t.steps);
    }

    fn check_steps(&mut self, u: usize, steps: &'a [ast::Step]) {
        let file = self.file_of(u);
        for step in steps {
            let mut values: Vec<&ast::Expr> = Vec::new();
            let mut origins: Vec<&ast::Ident> = Vec::new();
            let mut outputs: Vec<&ast::Output> = Vec::new();
            match &step.kind {
                ast::StepKind::Send { hook, payload } => {
                    self.resolve_hook(file, hook);
                    values.push(payload);
                }
                ast::StepKind::Subagent { steps, .. } => self.check_steps(u, steps),
                ast::StepKind::Call { args, output, .. } => {
                    for a in args {
                        values.push(&a.value);
                        origins.extend(a.from.iter().map(|f| &f.origin));
                        origins.extend(a.element_from.iter().flatten().map(|f| &f.origin));
                    }
                    outputs.extend(output.iter());
                }
                ast::StepKind::Result { output, .. } | ast::StepKind::Retrieve { output, .. } => {
                    outputs.push(output)
                }
                ast::StepKind::Memory { output, from, .. } => {
                    outputs.extend(output.iter());
                    origins.extend(from.as_ref().map(|f| &f.origin));
                }
                ast::StepKind::Agent { from, .. } => {
                    origins.extend(from.as_ref().map(|f| &f.origin))
                }
                ast::StepKind::With { value, .. } => values.push(value),
                _ => {}
            }
            for out in &outputs {
                values.push(&out.value);
                origins.extend(out.origin.iter());
            }
            for v in values {
                let mut ecx = expr::Ctx::new(u, file, expr::Scope::Const);
                self.expr(&mut ecx, v);
            }
            for o in origins {
                let words: Vec<&str> = fields::ORIGINS
                    .iter()
                    .copied()
                    .chain(TEST_ORIGIN_WORDS.iter().copied())
                    .collect();
                if !words.contains(&o.name.as_str()) {
                    let mut d = Diagnostic::error(
                        Code::UnknownOrigin,
                        file,
                        o.span,
                        format!("`{}` is not an origin", o.name),
                    )
                    .with_label("unknown origin");
                    d = match did_you_mean(&o.name, words.iter().copied()) {
                        Some(s) => d
                            .with_help(format!("did you mean `{s}`?"))
                            .with_fix(o.span, s.to_string()),
                        None => d.with_help(format!("use one of {}", words.join(", "))),
                    };
                    self.diagnostics.push(d);
                }
            }
            let mut expectations: Vec<&ast::Expectation> = step.expect.iter().collect();
            for out in &outputs {
                expectations.extend(out.expect.iter());
            }
            for e in expectations {
                self.expected_codes
                    .extend(e.codes.iter().map(|c| (file, c.clone())));
            }
        }
    }

    /// A test that expects a reason code no rule can produce is almost certainly a typo.
    fn check_expected_codes(&mut self) {
        let expected = std::mem::take(&mut self.expected_codes);
        for (file, code) in expected {
            if code.value.starts_with("warden.") || self.reason_codes.contains(&code.value) {
                continue;
            }
            let mut d = Diagnostic::warning(
                Code::UnknownReasonCode,
                file,
                code.span,
                format!("no rule of this policy answers with `{}`", code.value),
            )
            .with_label("never produced");
            d = match did_you_mean(&code.value, self.reason_codes.iter().map(String::as_str)) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(
                    "reason codes come from the rules' decisions, e.g. `deny \"code\": …`",
                ),
            };
            self.diagnostics.push(d);
        }
    }

    fn report_unused(&mut self) {
        let loaded = self.loaded;
        let mut unused = Vec::new();
        for (u, unit) in loaded.units.iter().enumerate() {
            // Library modules export their names; only a policy's own unused names are noise.
            if !unit.is_root || is_library(unit) {
                continue;
            }
            for item in &unit.module.items {
                let (name, kind) = match item {
                    Item::Let(l) => (&l.name, "constant"),
                    Item::Label(l) => (&l.name, "label"),
                    Item::Pred(p) => (&p.name, "predicate"),
                    _ => continue,
                };
                let key = (self.ns[u], name.name.clone());
                if !name.name.starts_with('_') && self.used.get(&key).copied().unwrap_or(0) == 0 {
                    unused.push((u, name.clone(), kind));
                }
            }
        }
        for (u, name, kind) in unused {
            let file = self.file_of(u);
            self.diagnostics.push(
                Diagnostic::warning(
                    Code::Unused,
                    file,
                    name.span,
                    format!("the {kind} `{}` is never used", name.name),
                )
                .with_label("unused")
                .with_help("remove it, or prefix its name with `_` to keep it"),
            );
        }
    }

    fn mark_used(&mut self, ns: usize, name: &str) {
        *self.used.entry((ns, name.to_string())).or_default() += 1;
    }

    fn ns_of_file(&self, file: FileId) -> Option<usize> {
        self.loaded
            .units
            .iter()
            .position(|u| u.file == file)
            .map(|u| self.ns[u])
    }
}

/// Words a test may use for where content came from, besides the ACS origins.
pub const TEST_ORIGIN_WORDS: &[&str] = &["user", "trusted", "untrusted"];

/// A library module: it exports names and leaves the default to its users. That is a stdlib
/// module (package `std.…`) without a default, or a module with a `package` line and neither
/// rules nor a default (it can only be used). `check_files` also counts a file another checked
/// file uses.
fn is_library(unit: &Unit) -> bool {
    let package = unit.module.package();
    let std = package.is_some_and(|p| p.path.first().is_some_and(|i| i.name == "std"));
    let rules = unit.module.items.iter().any(|i| matches!(i, Item::Rule(_)));
    !has_default(unit) && (std || (package.is_some() && !rules))
}

fn last_segment(path: &str) -> &str {
    path.rsplit(['.'])
        .next()
        .unwrap_or(path)
        .trim_end_matches("[]")
}

fn place_text(place: &ast::Place) -> String {
    let mut s = String::new();
    for seg in &place.segments {
        match seg {
            ast::PlaceSegment::Field(id) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(&id.name);
            }
            ast::PlaceSegment::Index(i, _) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Two targets overlap when one is the other or an ancestor of it.
fn overlaps(a: &str, b: &str) -> bool {
    let prefix = |x: &str, y: &str| {
        x == y || (y.starts_with(x) && matches!(y.as_bytes().get(x.len()), Some(b'.') | Some(b'[')))
    };
    prefix(a, b) || prefix(b, a)
}

/// An error in a part of a decision.
fn part_error(
    file: FileId,
    code: Code,
    span: Span,
    msg: String,
    label: &str,
    help: &str,
) -> Diagnostic {
    Diagnostic::error(code, file, span, msg)
        .with_label(label)
        .with_help(help)
}
