//! Hover, go-to-definition, find-references, symbols and code actions: lookups in the
//! checker's resolution table and definitions, at a byte offset of the document.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lsp_types as lt;
use lsp_types::Url;

use super::convert;
use super::document::{Analysis, Document};
use crate::acs::fields::{self, HookSpec};
use crate::check::{self, DefKind, Definition, Resolution, Table, Type};
use crate::diagnostics::{FileId, SourceFile, Span};
use crate::syntax::ast::{self, Item};

/// The innermost name the checker resolved at `offset` of `file`.
pub fn resolution_at(
    analysis: &Analysis,
    file: FileId,
    offset: usize,
) -> Option<(Span, &Resolution, &Type)> {
    analysis
        .checked
        .resolutions
        .iter()
        .filter(|((f, span), _)| *f == file && span.contains(offset))
        .min_by_key(|((_, span), _)| (span.len(), span.start))
        .map(|((_, span), (r, t))| (*span, r, t))
}

/// The definition whose name is at `offset` of `file`.
pub fn definition_at(analysis: &Analysis, file: FileId, offset: usize) -> Option<&Definition> {
    analysis
        .checked
        .definitions
        .iter()
        .find(|d| d.file == file && d.span.contains(offset))
}

/// The `use` item of the root file whose path or alias is at `offset`.
fn use_at(analysis: &Analysis, offset: usize) -> Option<&ast::Use> {
    let unit = analysis.checked.loaded.units.first()?;
    unit.module.items.iter().find_map(|i| match i {
        Item::Use(u) if u.span.contains(offset) => Some(u),
        _ => None,
    })
}

/// The part of a qualified name's span after its last dot (`taint.untrusted` → `untrusted`).
fn last_name(text: &str, span: Span) -> Span {
    let s = &text[span.range()];
    match s.rfind('.') {
        Some(i) => Span::new(span.start as usize + i + 1, span.end as usize),
        None => span,
    }
}

fn code_block(body: &str) -> String {
    format!("```ward\n{body}\n```")
}

fn item_text(analysis: &Analysis, d: &Definition) -> String {
    let text = &analysis.source(d.file).text;
    let s = text.get(d.item_span.range()).unwrap_or("");
    let mut lines: Vec<&str> = s.lines().take(12).collect();
    // An item's span can run over the comments and blank lines after it.
    while lines.len() > 1
        && lines.last().is_some_and(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with("//") || t.starts_with('#')
        })
    {
        lines.pop();
    }
    let mut out = lines.join("\n");
    if s.lines().count() > 12 {
        out.push_str("\n…");
    }
    out
}

fn where_defined(analysis: &Analysis, d: &Definition) -> String {
    if d.file == analysis.root() {
        return String::new();
    }
    let unit = analysis
        .checked
        .loaded
        .units
        .iter()
        .find(|u| u.file == d.file);
    match unit {
        Some(u) => format!("\n\ndefined in `{}`", u.name),
        None => String::new(),
    }
}

pub fn decisions(h: &HookSpec) -> String {
    h.decision_words()
}

pub fn hook_markdown(h: &HookSpec) -> String {
    let mut s = format!(
        "{}\n\n{}\n\nACS method `{}`",
        code_block(&format!("on {}", h.name)),
        h.doc,
        h.method
    );
    if h.audit_only {
        s.push_str(" · audit-only: recorded, never blocked");
    } else {
        s.push_str(&format!(" · may return {}", decisions(h)));
    }
    s
}

/// The ACS meaning of a field, for hover and completion.
pub fn field_markdown(table: Table, path: &str, t: &Type) -> String {
    let shown = match (table, path) {
        (Table::Metadata, "") => {
            return format!(
                "{}\n\nthe request's ACS metadata (`params.metadata`)",
                code_block("metadata: object")
            )
        }
        (Table::Payload(h), "") => {
            return format!(
                "{}\n\n{}",
                code_block(&format!("payload: object ({})", h.name)),
                h.doc
            )
        }
        (Table::Metadata, p) => format!("metadata.{p}"),
        (Table::Payload(_), "arguments") => "args".to_string(),
        (_, p) => p.to_string(),
    };
    let mut s = code_block(&format!("{shown}: {t}"));
    if let Some(f) = fields::lookup(table.fields(), path) {
        s.push_str("\n\n");
        s.push_str(f.doc);
        s.push_str(if f.required {
            "\n\nrequired"
        } else {
            "\n\noptional"
        });
    }
    if let Type::Enum(values) = t {
        s.push_str(&format!("; one of `{}`", values.join("`, `")));
    }
    s.push_str(&format!(" · {}", table.describe()));
    s
}

