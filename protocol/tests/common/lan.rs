//! A server running a real kernel world, many clients, one virtual clock
//! and a perfect 10 ms network that an attacker can tap and inject into.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use lockgrid_kernel::{Command, Config, Dir, Event, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::token::{ConnectToken, PrivateKey, TokenParams};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, ClientState, DisconnectReason, Instant,
    Server, ServerConfig, ServerEvent, ServerSecurity, WorldParams,
};

use super::Rng;

/// The server's address on the virtual network.
pub const SERVER: u32 = 0;
/// The game's protocol id in these tests.
pub const PROTOCOL_ID: u64 = 0x4c47_7465_7374_0001;
/// Unix time at the virtual clock's zero.
pub const UNIX_AT_ZERO: u64 = 1_800_000_000;

/// The key shared by the test backend and server.
pub fn key() -> PrivateKey {
    PrivateKey([0x42; 32])
}

/// The address clients reach the server at, as tokens name it.
pub fn server_socket() -> SocketAddr {
    "192.0.2.1:7777".parse().unwrap()
}

/// A datagram on the wire.
#[derive(Clone, Debug)]
pub struct Datagram {
    pub at: Instant,
    pub from: u32,
    pub to: u32,
    pub bytes: Vec<u8>,
}

pub struct Lan {
    pub now: Instant,
    pub server: Server<u32>,
    pub world: World,
    pub clients: BTreeMap<u32, Client<u32>>,
    pub client_events: BTreeMap<u32, Vec<ClientEvent>>,
    pub server_events: Vec<ServerEvent<u32>>,
    /// Every datagram sent so far, in order: what an eavesdropper sees.
    pub tap: Vec<Datagram>,
    wire: Vec<Datagram>,
    commands: Vec<Command>,
    events: Vec<Event>,
    next_tick: Instant,
    rng: Rng,
}

impl Lan {
    /// A server with security (`secure`) or without, and no clients yet.
    pub fn new(secure: bool) -> Lan {
        let config = Config::default();
        let params = WorldParams::from(&config);
        let server = if secure {
            let sec = ServerSecurity::new(key(), PROTOCOL_ID, vec![server_socket()], UNIX_AT_ZERO);
            Server::with_security(ServerConfig::default(), params, sec).unwrap()
        } else {
            Server::new(ServerConfig::default(), params).unwrap()
        };
        Lan {
            now: Instant::from_micros(1_000),
            server,
            world: World::new(config).unwrap(),
            clients: BTreeMap::new(),
            client_events: BTreeMap::new(),
            server_events: Vec::new(),
            tap: Vec::new(),
            wire: Vec::new(),
            commands: Vec::new(),
            events: Vec::new(),
            next_tick: Instant::from_micros(50_000),
            rng: Rng::new(31),
        }
    }

    /// Unix seconds now, on the virtual clock.
    pub fn unix_now(&self) -> u64 {
        UNIX_AT_ZERO + self.now.as_micros() / 1_000_000
    }

