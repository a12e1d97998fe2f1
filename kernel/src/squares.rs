//! Copies of records sorted into squares finer than the grid's cells: of
//! every entity, for radius-mode ticks where most of the world moved, and
//! of every observer, for pairing many changed subjects in radius mode.
//!
//! An observer's ring of cells is a square of side `2 (ring + 1)` cells,
//! while what it can see is a disc of radius `r + hysteresis`: with a
//! radius of one cell, only a third of the ring is inside. Squares of about
//! a third of a cell, sized a power of two so that a coordinate's square is
//! a shift, cover the disc's bounding box with a margin of one square: about
//! 40% fewer records to read. The same holds the other way round for the
//! observers around a subject. The squares are an index of these copies
//! only; cells still decide everything else.
//!
//! Grid-mode ticks with crowds sort the entities into squares too: a
//! crowd's cut-off is usually well under a cell away, and the squares
//! within it hold about half the entities of the cells within it.
//!
//! A copy is rebuilt by a counting sort over its records, read in order
//! rather than by chasing the cell lists: `O(records + squares)`, with the
//! number of squares bounded when the world is built.

use alloc::vec;
use alloc::vec::Vec;

use crate::config::Config;
use crate::grid::Grid;
use crate::scan::ScanRecord;
use crate::slot_table::UNBORN;

/// Records sorted into the squares of a world, each placed by a position.
pub(crate) struct Squares<T> {
    /// `log2` of a square's side, in raw units.
    shift: u32,
    x0: i64,
    y0: i64,
    cols: u32,
    rows: u32,
    /// `start[q]..start[q + 1]` indexes square `q`'s records (row-major).
    /// A copy split in two ([`Squares::split_copy_of`]) has a second part
    /// after the first: with `n` squares, `start[n + q]..start[n + q + 1]`
    /// indexes square `q`'s records of the second part, which follow the
    /// first's.
    start: Vec<u32>,
    /// Counting-sort cursors, one per square.
    fill: Vec<u32>,
    records: Vec<T>,
    /// The records' indexes in the order given, with their squares, for
    /// [`Squares::rebuild_by_index`]: 8 bytes a record, not a record's size
    /// and more; empty in a copy that is only ever copied into (see
    /// [`Squares::copy_mapped`]).
    order: Vec<(u32, u32)>,
}

impl<T: Copy + Default> Squares<T> {
    /// Squares for a world holding up to `capacity` records, sorted by
    /// index ([`Squares::rebuild_by_index`]), or `None` when its extent
    /// does not fit the arithmetic (beyond `2^62` raw units on a side) or
    /// no square smaller than a cell keeps their number within bounds.
    pub(crate) fn by_index(config: &Config, capacity: u32) -> Option<Self> {
        let mut squares = Self::copy_of(config, capacity)?;
        squares.order = vec![(0, 0); capacity as usize];
        Some(squares)
    }

    /// [`Squares::by_index`] without the room it sorts in, and with two
    /// parts sharing one room of `capacity` records: for a copy filled
    /// only by [`Squares::copy_split`] from another.
    pub(crate) fn split_copy_of(config: &Config, capacity: u32) -> Option<Self> {
        let mut squares = Self::copy_of(config, capacity)?;
        let n = squares.fill.len();
        squares.start = vec![0; 2 * n + 1];
        Some(squares)
    }

