//! Feeds arbitrary bytes to the snapshot decoder and `World::restore`, the
//! path a snapshot file takes once its header and checksum pass (the
//! checksum itself would stop almost every input before the decoder).
//!
//! Checks: no panic; a restored world steps and snapshots again.
//! A snapshot's config is the world's own, and a valid one may ask for
//! gigabytes: inputs with large capacities are decoded but not restored,
//! to keep within the fuzzer's memory limit.
//! Run with `cargo +nightly fuzz run snapshot` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_kernel::{CountingSink, Snapshot, World};

fuzz_target!(|data: &[u8]| {
    let Ok(snapshot) = postcard::from_bytes::<Snapshot>(data) else {
        return;
    };
    let c = &snapshot.config;
    if c.max_entities > 4096 || u64::from(c.max_observers) * u64::from(c.max_view) > 1 << 20 {
        return;
    }
    if c.width_cells.saturating_mul(c.height_cells) > 1 << 16 {
        return;
    }
    if let Ok(mut world) = World::restore(&snapshot) {
        let mut sink = CountingSink::default();
        world.step(&[], &mut sink);
        let again = world.snapshot();
        assert!(World::restore(&again).is_ok(), "a stepped world restores");
    }
});
