//! The rules of `lockgrid serve`: anyone may join, clients only walk, no
//! faster than the max speed, and seeded NPCs wander.

use std::collections::BTreeMap;

use lockgrid_kernel::{Command, EntityId, Fix, Spawn, World};
use lockgrid_protocol::{ClientLimits, DisconnectReason};
use tracing::info;

use super::rules::{
    client_spawn, npc_move, npc_spawn, step_per_tick, Allowance, MoveLimits, CLIENT_ID_BASE,
    DEFAULT_SPAWN_AREA,
};
use crate::node::{ClientHello, ClientInput, Refusal, Rules};

/// Today's game rules of `lockgrid serve`, as a [`Rules`] implementation.
///
/// - every Hello is admitted (there is no authentication);
/// - a client's entity spawns as an observer at a point drawn from its id
///   in the middle of the world ([`spawn_point_in`](super::rules::spawn_point_in),
///   [`DEFAULT_SPAWN_AREA`] cells across unless [`with_spawn_area`](Self::with_spawn_area)),
///   or where it is when the client takes it back (its name's or token's
///   entity is alive: it is spawned again for the client's fresh view);
/// - a client may only move its own entity, inside the world, at a speed
///   in `0..=max_speed`, within its [`Allowance`]: the max speed's
///   distance and [`MOVES_PER_TICK`](super::rules::MOVES_PER_TICK) moves
///   per tick's worth of time since the moves were last checked, saved up
///   for [`BURST`](super::rules::BURST), judged by when the moves arrived;
/// - NPCs `1..=npcs` walk the seeded script of [`npc_move`];
/// - at start, entities of a previous run's clients and surplus NPCs are
///   despawned and missing NPCs spawned; a client that leaves is despawned.
#[derive(Clone, Debug)]
pub struct DefaultRules {
    limits: MoveLimits,
    step: i64,
    npcs: u32,
    seed: u64,
    spawn_area: u32,
    allowances: BTreeMap<EntityId, Allowance>,
}

impl DefaultRules {
    /// Rules for a server ticking `tick_rate` times a second, entities no
    /// faster than `max_speed` units a second, and `npcs` NPCs walking the
    /// script seeded by `seed`.
    pub fn new(max_speed: Fix, tick_rate: u32, npcs: u32, seed: u64) -> DefaultRules {
        DefaultRules {
            limits: MoveLimits {
                max_speed,
                tick_rate,
            },
            step: step_per_tick(max_speed, tick_rate),
            npcs,
            seed,
            spawn_area: DEFAULT_SPAWN_AREA,
            allowances: BTreeMap::new(),
        }
    }

    /// Clients spawn in a square `cells` across around the world's centre
    /// (clamped to the world): the default crowds them so that they meet;
    /// the whole world's width spreads them as a live world's players are.
    pub fn with_spawn_area(mut self, cells: u32) -> DefaultRules {
        self.spawn_area = cells;
        self
    }
}

impl Rules for DefaultRules {
    fn start(&mut self, world: &World, out: &mut Vec<Command>) {
        let npcs = u64::from(self.npcs);
        let leftovers: Vec<EntityId> = world
            .entities()
            .map(|e| e.id)
            .filter(|&id| id >= CLIENT_ID_BASE || id == 0 || id > npcs)
            .collect();
        if !leftovers.is_empty() {
            info!(
                count = leftovers.len(),
                "despawning entities left over from the previous run"
            );
        }
        out.extend(leftovers.into_iter().map(|id| Command::Despawn { id }));
        let config = world.config();
        for id in 1..=npcs {
            if world.entity(id).is_none() {
                out.push(Command::Spawn(npc_spawn(config, self.seed, id)));
            }
        }
    }

    fn admit(&mut self, _world: &World, _hello: &ClientHello<'_>) -> Result<(), Refusal> {
        Ok(())
    }

    fn spawn(&mut self, world: &World, entity: EntityId, _hello: &ClientHello<'_>) -> Spawn {
        // A client taking its entity back finds it where it was.
        let mut spawn = client_spawn(world.config(), entity, self.spawn_area);
        if let Some(e) = world.entity(entity) {
            spawn.pos = e.pos;
        }
        self.allowances.insert(entity, Allowance::new(spawn.pos));
        spawn
    }

    fn client_limits(&self) -> ClientLimits {
        self.limits.stated()
    }

    fn check_input(
        &mut self,
        world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        let entity = input.entity;
        let Command::Move(m) = input.command else {
            return Err(Refusal::NotAMove);
        };
        if m.id != entity {
            // The protocol already drops these; belt and braces.
            return Err(Refusal::Spoofed);
        }
        let allowance = self.allowances.get_mut(&entity).ok_or(Refusal::Spoofed)?;
        allowance.check(world.config(), self.limits, input.received, m)?;
        out.push(*input.command);
        Ok(())
    }

    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>) {
        let config = world.config();
        for id in 1..=u64::from(self.npcs) {
            // An NPC spawned this very tick is not in the world yet: it walks from the next.
            if let Some(e) = world.entity(id) {
                out.push(Command::Move(npc_move(
                    config, self.seed, tick, self.step, id, e.pos, e.dir,
                )));
            }
        }
    }

    fn left(
        &mut self,
        _world: &World,
        entity: EntityId,
        _reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        self.allowances.remove(&entity);
        out.push(Command::Despawn { id: entity });
    }
}