    /// Parameters of a valid token for `client_id`, valid for a minute.
    pub fn params<'a>(&self, client_id: u64, servers: &'a [SocketAddr]) -> TokenParams<'a> {
        TokenParams {
            protocol_id: PROTOCOL_ID,
            create_unix_secs: self.unix_now(),
            expire_unix_secs: self.unix_now() + 60,
            client_id,
            server_addresses: servers,
            user_data: b"guild=7",
        }
    }

    /// Mints a token with the test key and the harness's seeded RNG.
    pub fn mint(&mut self, params: &TokenParams<'_>, key: &PrivateKey) -> ConnectToken {
        let rng = &mut self.rng;
        ConnectToken::generate(key, params, |b| {
            for x in b {
                *x = rng.next_u64() as u8;
            }
        })
        .unwrap()
    }

    /// A valid token for `client_id`.
    pub fn token(&mut self, client_id: u64) -> ConnectToken {
        let servers = [server_socket()];
        let p = self.params(client_id, &servers);
        self.mint(&p, &key())
    }

    /// A client at `addr` that says Hello with a connect token.
    pub fn add_client(&mut self, addr: u32, token: &ConnectToken) {
        let c = Client::with_token(ClientConfig::default(), SERVER, token, self.now).unwrap();
        self.clients.insert(addr, c);
    }

    /// A client at `addr` whose Hello carries `raw` as its token.
    pub fn add_raw_client(&mut self, addr: u32, raw: &[u8]) {
        let c = Client::new(
            ClientConfig::default(),
            SERVER,
            raw,
            u64::from(addr) << 32 ^ self.now.as_micros(),
            self.now,
        )
        .unwrap();
        self.clients.insert(addr, c);
    }

    /// Puts a datagram on the wire to the server, as if sent from `from`.
    pub fn inject(&mut self, from: u32, bytes: Vec<u8>) {
        self.inject_to(from, SERVER, bytes);
    }

    /// Puts a datagram on the wire from `from` to `to`.
    pub fn inject_to(&mut self, from: u32, to: u32, bytes: Vec<u8>) {
        self.wire.push(Datagram {
            at: self.now,
            from,
            to,
            bytes,
        });
    }

    pub fn state(&self, addr: u32) -> ClientState {
        self.clients[&addr].state()
    }

    pub fn applied(&self, addr: u32) -> u64 {
        self.clients[&addr].applied_tick()
    }

    /// Why the client at `addr` was disconnected, if it was.
    pub fn disconnect_reason(&self, addr: u32) -> Option<DisconnectReason> {
        self.client_events.get(&addr)?.iter().find_map(|e| match e {
            ClientEvent::Disconnected { reason } => Some(*reason),
            _ => None,
        })
    }

    fn host_events(&mut self) {
        while let Some(e) = self.server.poll_event() {
            match &e {
                ServerEvent::Connecting { conn, .. } => {
                    // The token names the entity; without security, a fresh one.
                    let entity = match self.server.token_claims(*conn) {
                        Some(claims) => claims.client_id,
                        None => 10_000 + u64::from(conn.0 % 1000),
                    };
                    self.server
                        .accept(
                            *conn,
                            &Spawn::npc(entity, Pos::from_ints(0, 0)),
                            ClientLimits::NONE,
                        )
                        .unwrap();
                    let at = Pos::from_ints(100 + (entity % 40) as i32 * 10, 100);
                    self.commands.push(Command::Spawn(Spawn::observer(
                        entity,
                        at,
                        Fix::from_num(300),
                    )));
                }
                ServerEvent::Input { .. } => self
                    .commands
                    .extend_from_slice(self.server.input_commands()),
                ServerEvent::Disconnected {
                    entity: Some(id), ..
                } => self.commands.push(Command::Despawn { id: *id }),
                ServerEvent::Disconnected { .. } => {}
            }
            self.server_events.push(e);
        }
    }

    /// Connected clients each move their entity one unit a tick.
    fn client_inputs(&mut self) {
        let tick = self.world.tick() + 1;
        for c in self.clients.values_mut() {
            let Some(entity) = c.entity() else { continue };
            if c.state() != ClientState::Connected || c.unacked_inputs() > 8 {
                continue;
            }
            let x = 100 + (entity % 40) as i32 * 10 + (tick % 50) as i32;
            let m = Command::Move(Move {
                id: entity,
                pos: Pos::from_ints(x, 100),
                dir: Dir::default(),
                speed: Fix::ZERO,
            });
            let _ = c.send_input(tick, &[m]);
        }
    }

    /// Runs everything for `d` of virtual time.
    pub fn run(&mut self, d: Duration) {
        let end = self.now + d;
        let mut buf = vec![0u8; 1200];
        loop {
            let due: Vec<Datagram> = {
                let (due, rest) = self.wire.drain(..).partition(|w| w.at <= self.now);
                self.wire = rest;
                due
            };
            for w in due {
                if w.to == SERVER {
                    self.server.handle_datagram(self.now, w.from, &w.bytes);
                } else if let Some(c) = self.clients.get_mut(&w.to) {
                    c.handle_datagram(self.now, w.from, &w.bytes);
                }
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
            for c in self.clients.values_mut() {
                if c.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.handle_timeout(self.now);
                }
            }
            self.host_events();
            if self.now >= self.next_tick {
                self.next_tick = self.next_tick + Duration::from_millis(50);
                self.events.clear();
                let report = self.world.step(&self.commands, &mut self.events);
                self.commands.clear();
                self.server
                    .push_tick(self.now, report.tick, report.digest, &self.events)
                    .unwrap();
                self.client_inputs();
            }
            for (&addr, c) in self.clients.iter_mut() {
                while let Some(e) = c.poll_event() {
                    self.client_events.entry(addr).or_default().push(e);
                }
            }
            let at = self.now + Duration::from_millis(10);
            while let Some(t) = self.server.poll_transmit(self.now, &mut buf).unwrap() {
                let d = Datagram {
                    at,
                    from: SERVER,
                    to: t.destination,
                    bytes: buf[..t.len].to_vec(),
                };
                self.tap.push(d.clone());
                self.wire.push(d);
            }
            for (&addr, c) in self.clients.iter_mut() {
                while let Some(t) = c.poll_transmit(self.now, &mut buf).unwrap() {
                    let d = Datagram {
                        at,
                        from: addr,
                        to: t.destination,
                        bytes: buf[..t.len].to_vec(),
                    };
                    self.tap.push(d.clone());
                    self.wire.push(d);
                }
            }
            if self.now >= end {
                break;
            }
            let mut next = end.min(self.next_tick);
            for w in &self.wire {
                next = next.min(w.at);
            }
            let timeouts = self.clients.values().map(|c| c.poll_timeout());
            for t in timeouts.chain([self.server.poll_timeout()]).flatten() {
                next = next.min(t);
            }
            self.now = next.max(self.now + Duration::from_micros(100));
        }
    }
}
