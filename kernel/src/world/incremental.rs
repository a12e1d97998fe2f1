//! Views updated from the changed subjects around them instead of rebuilt.
//!
//! An observer that did not move sees a change only through the subjects
//! that did (or are due an update). Each such subject classifies itself
//! against every observer around it: whether it was visible at the end of
//! last tick (its old position, or the view itself inside the hysteresis
//! band) and whether it is now. Only pairs that make an event are recorded
//! (see `subject_pairs.rs`), and an observer then applies its own pairs to
//! its view: O(changed subjects near it), not O(its view).
//!
//! This rests on the view invariant: at the end of every tick an observer's
//! view is the rule applied to everything's state at that time (a restored
//! snapshot is checked for it). A despawned subject is paired as one that
//! moved to nowhere, while its slot stays vacant. An observer whose own
//! state changed, that saw a despawned subject whose slot a spawn took
//! over, or whose view is full (it may be culled to `max_view`, so a change
//! anywhere in range can swap who is kept) is rebuilt instead, unless its
//! view keeps a margin around its cut-off (see `culled.rs`).

use alloc::vec::Vec;

use super::pair_split::PairSplit;
use super::{stamp, ViewChange, World};
use crate::cell_sorted::CellSorted;
use crate::command::EntityId;
use crate::config::{Config, Visibility};
use crate::coverage::Path;
#[cfg(any(debug_assertions, feature = "path-coverage"))]
use crate::coverage::PathCounts;
use crate::digest::PairHasher;
use crate::emit::{send_enter, send_leave};
use crate::event::EventSink;
use crate::fixed_point::Pos;
use crate::fork::Fork;
use crate::grid::Grid;
use crate::margin::Margins;
use crate::plan::{PairSource, Updates};
use crate::rule::{self, Zone};
use crate::slot_bits::SlotBits;
use crate::slot_ids::SlotIds;
use crate::slot_table::{self, Entity, Gone, Sight, Watcher};
use crate::squares::Squares;
use crate::subject_pairs::{unpack, PairKind, SubjectPairs};
use crate::throttle::{Sent, Throttle};
use crate::view::Views;

/// Where a subject stands: its cell, that cell's column and row (worked
/// out once per subject rather than once per observer it pairs with), and
/// its raw position.
#[derive(Clone, Copy, Debug)]
pub(super) struct Place {
    pub(super) cell: u32,
    pub(super) col_row: (u32, u32),
    pub(super) x: i64,
    pub(super) y: i64,
}

/// The place of a subject at `pos`, in `cell` of `grid`.
#[inline(always)]
pub(super) fn place(grid: &Grid, cell: u32, pos: Pos) -> Place {
    Place {
        cell,
        col_row: grid.xy(cell),
        x: pos.x.to_bits(),
        y: pos.y.to_bits(),
    }
}

/// The column and row of observer `w`'s cell in grid mode, where
/// visibility needs them; unused in radius mode, which skips the
/// divisions.
#[inline(always)]
pub(super) fn col_row(visibility: Visibility, grid: &Grid, w: &Watcher) -> (u32, u32) {
    match visibility {
        Visibility::Grid => grid.xy(w.cell),
        Visibility::Radius => (0, 0),
    }
}

impl World {
    /// The place of a subject at `pos`; `None` outside the world.
    pub(super) fn place_of(&self, pos: Pos) -> Option<Place> {
        Some(place(&self.grid, self.cell_index(pos)?, pos))
    }

    /// See [`col_row`].
    pub(super) fn col_row(&self, w: &Watcher) -> (u32, u32) {
        col_row(self.config.visibility, &self.grid, w)
    }
}

/// A changed or due subject, as the observers around it need it.
pub(super) struct Subject {
    pub(super) slot: u32,
    pub(super) id: EntityId,
    pub(super) layers: u32,
    /// Where it stands now.
    pub(super) now: Place,
    /// Where it stood at the end of last tick; `None` for one spawned
    /// this tick.
    pub(super) before: Option<Place>,
    /// Its position changed (or it is new), not only its update fell due.
    pub(super) moved: bool,
    pub(super) due: bool,
    /// Despawned: it stands nowhere now (`now` repeats `before`).
    pub(super) gone: bool,
}

