//! The per-slot records of the entity table, and the one type that owns
//! them all and moves them together.
//!
//! Every entity lives in a slot, and what the tick keeps of it is spread
//! over several arrays indexed by slot, each apart from the others because
//! different stages stream different parts through the cache (see
//! [`Entity`]). A spawn fills every array at its slot, a despawn vacates
//! it, and renumbering permutes every array at once: [`SlotTable`] is the
//! only code that does any of the three, and it names each array in each
//! of them (by destructuring), so an array added later cannot be left out
//! of one without a compile error. One was once forgotten in a permutation
//! written out by hand; see `docs/performance-history.md`.
//!
//! The table is sized once, at construction, to the world's slots, and
//! never grows: `World::step` allocates nothing.

use alloc::vec;
use alloc::vec::Vec;

use crate::command::EntityId;
use crate::digest::{
    self, chain_full_lanes, chain_lanes, DigestSums, WordHasher, Words, DOMAIN_ENTITY, HEAD_WORDS,
    MOTION_WORDS,
};
use crate::fixed_point::{len2_raw, Dir, Fix, Pos};
use crate::layers::LayerSummary;
use crate::permutation::Permutation;
use crate::slot_bits::SlotBits;
use crate::slot_ids::SlotIds;
use crate::throttle::{Motion, Sent};

/// Marks an entity that has no view (not an observer).
pub(crate) const NO_VIEW: u32 = u32::MAX;

/// The spawn tick ([`SlotTable::born`]) of a vacant slot.
pub(crate) const UNBORN: u64 = u64::MAX;

/// What every tick reads and writes of an entity that moves: 128 bytes,
/// two cache lines. What is read only when its view is rebuilt, its
/// pairing record renewed or its digest head rehashed is its [`Sight`],
/// kept apart, since each moving entity's record streams through the
/// cache several times a tick: 64 bytes more on each measured 12% slower
/// at npc-10k radius.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entity {
    pub(crate) id: EntityId,
    pub(crate) alive: bool,
    /// View slot, or [`NO_VIEW`].
    pub(crate) view: u32,
    pub(crate) cur: Motion,
    /// State at the end of the previous tick (`s_{t-1}`); equals `cur` between ticks.
    pub(crate) prev: Motion,
    /// The last state sent ([`Entity::sent`]) but its heading, which
    /// `sent_dir` keeps outside it: a [`Sent`] as it is would leave 6
    /// bytes of padding and take 8 more to say whether there is one.
    sent: SentAt,
    sent_dir: Dir,
    pub(crate) layers: u32,
    /// Current cell index.
    pub(crate) cell: u32,
    /// This entity's current term in the digest's entity sum.
    pub(crate) hash: u64,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Entity>() == 128);

/// A [`Sent`] without its heading; `tick` is [`NEVER_SENT`] when nothing
/// was sent.
#[derive(Clone, Copy, Debug)]
struct SentAt {
    pos: Pos,
    speed: Fix,
    tick: u64,
}

/// No tick a world runs reaches it (they stop at `MAX_TICK`, `2^62`).
const NEVER_SENT: u64 = u64::MAX;

const NOTHING_SENT: SentAt = SentAt {
    pos: Pos::new(Fix::ZERO, Fix::ZERO),
    speed: Fix::ZERO,
    tick: NEVER_SENT,
};

/// What an entity would see as an observer, fixed at spawn. Its squared
/// distances are worked out when read (a rebuild, a renewed pairing
/// record), not kept: 32 bytes a slot instead of 64.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sight {
    pub(crate) radius: Fix,
    /// The stay distance, `r + hysteresis`, raw.
    stay: i64,
    pub(crate) interest: u32,
    /// Cells around its own that an observer's candidates can come from.
    pub(crate) ring: u32,
    /// Radius mode: the view is a disc (else its squared distances are 0).
    disc: bool,
    /// Every candidate of its rebuilds is less than `2^31` raw away on each
    /// axis, so distances square in 64 bits.
    pub(crate) near: bool,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Sight>() == 32);

impl Sight {
    /// The sight of radius `radius` and stay distance `stay` (raw), a
    /// disc in radius mode.
    pub(crate) fn new(
        radius: Fix,
        stay: i64,
        interest: u32,
        ring: u32,
        disc: bool,
        near: bool,
    ) -> Sight {
        Sight {
            radius,
            stay,
            interest,
            ring,
            disc,
            near,
        }
    }

    /// `r²` in raw units (radius mode; 0 in grid mode).
    #[inline]
    pub(crate) fn enter2(&self) -> u128 {
        match self.disc {
            true => len2_raw(self.radius),
            false => 0,
        }
    }

