//! The host's threads lent to the kernel's step ([`lockgrid_kernel::Fork`]):
//! each join runs its first task on the calling thread and the others on
//! scoped threads, which end before the join returns.
//!
//! Spawning costs some tens of microseconds a thread, against a busy
//! tick's milliseconds, and allocates (the threads' stacks): a world that
//! ticks in microseconds, or a host that must not allocate per tick,
//! steps with one thread, which runs here without spawning anything.

use lockgrid_kernel::Fork;

/// Up to `width` threads for one tick's parallel part, the calling one
/// included.
#[derive(Clone, Copy, Debug)]
pub struct Threads {
    width: usize,
}

impl Threads {
    /// `width` threads, the caller's included (at least 1).
    pub fn new(width: usize) -> Threads {
        Threads {
            width: width.max(1),
        }
    }
}

impl Fork for Threads {
    fn width(&self) -> usize {
        self.width
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        let Some((first, rest)) = tasks.split_first_mut() else {
            return;
        };
        // One task runs here, without a scope (which allocates).
        if rest.is_empty() {
            first();
            return;
        }
        std::thread::scope(|scope| {
            for task in rest.iter_mut() {
                scope.spawn(task);
            }
            first();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn every_task_runs_once() {
        let ran = AtomicU32::new(0);
        let mut tasks: Vec<Box<dyn FnMut() + Send>> = (0..4)
            .map(|i| {
                let ran = &ran;
                Box::new(move || {
                    ran.fetch_add(1 << (8 * i), Ordering::Relaxed);
                }) as Box<dyn FnMut() + Send>
            })
            .collect();
        let mut refs: Vec<&mut (dyn FnMut() + Send)> =
            tasks.iter_mut().map(|t| &mut **t as _).collect();
        Threads::new(4).join(&mut refs);
        assert_eq!(ran.load(Ordering::Relaxed), 0x0101_0101);
        Threads::new(0).join(&mut []);
        assert_eq!(Threads::new(0).width(), 1);
    }
}
