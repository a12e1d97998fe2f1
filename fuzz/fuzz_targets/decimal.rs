//! Feeds arbitrary text to the exact decimal readers every number of a
//! scenario goes through.
//!
//! Checks: no panic; a value read as `I48F16` prints exactly and reads back
//! to the same bits; an integer read within bounds lies within them.
//! Run with `cargo +nightly fuzz run decimal` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_host::decimal::{parse_fix, parse_int, ExactDecimal};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(fix) = parse_fix(text) {
        let printed = ExactDecimal(fix).to_string();
        assert_eq!(
            parse_fix(&printed),
            Ok(fix),
            "{text:?} printed as {printed}"
        );
    }
    for (min, max) in [
        (0, i128::from(u64::MAX)),
        (i128::from(i64::MIN), i128::from(i64::MAX)),
    ] {
        if let Ok(v) = parse_int(text, min, max) {
            assert!((min..=max).contains(&v), "{text:?} read as {v}");
        }
    }
});
