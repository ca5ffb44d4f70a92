//! The compiler: a checked policy (AST plus the checker's resolution table) becomes a
//! [`Program`]: bytecode per rule and label, a constant pool, history slots, the rule index by
//! hook and tool name, and the defaults. `docs/bytecode.md` describes the instruction set.

mod dump;
mod lower;
pub mod name_hash;
pub(crate) mod program;

pub use dump::dump;
pub use lower::{compile, compile_with};
pub use program::*;

use crate::check::Checked;
use crate::diagnostics::Diagnostic;

/// What loading a checked policy would still refuse: the compiler's errors (a constant that does
/// not fold, an object literal built from the event, Rego modules that do not load together,
/// …). Empty when the checker already reported errors, since loading stops there.
pub fn refusals(checked: &Checked) -> Vec<Diagnostic> {
    if checked.has_errors() {
        return Vec::new();
    }
    match compile(checked) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    }
}

/// Adds [`refusals`] to a checked policy's diagnostics, so that a policy `warden check` (or the
/// language server) passes is one `warden compile`, `replay` and `serve` load.
pub fn check_loadable(checked: &mut Checked) {
    let extra = refusals(checked);
    if !extra.is_empty() {
        checked.diagnostics.items.extend(extra);
        checked.diagnostics.sort();
    }
}
