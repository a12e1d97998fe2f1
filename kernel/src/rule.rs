//! The visibility rule, written once: whether an observer sees a subject
//! at the end of a tick (the crate docs, "The tick").
//!
//! * the subject's `layers` share a bit with the observer's `interest`,
//!   and the subject is not the observer;
//! * grid mode: the subject's cell is within ±1 cell of the observer's on
//!   both axes (the nine-grid);
//! * radius mode: a subject enters at `dist² ≤ r²` and, once visible,
//!   stays while `dist² ≤ (r + hysteresis)²` — between the two it is in
//!   the hysteresis band, visible exactly if it was.
//!
//! Culling a crowd to `max_view` comes after the rule (see `scan.rs`,
//! `margin.rs`). Every fast path of the tick either calls [`zone`] or one
//! of its parts, or checks its own answer against [`sees`] with
//! `debug_assert!` in debug builds. The tests compare whole ticks with an
//! independent reference (`tests/src/oracle.rs` in the repository).

use crate::config::Visibility;
use crate::grid::Grid;
use crate::slot_table::{Entity, Sight};

/// The cells around an observer's own that grid mode's nine-grid covers
/// on each axis.
pub(crate) const GRID_RING: u32 = 1;

/// Where a subject stands in one observer's rule, before the view's
/// history is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Zone {
    /// Visible whatever it was before.
    In,
    /// Within the hysteresis band: visible exactly if it was.
    Band,
    /// Not visible.
    Out,
}

impl Zone {
    /// Whether a subject in this zone is visible, given whether it was
    /// visible (after culling) at the end of the previous tick.
    #[inline(always)]
    pub(crate) fn visible(self, was_visible: bool) -> bool {
        match self {
            Zone::In => true,
            Zone::Band => was_visible,
            Zone::Out => false,
        }
    }
}

/// What the rule needs of the observer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Eye {
    pub(crate) slot: u32,
    pub(crate) interest: u32,
    /// Its cell's column and row (grid mode).
    pub(crate) col_row: (u32, u32),
    /// Its raw position (radius mode).
    pub(crate) x: i64,
    pub(crate) y: i64,
    /// `r²` and `(r + hysteresis)²`, raw (radius mode).
    pub(crate) enter2: u128,
    pub(crate) stay2: u128,
}

/// What the rule needs of the subject.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    pub(crate) slot: u32,
    pub(crate) layers: u32,
    /// Its cell's column and row (grid mode).
    pub(crate) col_row: (u32, u32),
    /// Its raw position (radius mode).
    pub(crate) x: i64,
    pub(crate) y: i64,
}

/// The rule in full, before history: where `seen` stands for `eye`.
#[inline]
pub(crate) fn zone(mode: Visibility, eye: &Eye, seen: &Seen) -> Zone {
    if !interested(eye.interest, seen.layers) || eye.slot == seen.slot {
        return Zone::Out;
    }
    match mode {
        Visibility::Grid => grid_zone(eye.col_row, seen.col_row),
        Visibility::Radius => {
            radius_zone(dist2(seen.x, seen.y, eye.x, eye.y), eye.enter2, eye.stay2)
        }
    }
}

/// The rule in full: whether `eye` sees `seen`, given whether it saw it
/// at the end of the previous tick.
#[inline]
pub(crate) fn sees(mode: Visibility, eye: &Eye, seen: &Seen, was_visible: bool) -> bool {
    zone(mode, eye, seen).visible(was_visible)
}

/// The layer filter: the subject is something the observer wants to see.
#[inline(always)]
pub(crate) fn interested(interest: u32, layers: u32) -> bool {
    layers & interest != 0
}

/// Grid mode's distance part: the nine-grid around the observer's cell.
#[inline(always)]
pub(crate) fn grid_zone(observer: (u32, u32), subject: (u32, u32)) -> Zone {
    let apart = observer
        .0
        .abs_diff(subject.0)
        .max(observer.1.abs_diff(subject.1));
    if apart <= GRID_RING {
        Zone::In
    } else {
        Zone::Out
    }
}

