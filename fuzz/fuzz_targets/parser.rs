//! Arbitrary bytes through the whole front end: parse, check, format, compile. Nothing may
//! panic; every failure is a diagnostic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let checked = warden::check::check_source("fuzz.ward", &text);
    if !checked.has_errors() {
        let _ = warden::compile::compile(&checked);
        let _ = warden::fmt::format_source(warden::diagnostics::FileId(0), &text);
    }
});