/// What pairing reads: the observers (by lists, or the copy the plan
/// pairs from), the views and margins that say whether a pair makes an
/// event, and the plan's choices.
pub(super) struct PairScene<'a> {
    pub(super) config: &'a Config,
    pub(super) grid: &'a Grid,
    /// Every observer's pairing record, by slot.
    pub(super) watchers: &'a [Watcher],
    pub(super) sights: &'a [Sight],
    pub(super) born: &'a [u64],
    pub(super) ids: &'a SlotIds,
    pub(super) views: &'a Views,
    pub(super) margins: &'a Margins,
    /// The largest observer ring, in cells.
    pub(super) max_ring: u32,
    pub(super) pair_source: PairSource,
    pub(super) updates: Updates,
    pub(super) observer_cells: &'a CellSorted<(u32, Watcher)>,
    pub(super) observer_squares: Option<&'a Squares<(u32, Watcher)>>,
    /// Grid mode while some view is full: the cells of observers whose
    /// views are full or keep a margin (`World::mark_full_cells`).
    pub(super) full_cells: Option<&'a SlotBits>,
}

/// What pairing writes: the observers it affects or marks for a
/// rebuild, and the pairs it records for them.
pub(super) struct PairMarks<'a> {
    /// Per slot: the tick it was last affected, marked for a rebuild.
    pub(super) affected_at: &'a mut [u32],
    pub(super) rebuild_at: &'a mut [u32],
    /// The affected observers, by slot.
    pub(super) affected: &'a mut Vec<u32>,
    /// How many of them are marked for a rebuild.
    pub(super) marked: &'a mut u32,
    /// How many of those were marked as crowds: their views full.
    pub(super) crowds: &'a mut u32,
    pub(super) pairs: &'a mut SubjectPairs,
    /// Room for the observers around one subject.
    pub(super) around: &'a mut Vec<u32>,
    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    pub(super) paths: &'a mut PathCounts,
}

/// What deciding whether a touched subject is due writes: its last sent
/// state and due bit, read off its record.
pub(super) struct Dues<'a> {
    pub(super) entities: &'a mut [Entity],
    pub(super) prev_cells: &'a [u32],
    pub(super) throttle: &'a Throttle,
    pub(super) due: &'a mut SlotBits,
    /// Whether any subject already visible somewhere fell due.
    pub(super) any_due: &'a mut bool,
}

/// The subjects this tick changed: the touched slots, each one's change
/// when the plan worked them out already, and the despawned.
pub(super) struct Changed<'a> {
    pub(super) touched: &'a [u32],
    pub(super) changes: Option<&'a [Option<ViewChange>]>,
    pub(super) gone: &'a [Gone],
}

/// Pairing, the tick's fourth stage: decides which touched subjects are
/// due, and, with `mark`, pairs every despawned and changed subject with
/// the observers around where it was and is, recording only the pairs
/// that make an event and marking observers that must be rebuilt. Where
/// `fork` lends threads and many subjects change, their pairing is split
/// into tasks (`world/pair_split.rs`): the same pairs, marks and order.
pub(super) fn pair_changes<F: Fork + ?Sized>(
    scene: &PairScene<'_>,
    marks: &mut PairMarks<'_>,
    dues: Dues<'_>,
    changed: &Changed<'_>,
    (mark, t): (bool, u64),
    (split, fork): (&mut PairSplit, &F),
) {
    if mark {
        for &gone in changed.gone {
            scene.pair_gone(gone, dues.entities, t, marks);
        }
    }
    let Dues {
        entities,
        prev_cells,
        throttle,
        due,
        any_due,
    } = dues;
    let mut split = split.begin(fork, mark, changed.touched.len());
    for (k, &slot) in changed.touched.iter().enumerate() {
        let change = match changed.changes {
            Some(changes) => changes[k],
            None => super::view_change(
                &entities[slot as usize],
                scene.born[slot as usize],
                prev_cells[slot as usize],
                throttle,
                t,
                false,
            ),
        };
        let Some(change) = change else {
            continue;
        };
        if change.due {
            let e = &mut entities[slot as usize];
            e.set_sent(Some(Sent {
                motion: e.cur,
                tick: t,
            }));
            due.set(slot);
            // One spawned this tick is in no view yet: it enters, it is
            // never updated, so it gives a rebuild's walk nothing to find.
            *any_due |= !change.fresh;
        }
        if !mark {
            continue;
        }
        let e = &entities[slot as usize];
        if scene.needs_pairing(change) {
            match split.as_deref_mut() {
                // Paired on the tasks' threads once every due is decided.
                Some(split) => split.list(slot, change),
                None => scene.pair_moved(marks, (slot, change), (entities, prev_cells), t),
            }
        }
        if change.relocated && e.is_observer() {
            match scene.own_move_rebuilds(e, prev_cells[slot as usize], change.fresh) {
                Some(false) => marks.mark_rebuild(slot, t),
                Some(true) => marks.mark_crowd_rebuild(slot, t),
                None => {}
            }
        }
    }
    if let Some(split) = split {
        split.pair(scene, marks, (entities, prev_cells), t, fork);
    }
}

