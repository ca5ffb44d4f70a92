//! Open documents: their text, incremental UTF-16 edits, and the analysis of the latest text.

use std::collections::HashMap;
use std::path::PathBuf;

use lsp_types as lt;
use lsp_types::Url;

use super::convert;
use super::lens::TestOutcome;
use crate::check::{self, Checked, Loaded};
use crate::diagnostics::{FileId, SourceFile, Span};

/// The checker's view of one version of a document.
#[derive(Debug)]
pub struct Analysis {
    pub checked: Checked,
}

impl Analysis {
    /// Checks `text` as the policy rooted at `name` (a path, when the document is a file, so that
    /// `use` of sibling modules and Rego files resolves as `warden check` resolves it).
    pub fn new(name: &str, text: &str, dir: Option<PathBuf>) -> Analysis {
        let mut checked = check::check(Loaded::from_source(name, text, dir));
        // What loading would refuse, too: a policy the editor shows clean also loads.
        crate::compile::check_loadable(&mut checked);
        Analysis { checked }
    }

    /// The root document's file in the analysis.
    pub fn root(&self) -> FileId {
        FileId(0)
    }

    pub fn source(&self, file: FileId) -> &SourceFile {
        self.checked.loaded.sources.get(file)
    }
}

/// One open document.
#[derive(Debug)]
pub struct Document {
    pub uri: Url,
    pub version: i32,
    /// The current text, with its line index.
    pub file: SourceFile,
    pub path: Option<PathBuf>,
    pub analysis: Analysis,
    /// Outcomes of `warden.runTest` since the last edit, shown on the tests' names.
    pub test_results: HashMap<String, TestOutcome>,
    /// Edits came since the analysis was made ([`Document::edit`]).
    stale: bool,
}

impl Document {
    pub fn open(uri: Url, version: i32, text: String) -> Document {
        let path = uri.to_file_path().ok();
        let name = name_of(&uri, path.as_ref());
        let dir = path
            .as_ref()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()));
        let analysis = Analysis::new(&name, &text, dir);
        Document {
            uri,
            version,
            file: SourceFile::new(name, text),
            path,
            analysis,
            test_results: HashMap::new(),
            stale: false,
        }
    }

    pub fn text(&self) -> &str {
        &self.file.text
    }

    /// Applies the client's edits in order (ranges in UTF-16, against the text as edited so
    /// far) and re-checks the document.
    pub fn change(&mut self, version: i32, changes: Vec<lt::TextDocumentContentChangeEvent>) {
        self.edit(version, changes);
        self.refresh();
    }

    /// Applies the client's edits without re-checking: the analysis is stale until
    /// [`Document::refresh`]. A burst of queued edits is applied this way and checked once.
    pub fn edit(&mut self, version: i32, changes: Vec<lt::TextDocumentContentChangeEvent>) {
        let mut text = self.file.text.to_string();
        for c in changes {
            match c.range {
                Some(r) => {
                    let index = SourceFile::new("", text.as_str());
                    let start = index.offset_utf16(r.start.line, r.start.character);
                    let end = index.offset_utf16(r.end.line, r.end.character).max(start);
                    text.replace_range(start..end, &c.text);
                }
                None => text = c.text,
            }
        }
        self.version = version;
        self.file = SourceFile::new(self.file.name.clone(), text);
        self.stale = true;
        self.test_results.clear();
    }

    /// Re-checks the text if edits came since the last check; returns whether it did.
    pub fn refresh(&mut self) -> bool {
        if !self.stale {
            return false;
        }
        let text = self.file.text.to_string();
        self.reanalyse(text);
        self.stale = false;
        true
    }

    fn reanalyse(&mut self, text: String) {
        let dir = self
            .path
            .as_ref()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()));
        self.analysis = Analysis::new(&self.file.name, &text, dir);
        self.file = SourceFile::new(self.file.name.clone(), text);
    }

    /// The byte offset of an LSP position in the current text.
    pub fn offset(&self, pos: lt::Position) -> usize {
        self.file.offset_utf16(pos.line, pos.character)
    }

    pub fn range(&self, span: Span) -> lt::Range {
        convert::range(&self.file, span)
    }

    /// The diagnostics to publish: the checker's for this file, and the outcomes of tests run
    /// from their code lens.
    pub fn lsp_diagnostics(&self) -> Vec<lt::Diagnostic> {
        let mut out: Vec<lt::Diagnostic> = self
            .analysis
            .checked
            .diagnostics
            .items
            .iter()
            .filter(|d| d.file == self.analysis.root())
            .map(|d| convert::diagnostic(&self.analysis, d, &self.uri))
            .collect();
        out.extend(super::lens::result_diagnostics(self));
        out
    }

    /// The whole-document edit `warden fmt` would make (empty when already formatted); `Err`
    /// says why the text cannot be formatted (its first syntax error).
    pub fn format(&self) -> Result<Vec<lt::TextEdit>, String> {
        let formatted = match crate::fmt::format_source(FileId(0), self.text()) {
            Ok(f) => f,
            Err(diagnostics) => {
                let first = diagnostics.iter().find(|d| d.is_error());
                let at = first
                    .map(|d| {
                        let (line, col) = self.file.line_col(d.span.start as usize);
                        format!(" (line {line}, column {col}: {})", d.message)
                    })
                    .unwrap_or_default();
                let name = self
                    .path
                    .as_ref()
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| self.uri.to_string());
                return Err(format!(
                    "warden: {name} was not formatted: it has a syntax error{at}. Fix it and \
                     format again."
                ));
            }
        };
        if formatted == self.text() {
            return Ok(Vec::new());
        }
        let end = self.file.line_col_utf16(self.text().len());
        Ok(vec![lt::TextEdit {
            range: lt::Range {
                start: lt::Position::new(0, 0),
                end: lt::Position::new(end.0, end.1),
            },
            new_text: formatted,
        }])
    }
}

/// What the checker calls a document: its path for files, its URI otherwise.
fn name_of(uri: &Url, path: Option<&PathBuf>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => uri.to_string(),
    }
}
