//! Tick-batch codec benchmark: lockgrid's batch encoding against plain
//! `postcard`, `bincode` 2 and `bitcode` on the same recorded tick outputs.
//!
//! The outputs come from running the kernel: `LOCKGRID_BENCH_ENTITIES`
//! entities (default 10 000, one in ten an observer) on a uniform random
//! walk. Every codec encodes each observer's events of each tick as one
//! batch (what a server sends one client per tick) and decodes it back.
//!
//! Run with `cargo bench -p lockgrid-protocol --bench codec`.

use std::hint::black_box;
use std::time::Instant;

use lockgrid_kernel::{Command, Config, Event, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::batch::{decode_part, encode_part};
use lockgrid_protocol::View;

// The tests' seeded splitmix64: the same walk on every run.
#[path = "../tests/common/mod.rs"]
mod common;
use common::Rng;

/// One observer's events of one tick.
struct Batch {
    observer: u64,
    events: Vec<Event>,
}

/// Records `ticks` ticks of a uniform random walk; returns the batches per
/// tick after a warm-up tick (whose batches seed the views).
fn record(entities: u64, ticks: usize) -> (Vec<Batch>, Vec<Vec<Batch>>) {
    let config = Config {
        max_entities: 16_384,
        max_observers: 4_096,
        max_view: 256,
        ..Config::default()
    };
    let extent = i64::from(config.width_cells) * config.cell_size.to_bits();
    let mut world = World::new(config).expect("bench config is valid");
    let mut rng = Rng::new(42);
    let mut pos: Vec<(i64, i64)> = (0..entities)
        .map(|_| (rng.range_i64(0, extent - 1), rng.range_i64(0, extent - 1)))
        .collect();
    let spawns: Vec<Command> = pos
        .iter()
        .enumerate()
        .map(|(i, &(x, y))| {
            let id = i as u64 + 1;
            let at = Pos::new(Fix::from_bits(x), Fix::from_bits(y));
            if i % 10 == 0 {
                Command::Spawn(Spawn::observer(id, at, Fix::from_num(150)))
            } else {
                Command::Spawn(Spawn::npc(id, at))
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut events = Vec::new();
    for t in 0..=ticks {
        events.clear();
        let commands: Vec<Command> = if t == 0 {
            spawns.clone()
        } else {
            pos.iter_mut()
                .enumerate()
                .map(|(i, p)| {
                    // A uniform step of up to 2 units per axis, a uniform heading.
                    p.0 = (p.0 + rng.range_i64(-2 << 16, 2 << 16)).clamp(0, extent - 1);
                    p.1 = (p.1 + rng.range_i64(-2 << 16, 2 << 16)).clamp(0, extent - 1);
                    Command::Move(Move {
                        id: i as u64 + 1,
                        pos: Pos::new(Fix::from_bits(p.0), Fix::from_bits(p.1)),
                        dir: rng.next_u64() as u16,
                        speed: Fix::from_num(2),
                    })
                })
                .collect()
        };
        world.step(&commands, &mut events);
        let mut batches: Vec<Batch> = Vec::new();
        for e in &events {
            let Some((obs, _, _)) = e.order_key() else {
                continue;
            };
            match batches.last_mut() {
                Some(b) if b.observer == obs => b.events.push(*e),
                _ => batches.push(Batch {
                    observer: obs,
                    events: vec![*e],
                }),
            }
        }
        out.push(batches);
    }
    let warm = out.remove(0);
    (warm, out)
}

struct Row {
    name: &'static str,
    bytes: usize,
    encode_ns: f64,
    decode_ns: f64,
}

/// Best of `reps` runs of `f`, in nanoseconds.
fn best<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let entities: u64 = std::env::var("LOCKGRID_BENCH_ENTITIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let ticks = 20;
    let reps = 7;
    let (warm, recorded) = record(entities, ticks);
    let n_events: usize = recorded.iter().flatten().map(|b| b.events.len()).sum();
    let n_batches: usize = recorded.iter().map(Vec::len).sum();
    let mut kinds = [0usize; 3];
    for e in recorded.iter().flatten().flat_map(|b| &b.events) {
        match e {
            Event::Leave { .. } => kinds[0] += 1,
            Event::Enter { .. } => kinds[1] += 1,
            _ => kinds[2] += 1,
        }
    }
    println!(
        "{entities} entities ({} observers), uniform random walk; {ticks} ticks, {n_batches} per-observer batches, {n_events} events ({} leave, {} enter, {} update)",
        entities.div_ceil(10),
        kinds[0],
        kinds[1],
        kinds[2]
    );

    // lockgrid: views evolve across ticks, so every run starts from the
    // views left by the warm-up tick.
    let mut views0: std::collections::BTreeMap<u64, View> = std::collections::BTreeMap::new();
    let mut scratch = vec![0u8; 1 << 16];
    for b in &warm {
        let v = views0.entry(b.observer).or_default();
        encode_part(&b.events, v, &mut scratch).expect("warm-up batch fits");
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(n_batches);
    let mut rows = Vec::new();

    let mut lg_bytes = 0;
    let mut lg_enc = f64::INFINITY;
    for _ in 0..reps {
        let mut views = views0.clone();
        encoded.clear();
        let t = Instant::now();
        let mut total = 0;
        for b in recorded.iter().flatten() {
            let v = views.entry(b.observer).or_default();
            let p = encode_part(&b.events, v, &mut buf).expect("a batch fits 64 KiB");
            debug_assert_eq!(p.consumed, b.events.len());
            total += p.len;
            black_box(&buf[..p.len]);
        }
        lg_enc = lg_enc.min(t.elapsed().as_nanos() as f64);
        lg_bytes = total;
    }
    // Keep the encodings for decoding (outside the timed loop).
    {
        let mut views = views0.clone();
        for b in recorded.iter().flatten() {
            let v = views.entry(b.observer).or_default();
            let p = encode_part(&b.events, v, &mut buf).expect("a batch fits 64 KiB");
            encoded.push(buf[..p.len].to_vec());
        }
    }
    let mut lg_dec = f64::INFINITY;
    let mut out = Vec::new();
    for _ in 0..reps {
        let mut views = views0.clone();
        let t = Instant::now();
        for (b, bytes) in recorded.iter().flatten().zip(&encoded) {
            out.clear();
            let v = views.entry(b.observer).or_default();
            decode_part(bytes, b.observer, v, &mut out).expect("own encoding decodes");
            black_box(&out);
        }
        lg_dec = lg_dec.min(t.elapsed().as_nanos() as f64);
        // Checked outside the timed region: the decode reproduces the events.
    }
    {
        let mut views = views0.clone();
        for (b, bytes) in recorded.iter().flatten().zip(&encoded) {
            out.clear();
            let v = views.entry(b.observer).or_default();
            decode_part(bytes, b.observer, v, &mut out).expect("own encoding decodes");
            assert_eq!(out, b.events, "lockgrid batch round trip");
        }
    }
    rows.push(Row {
        name: "lockgrid batch",
        bytes: lg_bytes,
        encode_ns: lg_enc,
        decode_ns: lg_dec,
    });

    // postcard
    let mut pc_bytes = 0;
    let pc_enc = best(reps, || {
        let mut total = 0;
        for b in recorded.iter().flatten() {
            let used = postcard::to_slice(&b.events, &mut buf).expect("fits");
            total += used.len();
            black_box(&used);
        }
        pc_bytes = total;
    });
    let pc_encoded: Vec<Vec<u8>> = recorded
        .iter()
        .flatten()
        .map(|b| postcard::to_allocvec(&b.events).expect("encodes"))
        .collect();
    let pc_dec = best(reps, || {
        for bytes in &pc_encoded {
            let v: Vec<Event> = postcard::from_bytes(bytes).expect("decodes");
            black_box(v);
        }
    });
    rows.push(Row {
        name: "postcard",
        bytes: pc_bytes,
        encode_ns: pc_enc,
        decode_ns: pc_dec,
    });

    // bincode 2 (standard config: varints)
    let cfg = bincode::config::standard();
    let mut bc_bytes = 0;
    let bc_enc = best(reps, || {
        let mut total = 0;
        for b in recorded.iter().flatten() {
            let n = bincode::serde::encode_into_slice(&b.events, &mut buf, cfg).expect("fits");
            total += n;
            black_box(&buf[..n]);
        }
        bc_bytes = total;
    });
    let bc_encoded: Vec<Vec<u8>> = recorded
        .iter()
        .flatten()
        .map(|b| bincode::serde::encode_to_vec(&b.events, cfg).expect("encodes"))
        .collect();
    let bc_dec = best(reps, || {
        for bytes in &bc_encoded {
            let (v, _): (Vec<Event>, usize) =
                bincode::serde::decode_from_slice(bytes, cfg).expect("decodes");
            black_box(v);
        }
    });
    rows.push(Row {
        name: "bincode 2.0.1",
        bytes: bc_bytes,
        encode_ns: bc_enc,
        decode_ns: bc_dec,
    });

    // bitcode (serde API; it returns an owned Vec)
    let mut bt_bytes = 0;
    let bt_enc = best(reps, || {
        let mut total = 0;
        for b in recorded.iter().flatten() {
            let v = bitcode::serialize(&b.events).expect("encodes");
            total += v.len();
            black_box(v);
        }
        bt_bytes = total;
    });
    let bt_encoded: Vec<Vec<u8>> = recorded
        .iter()
        .flatten()
        .map(|b| bitcode::serialize(&b.events).expect("encodes"))
        .collect();
    let bt_dec = best(reps, || {
        for bytes in &bt_encoded {
            let v: Vec<Event> = bitcode::deserialize(bytes).expect("decodes");
            black_box(v);
        }
    });
    rows.push(Row {
        name: "bitcode (serde)",
        bytes: bt_bytes,
        encode_ns: bt_enc,
        decode_ns: bt_dec,
    });

    println!();
    println!("| codec           | bytes/event | encode ns/event | decode ns/event |");
    println!("|-----------------|------------:|----------------:|----------------:|");
    let n = n_events as f64;
    for r in &rows {
        println!(
            "| {:<15} | {:>11.2} | {:>15.1} | {:>15.1} |",
            r.name,
            r.bytes as f64 / n,
            r.encode_ns / n,
            r.decode_ns / n
        );
    }
}
