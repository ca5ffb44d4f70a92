//! A light lexical scan of source text: comments (which the formatter must keep), where
//! top-level items start (for error recovery), and how deeply brackets nest (so that hostile
//! input is refused before it can exhaust the parser's stack).

use crate::diagnostics::Span;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub span: Span,
    /// The whole comment, markers included.
    pub text: String,
    /// Whether code precedes it on its line (`x = 1 // like this`).
    pub trailing: bool,
}

#[derive(Debug, Default)]
pub struct Scan {
    pub comments: Vec<Comment>,
    /// Byte offsets where a top-level item keyword starts a line.
    pub item_starts: Vec<usize>,
    /// The first place bracket or `not` nesting passed the limit, if any.
    pub too_deep: Option<usize>,
}

const ITEM_KEYWORDS: [&str; 10] = [
    "package", "use", "let", "pred", "label", "rule", "default", "test", "mask", "effect",
];

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub fn scan(text: &str, max_depth: usize) -> Scan {
    let bytes = text.as_bytes();
    let mut out = Scan::default();
    let mut depth: usize = 0;
    let mut not_run: usize = 0;
    let mut i = 0;
    let mut line_has_code = false;
    let mut line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line_has_code = false;
                line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        // Comments.
        if b == b'#' || (b == b'/' && bytes.get(i + 1) == Some(&b'/')) {
            let end = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
            out.comments.push(Comment {
                span: Span::new(i, end),
                text: text[i..end].trim_end().to_string(),
                trailing: line_has_code,
            });
            i = end;
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            out.comments.push(Comment {
                span: Span::new(i, end),
                text: text[i..end].to_string(),
                trailing: line_has_code,
            });
            i = end;
            continue;
        }
        let at_line_start = line_start;
        line_start = false;
        line_has_code = true;
        // Strings never span lines in Warden.
        if b == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(bytes.len());
            not_run = 0;
            continue;
        }
        if is_ident_byte(b) {
            let start = i;
            while i < bytes.len() && is_ident_byte(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            let column0 = start == 0 || bytes[start - 1] == b'\n';
            if at_line_start && (depth == 0 || column0) && ITEM_KEYWORDS.contains(&word) {
                out.item_starts.push(start);
                depth = 0;
            }
            if word == "not" {
                not_run += 1;
                if not_run > max_depth && out.too_deep.is_none() {
                    out.too_deep = Some(start);
                }
            } else {
                not_run = 0;
            }
            continue;
        }
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > max_depth && out.too_deep.is_none() {
                    out.too_deep = Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        not_run = 0;
        // Step over a whole UTF-8 character.
        i += 1;
        while i < bytes.len() && !text.is_char_boundary(i) {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_items_and_comments() {
        let s = scan(
            "// head\nrule a on x\n  when \"rule\" // tail\n=> deny \"c\"\nlet b = 1\n",
            64,
        );
        assert_eq!(s.comments.len(), 2);
        assert!(!s.comments[0].trailing);
        assert!(s.comments[1].trailing);
        assert_eq!(s.item_starts.len(), 2);
    }

    #[test]
    fn reports_deep_nesting() {
        let deep = "(".repeat(100);
        assert!(scan(&deep, 64).too_deep.is_some());
        assert!(scan("((1))", 64).too_deep.is_none());
    }
}
