//! Recovery of a data folder whose journal ends in random bytes takes time
//! linear in the file's size. The figure quoted in the docs comes from
//!
//! ```text
//! cargo test --release -p lockgrid-host --test recover_garbage_tail -- --nocapture
//! ```
//!
//! which prints the time to recover a 64 MiB random tail (16 MiB in a debug
//! build, to keep the suite quick); `LOCKGRID_TAIL_MIB` sets the size. The assertion is loose (a loaded
//! machine, a debug build); a quadratic scan takes hours, not seconds.

use std::io::Write;
use std::time::{Duration, Instant};

use lockgrid_host::journal::{JournalReader, SyncPolicy};
use lockgrid_host::node::{restore, FileStorage, Storage};
use lockgrid_host::store::{journal_path, Recorder, StoreOptions};
use lockgrid_kernel::{Command, Config, Pos, Spawn, World};

/// CPU seconds this thread has used (user + system), where the system
/// says (Linux): on a loaded machine wall time mostly measures the others.
fn thread_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised name; utime and stime are the 14th and
    // 15th fields of the line, in clock ticks of (almost always) 1/100 s.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Deterministic bytes that look random (xorshift64*).
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn a_random_tail_recovers_in_linear_time() {
    let mib: usize = std::env::var("LOCKGRID_TAIL_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 16 } else { 64 });
    let dir = tempfile::tempdir().unwrap();
    let config = Config::default();
    let options = StoreOptions {
        snapshot_every: 0,
        ..StoreOptions::default()
    };
    let mut world = World::new(config).unwrap();
    let mut recorder = Recorder::create(dir.path(), &config, options).unwrap();
    let mut events = Vec::new();
    for tick in 1..=100u64 {
        let commands = [Command::Spawn(Spawn::npc(
            tick,
            Pos::from_ints(tick as i32, 5),
        ))];
        let report = world.step(&commands, &mut events);
        recorder.record(&world, &commands, &report).unwrap();
    }
    recorder.close().unwrap();
    let path = journal_path(dir.path());
    let good = std::fs::metadata(&path).unwrap().len();
    let tail = garbage(mib << 20, 0x5eed);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&tail)
        .unwrap();
    drop(tail);

    // Reading alone (what `lockgrid replay` does), then recovery, which
    // also cuts the tail and syncs.
    let started = Instant::now();
    let cpu = thread_cpu_secs();
    let mut reader = JournalReader::open(&path).unwrap();
    while reader.next_record().unwrap().is_some() {}
    let read = started.elapsed();
    let cpu = cpu.zip(thread_cpu_secs()).map(|(a, b)| b - a);
    assert_eq!(reader.torn_tail().map(|t| t.offset), Some(good));
    println!(
        "read a journal with a {mib} MiB random tail in {:.3} s wall ({:.0} MiB/s){}",
        read.as_secs_f64(),
        mib as f64 / read.as_secs_f64().max(1e-9),
        cpu.map_or(String::new(), |c| format!(", {c:.2} s CPU"))
    );

    let started = Instant::now();
    // What a server does on start: open the folder, restore, catch up.
    let mut storage = FileStorage::new(dir.path(), SyncPolicy::EveryTick, 0);
    let (recovered, report) = restore(&mut storage, &config).unwrap();
    storage.close().unwrap();
    let took = started.elapsed();
    println!(
        "recovered a journal with a {mib} MiB random tail in {:.3} s ({:.0} MiB/s)",
        took.as_secs_f64(),
        mib as f64 / took.as_secs_f64().max(1e-9)
    );
    let cut = report.cut.expect("the tail is reported");
    assert!(cut.contains(&((mib as u64) << 20).to_string()), "{cut}");
    assert_eq!(recovered.tick(), 100);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    assert!(
        took < Duration::from_secs(60),
        "recovery took {took:?}: not linear"
    );
}
