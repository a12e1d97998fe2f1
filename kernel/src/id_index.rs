//! Entity id → slot lookup with a capacity fixed at construction.
//!
//! Open addressing with linear probing and backward-shift deletion. It is
//! only ever probed, never iterated, so its layout cannot leak into outputs.
//!
//! The table holds slots only: an entry's id is its slot's current
//! occupant's, read from the slot table's ids ([`SlotIds`]), which every
//! method is given. So the index must change with the occupants: an id is
//! inserted once its slot holds it, and removed while it still does.

use alloc::vec;
use alloc::vec::Vec;

use crate::digest::mix64;
use crate::permutation::Permutation;
use crate::slot_ids::SlotIds;

const EMPTY: u32 = u32::MAX;

pub(crate) struct IdIndex {
    slots: Vec<u32>,
    mask: usize,
}

fn spread(id: u64) -> u64 {
    // splitmix64: cheap and scatters sequential ids.
    mix64(id.wrapping_add(0x9e37_79b9_7f4a_7c15))
}

impl IdIndex {
    /// An index for up to `capacity` ids; the table is kept at most half
    /// full (4 bytes an entry: 8 to 16 bytes per id of capacity).
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        let size = (capacity as usize * 2).next_power_of_two().max(8);
        IdIndex {
            slots: vec![EMPTY; size],
            mask: size - 1,
        }
    }

    fn home(&self, id: u64) -> usize {
        (spread(id) as usize) & self.mask
    }

    /// The slot of `id`, if indexed.
    pub(crate) fn get(&self, id: u64, ids: &SlotIds) -> Option<u32> {
        let mut i = self.home(id);
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if ids.id(slot) == id {
                return Some(slot);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Indexes `slot`, which holds an id not indexed yet. The caller
    /// bounds the count by the capacity.
    pub(crate) fn insert(&mut self, slot: u32, ids: &SlotIds) {
        let mut i = self.home(ids.id(slot));
        while self.slots[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = slot;
    }

    /// Gives every indexed id its slot's new number.
    pub(crate) fn renumber(&mut self, r: &Permutation) {
        for slot in &mut self.slots {
            if *slot != EMPTY {
                *slot = r.to(*slot);
            }
        }
    }

    /// Removes `id`, whose slot still holds it, if indexed.
    pub(crate) fn remove(&mut self, id: u64, ids: &SlotIds) {
        let mut i = self.home(id);
        loop {
            if self.slots[i] == EMPTY {
                return;
            }
            if ids.id(self.slots[i]) == id {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        while self.slots[j] != EMPTY {
            let home = self.home(ids.id(self.slots[j]));
            // Move j into the hole unless its home lies cyclically in (hole, j].
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.slots[hole] = EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_keeps_every_other_key() {
        let mut ids = SlotIds::new(64);
        let mut idx = IdIndex::with_capacity(64);
        for slot in 0..64u32 {
            ids.set(slot, u64::from(slot) * 7919);
            idx.insert(slot, &ids);
        }
        for slot in (0..64u32).step_by(3) {
            idx.remove(u64::from(slot) * 7919, &ids);
        }
        for slot in 0..64u32 {
            let expect = if slot % 3 == 0 { None } else { Some(slot) };
            assert_eq!(idx.get(u64::from(slot) * 7919, &ids), expect, "slot {slot}");
        }
        idx.remove(12345, &ids); // absent: no effect
        assert_eq!(idx.get(7919, &ids), Some(1));
    }
}
