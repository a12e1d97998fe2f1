//! The view model: what one observer currently sees, entity id → state.
//!
//! The server keeps one per connection as the *shadow* of what the client
//! will hold once it has applied every batch sent so far; the client keeps
//! one built from the batches it applied. Both change only through the
//! batch codec ([`crate::batch`]), so they stay equal by construction.

use alloc::vec::Vec;

use lockgrid_kernel::{Dir, EntityId, Fix, Pos};

/// The state of one visible subject, as carried by Enter and Update events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seen {
    /// Position at the tick of the last Enter or Update.
    pub pos: Pos,
    /// Heading at that tick.
    pub dir: Dir,
    /// Speed at that tick.
    pub speed: Fix,
    /// Layer mask from the Enter.
    pub layers: u32,
}

impl Seen {
    /// Whether an Update to `pos`, `dir` and `speed` changes this state. A
    /// server sends only the Updates that do (or resets): a receiver never
    /// sees one that changes nothing, though the kernel reports some.
    pub fn changed_by(&self, pos: Pos, dir: Dir, speed: Fix) -> bool {
        (self.pos, self.dir, self.speed) != (pos, dir, speed)
    }
}

/// One observer's view: visible subjects sorted by id, with their last known state.
///
/// Lookups are binary searches; applying a batch is a linear merge, so no
/// hashing and no iteration-order surprises. Scratch space is kept between
/// batches, so steady-state use does not allocate.
#[derive(Clone, Default)]
pub struct View {
    pub(crate) entries: Vec<(EntityId, Seen)>,
    pub(crate) scratch: Scratch,
}

/// Reused buffers for applying one batch part.
#[derive(Clone, Default)]
pub(crate) struct Scratch {
    pub(crate) next: Vec<(EntityId, Seen)>,
    pub(crate) leaves: Vec<usize>,
    pub(crate) enters: Vec<(EntityId, Seen)>,
    pub(crate) updates: Vec<(usize, Seen)>,
}

impl Scratch {
    /// Room to merge views of up to `subjects` subjects and to stage up to
    /// `items` Leaves, Enters and Updates of one part, so that encoding
    /// within those bounds never grows it.
    pub(crate) fn with_room(subjects: usize, items: usize) -> Self {
        Scratch {
            next: Vec::with_capacity(subjects),
            leaves: Vec::with_capacity(items),
            enters: Vec::with_capacity(items),
            updates: Vec::with_capacity(items),
        }
    }
}

impl View {
    /// An empty view.
    pub fn new() -> Self {
        View::default()
    }

    /// Number of visible subjects.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The state of `id`, if visible.
    pub fn get(&self, id: EntityId) -> Option<&Seen> {
        self.entries
            .binary_search_by_key(&id, |e| e.0)
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|e| &e.1)
    }

    /// Whether `id` is visible.
    pub fn contains(&self, id: EntityId) -> bool {
        self.get(id).is_some()
    }

    /// Visible subjects in ascending id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (EntityId, &Seen)> + '_ {
        self.entries.iter().map(|(id, s)| (*id, s))
    }

    /// Visible subject ids in ascending order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = EntityId> + '_ {
        self.entries.iter().map(|e| e.0)
    }

    /// Forgets every subject (an observer that respawns starts from an empty view).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Makes room for `subjects` visible subjects at once.
    pub(crate) fn reserve(&mut self, subjects: usize) {
        self.entries
            .reserve(subjects.saturating_sub(self.entries.len()));
    }

    /// Merges the staged leaves and enters into `scratch.next`:
    /// `entries − leaves ∪ enters`, still sorted. The entries between two
    /// changes are copied as one run: a tick changes few of a view's
    /// entries.
    pub(crate) fn merge_staged(&mut self) {
        let Scratch {
            next,
            leaves,
            enters,
            ..
        } = &mut self.scratch;
        next.clear();
        // Exactly the merged length (leaves are distinct entries), so a
        // view never needs more room than it will hold.
        next.reserve((self.entries.len() + enters.len()).saturating_sub(leaves.len()));
        let entries = &self.entries[..];
        // Leaves are ascending indices into `entries`; each run copied
        // starts at or after every leave not yet passed.
        let mut leaves = leaves.iter().copied().peekable();
        let mut copy = |next: &mut Vec<(EntityId, Seen)>, mut from: usize, to: usize| {
            while let Some(l) = leaves.next_if(|&l| l < to) {
                next.extend_from_slice(&entries[from..l]);
                from = l + 1;
            }
            next.extend_from_slice(&entries[from..to]);
        };
        let mut from = 0;
        for en in enters.iter() {
            // A subject that left and entered again goes where it was.
            let at = from + entries[from..].partition_point(|e| e.0 < en.0);
            copy(next, from, at);
            next.push(*en);
            from = at;
        }
        copy(next, from, entries.len());
    }

    /// Makes the merged `scratch.next` the view.
    pub(crate) fn commit_merged(&mut self) {
        core::mem::swap(&mut self.entries, &mut self.scratch.next);
    }
}

impl PartialEq for View {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Eq for View {}

impl core::fmt::Debug for View {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}
