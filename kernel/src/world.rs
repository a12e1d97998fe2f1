//! The world: entity table and the tick.
#![allow(missing_docs, unused)]
use crate::*;
use alloc::vec::Vec;

/// The public state of one entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EntityState {
    pub id: EntityId,
    pub pos: Pos,
    pub dir: Dir,
    pub speed: Fix,
    pub observer: bool,
    pub radius: Fix,
    pub layers: u32,
    pub interest: u32,
}

/// What one tick reports besides its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickReport {
    /// The tick just run (the first is 1).
    pub tick: u64,
    /// Digest of the full state after the tick.
    pub digest: u64,
    /// Number of events delivered to the sink, rejections included.
    pub events: u64,
}

pub struct World {
    config: Config,
}

impl World {
    pub fn new(config: Config) -> Result<World, ConfigError> {
        config.validate()?;
        Ok(World { config })
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn tick(&self) -> u64 {
        todo!()
    }
    pub fn digest(&self) -> u64 {
        todo!()
    }
    pub fn len(&self) -> u32 {
        todo!()
    }
    pub fn step<S: EventSink>(&mut self, commands: &[Command], sink: &mut S) -> TickReport {
        todo!()
    }
    pub fn entity(&self, id: EntityId) -> Option<EntityState> {
        todo!()
    }
    pub fn entities(&self) -> impl Iterator<Item = EntityState> + '_ {
        core::iter::empty()
    }
    pub fn view(&self, observer: EntityId) -> Option<impl Iterator<Item = EntityId> + '_> {
        Some(core::iter::empty())
    }
}
