//! Feeds arbitrary text to the scenario parser behind `lockgrid run`.
//!
//! Checks (`tests/tests/text_checks/mod.rs`, shared with the bounded
//! runs): no panic; every refusal is a one-line error; whatever parses
//! writes back to JSON that parses to the same scenario.
//! Run with `cargo +nightly fuzz run scenario` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/tests/text_checks/mod.rs"]
#[allow(dead_code)]
mod text_checks;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        text_checks::read_or_refuse(text);
    }
});
