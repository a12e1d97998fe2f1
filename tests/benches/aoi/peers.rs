//! The peer crates behind the [`Peer`] trait, each used the way its docs
//! recommend for a moving point set.

use flat_spatial::grid::GridHandle;
use kiddo::{Eytzinger, ImmutableKdTree, QueryScratch, SquaredEuclidean};
use rstar::primitives::GeomWithData;
use rstar::{RTree, AABB};

use crate::adapter::{Peer, Seats};
use crate::workload::CELL;

fn within(a: [f64; 2], b: [f64; 2], r2: f64) -> bool {
    let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
    dx * dx + dy * dy <= r2
}

/// `flat_spatial::Grid` with the kernel's cell size: `set_position` for
/// movers, `maintain` once per tick, cell-box queries.
pub struct FlatSpatial {
    grid: flat_spatial::Grid<u32, [f32; 2]>,
    handles: Vec<GridHandle>,
}

impl FlatSpatial {
    pub fn new() -> Self {
        FlatSpatial {
            grid: flat_spatial::Grid::new(CELL as i32),
            handles: Vec::new(),
        }
    }
}

impl Peer for FlatSpatial {
    fn sync(&mut self, seats: &Seats, moved: &[u32]) {
        let pos = seats.f;
        for &i in moved {
            // Lattice coordinates are exact in f32 (below 2^24 / 256 units).
            let p = [pos[i as usize][0] as f32, pos[i as usize][1] as f32];
            match self.handles.get(i as usize) {
                Some(&h) => self.grid.set_position(h, p),
                None => self.handles.push(self.grid.insert(p, i)),
            }
        }
        self.grid.maintain();
    }

    fn visit_box(&mut self, _o: u32, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(u32)) {
        let grid = &self.grid;
        let (lo, hi) = ([lo[0] as f32, lo[1] as f32], [hi[0] as f32, hi[1] as f32]);
        grid.query_visitor(lo, hi, |(h, _)| {
            if let Some((_, &i)) = grid.get(h) {
                f(i);
            }
        });
    }

    fn visit_within(&mut self, _o: u32, p: [f64; 2], r2: f64, mut f: impl FnMut(u32)) {
        let grid = &self.grid;
        let r = r2.sqrt();
        let lo = [(p[0] - r) as f32, (p[1] - r) as f32];
        let hi = [(p[0] + r) as f32, (p[1] + r) as f32];
        // `query_around` compares with `<` in f32; redo it exactly in f64.
        grid.query_visitor(lo, hi, |(h, at)| {
            if within([f64::from(at[0]), f64::from(at[1])], p, r2) {
                if let Some((_, &i)) = grid.get(h) {
                    f(i);
                }
            }
        });
    }
}

/// `kiddo::ImmutableKdTree`, rebuilt from the position slice every tick
/// (its fastest build and query path); radius queries with reusable scratch.
pub struct Kiddo {
    tree: Option<ImmutableKdTree<f64, 2>>,
    scratch: QueryScratch<Eytzinger, f64, 2>,
}

impl Kiddo {
    pub fn new() -> Self {
        Kiddo {
            tree: None,
            scratch: QueryScratch::new(),
        }
    }
}

impl Peer for Kiddo {
    fn sync(&mut self, seats: &Seats, _moved: &[u32]) {
        self.tree = Some(ImmutableKdTree::new_from_slice(seats.f).expect("kiddo builds the tree"));
    }

    /// kiddo has no box query: the circle around the box, filtered later.
    fn visit_box(&mut self, o: u32, lo: [f64; 2], hi: [f64; 2], f: impl FnMut(u32)) {
        let c = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0];
        let (hx, hy) = ((hi[0] - lo[0]) / 2.0, (hi[1] - lo[1]) / 2.0);
        self.visit_within(o, c, hx * hx + hy * hy, f);
    }

    fn visit_within(&mut self, _o: u32, p: [f64; 2], r2: f64, mut f: impl FnMut(u32)) {
        let Some(tree) = &self.tree else { return };
        tree.query(&p)
            .within::<SquaredEuclidean<f64>>(r2)
            .unsorted()
            .without_distances()
            .with_scratch(&mut self.scratch)
            .visit(|hit| f(hit.item));
    }
}

type Point = GeomWithData<[f64; 2], u32>;

/// `rstar::RTree`, either bulk-loaded from scratch every tick or kept and
/// updated with a remove + insert per mover.
pub struct Rstar {
    tree: RTree<Point>,
    incremental: bool,
    /// Where each entity is in the tree (needed to remove it).
    at: Vec<[f64; 2]>,
}

impl Rstar {
    pub fn bulk() -> Self {
        Rstar {
            tree: RTree::new(),
            incremental: false,
            at: Vec::new(),
        }
    }

    pub fn incremental() -> Self {
        Rstar {
            incremental: true,
            ..Rstar::bulk()
        }
    }
}

impl Peer for Rstar {
    fn sync(&mut self, seats: &Seats, moved: &[u32]) {
        let pos = seats.f;
        if !self.incremental || self.tree.size() == 0 {
            let points = pos
                .iter()
                .enumerate()
                .map(|(i, &p)| Point::new(p, i as u32))
                .collect();
            self.tree = RTree::bulk_load(points);
            if self.incremental {
                self.at = pos.to_vec();
            }
            return;
        }
        for &i in moved {
            let old = Point::new(self.at[i as usize], i);
            let removed = self.tree.remove(&old);
            debug_assert!(removed.is_some());
            let p = pos[i as usize];
            self.tree.insert(Point::new(p, i));
            self.at[i as usize] = p;
        }
    }

    fn visit_box(&mut self, _o: u32, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(u32)) {
        for hit in self.tree.locate_in_envelope(AABB::from_corners(lo, hi)) {
            f(hit.data);
        }
    }

    fn visit_within(&mut self, _o: u32, p: [f64; 2], r2: f64, mut f: impl FnMut(u32)) {
        for hit in self.tree.locate_within_distance(p, r2) {
            f(hit.data);
        }
    }
}

/// Every pair, every tick: the O(N²) baseline.
pub struct Brute {
    pos: Vec<[f64; 2]>,
}

impl Brute {
    pub fn new() -> Self {
        Brute { pos: Vec::new() }
    }
}

impl Peer for Brute {
    fn sync(&mut self, seats: &Seats, _moved: &[u32]) {
        self.pos.clear();
        self.pos.extend_from_slice(seats.f);
    }

    fn visit_box(&mut self, _o: u32, lo: [f64; 2], hi: [f64; 2], mut f: impl FnMut(u32)) {
        for (i, p) in self.pos.iter().enumerate() {
            if lo[0] <= p[0] && p[0] <= hi[0] && lo[1] <= p[1] && p[1] <= hi[1] {
                f(i as u32);
            }
        }
    }

    fn visit_within(&mut self, _o: u32, p: [f64; 2], r2: f64, mut f: impl FnMut(u32)) {
        for (i, &q) in self.pos.iter().enumerate() {
            if within(q, p, r2) {
                f(i as u32);
            }
        }
    }
}
