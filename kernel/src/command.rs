//! Commands: what a host asks the kernel to do in one tick.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::fixed_point::{Dir, Fix, Pos};

/// Host-chosen entity identifier.
pub type EntityId = u64;

/// Create an entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Spawn {
    /// The new entity's id; must not be alive.
    pub id: EntityId,
    /// Initial position; must be inside the world.
    pub pos: Pos,
    /// Initial heading.
    pub dir: Dir,
    /// Initial speed; must not be negative.
    pub speed: Fix,
    /// Whether the entity gets view events (a player) or is only seen (an NPC).
    pub observer: bool,
    /// View radius (radius mode); must be in `0..=`[`MAX_RADIUS`](crate::MAX_RADIUS).
    pub radius: Fix,
    /// What the entity is: seen by observers whose `interest` shares a bit.
    pub layers: u32,
    /// What the entity wants to see (observers only).
    pub interest: u32,
}

impl Spawn {
    /// An NPC at `pos`: dir 0, speed 0, layers 1, interest all, radius 0.
    ///
    /// The radius differs from the scenario format's default (`cell_size`):
    /// an NPC sees nothing, so its radius is never read.
    pub fn npc(id: EntityId, pos: Pos) -> Self {
        Spawn {
            id,
            pos,
            dir: 0,
            speed: Fix::ZERO,
            observer: false,
            radius: Fix::ZERO,
            layers: 1,
            interest: u32::MAX,
        }
    }

    /// An observer at `pos` with view radius `radius`, layers 1, interest all.
    pub fn observer(id: EntityId, pos: Pos, radius: Fix) -> Self {
        Spawn {
            observer: true,
            radius,
            ..Spawn::npc(id, pos)
        }
    }
}

/// Overwrite an entity's motion state; the last move of an entity in a tick wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Move {
    /// The entity to move; must be alive.
    pub id: EntityId,
    /// New position; must be inside the world.
    pub pos: Pos,
    /// New heading.
    pub dir: Dir,
    /// New speed; must not be negative.
    pub speed: Fix,
}

/// One input of a tick. Commands apply in the order given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum Command {
    /// Create an entity.
    Spawn(Spawn),
    /// Overwrite an entity's position, heading and speed.
    Move(Move),
    /// Remove an entity; its capacity is free at once.
    Despawn {
        /// The entity to remove; must be alive.
        id: EntityId,
    },
}

impl Command {
    /// The entity this command concerns.
    pub fn entity(&self) -> EntityId {
        match self {
            Command::Spawn(s) => s.id,
            Command::Move(m) => m.id,
            Command::Despawn { id } => *id,
        }
    }

    /// Which kind of command this is.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Spawn(_) => CommandKind::Spawn,
            Command::Move(_) => CommandKind::Move,
            Command::Despawn { .. } => CommandKind::Despawn,
        }
    }
}

/// The kind of a command, as reported in a rejection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum CommandKind {
    /// [`Command::Spawn`].
    Spawn,
    /// [`Command::Move`].
    Move,
    /// [`Command::Despawn`].
    Despawn,
}

impl CommandKind {
    /// The lower-case name used in event streams (`"spawn"`, `"move"`, `"despawn"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            CommandKind::Spawn => "spawn",
            CommandKind::Move => "move",
            CommandKind::Despawn => "despawn",
        }
    }
}
