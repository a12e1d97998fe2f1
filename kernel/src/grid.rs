//! Cell membership: which entities, and which observers, are in each cell.
//!
//! Two intrusive doubly-linked lists per cell (all entities, observers only),
//! threaded through per-slot link arrays, so insert, remove and re-cell are
//! O(1) and never allocate. The all-entities list is threaded through
//! [`Member`] records that also carry what a view rebuild reads of every
//! candidate, so a scan touches one 32-byte record per entity.

use alloc::vec;
use alloc::vec::Vec;

use crate::fixed_point::Pos;
use crate::permutation::Permutation;

pub(crate) const NIL: u32 = u32::MAX;

/// What a view rebuild reads of each candidate, plus the list link.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member {
    pub(crate) pos: Pos,
    pub(crate) layers: u32,
    next: u32,
}

const VACANT: Member = Member {
    pos: Pos::new(crate::Fix::ZERO, crate::Fix::ZERO),
    layers: 0,
    next: NIL,
};

/// The all-entities lists: a head per cell, a [`Member`] and a back link per slot.
struct MemberLists {
    heads: Vec<u32>,
    members: Vec<Member>,
    prev: Vec<u32>,
}

impl MemberLists {
    fn new(cells: usize, slots: usize) -> Self {
        MemberLists {
            heads: vec![NIL; cells],
            members: vec![VACANT; slots],
            prev: vec![NIL; slots],
        }
    }

    fn insert(&mut self, cell: u32, slot: u32, member: Member) {
        let head = self.heads[cell as usize];
        self.members[slot as usize] = Member {
            next: head,
            ..member
        };
        self.prev[slot as usize] = NIL;
        if head != NIL {
            self.prev[head as usize] = slot;
        }
        self.heads[cell as usize] = slot;
    }

    fn remove(&mut self, cell: u32, slot: u32) {
        let (n, p) = (self.members[slot as usize].next, self.prev[slot as usize]);
        if p == NIL {
            self.heads[cell as usize] = n;
        } else {
            self.members[p as usize].next = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
    }
}

/// Iterates `(slot, member)` of one cell.
pub(crate) struct MemberIter<'a> {
    members: &'a [Member],
    at: u32,
}

impl<'a> Iterator for MemberIter<'a> {
    type Item = (u32, &'a Member);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == NIL {
            return None;
        }
        let slot = self.at;
        let member = &self.members[slot as usize];
        self.at = member.next;
        Some((slot, member))
    }
}

/// One intrusive list family: a head per cell, links per entity slot.
struct Lists {
    heads: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
}

impl Lists {
    fn new(cells: usize, slots: usize) -> Self {
        Lists {
            heads: vec![NIL; cells],
            next: vec![NIL; slots],
            prev: vec![NIL; slots],
        }
    }

    fn insert(&mut self, cell: u32, slot: u32) {
        let head = self.heads[cell as usize];
        self.next[slot as usize] = head;
        self.prev[slot as usize] = NIL;
        if head != NIL {
            self.prev[head as usize] = slot;
        }
        self.heads[cell as usize] = slot;
    }

