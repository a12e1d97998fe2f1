//! Cell-addressed events: each tick's changes told to cells, not to observers.
//!
//! See [`CellEvents`] for what a tick gives, in which order, and at what cost.

use alloc::vec::Vec;

use crate::command::{Command, EntityId};
use crate::event::EventSink;
use crate::fixed_point::{Dir, Fix, Pos};
use crate::throttle::Motion;
use crate::world::{EntityState, TickReport, World};

/// A cell by its column and row, `(x, y)`, as [`Config::cell_of`](crate::Config::cell_of) gives it.
pub type Cell = (u32, u32);

/// Rank of a cell event's kind in a tick's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CellEventKind {
    /// [`CellEvent::Leave`]: first.
    Leave,
    /// [`CellEvent::Enter`].
    Enter,
    /// [`CellEvent::Update`]: last.
    Update,
}

impl CellEventKind {
    /// The snake-case name used in event streams.
    pub const fn as_str(self) -> &'static str {
        match self {
            CellEventKind::Leave => "leave",
            CellEventKind::Enter => "enter",
            CellEventKind::Update => "update",
        }
    }
}

/// One change of one tick, addressed to the cell it concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellEvent {
    /// `entity` is no longer in `cell`.
    Leave {
        /// Who left.
        entity: EntityId,
        /// The cell it stood in at the end of the last tick.
        cell: Cell,
        /// The cell it crossed into; `None` when it was despawned.
        to: Option<Cell>,
    },
    /// `entity` is now in `cell`, with its full state.
    Enter {
        /// Who entered.
        entity: EntityId,
        /// The cell it stands in at the end of the tick.
        cell: Cell,
        /// The cell it crossed from; `None` when it was spawned.
        from: Option<Cell>,
        /// Position at tick end.
        pos: Pos,
        /// Heading at tick end.
        dir: Dir,
        /// Speed at tick end.
        speed: Fix,
        /// Layer mask.
        layers: u32,
    },
    /// `entity` changed inside `cell` and its update is due.
    Update {
        /// Who changed.
        entity: EntityId,
        /// The cell it stayed in.
        cell: Cell,
        /// Position at tick end.
        pos: Pos,
        /// Heading at tick end.
        dir: Dir,
        /// Speed at tick end.
        speed: Fix,
    },
}

impl CellEvent {
    /// The event's kind.
    pub fn kind(&self) -> CellEventKind {
        match self {
            CellEvent::Leave { .. } => CellEventKind::Leave,
            CellEvent::Enter { .. } => CellEventKind::Enter,
            CellEvent::Update { .. } => CellEventKind::Update,
        }
    }

    /// The entity the event is about.
    pub fn entity(&self) -> EntityId {
        match *self {
            CellEvent::Leave { entity, .. }
            | CellEvent::Enter { entity, .. }
            | CellEvent::Update { entity, .. } => entity,
        }
    }

    /// The cell the event is addressed to.
    pub fn cell(&self) -> Cell {
        match *self {
            CellEvent::Leave { cell, .. }
            | CellEvent::Enter { cell, .. }
            | CellEvent::Update { cell, .. } => cell,
        }
    }

    /// `(kind, entity, cell)`: a tick's cell events are sorted by it.
    pub fn order_key(&self) -> (CellEventKind, EntityId, Cell) {
        (self.kind(), self.entity(), self.cell())
    }
}

/// An entity alive at the end of the last tick that this tick may change.
#[derive(Clone, Copy, Debug)]
struct Before {
    id: EntityId,
    cell: Cell,
    /// A despawn of it applied this tick: the first despawn of a live id
    /// always does, whatever else the tick holds.
    ended: bool,
}

