//! The cost of security: sealing and opening one packet, minting and
//! opening one connect token, and the bytes sealing adds.
//!
//! Packet sizes: a small client packet (Ack + Input, 64 bytes), a middling
//! tick batch (300) and a full one at the default MTU (1200 less the tag).
//!
//! Run with `cargo bench -p lockgrid-protocol --bench seal`.

use std::hint::black_box;
use std::time::Instant;

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::seal::{open_packet, seal_packet, PacketKey, SEAL_OVERHEAD};
use lockgrid_protocol::token::{
    open_hello_token, ConnectToken, PrivateKey, TokenParams, CONNECT_TOKEN_LEN, HELLO_TOKEN_LEN,
};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, Header, Server, ServerConfig, ServerEvent,
    ServerSecurity, WorldParams, DEFAULT_MTU,
};

/// Serves `clients` observers among 2 000 walking NPCs for `ticks` ticks
/// over a lossless in-memory link; returns the server's and the clients'
/// time per client per tick (ns), and the bytes sent down per client per tick.
fn serve(clients: u64, ticks: u64, secure: bool) -> (f64, f64, f64) {
    let config = Config {
        max_entities: 8_192,
        ..Config::default()
    };
    let mut world = World::new(config).expect("bench config is valid");
    let params = WorldParams::from(&config);
    let private = PrivateKey([9; 32]);
    let addr = "127.0.0.1:7777".parse().expect("an address");
    let mut server: Server<u64> = if secure {
        let sec = ServerSecurity::new(private.clone(), 1, vec![addr], 1_700_000_000);
        Server::with_security(ServerConfig::default(), params, sec).expect("valid")
    } else {
        Server::new(ServerConfig::default(), params).expect("valid")
    };
    let now = lockgrid_protocol::Instant::from_micros(1);
    let mut list: Vec<Client<u64>> = (0..clients)
        .map(|i| {
            let servers = [addr];
            let p = TokenParams {
                protocol_id: 1,
                create_unix_secs: 1_700_000_000,
                expire_unix_secs: 1_700_000_600,
                client_id: 10_000 + i,
                server_addresses: &servers,
                user_data: &[],
            };
            if secure {
                let t = ConnectToken::generate(&private, &p, |b| b.fill(i as u8 ^ b.len() as u8))
                    .expect("valid params");
                Client::with_token(ClientConfig::default(), 0, &t, now).expect("valid")
            } else {
                Client::new(ClientConfig::default(), 0, b"", 1, now).expect("valid")
            }
        })
        .collect();
    let mut npcs: Vec<(i64, i64)> = (0..2_000)
        .map(|i| (100 + i % 60 * 100, 100 + i / 60 * 150))
        .collect();
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut commands: Vec<Command> = npcs
        .iter()
        .enumerate()
        .map(|(i, &(x, y))| {
            Command::Spawn(Spawn::npc(i as u64 + 1, Pos::from_ints(x as i32, y as i32)))
        })
        .collect();
    let mut events = Vec::new();
    let (mut server_ns, mut client_ns, mut bytes) = (0u128, 0u128, 0u64);
    for t in 0..ticks + 20 {
        let now = lockgrid_protocol::Instant::from_micros(1 + t * 50_000);
        let measured = t >= 20;
        // Uplink: what every client has to say.
        for (i, c) in list.iter_mut().enumerate() {
            while let Some(tx) = c.poll_transmit(now, &mut buf).expect("mtu buffer") {
                server.handle_datagram(now, i as u64, &buf[..tx.len]);
            }
        }
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Connecting { conn, .. } = e {
                let id = server
                    .token_claims(conn)
                    .map_or(10_000 + u64::from(conn.0 % 1_000_000), |c| c.client_id);
                server
                    .accept(
                        conn,
                        &Spawn::npc(id, Pos::from_ints(0, 0)),
                        ClientLimits::NONE,
                    )
                    .expect("fresh entity");
                let at = Pos::from_ints(100 + (id % 50) as i32 * 100, 100 + (id % 40) as i32 * 150);
                commands.push(Command::Spawn(Spawn::observer(id, at, Fix::from_num(200))));
            }
        }
        for (i, p) in npcs.iter_mut().enumerate() {
            p.0 = 100 + (p.0 + 1) % 5_000;
            commands.push(Command::Move(Move {
                id: i as u64 + 1,
                pos: Pos::from_ints(p.0 as i32, p.1 as i32),
                dir: 0,
                speed: Fix::from_num(1),
            }));
        }
        events.clear();
        let report = world.step(&commands, &mut events);
        commands.clear();
        let began = Instant::now();
        server
            .push_tick(now, report.tick, report.digest, &events)
            .expect("kernel order");
        let mut down = Vec::new();
        while let Some(tx) = server.poll_transmit(now, &mut buf).expect("mtu buffer") {
            down.push((tx.destination, buf[..tx.len].to_vec()));
        }
        let served = began.elapsed().as_nanos();
        let began = Instant::now();
        for (to, d) in &down {
            list[*to as usize].handle_datagram(now, 0, d);
        }
        let heard = began.elapsed().as_nanos();
        for c in list.iter_mut() {
            while let Some(e) = c.poll_event() {
                black_box(matches!(e, ClientEvent::Tick { .. }));
            }
        }
        if measured {
            server_ns += served;
            client_ns += heard;
            bytes += down.iter().map(|d| d.1.len() as u64).sum::<u64>();
        }
    }
    let per = (clients * ticks) as f64;
    assert_eq!(
        server.connections().count() as u64,
        clients,
        "every client connected"
    );
    (
        server_ns as f64 / per,
        client_ns as f64 / per,
        bytes as f64 / per,
    )
}

