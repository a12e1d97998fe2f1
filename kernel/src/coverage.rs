//! Path coverage: how often a world took each path of the tick plan
//! (`plan.rs`) and each special case around it, so that tests can prove
//! they reached, and checked against their reference, every one.
//!
//! Counting is compiled in with debug assertions or the `path-coverage`
//! feature, and away otherwise: then [`World::path_counts`] is `None`.
//! The counts are no part of the state (snapshots leave them out).
//!
//! [`World::path_counts`]: crate::World::path_counts

/// One path of the tick, or a special case on one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Path {
    /// [`Pairing::RebuildAll`](crate::plan::Pairing::RebuildAll).
    PairingRebuildAll,
    /// [`Pairing::Changed`](crate::plan::Pairing::Changed).
    PairingChanged,
    /// [`Pairing::BorderCrossers`](crate::plan::Pairing::BorderCrossers).
    PairingBorderCrossers,
    /// Pairing split into tasks by subject, with threads lent by a
    /// [`Fork`](crate::Fork) (`world/pair_split.rs`).
    PairingSplit,
    /// A subject paired through the grid's cell lists.
    PairFromLists,
    /// A subject paired through the observers' copy by cells.
    PairFromCellCopy,
    /// A subject paired through the observers' copy by squares.
    PairFromSquareCopy,
    /// Grid mode while some view is full: a subject that stayed in its cell
    /// paired only with the observers of cells holding full views.
    PairNearFullViews,
    /// A despawned subject taken out of views by pairing (its slot stayed
    /// vacant).
    GonePaired,
    /// A despawned subject whose slot a spawn took over in the same tick:
    /// every observer around it rebuilt.
    GoneTakenOver,
    /// [`Updates::Walked`](crate::plan::Updates::Walked).
    UpdatesWalked,
    /// [`Refresh::RebuildAffected`](crate::plan::Refresh::RebuildAffected):
    /// the pairs outgrew their room.
    PairsOverflowed,
    /// [`RebuildSource::SortedCells`](crate::plan::RebuildSource::SortedCells).
    RebuildFromSortedCells,
    /// [`RebuildSource::Squares`](crate::plan::RebuildSource::Squares).
    RebuildFromSquares,
    /// [`TickPlan::crowd_squares`](crate::plan::TickPlan::crowd_squares).
    CrowdSquares,
    /// [`ViewWrite::Stream`](crate::plan::ViewWrite::Stream).
    ViewsStreamed,
    /// [`SweepOutcome::Declined`](crate::plan::SweepOutcome::Declined).
    SweepDeclined,
    /// [`SweepOutcome::Swept`](crate::plan::SweepOutcome::Swept).
    SweepSwept,
    /// A swept tick whose few due subjects were grouped by the viewers
    /// around them, so views the sweep keeps look them up instead of
    /// being walked for them.
    SweptDueGrouped,
    /// An unaffected view walked for its due subjects.
    ObserverWalked,
    /// A view edited by its pairs.
    ObserverEdited,
    /// A culled view edited through its margin.
    ObserverEditedCulled,
    /// A culled view whose margin could not tell: ranked again.
    MarginRanOut,
    /// A view edited by the sweep's changes.
    ObserverSwept,
    /// A view the sweep held that would have to be culled: rebuilt.
    SweptButRebuilt,
    /// A view rebuilt from the cell lists.
    ObserverRebuiltFromLists,
    /// A view rebuilt from a sorted copy.
    ObserverRebuiltFromCopy,
    /// A crowd ranked to `max_view` in a rebuild.
    CrowdRanked,
    /// A crowd's ranking within its last cut-off left too few: ranked
    /// again without a bound.
    CrowdGuessMissed,
    /// A crowd on one spot kept its cut-off at distance 0, confirmed by
    /// counting rather than found by a selection (`scan.rs`).
    CrowdCutOffHeld,
    /// A ranked crowd kept a margin around its cut-off.
    MarginKept,
    /// Slots and views renumbered in id order at the end of a tick.
    Renumbered,
    /// A view that could outgrow the room `max_visible` leaves it,
    /// rebuilt within that room.
    ObserverWithinRoom,
    /// A tick after one that cut a view below `max_view` to its room:
    /// every view rebuilt.
    RecheckedAfterCut,
    /// A grid-mode tick that walks views for their due subjects, with so
    /// few due that views which stayed in their cell take them from the
    /// cells around instead (`due_cells.rs`).
    DueByCells,
    /// A tick in which between a sixteenth and three quarters of the
    /// entities are due an update: views walked for them list their due
    /// subjects first, without a branch per entry.
    DueGathered,
    /// The views' overflow full: every view packed back into the ring.
    ViewsPacked,
    /// A pass that found too little room ahead between its writing and
    /// the old views it had not read: slid those up past the holes.
    UnreadViewsSlid,
    /// A tick that despawned more subjects than the world lists to pair
    /// (an eighth of its slots): every view rebuilt.
    GoneOverflowed,
}

