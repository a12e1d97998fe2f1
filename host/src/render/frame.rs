//! One tick as a picture needs it: every entity after the tick, and one
//! observer's view with what the tick changed in it.

use lockgrid_kernel::{CommandKind, EntityId, EntityState, Event, RejectReason, World};

use super::RenderError;

/// The world after one tick, for drawing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The tick (0: before the first).
    pub tick: u64,
    /// Digest of the state after the tick.
    pub digest: u64,
    /// Every live entity, ascending by id.
    pub entities: Vec<EntityState>,
    /// The tick's events in contract order (rejections first).
    pub events: Vec<Event>,
    /// Ids of the live observers, ascending.
    pub observers: Vec<EntityId>,
    /// The chosen observer's side of the tick (`None` without observers).
    pub sight: Option<Sight>,
}

/// A command the tick could not apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The entity the command named.
    pub entity: EntityId,
    /// Which command.
    pub command: CommandKind,
    /// Why.
    pub reason: RejectReason,
}

/// One observer's side of a frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sight {
    /// The observer.
    pub observer: EntityId,
    /// Subjects it sees after the tick, ascending.
    pub view: Vec<EntityId>,
    /// Subjects that entered its view this tick, ascending.
    pub entered: Vec<EntityId>,
    /// Subjects that left its view this tick, ascending.
    pub left: Vec<EntityId>,
    /// Subjects it got an update of this tick, ascending.
    pub updated: Vec<EntityId>,
}

impl Frame {
    /// The frame of `world` just after a step that produced `events`, seen
    /// by `observer` (`None`: the lowest live observer id, if any). Only
    /// the chosen observer's view is copied out of the world. Fails when the
    /// chosen entity is not a live observer.
    pub fn of(
        world: &World,
        events: Vec<Event>,
        observer: Option<EntityId>,
    ) -> Result<Frame, RenderError> {
        let mut entities: Vec<EntityState> = world.entities().collect();
        entities.sort_unstable_by_key(|e| e.id);
        let observers: Vec<EntityId> = entities
            .iter()
            .filter(|e| e.observer)
            .map(|e| e.id)
            .collect();
        let chosen = match observer {
            None => observers.first().copied(),
            Some(id) if observers.binary_search(&id).is_ok() => Some(id),
            Some(id) => {
                return Err(RenderError::NotAnObserver {
                    id,
                    tick: world.tick(),
                    alive: world.entity(id).is_some(),
                })
            }
        };
        let mut frame = Frame {
            tick: world.tick(),
            digest: world.digest(),
            entities,
            events,
            observers,
            sight: None,
        };
        frame.sight = chosen.map(|id| {
            let mut sight = Sight {
                observer: id,
                // A live observer has a view (possibly empty).
                view: world.view(id).map(Iterator::collect).unwrap_or_default(),
                ..Sight::default()
            };
            // Events are sorted by (observer, kind, subject), so each list is ascending.
            for e in frame.events_for(id) {
                match *e {
                    Event::Enter { subject, .. } => sight.entered.push(subject),
                    Event::Leave { subject, .. } => sight.left.push(subject),
                    Event::Update { subject, .. } => sight.updated.push(subject),
                    Event::Rejected { .. } => {}
                }
            }
            sight
        });
        Ok(frame)
    }

    /// A live entity by id.
    pub fn entity(&self, id: EntityId) -> Option<&EntityState> {
        self.entities
            .binary_search_by_key(&id, |e| e.id)
            .ok()
            .map(|i| &self.entities[i])
    }

    /// The tick's rejected commands, in input order.
    pub fn rejections(&self) -> impl Iterator<Item = Rejection> + '_ {
        self.events.iter().filter_map(|e| match *e {
            Event::Rejected {
                entity,
                command,
                reason,
            } => Some(Rejection {
                entity,
                command,
                reason,
            }),
            _ => None,
        })
    }

    /// The events `lockgrid replay --events --observer ID` lists for this
    /// tick: the observer's view events and the rejections of commands
    /// naming it, in contract order.
    pub fn events_for(&self, observer: EntityId) -> impl Iterator<Item = &Event> + '_ {
        self.events.iter().filter(move |e| match **e {
            Event::Rejected { entity, .. } => entity == observer,
            Event::Leave { observer: o, .. }
            | Event::Enter { observer: o, .. }
            | Event::Update { observer: o, .. } => o == observer,
        })
    }
}
