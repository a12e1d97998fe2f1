//! The kernel's JSON Lines writer prints every `I48F16` so that the host's
//! scenario reader reads back the same bits.

use lockgrid_host::decimal::parse_fix;
use lockgrid_kernel::jsonl::ExactDecimal;
use lockgrid_kernel::Fix;
use proptest::prelude::*;

proptest! {
    #![proptest_config(lockgrid_tests::cases(2048))]

    #[test]
    fn kernel_decimals_are_exact(bits in prop_oneof![
        any::<i64>(),
        -(1i64 << 20)..(1i64 << 20),
        Just(i64::MIN),
        Just(i64::MAX),
    ]) {
        let fix = Fix::from_bits(bits);
        let text = ExactDecimal(fix).to_string();
        prop_assert_eq!(parse_fix(&text), Ok(fix));
    }
}