    fn remove(&mut self, cell: u32, slot: u32) {
        let (n, p) = (self.next[slot as usize], self.prev[slot as usize]);
        if p == NIL {
            self.heads[cell as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
    }

    /// Appends the slots of every cell in `cells` to `out`, walking up to
    /// eight lists side by side: each step along a list waits for the one
    /// before, so walking one list at a time leaves memory idle.
    fn extend_from(&self, cells: impl Iterator<Item = u32>, out: &mut Vec<u32>) {
        const WAYS: usize = 8;
        let mut cells = cells.map(|c| self.heads.get(c as usize).copied().unwrap_or(NIL));
        loop {
            let mut at = [NIL; WAYS];
            let mut started = 0;
            for (a, head) in at.iter_mut().zip(cells.by_ref()) {
                *a = head;
                started += 1;
            }
            if started == 0 {
                return;
            }
            let mut live = true;
            while live {
                live = false;
                for a in &mut at {
                    if *a != NIL {
                        out.push(*a);
                        *a = self.next.get(*a as usize).copied().unwrap_or(NIL);
                        live = true;
                    }
                }
            }
        }
    }
}

/// Cell coordinates and cell membership of a `width × height` grid.
pub(crate) struct Grid {
    pub(crate) width: u32,
    pub(crate) height: u32,
    columns: Columns,
    all: MemberLists,
    observers: Lists,
    /// Observers per cell.
    observer_counts: Vec<u32>,
    /// Entities per cell.
    member_counts: Vec<u32>,
}

/// An inclusive rectangle of cells, already clamped to the grid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellRect {
    x0: u32,
    x1: u32,
    y0: u32,
    y1: u32,
    width: u32,
}

impl CellRect {
    /// Each row of the rectangle as the index range `first..=last` of its cells.
    pub(crate) fn rows(self) -> impl Iterator<Item = (u32, u32)> {
        (self.y0..=self.y1).map(move |y| (y * self.width + self.x0, y * self.width + self.x1))
    }

    /// The part of the rectangle in columns `x0..=x1` and rows `y0..=y1`;
    /// the ranges must overlap it.
    pub(crate) fn clip(self, (x0, x1): (u32, u32), (y0, y1): (u32, u32)) -> CellRect {
        CellRect {
            x0: self.x0.max(x0),
            x1: self.x1.min(x1),
            y0: self.y0.max(y0),
            y1: self.y1.min(y1),
            width: self.width,
        }
    }

    /// Each row of the rectangle as ranges `first..=last` of its cells,
    /// leaving out the cells that are also in `other`.
    pub(crate) fn rows_outside(self, other: CellRect) -> impl Iterator<Item = (u32, u32)> {
        (self.y0..=self.y1).flat_map(move |y| {
            let row =
                |x0: u32, x1: u32| (x0 <= x1).then(|| (y * self.width + x0, y * self.width + x1));
            let overlaps =
                (other.y0..=other.y1).contains(&y) && other.x0 <= self.x1 && self.x0 <= other.x1;
            let (left, right) = match overlaps {
                false => (row(self.x0, self.x1), None),
                true => (
                    other.x0.checked_sub(1).and_then(|x1| row(self.x0, x1)),
                    row(other.x1 + 1, self.x1),
                ),
            };
            left.into_iter().chain(right)
        })
    }

    /// Every cell index in the rectangle, row by row.
    pub(crate) fn cells(self) -> impl Iterator<Item = u32> {
        (self.y0..=self.y1).flat_map(move |y| (self.x0..=self.x1).map(move |x| y * self.width + x))
    }
}

impl Grid {
    pub(crate) fn new(width: u32, height: u32, slots: u32) -> Self {
        let cells = width as usize * height as usize;
        Grid {
            width,
            height,
            columns: Columns::new(width),
            all: MemberLists::new(cells, slots as usize),
            observers: Lists::new(cells, slots as usize),
            observer_counts: vec![0; cells],
            member_counts: vec![0; cells],
        }
    }

    /// The index of cell `(x, y)`.
    pub(crate) fn index(&self, (x, y): (u32, u32)) -> u32 {
        y * self.width + x
    }

    /// The `(x, y)` of a cell index.
    pub(crate) fn xy(&self, cell: u32) -> (u32, u32) {
        self.columns.xy(cell)
    }

    /// Chebyshev distance between two cells, in cells.
    pub(crate) fn cell_distance(&self, a: u32, b: u32) -> u32 {
        chebyshev(self.xy(a), self.xy(b))
    }

    /// The cells within `ring` cells of `cell` on both axes, clamped to the grid.
    pub(crate) fn ring(&self, cell: u32, ring: u32) -> CellRect {
        let (x, y) = self.xy(cell);
        CellRect {
            x0: x.saturating_sub(ring),
            x1: x.saturating_add(ring).min(self.width - 1),
            y0: y.saturating_sub(ring),
            y1: y.saturating_add(ring).min(self.height - 1),
            width: self.width,
        }
    }

