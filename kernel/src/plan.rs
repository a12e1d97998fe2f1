//! The tick plan: which path a tick takes, decided from counts before the
//! work is done, by small pure functions with named thresholds.
//!
//! Every path gives the same events and digest; the plan only chooses
//! the cheapest for the tick at hand. A tick is planned in two steps,
//! since the second needs counts the first step's pairing produces:
//!
//! 1. `plan_pairing` (from how many subjects changed): are the changed
//!    subjects paired with the observers around them, or is every view
//!    rebuilt; and where does pairing find those observers.
//! 2. `plan_refresh` (from how many observers pairing marked for a
//!    rebuild and how many view edits it made): how views are refreshed,
//!    what rebuilds read, and whether views are rewritten in place or
//!    streamed into fresh storage.
//!
//! The radius-mode sweep (`sweep.rs`) then decides with
//! `sweep_allowed` and records how it went in [`TickPlan::sweep`].
//! [`World::last_plan`](crate::World::last_plan) returns the plan of the
//! last tick, for logs and tests.

/// What pairing one subject with one observer around it costs, in
/// rebuilds of one visible pair. Measured: at 8, uniform-10k grid pairs
/// (its subjects reach a tenth of the visible pairs' worth of observers)
/// and teleport-10k grid rebuilds (a fifth), each the faster choice
/// there; at 4, teleport-10k paired and lost 15%.
pub const PAIRING_COST: u64 = 8;

/// Copying the observers (by cells or squares) for pairing costs about
/// as much as pairing this many times fewer subjects through the grid's
/// cell lists: the copy is made when `changes × OBSERVER_COPY_PAYBACK ≥
/// observers + cells`.
pub const OBSERVER_COPY_PAYBACK: u64 = 100;

/// Worlds with more than this many cells per observer keep no copy of the
/// observers for pairing at all: the copy walks every cell.
pub const OBSERVER_COPY_MAX_CELLS_PER_OBSERVER: u64 = 4;

/// When at least one entity in this many has its view rebuilt, every
/// view is streamed into fresh storage (the others copied unchanged):
/// `rebuilds × STREAM_REBUILD_SHARE ≥ entities`.
pub const STREAM_REBUILD_SHARE: u64 = 16;

/// The sorted copy of the world costs about as much as a hundred
/// rebuilds from the cell lists: rebuilds read it from about 1.5% of the
/// entities on (`rebuilds × SORTED_COPY_SHARE ≥ entities`).
pub const SORTED_COPY_SHARE: u64 = 64;

/// A crowd's rebuild (its view full) counts as this many in that sum:
/// from the cell lists it ranks every entity of its ring, from the sorted
/// copy only those within its guess (`world.rs`, `GUESS_NARROW`). A
/// crowd's ring holds several times a plain ring (the hotspot's 2 000 in
/// four cells against about 225 in nine).
pub const CROWD_REBUILD_WEIGHT: u64 = 8;

/// Views are streamed too when pairing edits them this many times as
/// often as there are observers: nearly every view is rewritten then
/// anyway, and one rewritten in place is copied twice.
pub const STREAM_EDITS_PER_OBSERVER: u64 = 4;

/// The sweep runs only while at most one entity in this many spawned,
/// despawned or jumped: each costs a look around it. At 2% of the
/// entities the sweep measured 14% ahead, at 5% (jumps) 6% behind.
pub const SWEEP_SPECIAL_SHARE: u64 = 32;

/// Where the sweep could take every view, every view is rebuilt (and so
/// swept) once one subject in this many observers changed: pairing then
/// rebuilds each changed observer one by one, and the sweep is cheaper.
/// Measured on uniform-10k radius with a share of the entities standing
/// still each tick: with 1% still, pairing took 17.7 ms a tick and the
/// sweep 6.1; the two were level with 10% moving (about 19% changed,
/// counting those settling), and pairing won with 5% moving (3.2 against
/// 4.1 ms).
pub const SWEEP_CHANGE_SHARE: u64 = 5;

/// The sweep runs only where at least one entity in this many is an
/// observer whose view it keeps: its passes over every slot pay off only
/// then (not where NPCs abound).
pub const SWEEP_VIEWER_SHARE: u64 = 2;

