//! Culled views updated from their margins instead of ranked again.
//!
//! A full view may be culled to `max_view`: then who is kept depends on
//! everyone in range, and without more to go on any move near it means
//! ranking its crowd again. A crowd at rest (a town square) is where that
//! hurts: a few steps a tick anywhere in it re-rank every view in it. A
//! view ranked in a calm tick therefore keeps a margin (see `margin.rs`):
//! the candidates just inside and just outside its cut-off. A moved subject
//! that stays below the margin only needs its Update; one that stays above
//! it changes nothing; any other goes through the margin, which says who is
//! kept afterwards. The observer itself moving, a despawn near it, or a
//! margin that runs out still rebuild the view, which sets a new margin.

use super::incremental::{col_row, push_within, PairScene, Place, Subject};
use super::World;
use crate::command::EntityId;
use crate::config::Visibility;
use crate::coverage::Path;
use crate::event::EventSink;
use crate::margin::{Key, Placed, Region, SIDE};
use crate::plan::Pairing;
use crate::rule::{self, Zone};
use crate::scan::Reach;
use crate::slot_table::Watcher;
use crate::subject_pairs::{unpack, PairKind};

impl World {
    /// After `view` was rebuilt: keeps a margin if its crowd was `ranked`
    /// and culled and ticks are calm, else drops any it had.
    pub(super) fn keep_margin(&mut self, view: u32, reach: &Reach, ranked: bool) {
        // In calm ticks only: where everything moves, every view is rebuilt
        // anyway.
        let keep = ranked && self.plan.pairing != Pairing::RebuildAll;
        if !keep && !self.margins.any() {
            // Nothing to drop, and none to keep: the usual busy tick.
            return;
        }
        self.margins.clear(view);
        if keep {
            self.set_margin(view, reach);
        }
        self.sync_margin(reach.slot, view);
    }

    /// Sets the margin of the crowd just ranked for `view`, if it filled
    /// the view (see `margin.rs`).
    fn set_margin(&mut self, view: u32, reach: &Reach) {
        let max_view = self.config.max_view as usize;
        if max_view == 0 || self.ranked.len() < max_view {
            return;
        }
        let side = SIDE.min(max_view);
        let core = max_view - side;
        let ids = &self.slots.ids;
        let places = (core, max_view + SIDE);
        let id_of = |s: u32| ids.id(s);
        let mut hi = self
            .ranked
            .places(reach.near, places, id_of, &mut self.margin_keys);
        // In radius mode a margin holds nothing beyond the enter distance,
        // so hysteresis never decides who is in it.
        if let Some((enter2, _)) = reach.radius {
            hi = hi.min(Key {
                dist2: u64::try_from(enter2).unwrap_or(u64::MAX),
                id: EntityId::MAX,
            });
        }
        let listed = self.margin_keys.partition_point(|&(k, _)| k <= hi);
        let listed = &self.margin_keys[..listed];
        self.margins.set(view, core as u32, listed, side, hi);
        self.hit(Path::MarginKept);
    }

    /// Copies `view`'s margin span (or that it has none) into its
    /// observer's pairing record.
    pub(super) fn sync_margin(&mut self, slot: u32, view: u32) {
        let span = self.margins.bounds(view).map(|b| b.dist2_span());
        let stay2 = self.slots.sights[slot as usize].stay2();
        if let Some(w) = self.slots.watchers.get_mut(slot as usize) {
            w.set_margin(span, stay2);
        }
    }

    /// The keys a paired subject had at the end of last tick and has now.
    fn culled_keys(&self, w: &Watcher, slot: u32, id: EntityId) -> (Option<Key>, Option<Key>) {
        let e = &self.slots.entities[slot as usize];
        let o_col_row = self.col_row(w);
        let visibility = self.config.visibility;
        let at = |p| culled_key(visibility, w, o_col_row, e.layers, id, self.place_of(p)?);
        let fresh = self.slots.born[slot as usize] == self.tick + 1;
        let before = if fresh { None } else { at(e.prev.pos) };
        (before, at(e.cur.pos))
    }

