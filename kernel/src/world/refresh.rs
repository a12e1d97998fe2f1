//! Refreshing views, the tick's sixth stage: each affected observer's
//! view is kept, walked for due updates, edited by its pairs
//! (`incremental.rs`) or through its margin (`culled.rs`), edited by the
//! sweep's changes (`sweep.rs`), or rebuilt from the candidates around it.
//! [`ViewRefresh`] lists what the stage reads and writes.

use alloc::vec::Vec;

use super::{ObserverPath, Stamps};
use crate::cell_locator::CellLocator;
use crate::cell_sorted::CellSorted;
use crate::command::EntityId;
use crate::config::{axis_span, Config, Visibility};
use crate::coverage::Path;
#[cfg(any(debug_assertions, feature = "path-coverage"))]
use crate::coverage::PathCounts;
use crate::digest::{DigestSums, PairHasher};
use crate::emit::{send_enter, send_leave};
use crate::event::{Event, EventSink};
use crate::fixed_point::Pos;
use crate::grid::{CellRect, Grid};
use crate::margin::{Listed, Margins};
use crate::plan::{RebuildSource, Refresh, TickPlan, Updates};
#[cfg(debug_assertions)]
use crate::rule::RuleTables;
use crate::scan::{Candidates, Ranked, Reach, ScanRecord};
use crate::slot_bits::SlotBits;
use crate::slot_table::{SlotTable, Watcher};
use crate::source::Source;
use crate::squares::PackedSquares;
use crate::subject_pairs::{PairKind, SubjectPairs};
use crate::sweep::{Sweep, ViewEdit};
use crate::view::Views;
use crate::view_marks::ViewMarks;

use super::incremental::{col_row, place, Place};

/// What refreshing views reads and writes. It reads the plan, this tick's
/// marks and pairs, the due bits and the sorted copies of the world; it
/// writes the views, the digest's sums of view pairs, the margins and
/// crowd cut-offs kept per view, the observers' margin spans (in the
/// slot table's pairing records, its only write there), and its scratch.
pub(super) struct ViewRefresh<'a> {
    // Read.
    pub(super) config: &'a Config,
    pub(super) cells: &'a CellLocator,
    pub(super) grid: &'a Grid,
    pub(super) plan: &'a TickPlan,
    pub(super) stamps: &'a Stamps,
    pub(super) pairs: &'a SubjectPairs,
    pub(super) due: &'a SlotBits,
    pub(super) any_due: bool,
    pub(super) common_layers: u32,
    /// The last tick run (this one is `tick + 1`).
    pub(super) tick: u64,
    pub(super) squares: Option<&'a PackedSquares>,
    pub(super) packed: &'a CellSorted<ScanRecord>,
    // Written.
    pub(super) slots: &'a mut SlotTable,
    pub(super) views: &'a mut Views,
    pub(super) sums: &'a mut DigestSums,
    pub(super) margins: &'a mut Margins,
    pub(super) cutoffs: &'a mut [u128],
    pub(super) sweep: &'a mut Sweep,
    // Scratch.
    pub(super) group: &'a mut Vec<(PairKind, EntityId, u32)>,
    pub(super) marks: &'a mut ViewMarks,
    pub(super) candidates: &'a mut Candidates,
    pub(super) ranked: &'a mut Ranked,
    pub(super) ties: &'a mut Vec<(EntityId, u32)>,
    pub(super) margin_keys: &'a mut Listed,
    pub(super) entered: &'a mut Candidates,
    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    pub(super) paths: &'a mut PathCounts,
}

