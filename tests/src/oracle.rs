//! A brute-force reference model of the kernel semantics.
//!
//! Written from the contract, not from the kernel: every tick it rebuilds
//! every observer's view by comparing it with every other entity (O(N²)),
//! keeps entities in a plain `Vec` and views in `BTreeMap`/`BTreeSet`.
//! It is meant to be slow and obviously right. It does not compute digests.

use std::collections::{BTreeMap, BTreeSet};

use lockgrid_kernel::{
    Command, Config, Dir, EntityId, Event, Fix, Move, Pos, RejectReason, Spawn, Visibility,
    MAX_RADIUS,
};

/// The part of an entity's state that moves and that updates carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Motion {
    /// Position.
    pub pos: Pos,
    /// Heading.
    pub dir: Dir,
    /// Speed.
    pub speed: Fix,
}

/// One live entity of the oracle.
#[derive(Clone, Debug)]
pub struct OracleEntity {
    /// Host id.
    pub id: EntityId,
    /// Distinguishes a respawned entity from the one that had its id before.
    pub incarnation: u64,
    /// Current motion state.
    pub motion: Motion,
    /// Whether it gets view events.
    pub observer: bool,
    /// View radius.
    pub radius: Fix,
    /// What it is.
    pub layers: u32,
    /// What it wants to see.
    pub interest: u32,
    /// Its state at the end of the previous tick; `None` when this
    /// incarnation was born in the current tick.
    previous: Option<Motion>,
    /// Last sent state and the tick it was sent in.
    sent: Option<(Motion, u64)>,
}

/// A subject or observer identity that survives respawns: `(id, incarnation)`.
type Key = (EntityId, u64);

/// The reference model.
#[derive(Clone, Debug)]
pub struct Oracle {
    config: Config,
    tick: u64,
    entities: Vec<OracleEntity>,
    next_incarnation: u64,
    /// Each observer's view after culling at the end of the last tick.
    views: BTreeMap<Key, BTreeSet<Key>>,
}

impl OracleEntity {
    /// The last sent state and its tick (the throttle's `L` and `T`).
    pub fn sent(&self) -> Option<(Motion, u64)> {
        self.sent
    }
}

impl Oracle {
    /// A fresh oracle; `config` must be valid (the oracle does not check it).
    pub fn new(config: Config) -> Oracle {
        Oracle {
            config,
            tick: 0,
            entities: Vec::new(),
            next_incarnation: 0,
            views: BTreeMap::new(),
        }
    }

    /// The last tick run, 0 before the first.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Live entities, in no particular order.
    pub fn entities(&self) -> &[OracleEntity] {
        &self.entities
    }

    /// A live entity by id.
    pub fn entity(&self, id: EntityId) -> Option<&OracleEntity> {
        self.entities.iter().find(|e| e.id == id)
    }

    /// The ids an observer sees, ascending; `None` unless `id` is a live observer.
    pub fn view(&self, id: EntityId) -> Option<Vec<EntityId>> {
        let e = self.entity(id).filter(|e| e.observer)?;
        let view = self.views.get(&(e.id, e.incarnation));
        Some(view.into_iter().flatten().map(|k| k.0).collect())
    }

    /// Run one tick and return its events in contract order.
    pub fn step(&mut self, commands: &[Command]) -> Vec<Event> {
        self.tick += 1;
        for e in &mut self.entities {
            e.previous = Some(e.motion);
        }

        let mut events = Vec::new();
        for command in commands {
            if let Err(reason) = self.apply(command) {
                events.push(Event::Rejected {
                    entity: command.entity(),
                    command: command.kind(),
                    reason,
                });
            }
        }

        let new_views = self.compute_views();
        let due: BTreeSet<Key> = self
            .entities
            .iter()
            .filter(|e| self.is_due(e))
            .map(|e| (e.id, e.incarnation))
            .collect();

        let mut view_events = Vec::new();
        let empty = BTreeSet::new();
        for (observer, now) in &new_views {
            let before = self.views.get(observer).unwrap_or(&empty);
            for subject in before.difference(now) {
                view_events.push(Event::Leave {
                    observer: observer.0,
                    subject: subject.0,
                });
            }
            for subject in now.difference(before) {
                let s = self.by_key(*subject);
                view_events.push(Event::Enter {
                    observer: observer.0,
                    subject: subject.0,
                    pos: s.motion.pos,
                    dir: s.motion.dir,
                    speed: s.motion.speed,
                    layers: s.layers,
                });
            }
            for subject in now.intersection(before) {
                if due.contains(subject) {
                    let s = self.by_key(*subject);
                    view_events.push(Event::Update {
                        observer: observer.0,
                        subject: subject.0,
                        pos: s.motion.pos,
                        dir: s.motion.dir,
                        speed: s.motion.speed,
                    });
                }
            }
        }
        // The contract's key: observer, then Leave < Enter < Update, then subject.
        view_events.sort_by_key(Event::order_key);
        events.extend(view_events);

        let tick = self.tick;
        for e in &mut self.entities {
            if due.contains(&(e.id, e.incarnation)) {
                e.sent = Some((e.motion, tick));
            }
        }
        self.views = new_views;
        events
    }

