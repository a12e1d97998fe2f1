//! Radius-mode views edited by the pairs that crossed a radius, found in
//! one sweep over pairs of nearby entities, rather than rebuilt one by one.
//!
//! Where a view is exactly the subjects of its observer's interest within
//! `r` (no crowd culled), the view at the end of last tick is a function
//! of where everyone stood then. So in a tick where everything moved a
//! little, a view changes by exactly the subjects on one side of `r` at
//! last tick's positions and on the other at this tick's (those of
//! interest: pairs are found by distance alone, and a view blind to some
//! layer drops the others, [`order_changes`]).
//!
//! With a hysteresis band `h`, the view holds every subject within `r`
//! and, of those within `r + h`, the ones it held. It can change only by
//! a subject that crossed `r` inward (it enters unless the view holds it)
//! or `r + h` outward (it leaves if the view holds it): the sweep finds
//! both kinds of crossing, and each view keeps those of its changes that
//! change it ([`order_changes`]).
//!
//! The sweep meets every pair of nearby entities with such a view in it
//! once, and tests it at both positions for both of its directions at
//! once. A pair's distance moves by at most the lengths of both steps:
//! the viewer's own, and at most `√2` times the tick's largest step on
//! either axis for the other end. Only pairs whose distance now lies
//! within that of `r` (or of `r + h`) can have crossed: a first loop finds
//! those with one distance per pair, and only they are tested twice. Where radii differ,
//! a pair's band is that of its own two ends' radii. The first loop reads
//! the squares that the disc of the largest reach covers, row by row from
//! where the viewer stands, not the box of squares around it. Each view
//! is then edited by its few changes instead of rebuilt, with no per-slot
//! mark set or read.
//!
//! Where few subjects are due an Update (the settling of those that
//! stopped, while the throttle spares the movers), the sweep also pairs
//! each due subject with the viewers whose stay distance it lies within,
//! so that a view it keeps looks its few due subjects up instead of being
//! walked entry by entry for them.
//!
//! An entity that spawned, despawned or jumped (stepped farther than a
//! square) has no small step to bound: it is left out of the pairs, and
//! instead every kept view around where it was and where it is tests it
//! directly. Observers that spawned or jumped are rebuilt as usual, like
//! those whose views the sweep cannot keep.
//!
//! It runs in busy ticks where at least half of the entities are observers
//! whose views it keeps, no slot changed hands, and at most one entity in
//! 32 spawned, despawned or jumped. It holds no state from one tick to the
//! next beyond each entity's last position.

use alloc::vec;
use alloc::vec::Vec;

use crate::command::EntityId;
use crate::config::{Config, Visibility};
use crate::digest::{DigestSums, PairHasher};
use crate::emit::{send_enter, send_leave};
use crate::event::EventSink;
use crate::fixed_point::Fix;
use crate::fork::{self, Fork, MAX_WIDTH};
use crate::layers::LayerSummary;
use crate::plan;
use crate::rule;
#[cfg(debug_assertions)]
use crate::rule::RuleTables;
use crate::scan::{Candidates, ScanRecord};
use crate::slot_bits::SlotBits;
use crate::slot_ids::SlotIds;
use crate::slot_table::{Gone, Shown, SlotTable};
use crate::squares::{step_within, PackedSquares, Part, Widths, JUMPED};
use crate::subject_pairs::PairRoom;
use crate::view::Views;

/// A slot whose observer's view the sweep does not keep this tick: an
/// enter distance no pair fails, so that none of its pairs changes.
const NOT_SWEPT: u64 = u64::MAX;

/// The high bit of a change: set when the subject entered.
pub(crate) const ENTERED: u32 = 1 << 31;

/// Due subjects are grouped by the viewers around them when at most one
/// entity in this many is due (settling after a stop, say); more, and
/// walking every view for them costs less.
const DUE_SHARE: u32 = 8;

/// The sweep's buffers, sized at construction.
///
/// The sweep gives up (the views are then rebuilt) when its changes
/// outgrow the pairs' room: 16 to 64 per slot, in proportion to what the
/// views may hold ([`room_per_entity`](crate::subject_pairs::room_per_entity)),
/// at most 2^24 in all. The uniform walk makes about five per observer
/// with 76 in view, one in twenty jumping anywhere about twelve, and the
/// dense walk about 25 with 380 in view. It
/// groups its changes itself rather than through the tick's
/// `SubjectPairs`: it records them without a branch, and handing them
/// over one push at a time measured 4% slower at uniform-10k radius; but
/// it records them in the pairs' room, which it borrows for the tick
/// ([`Sweep::borrow_room`]).
pub(crate) struct Sweep {
    /// Per slot: the enter distance² of an observer whose view the sweep
    /// keeps this tick, else [`NOT_SWEPT`].
    enter2: Vec<u64>,
    /// The same for the stay distance², `(r + hysteresis)²`, where the
    /// world has a hysteresis band; else empty, and `enter2` serves.
    stay2: Vec<u64>,
    /// The hysteresis band's width, raw; 0 for none.
    band: i64,
    /// The observers whose views the sweep keeps this tick though their
    /// interest may leave some subject out (see [`Check`]).
    partial: SlotBits,
    /// Borrowed from the tick's pairs while the sweep runs, else empty:
    /// `found` holds `(observer slot, subject slot | ENTERED)` as found,
    /// and `grouped` the same subjects grouped by observer,
    /// `grouped[at[o]..at[o + 1]]`; after them, the due subjects around
    /// each viewer (see [`Sweep::due_of`]), grouped by `due_at` the same way.
    room: PairRoom,
    at: Vec<u32>,
    due_at: Vec<u32>,
    /// One viewer's partners near enough to the radius to test twice: one
    /// buffer for each task the pairs may be split into (see `fork.rs`).
    bands: Vec<Vec<u32>>,
    /// The squares' copy split in two parts: the observers whose views the
    /// sweep keeps, and everyone else. A pair matters only with one of the
    /// first in it, so crowds that are culled (or of NPCs) cost the sweep
    /// nothing among themselves. The parts share one room of records, as
    /// together they hold each entity at most once (two rooms took 32
    /// bytes an entity more).
    split: Option<PackedSquares>,
    /// Whether this tick's views are kept by the sweep where it can.
    active: bool,
    /// Whether this tick's due subjects are grouped by the viewers around
    /// them.
    due_active: bool,
}

