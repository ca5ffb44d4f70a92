//! The ACS v0.1.0 wire protocol: what the hook payloads contain (`fields`), envelopes in and
//! out (`envelope`), strict JSON decoding (`json`), RFC 8785 canonical JSON (`jcs`), and the
//! signature and audit-chain hashing rules (`crypto`).

pub mod crypto;
pub mod envelope;
pub mod fields;
pub mod jcs;
pub mod json;
