//! Feeds arbitrary text to the scenario parser behind `lockgrid run`.
//!
//! Checks: no panic; every refusal is a one-line error; whatever parses
//! writes back to JSON that parses to the same scenario.
//! Run with `cargo +nightly fuzz run scenario` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_host::scenario::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Scenario::from_json_str(text) {
        Ok(scenario) => assert_eq!(
            Scenario::from_json_str(&scenario.to_json()).as_ref(),
            Ok(&scenario),
            "a parsed scenario writes back to the same scenario"
        ),
        Err(e) => assert!(!e.to_string().contains('\n'), "one-line error: {e}"),
    }
});
