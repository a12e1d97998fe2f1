//! The server's game rules: spawn points, client move checks, the NPC script.
//!
//! Everything here is a pure function of its arguments, so a bot can compute
//! its own spawn point and a replay re-derives nothing: the journal holds
//! the resulting commands.

use lockgrid_kernel::{Config, EntityId, Fix, Move, Pos, Spawn};
use lockgrid_protocol::WorldParams;

/// Why the host refused something a client sent (the node's reasons).
pub use crate::node::Refusal;
/// NPC ids are `1..=npcs`; client entities start here.
pub use crate::node::CLIENT_ID_BASE;

/// Most ticks of movement a client may save up and spend at once (so
/// inputs that bunch up in a tick after a slow one still pass).
pub const BURST_TICKS: u64 = 5;

/// Most moves of one client accepted into one tick (only the last one
/// matters to the kernel; the rest would only grow the journal).
pub const MAX_MOVES_PER_TICK: usize = 8;

/// splitmix64 finaliser: a bijective, seedable mixer.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The world's extent in raw fixed-point bits: `(lo_x, lo_y, hi_x, hi_y)`,
/// half-open (`hi` is outside).
fn extent(origin: Pos, cell: Fix, w: u32, h: u32) -> (i128, i128, i128, i128) {
    let lo_x = i128::from(origin.x.to_bits());
    let lo_y = i128::from(origin.y.to_bits());
    let c = i128::from(cell.to_bits());
    (
        lo_x,
        lo_y,
        lo_x + c * i128::from(w),
        lo_y + c * i128::from(h),
    )
}

fn fix_of(raw: i128) -> Fix {
    // Callers pass values inside the world's extent, which fits an i64
    // (the kernel bounds origin and extent); saturate rather than wrap.
    Fix::from_bits(i64::try_from(raw).unwrap_or(if raw < 0 { i64::MIN } else { i64::MAX }))
}

/// Clamps raw coordinates into the world's half-open box.
fn clamp_in(world: (i128, i128, i128, i128), x: i128, y: i128) -> Pos {
    let (lo_x, lo_y, hi_x, hi_y) = world;
    Pos::new(
        fix_of(x.clamp(lo_x, (hi_x - 1).max(lo_x))),
        fix_of(y.clamp(lo_y, (hi_y - 1).max(lo_y))),
    )
}

/// Where a client entity spawns: a point drawn from its id inside the middle
/// of the world (at most 8 × 8 cells around the centre, so that clients
/// meet). Bots compute their own start from it and the Welcome.
pub fn spawn_point(world: &WorldParams, entity: EntityId) -> Pos {
    let ext = extent(
        world.origin,
        world.cell_size,
        world.width_cells,
        world.height_cells,
    );
    let (lo_x, lo_y, hi_x, hi_y) = ext;
    let cell = i128::from(world.cell_size.to_bits());
    let half_x = ((hi_x - lo_x) / 2).min(4 * cell).max(1);
    let half_y = ((hi_y - lo_y) / 2).min(4 * cell).max(1);
    let (cx, cy) = ((lo_x + hi_x) / 2, (lo_y + hi_y) / 2);
    let r = mix(entity ^ 0x5eed_5ba7_0000_0001);
    // Whole units (raw multiples of 2^16) keep the printed positions short.
    let unit = 1i128 << 16;
    let span_x = (2 * half_x / unit).max(1);
    let span_y = (2 * half_y / unit).max(1);
    let dx = i128::from(r & 0xffff_ffff) % span_x * unit;
    let dy = i128::from(r >> 32) % span_y * unit;
    clamp_in(ext, cx - half_x + dx, cy - half_y + dy)
}

/// The spawn of a client's observer entity.
pub fn client_spawn(config: &Config, entity: EntityId) -> Spawn {
    Spawn::observer(
        entity,
        spawn_point(&WorldParams::from(config), entity),
        config.cell_size,
    )
}

/// Largest distance, in raw fixed-point bits, an entity may cover in one
/// tick at `max_speed` units per second.
pub fn step_per_tick(max_speed: Fix, tick_rate: u32) -> i64 {
    max_speed.to_bits().max(0) / i64::from(tick_rate.max(1))
}

/// A client's movement allowance: a distance budget that grows by one
/// tick's step per tick, up to [`BURST_TICKS`] steps, and shrinks by the
/// distance of every accepted move. Over any span of ticks a client covers
/// at most the max speed's distance plus one burst, however its moves are
/// spread over the ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// Position after the last accepted move (or the spawn point).
    pub pos: Pos,
    budget: u128,
    tick: u64,
    moves_this_tick: usize,
}

