//! Per-observer view sets: the subjects each observer saw at the end of the last tick.
//!
//! Every observer slot owns `max_view` entries reserved at construction; a
//! view is kept sorted by subject id, which is the order its events go out in.

use alloc::vec;
use alloc::vec::Vec;

pub(crate) struct Views {
    max_view: usize,
    ids: Vec<u64>,
    slots: Vec<u32>,
    len: Vec<u32>,
    free: Vec<u32>,
}

impl Views {
    pub(crate) fn new(max_observers: u32, max_view: u32) -> Self {
        let total = max_observers as usize * max_view as usize;
        Views {
            max_view: max_view as usize,
            ids: vec![0; total],
            slots: vec![0; total],
            len: vec![0; max_observers as usize],
            // Popped from the back: hand out low slots first.
            free: (0..max_observers).rev().collect(),
        }
    }

    /// Reserves an empty view, or `None` when every observer slot is taken.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        let v = self.free.pop()?;
        self.len[v as usize] = 0;
        Some(v)
    }

    pub(crate) fn release(&mut self, v: u32) {
        self.len[v as usize] = 0;
        self.free.push(v);
    }

    fn range(&self, v: u32) -> core::ops::Range<usize> {
        let start = v as usize * self.max_view;
        start..start + self.len[v as usize] as usize
    }

    /// Subject ids, ascending.
    pub(crate) fn ids(&self, v: u32) -> &[u64] {
        &self.ids[self.range(v)]
    }

    /// Subject entity slots, parallel to [`Views::ids`].
    pub(crate) fn slots(&self, v: u32) -> &[u32] {
        &self.slots[self.range(v)]
    }

    /// Rewrites a view as its entries flagged in `keep` (one flag per
    /// entry, in order), merged with `entered` (ascending, disjoint from the
    /// kept ids). The caller guarantees the result fits `max_view`.
    pub(crate) fn rewrite(&mut self, v: u32, keep: &[bool], entered: &[(u64, u32)]) {
        let start = v as usize * self.max_view;
        let len = self.len[v as usize] as usize;
        let (ids, slots) = (
            &mut self.ids[start..start + self.max_view],
            &mut self.slots[start..start + self.max_view],
        );
        let mut kept = 0;
        for k in 0..len {
            if keep.get(k).copied().unwrap_or(false) {
                ids[kept] = ids[k];
                slots[kept] = slots[k];
                kept += 1;
            }
        }
        let total = (kept + entered.len()).min(self.max_view);
        // Merge from the back so neither input is overwritten before it is read.
        let (mut i, mut j, mut w) = (kept, entered.len(), total);
        while j > 0 && w > 0 {
            w -= 1;
            if i > 0 && ids[i - 1] > entered[j - 1].0 {
                i -= 1;
                ids[w] = ids[i];
                slots[w] = slots[i];
            } else {
                j -= 1;
                (ids[w], slots[w]) = entered[j];
            }
        }
        // total ≤ max_view ≤ 2^22, so it fits.
        self.len[v as usize] = total as u32;
    }

    /// Replaces a view with `entries` (ascending ids, at most `max_view`).
    pub(crate) fn set(&mut self, v: u32, entries: impl ExactSizeIterator<Item = (u64, u32)>) {
        let n = entries.len().min(self.max_view);
        let start = v as usize * self.max_view;
        for (k, (id, slot)) in entries.take(n).enumerate() {
            self.ids[start + k] = id;
            self.slots[start + k] = slot;
        }
        // n ≤ max_view ≤ 2^31, so it fits.
        self.len[v as usize] = n as u32;
    }
}
