//! Running scenarios through the kernel and checking every tick.

use std::collections::{BTreeMap, BTreeSet};

use lockgrid_kernel::{Command, EntityId, EntityState, Event, World};

use crate::gen::Scenario;
use crate::oracle::Oracle;

/// What one tick of the kernel produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The tick's events in delivery order.
    pub events: Vec<Event>,
    /// The digest the tick reported.
    pub digest: u64,
}

/// Builds a world for a generated scenario; generated configs must be valid.
pub fn world(s: &Scenario) -> Result<World, String> {
    World::new(s.config).map_err(|e| format!("generated config is invalid ({e}): {:?}", s.config))
}

/// Steps `world` through `ticks`, checking the report's own consistency.
pub fn run(world: &mut World, ticks: &[Vec<Command>]) -> Result<Vec<Tick>, String> {
    let mut out = Vec::with_capacity(ticks.len());
    for commands in ticks {
        out.push(step(world, commands)?);
    }
    Ok(out)
}

/// One checked step.
pub fn step(world: &mut World, commands: &[Command]) -> Result<Tick, String> {
    let before = world.tick();
    let mut events = Vec::new();
    let report = world.step(commands, &mut events);
    let tick = before + 1;
    if report.tick != tick || world.tick() != tick {
        return Err(format!(
            "tick numbering: before {before}, report {}, world {}",
            report.tick,
            world.tick()
        ));
    }
    if report.events != events.len() as u64 {
        return Err(format!(
            "tick {tick}: report counts {} events, sink got {}",
            report.events,
            events.len()
        ));
    }
    if report.digest != world.digest() {
        return Err(format!(
            "tick {tick}: report digest {:016x} != world.digest() {:016x}",
            report.digest,
            world.digest()
        ));
    }
    Ok(Tick {
        events,
        digest: report.digest,
    })
}

/// Checks the contract order of one tick's events: rejections first, then
/// strictly ascending `(observer, Leave < Enter < Update, subject)`.
pub fn check_order(events: &[Event]) -> Result<(), String> {
    let first_view = events
        .iter()
        .position(|e| !matches!(e, Event::Rejected { .. }))
        .unwrap_or(events.len());
    if let Some(late) = events[first_view..]
        .iter()
        .find(|e| matches!(e, Event::Rejected { .. }))
    {
        return Err(format!("rejection after view events: {late:?}"));
    }
    // The kernel orders by construction and never calls order_key, so the
    // contract's key is an independent check of it.
    for pair in events[first_view..].windows(2) {
        if pair[0].order_key() >= pair[1].order_key() {
            return Err(format!("out of order: {:?} then {:?}", pair[0], pair[1]));
        }
    }
    Ok(())
}

/// Each observer's view as a client would hold it, rebuilt from Enter and Leave alone.
#[derive(Clone, Debug, Default)]
pub struct ClientViews {
    views: BTreeMap<EntityId, BTreeSet<EntityId>>,
}

impl ClientViews {
    /// Forgets an observer's view: it was despawned (and maybe respawned).
    pub fn forget(&mut self, observer: EntityId) {
        self.views.remove(&observer);
    }

    /// Applies one tick's events; a Leave of an unseen subject or an Enter
    /// of a seen one is an error.
    pub fn apply(&mut self, events: &[Event]) -> Result<(), String> {
        for e in events {
            match *e {
                Event::Leave { observer, subject } => {
                    if !self.views.entry(observer).or_default().remove(&subject) {
                        return Err(format!("{e:?}: subject was not in view"));
                    }
                }
                Event::Enter {
                    observer, subject, ..
                } => {
                    if !self.views.entry(observer).or_default().insert(subject) {
                        return Err(format!("{e:?}: subject was already in view"));
                    }
                }
                Event::Update {
                    observer, subject, ..
                } => {
                    if !self
                        .views
                        .get(&observer)
                        .is_some_and(|v| v.contains(&subject))
                    {
                        return Err(format!("{e:?}: update of a subject not in view"));
                    }
                }
                Event::Rejected { .. } => {}
            }
        }
        Ok(())
    }

    /// One observer's rebuilt view, ascending.
    pub fn view(&self, observer: EntityId) -> Vec<EntityId> {
        self.views
            .get(&observer)
            .into_iter()
            .flatten()
            .copied()
            .collect()
    }
}

/// Runs a scenario through the kernel and the oracle side by side and checks,
/// after every tick: identical event lists, contract order, views rebuilt from
/// the event stream equal to the oracle's and to `World::view`, Enter and
/// Update carrying the subject's current state, and identical entity tables.
/// Returns the kernel's ticks for further checks.
pub fn against_oracle(s: &Scenario) -> Result<Vec<Tick>, String> {
    world_against_oracle(s).map(|(ticks, _)| ticks)
}

