//! Measuring: the counting allocator, per-tick samples, the event tally and
//! the dense-array floor.

use std::alloc::System;
use std::hint::black_box;
use std::time::{Duration, Instant};

use lockgrid_kernel::{Event, EventSink};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes currently allocated by the whole process.
pub fn live_bytes() -> i64 {
    // stats_alloc already books a realloc's growth or shrinkage into these two.
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// Runs `f`, returning its result, its wall time and how many allocations
/// (and reallocations) it made.
pub fn measured<R>(f: impl FnOnce() -> R) -> (R, Duration, u64) {
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let r = f();
    let elapsed = start.elapsed();
    let c = region.change();
    (r, elapsed, (c.allocations + c.reallocations) as u64)
}

/// A buffer larger than the last-level cache, written through between
/// ticks so that the next one starts with caches as cold as a full run
/// leaves them, where every peer runs through its own data in between.
pub struct Evictor {
    lines: Vec<u64>,
}

impl Evictor {
    /// 64 MiB: twice the largest L3 this benchmark has run on.
    pub fn new() -> Evictor {
        Evictor {
            lines: vec![0; 64 << 20 >> 3],
        }
    }

    /// Dirties one word of every cache line.
    pub fn sweep(&mut self) {
        for line in self.lines.iter_mut().step_by(8) {
            *line = line.wrapping_add(1);
        }
        black_box(&mut self.lines);
    }
}

/// Counts a tick's events by kind, the same cheap way for every contender.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub leave: u64,
    pub enter: u64,
    pub update: u64,
    pub rejected: u64,
}

impl Tally {
    pub fn total(&self) -> u64 {
        self.leave + self.enter + self.update + self.rejected
    }

    pub fn add(&mut self, other: Tally) {
        self.leave += other.leave;
        self.enter += other.enter;
        self.update += other.update;
        self.rejected += other.rejected;
    }
}

impl EventSink for Tally {
    fn event(&mut self, event: Event) {
        match black_box(event) {
            Event::Leave { .. } => self.leave += 1,
            Event::Enter { .. } => self.enter += 1,
            Event::Update { .. } => self.update += 1,
            Event::Rejected { .. } => self.rejected += 1,
        }
    }
}

/// Per-tick samples of one contender.
#[derive(Default)]
pub struct Samples {
    pub times: Vec<Duration>,
    pub allocs: Vec<u64>,
    pub events: Tally,
}

impl Samples {
    pub fn push(&mut self, time: Duration, allocs: u64, events: Tally) {
        self.times.push(time);
        self.allocs.push(allocs);
        self.events.add(events);
    }

    fn quantile_ms(&self, q: f64) -> f64 {
        let mut t: Vec<f64> = self.times.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        t.sort_by(f64::total_cmp);
        if t.is_empty() {
            return f64::NAN;
        }
        t[((t.len() - 1) as f64 * q).round() as usize]
    }

    pub fn median_ms(&self) -> f64 {
        self.quantile_ms(0.5)
    }

    pub fn p90_ms(&self) -> f64 {
        self.quantile_ms(0.9)
    }

    /// The slowest tick: work done every few ticks (such as renumbering
    /// slots after churn) shows here when it is too rare for the p90.
    pub fn max_ms(&self) -> f64 {
        self.quantile_ms(1.0)
    }

    pub fn per_tick(&self, count: u64) -> f64 {
        count as f64 / self.times.len().max(1) as f64
    }

    pub fn allocs_per_tick(&self) -> f64 {
        self.per_tick(self.allocs.iter().sum())
    }
}

/// The floor: ns per pair of one plain pass over dense position arrays,
/// computing `dist²` (raw fixed-point, as the kernel does) for exactly the
/// visible pairs, given in CSR form (`offsets` per observer into `subjects`).
pub fn floor_ns_per_pair(
    x: &[i64],
    y: &[i64],
    observers: &[u32],
    offsets: &[usize],
    subjects: &[u32],
) -> f64 {
    if subjects.is_empty() {
        return f64::NAN;
    }
    let pass = || {
        let mut acc = 0u128;
        for (k, &o) in observers.iter().enumerate() {
            let (ox, oy) = (x[o as usize], y[o as usize]);
            for &s in &subjects[offsets[k]..offsets[k + 1]] {
                let dx = i128::from(x[s as usize] - ox);
                let dy = i128::from(y[s as usize] - oy);
                acc = acc.wrapping_add((dx * dx + dy * dy) as u128);
            }
        }
        black_box(acc)
    };
    let mut best = f64::INFINITY;
    let budget = Instant::now();
    let mut runs = 0;
    while runs < 5 || (runs < 200 && budget.elapsed() < Duration::from_millis(300)) {
        let start = Instant::now();
        pass();
        best = best.min(start.elapsed().as_secs_f64());
        runs += 1;
    }
    best * 1e9 / subjects.len() as f64
}
