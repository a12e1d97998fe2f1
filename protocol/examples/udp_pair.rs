//! The protocol over plain `std::net::UdpSocket`s: a server and a client
//! in one process, a kernel world behind the server, nothing else — no
//! lockgrid-host, no async runtime.
//!
//! ```sh
//! cargo run -p lockgrid-protocol --example udp_pair
//! ```
//!
//! The client connects, walks its entity east for two seconds at 20 ticks
//! a second, and prints what it sees; then it says Bye.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, ClientState, DisconnectReason, Instant,
    Server, ServerConfig, ServerEvent, WorldParams, MAX_MTU,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epoch = std::time::Instant::now();
    // The protocol never reads a clock: the caller passes `now` in.
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);

    let server_socket = UdpSocket::bind("127.0.0.1:0")?;
    let client_socket = UdpSocket::bind("127.0.0.1:0")?;
    server_socket.set_nonblocking(true)?;
    client_socket.set_nonblocking(true)?;
    let server_addr = server_socket.local_addr()?;

    let config = Config::default();
    let mut world = World::new(config)?;
    let mut server: Server<SocketAddr> =
        Server::new(ServerConfig::default(), WorldParams::from(&config))?;
    // A real client draws its nonce at random, once per run.
    let nonce = u64::from(std::process::id()) << 32 ^ now().as_micros();
    let mut client = Client::new(ClientConfig::default(), server_addr, b"hello", nonce, now())?;

    // Some scenery: NPCs along the client's way.
    let mut commands: Vec<Command> = (1..=10)
        .map(|i| Command::Spawn(Spawn::npc(i, Pos::from_ints(100 * i as i32, 300))))
        .collect();
    let mut events = Vec::new();
    let mut buf = vec![0u8; MAX_MTU];
    let interval = Duration::from_millis(50);
    let mut next_tick = now() + interval;
    let mut x = 0i32;
    let stop = now() + Duration::from_secs(2);

    while !matches!(client.state(), ClientState::Closed(_)) {
        // Server: datagrams in, events to act on.
        while let Ok((n, from)) = server_socket.recv_from(&mut buf) {
            server.handle_datagram(now(), from, &buf[..n]);
        }
        while let Some(ev) = server.poll_event() {
            match ev {
                ServerEvent::Connecting { conn, token, .. } => {
                    if token == b"hello" {
                        // The client observes through entity 1000, spawned
                        // next tick; its Welcome says where.
                        let spawn =
                            Spawn::observer(1000, Pos::from_ints(0, 300), Fix::from_num(250));
                        server.accept(conn, &spawn, ClientLimits::NONE)?;
                        commands.push(Command::Spawn(spawn));
                    } else {
                        server.reject(conn, DisconnectReason::TokenRejected)?;
                    }
                }
                // The protocol hands over only the client's own entity's commands.
                ServerEvent::Input { .. } => commands.extend_from_slice(server.input_commands()),
                ServerEvent::Disconnected { entity, .. } => {
                    if let Some(id) = entity {
                        commands.push(Command::Despawn { id });
                    }
                }
            }
        }
        if server.poll_timeout().is_some_and(|t| t <= now()) {
            server.handle_timeout(now());
        }
        // The tick: step the world, hand its events to the server, send.
        if now() >= next_tick {
            next_tick = next_tick + interval;
            events.clear();
            let report = world.step(&commands, &mut events);
            commands.clear();
            server.push_tick(now(), report.tick, report.digest, &events)?;
            while let Some(t) = server.poll_transmit(now(), &mut buf)? {
                server_socket.send_to(&buf[..t.len], t.destination)?;
            }
        }

        // Client: datagrams in, events out, input up.
        while let Ok((n, from)) = client_socket.recv_from(&mut buf) {
            client.handle_datagram(now(), from, &buf[..n]);
        }
        if client.poll_timeout().is_some_and(|t| t <= now()) {
            client.handle_timeout(now());
        }
        while let Some(ev) = client.poll_event() {
            match ev {
                ClientEvent::Connected(w) => {
                    println!("connected as entity {} at tick {}", w.entity, w.tick)
                }
                ClientEvent::Tick { tick, events, .. } if !events.is_empty() => {
                    println!(
                        "tick {tick}: {} events, view {:?}",
                        events.len(),
                        client.view().ids().collect::<Vec<_>>()
                    );
                }
                ClientEvent::Tick { .. } => {}
                ClientEvent::Refused(r) => println!("input {} refused: {:?}", r.seq, r.reason),
                ClientEvent::Disconnected { reason } => println!("disconnected: {reason}"),
            }
        }
        if client.state() == ClientState::Connected {
            if now() >= stop {
                client.close(now());
            } else if client.unacked_inputs() == 0 {
                x += 20;
                let me = client.entity().unwrap_or(1000);
                let tick = client.applied_tick() + 1;
                let step = Command::Move(Move {
                    id: me,
                    pos: Pos::from_ints(x.min(6000), 300),
                    dir: 0,
                    speed: Fix::from_num(400),
                });
                // A tick already used or a full queue: try again next round.
                let _ = client.send_input(tick, &[step]);
            }
        }
        while let Some(t) = client.poll_transmit(now(), &mut buf)? {
            client_socket.send_to(&buf[..t.len], t.destination)?;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("the world ended at tick {}", world.tick());
    Ok(())
}
