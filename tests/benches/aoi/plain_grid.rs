//! The plain baseline: what a straightforward AOI looks like, to show how
//! far ahead of it the kernel is.
//!
//! A dense uniform grid with the kernel's cell size, rebuilt from scratch
//! every tick by a counting sort of all entities into one flat array (their
//! positions stored inline, in cell order); a query scans the cells that
//! cover its box (the nine cells in grid mode, the cells under the disc's
//! bounding square in radius mode). Views are diffed with an epoch-stamped
//! mark array instead of a merge: mark the new set, walk the old one
//! (unmarked: Leave; marked: kept), walk the new one (not kept: Enter).

use crate::adapter::{Peer, Seats};
use crate::workload::{CELL, Q};

pub struct PlainGrid {
    /// Cells per axis.
    side: usize,
    /// Each entity's cell, by seat.
    cell: Vec<u32>,
    /// Where each cell's entities start in `slots`; one more entry than cells.
    start: Vec<u32>,
    /// Every entity with its position, in cell order.
    slots: Vec<(u32, [f64; 2])>,
    /// Per id: `epoch` if in the new view, `epoch + 1` if also in the old.
    marks: Vec<u32>,
    epoch: u32,
}

impl PlainGrid {
    /// A grid of `side × side` cells of the kernel's size.
    pub fn new(side: u32) -> Self {
        PlainGrid {
            side: side as usize,
            cell: Vec::new(),
            start: Vec::new(),
            slots: Vec::new(),
            marks: Vec::new(),
            epoch: 0,
        }
    }

    /// The cells (column or row) that `lo..=hi` (world units) touches.
    fn span(&self, lo: f64, hi: f64) -> std::ops::RangeInclusive<usize> {
        let cell = |v: f64| ((v / CELL as f64).floor().max(0.0) as usize).min(self.side - 1);
        cell(lo)..=cell(hi)
    }

    fn visit(&self, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(u32, [f64; 2])) {
        for row in self.span(lo[1], hi[1]) {
            let cols = self.span(lo[0], hi[0]);
            let from = self.start[row * self.side + cols.start()] as usize;
            let to = self.start[row * self.side + cols.end() + 1] as usize;
            for &(s, p) in &self.slots[from..to] {
                f(s, p);
            }
        }
    }
}

impl Peer for PlainGrid {
    fn sync(&mut self, seats: &Seats, _moved: &[u32]) {
        let cells = self.side * self.side;
        let edge = CELL * Q;
        let last = self.side as i64 - 1;
        self.cell.clear();
        self.start.clear();
        self.start.resize(cells + 1, 0);
        for &(x, y) in seats.q {
            let c = (y / edge).clamp(0, last) * (last + 1) + (x / edge).clamp(0, last);
            self.cell.push(c as u32);
            self.start[c as usize + 1] += 1;
        }
        for c in 0..cells {
            self.start[c + 1] += self.start[c];
        }
        self.slots.resize(seats.q.len(), (0, [0.0; 2]));
        // Fill back to front, so that `start` ends where it began.
        for (s, &c) in self.cell.iter().enumerate().rev() {
            let end = &mut self.start[c as usize + 1];
            *end -= 1;
            self.slots[*end as usize] = (s as u32, seats.f[s]);
        }
        // `start[c + 1]` now holds the start of cell c: shift back by one.
        self.start.remove(0);
        self.start.push(seats.q.len() as u32);
    }

    fn visit_box(&mut self, _o: u32, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(u32)) {
        self.visit(lo, hi, |s, _| f(s));
    }

    fn visit_within(&mut self, _o: u32, p: [f64; 2], r2: f64, mut f: impl FnMut(u32)) {
        let r = r2.sqrt();
        self.visit([p[0] - r, p[1] - r], [p[0] + r, p[1] + r], |s, at| {
            let (dx, dy) = (at[0] - p[0], at[1] - p[1]);
            if dx * dx + dy * dy <= r2 {
                f(s);
            }
        });
    }

    fn diff(
        &mut self,
        old: &[u32],
        new: &[(i64, u32)],
        mut leave: impl FnMut(u32),
        mut enter: impl FnMut(u32, u32),
    ) {
        if self.epoch >= u32::MAX - 2 {
            self.marks.fill(0);
            self.epoch = 0;
        }
        self.epoch += 2;
        let (fresh, kept) = (self.epoch, self.epoch + 1);
        let top = new.iter().map(|c| c.0 as usize).max().unwrap_or(0);
        let top = top.max(old.iter().map(|&s| s as usize).max().unwrap_or(0));
        if top >= self.marks.len() {
            self.marks.resize(top + 1, 0);
        }
        for &(id, _) in new {
            self.marks[id as usize] = fresh;
        }
        for &s in old {
            match self.marks[s as usize] == fresh {
                true => self.marks[s as usize] = kept,
                false => leave(s),
            }
        }
        for &(id, seat) in new {
            if self.marks[id as usize] == fresh {
                enter(id as u32, seat);
            }
        }
    }
}