impl Sweep {
    /// The sweep's buffers for a world of `slots` slots, or none (an
    /// empty sweep that never runs) where the config rules it out: grid
    /// mode, no squares, or too few observers for half of the entities
    /// ever to be swept.
    pub(crate) fn new(config: &Config, slots: u32) -> Self {
        let possible = config.visibility == Visibility::Radius
            && u64::from(config.max_observers) * 2 >= u64::from(config.max_entities);
        // Both parts are filled from the world's squares, never sorted.
        let split = PackedSquares::split_copy_of(config, config.max_entities).filter(|_| possible);
        let (n, max_entities) = match split {
            Some(_) => (slots as usize, config.max_entities as usize),
            None => (0, 0),
        };
        let band = config.hysteresis.to_bits();
        Sweep {
            enter2: vec![NOT_SWEPT; n],
            stay2: vec![NOT_SWEPT; if band > 0 { n } else { 0 }],
            band,
            partial: SlotBits::new(n as u32),
            room: PairRoom::default(),
            at: vec![0; n + 1],
            due_at: vec![0; n + 1],
            bands: vec![vec![0; max_entities + 1]],
            split,
            active: false,
            due_active: false,
        }
    }

    /// Groups the first `k` changes found by observer and makes them this
    /// tick's; then the `d` due pairs found after them, if any.
    fn group(&mut self, k: usize, due: Option<usize>) {
        let PairRoom { found, grouped } = &mut self.room;
        group_by_observer(&found[..k], grouped, &mut self.at, 0);
        self.active = true;
        self.due_active = false;
        if let Some(d) = due {
            group_by_observer(
                &found[k..k + d],
                &mut grouped[k..],
                &mut self.due_at,
                k as u32,
            );
            self.due_active = true;
        }
    }

    /// Makes room for the pairs to be split into up to `width` tasks (at
    /// most [`MAX_WIDTH`]); returns the width it has room for.
    pub(crate) fn reserve_width(&mut self, width: usize) -> usize {
        let n = self.bands.first().map_or(0, Vec::len);
        while self.bands.len() < width.min(MAX_WIDTH) {
            self.bands.push(vec![0; n]);
        }
        self.bands.len()
    }

    /// Whether the config lets the sweep run at all.
    pub(crate) fn possible(&self) -> bool {
        self.split.is_some()
    }

    /// Forgets the tick's changes (views are rebuilt unless swept again)
    /// and gives back the pairs' room if it was borrowed.
    pub(crate) fn end_tick(&mut self) -> Option<PairRoom> {
        self.active = false;
        self.due_active = false;
        let borrowed = !self.room.found.is_empty();
        borrowed.then(|| core::mem::take(&mut self.room))
    }

    /// Borrows the tick's pairs' room for [`Sweep::find_changes`], until
    /// [`Sweep::end_tick`] gives it back.
    pub(crate) fn borrow_room(&mut self, room: PairRoom) {
        self.room = room;
    }
}

/// What the sweep reads of the world to find a tick's changes.
pub(crate) struct Scene<'a> {
    /// Every live entity's records, by slot.
    pub(crate) slots: &'a SlotTable,
    /// Every view as the last tick left it.
    pub(crate) views: &'a Views,
    /// The live observers, ascending by id.
    pub(crate) by_id: &'a [(EntityId, u32)],
    /// The subjects despawned this tick.
    pub(crate) gone: &'a [Gone],
    /// The live entities' layers.
    pub(crate) layers: LayerSummary,
    pub(crate) max_view: u32,
    /// Live entities.
    pub(crate) count: u32,
    /// The subjects due an Update this tick, where any is.
    pub(crate) due: Option<&'a SlotBits>,
}

/// What applying the sweep's changes to one view writes.
pub(crate) struct ViewEdit<'a> {
    pub(crate) slots: &'a SlotTable,
    pub(crate) views: &'a mut Views,
    pub(crate) sums: &'a mut DigestSums,
    /// Receives the entered subjects' slots, ascending by id.
    pub(crate) entered: &'a mut Candidates,
    pub(crate) max_view: u32,
    /// What debug builds check every change against.
    #[cfg(debug_assertions)]
    pub(crate) rule: RuleTables<'a>,
}

impl Sweep {
    /// Whether this tick's sweep holds the changes of the view of the
    /// observer at `slot`.
    #[inline]
    pub(crate) fn keeps(&self, slot: u32) -> bool {
        self.active && self.enter2[slot as usize] != NOT_SWEPT
    }

    /// The changes found for the view of the observer at `slot`, as
    /// found (not yet sorted); empty unless it [`Sweep::keeps`] it.
    #[inline]
    pub(crate) fn changes_of(&self, slot: u32) -> &[u32] {
        let (Some(&from), Some(&to)) = (self.at.get(slot as usize), self.at.get(slot as usize + 1))
        else {
            return &[];
        };
        self.room
            .grouped
            .get(from as usize..to as usize)
            .unwrap_or(&[])
    }

