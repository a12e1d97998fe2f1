//! The KBEngine / BigWorld cross-linked-list AOI, built here as a peer.
//!
//! Two sorted lists, one per axis, hold an entity node for every entity
//! and, for every observer, the two bound nodes of its trigger (its lower
//! and upper edge on that axis). When an entity moves, its node and its
//! trigger's bound nodes are shifted to their new coordinates by
//! insertion-sort swaps with their neighbours, x list first, then y (as
//! BigWorld's `shuffleXThenZ`): the cost of a move is the number of nodes
//! it passes, O(d). Every swap of an entity node with another observer's
//! bound node is a crossing: if the entity is within the trigger's range
//! on the other axis, it has just entered or left the trigger, and the
//! trigger's member set (sorted seats) gains or loses it. At equal
//! coordinates a lower bound sorts before entities and an upper bound
//! after (BigWorld's `RangeListOrder`), so a trigger holds exactly the
//! entities in its closed box. The lists are arrays of `(key, node)` with
//! each node's index alongside, not pointer-linked: the same swaps, on
//! contiguous memory.
//!
//! What the trigger is, so that the visible sets are the kernel's:
//! * grid mode: the nine cells around the observer's cell, bounds on cell
//!   edges (they move when the observer changes cell). The member set is
//!   the nine-grid exactly.
//! * radius mode: the square of side 2r around the observer (its own
//!   radius), which holds the disc. The member set is a candidate set;
//!   [`Peer::visit_within`] keeps the members with `dist² ≤ r²`, computed
//!   exactly on the lattice.
//!
//! The shared adapter then applies the rest of the kernel's rule (culling
//! to `max_view` by `(dist², id)`) and diffs against the last tick's view,
//! as for every peer: the crossings here are Enter/Leave of the trigger,
//! not yet of the view (radius mode filters the square's corners, and a
//! culled view is not a trigger's set). With a hysteresis band, the
//! radius a trigger is built from is the stay distance `r + hysteresis`
//! (the adapter's), and the adapter's rule decides the band.
//!
//! The first tick builds the lists by sorting and fills every trigger by
//! one scan of its x strip; later spawns (a seat changing hands under
//! churn) are moves, and a teleport is a long walk along both lists, the
//! design's known weakness.

use crate::adapter::{Peer, Seats};
use crate::workload::{CELL, Q};
use lockgrid_kernel::Visibility;

/// Node `3 s` is seat `s`'s entity, `3 s + 1` and `3 s + 2` the lower and
/// upper bound of its trigger (observers only).
const ENTITY: u32 = 0;
const LOWER: u32 = 1;
const UPPER: u32 = 2;

/// The sort rank of a node kind at equal coordinates.
fn rank(node: u32) -> i64 {
    match node % 3 {
        LOWER => 0,
        UPPER => 2,
        _ => 1,
    }
}

/// One axis: the sorted list and each node's place in it.
#[derive(Default)]
struct Axis {
    /// `(coordinate × 4 + rank, node)`, ascending.
    list: Vec<(i64, u32)>,
    /// Each node's index in `list` (`u32::MAX` if absent).
    at: Vec<u32>,
    /// Each node's coordinate (lattice units).
    coord: Vec<i64>,
}

pub struct CrossList {
    mode: Visibility,
    axes: [Axis; 2],
    /// Each seat's view radius, lattice units (`None`: an NPC, no trigger).
    sight: Vec<Option<i64>>,
    /// Each observer's trigger members: seats, ascending.
    members: Vec<Vec<u32>>,
}

impl CrossList {
    pub fn new(mode: Visibility) -> Self {
        CrossList {
            mode,
            axes: [Axis::default(), Axis::default()],
            sight: Vec::new(),
            members: Vec::new(),
        }
    }

    /// The closed range of observer `t`'s trigger on axis `a`, standing at
    /// `p` (lattice units).
    fn bounds(&self, t: usize, p: i64) -> (i64, i64) {
        match self.mode {
            Visibility::Grid => {
                let edge = CELL * Q;
                let c = p.div_euclid(edge);
                ((c - 1) * edge, (c + 2) * edge - 1)
            }
            Visibility::Radius => {
                let r = self.sight[t].expect("only observers have triggers");
                (p - r, p + r)
            }
        }
    }

    /// Whether the entity at seat `e` is in the range of `t`'s trigger on
    /// axis `a`, by the nodes' current coordinates.
    fn in_range(&self, a: usize, t: usize, e: usize) -> bool {
        let c = &self.axes[a].coord;
        (c[3 * t + 1]..=c[3 * t + 2]).contains(&c[3 * e])
    }

