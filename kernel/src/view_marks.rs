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

    #[inline(always)]
    pub(crate) fn was(&self, slot: u32) -> bool {
        self.marks.get(slot as usize).is_some_and(|&m| m & WAS != 0)
    }

    /// The marks to set and clear, as a plain slice. A loop that marks
    /// through it keeps its address and length in registers; through
    /// `self`, they are loaded again after every mark, since a byte store
    /// may change any memory as far as the compiler can tell.
    #[inline(always)]
    pub(crate) fn slice(&mut self) -> MarkSlice<'_> {
        MarkSlice(&mut self.marks)
    }
}

/// [`ViewMarks`] borrowed for marking: see [`ViewMarks::slice`].
pub(crate) struct MarkSlice<'a>(&'a mut [u8]);

impl MarkSlice<'_> {
    /// Marks an old view entry as visible before, when `on`; the slot must
    /// be unmarked.
    #[inline(always)]
    pub(crate) fn set_was(&mut self, slot: u32, on: bool) {
        if let Some(m) = self.0.get_mut(slot as usize) {
            *m = u8::from(on);
        }
    }

    /// Marks a new view entry; returns whether it was in the old view.
    #[inline(always)]
    pub(crate) fn set_now(&mut self, slot: u32) -> bool {
        match self.0.get_mut(slot as usize) {
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
        self.0.get(slot as usize) == Some(&(WAS | NOW))
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self, slot: u32) {
        if let Some(m) = self.0.get_mut(slot as usize) {
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
        let mut m = marks.slice();
        m.set_was(0, true);
        m.set_was(1, false);
        assert!(m.set_now(0));
        assert!(!m.set_now(2));
        assert!(m.kept(0) && !m.kept(1) && !m.kept(2));
        assert!(marks.was(0) && !marks.was(1) && !marks.was(2));
        let mut m = marks.slice();
        m.clear(0);
        assert!(!m.kept(0));
        assert!(!m.set_now(9));
        assert!(!m.kept(9));
        assert!(!marks.was(0));
    }
}
