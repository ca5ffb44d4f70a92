//! Completion. The context comes from the text before the cursor (the item being typed rarely
//! parses), the candidates from the ACS field table, the stdlib and the latest analysis:
//!
//! - hook names after `on`, `count(`, `exists(` and `send`;
//! - payload fields after `.`, for the hook of the enclosing rule (or history expression), the
//!   path before the dot walked through the field table;
//! - labels after `has`; stdlib modules after `use std.`; reason codes already used inside the
//!   string after `deny "` (and the other decisions, and test expectations);
//! - declared effects after `effect_state(`; `intent` after `extend`, and `session` or
//!   `this_request` after `extend intent`;
//! - otherwise keywords, builtins, constants, labels and the hook's top-level fields (in an
//!   `effect` declaration, toolCallRequest's, and the declaration's own words).

use lsp_types as lt;

use super::document::Document;
use super::keywords;
use super::query;
use crate::acs::fields::{self, HookSpec, Ty};
use crate::check::{self, DefKind, Resolution, Table, Type, STDLIB};
use crate::syntax::ast::Item;

/// Ask parts written as more than one word: `extend intent [session | this_request]`.
const PHRASES: &[(&str, &str)] = &[(
    "extend intent",
    "ask: the approver may widen the session's Intent to this call (`session` or `this_request`)",
)];

/// The words that may follow a phrase of an ask decision, with what they mean.
const FOLLOWERS: &[(&str, &[(&str, &str)])] = &[
    ("extend", &[("intent", "the session's Intent")]),
    (
        "extend intent",
        &[
            ("session", "for the rest of the session"),
            ("this_request", "for this call only"),
        ],
    ),
];

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_hook_char(c: char) -> bool {
    is_word(c) || c == '/'
}

/// Splits `s` into the text before a trailing run of `pred` characters, and that run.
fn split_trailing(s: &str, pred: impl Fn(char) -> bool) -> (&str, &str) {
    let start = s
        .char_indices()
        .rev()
        .take_while(|(_, c)| pred(*c))
        .last()
        .map_or(s.len(), |(i, _)| i);
    (&s[..start], &s[start..])
}

fn ends_with_word(s: &str, word: &str) -> bool {
    s.strip_suffix(word)
        .is_some_and(|rest| !rest.chars().next_back().is_some_and(is_word))
}

/// Whether `s` ends with the words of `phrase` and then white space (`… extend intent `).
fn ends_with_phrase(s: &str, phrase: &str) -> bool {
    let mut words = s.split_whitespace().rev();
    s.ends_with(char::is_whitespace) && phrase.split(' ').rev().all(|w| words.next() == Some(w))
}

/// Whether the cursor is inside a string on this line; returns the text before the string's
/// opening quote and the string's content so far.
fn in_string(line: &str) -> Option<(&str, &str)> {
    let mut open: Option<usize> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match (open, c) {
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(_), '"') if !escaped => open = None,
            (None, '"') => open = Some(i),
            (None, '/') if line[i..].starts_with("//") => return None,
            (None, '#') => return None,
            _ => {}
        }
        escaped = false;
    }
    open.map(|i| (&line[..i], &line[i + 1..]))
}

fn in_comment(line: &str) -> bool {
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if in_str {
            if c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == '"' && !escaped {
                in_str = false;
            }
            escaped = false;
            continue;
        }
        if c == '"' {
            in_str = true;
        } else if c == '#' || line[i..].starts_with("//") {
            return true;
        }
    }
    false
}

/// After a decision word and zero or more finished strings: `deny "`, `=> deny "a" "`.
fn is_reason_context(before_quote: &str) -> bool {
    let mut s = before_quote.trim_end();
    loop {
        if let Some(inner) = s.strip_suffix('"') {
            // Skip one finished string.
            match inner.rfind('"') {
                Some(i) => s = inner[..i].trim_end(),
                None => return false,
            }
            continue;
        }
        if let Some(inner) = s.strip_suffix(':') {
            // `deny "code": "` is the reasoning, not a code.
            let _ = inner;
            return false;
        }
        break;
    }
    crate::acs::DecisionKind::ALL
        .iter()
        .any(|d| ends_with_word(s, d.as_str()))
}