/// How the subjects that changed this tick reach the views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pairing {
    /// So many subjects changed (at least as many as there are
    /// observers) that every view is rebuilt and nothing is paired.
    RebuildAll,
    /// Every changed subject is paired with the observers around where it
    /// was and is.
    Changed,
    /// Grid mode while no view is full: a move inside its cell changes no
    /// view, so only subjects that crossed a cell border, spawned (or are
    /// due, see [`Updates`]) are paired.
    BorderCrossers,
}

/// Where pairing finds the observers around a subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PairSource {
    /// Nothing is paired ([`Pairing::RebuildAll`]).
    None,
    /// The grid's per-cell observer lists: few changes.
    Lists,
    /// A copy of the observers' records sorted by cell, read a row of a
    /// ring at a time.
    CellCopy,
    /// A copy of the observers' records sorted into squares (radius
    /// mode), read only within reach of the subject.
    SquareCopy,
}

/// How subjects that are only due an update (they did not relocate)
/// reach the views that hold them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Updates {
    /// Paired like any changed subject.
    Paired,
    /// Not paired: every view is walked for its due subjects instead,
    /// after its Leaves and Enters. Grid mode, where pairing them would
    /// cost more than a pass over every visible pair.
    Walked,
}

/// How the observers that pairing marked (or every observer) get their
/// new views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refresh {
    /// Each affected observer applies its pairs to its view; those marked
    /// for a rebuild are rebuilt.
    Edit,
    /// The pairs did not fit their fixed room: every affected observer is
    /// rebuilt.
    RebuildAffected,
    /// Every view is rebuilt ([`Pairing::RebuildAll`]).
    RebuildAll,
}

/// What a rebuild scans for an observer's candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RebuildSource {
    /// The grid's per-cell member lists: few rebuilds.
    Lists,
    /// A sorted copy of the world by cells, made once this tick.
    SortedCells,
    /// A sorted copy of the world by squares (radius mode), made once this
    /// tick; a rebuild scans the bounding box of its disc.
    Squares,
}

/// Where the new views are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViewWrite {
    /// Each refreshed view in place, in id order of the affected observers.
    InPlace,
    /// Every view, in id order of the observers, one after another around
    /// the views' ring (or into a second ring, with threads), unchanged
    /// ones copied.
    Stream,
}

/// How the radius-mode sweep went this tick (see `sweep.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SweepOutcome {
    /// Not considered: grid mode, not every view rebuilt, or the world
    /// has no room for a sweep.
    Off,
    /// Considered, and it did not hold: a slot changed hands, too many
    /// spawned, despawned or jumped, too few views it keeps, or it found
    /// more changes than its room.
    Declined,
    /// The sweep holds the changes of the views it keeps; those views are
    /// edited, the others rebuilt.
    Swept,
}

/// The path one tick took, for logs and tests: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TickPlan {
    /// How changed subjects reach the views.
    pub pairing: Pairing,
    /// Where pairing found the observers.
    pub pair_source: PairSource,
    /// How subjects only due an update reach the views.
    pub updates: Updates,
    /// How affected observers get their new views.
    pub refresh: Refresh,
    /// What rebuilds scan.
    pub rebuild_source: RebuildSource,
    /// Grid mode with some view full: the world is also sorted into
    /// squares this tick, for crowds to rank from.
    pub crowd_squares: bool,
    /// Where views are written.
    pub view_write: ViewWrite,
    /// How the radius-mode sweep went.
    pub sweep: SweepOutcome,
    /// Observers rebuilt this tick (marked, or every affected one).
    pub rebuilds: u32,
}

impl TickPlan {
    /// The plan outside a tick (before the first, and while a snapshot is
    /// restored): views are built from scratch from the cell lists, and
    /// keep no margins.
    pub const IDLE: TickPlan = TickPlan {
        pairing: Pairing::RebuildAll,
        pair_source: PairSource::None,
        updates: Updates::Paired,
        refresh: Refresh::RebuildAll,
        rebuild_source: RebuildSource::Lists,
        crowd_squares: false,
        view_write: ViewWrite::InPlace,
        sweep: SweepOutcome::Off,
        rebuilds: 0,
    };
}

/// Whether pairing subjects that reach `reach` observers (summed over
/// each subject's rings) still costs less than rebuilding every one of
/// `visible_pairs`.
#[inline]
pub(crate) fn pairing_affordable(reach: u64, visible_pairs: u64) -> bool {
    reach.saturating_mul(PAIRING_COST) < visible_pairs
}