/// Where pairing writes what it finds: the tick's marks and pairs
/// ([`PairMarks`], serially), or one task's share of them
/// (`world/pair_split.rs`), merged in order afterwards.
pub(super) trait PairOut {
    /// Counts a path taken; compiled away with the counts.
    fn hit(&mut self, path: Path);
    /// Records the pair of observer `o` with `subject` and marks `o`
    /// affected.
    fn pair(&mut self, o: u32, subject: u32, kind: PairKind, t: u64);
    /// Marks `o` for a rebuild, as a crowd (its view full) or not.
    fn rebuild(&mut self, o: u32, crowd: bool, t: u64);
    /// Room for the observers around one subject.
    fn around(&mut self) -> &mut Vec<u32>;
}

impl PairOut for PairMarks<'_> {
    #[inline(always)]
    fn hit(&mut self, _path: Path) {
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        self.paths.hit(_path);
    }

    #[inline(always)]
    fn pair(&mut self, o: u32, subject: u32, kind: PairKind, t: u64) {
        self.mark_affected(o, t);
        // A full set rebuilds every affected observer instead.
        self.pairs.push(o, subject, kind);
    }

    #[inline(always)]
    fn rebuild(&mut self, o: u32, crowd: bool, t: u64) {
        self.mark_crowd_or_not(o, crowd, t);
    }

    #[inline(always)]
    fn around(&mut self) -> &mut Vec<u32> {
        self.around
    }
}

/// Lists the observer at `slot` as affected, once a tick.
#[inline(always)]
fn mark_affected(affected_at: &mut [u32], affected: &mut Vec<u32>, slot: u32, t: u64) {
    if affected_at[slot as usize] != stamp(t) {
        affected_at[slot as usize] = stamp(t);
        affected.push(slot);
    }
}

impl PairMarks<'_> {
    /// Takes the `len` pairs task `w` of `width` recorded (see
    /// `world/pair_split.rs`) as if pushed in turn, marking each pair's
    /// observer affected.
    pub(super) fn take_part(&mut self, w: usize, width: usize, len: usize, t: u64) {
        let (affected_at, affected) = (&mut *self.affected_at, &mut *self.affected);
        let each = |o| mark_affected(affected_at, affected, o, t);
        self.pairs.take_part(w, width, len, each);
    }

    #[inline(always)]
    fn mark_affected(&mut self, slot: u32, t: u64) {
        mark_affected(self.affected_at, self.affected, slot, t);
    }

    #[inline(always)]
    fn mark_rebuild(&mut self, slot: u32, t: u64) {
        self.mark_crowd_or_not(slot, false, t);
    }

    /// Marks an observer whose view is full: its rebuild ranks a crowd,
    /// which the plan weighs more (`plan::CROWD_REBUILD_WEIGHT`).
    #[inline(always)]
    fn mark_crowd_rebuild(&mut self, slot: u32, t: u64) {
        self.mark_crowd_or_not(slot, true, t);
    }

    #[inline(always)]
    fn mark_crowd_or_not(&mut self, slot: u32, crowd: bool, t: u64) {
        self.mark_affected(slot, t);
        if self.rebuild_at[slot as usize] != stamp(t) {
            self.rebuild_at[slot as usize] = stamp(t);
            *self.marked += 1;
            *self.crowds += u32::from(crowd);
        }
    }
}

