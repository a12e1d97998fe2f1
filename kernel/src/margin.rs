//! Margins of culled views: the candidates just inside and just outside a
//! full view's cut-off, kept in order, so that a calm tick can settle who
//! is kept without ranking the crowd again.
//!
//! A view culled to `max_view` keeps the candidates with the smallest keys
//! `(dist², id)`. Its margin lists, in key order, every candidate whose key
//! lies in a closed interval `[lo, hi]` around the cut-off, each marked
//! whether it is kept; `core` counts the candidates below `lo`, all kept.
//! The view is then the core and the first `max_view − core` of the
//! margin. While the observer stands still, a subject that moves changes
//! only its own key: it leaves one of the three regions (core, margin,
//! beyond) and joins one, and the view is read off the margin again. That
//! works until the core alone holds more than `max_view` or the margin runs
//! out of candidates to fill the view; then the caller ranks the crowd
//! again, which sets a fresh margin.
//!
//! Like the cut-off guesses, margins are no part of the state: views come
//! out the same with or without them, and a restored world starts without.
//! So their room can be shared: a margin is kept only around a full view,
//! and the views hold at most `max_visible` entries together, so there
//! is room for as many margins as `max_visible / max_view` full views; a
//! view that finds none free (a tick's new crowds before the old ones are
//! rebuilt) keeps none and is ranked again when next affected.

use alloc::vec;
use alloc::vec::Vec;

use crate::permutation::Permutation;

/// A candidate's place in a view's order: nearer first, ties by id.
/// Margins only hold `dist²` below 2^64 (raw units: 65 536 units apart),
/// which keeps an entry in 24 bytes; any farther candidate is beyond.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) dist2: u64,
    pub(crate) id: u64,
}

/// Where a key falls against a view's margin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Region {
    /// Below the margin: kept.
    Core,
    /// In the margin: kept if among its first `max_view − core`.
    Margin,
    /// Above the margin, or not a candidate at all: not kept.
    Beyond,
}

/// Where [`Margins::shift`] put a subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    Kept,
    Dropped,
    /// In the margin: kept or not once [`Margins::settle`] has counted.
    Margin,
}

/// The bounds of one view's margin.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    lo: Key,
    hi: Key,
}

impl Bounds {
    /// The `dist²` of the margin's first and last key.
    pub(crate) fn dist2_span(&self) -> (u64, u64) {
        (self.lo.dist2, self.hi.dist2)
    }

