//! The language server (`warden lsp`): the editor's view of the checker.
//!
//! This module owns everything between the Language Server Protocol and the library: the stdio
//! connection (rust-analyzer's `lsp-server`), the open documents and their incremental edits,
//! and one feature per file, each a pure function of a document's latest analysis:
//!
//! - `document.rs`: open documents, UTF-16 range edits, and re-checking after changes (the
//!   same `check::check` as `warden check`; `benches/lsp.rs` keeps it under 100 ms on a
//!   2 000-line policy). A burst of `didChange`s is applied edit by edit and checked once
//!   (`serve`);
//! - `convert.rs`: byte spans ↔ LSP positions (UTF-16), file ids ↔ URIs, diagnostics;
//! - `stdlib.rs`: the embedded stdlib modules, written once to a temp folder so any client can
//!   open them on go-to-definition;
//! - `query.rs`: hover, go-to-definition, find-references, document and workspace symbols;
//! - `complete.rs`: completion (hooks, payload fields, labels, modules, builtins, reason codes);
//! - `tokens.rs`: semantic tokens;
//! - `lens.rs`: code lenses on `test` blocks and the `warden.runTest`/`warden.debugTest`
//!   commands, which show the outcome inline (a diagnostic on the test's name) and as a message.
//!
//! Positions are UTF-16 code units, as the protocol requires; every conversion goes through
//! [`crate::diagnostics::SourceFile`]. The server is single-threaded: each request is answered
//! from the analysis made when the document last changed.

mod complete;
mod convert;
mod document;
pub mod keywords;
mod lens;
mod query;
mod stdlib;
mod tokens;

use std::collections::HashMap;
use std::path::PathBuf;

use lsp_server::{Connection, Message, Notification, Request, Response};
use lsp_types as lt;
use lsp_types::Url;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use document::{Analysis, Document};
/// The protocol types the server speaks, for embedders and `benches/lsp.rs`.
pub use lsp_types;

/// The commands `workspace/executeCommand` accepts (code lenses on tests use them).
pub const COMMANDS: &[&str] = &[lens::RUN_TEST, lens::DEBUG_TEST];

/// Runs the server on stdin/stdout until the client says `exit`; returns the exit code.
pub fn run() -> i32 {
    let (connection, io_threads) = Connection::stdio();
    let code = match serve(&connection) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("warden lsp: {e}");
            1
        }
    };
    drop(connection);
    if let Err(e) = io_threads.join() {
        eprintln!("warden lsp: {e}");
    }
    code
}

