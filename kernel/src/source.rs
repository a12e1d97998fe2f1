//! Where a view rebuild's candidates come from, as runs of [`ScanRecord`]
//! records: the sorted copy on ticks that rebuild every observer (squares
//! in radius mode where the world allows, else cells), the grid's cell
//! lists otherwise.

use crate::cell_sorted::CellSorted;
use crate::grid::{CellRect, Grid};
use crate::scan::ScanRecord;
use crate::squares::PackedSquares;

#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Squares(&'a PackedSquares),
    Cells(&'a CellSorted<ScanRecord>),
    Lists(&'a Grid),
}

/// Members copied out of a cell list per call of the visitor.
const CHUNK: usize = 64;

impl Source<'_> {
    /// Calls `f` with runs that together hold, once each, every entity of
    /// the cells `ring` or, from squares, every entity within `reach` raw
    /// units of `(x, y)` on each axis.
    #[inline(always)]
    pub(crate) fn visit(
        &self,
        ring: CellRect,
        (x, y, reach): (i64, i64, i64),
        mut f: impl FnMut(&[ScanRecord]),
    ) {
        match self {
            Source::Squares(squares) => squares.whole().runs(x, y, reach).for_each(f),
            Source::Cells(cells) => {
                for (first, last) in ring.rows() {
                    f(cells.run(first, last));
                }
            }
            Source::Lists(grid) => {
                let mut chunk = [ScanRecord::default(); CHUNK];
                for c in ring.cells() {
                    let mut n = 0;
                    for (slot, m) in grid.members(c) {
                        chunk[n] = ScanRecord::of(slot, m);
                        n += 1;
                        if n == CHUNK {
                            f(&chunk);
                            n = 0;
                        }
                    }
                    f(&chunk[..n]);
                }
            }
        }
    }
}
