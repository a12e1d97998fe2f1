//! The static queries between ticks (`World::entities_within`,
//! `World::entities_in_cells`) agree with brute force over every live
//! entity after every tick of random scenarios in both modes, list ids in
//! ascending order, and report a short buffer rather than truncate.

use lockgrid_kernel::{len2_raw, BufferTooSmall, Config, EntityId, Fix, Pos, World};
use lockgrid_tests::gen::{self, Shape};
use proptest::prelude::*;

/// Bigger worlds with more ids, so queries cross many cells.
const MEDIUM: Shape = Shape {
    ticks: 8,
    commands: 40,
    ids: 64,
    cells: 24,
    roomy: true,
    mode: None,
};

/// One query, in units relative to the world: a point at thousandths of
/// its extent on each axis (some outside it), a radius in hundredths of a
/// cell (some negative), a layer mask, and a rectangle of cells.
#[derive(Clone, Debug)]
struct Query {
    at: (i64, i64),
    radius: i64,
    layers: u32,
    min: (u32, u32),
    max: (u32, u32),
}

fn query() -> impl Strategy<Value = Query> {
    let layers = prop_oneof![Just(u32::MAX), Just(1), Just(2), Just(3), any::<u32>()];
    let cell = 0u32..30;
    (
        (-100i64..1100, -100i64..1100),
        -5i64..400,
        layers,
        (cell.clone(), cell.clone()),
        (cell.clone(), cell),
    )
        .prop_map(|(at, radius, layers, min, max)| Query {
            at,
            radius,
            layers,
            min,
            max,
        })
}

fn center(c: &Config, (a, b): (i64, i64)) -> Pos {
    let cell = i128::from(c.cell_size.to_bits());
    let at = |origin: Fix, cells: u32, k: i64| {
        let extent = cell * i128::from(cells);
        let raw = i128::from(origin.to_bits()) + extent * i128::from(k) / 1000;
        Fix::from_bits(raw.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    };
    Pos::new(
        at(c.origin.x, c.width_cells, a),
        at(c.origin.y, c.height_cells, b),
    )
}

fn brute_within(world: &World, at: Pos, radius: Fix, layers: u32) -> Vec<EntityId> {
    if radius < Fix::ZERO {
        return Vec::new();
    }
    let mut ids: Vec<EntityId> = world
        .entities()
        .filter(|e| e.layers & layers != 0 && e.pos.dist2_raw(at) <= len2_raw(radius))
        .map(|e| e.id)
        .collect();
    ids.sort_unstable();
    ids
}

fn brute_cells(world: &World, q: &Query) -> Vec<EntityId> {
    let inside =
        |(x, y): (u32, u32)| (q.min.0..=q.max.0).contains(&x) && (q.min.1..=q.max.1).contains(&y);
    let mut ids: Vec<EntityId> = world
        .entities()
        .filter(|e| e.layers & q.layers != 0)
        .filter(|e| world.config().cell_of(e.pos).is_some_and(inside))
        .map(|e| e.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// Checks one query's answer against `want`, then that a buffer one too
/// short is refused with the count needed.
fn agrees(
    want: &[EntityId],
    run: impl Fn(&mut [EntityId]) -> Result<usize, BufferTooSmall>,
) -> Result<(), TestCaseError> {
    let mut out = vec![0; want.len() + 3];
    let n = run(&mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&out[..n], want);
    if let Some(short) = want.len().checked_sub(1) {
        let mut out = vec![0; short];
        prop_assert_eq!(run(&mut out), Err(BufferTooSmall { needed: want.len() }));
    }
    Ok(())
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(96))]

    #[test]
    fn queries_match_brute_force(
        s in gen::scenario(MEDIUM),
        queries in prop::collection::vec(query(), 1..12),
    ) {
        let mut world = World::new(s.config).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cell = i128::from(s.config.cell_size.to_bits());
        for commands in &s.ticks {
            world.step(commands, &mut Vec::new());
            for q in &queries {
                let at = center(&s.config, q.at);
                let raw = (cell * i128::from(q.radius) / 100) as i64;
                let radius = Fix::from_bits(raw);
                let want = brute_within(&world, at, radius, q.layers);
                agrees(&want, |out| world.entities_within(at, radius, q.layers, out))?;
                let want = brute_cells(&world, q);
                agrees(&want, |out| world.entities_in_cells(q.min, q.max, q.layers, out))?;
            }
        }
    }
}