    /// Where `key` falls; `None` (not a candidate) is beyond.
    pub(crate) fn region(&self, key: Option<Key>) -> Region {
        match key {
            Some(k) if k < self.lo => Region::Core,
            Some(k) if k <= self.hi => Region::Margin,
            _ => Region::Beyond,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Head {
    bounds: Bounds,
    core: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: Key,
    slot: u32,
    /// Kept at the end of last tick.
    was: bool,
    /// Moved (or is due) this tick, so its caller decides its event.
    moved: bool,
}

/// Per view, its margin while it has one. Room is fixed at construction.
pub(crate) struct Margins {
    /// Per view: the room its margin is in, or [`NO_ROOM`].
    rooms: Vec<u32>,
    /// Per room: the head of the margin in it.
    heads: Vec<Head>,
    /// `WIDTH` entries per room, the first `len` in use.
    entries: Vec<Entry>,
    /// Rooms no view holds.
    free: Vec<u32>,
    /// The margin being updated, and its entries with [`OPEN`] room for
    /// those moving into it.
    open: Option<Head>,
    scratch: Vec<Entry>,
    quota: usize,
    /// How many views have a margin.
    live: u32,
}

/// Room per view: up to `SIDE` candidates on each side of the cut-off.
pub(crate) const SIDE: usize = 8;
const WIDTH: usize = 2 * SIDE;

/// A freshly ranked crowd's candidates around its cut-off, in key order,
/// with their slots: what [`Margins::set`] is given. Its room is a
/// margin's, and a full list refuses one more rather than grow.
pub(crate) type Listed = heapless::Vec<(Key, u32), WIDTH>;

/// A view without a margin.
const NO_ROOM: u32 = u32::MAX;

/// Room for a margin while a tick's moves go in: its own entries and
/// three times as many again. A tick that moves more into one margin
/// gives it up (the caller ranks the crowd again), as a margin of more
/// than `WIDTH` is cut back to its nearest `WIDTH` anyway; room for every
/// entity took 24 bytes an entity.
const OPEN: usize = 4 * WIDTH;

// The memory per margin `reserved.rs` counts: 428 bytes.
const _: () = assert!(WIDTH * size_of::<Entry>() + size_of::<Head>() + 4 == 428);

const NO_HEAD: Head = Head {
    bounds: Bounds {
        lo: Key { dist2: 0, id: 0 },
        hi: Key { dist2: 0, id: 0 },
    },
    core: 0,
    len: 0,
};

const EMPTY: Entry = Entry {
    key: Key { dist2: 0, id: 0 },
    slot: 0,
    was: false,
    moved: false,
};

impl Margins {
    /// Margins for `views` views, room for `rooms` of them at once.
    pub(crate) fn new(views: u32, rooms: u32) -> Self {
        let rooms = rooms.min(views);
        Margins {
            rooms: vec![NO_ROOM; views as usize],
            heads: vec![NO_HEAD; rooms as usize],
            entries: vec![EMPTY; rooms as usize * WIDTH],
            // Popped from the back: low rooms first.
            free: (0..rooms).rev().collect(),
            open: None,
            scratch: Vec::with_capacity(OPEN),
            quota: 0,
            live: 0,
        }
    }

    /// The bounds of `view`'s margin, if it has one.
    pub(crate) fn bounds(&self, view: u32) -> Option<Bounds> {
        Some(self.head(view)?.bounds)
    }

    fn head(&self, view: u32) -> Option<Head> {
        let room = *self.rooms.get(view as usize)?;
        self.heads.get(room as usize).copied()
    }

    /// Whether any view has a margin.
    pub(crate) fn any(&self) -> bool {
        self.live > 0
    }

    pub(crate) fn clear(&mut self, view: u32) {
        self.put(view, None);
    }

    /// Gives `view` the margin `new` (its entries written already by
    /// [`Margins::room`]), or takes its margin and room away.
    fn put(&mut self, view: u32, new: Option<Head>) {
        let Some(room) = self.rooms.get_mut(view as usize) else {
            return;
        };
        match new {
            Some(head) => {
                if let Some(at) = self.heads.get_mut(*room as usize) {
                    *at = head;
                }
            }
            None if *room != NO_ROOM => {
                self.free.push(*room);
                *room = NO_ROOM;
                self.live -= 1;
            }
            None => {}
        }
    }

    /// Where the entries of `view`'s room start, giving it a room if it
    /// has none; `None` when every room is taken.
    fn room(&mut self, view: u32) -> Option<usize> {
        let room = self.rooms.get_mut(view as usize)?;
        if *room == NO_ROOM {
            *room = self.free.pop()?;
            self.live += 1;
        }
        Some(*room as usize * WIDTH)
    }

    /// Sets `view`'s margin: `core` candidates below the first of `listed`
    /// (every one kept), then `listed` in key order, which must be every
    /// candidate up to `hi`. The first `kept` of them are kept. Does
    /// nothing but clear the margin if that does not fit.
    pub(crate) fn set(
        &mut self,
        view: u32,
        core: u32,
        listed: &[(Key, u32)],
        kept: usize,
        hi: Key,
    ) {
        self.clear(view);
        let (Some(&(lo, _)), true) = (
            listed.first(),
            listed.len() <= WIDTH && kept <= listed.len(),
        ) else {
            return;
        };
        let Some(at) = self.room(view) else {
            return;
        };
        let out = &mut self.entries[at..at + WIDTH];
        for (k, (at, &(key, slot))) in out.iter_mut().zip(listed).enumerate() {
            *at = Entry {
                key,
                slot,
                was: k < kept,
                moved: false,
            };
        }
        let head = Head {
            bounds: Bounds { lo, hi },
            core,
            len: listed.len() as u32,
        };
        self.put(view, Some(head));
    }

    /// Opens `view`'s margin for this tick's moves; `false` if it has none.
    pub(crate) fn begin(&mut self, view: u32) -> bool {
        self.scratch.clear();
        self.open = self.head(view);
        let Some(head) = self.open else {
            return false;
        };
        let at = self.rooms[view as usize] as usize * WIDTH;
        let listed = self.entries.get(at..at + head.len as usize).unwrap_or(&[]);
        self.scratch.extend_from_slice(listed);
        true
    }

    /// Moves `slot` from key `old` to key `new` (`None`: not a candidate)
    /// in the open margin. Returns whether it was kept and where it is
    /// now; `None` if the margin cannot account for it (the caller ranks
    /// again).
    pub(crate) fn shift(
        &mut self,
        slot: u32,
        old: Option<Key>,
        new: Option<Key>,
    ) -> Option<(bool, Placed)> {
        let head = self.open.as_mut()?;
        let was = match head.bounds.region(old) {
            Region::Core => {
                head.core = head.core.checked_sub(1)?;
                true
            }
            Region::Margin => {
                let at = self.scratch.iter().position(|e| e.slot == slot)?;
                self.scratch.remove(at).was
            }
            Region::Beyond => false,
        };
        let placed = match head.bounds.region(new) {
            Region::Core => {
                head.core += 1;
                Placed::Kept
            }
            Region::Beyond => Placed::Dropped,
            Region::Margin => {
                let key = new?;
                if self.scratch.len() == self.scratch.capacity() {
                    return None;
                }
                let at = self.scratch.partition_point(|e| e.key < key);
                let moved = true;
                self.scratch.insert(
                    at,
                    Entry {
                        key,
                        slot,
                        was,
                        moved,
                    },
                );
                Placed::Margin
            }
        };
        Some((was, placed))
    }

    /// Counts who is kept once every move is in: the first `max_view −
    /// core` of the margin. `false` if the margin cannot fill the view that
    /// way, or would keep more than it has room for.
    pub(crate) fn settle(&mut self, max_view: usize) -> bool {
        let Some(head) = self.open else {
            return false;
        };
        let Some(quota) = max_view.checked_sub(head.core as usize) else {
            return false;
        };
        if quota > self.scratch.len().min(WIDTH) {
            return false;
        }
        self.quota = quota;
        true
    }

    /// After [`Margins::settle`]: every entry of the open margin as
    /// `(slot, kept before, kept now, moved)`.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u32, bool, bool, bool)> + '_ {
        let quota = self.quota;
        let each = move |(k, e): (usize, &Entry)| (e.slot, e.was, k < quota, e.moved);
        self.scratch.iter().enumerate().map(each)
    }

    /// Gives every entry of every margin its slot's new number; between
    /// ticks only. A margin left open is stale ([`Margins::begin`] opens
    /// each afresh), so it is dropped.
    pub(crate) fn renumber(&mut self, r: &Permutation) {
        self.open = None;
        self.scratch.clear();
        for &room in self.rooms.iter().filter(|&&room| room != NO_ROOM) {
            let (room, len) = (room as usize, self.heads[room as usize].len as usize);
            for e in &mut self.entries[room * WIDTH..room * WIDTH + len] {
                e.slot = r.to(e.slot);
            }
        }
    }

    /// Moves every view's margin to the view's new number.
    pub(crate) fn renumber_views(&mut self, r: &mut Permutation) {
        // Rooms stay where they are: only which view holds each moves.
        if !self.any() {
            return;
        }
        r.permute(&mut self.rooms);
    }

    /// Stores the settled margin as `view`'s. Where more moved into it than
    /// it has room for, it keeps the nearest, and ends at the last of them.
    pub(crate) fn commit(&mut self, view: u32) {
        let (Some(mut head), quota) = (self.open.take(), self.quota) else {
            return;
        };
        if self.scratch.len() > WIDTH {
            self.scratch.truncate(WIDTH);
            if let Some(last) = self.scratch.last() {
                head.bounds.hi = last.key;
            }
        }
        let len = self.scratch.len();
        let Some(at) = self.room(view) else {
            return;
        };
        let out = &mut self.entries[at..at + WIDTH];
        for (k, (at, e)) in out.iter_mut().zip(&self.scratch).enumerate() {
            *at = Entry {
                was: k < quota,
                moved: false,
                ..*e
            };
        }
        let len = len as u32;
        self.put(view, Some(Head { len, ..head }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(dist2: u64, id: u64) -> Key {
        Key { dist2, id }
    }

    #[test]
    fn regions_are_closed_around_the_margin() {
        let b = Bounds {
            lo: key(10, 5),
            hi: key(20, 5),
        };
        assert_eq!(b.region(Some(key(10, 4))), Region::Core);
        assert_eq!(b.region(Some(key(10, 5))), Region::Margin);
        assert_eq!(b.region(Some(key(20, 5))), Region::Margin);
        assert_eq!(b.region(Some(key(20, 6))), Region::Beyond);
        assert_eq!(b.region(None), Region::Beyond);
    }

    #[test]
    fn moves_trade_places_until_the_margin_runs_out() {
        let mut m = Margins::new(1, 1);
        // Core of 2; margin keys 10, 11, 12, 13 in slots 0..4; 2 of them
        // kept, so max_view = 4.
        let listed: Vec<_> = (0..4).map(|s| (key(10 + u64::from(s), 0), s)).collect();
        m.set(0, 2, &listed, 2, key(13, u64::MAX));
        assert!(m.begin(0));
        // Slot 1 (kept) moves out beyond; slot 9 comes from beyond to 12.5.
        assert_eq!(
            m.shift(1, Some(key(11, 0)), None),
            Some((true, Placed::Dropped))
        );
        assert_eq!(
            m.shift(9, None, Some(key(12, 1))),
            Some((false, Placed::Margin))
        );
        assert!(m.settle(4));
        let kept: Vec<_> = m.entries().map(|(s, was, now, _)| (s, was, now)).collect();
        // Slot 2 moves up into the view; 9 stays out.
        assert_eq!(
            kept,
            [
                (0, true, true),
                (2, false, true),
                (9, false, false),
                (3, false, false)
            ]
        );
        m.commit(0);
        // Every margin entry moves beyond: nothing is left to fill the view.
        assert!(m.begin(0));
        for (s, k) in [
            (0, key(10, 0)),
            (2, key(12, 0)),
            (9, key(12, 1)),
            (3, key(13, 0)),
        ] {
            assert!(m.shift(s, Some(k), None).is_some());
        }
        assert!(!m.settle(4), "an emptied margin cannot fill the view");
    }

    /// Sets the margin of `keys` (by slot; `None`: no candidate) the way a
    /// rank does: `side` on each side of the cut-off, everything to the
    /// last listed key. Returns the kept slots.
    fn rank(m: &mut Margins, keys: &[Option<Key>], max_view: usize) -> Vec<bool> {
        let mut sorted: Vec<(Key, u32)> = (0..keys.len() as u32)
            .filter_map(|s| keys[s as usize].map(|k| (k, s)))
            .collect();
        sorted.sort_unstable();
        let mut kept = vec![false; keys.len()];
        for &(_, s) in sorted.iter().take(max_view) {
            kept[s as usize] = true;
        }
        let side = SIDE.min(max_view);
        let core = max_view - side;
        let to = sorted.len().min(max_view + SIDE);
        let listed = sorted.get(core..to).unwrap_or(&[]);
        let hi = match sorted.len() > to {
            true => listed.last().map_or(key(0, 0), |l| l.0),
            false => key(u64::MAX, u64::MAX),
        };
        m.set(0, core as u32, listed, side, hi);
        kept
    }

    #[test]
    fn random_moves_keep_exactly_the_nearest() {
        // 60 candidates on few distances (many ties), 20 kept, a handful
        // moving each round: whatever the margin settles must be the 20
        // smallest keys, and where it cannot tell it must say so.
        const N: usize = 60;
        const MAX_VIEW: usize = 20;
        let mut rng = 0x5eedu64;
        let mut next = |below: u64| {
            rng = crate::digest::mix64(rng);
            rng % below
        };
        let mut keys: Vec<Option<Key>> = (0..N as u64).map(|s| Some(key(next(40), s))).collect();
        let mut m = Margins::new(1, 1);
        let mut kept = rank(&mut m, &keys, MAX_VIEW);
        let (mut settled, mut ranked) = (0, 0);
        for _ in 0..4000 {
            let mut moves = Vec::new();
            for _ in 0..=next(4) {
                let s = next(N as u64) as usize;
                if moves.iter().any(|&(t, _, _)| t == s) {
                    continue;
                }
                let to = (next(8) != 0).then(|| key(next(40), s as u64));
                moves.push((s, keys[s], to));
            }
            let mut verdicts = Some(Vec::new());
            assert!(m.begin(0));
            for &(s, old, new) in &moves {
                keys[s] = new;
                match (m.shift(s as u32, old, new), verdicts.as_mut()) {
                    (Some((was, placed)), Some(v)) => {
                        assert_eq!(was, kept[s], "slot {s} kept before");
                        match placed {
                            Placed::Kept => v.push((s, true)),
                            Placed::Dropped => v.push((s, false)),
                            Placed::Margin => {}
                        }
                    }
                    _ => verdicts = None,
                }
            }
            let verdicts = verdicts.filter(|_| m.settle(MAX_VIEW));
            let Some(mut verdicts) = verdicts else {
                kept = rank(&mut m, &keys, MAX_VIEW);
                ranked += 1;
                continue;
            };
            for (s, was, now, moved) in m.entries() {
                assert!(moved || was == kept[s as usize], "slot {s} kept before");
                verdicts.push((s as usize, now));
            }
            m.commit(0);
            for (s, now) in verdicts {
                kept[s] = now;
            }
            let mut truth: Vec<(Key, usize)> =
                (0..N).filter_map(|s| keys[s].map(|k| (k, s))).collect();
            truth.sort_unstable();
            let mut want = vec![false; N];
            for &(_, s) in truth.iter().take(MAX_VIEW) {
                want[s] = true;
            }
            assert_eq!(kept, want, "after {settled} settled rounds");
            settled += 1;
        }
        // Both paths ran, and mostly the cheap one.
        assert!(
            settled > 2000 && ranked > 10,
            "{settled} settled, {ranked} ranked"
        );
    }
}
