//! The view changes a tick makes, gathered per subject and read per observer.
//!
//! When few entities change, most observers only need to hear about the
//! handful of changed subjects around them. Each changed subject records one
//! pair per observer it gives an event to (or may, see [`PairKind`]), and the
//! pairs are then grouped by observer with one counting pass, so an observer
//! reads its own in O(its pairs) instead of rescanning its whole view.
//!
//! Capacity is fixed at construction; a tick that would need more pairs
//! reports [`SubjectPairs::overflowed`] and the caller rebuilds those views
//! instead.

use alloc::vec;
use alloc::vec::Vec;

use crate::config::{Config, Visibility, MAX_ENTITIES};
use crate::event::EventKind;

/// What a pair means for the observer. The discriminants order a view's
/// events as the contract does (Leave < Enter < Update).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum PairKind {
    Leave = 0,
    Enter = 1,
    Update = 2,
    /// The subject was within the hysteresis band last tick, so only the
    /// view knows whether it was visible. It is visible now…
    UnsureIn = 3,
    /// …invisible now…
    UnsureOut = 4,
    /// …or still in the band (visible now exactly if it was) and due.
    UnsureBand = 5,
    /// The observer's view is culled and has a margin, which says whether
    /// the subject was and is kept (see `margin.rs`).
    Culled = 6,
}

// The first three sort as the contract's kinds do (`event.rs`).
const _: () = assert!(
    PairKind::Leave as u8 + 1 == EventKind::Leave as u8
        && PairKind::Enter as u8 + 1 == EventKind::Enter as u8
        && PairKind::Update as u8 + 1 == EventKind::Update as u8
);

impl PairKind {
    const ALL: [PairKind; 7] = [
        PairKind::Leave,
        PairKind::Enter,
        PairKind::Update,
        PairKind::UnsureIn,
        PairKind::UnsureOut,
        PairKind::UnsureBand,
        PairKind::Culled,
    ];

    /// Resolves an unsure pair by asking the view whether the subject `was`
    /// visible; `due` is whether its update is due. `None`: no event.
    pub(crate) fn resolve(self, was: impl FnOnce() -> bool, due: bool) -> Option<PairKind> {
        if self <= PairKind::Update {
            return Some(self);
        }
        let was = was();
        let now = match self {
            PairKind::UnsureIn => true,
            PairKind::UnsureOut => false,
            // Still in the band: visible exactly if it was.
            _ => was,
        };
        PairKind::of_change(was, now, due)
    }

    /// The event of a subject visible `was` and `now`, due an update or
    /// not. `None`: no event.
    pub(crate) fn of_change(was: bool, now: bool, due: bool) -> Option<PairKind> {
        match (was, now) {
            (false, true) => Some(PairKind::Enter),
            (true, false) => Some(PairKind::Leave),
            (true, true) if due => Some(PairKind::Update),
            _ => None,
        }
    }
}

/// The most pairs any world keeps room for (192 MB with their grouping):
/// beyond that a tick rebuilds, which large worlds can afford better than
/// the memory.
const MAX_PAIRS: usize = 1 << 24;

/// The least room per entity slot: enough for a tick in which a few
/// percent of a crowded world move, each pair one event.
const LEAST_PER_ENTITY: u32 = 16;

/// The most room per entity slot, for worlds whose views hold hundreds.
const MOST_PER_ENTITY: u32 = 64;

/// How many of the entries the views may hold together make one pair of
/// room in radius mode: a walk changes about one entry in fifteen of
/// every view a tick (the uniform walks of the benchmark, whatever their
/// density), so this leaves a busy tick of views at their bound some room
/// to spare.
const ENTRIES_PER_PAIR: u32 = 12;

/// The same in grid mode, whose views change less for their size: a view
/// of 3 × 3 cells changes where subjects cross its outer border, 12 cell
/// edges around 9 cells' area, against a disc's circumference around its
/// area (`2/r`), so about two thirds as many of its entries a tick (one in
/// twenty-one). The benchmark's grid walks, given room by the radius
/// divisor, took 18 to 25 pairs a slot and ran no faster than with 16.
const ENTRIES_PER_PAIR_GRID: u32 = 20;