    /// The first tick: every node placed by one sort per axis, every
    /// trigger filled by a scan of its x strip.
    fn build(&mut self, seats: &Seats) {
        let n = seats.q.len();
        self.sight = seats.sight.to_vec();
        self.members = vec![Vec::new(); n];
        for a in 0..2 {
            let axis = &mut self.axes[a];
            axis.coord = vec![0; 3 * n];
            axis.at = vec![u32::MAX; 3 * n];
            axis.list.clear();
        }
        for s in 0..n {
            let q = seats.q[s];
            for (a, p) in [q.0, q.1].into_iter().enumerate() {
                let mut nodes = vec![(3 * s, p)];
                if self.sight[s].is_some() {
                    let (lo, hi) = self.bounds(s, p);
                    nodes.extend([(3 * s + 1, lo), (3 * s + 2, hi)]);
                }
                let axis = &mut self.axes[a];
                for (node, c) in nodes {
                    axis.coord[node] = c;
                    axis.list.push((c * 4 + rank(node as u32), node as u32));
                }
            }
        }
        for axis in &mut self.axes {
            axis.list.sort_unstable();
            for (i, &(_, node)) in axis.list.iter().enumerate() {
                axis.at[node as usize] = i as u32;
            }
        }
        for t in 0..n {
            if self.sight[t].is_none() {
                continue;
            }
            let x = &self.axes[0];
            let (from, to) = (x.at[3 * t + 1] as usize, x.at[3 * t + 2] as usize);
            let mut found: Vec<u32> = x.list[from..to]
                .iter()
                .map(|&(_, node)| node)
                .filter(|&node| node % 3 == ENTITY && node / 3 != t as u32)
                .map(|node| node / 3)
                .filter(|&e| self.in_range(1, t, e as usize))
                .collect();
            found.sort_unstable();
            self.members[t] = found;
        }
    }

    /// Moves `node` to coordinate `c` on axis `a` by swaps, handling each
    /// crossing as it happens.
    fn shift(&mut self, a: usize, node: u32, c: i64) {
        let key = c * 4 + rank(node);
        self.axes[a].coord[node as usize] = c;
        let mut i = self.axes[a].at[node as usize] as usize;
        self.axes[a].list[i].0 = key;
        while i > 0 && self.axes[a].list[i - 1].0 > key {
            self.swap(a, i - 1);
            i -= 1;
        }
        while i + 1 < self.axes[a].list.len() && self.axes[a].list[i + 1].0 < key {
            self.swap(a, i);
            i += 1;
        }
    }

    /// Swaps list entries `i` and `i + 1` on axis `a`: a crossing.
    fn swap(&mut self, a: usize, i: usize) {
        let axis = &mut self.axes[a];
        axis.list.swap(i, i + 1);
        let (u, v) = (axis.list[i].1, axis.list[i + 1].1);
        axis.at[u as usize] = i as u32;
        axis.at[v as usize] = i as u32 + 1;
        let (e, t) = match (u % 3 == ENTITY, v % 3 == ENTITY) {
            (true, false) => (u / 3, v / 3),
            (false, true) => (v / 3, u / 3),
            _ => return,
        };
        if e == t || !self.in_range(1 - a, t as usize, e as usize) {
            // Outside the trigger on the other axis before and after.
            return;
        }
        let inside = self.in_range(a, t as usize, e as usize);
        let set = &mut self.members[t as usize];
        match (set.binary_search(&e), inside) {
            (Err(k), true) => set.insert(k, e),
            (Ok(k), false) => {
                set.remove(k);
            }
            _ => {}
        }
    }
}

impl Peer for CrossList {
    fn sync(&mut self, seats: &Seats, moved: &[u32]) {
        if self.sight.len() != seats.q.len() {
            assert!(self.sight.is_empty(), "every seat spawns in the first tick");
            self.build(seats);
            return;
        }
        for a in 0..2 {
            for &s in moved {
                let t = s as usize;
                assert_eq!(
                    self.sight[t].is_some(),
                    seats.sight[t].is_some(),
                    "a seat stays an observer or an NPC"
                );
                self.sight[t] = seats.sight[t];
                let p = if a == 0 { seats.q[t].0 } else { seats.q[t].1 };
                self.shift(a, 3 * s, p);
                if self.sight[t].is_some() {
                    let (lo, hi) = self.bounds(t, p);
                    self.shift(a, 3 * s + 1, lo);
                    self.shift(a, 3 * s + 2, hi);
                }
            }
        }
    }

    /// The trigger is the nine cells: its members are the answer.
    fn visit_box(&mut self, o: u32, _lo: [f64; 2], _hi: [f64; 2], mut f: impl FnMut(u32)) {
        for &s in &self.members[o as usize] {
            f(s);
        }
    }

    /// The members within the observer's disc, exactly, on the lattice.
    fn visit_within(&mut self, o: u32, _p: [f64; 2], _r2: f64, mut f: impl FnMut(u32)) {
        let o = o as usize;
        let r = self.sight[o].expect("observers have a radius");
        let (x, y) = (&self.axes[0].coord, &self.axes[1].coord);
        let (ox, oy) = (x[3 * o], y[3 * o]);
        for &s in &self.members[o] {
            let (dx, dy) = (x[3 * s as usize] - ox, y[3 * s as usize] - oy);
            if dx * dx + dy * dy <= r * r {
                f(s);
            }
        }
    }
}
