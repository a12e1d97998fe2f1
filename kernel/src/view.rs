//! Per-observer view sets: the subjects each observer saw at the end of the last tick.
//!
//! A view is a run of subject slots, kept in ascending order of subject id
//! (the order its events go out in). Runs are packed one after another in
//! one of two halves of a single store, both reserved at construction for
//! as many entries as the views may hold together
//! ([`Config::visible_room`](crate::Config::visible_room): `max_observers ×
//! max_view`, or `max_visible` where that is less), so that the store
//! never needs more memory whatever the views hold. Where `max_visible`
//! bounds them, [`Views::room`] says how much a view may hold once every
//! other view is counted, which is what the tick culls it to.
//!
//! When every observer is rebuilt in one tick (a *pass*), each new view is
//! written right after the previous one into the other half, in rebuild
//! order, and the halves swap at the end: the next pass then reads its old
//! views as one sequential stream rather than one scattered block per
//! observer. Outside a pass a view is rewritten in place when it fits its
//! run, moved to the free end of its half when it grew, and when that end
//! is full every view is packed into the other half first.

use alloc::vec;
use alloc::vec::Vec;

use crate::permutation::Permutation;

pub(crate) struct Views {
    max_view: u32,
    /// Both halves, `half` entries each.
    store: Vec<u32>,
    half: u32,
    /// Start of the half views live in (0 or `half`).
    front: u32,
    /// End of the used part of the front half.
    used: u32,
    /// Write cursor in the back half while a pass runs.
    pass: Option<u32>,
    /// A view rewritten outside a pass, before it goes into place.
    out: Vec<u32>,
    start: Vec<u32>,
    len: Vec<u32>,
    cap: Vec<u32>,
    free: Vec<u32>,
    /// Views (free ones as empty) holding `max_view` entries.
    full: u32,
    /// Entries all views hold together.
    held: u32,
    /// Whether the store is smaller than `max_view` for every view.
    bounded: bool,
}

impl Views {
    /// Views for `max_observers` observers of up to `max_view` entries
    /// each, at most `room` entries in all.
    pub(crate) fn new(max_observers: u32, max_view: u32, room: u32) -> Self {
        // Config validation bounds the room by 2^27.
        let half = max_observers.saturating_mul(max_view).min(room);
        Views {
            max_view,
            store: vec![0; 2 * half as usize],
            half,
            front: 0,
            used: 0,
            pass: None,
            out: vec![0; max_view as usize],
            start: vec![0; max_observers as usize],
            len: vec![0; max_observers as usize],
            cap: vec![0; max_observers as usize],
            // Popped from the back: hand out low slots first.
            free: (0..max_observers).rev().collect(),
            full: if max_view == 0 { max_observers } else { 0 },
            held: 0,
            bounded: (half as usize) < max_observers as usize * max_view as usize,
        }
    }

    /// The most entries view `v` may hold with every other view as it
    /// is: `max_view`, or less where the views together would pass their
    /// room.
    #[inline]
    pub(crate) fn room(&self, v: u32) -> u32 {
        let others = self.held - self.len[v as usize];
        self.max_view.min(self.half.saturating_sub(others))
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
        self.half
    }

    /// Reserves an empty view, or `None` when every observer slot is taken.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        let v = self.free.pop()?;
        self.set_len(v, 0);
        self.cap[v as usize] = 0;
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
    /// rewritten exactly once.
    pub(crate) fn begin_pass(&mut self) {
        self.pass = Some(self.back());
    }

    /// Ends a pass: the views written during it become the front half.
    pub(crate) fn end_pass(&mut self) {
        if let Some(cursor) = self.pass.take() {
            self.front = self.back();
            self.used = cursor;
        }
    }

    fn back(&self) -> u32 {
        self.half - self.front
    }

