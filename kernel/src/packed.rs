//! A cell-sorted, structure-of-arrays copy of every entity, for ticks where
//! most of the world moved.
//!
//! Following per-cell linked lists is latency-bound: each step waits for the
//! previous load. When every observer is rebuilt anyway, one counting sort
//! by cell (`O(entities + cells)`) lays the world out so that each row of an
//! observer's ring is one contiguous run, scanned at memory bandwidth.

use alloc::vec;
use alloc::vec::Vec;

use crate::fixed_point::Pos;

pub(crate) struct PackedCells {
    /// `start[c]..start[c + 1]` indexes cell `c`'s entities.
    start: Vec<u32>,
    pos: Vec<Pos>,
    ids: Vec<u64>,
    layers: Vec<u32>,
    slots: Vec<u32>,
}

impl PackedCells {
    pub(crate) fn new(cells: u32, slots: u32) -> Self {
        let n = slots as usize;
        PackedCells {
            start: vec![0; cells as usize + 1],
            pos: vec![Pos::default(); n],
            ids: vec![0; n],
            layers: vec![0; n],
            slots: vec![0; n],
        }
    }

    /// Re-sorts every live entity by cell. `entities` yields
    /// `(slot, cell, pos, id, layers)` in any order.
    pub(crate) fn rebuild(
        &mut self,
        entities: impl Iterator<Item = (u32, u32, Pos, u64, u32)> + Clone,
    ) {
        self.start.fill(0);
        for (_, cell, ..) in entities.clone() {
            self.start[cell as usize + 1] += 1;
        }
        for c in 1..self.start.len() {
            self.start[c] += self.start[c - 1];
        }
        // Scatter, using start[c] as the fill cursor of cell c, then shift back.
        for (slot, cell, pos, id, layers) in entities {
            let at = self.start[cell as usize] as usize;
            self.start[cell as usize] += 1;
            self.pos[at] = pos;
            self.ids[at] = id;
            self.layers[at] = layers;
            self.slots[at] = slot;
        }
        for c in (1..self.start.len()).rev() {
            self.start[c] = self.start[c - 1];
        }
        self.start[0] = 0;
    }

    /// `(slot, pos, id, layers)` of every entity in cells `first..=last`
    /// (one row of a ring), as one contiguous run.
    pub(crate) fn run(
        &self,
        first: u32,
        last: u32,
    ) -> impl Iterator<Item = (u32, Pos, u64, u32)> + '_ {
        let run = self.start[first as usize] as usize..self.start[last as usize + 1] as usize;
        // Zipped slices: no per-element bounds checks in the hot loop.
        self.slots[run.clone()]
            .iter()
            .zip(&self.pos[run.clone()])
            .zip(&self.ids[run.clone()])
            .zip(&self.layers[run])
            .map(|(((&s, &p), &id), &l)| (s, p, id, l))
    }
}
