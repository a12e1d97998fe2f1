//! Connect tokens: a server with a key lets in only clients with a valid,
//! unexpired token for itself, once per address, as the entity the token
//! names; every refusal is counted and told to the client, and honest
//! clients go on meanwhile.

mod common;

use std::time::Duration;

use common::lan::{key, server_socket, Lan, PROTOCOL_ID};
use lockgrid_kernel::{Pos, Spawn};
use lockgrid_protocol::token::{
    open_hello_token, ConnectToken, PrivateKey, TokenError, CONNECT_TOKEN_LEN, HELLO_TOKEN_LEN,
};
use lockgrid_protocol::{ClientLimits, ClientState, ConnError, DisconnectReason, ServerEvent};

const HONEST: u32 = 1;
const OTHER: u32 = 2;

/// A secure server with one honest client connected and applying ticks.
fn with_honest_client() -> Lan {
    let mut lan = Lan::new(true);
    let t = lan.token(501);
    lan.add_client(HONEST, &t);
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(HONEST), ClientState::Connected);
    assert_eq!(lan.clients[&HONEST].entity(), Some(501));
    lan
}

/// Runs a while and checks the honest client is still connected and its
/// view kept moving forward.
fn honest_goes_on(lan: &mut Lan) {
    let before = lan.applied(HONEST);
    lan.run(Duration::from_secs(1));
    assert_eq!(lan.state(HONEST), ClientState::Connected);
    assert!(lan.applied(HONEST) >= before + 15, "honest client stalled");
}

fn refused(lan: &mut Lan, addr: u32, reason: DisconnectReason) {
    let refused_before = lan.server.stats().tokens_refused;
    let conns_before = lan.server.connections().count();
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.disconnect_reason(addr), Some(reason));
    assert_eq!(lan.state(addr), ClientState::Closed(reason));
    assert!(lan.server.stats().tokens_refused > refused_before);
    assert_eq!(lan.server.connections().count(), conns_before);
    honest_goes_on(lan);
}

#[test]
fn a_valid_token_connects_as_its_client_id_with_its_user_data() {
    let mut lan = with_honest_client();
    let conn = lan.server.connections().next().unwrap();
    let claims = lan.server.token_claims(conn).unwrap();
    assert_eq!(claims.client_id, 501);
    assert_eq!(&claims.user_data[..7], b"guild=7");
    assert!(claims.user_data[7..].iter().all(|&b| b == 0));
    assert_eq!(lan.server.stats().tokens_refused, 0);
    honest_goes_on(&mut lan);
}

#[test]
fn a_hello_without_a_token_is_refused() {
    let mut lan = with_honest_client();
    lan.add_raw_client(OTHER, b"");
    refused(&mut lan, OTHER, DisconnectReason::TokenMissing);
}

#[test]
fn a_hello_with_a_token_that_is_not_a_connect_token_is_refused() {
    let mut lan = with_honest_client();
    lan.add_raw_client(OTHER, b"let me in");
    refused(&mut lan, OTHER, DisconnectReason::TokenInvalid);
}

#[test]
fn an_expired_token_is_refused() {
    let mut lan = with_honest_client();
    let servers = [server_socket()];
    let mut p = lan.params(502, &servers);
    p.create_unix_secs -= 120;
    p.expire_unix_secs = lan.unix_now();
    let t = lan.mint(&p, &key());
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenExpired);
}

#[test]
fn a_token_expires_while_the_clock_runs() {
    let mut lan = with_honest_client();
    let t = lan.token(502);
    // The minute passes before the client says Hello.
    lan.run(Duration::from_secs(61));
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenExpired);
}

#[test]
fn a_token_for_another_server_is_refused() {
    let mut lan = with_honest_client();
    let servers = [
        "192.0.2.2:7777".parse().unwrap(),
        "192.0.2.1:7778".parse().unwrap(),
    ];
    let p = lan.params(502, &servers);
    let t = lan.mint(&p, &key());
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenWrongServer);
}

