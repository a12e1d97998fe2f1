//! Checks on untrusted token and sealed-packet bytes, shared by the bounded
//! runs in `protocol/tests/malformed_secure_input.rs` and the fuzz targets
//! `token` and `sealed`: no panic, and whatever decodes has exactly one
//! encoding.
// Each includer uses a part of these.
#![allow(dead_code)]

use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use lockgrid_protocol::seal::{open_packet, readable, seal_packet, PacketKey};
use lockgrid_protocol::token::{
    open_hello_token, peek_hello_token, ConnectToken, PrivateKey, TokenParams, HELLO_TOKEN_LEN,
    PRIVATE_LEN, TOKEN_AAD_LEN, TOKEN_NONCE_LEN,
};
use lockgrid_protocol::{Packet, MAX_MTU};

/// The private key of the checks.
pub const KEY: [u8; 32] = [0x5a; 32];

/// A decoded connect token re-encodes to the same bytes; a Hello token
/// that opens re-seals to the same bytes.
pub fn check_token(data: &[u8]) {
    if let Ok(t) = ConnectToken::decode(data) {
        assert_eq!(&t.encode()[..], data, "connect token is not canonical");
    }
    let _ = peek_hello_token(data);
    check_opened(data);
    // Random bytes never authenticate: seal the input as a private part
    // too, so the private part's reader sees arbitrary bytes.
    let mut hello = [0u8; HELLO_TOKEN_LEN];
    hello[0] = 1;
    hello[17..25].copy_from_slice(&u64::MAX.to_le_bytes());
    let private = &mut hello[TOKEN_AAD_LEN + TOKEN_NONCE_LEN..HELLO_TOKEN_LEN - 16];
    let n = data.len().min(PRIVATE_LEN);
    private[..n].copy_from_slice(&data[..n]);
    let (aad, rest) = hello.split_at_mut(TOKEN_AAD_LEN);
    let (nonce, rest) = rest.split_at_mut(TOKEN_NONCE_LEN);
    let (text, tag) = rest.split_at_mut(PRIVATE_LEN);
    let t = XChaCha20Poly1305::new(&KEY.into())
        .encrypt_in_place_detached((&*nonce).into(), aad, text)
        .expect("a private part fits the AEAD");
    tag.copy_from_slice(&t);
    check_opened(&hello);
}

fn check_opened(hello: &[u8]) {
    let key = PrivateKey(KEY);
    let Ok(claims) = open_hello_token(&key, hello) else {
        return;
    };
    let params = TokenParams {
        protocol_id: claims.protocol_id,
        create_unix_secs: claims.create_unix_secs,
        expire_unix_secs: claims.expire_unix_secs,
        client_id: claims.client_id,
        server_addresses: &claims.server_addresses,
        user_data: &claims.user_data,
    };
    let nonce: [u8; TOKEN_NONCE_LEN] = hello[TOKEN_AAD_LEN..TOKEN_AAD_LEN + TOKEN_NONCE_LEN]
        .try_into()
        .unwrap();
    // Times out of order seal to an error; the reader does not judge them.
    if let Ok(again) = ConnectToken::seal(&key, &params, claims.keys.clone(), nonce) {
        assert_eq!(
            &again.hello_token()[..],
            hello,
            "hello token is not canonical"
        );
    }
}

/// Opening arbitrary bytes fails cleanly; sealing them (when they start
/// like a packet) and opening gives them back, and any flipped bit fails.
pub fn check_sealed(data: &[u8]) {
    let key = PacketKey::new(&KEY);
    let mut out = Vec::new();
    let _ = readable(data);
    if open_packet(&key, data, &mut out).is_ok() {
        let _ = Packet::decode(&out);
    }
    if readable(data).is_none() || data.len() > MAX_MTU - 16 {
        return;
    }
    let mut buf = data.to_vec();
    buf.resize(data.len() + 16, 0);
    let len = seal_packet(&key, &mut buf, data.len()).expect("room for the tag");
    open_packet(&key, &buf[..len], &mut out).expect("sealed bytes open");
    assert_eq!(out, data);
    let _ = Packet::decode(&out);
    let flip = usize::from(data[data.len() / 2]) % len;
    buf[flip] ^= 1;
    let reopened = open_packet(&key, &buf[..len], &mut out);
    assert!(reopened.is_err(), "a flipped bit still opens");
}
