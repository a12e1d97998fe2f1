//! A node without a key: the Hello's token is the client's name, and a
//! name has one entity, whatever the connection. A client that comes back
//! with its name gets its entity back (a fresh view, from Enter events);
//! an empty name gets a new entity each connection; a name a client of the
//! node holds is refused.
//!
//! Two nodes stepping the same ticks (as the nodes of a cluster do) show
//! the take-over: a name connecting to the second node while its entity is
//! alive gets that entity, despawned and spawned again where it was, and
//! the first node's client is told `kicked`.

use std::time::Duration;

use lockgrid_host::node::{name_entity, MemStorage, Node, NodeConfig, NAMED_ID_BASE};
use lockgrid_host::serve::DefaultRules;
use lockgrid_kernel::{Command, Config, EntityId, Fix};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, Instant,
};

const SERVER: u32 = 0;

type TestNode = Node<u32, DefaultRules, MemStorage>;

fn open(now: Instant) -> TestNode {
    let rules = DefaultRules::new(Fix::from_num(200), 20, 4, 1);
    Node::open(
        now,
        NodeConfig::default(),
        &Config::default(),
        rules,
        MemStorage::new(0),
    )
    .expect("opens")
    .0
}

struct Player {
    addr: u32,
    client: Client<u32>,
    goodbye: Option<DisconnectReason>,
}

impl Player {
    fn new(addr: u32, name: &[u8], now: Instant) -> Player {
        Player {
            addr,
            client: Client::new(ClientConfig::default(), SERVER, name, u64::from(addr), now)
                .expect("client"),
            goodbye: None,
        }
    }
}

/// Clients on a lossless 1 ms network to one server address.
struct Net {
    now: Instant,
    players: Vec<Player>,
    next_addr: u32,
}

impl Net {
    fn join(&mut self, name: &[u8]) -> usize {
        self.next_addr += 1;
        self.players
            .push(Player::new(self.next_addr, name, self.now));
        self.players.len() - 1
    }

    /// Turns the clients once: datagrams `to_clients` in, timers, events,
    /// datagrams out (returned, for the server).
    fn turn(&mut self, to_clients: Vec<(u32, Vec<u8>)>) -> Vec<(u32, Vec<u8>)> {
        let mut buf = vec![0u8; 1500];
        let mut out = Vec::new();
        for (to, bytes) in to_clients {
            if let Some(p) = self.players.iter_mut().find(|p| p.addr == to) {
                p.client.handle_datagram(self.now, SERVER, &bytes);
            }
        }
        for p in &mut self.players {
            if p.client.poll_timeout().is_some_and(|t| t <= self.now) {
                p.client.handle_timeout(self.now);
            }
            while let Some(ev) = p.client.poll_event() {
                if let ClientEvent::Disconnected { reason } = ev {
                    p.goodbye = Some(reason);
                }
            }
            while let Some(t) = p.client.poll_transmit(self.now, &mut buf).expect("buffer") {
                out.push((p.addr, buf[..t.len].to_vec()));
            }
        }
        out
    }

    fn player(&self, i: usize) -> &Client<u32> {
        &self.players[i].client
    }
}

/// One node and its clients, run for `d`.
fn run(node: &mut TestNode, net: &mut Net, d: Duration) {
    let end = net.now + d;
    let mut buf = vec![0u8; 1500];
    let mut inbox = Vec::new();
    while net.now < end {
        let out = net.turn(std::mem::take(&mut inbox));
        for (from, bytes) in out {
            node.handle_datagram(net.now, from, &bytes);
        }
        node.handle_timeout(net.now).expect("ticks");
        while let Some(t) = node.poll_transmit(net.now, &mut buf).expect("buffer") {
            inbox.push((t.destination, buf[..t.len].to_vec()));
        }
        net.now = net.now + Duration::from_millis(1);
    }
}

fn sorted_view(node: &TestNode, entity: EntityId) -> Vec<EntityId> {
    let mut v: Vec<EntityId> = node.world().view(entity).expect("observer").collect();
    v.sort_unstable();
    v
}

fn client_view(c: &Client<u32>) -> Vec<EntityId> {
    let mut v: Vec<EntityId> = c.view().ids().collect();
    v.sort_unstable();
    v
}

#[test]
fn a_name_has_one_entity_and_gets_it_back_on_reconnecting() {
    let now = Instant::from_micros(1_000);
    let mut node = open(now);
    let mut net = Net {
        now,
        players: Vec::new(),
        next_addr: 0,
    };
    let alice = name_entity(b"alice").expect("a name has an entity");
    assert!(alice >= NAMED_ID_BASE);
    assert_ne!(Some(alice), name_entity(b"bob"));
    assert_eq!(name_entity(b""), None);

    let a = net.join(b"alice");
    let b = net.join(b"bob");
    run(&mut node, &mut net, Duration::from_millis(500));
    assert_eq!(net.player(a).entity(), Some(alice));
    assert_eq!(net.player(b).entity(), name_entity(b"bob"));

    // The name is held here: a second client with it is refused.
    let again = net.join(b"alice");
    run(&mut node, &mut net, Duration::from_millis(300));
    assert_eq!(
        net.players[again].goodbye,
        Some(DisconnectReason::TokenRejected)
    );
    assert_eq!(net.player(a).state(), ClientState::Connected);

    // Alice leaves (her entity is despawned) and comes back: the same entity.
    net.players[a].client.close(net.now);
    run(&mut node, &mut net, Duration::from_millis(300));
    assert!(node.world().entity(alice).is_none(), "despawned on leaving");
    let back = net.join(b"alice");
    run(&mut node, &mut net, Duration::from_millis(500));
    assert_eq!(net.player(back).state(), ClientState::Connected);
    assert_eq!(net.player(back).entity(), Some(alice));
    assert!(node.world().entity(alice).is_some());
    assert_eq!(client_view(net.player(back)), sorted_view(&node, alice));

    // Alice's game restarts on another port before the server noticed the
    // old connection went: refused while it is held, hers once it ends.
    let late = net.join(b"alice");
    run(&mut node, &mut net, Duration::from_millis(300));
    assert_eq!(
        net.players[late].goodbye,
        Some(DisconnectReason::TokenRejected)
    );

    // No name: a new entity each connection.
    let x = net.join(b"");
    let y = net.join(b"");
    run(&mut node, &mut net, Duration::from_millis(500));
    let (ex, ey) = (net.player(x).entity(), net.player(y).entity());
    assert!(ex.is_some() && ey.is_some() && ex != ey, "{ex:?} {ey:?}");
    assert!(ex.unwrap() < NAMED_ID_BASE);
}