/// What the server advertises in `initialize`.
pub fn capabilities() -> lt::ServerCapabilities {
    use lt::*;
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::Supported(false)),
                ..Default::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".into(), "\"".into(), " ".into()]),
            ..Default::default()
        }),
        document_symbol_provider: Some(OneOf::Left(true)),
        workspace_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        semantic_tokens_provider: Some(SemanticTokensServerCapabilities::SemanticTokensOptions(
            SemanticTokensOptions {
                legend: tokens::legend(),
                full: Some(SemanticTokensFullOptions::Bool(true)),
                range: None,
                work_done_progress_options: Default::default(),
            },
        )),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        code_lens_provider: Some(CodeLensOptions {
            resolve_provider: Some(false),
        }),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: COMMANDS.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn serve(connection: &Connection) -> Result<(), Box<dyn std::error::Error + Sync + Send>> {
    let caps = serde_json::to_value(capabilities())?;
    let (id, init) = connection.initialize_start()?;
    connection.initialize_finish(
        id,
        serde_json::json!({
            "capabilities": caps,
            "serverInfo": { "name": "warden", "version": env!("CARGO_PKG_VERSION") },
        }),
    )?;
    let init: lt::InitializeParams = serde_json::from_value(init).unwrap_or_default();
    let mut server = Server::new(connection, workspace_root(&init));
    let mut next = None;
    loop {
        let msg = match next.take() {
            Some(m) => m,
            None => match connection.receiver.recv() {
                Ok(m) => m,
                Err(_) => return Ok(()),
            },
        };
        match msg {
            Message::Request(req) => {
                if connection.handle_shutdown(&req)? {
                    return Ok(());
                }
                server.request(req);
            }
            Message::Notification(n) if n.method == DID_CHANGE => {
                // Coalesce: every `didChange` already sent behind this one is applied too, and
                // each edited document is checked (and its diagnostics published) once. The
                // stdio reader hands messages over one at a time (a rendezvous channel), so
                // "already sent" is what arrives within `COALESCE_WAIT` of the previous one.
                server.edit(n);
                loop {
                    match connection.receiver.recv_timeout(COALESCE_WAIT) {
                        Ok(Message::Notification(n)) if n.method == DID_CHANGE => server.edit(n),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                server.refresh();
            }
            Message::Notification(n) => server.notification(n),
            Message::Response(_) => {}
        }
    }
}

/// How long a `didChange` waits for the next one before the document is checked: the time
/// the reader takes to parse a message already in the pipe, with room to spare; far below a
/// keystroke's interval.
const COALESCE_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

const DID_CHANGE: &str =
    <lt::notification::DidChangeTextDocument as lt::notification::Notification>::METHOD;

#[allow(deprecated)] // root_uri: older clients send only it
fn workspace_root(init: &lt::InitializeParams) -> Option<PathBuf> {
    if let Some(folders) = &init.workspace_folders {
        if let Some(f) = folders.first() {
            return f.uri.to_file_path().ok();
        }
    }
    init.root_uri.as_ref().and_then(|u| u.to_file_path().ok())
}

/// The open documents and the connection to the client.
pub struct Server<'c> {
    connection: &'c Connection,
    root: Option<PathBuf>,
    docs: HashMap<Url, Document>,
}

impl<'c> Server<'c> {
    fn new(connection: &'c Connection, root: Option<PathBuf>) -> Self {
        Server {
            connection,
            root,
            docs: HashMap::new(),
        }
    }

    fn send(&self, msg: Message) {
        // The client hung up: the receive loop ends on its own.
        let _ = self.connection.sender.send(msg);
    }

    fn notify<N: lt::notification::Notification>(&self, params: N::Params) {
        self.send(Message::Notification(Notification::new(
            N::METHOD.to_string(),
            params,
        )));
    }

    fn publish(&self, uri: &Url) {
        if let Some(doc) = self.docs.get(uri) {
            self.notify::<lt::notification::PublishDiagnostics>(lt::PublishDiagnosticsParams {
                uri: uri.clone(),
                diagnostics: doc.lsp_diagnostics(),
                version: Some(doc.version),
            });
        }
    }

    /// Applies a `didChange`'s edits without checking ([`Server::refresh`] checks).
    fn edit(&mut self, n: Notification) {
        if let Some(p) = params::<lt::DidChangeTextDocumentParams>(n.params) {
            if let Some(doc) = self.docs.get_mut(&p.text_document.uri) {
                doc.edit(p.text_document.version, p.content_changes);
            }
        }
    }

    /// Checks every document edited since its last check and publishes its diagnostics.
    fn refresh(&mut self) {
        let edited: Vec<Url> = self
            .docs
            .iter_mut()
            .filter_map(|(uri, doc)| doc.refresh().then(|| uri.clone()))
            .collect();
        for uri in edited {
            self.publish(&uri);
        }
    }

    fn notification(&mut self, n: Notification) {
        use lt::notification::*;
        use lt::{DidCloseTextDocumentParams, DidOpenTextDocumentParams};
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Some(p) = params::<DidOpenTextDocumentParams>(n.params) {
                    let d = p.text_document;
                    let uri = d.uri.clone();
                    self.docs
                        .insert(uri.clone(), Document::open(d.uri, d.version, d.text));
                    self.publish(&uri);
                }
            }
            DidChangeTextDocument::METHOD => {
                self.edit(n);
                self.refresh();
            }
            DidCloseTextDocument::METHOD => {
                if let Some(p) = params::<DidCloseTextDocumentParams>(n.params) {
                    self.docs.remove(&p.text_document.uri);
                    self.notify::<PublishDiagnostics>(lt::PublishDiagnosticsParams {
                        uri: p.text_document.uri,
                        diagnostics: Vec::new(),
                        version: None,
                    });
                }
            }
            _ => {}
        }
    }

    fn request(&mut self, req: Request) {
        use lt::request::*;
        let id = req.id.clone();
        let result: Result<Value, String> = match req.method.as_str() {
            HoverRequest::METHOD => self.on_doc::<HoverRequest>(req, |doc, p| {
                let pos = p.text_document_position_params.position;
                query::hover(doc, doc.offset(pos))
            }),
            GotoDefinition::METHOD => self.on_doc::<GotoDefinition>(req, |doc, p| {
                let pos = p.text_document_position_params.position;
                query::definition(doc, doc.offset(pos)).map(lt::GotoDefinitionResponse::Array)
            }),
            References::METHOD => self.on_doc::<References>(req, |doc, p| {
                let pos = p.text_document_position.position;
                query::references(doc, doc.offset(pos), p.context.include_declaration)
            }),
            Completion::METHOD => self.on_doc::<Completion>(req, |doc, p| {
                let pos = p.text_document_position.position;
                Some(lt::CompletionResponse::Array(complete::complete(
                    doc,
                    doc.offset(pos),
                )))
            }),
            DocumentSymbolRequest::METHOD => self.on_doc::<DocumentSymbolRequest>(req, |doc, _| {
                Some(lt::DocumentSymbolResponse::Nested(query::document_symbols(
                    doc,
                )))
            }),
            WorkspaceSymbolRequest::METHOD => match params::<lt::WorkspaceSymbolParams>(req.params)
            {
                Some(p) => to_value(Some(lt::WorkspaceSymbolResponse::Flat(
                    query::workspace_symbols(self.root.as_deref(), &self.docs, &p.query),
                ))),
                None => Err("bad params".into()),
            },
            Formatting::METHOD => {
                // A text that cannot be formatted gets no edits, and the user is told why.
                let mut why = None;
                let r = self.on_doc::<Formatting>(req, |doc, _| match doc.format() {
                    Ok(edits) => Some(edits),
                    Err(e) => {
                        why = Some(e);
                        None
                    }
                });
                if let Some(message) = why {
                    self.notify::<lt::notification::ShowMessage>(lt::ShowMessageParams {
                        typ: lt::MessageType::WARNING,
                        message,
                    });
                }
                r
            }
            SemanticTokensFullRequest::METHOD => {
                self.on_doc::<SemanticTokensFullRequest>(req, |doc, _| {
                    Some(lt::SemanticTokensResult::Tokens(tokens::semantic_tokens(
                        doc,
                    )))
                })
            }
            CodeActionRequest::METHOD => self
                .on_doc::<CodeActionRequest>(req, |doc, p| Some(query::code_actions(doc, p.range))),
            CodeLensRequest::METHOD => {
                self.on_doc::<CodeLensRequest>(req, |doc, _| Some(lens::code_lenses(doc)))
            }
            ExecuteCommand::METHOD => match params::<lt::ExecuteCommandParams>(req.params) {
                Some(p) => {
                    let out = self.execute(p);
                    to_value(out)
                }
                None => Err("bad params".into()),
            },
            _ => {
                self.send(Message::Response(Response::new_err(
                    id,
                    lsp_server::ErrorCode::MethodNotFound as i32,
                    format!("warden lsp does not handle {}", req.method),
                )));
                return;
            }
        };
        let response = match result {
            Ok(v) => Response {
                id,
                result: Some(v),
                error: None,
            },
            Err(e) => Response::new_err(id, lsp_server::ErrorCode::InvalidParams as i32, e),
        };
        self.send(Message::Response(response));
    }

    /// Answers a request about one open document (`null` for a document that is not open).
    fn on_doc<R>(
        &self,
        req: Request,
        f: impl FnOnce(&Document, R::Params) -> R::Result,
    ) -> Result<Value, String>
    where
        R: lt::request::Request,
        R::Params: DeserializeOwned + HasUri,
        R::Result: serde::Serialize,
    {
        let p: R::Params = serde_json::from_value(req.params).map_err(|e| e.to_string())?;
        let Some(doc) = self.docs.get(p.uri()) else {
            return Ok(Value::Null);
        };
        serde_json::to_value(f(doc, p)).map_err(|e| e.to_string())
    }

    fn execute(&mut self, p: lt::ExecuteCommandParams) -> Option<Value> {
        let debug = match p.command.as_str() {
            lens::RUN_TEST => false,
            lens::DEBUG_TEST => true,
            _ => return None,
        };
        let uri: Url = p.arguments.first()?.as_str()?.parse().ok()?;
        let name = p.arguments.get(1)?.as_str()?.to_string();
        let doc = self.docs.get_mut(&uri)?;
        let outcome = lens::run_test(doc, &name, debug);
        let (typ, message) = outcome.message(&name);
        doc.test_results.insert(name.clone(), outcome.clone());
        self.publish(&uri);
        self.notify::<lt::notification::ShowMessage>(lt::ShowMessageParams { typ, message });
        serde_json::to_value(outcome.to_json(&name)).ok()
    }
}

fn params<P: DeserializeOwned>(v: Value) -> Option<P> {
    serde_json::from_value(v).ok()
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, String> {
    serde_json::to_value(v).map_err(|e| e.to_string())
}

/// Request parameters that name one document.
trait HasUri {
    fn uri(&self) -> &Url;
}

macro_rules! has_uri {
    ($($t:ty => |$p:ident| $e:expr),* $(,)?) => {
        $(impl HasUri for $t {
            fn uri(&self) -> &Url {
                let $p = self;
                $e
            }
        })*
    };
}

has_uri! {
    lt::HoverParams => |p| &p.text_document_position_params.text_document.uri,
    lt::GotoDefinitionParams => |p| &p.text_document_position_params.text_document.uri,
    lt::ReferenceParams => |p| &p.text_document_position.text_document.uri,
    lt::CompletionParams => |p| &p.text_document_position.text_document.uri,
    lt::DocumentSymbolParams => |p| &p.text_document.uri,
    lt::DocumentFormattingParams => |p| &p.text_document.uri,
    lt::SemanticTokensParams => |p| &p.text_document.uri,
    lt::CodeActionParams => |p| &p.text_document.uri,
    lt::CodeLensParams => |p| &p.text_document.uri,
}