    /// What the changes found for the view of the observer at `slot`
    /// are checked against ([`order_changes`]); `was` is its view as last
    /// tick left it.
    pub(crate) fn check_of<'a>(
        &self,
        slot: u32,
        slots: &'a SlotTable,
        was: &'a [u32],
    ) -> Check<'a> {
        // A bit marks them, not a read of every observer's sight.
        let interest = self.partial.get(slot).then(|| {
            let interest = slots.sights[slot as usize].interest;
            (interest, &slots.shown[..])
        });
        Check {
            was,
            banded: self.band > 0,
            interest,
        }
    }

    /// Whether this tick's due subjects are grouped by viewer.
    pub(crate) fn due_grouped(&self) -> bool {
        self.due_active
    }

    /// Whether the view of the observer at `slot` holds every due subject
    /// [`Sweep::due_of`] lists for it, where that view is the rule's (no
    /// crowd culled): with no hysteresis band the stay distance is `r`,
    /// and a view of interest in every live layer holds every subject
    /// within `r`. Then none needs looking up in the view.
    #[inline]
    pub(crate) fn holds_every_due(&self, slot: u32) -> bool {
        self.band == 0 && !self.partial.get(slot)
    }

    /// Where this tick's due subjects are few (see [`DUE_SHARE`]), those
    /// within the stay distance of the observer at `slot`, ascending by
    /// id: every due subject its view can hold, since a view the sweep
    /// keeps holds nothing beyond it, even where it is rebuilt and culled
    /// instead. `None` where the view must be walked for them.
    #[inline]
    pub(crate) fn due_of(&self, slot: u32) -> Option<&[u32]> {
        if !(self.due_active && self.keeps(slot)) {
            return None;
        }
        let from = *self.due_at.get(slot as usize)? as usize;
        let to = *self.due_at.get(slot as usize + 1)? as usize;
        self.room.grouped.get(from..to)
    }

    /// Finds every sweepable observer's changes for tick `t` (see the
    /// module docs) from `squares`, every entity sorted into squares with
    /// its step; `step` is the tick's largest recorded step on either
    /// axis. Returns whether the sweep holds them; if not, no view was
    /// touched.
    pub(crate) fn find_changes<F: Fork + ?Sized>(
        &mut self,
        from: &PackedSquares,
        scene: &Scene<'_>,
        (step, t): (i64, u64),
        fork: &F,
    ) -> bool {
        // `found` keeps one entry spare past the room.
        let Some(room) = self.room.found.len().checked_sub(1) else {
            return false;
        };
        if !self.possible() {
            return false;
        }
        let (swept, r_min, r_max) = self.choose_viewers(scene, from.side(), t);
        let squares = from.whole();
        // The sweep's passes over every slot and record pay off only when
        // most entities have views it keeps (not where NPCs abound).
        if swept == 0 || !plan::sweep_allowed(u64::from(swept), u64::from(scene.count), None) {
            return false;
        }
        let sweep = self;
        let slots = scene.slots;
        // The band (see the module docs): a viewer's own step, and at
        // most `√2` times the tick's largest for the other end.
        let other_step = step.saturating_mul(1415) / 1000 + 1;
        let largest = u32::try_from(step).unwrap_or(u32::MAX);
        let slack = stride(largest, largest).saturating_add(other_step);
        // A view holds subjects as far as its stay distance.
        let stay_max = r_max.saturating_add(sweep.band);
        let reach = stay_max.saturating_add(slack);
        // Offsets, now and before, stay below 2^31 raw: 64-bit squares.
        if reach.saturating_add(slack).saturating_add(squares.side()) >= 1 << 31 {
            return false;
        }
        let span = u32::try_from((reach + squares.side() - 1) / squares.side()).unwrap_or(u32::MAX);
        let enter2 = &sweep.enter2;
        let stay2 = match sweep.band {
            0 => &sweep.enter2,
            _ => &sweep.stay2,
        };
        let mixed = r_min != r_max;
        // Where every entity's view is kept, with one radius, the copy is
        // the viewers'.
        let (viewers, others) = if swept == scene.count && !mixed {
            (squares, None)
        } else {
            let Some(split) = &mut sweep.split else {
                return false;
            };
            // The reach check above keeps every swept radius below 2^31.
            let radius = |slot: u32| slots.sights[slot as usize].radius.to_bits() as u32;
            split.copy_part(from, false, |e| {
                let kept = enter2[e.slot as usize] != NOT_SWEPT;
                kept.then(|| {
                    if mixed {
                        e.with_radius(radius(e.slot))
                    } else {
                        *e
                    }
                })
            });
            let others = swept != scene.count;
            if others {
                split.copy_part(from, true, |e| {
                    let other = enter2[e.slot as usize] == NOT_SWEPT && e.dx != JUMPED;
                    other.then_some(*e)
                });
            }
            (split.part(false), others.then(|| split.part(true)))
        };
        let (cols, rows) = squares.dims();
        let mut k = 0usize;
        // Jumps, spawns and despawns, around where each was and is.
        for a in squares.records().iter().filter(|e| e.dx == JUMPED) {
            let before = match slots.born[a.slot as usize] == t {
                true => None,
                false => slots.before.get(a.slot as usize).copied(),
            };
            let (at, near) = (
                Some((a.x, a.y)),
                (viewers, (&enter2[..], &stay2[..]), reach),
            );
            k = around(&mut sweep.room.found, k, near, a.slot, at, before);
        }
        for g in scene.gone {
            let was = Some((g.pos.x.to_bits(), g.pos.y.to_bits()));
            k = around(
                &mut sweep.room.found,
                k,
                (viewers, (enter2, stay2), reach),
                g.slot,
                None,
                was,
            );
        }
        // First, so that a tick with too many gives up before the pairs.
        if k >= room {
            return false;
        }
        let pairs = Pairs {
            viewers,
            others,
            enter2,
            stay2,
            dims: (cols, rows),
            span,
            radius: r_min,
            band: sweep.band,
            mixed,
            other_step,
            widths: Widths::new(reach),
        };
        let Some(k) = pairs.split(fork, k, &mut sweep.room.found, &mut sweep.bands) else {
            return false;
        };
        if k >= room {
            return false;
        }
        let due = scene.due.and_then(|due| {
            let (limit, found) = (scene.count / DUE_SHARE, &mut sweep.room.found[k..room]);
            // A viewer's stay distance² from its record, not a load by
            // slot: one for all, or from the radius a mixed copy carries.
            let band = sweep.band;
            let checked = |v: &ScanRecord, d2: u64| {
                debug_assert_eq!(d2, stay2[v.slot as usize]);
                d2
            };
            match mixed {
                false => {
                    let one = square(r_min + band, 0);
                    let stay2_of = |v: &ScanRecord| checked(v, one);
                    due_pairs(found, (viewers, stay2_of, stay_max), due, slots, limit)
                }
                true => {
                    let stay2_of = |v: &ScanRecord| checked(v, square(v.radius() + band, 0));
                    due_pairs(found, (viewers, stay2_of, stay_max), due, slots, limit)
                }
            }
        });
        sweep.group(k, due);
        // Each group ascends by slot: by id too where slots are in order.
        if due.is_some() && !slots.ids.in_order() {
            sweep.sort_due_by_id(&slots.ids);
        }
        true
    }

    /// Sorts each observer's due subjects by id, where slots are not in
    /// id order.
    fn sort_due_by_id(&mut self, ids: &crate::slot_ids::SlotIds) {
        for o in 0..self.due_at.len() - 1 {
            let (from, to) = (self.due_at[o] as usize, self.due_at[o + 1] as usize);
            if let Some(group) = self.room.grouped.get_mut(from..to) {
                group.sort_unstable_by_key(|&s| ids.key(s));
            }
        }
    }

    /// Marks the observers whose views the sweep can keep in tick `t` (see
    /// the module docs) with their enter distance², and returns how many
    /// there are and the least and greatest of their radii; `side` is the
    /// squares' side, by which the copy decides who jumped.
    fn choose_viewers(&mut self, scene: &Scene<'_>, side: i64, t: u64) -> (u32, i64, i64) {
        let max_view = scene.max_view as usize;
        let slots = scene.slots;
        let (enter2, stay2, partial) = (&mut self.enter2, &mut self.stay2, &mut self.partial);
        enter2.fill(NOT_SWEPT);
        stay2.fill(NOT_SWEPT);
        partial.clear_all();
        let (mut swept, mut r_min, mut r_max) = (0u32, i64::MAX, 0i64);
        // As the copy decides who jumped: a jumped observer is rebuilt.
        let stepped = |now: Fix, was: i64| step_within(now.to_bits(), was, side).is_some();
        for &(_, o) in scene.by_id {
            let (e, sight) = (&slots.entities[o as usize], &slots.sights[o as usize]);
            // No crowd culled, candidates near enough for 64-bit squares,
            // and a step. (Subjects of no interest are dropped from the
            // changes of the views they would enter: `order_changes`.)
            let (was_x, was_y) = slots.before[o as usize];
            let keeps = e.alive
                && slots.born[o as usize] != t
                && stepped(e.cur.pos.x, was_x)
                && stepped(e.cur.pos.y, was_y)
                && sight.near
                && scene.views.slots(e.view).len() < max_view;
            let (e2, s2) = (u64::try_from(sight.enter2()), u64::try_from(sight.stay2()));
            if let (true, Ok(e2), Ok(s2)) = (keeps, e2, s2) {
                enter2[o as usize] = e2;
                if let Some(stay) = stay2.get_mut(o as usize) {
                    *stay = s2;
                }
                partial.set_if(o, !scene.layers.all_of_interest(sight.interest));
                r_min = r_min.min(sight.radius.to_bits());
                r_max = r_max.max(sight.radius.to_bits());
                swept += 1;
            }
        }
        // Where radii differ, every viewer's pair search reaches as far as
        // the largest radius, and a view blind to some layer pays for the
        // pairs it then drops: rebuilt, it scans only its own disc and
        // keeps less (radius-mix-10k with a hidden quarter of the entities
        // ran 15% slower swept). The bounds stay those of all of them.
        if r_min != r_max {
            for o in partial.ones() {
                enter2[o as usize] = NOT_SWEPT;
                if let Some(stay) = stay2.get_mut(o as usize) {
                    *stay = NOT_SWEPT;
                }
                swept -= 1;
            }
            partial.clear_all();
        }
        (swept, r_min, r_max)
    }

    /// Applies the sweep's changes to the view of the observer at `slot`
    /// and sends their Leaves and Enters; the entered subjects are left in
    /// `edit.entered`. Returns the event count, or `None` when the sweep
    /// does not keep this view (it must be rebuilt).
    ///
    /// Inlined into the view's refresh, as it was while it was a method of
    /// the world: called apart, uniform-10k radius ran 0.6% more
    /// instructions.
    #[inline(always)]
    pub(crate) fn edit_view<S: EventSink>(
        &mut self,
        slot: u32,
        edit: ViewEdit<'_>,
        sink: &mut S,
    ) -> Option<u64> {
        if !self.keeps(slot) {
            return None;
        }
        let (observer, view) = {
            let o = &edit.slots.entities[slot as usize];
            (o.id, o.view)
        };
        let group = self.at[slot as usize] as usize..self.at[slot as usize + 1] as usize;
        let old = edit.views.slots(view);
        let check = self.check_of(slot, edit.slots, old);
        let changes = &mut self.room.grouped[group];
        let ids = &edit.slots.ids;
        let (leaves, kept) = order_changes(changes, ids, check);
        let old_len = old.len();
        if old_len - leaves.min(old_len) + (kept - leaves) > edit.max_view as usize {
            // It would be culled: only a rebuild ranks.
            return None;
        }
        let (gone, came) = changes[..kept].split_at(leaves);
        // The sweep found crossings by distance alone, and the view kept
        // those that change it: the rule agrees with each (a despawned
        // subject has no zone to ask).
        #[cfg(debug_assertions)]
        {
            use crate::rule::Zone;
            let rule = edit.rule;
            let left = |s: u32| !rule.entities[s as usize].alive || rule.zone(slot, s) == Zone::Out;
            assert!(gone.iter().all(|&s| left(s)));
            assert!(came
                .iter()
                .all(|&s| rule.zone(slot, s & !ENTERED) == Zone::In));
        }
        let entered = edit.entered;
        entered.clear();
        entered.extend_kept(came, |_| true);
        for e in entered.as_mut_slice() {
            *e &= !ENTERED;
        }
        let entered = entered.as_slice();
        edit.views.rewrite(view, |old, out| match ids.in_order() {
            true => merge(old, gone, entered, out, u64::from),
            false => merge(old, gone, entered, out, |s| ids.key(s)),
        });
        let pairs = PairHasher::new(observer);
        for &s in gone {
            send_leave(sink, edit.sums, &pairs, ids.old(s));
        }
        for &s in entered {
            let shown = &edit.slots.shown[s as usize];
            send_enter(sink, edit.sums, &pairs, ids.id(s), shown);
        }
        Some((gone.len() + entered.len()) as u64)
    }
}

