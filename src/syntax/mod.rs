//! Syntax: the pest grammar (`grammar/warden.pest`), the AST, and the parser that turns source
//! text into a [`ast::Module`] plus every syntax error it can recover from.
//!
//! Nothing here knows about ACS or types; that is the checker's job.

pub mod ast;
mod parser;
pub mod trivia;

pub use parser::{parse, MAX_NESTING};

thread_local! {
    static DEEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on a thread with a large stack (once per call chain). The parser and the tree
/// walks after it recurse once per nesting level; the nesting limits keep that bounded, and
/// this keeps the bound far below the stack, whatever thread the caller is on. WebAssembly
/// has no threads: there `f` runs in place, on the stack the module was linked with
/// (packages/warden-wasm links an 8 MiB one).
pub fn on_deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if cfg!(target_arch = "wasm32") || DEEP.with(|d| d.get()) {
        return f();
    }
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("warden-deep-stack".into())
            .stack_size(256 << 20)
            .spawn_scoped(scope, || {
                DEEP.with(|d| d.set(true));
                f()
            })
            .expect("spawning a parser thread");
        match handle.join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
