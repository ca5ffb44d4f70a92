//! Semantic tokens: a lexical pass over the document (comments, strings, numbers, keywords)
//! refined by the checker's resolutions (hooks, labels, payload fields, constants, builtins).

use std::collections::HashMap;

use lsp_types as lt;

use super::document::Document;
use super::keywords;
use crate::check::{DefKind, Resolution};
use crate::syntax::ast::{Item, UseKind};
use crate::syntax::trivia;

/// Token types, in legend order.
const TYPES: &[lt::SemanticTokenType] = &[
    lt::SemanticTokenType::KEYWORD,
    lt::SemanticTokenType::EVENT,
    lt::SemanticTokenType::TYPE,
    lt::SemanticTokenType::PROPERTY,
    lt::SemanticTokenType::STRING,
    lt::SemanticTokenType::NUMBER,
    lt::SemanticTokenType::COMMENT,
    lt::SemanticTokenType::FUNCTION,
    lt::SemanticTokenType::VARIABLE,
    lt::SemanticTokenType::NAMESPACE,
    lt::SemanticTokenType::ENUM_MEMBER,
];

const KEYWORD: u32 = 0;
const HOOK: u32 = 1;
const LABEL: u32 = 2;
const FIELD: u32 = 3;
const STRING: u32 = 4;
const NUMBER: u32 = 5;
const COMMENT: u32 = 6;
const FUNCTION: u32 = 7;
const VARIABLE: u32 = 8;
const NAMESPACE: u32 = 9;
const ENUM_MEMBER: u32 = 10;

const MODIFIERS: &[lt::SemanticTokenModifier] = &[
    lt::SemanticTokenModifier::DECLARATION,
    lt::SemanticTokenModifier::READONLY,
    lt::SemanticTokenModifier::DEFAULT_LIBRARY,
];
const DECLARATION: u32 = 1;
const READONLY: u32 = 2;
const DEFAULT_LIBRARY: u32 = 4;

pub fn legend() -> lt::SemanticTokensLegend {
    lt::SemanticTokensLegend {
        token_types: TYPES.to_vec(),
        token_modifiers: MODIFIERS.to_vec(),
    }
}