/// Derives each tick's [`CellEvent`]s while stepping a [`World`].
///
/// Step the world through [`CellEvents::step`] (which calls
/// [`World::step`]). A world stepped without it in between is picked up
/// again at the next `step`, at the cost of one pass over its entities;
/// the skipped ticks' cell events are not recovered.
///
///
/// A pub/sub fan-out with one subject per cell does not want "observer 1
/// sees 2 enter"; it wants "2 entered cell (3, 4)", once, and lets every
/// subscriber of that cell hear it. [`CellEvents`] steps a [`World`] and
/// derives those events from what the tick changed:
///
/// * an entity that crossed from cell `a` to cell `b`: `Leave(a)` (with
///   `to: b`) and `Enter(b)` (with `from: a` and its full state);
/// * one that stayed in its cell and whose update is due: `Update(cell)`.
///   "Due" is the kernel's own update throttle (`update_interval`,
///   `move_epsilon`, `dir_epsilon` and the settling clause, see the
///   [crate docs](crate)), read back from the world's sent record, so a
///   cell hears an update exactly when observers would. Crossing a border
///   sends the full state in the `Enter` and does not count as an update:
///   the throttle record is the world's and stays as the tick left it;
/// * a spawn: `Enter` (no `from`); a despawn: `Leave` (no `to`);
/// * a despawn and spawn of one id in one tick is a new incarnation:
///   `Leave` of the old, then `Enter` of the new, even in the same cell.
///
/// An entity moved in and out of a cell within one tick gives nothing:
/// like the per-observer events, cell events compare the end of one tick
/// with the end of the last. Rejected commands change nothing and give no
/// cell event (the per-observer stream reports them).
///
/// # Order
///
/// A tick's cell events are sorted by `(kind, entity, cell)`, kinds ordered
/// `Leave < Enter < Update` and cells by `(x, y)`: every `Leave` of the
/// tick comes first, then every `Enter`, then every `Update`, each group by
/// entity id. A consumer that applies them in order keeps every cell's
/// membership exact at every step between ticks' ends: a moved or
/// respawned entity is out of its old cell before it is in its new one.
/// An entity has at most one event of each kind per tick, so the cell only
/// completes the order.
///
/// # Cost
///
/// Work per tick follows what changed: two lookups per command and per
/// entity still settling (moved without an update being due), and a sort of
/// the tick's events. Every buffer is sized at construction from
/// `max_entities` (200 bytes per entity); [`CellEvents::step`] never
/// allocates.
///
/// # Example
///
/// ```
/// use lockgrid_kernel::{CellEvent, CellEvents, Command, Config, Move, Pos, Spawn, World};
///
/// let mut world = World::new(Config::default()).expect("the defaults are valid");
/// let mut cells = CellEvents::new(&world);
/// let mut events = Vec::new();
///
/// let npc = Spawn::npc(7, Pos::from_ints(50, 50));
/// cells.step(&mut world, &[Command::Spawn(npc)], &mut events);
/// assert!(matches!(cells.events(), [CellEvent::Enter { entity: 7, cell: (0, 0), from: None, .. }]));
///
/// // Cells are 100 wide: x 150 is cell 1.
/// let walk = Move { id: 7, pos: Pos::from_ints(150, 50), dir: 0, speed: Default::default() };
/// cells.step(&mut world, &[Command::Move(walk)], &mut events);
/// assert!(matches!(
///     cells.events(),
///     [
///         CellEvent::Leave { entity: 7, cell: (0, 0), to: Some((1, 0)) },
///         CellEvent::Enter { entity: 7, cell: (1, 0), from: Some((0, 0)), .. },
///     ]
/// ));
/// ```
pub struct CellEvents {
    /// The cells of the world it was built for.
    config: crate::Config,
    /// The world's tick after the last step seen.
    tick: u64,
    /// Room for [`Before`] and spawned ids before they are deduplicated:
    /// twice `max_entities`, so that one compaction frees at least half.
    room: usize,
    before: Vec<Before>,
    spawned: Vec<EntityId>,
    /// Live entities whose state differs from what was last sent: they may
    /// settle (be due an update) next tick without any command.
    pending: Vec<EntityId>,
    events: Vec<CellEvent>,
}

impl CellEvents {
    /// A tracker for `world` (empty or restored), with every buffer sized
    /// from its `max_entities`.
    pub fn new(world: &World) -> CellEvents {
        let config = *world.config();
        let max = config.max_entities as usize;
        let mut tracker = CellEvents {
            config,
            tick: world.tick(),
            room: 2 * max,
            before: Vec::with_capacity(2 * max),
            spawned: Vec::with_capacity(2 * max),
            pending: Vec::with_capacity(max),
            events: Vec::with_capacity(2 * max),
        };
        tracker.read_pending(world);
        tracker
    }

    /// The cell events of the last tick stepped, in order (see [`CellEvents`]).
    pub fn events(&self) -> &[CellEvent] {
        &self.events
    }

