//! A copy of per-entity records sorted by cell, for ticks where many
//! lookups would otherwise walk the grid's cell lists.
//!
//! Following a per-cell linked list is latency-bound: each step waits for
//! the previous load. One walk of every cell's list (`O(records + cells)`)
//! lays the records out so that each row of a ring of cells is one
//! contiguous run, read at memory bandwidth. The world keeps up to two:
//! every entity's [`ScanRecord`](crate::scan::ScanRecord) record, for grid-mode view
//! rebuilds, and every observer's pairing record, for pairing many changed
//! subjects in grid mode (radius mode sorts both into squares instead, see
//! `squares.rs`, where the world allows).

use alloc::vec;
use alloc::vec::Vec;

use crate::fork::{self, Fork, MAX_WIDTH};

/// Records fewer than this per task are copied serially: the join would
/// cost more than it saves. Copying 5 000 records a task took 0.06–0.08
/// ms at uniform-10k grid (bench `--joins`), so 4 096 take about as long
/// as a join's wake-up on the 2-core machine.
const MIN_RUN: usize = 4096;

/// `Default` is the empty copy (what `cells == 0` keeps).
#[derive(Default)]
pub(crate) struct CellSorted<T> {
    /// `start[c]..start[c + 1]` indexes cell `c`'s records; empty when the
    /// world keeps no copy.
    start: Vec<u32>,
    /// The room for records, all of it allocated at construction; the
    /// copy is its first `start[cells]`.
    records: Vec<T>,
}

impl<T: Copy + Default + Send> CellSorted<T> {
    /// Room for `records` records over `cells` cells; `cells == 0` keeps
    /// no copy at all (and reserves nothing).
    pub(crate) fn new(cells: u32, records: u32) -> Self {
        if cells == 0 {
            return CellSorted {
                start: Vec::new(),
                records: Vec::new(),
            };
        }
        CellSorted {
            start: vec![0; cells as usize + 1],
            records: vec![T::default(); records as usize],
        }
    }

    /// Whether this world keeps the copy.
    pub(crate) fn available(&self) -> bool {
        !self.start.is_empty()
    }

    /// Copies every cell's records, cell by cell, so the copy comes out
    /// sorted by cell in one pass. Records beyond the room are dropped;
    /// callers size the room for every record there can be.
    pub(crate) fn rebuild<I: Iterator<Item = T>>(&mut self, mut of_cell: impl FnMut(u32) -> I) {
        let Some(cells) = self.start.len().checked_sub(1) else {
            return;
        };
        let mut len = 0;
        for cell in 0..cells {
            // At most max_entities ≤ 2^22 records; cells < 2^24.
            self.start[cell] = len as u32;
            for record in of_cell(cell as u32) {
                if let Some(at) = self.records.get_mut(len) {
                    *at = record;
                    len += 1;
                }
            }
        }
        self.start[cells] = len as u32;
    }

    /// [`CellSorted::rebuild`], split into `fork`'s tasks by runs of cells
    /// that hold about as many records each, where cell `c` yields
    /// `counts[c]` records: each task writes its run's records where the
    /// counts place them. Serial where there are too few records to split,
    /// or where some cell yields other than its count.
    pub(crate) fn rebuild_split<I, F>(
        &mut self,
        counts: &[u32],
        of_cell: impl Fn(u32) -> I + Sync,
        fork: &F,
    ) where
        I: Iterator<Item = T>,
        F: Fork + ?Sized,
    {
        let width = fork::width_of(fork, MAX_WIDTH);
        let cells = self.start.len().saturating_sub(1);
        if width < 2 || counts.len() != cells {
            return self.rebuild(of_cell);
        }
        let mut total = 0usize;
        for (start, &count) in self.start.iter_mut().zip(counts) {
            *start = total as u32;
            total += count as usize;
        }
        if total > self.records.len() || total < width * MIN_RUN {
            return self.rebuild(of_cell);
        }
        self.start[cells] = total as u32;
        // Runs of cells: run `w` starts at the first cell at or past
        // `w / width` of the records.
        let mut bounds = [cells; MAX_WIDTH + 1];
        bounds[0] = 0;
        let mut w = 1;
        for (c, &start) in self.start.iter().enumerate().take(cells) {
            while w < width && start as usize >= total * w / width {
                bounds[w] = c;
                w += 1;
            }
        }
        let mut exact = [true; MAX_WIDTH];
        {
            let (start, of_cell) = (&self.start, &of_cell);
            let mut rest = &mut self.records[..total];
            let mut jobs = heapless::Vec::<_, MAX_WIDTH>::new();
            for (run, exact) in bounds.windows(2).zip(exact.iter_mut()).take(width) {
                let (first, end) = (run[0], run[1]);
                let base = start[first] as usize;
                let n = start[end] as usize - base;
                let (part, tail) = core::mem::take(&mut rest).split_at_mut(n);
                rest = tail;
                let job = move || {
                    let mut at = 0;
                    for cell in first..end {
                        for record in of_cell(cell as u32) {
                            let Some(slot) = part.get_mut(at) else {
                                *exact = false;
                                return;
                            };
                            *slot = record;
                            at += 1;
                        }
                        *exact &= at == start[cell + 1] as usize - base;
                    }
                };
                if jobs.push(job).is_err() {
                    break;
                }
            }
            fork::join_all(fork, &mut jobs);
        }
        if !exact.iter().all(|&e| e) {
            self.rebuild(of_cell);
        }
    }

    /// Every record in cells `first..=last`.
    pub(crate) fn run(&self, first: u32, last: u32) -> &[T] {
        let from = self.start.get(first as usize).copied().unwrap_or(0) as usize;
        let to = self.start.get(last as usize + 1).copied().unwrap_or(0) as usize;
        self.records.get(from..to).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fork::{Backwards, Serial};

    /// Cell `c` of 64 yields `c % 7 * 200` records naming it: 37 800 in
    /// all, enough for 4 tasks.
    fn of_cell(c: u32) -> impl Iterator<Item = (u32, u32)> {
        (0..c % 7 * 200).map(move |k| (c, k))
    }

    #[test]
    fn a_split_copy_is_the_serial_copy() {
        let counts: Vec<u32> = (0..64).map(|c| c % 7 * 200).collect();
        let mut serial = CellSorted::new(64, 40_000);
        serial.rebuild(of_cell);
        for width in 1..=4 {
            let mut split = CellSorted::new(64, 40_000);
            split.rebuild_split(&counts, of_cell, &Backwards(width));
            assert_eq!(split.start, serial.start, "width {width}");
            assert_eq!(split.run(0, 63), serial.run(0, 63), "width {width}");
        }
    }

    #[test]
    fn counts_that_lie_fall_back_to_the_serial_copy() {
        let mut counts: Vec<u32> = (0..64).map(|c| c % 7 * 200).collect();
        let mut serial = CellSorted::new(64, 40_000);
        serial.rebuild(of_cell);
        for (cell, by) in [(5, 1), (40, -1)] {
            let was = counts[cell];
            counts[cell] = was.saturating_add_signed(by);
            let mut split = CellSorted::new(64, 40_000);
            split.rebuild_split(&counts, of_cell, &Backwards(2));
            assert_eq!(split.start, serial.start, "cell {cell} miscounted");
            assert_eq!(split.run(0, 63), serial.run(0, 63));
            counts[cell] = was;
        }
        let mut split = CellSorted::new(64, 40_000);
        split.rebuild_split(&counts, of_cell, &Serial);
        assert_eq!(split.run(0, 63), serial.run(0, 63));
    }
}
