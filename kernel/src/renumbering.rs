//! A new numbering of the entity slots, and its application to the per-slot
//! arrays in place.
//!
//! Observers are rebuilt in id order, and commands usually name entities in
//! a steady order too. When slots follow ids, that work reads the per-slot
//! arrays as streams; once churn has shuffled them, every observer costs a
//! few scattered cache lines more (measured: 17% at 10k entities, 35% at
//! 100k). Renumbering puts the live slots back in id order. Slots never
//! reach outputs, so it changes nothing a caller can see.

use alloc::vec::Vec;

use crate::slot_bits::SlotBits;

pub(crate) struct Renumbering {
    /// Per old slot, its new slot.
    to: Vec<u32>,
    /// The live slots in their new order, while planning.
    order: Vec<u32>,
    /// Slots already in place, while permuting.
    placed: SlotBits,
}

impl Renumbering {
    pub(crate) fn new(slots: u32) -> Self {
        Renumbering {
            to: (0..slots).collect(),
            order: Vec::with_capacity(slots as usize),
            placed: SlotBits::new(slots),
        }
    }

    /// Numbers the `live` slots `0..` ascending by `key` (distinct per live
    /// slot), and the others after them in their present order.
    pub(crate) fn plan(&mut self, live: impl Iterator<Item = u32>, key: impl Fn(u32) -> u64) {
        self.order.clear();
        self.order.extend(live);
        self.order.sort_unstable_by_key(|&s| key(s));
        self.placed.clear_all();
        for &s in &self.order {
            self.placed.set(s);
        }
        let (to, placed) = (&mut self.to, &self.placed);
        let vacant = (0..to.len() as u32).filter(|&s| !placed.get(s));
        for (new, old) in (0..).zip(self.order.iter().copied().chain(vacant)) {
            if let Some(at) = to.get_mut(old as usize) {
                *at = new;
            }
        }
    }

    /// The new number of `slot`; a number that names no slot (such as a
    /// list's end marker) stays as it is.
    #[inline(always)]
    pub(crate) fn slot(&self, slot: u32) -> u32 {
        self.to.get(slot as usize).copied().unwrap_or(slot)
    }

    /// Moves every item to its slot's new number. Items beyond the slots
    /// stay where they are.
    pub(crate) fn permute<T>(&mut self, items: &mut [T]) {
        self.placed.clear_all();
        let n = items.len().min(self.to.len());
        for start in 0..n {
            if self.placed.get(start as u32) {
                continue;
            }
            self.placed.set(start as u32);
            // Follow the cycle through `start`: each swap puts the item
            // held at `start` where it belongs and takes in the next one.
            let mut next = self.to[start] as usize;
            while next != start && next < n {
                items.swap(start, next);
                self.placed.set(next as u32);
                next = self.to[next] as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Renumbering;
    use alloc::vec::Vec;

    #[test]
    fn live_slots_come_first_by_key_and_items_follow_their_slots() {
        let mut r = Renumbering::new(6);
        // Live slots 4, 1, 3 with keys 30, 20, 10; 0, 2 and 5 are vacant.
        let key = |s: u32| [0, 20, 0, 10, 30, 0][s as usize];
        r.plan([4, 1, 3].into_iter(), key);
        let to: Vec<u32> = (0..6).map(|s| r.slot(s)).collect();
        assert_eq!(to, [3, 1, 4, 0, 2, 5]);
        assert_eq!(r.slot(u32::MAX), u32::MAX);
        let mut items = ['a', 'b', 'c', 'd', 'e', 'f'];
        r.permute(&mut items);
        assert_eq!(items, ['d', 'b', 'e', 'a', 'c', 'f']);
    }
}
