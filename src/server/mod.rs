//! The Guardian as a process (feature `server`): what `warden serve` runs around the
//! embedding API of [`crate::guardian`]. Nothing here decides anything; it moves envelopes in
//! and out and keeps what must outlive the process. With feature `journal` alone, only
//! [`store`] is built: the folder journal for an embedding without the server (no tokio or
//! hyper).
//!
//! - [`serve`]: the transports (JSON-RPC over stdio, HTTP/1.1 on hyper + tokio), building a
//!   Guardian over a state folder;
//! - [`watch`]: policy reload (`--watch` also needs feature `watch`);
//! - [`store`]: the durable journal behind `--state DIR` (redb), from which sessions and their
//!   audit chains are restored; [`pg`]: the same journal in PostgreSQL (`--state
//!   postgres://…`, feature `postgres`); [`backend`]: the one type over both;
//! - [`operator`]: the operator endpoint (effect keys and approvals on a running server);
//! - [`decision_log`]: the sinks of `--decision-log` (a file, stdout, an HTTP collector);
//! - [`mcp_http`]: MCP's Streamable HTTP transport for `warden mcp-proxy --listen`;
//! - [`stop`]: the clean stop on SIGTERM and SIGINT (a second signal ends the process at once).

// The list above links the modules of the whole server; with feature `journal` alone only
// `store` is built, and the other links have nothing to point at.
#![cfg_attr(not(feature = "server"), allow(rustdoc::broken_intra_doc_links))]
// Error responses are the rare path, built once per refused request: no need to box them.
#![allow(clippy::result_large_err)]

#[cfg(feature = "server")]
pub mod backend;
#[cfg(feature = "server")]
pub mod decision_log;
#[cfg(feature = "server")]
pub mod mcp_http;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod operator;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "server")]
pub mod serve;
#[cfg(feature = "server")]
pub mod stop;
pub mod store;
#[cfg(feature = "server")]
pub mod watch;
