//! Warden: a policy language, compiler and evaluator for Guardians of the Agent Control
//! Standard (ACS v0.1.0).
//!
//! A policy (`.ward` files) is checked and compiled once into a [`guardian::Policy`]; a
//! [`guardian::Guardian`] then decides ACS requests against it: JSON-RPC envelope bytes in,
//! response bytes out, with per-session state (history, provenance and its labels, the Intent,
//! effect keys, approvals) kept between the steps of a session.
//!
//! # Embedding
//!
//! The library alone, without the server, the language server, the file watcher or the command
//! line, is the language and the evaluator:
//!
//! ```toml
//! [dependencies]
//! # The package is `warden-acs` ("warden" on crates.io is another project); the library is
//! # `warden`. Until it is published, depend on the repository (`git = "…"`) or a path.
//! warden = { package = "warden-acs", version = "0.1", default-features = false }
//!
//! # A debug build of the host builds its dependencies unoptimised too, and a Guardian
//! # decides some 15 times slower; this builds just this one optimised:
//! [profile.dev.package.warden-acs]
//! opt-level = 3
//! ```
//!
//! A host that has no ACS client of its own builds the requests with
//! [`acs::build::Conversation`]: ids, time and provenance records filled in.
//!
//! Load a policy, build a Guardian, and hand it one request:
//!
//! ```
//! use warden::guardian::{Guardian, Options, Policy};
//!
//! // From source here; `Policy::load("policy.ward")` reads a file and its `use`s.
//! let policy = Policy::from_source(
//!     "payments",
//!     r#"
//! rule no_rm on toolCallRequest
//!   when tool.name == "rm"
//!   => deny "no_rm": "never delete files"
//!
//! default allow
//! "#,
//! )
//! .expect("the policy checks"); // an error is `Diagnostics`: render it with `{}`
//!
//! // `Options::default()` is the lenient protocol `warden replay` uses (no handshake
//! // required); `warden serve` runs `Protocol::strict()`. `explain` attaches a trace.
//! let guardian = Guardian::with_options(policy, Options { explain: true, ..Options::default() });
//!
//! let request = br#"{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{
//!   "acs_version":"0.1.0","request_id":"6f1c1a62-8a55-4a8e-9b8a-3f6f0f0b9b01",
//!   "timestamp":"2026-12-01T10:00:00Z",
//!   "metadata":{"agent_id":"a","session_id":"2b0a5c56-3d3f-4d4f-8c5e-9a3f8b2a1c00"},
//!   "payload":{"tool":{"name":"rm"},"arguments":{}}}}"#;
//!
//! // Bytes in, bytes out; malformed input gets the JSON-RPC error ACS prescribes.
//! let response: serde_json::Value = serde_json::from_slice(&guardian.handle(request)).unwrap();
//! assert_eq!(response["result"]["decision"], "deny");
//! assert_eq!(response["result"]["reason_codes"][0], "no_rm");
//! // The explain trace: which rules fired, and every check they made.
//! assert_eq!(response["result"]["policy_data"]["warden"]["fired"][0], "payments.no_rm");
//! ```
//!
//! A `Guardian` is `Send + Sync` and decides many sessions at once; see [`guardian`] for
//! typed requests ([`guardian::Guardian::decide`]), the journal a Guardian writes before it
//! answers ([`guardian::Journal`]), approvals, effect keys and policy reload
//! ([`guardian::Guardian::set_policy`]).
//!
//! # Modules
//!
//! Data flows one way (ARCHITECTURE.md): [`syntax`] → [`check`] → [`compile`] → [`vm`], with
//! [`state`] holding session history, [`acs`] the wire protocol (and the helpers every layer
//! shares: the decision type, timestamps, UUIDs, hashing), and [`guardian`] tying them
//! into the embedding API. [`diagnostics`] is shared by every stage; [`fmt`] is the formatter
//! and [`testing`] the runner behind `warden test`.
//!
//! # Cargo features
//!
//! All on by default (they make the `warden` binary); none is needed to embed.
//!
//! | feature | adds | links |
//! |---|---|---|
//! | `server` | `server`: stdio and HTTP transports, the durable journal (`--state`), the operator endpoint, reload; implies `journal` | tokio, hyper |
//! | `journal` | `server::store` alone: the durable journal in a folder, for a Guardian that keeps its sessions across restarts (`server::store::open_guardian`) | redb |
//! | `lsp` | `lsp`: `warden lsp` | lsp-server, lsp-types |
//! | `watch` | `--watch` for `warden test` and `warden serve` | notify |
//! | `fancy` | diagnostics rendered with the source line in view (otherwise one line each) | miette |
//! | `cli` | the `warden` binary and its commands; implies all the above | clap |
//!
//! # What is public
//!
//! Every public item of the embedding surface — `guardian`, `acs`, `diagnostics`,
//! `adapters`, `server`, `testing`, `fmt` and the small vocabularies (`actions`, `roles`,
//! `text`) — is documented (`missing_docs` warns, and CI denies warnings). The pipeline's
//! stages (`syntax`, `check`, `compile`, `vm`, `state`) and the language server are public
//! for the workspace's own tools (the tests, benches, fuzz targets, the Python and
//! WebAssembly packages); their modules are documented, not every item, and they are no
//! stable API.

#![warn(missing_docs)]

/// README.md's Rust example, compiled and run with the crate's doctests (`cargo test --doc`);
/// its other blocks (`ward`, `sh`, `toml`) are not Rust, which rustdoc leaves alone.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod acs;
pub mod actions;
pub mod adapters;
#[allow(missing_docs)]
// a stage of the pipeline: public for the workspace's tools (ARCHITECTURE.md)
pub mod check;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[allow(missing_docs)]
// a stage of the pipeline: public for the workspace's tools (ARCHITECTURE.md)
pub mod compile;
pub mod diagnostics;
/// The differential test: the compiled path held to the reference evaluator (test builds only).
#[cfg(test)]
mod differential;
pub mod fmt;
pub mod guardian;
#[cfg(feature = "lsp")]
#[allow(missing_docs)] // a front end, public for its tests
pub mod lsp;
/// The reference evaluator the VM is held to (test builds only).
#[cfg(test)]
mod reference;
pub(crate) mod rego;
pub mod roles;
#[cfg(any(feature = "server", feature = "journal"))]
pub mod server;
#[allow(missing_docs)]
// a stage of the pipeline: public for the workspace's tools (ARCHITECTURE.md)
pub mod state;
#[allow(missing_docs)]
// a stage of the pipeline: public for the workspace's tools (ARCHITECTURE.md)
pub mod syntax;
pub mod testing;
pub mod text;
#[allow(missing_docs)]
// a stage of the pipeline: public for the workspace's tools (ARCHITECTURE.md)
pub mod vm;