/// [`against_oracle`], also returning the kernel's world after the last
/// tick (for its path counts, say).
pub fn world_against_oracle(s: &Scenario) -> Result<(Vec<Tick>, World), String> {
    let mut world = world(s)?;
    let mut oracle = Oracle::new(s.config);
    let mut client = ClientViews::default();
    let mut out = Vec::with_capacity(s.ticks.len());
    for commands in &s.ticks {
        let observers_before: BTreeMap<EntityId, u64> = oracle
            .entities()
            .iter()
            .filter(|e| e.observer)
            .map(|e| (e.id, e.incarnation))
            .collect();
        let tick = step(&mut world, commands)?;
        let t = world.tick();
        let expected = oracle.step(commands);
        if tick.events != expected {
            return Err(format!(
                "tick {t}: events differ from the oracle\ncommands: {commands:?}\nkernel: {}\noracle: {}",
                show(&tick.events),
                show(&expected)
            ));
        }
        check_order(&tick.events).map_err(|e| format!("tick {t}: {e}"))?;

        for (id, incarnation) in observers_before {
            if oracle.entity(id).map(|e| e.incarnation) != Some(incarnation) {
                client.forget(id);
            }
        }
        client
            .apply(&tick.events)
            .map_err(|e| format!("tick {t}: {e}"))?;
        check_entities(&world, &oracle).map_err(|e| format!("tick {t}: {e}"))?;
        check_event_state(&world, &tick.events).map_err(|e| format!("tick {t}: {e}"))?;
        for e in oracle.entities() {
            let kernel: Option<Vec<EntityId>> = world.view(e.id).map(Iterator::collect);
            if e.observer {
                let want = oracle.view(e.id).expect("a live observer has a view");
                if kernel.as_ref() != Some(&want) {
                    return Err(format!(
                        "tick {t}: World::view({}) = {kernel:?}, oracle {want:?}",
                        e.id
                    ));
                }
                if client.view(e.id) != want {
                    return Err(format!(
                        "tick {t}: view of {} rebuilt from events {:?}, oracle {want:?}",
                        e.id,
                        client.view(e.id)
                    ));
                }
            } else if kernel.is_some_and(|v| !v.is_empty()) {
                return Err(format!("tick {t}: NPC {} has a non-empty view", e.id));
            }
        }
        out.push(tick);
    }
    Ok((out, world))
}

/// The kernel's entity table equals the oracle's.
fn check_entities(world: &World, oracle: &Oracle) -> Result<(), String> {
    let mut kernel: Vec<EntityState> = world.entities().collect();
    kernel.sort_by_key(|e| e.id);
    let mut want: Vec<EntityState> = oracle
        .entities()
        .iter()
        .map(|e| EntityState {
            id: e.id,
            pos: e.motion.pos,
            dir: e.motion.dir,
            speed: e.motion.speed,
            observer: e.observer,
            radius: e.radius,
            layers: e.layers,
            interest: e.interest,
        })
        .collect();
    want.sort_by_key(|e| e.id);
    if kernel != want {
        return Err(format!(
            "entities differ\nkernel: {kernel:?}\noracle: {want:?}"
        ));
    }
    if world.len() as usize != want.len() {
        return Err(format!(
            "World::len() = {}, {} alive",
            world.len(),
            want.len()
        ));
    }
    for e in &want {
        if world.entity(e.id) != Some(*e) {
            return Err(format!(
                "World::entity({}) = {:?}",
                e.id,
                world.entity(e.id)
            ));
        }
    }
    for e in oracle.entities() {
        let kernel = world
            .last_sent(e.id)
            .map(|s| (s.motion.pos, s.motion.dir, s.motion.speed, s.tick));
        let want = e.sent().map(|(m, t)| (m.pos, m.dir, m.speed, t));
        if kernel != want {
            return Err(format!(
                "throttle record of {}: kernel {kernel:?}, oracle {want:?}",
                e.id
            ));
        }
    }
    Ok(())
}

/// Enter and Update carry the subject's state at tick end.
fn check_event_state(world: &World, events: &[Event]) -> Result<(), String> {
    for e in events {
        let (subject, pos, dir, speed, layers) = match *e {
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                layers,
                ..
            } => (subject, pos, dir, speed, Some(layers)),
            Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } => (subject, pos, dir, speed, None),
            _ => continue,
        };
        let Some(s) = world.entity(subject) else {
            return Err(format!("{e:?}: subject is not alive"));
        };
        if (s.pos, s.dir, s.speed) != (pos, dir, speed) || layers.is_some_and(|l| l != s.layers) {
            return Err(format!("{e:?}: stale state, subject is {s:?}"));
        }
    }
    Ok(())
}

/// One event per line, for failure messages.
pub fn show(events: &[Event]) -> String {
    let mut s = String::from("[");
    for e in events {
        s.push_str("\n  ");
        s.push_str(&format!("{e:?}"));
    }
    s.push_str("\n]");
    s
}
