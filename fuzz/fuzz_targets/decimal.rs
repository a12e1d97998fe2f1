//! Feeds arbitrary text to the exact decimal readers every number of a
//! scenario goes through.
//!
//! Checks (`tests/tests/text_checks/mod.rs`, shared with the bounded
//! runs): no panic; a value read as `I48F16` prints exactly and reads back
//! to the same bits; an integer read within bounds lies within them.
//! Run with `cargo +nightly fuzz run decimal` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/tests/text_checks/mod.rs"]
#[allow(dead_code)]
mod text_checks;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        text_checks::read_decimal(text);
    }
});
