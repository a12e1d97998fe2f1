//! Connect tokens: a backend that has authenticated a player hands it a
//! short-lived token that lets it connect to the listed servers, as the
//! entity the token names, with per-connection packet keys.
//!
//! A [`ConnectToken`] has two parts:
//! - the *Hello token* ([`HELLO_TOKEN_LEN`] bytes), which the client sends
//!   in its Hello unchanged. Its private part (client id, packet keys,
//!   server addresses, user data) is sealed with XChaCha20-Poly1305 under
//!   the [`PrivateKey`] that only the backend and the servers hold; the
//!   version, protocol id and timestamps before it are readable and
//!   authenticated as associated data;
//! - the client's own copy of the packet keys and server addresses.
//!
//! The exact layout is in `docs/protocol.md`. The crate draws no
//! randomness: [`ConnectToken::generate`] takes the nonce and keys from a
//! caller-supplied source, which must be a cryptographically secure one.

use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use lockgrid_kernel::EntityId;

/// The protocol id the `lockgrid` tools mint and accept tokens for; a
/// game picks its own.
pub const DEFAULT_PROTOCOL_ID: u64 = u64::from_le_bytes(*b"lockgrid");

/// Version byte of the token layout this crate writes and reads.
pub const TOKEN_VERSION: u8 = 1;
/// Bytes of every key: the private key and the packet keys.
pub const KEY_LEN: usize = 32;
/// Bytes of user data a token carries (shorter data is zero-padded).
pub const USER_DATA_LEN: usize = 128;
/// Most server addresses one token is valid for.
pub const MAX_SERVER_ADDRESSES: usize = 8;
/// Bytes of the AEAD tag after every sealed text (token or packet).
pub const TAG_LEN: usize = 16;
/// Bytes of the token's XChaCha20 nonce.
pub const TOKEN_NONCE_LEN: usize = 24;
/// Bytes of one encoded server address: kind, 16 address bytes, port.
pub const ADDRESS_LEN: usize = 19;
/// Bytes of the readable, authenticated start of a Hello token.
pub const TOKEN_AAD_LEN: usize = 1 + 8 + 8 + 8;
/// Bytes of the private part before sealing.
pub const PRIVATE_LEN: usize =
    8 + KEY_LEN + KEY_LEN + 1 + MAX_SERVER_ADDRESSES * ADDRESS_LEN + USER_DATA_LEN;
/// Bytes of the Hello token: readable start, nonce, sealed private part, tag.
pub const HELLO_TOKEN_LEN: usize = TOKEN_AAD_LEN + TOKEN_NONCE_LEN + PRIVATE_LEN + TAG_LEN;
/// Bytes of a whole connect token, as the backend hands it to a client.
pub const CONNECT_TOKEN_LEN: usize =
    HELLO_TOKEN_LEN + KEY_LEN + KEY_LEN + 1 + MAX_SERVER_ADDRESSES * ADDRESS_LEN;

const KIND_NONE: u8 = 0;
const KIND_V4: u8 = 4;
const KIND_V6: u8 = 6;

/// The key shared by the backend that mints tokens and the servers that
/// accept them. Its bytes never appear in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey(pub [u8; KEY_LEN]);

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(..)")
    }
}

/// The directional packet keys of one connection.
#[derive(Clone, PartialEq, Eq)]
pub struct PacketKeys {
    /// Seals what the client sends (client to server).
    pub client_to_server: [u8; KEY_LEN],
    /// Seals what the server sends (server to client).
    pub server_to_client: [u8; KEY_LEN],
}

impl fmt::Debug for PacketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PacketKeys(..)")
    }
}

/// What a backend puts into a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenParams<'a> {
    /// The game's protocol id: a server accepts only tokens for its own.
    pub protocol_id: u64,
    /// When the token was made, in Unix seconds (the caller's clock).
    pub create_unix_secs: u64,
    /// From this Unix second on, servers refuse the token.
    pub expire_unix_secs: u64,
    /// The entity the client may act for.
    pub client_id: EntityId,
    /// The servers the token is valid for (1..=[`MAX_SERVER_ADDRESSES`]).
    pub server_addresses: &'a [SocketAddr],
    /// Opaque data for the server's rules (at most [`USER_DATA_LEN`] bytes).
    pub user_data: &'a [u8],
}

