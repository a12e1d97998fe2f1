//! Per-observer view sets: the subjects each observer saw at the end of the last tick.
//!
//! A view is a run of subject slots, kept in ascending order of subject id
//! (the order its events go out in). The views' room
//! ([`Config::visible_room`](crate::Config::visible_room): `max_observers ×
//! max_view`, or `max_visible` where that is less) is reserved once, at
//! construction, so the store never needs more memory whatever the views
//! hold. Where `max_visible` bounds them, [`Views::room`] says how much a
//! view may hold once every other view is counted, which is what the tick
//! culls it to.
//!
//! The store is one *ring* of the room and four views more, and an
//! *overflow* of an eighth of the room:
//!
//! - Views in the ring lie in ascending order of their observers' ids
//!   (each view's key), one after another, around the ring.
//! - When every observer is rebuilt in one tick (a *pass*, which goes in
//!   that order), each new view is written right after the previous one,
//!   starting past the last view of the ring: ahead of the writing lie
//!   the old views not yet read, so the pass reads them as one stream and
//!   overwrites each only once it has been read. The views a pass writes
//!   never pass the room, so the four views' slack always leaves room for
//!   the next one; where views that shrank or left since the last pass
//!   leave holes that eat into it, the unread views are first slid up
//!   against the end, once a pass.
//! - Outside a pass a view is rewritten in place when it fits its run,
//!   and moved to the overflow when it grew. When the overflow is full,
//!   every view is packed back into the ring in key order, the left-over
//!   room shared out as room to grow in place, so that packing stays rare.
//!
//! A world stepped with threads keeps a second ring (see
//! [`Views::reserve_back`]): its passes write into that one, which then
//! becomes the ring, so that tasks can write their views while others
//! still read old ones.

use alloc::vec;
use alloc::vec::Vec;

use crate::permutation::Permutation;

/// The overflow is this share of the room. Views that grow between passes
/// go there until it is full, and then every view is packed back into the
/// ring: a smaller share packs more often, a larger one costs its share of
/// 4 bytes an entry of the room whether views grow or not. A sixteenth
/// saved 24 bytes an entity at uniform-10k radius and cost churn-10k
/// grid's full tick 12% (its new observers' views grow outside passes).
const OVERFLOW_SHARE: u32 = 8;

/// The ring's slack beyond the room, in views of `max_view`: a view in
/// the writing, a run skipped at the ring's end on each side of it, and
/// one to spare.
const SLACK_VIEWS: u32 = 4;

pub(crate) struct Views {
    max_view: u32,
    /// Entries all views may hold together.
    room: u32,
    /// Entries in a ring: the room and [`SLACK_VIEWS`] views.
    ring: u32,
    /// Entries in the overflow, which the store starts with.
    overflow: u32,
    /// The overflow, the ring, and with threads a second ring.
    store: Vec<u32>,
    /// Start of the ring views live in.
    front: u32,
    /// Just past the last view of the ring: where a pass starts writing.
    tail: u32,
    /// End of the used part of the overflow.
    spilled: u32,
    pass: Option<Pass>,
    /// Passes begun, to tell views written in this one.
    passes: u32,
    /// A view rewritten outside a pass, before it goes into place.
    out: Vec<u32>,
    start: Vec<u32>,
    len: Vec<u32>,
    cap: Vec<u32>,
    /// Each view's observer id: the order of views in the ring and of passes.
    key: Vec<u64>,
    /// The pass each view was last written in.
    written_in: Vec<u32>,
    /// The views in the ring, in ring order; some entries may be stale
    /// (a view since moved to the overflow, released or emptied).
    order: Vec<u32>,
    /// The next pass's `order`, listed as it writes; scratch otherwise.
    next: Vec<u32>,
    free: Vec<u32>,
    /// Views (free ones as empty) holding `max_view` entries.
    full: u32,
    /// Entries all views hold together.
    held: u32,
    /// Whether the store is smaller than `max_view` for every view.
    bounded: bool,
    /// How often each rare path ran since the world last took the
    /// counts (`coverage.rs`), so tests can show they reach it.
    #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
    seen: Seen,
}

/// Counts of the rare paths: packs, slides of unread views, wraps.
#[cfg(any(test, debug_assertions, feature = "path-coverage"))]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    pub(crate) packs: u64,
    pub(crate) compactions: u64,
    pub(crate) wraps: u64,
}

/// A pass under way.
#[derive(Clone, Copy)]
struct Pass {
    /// Where the next view goes.
    cursor: u32,
    /// Entries passed over since the pass began, the end of the ring
    /// skipped included (in the ring only).
    written: u32,
    /// Entries of `order` before this are read or stale.
    read: u32,
    /// Free entries known to lie ahead of the cursor (the first view not
    /// yet read may lie farther): while this holds a view, the pass need
    /// not look.
    known_free: u32,
    /// Whether the pass writes into the second ring.
    into_back: bool,
    /// Whether the unread views were slid up already.
    compacted: bool,
}

