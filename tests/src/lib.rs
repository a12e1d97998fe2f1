//! Shared helpers for lockgrid's cross-crate tests: the brute-force oracle,
//! scenario generators and the per-tick checks the test files share.

pub mod check;
pub mod gen;
pub mod oracle;
pub mod wild;
