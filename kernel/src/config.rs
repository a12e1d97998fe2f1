//! World configuration, fixed at construction.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::fixed_point::{Dir, Fix, Pos};

/// Which rule decides whether an observer sees a subject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum Visibility {
    /// Nine-grid: the subject's cell is within ±1 cell of the observer's on both axes.
    #[default]
    Grid,
    /// Euclidean radius with hysteresis: enter at `dist ≤ r`, stay while `dist ≤ r + hysteresis`.
    Radius,
}

/// Everything that shapes a world. Every capacity is fixed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Config {
    /// World-space position of the corner of cell (0, 0).
    pub origin: Pos,
    /// Edge length of a square cell; must be positive.
    pub cell_size: Fix,
    /// Number of cells along x.
    pub width_cells: u32,
    /// Number of cells along y.
    pub height_cells: u32,
    /// Visibility rule.
    pub visibility: Visibility,
    /// Extra distance a visible subject may move away before it leaves (radius mode).
    pub hysteresis: Fix,
    /// Ticks after which a changed subject's update is due regardless of epsilons.
    pub update_interval: u64,
    /// Distance from the last sent position at which an update is due.
    pub move_epsilon: Fix,
    /// Heading change from the last sent heading at which an update is due.
    pub dir_epsilon: Dir,
    /// Most entities alive at once.
    pub max_entities: u32,
    /// Most observers alive at once (each reserves `max_view` view slots,
    /// and an eighth as many again for views that grew between passes,
    /// and 432 bytes for the margin its view keeps while culled in a calm
    /// crowd, unless `max_view` is too large for any view to be culled).
    pub max_observers: u32,
    /// Most subjects one observer sees; nearer subjects win.
    pub max_view: u32,
    /// Most view entries all observers hold together: the (observer,
    /// subject) pairs visible at once. `None` bounds them only by the
    /// views themselves, `max_observers × min(max_view, max_entities)`,
    /// and the world reserves that many. A smaller bound is what the
    /// world reserves instead; when a tick's views would need more, each
    /// observer, in ascending id, keeps at most what is left once every
    /// other observer's view is counted (the crate docs, "Visible
    /// pairs").
    pub max_visible: Option<u32>,
}

impl Default for Config {
    /// The defaults of the scenario format.
    fn default() -> Self {
        Config {
            origin: Pos::from_ints(0, 0),
            cell_size: Fix::from_bits(100 << 16),
            width_cells: 64,
            height_cells: 64,
            visibility: Visibility::Grid,
            hysteresis: Fix::ZERO,
            update_interval: 2,
            move_epsilon: Fix::from_bits(1 << 12), // 0.0625
            dir_epsilon: 182,
            max_entities: 4096,
            max_observers: 4096,
            max_view: 1024,
            max_visible: None,
        }
    }
}

/// Largest number of cells a world may have (bounds construction-time memory).
pub const MAX_CELLS: u64 = 1 << 24;

/// Largest `max_entities` (bounds construction-time memory).
pub const MAX_ENTITIES: u32 = 1 << 22;

/// Largest `max_observers × max_view`, or `max_visible`: view slots
/// reserved at construction.
pub const MAX_VIEW_SLOTS: u64 = 1 << 27;

/// Largest radius, hysteresis, cell size and world extent, in raw units.
///
/// Keeping every length and coordinate difference below `2^61` raw makes
/// squared distances exact in `u128`.
pub const MAX_LENGTH_RAW: i64 = 1 << 61;

/// [`MAX_LENGTH_RAW`] as a [`Fix`] (2^45): the largest radius, hysteresis and cell size.
pub const MAX_RADIUS: Fix = Fix::from_bits(MAX_LENGTH_RAW);

