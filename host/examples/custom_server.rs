//! A server of your own on the lockgrid node: your rules, real UDP, real
//! protocol clients.
//!
//! ```sh
//! cargo run -p lockgrid-host --example custom_server
//! ```
//!
//! The rules here: only tokens on a guest list get in (the others are
//! refused and counted); players spawn in a small area in the middle of
//! the world; a client's despawn of its own entity is this game's "go
//! home" command, turned into a move back to the spawn area; moves must
//! stay inside the world; a beacon NPC circles the spawn area. Three
//! clients (two guests and a stranger) play for two seconds over loopback
//! UDP, then the node's counters are printed.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use lockgrid_host::node::{ClientHello, ClientInput, MemStorage, Node, NodeConfig, Refusal, Rules};
use lockgrid_kernel::{Command, Config, EntityId, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, Instant, MAX_MTU,
};

/// The beacon NPC's id (client entities get ids far above it).
const BEACON: EntityId = 1;

struct GuestRules {
    guests: BTreeSet<Vec<u8>>,
}

impl GuestRules {
    /// A point of the spawn area (a 200 × 200 square at the world's
    /// middle) drawn from the entity id.
    fn spawn_area(world: &World, entity: EntityId) -> Pos {
        let c = world.config();
        let mid_x = c.origin.x + c.cell_size * Fix::from_num(c.width_cells / 2);
        let mid_y = c.origin.y + c.cell_size * Fix::from_num(c.height_cells / 2);
        let h = entity.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let dx = Fix::from_num((h % 200) as i32 - 100);
        let dy = Fix::from_num(((h >> 32) % 200) as i32 - 100);
        Pos::new(mid_x + dx, mid_y + dy)
    }
}

impl Rules for GuestRules {
    fn start(&mut self, world: &World, out: &mut Vec<Command>) {
        if world.entity(BEACON).is_none() {
            out.push(Command::Spawn(Spawn::npc(
                BEACON,
                Self::spawn_area(world, 0),
            )));
        }
    }

    fn admit(&mut self, _world: &World, hello: &ClientHello<'_>) -> Result<(), Refusal> {
        if self.guests.contains(hello.token) {
            Ok(())
        } else {
            Err(Refusal::Custom("not_on_the_guest_list"))
        }
    }

    fn spawn(&mut self, world: &World, entity: EntityId, _hello: &ClientHello<'_>) -> Spawn {
        Spawn::observer(entity, Self::spawn_area(world, entity), Fix::from_num(300))
    }

    fn check_input(
        &mut self,
        world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        let entity = input.entity;
        let command = input.command;
        match *command {
            // This game's "go home": back to the spawn area, standing still.
            Command::Despawn { .. } => out.push(Command::Move(Move {
                id: entity,
                pos: Self::spawn_area(world, entity),
                dir: 0,
                speed: Fix::ZERO,
            })),
            Command::Move(m) if world.config().cell_of(m.pos).is_none() => {
                return Err(Refusal::OutOfBounds)
            }
            Command::Move(m) => out.push(Command::Move(m)),
            Command::Spawn(_) => return Err(Refusal::NotAMove),
        }
        Ok(())
    }

    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>) {
        // The beacon walks a square around the spawn area, a side per 20 ticks.
        let centre = Self::spawn_area(world, 0);
        let along = Fix::from_num((tick % 20) as i32 * 15 - 150);
        let side = Fix::from_num(150);
        let pos = match (tick / 20) % 4 {
            0 => Pos::new(centre.x + along, centre.y - side),
            1 => Pos::new(centre.x + side, centre.y + along),
            2 => Pos::new(centre.x - along, centre.y + side),
            _ => Pos::new(centre.x - side, centre.y - along),
        };
        if world.entity(BEACON).is_some() {
            out.push(Command::Move(Move {
                id: BEACON,
                pos,
                dir: 0,
                speed: Fix::from_num(300),
            }));
        }
    }

    fn left(
        &mut self,
        _world: &World,
        entity: EntityId,
        _reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::Despawn { id: entity });
    }
}

