//! Shared helpers for lockgrid's cross-crate tests: the brute-force oracle and scenario generators.