impl ViewRefresh<'_> {
    /// Counts a path taken; compiled away with the counts.
    #[inline(always)]
    pub(super) fn hit(&mut self, _path: Path) {
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        self.paths.hit(_path);
    }

    /// The place of a subject at `pos`; `None` outside the world.
    pub(super) fn place_of(&self, pos: Pos) -> Option<Place> {
        let cell = self.grid.index(self.cells.cell_of(pos)?);
        Some(place(self.grid, cell, pos))
    }

    /// See [`col_row`].
    pub(super) fn col_row(&self, w: &Watcher) -> (u32, u32) {
        col_row(self.config.visibility, self.grid, w)
    }

    /// Which path refreshes the view of the observer at `slot` this tick.
    #[inline]
    fn observer_path(&self, slot: u32, t: u64) -> ObserverPath {
        let affected =
            self.plan.refresh == Refresh::RebuildAll || self.stamps.affected[slot as usize] == t;
        if !affected {
            return match self.plan.updates {
                Updates::Walked => ObserverPath::KeepAndWalk,
                Updates::Paired => ObserverPath::Keep,
            };
        }
        if self.plan.refresh == Refresh::Edit && self.stamps.rebuild[slot as usize] != t {
            let view = self.slots.entities[slot as usize].view;
            return match self.margins.any() && self.margins.bounds(view).is_some() {
                true => ObserverPath::EditCulled,
                false => ObserverPath::Edit,
            };
        }
        match self.sweep.keeps(slot) {
            true => ObserverPath::Swept,
            false => ObserverPath::Rebuild,
        }
    }

    /// Refreshes the view of the observer at `slot` by its path this tick
    /// ([`World::observer_path`]). Returns the event count.
    pub(super) fn refresh_view<S: EventSink>(&mut self, slot: u32, t: u64, sink: &mut S) -> u64 {
        match self.observer_path(slot, t) {
            ObserverPath::Keep => {
                self.views.keep(self.slots.entities[slot as usize].view);
                0
            }
            ObserverPath::KeepAndWalk => {
                self.hit(Path::ObserverWalked);
                self.views.keep(self.slots.entities[slot as usize].view);
                self.send_updates(slot, core::iter::empty(), sink)
            }
            ObserverPath::Edit => {
                self.hit(Path::ObserverEdited);
                self.update_view(slot, sink)
            }
            ObserverPath::EditCulled => {
                self.hit(Path::ObserverEditedCulled);
                self.update_culled_view(slot, sink)
            }
            // A view the sweep would have to cull is rebuilt after all.
            ObserverPath::Swept => match self.apply_swept(slot, sink) {
                Some(events) => {
                    self.hit(Path::ObserverSwept);
                    events
                }
                None => {
                    self.hit(Path::SweptButRebuilt);
                    self.rebuild_view(slot, sink)
                }
            },
            ObserverPath::Rebuild => {
                self.hit(match self.plan.rebuild_source {
                    RebuildSource::Lists => Path::ObserverRebuiltFromLists,
                    _ => Path::ObserverRebuiltFromCopy,
                });
                self.rebuild_view(slot, sink)
            }
        }
    }

    /// Applies the sweep's changes to the view of the observer at `slot`,
    /// then its margin and its due updates. Returns the event count, or
    /// `None` when the sweep does not keep this view (it must be rebuilt).
    fn apply_swept<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> Option<u64> {
        let edit = ViewEdit {
            slots: self.slots,
            views: self.views,
            sums: self.sums,
            entered: self.entered,
            max_view: self.config.max_view,
            #[cfg(debug_assertions)]
            rule: RuleTables {
                visibility: self.config.visibility,
                entities: &self.slots.entities,
                sights: &self.slots.sights,
                grid: self.grid,
            },
        };
        let mut events = self.sweep.edit_view(slot, edit, sink)?;
        let view = self.slots.entities[slot as usize].view;
        if self.margins.any() {
            self.margins.clear(view);
            self.sync_margin(slot, view);
        }
        if self.any_due {
            events += self.send_updates(slot, self.entered.as_slice().iter().copied(), sink);
        }
        Some(events)
    }

    /// Recomputes one observer's view from its ring of cells and emits the
    /// difference as Leave, Enter and Update events. Returns the event count.
    ///
    /// The old and new views are marked per slot while the view is rebuilt,
    /// and every mark set here is cleared again before returning.
    pub(super) fn rebuild_view<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> u64 {
        // What the rebuild needs of the observer, not a copy of its record.
        let (o, sight) = (
            &self.slots.entities[slot as usize],
            &self.slots.sights[slot as usize],
        );
        let (observer, view, cell, ring) = (o.id, o.view, o.cell, sight.ring);
        // Squares (radius mode) cover the disc of radius r + hysteresis.
        let stay = sight.radius.to_bits() + self.config.hysteresis.to_bits();
        let reach = Reach {
            slot,
            interest: sight.interest,
            x: o.cur.pos.x.to_bits(),
            y: o.cur.pos.y.to_bits(),
            radius: (self.config.visibility == Visibility::Radius)
                .then_some((sight.enter2, sight.stay2)),
            near: sight.near,
            // Only the loops for grid mode and for radius mode without
            // hysteresis (the common cases) leave the two tests out.
            everyone: match self.config.visibility {
                Visibility::Grid => sight.interest & self.common_layers != 0,
                Visibility::Radius => sight.plain_disc(self.common_layers),
            },
        };

        // "Was visible": old entries still naming the same incarnation. A
        // slot churned this tick holds another incarnation (or none); one
        // churned earlier has left every view that held it, since each such
        // view was rebuilt in the tick its subject was despawned.
        debug_assert!(self
            .views
            .slots(view)
            .iter()
            .all(|&s| self.slots.ids.churned(s) || self.slots.entities[s as usize].alive));
        let mut marks = self.marks.slice();
        // Where the scan keeps the observer itself, it counts as seen
        // already, so it never enters.
        marks.set_was(slot, reach.everyone);
        if !self.slots.ids.any_churned() {
            for &s in self.views.slots(view) {
                marks.set_was(s, true);
            }
        } else {
            for &s in self.views.slots(view) {
                marks.set_was(s, !self.slots.ids.churned(s));
            }
        }

        self.candidates.clear();
        let ring = self.grid.ring(cell, ring);
        let source = match (&self.squares, self.plan.rebuild_source) {
            (Some(squares), RebuildSource::Squares) => Source::Squares(squares),
            (_, RebuildSource::Lists) => Source::Lists(self.grid),
            _ => Source::Cells(self.packed),
        };
        let around = (reach.x, reach.y, stay);
        let max_view = self.config.max_view as usize;
        // A view that was full most likely still is: rank at once rather
        // than scan first to find out.
        let crowd = self.views.slots(view).len() >= max_view;
        if !crowd {
            source.visit(ring, around, |run| {
                self.candidates.scan(&reach, run, self.marks);
            });
        }
        let ranked = crowd || self.candidates.len() > max_view + usize::from(reach.everyone);
        if ranked {
            // Crowds only: rank the same runs by dist², select the
            // max_view-th nearest (everyone when there are not more), and
            // break ties at its distance by id. A crowd ranks only within
            // a quarter again its last cut-off dist², unless that leaves too few.
            let last = self.cutoffs[view as usize];
            let guess = if crowd {
                last.saturating_add(last / 4)
            } else {
                u128::MAX
            };
            // Counted on the field: `source` borrows the world.
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            self.paths.hit(Path::CrowdRanked);
            for within in [guess, u128::MAX] {
                #[cfg(any(debug_assertions, feature = "path-coverage"))]
                if within != guess {
                    self.paths.hit(Path::CrowdGuessMissed);
                }
                self.ranked.clear(within);
                let (ring, around, by_squares) = self.within_guess(ring, around, within);
                let source = match (&self.squares, by_squares) {
                    (Some(squares), true) => Source::Squares(squares),
                    _ => source,
                };
                source.visit(ring, around, |run| {
                    self.ranked.rank(&reach, run, self.marks);
                });
                if self.ranked.len() >= max_view || within == u128::MAX {
                    break;
                }
            }
            let ids = &self.slots.ids;
            let id_of = |s: u32| ids.id(s);
            let (ties, candidates) = (&mut self.ties, &mut self.candidates);
            if let Some(cutoff) = self
                .ranked
                .keep_nearest(reach.near, max_view, id_of, ties, candidates)
            {
                self.cutoffs[view as usize] = cutoff;
            }
        }
        self.keep_margin(view, &reach, ranked);
        self.entered.clear();
        let mut marks = self.marks.slice();
        self.entered
            .extend_kept(self.candidates.as_slice(), |s| !marks.set_now(s));
        // Slots in id order compare as themselves: a sort of plain
        // integers, without looking ids up.
        let ids = &self.slots.ids;
        self.entered
            .as_mut_slice()
            .sort_unstable_by_key(|&s| ids.key(s));

        // One pass over the old view, in id order: a kept entry (visible
        // before, same incarnation, and after) goes into the new view, merged
        // with `entered` (just sorted); any other gets its Leave. Kept
        // subjects due an update get theirs after the Enters.
        let mut leaves = 0;
        let pairs = PairHasher::new(observer);
        let (mut marks, sums) = (self.marks.slice(), &mut self.sums);
        let entered = self.entered.as_slice();
        let ids = &self.slots.ids;
        self.views.rewrite(view, |old, out| {
            let mut w = 0;
            let mut put = |slot: u32| {
                // Never short: candidates are capped at max_view.
                if let Some(at) = out.get_mut(w) {
                    *at = slot;
                    w += 1;
                }
            };
            let mut next = 0;
            for &s in old {
                let kept = marks.kept(s);
                marks.clear(s);
                // Ids are looked up only where needed: for a Leave (the
                // prior id if the slot churned), and while entered subjects
                // remain to be placed.
                if !kept {
                    let subject = ids.old(s);
                    send_leave(sink, sums, &pairs, subject);
                    leaves += 1;
                    continue;
                }
                if next < entered.len() {
                    let key = ids.key(s);
                    while let Some(&e) = entered.get(next).filter(|&&e| ids.key(e) < key) {
                        put(e);
                        next += 1;
                    }
                }
                put(s);
            }
            for &e in entered.get(next..).unwrap_or(&[]) {
                put(e);
            }
            w
        });
        self.marks.slice().clear(slot);
        let mut events = leaves;
        for &s in self.entered.as_slice() {
            let id = self.slots.ids.id(s);
            self.marks.slice().clear(s);
            send_enter(sink, self.sums, &pairs, id, &self.slots.shown[s as usize]);
            events += 1;
        }
        if self.any_due {
            // The new view, just written, is still in cache.
            events += self.send_updates(slot, self.entered.as_slice().iter().copied(), sink);
        }
        events
    }

    /// What a ranking within `within` (`dist²`) needs to visit of an
    /// observer's `ring` and `around` (see `Source::visit`), and whether
    /// grid mode can take it from the squares.
    fn within_guess(
        &self,
        ring: CellRect,
        around: (i64, i64, i64),
        within: u128,
    ) -> (CellRect, (i64, i64, i64), bool) {
        let (x, y, stay) = around;
        let Ok(by) = i64::try_from(within.isqrt()) else {
            return (ring, around, false);
        };
        let c = &self.config;
        let (by, by_squares) = match c.visibility {
            // Radius mode never visits beyond the stay distance anyway.
            Visibility::Radius => (by.min(stay), false),
            // Everything closer than a cell to the observer is in its ring.
            Visibility::Grid => (by, self.plan.crowd_squares && by < c.cell_size.to_bits()),
        };
        let ring = ring.clip(
            axis_span(x, by, c.origin.x, c.cell_size, c.width_cells),
            axis_span(y, by, c.origin.y, c.cell_size, c.height_cells),
        );
        (ring, (x, y, by), by_squares)
    }

    /// Walks an observer's view for its subjects due an update and sends
    /// their Updates, in view (that is, id) order; the subjects at the
    /// slots `entered`, ascending by id, just entered the view and get no
    /// Update. Returns the event count.
    pub(super) fn send_updates<S: EventSink>(
        &self,
        slot: u32,
        entered: impl Iterator<Item = u32>,
        sink: &mut S,
    ) -> u64 {
        let observer = self.slots.entities[slot as usize].id;
        let mut events = 0;
        // The entered are in the view, in its order: each is met in turn.
        let mut entered = entered.peekable();
        for &s in self.views.slots(self.slots.entities[slot as usize].view) {
            if entered.next_if_eq(&s).is_some() {
                continue;
            }
            if self.due.get(s) {
                sink.event(self.update(observer, self.slots.ids.id(s), s));
                events += 1;
            }
        }
        events
    }

    /// The Update event of the subject at `slot`, with its current state.
    #[inline(always)]
    pub(super) fn update(&self, observer: EntityId, subject: EntityId, slot: u32) -> Event {
        let m = &self.slots.shown[slot as usize];
        Event::Update {
            observer,
            subject,
            pos: m.pos,
            dir: m.dir,
            speed: m.speed,
        }
    }
}