struct Player {
    name: &'static str,
    socket: UdpSocket,
    client: Client<SocketAddr>,
    pos: Option<Pos>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epoch = std::time::Instant::now();
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let rules = GuestRules {
        guests: [b"alice".to_vec(), b"bob".to_vec()].into(),
    };
    // `FileStorage` would keep the journal and snapshots in a data folder;
    // this example keeps them in memory.
    let (mut node, report) = Node::open(
        now(),
        NodeConfig::default(),
        &Config::default(),
        rules,
        MemStorage::new(4),
    )?;
    println!("node: {report}");
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.set_nonblocking(true)?;
    let server = socket.local_addr()?;

    let mut players = Vec::new();
    for (nonce, name) in (1..).zip(["alice", "bob", "mallory"]) {
        let s = UdpSocket::bind("127.0.0.1:0")?;
        s.set_nonblocking(true)?;
        let client = Client::new(
            ClientConfig::default(),
            server,
            name.as_bytes(),
            nonce,
            now(),
        )?;
        players.push(Player {
            name,
            socket: s,
            client,
            pos: None,
        });
    }

    let mut buf = vec![0u8; MAX_MTU + 1];
    let mut out = vec![0u8; MAX_MTU];
    let end = now() + Duration::from_secs(2);
    while now() < end {
        // The node's side: datagrams in, its deadline, datagrams out.
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            node.handle_datagram(now(), from, &buf[..n]);
        }
        if now() >= node.poll_timeout() && node.handle_timeout(now())?.is_some() {
            while let Some(t) = node.poll_transmit(now(), &mut out)? {
                socket.send_to(&out[..t.len], t.destination)?;
            }
        }
        // The players' side.
        for p in &mut players {
            while let Ok((n, from)) = p.socket.recv_from(&mut buf) {
                p.client.handle_datagram(now(), from, &buf[..n]);
            }
            if p.client.poll_timeout().is_some_and(|t| t <= now()) {
                p.client.handle_timeout(now());
            }
            while let Some(ev) = p.client.poll_event() {
                match ev {
                    ClientEvent::Connected(w) => {
                        println!("{} joined as entity {}", p.name, w.entity);
                        // The Welcome says where the entity starts.
                        p.pos = Some(w.spawn.pos);
                    }
                    ClientEvent::Refused(r) => {
                        println!("{}'s input {} was refused: {:?}", p.name, r.seq, r.reason)
                    }
                    ClientEvent::Tick { tick, .. } if tick % 10 == 0 => println!(
                        "{} at tick {tick} sees {:?}",
                        p.name,
                        p.client.view().ids().collect::<Vec<_>>()
                    ),
                    ClientEvent::Tick { .. } => {}
                    ClientEvent::Disconnected { reason } => {
                        println!("{} was turned away: {reason}", p.name);
                    }
                }
            }
            if p.client.state() == ClientState::Connected && p.client.unacked_inputs() == 0 {
                let me = p.client.entity().unwrap_or_default();
                let tick = p.client.applied_tick() + 1;
                let here = *p.pos.get_or_insert(Pos::from_ints(3200, 3200));
                // Alice goes home every 15 ticks; otherwise everyone walks east.
                let cmd = if p.name == "alice" && tick % 15 == 0 {
                    Command::Despawn { id: me }
                } else {
                    let next = Pos::new(here.x + Fix::from_num(7), here.y + Fix::from_num(2));
                    p.pos = Some(next);
                    Command::Move(Move {
                        id: me,
                        pos: next,
                        dir: 0,
                        speed: Fix::from_num(140),
                    })
                };
                let _ = p.client.send_input(tick, &[cmd]);
            }
            while let Some(t) = p.client.poll_transmit(now(), &mut out)? {
                p.socket.send_to(&out[..t.len], t.destination)?;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = node.stats();
    println!(
        "after {} ticks: {} connections, {} clients, refused {:?}",
        stats.ticks_run,
        stats.connections,
        stats.clients,
        stats
            .refused
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect::<Vec<_>>()
    );
    Ok(())
}