impl PairScene<'_> {
    /// Whether the observer `e`, which moved (or spawned) this tick and
    /// stood last tick in `prev_cell`, must be rebuilt for its own move
    /// (`Some`), and whether as a crowd (its view full). In radius mode,
    /// always. In grid mode its nine-grid is the same while it stays in
    /// its cell, and so is its view unless the view is full: a crowd
    /// culled by distance ranks again from where it stands now. (Other
    /// subjects' moves reach its view by pairing, as for any other.)
    #[inline(always)]
    fn own_move_rebuilds(&self, e: &Entity, prev_cell: u32, fresh: bool) -> Option<bool> {
        let full = self.views.any_full() && self.views.is_full(e.view);
        let needed =
            self.config.visibility != Visibility::Grid || fresh || e.cell != prev_cell || full;
        needed.then_some(full)
    }

    /// Whether a touched subject's `change` is paired with the observers
    /// around it: it relocated, or it is due an update and updates are
    /// paired (while views are walked for updates, only relocation needs
    /// pairing).
    #[inline(always)]
    pub(super) fn needs_pairing(&self, change: ViewChange) -> bool {
        change.relocated || (change.due && self.updates == Updates::Paired)
    }

    /// Pairs the touched subject at `slot` by its `change`, reading its
    /// record and its cell at the end of last tick.
    #[inline(always)]
    pub(super) fn pair_moved<M: PairOut>(
        &self,
        marks: &mut M,
        (slot, change): (u32, ViewChange),
        (entities, prev_cells): (&[Entity], &[u32]),
        t: u64,
    ) {
        let (e, prev_cell) = (&entities[slot as usize], prev_cells[slot as usize]);
        let paired_due = change.due && self.updates == Updates::Paired;
        let before = match change.fresh {
            true => None,
            false => Some(place(self.grid, prev_cell, e.prev.pos)),
        };
        let subject = Subject {
            slot,
            id: e.id,
            layers: e.layers,
            now: place(self.grid, e.cell, e.cur.pos),
            before,
            moved: change.moved,
            due: paired_due,
            gone: false,
        };
        // In grid mode, a subject that stayed in its cell and is not
        // paired for an update changes only full views.
        let stayed = !change.fresh && prev_cell == e.cell;
        match self.full_cells {
            Some(full) if stayed && !paired_due => {
                self.pair_near_full_views(full, &subject, t, marks)
            }
            _ => self.pair_subject(&subject, t, marks),
        }
    }

    /// Takes a despawned subject out of the views around where it stood:
    /// by pairing while its slot is vacant, else (a spawn took the slot
    /// over) by rebuilding every observer around (see `spare_slots`).
    /// A slot a spawn took over and a despawn emptied again in the same
    /// tick counts as taken over: pairs name subjects by slot, and the
    /// slot's id is now the newcomer's.
    fn pair_gone(&self, gone: Gone, entities: &[Entity], t: u64, marks: &mut PairMarks<'_>) {
        let before = place(self.grid, gone.cell, gone.pos);
        if slot_table::taken_over(self.born, self.ids, &gone) {
            marks.hit(Path::GoneTakenOver);
            self.rebuild_observers_around(before.cell, entities, t, marks);
            return;
        }
        marks.hit(Path::GonePaired);
        let subject = Subject {
            slot: gone.slot,
            id: gone.id,
            layers: gone.layers,
            now: before,
            before: Some(before),
            moved: true,
            due: false,
            gone: true,
        };
        self.pair_subject(&subject, t, marks);
    }

    /// Marks every observer whose ring covers `cell` for a rebuild.
    fn rebuild_observers_around(
        &self,
        cell: u32,
        entities: &[Entity],
        t: u64,
        marks: &mut PairMarks<'_>,
    ) {
        marks.around.clear();
        let cells = self.grid.ring(cell, self.max_ring).cells();
        self.grid.observers_in(cells, marks.around);
        for k in 0..marks.around.len() {
            let o = marks.around[k];
            let e = &entities[o as usize];
            if self.grid.cell_distance(e.cell, cell) <= self.sights[o as usize].ring {
                marks.mark_rebuild(o, t);
            }
        }
    }

    /// Records the pairs `subject` makes with the observers around it, and
    /// marks observers it forces to rebuild. Kept out of line: inlined
    /// into its callers it ran npc-10k grid 0.8% more instructions.
    #[inline(never)]
    fn pair_subject<M: PairOut>(&self, subject: &Subject, t: u64, marks: &mut M) {
        match (self.pair_source, self.observer_squares) {
            (PairSource::SquareCopy, Some(squares)) => {
                marks.hit(Path::PairFromSquareCopy);
                self.pair_by_squares(squares, subject, t, marks);
            }
            (PairSource::SquareCopy, None) => marks.hit(Path::PairFromSquareCopy),
            (PairSource::CellCopy, _) => {
                marks.hit(Path::PairFromCellCopy);
                self.pair_by_cells(subject, t, marks);
            }
            (PairSource::Lists | PairSource::None, _) => {
                marks.hit(Path::PairFromLists);
                self.pair_by_lists(subject, t, marks);
            }
        }
    }

    /// Pairs with the observers of the squares copy within reach of the
    /// subject's old and new positions.
    fn pair_by_squares<M: PairOut>(
        &self,
        squares: &Squares<(u32, Watcher)>,
        subject: &Subject,
        t: u64,
        marks: &mut M,
    ) {
        // Every observer's stay distance is within its ring of cells.
        let cell = i128::from(self.config.cell_size.to_bits());
        let reach = i128::from(self.max_ring) * cell;
        let reach = i64::try_from(reach).unwrap_or(i64::MAX);
        let now = (subject.now.x, subject.now.y);
        let before = subject.before.map(|b| (b.x, b.y));
        for run in squares.whole().runs_around(now, before, reach) {
            for (o, w) in run {
                self.pair_with(*o, w, subject, t, marks);
            }
        }
    }

    /// Pairs with the observers of the copy by cells, row by row of the
    /// rings around the subject's old and new cells.
    fn pair_by_cells<M: PairOut>(&self, subject: &Subject, t: u64, marks: &mut M) {
        for (first, last) in self.rows_around(subject) {
            for (o, w) in self.observer_cells.run(first, last) {
                self.pair_with(*o, w, subject, t, marks);
            }
        }
    }

    /// Pairs with the observers of the grid's cell lists around the
    /// subject: fewer changes than the copy would pay for.
    fn pair_by_lists<M: PairOut>(&self, subject: &Subject, t: u64, marks: &mut M) {
        let cells = self.rows_around(subject).flat_map(|(f, l)| f..=l);
        self.pair_in_lists(cells, subject, t, marks);
    }

    /// Pairs with the observers of the grid's lists of `cells`.
    #[inline(always)]
    fn pair_in_lists<M: PairOut>(
        &self,
        cells: impl Iterator<Item = u32>,
        subject: &Subject,
        t: u64,
        marks: &mut M,
    ) {
        marks.around().clear();
        self.grid.observers_in(cells, marks.around());
        for k in 0..marks.around().len() {
            let o = marks.around()[k];
            let w = self.watchers[o as usize];
            self.pair_with(o, &w, subject, t, marks);
        }
    }

    /// Pairs with the observers of the cells in `full` around the subject
    /// (see [`PairScene::full_cells`]), from the copy by cells where the
    /// plan made one, else from the lists. Kept out of line: only ticks
    /// with full views take it, and inlined it slowed pairing elsewhere.
    #[inline(never)]
    fn pair_near_full_views<M: PairOut>(
        &self,
        full: &SlotBits,
        subject: &Subject,
        t: u64,
        marks: &mut M,
    ) {
        marks.hit(Path::PairNearFullViews);
        let cells = self
            .rows_around(subject)
            .flat_map(|(first, last)| first..=last)
            .filter(|&c| full.get(c));
        match self.pair_source {
            PairSource::CellCopy => {
                marks.hit(Path::PairFromCellCopy);
                for c in cells {
                    for (o, w) in self.observer_cells.run(c, c) {
                        self.pair_with(*o, w, subject, t, marks);
                    }
                }
            }
            _ => {
                marks.hit(Path::PairFromLists);
                self.pair_in_lists(cells, subject, t, marks);
            }
        }
    }

    /// The rows of cells within the largest observer ring of the subject's
    /// new cell, then those around its old cell that the first left out.
    fn rows_around(&self, subject: &Subject) -> impl Iterator<Item = (u32, u32)> {
        let reach = self.max_ring;
        let now = self.grid.ring(subject.now.cell, reach);
        let before = subject.before.map(|b| self.grid.ring(b.cell, reach));
        let before_rows = before.into_iter().flat_map(move |b| b.rows_outside(now));
        now.rows().chain(before_rows)
    }

    /// Pairs `subject` with observer `o`, whose record is `w`.
    #[inline(always)]
    fn pair_with<M: PairOut>(&self, o: u32, w: &Watcher, subject: &Subject, t: u64, marks: &mut M) {
        if o == subject.slot {
            return;
        }
        if w.has_margin() {
            if subject.gone {
                // Its margin cannot tell a despawn: rank again.
                marks.rebuild(o, false, t);
                return;
            }
            // A culled view with a margin: that knows who is kept.
            if let Some(kind) = self.culled_kind(w, subject) {
                marks.pair(o, subject.slot, kind, t);
            }
            return;
        }
        let (was, now) = self.zones(w, subject);
        let mut kind = pair_kind(was, now, subject.due);
        if (was, now) != (Zone::Out, Zone::Out)
            && self.views.any_full()
            && self.views.is_full(w.view())
        {
            // A full view may be culled: whoever is in range, only the
            // view knows who is kept, and a move can change it.
            if subject.moved {
                marks.rebuild(o, true, t);
                return;
            }
            kind = subject.due.then_some(PairKind::UnsureBand);
        }
        if let Some(kind) = kind {
            marks.pair(o, subject.slot, kind, t);
        }
    }

    /// Where `subject` stood for observer `o` at the end of last tick and
    /// where it stands now, by the rule alone. Inlined into each pairing
    /// loop: called apart it cost calm-10k radius 6% more instructions.
    #[inline(always)]
    fn zones(&self, o: &Watcher, subject: &Subject) -> (Zone, Zone) {
        // The rule's parts (`rule.rs`); `pair_with` left the observer
        // itself out.
        if !rule::interested(o.interest, subject.layers) {
            return (Zone::Out, Zone::Out);
        }
        let o_col_row = col_row(self.config.visibility, self.grid, o);
        let zone = |p: Place| match self.config.visibility {
            Visibility::Grid => {
                debug_assert_eq!(o.ring, rule::GRID_RING);
                rule::grid_zone(o_col_row, p.col_row)
            }
            Visibility::Radius => {
                rule::radius_zone(rule::dist2(p.x, p.y, o.x, o.y), o.enter2, o.stay2())
            }
        };
        let now = match subject.gone {
            true => Zone::Out,
            false => zone(subject.now),
        };
        // A subject only due an update stands where it stood.
        let was = match subject.moved {
            true => subject.before.map_or(Zone::Out, zone),
            false => now,
        };
        (was, now)
    }
}