/// Why a token could not be made or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// The bytes are not as long as the layout says.
    WrongLength {
        /// Bytes the layout has.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
    /// A token layout version this crate does not know.
    UnsupportedVersion(u8),
    /// The sealed part does not open under the key: forged, altered, or
    /// made with another key.
    Forged,
    /// A field's value is outside its domain (the field is named).
    Invalid(&'static str),
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::WrongLength { expected, found } => {
                write!(f, "token must be {expected} bytes, not {found}")
            }
            TokenError::UnsupportedVersion(v) => write!(f, "unsupported token version {v}"),
            TokenError::Forged => f.write_str("token does not authenticate under the key"),
            TokenError::Invalid(what) => write!(f, "invalid token: {what}"),
        }
    }
}

impl core::error::Error for TokenError {}

/// A connect token as the client holds it.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectToken {
    hello: [u8; HELLO_TOKEN_LEN],
    /// The connection's packet keys (the same ones sealed in the Hello token).
    pub keys: PacketKeys,
    /// Where the client may connect, in order of preference.
    pub server_addresses: Vec<SocketAddr>,
}

impl fmt::Debug for ConnectToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectToken")
            .field("protocol_id", &self.protocol_id())
            .field("expire_unix_secs", &self.expire_unix_secs())
            .field("server_addresses", &self.server_addresses)
            .finish_non_exhaustive()
    }
}

/// What a server learns from a Hello token that opened under its key.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// When the token was made (Unix seconds).
    pub create_unix_secs: u64,
    /// When the token stops being accepted (Unix seconds).
    pub expire_unix_secs: u64,
    /// The entity the client may act for.
    pub client_id: EntityId,
    /// The servers the token is valid for.
    pub server_addresses: Vec<SocketAddr>,
    /// The backend's data for the server's rules, zero-padded.
    pub user_data: [u8; USER_DATA_LEN],
    /// The connection's packet keys.
    pub keys: PacketKeys,
    /// The sealed part's tag: unique per token, it names the token in the
    /// server's table of used tokens.
    pub tag: [u8; TAG_LEN],
}

impl fmt::Debug for TokenClaims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenClaims")
            .field("protocol_id", &self.protocol_id)
            .field("create_unix_secs", &self.create_unix_secs)
            .field("expire_unix_secs", &self.expire_unix_secs)
            .field("client_id", &self.client_id)
            .field("server_addresses", &self.server_addresses)
            .finish_non_exhaustive()
    }
}

fn write_address(out: &mut [u8], addr: &SocketAddr) {
    let (kind, ip) = match addr.ip() {
        IpAddr::V4(v4) => {
            let mut ip = [0u8; 16];
            ip[..4].copy_from_slice(&v4.octets());
            (KIND_V4, ip)
        }
        IpAddr::V6(v6) => (KIND_V6, v6.octets()),
    };
    out[0] = kind;
    out[1..17].copy_from_slice(&ip);
    out[17..19].copy_from_slice(&addr.port().to_le_bytes());
}

/// Writes `count`, then every address slot (unused slots all zero).
fn write_addresses(out: &mut [u8], addrs: &[SocketAddr]) {
    out[0] = addrs.len() as u8;
    for (slot, a) in out[1..].chunks_exact_mut(ADDRESS_LEN).zip(addrs) {
        write_address(slot, a);
    }
}

/// Reads a count and [`MAX_SERVER_ADDRESSES`] slots; the count must be in
/// range, the used slots well-formed and the unused ones all zero, so every
/// address list has exactly one encoding.
fn read_addresses(bytes: &[u8]) -> Result<Vec<SocketAddr>, TokenError> {
    let count = usize::from(bytes[0]);
    if count == 0 || count > MAX_SERVER_ADDRESSES {
        return Err(TokenError::Invalid("server address count"));
    }
    let mut out = Vec::with_capacity(count);
    for (i, slot) in bytes[1..]
        .chunks_exact(ADDRESS_LEN)
        .take(MAX_SERVER_ADDRESSES)
        .enumerate()
    {
        if i >= count {
            if slot.iter().any(|&b| b != 0) {
                return Err(TokenError::Invalid("unused address slot"));
            }
            continue;
        }
        let port = u16::from_le_bytes([slot[17], slot[18]]);
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&slot[1..17]);
        let ip = match slot[0] {
            KIND_V4 if ip[4..].iter().all(|&b| b == 0) => {
                IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]))
            }
            KIND_V6 => IpAddr::V6(Ipv6Addr::from(ip)),
            KIND_NONE | KIND_V4 => {
                return Err(TokenError::Invalid("server address"));
            }
            _ => return Err(TokenError::Invalid("server address kind")),
        };
        out.push(SocketAddr::new(ip, port));
    }
    Ok(out)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn key_at(bytes: &[u8], at: usize) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k.copy_from_slice(&bytes[at..at + KEY_LEN]);
    k
}

