//! A position's cell without a division.
//!
//! [`Config::cell_of`] divides each axis's offset by the cell size, and
//! every move needs it: in worlds where most entities are NPCs, two 64-bit
//! divisions per move weigh as much as a view. The cell size is fixed when
//! the world is built, so each axis keeps a reciprocal and divides by a
//! multiply and a shift (Granlund and Montgomery, "Division by invariant
//! integers using multiplication", 1994): exact for every offset below
//! 2^62, and a valid world's box is never wider than that.

use crate::config::{Config, MAX_LENGTH_RAW};
use crate::fixed_point::{Fix, Pos};

/// The bits an in-box offset fits in: a valid box spans at most
/// `2 * MAX_LENGTH_RAW`.
const OFFSET_BITS: u32 = 62;
const _: () = assert!(2 * (MAX_LENGTH_RAW as u64) <= 1 << OFFSET_BITS);

/// Finds cells as [`Config::cell_of`] does, for one valid config.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellLocator {
    x: Axis,
    y: Axis,
}

impl CellLocator {
    /// For a config that [`Config::validate`] accepted.
    pub(crate) fn new(config: &Config) -> Self {
        CellLocator {
            x: Axis::new(config.origin.x, config.cell_size, config.width_cells),
            y: Axis::new(config.origin.y, config.cell_size, config.height_cells),
        }
    }

    /// The cell of `pos` on both axes, or `None` outside the world's
    /// half-open box: exactly [`Config::cell_of`].
    #[inline]
    pub(crate) fn cell_of(&self, pos: Pos) -> Option<(u32, u32)> {
        Some((self.x.cell(pos.x)?, self.y.cell(pos.y)?))
    }
}

#[derive(Clone, Copy, Debug)]
struct Axis {
    origin: i64,
    /// The box's width on this axis, raw: the cells times the cell size.
    extent: u64,
    /// `floor(2^(62 + l) / cell) + 1` with `2^(l-1) < cell ≤ 2^l`: at most
    /// `2^63`.
    magic: u64,
    /// `62 + l`.
    shift: u32,
}

impl Axis {
    fn new(origin: Fix, cell: Fix, cells: u32) -> Axis {
        // Valid: 0 < cell ≤ 2^61 and cells * cell ≤ 2^62.
        let cell = cell.to_bits().unsigned_abs().max(1);
        let l = u64::BITS - (cell - 1).leading_zeros();
        let shift = OFFSET_BITS + l;
        let magic = ((1u128 << shift) / u128::from(cell) + 1) as u64;
        Axis {
            origin: origin.to_bits(),
            extent: cell.saturating_mul(u64::from(cells)),
            magic,
            shift,
        }
    }

    #[inline(always)]
    fn cell(&self, p: Fix) -> Option<u32> {
        // Offsets below the origin wrap to at least 2^63 - 2^61, above any
        // extent, so one comparison rejects both sides.
        let offset = p.to_bits().wrapping_sub(self.origin) as u64;
        if offset >= self.extent {
            return None;
        }
        // offset < 2^62 and magic * cell lies in (2^shift, 2^shift + 2^l]:
        // the product's top bits are exactly offset / cell.
        Some(((u128::from(offset) * u128::from(self.magic)) >> self.shift) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::CellLocator;
    use crate::config::{Config, MAX_LENGTH_RAW};
    use crate::digest::mix64;
    use crate::fixed_point::{Fix, Pos};

    /// Compares with the dividing definition at the box's edges and
    /// around every cell border it draws, and at random.
    fn agrees(config: &Config, seed: u64) {
        let locator = CellLocator::new(config);
        let cell = config.cell_size.to_bits();
        let (ox, oy) = (config.origin.x.to_bits(), config.origin.y.to_bits());
        let mut xs = [0i64; 40];
        let mut state = seed;
        for (k, x) in xs.iter_mut().enumerate() {
            state = mix64(state.wrapping_add(k as u64));
            let border = (state % (u64::from(config.width_cells) + 2)) as i64 - 1;
            let at = i128::from(ox) + i128::from(border) * i128::from(cell);
            let nudge = (state >> 40) as i64 % 3 - 1;
            let extent = i128::from(cell) * i128::from(config.width_cells);
            let inside = i128::from(ox) + i128::from(state) % extent;
            *x = match k % 5 {
                0 => (at + i128::from(nudge)).clamp(i64::MIN.into(), i64::MAX.into()) as i64,
                1 => state as i64,
                2 => [i64::MIN, i64::MAX, ox, ox - 1][(state >> 8) as usize % 4],
                3 => inside as i64,
                // The far edge, where offsets are largest.
                _ => (i128::from(ox) + extent - 1 - i128::from(state % 3)) as i64,
            };
        }
        for &x in &xs {
            for &y in &[oy, oy - 1, x, oy.saturating_add(cell)] {
                let pos = Pos::new(Fix::from_bits(x), Fix::from_bits(y));
                assert_eq!(
                    locator.cell_of(pos),
                    config.cell_of(pos),
                    "{pos:?} in {config:?}"
                );
            }
        }
    }

    #[test]
    fn finds_the_cells_the_division_finds() {
        let mut state = 7u64;
        for round in 0..2000u64 {
            state = mix64(state ^ round);
            let cell = match round % 5 {
                0 => 1 << (state % 62),
                1 => (1 << (state % 62)) + 1,
                2 => 100 << 16,
                3 => MAX_LENGTH_RAW - (state % 3) as i64,
                _ => (state >> 3) as i64 % MAX_LENGTH_RAW + 1,
            };
            let cells = match round % 3 {
                0 => 1 + (mix64(state) % 4096) as u32,
                // As many cells as fit: offsets up to 2^62.
                _ => (2 * i128::from(MAX_LENGTH_RAW) / i128::from(cell)).clamp(1, 4096) as u32,
            };
            // Keep the box within ±2^61 as a valid config does.
            let span = i128::from(cell) * i128::from(cells);
            let room = 2 * i128::from(MAX_LENGTH_RAW) - span;
            if room < 0 {
                continue;
            }
            let offset = (i128::from(mix64(state ^ 1)) % (room + 1)) as i64;
            let origin = -MAX_LENGTH_RAW + offset;
            let config = Config {
                origin: Pos::new(Fix::from_bits(origin), Fix::from_bits(origin / 2)),
                cell_size: Fix::from_bits(cell),
                width_cells: cells,
                height_cells: 1 + (cells / 3).clamp(1, 1 << 12),
                ..Config::default()
            };
            if config.validate().is_ok() {
                agrees(&config, state);
            }
        }
    }
}