    /// Applies a culled view's pairs through its margin and emits their
    /// events in contract order; ranks the crowd again where the margin
    /// cannot tell. Returns the event count.
    pub(super) fn update_culled_view<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> u64 {
        let view = self.slots.entities[slot as usize].view;
        let w = self.slots.watchers[slot as usize];
        if !self.margins.begin(view) {
            self.hit(Path::MarginRanOut);
            return self.rebuild_view(slot, sink);
        }
        self.group.clear();
        for k in 0..self.pairs.of(slot).len() {
            let (s, kind) = unpack(self.pairs.of(slot)[k]);
            let id = self.slots.ids.id(s);
            let shifted = match kind {
                PairKind::Update => Some((true, Placed::Kept)),
                PairKind::Culled => {
                    let (old, new) = self.culled_keys(&w, s, id);
                    self.margins.shift(s, old, new)
                }
                _ => None,
            };
            let (was, now) = match shifted {
                Some((_, Placed::Margin)) => continue,
                Some((was, placed)) => (was, placed == Placed::Kept),
                None => {
                    self.hit(Path::MarginRanOut);
                    self.margins.clear(view);
                    return self.rebuild_view(slot, sink);
                }
            };
            let kind = PairKind::of_change(was, now, self.due.get(s));
            if kind.is_some_and(|kind| !push_within(&mut self.group, (kind, id, s))) {
                self.margins.clear(view);
                return self.rebuild_view(slot, sink);
            }
        }
        if !self.margins.settle(self.config.max_view as usize) {
            self.hit(Path::MarginRanOut);
            self.margins.clear(view);
            return self.rebuild_view(slot, sink);
        }
        let (ids, due, group) = (&self.slots.ids, &self.due, &mut self.group);
        let mut fits = true;
        for (s, was, now, moved) in self.margins.entries() {
            if let Some(kind) = PairKind::of_change(was, now, moved && due.get(s)) {
                fits &= push_within(group, (kind, ids.id(s), s));
            }
        }
        if !fits {
            self.margins.clear(view);
            return self.rebuild_view(slot, sink);
        }
        self.margins.commit(view);
        self.sync_margin(slot, view);
        self.apply_group(slot, sink)
    }
}

impl PairScene<'_> {
    /// The pair a subject makes with observer `w`, whose culled view has a
    /// margin: an Update where it stays kept below the margin, nothing
    /// where it stays beyond it, else one for the margin to settle.
    pub(super) fn culled_kind(&self, w: &Watcher, subject: &Subject) -> Option<PairKind> {
        let visibility = self.config.visibility;
        let o_col_row = col_row(visibility, self.grid, w);
        let key = |at| culled_key(visibility, w, o_col_row, subject.layers, subject.id, at);
        let region = |at| self.region(w, key(at));
        let now = region(subject.now);
        let was = match subject.moved {
            true => subject.before.map_or(Region::Beyond, region),
            false => now,
        };
        match (was, now) {
            (Region::Core, Region::Core) => subject.due.then_some(PairKind::Update),
            (Region::Beyond, Region::Beyond) => None,
            _ => Some(PairKind::Culled),
        }
    }

    /// Where `key` falls against `w`'s margin, by its span alone unless
    /// the `dist²` ties one of its ends.
    fn region(&self, w: &Watcher, key: Option<Key>) -> Region {
        let (lo, hi) = w.margin_span();
        match key {
            None => Region::Beyond,
            Some(k) if k.dist2 < lo => Region::Core,
            Some(k) if k.dist2 > hi => Region::Beyond,
            Some(k) if k.dist2 != lo && k.dist2 != hi => Region::Margin,
            // A margin gone from under its span: let the update rank again.
            k => self
                .margins
                .bounds(w.view())
                .map_or(Region::Margin, |b| b.region(k)),
        }
    }
}

/// A subject's key in the view of observer `w` from cell and raw
/// position `at`, or `None` where it is no candidate or beyond any
/// margin. Hysteresis plays no part: margins end at the enter distance.
fn culled_key(
    visibility: Visibility,
    w: &Watcher,
    o_col_row: (u32, u32),
    layers: u32,
    id: EntityId,
    at: Place,
) -> Option<Key> {
    if !rule::interested(w.interest, layers) {
        return None;
    }
    let dist2 = rule::dist2(at.x, at.y, w.x, w.y);
    // Kept only inside the enter distance: a margin ends there.
    let seen = match visibility {
        Visibility::Grid => rule::grid_zone(o_col_row, at.col_row) == Zone::In,
        Visibility::Radius => rule::radius_zone(dist2, w.enter2, w.enter2) == Zone::In,
    };
    // Too far for a key is beyond any margin.
    let dist2 = u64::try_from(dist2).ok().filter(|_| seen)?;
    Some(Key { dist2, id })
}