#[test]
fn a_token_listing_this_server_among_others_connects() {
    let mut lan = with_honest_client();
    let servers = ["192.0.2.9:1".parse().unwrap(), server_socket()];
    let p = lan.params(502, &servers);
    let t = lan.mint(&p, &key());
    lan.add_client(OTHER, &t);
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(OTHER), ClientState::Connected);
}

#[test]
fn a_token_for_another_protocol_id_is_refused() {
    let mut lan = with_honest_client();
    let servers = [server_socket()];
    let mut p = lan.params(502, &servers);
    p.protocol_id = PROTOCOL_ID + 1;
    let t = lan.mint(&p, &key());
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenWrongProtocol);
}

#[test]
fn a_token_minted_with_another_key_is_refused() {
    let mut lan = with_honest_client();
    let servers = [server_socket()];
    let p = lan.params(502, &servers);
    let t = lan.mint(&p, &PrivateKey([0x43; 32]));
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenInvalid);
}

#[test]
fn a_token_with_any_byte_altered_is_refused() {
    let t = Lan::new(true).token(502);
    // Every byte of the Hello token is authenticated: the readable start as
    // associated data, the rest by the AEAD.
    for i in 0..HELLO_TOKEN_LEN {
        let mut raw = *t.hello_token();
        raw[i] ^= 0x01;
        let opened = open_hello_token(&key(), &raw);
        assert!(
            matches!(
                opened,
                Err(TokenError::Forged | TokenError::UnsupportedVersion(_))
            ),
            "byte {i}: {opened:?}"
        );
    }
    let mut lan = with_honest_client();
    let mut raw = *t.hello_token();
    raw[200] ^= 0x80;
    lan.add_raw_client(OTHER, &raw);
    refused(&mut lan, OTHER, DisconnectReason::TokenInvalid);
}

#[test]
fn a_token_used_from_another_address_is_refused() {
    let mut lan = Lan::new(true);
    let t = lan.token(501);
    lan.add_client(HONEST, &t);
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(HONEST), ClientState::Connected);
    // An eavesdropper copies the honest client's token from its Hello.
    let stolen = lan
        .tap
        .iter()
        .find(|d| d.from == HONEST)
        .unwrap()
        .bytes
        .clone();
    let raw = t.hello_token().to_vec();
    assert!(stolen.windows(raw.len()).any(|w| w == raw));
    lan.add_raw_client(OTHER, &raw);
    refused(&mut lan, OTHER, DisconnectReason::TokenReused);
    // Replaying the Hello datagram itself from another address fares the same.
    let before = lan.server.stats().tokens_refused;
    lan.inject(3, stolen);
    lan.run(Duration::from_millis(100));
    assert_eq!(lan.server.stats().tokens_refused, before + 1);
    honest_goes_on(&mut lan);
}

#[test]
fn the_host_can_accept_a_token_only_as_its_client_id() {
    let mut lan = Lan::new(true);
    let t = lan.token(777);
    lan.add_client(OTHER, &t);
    // Deliver the Hello by hand, so the harness's host does not accept it.
    let mut buf = vec![0u8; 1200];
    let c = lan.clients.get_mut(&OTHER).unwrap();
    let tx = c.poll_transmit(lan.now, &mut buf).unwrap().unwrap();
    lan.server.handle_datagram(lan.now, OTHER, &buf[..tx.len]);
    let Some(ServerEvent::Connecting { conn, .. }) = lan.server.poll_event() else {
        panic!("no Connecting event");
    };
    assert_eq!(
        lan.server.accept(
            conn,
            &Spawn::npc(778, Pos::from_ints(0, 0)),
            ClientLimits::NONE
        ),
        Err(ConnError::NotTokenClient)
    );
    assert_eq!(
        lan.server.accept(
            conn,
            &Spawn::npc(777, Pos::from_ints(0, 0)),
            ClientLimits::NONE
        ),
        Ok(())
    );
}