    pub(crate) fn insert(&mut self, cell: u32, slot: u32, observer: bool, pos: Pos, layers: u32) {
        let member = Member {
            pos,
            layers,
            next: NIL,
        };
        self.all.insert(cell, slot, member);
        self.member_counts[cell as usize] += 1;
        if observer {
            self.observers.insert(cell, slot);
            self.observer_counts[cell as usize] += 1;
        }
    }

    pub(crate) fn remove(&mut self, cell: u32, slot: u32, observer: bool) {
        self.all.remove(cell, slot);
        self.member_counts[cell as usize] -= 1;
        if observer {
            self.observers.remove(cell, slot);
            self.observer_counts[cell as usize] -= 1;
        }
    }

    /// Moves every slot's records and links to its new number. Each cell's
    /// lists keep their order.
    pub(crate) fn renumber(&mut self, r: &mut Permutation) {
        let all = &mut self.all;
        r.permute(&mut all.members);
        r.permute(&mut all.prev);
        for m in &mut all.members {
            m.next = r.to(m.next);
        }
        for link in all.prev.iter_mut().chain(&mut all.heads) {
            *link = r.to(*link);
        }
        let observers = &mut self.observers;
        r.permute(&mut observers.next);
        r.permute(&mut observers.prev);
        let links = observers.next.iter_mut().chain(&mut observers.prev);
        for link in links.chain(&mut observers.heads) {
            *link = r.to(*link);
        }
    }

    /// Records a move within the same cell.
    pub(crate) fn set_pos(&mut self, slot: u32, pos: Pos) {
        self.all.members[slot as usize].pos = pos;
    }

    /// Every slot's member record, vacant slots included (stale).
    pub(crate) fn all_members(&self) -> &[Member] {
        &self.all.members
    }

    /// Every `(slot, member)` in `cell`.
    pub(crate) fn members(&self, cell: u32) -> MemberIter<'_> {
        MemberIter {
            members: &self.all.members,
            at: self.all.heads[cell as usize],
        }
    }

    /// Appends the observer slots of every cell in `cells` to `out`.
    pub(crate) fn observers_in(&self, cells: impl Iterator<Item = u32>, out: &mut Vec<u32>) {
        self.observers.extend_from(cells, out);
    }

    /// How many entities stand in each cell, by cell.
    pub(crate) fn member_counts(&self) -> &[u32] {
        &self.member_counts
    }

    /// How many observers stand in each cell, by cell.
    pub(crate) fn observer_counts(&self) -> &[u32] {
        &self.observer_counts
    }

    /// How many observers stand in `cells`.
    pub(crate) fn observers_counted(&self, cells: CellRect) -> u64 {
        cells
            .cells()
            .map(|c| u64::from(self.observer_counts[c as usize]))
            .sum()
    }

    /// How many entities stand in `cells`.
    pub(crate) fn members_counted(&self, cells: CellRect) -> u64 {
        cells
            .cells()
            .map(|c| u64::from(self.member_counts[c as usize]))
            .sum()
    }

    /// The observer slots of one cell.
    pub(crate) fn observers(&self, cell: u32) -> impl Iterator<Item = u32> + '_ {
        let next = &self.observers.next;
        let head = self
            .observers
            .heads
            .get(cell as usize)
            .copied()
            .unwrap_or(NIL);
        core::iter::successors(Some(head), move |&s| next.get(s as usize).copied())
            .take_while(|&s| s != NIL)
    }
}

/// Cell index to column and row without a division: pairing asks for
/// them for every observer a subject meets. With `m = ⌊2^48 / width⌋ + 1`,
/// `cell × m / 2^48` lies in `[cell / width, cell / width + 2^-24)` for
/// every `cell < 2^24` and `1 ≤ width ≤ 2^24` (the largest grid), and the
/// floor of that is the quotient.
#[derive(Clone, Copy, Debug)]
struct Columns {
    width: u32,
    magic: u64,
}

impl Columns {
    fn new(width: u32) -> Self {
        let width = width.max(1);
        Columns {
            width,
            magic: (1u64 << 48) / u64::from(width) + 1,
        }
    }

