//! How much memory a world reserves, known before it is built.

use crate::config::{Config, Visibility, MAX_ENTITIES};
use crate::subject_pairs::room_per_entity;

/// Bytes per entity slot: the entity's record and sight, its cell-list
/// links, id index, throttle and digest records, per-tick stamps and
/// sorted copies.
const PER_SLOT: u64 = 496;
/// Bytes per entity of the ranking's room for 128-bit distances, kept
/// only in worlds more than `2^31` raw units across.
const PER_ENTITY_FAR: u64 = 32;
/// Bytes per pair of the room for pairs (recorded, then grouped), of
/// which each slot has [`room_per_entity`].
const PER_PAIR: u64 = 12;
/// Bytes per slot of the radius sweep's buffers, reserved in radius mode
/// only (its changes go in the pairs' room): mostly its copy of the
/// squares, split in two parts that share one room.
const PER_SLOT_SWEEP: u64 = 102;
/// Bytes per slot the sweep adds with a hysteresis band: each viewer's
/// stay distance².
const PER_SLOT_SWEEP_BAND: u64 = 8;
/// Eighths of a byte per view entry: a ring of 4-byte entries and an
/// overflow of an eighth as many (a world stepped with threads adds a
/// second ring).
const PER_VIEW_ENTRY_EIGHTHS: u64 = 36;
/// Bytes per entry of one view (`max_view`): the ring's slack, and the
/// room for an observer's resolved pairs (two views' worth).
const PER_VIEW_SLACK: u64 = 48;
/// Bytes per observer besides its view: its id list entries, cut-off
/// guess and how far it reaches, renumbering, the place of its margin,
/// and its view's place, key and order in the ring.
const PER_OBSERVER: u64 = 169;
/// Bytes of the room for one margin, which a full view keeps while culled.
const PER_MARGIN: u64 = 428;
/// Bytes per cell: its lists and its share of the sorted copies.
const PER_CELL: u64 = 20;
/// Grid mode: bytes per slot and per cell of the due subjects listed by
/// cell (`due_cells.rs`) and of the changes paired by border crossing.
const PER_SLOT_GRID: u64 = 17;
const PER_CELL_GRID: u64 = 4;
/// What a world holds whatever its size.
const FIXED: u64 = 1024;

impl Config {
    /// About how many bytes [`World::new`](crate::World::new) allocates
    /// for this config (every buffer the world will ever use): within a
    /// quarter of the measured figure for worlds of a megabyte or more,
    /// so that a host can refuse a world its machine cannot hold before
    /// allocating it. Saturates instead of overflowing; it does not
    /// validate the config.
    ///
    /// It follows the capacities [`World::new`](crate::World::new) sizes
    /// its buffers by: `max_entities` and an eighth more slots, views of
    /// `min(max_view, max_entities)` entries per observer or `max_visible`
    /// entries in all ([`Config::visible_room`]), a margin for each view
    /// that room can fill where views can be culled at all, room for pairs
    /// in proportion to that of the views, the cells, and the radius sweep
    /// where it can run.
    pub fn reserved_bytes(&self) -> u64 {
        let entities = u64::from(self.max_entities);
        let spare = (entities / 8).min(u64::from(MAX_ENTITIES).saturating_sub(entities));
        let slots = entities + spare;
        let observers = u64::from(self.max_observers);
        let view = u64::from(self.max_view).min(entities);
        let visible = u64::from(self.visible_room());
        let cells = u64::from(self.width_cells).saturating_mul(u64::from(self.height_cells));
        let culled = view + 1 < entities;
        let sweep = self.visibility == Visibility::Radius
            && 2 * observers >= entities
            && self.squares_fit(cells, entities);
        let banded = self.hysteresis.to_bits() != 0;
        let grid = self.visibility == Visibility::Grid;
        let per_slot = PER_SLOT
            + PER_PAIR * u64::from(room_per_entity(self))
            + if sweep { PER_SLOT_SWEEP } else { 0 }
            + if sweep && banded {
                PER_SLOT_SWEEP_BAND
            } else {
                0
            }
            + if grid { PER_SLOT_GRID } else { 0 };
        let per_cell = PER_CELL + if grid { PER_CELL_GRID } else { 0 };
        let margins = match culled {
            true => observers.min(visible.div_ceil(view.max(1))),
            false => 0,
        };
        let far = match self.all_near() {
            true => 0,
            false => entities.saturating_mul(PER_ENTITY_FAR),
        };
        FIXED
            .saturating_add(far)
            .saturating_add(slots.saturating_mul(per_slot))
            .saturating_add(visible.saturating_mul(PER_VIEW_ENTRY_EIGHTHS) / 8)
            .saturating_add(view.saturating_mul(PER_VIEW_SLACK))
            .saturating_add(observers.saturating_mul(PER_OBSERVER))
            .saturating_add(margins.saturating_mul(PER_MARGIN))
            .saturating_add(cells.saturating_mul(per_cell))
    }

    /// Whether any two points of the world are less than `2^31` raw units
    /// apart on each axis, so that every observer is near (distances
    /// square in 64 bits) whatever its radius, and no ranking needs
    /// 128-bit distances.
    pub(crate) fn all_near(&self) -> bool {
        let cell = u128::from(self.cell_size.to_bits().unsigned_abs());
        cell * u128::from(self.width_cells.max(self.height_cells)) <= 1 << 31
    }

    /// Whether the world can be cut into squares smaller than a cell, at
    /// most `max(cells, 2 × entities)` of them, which the sweep needs: the
    /// fewest are those of the largest power-of-two side below a cell.
    fn squares_fit(&self, cells: u64, entities: u64) -> bool {
        let cell = self.cell_size.to_bits();
        if cell < 2 {
            return false;
        }
        let side = 1i128 << (cell - 1).ilog2();
        let count = |n: u32| (i128::from(cell) * i128::from(n) + side - 1) / side;
        let budget = i128::from(cells.max(2 * entities));
        count(self.width_cells) * count(self.height_cells) <= budget
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, MAX_ENTITIES};

    #[test]
    fn saturates_at_the_limits() {
        let huge = Config {
            max_entities: MAX_ENTITIES,
            max_observers: MAX_ENTITIES,
            max_view: u32::MAX,
            width_cells: u32::MAX,
            height_cells: u32::MAX,
            ..Config::default()
        };
        // Not a valid config, but no overflow and a figure no machine has.
        assert!(huge.reserved_bytes() > 1 << 40);
    }
}
