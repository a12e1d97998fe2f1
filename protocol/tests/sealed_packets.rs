//! Sealed packets: after the Hello every packet is authenticated and
//! encrypted; tampered, forged, replayed and misaddressed packets are
//! dropped and counted, and honest clients go on.

mod common;

use std::time::Duration;

use common::lan::{Lan, SERVER};
use lockgrid_protocol::packet::peek_version;
use lockgrid_protocol::seal::{open_packet, readable, seal_packet, PacketKey, SEAL_OVERHEAD};
use lockgrid_protocol::token::ConnectToken;
use lockgrid_protocol::{ClientState, ConnId, DisconnectReason, Frame, Header, Packet};

const HONEST: u32 = 1;
const OTHER: u32 = 2;

fn connected(clients: &[(u32, u64)]) -> (Lan, Vec<ConnectToken>) {
    let mut lan = Lan::new(true);
    let mut tokens = Vec::new();
    for &(addr, id) in clients {
        let t = lan.token(id);
        lan.add_client(addr, &t);
        tokens.push(t);
    }
    lan.run(Duration::from_millis(500));
    for &(addr, _) in clients {
        assert_eq!(lan.state(addr), ClientState::Connected);
    }
    (lan, tokens)
}

fn conn_of(lan: &Lan, entity: u64) -> ConnId {
    lan.server
        .connections()
        .find(|&c| lan.server.conn_entity(c) == Some(entity))
        .unwrap()
}

fn honest_goes_on(lan: &mut Lan, addr: u32) {
    let before = lan.applied(addr);
    lan.run(Duration::from_secs(1));
    assert_eq!(lan.state(addr), ClientState::Connected);
    assert!(lan.applied(addr) >= before + 15, "client {addr} stalled");
}

/// The latest sealed datagram `from` sent `to`.
fn last_sealed(lan: &Lan, from: u32, to: u32) -> Vec<u8> {
    lan.tap
        .iter()
        .rev()
        .find(|d| {
            d.from == from && d.to == to && readable(&d.bytes).is_some_and(|r| r.1 != 0 && r.0 != 0)
        })
        .unwrap()
        .bytes
        .clone()
}

#[test]
fn every_packet_after_the_hello_is_sealed_with_its_direction_key() {
    let (mut lan, tokens) = connected(&[(HONEST, 501)]);
    honest_goes_on(&mut lan, HONEST);
    let keys = &tokens[0].keys;
    let (c2s, s2c) = (
        PacketKey::new(&keys.client_to_server),
        PacketKey::new(&keys.server_to_client),
    );
    let mut out = Vec::new();
    let (mut up, mut down) = (0, 0);
    for d in &lan.tap {
        let (conn_id, seq) = readable(&d.bytes).unwrap();
        if d.from == HONEST && conn_id == 0 {
            // The Hello, in clear; its token's private part is sealed.
            let p = Packet::decode(&d.bytes).unwrap();
            assert!(matches!(p.frames[0], Frame::Hello { .. }));
            continue;
        }
        assert_ne!(seq, 0);
        let (right, wrong) = if d.to == SERVER {
            (&c2s, &s2c)
        } else {
            (&s2c, &c2s)
        };
        open_packet(right, &d.bytes, &mut out).unwrap();
        let plain = Packet::decode(&out).unwrap();
        assert_eq!(plain.header.conn_id, conn_id);
        assert_eq!(plain.header.seq, seq);
        assert_eq!(out.len() + SEAL_OVERHEAD, d.bytes.len());
        // What follows the readable prefix is not the plaintext.
        assert_ne!(&d.bytes[11..out.len()], &out[11..]);
        assert!(open_packet(wrong, &d.bytes, &mut out).is_err());
        if d.to == SERVER {
            up += 1
        } else {
            down += 1
        }
    }
    assert!(up > 10 && down > 10, "up {up} down {down}");
    let conn = conn_of(&lan, 501);
    let s = lan.server.conn_stats(conn).unwrap();
    assert_eq!((s.auth_failed, s.replayed), (0, 0));
    assert!(s.inputs_delivered > 10);
}

