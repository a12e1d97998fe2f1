//! What every text given to `lockgrid run` must satisfy, shared by the
//! bounded runs in `scenario_text_untrusted.rs` and the `scenario` and
//! `decimal` fuzz targets: it is read, or refused with a one-line error,
//! and whatever is read writes back to the same value.

use lockgrid_host::decimal::{parse_fix, parse_int, ExactDecimal};
use lockgrid_host::scenario::Scenario;

/// Reads `text` as a scenario: the error is one line, or the scenario
/// writes back to JSON that reads as the same scenario.
pub fn read_or_refuse(text: &str) {
    match Scenario::from_json_str(text) {
        Ok(scenario) => assert_eq!(
            Scenario::from_json_str(&scenario.to_json()).as_ref(),
            Ok(&scenario),
            "a read scenario writes back to the same scenario"
        ),
        Err(e) => assert!(!e.to_string().contains('\n'), "two lines: {e}"),
    }
}

/// Reads `text` as a number: a value read as `I48F16` prints exactly and
/// reads back to the same bits; an integer read within bounds lies within
/// them.
pub fn read_decimal(text: &str) {
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
}
