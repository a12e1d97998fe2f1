//! The old and new view of the observer being rebuilt, one byte per slot.
//!
//! A byte per slot rather than a bit: neighbouring slots never share a
//! word, so marking one entry never waits on the store of the previous one
//! (view entries are sorted by id, which often means by slot as well).
//! Every mark is cleared by the rebuild that set it.

use alloc::vec;
use alloc::vec::Vec;

const WAS: u8 = 1;
const NOW: u8 = 2;

pub(crate) struct ViewMarks {
    marks: Vec<u8>,
}

impl ViewMarks {
    pub(crate) fn new(slots: u32) -> Self {
        ViewMarks {
            marks: vec![0; slots as usize],
        }
    }

    /// Marks an old view entry as visible before, when `on`; the slot must
    /// be unmarked.
    #[inline(always)]
    pub(crate) fn set_was(&mut self, slot: u32, on: bool) {
        if let Some(m) = self.marks.get_mut(slot as usize) {
            *m = u8::from(on);
        }
    }

    #[inline(always)]
    pub(crate) fn was(&self, slot: u32) -> bool {
        self.marks.get(slot as usize).is_some_and(|&m| m & WAS != 0)
    }

    /// Marks a new view entry; returns whether it was in the old view.
    #[inline(always)]
    pub(crate) fn set_now(&mut self, slot: u32) -> bool {
        match self.marks.get_mut(slot as usize) {
            Some(m) => {
                let was = *m;
                *m = was | NOW;
                was & WAS != 0
            }
            None => false,
        }
    }

    /// Visible before and after.
    #[inline(always)]
    pub(crate) fn kept(&self, slot: u32) -> bool {
        self.marks.get(slot as usize) == Some(&(WAS | NOW))
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self, slot: u32) {
        if let Some(m) = self.marks.get_mut(slot as usize) {
            *m = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ViewMarks;

    #[test]
    fn was_and_now_make_kept_and_clear_resets() {
        let mut marks = ViewMarks::new(4);
        marks.set_was(0, true);
        marks.set_was(1, false);
        assert!(marks.set_now(0));
        assert!(!marks.set_now(2));
        assert!(marks.kept(0) && marks.was(0));
        assert!(!marks.kept(1) && !marks.was(1));
        assert!(!marks.kept(2) && !marks.was(2));
        marks.clear(0);
        assert!(!marks.was(0) && !marks.kept(0));
        assert!(!marks.set_now(9));
        assert!(!marks.kept(9));
    }
}