/// What the changes the sweep found for one view are checked against.
pub(crate) struct Check<'a> {
    /// The view as last tick left it.
    was: &'a [u32],
    /// Whether views have a hysteresis band: a subject that stood in the
    /// band was visible exactly if the view holds it, so a crossing may
    /// change nothing.
    banded: bool,
    /// Where the observer's interest leaves some subject out: the
    /// interest, and every slot's layers. The sweep finds crossings by
    /// distance alone.
    interest: Option<(u32, &'a [Shown])>,
}

/// Sorts one view's changes as the sweep found them: Leaves first, then
/// Enters, each ascending by id, and keeps only those that change the
/// view (see [`Check`]): a Leave of a subject it holds, an Enter of one of
/// interest that it does not hold. Without a band a view holds exactly
/// the subjects of interest within `r`, so both come down to interest;
/// without a band or an interest that leaves some subject out, every
/// change does. Returns how many Leaves and how many changes in all are
/// kept, in front.
pub(crate) fn order_changes(
    changes: &mut [u32],
    ids: &SlotIds,
    check: Check<'_>,
) -> (usize, usize) {
    match ids.in_order() {
        // Slots compare as ids, and the flag sorts Leaves first.
        true => changes.sort_unstable(),
        false => changes.sort_unstable_by_key(|&c| (c & ENTERED, ids.key(c & !ENTERED))),
    }
    if !check.banded && check.interest.is_none() {
        return (
            changes.partition_point(|&c| c & ENTERED == 0),
            changes.len(),
        );
    }
    let was = check.was;
    let (mut leaves, mut kept) = (0, 0);
    for i in 0..changes.len() {
        let c = changes[i];
        let (s, enters) = (c & !ENTERED, c & ENTERED != 0);
        // By id, then by slot: an entity that despawned and came back in
        // this tick under the same id, in another slot, is not the one the
        // view holds.
        let held = || matches!(ids.search(was, s), Ok(at) if was[at] == s);
        // A despawned subject's slot still shows its layers.
        let seen = || {
            check
                .interest
                .is_none_or(|(interest, shown)| shown[s as usize].layers & interest != 0)
        };
        let changes_view = match (enters, check.banded) {
            (true, true) => seen() && !held(),
            // Without a band the view held exactly the subjects of
            // interest within `r`: no look-up.
            (_, false) => seen(),
            (false, true) => held(),
        };
        if changes_view {
            changes[kept] = c;
            kept += 1;
            leaves += usize::from(!enters);
        }
    }
    (leaves, kept)
}