impl World {
    /// Applies an observer's pairs to its view and emits their events in
    /// contract order. Returns the event count.
    pub(super) fn update_view<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> u64 {
        let max_view = self.config.max_view as usize;
        let o = &self.slots.entities[slot as usize];
        let view = o.view;
        // A view with a margin takes `update_culled_view` instead.
        debug_assert!(!self.margins.any() || self.margins.bounds(view).is_none());
        let old = self.views.slots(view);
        let ids = &self.slots.ids;

        // (kind, subject id, slot) sorts into contract order.
        self.group.clear();
        let mut grows = 0isize;
        for &word in self.pairs.of(slot) {
            let (s, kind) = unpack(word);
            if kind == PairKind::Culled {
                // Only views with a margin get these; rebuild, never guess.
                return self.rebuild_view(slot, sink);
            }
            // Looked up even for pairs that resolve to nothing: issued
            // here, the load overlaps the search (looked up after resolving,
            // uniform-10k grid ran 1-2% slower).
            let id = ids.id(s);
            let was = || ids.search(old, s).is_ok();
            let Some(kind) = kind.resolve(was, self.due.get(s)) else {
                continue;
            };
            grows += match kind {
                PairKind::Enter => 1,
                PairKind::Leave => -1,
                _ => 0,
            };
            if !push_within(&mut self.group, (kind, id, s)) {
                // More pairs than two full views: it grows past max_view.
                return self.rebuild_view(slot, sink);
            }
        }
        if old.len() as isize + grows > max_view as isize {
            // Culling needed after all: rebuild from scratch.
            return self.rebuild_view(slot, sink);
        }
        self.apply_group(slot, sink)
    }

