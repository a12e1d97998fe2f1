//! The state digest exactly as the kernel's crate docs define it, written
//! from those docs alone, so tests can check the docs and forge snapshots.

use lockgrid_kernel::{Config, EntityId, EntityState, Fix, Sent, Snapshot, Visibility, World};

fn mix(mut z: u64) -> u64 {
    z ^= z >> 30;
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 27;
    z = z.wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// ASCII bytes read as a big-endian `u64`, zero-padded on the right.
fn domain(name: &str) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..name.len()].copy_from_slice(name.as_bytes());
    u64::from_be_bytes(bytes)
}

fn h(name: &str, words: &[u64]) -> u64 {
    let mut h = domain(name);
    for &w in words {
        h = mix(h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    mix(h ^ words.len() as u64)
}

fn bits(f: Fix) -> u64 {
    f.to_bits() as u64
}

fn config_hash(c: &Config) -> u64 {
    let mut words = vec![
        bits(c.origin.x),
        bits(c.origin.y),
        bits(c.cell_size),
        u64::from(c.width_cells),
        u64::from(c.height_cells),
        match c.visibility {
            Visibility::Grid => 0,
            Visibility::Radius => 1,
        },
        bits(c.hysteresis),
        c.update_interval,
        bits(c.move_epsilon),
        u64::from(c.dir_epsilon),
        u64::from(c.max_entities),
        u64::from(c.max_observers),
        u64::from(c.max_view),
    ];
    // Only where it is set: worlds without it keep their digests.
    words.extend(c.max_visible.map(u64::from));
    h("lgconfig", &words)
}

/// The digest of a state given as its parts: config, tick, and each live
/// entity with its throttle record and view (in any order).
pub fn of_parts<'a>(
    config: &Config,
    tick: u64,
    entities: impl IntoIterator<Item = (EntityState, Option<Sent>, &'a [EntityId])>,
) -> u64 {
    let (mut count, mut entity_sum, mut pairs, mut view_sum) = (0u64, 0u64, 0u64, 0u64);
    for (e, sent, view) in entities {
        let mut words = vec![
            e.id,
            u64::from(e.observer),
            bits(e.radius),
            u64::from(e.layers),
            u64::from(e.interest),
        ];
        match sent {
            None => words.push(0),
            Some(s) => words.extend([
                1,
                bits(s.motion.pos.x),
                bits(s.motion.pos.y),
                u64::from(s.motion.dir),
                bits(s.motion.speed),
                s.tick,
            ]),
        }
        words.extend([
            bits(e.pos.x),
            bits(e.pos.y),
            u64::from(e.dir),
            bits(e.speed),
        ]);
        count += 1;
        entity_sum = entity_sum.wrapping_add(h("lgentity", &words));
        for &subject in view {
            pairs += 1;
            view_sum = view_sum.wrapping_add(h("lgview", &[e.id, subject]));
        }
    }
    h(
        "lgtick",
        &[
            tick,
            config_hash(config),
            count,
            entity_sum,
            pairs,
            view_sum,
        ],
    )
}

/// The digest of a live world, from its public getters only.
pub fn of_world(world: &World) -> u64 {
    let parts: Vec<(EntityState, Option<Sent>, Vec<EntityId>)> = world
        .entities()
        .map(|e| {
            let view = world.view(e.id).map(Iterator::collect).unwrap_or_default();
            (e, world.last_sent(e.id), view)
        })
        .collect();
    of_parts(
        world.config(),
        world.tick(),
        parts.iter().map(|(e, s, v)| (*e, *s, v.as_slice())),
    )
}

/// The digest a snapshot's state should carry.
pub fn of_snapshot(s: &Snapshot) -> u64 {
    of_parts(
        &s.config,
        s.tick,
        s.entities
            .iter()
            .map(|e| (e.state, e.sent, e.view.as_slice())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_big_endian_ascii() {
        assert_eq!(domain("lgview"), 0x6c67_7669_6577_0000);
    }
}
