//! Hostile inputs: strategies for commands and configs anywhere in their
//! types' domains, biased to the limits where overflow bugs live.

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, Visibility, MAX_LENGTH_RAW};
use proptest::prelude::*;

/// Raw fixed-point bits, biased to the type's and the kernel's limits.
pub fn wild_raw() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => any::<i64>(),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => Just(MAX_LENGTH_RAW),
        1 => Just(-MAX_LENGTH_RAW),
        1 => Just(MAX_LENGTH_RAW - 1),
        1 => Just(0i64),
        4 => -(1i64 << 24)..(1i64 << 24),
        2 => -8i64..8,
        1 => Just(MAX_LENGTH_RAW / 2),
        1 => Just(-MAX_LENGTH_RAW / 2),
        1 => Just(-MAX_LENGTH_RAW / 2 - 1),
        1 => (MAX_LENGTH_RAW - 4)..MAX_LENGTH_RAW,
        1 => -MAX_LENGTH_RAW..(4 - MAX_LENGTH_RAW),
    ]
}

/// Any fixed-point number, biased to the limits.
pub fn wild_fix() -> impl Strategy<Value = Fix> {
    wild_raw().prop_map(Fix::from_bits)
}

/// Any id: a few small ones, the extremes, anything.
pub fn wild_id() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..6, 1 => Just(u64::MAX), 1 => Just(u64::MAX - 1), 1 => any::<u64>()]
}

/// Any position, in or far outside any world.
pub fn wild_pos() -> impl Strategy<Value = Pos> {
    (wild_fix(), wild_fix()).prop_map(|(x, y)| Pos::new(x, y))
}

/// Any command at all.
pub fn wild_command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (
            wild_id(),
            wild_pos(),
            any::<u16>(),
            wild_fix(),
            any::<bool>(),
            wild_fix(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(id, pos, dir, speed, observer, radius, layers, interest)| Command::Spawn(Spawn {
                    id,
                    pos,
                    dir,
                    speed,
                    observer,
                    radius,
                    layers,
                    interest,
                })
            ),
        (wild_id(), wild_pos(), any::<u16>(), wild_fix()).prop_map(|(id, pos, dir, speed)| {
            Command::Move(Move {
                id,
                pos,
                dir,
                speed,
            })
        }),
        wild_id().prop_map(|id| Command::Despawn { id }),
    ]
}

/// Configs of any shape, many at the limits: worlds spanning ±2^45, cells
/// of one raw unit, huge hysteresis, tiny capacities, `max_view` 0. Some
/// are invalid.
pub fn wild_config() -> impl Strategy<Value = Config> {
    let small = prop_oneof![Just(0u32), Just(1u32), 2u32..5, any::<u32>()];
    (
        (wild_raw(), wild_raw()),
        prop_oneof![
            Just(1i64),
            Just(MAX_LENGTH_RAW),
            1i64..(1 << 24),
            wild_raw()
        ],
        (1u32..6, 1u32..6, any::<u32>()),
        any::<bool>(),
        wild_raw(),
        (any::<u64>(), wild_raw(), any::<u16>()),
        (1u32..8, small.clone(), small),
    )
        .prop_map(
            |((ox, oy), cell, (w, h, big), radius, hyst, (interval, eps, deps), (n, o, v))| {
                Config {
                    origin: Pos::new(Fix::from_bits(ox), Fix::from_bits(oy)),
                    cell_size: Fix::from_bits(cell),
                    width_cells: if big % 7 == 0 { big } else { w },
                    height_cells: h,
                    visibility: if radius {
                        Visibility::Radius
                    } else {
                        Visibility::Grid
                    },
                    hysteresis: Fix::from_bits(
                        hyst.unsigned_abs().min(MAX_LENGTH_RAW as u64) as i64
                    ),
                    update_interval: interval,
                    move_epsilon: Fix::from_bits(eps.saturating_abs()),
                    dir_epsilon: deps,
                    max_entities: n,
                    max_observers: o.min(n),
                    max_view: v.min(n),
                    // Sometimes past its limit (2^27), sometimes tiny.
                    max_visible: match big % 5 {
                        0 => Some(big),
                        1 => Some(big % 4),
                        _ => None,
                    },
                }
            },
        )
}

/// Valid worlds at the extremes of every limit.
pub fn extreme_configs() -> Vec<Config> {
    let max = Fix::from_bits(MAX_LENGTH_RAW);
    let half = Fix::from_bits(MAX_LENGTH_RAW / 2);
    let base = Config {
        max_entities: 8,
        max_observers: 8,
        max_view: 8,
        visibility: Visibility::Radius,
        ..Config::default()
    };
    vec![
        // One cell spanning the whole positive range.
        Config {
            origin: Pos::new(Fix::ZERO, Fix::ZERO),
            cell_size: max,
            width_cells: 1,
            height_cells: 1,
            hysteresis: max,
            ..base
        },
        // Two huge cells from -2^44 to 2^44.
        Config {
            origin: Pos::new(-half, -half),
            cell_size: half,
            width_cells: 2,
            height_cells: 2,
            hysteresis: max,
            ..base
        },
        // One cell spanning the whole negative range, grid mode.
        Config {
            origin: Pos::new(-max, -max),
            cell_size: max,
            width_cells: 1,
            height_cells: 1,
            visibility: Visibility::Grid,
            ..base
        },
        // Cells of one raw unit.
        Config {
            origin: Pos::new(Fix::from_bits(-3), Fix::from_bits(-3)),
            cell_size: Fix::from_bits(1),
            width_cells: 7,
            height_cells: 7,
            ..base
        },
        Config {
            visibility: Visibility::Grid,
            max_view: 0,
            max_entities: 3,
            max_observers: 1,
            ..base
        },
    ]
}