fn is_hook_context(before: &str) -> bool {
    let mut s = before.trim_end();
    while let Some(rest) = s.strip_suffix(',') {
        let (rest, _) = split_trailing(rest.trim_end(), is_hook_char);
        s = rest.trim_end();
    }
    ends_with_word(s, "on")
        || ends_with_word(s, "send")
        || s.strip_suffix('(').is_some_and(|r| {
            ends_with_word(r.trim_end(), "count") || ends_with_word(r.trim_end(), "exists")
        })
}

/// Where in the document the cursor is, as far as field completion cares.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Rule {
        /// The hook of an unclosed `count(`/`exists(` around the cursor.
        history: Option<&'static HookSpec>,
    },
    Label,
    Other,
}

/// The start of the top-level item around `offset` (a line starting with an item keyword).
fn item_start(text: &str, offset: usize) -> Option<(usize, &'static str)> {
    let before = &text[..offset];
    let mut pos = before.len();
    loop {
        let line_start = before[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[line_start..];
        for &kw in keywords::ITEM_WORDS {
            if line.starts_with(kw) && line[kw.len()..].starts_with([' ', '\t', '\n']) {
                return Some((line_start, kw));
            }
        }
        if line_start == 0 {
            return None;
        }
        pos = line_start - 1;
    }
}

fn rule_hooks(text: &str, start: usize) -> Vec<&'static HookSpec> {
    let head = &text[start..];
    let head = &head[..head.find("=>").unwrap_or(head.len())];
    let head = &head[..head.find(" when").unwrap_or(head.len())];
    let Some(i) = head.find(" on ") else {
        return Vec::new();
    };
    head[i + 4..]
        .split([',', ' ', '\n', '\t'])
        .filter(|w| !w.is_empty())
        .filter_map(fields::hook)
        .collect()
}

/// The hook of the innermost unclosed `count(HOOK`/`exists(HOOK` between `start` and `offset`.
fn history_hook(text: &str, start: usize, offset: usize) -> Option<&'static HookSpec> {
    let s = &text[start..offset];
    let mut best = None;
    for kw in ["count(", "exists("] {
        for (i, _) in s.match_indices(kw) {
            let after = &s[i + kw.len()..];
            let depth: i32 = after
                .chars()
                .map(|c| match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                })
                .sum();
            if depth >= 0 && best.is_none_or(|(b, _)| i > b) {
                let name: String = after
                    .trim_start()
                    .chars()
                    .take_while(|c| is_hook_char(*c))
                    .collect();
                if let Some(h) = fields::hook(&name) {
                    best = Some((i, h));
                }
            }
        }
    }
    best.map(|(_, h)| h)
}

/// The scope at `offset`, the hooks of the enclosing item, and the word that starts that item.
fn scope_at(text: &str, offset: usize) -> (Scope, Vec<&'static HookSpec>, &'static str) {
    match item_start(text, offset) {
        Some((start, "rule")) => {
            let hooks = rule_hooks(text, start);
            (
                Scope::Rule {
                    history: history_hook(text, start, offset),
                },
                hooks,
                "rule",
            )
        }
        Some((_, "label")) => (Scope::Label, Vec::new(), "label"),
        // An effect's key parts are expressions over the tool call, as in a rule on it.
        Some((_, "effect")) => (
            Scope::Rule { history: None },
            fields::hook("toolCallRequest").into_iter().collect(),
            "effect",
        ),
        Some((_, kw)) => (Scope::Other, Vec::new(), kw),
        None => (Scope::Other, Vec::new(), ""),
    }
}

fn item(
    label: &str,
    kind: lt::CompletionItemKind,
    detail: Option<String>,
    doc: Option<String>,
) -> lt::CompletionItem {
    lt::CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail,
        documentation: doc.map(|value| {
            lt::Documentation::MarkupContent(lt::MarkupContent {
                kind: lt::MarkupKind::Markdown,
                value,
            })
        }),
        ..Default::default()
    }
}

fn with_edit(mut it: lt::CompletionItem, range: lt::Range) -> lt::CompletionItem {
    it.text_edit = Some(lt::CompletionTextEdit::Edit(lt::TextEdit {
        range,
        new_text: it.label.clone(),
    }));
    it
}

