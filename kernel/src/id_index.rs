//! Entity id → slot lookup with a capacity fixed at construction.
//!
//! Open addressing with linear probing and backward-shift deletion. It is
//! only ever probed, never iterated, so its layout cannot leak into outputs.

use alloc::vec;
use alloc::vec::Vec;

use crate::digest::mix64;
use crate::permutation::Permutation;

const EMPTY: u32 = u32::MAX;

pub(crate) struct IdIndex {
    keys: Vec<u64>,
    slots: Vec<u32>,
    mask: usize,
}

fn spread(id: u64) -> u64 {
    // splitmix64: cheap and scatters sequential ids.
    mix64(id.wrapping_add(0x9e37_79b9_7f4a_7c15))
}

impl IdIndex {
    /// An index for up to `capacity` ids; the table is kept at most half full.
    pub(crate) fn with_capacity(capacity: u32) -> Self {
        let size = (capacity as usize * 2).next_power_of_two().max(8);
        IdIndex {
            keys: vec![0; size],
            slots: vec![EMPTY; size],
            mask: size - 1,
        }
    }

    fn home(&self, id: u64) -> usize {
        (spread(id) as usize) & self.mask
    }

    pub(crate) fn get(&self, id: u64) -> Option<u32> {
        let mut i = self.home(id);
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if self.keys[i] == id {
                return Some(slot);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts an id known to be absent. The caller bounds the count by the capacity.
    pub(crate) fn insert(&mut self, id: u64, slot: u32) {
        let mut i = self.home(id);
        while self.slots[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.keys[i] = id;
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

    pub(crate) fn remove(&mut self, id: u64) {
        let mut i = self.home(id);
        loop {
            if self.slots[i] == EMPTY {
                return;
            }
            if self.keys[i] == id {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        while self.slots[j] != EMPTY {
            let home = self.home(self.keys[j]);
            // Move j into the hole unless its home lies cyclically in (hole, j].
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.keys[hole] = self.keys[j];
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
        let mut idx = IdIndex::with_capacity(64);
        for id in 0..64u64 {
            idx.insert(id * 7919, id as u32);
        }
        for id in (0..64u64).step_by(3) {
            idx.remove(id * 7919);
        }
        for id in 0..64u64 {
            let expect = if id % 3 == 0 { None } else { Some(id as u32) };
            assert_eq!(idx.get(id * 7919), expect, "id {id}");
        }
        idx.remove(12345); // absent: no effect
        assert_eq!(idx.get(7919), Some(1));
    }
}
