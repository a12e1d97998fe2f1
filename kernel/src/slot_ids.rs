//! Which entity id each slot holds, and which slots changed hands this tick.
//!
//! Views and scans name subjects by slot; ids are looked up here. A slot
//! despawned or spawned into during a tick is *churned*: old view entries
//! naming it (end of last tick) mean its prior occupant, whose id is kept
//! until the tick ends.

use alloc::vec;
use alloc::vec::Vec;

use crate::command::EntityId;
use crate::permutation::Permutation;
use crate::slot_bits::SlotBits;

pub(crate) struct SlotIds {
    /// The current occupant's id (stale when vacant).
    ids: Vec<EntityId>,
    /// The occupant at the start of this tick, for churned slots.
    prior: Vec<EntityId>,
    churned: SlotBits,
    /// The churned slots, to clear them at the end of the tick.
    churn: Vec<u32>,
    /// Whether live slots ascend by id, so that a view (ascending by id)
    /// ascends by slot too and is searched without looking ids up. A
    /// despawn keeps it (old entries of a vacant slot still name its prior
    /// id, in order); the world clears it when a spawn breaks the order,
    /// and sets it again once it has checked the order.
    in_order: bool,
}

impl SlotIds {
    pub(crate) fn new(slots: u32) -> Self {
        let n = slots as usize;
        SlotIds {
            ids: vec![0; n],
            prior: vec![0; n],
            churned: SlotBits::new(slots),
            churn: Vec::with_capacity(n),
            in_order: true,
        }
    }

    /// Where the occupant of `slot` is (`Ok`) or would go (`Err`) in
    /// `view`, slots in ascending order of their occupants' ids.
    pub(crate) fn search(&self, view: &[u32], slot: u32) -> Result<usize, usize> {
        if self.in_order {
            // Each probe is one load instead of two dependent ones.
            view.binary_search(&slot)
        } else {
            view.binary_search_by_key(&self.id(slot), |&s| self.id(s))
        }
    }

    /// The key that orders the current occupant of `slot` by id among
    /// live slots: the slot itself while slots ascend by id, sparing the
    /// look-up.
    #[inline(always)]
    pub(crate) fn key(&self, slot: u32) -> EntityId {
        if self.in_order {
            EntityId::from(slot)
        } else {
            self.id(slot)
        }
    }

    /// Whether live slots ascend by id.
    pub(crate) fn in_order(&self) -> bool {
        self.in_order
    }

    /// Records whether live slots ascend by id; call between ticks, after
    /// checking.
    pub(crate) fn set_in_order(&mut self, in_order: bool) {
        self.in_order = in_order;
    }

    /// The id of the slot's current occupant.
    #[inline(always)]
    pub(crate) fn id(&self, slot: u32) -> EntityId {
        self.ids[slot as usize]
    }

    /// The id an old view entry (end of last tick) names.
    #[inline(always)]
    pub(crate) fn old(&self, slot: u32) -> EntityId {
        if self.churned.get(slot) {
            self.prior[slot as usize]
        } else {
            self.ids[slot as usize]
        }
    }

    /// Whether the slot changed hands this tick.
    #[inline(always)]
    pub(crate) fn churned(&self, slot: u32) -> bool {
        self.churned.get(slot)
    }

    /// Whether any slot changed hands this tick.
    pub(crate) fn any_churned(&self) -> bool {
        !self.churn.is_empty()
    }

    /// Records that the slot's occupant is despawned or replaced this tick;
    /// call before its id changes.
    pub(crate) fn churn(&mut self, slot: u32) {
        if !self.churned.get(slot) {
            self.churned.set(slot);
            self.churn.push(slot);
            self.prior[slot as usize] = self.ids[slot as usize];
        }
    }

    /// A new occupant; the slot must be churned first.
    pub(crate) fn set(&mut self, slot: u32, id: EntityId) {
        self.ids[slot as usize] = id;
    }

    /// Moves every id to its slot's new number; between ticks only, when
    /// no slot is churned.
    pub(crate) fn renumber(&mut self, r: &mut Permutation) {
        debug_assert!(self.churn.is_empty());
        r.permute(&mut self.ids);
        self.in_order = true;
    }

    /// Ends the tick: no slot is churned any more.
    pub(crate) fn end_tick(&mut self) {
        for &slot in &self.churn {
            self.churned.clear(slot);
        }
        self.churn.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::SlotIds;

    #[test]
    fn churned_slots_keep_their_prior_id_until_the_tick_ends() {
        let mut ids = SlotIds::new(4);
        ids.churn(1);
        ids.set(1, 10);
        ids.end_tick();
        assert_eq!((ids.id(1), ids.old(1)), (10, 10));
        ids.churn(1);
        ids.set(1, 20);
        ids.churn(1);
        assert!(ids.churned(1) && ids.any_churned());
        assert_eq!((ids.id(1), ids.old(1)), (20, 10));
        ids.end_tick();
        assert!(!ids.churned(1) && !ids.any_churned());
        assert_eq!(ids.old(1), 20);
    }

    #[test]
    fn views_are_searched_by_slot_only_while_slots_ascend_by_id() {
        let mut ids = SlotIds::new(4);
        for (slot, id) in [(0, 5), (1, 7), (2, 9), (3, 11)] {
            ids.churn(slot);
            ids.set(slot, id);
        }
        ids.end_tick();
        ids.set_in_order(true);
        assert_eq!(ids.search(&[0, 2, 3], 2), Ok(1));
        assert_eq!(ids.search(&[0, 2, 3], 1), Err(1));
        assert_eq!((ids.key(1), ids.key(3)), (1, 3));

        // Slot 0 now holds the largest id: a view ascending by id lists it
        // last, and searching it by slot would look in the wrong place.
        ids.churn(0);
        ids.set(0, 20);
        ids.set_in_order(false);
        assert_eq!(ids.search(&[2, 3, 0], 0), Ok(2));
        assert_eq!(ids.search(&[2, 3, 0], 1), Err(0));
        assert_eq!(ids.key(0), 20);
        ids.end_tick();
        assert_eq!(ids.search(&[1, 2, 0], 0), Ok(2));
    }
}
