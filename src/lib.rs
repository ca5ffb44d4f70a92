//! Warden: a policy language, compiler and evaluator for Guardians of the Agent Control
//! Standard (ACS v0.1.0).
//!
//! Data flows one way through the modules (see ARCHITECTURE.md):
//! `syntax` → `check` → `compile` → `vm`, with `state` holding session history, `acs` the wire
//! protocol, and `guardian` tying them into the embedding API.

pub mod acs;
#[cfg(feature = "cli")]
pub mod adapters;
pub mod check;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compile;
pub mod diagnostics;
pub mod fmt;
pub mod guardian;
#[cfg(feature = "lsp")]
pub mod lsp;
/// The reference evaluator and the differential test against the VM (test builds only).
#[cfg(test)]
mod reference;
pub mod rego;
pub mod roles;
#[cfg(feature = "server")]
pub mod server;
pub mod state;
pub mod syntax;
pub mod testing;
pub mod vm;