    fn xy(&self, cell: u32) -> (u32, u32) {
        let row = ((u128::from(cell) * u128::from(self.magic)) >> 48) as u32;
        (cell.wrapping_sub(row.wrapping_mul(self.width)), row)
    }
}

/// Chebyshev distance between two cells given as column and row, in
/// cells: [`Grid::cell_distance`] without the divisions.
pub(crate) fn chebyshev(a: (u32, u32), b: (u32, u32)) -> u32 {
    a.0.abs_diff(b.0).max(a.1.abs_diff(b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_by_multiply_match_division() {
        let max = crate::config::MAX_CELLS as u32;
        for width in [1, 2, 3, 7, 100, 4095, 4096, 65_537, max - 1, max] {
            let g = Columns::new(width);
            let near = |c: u32| [c.saturating_sub(1), c, c.saturating_add(1)];
            let mut cells: alloc::vec::Vec<u32> = (1..=64).flat_map(|k| near(k * width)).collect();
            cells.extend((0..4096).map(|k| k * 4093 % max));
            cells.extend((0..64).map(|k| max - 1 - k * width.min(max / 64)));
            cells.extend([0, max - 1]);
            for cell in cells.into_iter().filter(|&c| c < max) {
                assert_eq!(
                    g.xy(cell),
                    (cell % width, cell / width),
                    "cell {cell}, width {width}"
                );
            }
        }
    }

    #[test]
    fn membership_follows_insert_and_remove() {
        let mut g = Grid::new(3, 3, 8);
        let p = Pos::from_ints(0, 0);
        g.insert(4, 0, false, p, 1);
        g.insert(4, 1, true, p, 1);
        g.insert(4, 2, false, p, 1);
        g.remove(4, 1, true);
        let mut got: Vec<u32> = g.members(4).map(|(slot, _)| slot).collect();
        got.sort_unstable();
        assert_eq!(got, [0, 2]);
        let mut observers = Vec::new();
        g.observers_in([4].into_iter(), &mut observers);
        assert!(observers.is_empty());
        g.insert(4, 3, true, p, 1);
        g.insert(4, 5, true, p, 1);
        g.insert(0, 6, true, p, 1);
        assert_eq!(g.observers(4).collect::<Vec<_>>(), [5, 3]);
        g.observers_in([4, 0, 1].into_iter(), &mut observers);
        observers.sort_unstable();
        assert_eq!(observers, [3, 5, 6]);
        let ring: Vec<u32> = g.ring(0, 1).cells().collect();
        assert_eq!(ring, [0, 1, 3, 4]);
        assert_eq!(g.cell_distance(0, 8), 2);
    }

    #[test]
    fn rows_outside_leave_out_the_other_rectangle() {
        let g = Grid::new(5, 5, 1);
        let rows = |a: CellRect, b: CellRect| a.rows_outside(b).collect::<Vec<_>>();
        // Around (2, 2) and around (3, 2): only column 4 is new.
        assert_eq!(
            rows(g.ring(13, 1), g.ring(12, 1)),
            [(9, 9), (14, 14), (19, 19)]
        );
        // Around (1, 1) minus around (2, 2): the top row whole, then column 0.
        assert_eq!(
            rows(g.ring(6, 1), g.ring(12, 1)),
            [(0, 2), (5, 5), (10, 10)]
        );
        // Disjoint: every row whole; covered: nothing.
        assert_eq!(rows(g.ring(0, 0), g.ring(24, 1)), [(0, 0)]);
        assert!(rows(g.ring(12, 0), g.ring(12, 1)).is_empty());
    }

    #[test]
    fn clipping_keeps_the_overlap() {
        let g = Grid::new(5, 5, 1);
        let cells = |r: CellRect| r.cells().collect::<Vec<_>>();
        // Around (2, 2), within columns 2..=4 and rows 0..=1.
        assert_eq!(cells(g.ring(12, 1).clip((2, 4), (0, 1))), [7, 8]);
        assert_eq!(
            cells(g.ring(12, 1).clip((0, 4), (0, 4))),
            cells(g.ring(12, 1))
        );
    }
}
