//! `step` never allocates in steady state: a counting global allocator
//! watches thousands of ticks of a busy world (walkers, teleports, a crowd
//! far beyond `max_view`, despawn/respawn churn, rejected commands), of calm
//! worlds (views updated from a few changed subjects), of a town (culled
//! views updated through their margins) and of a swarm (more such updates
//! than their fixed room holds).
//!
//! This binary runs its check from `main`, without the test harness
//! (`harness = false` in `Cargo.toml`), so that no other thread allocates
//! while it measures: the harness's thread does, for example to say that a
//! test has run for over 60 seconds.

use std::alloc::System;

use lockgrid_kernel::{Event, Visibility, World};
use lockgrid_tests::gen::{self, Scenario};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARM_UP: usize = 200;
const MEASURED: usize = 2500;

fn steady_state_is_allocation_free(name: &str, s: &Scenario, min_events_per_tick: u64) {
    let visibility = s.config.visibility;
    let mut world = World::new(s.config).expect("the busy config is valid");
    let mut events: Vec<Event> = Vec::with_capacity(1 << 16);
    let mut seen = 0u64;
    for commands in &s.ticks[..WARM_UP] {
        events.clear();
        world.step(commands, &mut events);
    }
    for (i, commands) in s.ticks[WARM_UP..].iter().enumerate() {
        events.clear();
        let region = Region::new(GLOBAL);
        let report = world.step(commands, &mut events);
        let stats = region.change();
        assert_eq!(
            (stats.allocations, stats.reallocations, stats.deallocations),
            (0, 0, 0),
            "{name} {visibility:?}: tick {} allocated: {stats:?}",
            WARM_UP + i + 1
        );
        seen += report.events;
    }
    // The scenario must really do something, or the test proves nothing.
    assert!(
        seen > (MEASURED as u64) * min_events_per_tick,
        "{name} {visibility:?}: only {seen} events"
    );
    assert!(world.len() >= s.config.max_entities / 2);
}

fn step_does_not_allocate_after_warm_up() {
    // The counter itself works: a visible allocation is seen.
    let region = Region::new(GLOBAL);
    let probe = std::hint::black_box(vec![1u8; 64]);
    assert!(region.change().allocations >= 1);
    drop(probe);

    let ticks = WARM_UP + MEASURED;
    for visibility in [Visibility::Radius, Visibility::Grid] {
        let busy = gen::busy(0x5eed, ticks, visibility);
        steady_state_is_allocation_free("busy", &busy, 100);
        for max_view in [32, 256] {
            let calm = gen::calm(0x5eed, ticks, visibility, 12, max_view);
            steady_state_is_allocation_free("calm", &calm, 5);
        }
        // A crowd at rest: culled views updated through their margins.
        let town = gen::town(0x5eed, ticks, visibility, 0, 6, 24);
        steady_state_is_allocation_free("town", &town, 5);
        let swarm = gen::swarm(0x5eed, ticks, visibility);
        steady_state_is_allocation_free("swarm", &swarm, 100);
    }
}

/// Run without the test harness: see the module docs.
fn main() {
    step_does_not_allocate_after_warm_up();
    println!("step_does_not_allocate_after_warm_up: ok");
}