    /// The squares for `capacity` records with no room to sort in.
    fn copy_of(config: &Config, capacity: u32) -> Option<Self> {
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
                let n = capacity as usize;
                // cols × rows ≤ budget ≤ 2^24 + 2^23.
                let squares = (cols * rows) as usize;
                return Some(Squares {
                    shift,
                    x0,
                    y0,
                    cols: cols as u32,
                    rows: rows as u32,
                    start: vec![0; squares + 1],
                    fill: vec![0; squares],
                    records: vec![T::default(); n],
                    order: Vec::new(),
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

    /// The square of a record at `(x, y)`, inside the world. Inside, an
    /// offset from the origin is below `2^62` and fits 64 bits (see
    /// [`Squares::copy_of`]); a record outside would only land in an edge
    /// square.
    fn square_of(&self, x: i64, y: i64) -> u32 {
        let axis = |p: i64, origin: i64, count: u32| {
            let square = (p.wrapping_sub(origin) as u64) >> self.shift;
            square.min(u64::from(count) - 1) as u32
        };
        axis(y, self.y0, self.rows) * self.cols + axis(x, self.x0, self.cols)
    }

    /// Sorts into their squares the records `fetch` gives for each index
    /// of `keys`, each at its raw `(x, y)`, in the order given within a
    /// square: a counting sort that notes each index's square, then places
    /// each index's record, reading each record twice (once for its place,
    /// once to copy it) rather than keeping it in between. Indexes beyond
    /// the capacity are dropped; callers size it for every record there
    /// can be.
    pub(crate) fn rebuild_by_index(
        &mut self,
        items: impl Iterator<Item = (i64, i64, u32)>,
        mut record: impl FnMut(u32) -> T,
    ) {
        // Taken out while the squares are written, then put back.
        let mut walk = core::mem::take(&mut self.order);
        self.start.fill(0);
        let mut n = 0;
        for (x, y, key) in items {
            let square = self.square_of(x, y);
            let Some(at) = walk.get_mut(n) else {
                break;
            };
            *at = (square, key);
            self.start[square as usize + 1] += 1;
            n += 1;
        }
        for q in 0..self.fill.len() {
            self.start[q + 1] += self.start[q];
            self.fill[q] = self.start[q];
        }
        for &(square, key) in &walk[..n] {
            let at = self.fill[square as usize] as usize;
            self.fill[square as usize] += 1;
            self.records[at] = record(key);
        }
        self.order = walk;
    }

    /// The columns (or rows) of `p - reach ..= p + reach` on one axis.
    fn span(&self, p: i64, reach: i64, origin: i64, count: u32) -> (u32, u32) {
        let (p, reach, origin) = (i128::from(p), i128::from(reach), i128::from(origin));
        (
            self.axis(p - reach - origin, count),
            self.axis(p + reach - origin, count),
        )
    }

    /// Makes the first part of this split copy (see
    /// [`Squares::split_copy_of`]; built for the same config), or with
    /// `second` its second part, hold what `map` makes of each record of
    /// `from` where it makes anything, square by square in their order.
    /// The second part follows the first, so it is copied after it; the
    /// two together hold at most the room's records, the rest dropped.
    pub(crate) fn copy_part(
        &mut self,
        from: &Squares<T>,
        second: bool,
        map: impl Fn(&T) -> Option<T>,
    ) {
        let squares = self.fill.len();
        let base = if second { squares } else { 0 };
        debug_assert_eq!(self.start.len(), 2 * squares + 1, "a split copy");
        let mut n = self.start[base] as usize;
        for q in 0..squares {
            let run = from.start[q] as usize..from.start[q + 1] as usize;
            for record in from.records.get(run).unwrap_or(&[]) {
                if let (Some(kept), Some(at)) = (map(record), self.records.get_mut(n)) {
                    *at = kept;
                    n += 1;
                }
            }
            self.start[base + q + 1] = n as u32;
        }
    }

    /// Every record, as the squares index them.
    pub(crate) fn whole(&self) -> Part<'_, T> {
        self.part(false)
    }

    /// The first part of a split copy, or with `second` its second part.
    pub(crate) fn part(&self, second: bool) -> Part<'_, T> {
        let squares = self.fill.len();
        let base = if second { squares } else { 0 };
        Part {
            squares: self,
            start: self.start.get(base..=base + squares).unwrap_or(&[0]),
        }
    }
}

/// The records of a copy, or of one part of a split copy, as its squares
/// index them: square `q`'s are `records()[start[q]..start[q + 1]]`.
pub(crate) struct Part<'a, T> {
    squares: &'a Squares<T>,
    start: &'a [u32],
}

impl<T> Clone for Part<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Part<'_, T> {}

