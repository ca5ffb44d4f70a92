//! Lowering checked AST to bytecode.

use std::collections::HashMap;
use std::sync::Arc;

use super::program::*;
use crate::acs::fields::{self, HookSpec};
use crate::check;
use crate::check::builtins::{self, Lowering};
use crate::check::{Checked, Resolution, Table, Type};
use crate::diagnostics::{Diagnostic, FileId, Span};
use crate::syntax::ast::{
    self, BinaryOp, Expr, ExprKind, HistoryKind, Item, QuantifierKind, UnaryOp, WindowKind,
};

/// Default instruction budget for one decision (all rules, labels and history updates).
pub const DEFAULT_BUDGET: u64 = 200_000;

/// Compiles a checked policy. Fails with diagnostics if the checker reported errors or the
/// policy uses something the evaluator cannot run.
pub fn compile(checked: &Checked) -> Result<Program, Vec<Diagnostic>> {
    crate::syntax::on_deep_stack(|| compile_here(checked, &HashMap::new()))
}

/// Compiles with some `let` constants replaced by the given values (by constant name): the
/// test runner's `with NAME as VALUE` mocks. Everything that folds the constant (conditions,
/// the rule index by tool name) sees the override.
pub fn compile_with(
    checked: &Checked,
    overrides: &HashMap<String, Const>,
) -> Result<Program, Vec<Diagnostic>> {
    crate::syntax::on_deep_stack(|| compile_here(checked, overrides))
}

fn compile_here(
    checked: &Checked,
    overrides: &HashMap<String, Const>,
) -> Result<Program, Vec<Diagnostic>> {
    if checked.has_errors() {
        return Err(checked
            .diagnostics
            .items
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect());
    }
    let imports: Vec<crate::rego::RegoImport> =
        checked.loaded.rego.iter().map(|(_, i)| i.clone()).collect();
    let bridge = if imports.is_empty() {
        None
    } else {
        match crate::rego::Bridge::new(&imports) {
            Ok(b) => Some(Arc::new(b)),
            Err(e) => {
                let file = checked.loaded.rego[0].0;
                // Point at the file's first `use rego`.
                let span = checked
                    .loaded
                    .units
                    .iter()
                    .filter(|u| u.file == file)
                    .flat_map(|u| u.module.items.iter())
                    .find_map(|i| match i {
                        Item::Use(u) if !matches!(u.kind, ast::UseKind::Module { .. }) => {
                            Some(u.span)
                        }
                        _ => None,
                    })
                    .unwrap_or_default();
                return Err(vec![Diagnostic::error(
                    crate::diagnostics::Code::CompileRego,
                    file,
                    span,
                    format!("the Rego modules do not load together: {e}"),
                )
                .with_label("imported here")
                .with_help("check that the imported packages do not conflict")]);
            }
        }
    };
    let mut cx = Lower {
        checked,
        program: Program {
            budget: DEFAULT_BUDGET,
            rego: bridge,
            ..Program::default()
        },
        consts: HashMap::new(),
        paths: HashMap::new(),
        const_values: overrides.clone(),
        folded: HashMap::new(),
        label_bits: HashMap::new(),
        inline: Vec::new(),
        rego_values: HashMap::new(),
        errors: Vec::new(),
    };
    cx.labels();
    cx.effects();
    cx.items();
    cx.program.merge_rule_index();
    if cx.errors.is_empty() {
        Ok(cx.program)
    } else {
        Err(cx.errors)
    }
}

struct Lower<'a> {
    checked: &'a Checked,
    program: Program,
    consts: HashMap<String, u32>,
    paths: HashMap<(u8, String), u32>,
    /// Constant values given by name (the test runner's mocks).
    const_values: HashMap<String, Const>,
    /// Constants folded so far, by defining file and name (each module has its own names).
    folded: HashMap<(FileId, String), Const>,
    /// Label bits by defining file and name.
    label_bits: HashMap<(FileId, String), u8>,
    /// Predicates being inlined, innermost last.
    inline: Vec<Inline>,
    /// Rego values folded at compile time, by query (`None`: not foldable).
    rego_values: HashMap<String, Option<Const>>,
    errors: Vec<Diagnostic>,
}

/// A predicate being inlined: its parameters bound to the call's argument expressions, and
/// the caller's context to compile those arguments in.
struct Inline {
    params: Vec<(String, Expr)>,
    caller_file: FileId,
    caller_vars: Vec<(String, u16)>,
}

/// Where the code being compiled runs.
#[derive(Clone, Copy)]
enum Mode {
    /// A rule on this hook (also: a history key read from the event being decided).
    Rule(&'static HookSpec),
    /// A label predicate, over one provenance object.
    Label,
    /// A history filter or key, over the recorded event.
    Past,
}

struct Frame {
    file: FileId,
    mode: Mode,
    vars: Vec<(String, u16)>,
    next_var: u16,
}

fn unit_module_name(unit: &crate::check::Unit) -> String {
    match unit.module.package() {
        Some(p) => p
            .path
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join("."),
        None => unit.name.clone(),
    }
}

impl<'a> Lower<'a> {
    fn error(&mut self, file: FileId, span: Span, message: String, help: &str) {
        self.errors.push(
            Diagnostic::error(
                crate::diagnostics::Code::CompileUnsupported,
                file,
                span,
                message,
            )
            .with_label("cannot be compiled")
            .with_help(help),
        );
    }

    fn resolution(&self, file: FileId, span: Span) -> Option<&'a (Resolution, Type)> {
        self.checked.resolutions.get(&(file, span))
    }

    fn konst(&mut self, c: Const) -> u32 {
        // Keyed by content in written order (a HashSet's Debug order is not stable).
        let key = match &c {
            Const::StrSet(_, items) => format!("set{items:?}"),
            other => format!("{other:?}"),
        };
        if let Some(&k) = self.consts.get(&key) {
            return k;
        }
        let k = self.program.consts.len() as u32;
        self.program.consts.push(c);
        self.consts.insert(key, k);
        k
    }

    fn str_const(&mut self, s: &str) -> u32 {
        self.konst(Const::Str(Arc::from(s)))
    }

    fn path(&mut self, root: Root, dotted: &str) -> u32 {
        let tag = match root {
            Root::Payload => 0,
            Root::Metadata => 1,
            Root::Var(v) => 2 + v.min(250) as u8,
        };
        let key = (tag, dotted.to_string());
        if let Some(&p) = self.paths.get(&key) {
            return p;
        }
        let segs = if dotted.is_empty() {
            Vec::new()
        } else {
            dotted.split('.').map(|s| Seg::Key(Arc::from(s))).collect()
        };
        let p = self.program.paths.len() as u32;
        self.program.paths.push(PathSpec { root, segs });
        self.paths.insert(key, p);
        p
    }

    // -----------------------------------------------------------------------------------------
    // Items

