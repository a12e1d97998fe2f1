//! A pass that refreshes every view, split into tasks by observer (see
//! `fork.rs` and "Threads" in `docs/kernel-internals.md`).
//!
//! The live observers, in id order, are cut into one run per task. Each
//! task writes its observers' new views one after another into its own
//! range of the views' second ring (room for `max_view` entries per
//! observer of its run, so ranges never meet; where `max_visible` bounds
//! the views, room for the most each view can come to by its path, and
//! the pass splits only where those fit the room), their events as compact
//! records into a buffer of its own, and their terms into its own copy
//! of the digest's sums of view pairs. The calling thread then goes
//! through the observers in id order, places each view and hands its
//! events to the sink, so the sink sees exactly the serial order; the
//! sums are wrapping sums, so adding each task's difference gives the
//! serial sums whatever the order.
//!
//! A task takes the paths that read only what the pass leaves alone: a
//! view kept, a view edited by the sweep's changes, a view edited by its
//! pairs (where no view keeps a margin) and a view rebuilt from the
//! entities around its observer, with marks and candidates of the
//! task's own, unless it is a crowd to rank. Updates are not recorded:
//! the calling thread walks each such view for its due subjects as it
//! sends the view's events, since a record per Update costs more to write
//! and read back than the walk it saves. Any other observer (a crowd,
//! one edited through a margin), and every one after a task's buffer ran
//! short, is left to the calling thread, which refreshes it in
//! turn as the serial pass does, into room the task left for it.
//!
//! Where the host gave the tick a part per task (`World::step_in_parts`),
//! the calling thread only places the views and refreshes the observers
//! left to it, their events going to the sink; then each task, on its
//! thread, sends its own observers' events (records and walked Updates)
//! to its part, in id order. Every view is placed by then, and sending
//! reads only what no task writes.

use alloc::vec;
use alloc::vec::Vec;

use super::incremental::{splice, stream_in};
use super::{mark_was, merge_rebuilt, rebuild_source, ObserverPath, Rebuild, World};
use crate::command::EntityId;
use crate::coverage::Path;
use crate::digest::{DigestSums, PairHasher};
use crate::event::{Event, EventSink};
use crate::fork::{self, Fork, MAX_WIDTH};
use crate::plan::{RebuildSource, Updates};
use crate::scan::Candidates;
use crate::subject_pairs::{unpack, PairKind};
use crate::sweep::{merge, order_changes, ENTERED};
use crate::view::OldViews;
use crate::view_marks::ViewMarks;

/// Event records the tasks may buffer, per entity of the world, shared
/// out between them: Leaves and Enters (and paired Updates), of which the
/// uniform walk makes 5 (radius mode) to 13 (grid mode) a tick. A task
/// whose buffer runs short leaves the rest of its observers to the
/// calling thread.
const RECORDS_PER_ENTITY: usize = 32;

/// Observers fewer than this per task are refreshed serially: the join
/// would cost more than it saves.
const MIN_RUN: usize = 64;

/// The kind of a record, in its top two bits; the low bits are the
/// subject's slot (below 2^23).
const LEAVE: u32 = 0;
const ENTER: u32 = 1 << 30;
const UPDATE: u32 = 2 << 30;
/// A Leave that names the slot's current id (pairs name subjects so).
const LEAVE_NOW: u32 = 3 << 30;
const KIND: u32 = 3 << 30;

/// An observer left to the calling thread.
const LEFT: u32 = u32::MAX;

/// The flag on an observer's end of records: its view is walked for its
/// due subjects when its events are sent.
const WALK: u32 = 1 << 31;

/// One task's buffers.
pub(crate) struct Task {
    /// Event records: `kind | subject slot`.
    records: Vec<u32>,
    /// One observer's changes from the sweep, sorted.
    changes: Vec<u32>,
    /// One observer's entered subjects' slots, ascending by id.
    entered: Vec<u32>,
    /// One observer's resolved pairs: (kind, subject id, slot).
    group: Vec<(PairKind, EntityId, u32)>,
    /// The digest's sums as this task leaves them.
    sums: DigestSums,
    /// A rebuild's marks, candidates and entered subjects (see
    /// `World::rebuild_view`).
    marks: ViewMarks,
    candidates: Candidates,
    rebuilt_entered: Candidates,
    /// Views kept and walked, views swept, views edited by their pairs,
    /// views rebuilt.
    walked: u64,
    swept: u64,
    edited: u64,
    rebuilt: u64,
    /// Where the task's next view goes in its range.
    end: u32,
}

