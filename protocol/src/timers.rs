//! The connections' next deadlines, earliest first: an indexed binary
//! min-heap, so the server reads its earliest deadline in O(1), moves one
//! connection's deadline in O(log n) and finds the connections whose
//! deadline has passed in O(how many). Its vectors grow only when a
//! connection opens.

use alloc::vec::Vec;

use crate::time::Instant;

/// Where a slot is not in the heap.
const NOWHERE: u32 = u32::MAX;

/// A connection's place in [`Timers`], handed out by [`Timers::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerSlot(u32);

/// One slot: which connection holds it and where its entry sits in the heap.
#[derive(Clone, Copy, Debug)]
struct Slot {
    conn: u32,
    pos: u32,
}

/// Every open connection's earliest deadline.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// `(deadline, slot)`, a min-heap by deadline.
    heap: Vec<(Instant, u32)>,
    slots: Vec<Slot>,
    /// Slots of closed connections, for the next to open.
    free: Vec<u32>,
}

impl Timers {
    /// Enters a new connection `conn` with deadline `at`. The only call that
    /// may grow the vectors: every later call fits in what they hold.
    pub(crate) fn open(&mut self, conn: u32, at: Instant) -> TimerSlot {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot { conn, pos: NOWHERE });
                (self.slots.len() - 1) as u32
            }
        };
        // Room for every slot, so that closing and `due` never grow.
        self.free.reserve(self.slots.len() - self.free.len());
        self.heap.reserve(self.slots.len() - self.heap.len());
        self.slots[slot as usize] = Slot {
            conn,
            pos: self.heap.len() as u32,
        };
        self.heap.push((at, slot));
        self.sift_up(self.heap.len() - 1);
        TimerSlot(slot)
    }

    /// Moves a connection's deadline to `at`.
    pub(crate) fn set(&mut self, slot: TimerSlot, at: Instant) {
        let Some(&Slot { pos, .. }) = self.slots.get(slot.0 as usize) else {
            return;
        };
        let pos = pos as usize;
        let Some(entry) = self.heap.get_mut(pos) else {
            return;
        };
        let was = core::mem::replace(&mut entry.0, at);
        if at < was {
            self.sift_up(pos);
        } else if at > was {
            self.sift_down(pos);
        }
    }

    /// Forgets a closed connection; its slot is reused.
    pub(crate) fn close(&mut self, slot: TimerSlot) {
        let Some(s) = self.slots.get_mut(slot.0 as usize) else {
            return;
        };
        let pos = core::mem::replace(&mut s.pos, NOWHERE) as usize;
        if pos >= self.heap.len() {
            return;
        }
        let last = self.heap.len() - 1;
        self.heap.swap(pos, last);
        self.heap.pop();
        self.free.push(slot.0);
        if pos < last {
            self.place(pos);
            self.sift_down(pos);
            self.sift_up(pos);
        }
    }

    /// The earliest deadline of any connection.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        self.heap.first().map(|e| e.0)
    }

    /// Replaces `out` with the connections whose deadline is at or before
    /// `now`, in no particular order. `out` holds as many as there are
    /// connections without growing once it did before.
    pub(crate) fn due(&self, now: Instant, out: &mut Vec<u32>) {
        out.clear();
        out.reserve(self.heap.len());
        // Breadth first from the root: below an entry that is not due
        // nothing is, so only the due entries and their children are read.
        // `out` holds heap positions until the end.
        if self.heap.first().is_some_and(|e| e.0 <= now) {
            out.push(0);
        }
        let mut i = 0;
        while let Some(&pos) = out.get(i) {
            i += 1;
            for child in [2 * pos as usize + 1, 2 * pos as usize + 2] {
                if self.heap.get(child).is_some_and(|e| e.0 <= now) {
                    out.push(child as u32);
                }
            }
        }
        for p in out.iter_mut() {
            let slot = self.heap[*p as usize].1;
            *p = self.slots[slot as usize].conn;
        }
    }

    /// Tells the entry at `pos` where it now is.
    fn place(&mut self, pos: usize) {
        let slot = self.heap[pos].1 as usize;
        self.slots[slot].pos = pos as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.heap[parent].0 <= self.heap[pos].0 {
                break;
            }
            self.heap.swap(parent, pos);
            self.place(pos);
            pos = parent;
        }
        self.place(pos);
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut least = pos;
            if l < n && self.heap[l].0 < self.heap[least].0 {
                least = l;
            }
            if r < n && self.heap[r].0 < self.heap[least].0 {
                least = r;
            }
            if least == pos {
                break;
            }
            self.heap.swap(least, pos);
            self.place(pos);
            pos = least;
        }
        self.place(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Open(u64),
        Set(usize, u64),
        Close(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..50u64).prop_map(Op::Open),
            (0..64usize, 0..50u64).prop_map(|(k, t)| Op::Set(k, t)),
            (0..64usize).prop_map(Op::Close),
        ]
    }

    proptest! {
        /// The heap agrees with a plain map of every open deadline: the
        /// earliest, and which are due at every instant.
        #[test]
        fn agrees_with_a_scan(ops in proptest::collection::vec(op(), 0..200)) {
            let mut timers = Timers::default();
            let mut open: BTreeMap<u32, (TimerSlot, Instant)> = BTreeMap::new();
            let mut next = 0u32;
            let mut due = Vec::new();
            for op in ops {
                let pick = |k: usize| open.keys().nth(k % open.len().max(1)).copied();
                match op {
                    Op::Open(t) => {
                        let at = Instant::from_micros(t);
                        open.insert(next, (timers.open(next, at), at));
                        next += 1;
                    }
                    Op::Set(k, t) => {
                        if let Some(c) = pick(k) {
                            let at = Instant::from_micros(t);
                            let e = open.get_mut(&c).unwrap();
                            e.1 = at;
                            timers.set(e.0, at);
                        }
                    }
                    Op::Close(k) => {
                        if let Some(c) = pick(k) {
                            let (slot, _) = open.remove(&c).unwrap();
                            timers.close(slot);
                        }
                    }
                }
                prop_assert_eq!(timers.earliest(), open.values().map(|e| e.1).min());
                for now in [0u64, 10, 25, 49] {
                    let now = Instant::from_micros(now);
                    timers.due(now, &mut due);
                    due.sort_unstable();
                    let want: Vec<u32> =
                        open.iter().filter(|e| e.1 .1 <= now).map(|e| *e.0).collect();
                    prop_assert_eq!(&due, &want);
                }
            }
        }
    }
}