/// Why a [`Config`] cannot build a world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `cell_size` is zero, negative or above [`MAX_RADIUS`].
    CellSize,
    /// `width_cells` or `height_cells` is zero, or there are more than [`MAX_CELLS`] cells.
    GridSize,
    /// Some point of the world lies beyond ±[`MAX_RADIUS`] on an axis.
    Extent,
    /// `hysteresis` is negative or above [`MAX_RADIUS`].
    Hysteresis,
    /// `move_epsilon` is negative.
    MoveEpsilon,
    /// `max_entities` is zero or above [`MAX_ENTITIES`].
    MaxEntities,
    /// `max_observers` is above `max_entities`.
    MaxObservers,
    /// `max_observers × max_view` is above [`MAX_VIEW_SLOTS`] and
    /// `max_visible` does not bound it.
    MaxView,
    /// `max_visible` is above [`MAX_VIEW_SLOTS`].
    MaxVisible,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ConfigError::CellSize => "cell_size must be positive and at most 2^45",
            ConfigError::GridSize => {
                "width_cells and height_cells must be positive, at most 2^24 cells in all"
            }
            ConfigError::Extent => "every point of the world must lie within ±2^45 on both axes",
            ConfigError::Hysteresis => "hysteresis must be in 0..=2^45",
            ConfigError::MoveEpsilon => "move_epsilon must not be negative",
            ConfigError::MaxEntities => "max_entities must be in 1..=2^22",
            ConfigError::MaxObservers => "max_observers must not exceed max_entities",
            ConfigError::MaxView => {
                "max_observers * max_view must be at most 2^27, unless max_visible bounds it"
            }
            ConfigError::MaxVisible => "max_visible must be at most 2^27",
        })
    }
}

impl core::error::Error for ConfigError {}

impl Config {
    /// Checks every field; a world is only built from a valid config.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let cell = self.cell_size.to_bits();
        if cell <= 0 || cell > MAX_LENGTH_RAW {
            return Err(ConfigError::CellSize);
        }
        let cells = u64::from(self.width_cells) * u64::from(self.height_cells);
        if cells == 0 || cells > MAX_CELLS {
            return Err(ConfigError::GridSize);
        }
        for (o, n) in [
            (self.origin.x.to_bits(), self.width_cells),
            (self.origin.y.to_bits(), self.height_cells),
        ] {
            let extent = i128::from(cell) * i128::from(n);
            let o = i128::from(o);
            let lim = i128::from(MAX_LENGTH_RAW);
            if o < -lim || o + extent > lim {
                return Err(ConfigError::Extent);
            }
        }
        let h = self.hysteresis.to_bits();
        if !(0..=MAX_LENGTH_RAW).contains(&h) {
            return Err(ConfigError::Hysteresis);
        }
        if self.move_epsilon < Fix::ZERO {
            return Err(ConfigError::MoveEpsilon);
        }
        if self.max_entities == 0 || self.max_entities > MAX_ENTITIES {
            return Err(ConfigError::MaxEntities);
        }
        if self.max_observers > self.max_entities {
            return Err(ConfigError::MaxObservers);
        }
        match self.max_visible {
            Some(n) if u64::from(n) > MAX_VIEW_SLOTS => return Err(ConfigError::MaxVisible),
            Some(_) => {}
            None if u64::from(self.max_observers) * u64::from(self.max_view) > MAX_VIEW_SLOTS => {
                return Err(ConfigError::MaxView)
            }
            None => {}
        }
        Ok(())
    }

    /// The most subjects a view can hold: `max_view`, and never more than
    /// the other entities.
    pub(crate) fn view_room(&self) -> u32 {
        self.max_view.min(self.max_entities)
    }

    /// How many view entries the world keeps room for:
    /// `max_observers × min(max_view, max_entities)`, or `max_visible`
    /// where that is smaller.
    pub fn visible_room(&self) -> u32 {
        let all = u64::from(self.max_observers) * u64::from(self.view_room());
        let bound = self.max_visible.map_or(all, u64::from);
        // Validation bounds one of the two by 2^27; saturate otherwise.
        u32::try_from(all.min(bound)).unwrap_or(u32::MAX)
    }

    /// The cell of a position on both axes, `floor((p - origin) / cell_size)`,
    /// or `None` when it lies outside the world's half-open box.
    pub fn cell_of(&self, pos: Pos) -> Option<(u32, u32)> {
        let cx = axis_cell(pos.x, self.origin.x, self.cell_size, self.width_cells)?;
        let cy = axis_cell(pos.y, self.origin.y, self.cell_size, self.height_cells)?;
        Some((cx, cy))
    }
}

/// The cells (clamped into the world) that `p - reach ..= p + reach` spans
/// on one axis.
pub(crate) fn axis_span(p: i64, reach: i64, origin: Fix, cell: Fix, cells: u32) -> (u32, u32) {
    let at = |q: i128| {
        let c = (q - i128::from(origin.to_bits())).div_euclid(i128::from(cell.to_bits()));
        // Clamped into 0..cells, so the cast is exact.
        c.clamp(0, i128::from(cells) - 1) as u32
    };
    let (p, reach) = (i128::from(p), i128::from(reach));
    (at(p - reach), at(p + reach))
}