/// The split pass's buffers, made by [`World::reserve_width`].
#[derive(Default)]
pub(crate) struct Split {
    tasks: Vec<Task>,
    /// Per observer (by position in the pass): the end of its records in
    /// its task's buffer, with [`WALK`] where it is walked for Updates, or
    /// [`LEFT`].
    ends: Vec<u32>,
    /// Per observer: its view, where the new one starts and how long it
    /// is (the view's id too, so that placing it reads no entity record).
    placed: Vec<(u32, u32, u32)>,
    /// Per observer, where `max_visible` bounds the views: the room its
    /// new view has in its task's range.
    rooms: Vec<u32>,
}

impl Split {
    /// Buffers for up to `width` tasks in a world of `max_entities`
    /// entities in `slots` slots, `max_observers` observers and views of
    /// up to `max_view`.
    pub(crate) fn new(
        width: usize,
        (max_entities, slots): (u32, u32),
        max_observers: u32,
        max_view: u32,
    ) -> Self {
        let width = width.min(MAX_WIDTH);
        if width < 2 {
            return Split::default();
        }
        let room = RECORDS_PER_ENTITY * max_entities as usize / width;
        let group = 2 * max_view.min(max_entities) as usize + 2;
        let task = || Task {
            records: vec![0; room],
            changes: vec![0; group],
            entered: vec![0; group],
            group: vec![(PairKind::Leave, 0, 0); group],
            sums: DigestSums::default(),
            marks: ViewMarks::new(slots),
            candidates: Candidates::new(max_entities),
            rebuilt_entered: Candidates::new(max_view.min(max_entities)),
            walked: 0,
            swept: 0,
            edited: 0,
            rebuilt: 0,
            end: 0,
        };
        Split {
            tasks: (0..width).map(|_| task()).collect(),
            ends: vec![0; max_observers as usize],
            placed: vec![(0, 0, 0); max_observers as usize],
            rooms: vec![0; max_observers as usize],
        }
    }

    pub(crate) fn width(&self) -> usize {
        self.tasks.len().max(1)
    }
}

