//! Syntax: the pest grammar (`grammar/warden.pest`), the AST, and the parser that turns source
//! text into a [`ast::Module`] plus every syntax error it can recover from.
//!
//! Nothing here knows about ACS or types; that is the checker's job.

pub mod ast;
mod parser;
pub mod trivia;

pub use parser::{parse, MAX_NESTING};