    fn labels(&mut self) {
        let checked = self.checked;
        for unit in &checked.loaded.units {
            for item in &unit.module.items {
                let Item::Label(l) = item else { continue };
                let bit = self.program.labels.len();
                if bit >= 64 {
                    self.error(
                        unit.file,
                        l.name.span,
                        "a policy has at most 64 labels".into(),
                        "labels are a 64-bit set; merge some labels",
                    );
                    return;
                }
                // Two modules may each have a label of one name: the second is shown qualified.
                let name = if self.program.label_bit(&l.name.name).is_some() {
                    format!("{}.{}", unit_module_name(unit), l.name.name)
                } else {
                    l.name.name.clone()
                };
                self.label_bits
                    .insert((unit.file, l.name.name.clone()), bit as u8);
                self.program.labels.push(LabelSpec {
                    name: Arc::from(name.as_str()),
                    bit: bit as u8,
                    redact: l.redact,
                    code: None,
                });
            }
        }
        // Code after all bits exist (a label condition may test other labels' constants).
        let mut i = 0;
        for unit in &checked.loaded.units {
            for item in &unit.module.items {
                let Item::Label(l) = item else { continue };
                if let Some(when) = &l.when {
                    let mut frame = Frame {
                        file: unit.file,
                        mode: Mode::Label,
                        vars: Vec::new(),
                        next_var: 0,
                    };
                    let mut code = self.code(&mut frame, when);
                    // A Rego value as the whole condition: read as a Rego rule body.
                    if self.is_rego(unit.file, when) {
                        let ret = code.ops.len() - 1;
                        code.ops.insert(ret, Op::Truthy);
                        code.spans.insert(ret, when.span);
                    }
                    if let Some(spec) = self.program.labels.get_mut(i) {
                        spec.code = Some(code);
                    }
                }
                i += 1;
            }
        }
    }

    /// `effect` declarations, before the rules that read them.
    fn effects(&mut self) {
        let checked = self.checked;
        for unit in &checked.loaded.units {
            for item in &unit.module.items {
                let Item::Effect(e) = item else { continue };
                let Some(hook) = fields::hook("toolCallRequest") else {
                    return;
                };
                let mut frame = Frame {
                    file: unit.file,
                    mode: Mode::Rule(hook),
                    vars: Vec::new(),
                    next_var: 0,
                };
                let list = ast::Expr {
                    kind: ExprKind::List(e.key.clone()),
                    span: e.span,
                };
                let key = self.code(&mut frame, &list);
                self.program.effects.push(super::program::EffectSpec {
                    name: Arc::from(e.name.name.as_str()),
                    tool: Arc::from(e.tool.value.as_str()),
                    not_executed_on_error: e.not_executed_on_error,
                    key,
                    parts: e.key.len(),
                    lease_turns: match &e.lease {
                        Some(ast::Lease::Turns(n)) => Some(*n),
                        _ => None,
                    },
                    lease_ms: match &e.lease {
                        Some(ast::Lease::Time(d)) => Some(d.millis),
                        _ => None,
                    },
                });
            }
        }
    }