impl World {
    /// Refreshes every view of the pass under way (`by_id` sorted) split
    /// into `fork`'s tasks, sending the events to `sink` in the serial
    /// order. Returns the event count, or `None`, having touched nothing,
    /// where the pass is not split (one task, too few observers, margins
    /// to keep).
    pub(super) fn refresh_split<S: EventSink, P: EventSink + Send, F: Fork + ?Sized>(
        &mut self,
        t: u64,
        sink: &mut S,
        parts: &mut [P],
        fork: &F,
    ) -> Option<u64> {
        let width = fork::width_of(fork, self.split.tasks.len());
        let n = self.by_id.len();
        let cursor = self.views.back_cursor()? as usize;
        if width < 2 || n < width * MIN_RUN || n > self.split.ends.len() || self.margins.any() {
            return None;
        }
        let max_view = self.config.max_view as usize;
        let mut bounds = [n; MAX_WIDTH + 1];
        bounds[0] = 0;
        for (w, bound) in bounds.iter_mut().enumerate().take(width).skip(1) {
            *bound = n * w / width;
        }
        // Each run's range: room for `max_view` entries per observer, or
        // where `max_visible` bounds the views, for the most each can
        // come to.
        let mut ranges = [0usize; MAX_WIDTH];
        let bounded = self.views.bounded();
        if bounded {
            // Where every view together stays within the views' room
            // (counting each at the larger of before and after), no view
            // is cut: the tasks need not know what the others write.
            let mut most = 0u64;
            for (w, range) in ranges.iter_mut().enumerate().take(width) {
                for k in bounds[w]..bounds[w + 1] {
                    let slot = self.by_id[k].1;
                    let view = self.slots.entities[slot as usize].view;
                    let room = self.view_bound(self.observer_path(slot, t), slot, view);
                    self.split.rooms[k] = room;
                    *range += room as usize;
                    most += u64::from(room.max(self.views.span(view).1 as u32));
                }
            }
            if most > u64::from(self.views.capacity()) {
                return None;
            }
        } else {
            for (w, range) in ranges.iter_mut().enumerate().take(width) {
                *range = (bounds[w + 1] - bounds[w]) * max_view;
            }
        }
        let mut split = core::mem::take(&mut self.split);
        let base = self.sums;
        let mut store = self.views.take_store();
        {
            // The pass writes into the second ring, from its cursor on.
            let (ref old, mut back) = self.views.split_store(&mut store, cursor);
            let world = &*self;
            let mut tasks = heapless::Vec::<_, MAX_WIDTH>::new();
            let (mut ends, mut placed) = (&mut split.ends[..n], &mut split.placed[..n]);
            let mut at = cursor;
            let rooms = bounded.then_some(&split.rooms[..n]);
            for (w, task) in split.tasks.iter_mut().enumerate().take(width) {
                let run = bounds[w]..bounds[w + 1];
                let room = ranges[w].min(back.len());
                let rooms = rooms.map(|r| &r[run.clone()]);
                let (range, rest) = core::mem::take(&mut back).split_at_mut(room);
                back = rest;
                let (e, rest_e) = core::mem::take(&mut ends).split_at_mut(run.len());
                ends = rest_e;
                let (p, rest_p) = core::mem::take(&mut placed).split_at_mut(run.len());
                placed = rest_p;
                let by_id = &world.by_id[run];
                let start = at as u32;
                at += room;
                task.sums = base;
                let job = move || {
                    let out = (&mut *range, start, rooms);
                    world.refresh_run(t, by_id, old, out, e, p, task)
                };
                if tasks.push(job).is_err() {
                    break;
                }
            }
            fork::join_all(fork, &mut tasks);
        }
        self.views.put_store(store);
        // Each task's observers' events go to its own part, sent from the
        // tasks' threads once every view is placed (`World::step_in_parts`).
        let parted = parts.len() >= width;

        // In id order: place each view and send its events, or refresh
        // the observers left here into the room their task left them.
        let mut events = 0u64;
        let mut last_end = cursor as u32;
        for (w, task) in split.tasks.iter().enumerate().take(width) {
            let mut from = 0usize;
            for k in bounds[w]..bounds[w + 1] {
                let slot = self.by_id[k].1;
                let (view, start, len) = split.placed[k];
                if split.ends[k] == LEFT {
                    self.views.set_cursor(start);
                    events += self.refresh_view(slot, t, sink);
                    continue;
                }
                let to = (split.ends[k] & !WALK) as usize;
                self.views.place(view, start, len);
                if !parted {
                    let records = task.records.get(from..to).unwrap_or(&[]);
                    events += self.send_recorded(slot, records, split.ends[k] & WALK != 0, sink);
                }
                from = to;
            }
            last_end = task.end;
            for _ in 0..task.walked {
                self.hit(Path::ObserverWalked);
            }
            for _ in 0..task.swept {
                self.hit(Path::ObserverSwept);
            }
            for _ in 0..task.edited {
                self.hit(Path::ObserverEdited);
            }
            for _ in 0..task.rebuilt {
                self.hit(match self.plan.rebuild_source {
                    RebuildSource::Lists => Path::ObserverRebuiltFromLists,
                    _ => Path::ObserverRebuiltFromCopy,
                });
            }
            // Sums wrap: each task's difference from where all began.
            let sums = &mut self.sums;
            sums.pairs = sums
                .pairs
                .wrapping_add(task.sums.pairs.wrapping_sub(base.pairs));
            sums.pair_count = sums
                .pair_count
                .wrapping_add(task.sums.pair_count.wrapping_sub(base.pair_count));
        }
        self.views.set_cursor(last_end);
        if parted {
            events += self.send_parts(&split, &bounds[..=width], parts, fork);
        }
        self.split = split;
        Some(events)
    }

