//! The server's game rules: spawn points, client move checks, the NPC script.
//!
//! Everything here is a pure function of its arguments, so a bot can compute
//! its own spawn point and a replay re-derives nothing: the journal holds
//! the resulting commands.

use std::time::Duration;

use lockgrid_kernel::{Config, EntityId, Fix, Move, Pos, Spawn};
use lockgrid_protocol::{ClientLimits, Instant, WorldParams};

/// Why the host refused something a client sent (the node's reasons).
pub use crate::node::Refusal;
/// NPC ids are `1..=npcs`; client entities start here.
pub use crate::node::CLIENT_ID_BASE;

/// How much unused movement a client may save up and spend at once, as
/// time at the max speed: moves that bunch up behind a slow network or a
/// stalled server still pass, a client that keeps moving faster than the
/// max speed does not for longer than this.
pub const BURST: Duration = Duration::from_secs(1);

/// Most moves of one client a second, in ticks' worth: each tick a client
/// may send this many moves on average (only the last one of a tick
/// matters to the kernel; the rest would only grow the journal), saved up
/// for [`BURST`].
pub const MOVES_PER_TICK: u64 = 8;

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

/// Side, in cells, of the square around the world's centre where clients
/// spawn by default: 8 × 8 cells, so that clients meet.
pub const DEFAULT_SPAWN_AREA: u32 = 8;

/// Where a client entity spawns: a point drawn from its id inside the middle
/// of the world (at most [`DEFAULT_SPAWN_AREA`] cells across, around the
/// centre). Bots compute their own start from it and the Welcome.
pub fn spawn_point(world: &WorldParams, entity: EntityId) -> Pos {
    spawn_point_in(world, entity, DEFAULT_SPAWN_AREA)
}

/// Where a client entity spawns when clients spawn in a square `area`
/// cells across around the world's centre (clamped to the world; at least
/// one unit).
pub fn spawn_point_in(world: &WorldParams, entity: EntityId, area: u32) -> Pos {
    let ext = extent(
        world.origin,
        world.cell_size,
        world.width_cells,
        world.height_cells,
    );
    let (lo_x, lo_y, hi_x, hi_y) = ext;
    let half = i128::from(world.cell_size.to_bits()) * i128::from(area) / 2;
    let half_x = ((hi_x - lo_x) / 2).min(half).max(1);
    let half_y = ((hi_y - lo_y) / 2).min(half).max(1);
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

/// The spawn of a client's observer entity, in a square `area` cells
/// across around the world's centre (see [`spawn_point_in`]).
pub fn client_spawn(config: &Config, entity: EntityId, area: u32) -> Spawn {
    Spawn::observer(
        entity,
        spawn_point_in(&WorldParams::from(config), entity, area),
        config.cell_size,
    )
}

/// Largest distance, in raw fixed-point bits, an entity may cover in one
/// tick at `max_speed` units per second.
pub fn step_per_tick(max_speed: Fix, tick_rate: u32) -> i64 {
    max_speed.to_bits().max(0) / i64::from(tick_rate.max(1))
}

const MICROS_PER_SEC: u128 = 1_000_000;

/// A client's movement allowance: two token buckets over the time the
/// server received the client's moves, one of distance and one of moves.
///
/// The distance bucket holds up to `max_speed × BURST` and fills at
/// `max_speed` per second; an accepted move drains the straight distance
/// from the last accepted position (rounded up to a raw unit). The move
/// bucket holds up to `MOVES_PER_TICK × tick_rate × BURST` moves and
/// fills at `MOVES_PER_TICK × tick_rate` a second; every accepted move
/// takes one. Both start full. Over any span of `t` seconds a client
/// covers at most `max_speed × (t + BURST)`, however its moves are spread
/// over packets and ticks, while an honest client is never refused for
/// moves that arrive late or together: its clock and the server's agree
/// over time, however late the server's ticks run. Everything is integer
/// arithmetic in raw units × microseconds, so nothing is rounded away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// Position after the last accepted move (or the spawn point).
    pub pos: Pos,
    /// Distance left, in raw units × microseconds.
    distance: u128,
    /// Moves left, in moves × microseconds.
    moves: u128,
    /// When the buckets were last filled; `None` until the first move.
    filled_at: Option<Instant>,
}

/// The limits an [`Allowance`] checks moves against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveLimits {
    /// Highest speed a move may carry, and the distance bucket's rate, in
    /// units per second.
    pub max_speed: Fix,
    /// The server's ticks per second (the move bucket's rate is
    /// [`MOVES_PER_TICK`] per tick).
    pub tick_rate: u32,
}

impl MoveLimits {
    /// The limits as a client's Welcome states them.
    pub fn stated(self) -> ClientLimits {
        ClientLimits {
            max_speed: Some(self.max_speed),
            burst_us: Some(u64::try_from(BURST.as_micros()).unwrap_or(u64::MAX)),
            moves_per_sec: Some(u32::try_from(self.moves_per_sec()).unwrap_or(u32::MAX)),
            budget_bytes_per_sec: None,
        }
    }