    fn items(&mut self) {
        let checked = self.checked;
        for unit in &checked.loaded.units {
            let module: Arc<str> = Arc::from(unit_module_name(unit).as_str());
            for item in &unit.module.items {
                match item {
                    Item::Mask(m) => {
                        let mut segs = Vec::new();
                        for (i, seg) in m.place.segments.iter().enumerate() {
                            match seg {
                                ast::PlaceSegment::Field(id) if i == 0 && id.name == "args" => {
                                    segs.push(Seg::Key(Arc::from("arguments")))
                                }
                                ast::PlaceSegment::Field(id) => {
                                    segs.push(Seg::Key(Arc::from(id.name.as_str())))
                                }
                                ast::PlaceSegment::Index(n, _) => {
                                    segs.push(Seg::Index(*n as usize))
                                }
                            }
                        }
                        self.program.masked.push(segs);
                    }
                    Item::Rule(r) => self.rule(unit.file, &module, r),
                    Item::Tool(t) => {
                        let params = t
                            .params
                            .iter()
                            .map(|p| super::program::ToolParamSpec {
                                name: Arc::from(p.name.name.as_str()),
                                optional: p.optional,
                                ty: p.ty.clone(),
                                role: p
                                    .role
                                    .as_ref()
                                    .and_then(|r| crate::roles::role_word(&r.name)),
                            })
                            .collect();
                        self.program.tools.insert(
                            Arc::from(t.name.value.as_str()),
                            super::program::ToolSpec {
                                params,
                                class: t
                                    .class
                                    .as_ref()
                                    .and_then(|c| crate::actions::class_word(&c.name)),
                            },
                        );
                    }
                    Item::Default(d) => {
                        let hooks: Vec<&'static HookSpec> = d
                            .hooks
                            .iter()
                            .filter_map(|h| fields::hook(&h.name))
                            .collect();
                        let first_hook = hooks.first().copied();
                        let mut frame = Frame {
                            file: unit.file,
                            mode: Mode::Rule(first_hook.unwrap_or(&fields::HOOKS[0])),
                            vars: Vec::new(),
                            next_var: 0,
                        };
                        let t = self.decision(&mut frame, &d.decision);
                        if hooks.is_empty() {
                            self.program.defaults.insert(None, t.clone());
                        }
                        for h in hooks {
                            self.program.defaults.insert(Some(h.method), t.clone());
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn rule(&mut self, file: FileId, module: &Arc<str>, r: &ast::RuleDecl) {
        let hooks: Vec<&'static HookSpec> = r
            .hooks
            .iter()
            .filter_map(|h| fields::hook(&h.name))
            .collect();
        let id = self.program.rules.len() as u32;
        // One code body serves every hook: the checker typed the condition on each of them,
        // and paths are looked up by name at run time.
        let Some(&first) = hooks.first() else { return };
        let mut frame = Frame {
            file,
            mode: Mode::Rule(first),
            vars: Vec::new(),
            next_var: 0,
        };
        let code = match &r.when {
            // A condition is a value: a bare tool argument (`when args.flag`) is its value.
            Some(when) => self.cond_code(&mut frame, when),
            None => {
                let k = self.konst(Const::Bool(true));
                Code {
                    ops: vec![Op::Const(k), Op::Return],
                    spans: vec![r.span, r.span],
                    vars: 0,
                }
            }
        };
        let decision = self.decision(&mut frame, &r.decision);
        let rego_source = r.rego.as_ref().map(|q| self.rego_ref(q.value.clone()));
        let tools = self.tool_filter(file, r.span);
        for h in &hooks {
            let ix = self.program.index.entry(h.method).or_default();
            match &tools {
                Some(names) => {
                    for n in names {
                        ix.by_tool.entry(n.clone()).or_default().push(id);
                    }
                }
                None => ix.any_tool.push(id),
            }
        }
        self.program.rules.push(CompiledRule {
            name: Arc::from(r.name.name.as_str()),
            qualified: Arc::from(format!("{module}.{}", r.name.name).as_str()),
            module: module.clone(),
            hooks,
            code,
            decision,
            rego_source,
            span: r.span,
            file,
        });
    }

    /// Tool names a rule's condition requires, from the checker's plan: the first top-level
    /// `tool.name == "x"` or `tool.name in CONST` conjunct whose names fold, so the rule runs
    /// only for those tools.
    fn tool_filter(&mut self, file: FileId, rule: Span) -> Option<Vec<Arc<str>>> {
        let checked = self.checked;
        let plan = checked.tool_plans.get(&(file, rule))?;
        plan.conjuncts
            .iter()
            .find_map(|c| match (c.op, self.fold(c.file, &c.names)?) {
                (BinaryOp::Eq, Const::Str(s)) => Some(vec![s]),
                (BinaryOp::In, Const::StrSet(set, _)) => {
                    let mut v: Vec<Arc<str>> = set.iter().cloned().collect();
                    v.sort();
                    Some(v)
                }
                _ => None,
            })
    }

    fn decision(&mut self, frame: &mut Frame, d: &ast::Decision) -> DecisionTemplate {
        let mut modifications = Vec::new();
        for m in &d.modifications {
            match m {
                ast::Modification::Redact {
                    place, replacement, ..
                } => {
                    let replacement = self.replacement(frame.file, replacement.as_ref());
                    modifications.push(ModTemplate::Redact {
                        pointer: place.pointer(),
                        replacement,
                    })
                }
                ast::Modification::RedactEach {
                    collection,
                    select,
                    replacement,
                    ..
                } => {
                    let replacement = self.replacement(frame.file, replacement.as_ref());
                    let select = self.value_code(frame, select);
                    modifications.push(ModTemplate::RedactEach {
                        base: collection.pointer(),
                        select,
                        replacement,
                    })
                }
                ast::Modification::Set { place, value, .. } => {
                    let argument = match place.segments.get(1) {
                        Some(ast::PlaceSegment::Field(id)) => id.name.clone(),
                        _ => String::new(),
                    };
                    let value = self.value_code(frame, value);
                    modifications.push(ModTemplate::Override { argument, value });
                }
                ast::Modification::Replace { content, .. } => {
                    let content = self.value_code(frame, content);
                    modifications.push(ModTemplate::Replace { content });
                }
            }
        }
        DecisionTemplate {
            kind: d.kind,
            code: d.reason.as_ref().map(|r| Arc::from(r.code.value.as_str())),
            reasoning: d
                .reason
                .as_ref()
                .and_then(|r| r.reasoning.as_ref())
                .map(|s| Arc::from(s.value.as_str())),
            approver: d
                .approver
                .as_ref()
                .map(|a| (a.kind, Arc::from(a.id.value.as_str()))),
            question: d.question.as_ref().map(|q| Arc::from(q.value.as_str())),
            timeout_ms: d.timeout.map(|t| t.millis),
            on_timeout: d.on_timeout.map(|(k, _)| k),
            expires_ms: d.expires.map(|t| t.millis),
            extend: d.extend.map(|(s, _)| s),
            resolve: d.resolve.as_ref().map(|i| Arc::from(i.name.as_str())),
            because: d.because.as_ref().map(|i| Arc::from(i.name.as_str())),
            modifications,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Constants

    /// Folds a constant expression, if it is one.
    /// A redaction's replacement: its constant folded (the checker made sure it is a constant
    /// string), `"[REDACTED]"` without one.
    fn replacement(&mut self, file: FileId, e: Option<&Expr>) -> String {
        match e.and_then(|e| self.fold(file, e)) {
            Some(Const::Str(s)) => s.to_string(),
            _ => crate::acs::envelope::DEFAULT_REDACTION.to_string(),
        }
    }

    fn fold(&mut self, file: FileId, e: &Expr) -> Option<Const> {
        Some(match &e.kind {
            ExprKind::Bool(b) => Const::Bool(*b),
            // Absent when read (`Val::from_const`); `null` inside JSON sent to Rego.
            ExprKind::Null => Const::Json(Arc::new(serde_json::Value::Null)),
            ExprKind::Number(n) => Const::Num(*n),
            ExprKind::Duration(d) => Const::Num(d.millis as f64),
            ExprKind::String(s) => Const::Str(Arc::from(s.as_str())),
            ExprKind::Member(..) => match self.resolution(file, e.span).cloned() {
                Some((Resolution::Rego { alias, rule }, _)) => {
                    self.rego_fold(file, &alias, &rule, None, e.span)?
                }
                // A qualified constant: `taint.consequential_tools`.
                Some((Resolution::Constant { name, file }, _)) => self.constant(&name, file)?,
                _ => return None,
            },
            ExprKind::Call(callee, args) => match self.resolution(file, callee.span).cloned() {
                Some((Resolution::Rego { alias, rule }, _)) => {
                    let import = self.rego_import(file, &alias)?;
                    if import.reads_input || args.iter().any(|a| a.name.is_some()) {
                        return None;
                    }
                    let mut values = Vec::new();
                    for a in args {
                        values.push(const_json(&self.fold(file, &a.value)?));
                    }
                    self.rego_fold(file, &alias, &rule, Some(values), e.span)?
                }
                _ => return None,
            },
            ExprKind::Name(_) => match self.resolution(file, e.span) {
                Some((Resolution::Constant { name, file }, _)) => self.constant(name, *file)?,
                Some((Resolution::EnumValue(v), _)) => Const::Str(Arc::from(v.as_str())),
                _ => return None,
            },
            ExprKind::Set(items) | ExprKind::List(items) => {
                let mut out: Vec<Const> = Vec::with_capacity(items.len());
                let is_set = matches!(e.kind, ExprKind::Set(_));
                for i in items {
                    let c = self.fold(file, i)?;
                    // A set holds each element once: `len({"a", "a"})` is 1.
                    if is_set && out.contains(&c) {
                        continue;
                    }
                    out.push(c);
                }
                collection(out)
            }
            ExprKind::Object(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    let c = self.fold(file, v)?;
                    map.insert(k.value.clone(), super::program::const_json(&c));
                }
                Const::Json(Arc::new(serde_json::Value::Object(map)))
            }
            ExprKind::Unary(UnaryOp::Neg, x) => match self.fold(file, x)? {
                Const::Num(n) => Const::Num(-n),
                _ => return None,
            },
            ExprKind::Unary(UnaryOp::Not, x) => match self.fold(file, x)? {
                Const::Bool(b) => Const::Bool(!b),
                _ => return None,
            },
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.fold(file, a)?, self.fold(file, b)?);
                match (op, a, b) {
                    (BinaryOp::Add, Const::Num(x), Const::Num(y)) => Const::Num(x + y),
                    (BinaryOp::Sub, Const::Num(x), Const::Num(y)) => Const::Num(x - y),
                    (BinaryOp::Mul, Const::Num(x), Const::Num(y)) => Const::Num(x * y),
                    (BinaryOp::Div, Const::Num(x), Const::Num(y)) if y != 0.0 => Const::Num(x / y),
                    (BinaryOp::Add, Const::Str(x), Const::Str(y)) => {
                        Const::Str(Arc::from(format!("{x}{y}").as_str()))
                    }
                    (BinaryOp::And, Const::Bool(x), Const::Bool(y)) => Const::Bool(x && y),
                    (BinaryOp::Or, Const::Bool(x), Const::Bool(y)) => Const::Bool(x || y),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// The value of the `let` constant `name` of the file `file`.
    fn constant(&mut self, name: &str, file: FileId) -> Option<Const> {
        if let Some(c) = self.const_values.get(name) {
            return Some(c.clone());
        }
        let key = (file, name.to_string());
        if let Some(c) = self.folded.get(&key) {
            return Some(c.clone());
        }
        let checked = self.checked;
        for unit in checked.loaded.units.iter().filter(|u| u.file == file) {
            for item in &unit.module.items {
                if let Item::Let(l) = item {
                    if l.name.name == name {
                        let c = self.fold(unit.file, &l.value);
                        match &c {
                            Some(c) => {
                                self.folded.insert(key, c.clone());
                            }
                            None => match self.rego_let_refusal(unit.file, name, &l.value) {
                                Some(d) => self.errors.push(d),
                                None => self.error(
                                    unit.file,
                                    l.value.span,
                                    format!("the constant `{name}` is not a constant value"),
                                    "a `let` holds literals, collections of literals, arithmetic on them, and Rego values that fold when the policy loads (docs/rego.md)",
                                ),
                            },
                        }
                        return c;
                    }
                }
            }
        }
        None
    }

    // -----------------------------------------------------------------------------------------
    // Expressions

    fn code(&mut self, frame: &mut Frame, e: &Expr) -> Code {
        let mut code = Code::default();
        self.expr(frame, e, &mut code);
        code.ops.push(Op::Return);
        code.spans.push(e.span);
        code.vars = frame.next_var;
        code
    }

    /// Code for a condition: a plain value, and a Rego value read as Rego reads a rule body.
    fn cond_code(&mut self, frame: &mut Frame, e: &Expr) -> Code {
        let mut code = Code::default();
        self.cond(frame, e, &mut code);
        code.ops.push(Op::Return);
        code.spans.push(e.span);
        code.vars = frame.next_var;
        code
    }

    /// Whether `e` is a Rego rule or a call of a Rego function.
    fn is_rego(&self, file: FileId, e: &Expr) -> bool {
        let span = match &e.kind {
            ExprKind::Member(..) => e.span,
            ExprKind::Call(callee, _) => callee.span,
            _ => return false,
        };
        matches!(
            self.resolution(file, span),
            Some((Resolution::Rego { .. }, _))
        )
    }

    /// Compiles `e` where a condition is read (`when`, the operands of `and`, `or` and `not`,
    /// a quantifier's body): a Rego value there is true unless undefined or `false`.
    fn cond(&mut self, frame: &mut Frame, e: &Expr, code: &mut Code) {
        self.value(frame, e, code);
        if self.bound_param(frame, e).is_none() && self.is_rego(frame.file, e) {
            Self::emit(code, Op::Truthy, e.span);
        }
    }

    /// Code producing a plain value (tool arguments unwrapped).
    fn value_code(&mut self, frame: &mut Frame, e: &Expr) -> Code {
        let mut code = Code::default();
        self.value(frame, e, &mut code);
        code.ops.push(Op::Return);
        code.spans.push(e.span);
        code.vars = frame.next_var;
        code
    }

    fn emit(code: &mut Code, op: Op, span: Span) -> usize {
        code.ops.push(op);
        code.spans.push(span);
        code.ops.len() - 1
    }

    fn patch(code: &mut Code, at: usize) {
        let target = code.ops.len() as u32;
        code.ops[at] = match code.ops[at] {
            Op::JumpIfFalse(_) => Op::JumpIfFalse(target),
            Op::JumpIfTrue(_) => Op::JumpIfTrue(target),
            other => other,
        };
    }

    /// The static type of an expression, as the checker saw it (for arguments: carrier).
    fn type_of(&self, frame: &Frame, e: &Expr) -> Option<Type> {
        match &e.kind {
            ExprKind::Name(n) => {
                if let Some(t) = self.resolution(frame.file, e.span).map(|(_, t)| t.clone()) {
                    return Some(t);
                }
                let _ = n;
                None
            }
            ExprKind::Member(..) | ExprKind::Index(..) => {
                self.resolution(frame.file, e.span).map(|(_, t)| t.clone())
            }
            _ => None,
        }
    }

    /// Compiles `e` as a plain value.
    fn value(&mut self, frame: &mut Frame, e: &Expr, code: &mut Code) {
        if let Some(arg) = self.bound_param(frame, e) {
            self.in_caller(frame, |cx, frame| cx.value(frame, &arg, code));
            return;
        }
        self.expr(frame, e, code);
        if self.type_of(frame, e) == Some(Type::Arg) {
            Self::emit(code, Op::Unwrap, e.span);
        }
    }

    /// Compiles a value sent to Rego (an argument, an `input:`, or a member or element of
    /// one) as `value` does, except that `null` stays JSON null instead of being absent.
    fn rego_value(&mut self, frame: &mut Frame, e: &Expr, code: &mut Code) {
        if self.bound_param(frame, e).is_none() {
            match &e.kind {
                ExprKind::Null => {
                    Self::emit(code, Op::JsonNull, e.span);
                    return;
                }
                ExprKind::List(items) if self.fold(frame.file, e).is_none() => {
                    for i in items {
                        self.rego_value(frame, i, code);
                    }
                    let n = items.len().min(u16::MAX as usize) as u16;
                    Self::emit(code, Op::MakeList(n), e.span);
                    return;
                }
                ExprKind::Object(entries) if self.fold(frame.file, e).is_none() => {
                    for (_, v) in entries {
                        self.rego_value(frame, v, code);
                    }
                    self.make_object(entries, e.span, code);
                    return;
                }
                _ => {}
            }
        }
        self.value(frame, e, code);
    }

    /// `make_obj` over the keys of an object literal whose values are on the stack.
    fn make_object(&mut self, entries: &[(ast::StringLit, Expr)], span: Span, code: &mut Code) {
        let keys = entries
            .iter()
            .map(|(k, _)| Const::Str(Arc::from(k.value.as_str())))
            .collect();
        let k = self.konst(Const::List(Arc::new(keys)));
        Self::emit(code, Op::MakeObject(k), span);
    }

    /// If `e` names a parameter of the predicate being inlined (and no quantifier variable of
    /// its body hides it), the argument expression bound to it.
    fn bound_param(&self, frame: &Frame, e: &Expr) -> Option<Expr> {
        let ExprKind::Name(n) = &e.kind else {
            return None;
        };
        if frame.vars.iter().any(|(v, _)| v == n) {
            return None;
        }
        let binding = self.inline.last()?;
        binding
            .params
            .iter()
            .find(|(p, _)| p == n)
            .map(|(_, arg)| arg.clone())
    }

    /// Runs `f` in the context of the innermost inlined predicate's caller (its file, its
    /// quantifier variables, the predicates it is itself inlined in).
    fn in_caller<R>(&mut self, frame: &mut Frame, f: impl FnOnce(&mut Self, &mut Frame) -> R) -> R {
        let Some(mut binding) = self.inline.pop() else {
            return f(self, frame);
        };
        let body_file = std::mem::replace(&mut frame.file, binding.caller_file);
        let body_vars =
            std::mem::replace(&mut frame.vars, std::mem::take(&mut binding.caller_vars));
        let r = f(self, frame);
        binding.caller_vars = std::mem::replace(&mut frame.vars, body_vars);
        frame.file = body_file;
        self.inline.push(binding);
        r
    }

    /// The declaration of the predicate `name` of the file `file`.
    fn pred_decl(&self, name: &str, file: FileId) -> Option<&'a ast::PredDecl> {
        self.checked
            .loaded
            .units
            .iter()
            .filter(|u| u.file == file)
            .flat_map(|u| u.module.items.iter())
            .find_map(|i| match i {
                Item::Pred(p) if p.name.name == name => Some(p),
                _ => None,
            })
    }

    /// A predicate call, inlined: the body compiled with each parameter standing for its
    /// argument. Code from a predicate written in another file points at the call.
    fn inline_pred(
        &mut self,
        frame: &mut Frame,
        name: &str,
        pred_file: FileId,
        args: &[ast::Arg],
        span: Span,
        code: &mut Code,
    ) {
        let Some(decl) = self.pred_decl(name, pred_file) else {
            self.error(
                frame.file,
                span,
                format!("the predicate `{name}` cannot be found"),
                "please report this policy",
            );
            return;
        };
        if self.inline.len() >= crate::syntax::MAX_NESTING {
            self.error(
                frame.file,
                span,
                format!("predicates are nested too deeply at `{name}`"),
                "predicates cannot call themselves; flatten the chain of calls",
            );
            return;
        }
        // The file whose text the code's spans index: the rule's or the label's.
        let origin = self.inline.first().map_or(frame.file, |b| b.caller_file);
        let params = decl
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| (p.name.name.clone(), a.value.clone()))
            .collect();
        self.inline.push(Inline {
            params,
            caller_file: frame.file,
            caller_vars: std::mem::take(&mut frame.vars),
        });
        let caller_file = std::mem::replace(&mut frame.file, pred_file);
        let start = code.ops.len();
        self.expr(frame, &decl.body, code);
        // The body is a condition: a Rego value there is read as Rego reads a rule body.
        if self.is_rego(frame.file, &decl.body) {
            Self::emit(code, Op::Truthy, decl.body.span);
        }
        if let Some(binding) = self.inline.pop() {
            frame.vars = binding.caller_vars;
        }
        frame.file = caller_file;
        if pred_file != origin {
            let body = decl.body.span;
            for s in &mut code.spans[start..] {
                if s.start >= body.start && s.end <= body.end {
                    *s = span;
                }
            }
        }
    }

    fn expr(&mut self, frame: &mut Frame, e: &Expr, code: &mut Code) {
        if let Some(arg) = self.bound_param(frame, e) {
            self.in_caller(frame, |cx, frame| cx.expr(frame, &arg, code));
            return;
        }
        if let Some(c) = self.fold(frame.file, e) {
            let k = self.konst(c);
            Self::emit(code, Op::Const(k), e.span);
            return;
        }
        match &e.kind {
            ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Duration(_) => {
                unreachable!("literals fold")
            }
            ExprKind::Name(name) => self.name(frame, name, e.span, code),
            ExprKind::Current => {
                let p = self.path(Root::Payload, "");
                Self::emit(code, Op::Path(p), e.span);
            }
            ExprKind::Member(base, field) => {
                if self.static_path(frame, e, code) {
                    return;
                }
                // A Rego rule that reads `input` (one that does not was folded above).
                if let Some((Resolution::Rego { alias, rule }, _)) =
                    self.resolution(frame.file, e.span).cloned()
                {
                    if let Some(import) = self.rego_import(frame.file, &alias) {
                        let id = self.rego_ref(import.path_of(&rule));
                        Self::emit(code, Op::Rego(id), e.span);
                    }
                    return;
                }
                // The intent's members.
                if let Some((Resolution::Builtin("intent"), _)) =
                    self.resolution(frame.file, base.span)
                {
                    let op = match field.name.as_str() {
                        "declared" => Op::IntentDeclared,
                        "raw" => Op::IntentRaw,
                        "scope_mode" => Op::IntentScopeMode,
                        "parsed" => Op::IntentParsed,
                        other => {
                            self.error(
                                frame.file,
                                field.span,
                                format!("`intent.{other}` cannot be evaluated yet"),
                                "use intent.declared, intent.raw, intent.scope_mode, intent.parsed or intent.permits(…)",
                            );
                            Op::IntentRaw
                        }
                    };
                    Self::emit(code, op, e.span);
                    return;
                }
                self.expr(frame, base, code);
                let k = self.str_const(&field.name);
                Self::emit(code, Op::Member(k), e.span);
            }
            ExprKind::Index(base, index) => {
                self.expr(frame, base, code);
                self.value(frame, index, code);
                Self::emit(code, Op::Index, e.span);
            }
            ExprKind::Call(callee, args) => self.call(frame, callee, args, e.span, code),
            ExprKind::Unary(op, x) => {
                if *op == UnaryOp::Not {
                    self.cond(frame, x, code);
                } else {
                    self.value(frame, x, code);
                }
                let op = match op {
                    UnaryOp::Not => Op::Not,
                    UnaryOp::Neg => Op::Neg,
                };
                Self::emit(code, op, e.span);
            }
            ExprKind::Binary(op, a, b) => self.binary(frame, *op, a, b, e.span, code),
            ExprKind::Set(items) | ExprKind::List(items) => {
                for i in items {
                    self.value(frame, i, code);
                }
                Self::emit(
                    code,
                    Op::MakeList(items.len().min(u16::MAX as usize) as u16),
                    e.span,
                );
            }
            // An object built at run time (constant ones folded above).
            ExprKind::Object(entries) => {
                for (_, v) in entries {
                    self.value(frame, v, code);
                }
                self.make_object(entries, e.span, code);
            }
            ExprKind::Quantifier {
                kind,
                key,
                var,
                over,
                body,
            } => {
                self.expr(frame, over, code);
                if self.type_of(frame, over) == Some(Type::Arg) {
                    Self::emit(code, Op::Elements, over.span);
                }
                let key_slot = match key {
                    Some(k) => {
                        let slot = frame.next_var;
                        frame.next_var += 1;
                        frame.vars.push((k.name.clone(), slot));
                        slot
                    }
                    // `each` keeps its elements' keys: a variable of its own if none is named.
                    None if *kind == QuantifierKind::Each => {
                        frame.next_var += 1;
                        frame.next_var - 1
                    }
                    None => u16::MAX,
                };
                let slot = frame.next_var;
                frame.next_var += 1;
                frame.vars.push((var.name.clone(), slot));
                Self::emit(code, Op::IterStart(key_slot), e.span);
                let next = Self::emit(code, Op::IterNext(slot, 0), e.span);
                self.cond(frame, body, code);
                let step = Self::emit(code, Op::Return, e.span);
                let end = match kind {
                    QuantifierKind::Each => Self::emit(code, Op::SelectEnd, e.span),
                    _ => Self::emit(code, Op::IterEnd(*kind == QuantifierKind::Any), e.span),
                };
                let done = code.ops.len() as u32;
                code.ops[next] = Op::IterNext(slot, end as u32);
                code.ops[step] = match kind {
                    QuantifierKind::Any => Op::AnyStep(next as u32, done),
                    QuantifierKind::All => Op::AllStep(next as u32, done),
                    QuantifierKind::Each => Op::SelectStep(key_slot, next as u32),
                };
                frame.vars.pop();
                if key.is_some() {
                    frame.vars.pop();
                }
            }
            ExprKind::History(h) => self.history(frame, h, e.span, code),
        }
    }

    /// Emits one `Path` for a member chain the checker resolved, link by link, to a static
    /// field path from a root name (`tool.name`, `metadata.environment`, `args.to`).
    fn static_path(&mut self, frame: &Frame, e: &Expr, code: &mut Code) -> bool {
        if !self.is_static_chain(frame, e) {
            return false;
        }
        let Some((r, _)) = self.resolution(frame.file, e.span) else {
            return false;
        };
        let (root, dotted) = match r {
            Resolution::Field { table, path } => {
                let root = match table {
                    Table::Metadata => Root::Metadata,
                    _ => Root::Payload,
                };
                (root, path.clone())
            }
            Resolution::Argument(name) => (Root::Payload, format!("arguments.{name}")),
            _ => return false,
        };
        let p = self.path(root, &dotted);
        Self::emit(code, Op::Path(p), e.span);
        true
    }

    fn is_static_chain(&self, frame: &Frame, e: &Expr) -> bool {
        let resolved = |span| match self.resolution(frame.file, span) {
            Some((Resolution::Field { path, .. }, _)) => !path.contains(['[', '*']),
            Some((Resolution::Argument(_), _)) => true,
            _ => false,
        };
        match &e.kind {
            ExprKind::Name(n) => !frame.vars.iter().any(|(v, _)| v == n) && resolved(e.span),
            ExprKind::Member(base, _) => resolved(e.span) && self.is_static_chain(frame, base),
            _ => false,
        }
    }

    fn name(&mut self, frame: &mut Frame, name: &str, span: Span, code: &mut Code) {
        if let Some(&(_, slot)) = frame.vars.iter().rev().find(|(v, _)| v == name) {
            let p = self.path(Root::Var(slot), "");
            Self::emit(code, Op::Path(p), span);
            return;
        }
        match self.resolution(frame.file, span).map(|(r, _)| r.clone()) {
            Some(Resolution::Field { table, path }) => {
                let root = if table == Table::Metadata {
                    Root::Metadata
                } else {
                    Root::Payload
                };
                let p = self.path(root, &path);
                Self::emit(code, Op::Path(p), span);
            }
            // A constant that did not fold was reported where it is defined.
            Some(Resolution::Constant { .. }) if !self.errors.is_empty() => {}
            Some(Resolution::Label { name: l, .. }) => self.error(
                frame.file,
                span,
                format!("the label `{l}` is not a value"),
                "use a label after `has` or in `turns_since(…)`",
            ),
            _ => self.error(
                frame.file,
                span,
                format!("`{name}` cannot be evaluated here"),
                "please report this policy",
            ),
        }
    }

    /// Why `let name = value` does not fold when `value` is a Rego rule or call: the rule reads
    /// `input` (or is called with one), or it has no value when the policy loads. `None` when
    /// `value` is not a Rego reference (the generic refusal applies).
    fn rego_let_refusal(&self, file: FileId, name: &str, value: &Expr) -> Option<Diagnostic> {
        let (callee, input_arg) = match &value.kind {
            ExprKind::Member(..) => (value, false),
            ExprKind::Call(callee, args) => (&**callee, args.iter().any(|a| a.name.is_some())),
            _ => return None,
        };
        let Some((Resolution::Rego { alias, rule }, _)) = self.resolution(file, callee.span) else {
            return None;
        };
        let import = self.rego_import(file, alias)?;
        let path = import.path_of(rule);
        let shown = self.src_text(file, value.span);
        let d = if import.reads_input || input_arg {
            Diagnostic::error(
                crate::diagnostics::Code::CompileRegoLetInput,
                file,
                value.span,
                format!(
                    "the constant `{name}` is the Rego rule `{path}`, which reads `input`: it has a value only once a step is decided, and a `let` is fixed when the policy loads"
                ),
            )
            .with_label("depends on the step's `input`")
            .with_help(format!(
                "read it where it is used, in a rule's `when` or a `pred` (`pred {name}() = {shown}`), which runs for each step"
            ))
        } else {
            Diagnostic::error(
                crate::diagnostics::Code::CompileRegoLetNoValue,
                file,
                value.span,
                format!(
                    "the constant `{name}` has no value: the Rego rule `{path}` is undefined (or `null`, which Warden reads as absent) when the policy loads"
                ),
            )
            .with_label("no value to fold into the constant")
            .with_help(format!(
                "give the rule a value in every case (`default {rule} := false` in its Rego module), or read it where it is used (`when {shown}`), where a rule with no value is absent (docs/rego.md, \"Values\")"
            ))
        };
        Some(d)
    }

    /// The source text of `span` in `file`, or `…` when it is not at hand.
    fn src_text(&self, file: FileId, span: Span) -> String {
        self.checked
            .loaded
            .sources
            .get(file)
            .text
            .get(span.range())
            .unwrap_or("…")
            .to_string()
    }

    fn rego_import(&self, file: FileId, alias: &str) -> Option<&'a crate::rego::RegoImport> {
        self.checked
            .loaded
            .rego
            .iter()
            .find(|(f, i)| *f == file && i.alias == alias)
            .map(|(_, i)| i)
    }

    /// The id of a Rego rule or function called at run time.
    fn rego_ref(&mut self, path: String) -> u32 {
        match self.program.rego_refs.iter().position(|p| *p == path) {
            Some(i) => i as u32,
            None => {
                self.program.rego_refs.push(path);
                self.program.rego_refs.len() as u32 - 1
            }
        }
    }

    /// Folds a Rego rule (or a function of constants) whose package never reads `input`:
    /// evaluated once, now, and inlined as a constant.
    fn rego_fold(
        &mut self,
        file: FileId,
        alias: &str,
        rule: &str,
        args: Option<Vec<serde_json::Value>>,
        span: Span,
    ) -> Option<Const> {
        let import = self.rego_import(file, alias)?;
        if import.reads_input {
            return None;
        }
        let path = import.path_of(rule);
        let query = match &args {
            None => path.clone(),
            Some(a) => format!("{path}({})", serde_json::Value::Array(a.clone())),
        };
        if let Some(hit) = self.rego_values.get(&query) {
            return hit.clone();
        }
        let bridge = self.program.rego.clone()?;
        let result = match &args {
            None => bridge.eval(&path, None),
            Some(a) => bridge.call(&path, a, &serde_json::json!({})),
        };
        let folded = match result {
            // JSON `null` is absent in Warden: not folded, like undefined.
            Ok(Some(serde_json::Value::Null)) => None,
            Ok(Some(v)) => Some(json_const(&v)),
            // Undefined has no constant: the rule is evaluated at run time, where it is absent.
            Ok(None) => None,
            Err(e) => {
                self.error(
                    file,
                    span,
                    format!("evaluating the Rego rule `{query}` failed: {e}"),
                    "fix the Rego rule",
                );
                None
            }
        };
        if let Some(c) = &folded {
            let k = self.konst(c.clone());
            if !self.program.rego_folded.iter().any(|(i, _)| *i == k) {
                self.program.rego_folded.push((k, query.clone()));
            }
        }
        self.rego_values.insert(query, folded.clone());
        folded
    }

    fn label_bit(&mut self, frame: &Frame, e: &Expr) -> u8 {
        // A label, bare or qualified (`taint.untrusted`), by the file that defines it.
        if let Some((Resolution::Label { name, file }, _)) = self.resolution(frame.file, e.span) {
            if let Some(&bit) = self.label_bits.get(&(*file, name.clone())) {
                return bit;
            }
        }
        self.error(
            frame.file,
            e.span,
            "expected a label".into(),
            "name a declared label",
        );
        0
    }

    /// The constant of an origin written bare or quoted (`tool_output`, `"retrieved"`).
    fn origin_const(&mut self, e: &Expr) -> u32 {
        let origin = match &e.kind {
            ExprKind::Name(n) | ExprKind::String(n) => n.clone(),
            _ => String::new(),
        };
        self.str_const(&origin)
    }

    fn call(
        &mut self,
        frame: &mut Frame,
        callee: &Expr,
        args: &[ast::Arg],
        span: Span,
        code: &mut Code,
    ) {
        match self
            .resolution(frame.file, callee.span)
            .map(|(r, _)| r.clone())
        {
            Some(Resolution::Builtin("intent.permits")) => {
                let mut flags = 0u8;
                let tool = args.iter().find(|a| a.name.is_none());
                match tool {
                    Some(a) => self.expr(frame, &a.value, code),
                    None => {
                        let p = self.path(Root::Payload, "tool");
                        Self::emit(code, Op::Path(p), span);
                    }
                }
                for (name, bit) in [("operation", 1u8), ("resource", 2u8)] {
                    if let Some(a) = args
                        .iter()
                        .find(|a| a.name.as_ref().is_some_and(|n| n.name == name))
                    {
                        self.value(frame, &a.value, code);
                        flags |= bit;
                    }
                }
                Self::emit(code, Op::IntentPermits(flags), span);
            }
            Some(Resolution::Builtin(name)) => match name {
                "turns_since" => {
                    let bit = self.label_bit(frame, &args[0].value);
                    Self::emit(code, Op::TurnsSince(bit), span);
                }
                "derived_from" => {
                    self.expr(frame, &args[0].value, code);
                    let k = self.origin_const(&args[1].value);
                    Self::emit(code, Op::DerivedFrom(k), span);
                }
                "sources" => {
                    self.expr(frame, &args[0].value, code);
                    Self::emit(code, Op::Sources, span);
                }
                "lineage_inferred" => {
                    self.expr(frame, &args[0].value, code);
                    Self::emit(code, Op::LineageInferred, span);
                }
                "read_at" => {
                    self.program.reads_places = true;
                    self.expr(frame, &args[0].value, code);
                    Self::emit(code, Op::ReadAt, span);
                }
                "requested_by_user" => {
                    self.program.reads_requested = true;
                    Self::emit(code, Op::Requested, span);
                }
                "links" => {
                    self.expr(frame, &args[0].value, code);
                    Self::emit(code, Op::Links, span);
                }
                "role" => {
                    self.value(frame, &args[0].value, code);
                    Self::emit(code, Op::Role, span);
                }
                "effect_class" => {
                    Self::emit(code, Op::EffectClass, span);
                }
                "requested" => {
                    self.value(frame, &args[0].value, code);
                    Self::emit(code, Op::AskedFor, span);
                }
                "delegated" => {
                    Self::emit(code, Op::Delegated, span);
                }
                "requested_object" => {
                    Self::emit(code, Op::RequestedObject, span);
                }
                "found_in" => {
                    self.expr(frame, &args[0].value, code);
                    let k = self.origin_const(&args[1].value);
                    Self::emit(code, Op::FoundIn(k), span);
                }
                "taken_from" | "taken_only_from" => {
                    let all = name == "taken_only_from";
                    self.expr(frame, &args[0].value, code);
                    let what = &args[1].value;
                    if let Some((Resolution::Label { .. }, _)) =
                        self.resolution(frame.file, what.span)
                    {
                        let bit = self.label_bit(frame, what);
                        Self::emit(code, Op::TakenFromLabel(bit, all), span);
                    } else {
                        let k = self.origin_const(what);
                        Self::emit(code, Op::TakenFromOrigin(k, all), span);
                    }
                }
                "lineage_depth" => {
                    self.expr(frame, &args[0].value, code);
                    Self::emit(code, Op::LineageDepth, span);
                }
                "effect_state" => {
                    let id = match args.first().map(|a| &a.value.kind) {
                        Some(ExprKind::Name(n) | ExprKind::String(n)) => self
                            .program
                            .effects
                            .iter()
                            .position(|e| &*e.name == n.as_str())
                            .map_or(u32::MAX - 1, |i| i as u32),
                        _ => u32::MAX,
                    };
                    Self::emit(code, Op::EffectState(id), span);
                }
                "present" => {
                    // An argument is present when its value is (`{value: null}` is not).
                    self.value(frame, &args[0].value, code);
                    Self::emit(code, Op::Present, span);
                }
                other => {
                    let b = match builtins::builtin(other).map(|b| b.lowering) {
                        Some(Lowering::Vm(b)) => b,
                        _ => {
                            self.error(
                                frame.file,
                                span,
                                format!("the builtin `{other}` cannot be compiled"),
                                "please report this policy",
                            );
                            return;
                        }
                    };
                    for a in args {
                        self.value(frame, &a.value, code);
                    }
                    Self::emit(code, Op::Call(b, args.len() as u8), span);
                }
            },
            Some(Resolution::Predicate { name, file }) => {
                self.inline_pred(frame, &name, file, args, span, code)
            }
            Some(Resolution::Rego { alias, rule }) => {
                let Some(import) = self.rego_import(frame.file, &alias) else {
                    return;
                };
                let id = self.rego_ref(import.path_of(&rule));
                // `input: {…}`: the input the rule sees (the checker allows no other name).
                let input = args.iter().find(|a| a.name.is_some());
                let positional: Vec<&ast::Arg> = args.iter().filter(|a| a.name.is_none()).collect();
                for a in &positional {
                    self.rego_value(frame, &a.value, code);
                }
                let argc = positional.len().min(255) as u8;
                match input {
                    Some(i) => {
                        self.rego_value(frame, &i.value, code);
                        Self::emit(code, Op::RegoInput(id, argc), span);
                    }
                    None => {
                        Self::emit(code, Op::RegoCall(id, argc), span);
                    }
                }
            }
            _ => self.error(
                frame.file,
                span,
                "this call cannot be compiled".into(),
                "please report this policy",
            ),
        }
    }

    fn binary(
        &mut self,
        frame: &mut Frame,
        op: BinaryOp,
        a: &Expr,
        b: &Expr,
        span: Span,
        code: &mut Code,
    ) {
        match op {
            BinaryOp::And | BinaryOp::Or => {
                self.cond(frame, a, code);
                let jump = if op == BinaryOp::And {
                    Self::emit(code, Op::JumpIfFalse(0), span)
                } else {
                    Self::emit(code, Op::JumpIfTrue(0), span)
                };
                self.cond(frame, b, code);
                Self::emit(
                    code,
                    if op == BinaryOp::And {
                        Op::AndJoin
                    } else {
                        Op::OrJoin
                    },
                    span,
                );
                Self::patch(code, jump);
            }
            BinaryOp::Has => {
                self.expr(frame, a, code);
                let bit = self.label_bit(frame, b);
                Self::emit(code, Op::Has(bit), span);
            }
            BinaryOp::Matches => {
                self.value(frame, a, code);
                let pattern = match self.fold(frame.file, b) {
                    Some(Const::Str(p)) => p,
                    _ => {
                        self.error(
                            frame.file,
                            b.span,
                            "the pattern of `matches` must be a constant string".into(),
                            "write the regular expression as a literal or a `let` constant",
                        );
                        return;
                    }
                };
                let id = match self
                    .program
                    .regexes
                    .iter()
                    .position(|r| r.as_str() == &*pattern)
                {
                    Some(i) => i,
                    None => match regex::Regex::new(&pattern) {
                        Ok(re) => {
                            self.program.regexes.push(crate::compile::Pattern(re));
                            self.program.regexes.len() - 1
                        }
                        Err(e) => {
                            self.errors.push(check::bad_regex(frame.file, b.span, &e));
                            return;
                        }
                    },
                };
                Self::emit(code, Op::Matches(id as u32), span);
            }
            _ => {
                self.value(frame, a, code);
                self.value(frame, b, code);
                let op = match op {
                    BinaryOp::Eq => Op::Eq,
                    BinaryOp::Ne => Op::Ne,
                    BinaryOp::Lt => Op::Lt,
                    BinaryOp::Le => Op::Le,
                    BinaryOp::Gt => Op::Gt,
                    BinaryOp::Ge => Op::Ge,
                    BinaryOp::In => Op::In,
                    BinaryOp::NotIn => Op::NotIn,
                    BinaryOp::Add => Op::Add,
                    BinaryOp::Sub => Op::Sub,
                    BinaryOp::Mul => Op::Mul,
                    BinaryOp::Div => Op::Div,
                    _ => Op::Rem,
                };
                Self::emit(code, op, span);
            }
        }
    }

    fn history(&mut self, frame: &mut Frame, h: &ast::History, span: Span, code: &mut Code) {
        let Some(past) = fields::hook(&h.hook.name) else {
            return;
        };
        let current = match frame.mode {
            Mode::Rule(c) => c,
            _ => return,
        };
        // Split the filter into key equalities (`past == $.cur`) and the rest.
        // The checker's plan says which conjuncts are keys.
        let (rest, key_pairs) = match &h.filter {
            Some(f) => {
                let split = self.checked.history_plan(frame.file, f).split(f);
                (split.rest, split.keys)
            }
            None => (Vec::new(), Vec::new()),
        };
        let mut past_frame = Frame {
            file: frame.file,
            mode: Mode::Past,
            vars: Vec::new(),
            next_var: 0,
        };
        let filter = if rest.is_empty() {
            None
        } else {
            let mut c = Code::default();
            for (i, e) in rest.iter().enumerate() {
                self.value(&mut past_frame, e, &mut c);
                if i > 0 {
                    // Conjuncts of a filter: both must hold (Kleene and, no short-circuit).
                    Self::emit(&mut c, Op::AndJoin, e.span);
                }
            }
            Self::emit(&mut c, Op::Return, span);
            c.vars = past_frame.next_var;
            Some(c)
        };
        let mut key_past = Vec::new();
        let mut key_current = Vec::new();
        for (p, cur) in &key_pairs {
            key_past.push(self.value_code(&mut past_frame, p));
            let mut cur_frame = Frame {
                file: frame.file,
                mode: Mode::Rule(current),
                vars: Vec::new(),
                next_var: 0,
            };
            key_current.push(self.value_code(&mut cur_frame, cur));
        }
        if let Some(by) = &h.by {
            key_past.push(self.value_code(&mut past_frame, by));
            let mut cur_frame = Frame {
                file: frame.file,
                mode: Mode::Rule(current),
                vars: Vec::new(),
                next_var: 0,
            };
            key_current.push(self.value_code(&mut cur_frame, by));
        }
        let window = match h.window.as_ref().map(|w| &w.kind) {
            None | Some(WindowKind::Session) => WindowSpec::Session,
            Some(WindowKind::ThisTurn) => WindowSpec::ThisTurn,
            Some(WindowKind::LastTurns(n)) => WindowSpec::LastTurns(*n),
            Some(WindowKind::LastTime(d)) => WindowSpec::LastMillis(d.millis.max(1)),
        };
        let keyed = !key_current.is_empty();
        let slot = HistorySlot {
            hook: past,
            filter,
            key_past,
            key_current: key_current.clone(),
            window,
        };
        let id = match self.program.history.iter().position(|s| *s == slot) {
            Some(i) => i as u32,
            None => {
                self.program.history.push(slot);
                let id = self.program.history.len() as u32 - 1;
                self.program
                    .history_by_hook
                    .entry(past.method)
                    .or_default()
                    .push(id);
                id
            }
        };
        if keyed {
            // Evaluate the current key parts inline, then look the counter up.
            let mut cur_frame = Frame {
                file: frame.file,
                mode: Mode::Rule(current),
                vars: Vec::new(),
                next_var: frame.next_var,
            };
            let parts: Vec<&Expr> = key_pairs
                .iter()
                .map(|(_, c)| *c)
                .chain(h.by.as_ref())
                .collect();
            for p in &parts {
                self.value(&mut cur_frame, p, code);
            }
            if parts.len() > 1 {
                Self::emit(code, Op::MakeList(parts.len() as u16), span);
            }
            Self::emit(code, Op::HistoryKeyed(id), span);
        } else {
            Self::emit(code, Op::History(id), span);
        }
        if h.kind == HistoryKind::Exists {
            let zero = self.konst(Const::Num(0.0));
            Self::emit(code, Op::Const(zero), span);
            Self::emit(code, Op::Gt, span);
        }
    }
}