impl<'a, T: Copy + Default> Part<'a, T> {
    /// Every record of this part, square by square in row-major order,
    /// with those of the parts before it in front (so that the indexes
    /// [`Part::start_of`] gives hold for it), and none of the room beyond
    /// them, which holds stale ones.
    pub(crate) fn records(&self) -> &'a [T] {
        let total = self.start.last().map_or(0, |&n| n as usize);
        self.squares.records.get(..total).unwrap_or(&[])
    }

    /// The number of columns and rows of squares.
    pub(crate) fn dims(&self) -> (u32, u32) {
        (self.squares.cols, self.squares.rows)
    }

    /// The side of a square in raw units.
    pub(crate) fn side(&self) -> i64 {
        self.squares.side()
    }

    /// Where square `(col, row)`'s records start in [`Part::records`];
    /// `col == cols` gives where the row's last square ends.
    pub(crate) fn start_of(&self, col: u32, row: u32) -> usize {
        self.start[(row * self.squares.cols + col) as usize] as usize
    }

    /// The records of squares `first..=last` of one row.
    fn run(&self, row: u32, (first, last): (u32, u32)) -> &'a [T] {
        let cols = self.squares.cols;
        let from = self.start[(row * cols + first) as usize] as usize;
        let to = self.start[(row * cols + last) as usize + 1] as usize;
        &self.squares.records[from..to]
    }

    /// The columns of `row` whose squares hold every point of the row
    /// within the reach of `widths` of `(x, y)`, or `None` when no point of
    /// the row is that near. Unlike [`Part::runs`], which takes the box
    /// around the point, this follows the disc row by row, from where the
    /// point lies in its square: about a third fewer squares for a reach of
    /// a few squares.
    #[inline(always)]
    pub(crate) fn cols_near(
        &self,
        (x, y): (i64, i64),
        row: u32,
        widths: &Widths,
    ) -> Option<(u32, u32)> {
        let sq = self.squares;
        // Offsets from the origin: below 2^62 inside the world (see
        // `Squares::copy_of`), and saturating outside it.
        let (x, y) = (x.saturating_sub(sq.x0), y.saturating_sub(sq.y0));
        let top = i64::from(row) << sq.shift;
        // The least distance on y from the point to the row (at most
        // one raw unit less for a row above, which only widens the run).
        let dy = if y < top {
            top - y
        } else {
            y.saturating_sub(top + sq.side()).max(0)
        };
        let half = widths.half_width(dy)?;
        let col = |x: i64| (x >> sq.shift).clamp(0, i64::from(sq.cols) - 1) as u32;
        Some((col(x.saturating_sub(half)), col(x.saturating_add(half))))
    }

    /// The runs (one per row of squares) that hold every record within
    /// `reach` raw units of `(x, y)` on each axis. The one-point case of
    /// [`Part::runs_around`], kept apart because every radius-mode
    /// rebuild goes through it: the general one measured 3% slower there
    /// (uniform-10k radius, 8.71 → 8.99 ms).
    pub(crate) fn runs(self, x: i64, y: i64, reach: i64) -> impl Iterator<Item = &'a [T]> {
        let sq = self.squares;
        let cols = sq.span(x, reach, sq.x0, sq.cols);
        let (top, bottom) = sq.span(y, reach, sq.y0, sq.rows);
        (top..=bottom).map(move |row| self.run(row, cols))
    }

    /// The runs that hold, once each, every record within `reach` raw units
    /// on each axis of `a` or of `b`.
    pub(crate) fn runs_around(
        self,
        a: (i64, i64),
        b: Option<(i64, i64)>,
        reach: i64,
    ) -> impl Iterator<Item = &'a [T]> {
        let sq = self.squares;
        let around = |(x, y): (i64, i64)| {
            let rows = sq.span(y, reach, sq.y0, sq.rows);
            (rows, sq.span(x, reach, sq.x0, sq.cols))
        };
        let a = around(a);
        let b = b.map(around);
        // Rows first, then columns, each as an inclusive range.
        let (a_rows, _) = a;
        let top = b.map_or(a_rows.0, |(b_rows, _)| b_rows.0.min(a_rows.0));
        let bottom = b.map_or(a_rows.1, |(b_rows, _)| b_rows.1.max(a_rows.1));
        let cols_in = |(rows, cols): ((u32, u32), (u32, u32)), row: u32| {
            (rows.0..=rows.1).contains(&row).then_some(cols)
        };
        (top..=bottom).flat_map(move |row| {
            let (ca, cb) = (cols_in(a, row), b.and_then(|b| cols_in(b, row)));
            let (one, two) = match (ca, cb) {
                // Overlapping or touching: one run.
                (Some(p), Some(q)) if q.0 <= p.1 + 1 && p.0 <= q.1 + 1 => {
                    (Some((p.0.min(q.0), p.1.max(q.1))), None)
                }
                (p, q) => (p, q),
            };
            one.into_iter()
                .chain(two)
                .map(move |cols| self.run(row, cols))
        })
    }
}

