//! A copy of every entity sorted into squares finer than the grid's cells,
//! for radius-mode ticks where most of the world moved.
//!
//! An observer's ring of cells is a square of side `2 (ring + 1)` cells,
//! while what it can see is a disc of radius `r + hysteresis`: with a
//! radius of one cell, only a third of the ring is inside. Squares of about
//! a third of a cell, sized a power of two so that a coordinate's square is
//! a shift, cover the disc's bounding box with a margin of one square: about
//! 40% fewer candidates to scan. The squares are an index of this copy only;
//! cells still decide everything else.
//!
//! Grid-mode ticks with crowds rebuild the squares too: a crowd's cut-off
//! is usually well under a cell away, and the squares within it hold about
//! half the entities of the cells within it.
//!
//! The copy is rebuilt by a counting sort over the entity slots, read in
//! order rather than by chasing the cell lists: `O(slots + squares)`, with
//! the number of squares bounded when the world is built.

use alloc::vec;
use alloc::vec::Vec;

use crate::config::Config;
use crate::grid::Grid;
use crate::scan::Packed;

pub(crate) struct PackedSquares {
    /// `log2` of a square's side, in raw units.
    shift: u32,
    x0: i64,
    y0: i64,
    cols: u32,
    rows: u32,
    /// `start[q]..start[q + 1]` indexes square `q`'s entities (row-major).
    start: Vec<u32>,
    /// Counting-sort cursors, one per square.
    fill: Vec<u32>,
    entities: Vec<Packed>,
    /// Every live entity in slot order, with its square, before the sort.
    walk: Vec<(u32, Packed)>,
}

impl PackedSquares {
    /// The squares for a world, or `None` when its extent does not fit the
    /// arithmetic (beyond `2^62` raw units on a side) or no square smaller
    /// than a cell keeps their number within bounds.
    pub(crate) fn new(config: &Config) -> Option<Self> {
        let cell = config.cell_size.to_bits();
        let width = i128::from(cell) * i128::from(config.width_cells);
        let height = i128::from(cell) * i128::from(config.height_cells);
        let x0 = config.origin.x.to_bits();
        let y0 = config.origin.y.to_bits();
        let fits = |origin: i64, extent: i128| {
            extent < 1 << 62 && i128::from(origin) + extent <= i128::from(i64::MAX)
        };
        if !fits(x0, width) || !fits(y0, height) {
            return None;
        }
        // At most as many squares as there are cells, or twice the
        // entities, whichever is more: memory stays linear in the config.
        let budget = i128::from(config.width_cells * config.height_cells)
            .max(2 * i128::from(config.max_entities));
        let mut shift = (cell / 3).max(1).ilog2();
        loop {
            let side = 1i128 << shift;
            if side >= i128::from(cell) {
                return None;
            }
            let cols = (width + side - 1) / side;
            let rows = (height + side - 1) / side;
            if cols * rows <= budget {
                let n = config.max_entities as usize;
                // cols × rows ≤ budget ≤ 2^24 + 2^23.
                let squares = (cols * rows) as usize;
                return Some(PackedSquares {
                    shift,
                    x0,
                    y0,
                    cols: cols as u32,
                    rows: rows as u32,
                    start: vec![0; squares + 1],
                    fill: vec![0; squares],
                    entities: vec![Packed::default(); n],
                    walk: vec![(0, Packed::default()); n],
                });
            }
            shift += 1;
        }
    }

    /// The side of a square in raw units.
    pub(crate) fn side(&self) -> i64 {
        1 << self.shift
    }

    /// The column (or row) of a coordinate, clamped into the world.
    fn axis(&self, rel: i128, count: u32) -> u32 {
        // An arithmetic shift floors; the clamp keeps the result in range.
        (rel >> self.shift).clamp(0, i128::from(count) - 1) as u32
    }

    fn square_of(&self, x: i64, y: i64) -> u32 {
        let col = self.axis(i128::from(x) - i128::from(self.x0), self.cols);
        let row = self.axis(i128::from(y) - i128::from(self.y0), self.rows);
        row * self.cols + col
    }

    /// Sorts every live entity into its square; `born[slot]` is
    /// `u64::MAX` for a vacant slot.
    pub(crate) fn rebuild(&mut self, grid: &Grid, born: &[u64]) {
        self.start.fill(0);
        let mut n = 0;
        for (slot, (m, &b)) in grid.all_members().iter().zip(born).enumerate() {
            if b == u64::MAX {
                continue;
            }
            // slot < max_entities ≤ 2^22.
            let record = Packed::of(slot as u32, m);
            let square = self.square_of(record.x, record.y);
            self.start[square as usize + 1] += 1;
            self.walk[n] = (square, record);
            n += 1;
        }
        for q in 0..self.fill.len() {
            self.start[q + 1] += self.start[q];
            self.fill[q] = self.start[q];
        }
        for &(square, e) in &self.walk[..n] {
            let at = self.fill[square as usize] as usize;
            self.fill[square as usize] += 1;
            self.entities[at] = e;
        }
    }

    /// The runs (one per row of squares) that hold every entity within
    /// `reach` raw units of `(x, y)` on each axis.
    pub(crate) fn runs(&self, x: i64, y: i64, reach: i64) -> impl Iterator<Item = &[Packed]> + '_ {
        let (x, y, reach) = (i128::from(x), i128::from(y), i128::from(reach));
        let (x0, y0) = (i128::from(self.x0), i128::from(self.y0));
        let first = self.axis(x - reach - x0, self.cols);
        let last = self.axis(x + reach - x0, self.cols);
        let top = self.axis(y - reach - y0, self.rows);
        let bottom = self.axis(y + reach - y0, self.rows);
        (top..=bottom).map(move |row| {
            let from = self.start[(row * self.cols + first) as usize] as usize;
            let to = self.start[(row * self.cols + last) as usize + 1] as usize;
            &self.entities[from..to]
        })
    }
}