impl Path {
    /// Every path, in declaration order.
    pub const ALL: [Path; 39] = [
        Path::PairingRebuildAll,
        Path::PairingChanged,
        Path::PairingBorderCrossers,
        Path::PairingSplit,
        Path::PairFromLists,
        Path::PairFromCellCopy,
        Path::PairFromSquareCopy,
        Path::PairNearFullViews,
        Path::GonePaired,
        Path::GoneTakenOver,
        Path::UpdatesWalked,
        Path::PairsOverflowed,
        Path::RebuildFromSortedCells,
        Path::RebuildFromSquares,
        Path::CrowdSquares,
        Path::ViewsStreamed,
        Path::SweepDeclined,
        Path::SweepSwept,
        Path::SweptDueGrouped,
        Path::ObserverWalked,
        Path::ObserverEdited,
        Path::ObserverEditedCulled,
        Path::MarginRanOut,
        Path::ObserverSwept,
        Path::SweptButRebuilt,
        Path::ObserverRebuiltFromLists,
        Path::ObserverRebuiltFromCopy,
        Path::CrowdRanked,
        Path::CrowdGuessMissed,
        Path::CrowdCutOffHeld,
        Path::MarginKept,
        Path::Renumbered,
        Path::ObserverWithinRoom,
        Path::RecheckedAfterCut,
        Path::DueByCells,
        Path::DueGathered,
        Path::ViewsPacked,
        Path::UnreadViewsSlid,
        Path::GoneOverflowed,
    ];
}

/// How many times a world took each [`Path`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathCounts {
    counts: [u64; Path::ALL.len()],
}

// Arrays derive `Default` only up to 32 entries.
impl Default for PathCounts {
    fn default() -> Self {
        PathCounts {
            counts: [0; Path::ALL.len()],
        }
    }
}

impl PathCounts {
    /// How many times `path` was taken.
    pub fn get(&self, path: Path) -> u64 {
        self.counts[path as usize]
    }

    /// Adds another world's counts to these.
    pub fn add(&mut self, other: &PathCounts) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The paths never taken.
    pub fn missing(&self) -> impl Iterator<Item = Path> + '_ {
        Path::ALL.into_iter().filter(|&p| self.get(p) == 0)
    }

    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    pub(crate) fn hit(&mut self, path: Path) {
        self.counts[path as usize] += 1;
    }

    /// Counts `times` more of `path`.
    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    pub(crate) fn hit_times(&mut self, path: Path, times: u64) {
        self.counts[path as usize] += times;
    }
}

// `Path as usize` indexes `counts`: the declaration order is `ALL`'s.
const _: () = {
    let mut k = 0;
    while k < Path::ALL.len() {
        assert!(Path::ALL[k] as usize == k);
        k += 1;
    }
};