    fn by_key(&self, key: Key) -> &OracleEntity {
        self.entities
            .iter()
            .find(|e| (e.id, e.incarnation) == key)
            .expect("views only hold live entities")
    }

    fn apply(&mut self, command: &Command) -> Result<(), RejectReason> {
        match *command {
            Command::Spawn(s) => self.spawn(s),
            Command::Move(m) => self.move_to(m),
            Command::Despawn { id } => {
                let i = self
                    .entities
                    .iter()
                    .position(|e| e.id == id)
                    .ok_or(RejectReason::UnknownEntity)?;
                self.entities.remove(i);
                Ok(())
            }
        }
    }

    fn spawn(&mut self, s: Spawn) -> Result<(), RejectReason> {
        if self.entity(s.id).is_some() {
            return Err(RejectReason::DuplicateId);
        }
        if s.speed < Fix::ZERO || s.radius < Fix::ZERO || s.radius > MAX_RADIUS {
            return Err(RejectReason::Invalid);
        }
        if !self.inside(s.pos) {
            return Err(RejectReason::OutOfBounds);
        }
        let alive = self.entities.len() as u64;
        let observers = self.entities.iter().filter(|e| e.observer).count() as u64;
        if alive >= u64::from(self.config.max_entities)
            || (s.observer && observers >= u64::from(self.config.max_observers))
        {
            return Err(RejectReason::Capacity);
        }
        self.next_incarnation += 1;
        self.entities.push(OracleEntity {
            id: s.id,
            incarnation: self.next_incarnation,
            motion: Motion {
                pos: s.pos,
                dir: s.dir,
                speed: s.speed,
            },
            observer: s.observer,
            radius: s.radius,
            layers: s.layers,
            interest: s.interest,
            previous: None,
            sent: None,
        });
        Ok(())
    }

    fn move_to(&mut self, m: Move) -> Result<(), RejectReason> {
        let inside = self.inside(m.pos);
        let e = self
            .entities
            .iter_mut()
            .find(|e| e.id == m.id)
            .ok_or(RejectReason::UnknownEntity)?;
        if m.speed < Fix::ZERO {
            return Err(RejectReason::Invalid);
        }
        if !inside {
            return Err(RejectReason::OutOfBounds);
        }
        e.motion = Motion {
            pos: m.pos,
            dir: m.dir,
            speed: m.speed,
        };
        Ok(())
    }

    /// `origin <= p < origin + cells * cell_size` on both axes.
    fn inside(&self, pos: Pos) -> bool {
        let c = &self.config;
        let cell = i128::from(c.cell_size.to_bits());
        let axis = |p: Fix, o: Fix, n: u32| {
            let (p, o) = (i128::from(p.to_bits()), i128::from(o.to_bits()));
            o <= p && p < o + cell * i128::from(n)
        };
        axis(pos.x, c.origin.x, c.width_cells) && axis(pos.y, c.origin.y, c.height_cells)
    }

    fn cell(&self, pos: Pos) -> (i128, i128) {
        let c = &self.config;
        let cell = i128::from(c.cell_size.to_bits());
        let axis =
            |p: Fix, o: Fix| floor_div(i128::from(p.to_bits()) - i128::from(o.to_bits()), cell);
        (axis(pos.x, c.origin.x), axis(pos.y, c.origin.y))
    }

