//! Grid mode: the few subjects due an update this tick, listed by cell, so
//! that a view that stayed in its cell takes its Updates from the cells
//! around it rather than walking every entry for the due ones.
//!
//! In grid mode, while no view is culled, an observer that did not cross a
//! cell border sees a subject before and after the tick exactly when the
//! subject's cell last tick and now both lie within one cell of the
//! observer's, and the observer's interest takes the subject's layers (the
//! rule, `rule.rs`). So its Updates are the due subjects of the cells
//! around it that meet that test; where one in eight or fewer subjects is
//! due (the settling of those that stopped, under a throttle that spares
//! the movers), reading them costs a fraction of a walk of every view.

use alloc::vec;
use alloc::vec::Vec;

use crate::grid::{chebyshev, Grid};
use crate::slot_bits::SlotBits;
use crate::slot_table::SlotTable;

/// Where at most one subject in this many is due, views take their
/// Updates from the due subjects' cells rather than walking their entries.
pub(crate) const DUE_SHARE: u32 = 8;

/// One due subject as a view reads it: its slot, its layers and its
/// cell last tick ([`STAYED`] where that is its cell now), so that
/// reading it touches nothing else.
#[derive(Clone, Copy, Default)]
struct Due {
    slot: u32,
    layers: u32,
    was: u32,
}

/// [`Due::was`] of a subject in the cell it was in last tick.
const STAYED: u32 = u32::MAX;

/// The due subjects of a tick, by cell.
pub(crate) struct DueCells {
    /// `start[c]..start[c + 1]` indexes cell `c`'s due subjects in
    /// `listed`, ascending by slot.
    start: Vec<u32>,
    listed: Vec<Due>,
    active: bool,
}

impl DueCells {
    /// Room for a grid of `cells` cells and `slots` slots; none (never
    /// active) for `cells == 0`.
    pub(crate) fn new(cells: u32, slots: u32) -> Self {
        let room = if cells == 0 { 0 } else { slots as usize };
        DueCells {
            start: vec![0; if cells == 0 { 0 } else { cells as usize + 1 }],
            listed: vec![Due::default(); room],
            active: false,
        }
    }

    /// Lists the `due` subjects of tick `t` by their cell, but for those
    /// spawned this tick (they enter instead), where few enough are due;
    /// returns whether it did. Otherwise (or without room) views are
    /// walked.
    pub(crate) fn build(&mut self, due: &SlotBits, slots: &SlotTable, live: u32, t: u64) -> bool {
        self.active = false;
        let n = due.count();
        if self.start.is_empty() || n.saturating_mul(DUE_SHARE) > live {
            return false;
        }
        self.start.fill(0);
        let listed = |s: u32| slots.born[s as usize] != t;
        for s in due.ones().filter(|&s| listed(s)) {
            self.start[slots.entities[s as usize].cell as usize + 1] += 1;
        }
        for c in 1..self.start.len() {
            self.start[c] += self.start[c - 1];
        }
        // Each cell's cursor is its start: filled, it is the next cell's.
        for s in due.ones().filter(|&s| listed(s)) {
            let e = &slots.entities[s as usize];
            let at = &mut self.start[e.cell as usize];
            if let Some(to) = self.listed.get_mut(*at as usize) {
                let was = match slots.prev_cells[s as usize] {
                    c if c == e.cell => STAYED,
                    c => c,
                };
                *to = Due {
                    slot: s,
                    layers: e.layers,
                    was,
                };
            }
            *at += 1;
        }
        let last = self.start.len() - 1;
        self.start.copy_within(..last, 1);
        self.start[0] = 0;
        self.active = true;
        true
    }

    /// Ends the tick's listing.
    pub(crate) fn clear(&mut self) {
        self.active = false;
    }

    /// Whether this tick lists its due subjects by cell.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.active
    }

    /// Appends to `out` the due subjects the observer at `observer` sees
    /// before and after the tick, ascending by slot within each cell, if
    /// it stayed in its cell (the caller checks that); `false` when they
    /// do not fit `out`.
    pub(crate) fn seen_by<const N: usize>(
        &self,
        observer: u32,
        grid: &Grid,
        slots: &SlotTable,
        out: &mut heapless::Vec<u32, N>,
    ) -> bool {
        let cell = slots.entities[observer as usize].cell;
        let interest = slots.sights[observer as usize].interest;
        let at = grid.xy(cell);
        for (first, last) in grid.ring(cell, 1).rows() {
            let from = self.start[first as usize] as usize;
            let to = self.start[last as usize + 1] as usize;
            for d in self.listed.get(from..to).unwrap_or(&[]) {
                // Most due subjects stood still: their cell is in the ring.
                let near = d.was == STAYED || chebyshev(at, grid.xy(d.was)) <= 1;
                let seen = d.slot != observer && d.layers & interest != 0 && near;
                if seen && out.push(d.slot).is_err() {
                    return false;
                }
            }
        }
        true
    }
}
