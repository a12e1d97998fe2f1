//! Property: for any stream of one observer's events (random Leaves,
//! Enters and Updates, some changing nothing, some with extreme values),
//! any budget and any loss of server packets, a budgeted server and a real
//! client agree: after every applied tick the client's view holds exactly
//! the model's subjects, every Update it receives changes something and
//! carries the subject's newest state as of its tick (never a state that
//! was already superseded when the tick was sent), and once the events
//! stop the client's view equals the model, state for state.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{random_tick, view_map, Rng};
use lockgrid_kernel::{Config, EntityId, Event, Fix, Pos, Spawn};
use lockgrid_protocol::{
    budget::MIN_BUDGET_PER_TICK, Client, ClientConfig, ClientEvent, ClientLimits, Instant, Seen,
    Server, ServerConfig, ServerEvent, WorldParams,
};
use proptest::prelude::*;

const OBSERVER: EntityId = 1;

/// A subject's state as an ordered key.
type Key = (EntityId, i64, i64, u16, i64, u32);

fn key(id: EntityId, s: &Seen) -> Key {
    (
        id,
        s.pos.x.to_bits(),
        s.pos.y.to_bits(),
        s.dir,
        s.speed.to_bits(),
        s.layers,
    )
}

fn run(seed: u64, budget: u32, loss: u64, ticks: u64) -> Result<(), TestCaseError> {
    let server_config = ServerConfig {
        budget_bytes_per_sec: Some(budget),
        ..ServerConfig::default()
    };
    let mut server: Server<u32> =
        Server::new(server_config, WorldParams::from(&Config::default())).unwrap();
    let mut now = Instant::from_micros(1_000);
    let mut client = Client::new(ClientConfig::default(), 0, b"me", 1, now).unwrap();
    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<EntityId, Seen> = BTreeMap::new();
    // Per tick, the model's subjects; every state each subject ever had.
    let mut sets: Vec<BTreeSet<EntityId>> = vec![BTreeSet::new()];
    // Per tick, the model itself: the newest state of every subject.
    let mut models: Vec<BTreeMap<EntityId, Seen>> = vec![BTreeMap::new()];
    let mut had: BTreeSet<Key> = BTreeSet::new();
    let mut mine: BTreeMap<EntityId, Seen> = BTreeMap::new();
    let mut buf = vec![0u8; 1200];
    let mut tick = 0;
    let quiet = 200;
    while tick < ticks + quiet {
        now = now + Duration::from_millis(50);
        while let Some(t) = client.poll_transmit(now, &mut buf).unwrap() {
            server.handle_datagram(now, 1, &buf[..t.len]);
        }
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Connecting { conn, .. } = e {
                let spawn = Spawn::observer(OBSERVER, Pos::from_ints(0, 0), Fix::from_num(100));
                server.accept(conn, &spawn, ClientLimits::NONE).unwrap();
            }
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
        tick += 1;
        let events = if tick <= ticks {
            random_tick(&mut rng, OBSERVER, &mut model, 40)
        } else {
            Vec::new()
        };
        sets.push(model.keys().copied().collect());
        models.push(model.clone());
        had.extend(model.iter().map(|(&id, s)| key(id, s)));
        server.push_tick(now, tick, tick, &events).unwrap();
        while let Some(t) = server.poll_transmit(now, &mut buf).unwrap() {
            // The quiet ticks lose nothing, so the run ends converged.
            if tick > ticks || !rng.chance(loss) {
                client.handle_datagram(now, 0, &buf[..t.len]);
            }
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
        while let Some(e) = client.poll_event() {
            let ClientEvent::Tick {
                tick: t, events, ..
            } = e
            else {
                continue;
            };
            for e in &events {
                match *e {
                    Event::Leave { subject, .. } => {
                        mine.remove(&subject);
                    }
                    Event::Enter {
                        subject,
                        pos,
                        dir,
                        speed,
                        layers,
                        ..
                    } => {
                        let s = Seen {
                            pos,
                            dir,
                            speed,
                            layers,
                        };
                        prop_assert!(had.contains(&key(subject, &s)), "an Enter state never had");
                        mine.insert(subject, s);
                    }
                    Event::Update {
                        subject,
                        pos,
                        dir,
                        speed,
                        ..
                    } => {
                        let old = mine[&subject];
                        let s = Seen {
                            pos,
                            dir,
                            speed,
                            ..old
                        };
                        prop_assert_ne!(old, s, "an Update that changes nothing");
                        prop_assert!(had.contains(&key(subject, &s)), "an Update state never had");
                        prop_assert_eq!(
                            models[t as usize].get(&subject),
                            Some(&s),
                            "tick {}: an Update of {} with a superseded state",
                            t,
                            subject
                        );
                        mine.insert(subject, s);
                    }
                    Event::Rejected { .. } => {}
                }
            }
            prop_assert!(
                mine.keys().eq(sets[t as usize].iter()),
                "tick {}: the view set differs",
                t
            );
        }
    }
    prop_assert_eq!(client.applied_tick(), tick);
    prop_assert_eq!(&view_map(client.view()), &model, "not converged");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_budgeted_client_sees_the_model(
        seed in any::<u64>(),
        budget in (20 * MIN_BUDGET_PER_TICK as u32)..40_000u32,
        loss in 0u64..300_000,
        ticks in 1u64..80,
    ) {
        run(seed, budget, loss, ticks)?;
    }
}