    /// `(r + hysteresis)²` in raw units (radius mode; 0 in grid mode).
    #[inline]
    pub(crate) fn stay2(&self) -> u128 {
        let stay = u128::from(self.stay.unsigned_abs());
        match self.disc {
            true => stay * stay,
            false => 0,
        }
    }

    /// Whether a radius-mode view is exactly every subject within `r`:
    /// no hysteresis band, candidates near enough for 64-bit squares, and
    /// every live entity (`layers`) of interest.
    pub(crate) fn plain_disc(&self, layers: &LayerSummary) -> bool {
        let same = !self.disc || self.stay.unsigned_abs() == self.radius.to_bits().unsigned_abs();
        self.near && same && layers.all_of_interest(self.interest)
    }
}

impl Entity {
    pub(crate) const VACANT: Entity = Entity {
        id: 0,
        alive: false,
        view: NO_VIEW,
        cur: Motion {
            pos: Pos::new(Fix::ZERO, Fix::ZERO),
            dir: 0,
            speed: Fix::ZERO,
        },
        prev: Motion {
            pos: Pos::new(Fix::ZERO, Fix::ZERO),
            dir: 0,
            speed: Fix::ZERO,
        },
        sent: NOTHING_SENT,
        sent_dir: 0,
        layers: 0,
        cell: 0,
        hash: 0,
    };

    /// A live entity as spawned: standing at `motion` since the end of
    /// last tick, nothing sent yet, no digest term yet.
    pub(crate) fn spawned(id: EntityId, view: u32, motion: Motion, layers: u32, cell: u32) -> Self {
        Entity {
            id,
            alive: true,
            view,
            cur: motion,
            prev: motion,
            layers,
            cell,
            ..Entity::VACANT
        }
    }

    /// The last state sent for the entity and when (the throttle's `L`
    /// and `T`), if any.
    #[inline(always)]
    pub(crate) fn sent(&self) -> Option<Sent> {
        let SentAt { pos, speed, tick } = self.sent;
        let motion = Motion {
            pos,
            dir: self.sent_dir,
            speed,
        };
        (tick != NEVER_SENT).then_some(Sent { motion, tick })
    }

    /// Records `sent` as the last state sent.
    #[inline(always)]
    pub(crate) fn set_sent(&mut self, sent: Option<Sent>) {
        (self.sent, self.sent_dir) = match sent {
            Some(Sent { motion, tick }) => {
                let (pos, speed) = (motion.pos, motion.speed);
                (SentAt { pos, speed, tick }, motion.dir)
            }
            None => (NOTHING_SENT, 0),
        };
    }

    pub(crate) fn is_observer(&self) -> bool {
        self.view != NO_VIEW
    }

    /// The entity's term in the digest, with its hash chain over its
    /// head words (see `digest.rs`).
    pub(crate) fn digest_term(&self, sight: &Sight) -> (u64, WordHasher) {
        digest::entity_term(&self.head_words(sight), &self.motion_words())
    }

    /// The words of the digest term that change only at spawn or when an
    /// update is sent.
    pub(crate) fn head_words(&self, sight: &Sight) -> Words<HEAD_WORDS> {
        digest::entity_head_words(
            self.id,
            self.is_observer(),
            sight.radius,
            self.layers,
            sight.interest,
            self.sent().as_ref(),
        )
    }

    /// The words of the digest term that follow its head: the motion.
    pub(crate) fn motion_words(&self) -> [u64; MOTION_WORDS] {
        digest::entity_motion_words(&self.cur)
    }
}

/// An entity's current motion and its layers: a compact copy of what its
/// Enter and Update events carry, so that an event costs one cache line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shown {
    pub(crate) pos: Pos,
    pub(crate) speed: Fix,
    pub(crate) dir: Dir,
    pub(crate) layers: u32,
}

/// What pairing needs of an observer: one line per slot, where its entity
/// record spans three, since every subject pairs with hundreds of them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Watcher {
    pub(crate) x: i64,
    pub(crate) y: i64,
    pub(crate) enter2: u128,
    /// The stay distance² (radius mode), or, while the view has a margin,
    /// that margin's `dist²` span: such a view is never asked about the
    /// hysteresis band (margins end at the enter distance), and the record
    /// stays one line.
    stay2_or_span: u128,
    pub(crate) interest: u32,
    pub(crate) cell: u32,
    pub(crate) ring: u32,
    /// The view's index, and [`MARGIN`] while the view has a margin:
    /// pairing learns it here, in the line it reads anyway, and only then
    /// looks further.
    view_and_flag: u32,
}