    /// Rewrites a view: `write` gets its old entries and room for
    /// `max_view` new ones, writes the new view (ascending by subject id)
    /// and returns its length.
    pub(crate) fn rewrite(&mut self, v: u32, write: impl FnOnce(&[u32], &mut [u32]) -> usize) {
        let vi = v as usize;
        let len = self.len[vi] as usize;
        // An empty view's start may name the other half: it was never moved.
        let old = if len == 0 { self.front } else { self.start[vi] } as usize;
        let max = self.max_view as usize;
        let Some(cursor) = self.pass else {
            // Outside a pass the new view goes through `out`, then into place.
            let n = write(&self.store[old..old + len], &mut self.out).min(max);
            let out = core::mem::take(&mut self.out);
            self.set(v, &out[..n]);
            self.out = out;
            return;
        };
        // In a pass the old run is in the front half and the new one goes
        // to the cursor in the back half. Every view of a pass fits the
        // back half, so its end bounds the room without cutting a view short.
        let (h, at) = (self.half as usize, cursor as usize);
        let (low, high) = self.store.split_at_mut(h);
        let (src, dst) = if self.front == 0 {
            (
                &low[old..old + len],
                &mut high[at - h..(at - h + max).min(h)],
            )
        } else {
            (
                &high[old - h..old - h + len],
                &mut low[at..(at + max).min(h)],
            )
        };
        let n = write(src, dst).min(dst.len()) as u32;
        self.pass = Some(cursor + n);
        self.start[vi] = cursor;
        self.set_len(v, n);
        self.cap[vi] = n;
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

    /// The start of the front half and the length of a half.
    pub(crate) fn halves(&self) -> (usize, usize) {
        (self.front as usize, self.half as usize)
    }

    /// The write cursor of the pass under way.
    pub(crate) fn cursor(&self) -> Option<u32> {
        self.pass
    }

    /// Moves the write cursor of the pass under way to `at`.
    pub(crate) fn set_cursor(&mut self, at: u32) {
        if self.pass.is_some() {
            self.pass = Some(at);
        }
    }

    /// Records that a split pass wrote view `v`'s `len` new entries at
    /// `start`, as [`Views::rewrite`] would have.
    pub(crate) fn place(&mut self, v: u32, start: u32, len: u32) {
        self.start[v as usize] = start;
        self.set_len(v, len);
        self.cap[v as usize] = len;
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

    /// Where a view that grew to `total` entries goes: the free end of the
    /// front half, after packing every view into the other half if the
    /// end is full.
    fn room_for(&mut self, v: u32, total: u32) -> u32 {
        if self.half - (self.used - self.front) < total {
            self.pack(v, total);
        }
        if self.cap[v as usize] >= total {
            return self.start[v as usize];
        }
        // The old run stays behind: callers have read it already.
        let at = self.used;
        self.start[v as usize] = at;
        self.cap[v as usize] = total;
        self.used += total;
        at
    }

    /// Packs every view into the back half, giving view `grow` room for
    /// `total` entries, and makes that half the front. The space left over
    /// is shared out as room to grow in place, so that packing stays rare
    /// even when the views nearly fill their half.
    fn pack(&mut self, grow: u32, total: u32) {
        let needs = |v: usize, len: u32| {
            if v == grow as usize {
                total.max(len)
            } else {
                len
            }
        };
        // Every view fits its half, so the needs do too; sums fit u64.
        let needed: u64 = (0..self.len.len())
            .map(|v| u64::from(needs(v, self.len[v])))
            .sum();
        let views = self.len.len().max(1) as u64;
        // share ≤ half / views, so it fits u32.
        let share = ((u64::from(self.half) - needed.min(u64::from(self.half))) / views) as u32;
        let mut cursor = self.back();
        for v in 0..self.len.len() {
            let (start, len) = (self.start[v] as usize, self.len[v]);
            let need = needs(v, len);
            let cap = need.max(need.saturating_add(share).min(self.max_view));
            self.store
                .copy_within(start..start + len as usize, cursor as usize);
            self.start[v] = cursor;
            self.cap[v] = cap;
            cursor += cap;
        }
        self.front = self.back();
        self.used = cursor;
    }

    /// Replaces a view with `slots` (ascending by subject id, at most
    /// `max_view`). Not for use during a pass.
    pub(crate) fn set(&mut self, v: u32, slots: &[u32]) {
        let n = slots.len().min(self.max_view as usize);
        self.set_len(v, 0);
        // n ≤ max_view, so it fits.
        let at = if n as u32 <= self.cap[v as usize] {
            self.start[v as usize]
        } else {
            self.room_for(v, n as u32)
        };
        self.store[at as usize..at as usize + n].copy_from_slice(&slots[..n]);
        self.start[v as usize] = at;
        self.set_len(v, n as u32);
    }

    /// Gives every entry of every view its slot's new number. Ids do not
    /// change, so each view stays in id order.
    pub(crate) fn renumber_entries(&mut self, r: &Permutation) {
        for (&start, &len) in self.start.iter().zip(&self.len) {
            // An empty view's start may name the other half: skip it.
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
        self.free.clear();
        // Popped from the back: hand out low views first.
        self.free.extend((live..self.len.len() as u32).rev());
    }

    /// Whether some view holds `max_view` entries (and so may be culled).
    pub(crate) fn any_full(&self) -> bool {
        self.full > 0
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
        let (a, b) = (views.alloc().unwrap(), views.alloc().unwrap());
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
        let (a, b, c) = (
            views.alloc().unwrap(),
            views.alloc().unwrap(),
            views.alloc().unwrap(),
        );
        views.set(a, &[1, 5, 9]);
        views.set(b, &[2]);
        rewrite(&mut views, a, &[true, false, true], &[(30, 3)]);
        assert_eq!(ids(&views, a), [1, 3, 9]);
        // b grows beyond its run, repeatedly, until the half is full and packs.
        for extra in [4, 6, 8] {
            let keep = vec![true; views.slots(b).len()];
            rewrite(&mut views, b, &keep, &[(u64::from(extra) * 10, extra)]);
        }
        assert_eq!(ids(&views, b), [2, 4, 6, 8]);
        assert_eq!(ids(&views, a), [1, 3, 9]);
        views.set(c, &[0, 7]);
        assert_eq!(ids(&views, c), [0, 7]);
        // A pass rewrites all three into the other half, in this order.
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
        // b's slot comes back with a start in the half that is now the back.
        let d = views.alloc().unwrap();
        assert!(views.slots(d).is_empty());
        views.begin_pass();
        rewrite(&mut views, a, &[true; 4], &[]);
        rewrite(&mut views, d, &[], &[(50, 5)]);
        rewrite(&mut views, c, &[true; 3], &[]);
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
            views.alloc().unwrap(),
            views.alloc().unwrap(),
            views.alloc().unwrap(),
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
}
