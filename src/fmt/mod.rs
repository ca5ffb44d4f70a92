//! The canonical formatter (`warden fmt`).
//!
//! It owns the one canonical layout of Warden source (docs/formatting.md describes it): it
//! parses the file, refuses it if it has syntax errors, and prints the AST again with the
//! source's comments put back in place. Printing depends only on the AST, the comments and the
//! blank lines between items and steps, so formatting is idempotent, and it never changes what
//! the file means (the AST of the output equals the AST of the input, spans aside).
//!
//! - `out.rs`: the output buffer (lines, indentation, comments) and literal spelling;
//! - `expr.rs`: expressions, with minimal parentheses and line breaking;
//! - `items.rs`: items, decisions and test steps.

mod expr;
mod items;
mod out;

use crate::diagnostics::{Diagnostic, FileId, Span};
use crate::syntax::trivia::{self, Comment};
use crate::syntax::{self, ast};

use out::Out;

/// Formats a whole file. Refuses (returns the syntax diagnostics) if the file does not parse.
pub fn format_source(file: FileId, text: &str) -> Result<String, Vec<Diagnostic>> {
    syntax::on_deep_stack(|| {
        let (module, diagnostics) = syntax::parse(file, text);
        if diagnostics.iter().any(Diagnostic::is_error) {
            return Err(diagnostics);
        }
        Ok(format_module(&module, text))
    })
}

/// Prints a module parsed from `text`, with the comments of `text`. The module must come from
/// `text` (its spans place the comments); any module prints without panicking.
pub fn format_module(module: &ast::Module, text: &str) -> String {
    let comments = trivia::scan(text, usize::MAX).comments;
    let mut p = Printer {
        src: text,
        comments,
        next: 0,
        out: Out::default(),
    };
    p.module(module);
    p.out.finish()
}

/// How blank lines before an element are treated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Blanks {
    /// Not kept (inside expressions and decisions).
    Drop,
    /// Kept, one at most, where the source had one.
    Keep,
    /// Kept, and one is added if the source had none.
    Force,
}

struct Printer<'a> {
    src: &'a str,
    comments: Vec<Comment>,
    /// Comments before this index have been printed.
    next: usize,
    out: Out,
}

impl Printer<'_> {
    /// Whether an unprinted comment starts inside `span` (then it cannot be printed flat).
    fn has_comment_in(&self, span: Span) -> bool {
        self.has_comment_between(Span {
            start: span.start,
            end: self.code_end(span),
        })
    }

    /// Whether an unprinted comment starts inside `span`, taken as it is.
    fn has_comment_between(&self, span: Span) -> bool {
        let i = self
            .comments
            .partition_point(|c| c.span.start < span.start)
            .max(self.next);
        self.comments
            .get(i)
            .is_some_and(|c| c.span.start < span.end)
    }

    /// Where the code of `span` ends. Works around the parser giving some nodes (a `not`
    /// operand without a comparison, a reason without reasoning, an expectation, …) spans that
    /// run on over the whitespace and comments after them.
    fn code_end(&self, span: Span) -> u32 {
        let bytes = self.src.as_bytes();
        let mut pos = (span.end as usize).min(bytes.len());
        let start = span.start as usize;
        loop {
            while pos > start && bytes[pos - 1].is_ascii_whitespace() {
                pos -= 1;
            }
            let i = self
                .comments
                .partition_point(|c| (c.span.start as usize) < pos);
            match i.checked_sub(1).map(|i| &self.comments[i]) {
                Some(c) if c.span.start as usize >= start && pos <= c.span.end as usize => {
                    pos = c.span.start as usize;
                }
                _ => return pos as u32,
            }
        }
    }

    /// Whether the source has an empty line just before `pos`.
    fn blank_before(&self, pos: u32) -> bool {
        let Some(before) = self.src.get(..(pos as usize).min(self.src.len())) else {
            return false;
        };
        let ws = &before[before.trim_end().len()..];
        ws.matches('\n').count() >= 2
    }

    /// Prints every unprinted comment that starts before `pos` (trailing ones at the end of the
    /// current line, the others on lines of their own at `indent`), then starts a fresh line at
    /// `indent` for the element at `pos`.
    fn anchor(&mut self, pos: u32, indent: usize, blanks: Blanks) {
        let end = self.comments[self.next..]
            .iter()
            .position(|c| c.span.start >= pos)
            .map_or(self.comments.len(), |n| self.next + n);
        let mut force = blanks == Blanks::Force
            && !self.comments[self.next..end]
                .iter()
                .filter(|c| !c.trailing)
                .any(|c| self.blank_before(c.span.start))
            && !self.blank_before(pos);
        for i in self.next..end {
            let c = self.comments[i].clone();
            if c.trailing {
                self.out.trailing_comment(&c.text, indent);
            } else {
                if force || (blanks != Blanks::Drop && self.blank_before(c.span.start)) {
                    self.out.blank();
                    force = false;
                }
                self.out.own_line_comment(&c.text, indent);
            }
        }
        self.next = end;
        if force || (blanks != Blanks::Drop && self.blank_before(pos)) {
            self.out.blank();
        }
        self.out.line(indent);
    }

    /// Like [`Self::anchor`] without starting a line: comments that belong before `pos` but
    /// had no better place.
    fn flush(&mut self, pos: u32, indent: usize, blanks: Blanks) {
        while let Some(c) = self.comments.get(self.next).cloned() {
            if c.span.start >= pos {
                break;
            }
            if c.trailing {
                self.out.trailing_comment(&c.text, indent);
            } else {
                if blanks != Blanks::Drop && self.blank_before(c.span.start) {
                    self.out.blank();
                }
                self.out.own_line_comment(&c.text, indent);
            }
            self.next += 1;
        }
    }

    /// Where the closing `close` byte after `from` is, skipping comments.
    fn find_close(&self, from: u32, close: u8) -> u32 {
        let bytes = self.src.as_bytes();
        let mut i = from as usize;
        while i < bytes.len() {
            if let Some(c) = self.comments.iter().find(|c| c.span.start as usize == i) {
                i = c.span.end as usize;
                continue;
            }
            if bytes[i] == close {
                return i as u32;
            }
            i += 1;
        }
        from
    }
}