/// Grid mode, border crossers only: given the observers the crossers
/// reach and those the only-due subjects reach, whether due subjects are
/// walked rather than paired, or `None` when pairing even the crossers
/// costs more than rebuilding every view. A walk needs views without
/// margins (`margins`: some view has one).
pub(crate) fn plan_border_pairing(
    reach: u64,
    due_reach: u64,
    visible_pairs: u64,
    margins: bool,
) -> Option<Updates> {
    let walk = !margins && !pairing_affordable(due_reach, visible_pairs);
    match walk {
        true => Some(Updates::Walked),
        false => pairing_affordable(reach + due_reach, visible_pairs).then_some(Updates::Paired),
    }
}

/// The counts `plan_pairing` decides from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairingCounts {
    /// Subjects to pair: those the border pairing weighed, or every
    /// touched one.
    pub(crate) changes: u64,
    /// Whether the border pairing weighed them already.
    pub(crate) border_crossers: bool,
    /// Subjects despawned this tick that were visible somewhere.
    pub(crate) gone: u64,
    pub(crate) observers: u64,
    pub(crate) cells: u64,
    /// Whether the radius-mode sweep could take every view this tick.
    pub(crate) sweepable: bool,
    /// Whether the world keeps a copy of the observers, and of which kind.
    pub(crate) copy: Option<PairSource>,
}

/// Step 1: how this tick's changes reach the views, and where pairing
/// finds observers.
pub(crate) fn plan_pairing(c: PairingCounts) -> (Pairing, PairSource) {
    // Pairing by border crossing has weighed its subjects already, not
    // the despawned.
    let unweighed = if c.border_crossers { 0 } else { c.changes };
    let share = match c.sweepable {
        true => SWEEP_CHANGE_SHARE,
        false => 1,
    };
    if (unweighed + c.gone).saturating_mul(share) >= c.observers {
        return (Pairing::RebuildAll, PairSource::None);
    }
    let pairing = match c.border_crossers {
        true => Pairing::BorderCrossers,
        false => Pairing::Changed,
    };
    let copy_pays = c.changes.saturating_mul(OBSERVER_COPY_PAYBACK) >= c.observers + c.cells;
    let source = match c.copy {
        Some(copy) if copy_pays => copy,
        _ => PairSource::Lists,
    };
    (pairing, source)
}

/// The counts `plan_refresh` decides from, after pairing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RefreshCounts {
    /// Whether the pairs outgrew their room.
    pub(crate) overflowed: bool,
    /// Observers marked for a rebuild.
    pub(crate) marked: u64,
    /// Of them, crowds: their views full.
    pub(crate) crowds: u64,
    /// Observers affected at all.
    pub(crate) affected: u64,
    /// View edits the pairs make.
    pub(crate) edits: u64,
    pub(crate) observers: u64,
    pub(crate) entities: u64,
    /// Radius mode in a world sorted into squares.
    pub(crate) radius_squares: bool,
}

/// Step 2: how the affected observers get their views, what rebuilds
/// read, where views are written, and how many are rebuilt.
pub(crate) fn plan_refresh(
    pairing: Pairing,
    c: RefreshCounts,
) -> (Refresh, RebuildSource, ViewWrite, u64) {
    let refresh = match (pairing, c.overflowed) {
        (Pairing::RebuildAll, _) => Refresh::RebuildAll,
        (_, true) => Refresh::RebuildAffected,
        (_, false) => Refresh::Edit,
    };
    let rebuilds = match refresh {
        Refresh::Edit => c.marked,
        _ => c.affected,
    };
    let stream = refresh == Refresh::RebuildAll
        || rebuilds.saturating_mul(STREAM_REBUILD_SHARE) >= c.entities;
    let weighed = rebuilds.saturating_add(c.crowds.saturating_mul(CROWD_REBUILD_WEIGHT - 1));
    let sorted = stream || weighed.saturating_mul(SORTED_COPY_SHARE) >= c.entities;
    let source = match (sorted, c.radius_squares) {
        (false, _) => RebuildSource::Lists,
        (true, true) => RebuildSource::Squares,
        (true, false) => RebuildSource::SortedCells,
    };
    let many_edits = refresh == Refresh::Edit
        && c.edits >= c.observers.saturating_mul(STREAM_EDITS_PER_OBSERVER);
    let write = match stream || many_edits {
        true => ViewWrite::Stream,
        false => ViewWrite::InPlace,
    };
    (refresh, source, write, rebuilds)
}