impl Allowance {
    /// A client entity spawned at `pos` in `tick`, with a full burst.
    pub fn new(pos: Pos, tick: u64, step: i64) -> Self {
        Allowance {
            pos,
            budget: u128::from(step.unsigned_abs()) * u128::from(BURST_TICKS),
            tick,
            moves_this_tick: 0,
        }
    }

    /// Checks one client move for `tick` against the rules: inside the
    /// world, speed in `0..=max_speed`, its distance from the last accepted
    /// position within the budget, at most [`MAX_MOVES_PER_TICK`] per tick.
    /// An accepted move is charged to the allowance.
    pub fn check(
        &mut self,
        config: &Config,
        max_speed: Fix,
        step: i64,
        tick: u64,
        m: &Move,
    ) -> Result<(), Refusal> {
        let step = u128::from(step.unsigned_abs());
        if tick > self.tick {
            let gained = step.saturating_mul(u128::from(tick - self.tick));
            self.budget = self
                .budget
                .saturating_add(gained)
                .min(step.saturating_mul(u128::from(BURST_TICKS)));
            self.tick = tick;
            self.moves_this_tick = 0;
        }
        if config.cell_of(m.pos).is_none() {
            return Err(Refusal::OutOfBounds);
        }
        if m.speed < Fix::ZERO || m.speed > max_speed {
            return Err(Refusal::BadSpeed);
        }
        if self.moves_this_tick >= MAX_MOVES_PER_TICK {
            return Err(Refusal::TooManyMoves);
        }
        // Whole raw units, rounded up: never in the client's favour.
        let d2 = self.pos.dist2_raw(m.pos);
        let mut dist = d2.isqrt();
        if dist * dist < d2 {
            dist += 1;
        }
        if dist > self.budget {
            return Err(Refusal::TooFast);
        }
        self.budget -= dist;
        self.pos = m.pos;
        self.moves_this_tick += 1;
        Ok(())
    }
}

/// Unit vectors of the eight compass headings, in 1/65536 (cos, sin).
const HEADINGS: [(i128, i128); 8] = [
    (65536, 0),
    (46341, 46341),
    (0, 65536),
    (-46341, 46341),
    (-65536, 0),
    (-46341, -46341),
    (0, -65536),
    (46341, -46341),
];

/// The NPC script: the spawn of NPC `id` (1-based) of a world.
pub fn npc_spawn(config: &Config, seed: u64, id: EntityId) -> Spawn {
    let ext = extent(
        config.origin,
        config.cell_size,
        config.width_cells,
        config.height_cells,
    );
    let (lo_x, lo_y, hi_x, hi_y) = ext;
    let r = mix(seed ^ mix(id));
    let unit = 1i128 << 16;
    let span_x = ((hi_x - lo_x) / unit).max(1);
    let span_y = ((hi_y - lo_y) / unit).max(1);
    let x = lo_x + i128::from(r & 0xffff_ffff) % span_x * unit;
    let y = lo_y + i128::from(r >> 32) % span_y * unit;
    Spawn::npc(id, clamp_in(ext, x, y))
}