pub fn builtin_markdown(name: &str) -> String {
    match name {
        "intent" => format!(
            "{}\n\nThe session's declared intent (IBAC): `raw`, `parsed`, `scope_mode`, `declared` and `permits(tool, resource: …)`",
            code_block("intent: intent")
        ),
        _ => match check::builtins::spec(name) {
            Some(b) => {
                let (signature, text) = b.signature_and_text();
                format!("{}\n\n{text}", code_block(&signature))
            }
            None => code_block(name),
        },
    }
}

pub fn hover(doc: &Document, offset: usize) -> Option<lt::Hover> {
    let a = &doc.analysis;
    let root = a.root();
    let (span, value) = if let Some(d) = definition_at(a, root, offset) {
        (d.span, definition_markdown(a, d))
    } else if let Some((span, r, t)) = resolution_at(a, root, offset) {
        let span = last_name(doc.text(), span);
        (span, resolution_markdown(a, root, r, t)?)
    } else if let Some(u) = use_at(a, offset) {
        (u.span, use_markdown(a, u))
    } else {
        return None;
    };
    Some(lt::Hover {
        contents: lt::HoverContents::Markup(lt::MarkupContent {
            kind: lt::MarkupKind::Markdown,
            value,
        }),
        range: Some(doc.range(span)),
    })
}

fn definition_markdown(a: &Analysis, d: &Definition) -> String {
    match d.kind {
        DefKind::Rule => {
            let head = a.source(d.file).text[d.item_span.range()]
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            format!("{}\n\n{}", code_block(&head), d.detail)
        }
        _ => format!("{}{}", code_block(&item_text(a, d)), where_defined(a, d)),
    }
}

fn resolution_markdown(a: &Analysis, file: FileId, r: &Resolution, t: &Type) -> Option<String> {
    Some(match r {
        Resolution::Field { table, path } => field_markdown(*table, path, t),
        Resolution::Argument(name) => format!(
            "{}\n\nThe argument `{name}` of the tool call: its value, with its provenance (`args.{name} has untrusted`, `derived_from(args.{name}, tool_output)`)",
            code_block(&format!("args.{name}: tool argument"))
        ),
        Resolution::Constant { name, file } => match a.checked.definition_in(DefKind::Constant, name, *file) {
            Some(d) => format!("{}\n\n`{name}`: {t}{}", code_block(&item_text(a, d)), where_defined(a, d)),
            None => code_block(&format!("let {name}: {t}")),
        },
        Resolution::Label { name, file } => match a.checked.definition_in(DefKind::Label, name, *file) {
            Some(d) => format!("{}\n\nlabel{}", code_block(&item_text(a, d)), where_defined(a, d)),
            None => code_block(&format!("label {name}")),
        },
        Resolution::Predicate { name, file } => match a.checked.definition_in(DefKind::Predicate, name, *file) {
            Some(d) => format!("{}\n\npredicate (inlined where it is called){}", code_block(&item_text(a, d)), where_defined(a, d)),
            None => code_block(&format!("pred {name}(…)")),
        },
        Resolution::Variable(name) => format!("{}\n\nquantifier variable or predicate parameter", code_block(&format!("{name}: {t}"))),
        Resolution::EnumValue(v) => match t {
            Type::Enum(values) => format!("{}\n\none of `{}`", code_block(v), values.join("`, `")),
            _ => code_block(v),
        },
        Resolution::Rego { alias, rule } => {
            let target = rego_target(a, file, alias, rule);
            let mut s = format!("{}\n\nRego rule `{rule}` of `{alias}`", code_block(&format!("{alias}.{rule}: JSON value")));
            if let Some((path, line)) = target {
                let dir = a.checked.loaded.units.iter().find(|u| u.file == file).and_then(|u| u.dir.as_deref());
                let shown = dir.and_then(|d| path.strip_prefix(d).ok()).unwrap_or(&path);
                s.push_str(&format!(" (`{}`", shown.display()));
                if let Some((_, text)) = line {
                    s.push_str(&format!(": `{}`", text.trim()));
                }
                s.push(')');
            }
            s
        }
        Resolution::Builtin(name) => builtin_markdown(name),
        Resolution::Hook(h) => hook_markdown(h),
    })
}