/// Whether the sweep may run: every view is being rebuilt, enough
/// entities are observers, and few enough spawned, despawned or jumped.
/// `special` is `None` before the jumps are counted.
pub(crate) fn sweep_allowed(observers: u64, entities: u64, special: Option<u64>) -> bool {
    observers.saturating_mul(SWEEP_VIEWER_SHARE) >= entities
        && special.is_none_or(|s| s.saturating_mul(SWEEP_SPECIAL_SHARE) <= entities)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> PairingCounts {
        PairingCounts {
            changes: 10,
            border_crossers: false,
            gone: 0,
            observers: 1000,
            cells: 400,
            sweepable: false,
            copy: Some(PairSource::CellCopy),
        }
    }

    #[test]
    fn pairing_follows_the_counts() {
        assert_eq!(
            plan_pairing(counts()),
            (Pairing::Changed, PairSource::Lists)
        );
        let many = PairingCounts {
            changes: 14,
            ..counts()
        };
        assert_eq!(plan_pairing(many), (Pairing::Changed, PairSource::CellCopy));
        let all = PairingCounts {
            changes: 990,
            gone: 10,
            ..counts()
        };
        assert_eq!(plan_pairing(all), (Pairing::RebuildAll, PairSource::None));
        // Where the sweep could take every view, a fifth is enough.
        let fifth = PairingCounts {
            changes: 200,
            ..counts()
        };
        assert_eq!(plan_pairing(fifth).0, Pairing::Changed);
        let swept = PairingCounts {
            sweepable: true,
            ..fifth
        };
        assert_eq!(plan_pairing(swept).0, Pairing::RebuildAll);
        let few = PairingCounts {
            changes: 199,
            ..swept
        };
        assert_eq!(plan_pairing(few).0, Pairing::Changed);
        // Border crossers were weighed already: only the despawned count.
        let weighed = PairingCounts {
            changes: 2000,
            border_crossers: true,
            copy: None,
            ..counts()
        };
        assert_eq!(
            plan_pairing(weighed),
            (Pairing::BorderCrossers, PairSource::Lists)
        );
    }

    #[test]
    fn refresh_follows_the_counts() {
        let c = RefreshCounts {
            overflowed: false,
            marked: 1,
            crowds: 0,
            affected: 50,
            edits: 60,
            observers: 100,
            entities: 1000,
            radius_squares: true,
        };
        let edit = (Refresh::Edit, RebuildSource::Lists, ViewWrite::InPlace, 1);
        assert_eq!(plan_refresh(Pairing::Changed, c), edit);
        let sorted = RefreshCounts { marked: 16, ..c };
        assert_eq!(
            plan_refresh(Pairing::Changed, sorted).1,
            RebuildSource::Squares
        );
        // Two crowds weigh as sixteen rebuilds.
        let crowds = RefreshCounts {
            marked: 2,
            crowds: 2,
            ..c
        };
        assert_eq!(
            plan_refresh(Pairing::Changed, crowds).1,
            RebuildSource::Squares
        );
        let overflow = RefreshCounts {
            overflowed: true,
            ..c
        };
        let (refresh, source, write, rebuilds) = plan_refresh(Pairing::Changed, overflow);
        assert_eq!(
            (refresh, source, write, rebuilds),
            (
                Refresh::RebuildAffected,
                RebuildSource::Squares,
                ViewWrite::InPlace,
                50
            )
        );
        let edits = RefreshCounts { edits: 400, ..c };
        assert_eq!(plan_refresh(Pairing::Changed, edits).2, ViewWrite::Stream);
        let all = plan_refresh(Pairing::RebuildAll, c);
        assert_eq!((all.0, all.2), (Refresh::RebuildAll, ViewWrite::Stream));
    }

    #[test]
    fn walks_replace_pairing_of_due_subjects_only_without_margins() {
        assert_eq!(
            plan_border_pairing(1, 200, 1000, false),
            Some(Updates::Walked)
        );
        assert_eq!(plan_border_pairing(1, 200, 1000, true), None);
        assert_eq!(plan_border_pairing(1, 2, 1000, true), Some(Updates::Paired));
        assert!(sweep_allowed(50, 100, Some(3)) && !sweep_allowed(50, 100, Some(4)));
        assert!(!sweep_allowed(49, 100, None));
    }
}
