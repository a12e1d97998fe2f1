//! One bit per entity slot, for the per-tick sets a view rebuild tests
//! (subjects due an update, slots churned this tick), and for the slots
//! that hold observers.
//!
//! A set of `max_entities` bits is an eighth of a byte per slot, so at
//! realistic sizes it stays in the first-level cache, where per-slot records
//! scattered over the entity table would miss. Every per-tick set is emptied
//! by the code that filled it, by clearing exactly the bits it set.

use alloc::vec;
use alloc::vec::Vec;

pub(crate) struct SlotBits {
    words: Vec<u64>,
}

impl SlotBits {
    pub(crate) fn new(slots: u32) -> Self {
        SlotBits {
            words: vec![0; (slots as usize).div_ceil(64)],
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, slot: u32) -> bool {
        self.words
            .get(slot as usize / 64)
            .is_some_and(|w| w >> (slot % 64) & 1 == 1)
    }

    /// Adds `slot` when `on`, without a branch on `on`.
    #[inline(always)]
    pub(crate) fn set_if(&mut self, slot: u32, on: bool) {
        if let Some(w) = self.words.get_mut(slot as usize / 64) {
            *w |= u64::from(on) << (slot % 64);
        }
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, slot: u32) {
        self.set_if(slot, true);
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self, slot: u32) {
        if let Some(w) = self.words.get_mut(slot as usize / 64) {
            *w &= !(1 << (slot % 64));
        }
    }

    /// Empties the set.
    pub(crate) fn clear_all(&mut self) {
        self.words.fill(0);
    }

    /// How many slots are in the set.
    pub(crate) fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// The slots in the set, ascending.
    pub(crate) fn ones(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().zip(0u32..).flat_map(|(&word, k)| {
            let rest = |&w: &u64| Some(w & w.wrapping_sub(1)).filter(|&w| w != 0);
            core::iter::successors(Some(word).filter(|&w| w != 0), rest)
                // Fewer than 2^32 slots: k × 64 + 63 fits.
                .map(move |w| k * 64 + w.trailing_zeros())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SlotBits;

    #[test]
    fn bits_are_independent_and_out_of_range_is_empty() {
        let mut bits = SlotBits::new(130);
        bits.set(0);
        bits.set(64);
        bits.set_if(129, true);
        bits.set_if(1, false);
        assert!(bits.get(0) && bits.get(64) && bits.get(129));
        assert!(!bits.get(1) && !bits.get(63) && !bits.get(128));
        bits.clear(64);
        assert!(!bits.get(64) && bits.get(0));
        bits.set(1 << 20);
        assert!(!bits.get(1 << 20));
        bits.set(63);
        assert!(bits.ones().eq([0, 63, 129]));
        assert_eq!(SlotBits::new(200).ones().next(), None);
    }
}
