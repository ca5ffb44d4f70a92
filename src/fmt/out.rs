//! The output buffer the formatter writes into, and the canonical spelling of literals.

use crate::syntax::ast::{Duration, ExprKind};

/// The column the formatter aims to stay within.
pub(super) const WIDTH: usize = 100;

/// Display width of a piece of text (one column per character).
pub(super) fn width(text: &str) -> usize {
    text.chars().count()
}

/// The formatted text so far. The last line of `s` is the line being written.
#[derive(Default)]
pub(super) struct Out {
    pub(super) s: String,
    /// Whether the current line holds code (not only indentation or comments).
    line_code: bool,
    /// Whether the current line ends in a `//` or `#` comment (nothing may follow it).
    line_comment: bool,
}

impl Out {
    fn line_start(&self) -> usize {
        self.s.rfind('\n').map_or(0, |i| i + 1)
    }

    /// Appends code to the current line.
    pub(super) fn push(&mut self, text: &str) {
        self.s.push_str(text);
        self.line_code = true;
    }

    /// The column the next character would land in.
    pub(super) fn col(&self) -> usize {
        width(&self.s[self.line_start()..])
    }

    fn line_blank(&self) -> bool {
        self.s[self.line_start()..].trim().is_empty()
    }

    fn trim_end(&mut self) {
        let keep = self.s.trim_end_matches([' ', '\t']).len();
        self.s.truncate(keep);
    }

    /// Moves to a fresh line indented by `indent` (reusing the current line if it is blank).
    pub(super) fn line(&mut self, indent: usize) {
        if self.line_blank() {
            let start = self.line_start();
            self.s.truncate(start);
        } else {
            self.trim_end();
            self.s.push('\n');
        }
        self.s.extend(std::iter::repeat_n(' ', indent));
        self.line_code = false;
        self.line_comment = false;
    }

    /// Makes sure an empty line precedes the (fresh) current line. Never at the top of the
    /// file, and never straight after a line that opens a block.
    pub(super) fn blank(&mut self) {
        if self.line_blank() {
            let start = self.line_start();
            self.s.truncate(start);
        } else {
            self.trim_end();
            self.s.push('\n');
        }
        self.line_code = false;
        self.line_comment = false;
        // `s` is now empty or ends with '\n'.
        let body = self.s.trim_end_matches('\n');
        if body.is_empty() || self.s.ends_with("\n\n") || body.ends_with('{') {
            return;
        }
        self.s.push('\n');
    }

    /// A comment that followed code on its source line.
    pub(super) fn trailing_comment(&mut self, text: &str, indent: usize) {
        if !self.line_code || self.line_comment {
            self.own_line_comment(text, indent);
            return;
        }
        self.trim_end();
        self.s.push(' ');
        self.s.push_str(text);
        self.line_comment = is_line_comment(text);
    }

    /// A comment on a line of its own.
    pub(super) fn own_line_comment(&mut self, text: &str, indent: usize) {
        self.line(indent);
        self.s.push_str(text);
        // Code never follows an own-line comment on the same line.
        self.line_comment = true;
    }

    /// The finished text: no trailing blanks, exactly one final newline (none if empty).
    pub(super) fn finish(mut self) -> String {
        let keep = self.s.trim_end().len();
        self.s.truncate(keep);
        if !self.s.is_empty() {
            self.s.push('\n');
        }
        self.s
    }
}

fn is_line_comment(text: &str) -> bool {
    text.starts_with("//") || text.starts_with('#')
}

/// A string literal, quoted and canonically escaped.
pub(super) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number in its shortest exact spelling: integers without `.0`, very large or very small
/// magnitudes in exponent form.
pub(super) fn number(n: f64) -> String {
    let a = n.abs();
    if a != 0.0 && a.is_finite() && !(1e-6..1e21).contains(&a) {
        format!("{n:e}")
    } else {
        format!("{n}")
    }
}

/// A duration in the unit it was written in.
pub(super) fn duration(d: &Duration) -> String {
    format!("{}{}", d.amount(), d.unit.suffix())
}

/// Whether `name` can be written bare (as an identifier) rather than quoted.
pub(super) fn is_bare_ident(name: &str) -> bool {
    const RESERVED: [&str; 12] = [
        "and", "or", "not", "in", "has", "true", "false", "null", "when", "any", "all", "matches",
    ];
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
}

/// Spelling of a literal expression kind, if it is one.
pub(super) fn literal(kind: &ExprKind) -> Option<String> {
    Some(match kind {
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Null => "null".to_string(),
        ExprKind::Number(n) => number(*n),
        ExprKind::String(s) => quote(s),
        ExprKind::Duration(d) => duration(d),
        ExprKind::Name(n) => n.clone(),
        ExprKind::Current => "$".to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            quote("a\"b\\c\n\t\r\0\u{1b}é"),
            r#""a\"b\\c\n\t\r\0\u{1b}é""#
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(number(5.0), "5");
        assert_eq!(number(-2.5), "-2.5");
        assert_eq!(number(1e21), "1e21");
        assert_eq!(number(1.5e-7), "1.5e-7");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn blank_lines() {
        let mut o = Out::default();
        o.blank();
        o.push("a {");
        o.blank();
        o.line(2);
        o.push("b");
        o.blank();
        o.line(0);
        o.push("}");
        assert_eq!(o.finish(), "a {\n  b\n\n}\n");
    }
}
