//! Under a budget, a lost part goes again without the Updates that newer
//! states superseded: an Update is dropped when it was the last sent of its
//! subject and the subject moved on since; the subject is then sent a reset
//! (its newest state, absolute). Updates still carrying the newest state,
//! and those a later Update may be a delta from, go again unchanged. The
//! client never holds a state its subject did not have, and converges.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::crowd::config;
use lockgrid_kernel::{Command, EntityId, Event, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::batch::decode_part;
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, Frame, Instant, Packet, Server, ServerConfig,
    ServerEvent, View, WorldParams, DEFAULT_MTU,
};

const SERVER: u32 = 0;
const CLIENT: u32 = 1;
const OBSERVER: EntityId = 1000;
const WALKERS: u64 = 40;
/// Walks until the lost tick, then stands: its Update there stays newest.
const STOPPER: EntityId = WALKERS + 1;
/// The NPCs walk until this tick, then every copy must converge.
const MOTION_ENDS: u64 = 120;

fn walk(id: EntityId, tick: u64) -> Command {
    let (t, k) = (tick as i32, id as i32);
    Command::Move(Move {
        id,
        pos: Pos::from_ints(1980 + k + t % 7, 1990 + (k * 3 + t) % 13),
        dir: 0,
        speed: Fix::ONE,
    })
}

/// The TickBatch payloads of `tick` in a server packet.
fn parts_of(bytes: &[u8], tick: u64) -> Vec<Vec<u8>> {
    let Ok(p) = Packet::decode(bytes) else {
        return Vec::new();
    };
    p.frames
        .iter()
        .filter_map(|f| match f {
            Frame::TickBatch(b) if b.tick == tick && b.parts == 1 => Some(b.payload.to_vec()),
            _ => None,
        })
        .collect()
}

fn updated(events: &[Event]) -> BTreeMap<EntityId, Pos> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Update { subject, pos, .. } => Some((subject, pos)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lost_part_goes_again_without_superseded_updates() {
    let cfg = config();
    let mut world = World::new(cfg).expect("world");
    // 100 bytes a tick: a few Updates of the 41 moving subjects each tick.
    let server_config = ServerConfig {
        budget_bytes_per_sec: Some(2_000),
        ..ServerConfig::default()
    };
    let mut server: Server<u32> =
        Server::new(server_config, WorldParams::from(&cfg)).expect("server");
    let mut now = Instant::from_micros(1_000);
    let mut client = Client::new(ClientConfig::default(), SERVER, b"c", 1, now).expect("client");
    let mut commands: Vec<Command> = (1..=STOPPER)
        .map(|id| Command::Spawn(Spawn::observer(id, Pos::from_ints(2000, 2000), Fix::ZERO)))
        .collect();
    let mut events = Vec::new();
    let mut buf = vec![0u8; DEFAULT_MTU];
    // The tick whose first packet is dropped; its payload; the client's
    // view just before it; the events the client applied for it.
    let mut lost_tick: Option<u64> = None;
    let mut original: Option<Vec<u8>> = None;
    let mut view_before: Option<View> = None;
    let mut applied: Option<Vec<Event>> = None;
    let mut history: BTreeMap<EntityId, Vec<Pos>> = BTreeMap::new();

    for _ in 0..MOTION_ENDS + 100 {
        let tick = world.tick();
        if tick < MOTION_ENDS {
            commands.extend((1..=WALKERS).map(|id| walk(id, tick)));
            if lost_tick.is_none_or(|t| tick < t) {
                commands.push(walk(STOPPER, tick));
            }
        }
        events.clear();
        let report = world.step(&commands, &mut events);
        commands.clear();
        for id in 1..=STOPPER {
            let pos = world.entity(id).expect("NPCs stay").pos;
            history.entry(id).or_default().push(pos);
        }
        server
            .push_tick(now, report.tick, report.digest, &events)
            .expect("tick");
        if lost_tick.is_none() && report.tick > 40 && world.entity(OBSERVER).is_some() {
            lost_tick = Some(report.tick + 1);
        }

        for _ in 0..3 {
            if server.poll_timeout().is_some_and(|t| t <= now) {
                server.handle_timeout(now);
            }
            while let Some(t) = server.poll_transmit(now, &mut buf).expect("transmit") {
                let bytes = &buf[..t.len];
                if let (Some(lt), None) = (lost_tick, &original) {
                    if let Some(payload) = parts_of(bytes, lt).pop() {
                        original = Some(payload);
                        view_before = Some(client.view().clone());
                        continue;
                    }
                }
                client.handle_datagram(now, SERVER, bytes);
            }
            if client.poll_timeout().is_some_and(|t| t <= now) {
                client.handle_timeout(now);
            }
            while let Some(ev) = client.poll_event() {
                if let ClientEvent::Tick { tick, events, .. } = ev {
                    for (id, pos) in updated(&events) {
                        assert!(
                            history[&id].contains(&pos),
                            "tick {tick}: {id} shown where it never was"
                        );
                    }
                    if Some(tick) == lost_tick {
                        applied = Some(events);
                    }
                }
            }
            while let Some(t) = client.poll_transmit(now, &mut buf).expect("transmit") {
                server.handle_datagram(now, CLIENT, &buf[..t.len]);
            }
            while let Some(e) = server.poll_event() {
                if let ServerEvent::Connecting { conn, .. } = e {
                    let spawn = Spawn::observer(OBSERVER, Pos::from_ints(2005, 2005), Fix::ZERO);
                    server
                        .accept(conn, &spawn, ClientLimits::NONE)
                        .expect("accept");
                    commands.push(Command::Spawn(spawn));
                }
            }
            now = now + Duration::from_millis(1);
        }
        // Ticks come faster than a retransmission timeout, so the lost part
        // is found lost by later packets acknowledged, after later ticks.
        now = now + Duration::from_millis(2);
    }

    let lost = lost_tick.expect("a tick was lost");
    let mut before = view_before.expect("the lost tick's packet was dropped");
    let mut first = Vec::new();
    decode_part(
        &original.expect("dropped"),
        OBSERVER,
        &mut before,
        &mut first,
    )
    .expect("the dropped part decodes");
    let sent_first = updated(&first);
    let sent_again = updated(&applied.expect("the lost tick was applied from its resend"));
    assert!(
        sent_again
            .iter()
            .all(|(id, pos)| sent_first.get(id) == Some(pos)),
        "the resend carries a subset of the first copy's Updates, unchanged"
    );
    assert!(
        sent_again.len() < sent_first.len(),
        "tick {lost}: no Update was superseded ({} sent both times)",
        sent_first.len()
    );
    if sent_first.contains_key(&STOPPER) {
        assert!(
            sent_again.contains_key(&STOPPER),
            "the stopper's Update is still its newest state"
        );
    }

    let conn = server.connections().next().expect("connected");
    let stats = server.budget_stats(conn).expect("budget");
    let dropped = (sent_first.len() - sent_again.len()) as u64;
    assert!(stats.updates_superseded >= dropped, "{stats:?}");
    assert!(stats.resets_sent >= dropped, "{stats:?}");
    // Every copy converged to the kernel's state once the NPCs stopped.
    let view = client.view();
    assert_eq!(view.len() as u64, STOPPER);
    for (id, seen) in view.iter() {
        let e = world.entity(id).expect("visible subjects exist");
        assert_eq!((seen.pos, seen.dir, seen.speed), (e.pos, e.dir, e.speed));
    }
}