#[test]
fn a_server_without_a_key_accepts_any_token_as_before() {
    let mut lan = Lan::new(false);
    lan.add_raw_client(OTHER, b"");
    lan.add_raw_client(3, b"anything");
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(OTHER), ClientState::Connected);
    assert_eq!(lan.state(3), ClientState::Connected);
}

#[test]
fn a_connect_token_round_trips_and_rejects_bad_input() {
    let t = Lan::new(true).token(9);
    let bytes = t.encode();
    assert_eq!(bytes.len(), CONNECT_TOKEN_LEN);
    assert_eq!(ConnectToken::decode(&bytes), Ok(t.clone()));
    assert!(matches!(
        ConnectToken::decode(&bytes[1..]),
        Err(TokenError::WrongLength { .. })
    ));
    let mut bad = bytes;
    bad[0] = 9;
    assert_eq!(
        ConnectToken::decode(&bad),
        Err(TokenError::UnsupportedVersion(9))
    );
    let claims = open_hello_token(&key(), t.hello_token()).unwrap();
    assert_eq!(claims.keys, t.keys);
    assert_eq!(claims.server_addresses, t.server_addresses);
}

#[test]
fn token_params_out_of_domain_are_refused() {
    let lan = Lan::new(true);
    let none = [];
    let nine = [server_socket(); 9];
    let one = [server_socket()];
    let rng = |b: &mut [u8]| b.fill(1);
    for (servers, user, expire_delta) in [
        (&none[..], 0, 60),
        (&nine[..], 0, 60),
        (&one[..], 129, 60),
        (&one[..], 0, 0),
    ] {
        let data = vec![0u8; user];
        let mut p = lan.params(1, servers);
        p.user_data = &data;
        p.expire_unix_secs = p.create_unix_secs + expire_delta;
        assert!(matches!(
            ConnectToken::generate(&key(), &p, rng),
            Err(TokenError::Invalid(_))
        ));
    }
}

#[test]
fn security_is_set_before_the_first_connection_only() {
    let mut lan = Lan::new(false);
    lan.add_raw_client(OTHER, b"");
    lan.run(Duration::from_millis(300));
    let sec = lockgrid_protocol::ServerSecurity::new(key(), PROTOCOL_ID, vec![server_socket()], 0);
    assert!(lan.server.set_security(sec.clone()).is_err());
    assert!(!lan.server.is_secure());
    let mut fresh = Lan::new(false);
    assert_eq!(fresh.server.set_security(sec), Ok(()));
    assert!(fresh.server.is_secure());
    let empty = lockgrid_protocol::ServerSecurity::new(key(), PROTOCOL_ID, vec![], 0);
    assert!(Lan::new(false).server.set_security(empty).is_err());
}

#[test]
fn a_token_opens_one_connection_even_from_its_own_address() {
    // A second connection would seal with the same keys from packet number
    // 1 again: a reconnecting client needs a new token.
    let mut lan = with_honest_client();
    let t = lan.token(502);
    lan.add_client(OTHER, &t);
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(OTHER), ClientState::Connected);
    let conn = lan
        .server
        .connections()
        .find(|&c| lan.server.conn_entity(c) == Some(502))
        .unwrap();
    lan.server.disconnect(conn).unwrap();
    lan.run(Duration::from_millis(100));
    assert_eq!(lan.disconnect_reason(OTHER), Some(DisconnectReason::Kicked));
    lan.client_events.remove(&OTHER);
    lan.add_client(OTHER, &t);
    refused(&mut lan, OTHER, DisconnectReason::TokenReused);
    let fresh = lan.token(502);
    lan.client_events.remove(&OTHER);
    lan.add_client(OTHER, &fresh);
    lan.run(Duration::from_millis(300));
    assert_eq!(lan.state(OTHER), ClientState::Connected);
}