/// How far `at` lies ahead of `from` around a ring of `ring` entries
/// (both in the ring, or `from` at its end).
#[inline]
fn around(at: u32, from: u32, ring: u32) -> u32 {
    match at >= from {
        true => at - from,
        false => at + ring - from,
    }
}

/// The old views during a split pass (`world/split.rs`), which writes the
/// new ones into the second ring: the overflow and the ring they live in.
pub(crate) struct OldViews<'a> {
    low: &'a [u32],
    high: &'a [u32],
    high_start: usize,
}

impl OldViews<'_> {
    /// The entries at `start..start + len` of the store.
    #[inline]
    pub(crate) fn get(&self, start: usize, len: usize) -> &[u32] {
        match start.checked_sub(self.high_start) {
            Some(at) => self.high.get(at..at + len),
            None => self.low.get(start..start + len),
        }
        .unwrap_or(&[])
    }
}

impl Views {
    /// Views for `max_observers` observers of up to `max_view` entries
    /// each, at most `room` entries in all.
    pub(crate) fn new(max_observers: u32, max_view: u32, room: u32) -> Self {
        // Config validation bounds the room by 2^27.
        let room = max_observers.saturating_mul(max_view).min(room);
        let ring = room.saturating_add(SLACK_VIEWS.saturating_mul(max_view));
        let overflow = room / OVERFLOW_SHARE;
        let observers = max_observers as usize;
        Views {
            max_view,
            room,
            ring,
            overflow,
            store: vec![0; overflow as usize + ring as usize],
            front: overflow,
            tail: overflow,
            spilled: 0,
            pass: None,
            passes: 0,
            out: vec![0; max_view as usize],
            start: vec![0; observers],
            len: vec![0; observers],
            cap: vec![0; observers],
            key: vec![0; observers],
            written_in: vec![0; observers],
            order: Vec::with_capacity(observers),
            next: Vec::with_capacity(observers),
            // Popped from the back: hand out low slots first.
            free: (0..max_observers).rev().collect(),
            full: if max_view == 0 { max_observers } else { 0 },
            held: 0,
            bounded: (room as usize) < observers * max_view as usize,
            #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
            seen: Seen::default(),
        }
    }

    /// Adds the second ring that passes split into tasks write into.
    /// Allocates; does nothing when there is one.
    pub(crate) fn reserve_back(&mut self) {
        let both = self.overflow as usize + 2 * self.ring as usize;
        if self.store.len() < both {
            self.store.reserve_exact(both - self.store.len());
            self.store.resize(both, 0);
        }
    }

    fn has_back(&self) -> bool {
        self.store.len() >= self.overflow as usize + 2 * self.ring as usize
    }

    /// Start of the ring views do not live in (with a second ring).
    fn back(&self) -> u32 {
        match self.front == self.overflow {
            true => self.overflow + self.ring,
            false => self.overflow,
        }
    }

    /// The most entries view `v` may hold with every other view as it
    /// is: `max_view`, or less where the views together would pass their
    /// room.
    #[inline]
    pub(crate) fn room(&self, v: u32) -> u32 {
        let others = self.held - self.len[v as usize];
        self.max_view.min(self.room.saturating_sub(others))
    }

    /// The most entries one view holds.
    pub(crate) fn max_view(&self) -> u32 {
        self.max_view
    }

    /// Whether the views' room is less than `max_view` for every view,
    /// so that [`Views::room`] can be below `max_view`.
    #[inline]
    pub(crate) fn bounded(&self) -> bool {
        self.bounded
    }

    /// Entries all views hold together.
    pub(crate) fn held(&self) -> u32 {
        self.held
    }

    /// Room for every entry of the views together.
    pub(crate) fn capacity(&self) -> u32 {
        self.room
    }

    /// Reserves an empty view for the observer `key`, or `None` when every
    /// observer slot is taken. Passes must visit views in ascending key.
    pub(crate) fn alloc(&mut self, key: u64) -> Option<u32> {
        let v = self.free.pop()?;
        self.set_len(v, 0);
        self.cap[v as usize] = 0;
        self.key[v as usize] = key;
        Some(v)
    }

    pub(crate) fn release(&mut self, v: u32) {
        self.set_len(v, 0);
        self.cap[v as usize] = 0;
        self.free.push(v);
    }

    /// Subject slots, in ascending order of subject id.
    #[inline]
    pub(crate) fn slots(&self, v: u32) -> &[u32] {
        let start = self.start[v as usize] as usize;
        &self.store[start..start + self.len[v as usize] as usize]
    }

    /// Starts a pass: until [`Views::end_pass`], every live view must be
    /// rewritten exactly once, in ascending key.
    pub(crate) fn begin_pass(&mut self) {
        let into_back = self.has_back();
        self.passes = self.passes.wrapping_add(1);
        self.next.clear();
        self.pass = Some(Pass {
            cursor: if into_back { self.back() } else { self.tail },
            written: 0,
            read: 0,
            known_free: 0,
            into_back,
            compacted: false,
        });
    }

