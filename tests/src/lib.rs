//! Shared helpers for lockgrid's cross-crate tests: the brute-force oracle,
//! scenario generators and the per-tick checks the test files share.

pub mod check;
pub mod digest;
pub mod gen;
pub mod oracle;
pub mod wild;

/// A proptest config with `cases` cases, unless `PROPTEST_CASES` is set:
/// CI runs the modest defaults, a long local hunt sets the variable.
pub fn cases(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}

/// The scenario fixtures (`tests/scenarios/*.json`), sorted by path.
pub fn scenario_fixtures() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable fixture folder").path())
        .collect();
    paths.sort();
    paths
}
