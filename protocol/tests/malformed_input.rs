//! Hostile bytes: every input decodes to a value or a typed error, never a
//! panic; whatever decodes re-encodes to the same bytes (the format is
//! canonical); endpoints survive mutated traffic. This bounded mutation run
//! is what CI executes; `fuzz/` runs the same checks open-ended.

mod common;

use std::collections::BTreeMap;

use common::canonical::{check_packet, check_part};
use common::{random_frames, random_tick, Rng};
use lockgrid_kernel::{Config, Pos, Spawn};
use lockgrid_protocol::batch::encode_part;
use lockgrid_protocol::packet::encode_packet;
use lockgrid_protocol::{
    Client, ClientConfig, ClientLimits, Header, Instant, Packet, Server, ServerConfig, ServerEvent,
    View, WorldParams,
};
use proptest::prelude::*;

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = [0x00, 0x7f, 0x80, 0xff][rng.below(4) as usize];
            }
            2 => {
                let i = rng.below(b.len() as u64 + 1) as usize;
                b.insert(i, rng.next_u64() as u8);
            }
            3 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b.remove(i);
            }
            4 => {
                let n = rng.below(b.len() as u64 + 1) as usize;
                b.truncate(n);
            }
            _ => {
                // Splice a run of 0xff (long varints, huge counts).
                let i = rng.below(b.len() as u64 + 1) as usize;
                for _ in 0..rng.below(12) {
                    b.insert(i, 0xff);
                }
            }
        }
    }
    b
}

/// A batch part and the view it applies to.
type Part = (View, Vec<u8>);

/// Valid packets to mutate: every frame kind, plus real batch payloads.
fn corpus(rng: &mut Rng) -> (Vec<Vec<u8>>, Vec<Part>) {
    let store = rng.bytes(300);
    let mut packets = Vec::new();
    for f in random_frames(rng, &store) {
        let header = Header {
            conn_id: rng.next_u64() as u32,
            seq: 1 + rng.below(100) as u32,
            ack: rng.below(100) as u32,
            ack_bits: rng.next_u64() as u32,
        };
        let mut buf = vec![0u8; 2048];
        let n = encode_packet(&header, &[f], &mut buf).unwrap();
        packets.push(buf[..n].to_vec());
    }
    let mut parts = Vec::new();
    let mut model = BTreeMap::new();
    let mut view = View::new();
    for _ in 0..6 {
        let events = random_tick(rng, 7, &mut model, 40);
        let before = view.clone();
        let mut buf = vec![0u8; 4096];
        let p = encode_part(&events, &mut view, &mut buf).unwrap();
        parts.push((before, buf[..p.len].to_vec()));
    }
    (packets, parts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1500)) {
        check_packet(&bytes);
        check_part(&bytes, &View::new());
        let mut with_header = b"LG\x01".to_vec();
        with_header.extend_from_slice(&bytes);
        check_packet(&with_header);
    }
}

#[test]
fn mutated_packets_and_parts_never_panic() {
    let mut rng = Rng::new(0xF022);
    let mut decoded = 0;
    for _ in 0..200 {
        let (packets, parts) = corpus(&mut rng);
        for _ in 0..50 {
            for p in &packets {
                let m = mutate(&mut rng, p);
                check_packet(&m);
                decoded += usize::from(Packet::decode(&m).is_ok());
            }
            for (view, part) in &parts {
                check_part(&mutate(&mut rng, part), view);
            }
        }
    }
    // Mutations must not all be trivially rejected, or the run proves little.
    assert!(decoded > 1000, "only {decoded} mutated packets decoded");
}

#[test]
fn endpoints_survive_mutated_traffic() {
    let mut rng = Rng::new(0xE2D);
    let config = Config::default();
    let mut server: Server<u32> =
        Server::new(ServerConfig::default(), WorldParams::from(&config)).unwrap();
    let mut now = Instant::from_micros(1);
    let mut client = Client::new(ClientConfig::default(), 0u32, b"t", 1, now).unwrap();
    let mut buf = vec![0u8; 1200];
    // Establish a real connection so mutated packets reach connection state.
    let t = client.poll_transmit(now, &mut buf).unwrap().unwrap();
    server.handle_datagram(now, 1, &buf[..t.len]);
    let Some(ServerEvent::Connecting { conn, .. }) = server.poll_event() else {
        panic!("expected a connection");
    };
    server
        .accept(
            conn,
            &Spawn::npc(99, Pos::from_ints(0, 0)),
            ClientLimits::NONE,
        )
        .unwrap();
    let mut sent_by_server = Vec::new();
    let mut sent_by_client = Vec::new();
    for tick in 1..=400u64 {
        now = now + std::time::Duration::from_millis(50);
        let _ = server.push_tick(now, tick, tick, &[]);
        while let Some(t) = server.poll_transmit(now, &mut buf).unwrap() {
            sent_by_server.push(buf[..t.len].to_vec());
        }
        while let Some(t) = client.poll_transmit(now, &mut buf).unwrap() {
            sent_by_client.push(buf[..t.len].to_vec());
        }
        for _ in 0..20 {
            if let Some(p) =
                sent_by_server.get(rng.below(sent_by_server.len().max(1) as u64) as usize)
            {
                let m = mutate(&mut rng, p);
                client.handle_datagram(now, 0, &m);
            }
            if let Some(p) =
                sent_by_client.get(rng.below(sent_by_client.len().max(1) as u64) as usize)
            {
                let m = mutate(&mut rng, p);
                server.handle_datagram(now, 1 + rng.below(3) as u32, &m);
            }
        }
        server.handle_timeout(now);
        client.handle_timeout(now);
        while server.poll_event().is_some() {}
        while client.poll_event().is_some() {}
    }
}