    /// Sends the events of `group`, the observer's resolved pairs, in
    /// contract order and splices its view to match. Returns the event
    /// count.
    pub(super) fn apply_group<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> u64 {
        let o = &self.slots.entities[slot as usize];
        let (observer, view) = (o.id, o.view);
        self.group.sort_unstable();
        let pairs = PairHasher::new(observer);

        for &(kind, subject, s) in &self.group {
            match kind {
                PairKind::Leave => send_leave(sink, &mut self.sums, &pairs, subject),
                PairKind::Enter => {
                    let shown = &self.slots.shown[s as usize];
                    send_enter(sink, &mut self.sums, &pairs, subject, shown);
                }
                // Resolved pairs are Leaves, Enters and Updates only.
                _ => sink.event(self.update(observer, subject, s)),
            }
        }
        let mut events = self.group.len() as u64;

        // Sorted, the group lists its Leaves, then its Enters. Splice:
        // Leaves are at their ids' places in the old view, Enters go before
        // the first larger id; both lists ascend by id.
        let leaves = self.group.partition_point(|g| g.0 == PairKind::Leave);
        let enters = leaves + self.group[leaves..].partition_point(|g| g.0 == PairKind::Enter);
        let (left, entered) = (&self.group[..leaves], &self.group[leaves..enters]);
        if enters == 0 {
            self.views.keep(view);
        } else {
            let ids = &self.slots.ids;
            self.views.rewrite(view, |old, out| {
                let old = stream_in(old);
                let at = |s| ids.search(old, s).unwrap_or_else(|p| p);
                splice(
                    old,
                    out,
                    left.iter().map(|g| at(g.2)),
                    entered.iter().map(|g| (at(g.2), g.2)),
                )
            });
        }
        if self.plan.updates == Updates::Walked {
            events += self.send_updates(slot, entered.iter().map(|g| g.2), true, sink);
        }
        events
    }
}