/// Best of `reps` runs of `iters` calls of `f`, in nanoseconds per call.
/// Many short runs: on a shared machine, the best of them is the one no
/// other process interrupted.
fn per_call<F: FnMut()>(reps: usize, iters: usize, mut f: F) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let key = PacketKey::new(&[7; 32]);
    let reps = 2_000;
    let iters = 100;
    println!("| packet bytes (plain) | sealed bytes | seal ns/packet | open ns/packet | seal+open ns/byte |");
    println!("|---------------------:|-------------:|---------------:|---------------:|------------------:|");
    for plain_len in [64usize, 300, DEFAULT_MTU - SEAL_OVERHEAD] {
        let mut plain = vec![0u8; plain_len];
        let header = Header {
            conn_id: 0x1234_5678,
            seq: 1,
            ack: 0,
            ack_bits: 0,
        };
        header.encode(&mut plain).expect("a header fits");
        for (i, b) in plain.iter_mut().enumerate().skip(19) {
            *b = i as u8;
        }
        let mut buf = vec![0u8; plain_len + SEAL_OVERHEAD];
        let seal_ns = per_call(reps, iters, || {
            buf[..plain_len].copy_from_slice(&plain);
            black_box(seal_packet(&key, &mut buf, plain_len).expect("room for the tag"));
        });
        buf[..plain_len].copy_from_slice(&plain);
        let sealed_len = seal_packet(&key, &mut buf, plain_len).expect("room for the tag");
        let sealed = buf[..sealed_len].to_vec();
        let mut out = Vec::with_capacity(sealed_len);
        let open_ns = per_call(reps, iters, || {
            open_packet(&key, black_box(&sealed), &mut out).expect("authentic");
            black_box(&out);
        });
        assert_eq!(out, plain);
        // The copy into the buffer is part of what a sender does too.
        println!(
            "| {:>20} | {:>12} | {:>14.0} | {:>14.0} | {:>17.2} |",
            plain_len,
            sealed_len,
            seal_ns,
            open_ns,
            (seal_ns + open_ns) / plain_len as f64
        );
    }

    let private = PrivateKey([9; 32]);
    let servers = ["127.0.0.1:7777".parse().expect("an address")];
    let params = TokenParams {
        protocol_id: 1,
        create_unix_secs: 1_700_000_000,
        expire_unix_secs: 1_700_000_060,
        client_id: 42,
        server_addresses: &servers,
        user_data: b"guild=7",
    };
    let mut counter = 0u8;
    let mint_ns = per_call(reps, 20, || {
        let t = ConnectToken::generate(&private, &params, |b| {
            counter = counter.wrapping_add(1);
            b.fill(counter);
        })
        .expect("valid params");
        black_box(t);
    });
    let token = ConnectToken::generate(&private, &params, |b| b.fill(5)).expect("valid params");
    let open_ns = per_call(reps, 20, || {
        black_box(open_hello_token(&private, token.hello_token()).expect("authentic"));
    });
    println!();
    println!("| token | bytes | ns |");
    println!("|-------|------:|---:|");
    println!("| mint (backend, randomness excluded) | {CONNECT_TOKEN_LEN} | {mint_ns:.0} |");
    println!("| open (server, per Hello) | {HELLO_TOKEN_LEN} | {open_ns:.0} |");
    println!();
    println!();
    println!(
        "Serving: 2 000 walking NPCs, observers of radius 200, 100 ticks, one server, in memory"
    );
    println!(
        "| clients | keys | server ns/client/tick | client ns/tick | bytes down/client/tick |"
    );
    println!(
        "|--------:|------|----------------------:|---------------:|-----------------------:|"
    );
    for clients in [100u64, 500] {
        for secure in [false, true] {
            let (s_ns, c_ns, b) = (0..5)
                .map(|_| serve(clients, 100, secure))
                .fold((f64::INFINITY, f64::INFINITY, 0.0), |a, r| {
                    (a.0.min(r.0), a.1.min(r.1), r.2)
                });
            println!(
                "| {clients:>7} | {:<4} | {s_ns:>21.0} | {c_ns:>14.0} | {b:>22.1} |",
                if secure { "on" } else { "off" }
            );
        }
    }
    println!();
    println!(
        "bytes added: {SEAL_OVERHEAD} per sealed packet (the tag); the Hello grows by the {HELLO_TOKEN_LEN}-byte token"
    );
}
