//! The host's threads lent to the kernel's step ([`lockgrid_kernel::Fork`]):
//! a pool of threads, started once when [`Threads::new`] is built and
//! parked between joins, which every join of every tick reuses.
//!
//! # Why a pool, not a thread per task
//!
//! A join used to spawn a scoped thread (`std::thread::scope`) for every
//! task but the first, three joins a busy tick: some tens of
//! microseconds a thread, and every spawn allocated (the thread's stack
//! and bookkeeping), so a host stepping with 2 threads no longer had an
//! allocation-free tick. The pool's threads are started once and wait
//! on a condition variable between joins; a join wakes them instead.
//!
//! The tasks borrow the tick's buffers (they are not `'static`), and
//! handing a borrowed closure to a thread that outlives the call needs
//! its lifetime erased, which this workspace does not do itself
//! (`unsafe_code = "forbid"`). The pool is `rayon-core`'s, whose `join`
//! does it behind a safe interface: it pushes the second half of the
//! tasks on the calling worker's own deque, runs the first half, and
//! waits for a parked worker to steal the rest (or runs it itself when
//! nobody has yet), returning only when both halves are done. A task
//! that panics is waited out with the others, then its panic resumes on
//! the joining thread.
//!
//! # Allocation
//!
//! A join made on one of the pool's own threads allocates nothing: the
//! deque and the worker's state exist from the pool's start, and the
//! jobs live on the joining thread's stack. A thread outside the pool
//! can only reach it through the pool's shared queue of injected jobs,
//! whose blocks of 63 slots are allocated as it fills (one allocation,
//! and one free, every 63 joins); it then blocks until a worker has run
//! the join. So a host that must not allocate per tick runs its tick
//! loop on the pool with [`Threads::run`]: that thread steps the world
//! and works as one of the pool's `width` threads, while the thread that
//! called `run` sleeps until the loop returns. A plain join from any
//! other thread gives the same results, only with the rare allocation
//! and one more wake-up per join, which measured up to about 2 ms on a
//! 2-core virtual machine once the pool had idled for 2 ms, against
//! some tens of microseconds inside `run` (`join_latency` below).
//!
//! Width 1 has no pool at all: every task runs on the calling thread,
//! in order, as with [`lockgrid_kernel::Serial`].

use std::sync::Arc;

use lockgrid_kernel::Fork;
use rayon_core::{ThreadPool, ThreadPoolBuilder};

/// The stack of each of the pool's threads: that of a process's main
/// thread on Linux, since [`Threads::run`] moves a host's loop, which
/// was written for the main thread, onto one of them. Address space
/// only, until touched.
const STACK_BYTES: usize = 8 << 20;

/// Up to `width` threads for one tick's parallel part, kept for as long
/// as any clone of this value lives.
#[derive(Clone, Debug)]
pub struct Threads {
    width: usize,
    /// `width` parked threads (none at width 1), shared by the clones.
    pool: Option<Arc<ThreadPool>>,
}

impl Threads {
    /// `width` threads (at least 1), started now and parked until a join.
    /// Should the system refuse to start them, the step runs on the
    /// calling thread alone (the same events, more time) and a warning
    /// says so.
    pub fn new(width: usize) -> Threads {
        let width = width.max(1);
        if width == 1 {
            return Threads { width, pool: None };
        }
        let pool = ThreadPoolBuilder::new()
            .num_threads(width)
            .stack_size(STACK_BYTES)
            .thread_name(|i| format!("lockgrid-step-{i}"))
            .build();
        match pool {
            Ok(pool) => Threads {
                width,
                pool: Some(Arc::new(pool)),
            },
            Err(e) => {
                tracing::warn!(
                    "cannot start {width} threads to step the world ({e}): stepping with one"
                );
                Threads {
                    width: 1,
                    pool: None,
                }
            }
        }
    }