    /// Whether `observer` would see `subject`, before culling.
    fn in_range(&self, observer: &OracleEntity, subject: &OracleEntity, was_visible: bool) -> bool {
        if subject.layers & observer.interest == 0 {
            return false;
        }
        match self.config.visibility {
            Visibility::Grid => {
                let (ox, oy) = self.cell(observer.motion.pos);
                let (sx, sy) = self.cell(subject.motion.pos);
                (ox - sx).abs() <= 1 && (oy - sy).abs() <= 1
            }
            Visibility::Radius => {
                let mut reach = i128::from(observer.radius.to_bits());
                if was_visible {
                    reach += i128::from(self.config.hysteresis.to_bits());
                }
                let reach = reach as u128;
                dist2(observer.motion.pos, subject.motion.pos) <= reach * reach
            }
        }
    }

    /// Every live observer's view after this tick: its candidates by the
    /// rule, the nearest `max_view` of them by `(dist², id)`. Where
    /// `max_visible` is set, observers are taken in ascending id, and each
    /// keeps at most what is left of it once the views of the others are
    /// counted: the new views of those before it and the views of those
    /// after it as they were at the end of the last tick.
    fn compute_views(&self) -> BTreeMap<Key, BTreeSet<Key>> {
        let mut views = BTreeMap::new();
        let empty = BTreeSet::new();
        let mut observers: Vec<&OracleEntity> =
            self.entities.iter().filter(|e| e.observer).collect();
        observers.sort_by_key(|o| o.id);
        let before_of = |o: &OracleEntity| self.views.get(&(o.id, o.incarnation)).unwrap_or(&empty);
        let mut held: u64 = observers.iter().map(|o| before_of(o).len() as u64).sum();
        for o in observers {
            let key = (o.id, o.incarnation);
            let before = before_of(o);
            let mut candidates: Vec<(u128, EntityId, u64)> = Vec::new();
            for s in &self.entities {
                if s.id == o.id {
                    continue;
                }
                let was_visible = before.contains(&(s.id, s.incarnation));
                if self.in_range(o, s, was_visible) {
                    candidates.push((dist2(o.motion.pos, s.motion.pos), s.id, s.incarnation));
                }
            }
            candidates.sort();
            let others = held - before.len() as u64;
            let room = match self.config.max_visible {
                Some(n) => u64::from(n).saturating_sub(others),
                None => u64::MAX,
            };
            let limit = u64::from(self.config.max_view).min(room);
            candidates.truncate(limit as usize);
            held = others + candidates.len() as u64;
            views.insert(
                key,
                candidates
                    .into_iter()
                    .map(|(_, id, inc)| (id, inc))
                    .collect(),
            );
        }
        views
    }

    /// The update throttle rule, evaluated at the end of the current tick.
    fn is_due(&self, e: &OracleEntity) -> bool {
        let Some((last, at)) = e.sent else {
            return true;
        };
        let now = e.motion;
        if now == last {
            return false;
        }
        let eps = raw_len(self.config.move_epsilon);
        self.tick - at >= self.config.update_interval
            || dist2(now.pos, last.pos) >= eps * eps
            || shortest_arc(now.dir, last.dir) >= self.config.dir_epsilon
            || e.previous == Some(now)
    }
}

fn raw_len(len: Fix) -> u128 {
    u128::try_from(len.to_bits()).expect("lengths in a valid config are not negative")
}

/// Exact squared distance in raw units.
pub fn dist2(a: Pos, b: Pos) -> u128 {
    let dx = i128::from(a.x.to_bits()) - i128::from(b.x.to_bits());
    let dy = i128::from(a.y.to_bits()) - i128::from(b.y.to_bits());
    let (dx, dy) = (dx.unsigned_abs(), dy.unsigned_abs());
    dx * dx + dy * dy
}

/// Shortest arc between two binary angles.
pub fn shortest_arc(a: Dir, b: Dir) -> u16 {
    let d = (i32::from(a) - i32::from(b)).rem_euclid(65536);
    d.min(65536 - d) as u16
}

fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && (a < 0) != (b < 0) {
        q - 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fx(v: i64) -> Fix {
        Fix::from_bits(v << 16)
    }

    fn radius_config() -> Config {
        Config {
            visibility: Visibility::Radius,
            hysteresis: fx(5),
            width_cells: 8,
            height_cells: 8,
            cell_size: fx(10),
            ..Config::default()
        }
    }

    #[test]
    fn hysteresis_band_keeps_but_does_not_admit() {
        let mut o = Oracle::new(radius_config());
        let ev = o.step(&[
            Command::Spawn(Spawn::observer(1, Pos::from_ints(0, 0), fx(10))),
            Command::Spawn(Spawn::npc(2, Pos::from_ints(12, 0))),
        ]);
        assert!(ev.is_empty(), "12 > r = 10: not admitted: {ev:?}");
        let ev = o.step(&[Command::Move(Move {
            id: 2,
            pos: Pos::from_ints(10, 0),
            dir: 0,
            speed: Fix::ZERO,
        })]);
        assert!(matches!(
            ev[..],
            [Event::Enter {
                observer: 1,
                subject: 2,
                ..
            }]
        ));
        let ev = o.step(&[Command::Move(Move {
            id: 2,
            pos: Pos::from_ints(15, 0),
            dir: 0,
            speed: Fix::ZERO,
        })]);
        assert!(matches!(
            ev[..],
            [Event::Update {
                observer: 1,
                subject: 2,
                ..
            }]
        ));
        let ev = o.step(&[Command::Move(Move {
            id: 2,
            pos: Pos::from_ints(16, 0),
            dir: 0,
            speed: Fix::ZERO,
        })]);
        assert_eq!(
            ev,
            vec![Event::Leave {
                observer: 1,
                subject: 2
            }]
        );
    }

    #[test]
    fn respawn_is_leave_then_enter_and_settling_update_follows_a_small_move() {
        let mut o = Oracle::new(Config {
            update_interval: 100,
            move_epsilon: fx(50),
            ..Config::default()
        });
        o.step(&[
            Command::Spawn(Spawn::observer(1, Pos::from_ints(0, 0), fx(0))),
            Command::Spawn(Spawn::npc(2, Pos::from_ints(1, 0))),
        ]);
        let ev = o.step(&[
            Command::Despawn { id: 2 },
            Command::Spawn(Spawn::npc(2, Pos::from_ints(1, 1))),
        ]);
        assert_eq!(ev.len(), 2);
        assert!(matches!(
            ev[0],
            Event::Leave {
                observer: 1,
                subject: 2
            }
        ));
        assert!(matches!(
            ev[1],
            Event::Enter {
                observer: 1,
                subject: 2,
                ..
            }
        ));
        let small = Command::Move(Move {
            id: 2,
            pos: Pos::from_ints(2, 1),
            dir: 0,
            speed: Fix::ZERO,
        });
        // Tick 3: L is the respawn state from tick 2 (due then); a small move is not due.
        assert!(o.step(&[small]).is_empty());
        // Tick 4: at rest, so the settling update is due.
        let ev = o.step(&[]);
        assert!(matches!(
            ev[..],
            [Event::Update {
                observer: 1,
                subject: 2,
                ..
            }]
        ));
        assert!(o.step(&[]).is_empty());
    }

    #[test]
    fn culling_keeps_nearest_then_lowest_id() {
        let mut o = Oracle::new(Config {
            max_view: 2,
            ..Config::default()
        });
        o.step(&[
            Command::Spawn(Spawn::npc(9, Pos::from_ints(3, 0))),
            Command::Spawn(Spawn::npc(8, Pos::from_ints(0, 3))),
            Command::Spawn(Spawn::npc(7, Pos::from_ints(4, 0))),
            Command::Spawn(Spawn::npc(2, Pos::from_ints(5, 0))),
            Command::Spawn(Spawn::observer(1, Pos::from_ints(0, 0), fx(0))),
        ]);
        assert_eq!(o.view(1), Some(vec![8, 9]));
        assert_eq!(o.view(2), None);
    }

    #[test]
    fn arithmetic_helpers() {
        assert_eq!(floor_div(-1, 10), -1);
        assert_eq!(floor_div(-10, 10), -1);
        assert_eq!(floor_div(9, 10), 0);
        assert_eq!(shortest_arc(10, 65530), 16);
        assert_eq!(shortest_arc(0, 32768), 32768);
        assert_eq!(dist2(Pos::from_ints(0, 0), Pos::from_ints(3, 4)), 25 << 32);
    }
}