fn use_markdown(a: &Analysis, u: &ast::Use) -> String {
    match &u.kind {
        ast::UseKind::Module { path } => {
            let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
            let name = name.join(".");
            let unit = a.checked.loaded.units.iter().find(|x| x.name == name);
            let intro = unit
                .map(|x| leading_comment(&a.source(x.file).text))
                .unwrap_or_default();
            format!("{}\n\n{intro}", code_block(&format!("use {name}")))
        }
        ast::UseKind::Rego { path } | ast::UseKind::RegoData { path } => {
            format!(
                "{}\n\nRego from `{}`",
                code_block(&format!("use rego \"{}\"", path.value)),
                path.value
            )
        }
    }
}

/// The comment block a module starts with, without its markers.
fn leading_comment(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(c) = t.strip_prefix("//").or_else(|| t.strip_prefix('#')) {
            out.push(c.trim().to_string());
        } else {
            break;
        }
    }
    out.join("\n")
}

/// The `.rego` file (and the line defining `rule`, if found) a Rego alias points at.
type RegoTarget = (PathBuf, Option<(usize, String)>);

fn rego_target(a: &Analysis, file: FileId, alias: &str, rule: &str) -> Option<RegoTarget> {
    let unit = a.checked.loaded.units.iter().find(|u| u.file == file)?;
    let dir = unit.dir.as_ref()?;
    let path = unit.module.items.iter().find_map(|i| match i {
        Item::Use(u) if u.local_name().is_some_and(|l| l.name == alias) => match &u.kind {
            ast::UseKind::Rego { path } | ast::UseKind::RegoData { path } => {
                Some(path.value.clone())
            }
            _ => None,
        },
        _ => None,
    })?;
    rego_file(&dir.join(path), rule)
}

fn rego_file(full: &Path, rule: &str) -> Option<RegoTarget> {
    let files: Vec<PathBuf> = if full.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(full)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rego"))
            .collect();
        v.sort();
        v
    } else {
        vec![full.to_path_buf()]
    };
    for f in &files {
        if let Ok(text) = std::fs::read_to_string(f) {
            if let Some(line) = rego_rule_line(&text, rule) {
                let l = text.lines().nth(line).unwrap_or("").to_string();
                return Some((f.clone(), Some((line, l))));
            }
        }
    }
    files.first().map(|f| (f.clone(), None))
}

/// The first line of a Rego module that defines `rule` (`rule := …`, `rule if …`, `rule { … }`,
/// `rule(x) …`, `default rule := …`, `rule contains …`).
fn rego_rule_line(text: &str, rule: &str) -> Option<usize> {
    if rule.is_empty() {
        return None;
    }
    text.lines().position(|line| {
        let t = line.trim_start();
        let t = t.strip_prefix("default ").unwrap_or(t);
        match t.strip_prefix(rule) {
            Some(rest) => {
                let rest = rest.trim_start();
                rest.starts_with(":=")
                    || rest.starts_with('=')
                    || rest.starts_with('{')
                    || rest.starts_with('(')
                    || rest.starts_with('[')
                    || rest.starts_with("if")
                    || rest.starts_with("contains")
                    || rest.is_empty()
            }
            None => false,
        }
    })
}

fn file_location(path: &Path, line: usize) -> Option<lt::Location> {
    Some(lt::Location {
        uri: Url::from_file_path(path).ok()?,
        range: lt::Range {
            start: lt::Position::new(line as u32, 0),
            end: lt::Position::new(line as u32, 0),
        },
    })
}

/// What the name at an offset stands for, for definitions and references.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// A definition: its kind, name and (for constants, labels and predicates, which each
    /// module has its own of) the file that defines it.
    Def(DefKind, String, Option<FileId>),
    Rego {
        file: FileId,
        alias: String,
        rule: String,
    },
    Module(String),
}