/// The NPC script: where NPC `id`, now at `pos` heading `dir`, walks during
/// `tick`. A pure function of the seed, the tick and the NPC's state, so a
/// restarted server continues the same walk. NPCs keep their heading, turn
/// to a random compass heading one tick in 16 or at the world's edge, and
/// rest one tick in 8 (speed 0), which sends their settling updates.
pub fn npc_move(
    config: &Config,
    seed: u64,
    tick: u64,
    step: i64,
    id: EntityId,
    pos: Pos,
    dir: u16,
) -> Move {
    let ext = extent(
        config.origin,
        config.cell_size,
        config.width_cells,
        config.height_cells,
    );
    let r = mix(seed ^ mix(tick ^ mix(id)));
    if r.is_multiple_of(8) {
        return Move {
            id,
            pos,
            dir,
            speed: Fix::ZERO,
        };
    }
    let mut k = usize::from(dir / 8192) % 8;
    if (r >> 8).is_multiple_of(16) {
        k = ((r >> 16) % 8) as usize;
    }
    let walk = |k: usize| {
        let (cx, cy) = HEADINGS[k];
        let s = i128::from(step / 2);
        (
            i128::from(pos.x.to_bits()) + s * cx / 65536,
            i128::from(pos.y.to_bits()) + s * cy / 65536,
        )
    };
    let (lo_x, lo_y, hi_x, hi_y) = ext;
    let (mut x, mut y) = walk(k);
    if x < lo_x || x >= hi_x || y < lo_y || y >= hi_y {
        // Turn around at the edge.
        k = (k + 4) % 8;
        (x, y) = walk(k);
    }
    let speed = Fix::from_bits((step / 2).max(0));
    Move {
        id,
        pos: clamp_in(ext, x, y),
        // k < 8, so k * 8192 < 65536.
        dir: (k as u16) * 8192,
        speed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_points_are_inside_and_deterministic() {
        let config = Config::default();
        let params = WorldParams::from(&config);
        for id in CLIENT_ID_BASE..CLIENT_ID_BASE + 500 {
            let p = spawn_point(&params, id);
            assert!(config.cell_of(p).is_some());
            assert_eq!(p, spawn_point(&params, id));
        }
        let tiny = Config {
            width_cells: 1,
            height_cells: 1,
            ..Config::default()
        };
        for id in 0..100 {
            assert!(tiny
                .cell_of(spawn_point(&WorldParams::from(&tiny), id))
                .is_some());
        }
    }

    #[test]
    fn move_checks() {
        let config = Config::default();
        let max = Fix::from_num(200);
        let step = step_per_tick(max, 20);
        assert_eq!(step, 10 << 16);
        let mv = |x, y, s| Move {
            id: 1,
            pos: Pos::from_ints(x, y),
            dir: 0,
            speed: Fix::from_num(s),
        };
        let start = Allowance::new(Pos::from_ints(100, 100), 1, step);
        // A full burst at spawn: five steps at once, not more.
        let mut a = start;
        assert_eq!(a.check(&config, max, step, 1, &mv(150, 100, 5)), Ok(()));
        let r = a.check(&config, max, step, 1, &mv(151, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        // One step per tick after that, saved up to five.
        assert_eq!(a.check(&config, max, step, 2, &mv(160, 100, 5)), Ok(()));
        assert_eq!(a.check(&config, max, step, 3, &mv(161, 100, 5)), Ok(()));
        assert_eq!(a.check(&config, max, step, 100, &mv(211, 100, 5)), Ok(()));
        let r = a.check(&config, max, step, 100, &mv(212, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        // Many small moves in one tick cannot add up to more than the budget.
        let mut a = start;
        let mut x = 100;
        let mut refused = 0;
        for _ in 0..MAX_MOVES_PER_TICK {
            x += 8;
            if a.check(&config, max, step, 1, &mv(x, 100, 5)).is_err() {
                refused += 1;
                x -= 8;
            }
        }
        assert!(x - 100 <= 50 && refused > 0);
        // Standing still costs nothing, but the moves per tick are capped.
        for _ in 0..refused {
            assert_eq!(a.check(&config, max, step, 1, &mv(x, 100, 5)), Ok(()));
        }
        assert_eq!(
            a.check(&config, max, step, 1, &mv(x, 100, 5)),
            Err(Refusal::TooManyMoves)
        );
        assert_eq!(a.check(&config, max, step, 2, &mv(x, 100, 5)), Ok(()));
        let mut a = start;
        assert_eq!(
            a.check(&config, max, step, 1, &mv(100, 100, 201)),
            Err(Refusal::BadSpeed)
        );
        assert_eq!(
            a.check(&config, max, step, 1, &mv(100, 100, -1)),
            Err(Refusal::BadSpeed)
        );
        assert_eq!(
            a.check(&config, max, step, 1, &mv(-1, 0, 0)),
            Err(Refusal::OutOfBounds)
        );
        // Diagonal distances round up.
        let mut a = Allowance::new(Pos::from_ints(100, 100), 1, 3);
        let p = Move {
            id: 1,
            pos: Pos::new(
                Fix::from_bits(100 << 16) + Fix::from_bits(3),
                Fix::from_bits(100 << 16) + Fix::from_bits(3),
            ),
            dir: 0,
            speed: Fix::ZERO,
        };
        assert_eq!(a.check(&config, max, 3, 1, &p), Ok(()));
    }

    #[test]
    fn npcs_stay_inside() {
        let config = Config {
            width_cells: 2,
            height_cells: 2,
            ..Config::default()
        };
        let step = step_per_tick(Fix::from_num(200), 20);
        for id in 1..=20 {
            let s = npc_spawn(&config, 7, id);
            assert!(config.cell_of(s.pos).is_some());
            let (mut pos, mut dir) = (s.pos, s.dir);
            for tick in 1..2000 {
                let m = npc_move(&config, 7, tick, step, id, pos, dir);
                assert!(
                    config.cell_of(m.pos).is_some(),
                    "npc {id} left at tick {tick}"
                );
                assert!(pos.dist2_raw(m.pos) <= lockgrid_kernel::len2_raw(Fix::from_bits(step)));
                (pos, dir) = (m.pos, m.dir);
            }
        }
    }
}