// Offsets inside the private part.
const P_CLIENT: usize = 0;
const P_C2S: usize = 8;
const P_S2C: usize = P_C2S + KEY_LEN;
const P_ADDRS: usize = P_S2C + KEY_LEN;
const P_USER: usize = P_ADDRS + 1 + MAX_SERVER_ADDRESSES * ADDRESS_LEN;
// Offsets inside the Hello token.
const H_PROTOCOL: usize = 1;
const H_CREATE: usize = 9;
const H_EXPIRE: usize = 17;
pub(crate) const H_NONCE: usize = TOKEN_AAD_LEN;
const H_PRIVATE: usize = H_NONCE + TOKEN_NONCE_LEN;
const H_TAG: usize = H_PRIVATE + PRIVATE_LEN;
// Offsets inside the whole connect token.
const C_C2S: usize = HELLO_TOKEN_LEN;
const C_S2C: usize = C_C2S + KEY_LEN;
const C_ADDRS: usize = C_S2C + KEY_LEN;

impl ConnectToken {
    /// Mints a token (the backend's side). `fill_random` must fill its
    /// argument from a cryptographically secure source; it is asked for the
    /// two packet keys, then the nonce.
    pub fn generate(
        key: &PrivateKey,
        params: &TokenParams<'_>,
        mut fill_random: impl FnMut(&mut [u8]),
    ) -> Result<ConnectToken, TokenError> {
        let mut keys = PacketKeys {
            client_to_server: [0; KEY_LEN],
            server_to_client: [0; KEY_LEN],
        };
        fill_random(&mut keys.client_to_server);
        fill_random(&mut keys.server_to_client);
        let mut nonce = [0u8; TOKEN_NONCE_LEN];
        fill_random(&mut nonce);
        Self::seal(key, params, keys, nonce)
    }

    /// Mints a token from given keys and nonce. Use
    /// [`generate`](Self::generate) unless you are writing test vectors: a
    /// nonce must never be used twice under one private key.
    pub fn seal(
        key: &PrivateKey,
        params: &TokenParams<'_>,
        keys: PacketKeys,
        nonce: [u8; TOKEN_NONCE_LEN],
    ) -> Result<ConnectToken, TokenError> {
        let n = params.server_addresses.len();
        if n == 0 || n > MAX_SERVER_ADDRESSES {
            return Err(TokenError::Invalid("server address count"));
        }
        if params.user_data.len() > USER_DATA_LEN {
            return Err(TokenError::Invalid("user data longer than USER_DATA_LEN"));
        }
        if params.expire_unix_secs <= params.create_unix_secs {
            return Err(TokenError::Invalid("expiry not after creation"));
        }
        let mut hello = [0u8; HELLO_TOKEN_LEN];
        hello[0] = TOKEN_VERSION;
        hello[H_PROTOCOL..H_CREATE].copy_from_slice(&params.protocol_id.to_le_bytes());
        hello[H_CREATE..H_EXPIRE].copy_from_slice(&params.create_unix_secs.to_le_bytes());
        hello[H_EXPIRE..H_NONCE].copy_from_slice(&params.expire_unix_secs.to_le_bytes());
        hello[H_NONCE..H_PRIVATE].copy_from_slice(&nonce);
        {
            let p = &mut hello[H_PRIVATE..H_TAG];
            p[P_CLIENT..P_C2S].copy_from_slice(&params.client_id.to_le_bytes());
            p[P_C2S..P_S2C].copy_from_slice(&keys.client_to_server);
            p[P_S2C..P_ADDRS].copy_from_slice(&keys.server_to_client);
            write_addresses(&mut p[P_ADDRS..P_USER], params.server_addresses);
            p[P_USER..P_USER + params.user_data.len()].copy_from_slice(params.user_data);
        }
        let (aad, rest) = hello.split_at_mut(H_NONCE);
        let cipher = XChaCha20Poly1305::new(&key.0.into());
        let tag = cipher
            .encrypt_in_place_detached(
                XNonce::from_slice(&nonce),
                aad,
                &mut rest[TOKEN_NONCE_LEN..TOKEN_NONCE_LEN + PRIVATE_LEN],
            )
            .map_err(|_| TokenError::Invalid("private part too long to seal"))?;
        hello[H_TAG..].copy_from_slice(&tag);
        Ok(ConnectToken {
            hello,
            keys,
            server_addresses: params.server_addresses.to_vec(),
        })
    }

    /// The bytes the client sends in its Hello.
    pub fn hello_token(&self) -> &[u8; HELLO_TOKEN_LEN] {
        &self.hello
    }