    /// Each task's observers' events, sent to its part on the tasks'
    /// threads; returns how many. Every view is placed, and the observers
    /// left to the calling thread have had theirs sent to the sink.
    fn send_parts<P: EventSink + Send, F: Fork + ?Sized>(
        &self,
        split: &Split,
        bounds: &[usize],
        parts: &mut [P],
        fork: &F,
    ) -> u64 {
        let mut counts = [0u64; MAX_WIDTH];
        {
            let mut jobs = heapless::Vec::<_, MAX_WIDTH>::new();
            let tasks = split.tasks.iter().zip(bounds.windows(2));
            for (((task, run), part), count) in tasks.zip(parts.iter_mut()).zip(counts.iter_mut()) {
                let run = run[0]..run[1];
                let (by_id, ends) = (&self.by_id[run.clone()], &split.ends[run]);
                let job = move || {
                    #[cfg(debug_assertions)]
                    let part = &mut crate::event::InOrder::new(part);
                    let (mut from, mut sent) = (0usize, 0);
                    for (&(_, slot), &end) in by_id.iter().zip(ends) {
                        if end == LEFT {
                            continue;
                        }
                        let to = (end & !WALK) as usize;
                        let records = task.records.get(from..to).unwrap_or(&[]);
                        sent += self.send_recorded(slot, records, end & WALK != 0, part);
                        from = to;
                    }
                    // Once: the counts share a cache line.
                    *count = sent;
                };
                if jobs.push(job).is_err() {
                    break;
                }
            }
            fork::join_all(fork, &mut jobs);
        }
        counts.iter().sum()
    }

    /// Sends the events a task recorded for the observer at `slot` and,
    /// where it is `walked`, its due subjects' Updates: a record each
    /// would cost more to write and read back than the walk saves.
    /// Returns how many.
    fn send_recorded<S: EventSink>(
        &self,
        slot: u32,
        records: &[u32],
        walked: bool,
        sink: &mut S,
    ) -> u64 {
        self.send_records(slot, records, sink);
        let mut events = records.len() as u64;
        if walked {
            let entered = records.iter().filter(|&&r| r & KIND == ENTER);
            events += self.send_updates(slot, entered.map(|&r| r & !KIND), true, sink);
        }
        events
    }

