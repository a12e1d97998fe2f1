//! A cell-sorted copy of every observer's pairing record, for ticks where
//! many subjects pair with the observers around them.
//!
//! Each changed subject meets every observer within a ring of cells. Met
//! through the cell lists, each observer is a dependent load and then a
//! record at a slot-random address; met through this copy, a row of the
//! ring is one contiguous run. Making the copy costs one walk of every
//! cell's observer list, `O(observers + cells)`, so it is only kept for
//! worlds with at most four cells per observer.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use super::incremental::Watcher;
use crate::grid::Grid;

pub(super) struct ObserverCells {
    /// `start[c]..start[c + 1]` indexes cell `c`'s observers; empty when
    /// the world has too many cells per observer for a copy.
    start: Vec<u32>,
    observers: Vec<(u32, Watcher)>,
}

impl ObserverCells {
    pub(super) fn new(cells: u32, max_observers: u32) -> Self {
        let kept = u64::from(cells) <= 4 * u64::from(max_observers);
        ObserverCells {
            start: if kept {
                vec![0; cells as usize + 1]
            } else {
                Vec::new()
            },
            observers: Vec::with_capacity(if kept { max_observers as usize } else { 0 }),
        }
    }

    /// Whether this world keeps a copy at all.
    pub(super) fn available(&self) -> bool {
        !self.start.is_empty()
    }

    /// Copies every observer's record, cell by cell.
    pub(super) fn rebuild(&mut self, grid: &Grid, watchers: &[Watcher]) {
        self.observers.clear();
        let Some(cells) = self.start.len().checked_sub(1) else {
            return;
        };
        for cell in 0..cells {
            // At most max_observers ≤ 2^22 entries; cells < 2^24.
            self.start[cell] = self.observers.len() as u32;
            for o in grid.observers(cell as u32) {
                let Some(&w) = watchers.get(o as usize) else {
                    continue;
                };
                // Never more than the live observers, its capacity.
                if self.observers.len() < self.observers.capacity() {
                    self.observers.push((o, w));
                }
            }
        }
        self.start[cells] = self.observers.len() as u32;
    }

    /// Where the observers of cells `first..=last` (one row of a ring)
    /// are, for [`ObserverCells::get`].
    pub(super) fn span(&self, first: u32, last: u32) -> Range<usize> {
        let from = self.start.get(first as usize).copied().unwrap_or(0) as usize;
        let to = self.start.get(last as usize + 1).copied().unwrap_or(0) as usize;
        from..to
    }

    /// The `i`-th observer of the copy and its record.
    pub(super) fn get(&self, i: usize) -> Option<(u32, Watcher)> {
        self.observers.get(i).copied()
    }
}
