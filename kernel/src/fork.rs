//! Threads lent by the host: the kernel splits parts of a tick into
//! independent tasks and hands them to a [`Fork`], which may run them at
//! once. The kernel spawns nothing and stays `no_std`; a host implements
//! the trait with its own threads (`lockgrid-host` does, with a pool of
//! threads parked between ticks).
//!
//! The split never changes what a tick produces: tasks write disjoint
//! buffers, which are joined in a fixed order, so events, their order and
//! the digest are those of the serial step for every width.

/// The most tasks a tick's parallel part is split into.
pub const MAX_WIDTH: usize = 8;

/// Runs a tick's independent tasks, possibly at once.
pub trait Fork {
    /// How many tasks to split parallel work into: the threads the host
    /// offers, the calling one included. Clamped to `1..=`[`MAX_WIDTH`].
    fn width(&self) -> usize;

    /// Runs every task once and returns when all have finished. The tasks
    /// touch disjoint data, so they may run in any order or at once.
    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]);
}

/// Runs every task in turn on the calling thread: the serial step.
#[derive(Clone, Copy, Debug, Default)]
pub struct Serial;

impl Fork for Serial {
    fn width(&self) -> usize {
        1
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        for task in tasks {
            task();
        }
    }
}

/// Runs every task in turn on the calling thread, last first, and offers
/// `.0` threads: the splits a host of that width gets, in an order no
/// thread pool promises. A host that implements [`Fork`] (or takes events
/// in parts) can step with it to check that nothing it does depends on
/// the order tasks run in.
#[derive(Clone, Copy, Debug, Default)]
pub struct Backwards(pub usize);

impl Fork for Backwards {
    fn width(&self) -> usize {
        self.0
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        for task in tasks.iter_mut().rev() {
            task();
        }
    }
}

/// The width the kernel uses with `fork`: at least 1, at most
/// [`MAX_WIDTH`] and the buffers reserved for it.
pub(crate) fn width_of<F: Fork + ?Sized>(fork: &F, reserved: usize) -> usize {
    fork.width().clamp(1, MAX_WIDTH.min(reserved.max(1)))
}

/// Runs `tasks` with `fork`: at most [`MAX_WIDTH`] of them, which is as
/// many as the kernel ever makes.
pub(crate) fn join_all<T: FnMut() + Send, F: Fork + ?Sized>(fork: &F, tasks: &mut [T]) {
    let mut run = heapless::Vec::<&mut (dyn FnMut() + Send), MAX_WIDTH>::new();
    for task in tasks.iter_mut().take(MAX_WIDTH) {
        let _ = run.push(task);
    }
    fork.join(&mut run);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_runs_every_task_in_order() {
        let (mut a, mut b) = (0, 0);
        let mut first = || a += 1;
        let mut second = || b += 2;
        Serial.join(&mut [&mut first, &mut second]);
        assert_eq!((a, b), (1, 2));
    }

    #[test]
    fn backwards_runs_every_task_last_first() {
        use core::sync::atomic::{AtomicU32, Ordering};
        // Each task appends its digit to the number: 21 is last first.
        let order = AtomicU32::new(0);
        let push = |d| order.store(order.load(Ordering::Relaxed) * 10 + d, Ordering::Relaxed);
        let (mut first, mut second) = (|| push(1), || push(2));
        Backwards(2).join(&mut [&mut first, &mut second]);
        assert_eq!(order.into_inner(), 21);
    }

    #[test]
    fn widths_are_clamped() {
        assert_eq!(width_of(&Backwards(0), 4), 1);
        assert_eq!(width_of(&Backwards(3), 4), 3);
        assert_eq!(width_of(&Backwards(64), 4), 4);
        assert_eq!(width_of(&Backwards(64), 64), MAX_WIDTH);
        assert_eq!(width_of(&Serial, 4), 1);
    }
}
