//! Golden vectors of connect tokens and sealed packets: a known key, token
//! and packet, byte for byte, as `docs/protocol.md` prints them. Each is
//! also re-derived here from the document's layout with the AEAD crate
//! directly, so the layout in the document and the crate agree.

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, XChaCha20Poly1305};
use lockgrid_protocol::seal::{nonce, open_packet, seal_packet, PacketKey};
use lockgrid_protocol::token::{
    open_hello_token, ConnectToken, PacketKeys, PrivateKey, TokenParams, CONNECT_TOKEN_LEN,
    HELLO_TOKEN_LEN,
};
use lockgrid_protocol::{Frame, Header, Packet};

fn hex(bytes: &[u8]) -> String {
    bytes
        .chunks(32)
        .map(|c| {
            c.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

macro_rules! golden {
    ($name:expr, $value:expr) => {
        insta::with_settings!({ snapshot_path => "../../snapshots/protocol", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn counting(from: u8) -> [u8; 32] {
    core::array::from_fn(|i| from + i as u8)
}

/// The vector's inputs: every byte known.
fn vector_token() -> (PrivateKey, ConnectToken) {
    let key = PrivateKey(counting(0x00));
    let servers = [
        "127.0.0.1:7777".parse().unwrap(),
        "[::1]:7778".parse().unwrap(),
    ];
    let params = TokenParams {
        protocol_id: 0x1122_3344_5566_7788,
        create_unix_secs: 1_700_000_000,
        expire_unix_secs: 1_700_000_060,
        client_id: 1001,
        server_addresses: &servers,
        user_data: b"guild=7",
    };
    let keys = PacketKeys {
        client_to_server: counting(0x40),
        server_to_client: counting(0x60),
    };
    let nonce: [u8; 24] = core::array::from_fn(|i| 0x80 + i as u8);
    let token = ConnectToken::seal(&key, &params, keys, nonce).unwrap();
    (key, token)
}

#[test]
fn connect_token_vector() {
    let (key, token) = vector_token();
    let hello = token.hello_token();
    let whole = token.encode();
    assert_eq!(hello.len(), HELLO_TOKEN_LEN);
    assert_eq!(whole.len(), CONNECT_TOKEN_LEN);
    golden!(
        "connect_token",
        format!(
            "private key\n{}\n\nhello token ({} bytes)\n{}\n\nconnect token ({} bytes)\n{}\n",
            hex(&key.0),
            hello.len(),
            hex(hello),
            whole.len(),
            hex(&whole)
        )
    );

    // The document's layout, opened with the AEAD crate directly.
    let cipher = XChaCha20Poly1305::new(&key.0.into());
    let private = cipher
        .decrypt(
            hello[25..49].into(),
            Payload {
                msg: &hello[49..],
                aad: &hello[..25],
            },
        )
        .unwrap();
    assert_eq!(hello[0], 1);
    assert_eq!(
        u64::from_le_bytes(hello[1..9].try_into().unwrap()),
        0x1122_3344_5566_7788
    );
    assert_eq!(
        u64::from_le_bytes(hello[9..17].try_into().unwrap()),
        1_700_000_000
    );
    assert_eq!(
        u64::from_le_bytes(hello[17..25].try_into().unwrap()),
        1_700_000_060
    );
    assert_eq!(private.len(), 353);
    assert_eq!(u64::from_le_bytes(private[0..8].try_into().unwrap()), 1001);
    assert_eq!(private[8..40], counting(0x40));
    assert_eq!(private[40..72], counting(0x60));
    assert_eq!(private[72], 2);
    let v4 = &private[73..92];
    assert_eq!(v4[0], 4);
    assert_eq!(&v4[1..5], &[127, 0, 0, 1]);
    assert!(v4[5..17].iter().all(|&b| b == 0));
    assert_eq!(u16::from_le_bytes([v4[17], v4[18]]), 7777);
    let v6 = &private[92..111];
    assert_eq!(v6[0], 6);
    assert_eq!(v6[16], 1);
    assert_eq!(u16::from_le_bytes([v6[17], v6[18]]), 7778);
    assert!(private[111..225].iter().all(|&b| b == 0));
    assert_eq!(&private[225..232], b"guild=7");
    assert!(private[232..].iter().all(|&b| b == 0));
    // The client's copy follows the Hello token.
    assert_eq!(whole[418..450], counting(0x40));
    assert_eq!(whole[450..482], counting(0x60));
    assert_eq!(whole[482..], private[72..225]);

    let claims = open_hello_token(&key, hello).unwrap();
    assert_eq!(claims.client_id, 1001);
    assert_eq!(ConnectToken::decode(&whole).unwrap(), token);
}

#[test]
fn sealed_packet_vector() {
    let (_, token) = vector_token();
    let header = Header {
        conn_id: 0x1234_5678,
        seq: 5,
        ack: 4,
        ack_bits: 0b11,
    };
    let frames = [Frame::Ack { tick: 7 }, Frame::Ping { stamp: 1000 }];
    let mut buf = vec![0u8; 64];
    let plain_len = lockgrid_protocol::packet::encode_packet(&header, &frames, &mut buf).unwrap();
    let plain = buf[..plain_len].to_vec();
    let key = PacketKey::new(&token.keys.client_to_server);
    let len = seal_packet(&key, &mut buf, plain_len).unwrap();
    let sealed = &buf[..len];
    golden!(
        "sealed_packet",
        format!(
            "key (client to server)\n{}\n\nnonce (conn_id 0x12345678, seq 5)\n{}\n\nplaintext packet ({} bytes)\n{}\n\nsealed packet ({} bytes)\n{}\n",
            hex(&token.keys.client_to_server),
            hex(&nonce(0x1234_5678, 5)),
            plain.len(),
            hex(&plain),
            sealed.len(),
            hex(sealed)
        )
    );

    // The document's construction with the AEAD crate directly.
    assert_eq!(
        nonce(0x1234_5678, 5),
        [0x78, 0x56, 0x34, 0x12, 5, 0, 0, 0, 0, 0, 0, 0]
    );
    let cipher = ChaCha20Poly1305::new(&token.keys.client_to_server.into());
    let direct = cipher
        .encrypt(
            (&nonce(0x1234_5678, 5)).into(),
            Payload {
                msg: &plain[11..],
                aad: &plain[..11],
            },
        )
        .unwrap();
    assert_eq!(&sealed[..11], &plain[..11]);
    assert_eq!(&sealed[11..], &direct[..]);

    let mut out = Vec::new();
    open_packet(&key, sealed, &mut out).unwrap();
    assert_eq!(out, plain);
    assert_eq!(Packet::decode(&out).unwrap().frames, frames);
}

#[test]
fn the_aead_is_rfc_8439_chacha20_poly1305() {
    // RFC 8439, section 2.8.2.
    let key: [u8; 32] = core::array::from_fn(|i| 0x80 + i as u8);
    let nonce = [
        0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
    ];
    let aad = [
        0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
    ];
    let msg = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let out = ChaCha20Poly1305::new(&key.into())
        .encrypt((&nonce).into(), Payload { msg, aad: &aad })
        .unwrap();
    let tag = &out[out.len() - 16..];
    assert_eq!(
        tag,
        [
            0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60,
            0x06, 0x91
        ]
    );
    assert_eq!(&out[..4], [0xd3, 0x1a, 0x8d, 0x34]);
}