/// A genuine packet the client has not sent: a Ping sealed with its key,
/// numbered past everything it sent so far.
fn genuine_ping(lan: &Lan, token: &ConnectToken) -> Vec<u8> {
    let (conn_id, seq) = readable(&last_sealed(lan, HONEST, SERVER)).unwrap();
    let mut buf = vec![0u8; 200];
    let header = Header {
        conn_id,
        seq: seq + 20,
        ack: 0,
        ack_bits: 0,
    };
    let mut len = header.encode(&mut buf).unwrap();
    buf[len..len + 2].copy_from_slice(&[0x04, 0x07]);
    len += 2;
    let key = PacketKey::new(&token.keys.client_to_server);
    let len = seal_packet(&key, &mut buf, len).unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn a_tampered_packet_is_dropped_and_counted_on_the_server() {
    let (mut lan, tokens) = connected(&[(HONEST, 501), (OTHER, 502)]);
    let conn = conn_of(&lan, 501);
    let sealed = genuine_ping(&lan, &tokens[0]);
    let before = lan.server.conn_stats(conn).unwrap();
    // Flip each byte from the packet number on: the packet number (which
    // may also land outside the replay window) and everything sealed. (A
    // flipped magic, version or connection id names no packet or another
    // connection, and is dropped before opening.)
    for i in 7..sealed.len() {
        let mut bad = sealed.clone();
        bad[i] ^= 0x20;
        lan.inject(HONEST, bad);
    }
    lan.run(Duration::from_millis(1));
    let after = lan.server.conn_stats(conn).unwrap();
    let flips = (sealed.len() - 7) as u64;
    let auth = after.auth_failed - before.auth_failed;
    let replayed = after.replayed - before.replayed;
    assert_eq!(auth + replayed, flips);
    assert!(auth >= flips - 4, "{auth} of {flips}");
    assert_eq!(lan.server.stats().auth_failed, after.auth_failed);
    // The untouched packet is still new, and authentic.
    let received = after.packets_received;
    lan.inject(HONEST, sealed);
    lan.run(Duration::from_millis(1));
    assert_eq!(
        lan.server.conn_stats(conn).unwrap().packets_received,
        received + 1
    );
    honest_goes_on(&mut lan, HONEST);
    honest_goes_on(&mut lan, OTHER);
}

#[test]
fn a_forged_packet_under_another_key_is_dropped_and_counted() {
    let (mut lan, _) = connected(&[(HONEST, 501)]);
    let conn = conn_of(&lan, 501);
    let (conn_id, seq) = readable(&last_sealed(&lan, HONEST, SERVER)).unwrap();
    let mut buf = vec![0u8; 200];
    let header = Header {
        conn_id,
        seq: seq + 5,
        ack: 0,
        ack_bits: 0,
    };
    let mut len = header.encode(&mut buf).unwrap();
    buf[len] = 0x05; // Bye: would close the connection if believed.
    len += 1;
    let len = seal_packet(&PacketKey::new(&[9; 32]), &mut buf, len).unwrap();
    lan.inject(HONEST, buf[..len].to_vec());
    lan.run(Duration::from_millis(50));
    assert_eq!(lan.server.conn_stats(conn).unwrap().auth_failed, 1);
    honest_goes_on(&mut lan, HONEST);
}

#[test]
fn a_replayed_packet_is_dropped_and_counted_on_the_server() {
    let (mut lan, _) = connected(&[(HONEST, 501)]);
    let conn = conn_of(&lan, 501);
    let old: Vec<Vec<u8>> = lan
        .tap
        .iter()
        .filter(|d| d.from == HONEST && readable(&d.bytes).is_some_and(|r| r.0 != 0))
        .map(|d| d.bytes.clone())
        .collect();
    assert!(old.len() > 3);
    let before = lan.server.conn_stats(conn).unwrap();
    let server_before = lan.server.stats();
    for d in &old {
        lan.inject(HONEST, d.clone());
    }
    lan.run(Duration::from_millis(50));
    let after = lan.server.conn_stats(conn).unwrap();
    assert_eq!(after.replayed - before.replayed, old.len() as u64);
    assert_eq!(after.auth_failed, 0);
    // Also counted server-wide, where it outlives the connection.
    assert_eq!(
        lan.server.stats().replayed - server_before.replayed,
        old.len() as u64
    );
    assert_eq!(lan.server.stats().auth_failed, 0);
    honest_goes_on(&mut lan, HONEST);
}

#[test]
fn a_replayed_or_tampered_packet_is_dropped_and_counted_on_the_client() {
    let (mut lan, _) = connected(&[(HONEST, 501)]);
    let old = last_sealed(&lan, SERVER, HONEST);
    lan.run(Duration::from_millis(100));
    lan.inject_to(SERVER, HONEST, old.clone());
    let mut bad = last_sealed(&lan, SERVER, HONEST);
    let n = bad.len();
    bad[n - 1] ^= 1;
    lan.inject_to(SERVER, HONEST, bad);
    lan.run(Duration::from_millis(5));
    let s = lan.clients[&HONEST].stats();
    assert_eq!((s.replayed, s.auth_failed), (1, 1));
    honest_goes_on(&mut lan, HONEST);
}

#[test]
fn a_packet_from_another_address_with_a_valid_connection_id_is_refused() {
    let (mut lan, _) = connected(&[(HONEST, 501)]);
    let conn = conn_of(&lan, 501);
    let sealed = last_sealed(&lan, HONEST, SERVER);
    let delivered = lan.server.conn_stats(conn).unwrap().inputs_delivered;
    lan.inject(77, sealed.clone());
    lan.run(Duration::from_millis(5));
    assert_eq!(lan.server.stats().address_mismatch, 1);
    assert_eq!(lan.server.connections().count(), 1);
    assert_eq!(
        lan.server.conn_stats(conn).unwrap().inputs_delivered,
        delivered
    );
    honest_goes_on(&mut lan, HONEST);
}

#[test]
fn a_disconnect_in_clear_does_not_end_a_sealed_connection() {
    let (mut lan, _) = connected(&[(HONEST, 501)]);
    let (conn_id, _) = readable(&last_sealed(&lan, SERVER, HONEST)).unwrap();
    let mut buf = vec![0u8; 64];
    let header = Header {
        conn_id,
        seq: 0,
        ack: 0,
        ack_bits: 0,
    };
    let mut len = header.encode(&mut buf).unwrap();
    buf[len..len + 2].copy_from_slice(&[0x13, DisconnectReason::Kicked.code()]);
    len += 2;
    assert_eq!(peek_version(&buf), Some(2));
    lan.inject_to(SERVER, HONEST, buf[..len].to_vec());
    honest_goes_on(&mut lan, HONEST);
}

#[test]
fn the_server_ends_a_sealed_connection_with_a_sealed_disconnect() {
    let (mut lan, _) = connected(&[(HONEST, 501), (OTHER, 502)]);
    let conn = conn_of(&lan, 501);
    lan.server.disconnect(conn).unwrap();
    lan.run(Duration::from_millis(100));
    assert_eq!(
        lan.disconnect_reason(HONEST),
        Some(DisconnectReason::Kicked)
    );
    // The client's graceful Bye, sealed, is heard too.
    let now = lan.now;
    lan.clients.get_mut(&OTHER).unwrap().close(now);
    lan.run(Duration::from_millis(200));
    assert_eq!(lan.disconnect_reason(OTHER), Some(DisconnectReason::Closed));
    assert_eq!(lan.server.connections().count(), 0);
}

#[test]
fn a_client_without_the_keys_cannot_join_an_open_connection() {
    // The token is stolen and its Hello replayed from the honest client's
    // own (spoofed) address: the server answers with a sealed Welcome the
    // attacker cannot read, and nothing it sends in clear is believed.
    let (mut lan, tokens) = connected(&[(HONEST, 501)]);
    let conn = conn_of(&lan, 501);
    let hello = lan
        .tap
        .iter()
        .find(|d| d.from == HONEST)
        .unwrap()
        .bytes
        .clone();
    lan.inject(HONEST, hello);
    let mut buf = vec![0u8; 200];
    let header = Header {
        conn_id: conn.0,
        seq: 1_000,
        ack: 0,
        ack_bits: 0,
    };
    let mut len = header.encode(&mut buf).unwrap();
    buf[len] = 0x05;
    len += 1;
    lan.inject(HONEST, buf[..len].to_vec());
    lan.run(Duration::from_millis(50));
    assert_eq!(lan.server.conn_stats(conn).unwrap().auth_failed, 1);
    assert_eq!(tokens.len(), 1);
    honest_goes_on(&mut lan, HONEST);
}