    fn speed_bits(self) -> u128 {
        u128::from(self.max_speed.to_bits().max(0).unsigned_abs())
    }

    fn moves_per_sec(self) -> u128 {
        u128::from(MOVES_PER_TICK) * u128::from(self.tick_rate.max(1))
    }
}

impl Allowance {
    /// A client entity spawned at `pos`, with both buckets full.
    pub fn new(pos: Pos) -> Self {
        Allowance {
            pos,
            distance: u128::MAX,
            moves: u128::MAX,
            filled_at: None,
        }
    }

    /// Checks one client move, received at `now`, against the rules:
    /// inside the world, speed in `0..=max_speed`, a move left in the move
    /// bucket, its distance from the last accepted position left in the
    /// distance bucket. An accepted move is charged to both.
    pub fn check(
        &mut self,
        config: &Config,
        limits: MoveLimits,
        now: Instant,
        m: &Move,
    ) -> Result<(), Refusal> {
        self.fill(limits, now);
        if config.cell_of(m.pos).is_none() {
            return Err(Refusal::OutOfBounds);
        }
        if m.speed < Fix::ZERO || m.speed > limits.max_speed {
            return Err(Refusal::BadSpeed);
        }
        if self.moves < MICROS_PER_SEC {
            return Err(Refusal::TooManyMoves);
        }
        // Whole raw units, rounded up: never in the client's favour.
        let d2 = self.pos.dist2_raw(m.pos);
        let mut dist = d2.isqrt();
        if dist * dist < d2 {
            dist += 1;
        }
        let cost = dist.saturating_mul(MICROS_PER_SEC);
        if cost > self.distance {
            return Err(Refusal::TooFast);
        }
        self.distance -= cost;
        self.moves -= MICROS_PER_SEC;
        self.pos = m.pos;
        Ok(())
    }

