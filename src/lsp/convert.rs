//! Conversions between the library's byte spans and file ids and the protocol's UTF-16
//! positions and URIs.

use lsp_types as lt;
use lsp_types::Url;

use super::document::Analysis;
use super::stdlib;
use crate::diagnostics::{Code, Diagnostic, FileId, Severity, SourceFile, Span};

pub fn position(file: &SourceFile, offset: usize) -> lt::Position {
    let (line, character) = file.line_col_utf16(offset);
    lt::Position { line, character }
}

pub fn range(file: &SourceFile, span: Span) -> lt::Range {
    lt::Range {
        start: position(file, span.start as usize),
        end: position(file, span.end as usize),
    }
}

/// The URI of a file of an analysis: the document itself, a stdlib module (materialised on
/// disk), or a sibling module by its path.
pub fn uri_of(analysis: &Analysis, root: &Url, file: FileId) -> Option<Url> {
    if file == analysis.root() {
        return Some(root.clone());
    }
    let name = &analysis.source(file).name;
    if let Some(module) = name.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
        return stdlib::uri(module);
    }
    Url::from_file_path(name).ok()
}

pub fn location(analysis: &Analysis, root: &Url, file: FileId, span: Span) -> Option<lt::Location> {
    Some(lt::Location {
        uri: uri_of(analysis, root, file)?,
        range: range(analysis.source(file), span),
    })
}

pub fn diagnostic(analysis: &Analysis, d: &Diagnostic, uri: &Url) -> lt::Diagnostic {
    let file = analysis.source(d.file);
    let mut message = d.message.clone();
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    let related: Vec<lt::DiagnosticRelatedInformation> = d
        .related
        .iter()
        .map(|r| lt::DiagnosticRelatedInformation {
            location: lt::Location {
                uri: uri.clone(),
                range: range(file, r.span),
            },
            message: r.label.clone(),
        })
        .collect();
    lt::Diagnostic {
        range: range(file, d.span),
        severity: Some(match d.severity {
            Severity::Error => lt::DiagnosticSeverity::ERROR,
            Severity::Warning => lt::DiagnosticSeverity::WARNING,
        }),
        code: Some(lt::NumberOrString::String(d.code.to_string())),
        source: Some("warden".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: (d.code == Code::Unused).then(|| vec![lt::DiagnosticTag::UNNECESSARY]),
        ..Default::default()
    }
}
