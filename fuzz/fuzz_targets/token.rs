//! Feeds arbitrary bytes to the connect-token readers: the whole token, the
//! Hello token's readable start, and the opened private part (the input is
//! also sealed as a private part, so the reader behind the AEAD sees it).
//!
//! Checks (`protocol/tests/common/secure_checks.rs`, shared with the
//! bounded runs): no panic; whatever decodes re-encodes to the same bytes.
//! Run with `cargo +nightly fuzz run token` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../protocol/tests/common/secure_checks.rs"]
mod secure_checks;

fuzz_target!(|data: &[u8]| {
    secure_checks::check_token(data);
});
