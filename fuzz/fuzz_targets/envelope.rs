//! Arbitrary bytes as an ACS request envelope, through the Guardian with the default policy:
//! every input gets a response (a decision or a JSON-RPC error), never a panic.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use warden::guardian::{Guardian, Policy};

fuzz_target!(|data: &[u8]| {
    static GUARDIAN: OnceLock<Guardian> = OnceLock::new();
    let g = GUARDIAN.get_or_init(|| Guardian::new(Policy::embedded_default()));
    let out = g.handle(data);
    assert!(!out.is_empty());
});