/// What every task of the sweep's pairs reads: the viewers' copy (and
/// everyone else's, where not every entity is a viewer), their enter and
/// stay distances², the squares' columns and rows, how many squares away
/// a pair may be (the reach), the viewers' one radius unless radii differ
/// (the viewers' records then carry their own, see
/// [`ScanRecord::with_radius`]), the hysteresis band, the bound on the
/// other end's step, and the disc of the reach row by row.
struct Pairs<'a> {
    viewers: Part<'a, ScanRecord>,
    others: Option<Part<'a, ScanRecord>>,
    enter2: &'a [u64],
    stay2: &'a [u64],
    dims: (u32, u32),
    span: u32,
    radius: i64,
    band: i64,
    mixed: bool,
    other_step: i64,
    widths: Widths,
}

impl Pairs<'_> {
    /// Splits the rows of squares into `fork`'s width of bands of about
    /// equal work ([`Pairs::bounds`]), records each band's changes into its
    /// own part of `found` after the first `k` (its own scratch in
    /// `bands`), and joins the parts in row order. Returns the count, or
    /// `None` when a part outgrew its room: the sweep then gives up.
    fn split<F: Fork + ?Sized>(
        &self,
        fork: &F,
        k: usize,
        found: &mut [(u32, u32)],
        bands: &mut [Vec<u32>],
    ) -> Option<usize> {
        let width = fork::width_of(fork, bands.len());
        if width == 1 {
            let band = bands.first_mut()?;
            let n = self.rows(0..self.dims.1, found.get_mut(k..)?, band)?;
            return Some(k + n);
        }
        let bounds = self.bounds(width);
        let (_, rest) = found.split_at_mut(k);
        // Each part keeps one entry spare, as `found` does.
        let part = rest.len() / width;
        if part < 2 {
            return None;
        }
        let mut counts = [None::<usize>; MAX_WIDTH];
        {
            let mut tasks = heapless::Vec::<_, MAX_WIDTH>::new();
            let parts = rest.chunks_mut(part);
            for (((w, found), band), count) in (0..width)
                .zip(parts)
                .zip(bands.iter_mut())
                .zip(counts.iter_mut())
            {
                let band_rows = bounds[w]..bounds[w + 1];
                let task = move || *count = self.rows(band_rows.clone(), &mut *found, band);
                if tasks.push(task).is_err() {
                    return None;
                }
            }
            fork::join_all(fork, &mut tasks);
        }
        // Join the parts in row order right after the first `k`.
        let mut end = k;
        for (w, count) in counts.iter().take(width).enumerate() {
            let n = (*count)?;
            let from = k + w * part;
            found.copy_within(from..from + n, end);
            end += n;
        }
        Some(end)
    }

    /// The rows that start each of `width` bands of about equal work:
    /// band `w` is rows `bounds[w]..bounds[w + 1]`. A row's work is
    /// reckoned as its viewers times the records each reads: about half
    /// of its own row, the `span` rows below and, where not every entity
    /// is a viewer, everyone else within `span` rows either way. (By
    /// viewers alone, the band at the top did about 12% more than the one
    /// at the bottom at uniform-10k radius: its last rows read into the
    /// next band, while the world's last rows have nothing below.)
    fn bounds(&self, width: usize) -> [u32; MAX_WIDTH + 1] {
        let rows = self.dims.1;
        let before = |part: &Part<'_, ScanRecord>, r: u32| part.start_of(0, r.min(rows)) as u64;
        let viewers = |r| before(&self.viewers, r);
        let others = |r| self.others.as_ref().map_or(0, |o| before(o, r));
        let work = |r: u32| {
            let (next, past) = (r + 1, r.saturating_add(self.span).saturating_add(1));
            let own = viewers(next) - viewers(r);
            let below = viewers(past) - viewers(next);
            let around = others(past) - others(r.saturating_sub(self.span));
            u128::from(own) * u128::from(own / 2 + below + around)
        };
        let total: u128 = (0..rows).map(work).sum();
        let mut bounds = [rows; MAX_WIDTH + 1];
        bounds[0] = 0;
        let (mut w, mut sum) = (1, 0u128);
        for r in 0..rows {
            while w < width && sum >= total * w as u128 / width as u128 {
                bounds[w] = r;
                w += 1;
            }
            sum += work(r);
        }
        bounds
    }

    /// Records the changes of the pairs whose first viewer (in square
    /// order) lies in `rows` into `found`, with `band` as scratch. Returns
    /// how many, or `None` when they outgrew `found` (one entry spare).
    fn rows(
        &self,
        rows: core::ops::Range<u32>,
        found: &mut [(u32, u32)],
        band_scratch: &mut [u32],
    ) -> Option<usize> {
        match (self.mixed, self.band > 0) {
            (true, true) => self.rows_of::<true, true>(rows, found, band_scratch),
            (true, false) => self.rows_of::<true, false>(rows, found, band_scratch),
            (false, true) => self.rows_of::<false, true>(rows, found, band_scratch),
            (false, false) => self.rows_of::<false, false>(rows, found, band_scratch),
        }
    }

    /// [`Pairs::rows`] for viewers of one radius (`MIXED` false), or of
    /// radii of their own, carried in their records. A pair can have
    /// crossed only a radius of one of its ends: with one radius, the band
    /// around it is narrow and a viewer's radius² is every viewer's; with
    /// several, each pair is tested against the bands of its own two ends,
    /// not the one from the least radius to the greatest, which would take
    /// nearly every pair in reach through the second test (and a load of
    /// the other end's distance² by slot). With a hysteresis band
    /// (`BANDED`), a pair can also have crossed a stay distance, so each
    /// end has a second band around that.
    #[inline(always)]
    fn rows_of<const MIXED: bool, const BANDED: bool>(
        &self,
        rows: core::ops::Range<u32>,
        found: &mut [(u32, u32)],
        band_scratch: &mut [u32],
    ) -> Option<usize> {
        let (viewers, enter2, span) = (self.viewers, self.enter2, self.span);
        let (cols, all_rows) = self.dims;
        let room = found.len().checked_sub(1)?;
        let mut k = 0usize;
        let viewed = viewers.records();
        for row in rows {
            let (top, bottom) = (
                row.saturating_sub(span),
                row.saturating_add(span).min(all_rows - 1),
            );
            for i in viewers.start_of(0, row)..viewers.start_of(cols, row) {
                // Past the room, a change may have been dropped.
                if k >= room {
                    return None;
                }
                let a = viewed[i];
                let ra = enter2[a.slot as usize];
                let r_a = if MIXED { a.radius() } else { self.radius };
                debug_assert_eq!(Some(ra), r_a.checked_mul(r_a).map(|r2| r2 as u64));
                let moved = stride(a.dx.unsigned_abs(), a.dy.unsigned_abs()) + self.other_step;
                let own = band_of(r_a, moved);
                let own_stay = band_of(r_a + self.band, moved);
                let sa = if BANDED {
                    self.stay2[a.slot as usize]
                } else {
                    ra
                };
                // Where a band is narrower than twice the pair's steps, the
                // ranges around both distances overlap: one test of their
                // union does (`apart` where they do not).
                let apart = BANDED && self.band > 2 * moved;
                let own_union = (own.0, if BANDED { own_stay.1 } else { own.1 });
                // Whether `d` may have crossed a distance of `a`, or of `b`
                // (of radius `r_b`).
                let near_own = |d: u64| match apart {
                    false => within(d, own_union),
                    true => within(d, own) | within(d, own_stay),
                };
                let near_b = |r_b: i64, d: u64| {
                    let (near, stay) = (band_of(r_b, moved), band_of(r_b + self.band, moved));
                    match apart {
                        false if BANDED => within(d, (near.0, stay.1)),
                        false => within(d, near),
                        true => within(d, near) | within(d, stay),
                    }
                };
                let (ax, ay) = (a.x - i64::from(a.dx), a.y - i64::from(a.dy));
                // The squares of row `r` within reach of `a`, in `copy`.
                let near = |copy: Part<'_, ScanRecord>, r: u32| {
                    let (first, last) = copy.cols_near((a.x, a.y), r, &self.widths)?;
                    Some(copy.start_of(first, r)..copy.start_of(last + 1, r))
                };
                // Other viewers: each pair once, for both directions,
                // later in the same row or in the rows below.
                let same_row = near(viewers, row).map_or(0..0, |run| (i + 1)..run.end.max(i + 1));
                let below = (row + 1..=bottom).map_while(|r| near(viewers, r));
                let mut n = 0;
                for run in core::iter::once(same_row).chain(below) {
                    n = match MIXED {
                        true => band(band_scratch, n, viewed, run, &a, |b, d| {
                            near_own(d) | near_b(b.radius(), d)
                        }),
                        false => band(band_scratch, n, viewed, run, &a, |_, d| near_own(d)),
                    };
                }
                for &j in &band_scratch[..n] {
                    let b = &viewed[j as usize];
                    let d = distances(&a, (ax, ay), b);
                    let rb = if MIXED { b.radius().pow(2) as u64 } else { ra };
                    debug_assert_eq!(rb, enter2[b.slot as usize]);
                    if BANDED {
                        let sb = if MIXED {
                            (b.radius() + self.band).pow(2) as u64
                        } else {
                            sa
                        };
                        debug_assert_eq!(sb, self.stay2[b.slot as usize]);
                        k = record_banded(found, k, (a.slot, b.slot), d, (ra, sa));
                        k = record_banded(found, k, (b.slot, a.slot), d, (rb, sb));
                    } else {
                        k = record(found, k, (a.slot, b.slot), d, ra);
                        k = record(found, k, (b.slot, a.slot), d, rb);
                    }
                }
                // Everyone else around, for this viewer's direction.
                let Some(others) = self.others else { continue };
                let other = others.records();
                let mut n = 0;
                for run in (top..=bottom).filter_map(|r| near(others, r)) {
                    n = band(band_scratch, n, other, run, &a, |_, d| near_own(d));
                }
                for &j in &band_scratch[..n] {
                    let d = distances(&a, (ax, ay), &other[j as usize]);
                    let pair = (a.slot, other[j as usize].slot);
                    k = match BANDED {
                        true => record_banded(found, k, pair, d, (ra, sa)),
                        false => record(found, k, pair, d, ra),
                    };
                }
            }
        }
        (k < room).then_some(k)
    }
}

