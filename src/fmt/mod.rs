//! The canonical formatter (`warden fmt`). (Placeholder until the formatter lands.)
use crate::diagnostics::{Diagnostic, FileId};
pub fn format_source(file: FileId, text: &str) -> Result<String, Vec<Diagnostic>> {
    let (_, d) = crate::syntax::parse(file, text);
    if d.is_empty() { Ok(text.to_string()) } else { Err(d) }
}
