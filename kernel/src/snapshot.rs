//! Snapshots: the full kernel state in a canonical, serde-encodable form.
//!
//! A snapshot lists entities by ascending id and views by ascending subject
//! id, so equal states give equal snapshots whatever internal slots they
//! used. Restoring validates everything and re-derives the digest.

use alloc::vec::Vec;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::command::EntityId;
use crate::config::{Config, ConfigError};
use crate::throttle::Sent;
use crate::world::{EntityState, World};

/// The largest tick a snapshot may record: 2^62, far beyond any real run
/// (billions of years at 20 Hz), so stepping a restored world never overflows.
pub const MAX_TICK: u64 = 1 << 62;

/// The complete state of a [`World`] between two ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Snapshot {
    /// The world's configuration.
    pub config: Config,
    /// The last tick run.
    pub tick: u64,
    /// The digest after that tick; checked on restore.
    pub digest: u64,
    /// Every live entity, ascending by id.
    pub entities: Vec<EntitySnapshot>,
}

/// One entity in a [`Snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct EntitySnapshot {
    /// Its public state.
    pub state: EntityState,
    /// What was last sent for it, if anything.
    pub sent: Option<Sent>,
    /// The subjects it sees, ascending (empty for non-observers).
    pub view: Vec<EntityId>,
}

/// Why a snapshot cannot be restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestoreError {
    /// The configuration is invalid.
    Config(ConfigError),
    /// Entities are not strictly ascending by id (the entity at fault).
    Unordered(EntityId),
    /// An entity could not be spawned: out of bounds, invalid or over capacity.
    Entity(EntityId),
    /// The snapshot's tick is beyond [`MAX_TICK`].
    Tick(u64),
    /// A sent record lies after the snapshot's tick.
    SentInFuture(EntityId),
    /// A view is unsorted, too large, names itself or an unknown entity,
    /// belongs to a non-observer, or is not what the visibility rule gives
    /// in the snapshot's state (the observer at fault).
    View(EntityId),
    /// The rebuilt state's digest differs from the recorded one.
    Digest {
        /// Digest recorded in the snapshot.
        recorded: u64,
        /// Digest of the restored state.
        restored: u64,
    },
}

impl core::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RestoreError::Config(e) => write!(f, "invalid config: {e}"),
            RestoreError::Tick(tick) => write!(
                f,
                "tick {tick} is beyond the largest restorable tick {MAX_TICK}"
            ),
            RestoreError::Unordered(id) => write!(f, "entity {id} is out of order"),
            RestoreError::Entity(id) => write!(f, "entity {id} cannot exist in this world"),
            RestoreError::SentInFuture(id) => {
                write!(f, "entity {id} was sent after the snapshot's tick")
            }
            RestoreError::View(id) => write!(f, "the view of entity {id} is invalid"),
            RestoreError::Digest { recorded, restored } => write!(
                f,
                "digest mismatch: snapshot says {recorded:016x}, restored state is {restored:016x}"
            ),
        }
    }
}

impl core::error::Error for RestoreError {}

impl World {
    /// Captures the full state. Allocates; call it between ticks, not per tick.
    pub fn snapshot(&self) -> Snapshot {
        let mut entities: Vec<EntitySnapshot> = self
            .live_entities()
            .map(|(state, sent, view)| EntitySnapshot { state, sent, view })
            .collect();
        entities.sort_unstable_by_key(|e| e.state.id);
        Snapshot {
            config: *self.config(),
            tick: self.tick(),
            digest: self.digest(),
            entities,
        }
    }

    /// Rebuilds a world from a snapshot, so that stepping it gives the same
    /// events and digests as the world it was taken from.
    pub fn restore(snapshot: &Snapshot) -> Result<World, RestoreError> {
        if snapshot.tick > MAX_TICK {
            return Err(RestoreError::Tick(snapshot.tick));
        }
        let mut world = World::new(snapshot.config).map_err(RestoreError::Config)?;
        let mut last = None;
        for e in &snapshot.entities {
            let id = e.state.id;
            if last.is_some_and(|prev| prev >= id) {
                return Err(RestoreError::Unordered(id));
            }
            last = Some(id);
            if e.sent.is_some_and(|s| s.tick > snapshot.tick) {
                return Err(RestoreError::SentInFuture(id));
            }
            if !world.restore_entity(&e.state.spawn(), e.sent) {
                return Err(RestoreError::Entity(id));
            }
        }
        for e in &snapshot.entities {
            if !world.restore_view(e.state.id, &e.view) {
                return Err(RestoreError::View(e.state.id));
            }
        }
        world.finish_restore(snapshot.tick);
        if world.digest() != snapshot.digest {
            return Err(RestoreError::Digest {
                recorded: snapshot.digest,
                restored: world.digest(),
            });
        }
        // Ticks update views from the changes around them, trusting that
        // each is the rule applied: a view that is not would drift.
        world.check_views().map_err(RestoreError::View)?;
        Ok(world)
    }
}