pub fn complete(doc: &Document, offset: usize) -> Vec<lt::CompletionItem> {
    let text = doc.text();
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = &before[line_start..];

    if let Some((before_quote, content)) = in_string(line) {
        if !is_reason_context(before_quote) {
            return Vec::new();
        }
        let start = offset - content.len();
        let range = doc.range(crate::diagnostics::Span::new(start, offset));
        let mut codes: Vec<&str> = doc
            .analysis
            .checked
            .reason_codes
            .iter()
            .map(String::as_str)
            .collect();
        codes.sort_unstable();
        codes.dedup();
        return codes
            .into_iter()
            .filter(|c| !c.is_empty())
            .map(|c| {
                with_edit(
                    item(
                        c,
                        lt::CompletionItemKind::VALUE,
                        Some("reason code".into()),
                        None,
                    ),
                    range,
                )
            })
            .collect();
    }
    if in_comment(line) {
        return Vec::new();
    }

    // `use std.` and `use `.
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix("use ") {
        let rest = rest.trim_start();
        if !rest.contains(' ') {
            let (typed_prefix, _) = split_trailing(rest, is_word);
            let range = doc.range(crate::diagnostics::Span::new(
                offset - (rest.len() - typed_prefix.len()),
                offset,
            ));
            return STDLIB
                .iter()
                .filter_map(|(name, text)| {
                    let shown = name.strip_prefix(typed_prefix)?;
                    let doc = leading_comment(text);
                    Some(with_edit(
                        item(
                            shown,
                            lt::CompletionItemKind::MODULE,
                            Some(name.to_string()),
                            Some(doc),
                        ),
                        range,
                    ))
                })
                .collect();
        }
    }

    let (rest, partial) = split_trailing(before, is_hook_char);
    let word_range = doc.range(crate::diagnostics::Span::new(
        offset - partial.len(),
        offset,
    ));
    if is_hook_context(rest) {
        return fields::HOOKS
            .iter()
            .map(|h| {
                with_edit(
                    item(
                        h.name,
                        lt::CompletionItemKind::EVENT,
                        Some(h.method.to_string()),
                        Some(query::hook_markdown(h)),
                    ),
                    word_range,
                )
            })
            .collect();
    }

    let (rest, partial) = split_trailing(before, is_word);
    let word_range = doc.range(crate::diagnostics::Span::new(
        offset - partial.len(),
        offset,
    ));
    if ends_with_word(rest.trim_end(), "has") {
        return labels(doc)
            .into_iter()
            .map(|i| with_edit(i, word_range))
            .collect();
    }
    if let Some((_, next)) = FOLLOWERS.iter().find(|(p, _)| ends_with_phrase(rest, p)) {
        return next
            .iter()
            .map(|(w, doc)| {
                let it = item(
                    w,
                    lt::CompletionItemKind::KEYWORD,
                    Some((*doc).into()),
                    None,
                );
                with_edit(it, word_range)
            })
            .collect();
    }
    if rest
        .trim_end()
        .strip_suffix('(')
        .is_some_and(|r| ends_with_word(r.trim_end(), "effect_state"))
    {
        return effects(doc)
            .into_iter()
            .map(|i| with_edit(i, word_range))
            .collect();
    }
    let (scope, hooks, item_word) = scope_at(text, offset);
    if let Some(chain) = rest.strip_suffix('.') {
        return members(doc, chain, scope, &hooks)
            .into_iter()
            .map(|i| with_edit(i, word_range))
            .collect();
    }
    general(doc, scope, &hooks, item_word)
}

fn leading_comment(text: &str) -> String {
    text.lines()
        .take_while(|l| l.starts_with("//"))
        .map(|l| l.trim_start_matches('/').trim())
        .collect::<Vec<_>>()
        .join("\n")
}

fn labels(doc: &Document) -> Vec<lt::CompletionItem> {
    let a = &doc.analysis;
    a.checked
        .definitions
        .iter()
        .filter(|d| d.kind == DefKind::Label)
        .map(|d| {
            let src = &a.source(d.file).text[d.item_span.range()];
            item(
                &d.name,
                lt::CompletionItemKind::ENUM_MEMBER,
                Some("label".into()),
                Some(format!("```ward\n{src}\n```")),
            )
        })
        .collect()
}

/// The effects the policy declares (`effect NAME for TOOL = key(…)`), for `effect_state(`.
fn effects(doc: &Document) -> Vec<lt::CompletionItem> {
    let a = &doc.analysis;
    let mut out = Vec::new();
    for unit in &a.checked.loaded.units {
        for i in &unit.module.items {
            if let Item::Effect(e) = i {
                let src = &a.source(unit.file).text[e.span.range()];
                out.push(item(
                    &e.name.name,
                    lt::CompletionItemKind::VARIABLE,
                    Some(format!("effect for {}", e.tool.value)),
                    Some(format!("```ward\n{}\n```", src.trim_end())),
                ));
            }
        }
    }
    out
}