/// Appends `item` where `v`'s capacity, fixed at construction, leaves room
/// for it: never grows it, and says whether it did.
pub(super) fn push_within<T>(v: &mut Vec<T>, item: T) -> bool {
    let room = v.len() < v.capacity();
    if room {
        v.push(item);
    }
    room
}

/// Reads `view` once in order and returns it. A binary search jumps across
/// the view's cache lines, and in a view not read lately each jump misses;
/// read in order first, the lines stream in ahead of the reads and the
/// searches find them in cache (calm-10k grid: a fifth of the tick). The
/// splice after the searches reads every line anyway.
pub(super) fn stream_in(view: &[u32]) -> &[u32] {
    core::hint::black_box(view.iter().fold(0, |a, &s| a ^ s));
    view
}

/// Writes `old` into `out` without the entries at the places in `remove`,
/// and with each `(place, slot)` of `insert` put before `old[place]`. Both
/// ascend; at equal places the insert goes first. Returns the length.
pub(super) fn splice(
    old: &[u32],
    out: &mut [u32],
    remove: impl Iterator<Item = usize>,
    insert: impl Iterator<Item = (usize, u32)>,
) -> usize {
    let (mut remove, mut insert) = (remove.peekable(), insert.peekable());
    let (mut read, mut w) = (0, 0);
    loop {
        let (next_insert, next_remove) = (insert.peek().copied(), remove.peek().copied());
        let to = match (next_insert, next_remove) {
            (Some((p, _)), Some(r)) => p.min(r),
            (Some((p, _)), None) => p,
            (None, Some(r)) => r,
            (None, None) => old.len(),
        };
        let n = to.saturating_sub(read);
        if let (Some(dst), Some(src)) = (out.get_mut(w..w + n), old.get(read..read + n)) {
            dst.copy_from_slice(src);
            w += n;
        }
        read = read.max(to);
        match (next_insert, next_remove) {
            (None, None) => return w,
            (Some((p, s)), r) if r.is_none_or(|r| p <= r) => {
                if let Some(at) = out.get_mut(w) {
                    *at = s;
                    w += 1;
                }
                insert.next();
            }
            _ => {
                read += 1;
                remove.next();
            }
        }
    }
}