    /// Runs `f` on one of the pool's threads and returns what it returns
    /// (or resumes its panic), the calling thread waiting meanwhile; at
    /// width 1, on the calling thread. Joins made inside `f` go to the
    /// pool without allocating: a host that must not allocate per tick
    /// runs its tick loop here (see the module docs).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// Runs every task, the first half here and the second on whichever of
/// the pool's threads takes it first (each half split again the same
/// way); returns when all are done.
fn split(tasks: &mut [&mut (dyn FnMut() + Send)]) {
    match tasks {
        [] => {}
        [task] => task(),
        _ => {
            let (first, second) = tasks.split_at_mut(tasks.len() / 2);
            rayon_core::join(|| split(first), || split(second));
        }
    }
}

impl Fork for Threads {
    fn width(&self) -> usize {
        self.width
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        match (&self.pool, tasks.len()) {
            // One task, or no pool: nothing to hand over.
            (None, _) | (_, 0..=1) => {
                for task in tasks {
                    task();
                }
            }
            // On a thread of this pool (inside `run`), `install` calls
            // straight through; elsewhere it injects the join and waits.
            (Some(pool), _) => pool.install(|| split(tasks)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::thread::ThreadId;
    use std::time::{Duration, Instant};

    /// Joins `n` tasks that each add their own bit, and checks that every
    /// one ran exactly once.
    fn join_counted(threads: &Threads, n: usize) {
        let ran = AtomicU64::new(0);
        let mut tasks: Vec<Box<dyn FnMut() + Send>> = (0..n)
            .map(|i| {
                let ran = &ran;
                Box::new(move || {
                    ran.fetch_add(1 << (8 * i), Ordering::Relaxed);
                }) as Box<dyn FnMut() + Send>
            })
            .collect();
        let mut refs: Vec<&mut (dyn FnMut() + Send)> =
            tasks.iter_mut().map(|t| &mut **t as _).collect();
        threads.join(&mut refs);
        let want = (0..n).map(|i| 1u64 << (8 * i)).sum::<u64>();
        assert_eq!(ran.load(Ordering::Relaxed), want, "{n} tasks");
    }

    #[test]
    fn every_task_runs_exactly_once_every_join() {
        for width in 1..=4 {
            let threads = Threads::new(width);
            assert_eq!(threads.width(), width);
            for round in 0..200 {
                // As many tasks as the width, and other counts too; from
                // outside the pool and from inside it.
                join_counted(&threads, width);
                join_counted(&threads, 1 + round % 8);
                threads.run(|| join_counted(&threads, width));
            }
            threads.clone().join(&mut []);
        }
        assert_eq!(Threads::new(0).width(), 1);
        Threads::new(0).join(&mut []);
    }

    #[test]
    fn width_one_runs_everything_on_the_calling_thread_in_order() {
        let here = std::thread::current().id();
        let order = Mutex::new(Vec::new());
        let threads = Threads::new(1);
        assert!(threads.pool.is_none());
        let mut tasks: Vec<Box<dyn FnMut() + Send>> = (0..4)
            .map(|i| {
                let order = &order;
                Box::new(move || {
                    assert_eq!(std::thread::current().id(), here);
                    order.lock().unwrap().push(i);
                }) as Box<dyn FnMut() + Send>
            })
            .collect();
        let mut refs: Vec<&mut (dyn FnMut() + Send)> =
            tasks.iter_mut().map(|t| &mut **t as _).collect();
        threads.join(&mut refs);
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
        assert_eq!(threads.run(|| std::thread::current().id()), here);
    }

    #[test]
    fn tasks_run_at_once_on_the_pool() {
        // Two tasks that each wait for the other to start can only both
        // finish if they run at the same time; the second reports which
        // thread ran it.
        let threads = Threads::new(2);
        for inside in [false, true] {
            let started = AtomicU32::new(0);
            let ids = Mutex::new(Vec::<ThreadId>::new());
            let mut task = || {
                started.fetch_add(1, Ordering::SeqCst);
                let until = Instant::now() + Duration::from_secs(10);
                while started.load(Ordering::SeqCst) < 2 {
                    assert!(Instant::now() < until, "the tasks did not run at once");
                    std::hint::spin_loop();
                }
                ids.lock().unwrap().push(std::thread::current().id());
            };
            let mut other = task;
            let mut join = || threads.join(&mut [&mut task, &mut other]);
            if inside {
                threads.run(join);
            } else {
                join();
            }
            let ids = ids.into_inner().unwrap();
            assert_eq!(ids.len(), 2);
            assert_ne!(ids[0], ids[1]);
        }
    }

    #[test]
    fn a_panicking_task_ends_the_join_with_its_panic() {
        for width in 2..=4 {
            let threads = Threads::new(width);
            for inside in [false, true] {
                let ran = AtomicU32::new(0);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut tasks: Vec<Box<dyn FnMut() + Send>> = (0..width)
                        .map(|i| {
                            let ran = &ran;
                            Box::new(move || {
                                ran.fetch_add(1, Ordering::SeqCst);
                                if i == width - 1 {
                                    panic!("task {i} fails");
                                }
                            }) as Box<dyn FnMut() + Send>
                        })
                        .collect();
                    let mut refs: Vec<&mut (dyn FnMut() + Send)> =
                        tasks.iter_mut().map(|t| &mut **t as _).collect();
                    if inside {
                        threads.run(|| threads.join(&mut refs));
                    } else {
                        threads.join(&mut refs);
                    }
                }));
                let panic = outcome.expect_err("the task's panic reaches the caller");
                let message = panic.downcast_ref::<String>().map(String::as_str);
                assert_eq!(message, Some(format!("task {} fails", width - 1).as_str()));
                // Every other task still ran, and the pool still works.
                assert_eq!(ran.load(Ordering::SeqCst), width as u32);
                join_counted(&threads, width);
                threads.run(|| join_counted(&threads, width));
            }
        }
    }