/// Appends to `band` (from `n` on) the index of every record `b` of
/// `records[run]` for which `near(b, dist²)` holds, its `dist²` from `a`;
/// returns the new count.
#[inline(always)]
fn band(
    band: &mut [u32],
    mut n: usize,
    records: &[ScanRecord],
    run: core::ops::Range<usize>,
    a: &ScanRecord,
    near: impl Fn(&ScanRecord, u64) -> bool,
) -> usize {
    let first = run.start as u32;
    for (j, b) in (first..).zip(records.get(run).unwrap_or(&[])) {
        let d = square(b.x.wrapping_sub(a.x), b.y.wrapping_sub(a.y));
        if let Some(at) = band.get_mut(n) {
            *at = j;
        }
        n += usize::from(near(b, d));
    }
    n
}

/// The squared distances a pair's distance must now lie within to have
/// crossed the radius `r` with a move of at most `moved`.
#[inline(always)]
fn band_of(r: i64, moved: i64) -> (u64, u64) {
    let (near, far) = ((r - moved).max(0) as u64, (r + moved) as u64);
    (near * near, far * far)
}

/// Whether `d` lies within `lo..=hi`, without a branch.
#[inline(always)]
fn within(d: u64, (lo, hi): (u64, u64)) -> bool {
    d.wrapping_sub(lo) <= hi - lo
}

