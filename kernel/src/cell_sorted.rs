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

/// `Default` is the empty copy (what `cells == 0` keeps).
#[derive(Default)]
pub(crate) struct CellSorted<T> {
    /// `start[c]..start[c + 1]` indexes cell `c`'s records; empty when the
    /// world keeps no copy.
    start: Vec<u32>,
    records: Vec<T>,
}

impl<T: Copy> CellSorted<T> {
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
            records: Vec::with_capacity(records as usize),
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
        self.records.clear();
        let Some(cells) = self.start.len().checked_sub(1) else {
            return;
        };
        for cell in 0..cells {
            // At most max_entities ≤ 2^22 records; cells < 2^24.
            self.start[cell] = self.records.len() as u32;
            for record in of_cell(cell as u32) {
                if self.records.len() < self.records.capacity() {
                    self.records.push(record);
                }
            }
        }
        self.start[cells] = self.records.len() as u32;
    }

    /// Every record in cells `first..=last`.
    pub(crate) fn run(&self, first: u32, last: u32) -> &[T] {
        let from = self.start.get(first as usize).copied().unwrap_or(0) as usize;
        let to = self.start.get(last as usize + 1).copied().unwrap_or(0) as usize;
        self.records.get(from..to).unwrap_or(&[])
    }
}
