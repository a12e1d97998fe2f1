//! `--joins`: where a threaded tick spends its time. A fork that lends
//! the kernel the bench's threads and times every join of a step (how
//! long it took, and each of its tasks) and the serial work between
//! joins; the bench prints the medians over the timed ticks of the bold
//! row. The timing itself allocates a little per join, so that row's
//! allocation count is not the kernel's while it runs.

use std::sync::Mutex;
use std::time::Instant;

use lockgrid_host::threads::Threads;
use lockgrid_kernel::{Fork, MAX_WIDTH};

/// One join: the serial work before it, its own time, its tasks'.
#[derive(Clone, Debug, Default)]
pub struct Join {
    pub before_ms: f64,
    pub wall_ms: f64,
    pub tasks_ms: Vec<f64>,
}

/// One step's joins and the serial work after the last.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub joins: Vec<Join>,
    pub after_ms: f64,
    pub total_ms: f64,
}

struct Clock {
    start: Instant,
    last: Instant,
    shape: Shape,
}

/// The bench's threads, timing each join (see the module docs).
pub struct JoinClock {
    threads: Threads,
    clock: Mutex<Option<Clock>>,
}

impl JoinClock {
    pub fn new(threads: Threads) -> JoinClock {
        JoinClock {
            threads,
            clock: Mutex::new(None),
        }
    }

    /// Starts timing a step.
    pub fn begin(&self) {
        let now = Instant::now();
        *self.lock() = Some(Clock {
            start: now,
            last: now,
            shape: Shape::default(),
        });
    }

    /// Ends timing a step and returns its shape.
    pub fn end(&self) -> Shape {
        let now = Instant::now();
        let Some(mut clock) = self.lock().take() else {
            return Shape::default();
        };
        clock.shape.after_ms = ms(now - clock.last);
        clock.shape.total_ms = ms(now - clock.start);
        clock.shape
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Clock>> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Fork for JoinClock {
    fn width(&self) -> usize {
        self.threads.width()
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        let start = Instant::now();
        let mut took = [0f64; MAX_WIDTH];
        {
            let mut timed: Vec<_> = tasks
                .iter_mut()
                .zip(took.iter_mut())
                .map(|(task, took)| {
                    move || {
                        let t = Instant::now();
                        task();
                        *took = ms(t.elapsed());
                    }
                })
                .collect();
            let mut run: Vec<&mut (dyn FnMut() + Send)> = timed
                .iter_mut()
                .map(|t| t as &mut (dyn FnMut() + Send))
                .collect();
            self.threads.join(&mut run);
        }
        let end = Instant::now();
        if let Some(clock) = self.lock().as_mut() {
            clock.shape.joins.push(Join {
                before_ms: ms(start - clock.last),
                wall_ms: ms(end - start),
                tasks_ms: took[..tasks.len().min(MAX_WIDTH)].to_vec(),
            });
            clock.last = end;
        }
    }
}

/// The median shape of the most common number of joins among `shapes`,
/// as one line: `serial | join [tasks] | … | serial = total` (ms).
pub fn summary(shapes: &[Shape]) -> Option<String> {
    let mut counts = std::collections::BTreeMap::<usize, usize>::new();
    for s in shapes {
        *counts.entry(s.joins.len()).or_default() += 1;
    }
    let (&joins, &ticks) = counts.iter().max_by_key(|&(j, n)| (*n, *j))?;
    let like: Vec<&Shape> = shapes.iter().filter(|s| s.joins.len() == joins).collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut line = String::new();
    for k in 0..joins {
        let before = median(like.iter().map(|s| s.joins[k].before_ms).collect());
        let wall = median(like.iter().map(|s| s.joins[k].wall_ms).collect());
        let width = like
            .iter()
            .map(|s| s.joins[k].tasks_ms.len())
            .min()
            .unwrap_or(0);
        let tasks: Vec<String> = (0..width)
            .map(|w| median(like.iter().map(|s| s.joins[k].tasks_ms[w]).collect()))
            .map(|t| format!("{t:.2}"))
            .collect();
        line += &format!(
            "serial {before:.2} | join {wall:.2} [{}] | ",
            tasks.join(" ")
        );
    }
    let after = median(like.iter().map(|s| s.after_ms).collect());
    let total = median(like.iter().map(|s| s.total_ms).collect());
    Some(format!(
        "{line}serial {after:.2} = {total:.2} ms (medians of the {ticks} of {} ticks with {joins} joins)",
        shapes.len()
    ))
}