/// At least the length of a step of `x` and `y` on the axes: `max + min
/// / 2` (within `√(x² + y²)` for `y ≤ x`, since `¾y² ≤ xy`), rounded up.
#[inline(always)]
fn stride(x: u32, y: u32) -> i64 {
    i64::from(x.max(y)) + i64::from(x.min(y) / 2) + 1
}

/// Groups `pairs` of `(observer slot, subject)` by observer into `out`, a
/// counting sort over the slots that keeps their order within a group:
/// afterwards observer `o`'s subjects are `out[at[o] - base..at[o + 1] -
/// base]`, with `base` the place of `out` in the buffer the groups are
/// read from.
fn group_by_observer(pairs: &[(u32, u32)], out: &mut [u32], at: &mut [u32], base: u32) {
    at.fill(0);
    for &(o, _) in pairs {
        at[o as usize + 1] += 1;
    }
    at[0] = base;
    for s in 1..at.len() {
        at[s] += at[s - 1];
    }
    for &(o, c) in pairs {
        let at = &mut at[o as usize];
        out[(*at - base) as usize] = c;
        *at += 1;
    }
    // Each `at[o]` now ends its group: shift them back to starts.
    let last = at.len() - 1;
    at.copy_within(..last, 1);
    at[0] = base;
}

