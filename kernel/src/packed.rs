//! A cell-sorted, structure-of-arrays copy of every entity, for ticks where
//! most of the world moved.
//!
//! Following per-cell linked lists is latency-bound: each step waits for the
//! previous load. When every observer is rebuilt anyway, one walk of every
//! cell's list (`O(entities + cells)`) lays the world out so that each row
//! of an observer's ring is one contiguous run, scanned at memory bandwidth.

use alloc::vec;
use alloc::vec::Vec;

use crate::grid::Grid;
use crate::scan::Packed;

pub(crate) struct PackedCells {
    /// `start[c]..start[c + 1]` indexes cell `c`'s entities.
    start: Vec<u32>,
    entities: Vec<Packed>,
}

impl PackedCells {
    pub(crate) fn new(cells: u32, slots: u32) -> Self {
        let n = slots as usize;
        PackedCells {
            start: vec![0; cells as usize + 1],
            entities: vec![Packed::default(); n],
        }
    }

    /// Copies every entity out of the grid's cell lists, cell by cell, so
    /// the copy comes out sorted by cell in one pass.
    pub(crate) fn rebuild(&mut self, grid: &Grid) {
        let mut at = 0;
        for cell in 0..self.start.len() - 1 {
            // at ≤ live entities ≤ max_entities ≤ 2^22.
            self.start[cell] = at as u32;
            // Cell indices are below width × height ≤ 2^24.
            for (slot, m) in grid.members(cell as u32) {
                self.entities[at] = Packed {
                    x: m.pos.x.to_bits(),
                    y: m.pos.y.to_bits(),
                    slot,
                    layers: m.layers,
                };
                at += 1;
            }
        }
        let cells = self.start.len() - 1;
        self.start[cells] = at as u32;
    }

    /// Every entity in cells `first..=last` (one row of a ring).
    pub(crate) fn run(&self, first: u32, last: u32) -> &[Packed] {
        let run = self.start[first as usize] as usize..self.start[last as usize + 1] as usize;
        &self.entities[run]
    }
}
