//! Arbitrary bytes through the typed decode straight from the bytes (`acs::shell`) and the full
//! decode: whenever the first gives a request, the second gives the same one (the module's
//! one-sided promise; `tests/acs_shell.rs` holds it on generated envelopes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden::acs::envelope::{decode_request_with, DecodeOptions};
use warden::acs::shell;

fuzz_target!(|data: &[u8]| {
    let opts = DecodeOptions::default();
    if let Some(fast) = shell::decode(data, &opts) {
        let (full, _) = decode_request_with(data, &opts)
            .unwrap_or_else(|e| panic!("the shell decode accepted a refused envelope: {e:?}"));
        assert_eq!(fast, full);
    }
});