/// How far on x a disc of radius `reach` reaches at each distance on y,
/// tabulated for one tick at 64 steps of y: at a distance on y of at least
/// `q << shift`, a point within the disc is at most `half[q]` away on x
/// (rounded up), and none is where `half[q]` is negative.
pub(crate) struct Widths {
    shift: u32,
    half: [i64; 64],
}

impl Widths {
    /// The table for a disc of radius `reach` (raw, below `2^31`).
    pub(crate) fn new(reach: i64) -> Widths {
        let reach = reach.clamp(0, i64::from(i32::MAX)) as u64;
        // reach >> shift < 64: every distance within reach has a step.
        let shift = reach.checked_ilog2().unwrap_or(0).saturating_sub(5);
        let mut half = [-1i64; 64];
        for (q, h) in (0u64..).zip(half.iter_mut()) {
            let dy = q << shift;
            if let Some(left) = (reach * reach).checked_sub(dy * dy) {
                let w = left.isqrt();
                *h = (w + u64::from(w * w < left)) as i64;
            }
        }
        Widths { shift, half }
    }

    /// The most a point within the disc can be away on x at a distance
    /// `dy` on y, or `None` when it cannot be that far.
    #[inline(always)]
    fn half_width(&self, dy: i64) -> Option<i64> {
        let q = usize::try_from(dy >> self.shift).ok()?;
        self.half.get(q).copied().filter(|&w| w >= 0)
    }
}

/// The copy of every entity that radius-mode rebuilds scan.
pub(crate) type PackedSquares = Squares<ScanRecord>;

impl PackedSquares {
    /// Sorts every live entity into its square; `born[slot]` is
    /// [`UNBORN`] for a vacant slot. With `steps`, records carry their step
    /// since last tick, except those that spawned this tick or stepped
    /// farther than it allows on an axis, which are marked [`JUMPED`];
    /// returns the largest step recorded and how many were marked.
    ///
    /// Sorted by index ([`Squares::by_index`]): each live entity's square
    /// is found from its position, then its record made as it is placed,
    /// which keeps 8 bytes an entity between the two rather than 40.
    pub(crate) fn sort_entities(
        &mut self,
        grid: &Grid,
        born: &[u64],
        steps: Option<Steps<'_>>,
    ) -> (i64, u32) {
        let members = grid.all_members();
        let (mut largest, mut jumped) = (0i64, 0u32);
        // Placed in slot order: the records are made in one stream.
        let record = |slot: u32| {
            let i = slot as usize;
            let (Some(m), Some(&b)) = (members.get(i), born.get(i)) else {
                return ScanRecord::default();
            };
            let mut record = ScanRecord::of(slot, m);
            if let Some(steps) = &steps {
                let (px, py) = steps.before.get(i).copied().unwrap_or_default();
                let step = |now: i64, was: i64| step_within(now, was, steps.within);
                match (step(record.x, px), step(record.y, py)) {
                    (Some(dx), Some(dy)) if b != steps.tick => {
                        (record.dx, record.dy) = (dx, dy);
                        largest = largest
                            .max(i64::from(dx.unsigned_abs()))
                            .max(i64::from(dy.unsigned_abs()));
                    }
                    _ => {
                        (record.dx, record.dy) = (JUMPED, JUMPED);
                        jumped += 1;
                    }
                }
            }
            record
        };
        let live = members.iter().zip(born).enumerate();
        // slot < max_entities ≤ 2^22.
        let keys = live
            .filter(|(_, (_, &b))| b != UNBORN)
            .map(|(slot, (m, _))| (m.pos.x.to_bits(), m.pos.y.to_bits(), slot as u32));
        self.rebuild_by_index(keys, record);
        (largest, jumped)
    }
}

