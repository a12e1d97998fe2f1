//! Walking NPCs for the budget tests and benchmark: a uniform walk over
//! the whole world, or a hotspot (a crowd packed around the centre).
//! Seeded and integer-only, so a run is reproducible.

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn};

use super::Rng;

/// Where the NPCs walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Spread uniformly over a 2000 × 2000 square.
    Uniform,
    /// Packed in a 500 × 500 square: every observer in it sees a crowd.
    Hotspot,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Uniform => "uniform walk",
            Layout::Hotspot => "hotspot crowd",
        }
    }

    /// The square NPCs stay in: (low corner, edge), world units.
    fn area(self) -> (i64, i64) {
        match self {
            Layout::Uniform => (1000, 2000),
            Layout::Hotspot => (1750, 500),
        }
    }
}

/// Largest distance an NPC walks in one tick, in raw I48F16 units (2 units).
pub const NPC_STEP_RAW: i64 = 2 << 16;

/// The world every budget run uses: 40 × 40 cells of 100, nine-grid views.
pub fn config() -> Config {
    Config {
        width_cells: 40,
        height_cells: 40,
        max_entities: 16_384,
        ..Config::default()
    }
}

/// NPCs walking in straight lines that turn now and then, inside the layout's area.
pub struct Walkers {
    layout: Layout,
    rng: Rng,
    /// (x, y, vx, vy), raw units; ids are index + 1.
    npcs: Vec<(i64, i64, i64, i64)>,
}

impl Walkers {
    pub fn new(layout: Layout, n: usize, seed: u64) -> Walkers {
        let mut rng = Rng::new(seed);
        let (lo, edge) = layout.area();
        let npcs = (0..n)
            .map(|_| {
                let x = rng.range_i64(lo << 16, (lo + edge) << 16);
                let y = rng.range_i64(lo << 16, (lo + edge) << 16);
                (x, y, 0, 0)
            })
            .collect();
        let mut w = Walkers { layout, rng, npcs };
        for i in 0..n {
            w.turn(i);
        }
        w
    }

    /// A point inside the area, for an observer: `i` of `n` along its diagonal.
    pub fn observer_spot(&self, i: u64, n: u64) -> Pos {
        let (lo, edge) = self.layout.area();
        let t = lo + edge * (2 * i as i64 + 1) / (2 * n as i64);
        Pos::from_ints(t as i32, (lo + edge / 2) as i32)
    }

    fn turn(&mut self, i: usize) {
        // A velocity with |v|∞ ≤ 1.4 units so that |v|₂ ≤ 2 units.
        let m = 92_000;
        let vx = self.rng.range_i64(-m, m);
        let vy = self.rng.range_i64(-m, m);
        self.npcs[i].2 = vx;
        self.npcs[i].3 = vy;
    }

    /// Spawn commands for every NPC.
    pub fn spawns(&self) -> Vec<Command> {
        self.npcs
            .iter()
            .enumerate()
            .map(|(i, &(x, y, _, _))| {
                Command::Spawn(Spawn::npc(
                    i as u64 + 1,
                    Pos::new(Fix::from_bits(x), Fix::from_bits(y)),
                ))
            })
            .collect()
    }

    /// One tick of walking: a Move for every NPC, appended to `out`.
    pub fn step(&mut self, out: &mut Vec<Command>) {
        let (lo, edge) = self.layout.area();
        let (lo, hi) = (lo << 16, (lo + edge) << 16);
        for i in 0..self.npcs.len() {
            if self.rng.chance(20_000) {
                self.turn(i);
            }
            let n = &mut self.npcs[i];
            let (mut x, mut y) = (n.0 + n.2, n.1 + n.3);
            if !(lo..hi).contains(&x) {
                n.2 = -n.2;
                x = n.0 + n.2;
            }
            if !(lo..hi).contains(&y) {
                n.3 = -n.3;
                y = n.1 + n.3;
            }
            (n.0, n.1) = (x, y);
            let dir = (((n.2 >> 12) & 0xff) << 8 | ((n.3 >> 12) & 0xff)) as u16;
            out.push(Command::Move(Move {
                id: i as u64 + 1,
                pos: Pos::new(Fix::from_bits(x), Fix::from_bits(y)),
                dir,
                speed: Fix::from_bits(NPC_STEP_RAW),
            }));
        }
    }
}