/// The trailing dotted chain of `text` (`tool`, `outputs[0].provenance`, `$`).
fn trailing_chain(text: &str) -> &str {
    let mut start = text.len();
    let mut depth = 0;
    for (i, c) in text.char_indices().rev() {
        match c {
            ']' => depth += 1,
            '[' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            c if is_word(c) || c == '.' || c == '$' => {}
            _ => break,
        }
        start = i;
    }
    &text[start..]
}

/// The table and prefix a dotted chain (`tool`, `outputs[0]`, `metadata`, `$`) denotes.
fn walk_chain(
    doc: &Document,
    before: &str,
    scope: Scope,
    hooks: &[&'static HookSpec],
    depth: usize,
) -> Option<Walked> {
    let chain = trailing_chain(before);
    let mut segments = Vec::new();
    for seg in chain.split('.') {
        let name_end = seg.find('[').unwrap_or(seg.len());
        segments.push((&seg[..name_end], seg[name_end..].matches('[').count()));
    }
    let (head, head_idx) = *segments.first()?;
    let (current, past) = match scope {
        Scope::Rule { history, .. } => (hooks.first().copied(), history.or(hooks.first().copied())),
        _ => (None, None),
    };
    let mut walked = match head {
        "$" => Walked::Table(Table::Payload(current?), String::new()),
        "metadata" => Walked::Table(Table::Metadata, String::new()),
        "payload" => Walked::Table(Table::Payload(past?), String::new()),
        "intent" if matches!(scope, Scope::Rule { .. }) => Walked::Intent,
        "args" if past.is_some_and(|h| fields::lookup(h.fields, "arguments").is_some()) => {
            Walked::Args
        }
        _ => {
            if let Some(units) = doc.analysis.checked.loaded.units.first() {
                if let Some(module) = module_alias(units, head) {
                    return Some(Walked::Module(module));
                }
            }
            if let Some(w) = quantified(doc, before, head, scope, hooks, depth) {
                w
            } else {
                let table = match scope {
                    Scope::Label => Table::Provenance,
                    _ => Table::Payload(past?),
                };
                let head = if table == Table::Provenance && head == "source" {
                    "source_id"
                } else {
                    head
                };
                Walked::Table(table, String::new()).step(head)?
            }
        }
    };
    for _ in 0..head_idx {
        walked = walked.element()?;
    }
    for (seg, idx) in segments.iter().skip(1) {
        walked = walked.step(seg)?;
        for _ in 0..*idx {
            walked = walked.element()?;
        }
    }
    Some(walked)
}

/// A quantifier variable: what `any NAME in COLLECTION:` before the cursor ranges over (the
/// item being typed rarely parses, so this reads the text), or the type the checker gave it.
fn quantified(
    doc: &Document,
    before: &str,
    name: &str,
    scope: Scope,
    hooks: &[&'static HookSpec],
    depth: usize,
) -> Option<Walked> {
    if depth < 4 {
        for kw in ["any", "all"] {
            let pat = format!("{kw} {name} in ");
            if let Some(i) = before.rfind(&pat) {
                let rest = &before[i + pat.len()..];
                if let Some(colon) = rest.find(':') {
                    let over = rest[..colon].trim_end();
                    return walk_chain(doc, over, scope, hooks, depth + 1)?.element();
                }
            }
        }
    }
    Walked::from_type(&variable_type(doc, name)?)
}

/// Where a walk through a dotted chain ended.
#[derive(Debug, Clone)]
enum Walked {
    Table(Table, String),
    Args,
    Arg,
    Intent,
    Module(String),
}

impl Walked {
    fn from_type(t: &Type) -> Option<Walked> {
        match t {
            Type::Object(table, prefix) => Some(Walked::Table(*table, prefix.clone())),
            Type::Arg => Some(Walked::Arg),
            Type::Intent => Some(Walked::Intent),
            _ => None,
        }
    }

    fn step(self, name: &str) -> Option<Walked> {
        match self {
            Walked::Args => Some(Walked::Arg),
            Walked::Arg => {
                (name == "provenance").then(|| Walked::Table(Table::Provenance, String::new()))
            }
            Walked::Table(table, prefix) => {
                let path = check::types::join(&prefix, name);
                let (path, f) = match fields::lookup(table.fields(), &path) {
                    Some(f) => (path, f),
                    None => {
                        let star = format!("{prefix}.*");
                        let f = fields::lookup(table.fields(), &star)?;
                        (star, f)
                    }
                };
                Some(match f.ty {
                    Ty::Provenance => Walked::Table(Table::Provenance, String::new()),
                    Ty::Intent => Walked::Table(Table::Intent, String::new()),
                    _ => Walked::Table(table, path),
                })
            }
            Walked::Intent | Walked::Module(_) => None,
        }
    }

    /// An element of the collection walked to (`outputs` → `outputs[]`, `args` → an argument).
    fn element(self) -> Option<Walked> {
        match self {
            Walked::Args => Some(Walked::Arg),
            Walked::Table(t, p) => {
                let field = fields::lookup(t.fields(), &p)?;
                let item_path = match field.ty {
                    Ty::List => format!("{p}[]"),
                    Ty::Map => format!("{p}.*"),
                    _ => return None,
                };
                Some(match field.items {
                    Some(Ty::Provenance) => Walked::Table(Table::Provenance, String::new()),
                    Some(Ty::Intent) => Walked::Table(Table::Intent, String::new()),
                    _ => Walked::Table(t, item_path),
                })
            }
            _ => None,
        }
    }
}

fn module_alias(unit: &check::Unit, name: &str) -> Option<String> {
    unit.module.items.iter().find_map(|i| match i {
        Item::Use(u) if u.local_name().is_some_and(|l| l.name == name) => match &u.kind {
            crate::syntax::ast::UseKind::Module { path } => Some(
                path.iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join("."),
            ),
            _ => None,
        },
        _ => None,
    })
}

/// The type the checker gave a quantifier variable of this name, anywhere in the document.
fn variable_type(doc: &Document, name: &str) -> Option<Type> {
    let a = &doc.analysis;
    a.checked
        .resolutions
        .iter()
        .find_map(|((f, _), (r, t))| match r {
            Resolution::Variable(n) if *f == a.root() && n == name => Some(t.clone()),
            _ => None,
        })
}

fn field_items(table: Table, prefix: &str) -> Vec<lt::CompletionItem> {
    fields::children(table.fields(), prefix)
        .filter_map(|f| {
            let name = f.path.rsplit('.').next().unwrap_or(f.path);
            if name == "*" {
                return None;
            }
            let t = Type::of_field(table, f);
            Some(item(
                name,
                lt::CompletionItemKind::FIELD,
                Some(t.to_string()),
                Some(query::field_markdown(table, f.path, &t)),
            ))
        })
        .collect()
}

fn members(
    doc: &Document,
    chain: &str,
    scope: Scope,
    hooks: &[&'static HookSpec],
) -> Vec<lt::CompletionItem> {
    let Some(w) = walk_chain(doc, chain, scope, hooks, 0) else {
        return Vec::new();
    };
    match w {
        Walked::Table(table, prefix) => {
            let mut items = field_items(table, &prefix);
            // Other hooks of a multi-hook rule contribute their fields too.
            if let (Table::Payload(first), Scope::Rule { history: None, .. }) = (table, scope) {
                for h in hooks.iter().filter(|h| !std::ptr::eq(**h, first)) {
                    for i in field_items(Table::Payload(h), &prefix) {
                        if !items.iter().any(|x| x.label == i.label) {
                            items.push(i);
                        }
                    }
                }
            }
            items
        }
        Walked::Args => Vec::new(),
        Walked::Arg => vec![
            item(
                "value",
                lt::CompletionItemKind::FIELD,
                Some("JSON value".into()),
                None,
            ),
            item(
                "provenance",
                lt::CompletionItemKind::FIELD,
                Some("provenance".into()),
                None,
            ),
        ],
        Walked::Intent => ["raw", "parsed", "scope_mode", "declared", "permits"]
            .iter()
            .map(|n| {
                let kind = if *n == "permits" {
                    lt::CompletionItemKind::METHOD
                } else {
                    lt::CompletionItemKind::FIELD
                };
                item(n, kind, Some("intent".into()), None)
            })
            .collect(),
        Walked::Module(module) => {
            let a = &doc.analysis;
            let Some(unit) = a.checked.loaded.units.iter().find(|u| u.name == module) else {
                return Vec::new();
            };
            a.checked
                .definitions
                .iter()
                .filter(|d| d.file == unit.file && d.kind.is_scoped())
                .map(|d| {
                    let kind = match d.kind {
                        DefKind::Label => lt::CompletionItemKind::ENUM_MEMBER,
                        DefKind::Predicate => lt::CompletionItemKind::FUNCTION,
                        _ => lt::CompletionItemKind::CONSTANT,
                    };
                    item(&d.name, kind, Some(d.detail.clone()), None)
                })
                .collect()
        }
    }
}

/// The files whose constants, labels and predicates a bare name in the document can mean: the
/// document itself and the modules it `use`s directly (docs/language.md §3).
fn visible_files(doc: &Document) -> Vec<crate::diagnostics::FileId> {
    let units = &doc.analysis.checked.loaded.units;
    let mut out: Vec<crate::diagnostics::FileId> =
        units.iter().filter(|u| u.is_root).map(|u| u.file).collect();
    let Some(root) = units.first() else {
        return out;
    };
    for i in &root.module.items {
        if let Item::Use(u) = i {
            if let crate::syntax::ast::UseKind::Module { path } = &u.kind {
                let name: Vec<&str> = path.iter().map(|p| p.name.as_str()).collect();
                let name = name.join(".");
                out.extend(units.iter().filter(|x| x.name == name).map(|x| x.file));
            }
        }
    }
    out
}

/// Everything that may stand at the cursor, in `scope` of an item started by `item_word`.
fn general(
    doc: &Document,
    scope: Scope,
    hooks: &[&'static HookSpec],
    item_word: &str,
) -> Vec<lt::CompletionItem> {
    let a = &doc.analysis;
    let mut out: Vec<lt::CompletionItem> = Vec::new();
    let visible = visible_files(doc);
    for d in &a.checked.definitions {
        let kind = match d.kind {
            DefKind::Constant => lt::CompletionItemKind::CONSTANT,
            DefKind::Label => lt::CompletionItemKind::ENUM_MEMBER,
            DefKind::Predicate => lt::CompletionItemKind::FUNCTION,
            _ => continue,
        };
        // Each module has its own names: offer the document's and its direct `use`s'.
        if !visible.contains(&d.file) {
            continue;
        }
        let src = &a.source(d.file).text[d.item_span.range()];
        let src: String = src.lines().take(6).collect::<Vec<_>>().join("\n");
        out.push(item(
            &d.name,
            kind,
            Some(d.detail.clone()),
            Some(format!("```ward\n{src}\n```")),
        ));
    }
    for b in check::builtins::functions() {
        out.push(item(
            b.name,
            lt::CompletionItemKind::FUNCTION,
            Some("builtin".into()),
            Some(query::builtin_markdown(b.name)),
        ));
    }
    match scope {
        Scope::Rule { history, .. } => {
            let hook = history.or(hooks.first().copied());
            if let Some(h) = hook {
                out.extend(field_items(Table::Payload(h), ""));
                if fields::lookup(h.fields, "arguments").is_some() {
                    out.push(item(
                        "args",
                        lt::CompletionItemKind::FIELD,
                        Some("tool arguments".into()),
                        None,
                    ));
                }
            }
            for root in ["metadata", "payload", "intent"] {
                out.push(item(root, lt::CompletionItemKind::VARIABLE, None, None));
            }
            if history.is_some() {
                out.push(item(
                    "$",
                    lt::CompletionItemKind::VARIABLE,
                    Some("the current event".into()),
                    None,
                ));
            }
        }
        Scope::Label => {
            out.extend(field_items(Table::Provenance, ""));
            out.push(item(
                "source",
                lt::CompletionItemKind::FIELD,
                Some("string".into()),
                Some("the provenance's `source_id`".into()),
            ));
        }
        Scope::Other => {}
    }
    for kw in keywords::offered(item_word) {
        out.push(item(kw, lt::CompletionItemKind::KEYWORD, None, None));
    }
    for (phrase, what) in PHRASES {
        out.push(item(
            phrase,
            lt::CompletionItemKind::KEYWORD,
            Some((*what).into()),
            None,
        ));
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|i| seen.insert(i.label.clone()));
    out
}