    /// A task: refreshes the observers `by_id` (see the module docs) into
    /// `range`, which starts at `start` in the store, each with room for
    /// `max_view` entries or its entry of `rooms`, reading old views from
    /// `old`.
    #[allow(clippy::too_many_arguments)]
    fn refresh_run(
        &self,
        t: u64,
        by_id: &[(crate::command::EntityId, u32)],
        old: &OldViews<'_>,
        (range, start, rooms): (&mut [u32], u32, Option<&[u32]>),
        ends: &mut [u32],
        placed: &mut [(u32, u32, u32)],
        task: &mut Task,
    ) {
        let max_view = self.config.max_view as usize;
        let ids = &self.slots.ids;
        let (mut k, mut at) = (0usize, 0usize);
        task.walked = 0;
        task.swept = 0;
        task.edited = 0;
        task.rebuilt = 0;
        let mut short = false;
        for (i, ((&(_, slot), end), place)) in by_id
            .iter()
            .zip(ends.iter_mut())
            .zip(placed.iter_mut())
            .enumerate()
        {
            let fits_view = rooms.map_or(max_view, |r| r.get(i).map_or(0, |&r| r as usize));
            let o = &self.slots.entities[slot as usize];
            let (observer, view) = (o.id, o.view);
            let (s0, len) = self.views.span(view);
            let was = old.get(s0, len);
            let room = task.records.len() - k;
            let path = self.observer_path(slot, t);
            let changes = match path {
                ObserverPath::Swept => self.sweep.changes_of(slot),
                ObserverPath::Edit => self.pairs.of(slot),
                _ => &[],
            };
            // At most one event per change or pair (Updates are walked
            // when sent, not recorded).
            let fits = changes.len() <= task.changes.len() && changes.len() <= room;
            short |= !fits;
            let out = range
                .get_mut(at..(at + fits_view).min(range.len()))
                .unwrap_or(&mut []);
            let mut walk = false;
            let done = match (short, path) {
                (false, ObserverPath::Keep) => Some(copy(was, out)),
                (false, ObserverPath::KeepAndWalk) => {
                    let n = copy(was, out);
                    walk = true;
                    task.walked += 1;
                    Some(n)
                }
                (false, ObserverPath::Swept) => {
                    let c = &mut task.changes[..changes.len()];
                    c.copy_from_slice(changes);
                    let check = self.sweep.check_of(slot, &self.slots, was);
                    let (leaves, kept) = order_changes(c, ids, check);
                    let c = &c[..kept];
                    // A view that would be culled is rebuilt, here.
                    if len - leaves.min(len) + (c.len() - leaves) > max_view {
                        None
                    } else {
                        let (gone, came) = c.split_at(leaves);
                        let entered = &mut task.entered[..came.len()];
                        for (e, &c) in entered.iter_mut().zip(came) {
                            *e = c & !ENTERED;
                        }
                        let n = match ids.in_order() {
                            true => merge(was, gone, entered, out, u64::from),
                            false => merge(was, gone, entered, out, |s| ids.key(s)),
                        };
                        let pairs = PairHasher::new(observer);
                        for &s in gone.iter() {
                            task.sums.remove_pair(&pairs, ids.old(s));
                            k = push(&mut task.records, k, LEAVE | s);
                        }
                        for &s in entered.iter() {
                            task.sums.add_pair(&pairs, ids.id(s));
                            k = push(&mut task.records, k, ENTER | s);
                        }
                        walk = self.any_due;
                        task.swept += 1;
                        Some(n)
                    }
                }
                (false, ObserverPath::Edit) => {
                    let n = self.edit_run((observer, slot), was, out, task, &mut k);
                    walk = self.plan.updates == Updates::Walked;
                    task.edited += u64::from(n.is_some());
                    n
                }
                (false, ObserverPath::Rebuild) => {
                    let n = self.rebuild_run(slot, was, out, task, &mut k);
                    walk = self.any_due;
                    task.rebuilt += u64::from(n.is_some());
                    n
                }
                _ => None,
            };
            match done {
                Some(n) => {
                    *place = (view, start + at as u32, n as u32);
                    *end = k as u32 | if walk { WALK } else { 0 };
                    at += n;
                }
                None => {
                    *place = (view, start + at as u32, 0);
                    *end = LEFT;
                    at += fits_view.min(range.len() - at);
                }
            }
        }
        task.end = start + at as u32;
    }

    /// A view rebuilt from the entities around its observer, as
    /// `World::rebuild_view` does it, into `out`; returns its length, or
    /// `None`, having recorded nothing and left every mark clear, where
    /// it is a crowd (ranked, on the calling thread) or its records would
    /// not fit.
    fn rebuild_run(
        &self,
        slot: u32,
        was: &[u32],
        out: &mut [u32],
        task: &mut Task,
        k: &mut usize,
    ) -> Option<usize> {
        let max_view = self.config.max_view as usize;
        // At most a Leave per old entry and an Enter per new one.
        if was.len() >= max_view || task.records.len() - *k < was.len() + max_view {
            return None;
        }
        let Rebuild {
            reach,
            observer,
            ring,
            around,
            ..
        } = self.rebuild_of(slot);
        let ids = &self.slots.ids;
        mark_was(&mut task.marks.slice(), was, ids, &reach);
        task.candidates.clear();
        let source = rebuild_source(
            &self.squares,
            &self.grid,
            &self.packed,
            self.plan.rebuild_source,
        );
        source.visit(ring, around, |run| {
            task.candidates.scan(&reach, run, &task.marks);
        });
        let mut marks = task.marks.slice();
        if task.candidates.len() > max_view + usize::from(reach.everyone) {
            marks.clear(slot);
            for &s in was {
                marks.clear(s);
            }
            return None;
        }
        let entered = &mut task.rebuilt_entered;
        entered.clear();
        entered.extend_kept(task.candidates.as_slice(), |s| !marks.set_now(s));
        entered.as_mut_slice().sort_unstable_by_key(|&s| ids.key(s));
        let pairs = PairHasher::new(observer);
        let (records, sums) = (&mut task.records, &mut task.sums);
        let n = merge_rebuilt(was, entered.as_slice(), out, &mut marks, ids, |s| {
            sums.remove_pair(&pairs, ids.old(s));
            *k = push(records, *k, LEAVE | s);
        });
        marks.clear(slot);
        for &s in entered.as_slice() {
            marks.clear(s);
            sums.add_pair(&pairs, ids.id(s));
            *k = push(records, *k, ENTER | s);
        }
        Some(n)
    }

