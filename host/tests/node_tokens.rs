//! A node with a key: a client acts for the entity its connect token
//! names, the rules see the token's user data and may refuse on it, and a
//! token naming an NPC or an entity another client holds is refused.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use lockgrid_host::node::{
    ClientHello, ClientInput, MemStorage, Node, NodeConfig, Refusal, Rules, CLIENT_ID_BASE,
};
use lockgrid_host::serve::DefaultRules;
use lockgrid_kernel::{Command, Config, EntityId, Fix, Spawn, World};
use lockgrid_protocol::token::{ConnectToken, PrivateKey, TokenParams};
use lockgrid_protocol::{
    Client, ClientConfig, ClientState, DisconnectReason, Instant, ServerSecurity,
};

const SERVER: u32 = 0;
const PROTOCOL_ID: u64 = 0x4c47_6e6f_6465_0001;
const UNIX_AT_ZERO: u64 = 1_800_000_000;

fn key() -> PrivateKey {
    PrivateKey([0x5a; 32])
}

fn server_socket() -> SocketAddr {
    "192.0.2.7:7777".parse().unwrap()
}

/// What the rules were shown, per call.
type Seen = Rc<RefCell<Vec<(&'static str, Option<EntityId>, Vec<u8>)>>>;

/// The default rules, plus a ban list read from the token's user data.
struct GuildRules {
    inner: DefaultRules,
    seen: Seen,
}

fn user_data(hello: &ClientHello<'_>) -> Vec<u8> {
    let data = hello.user_data().expect("a keyed node shows the claims");
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    data[..end].to_vec()
}

impl Rules for GuildRules {
    fn start(&mut self, world: &World, out: &mut Vec<Command>) {
        self.inner.start(world, out);
    }

    fn admit(&mut self, world: &World, hello: &ClientHello<'_>) -> Result<(), Refusal> {
        let data = user_data(hello);
        let id = hello.claims.map(|c| c.client_id);
        self.seen.borrow_mut().push(("admit", id, data.clone()));
        if data.starts_with(b"banned") {
            return Err(Refusal::Custom("banned"));
        }
        self.inner.admit(world, hello)
    }

    fn spawn(&mut self, world: &World, entity: EntityId, hello: &ClientHello<'_>) -> Spawn {
        self.seen
            .borrow_mut()
            .push(("spawn", Some(entity), user_data(hello)));
        self.inner.spawn(world, entity, hello)
    }

    fn check_input(
        &mut self,
        world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        self.inner.check_input(world, input, out)
    }

    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>) {
        self.inner.server_commands(world, tick, out);
    }

    fn left(
        &mut self,
        world: &World,
        entity: EntityId,
        reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        self.inner.left(world, entity, reason, out);
    }
}

struct Harness {
    now: Instant,
    node: Node<u32, GuildRules, MemStorage>,
    clients: Vec<(u32, Client<u32>)>,
    seen: Seen,
    fill: u8,
}

impl Harness {
    fn new() -> Harness {
        let seen = Seen::default();
        let rules = GuildRules {
            // Four NPCs: ids 1 to 4.
            inner: DefaultRules::new(Fix::from_num(200), 20, 4, 1),
            seen: Rc::clone(&seen),
        };
        let now = Instant::from_micros(1_000);
        let (mut node, _) = Node::open(
            now,
            NodeConfig::default(),
            &Config::default(),
            rules,
            MemStorage::new(0),
        )
        .expect("opens");
        let security = ServerSecurity::new(key(), PROTOCOL_ID, vec![server_socket()], UNIX_AT_ZERO);
        node.set_security(security).expect("security");
        Harness {
            now,
            node,
            clients: Vec::new(),
            seen,
            fill: 1,
        }
    }

    fn token(&mut self, client_id: EntityId, user_data: &[u8]) -> ConnectToken {
        self.token_under(&key(), client_id, user_data)
    }

    /// A token minted with `key` (the server's, or a forger's).
    fn token_under(
        &mut self,
        key: &PrivateKey,
        client_id: EntityId,
        user_data: &[u8],
    ) -> ConnectToken {
        let unix = UNIX_AT_ZERO + self.now.as_micros() / 1_000_000;
        let servers = [server_socket()];
        let params = TokenParams {
            protocol_id: PROTOCOL_ID,
            create_unix_secs: unix,
            expire_unix_secs: unix + 60,
            client_id,
            server_addresses: &servers,
            user_data,
        };
        let fill = &mut self.fill;
        ConnectToken::generate(key, &params, |b| {
            for x in b {
                *fill = fill.wrapping_mul(31).wrapping_add(7);
                *x = *fill;
            }
        })
        .expect("token")
    }