    /// Ends a pass: the views written during it are the ring, in order,
    /// and the overflow is empty.
    pub(crate) fn end_pass(&mut self) {
        let Some(pass) = self.pass.take() else {
            return;
        };
        if pass.into_back {
            self.front = self.back();
        }
        self.tail = pass.cursor;
        self.spilled = 0;
        core::mem::swap(&mut self.order, &mut self.next);
        debug_assert!(
            (0..self.len.len()).all(|v| self.len[v] == 0 || self.written_in[v] == self.passes),
            "a pass left a view unwritten"
        );
    }

    /// Rewrites a view: `write` gets its old entries and room for
    /// `max_view` new ones, writes the new view (ascending by subject id)
    /// and returns its length.
    pub(crate) fn rewrite(&mut self, v: u32, write: impl FnOnce(&[u32], &mut [u32]) -> usize) {
        let vi = v as usize;
        let len = self.len[vi] as usize;
        let old = self.start[vi] as usize;
        if self.pass.is_none() {
            // Outside a pass the new view goes through `out`, then into place.
            let src = if len == 0 {
                &[][..]
            } else {
                &self.store[old..old + len]
            };
            let n = write(src, &mut self.out).min(self.max_view as usize);
            let out = core::mem::take(&mut self.out);
            self.set(v, &out[..n]);
            self.out = out;
            return;
        }
        let (at, room) = self.window(v);
        let (at, room) = (at as usize, room as usize);
        // The window may have slid the old run up.
        let old = self.start[vi] as usize;
        // The old run and the new one never meet (see `window`).
        let n = if len == 0 {
            write(&[], &mut self.store[at..at + room])
        } else if old + len <= at {
            let (low, high) = self.store.split_at_mut(at);
            write(&low[old..old + len], &mut high[..room])
        } else {
            let (low, high) = self.store.split_at_mut(old);
            write(&high[..len], &mut low[at..at + room])
        };
        let n = n.min(room) as u32;
        self.written(v, at as u32, n);
        if let Some(pass) = self.pass.as_mut() {
            pass.cursor = at as u32 + n;
            pass.written += n;
            pass.known_free = pass.known_free.saturating_sub(n);
        }
    }

    /// Records view `v` written at `at`, `n` entries, by the pass.
    fn written(&mut self, v: u32, at: u32, n: u32) {
        let vi = v as usize;
        self.start[vi] = at;
        self.set_len(v, n);
        self.cap[vi] = n;
        self.written_in[vi] = self.passes;
        if n > 0 {
            self.next.push(v);
        }
    }

    /// Where the pass writes view `v`, and how many entries it has room
    /// for there: `max_view`, none of them over an old view not yet read.
    #[inline]
    fn window(&mut self, v: u32) -> (u32, u32) {
        let max = self.max_view;
        let (back, base, end) = (self.back(), self.front, self.front + self.ring);
        let Some(pass) = self.pass.as_mut() else {
            return (0, 0);
        };
        if pass.into_back {
            return (pass.cursor, max.min(back + self.ring - pass.cursor));
        }
        // Writing a view takes no more than it frees: the entries known
        // free only shrink by what is written (and by a run skipped at the
        // ring's end), so while they hold a view there is no need to look.
        let wrap = pass.cursor + max > end;
        let skip = if wrap { end - pass.cursor } else { 0 };
        if pass.known_free >= skip + max {
            if wrap {
                #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
                {
                    self.seen.wraps += 1;
                }
                pass.cursor = base;
                pass.written += skip;
                pass.known_free -= skip;
            }
            let at = pass.cursor;
            #[cfg(debug_assertions)]
            {
                let in_order = self.in_order(v);
                debug_assert!(in_order, "a pass must visit views in ring order");
            }
            return (at, max);
        }
        self.look_ahead(v)
    }

    /// Whether a pass may rewrite `v` now: it is not in the ring, or it is
    /// the first view there the pass has not read (the pass's place in
    /// `order` moves up to that one).
    fn in_order(&mut self, v: u32) -> bool {
        let Some(mut pass) = self.pass else {
            return true;
        };
        let first = self.first_unread(&mut pass);
        self.pass = Some(pass);
        !self.in_ring(v) || self.written_in[v as usize] == self.passes || first == Some(v)
    }