    /// Runs one tick of `world` with [`World::step`], delivering its
    /// per-observer events to `sink`, and derives its cell events, then
    /// readable through [`CellEvents::events`].
    ///
    /// Never allocates while `world` is the world (or has the
    /// `max_entities`) the tracker was built for.
    pub fn step<S: EventSink>(
        &mut self,
        world: &mut World,
        commands: &[Command],
        sink: &mut S,
    ) -> TickReport {
        if world.tick() != self.tick {
            self.read_pending(world);
        }
        self.before.clear();
        self.spawned.clear();
        self.events.clear();

        for k in 0..self.pending.len() {
            let id = self.pending[k];
            self.note_before(world, id, false);
        }
        for command in commands {
            let ended = matches!(command, Command::Despawn { .. });
            self.note_before(world, command.entity(), ended);
        }
        compact(&mut self.before);

        let report = world.step(commands, sink);
        self.tick = report.tick;

        for command in commands {
            let id = command.entity();
            let known = self.before.binary_search_by_key(&id, |b| b.id).is_ok();
            if !known && world.entity(id).is_some() {
                if self.spawned.len() == self.room {
                    compact_ids(&mut self.spawned);
                }
                self.spawned.push(id);
            }
        }
        compact_ids(&mut self.spawned);

        self.pending.clear();
        for k in 0..self.before.len() {
            let b = self.before[k];
            let now = world
                .entity(b.id)
                .and_then(|s| Some((s, self.config.cell_of(s.pos)?)));
            match (b.ended, now) {
                (true, now) => {
                    self.events.push(CellEvent::Leave {
                        entity: b.id,
                        cell: b.cell,
                        to: None,
                    });
                    if let Some((state, cell)) = now {
                        self.events.push(enter(&state, cell, None));
                    }
                }
                (false, Some((state, cell))) if cell != b.cell => {
                    self.events.push(CellEvent::Leave {
                        entity: b.id,
                        cell: b.cell,
                        to: Some(cell),
                    });
                    self.events.push(enter(&state, cell, Some(b.cell)));
                }
                (false, Some((state, cell))) => {
                    let sent = world.last_sent(b.id);
                    if sent.is_some_and(|s| s.tick == report.tick) {
                        self.events.push(CellEvent::Update {
                            entity: b.id,
                            cell,
                            pos: state.pos,
                            dir: state.dir,
                            speed: state.speed,
                        });
                    }
                }
                // Alive before and never despawned: alive now.
                (false, None) => {}
            }
            if let Some((state, _)) = now {
                self.note_pending(world, &state);
            }
        }
        for k in 0..self.spawned.len() {
            let id = self.spawned[k];
            let now = world
                .entity(id)
                .and_then(|s| Some((s, self.config.cell_of(s.pos)?)));
            if let Some((state, cell)) = now {
                self.events.push(enter(&state, cell, None));
                self.note_pending(world, &state);
            }
        }
        self.events.sort_unstable_by_key(CellEvent::order_key);
        report
    }

    /// Records `id` as a candidate for this tick's events if it is alive
    /// before the tick.
    fn note_before(&mut self, world: &World, id: EntityId, ended: bool) {
        let Some(state) = world.entity(id) else {
            return;
        };
        // A live entity is always inside the world.
        let Some(cell) = self.config.cell_of(state.pos) else {
            return;
        };
        if self.before.len() == self.room {
            compact(&mut self.before);
        }
        self.before.push(Before { id, cell, ended });
    }

    fn note_pending(&mut self, world: &World, state: &EntityState) {
        let now = Motion {
            pos: state.pos,
            dir: state.dir,
            speed: state.speed,
        };
        if world.last_sent(state.id).map(|s| s.motion) != Some(now) {
            self.pending.push(state.id);
        }
    }

    /// Finds the entities still settling by a pass over the whole world.
    fn read_pending(&mut self, world: &World) {
        self.tick = world.tick();
        self.pending.clear();
        for state in world.entities() {
            self.note_pending(world, &state);
        }
    }
}

fn enter(state: &EntityState, cell: Cell, from: Option<Cell>) -> CellEvent {
    CellEvent::Enter {
        entity: state.id,
        cell,
        from,
        pos: state.pos,
        dir: state.dir,
        speed: state.speed,
        layers: state.layers,
    }
}

/// Sorts by id and keeps one record per id, which ended if any did.
fn compact(before: &mut Vec<Before>) {
    before.sort_unstable_by_key(|b| b.id);
    before.dedup_by(|later, kept| {
        let same = later.id == kept.id;
        kept.ended |= same && later.ended;
        same
    });
}