/// What [`PackedSquares::sort_entities`] needs to record steps.
pub(crate) struct Steps<'a> {
    /// Each slot's position at the end of last tick, raw.
    pub(crate) before: &'a [(i64, i64)],
    /// The largest step on an axis that is recorded as one.
    pub(crate) within: i64,
    /// This tick: an entity born in it has no step.
    pub(crate) tick: u64,
}

/// The step from `was` to `now` on one axis, if it is at most `within`
/// either way (and so fits 32 bits, `within` being below `2^31`).
pub(crate) fn step_within(now: i64, was: i64, within: i64) -> Option<i32> {
    i32::try_from(now.wrapping_sub(was))
        .ok()
        .filter(|d| i64::from(d.unsigned_abs()) <= within)
}

/// The step of a record that spawned this tick or stepped farther than
/// recorded: never a step, since recorded ones are below `2^31` raw.
pub(crate) const JUMPED: i32 = i32::MIN;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::mix64;
    use alloc::vec::Vec;

    /// A copy of `n` records spread over an 8 × 8-cell world on whole
    /// units, numbered by their index, and their positions.
    fn spread(n: u64) -> (Squares<u32>, Vec<(i64, i64)>) {
        let config = Config {
            width_cells: 8,
            height_cells: 8,
            max_entities: 2000,
            ..Config::default()
        };
        let unit = 1i64 << 16;
        let points: Vec<(i64, i64)> = (0..n)
            .map(|k| {
                (
                    (mix64(k) % 800) as i64 * unit,
                    (mix64(k + 9999) % 800) as i64 * unit,
                )
            })
            .collect();
        let mut squares = Squares::<u32>::by_index(&config, 2000).expect("a small world fits");
        squares.rebuild_by_index(
            points
                .iter()
                .enumerate()
                .map(|(k, &(x, y))| (x, y, k as u32)),
            |k| k,
        );
        (squares, points)
    }

    /// The disc's half-widths are never narrower than the disc: every
    /// distance on y within the reach has one, with `half² ≥ reach² −
    /// dy²`, also at reaches that are no power of two.
    #[test]
    fn widths_never_narrow_the_disc() {
        for reach in [0i64, 1, 7, 100, 4097, 65_536 * 115 + 3, (1 << 31) - 1] {
            let widths = Widths::new(reach);
            let step = (reach / 997).max(1);
            for dy in (0..=reach + 2 * step).step_by(step as usize) {
                let half = widths.half_width(dy);
                // Beyond the reach a width, if any, only widens a run.
                if let Ok(left) = u64::try_from(reach * reach - dy * dy) {
                    let w = half.expect("a distance within reach has a width") as u64;
                    assert!(w * w >= left, "reach {reach}, dy {dy}: {w}");
                }
            }
        }
    }

    /// Every record within the reach of a point lies in the columns
    /// `cols_near` gives for its row, checked against every record.
    #[test]
    fn cols_near_hold_every_record_of_the_disc() {
        let (squares, points) = spread(2000);
        let (cols, rows) = squares.whole().dims();
        let unit = 1i64 << 16;
        for k in 0..100u64 {
            let (x, y) = points[(mix64(k + 7) % 2000) as usize];
            let reach = (20 + (mix64(k + 3) % 200) as i64) * unit + (mix64(k) % 999) as i64;
            let widths = Widths::new(reach);
            for row in 0..rows {
                let near = squares.whole().cols_near((x, y), row, &widths);
                for col in 0..cols {
                    let inside = near.is_some_and(|(first, last)| (first..=last).contains(&col));
                    let run =
                        squares.whole().start_of(col, row)..squares.whole().start_of(col + 1, row);
                    for &r in &squares.whole().records()[run] {
                        let (px, py) = points[r as usize];
                        let d2 = (px - x).pow(2) + (py - y).pow(2);
                        assert!(inside || d2 > reach * reach, "record {r} missed");
                    }
                }
            }
        }
    }

    #[test]
    fn records_end_at_the_last_one_after_a_smaller_rebuild() {
        let (mut squares, points) = spread(2000);
        assert_eq!(squares.whole().records().len(), 2000);
        squares.rebuild_by_index(
            points[..700]
                .iter()
                .enumerate()
                .map(|(k, &(x, y))| (x, y, k as u32)),
            |k| k,
        );
        let mut got = squares.whole().records().to_vec();
        got.sort_unstable();
        assert_eq!(
            got,
            (0..700).collect::<Vec<u32>>(),
            "no stale record past the last"
        );
    }

    #[test]
    fn a_split_copy_holds_each_part_square_by_square_in_order() {
        let (squares, _) = spread(2000);
        let config = Config {
            width_cells: 8,
            height_cells: 8,
            max_entities: 2000,
            ..Config::default()
        };
        let mut copy = Squares::<u32>::split_copy_of(&config, 2000).expect("a small world fits");
        let first = |k: &u32| mix64(u64::from(*k)).is_multiple_of(3);
        let second = |k: &u32| mix64(u64::from(*k)) % 3 == 1;
        copy.copy_part(&squares, false, |k| first(k).then_some(*k));
        copy.copy_part(&squares, true, |k| second(k).then_some(*k + 5000));
        let (cols, rows) = squares.whole().dims();
        let all = squares.whole();
        let mut total = [0, 0];
        for (part, (keep, add)) in [
            (false, (first as fn(&u32) -> bool, 0)),
            (true, (second, 5000)),
        ] {
            let got = copy.part(part);
            for row in 0..rows {
                for col in 0..cols {
                    let run = all.start_of(col, row)..all.start_of(col + 1, row);
                    let kept: Vec<u32> = all.records()[run]
                        .iter()
                        .filter(|k| keep(k))
                        .map(|k| k + add)
                        .collect();
                    let run = got.start_of(col, row)..got.start_of(col + 1, row);
                    assert_eq!(&got.records()[run], &kept[..], "square ({col}, {row})");
                    total[usize::from(part)] += kept.len();
                }
            }
        }
        // The second part's records follow the first's in the one room.
        assert_eq!(copy.part(false).records().len(), total[0]);
        assert_eq!(copy.part(true).records().len(), total[0] + total[1]);
        assert!(total[0] > 500 && total[0] < 800, "{total:?}");
        assert!(total[1] > 500 && total[1] < 800, "{total:?}");
    }

    #[test]
    fn runs_around_two_points_hold_each_record_near_either_once() {
        let (squares, points) = spread(2000);
        let unit = 1i64 << 16;
        let side = 800 * unit;
        let reach = 60 * unit;
        let near = |(px, py): (i64, i64), (x, y): (i64, i64)| {
            (px - x).abs() <= reach && (py - y).abs() <= reach
        };
        for case in 0..200u64 {
            let at = |k: u64| (mix64(k) % side as u64) as i64;
            let a = (at(case), at(case + 500));
            // Alone, overlapping, touching or apart.
            let b = match case % 4 {
                0 => None,
                1 => Some((a.0 + 30 * unit, a.1 - 20 * unit)),
                _ => Some((at(case + 1000), at(case + 1500))),
            };
            let mut got: Vec<u32> = squares
                .whole()
                .runs_around(a, b, reach)
                .flatten()
                .copied()
                .collect();
            got.sort_unstable();
            assert!(
                got.windows(2).all(|w| w[0] != w[1]),
                "case {case}: a record twice"
            );
            for (k, &p) in points.iter().enumerate() {
                if near(p, a) || b.is_some_and(|b| near(p, b)) {
                    assert!(
                        got.binary_search(&(k as u32)).is_ok(),
                        "case {case}: {k} missing"
                    );
                }
            }
        }
    }
}