const MARGIN: u32 = 1 << 31;
// View indices are below `max_observers ≤ max_entities ≤ MAX_ENTITIES`.
const _: () = assert!(crate::config::MAX_ENTITIES <= MARGIN);

impl Watcher {
    /// The observer's raw position.
    pub(crate) fn at(&self) -> (i64, i64) {
        (self.x, self.y)
    }

    pub(crate) fn of(e: &Entity, sight: &Sight) -> Watcher {
        Watcher {
            x: e.cur.pos.x.to_bits(),
            y: e.cur.pos.y.to_bits(),
            enter2: sight.enter2(),
            stay2_or_span: sight.stay2(),
            interest: sight.interest,
            cell: e.cell,
            ring: sight.ring,
            // A non-observer's `NO_VIEW` loses its top bit: it is never
            // paired, and must not read as a view with a margin.
            view_and_flag: e.view & !MARGIN,
        }
    }

    /// The same record for the view now numbered `view`.
    pub(crate) fn with_view(self, view: u32) -> Watcher {
        Watcher {
            view_and_flag: view | (self.view_and_flag & MARGIN),
            ..self
        }
    }

    /// The observer's view index.
    pub(crate) fn view(&self) -> u32 {
        self.view_and_flag & !MARGIN
    }

    /// Whether the view has a margin (see `culled.rs`).
    pub(crate) fn has_margin(&self) -> bool {
        self.view_and_flag & MARGIN != 0
    }

    /// The stay distance², for a view without a margin.
    pub(crate) fn stay2(&self) -> u128 {
        self.stay2_or_span
    }

    /// The `dist²` of the first and last key of the view's margin, while
    /// it has one.
    pub(crate) fn margin_span(&self) -> (u64, u64) {
        ((self.stay2_or_span >> 64) as u64, self.stay2_or_span as u64)
    }

    /// Records the view's margin span, or that it has none (then the stay
    /// distance² is `stay2` again).
    pub(crate) fn set_margin(&mut self, span: Option<(u64, u64)>, stay2: u128) {
        let flag = if span.is_some() { MARGIN } else { 0 };
        self.view_and_flag = self.view() | flag;
        self.stay2_or_span = match span {
            Some((lo, hi)) => u128::from(lo) << 64 | u128::from(hi),
            None => stay2,
        };
    }
}

/// A subject despawned this tick, as pairing needs it.
#[derive(Clone, Copy)]
pub(crate) struct Gone {
    pub(crate) slot: u32,
    pub(crate) id: EntityId,
    pub(crate) layers: u32,
    /// Where it stood at the end of last tick, and in which cell.
    pub(crate) pos: Pos,
    pub(crate) cell: u32,
}

/// Every array kept by entity slot. Its fields are the arrays themselves,
/// so that a stage of the tick borrows exactly the ones it reads or writes
/// (the borrow checker sees them apart); filling, vacating and permuting
/// slots go through the table's methods only.
pub(crate) struct SlotTable {
    /// What every tick reads and writes of each entity.
    pub(crate) entities: Vec<Entity>,
    /// What each entity would see as an observer.
    pub(crate) sights: Vec<Sight>,
    /// What pairing needs of an observer (stale for others).
    pub(crate) watchers: Vec<Watcher>,
    /// Spawn tick of each slot's entity, [`UNBORN`] when vacant.
    pub(crate) born: Vec<u64>,
    /// The cell its entity stood in at the end of last tick
    /// (`Entity::prev`'s), so that finding whether it crossed a border,
    /// and where from, divides nothing. Apart from the entities, whose
    /// record it would push past three cache lines.
    pub(crate) prev_cells: Vec<u32>,
    /// Where its entity stood at the end of last tick, raw
    /// (`Entity::prev`'s position, compact for the sorted copy).
    pub(crate) before: Vec<(i64, i64)>,
    /// Its entity's digest term hashed as far as the words that change
    /// only at spawn or when an update is sent ([`Entity::head_words`]),
    /// so that a move hashes only its motion. Apart from the entities
    /// because it is read only when they settle.
    pub(crate) heads: Vec<WordHasher>,
    /// What its Enter and Update events carry, in one line.
    pub(crate) shown: Vec<Shown>,
    /// Id of each slot's entity, and which slots churned this tick; views
    /// hold slots only.
    pub(crate) ids: SlotIds,
}

