//! Connect tokens for the lockgrid tools: the key file, and minting tokens
//! with the operating system's randomness.
//!
//! A key file holds the 32-byte private key as 64 hexadecimal digits
//! (surrounding whitespace ignored), e.g. made with `openssl rand -hex 32`.
//! A connect token is printed as lowercase hex of its
//! [`CONNECT_TOKEN_LEN`](lockgrid_protocol::token::CONNECT_TOKEN_LEN) bytes.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockgrid_kernel::EntityId;
use lockgrid_protocol::token::{ConnectToken, TokenParams, DEFAULT_PROTOCOL_ID, KEY_LEN};
use lockgrid_protocol::PrivateKey;

use crate::serve::rules::CLIENT_ID_BASE;

/// How long the tokens `lockgrid bots` mints stay valid.
pub const BOT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);

/// Reads a key file (64 hex digits).
pub fn read_key_file(path: &Path) -> Result<PrivateKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read key file {}: {e}", path.display()))?;
    parse_key(&text).map_err(|e| format!("key file {}: {e}", path.display()))
}

/// A private key from 64 hex digits.
pub fn parse_key(text: &str) -> Result<PrivateKey, String> {
    let bytes = from_hex(text.trim())?;
    let key: [u8; KEY_LEN] = bytes.try_into().map_err(|b: Vec<u8>| {
        format!("a key is {KEY_LEN} bytes (64 hex digits), not {}", b.len())
    })?;
    Ok(PrivateKey(key))
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from hex digits (either case).
pub fn from_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    let value = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!("{:?} is not a hex digit", char::from(c))),
    };
    digits
        .chunks_exact(2)
        .map(|p| Ok(value(p[0])? << 4 | value(p[1])?))
        .collect()
}

/// Seconds since the Unix epoch, by the system clock.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Mints a token, its packet keys and nonce from the operating system's
/// secure randomness.
pub fn mint(key: &PrivateKey, params: &TokenParams<'_>) -> Result<ConnectToken, String> {
    let mut failure = None;
    let token = ConnectToken::generate(key, params, |buf| {
        if let Err(e) = getrandom::fill(buf) {
            failure = Some(e);
        }
    })
    .map_err(|e| e.to_string())?;
    match failure {
        // Never hand out a token whose keys are not random.
        Some(e) => Err(format!("no secure randomness: {e}")),
        None => Ok(token),
    }
}

/// A token for `client_id` to connect to `server` (as `lockgrid serve`
/// with the same key accepts), valid for [`BOT_TOKEN_LIFETIME`].
pub fn mint_for(
    key: &PrivateKey,
    server: SocketAddr,
    client_id: EntityId,
) -> Result<ConnectToken, String> {
    let now = unix_now();
    let servers = [server];
    mint(
        key,
        &TokenParams {
            protocol_id: DEFAULT_PROTOCOL_ID,
            create_unix_secs: now,
            expire_unix_secs: now + BOT_TOKEN_LIFETIME.as_secs(),
            client_id,
            server_addresses: &servers,
            user_data: b"lockgrid-bots",
        },
    )
}

/// The client id of bot number `i` of a run with `seed`: above the NPC
/// ids, and apart for runs with different seeds.
pub fn bot_client_id(seed: u64, i: usize) -> EntityId {
    CLIENT_ID_BASE + 1 + (seed % (1 << 20)) * (1 << 20) + i as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_from_hex_and_refuse_anything_else() {
        let k = parse_key(&format!("  {}\n", "0a".repeat(32))).unwrap();
        assert_eq!(k.0, [10; 32]);
        assert!(parse_key(&"0a".repeat(31))
            .unwrap_err()
            .contains("32 bytes"));
        assert!(parse_key(&"zz".repeat(32))
            .unwrap_err()
            .contains("hex digit"));
        assert!(parse_key("abc").unwrap_err().contains("odd"));
        assert_eq!(to_hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(from_hex("00AB10").unwrap(), vec![0, 0xab, 0x10]);
    }

    #[test]
    fn minted_tokens_differ_and_open_under_the_key() {
        let key = PrivateKey([7; 32]);
        let server: SocketAddr = "127.0.0.1:7777".parse().unwrap();
        let a = mint_for(&key, server, bot_client_id(0, 0)).unwrap();
        let b = mint_for(&key, server, bot_client_id(0, 0)).unwrap();
        assert_ne!(a.keys, b.keys);
        let claims = lockgrid_protocol::token::open_hello_token(&key, a.hello_token()).unwrap();
        assert_eq!(claims.client_id, CLIENT_ID_BASE + 1);
        assert_eq!(claims.server_addresses, vec![server]);
    }
}