    /// [`Views::window`] where the entries known free may not hold a view:
    /// finds the first view not yet read, and slides the unread views up
    /// where even that leaves too little.
    fn look_ahead(&mut self, v: u32) -> (u32, u32) {
        let Some(mut pass) = self.pass else {
            return (0, 0);
        };
        let max = self.max_view;
        let (base, end) = (self.front, self.front + self.ring);
        loop {
            debug_assert!(self.in_order(v), "a pass must visit views in ring order");
            let ahead = self.first_unread(&mut pass);
            // Free entries ahead of the cursor: up to the first view not yet
            // read, or, with none left, up to where the pass began.
            let free = match ahead {
                Some(u) => around(self.start[u as usize], pass.cursor, self.ring),
                None => self.ring - pass.written,
            };
            // A view never runs over the ring's end: wrap to its start,
            // passing over the rest.
            let wrap = pass.cursor + max > end;
            let skip = if wrap { end - pass.cursor } else { 0 };
            if free >= skip + max || pass.compacted {
                // The room bounds what a pass writes, so there is always
                // room once the unread views are slid up; were there not,
                // stay within the free entries all the same.
                debug_assert!(free >= skip + max, "a pass ran out of ring");
                if wrap {
                    #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
                    {
                        self.seen.wraps += 1;
                    }
                    pass.cursor = base;
                    pass.written += skip;
                }
                pass.known_free = free.saturating_sub(skip);
                self.pass = Some(pass);
                return (pass.cursor, max.min(pass.known_free));
            }
            self.compact_unread(&mut pass);
        }
    }

    /// The first view of `order` from `pass.read` on still in the ring and
    /// not yet written by this pass; moves `pass.read` up to it.
    fn first_unread(&self, pass: &mut Pass) -> Option<u32> {
        while let Some(&u) = self.order.get(pass.read as usize) {
            if self.in_ring(u) && self.written_in[u as usize] != self.passes {
                return Some(u);
            }
            pass.read += 1;
        }
        None
    }

    /// Whether view `v` holds entries in the ring views live in.
    #[inline]
    fn in_ring(&self, v: u32) -> bool {
        let (s, n) = (self.start[v as usize], self.len[v as usize]);
        n > 0 && s >= self.front && s < self.front + self.ring
    }

    /// Slides the views a pass has not read yet up against where it began,
    /// so that the holes between them lie ahead of the cursor.
    fn compact_unread(&mut self, pass: &mut Pass) {
        pass.compacted = true;
        #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
        {
            self.seen.compactions += 1;
        }
        let (base, ring, c) = (self.front, self.ring, pass.cursor);
        // Positions counted from the cursor, around the ring.
        let from_cursor = |at: u32| around(at, c, ring);
        let ring_start = from_cursor(base);
        let mut end = ring - pass.written;
        for k in (pass.read as usize..self.order.len()).rev() {
            let u = self.order[k];
            if !self.in_ring(u) || self.written_in[u as usize] == self.passes {
                continue;
            }
            let (s, n) = (self.start[u as usize], self.len[u as usize]);
            let mut to = end - n;
            // A view never runs over the ring's end.
            if to < ring_start && ring_start < end {
                to = ring_start - n;
            }
            let at = base + (c - base + to) % ring;
            if at != s {
                self.store
                    .copy_within(s as usize..(s + n) as usize, at as usize);
                self.start[u as usize] = at;
            }
            end = to;
        }
    }