/// Pairs per entity slot that a world of `config` keeps room for: in
/// proportion to the entries its views may hold together
/// ([`Config::visible_room`]), between [`LEAST_PER_ENTITY`] and
/// [`MOST_PER_ENTITY`]. The sweep records its changes in this room too,
/// and gives up where they outgrow it, so a dense world whose room were
/// that of a sparse one would rebuild every view every tick (measured at
/// 50 000 entities seeing about 380 each: 220 ms a tick against 120).
pub(crate) fn room_per_entity(config: &Config) -> u32 {
    let entries = config.visible_room() / config.max_entities.max(1);
    let per_pair = match config.visibility {
        Visibility::Radius => ENTRIES_PER_PAIR,
        Visibility::Grid => ENTRIES_PER_PAIR_GRID,
    };
    (entries / per_pair).clamp(LEAST_PER_ENTITY, MOST_PER_ENTITY)
}

/// A subject slot and its pair's kind in one word (slots are below 2^22).
const KIND_SHIFT: u32 = 24;
const _: () = assert!(MAX_ENTITIES <= 1 << KIND_SHIFT);

fn pack(subject: u32, kind: PairKind) -> u32 {
    subject | (kind as u32) << KIND_SHIFT
}

/// The subject slot and kind packed by [`pack`].
pub(crate) fn unpack(word: u32) -> (u32, PairKind) {
    let kind = PairKind::ALL
        .get((word >> KIND_SHIFT) as usize)
        .copied()
        .unwrap_or(PairKind::Update);
    (word & ((1 << KIND_SHIFT) - 1), kind)
}

/// The two buffers a tick's pairs are recorded and grouped in. The radius
/// sweep borrows them on the ticks it runs ([`SubjectPairs::lend`]): it
/// runs only where every view is rebuilt, and then no view reads its pairs,
/// so one room serves both and a world reserves it once.
#[derive(Default)]
pub(crate) struct PairRoom {
    /// `(observer slot, packed subject)` in the order recorded, one entry
    /// longer than `grouped` (the sweep records past its end without a
    /// branch).
    pub(crate) found: Vec<(u32, u32)>,
    /// The packed subjects again, each observer's contiguous.
    pub(crate) grouped: Vec<u32>,
}

/// This tick's `(observer, subject)` pairs, grouped by observer on demand.
pub(crate) struct SubjectPairs {
    /// The pairs are the first `recorded` of `room.found`.
    room: PairRoom,
    recorded: usize,
    /// Per observer slot: its number of pairs this tick.
    count: Vec<u32>,
    /// Per observer slot: where its group ends in `grouped`.
    end: Vec<u32>,
    /// Pairs that may change a view (all but Updates).
    edits: u32,
    overflowed: bool,
}

impl SubjectPairs {
    /// Room for `per_entity` pairs per entity slot on average, and never
    /// more than [`MAX_PAIRS`].
    pub(crate) fn new(slots: u32, per_entity: u32) -> Self {
        let capacity = (slots as usize * per_entity as usize).min(MAX_PAIRS);
        SubjectPairs {
            room: PairRoom {
                found: vec![(0, 0); capacity + 1],
                grouped: vec![0; capacity],
            },
            recorded: 0,
            count: vec![0; slots as usize],
            end: vec![0; slots as usize],
            edits: 0,
            overflowed: false,
        }
    }

    /// Empties the set, touching only the observers the last tick used.
    pub(crate) fn clear(&mut self) {
        for &(observer, _) in self.room.found.get(..self.recorded).unwrap_or(&[]) {
            if let Some(c) = self.count.get_mut(observer as usize) {
                *c = 0;
            }
        }
        self.recorded = 0;
        self.edits = 0;
        self.overflowed = false;
    }

    /// Empties the set and lends its room out for the rest of the tick:
    /// until [`SubjectPairs::take_back`], every push overflows and every
    /// observer has no pairs.
    pub(crate) fn lend(&mut self) -> PairRoom {
        self.clear();
        core::mem::take(&mut self.room)
    }

    /// Takes back the room [`SubjectPairs::lend`] gave out.
    pub(crate) fn take_back(&mut self, room: PairRoom) {
        self.room = room;
    }