fn compact_ids(ids: &mut Vec<EntityId>) {
    ids.sort_unstable();
    ids.dedup();
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;
    use crate::{CountingSink, Move, Spawn};

    fn world() -> World {
        World::new(crate::Config {
            max_entities: 8,
            max_observers: 8,
            ..crate::Config::default()
        })
        .expect("valid")
    }

    fn go(id: EntityId, x: i32, y: i32) -> Command {
        Command::Move(Move {
            id,
            pos: Pos::from_ints(x, y),
            dir: 0,
            speed: Fix::ZERO,
        })
    }

    fn kinds(cells: &CellEvents) -> Vec<(CellEventKind, EntityId, Cell)> {
        cells.events().iter().map(CellEvent::order_key).collect()
    }

    use CellEventKind::{Enter as E, Leave as L, Update as U};

    #[test]
    fn crossing_gives_leave_then_enter_and_staying_gives_throttled_updates() {
        let mut w = world();
        let mut cells = CellEvents::new(&w);
        let sink = &mut CountingSink::default();
        let spawn = |id, x| Command::Spawn(Spawn::npc(id, Pos::from_ints(x, 10)));
        cells.step(&mut w, &[spawn(2, 10), spawn(1, 150)], sink);
        assert_eq!(kinds(&cells), [(E, 1, (1, 0)), (E, 2, (0, 0))]);

        // 1 crosses, 2 moves a little: its first update after spawn is due
        // (tick 2 - 1 < interval 2, but 5 ≥ move_epsilon).
        cells.step(&mut w, &[go(2, 15, 10), go(1, 250, 10)], sink);
        assert_eq!(
            kinds(&cells),
            [(L, 1, (1, 0)), (E, 1, (2, 0)), (U, 2, (0, 0))]
        );

        // A nudge below move_epsilon, too soon: not due; next tick, at rest, it settles.
        let nudge = Command::Move(Move {
            id: 2,
            pos: Pos::new(Fix::from_num(15), Fix::from_bits((10 << 16) + 1)),
            dir: 0,
            speed: Fix::ZERO,
        });
        cells.step(&mut w, &[nudge], sink);
        assert_eq!(kinds(&cells), []);
        cells.step(&mut w, &[], sink);
        assert_eq!(kinds(&cells), [(U, 2, (0, 0))]);
        cells.step(&mut w, &[], sink);
        assert_eq!(kinds(&cells), []);
    }

    #[test]
    fn respawn_in_the_same_cell_is_a_new_incarnation() {
        let mut w = world();
        let mut cells = CellEvents::new(&w);
        let sink = &mut CountingSink::default();
        let spawn = Command::Spawn(Spawn::npc(5, Pos::from_ints(10, 10)));
        cells.step(&mut w, &[spawn], sink);
        let despawn = Command::Despawn { id: 5 };
        cells.step(
            &mut w,
            &[go(5, 20, 20), despawn, spawn, go(5, 30, 30)],
            sink,
        );
        assert_eq!(kinds(&cells), [(L, 5, (0, 0)), (E, 5, (0, 0))]);
        assert!(matches!(
            cells.events()[0],
            CellEvent::Leave { to: None, .. }
        ));
        assert!(matches!(
            cells.events()[1],
            CellEvent::Enter { from: None, pos, .. } if pos == Pos::from_ints(30, 30)
        ));
        // Despawn, spawn, despawn: gone. Spawn and despawn of a new id: nothing.
        let other = Command::Spawn(Spawn::npc(6, Pos::from_ints(10, 10)));
        cells.step(
            &mut w,
            &[despawn, spawn, despawn, other, Command::Despawn { id: 6 }],
            sink,
        );
        assert_eq!(kinds(&cells), [(L, 5, (0, 0))]);
    }

    #[test]
    fn rejected_commands_change_nothing_and_many_repeats_fit() {
        let mut w = world();
        let mut cells = CellEvents::new(&w);
        let sink = &mut Vec::new();
        let spawn = Command::Spawn(Spawn::npc(1, Pos::from_ints(10, 10)));
        cells.step(&mut w, &[spawn], sink);
        // Far more commands than the tracker's room: compaction keeps up.
        let mut commands = vec![spawn; 100];
        commands.extend((0..100).map(|k| go(1, 10 + k, 10)));
        commands.push(go(99, 0, 0));
        let room = cells.before.capacity();
        cells.step(&mut w, &commands, sink);
        assert_eq!(cells.before.capacity(), room);
        assert_eq!(kinds(&cells), [(L, 1, (0, 0)), (E, 1, (1, 0))]);
    }

    #[test]
    fn a_world_stepped_without_the_tracker_is_picked_up() {
        let mut w = world();
        let sink = &mut CountingSink::default();
        w.step(
            &[Command::Spawn(Spawn::npc(1, Pos::from_ints(10, 10)))],
            sink,
        );
        w.step(&[go(1, 11, 10)], sink); // due: first after spawn, ≥ epsilon
        w.step(&[go(1, 11, 11)], sink); // due: moved 1 ≥ move_epsilon
        let nudge = Command::Move(Move {
            id: 1,
            pos: Pos::new(Fix::from_num(11), Fix::from_bits((11 << 16) + 1)),
            dir: 0,
            speed: Fix::ZERO,
        });
        w.step(&[nudge], sink); // too soon and too small: pending
        let mut cells = CellEvents::new(&w);
        cells.step(&mut w, &[], sink);
        assert_eq!(kinds(&cells), [(U, 1, (0, 0))]);
    }
}