    /// The old views and the second ring from `cursor` on (the pass's,
    /// [`Views::back_cursor`]), for a pass split into tasks: `store` is
    /// this store, taken out with [`Views::take_store`].
    pub(crate) fn split_store<'a>(
        &self,
        store: &'a mut [u32],
        cursor: usize,
    ) -> (OldViews<'a>, &'a mut [u32]) {
        let (overflow, ring) = (self.overflow as usize, self.ring as usize);
        let (first, second) = store.split_at_mut(overflow + ring);
        let (old, back, back_start) = if self.front == self.overflow {
            let old = OldViews {
                low: first,
                high: &[],
                high_start: usize::MAX,
            };
            (old, second, overflow + ring)
        } else {
            let (spill, ring0) = first.split_at_mut(overflow);
            let old = OldViews {
                low: spill,
                high: second,
                high_start: overflow + ring,
            };
            (old, ring0, overflow)
        };
        let back = back
            .get_mut(cursor.saturating_sub(back_start)..)
            .unwrap_or(&mut []);
        (old, back)
    }

    /// The whole store, taken out for a split pass (`world/split.rs`):
    /// the views' starts and lengths stay readable, the entries do not
    /// until [`Views::put_store`].
    pub(crate) fn take_store(&mut self) -> Vec<u32> {
        core::mem::take(&mut self.store)
    }

    pub(crate) fn put_store(&mut self, store: Vec<u32>) {
        self.store = store;
    }

    /// Where a view's entries lie in the store: start and length.
    #[inline]
    pub(crate) fn span(&self, v: u32) -> (usize, usize) {
        (
            self.start[v as usize] as usize,
            self.len[v as usize] as usize,
        )
    }

    /// The write cursor of a pass under way into the second ring, which
    /// a pass split into tasks needs.
    pub(crate) fn back_cursor(&self) -> Option<u32> {
        self.pass.filter(|p| p.into_back).map(|p| p.cursor)
    }

    /// Moves the write cursor of the pass under way to `at`.
    pub(crate) fn set_cursor(&mut self, at: u32) {
        if let Some(pass) = self.pass.as_mut() {
            pass.cursor = at;
        }
    }

    /// Records that a split pass wrote view `v`'s `len` new entries at
    /// `start`, as [`Views::rewrite`] would have.
    pub(crate) fn place(&mut self, v: u32, start: u32, len: u32) {
        self.written(v, start, len);
    }

    /// Rewrites a view as it is: in a pass, every live view is rewritten.
    /// Outside a pass, does nothing.
    pub(crate) fn keep(&mut self, v: u32) {
        if self.pass.is_none() {
            return; // Outside a pass a view stays where it is.
        }
        self.rewrite(v, |old, out| {
            // A pass always has room for every view as it was.
            let n = old.len().min(out.len());
            out[..n].copy_from_slice(&old[..n]);
            n
        });
    }

    /// Replaces a view with `slots` (ascending by subject id, at most
    /// `max_view`). Not for use during a pass.
    pub(crate) fn set(&mut self, v: u32, slots: &[u32]) {
        let n = slots.len().min(self.max_view as usize) as u32;
        self.set_len(v, 0);
        let at = if n <= self.cap[v as usize] {
            self.start[v as usize]
        } else {
            self.room_for(v, n)
        };
        self.store[at as usize..(at + n) as usize].copy_from_slice(&slots[..n as usize]);
        self.start[v as usize] = at;
        self.set_len(v, n);
    }

    /// Where a view that grew to `total` entries goes: the overflow, with
    /// an eighth more room to grow in place; or where the overflow is
    /// full, its room in the ring once every view is packed there.
    fn room_for(&mut self, v: u32, total: u32) -> u32 {
        let free = self.overflow - self.spilled;
        if free < total {
            self.pack(v, total);
            return self.start[v as usize];
        }
        let cap = (total + total / 8).min(self.max_view).min(free).max(total);
        let at = self.spilled;
        self.spilled += cap;
        self.start[v as usize] = at;
        self.cap[v as usize] = cap;
        at
    }

    /// Packs every view into the ring in key order, from its start, giving
    /// view `grow` room for `total` entries (its old ones are dropped), and
    /// shares the room left over out as room to grow in place, so that
    /// packing stays rare even when the views nearly fill their room.
    fn pack(&mut self, grow: u32, total: u32) {
        #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
        {
            self.seen.packs += 1;
        }
        let (base, ring) = (self.front as usize, self.ring as usize);
        // Empty views give up their runs.
        for w in 0..self.len.len() {
            if self.len[w] == 0 && w != grow as usize {
                self.cap[w] = 0;
            }
        }
        // The ring's views in ring order, turned so the first starts at
        // the ring's start, then slid down against each other.
        let mut listed = core::mem::take(&mut self.next);
        listed.clear();
        listed.extend(
            self.order
                .iter()
                .copied()
                .filter(|&w| w != grow && self.in_ring(w)),
        );
        if let Some(&first) = listed.first() {
            let shift = self.start[first as usize] as usize - base;
            if shift > 0 {
                self.store[base..base + ring].rotate_left(shift);
                for &w in &listed {
                    let s = &mut self.start[w as usize];
                    *s = (base + (*s as usize - base + ring - shift) % ring) as u32;
                }
            }
        }
        let mut at = base;
        for &w in &listed {
            let (s, n) = (
                self.start[w as usize] as usize,
                self.len[w as usize] as usize,
            );
            self.store.copy_within(s..s + n, at);
            self.start[w as usize] = at as u32;
            at += n;
        }
        // Then the views in the overflow, and `grow`, by key.
        let in_ring = listed.len();
        for w in 0..self.len.len() as u32 {
            let spilled = self.len[w as usize] > 0 && self.start[w as usize] < self.overflow;
            if w == grow || (spilled && !self.in_ring(w)) {
                listed.push(w);
            }
        }
        let key = &self.key;
        listed[in_ring..].sort_unstable_by_key(|&w| key[w as usize]);
        // Merged by key into `order`.
        self.order.clear();
        let (ringed, spilled) = listed.split_at(in_ring);
        let (mut i, mut j) = (0, 0);
        while i < ringed.len() || j < spilled.len() {
            let take_ring = j == spilled.len()
                || (i < ringed.len() && key[ringed[i] as usize] < key[spilled[j] as usize]);
            if take_ring {
                self.order.push(ringed[i]);
                i += 1;
            } else {
                self.order.push(spilled[j]);
                j += 1;
            }
        }
        self.next = listed;
        // Each view's run: what it needs and a share of what is left.
        let need = |views: &Views, w: u32| match w == grow {
            true => total,
            false => views.len[w as usize],
        };
        let needed: u64 = self.order.iter().map(|&w| u64::from(need(self, w))).sum();
        let count = self.order.len().max(1) as u64;
        // share ≤ room / views, so it fits u32.
        let share = ((u64::from(self.room) - needed.min(u64::from(self.room))) / count) as u32;
        let cap = |views: &Views, w: u32| {
            let n = need(views, w);
            n.max(n.saturating_add(share).min(views.max_view))
        };
        let caps: u64 = self.order.iter().map(|&w| u64::from(cap(self, w))).sum();
        debug_assert!(caps <= ring as u64, "the views outgrew their room");
        // From the last view down: each moves up (out of the ring's packed
        // start) or in from the overflow, never over a view not yet moved.
        let mut end = base + (caps as usize).min(ring);
        for k in (0..self.order.len()).rev() {
            let w = self.order[k];
            let cap = cap(self, w);
            let to = end.saturating_sub(cap as usize).max(base);
            if w != grow {
                let (s, len) = (
                    self.start[w as usize] as usize,
                    self.len[w as usize] as usize,
                );
                self.store.copy_within(s..s + len, to);
            }
            self.start[w as usize] = to as u32;
            self.cap[w as usize] = cap;
            end = to;
        }
        self.tail = base as u32 + (caps as u32).min(self.ring);
        self.spilled = 0;
    }

    /// How many views there is room for (`max_observers`).
    pub(crate) fn count(&self) -> u32 {
        // At most MAX_ENTITIES.
        self.start.len() as u32
    }

    /// Gives every entry of every view its slot's new number. Ids do not
    /// change, so each view stays in id order.
    pub(crate) fn renumber_entries(&mut self, r: &Permutation) {
        for (&start, &len) in self.start.iter().zip(&self.len) {
            if len > 0 {
                let (start, len) = (start as usize, len as usize);
                for s in &mut self.store[start..start + len] {
                    *s = r.to(*s);
                }
            }
        }
    }

    /// Moves every view to its new number; the `live` views must be
    /// numbered `0..live`. Outside a pass only.
    pub(crate) fn renumber_views(&mut self, r: &mut Permutation, live: u32) {
        r.permute(&mut self.start);
        r.permute(&mut self.len);
        r.permute(&mut self.cap);
        r.permute(&mut self.key);
        r.permute(&mut self.written_in);
        for v in &mut self.order {
            *v = r.to(*v);
        }
        self.free.clear();
        // Popped from the back: hand out low views first.
        self.free.extend((live..self.len.len() as u32).rev());
    }

    /// How often each rare path ran since the last call.
    #[cfg(any(test, debug_assertions, feature = "path-coverage"))]
    pub(crate) fn take_seen(&mut self) -> Seen {
        core::mem::take(&mut self.seen)
    }

    /// Whether some view holds `max_view` entries (and so may be culled).
    pub(crate) fn any_full(&self) -> bool {
        self.full > 0
    }

    /// Whether view `v` holds `max_view` entries (and so may be culled).
    #[inline(always)]
    pub(crate) fn is_full(&self, v: u32) -> bool {
        self.len
            .get(v as usize)
            .is_some_and(|&n| n >= self.max_view)
    }

    fn set_len(&mut self, v: u32, n: u32) {
        let max = self.max_view;
        let len = &mut self.len[v as usize];
        self.full = self.full + u32::from(n >= max) - u32::from(*len >= max);
        self.held = self.held - *len + n;
        *len = n;
    }
}