/// Radius mode's distance part, from the subject's `dist²` and the
/// observer's `r²` and `(r + hysteresis)²` (all raw).
#[inline(always)]
pub(crate) fn radius_zone(dist2: u128, enter2: u128, stay2: u128) -> Zone {
    if dist2 <= enter2 {
        Zone::In
    } else if dist2 <= stay2 {
        Zone::Band
    } else {
        Zone::Out
    }
}

/// `dist²` between two raw positions, saturating (positions of a valid
/// world never saturate). `Pos::dist2_raw` without its 64-bit branch: in
/// the loops that call this it measured slower.
#[inline(always)]
pub(crate) fn dist2(x: i64, y: i64, ox: i64, oy: i64) -> u128 {
    let dx = u128::from(x.abs_diff(ox));
    let dy = u128::from(y.abs_diff(oy));
    (dx * dx).saturating_add(dy * dy)
}

/// The tables the visibility rule reads of two live entities
/// as they stand now: what fast paths and restores check themselves
/// against.
#[derive(Clone, Copy)]
pub(crate) struct RuleTables<'a> {
    pub(crate) visibility: Visibility,
    pub(crate) entities: &'a [Entity],
    pub(crate) sights: &'a [Sight],
    pub(crate) grid: &'a Grid,
}

impl RuleTables<'_> {
    /// Where the subject at `subject` stands in the rule of the observer
    /// at `observer`.
    pub(crate) fn zone(&self, observer: u32, subject: u32) -> Zone {
        let (o, sight) = (
            &self.entities[observer as usize],
            &self.sights[observer as usize],
        );
        let eye = Eye {
            slot: observer,
            interest: sight.interest,
            col_row: self.grid.xy(o.cell),
            x: o.cur.pos.x.to_bits(),
            y: o.cur.pos.y.to_bits(),
            enter2: sight.enter2(),
            stay2: sight.stay2(),
        };
        let s = &self.entities[subject as usize];
        let seen = Seen {
            slot: subject,
            layers: s.layers,
            col_row: self.grid.xy(s.cell),
            x: s.cur.pos.x.to_bits(),
            y: s.cur.pos.y.to_bits(),
        };
        zone(self.visibility, &eye, &seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eye(enter2: u128, stay2: u128) -> Eye {
        Eye {
            slot: 0,
            interest: 0b10,
            col_row: (5, 5),
            x: 0,
            y: 0,
            enter2,
            stay2,
        }
    }

    fn seen(slot: u32, layers: u32, col_row: (u32, u32), x: i64) -> Seen {
        Seen {
            slot,
            layers,
            col_row,
            x,
            y: 0,
        }
    }

    #[test]
    fn layers_and_self_come_before_distance() {
        let e = eye(100, 100);
        assert_eq!(
            zone(Visibility::Radius, &e, &seen(1, 0b01, (5, 5), 0)),
            Zone::Out
        );
        assert_eq!(
            zone(Visibility::Radius, &e, &seen(0, 0b10, (5, 5), 0)),
            Zone::Out
        );
        assert_eq!(
            zone(Visibility::Grid, &e, &seen(0, 0b10, (5, 5), 0)),
            Zone::Out
        );
        assert_eq!(
            zone(Visibility::Grid, &e, &seen(1, 0b11, (6, 4), 0)),
            Zone::In
        );
        assert_eq!(
            zone(Visibility::Grid, &e, &seen(1, 0b11, (7, 5), 0)),
            Zone::Out
        );
    }

    #[test]
    fn hysteresis_keeps_only_what_was_visible() {
        let e = eye(100, 400);
        let at = |x| zone(Visibility::Radius, &e, &seen(1, 0b10, (0, 0), x));
        assert_eq!(at(10), Zone::In);
        assert_eq!(at(11), Zone::Band);
        assert_eq!(at(20), Zone::Band);
        assert_eq!(at(21), Zone::Out);
        assert!(Zone::Band.visible(true) && !Zone::Band.visible(false));
        // Without hysteresis there is no band.
        let plain = eye(100, 100);
        let s = seen(1, 0b10, (0, 0), 11);
        assert_eq!(zone(Visibility::Radius, &plain, &s), Zone::Out);
    }
}
