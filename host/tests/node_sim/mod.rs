//! The whole-server simulation: the real node, real protocol clients and
//! the in-memory disk on one virtual clock, every choice drawn from one
//! seed. Shared by the simulation tests.
#![allow(dead_code)]

pub mod net;
pub mod recorded;
pub mod world;

pub use net::{Faults, Net, SERVER};
pub use recorded::Recorded;
// Not every test that shares this module runs the whole-server world.
#[allow(unused_imports)]
pub use world::{run, Plan};

/// splitmix64: tiny, seeded, reproducible.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x853c_49e6_748f_ea9b)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.below((hi - lo) as u64 + 1) as i64)
    }

    /// True with probability `per_million` / 1 000 000.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.below(1_000_000) < per_million
    }
}

/// The seeds a test runs: `LOCKGRID_SIM_SEED=<n>` runs one,
/// `LOCKGRID_SIM_SEEDS=<count>` runs `0..count` (from
/// `LOCKGRID_SIM_FIRST`, default 0), else `0..default`.
pub fn seeds(default: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("LOCKGRID_SIM_SEED") {
        return vec![s.parse().expect("LOCKGRID_SIM_SEED is a number")];
    }
    let n = std::env::var("LOCKGRID_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let first: u64 = std::env::var("LOCKGRID_SIM_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (first..first + n).collect()
}