#[cfg(test)]
mod tests {
    use super::Views;
    use alloc::vec;
    use alloc::vec::Vec;

    fn ids(views: &Views, v: u32) -> Vec<u32> {
        views.slots(v).to_vec()
    }

    /// Keeps the flagged old entries and adds `entered`; slot order is id
    /// order here.
    fn rewrite(views: &mut Views, v: u32, keep: &[bool], entered: &[(u64, u32)]) {
        views.rewrite(v, |old, out| {
            let mut new: Vec<u32> = old
                .iter()
                .zip(keep)
                .filter(|e| *e.1)
                .map(|e| *e.0)
                .collect();
            new.extend(entered.iter().map(|e| e.1));
            new.sort_unstable();
            out[..new.len()].copy_from_slice(&new);
            new.len()
        });
    }

    #[test]
    fn full_views_are_counted_through_set_rewrite_and_release() {
        let mut views = Views::new(2, 2, u32::MAX);
        let (a, b) = (views.alloc(1).unwrap(), views.alloc(2).unwrap());
        assert!(!views.any_full());
        views.set(a, &[1, 2]);
        assert!(views.any_full());
        views.set(b, &[3, 4]);
        rewrite(&mut views, a, &[true, false], &[]);
        assert!(views.any_full(), "b is still full");
        views.begin_pass();
        views.keep(a);
        rewrite(&mut views, b, &[false, false], &[(5, 5)]);
        views.end_pass();
        assert!(!views.any_full());
        rewrite(&mut views, a, &[true], &[(9, 9)]);
        assert!(views.any_full());
        views.release(a);
        assert!(!views.any_full());
        // With no room at all, every view is full from the start.
        assert!(Views::new(1, 0, u32::MAX).any_full());
    }