/// Steps both nodes through one tick made of both nodes' gathered
/// commands (as a cluster's leader would), and releases it on both.
fn lockstep(nodes: &mut [&mut TestNode; 2], now: Instant) {
    let tick = nodes[0].world().tick() + 1;
    let mut commands = nodes[0].server_commands(tick);
    for n in nodes.iter_mut() {
        commands.extend(n.take_local());
    }
    for n in nodes.iter_mut() {
        let report = n.step_commands(&commands);
        n.release_tick(now, &report);
    }
}

/// Two nodes stepping one world, each with its clients at its own address
/// space, for `d`: a tick every 50 ms.
fn run_two(nodes: &mut [&mut TestNode; 2], nets: &mut [&mut Net; 2], d: Duration) {
    let end = nets[0].now + d;
    let mut buf = vec![0u8; 1500];
    let mut inboxes: [Vec<(u32, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    let mut next_tick = nets[0].now;
    while nets[0].now < end {
        let now = nets[0].now;
        for k in 0..2 {
            nets[k].now = now;
            let out = nets[k].turn(std::mem::take(&mut inboxes[k]));
            for (from, bytes) in out {
                nodes[k].handle_datagram(now, from, &bytes);
            }
            nodes[k].handle_timers(now);
        }
        if now >= next_tick {
            next_tick = now + Duration::from_millis(50);
            lockstep(nodes, now);
        }
        for k in 0..2 {
            while let Some(t) = nodes[k].poll_transmit(now, &mut buf).expect("buffer") {
                inboxes[k].push((t.destination, buf[..t.len].to_vec()));
            }
        }
        let next = now + Duration::from_millis(1);
        nets[0].now = next;
        nets[1].now = next;
    }
}

#[test]
fn a_name_on_another_node_takes_its_entity_over() {
    let now = Instant::from_micros(1_000);
    let mut a = open(now);
    let mut b = open(now);
    // A node joining a running world: its start commands are the first node's.
    b.discard_queued();
    let mut net_a = Net {
        now,
        players: Vec::new(),
        next_addr: 0,
    };
    let mut net_b = Net {
        now,
        players: Vec::new(),
        next_addr: 100,
    };
    let alice = name_entity(b"alice").expect("entity");
    let first = net_a.join(b"alice");
    net_b.join(b"bob");
    run_two(
        &mut [&mut a, &mut b],
        &mut [&mut net_a, &mut net_b],
        Duration::from_millis(600),
    );
    assert_eq!(net_a.player(first).entity(), Some(alice));
    // Alice walks a little on node A, so her entity is not at its spawn.
    let spawned = a.world().entity(alice).expect("alive").pos;
    let mut target = spawned;
    for _ in 0..5 {
        target.x += Fix::from_num(4);
        let tick = net_a.player(first).applied_tick() + 1;
        let m = lockgrid_kernel::Move {
            id: alice,
            pos: target,
            dir: 0,
            speed: Fix::from_num(4),
        };
        net_a.players[first]
            .client
            .send_input(tick, &[Command::Move(m)])
            .expect("input");
        run_two(
            &mut [&mut a, &mut b],
            &mut [&mut net_a, &mut net_b],
            Duration::from_millis(60),
        );
    }
    run_two(
        &mut [&mut a, &mut b],
        &mut [&mut net_a, &mut net_b],
        Duration::from_millis(200),
    );
    assert_eq!(a.world().entity(alice).expect("alive").pos, target);

    // Alice connects to node B: she gets her entity, where it was; node
    // A's client is told it was taken over.
    let second = net_b.join(b"alice");
    run_two(
        &mut [&mut a, &mut b],
        &mut [&mut net_a, &mut net_b],
        Duration::from_millis(800),
    );
    assert_eq!(net_b.player(second).state(), ClientState::Connected);
    assert_eq!(net_b.player(second).entity(), Some(alice));
    assert_eq!(net_a.players[first].goodbye, Some(DisconnectReason::Kicked));
    assert_eq!(b.world().entity(alice).expect("alive").pos, target);
    assert_eq!(a.world().digest(), b.world().digest());
    assert_eq!(
        client_view(net_b.player(second)),
        sorted_view(&b, alice),
        "the view, built from Enter events"
    );
    assert!(!client_view(net_b.player(second)).is_empty());
    assert_eq!(a.clients().count(), 0);
    assert_eq!(b.clients().count(), 2);
}
