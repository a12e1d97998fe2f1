//! `Config::reserved_bytes` agrees with what `World::new` really allocates,
//! counted by a global allocator, within a quarter, over worlds that vary
//! every capacity the estimate follows.
//!
//! This binary holds a single test so nothing else allocates while it
//! measures.

use std::alloc::System;

use lockgrid_kernel::{Config, Fix, Visibility, World};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes `World::new(config)` holds once built.
fn measured(config: Config) -> u64 {
    let region = Region::new(GLOBAL);
    let world = World::new(config).expect("a valid config");
    let stats = region.change();
    drop(world);
    (stats.bytes_allocated - stats.bytes_deallocated) as u64
}

#[test]
fn reserved_bytes_is_within_a_quarter_of_what_a_world_allocates() {
    let base = Config::default();
    let mut configs = Vec::new();
    for visibility in [Visibility::Grid, Visibility::Radius] {
        for hysteresis in [0, 10] {
            let b = Config {
                visibility,
                hysteresis: Fix::from_num(hysteresis),
                ..base
            };
            configs.extend([
                b,
                Config {
                    max_entities: 8192,
                    ..b
                },
                Config {
                    max_observers: 0,
                    ..b
                },
                Config {
                    max_entities: 8192,
                    max_observers: 0,
                    ..b
                },
                Config {
                    max_observers: 2048,
                    ..b
                },
                Config {
                    max_observers: 256,
                    max_view: 64,
                    ..b
                },
                Config {
                    max_view: 2048,
                    ..b
                },
                Config {
                    max_view: 8192,
                    ..b
                },
                Config {
                    width_cells: 1024,
                    height_cells: 1024,
                    ..b
                },
                Config {
                    width_cells: 1024,
                    height_cells: 1024,
                    max_observers: 0,
                    ..b
                },
                Config {
                    max_entities: 65536,
                    max_observers: 64,
                    max_view: 256,
                    ..b
                },
                // Many entities, a handful of observers seeing them all.
                Config {
                    max_entities: 1 << 18,
                    max_observers: 8,
                    max_view: 1 << 18,
                    width_cells: 512,
                    height_cells: 512,
                    ..b
                },
                Config {
                    max_entities: 1024,
                    max_observers: 1024,
                    max_view: 1024,
                    ..b
                },
                // The views' room bounded, as a large world of walkers
                // would bound it, and tightly.
                Config {
                    max_entities: 16384,
                    max_observers: 16384,
                    max_view: 512,
                    max_visible: Some(16384 * 96),
                    ..b
                },
                Config {
                    max_entities: 8192,
                    max_observers: 8192,
                    max_view: 256,
                    max_visible: Some(4096),
                    ..b
                },
                // Bounded by what no tick can pass: nothing changes.
                Config {
                    max_visible: Some(u32::MAX >> 5),
                    ..b
                },
            ]);
        }
    }
    let mut worst = 0.0f64;
    for config in configs {
        let estimate = config.reserved_bytes();
        let real = measured(config);
        let ratio = estimate as f64 / real as f64;
        worst = worst.max((ratio - 1.0).abs());
        assert!(
            (0.75..=1.25).contains(&ratio),
            "estimate {estimate} vs allocated {real} ({ratio:.3}) for {config:?}"
        );
    }
    println!("largest deviation: {:.1}%", worst * 100.0);
}