    #[test]
    fn rewrites_merge_in_place_grow_pack_and_pass() {
        let mut views = Views::new(3, 4, u32::MAX);
        // Keys: c before a before b.
        let (a, b, c) = (
            views.alloc(20).unwrap(),
            views.alloc(30).unwrap(),
            views.alloc(10).unwrap(),
        );
        views.set(a, &[1, 5, 9]);
        views.set(b, &[2]);
        rewrite(&mut views, a, &[true, false, true], &[(30, 3)]);
        assert_eq!(ids(&views, a), [1, 3, 9]);
        // b grows beyond its run, repeatedly, until the overflow is full
        // and every view is packed into the ring.
        for extra in [4, 6, 8] {
            let keep = vec![true; views.slots(b).len()];
            rewrite(&mut views, b, &keep, &[(u64::from(extra) * 10, extra)]);
        }
        assert_eq!(ids(&views, b), [2, 4, 6, 8]);
        assert_eq!(ids(&views, a), [1, 3, 9]);
        views.set(c, &[0, 7]);
        assert_eq!(ids(&views, c), [0, 7]);
        // A pass rewrites all three in key order, around the ring.
        views.begin_pass();
        rewrite(&mut views, c, &[false, true], &[(10, 1), (110, 11)]);
        rewrite(&mut views, a, &[true, true, true], &[(0, 0)]);
        rewrite(&mut views, b, &[false, false, false, false], &[]);
        views.end_pass();
        assert_eq!(ids(&views, c), [1, 7, 11]);
        assert_eq!(ids(&views, a), [0, 1, 3, 9]);
        assert!(ids(&views, b).is_empty());
        views.release(b);
        views.begin_pass();
        rewrite(&mut views, c, &[true; 3], &[]);
        rewrite(&mut views, a, &[true; 4], &[]);
        views.end_pass();
        // b's number comes back empty, for an observer between c and a.
        let d = views.alloc(15).unwrap();
        assert!(views.slots(d).is_empty());
        views.begin_pass();
        rewrite(&mut views, c, &[true; 3], &[]);
        rewrite(&mut views, d, &[], &[(50, 5)]);
        rewrite(&mut views, a, &[true; 4], &[]);
        views.end_pass();
        assert_eq!(ids(&views, d), [5]);
        assert_eq!(ids(&views, a), [0, 1, 3, 9]);
        assert_eq!(ids(&views, c), [1, 7, 11]);
    }

    #[test]
    fn room_counts_every_other_view() {
        // Three views of up to 4, 6 entries in all.
        let mut views = Views::new(3, 4, 6);
        let (a, b, c) = (
            views.alloc(1).unwrap(),
            views.alloc(2).unwrap(),
            views.alloc(3).unwrap(),
        );
        assert_eq!(views.room(a), 4, "max_view bounds an empty store");
        views.set(a, &[1, 2, 3]);
        views.set(b, &[4, 5]);
        assert_eq!(views.held(), 5);
        assert_eq!(views.room(a), 4, "its own entries count as room");
        assert_eq!(views.room(b), 3);
        assert_eq!(views.room(c), 1);
        // A pass sees the views written so far and those not yet written.
        views.begin_pass();
        rewrite(&mut views, a, &[true, false, false], &[]);
        assert_eq!(views.room(c), 3);
        views.keep(b);
        rewrite(&mut views, c, &[], &[(6, 6), (7, 7)]);
        views.end_pass();
        assert_eq!(views.held(), 5);
        assert_eq!(ids(&views, c), [6, 7]);
        views.release(b);
        assert_eq!((views.held(), views.room(a)), (3, 4));
    }

    #[test]
    fn a_pass_slides_unread_views_up_past_the_holes_left_before_it() {
        // Ten views of up to 8, 40 entries in all: a ring of 72.
        let mut views = Views::new(10, 8, 40);
        let v: Vec<u32> = (0..10).map(|k| views.alloc(k).unwrap()).collect();
        let run = |from: u32, n: u32| (from..from + n).collect::<Vec<u32>>();
        let sizes = [1, 1, 1, 1, 1, 8, 8, 8, 8, 3];
        views.begin_pass();
        for (&w, &n) in v.iter().zip(&sizes) {
            views.rewrite(w, |_, out| {
                out[..n as usize].copy_from_slice(&run(100 * w, n));
                n as usize
            });
        }
        views.end_pass();
        // The four large views empty: holes before the last one.
        for &w in &v[5..9] {
            views.set(w, &[]);
        }
        // The first views grow into the room those left.
        views.begin_pass();
        let grown = [8, 8, 8, 8, 5];
        for (k, &w) in v.iter().enumerate() {
            let n = grown.get(k).copied().unwrap_or(views.slots(w).len() as u32);
            let old = views.slots(w).to_vec();
            views.rewrite(w, |was, out| {
                assert_eq!(was, &old[..]);
                out[..n as usize].copy_from_slice(&run(100 * w, n));
                n as usize
            });
        }
        views.end_pass();
        assert_eq!(views.seen.compactions, 1, "{:?}", views.seen);
        for (k, &w) in v.iter().enumerate() {
            let n = grown
                .get(k)
                .copied()
                .unwrap_or_else(|| [0, 0, 0, 0, 3][k - 5]);
            assert_eq!(views.slots(w), &run(100 * w, n)[..], "view {k}");
        }
    }