    /// How long after a join starts its second task starts on another
    /// thread (the first waits for it): through a pool's join from one of
    /// its threads and from outside, against spawning a scoped thread as
    /// joins used to; with joins back to back, and 0.3 and 2 ms apart
    /// with the calling thread busy in between, as between a tick's
    /// joins (the pool's threads have gone to sleep by then). Medians of
    /// 400 joins. Timings, so not run by default: `cargo test -p
    /// lockgrid-host --release --lib join_latency -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn join_latency() {
        type Task<'a> = &'a mut (dyn FnMut() + Send);
        /// The median time from a join's start to its second task's.
        fn gap(pause: Duration, join: impl Fn(Task<'_>, Task<'_>)) -> Duration {
            const JOINS: usize = 400;
            let base = Instant::now();
            let started = AtomicU64::new(0);
            let since = |t: Instant| (t - base).as_nanos() as u64;
            let mut first = || {
                let until = Instant::now() + Duration::from_secs(10);
                while started.load(Ordering::Acquire) == 0 {
                    assert!(Instant::now() < until, "the second task never started");
                    std::hint::spin_loop();
                }
            };
            let mut second = || started.store(since(Instant::now()).max(1), Ordering::Release);
            let mut gaps: Vec<u64> = (0..JOINS)
                .map(|_| {
                    // Busy, as the calling thread is between a tick's
                    // joins (sleeping would idle both cores).
                    let until = Instant::now() + pause;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    started.store(0, Ordering::Release);
                    let t0 = since(Instant::now());
                    join(&mut first, &mut second);
                    started.load(Ordering::Acquire).saturating_sub(t0)
                })
                .collect();
            gaps.sort_unstable();
            Duration::from_nanos(gaps[JOINS / 2])
        }
        let threads = Threads::new(2);
        for pause in [0u64, 300, 2000].map(Duration::from_micros) {
            let spawned = gap(pause, |a, b| {
                std::thread::scope(|s| {
                    s.spawn(b);
                    a();
                })
            });
            let outside = gap(pause, |a, b| threads.join(&mut [a, b]));
            let inside = threads.run(|| gap(pause, |a, b| threads.join(&mut [a, b])));
            println!(
                "{pause:?} between joins, the second task starts after: {spawned:?} (a scoped thread spawned), {outside:?} (the pool, from outside), {inside:?} (the pool, inside run)"
            );
        }
    }
}