/// Names whose meaning the checker knows: start offset → (length, type, modifiers).
fn classified(doc: &Document) -> HashMap<usize, (usize, u32, u32)> {
    let a = &doc.analysis;
    let text = doc.text();
    let mut out = HashMap::new();
    let effects: Vec<&str> = a
        .checked
        .loaded
        .units
        .iter()
        .flat_map(|u| &u.module.items)
        .filter_map(|i| match i {
            Item::Effect(e) => Some(e.name.name.as_str()),
            _ => None,
        })
        .collect();
    for ((file, span), (r, _)) in &a.checked.resolutions {
        if *file != a.root() {
            continue;
        }
        let (start, end) = (span.start as usize, span.end as usize);
        let Some(s) = text.get(start..end) else {
            continue;
        };
        let (kind, mods) = match r {
            Resolution::Field { .. } | Resolution::Argument(_) => (FIELD, 0),
            Resolution::Constant { .. } => (VARIABLE, READONLY),
            Resolution::Label { .. } => (LABEL, 0),
            Resolution::Predicate { .. } => (FUNCTION, 0),
            Resolution::Variable(_) => (VARIABLE, 0),
            Resolution::EnumValue(_) => (ENUM_MEMBER, 0),
            Resolution::Rego { .. } => (FUNCTION, 0),
            Resolution::Builtin("intent") => (VARIABLE, DEFAULT_LIBRARY),
            Resolution::Builtin(_) => (FUNCTION, DEFAULT_LIBRARY),
            Resolution::Hook(_) => {
                out.insert(start, (end - start, HOOK, 0));
                continue;
            }
        };
        // The resolved name is the last segment of a member path (`tool.name` → `name`).
        let last = s.rfind('.').map_or(start, |i| start + i + 1);
        let entry = out.entry(last).or_insert((end - last, kind, mods));
        if entry.0 >= end - last {
            *entry = (end - last, kind, mods);
        }
        // `effect_state(NAME)`: the argument names a declared effect.
        if matches!(r, Resolution::Builtin("effect_state")) {
            if let Some((at, len)) = effect_argument(text, end, &effects) {
                out.insert(at, (len, VARIABLE, 0));
            }
        }
        // `intent.permits(…)`: the head is the session's intent, as a bare `intent` is.
        if matches!(r, Resolution::Builtin("intent.permits")) {
            out.entry(start)
                .or_insert(("intent".len(), VARIABLE, DEFAULT_LIBRARY));
        }
        // `taint.untrusted`, `org.rule`: the head is a module or Rego alias.
        if matches!(
            r,
            Resolution::Constant { .. }
                | Resolution::Label { .. }
                | Resolution::Predicate { .. }
                | Resolution::Rego { .. }
        ) {
            if let Some(dot) = s.find('.') {
                out.entry(start).or_insert((dot, NAMESPACE, 0));
            }
        }
    }
    for d in &a.checked.definitions {
        if d.file != a.root() {
            continue;
        }
        let (kind, mods) = match d.kind {
            DefKind::Rule => (FUNCTION, DECLARATION),
            DefKind::Label => (LABEL, DECLARATION),
            DefKind::Constant => (VARIABLE, DECLARATION | READONLY),
            DefKind::Predicate => (FUNCTION, DECLARATION),
            DefKind::Test | DefKind::Module => continue,
        };
        out.insert(d.span.start as usize, (d.span.len(), kind, mods));
    }
    if let Some(unit) = a.checked.loaded.units.first() {
        for item in &unit.module.items {
            match item {
                Item::Use(u) => {
                    if let UseKind::Module { path } = &u.kind {
                        for id in path {
                            out.insert(id.span.start as usize, (id.span.len(), NAMESPACE, 0));
                        }
                    }
                    if let Some(alias) = &u.alias {
                        out.insert(
                            alias.span.start as usize,
                            (alias.span.len(), NAMESPACE, DECLARATION),
                        );
                    }
                }
                Item::Package(p) => {
                    for id in &p.path {
                        out.insert(id.span.start as usize, (id.span.len(), NAMESPACE, 0));
                    }
                }
                // `effect NAME for TOOL`: the effect's name is declared here; a bare tool name
                // is a name, never a keyword (a tool may be called `key`).
                Item::Effect(e) => {
                    out.insert(
                        e.name.span.start as usize,
                        (e.name.span.len(), VARIABLE, DECLARATION),
                    );
                    if !e.tool_quoted {
                        out.insert(e.tool.span.start as usize, (e.tool.span.len(), FUNCTION, 0));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The effect named in `effect_state(NAME)`, the call's name ending at `end`: its offset and
/// length, if it is one of `effects`.
fn effect_argument(text: &str, end: usize, effects: &[&str]) -> Option<(usize, usize)> {
    let rest = text.get(end..)?;
    let open = rest.len() - rest.trim_start().len();
    let arg = rest[open..].strip_prefix('(')?;
    let skipped = rest.len() - arg.trim_start().len();
    let arg = arg.trim_start();
    let len = arg
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(arg.len());
    effects
        .contains(&&arg[..len])
        .then_some((end + skipped, len))
}

struct Builder<'a> {
    doc: &'a Document,
    data: Vec<lt::SemanticToken>,
    prev: (u32, u32),
}

impl Builder<'_> {
    /// Adds a token (split at line ends: tokens may not span lines).
    fn push(&mut self, start: usize, end: usize, kind: u32, mods: u32) {
        let text = self.doc.text();
        let mut s = start;
        while s < end {
            let line_end = text[s..end].find('\n').map_or(end, |i| s + i);
            if line_end > s {
                let (line, col) = self.doc.file.line_col_utf16(s);
                let len: usize = text[s..line_end].chars().map(char::len_utf16).sum();
                let (pl, pc) = self.prev;
                let delta_line = line - pl;
                let delta_start = if delta_line == 0 { col - pc } else { col };
                self.data.push(lt::SemanticToken {
                    delta_line,
                    delta_start,
                    length: len as u32,
                    token_type: kind,
                    token_modifiers_bitset: mods,
                });
                self.prev = (line, col);
            }
            s = line_end + 1;
        }
    }
}

/// Whether the word `text[start..end]`, in an item started by `item`, is a keyword. A member
/// name (after `.`) and a name before `:` (an object key, a named argument) never are.
fn is_keyword(text: &str, start: usize, end: usize, item: &str) -> bool {
    keywords::highlighted(&text[start..end], item)
        && !text[..start].ends_with('.')
        && !text[end..].trim_start_matches([' ', '\t']).starts_with(':')
}

pub fn semantic_tokens(doc: &Document) -> lt::SemanticTokens {
    let text = doc.text();
    let bytes = text.as_bytes();
    let known = classified(doc);
    let comments = trivia::scan(text, usize::MAX).comments;
    let mut b = Builder {
        doc,
        data: Vec::new(),
        prev: (0, 0),
    };
    let mut next_comment = 0;
    // The item being scanned, by the word that started it (`effect`, `rule`, …).
    let mut item = "";
    let mut i = 0;
    while i < bytes.len() {
        if let Some(c) = comments.get(next_comment) {
            if i >= c.span.start as usize {
                b.push(c.span.start as usize, c.span.end as usize, COMMENT, 0);
                i = (c.span.end as usize).max(i + 1);
                next_comment += 1;
                continue;
            }
        }
        let ch = bytes[i];
        if ch == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' && bytes[j] != b'\n' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            b.push(i, end, STRING, 0);
            i = end;
            continue;
        }
        if ch.is_ascii_digit() {
            let mut j = i;
            while j < bytes.len()
                && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_' || bytes[j] == b'.')
            {
                j += 1;
            }
            b.push(i, j, NUMBER, 0);
            i = j;
            continue;
        }
        if ch.is_ascii_alphabetic() || ch == b'_' || ch == b'$' {
            let mut j = i + 1;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                j += 1;
            }
            if let Some(&(len, kind, mods)) = known.get(&i) {
                b.push(i, i + len, kind, mods);
                i = (i + len).max(j.min(i + len.max(1)));
                continue;
            }
            let word = &text[i..j];
            if (i == 0 || bytes[i - 1] == b'\n') && keywords::ITEM_WORDS.contains(&word) {
                item = word;
            }
            if is_keyword(text, i, j, item) {
                b.push(i, j, KEYWORD, 0);
            } else if ch == b'$' {
                b.push(i, j, VARIABLE, DEFAULT_LIBRARY);
            }
            i = j;
            continue;
        }
        // Skip one character (whole, for non-ASCII text).
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    lt::SemanticTokens {
        result_id: None,
        data: b.data,
    }
}