    /// splitmix64, for the random walks below.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n.max(1)
        }
    }

    /// A new view for `v` of at most `room` entries: some of the old ones
    /// kept, some new ones added (a view's entries are distinct and sorted;
    /// their values are arbitrary here).
    fn next_view(rng: &mut Rng, old: &[u32], room: u32) -> Vec<u32> {
        let mut new: Vec<u32> = old.iter().copied().filter(|_| rng.below(4) > 0).collect();
        let add = rng.below(u64::from(room) / 2 + 2) as u32;
        for _ in 0..add {
            new.push(rng.below(1 << 20) as u32);
        }
        new.sort_unstable();
        new.dedup();
        new.truncate(room as usize);
        new
    }

    /// Every kind of change, at random, against a plain vector per view:
    /// passes (in key order, with and without a second ring), rewrites and
    /// sets outside them (growing into the overflow and packing), releases
    /// and new observers, with the views near their room.
    fn random_walk(seed: u64, back: bool) -> super::Seen {
        let (observers, max_view, room) = (40u32, 8u32, 150u32);
        let mut rng = Rng(seed);
        let mut views = Views::new(observers, max_view, room);
        if back {
            views.reserve_back();
        }
        // Live views: (key, view number); the model by view number.
        let mut live: Vec<(u64, u32)> = Vec::new();
        let mut model: Vec<Vec<u32>> = vec![Vec::new(); observers as usize];
        let mut next_key = 1000u64;
        // A pass right after views shrank: before a pack closes the holes.
        let mut pass_next = false;
        for step in 0..3000 {
            let action = match pass_next {
                true => 2,
                false => rng.below(20),
            };
            pass_next = false;
            match action {
                0 if live.len() < observers as usize => {
                    // Keys below and above the others.
                    let key = if rng.below(2) == 0 {
                        next_key
                    } else {
                        rng.below(1000) * 2 + 1
                    };
                    next_key += 1;
                    if live.iter().all(|&(k, _)| k != key) {
                        let v = views.alloc(key).unwrap();
                        model[v as usize].clear();
                        live.push((key, v));
                    }
                }
                1 if !live.is_empty() => {
                    let (_, v) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    views.release(v);
                    model[v as usize].clear();
                }
                2 => {
                    live.sort_unstable();
                    views.begin_pass();
                    for (k, &(_, v)) in live.iter().enumerate() {
                        let room = views.room(v);
                        let new = match rng.below(3) {
                            0 => model[v as usize].clone(),
                            // Early views take all the room they have.
                            _ if k < live.len() / 2 => {
                                let mut new = next_view(&mut rng, &model[v as usize], room);
                                while new.len() < room as usize {
                                    new.push(new.last().map_or(0, |&s| s + 1));
                                }
                                new
                            }
                            _ => next_view(&mut rng, &model[v as usize], room),
                        };
                        views.rewrite(v, |old, out| {
                            assert_eq!(old, &model[v as usize][..], "step {step}: old view of {v}");
                            out[..new.len()].copy_from_slice(&new);
                            new.len()
                        });
                        model[v as usize] = new;
                    }
                    views.end_pass();
                }
                3 => {
                    // Shrinks the views late in key order, leaving holes in
                    // the ring that the next pass's early views grow into.
                    live.sort_unstable();
                    for &(_, v) in &live[live.len() / 2..] {
                        let keep = model[v as usize].len() / 4;
                        model[v as usize].truncate(keep);
                        views.set(v, &model[v as usize]);
                    }
                    pass_next = rng.below(2) == 0;
                }
                _ if !live.is_empty() => {
                    let (_, v) = live[rng.below(live.len() as u64) as usize];
                    let new = next_view(&mut rng, &model[v as usize], views.room(v));
                    if rng.below(2) == 0 {
                        views.set(v, &new);
                    } else {
                        views.rewrite(v, |old, out| {
                            assert_eq!(old, &model[v as usize][..], "step {step}: old view of {v}");
                            out[..new.len()].copy_from_slice(&new);
                            new.len()
                        });
                    }
                    model[v as usize] = new;
                }
                _ => {}
            }
            let held: usize = live.iter().map(|&(_, v)| model[v as usize].len()).sum();
            assert_eq!(views.held() as usize, held, "step {step}");
            for &(_, v) in &live {
                assert_eq!(
                    views.slots(v),
                    &model[v as usize][..],
                    "step {step}: view {v}"
                );
            }
        }
        views.seen
    }

    #[test]
    fn random_changes_keep_every_view_in_one_ring() {
        let mut seen = super::Seen::default();
        for seed in 0..40 {
            let s = random_walk(seed, false);
            seen.packs += s.packs;
            seen.compactions += s.compactions;
            seen.wraps += s.wraps;
        }
        assert!(
            seen.packs > 0 && seen.compactions > 0 && seen.wraps > 0,
            "{seen:?}"
        );
    }

    #[test]
    fn random_changes_keep_every_view_with_a_second_ring() {
        let packs: u64 = (0..20).map(|seed| random_walk(seed, true).packs).sum();
        assert!(packs > 0);
    }
}
