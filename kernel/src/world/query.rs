//! Static queries between ticks, what a game rule asks outside the view
//! events (KBEngine's `entitiesInRange`): who is within `r` of a point (an
//! area spell, a proximity trigger), and who stands in a rectangle of
//! cells. They read the grid's cell lists, the index the tick itself
//! uses, and allocate nothing: the caller passes the output buffer and
//! gets the ids in ascending order.

use core::fmt;

use super::World;
use crate::command::EntityId;
use crate::config::axis_span;
use crate::fixed_point::{len2_raw, Fix, Pos};
use crate::rule;

/// A query's output buffer was too short for every match: `needed` ids
/// match. The buffer's contents are then unspecified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// How many ids the query matched.
    pub needed: usize,
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "query output needs room for {} ids", self.needed)
    }
}

impl core::error::Error for BufferTooSmall {}

impl World {
    /// The live entities within `radius` of `center` (`dist² ≤ radius²`,
    /// measured exactly as the radius rule measures) whose layers share a
    /// bit with `layers`, written to the start of `out` in ascending id
    /// order; returns how many. A negative radius matches nothing.
    ///
    /// Costs the entities of the cells that the disc's bounding box
    /// covers, plus sorting the matches; never allocates.
    ///
    /// ```
    /// use lockgrid_kernel::{Command, Config, Fix, Pos, Spawn, World};
    ///
    /// let mut world = World::new(Config::default()).unwrap();
    /// let spawns = [(1, 50), (2, 120), (3, 400)]
    ///     .map(|(id, x)| Command::Spawn(Spawn::npc(id, Pos::from_ints(x, 50))));
    /// world.step(&spawns, &mut Vec::new());
    ///
    /// // An area spell of radius 100 at (60, 50), on every layer.
    /// let mut hit = [0; 8];
    /// let n = world.entities_within(Pos::from_ints(60, 50), Fix::from_num(100), u32::MAX, &mut hit)?;
    /// assert_eq!(&hit[..n], &[1, 2]);
    /// # Ok::<(), lockgrid_kernel::BufferTooSmall>(())
    /// ```
    pub fn entities_within(
        &self,
        center: Pos,
        radius: Fix,
        layers: u32,
        out: &mut [EntityId],
    ) -> Result<usize, BufferTooSmall> {
        if radius < Fix::ZERO {
            return Ok(0);
        }
        let c = &self.config;
        let (x, y) = (center.x.to_bits(), center.y.to_bits());
        let r = radius.to_bits();
        let cols = axis_span(x, r, c.origin.x, c.cell_size, c.width_cells);
        let rows = axis_span(y, r, c.origin.y, c.cell_size, c.height_cells);
        let r2 = len2_raw(radius);
        let mut n = 0;
        for row in rows.0..=rows.1 {
            for col in cols.0..=cols.1 {
                for (slot, m) in self.grid.members(self.grid.index((col, row))) {
                    let (mx, my) = (m.pos.x.to_bits(), m.pos.y.to_bits());
                    if rule::interested(layers, m.layers) && rule::dist2(mx, my, x, y) <= r2 {
                        n = put(out, n, self.slots.ids.id(slot));
                    }
                }
            }
        }
        sorted(out, n)
    }

    /// The live entities whose cell lies in the rectangle of cells from
    /// `min` to `max` (columns and rows, both inclusive, clamped into the
    /// world; see [`Config::cell_of`](crate::Config::cell_of)) and whose
    /// layers share a bit with `layers`, written to the start of `out` in
    /// ascending id order; returns how many. An empty rectangle
    /// (`min > max` on an axis) matches nothing.
    ///
    /// ```
    /// use lockgrid_kernel::{Command, Config, Pos, Spawn, World};
    ///
    /// let mut world = World::new(Config::default()).unwrap();
    /// let spawns = [(7, 50), (8, 150), (9, 250)]
    ///     .map(|(id, x)| Command::Spawn(Spawn::npc(id, Pos::from_ints(x, 50))));
    /// world.step(&spawns, &mut Vec::new());
    ///
    /// let mut found = [0; 8];
    /// let n = world.entities_in_cells((1, 0), (2, 0), u32::MAX, &mut found)?;
    /// assert_eq!(&found[..n], &[8, 9]);
    /// # Ok::<(), lockgrid_kernel::BufferTooSmall>(())
    /// ```
    pub fn entities_in_cells(
        &self,
        min: (u32, u32),
        max: (u32, u32),
        layers: u32,
        out: &mut [EntityId],
    ) -> Result<usize, BufferTooSmall> {
        let c = &self.config;
        let last = (c.width_cells - 1, c.height_cells - 1);
        let (x1, y1) = (max.0.min(last.0), max.1.min(last.1));
        let mut n = 0;
        for row in min.1..=y1 {
            for col in min.0..=x1 {
                for (slot, m) in self.grid.members(self.grid.index((col, row))) {
                    if rule::interested(layers, m.layers) {
                        n = put(out, n, self.slots.ids.id(slot));
                    }
                }
            }
        }
        sorted(out, n)
    }
}

/// Writes `id` at `out[n]` while there is room; returns the new count.
fn put(out: &mut [EntityId], n: usize, id: EntityId) -> usize {
    if let Some(at) = out.get_mut(n) {
        *at = id;
    }
    n + 1
}

/// Sorts the `n` ids found, or reports that they did not fit.
fn sorted(out: &mut [EntityId], n: usize) -> Result<usize, BufferTooSmall> {
    let found = out.get_mut(..n).ok_or(BufferTooSmall { needed: n })?;
    found.sort_unstable();
    Ok(n)
}