fn target_at(a: &Analysis, offset: usize) -> Option<Target> {
    let root = a.root();
    if let Some(d) = definition_at(a, root, offset) {
        let file = d.kind.is_scoped().then_some(d.file);
        return Some(Target::Def(d.kind, d.name.clone(), file));
    }
    if let Some((_, r, _)) = resolution_at(a, root, offset) {
        return match r {
            Resolution::Constant { name, file } => {
                Some(Target::Def(DefKind::Constant, name.clone(), Some(*file)))
            }
            Resolution::Label { name, file } => {
                Some(Target::Def(DefKind::Label, name.clone(), Some(*file)))
            }
            Resolution::Predicate { name, file } => {
                Some(Target::Def(DefKind::Predicate, name.clone(), Some(*file)))
            }
            Resolution::Rego { alias, rule } => Some(Target::Rego {
                file: root,
                alias: alias.clone(),
                rule: rule.clone(),
            }),
            _ => None,
        };
    }
    let u = use_at(a, offset)?;
    match &u.kind {
        ast::UseKind::Module { path } => Some(Target::Module(
            path.iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join("."),
        )),
        ast::UseKind::Rego { .. } | ast::UseKind::RegoData { .. } => Some(Target::Rego {
            file: root,
            alias: u.local_name()?.name.clone(),
            rule: String::new(),
        }),
    }
}

pub fn definition(doc: &Document, offset: usize) -> Option<Vec<lt::Location>> {
    let a = &doc.analysis;
    let loc = match target_at(a, offset)? {
        Target::Def(kind, name, file) => {
            let d = find_definition(a, kind, &name, file)?;
            convert::location(a, &doc.uri, d.file, d.span)?
        }
        Target::Module(name) => {
            let unit = a.checked.loaded.units.iter().find(|u| u.name == name)?;
            convert::location(a, &doc.uri, unit.file, Span::default())?
        }
        Target::Rego { file, alias, rule } => {
            let (path, line) = rego_target(a, file, &alias, &rule)?;
            file_location(&path, line.map_or(0, |(l, _)| l))?
        }
    };
    Some(vec![loc])
}

pub fn references(
    doc: &Document,
    offset: usize,
    include_declaration: bool,
) -> Option<Vec<lt::Location>> {
    let a = &doc.analysis;
    let target = target_at(a, offset)?;
    let mut spans: Vec<(FileId, Span)> = Vec::new();
    if let Target::Def(kind, name, file) = &target {
        if include_declaration {
            if let Some(d) = find_definition(a, *kind, name, *file) {
                spans.push((d.file, d.span));
            }
        }
    }
    for ((file, span), (r, _)) in &a.checked.resolutions {
        let hit = match (&target, r) {
            (Target::Def(DefKind::Constant, n, f), Resolution::Constant { name: m, file: g })
            | (Target::Def(DefKind::Label, n, f), Resolution::Label { name: m, file: g })
            | (Target::Def(DefKind::Predicate, n, f), Resolution::Predicate { name: m, file: g }) => {
                n == m && f.is_none_or(|f| f == *g)
            }
            (
                Target::Rego {
                    alias,
                    rule,
                    file: f,
                },
                Resolution::Rego {
                    alias: a2,
                    rule: r2,
                },
            ) => f == file && alias == a2 && (rule.is_empty() || rule == r2),
            _ => false,
        };
        if hit {
            let text = &a.source(*file).text;
            let s = match &target {
                Target::Rego { .. } => *span,
                _ => last_name(text, *span),
            };
            spans.push((*file, s));
        }
    }
    if let Target::Module(name) = &target {
        for u in &a.checked.loaded.units {
            for i in &u.module.items {
                if let Item::Use(x) = i {
                    if let ast::UseKind::Module { path } = &x.kind {
                        let n: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
                        if n.join(".") == *name {
                            if let (Some(f), Some(l)) = (path.first(), path.last()) {
                                spans.push((u.file, f.span.to(l.span)));
                            }
                        }
                    }
                }
            }
        }
    }
    spans.sort();
    spans.dedup();
    Some(
        spans
            .into_iter()
            .filter_map(|(f, s)| convert::location(a, &doc.uri, f, s))
            .collect(),
    )
}

/// The definition a [`Target::Def`] names.
fn find_definition<'a>(
    a: &'a Analysis,
    kind: DefKind,
    name: &str,
    file: Option<FileId>,
) -> Option<&'a Definition> {
    match file {
        Some(f) => a.checked.definition_in(kind, name, f),
        None => a.checked.definition(kind, name),
    }
}

fn symbol_kind(kind: DefKind) -> lt::SymbolKind {
    match kind {
        DefKind::Rule => lt::SymbolKind::FUNCTION,
        DefKind::Label => lt::SymbolKind::ENUM_MEMBER,
        DefKind::Constant => lt::SymbolKind::CONSTANT,
        DefKind::Predicate => lt::SymbolKind::FUNCTION,
        DefKind::Test => lt::SymbolKind::METHOD,
        DefKind::Module => lt::SymbolKind::MODULE,
    }
}