    /// A client at address `addr` with a token for `client_id`.
    fn join(&mut self, addr: u32, client_id: EntityId, user_data: &[u8]) {
        let token = self.token(client_id, user_data);
        let client =
            Client::with_token(ClientConfig::default(), SERVER, &token, self.now).expect("client");
        self.clients.push((addr, client));
    }

    fn client(&self, addr: u32) -> &Client<u32> {
        &self.clients.iter().find(|c| c.0 == addr).expect("client").1
    }

    /// Runs node and clients on a lossless 1 ms network for `d`.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        let mut buf = vec![0u8; 1500];
        let mut wire: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        while self.now < end {
            for (from, to, bytes) in wire.drain(..) {
                if to == SERVER {
                    self.node.handle_datagram(self.now, from, &bytes);
                } else if let Some((_, c)) = self.clients.iter_mut().find(|c| c.0 == to) {
                    c.handle_datagram(self.now, SERVER, &bytes);
                }
            }
            self.node.handle_timeout(self.now).expect("ticks");
            while let Some(t) = self.node.poll_transmit(self.now, &mut buf).expect("buffer") {
                wire.push((SERVER, t.destination, buf[..t.len].to_vec()));
            }
            for (addr, c) in &mut self.clients {
                if c.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.handle_timeout(self.now);
                }
                while c.poll_event().is_some() {}
                while let Some(t) = c.poll_transmit(self.now, &mut buf).expect("buffer") {
                    wire.push((*addr, SERVER, buf[..t.len].to_vec()));
                }
            }
            self.now = self.now + Duration::from_millis(1);
        }
    }
}

#[test]
fn a_keyed_client_acts_for_its_tokens_entity_and_the_rules_see_its_user_data() {
    let mut h = Harness::new();
    let me = CLIENT_ID_BASE + 7_000;
    h.join(1, me, b"guild=7");
    h.run(Duration::from_secs(1));
    assert_eq!(h.client(1).state(), ClientState::Connected);
    assert_eq!(h.client(1).entity(), Some(me));
    assert!(h.node.world().entity(me).is_some(), "its entity spawned");
    assert_eq!(
        *h.seen.borrow(),
        vec![
            ("admit", Some(me), b"guild=7".to_vec()),
            ("spawn", Some(me), b"guild=7".to_vec()),
        ]
    );
}

#[test]
fn the_rules_refuse_on_the_tokens_user_data() {
    let mut h = Harness::new();
    h.join(1, CLIENT_ID_BASE + 1, b"banned: cheating");
    h.run(Duration::from_secs(1));
    assert_eq!(
        h.client(1).state(),
        ClientState::Closed(DisconnectReason::TokenRejected)
    );
    assert_eq!(
        h.node.stats().refused.get(&Refusal::Custom("banned")),
        Some(&1)
    );
    assert_eq!(h.node.clients().count(), 0);
}

#[test]
fn a_token_for_an_npc_or_a_held_entity_is_refused() {
    let mut h = Harness::new();
    let me = CLIENT_ID_BASE + 42;
    h.join(1, me, b"first");
    h.run(Duration::from_millis(500));
    assert_eq!(h.client(1).entity(), Some(me));
    // NPC 3 exists; client 2 may not take it over.
    assert!(h.node.world().entity(3).is_some());
    h.join(2, 3, b"npc");
    // Another token for the entity client 1 holds.
    h.join(3, me, b"second");
    h.run(Duration::from_secs(1));
    for addr in [2, 3] {
        assert_eq!(
            h.client(addr).state(),
            ClientState::Closed(DisconnectReason::TokenRejected),
            "client {addr}"
        );
    }
    assert_eq!(h.node.stats().refused.get(&Refusal::Token), Some(&2));
    assert_eq!(h.client(1).state(), ClientState::Connected);
    assert_eq!(h.node.clients().collect::<Vec<_>>(), vec![me]);
}

#[test]
fn the_protocols_token_refusals_are_counted_with_the_nodes() {
    let mut h = Harness::new();
    // Minted with another key: it does not open under the server's.
    let forged = h.token_under(&PrivateKey([0x11; 32]), CLIENT_ID_BASE + 1, b"forged");
    let client =
        Client::with_token(ClientConfig::default(), SERVER, &forged, h.now).expect("client");
    h.clients.push((1, client));
    h.run(Duration::from_secs(1));
    assert_eq!(
        h.client(1).state(),
        ClientState::Closed(DisconnectReason::TokenInvalid)
    );
    assert_eq!(h.node.stats().refused.get(&Refusal::Token), Some(&1));
    assert!(h.seen.borrow().is_empty(), "the rules never saw it");
}