/// The event a subject makes for an observer, given where it was and is.
fn pair_kind(was: Zone, now: Zone, due: bool) -> Option<PairKind> {
    use Zone::{Band, In, Out};
    match (was, now) {
        (Out, In) => Some(PairKind::Enter),
        (In, Out) => Some(PairKind::Leave),
        (In, In | Band) => due.then_some(PairKind::Update),
        (Band, In) => Some(PairKind::UnsureIn),
        (Band, Out) => Some(PairKind::UnsureOut),
        (Band, Band) => due.then_some(PairKind::UnsureBand),
        (Out, Out | Band) => None,
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::splice;
    use crate::{Command, Config, Event, Fix, Move, Pos, Spawn, Visibility, World};

    fn mv(id: u64, x: i32, y: i32) -> Command {
        let pos = Pos::from_ints(x, y);
        Command::Move(Move {
            id,
            pos,
            dir: 0,
            speed: Fix::ZERO,
        })
    }

    #[test]
    fn a_walked_grid_tick_sends_the_enter_then_updates_and_no_update_to_the_entered() {
        let mut w = World::new(Config {
            visibility: Visibility::Grid,
            width_cells: 10,
            height_cells: 10,
            max_entities: 64,
            max_observers: 4,
            max_view: 32,
            ..Config::default()
        })
        .unwrap();
        // Observer 1 sees npcs 10..20 in its cell; npc 30 stands two cells east.
        let mut spawns = Vec::from([
            Command::Spawn(Spawn::observer(
                1,
                Pos::from_ints(50, 50),
                Fix::from_num(100),
            )),
            Command::Spawn(Spawn::npc(30, Pos::from_ints(250, 50))),
        ]);
        spawns.extend(
            (10..20).map(|id| Command::Spawn(Spawn::npc(id, Pos::from_ints(id as i32, 20)))),
        );
        w.step(&spawns, &mut Vec::new());

        // Every npc moves, so every one is due; only 30 crosses a border,
        // into the observer's ring.
        let mut moves: Vec<Command> = (10..20).map(|id| mv(id, id as i32, 30)).collect();
        moves.push(mv(30, 150, 50));
        let mut events = Vec::new();
        w.step(&moves, &mut events);
        assert!(
            w.last_plan().updates == crate::plan::Updates::Walked,
            "ten due subjects outweigh ten visible pairs"
        );

        let kinds: Vec<(&str, u64)> = events
            .iter()
            .map(|e| match *e {
                Event::Enter { subject, .. } => ("enter", subject),
                Event::Update { subject, .. } => ("update", subject),
                _ => ("other", 0),
            })
            .collect();
        let mut expected = Vec::from([("enter", 30)]);
        expected.extend((10..20).map(|id| ("update", id)));
        assert_eq!(kinds, expected);
    }

    #[test]
    fn splice_removes_and_inserts_in_place() {
        let old = [10, 20, 30, 40];
        let mut out = [0; 8];
        // Remove 20 and 40; insert 15 before 20, 35 before 40, 50 at the end.
        let n = splice(
            &old,
            &mut out,
            [1, 3].into_iter(),
            [(1, 15), (3, 35), (4, 50)].into_iter(),
        );
        assert_eq!(out[..n], [10, 15, 30, 35, 50]);
        let n = splice(&old, &mut out, [0, 1, 2, 3].into_iter(), [].into_iter());
        assert_eq!(n, 0);
        let n = splice(&[], &mut out, [].into_iter(), [(0, 7)].into_iter());
        assert_eq!(out[..n], [7]);
    }
}