    /// Records a pair; `false` (and [`SubjectPairs::overflowed`] from then
    /// on) when the set is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, observer: u32, subject: u32, kind: PairKind) -> bool {
        let Some(c) = self.count.get_mut(observer as usize) else {
            return false;
        };
        let at = self.recorded;
        // `grouped` is the room: `found` has one entry more.
        let slot = match at < self.room.grouped.len() {
            true => self.room.found.get_mut(at),
            false => None,
        };
        let Some(slot) = slot.filter(|_| !self.overflowed) else {
            self.overflowed = true;
            return false;
        };
        *slot = (observer, pack(subject, kind));
        *c += 1;
        self.edits += u32::from(kind != PairKind::Update);
        self.recorded += 1;
        true
    }

    /// The word a pair with `subject` of `kind` is recorded as.
    pub(crate) fn word(subject: u32, kind: PairKind) -> u32 {
        pack(subject, kind)
    }

    /// The room cut into `width` equal shares, for as many tasks to record
    /// pairs into on their own while the set is empty; none where the room
    /// is lent out. See [`SubjectPairs::take_part`].
    pub(crate) fn parts(&mut self, width: usize) -> core::slice::ChunksMut<'_, (u32, u32)> {
        let width = width.max(1);
        let share = self.room.grouped.len() / width;
        self.room.found[..share * width].chunks_mut(share.max(1))
    }

    /// Takes the first `len` pairs of share `w` of
    /// [`SubjectPairs::parts`]`(width)` into the set, as if each were
    /// pushed in turn, and calls `each` with each one's observer. Shares
    /// are taken in order: the set then never reaches into a share not
    /// yet taken.
    pub(crate) fn take_part(
        &mut self,
        w: usize,
        width: usize,
        len: usize,
        mut each: impl FnMut(u32),
    ) {
        let share = self.room.grouped.len() / width.max(1);
        let from = w * share;
        for k in from..from + len.min(share) {
            let (observer, word) = self.room.found[k];
            if let Some(c) = self.count.get_mut(observer as usize) {
                *c += 1;
            }
            self.room.found[self.recorded] = (observer, word);
            self.edits += u32::from(word >> KIND_SHIFT != PairKind::Update as u32);
            self.recorded += 1;
            each(observer);
        }
    }

    /// Between ticks: the room the pairs are grouped in, as scratch for
    /// whoever needs it until the next tick, which groups afresh (what it
    /// holds is lost). Empty while lent out.
    pub(crate) fn scratch(&mut self) -> &mut [u32] {
        &mut self.room.grouped
    }

    /// How many pairs recorded this tick may change a view, not only send
    /// an Update.
    pub(crate) fn edits(&self) -> u32 {
        self.edits
    }

    /// Whether some pair did not fit this tick.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Groups the pairs by observer (a counting sort), keeping each group
    /// in recording order.
    pub(crate) fn group(&mut self) {
        // `end` doubles as the fill cursor: it starts where the group
        // starts and finishes where it ends.
        let mut next = 0u32;
        let pairs = self.room.found.get(..self.recorded).unwrap_or(&[]);
        if pairs.len() >= self.count.len() / 4 {
            // Groups in slot order: observers are updated in id order,
            // which slots follow, so they read their groups in one stream
            // instead of one jump each.
            for (end, &count) in self.end.iter_mut().zip(&self.count) {
                *end = next;
                next += count;
            }
        } else {
            // Few pairs: place each group when its first pair is met, and
            // touch only the observers that have one.
            for &(observer, _) in pairs {
                self.end[observer as usize] = u32::MAX;
            }
        }
        for &(observer, word) in pairs {
            let o = observer as usize;
            if self.end[o] == u32::MAX {
                self.end[o] = next;
                next += self.count[o];
            }
            if let Some(at) = self.room.grouped.get_mut(self.end[o] as usize) {
                *at = word;
            }
            self.end[o] += 1;
        }
    }

    /// An observer's pairs, packed (see [`unpack`]); valid after
    /// [`SubjectPairs::group`].
    pub(crate) fn of(&self, observer: u32) -> &[u32] {
        let o = observer as usize;
        let n = self.count.get(o).copied().unwrap_or(0) as usize;
        if n == 0 {
            return &[];
        }
        let end = self.end.get(o).copied().unwrap_or(0) as usize;
        let start = end.saturating_sub(n);
        self.room.grouped.get(start..end).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::{room_per_entity, unpack, PairKind, SubjectPairs};
    use crate::{Config, Visibility};
    use alloc::vec::Vec;

    /// The room follows what the views may hold together, within its
    /// floor and ceiling.
    #[test]
    fn room_per_entity_follows_the_views_room() {
        let world = |max_view, max_visible| Config {
            max_entities: 10_000,
            max_observers: 10_000,
            max_view,
            max_visible,
            visibility: Visibility::Radius,
            ..Config::default()
        };
        // About 94 entries per entity (uniform-10k's bound): the floor.
        assert_eq!(room_per_entity(&world(512, Some(944_440))), 16);
        // About 470 (dense-50k's bound): one pair per twelve entries.
        assert_eq!(room_per_entity(&world(1536, Some(4_710_000))), 39);
        // Unbounded: views of max_view each.
        assert_eq!(room_per_entity(&world(512, None)), 42);
        assert_eq!(room_per_entity(&world(4096, None)), 64);
        // Grid mode: one pair per twenty entries. About 281 entries per
        // entity (uniform-10k grid's bound): the floor; about 1 400
        // (dense-50k grid's): the ceiling.
        let grid = |max_visible| Config {
            visibility: Visibility::Grid,
            ..world(1536, Some(max_visible))
        };
        assert_eq!(room_per_entity(&grid(2_810_000)), 16);
        assert_eq!(room_per_entity(&grid(6_000_000)), 30);
        assert_eq!(room_per_entity(&grid(14_000_000)), 64);
        // No entities at all: no division by zero.
        let empty = Config {
            max_entities: 0,
            max_observers: 0,
            ..Config::default()
        };
        assert_eq!(room_per_entity(&empty), 16);
    }

    #[test]
    fn pairs_group_by_observer_in_recording_order() {
        let mut pairs = SubjectPairs::new(8, 2);
        assert!(pairs.push(3, 5, PairKind::Enter));
        assert!(pairs.push(1, 6, PairKind::Leave));
        assert!(pairs.push(3, 7, PairKind::UnsureBand));
        pairs.group();
        let of = |o| pairs.of(o).iter().map(|&w| unpack(w)).collect::<Vec<_>>();
        assert_eq!(of(3), [(5, PairKind::Enter), (7, PairKind::UnsureBand)]);
        assert_eq!(of(1), [(6, PairKind::Leave)]);
        assert!(of(0).is_empty());

        // The next tick starts empty.
        pairs.clear();
        assert!(pairs.push(1, 2, PairKind::Update));
        pairs.group();
        assert_eq!(pairs.of(1).len(), 1);
        assert!(pairs.of(3).is_empty());
    }

    #[test]
    fn few_pairs_among_many_slots_group_the_same() {
        // Fewer pairs than a quarter of the slots: groups are placed as
        // met rather than laid out in slot order.
        let mut pairs = SubjectPairs::new(64, 2);
        for (observer, subject) in [(40, 1), (3, 2), (40, 3), (9, 4), (3, 5)] {
            assert!(pairs.push(observer, subject, PairKind::Leave));
        }
        pairs.group();
        let of = |o| pairs.of(o).iter().map(|&w| unpack(w).0).collect::<Vec<_>>();
        assert_eq!(
            (of(40), of(3), of(9)),
            ([1, 3].into(), [2, 5].into(), [4].into())
        );
        assert!(of(0).is_empty() && of(63).is_empty());
    }

    #[test]
    fn a_full_set_overflows_and_stays_overflowed() {
        let mut pairs = SubjectPairs::new(2, 1);
        assert!(pairs.push(0, 1, PairKind::Enter));
        assert!(pairs.push(1, 0, PairKind::Enter));
        assert!(!pairs.push(0, 1, PairKind::Leave));
        assert!(pairs.overflowed());
        pairs.clear();
        assert!(!pairs.overflowed());
    }

    #[test]
    fn unsure_pairs_resolve_by_the_old_view() {
        use PairKind::*;
        let yes = || true;
        let no = || false;
        assert_eq!(UnsureIn.resolve(no, false), Some(Enter));
        assert_eq!(UnsureIn.resolve(yes, true), Some(Update));
        assert_eq!(UnsureIn.resolve(yes, false), None);
        assert_eq!(UnsureOut.resolve(yes, false), Some(Leave));
        assert_eq!(UnsureOut.resolve(no, true), None);
        assert_eq!(UnsureBand.resolve(yes, true), Some(Update));
        assert_eq!(UnsureBand.resolve(no, true), None);
        let unasked = || -> bool { unreachable!("settled pairs never ask the view") };
        assert_eq!(Enter.resolve(unasked, true), Some(Enter));
    }
}
