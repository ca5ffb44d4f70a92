//! The compiler: a checked policy (AST plus the checker's resolution table) becomes a
//! [`Program`]: bytecode per rule and label, a constant pool, history slots, the rule index by
//! hook and tool name, and the defaults. `docs/bytecode.md` describes the instruction set.

mod dump;
mod lower;
pub mod program;

pub use dump::dump;
pub(crate) use lower::bad_regex;
pub use lower::{compile, compile_with};
pub use program::*;