fn axis_cell(p: Fix, origin: Fix, cell: Fix, cells: u32) -> Option<u32> {
    let c = match p.to_bits().checked_sub(origin.to_bits()) {
        // The common case: one hardware division instead of a 128-bit one.
        Some(rel) => i128::from(rel.div_euclid(cell.to_bits())),
        None => {
            let rel = i128::from(p.to_bits()) - i128::from(origin.to_bits());
            rel.div_euclid(i128::from(cell.to_bits()))
        }
    };
    if (0..i128::from(cells)).contains(&c) {
        u32::try_from(c).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_floor_toward_negative_infinity() {
        let cfg = Config {
            origin: Pos::from_ints(-200, -200),
            width_cells: 4,
            height_cells: 4,
            ..Config::default()
        };
        assert_eq!(cfg.cell_of(Pos::from_ints(-200, -200)), Some((0, 0)));
        assert_eq!(cfg.cell_of(Pos::from_ints(-101, 0)), Some((0, 2)));
        assert_eq!(cfg.cell_of(Pos::from_ints(-100, 199)), Some((1, 3)));
        assert_eq!(cfg.cell_of(Pos::from_ints(200, 0)), None);
        let just_below = Pos::new(Fix::from_bits((-200 << 16) - 1), Fix::ZERO);
        assert_eq!(cfg.cell_of(just_below), None);
    }

    #[test]
    fn spans_are_clamped_into_the_world() {
        let cfg = Config {
            origin: Pos::from_ints(-200, -200),
            width_cells: 4,
            ..Config::default()
        };
        let span = |p: i64, reach: i64| {
            let raw = |v: i64| Fix::from_num(v).to_bits();
            axis_span(
                raw(p),
                raw(reach),
                cfg.origin.x,
                cfg.cell_size,
                cfg.width_cells,
            )
        };
        assert_eq!(span(-150, 10), (0, 0));
        assert_eq!(span(-150, 60), (0, 1));
        assert_eq!(span(0, 500), (0, 3));
        assert_eq!(span(-1000, 0), (0, 0));
        assert_eq!(span(1000, 0), (3, 3));
        let far = i64::MAX;
        assert_eq!(axis_span(0, far, cfg.origin.x, cfg.cell_size, 4), (0, 3));
    }

    #[test]
    fn default_config_is_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn max_visible_bounds_what_the_views_reserve() {
        // 2^22 observers of 1024 would reserve 2^32 entries; bounded, they may.
        let big = Config {
            max_entities: MAX_ENTITIES,
            max_observers: MAX_ENTITIES,
            ..Config::default()
        };
        assert_eq!(big.validate(), Err(ConfigError::MaxView));
        let bounded = Config {
            max_visible: Some(1 << 27),
            ..big
        };
        assert_eq!(bounded.validate(), Ok(()));
        assert_eq!(bounded.visible_room(), 1 << 27);
        let past = Config {
            max_visible: Some((1 << 27) + 1),
            ..big
        };
        assert_eq!(past.validate(), Err(ConfigError::MaxVisible));
        // A bound above what the views could hold changes nothing.
        let loose = Config {
            max_visible: Some(u32::MAX),
            ..Config::default()
        };
        assert_eq!(loose.validate(), Err(ConfigError::MaxVisible));
        let d = Config::default();
        assert_eq!(d.visible_room(), d.max_observers * d.max_view);
        let above = Config {
            max_visible: Some(d.max_observers * d.max_view + 1),
            ..d
        };
        assert_eq!(above.visible_room(), d.visible_room());
    }

    #[test]
    fn a_world_may_span_the_whole_coordinate_range() {
        let cfg = Config {
            origin: Pos::new(-MAX_RADIUS, -MAX_RADIUS),
            cell_size: MAX_RADIUS,
            width_cells: 2,
            height_cells: 2,
            max_view: 8192, // above max_entities: only the reserved total is bounded
            ..Config::default()
        };
        assert_eq!(cfg.validate(), Ok(()));
        let too_far = Config {
            width_cells: 3,
            ..cfg
        };
        assert_eq!(too_far.validate(), Err(ConfigError::Extent));
    }
}