impl SlotTable {
    /// A table of `slots` vacant slots, every array at its full length.
    pub(crate) fn new(slots: u32) -> Self {
        let n = slots as usize;
        SlotTable {
            entities: vec![Entity::VACANT; n],
            sights: vec![Sight::default(); n],
            watchers: vec![Watcher::default(); n],
            born: vec![UNBORN; n],
            prev_cells: vec![0; n],
            before: vec![(0, 0); n],
            heads: vec![WordHasher::new(DOMAIN_ENTITY); n],
            shown: vec![Shown::default(); n],
            ids: SlotIds::new(slots),
        }
    }

    /// How many slots the table has.
    pub(crate) fn len(&self) -> u32 {
        // At most MAX_ENTITIES + an eighth, far below 2^32.
        self.entities.len() as u32
    }

    /// Puts a newly spawned entity in the vacant `slot` at tick `t`, and
    /// every array's record of it. Its digest head is set when it settles.
    #[inline]
    pub(crate) fn occupy(&mut self, slot: u32, entity: Entity, sight: Sight, t: u64) {
        let SlotTable {
            entities,
            sights,
            watchers,
            born,
            prev_cells,
            before,
            heads: _,
            shown,
            ids,
        } = self;
        let i = slot as usize;
        let pos = entity.cur.pos;
        entities[i] = entity;
        sights[i] = sight;
        watchers[i] = Watcher::of(&entity, &sight);
        born[i] = t;
        prev_cells[i] = entity.cell;
        before[i] = (pos.x.to_bits(), pos.y.to_bits());
        shown[i] = Shown {
            pos,
            speed: entity.cur.speed,
            dir: entity.cur.dir,
            layers: entity.layers,
        };
        ids.churn(slot);
        ids.set(slot, entity.id);
    }

    /// Empties `slot` of a despawned entity. Its id stays readable through
    /// [`SlotIds::old`] until the tick ends; the other arrays keep stale
    /// records, which nothing reads while the slot is [`UNBORN`].
    #[inline]
    pub(crate) fn vacate(&mut self, slot: u32) {
        let SlotTable {
            entities,
            sights,
            watchers: _,
            born,
            prev_cells: _,
            before: _,
            heads: _,
            shown: _,
            ids,
        } = self;
        let i = slot as usize;
        entities[i] = Entity::VACANT;
        sights[i] = Sight::default();
        born[i] = UNBORN;
        ids.churn(slot);
    }

    /// Moves every slot's records to its new slot under `r`. Between ticks
    /// only: no slot is churned.
    pub(crate) fn permute(&mut self, r: &mut Permutation) {
        let SlotTable {
            entities,
            sights,
            watchers,
            born,
            prev_cells,
            before,
            heads,
            shown,
            ids,
        } = self;
        r.permute(entities);
        r.permute(sights);
        r.permute(watchers);
        r.permute(born);
        r.permute(prev_cells);
        r.permute(before);
        r.permute(heads);
        r.permute(shown);
        ids.renumber(r);
    }

    /// Closes every touched entity's tick: `s_{t-1} := s_t`, refresh its
    /// digest term, and keep it pending while it differs from what was
    /// sent. Terms are hashed eight at a time (see `chain_lanes` and
    /// `chain_full_lanes`); a term's head only when an update was sent
    /// (the slots in `due`, which it empties). Adds each term to `sums`,
    /// and pending slots to `pending`.
    #[inline(always)]
    pub(crate) fn settle(
        &mut self,
        touched: &[u32],
        due: &mut SlotBits,
        sums: &mut DigestSums,
        pending: &mut Vec<u32>,
    ) {
        const LANES: usize = 8;
        for k in (0..touched.len()).step_by(LANES) {
            let mut slots = [None; LANES];
            let mut heads = [WordHasher::new(DOMAIN_ENTITY); LANES];
            let mut head_words = [Words::new(); LANES];
            let mut motions = [[0; MOTION_WORDS]; LANES];
            for (lane, &slot) in touched[k..].iter().take(LANES).enumerate() {
                // Its head changes only when an update is sent, and one
                // always is at spawn (nothing sent yet is due).
                let new_head = due.get(slot);
                due.clear(slot);
                let e = &mut self.entities[slot as usize];
                if e.alive {
                    e.prev = e.cur;
                    self.prev_cells[slot as usize] = e.cell;
                    self.before[slot as usize] = (e.cur.pos.x.to_bits(), e.cur.pos.y.to_bits());
                    match new_head {
                        true => head_words[lane] = e.head_words(&self.sights[slot as usize]),
                        false => heads[lane] = self.heads[slot as usize],
                    }
                    motions[lane] = e.motion_words();
                    slots[lane] = Some(slot);
                }
            }
            chain_lanes(&mut heads, &head_words);
            let mut terms = heads;
            chain_full_lanes(&mut terms, &motions);
            for ((slot, head), term) in slots.into_iter().zip(heads).zip(terms) {
                let Some(slot) = slot else { continue };
                let term = term.finish();
                let e = &mut self.entities[slot as usize];
                sums.entities = sums.entities.wrapping_sub(e.hash).wrapping_add(term);
                e.hash = term;
                self.heads[slot as usize] = head;
                if e.sent().map(|s| s.motion) != Some(e.cur) {
                    pending.push(slot);
                }
            }
        }
    }