    /// A view edited by its pairs, as `World::update_view` and
    /// `World::apply_group` do it, into `out`; returns its length, or
    /// `None`, having recorded nothing, where it must be rebuilt.
    fn edit_run(
        &self,
        (observer, slot): (EntityId, u32),
        was: &[u32],
        out: &mut [u32],
        task: &mut Task,
        k: &mut usize,
    ) -> Option<usize> {
        let ids = &self.slots.ids;
        let mut n = 0;
        let mut grows = 0isize;
        for &word in self.pairs.of(slot) {
            let (s, kind) = unpack(word);
            if kind == PairKind::Culled {
                return None;
            }
            let id = ids.id(s);
            let in_view = || ids.search(was, s).is_ok();
            let Some(kind) = kind.resolve(in_view, self.due.get(s)) else {
                continue;
            };
            grows += match kind {
                PairKind::Enter => 1,
                PairKind::Leave => -1,
                _ => 0,
            };
            *task.group.get_mut(n)? = (kind, id, s);
            n += 1;
        }
        if was.len() as isize + grows > self.config.max_view as isize {
            return None;
        }
        let group = &mut task.group[..n];
        group.sort_unstable();
        let pairs = PairHasher::new(observer);
        for &(kind, subject, s) in group.iter() {
            let record = match kind {
                PairKind::Leave => {
                    task.sums.remove_pair(&pairs, subject);
                    LEAVE_NOW | s
                }
                PairKind::Enter => {
                    task.sums.add_pair(&pairs, subject);
                    ENTER | s
                }
                _ => UPDATE | s,
            };
            *k = push(&mut task.records, *k, record);
        }
        let leaves = group.partition_point(|g| g.0 == PairKind::Leave);
        let enters = leaves + group[leaves..].partition_point(|g| g.0 == PairKind::Enter);
        let (left, entered) = (&group[..leaves], &group[leaves..enters]);
        let written = match enters {
            0 => copy(was, out),
            _ => {
                let old = stream_in(was);
                let at = |s| ids.search(old, s).unwrap_or_else(|p| p);
                splice(
                    old,
                    out,
                    left.iter().map(|g| at(g.2)),
                    entered.iter().map(|g| (at(g.2), g.2)),
                )
            }
        };
        Some(written)
    }

    /// Sends the events a task recorded for the observer at `slot`.
    fn send_records<S: EventSink>(&self, slot: u32, records: &[u32], sink: &mut S) {
        let observer = self.slots.entities[slot as usize].id;
        let ids = &self.slots.ids;
        for &r in records {
            let s = r & !KIND;
            match r & KIND {
                LEAVE => sink.event(Event::Leave {
                    observer,
                    subject: ids.old(s),
                }),
                LEAVE_NOW => sink.event(Event::Leave {
                    observer,
                    subject: ids.id(s),
                }),
                ENTER => {
                    let shown = &self.slots.shown[s as usize];
                    sink.event(Event::Enter {
                        observer,
                        subject: ids.id(s),
                        pos: shown.pos,
                        dir: shown.dir,
                        speed: shown.speed,
                        layers: shown.layers,
                    });
                }
                _ => sink.event(self.update(observer, ids.id(s), s)),
            }
        }
    }
}

/// Copies a kept view; returns its length.
#[inline(always)]
fn copy(old: &[u32], out: &mut [u32]) -> usize {
    let n = old.len().min(out.len());
    out[..n].copy_from_slice(&old[..n]);
    n
}

/// Writes `r` at `records[k]` (room was checked); returns `k + 1`.
#[inline(always)]
fn push(records: &mut [u32], k: usize, r: u32) -> usize {
    if let Some(at) = records.get_mut(k) {
        *at = r;
    }
    k + 1
}