    /// Adds what the time since the last fill earned, up to the burst.
    fn fill(&mut self, limits: MoveLimits, now: Instant) {
        let burst = BURST.as_micros();
        let distance_cap = limits.speed_bits().saturating_mul(burst);
        let moves_cap = limits.moves_per_sec().saturating_mul(burst);
        let elapsed = match self.filled_at {
            // Time never runs backwards here: an earlier `now` earns nothing.
            Some(at) => now.saturating_duration_since(at).as_micros(),
            None => u128::MAX,
        };
        if self.filled_at.is_none_or(|at| now > at) {
            self.filled_at = Some(now);
        }
        let gain = |rate: u128| rate.saturating_mul(elapsed);
        self.distance = self
            .distance
            .saturating_add(gain(limits.speed_bits()))
            .min(distance_cap);
        self.moves = self
            .moves
            .saturating_add(gain(limits.moves_per_sec()))
            .min(moves_cap);
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
    fn the_spawn_area_bounds_where_clients_spawn() {
        // A 64 × 64-cell world of 100-unit cells, centre (3200, 3200).
        let params = WorldParams::from(&Config::default());
        let spread = |area| {
            let (mut lo, mut hi) = (i64::MAX, i64::MIN);
            for id in 0..2_000 {
                let p = spawn_point_in(&params, id, area);
                for v in [p.x.to_bits() >> 16, p.y.to_bits() >> 16] {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
            (lo, hi)
        };
        // The default square: 8 cells across the centre.
        let (lo, hi) = spread(DEFAULT_SPAWN_AREA);
        assert!(lo >= 2_800 && hi < 3_600, "{lo}..{hi}");
        assert!(lo < 2_850 && hi > 3_550, "{lo}..{hi}");
        assert_eq!(spawn_point(&params, 7), spawn_point_in(&params, 7, 8));
        // One cell.
        let (lo, hi) = spread(1);
        assert!(lo >= 3_150 && hi < 3_250, "{lo}..{hi}");
        // Wider than the world: clamped to it, and over all of it.
        let (lo, hi) = spread(1_000);
        assert!(lo >= 0 && hi < 6_400, "{lo}..{hi}");
        assert!(lo < 100 && hi > 6_300, "{lo}..{hi}");
    }

    #[test]
    fn move_checks() {
        let config = Config::default();
        let limits = MoveLimits {
            max_speed: Fix::from_num(200),
            tick_rate: 20,
        };
        assert_eq!(step_per_tick(limits.max_speed, 20), 10 << 16);
        let mv = |x, y, s| Move {
            id: 1,
            pos: Pos::from_ints(x, y),
            dir: 0,
            speed: Fix::from_num(s),
        };
        let ms = Instant::from_micros;
        let start = Allowance::new(Pos::from_ints(100, 100));
        // A full burst at spawn: one second at the max speed, at once.
        let mut a = start;
        assert_eq!(a.check(&config, limits, ms(0), &mv(300, 100, 5)), Ok(()));
        let r = a.check(&config, limits, ms(0), &mv(301, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        // Then the max speed's distance per elapsed time, to the microsecond.
        assert_eq!(
            a.check(&config, limits, ms(5_000), &mv(301, 100, 5)),
            Ok(())
        );
        let r = a.check(&config, limits, ms(9_999), &mv(302, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        assert_eq!(
            a.check(&config, limits, ms(10_000), &mv(302, 100, 5)),
            Ok(())
        );
        // Saved up for a second at most, however long the client waited.
        assert_eq!(
            a.check(&config, limits, ms(100_000_000), &mv(502, 100, 5)),
            Ok(())
        );
        let r = a.check(&config, limits, ms(100_000_000), &mv(503, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        // An earlier time than the last earns nothing.
        let r = a.check(&config, limits, ms(1), &mv(503, 100, 5));
        assert_eq!(r, Err(Refusal::TooFast));
        // Many small moves cannot add up to more than the budget.
        let mut a = start;
        let mut x = 100;
        let mut refused = 0;
        for _ in 0..100 {
            x += 8;
            if a.check(&config, limits, ms(0), &mv(x, 100, 5)).is_err() {
                refused += 1;
                x -= 8;
            }
        }
        assert!(x - 100 <= 200 && refused > 0);
        // Standing still costs no distance, but moves are counted: a
        // second's worth of ticks' moves at once, then the rate.
        let mut a = start;
        let burst = MOVES_PER_TICK * 20;
        for _ in 0..burst {
            assert_eq!(a.check(&config, limits, ms(0), &mv(100, 100, 5)), Ok(()));
        }
        let r = a.check(&config, limits, ms(0), &mv(100, 100, 5));
        assert_eq!(r, Err(Refusal::TooManyMoves));
        // One move per 1 / (8 × 20) s = 6250 µs.
        let r = a.check(&config, limits, ms(6_249), &mv(100, 100, 5));
        assert_eq!(r, Err(Refusal::TooManyMoves));
        assert_eq!(
            a.check(&config, limits, ms(6_250), &mv(100, 100, 5)),
            Ok(())
        );
        let mut a = start;
        assert_eq!(
            a.check(&config, limits, ms(0), &mv(100, 100, 201)),
            Err(Refusal::BadSpeed)
        );
        assert_eq!(
            a.check(&config, limits, ms(0), &mv(100, 100, -1)),
            Err(Refusal::BadSpeed)
        );
        assert_eq!(
            a.check(&config, limits, ms(0), &mv(-1, 0, 0)),
            Err(Refusal::OutOfBounds)
        );
        // Diagonal distances round up: 3 raw units each way is 4.24…, so 5.
        let slow = MoveLimits {
            max_speed: Fix::from_bits(4),
            tick_rate: 20,
        };
        let p = Move {
            id: 1,
            pos: Pos::new(
                Fix::from_bits(100 << 16) + Fix::from_bits(3),
                Fix::from_bits(100 << 16) + Fix::from_bits(3),
            ),
            dir: 0,
            speed: Fix::ZERO,
        };
        let mut a = Allowance::new(Pos::from_ints(100, 100));
        assert_eq!(a.check(&config, slow, ms(0), &p), Err(Refusal::TooFast));
        let slow = MoveLimits {
            max_speed: Fix::from_bits(5),
            ..slow
        };
        let mut a = Allowance::new(Pos::from_ints(100, 100));
        assert_eq!(a.check(&config, slow, ms(0), &p), Ok(()));
    }

    /// An honest client walking at the max speed on its own clock is never
    /// refused, however its moves bunch up on the way (here: a server that
    /// stalls for up to a second and then reads everything at once), and a
    /// client a little faster than the max speed is refused within a few
    /// seconds, bunched or not.
    #[test]
    fn honest_bunched_moves_pass_and_cheats_do_not() {
        let config = Config::default();
        let limits = MoveLimits {
            max_speed: Fix::from_num(200),
            tick_rate: 20,
        };
        for (speed_pct, honest) in [(100i64, true), (103, false)] {
            let mut a = Allowance::new(Pos::from_ints(100, 100));
            let mut refused = 0;
            let mut r = 0x1234_5678u64;
            // One move per 50 ms of the client's clock for 60 s, walking
            // back and forth at speed_pct % of the max speed (raw units).
            let per_move = (200i64 << 16) * speed_pct / 100 / 20;
            let span = 1000i64 << 16;
            let mut pending: Vec<Move> = Vec::new();
            let mut read_at = 0u64;
            for k in 1..=1200u64 {
                let sent = k * 50_000;
                let t = per_move * k as i64 % (2 * span);
                let x = (100i64 << 16) + t.min(2 * span - t);
                pending.push(Move {
                    id: 1,
                    pos: Pos::new(Fix::from_bits(x), Fix::from_bits(100 << 16)),
                    dir: 0,
                    speed: Fix::ZERO,
                });
                // The server reads its socket at random moments up to a
                // second apart; everything queued arrives "now".
                if sent >= read_at {
                    r = mix(r);
                    read_at = sent + r % 1_000_000;
                    for m in pending.drain(..) {
                        if a.check(&config, limits, Instant::from_micros(sent), &m)
                            .is_err()
                        {
                            refused += 1;
                        }
                    }
                }
            }
            if honest {
                assert_eq!(refused, 0, "an honest client was refused");
            } else {
                assert!(refused > 10, "a 3% cheat was refused only {refused} times");
            }
        }
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