    /// The protocol id the token is for.
    pub fn protocol_id(&self) -> u64 {
        u64_at(&self.hello, H_PROTOCOL)
    }

    /// When the token was made (Unix seconds).
    pub fn create_unix_secs(&self) -> u64 {
        u64_at(&self.hello, H_CREATE)
    }

    /// When servers stop accepting the token (Unix seconds).
    pub fn expire_unix_secs(&self) -> u64 {
        u64_at(&self.hello, H_EXPIRE)
    }

    /// The whole token, as a backend hands it to a client.
    pub fn encode(&self) -> [u8; CONNECT_TOKEN_LEN] {
        let mut out = [0u8; CONNECT_TOKEN_LEN];
        out[..HELLO_TOKEN_LEN].copy_from_slice(&self.hello);
        out[C_C2S..C_S2C].copy_from_slice(&self.keys.client_to_server);
        out[C_S2C..C_ADDRS].copy_from_slice(&self.keys.server_to_client);
        write_addresses(&mut out[C_ADDRS..], &self.server_addresses);
        out
    }

    /// Reads a whole token (the client's side; the sealed part stays sealed).
    pub fn decode(bytes: &[u8]) -> Result<ConnectToken, TokenError> {
        if bytes.len() != CONNECT_TOKEN_LEN {
            return Err(TokenError::WrongLength {
                expected: CONNECT_TOKEN_LEN,
                found: bytes.len(),
            });
        }
        if bytes[0] != TOKEN_VERSION {
            return Err(TokenError::UnsupportedVersion(bytes[0]));
        }
        let mut hello = [0u8; HELLO_TOKEN_LEN];
        hello.copy_from_slice(&bytes[..HELLO_TOKEN_LEN]);
        Ok(ConnectToken {
            hello,
            keys: PacketKeys {
                client_to_server: key_at(bytes, C_C2S),
                server_to_client: key_at(bytes, C_S2C),
            },
            server_addresses: read_addresses(&bytes[C_ADDRS..])?,
        })
    }
}

/// The readable start of a Hello token: checked before the costlier open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloTokenHeader {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// When the token was made (Unix seconds).
    pub create_unix_secs: u64,
    /// When the token stops being accepted (Unix seconds).
    pub expire_unix_secs: u64,
}

/// Reads the readable start of a Hello token. It is not authenticated
/// until [`open_hello_token`] succeeds.
pub fn peek_hello_token(bytes: &[u8]) -> Result<HelloTokenHeader, TokenError> {
    if bytes.len() != HELLO_TOKEN_LEN {
        return Err(TokenError::WrongLength {
            expected: HELLO_TOKEN_LEN,
            found: bytes.len(),
        });
    }
    if bytes[0] != TOKEN_VERSION {
        return Err(TokenError::UnsupportedVersion(bytes[0]));
    }
    Ok(HelloTokenHeader {
        protocol_id: u64_at(bytes, H_PROTOCOL),
        create_unix_secs: u64_at(bytes, H_CREATE),
        expire_unix_secs: u64_at(bytes, H_EXPIRE),
    })
}

/// Opens a Hello token under the private key (the server's side) and
/// checks its private part down to the semantics. Expiry, protocol id and
/// server address are the caller's to check against its own state.
pub fn open_hello_token(key: &PrivateKey, bytes: &[u8]) -> Result<TokenClaims, TokenError> {
    let header = peek_hello_token(bytes)?;
    let mut private = [0u8; PRIVATE_LEN];
    private.copy_from_slice(&bytes[H_PRIVATE..H_TAG]);
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&bytes[H_TAG..]);
    let cipher = XChaCha20Poly1305::new(&key.0.into());
    cipher
        .decrypt_in_place_detached(
            XNonce::from_slice(&bytes[H_NONCE..H_PRIVATE]),
            &bytes[..H_NONCE],
            &mut private,
            &tag.into(),
        )
        .map_err(|_| TokenError::Forged)?;
    let server_addresses = read_addresses(&private[P_ADDRS..P_USER])?;
    let mut user_data = [0u8; USER_DATA_LEN];
    user_data.copy_from_slice(&private[P_USER..]);
    Ok(TokenClaims {
        protocol_id: header.protocol_id,
        create_unix_secs: header.create_unix_secs,
        expire_unix_secs: header.expire_unix_secs,
        client_id: u64_at(&private, P_CLIENT),
        server_addresses,
        user_data,
        keys: PacketKeys {
            client_to_server: key_at(&private, P_C2S),
            server_to_client: key_at(&private, P_S2C),
        },
        tag,
    })
}