#[allow(deprecated)] // DocumentSymbol::deprecated must be spelt out
pub fn document_symbols(doc: &Document) -> Vec<lt::DocumentSymbol> {
    let a = &doc.analysis;
    let mut defs: Vec<&Definition> = a
        .checked
        .definitions
        .iter()
        .filter(|d| d.file == a.root())
        .collect();
    defs.sort_by_key(|d| d.item_span.start);
    defs.into_iter()
        .map(|d| lt::DocumentSymbol {
            name: d.name.clone(),
            detail: Some(d.detail.clone()),
            kind: symbol_kind(d.kind),
            tags: None,
            deprecated: None,
            range: doc.range(d.item_span),
            selection_range: doc.range(d.span),
            children: None,
        })
        .collect()
}

/// Symbols of the open documents and of every `.ward` file under the workspace folder whose
/// name contains the query (case-insensitively; an empty query matches all).
#[allow(deprecated)] // SymbolInformation::deprecated must be spelt out
pub fn workspace_symbols(
    root: Option<&Path>,
    docs: &HashMap<Url, Document>,
    query: &str,
) -> Vec<lt::SymbolInformation> {
    let mut texts: Vec<(Url, String)> = docs
        .values()
        .map(|d| (d.uri.clone(), d.text().to_string()))
        .collect();
    if let Some(root) = root {
        if let Ok(files) = check::collect_files(&[root.to_path_buf()]) {
            for f in files.into_iter().take(2_000) {
                let Ok(uri) = Url::from_file_path(&f) else {
                    continue;
                };
                if docs.contains_key(&uri) {
                    continue;
                }
                if let Ok(text) = std::fs::read_to_string(&f) {
                    texts.push((uri, text));
                }
            }
        }
    }
    texts.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    let q = query.to_lowercase();
    let mut out = Vec::new();
    for (uri, text) in texts {
        let file = SourceFile::new(uri.to_string(), text.as_str());
        let (module, _) = crate::syntax::parse(FileId(0), &text);
        for item in &module.items {
            let (name, kind, span) = match item {
                Item::Rule(r) => (r.name.name.clone(), DefKind::Rule, r.name.span),
                Item::Label(l) => (l.name.name.clone(), DefKind::Label, l.name.span),
                Item::Let(l) => (l.name.name.clone(), DefKind::Constant, l.name.span),
                Item::Pred(p) => (p.name.name.clone(), DefKind::Predicate, p.name.span),
                Item::Test(t) => (t.name.value.clone(), DefKind::Test, t.name.span),
                _ => continue,
            };
            if !q.is_empty() && !name.to_lowercase().contains(&q) {
                continue;
            }
            out.push(lt::SymbolInformation {
                name,
                kind: symbol_kind(kind),
                tags: None,
                deprecated: None,
                location: lt::Location {
                    uri: uri.clone(),
                    range: convert::range(&file, span),
                },
                container_name: module.package().map(|p| {
                    p.path
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(".")
                }),
            });
        }
    }
    out
}

/// Quick fixes for the "did you mean" diagnostics overlapping `range`.
pub fn code_actions(doc: &Document, range: lt::Range) -> Vec<lt::CodeActionOrCommand> {
    let a = &doc.analysis;
    let start = doc.offset(range.start);
    let end = doc.offset(range.end);
    let mut out = Vec::new();
    for d in &a.checked.diagnostics.items {
        let Some(fix) = &d.fix else { continue };
        if d.file != a.root() || (d.span.end as usize) < start || (d.span.start as usize) > end {
            continue;
        }
        let edit = lt::TextEdit {
            range: doc.range(fix.span),
            new_text: fix.replacement.clone(),
        };
        let mut changes = HashMap::new();
        changes.insert(doc.uri.clone(), vec![edit]);
        out.push(lt::CodeActionOrCommand::CodeAction(lt::CodeAction {
            title: format!("did you mean `{}`?", fix.replacement),
            kind: Some(lt::CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![convert::diagnostic(a, d, &doc.uri)]),
            edit: Some(lt::WorkspaceEdit {
                changes: Some(changes),
                ..Default::default()
            }),
            is_preferred: Some(true),
            ..Default::default()
        }));
    }
    out
}
