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
    /// Every live observer's view after the tick, ascending by observer id;
    /// each view ascending by subject id.
    views: Vec<(EntityId, Vec<EntityId>)>,
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
    /// The frame of `world` just after a step that produced `events`.
    pub fn of(world: &World, events: Vec<Event>) -> Frame {
        let mut entities: Vec<EntityState> = world.entities().collect();
        entities.sort_unstable_by_key(|e| e.id);
        let views = entities
            .iter()
            .filter(|e| e.observer)
            .map(|e| {
                let view = world.view(e.id).map(Iterator::collect).unwrap_or_default();
                (e.id, view)
            })
            .collect();
        Frame {
            tick: world.tick(),
            digest: world.digest(),
            entities,
            events,
            views,
        }
    }

    /// Ids of the live observers, ascending.
    pub fn observers(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.views.iter().map(|(id, _)| *id)
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

    /// What `observer` sees after the tick and what changed in its view;
    /// `None` (the lowest live observer id) when none is chosen. Fails when
    /// the chosen entity is not a live observer.
    pub fn sight(&self, observer: Option<EntityId>) -> Result<Option<Sight>, RenderError> {
        let found = match observer {
            None => self.views.first(),
            Some(id) => {
                let i = self
                    .views
                    .binary_search_by_key(&id, |(o, _)| *o)
                    .map_err(|_| RenderError::NotAnObserver {
                        id,
                        tick: self.tick,
                        alive: self.entity(id).is_some(),
                    })?;
                Some(&self.views[i])
            }
        };
        let Some((id, view)) = found else {
            return Ok(None);
        };
        let mut sight = Sight {
            observer: *id,
            view: view.clone(),
            ..Sight::default()
        };
        // Events are sorted by (observer, kind, subject), so each list is ascending.
        for e in self.events_for(*id) {
            match *e {
                Event::Enter { subject, .. } => sight.entered.push(subject),
                Event::Leave { subject, .. } => sight.left.push(subject),
                Event::Update { subject, .. } => sight.updated.push(subject),
                Event::Rejected { .. } => {}
            }
        }
        Ok(Some(sight))
    }
}
