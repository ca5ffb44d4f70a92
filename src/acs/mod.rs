//! The ACS v0.1.0 wire protocol: what the hook payloads contain (`fields`, with the walk that
//! finds a payload's provenance records), envelopes in and out (`envelope`, with the request
//! builder), strict JSON decoding (`json`), each payload checked against its hook's table and its content's
//! missing provenance completed (`payload`), RFC 8785 canonical JSON (`jcs`), the signature and
//! audit-chain hashing rules and the SHA-256/hex helpers (`crypto`), RFC 3339 timestamps
//! (`time`), UUIDs (`ids`), the one decision type every layer uses (`decision`), a
//! response's wire bytes written by hand (`encode`), and the typed decode of a common
//! request straight from its bytes (`shell`).

pub mod build;
pub mod crypto;
pub mod decision;
pub mod encode;
pub mod envelope;
pub mod fields;
pub mod ids;
pub mod jcs;
pub mod json;
pub mod payload;
pub mod shell;
pub mod time;

pub use decision::DecisionKind;