    /// Whether a spawn took the despawned subject's slot in this tick,
    /// even if a despawn emptied it again: then pairs naming the slot
    /// would name the newcomer.
    pub(crate) fn taken_over(&self, gone: &Gone) -> bool {
        taken_over(&self.born, &self.ids, gone)
    }

    /// The slots live entities hold, ascending, read off the compact
    /// spawn-tick array rather than the entity records.
    pub(crate) fn live_slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..)
            .zip(&self.born)
            .filter(|&(_, &b)| b != UNBORN)
            .map(|(slot, _)| slot)
    }
}

/// [`SlotTable::taken_over`], from the two arrays it reads, for stages
/// that borrow them apart.
#[inline]
pub(crate) fn taken_over(born: &[u64], ids: &SlotIds, gone: &Gone) -> bool {
    born[gone.slot as usize] != UNBORN || ids.id(gone.slot) != gone.id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed_point::Fix;

    fn entity(id: EntityId, x: i32) -> Entity {
        let m = Motion {
            pos: Pos::from_ints(x, 2 * x),
            dir: x as u16,
            speed: Fix::from_num(x),
        };
        Entity {
            id,
            alive: true,
            view: NO_VIEW,
            cur: m,
            prev: m,
            layers: id as u32,
            cell: id as u32 + 100,
            hash: id,
            ..Entity::VACANT
        }
    }

    /// Every array moves with its slot: after a permutation, each slot's
    /// records in every array are those of the same entity.
    #[test]
    fn a_permutation_moves_every_array_together() {
        let mut t = SlotTable::new(6);
        // Spawned in slots out of id order, one vacated again.
        for (slot, id) in [(0, 50), (1, 10), (2, 40), (4, 20), (5, 30)] {
            let sight = Sight {
                radius: Fix::from_num(id as i32),
                ..Sight::default()
            };
            t.occupy(slot, entity(id, id as i32), sight, id);
            t.heads[slot as usize] = WordHasher::new(id);
        }
        t.vacate(2);
        t.ids.end_tick();
        let (mut room, mut done) = (vec![0; 2 * t.len() as usize], SlotBits::new(t.len()));
        let mut r = Permutation::within(t.len(), &mut room, &mut done).unwrap();
        let ids = &t.ids;
        r.plan_by_key(t.live_slots(), |s| ids.id(s));
        t.permute(&mut r);
        let live: Vec<u32> = t.live_slots().collect();
        assert_eq!(live, [0, 1, 2, 3]);
        for (slot, id) in (0..4u32).zip([10u64, 20, 30, 50]) {
            let i = slot as usize;
            let x = id as i32;
            assert_eq!(t.ids.id(slot), id);
            assert_eq!(t.entities[i].id, id);
            assert_eq!(t.sights[i].radius, Fix::from_num(x));
            assert_eq!(t.watchers[i].cell, id as u32 + 100);
            assert_eq!(t.born[i], id);
            assert_eq!(t.prev_cells[i], id as u32 + 100);
            assert_eq!(
                t.before[i],
                (Fix::from_num(x).to_bits(), Fix::from_num(2 * x).to_bits())
            );
            assert_eq!(t.heads[i].finish(), WordHasher::new(id).finish());
            assert_eq!(t.shown[i].layers, id as u32);
        }
        assert!(t.entities[4..].iter().all(|e| !e.alive));
        assert!(t.born[4..].iter().all(|&b| b == UNBORN));
    }

    #[test]
    fn a_vacated_slot_is_taken_over_only_by_a_spawn() {
        let mut t = SlotTable::new(2);
        t.occupy(0, entity(7, 1), Sight::default(), 1);
        t.ids.end_tick();
        let gone = Gone {
            slot: 0,
            id: 7,
            layers: 7,
            pos: Pos::from_ints(1, 2),
            cell: 107,
        };
        t.vacate(0);
        assert!(!t.taken_over(&gone));
        t.occupy(0, entity(8, 1), Sight::default(), 2);
        assert!(t.taken_over(&gone));
        t.vacate(0);
        assert!(t.taken_over(&gone), "the slot's id is the newcomer's");
    }
}