/// Records in `found` a pair `(viewer slot, subject)` for every due
/// subject and every viewer of `near` (the viewers' copy, a viewer's stay
/// distance² from its record, and the largest stay distance) whose stay
/// distance it lies within now, in ascending order of the subjects' slots.
/// Returns how many, or `None` where more than `limit` subjects are due or
/// their pairs outgrow `found`.
fn due_pairs(
    found: &mut [(u32, u32)],
    (viewers, stay2_of, stay_max): (Part<'_, ScanRecord>, impl Fn(&ScanRecord) -> u64, i64),
    due: &SlotBits,
    slots: &SlotTable,
    limit: u32,
) -> Option<usize> {
    if due.count() > limit {
        return None;
    }
    let room = found.len();
    let mut d = 0usize;
    for s in due.ones() {
        if d >= room {
            return None;
        }
        let pos = slots.entities[s as usize].cur.pos;
        let (x, y) = (pos.x.to_bits(), pos.y.to_bits());
        for run in viewers.runs(x, y, stay_max) {
            for v in run {
                // Within a square of the reach: 64-bit squares.
                let inside = square(v.x - x, v.y - y) <= stay2_of(v);
                if let Some(at) = found.get_mut(d) {
                    *at = (v.slot, s);
                }
                d += usize::from(inside & (v.slot != s));
            }
        }
    }
    (d < room).then_some(d)
}

/// Records the changes that a subject which jumped, spawned or despawned
/// makes in the views of the swept viewers around where it is (`now`)
/// and where it was (`was`, both raw): the sweep's pairs never meet it.
/// `near` is the viewers' copy, their enter and stay distances² by slot,
/// and how far on each axis a viewer can be from either point; returns the
/// new count. As for the pairs, a subject may enter where it is within the
/// enter distance and was not, and leave where it is beyond the stay
/// distance and was within it: the view decides ([`order_changes`]).
fn around(
    found: &mut [(u32, u32)],
    mut k: usize,
    (viewers, (enter2, stay2), reach): (Part<'_, ScanRecord>, (&[u64], &[u64]), i64),
    subject: u32,
    now: Option<(i64, i64)>,
    was: Option<(i64, i64)>,
) -> usize {
    let Some(first) = now.or(was) else {
        return k;
    };
    for run in viewers.runs_around(first, now.and(was), reach) {
        for v in run {
            let e2 = enter2.get(v.slot as usize).copied().unwrap_or(NOT_SWEPT);
            if e2 == NOT_SWEPT {
                continue;
            }
            let s2 = u128::from(stay2.get(v.slot as usize).copied().unwrap_or(NOT_SWEPT));
            let e2 = u128::from(e2);
            let (vx, vy) = (v.x - i64::from(v.dx), v.y - i64::from(v.dy));
            let now2 = now.map(|(x, y)| rule::dist2(x, y, v.x, v.y));
            let was2 = was.map(|(x, y)| rule::dist2(x, y, vx, vy));
            let within = |d: Option<u128>, limit: u128| d.is_some_and(|d| d <= limit);
            let entered = within(now2, e2) && !within(was2, e2);
            let left = !within(now2, s2) && within(was2, s2);
            if entered || left {
                if let Some(at) = found.get_mut(k) {
                    *at = (v.slot, subject | (u32::from(entered) << 31));
                }
                k += 1;
            }
        }
    }
    k
}

/// A pair's `dist²` now and at last tick's positions; `(ax, ay)` is where
/// `a` stood then.
#[inline(always)]
fn distances(a: &ScanRecord, (ax, ay): (i64, i64), b: &ScanRecord) -> (u64, u64) {
    let now = square(b.x - a.x, b.y - a.y);
    let was = square(b.x - i64::from(b.dx) - ax, b.y - i64::from(b.dy) - ay);
    (now, was)
}

/// Records at `found[k]`, without a branch, the change of `subject` in
/// `observer`'s view if the pair's distances `(now, was)` lie on two sides
/// of `enter2`; returns the new count. [`NOT_SWEPT`] is never crossed.
#[inline(always)]
fn record(
    found: &mut [(u32, u32)],
    k: usize,
    (observer, subject): (u32, u32),
    (now, was): (u64, u64),
    enter2: u64,
) -> usize {
    let inside = now <= enter2;
    if let Some(at) = found.get_mut(k) {
        *at = (observer, subject | (u32::from(inside) << 31));
    }
    k + usize::from(inside != (was <= enter2))
}

/// [`record`] with a hysteresis band: the change of `subject` in
/// `observer`'s view if the pair's distances `(now, was)` crossed
/// `enter2` inward (it may enter) or `stay2` outward (it may leave). Only
/// the view knows whether a subject that was in the band was visible, so
/// each change is checked against it ([`order_changes`]).
#[inline(always)]
fn record_banded(
    found: &mut [(u32, u32)],
    k: usize,
    (observer, subject): (u32, u32),
    (now, was): (u64, u64),
    (enter2, stay2): (u64, u64),
) -> usize {
    let entered = (now <= enter2) & (was > enter2);
    let left = (now > stay2) & (was <= stay2);
    if let Some(at) = found.get_mut(k) {
        *at = (observer, subject | (u32::from(entered) << 31));
    }
    k + usize::from(entered | left)
}

/// `a² + b²` for offsets below `2^31`.
#[inline(always)]
fn square(a: i64, b: i64) -> u64 {
    (a.wrapping_mul(a) as u64).wrapping_add(b.wrapping_mul(b) as u64)
}

/// Writes `old` without `gone` and with `entered` into `out`, all in key
/// order (`gone` a subset of `old`, `entered` disjoint from it); returns
/// the length written (at most `out.len()`).
///
/// A view changes by a few subjects a tick and holds dozens: each entry is
/// compared with the next change's key only (one branch, nearly always
/// taken) and copied while below it.
#[inline(always)]
pub(crate) fn merge(
    old: &[u32],
    gone: &[u32],
    entered: &[u32],
    out: &mut [u32],
    key: impl Fn(u32) -> u64,
) -> usize {
    let mut w = 0;
    let mut put = |s: u32| {
        if let Some(at) = out.get_mut(w) {
            *at = s;
            w += 1;
        }
    };
    // The key of the next change of each kind; none left is the greatest.
    // A subject may have that key too (the id u64::MAX), so a match counts
    // only while a Leave is left.
    let key_of = |s: Option<&u32>| s.map_or(u64::MAX, |&s| key(s));
    let (mut g, mut e) = (0, 0);
    let (mut next_gone, mut next_in) = (key_of(gone.first()), key_of(entered.first()));
    let mut next = next_gone.min(next_in);
    for &s in old {
        let k = key(s);
        if k < next {
            put(s);
            continue;
        }
        while next_in < k {
            if let Some(&n) = entered.get(e) {
                put(n);
            }
            e += 1;
            next_in = key_of(entered.get(e));
        }
        if next_gone == k && g < gone.len() {
            g += 1;
            next_gone = key_of(gone.get(g));
        } else {
            put(s);
        }
        next = next_gone.min(next_in);
    }
    for &n in entered.get(e..).unwrap_or(&[]) {
        put(n);
    }
    debug_assert_eq!(g, gone.len(), "a Leave not in the view");
    w
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::merge;

    /// The merge against sets: every split of a view into kept and gone,
    /// with subjects entering before, between and after them.
    #[test]
    fn merge_matches_set_arithmetic() {
        let mut seed = 0x9e37_79b9_u32;
        let mut next = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed % m
        };
        for _ in 0..2000 {
            let (mut old, mut gone, mut entered) = (vec![], vec![], vec![]);
            for s in 0..next(60) {
                match next(4) {
                    0 => {}
                    1 => entered.push(s),
                    2 => {
                        old.push(s);
                        gone.push(s);
                    }
                    _ => old.push(s),
                }
            }
            let mut want: Vec<u32> = old.iter().filter(|s| !gone.contains(s)).copied().collect();
            want.extend(&entered);
            want.sort_unstable();
            // Keys reversed: the merge follows the key, not the slot.
            let by_slot: fn(u32) -> u64 = u64::from;
            let reversed: fn(u32) -> u64 = |s| u64::from(u32::MAX - s);
            let rev = |v: &[u32]| v.iter().rev().copied().collect::<Vec<_>>();
            for (o, g, e, key) in [
                (old.clone(), gone.clone(), entered.clone(), by_slot),
                (rev(&old), rev(&gone), rev(&entered), reversed),
            ] {
                let mut out = vec![0; 64];
                let n = merge(&o, &g, &e, &mut out, key);
                let mut got = out[..n].to_vec();
                assert!(got.windows(2).all(|w| key(w[0]) < key(w[1])));
                got.sort_unstable();
                assert_eq!(got, want);
                // Short of room, it writes what fits and never more.
                let mut short = vec![0; want.len() / 2];
                assert_eq!(merge(&o, &g, &e, &mut short, key), short.len());
            }
        }
    }
    #[test]
    fn a_subject_keyed_u64_max_is_merged_like_any_other() {
        let key = |s: u32| if s == 9 { u64::MAX } else { u64::from(s) };
        let mut out = vec![0u32; 4];
        assert_eq!(merge(&[1, 9], &[], &[], &mut out, key), 2);
        assert_eq!(out[..2], [1, 9]);
        assert_eq!(merge(&[1, 9], &[9], &[2], &mut out, key), 2);
        assert_eq!(out[..2], [1, 2]);
        assert_eq!(merge(&[1], &[], &[9], &mut out, key), 2);
        assert_eq!(out[..2], [1, 9]);
    }
}
