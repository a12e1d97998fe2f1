//! Byte layout of the journal (see `docs/journal.md`): header, records,
//! commands. All integers little-endian; `Fix` values as their raw `i64`.

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, Visibility};

/// First eight bytes of every journal file.
pub const MAGIC: [u8; 8] = *b"LGJOURNL";
/// Format version written by this build; readers refuse any other.
/// Version 2 changed no byte, only the digest its records carry (the
/// kernel's entity term), so that a version-1 journal is refused rather
/// than replayed into a false divergence at tick 1. Version 3 adds
/// `max_visible` to the config.
pub const VERSION: u32 = 3;
/// Encoded size of a [`Config`] in a header.
pub const CONFIG_LEN: usize = 75;
/// `max_visible` unset, in a header: above any value a config may hold.
const NO_MAX_VISIBLE: u32 = u32::MAX;
/// Size of a header: magic, version, config length, config, CRC.
pub const HEADER_LEN: usize = 8 + 4 + 4 + CONFIG_LEN + 4;
/// Bytes before a record's payload: payload length and CRC.
pub const RECORD_PREFIX: usize = 8;
/// Smallest payload: tick, digest and a command count of zero.
pub const MIN_PAYLOAD: usize = 8 + 8 + 4;
/// Largest payload accepted (a tick of about 300 000 spawns).
pub const MAX_PAYLOAD: usize = 16 << 20;

const SPAWN: u8 = 1;
const MOVE: u8 = 2;
const DESPAWN: u8 = 3;

/// A journal header that failed to decode, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderFault {
    Magic,
    Version(u32),
    ConfigLen(u32),
    Crc,
    Visibility(u8),
}

/// One tick as journaled: what went into the kernel and the digest that came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The tick number (the first is 1).
    pub tick: u64,
    /// The world's digest after the tick.
    pub digest: u64,
    /// Every command of the tick, in the order applied.
    pub commands: Vec<Command>,
}

pub(crate) fn encode_header(config: &Config) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    let mut w = Cursor::new(&mut out);
    w.put(&MAGIC);
    w.put(&VERSION.to_le_bytes());
    w.put(&(CONFIG_LEN as u32).to_le_bytes());
    encode_config(&mut w, config);
    let crc = crc32fast::hash(&w.buf[..HEADER_LEN - 4]);
    w.put(&crc.to_le_bytes());
    out
}

pub(crate) fn decode_header(bytes: &[u8; HEADER_LEN]) -> Result<Config, HeaderFault> {
    if bytes[..8] != MAGIC {
        return Err(HeaderFault::Magic);
    }
    let mut r = Reader::new(&bytes[8..]);
    // The slices below are within the fixed-size header; Reader only fails past its end.
    let version = r.u32().unwrap_or(0);
    if version != VERSION {
        return Err(HeaderFault::Version(version));
    }
    let config_len = r.u32().unwrap_or(0);
    if config_len as usize != CONFIG_LEN {
        return Err(HeaderFault::ConfigLen(config_len));
    }
    let stored_crc = u32::from_le_bytes([
        bytes[HEADER_LEN - 4],
        bytes[HEADER_LEN - 3],
        bytes[HEADER_LEN - 2],
        bytes[HEADER_LEN - 1],
    ]);
    if crc32fast::hash(&bytes[..HEADER_LEN - 4]) != stored_crc {
        return Err(HeaderFault::Crc);
    }
    decode_config(&mut r)
}

fn encode_config(w: &mut Cursor<'_>, c: &Config) {
    w.i64(c.origin.x.to_bits());
    w.i64(c.origin.y.to_bits());
    w.i64(c.cell_size.to_bits());
    w.put(&c.width_cells.to_le_bytes());
    w.put(&c.height_cells.to_le_bytes());
    w.put(&[match c.visibility {
        Visibility::Grid => 0,
        Visibility::Radius => 1,
    }]);
    w.i64(c.hysteresis.to_bits());
    w.put(&c.update_interval.to_le_bytes());
    w.i64(c.move_epsilon.to_bits());
    w.put(&c.dir_epsilon.to_le_bytes());
    w.put(&c.max_entities.to_le_bytes());
    w.put(&c.max_observers.to_le_bytes());
    w.put(&c.max_view.to_le_bytes());
    w.put(&c.max_visible.unwrap_or(NO_MAX_VISIBLE).to_le_bytes());
}

fn decode_config(r: &mut Reader<'_>) -> Result<Config, HeaderFault> {
    // Only called on a full, CRC-checked header: every read is in bounds.
    let fix = |r: &mut Reader<'_>| Fix::from_bits(r.i64().unwrap_or(0));
    let origin = Pos::new(fix(r), fix(r));
    let cell_size = fix(r);
    let width_cells = r.u32().unwrap_or(0);
    let height_cells = r.u32().unwrap_or(0);
    let visibility = match r.u8().unwrap_or(0) {
        0 => Visibility::Grid,
        1 => Visibility::Radius,
        v => return Err(HeaderFault::Visibility(v)),
    };
    Ok(Config {
        origin,
        cell_size,
        width_cells,
        height_cells,
        visibility,
        hysteresis: fix(r),
        update_interval: r.u64().unwrap_or(0),
        move_epsilon: fix(r),
        dir_epsilon: r.u16().unwrap_or(0),
        max_entities: r.u32().unwrap_or(0),
        max_observers: r.u32().unwrap_or(0),
        max_view: r.u32().unwrap_or(0),
        max_visible: match r.u32().unwrap_or(NO_MAX_VISIBLE) {
            NO_MAX_VISIBLE => None,
            n => Some(n),
        },
    })
}

/// Appends one whole record (prefix and payload) to `out`.
pub(crate) fn encode_record(out: &mut Vec<u8>, tick: u64, commands: &[Command], digest: u64) {
    let start = out.len();
    out.extend_from_slice(&[0; RECORD_PREFIX]);
    out.extend_from_slice(&tick.to_le_bytes());
    out.extend_from_slice(&digest.to_le_bytes());
    // The caller checked the encoded size against MAX_PAYLOAD, so the count fits.
    out.extend_from_slice(&(commands.len() as u32).to_le_bytes());
    for c in commands {
        match *c {
            Command::Spawn(s) => {
                out.push(SPAWN);
                out.extend_from_slice(&s.id.to_le_bytes());
                out.extend_from_slice(&s.pos.x.to_bits().to_le_bytes());
                out.extend_from_slice(&s.pos.y.to_bits().to_le_bytes());
                out.extend_from_slice(&s.dir.to_le_bytes());
                out.extend_from_slice(&s.speed.to_bits().to_le_bytes());
                out.push(u8::from(s.observer));
                out.extend_from_slice(&s.radius.to_bits().to_le_bytes());
                out.extend_from_slice(&s.layers.to_le_bytes());
                out.extend_from_slice(&s.interest.to_le_bytes());
            }
            Command::Move(m) => {
                out.push(MOVE);
                out.extend_from_slice(&m.id.to_le_bytes());
                out.extend_from_slice(&m.pos.x.to_bits().to_le_bytes());
                out.extend_from_slice(&m.pos.y.to_bits().to_le_bytes());
                out.extend_from_slice(&m.dir.to_le_bytes());
                out.extend_from_slice(&m.speed.to_bits().to_le_bytes());
            }
            Command::Despawn { id } => {
                out.push(DESPAWN);
                out.extend_from_slice(&id.to_le_bytes());
            }
        }
    }
    let len = (out.len() - start - RECORD_PREFIX) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len.to_le_bytes());
    crc.update(&out[start + RECORD_PREFIX..]);
    out[start + 4..start + 8].copy_from_slice(&crc.finalize().to_le_bytes());
}

/// Encoded payload size of a tick, to refuse oversized ticks before writing.
pub(crate) fn payload_len(commands: &[Command]) -> usize {
    MIN_PAYLOAD
        + commands
            .iter()
            .map(|c| match c {
                Command::Spawn(_) => 1 + 51,
                Command::Move(_) => 1 + 34,
                Command::Despawn { .. } => 1 + 8,
            })
            .sum::<usize>()
}

/// The CRC a record prefix must carry for `payload`.
pub(crate) fn record_crc(len: u32, payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len.to_le_bytes());
    crc.update(payload);
    crc.finalize()
}

/// Why a CRC-valid payload is not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PayloadFault {
    /// It ends inside a command, or has bytes after the last one.
    Length,
    /// An unknown command tag.
    Tag(u8),
    /// An `observer` byte other than 0 or 1.
    Flag(u8),
}

pub(crate) fn decode_payload(payload: &[u8]) -> Result<Record, PayloadFault> {
    let mut r = Reader::new(payload);
    let tick = r.u64().ok_or(PayloadFault::Length)?;
    let digest = r.u64().ok_or(PayloadFault::Length)?;
    let count = r.u32().ok_or(PayloadFault::Length)?;
    // Each command takes at least 9 bytes: never reserve more than the payload holds.
    let mut commands = Vec::with_capacity((count as usize).min(payload.len() / 9));
    for _ in 0..count {
        let tag = r.u8().ok_or(PayloadFault::Length)?;
        let command = match tag {
            SPAWN => {
                let id = r.u64().ok_or(PayloadFault::Length)?;
                let pos = r.pos().ok_or(PayloadFault::Length)?;
                let dir = r.u16().ok_or(PayloadFault::Length)?;
                let speed = r.fix().ok_or(PayloadFault::Length)?;
                let observer = match r.u8().ok_or(PayloadFault::Length)? {
                    0 => false,
                    1 => true,
                    v => return Err(PayloadFault::Flag(v)),
                };
                let radius = r.fix().ok_or(PayloadFault::Length)?;
                let layers = r.u32().ok_or(PayloadFault::Length)?;
                let interest = r.u32().ok_or(PayloadFault::Length)?;
                Command::Spawn(Spawn {
                    id,
                    pos,
                    dir,
                    speed,
                    observer,
                    radius,
                    layers,
                    interest,
                })
            }
            MOVE => Command::Move(Move {
                id: r.u64().ok_or(PayloadFault::Length)?,
                pos: r.pos().ok_or(PayloadFault::Length)?,
                dir: r.u16().ok_or(PayloadFault::Length)?,
                speed: r.fix().ok_or(PayloadFault::Length)?,
            }),
            DESPAWN => Command::Despawn {
                id: r.u64().ok_or(PayloadFault::Length)?,
            },
            t => return Err(PayloadFault::Tag(t)),
        };
        commands.push(command);
    }
    if !r.rest().is_empty() {
        return Err(PayloadFault::Length);
    }
    Ok(Record {
        tick,
        digest,
        commands,
    })
}

/// Writes into a fixed buffer; only used for the fixed-size header.
struct Cursor<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        Cursor { buf, at: 0 }
    }
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
    fn i64(&mut self, v: i64) {
        self.put(&v.to_le_bytes());
    }
}

/// Reads little-endian values from a slice; `None` past its end.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        Some(*head)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    pub(crate) fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_le_bytes)
    }
    fn fix(&mut self) -> Option<Fix> {
        self.i64().map(Fix::from_bits)
    }
    fn pos(&mut self) -> Option<Pos> {
        Some(Pos::new(self.fix()?, self.fix()?))
    }
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_has_the_documented_size() {
        let config = Config {
            origin: Pos::from_ints(-5, 7),
            visibility: Visibility::Radius,
            ..Config::default()
        };
        let bytes = encode_header(&config);
        assert_eq!(bytes.len(), 95);
        assert_eq!(&bytes[..12], b"LGJOURNL\x03\x00\x00\x00");
        // No bound on the visible pairs: its word is all ones.
        assert_eq!(bytes[16 + 71..16 + 75], [0xff; 4]);
        assert_eq!(decode_header(&bytes), Ok(config));
        let bounded = Config {
            max_visible: Some(0x0102_0304),
            ..config
        };
        let bytes = encode_header(&bounded);
        assert_eq!(bytes[16 + 71..16 + 75], [4, 3, 2, 1]);
        assert_eq!(decode_header(&bytes), Ok(bounded));
        // Versions 1 and 2 had other bytes or another digest: refused, not
        // replayed.
        for old in [1, 2] {
            let mut v = bytes;
            v[8] = old;
            let crc = crc32fast::hash(&v[..HEADER_LEN - 4]);
            v[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(decode_header(&v), Err(HeaderFault::Version(old.into())));
        }
    }

    #[test]
    fn record_bytes_match_the_documented_example() {
        let mut out = Vec::new();
        encode_record(
            &mut out,
            1,
            &[Command::Despawn { id: 7 }],
            0x0102030405060708,
        );
        let payload_len = 8 + 8 + 4 + 9;
        assert_eq!(out.len(), 8 + payload_len);
        assert_eq!(out[..4], (payload_len as u32).to_le_bytes());
        assert_eq!(
            out[8..],
            [
                1, 0, 0, 0, 0, 0, 0, 0, // tick
                8, 7, 6, 5, 4, 3, 2, 1, // digest
                1, 0, 0, 0, // one command
                3, 7, 0, 0, 0, 0, 0, 0, 0 // despawn 7
            ]
        );
        assert_eq!(
            out[4..8],
            record_crc(payload_len as u32, &out[8..]).to_le_bytes()
        );
        assert_eq!(out[4..8], [0x6f, 0x58, 0x6a, 0x7d]); // CRC-32 (IEEE) 0x7d6a586f
    }

    /// One command of each kind, with fields at their extremes.
    fn every_kind() -> Vec<Command> {
        vec![
            Command::Spawn(Spawn {
                id: u64::MAX,
                pos: Pos::new(Fix::from_bits(-1), Fix::from_bits(i64::MAX)),
                dir: 65535,
                speed: Fix::from_bits(3),
                observer: true,
                radius: Fix::from_bits(i64::MIN),
                layers: 0xdead_beef,
                interest: 1,
            }),
            Command::Move(Move {
                id: 4,
                pos: Pos::from_ints(1, -2),
                dir: 9,
                speed: Fix::from_bits(-5),
            }),
            Command::Despawn { id: 0 },
        ]
    }

    #[test]
    fn payloads_round_trip() {
        let commands = every_kind();
        let mut out = Vec::new();
        encode_record(&mut out, 99, &commands, 42);
        assert_eq!(out.len() - RECORD_PREFIX, payload_len(&commands));
        let record = decode_payload(&out[RECORD_PREFIX..]).unwrap();
        assert_eq!(
            record,
            Record {
                tick: 99,
                digest: 42,
                commands
            }
        );
        // Every strict prefix is too short.
        for cut in 0..out.len() - RECORD_PREFIX {
            assert_eq!(
                decode_payload(&out[RECORD_PREFIX..RECORD_PREFIX + cut]).err(),
                Some(PayloadFault::Length)
            );
        }
    }

    /// Every single-byte edit of a payload (a checksum that happens to
    /// match lets any of them through) decodes to a typed error or to a
    /// record that encodes back to the same bytes: nothing panics, nothing
    /// is read past the payload, and no two payloads decode alike.
    #[test]
    fn every_single_byte_edit_decodes_canonically_or_not_at_all() {
        let mut out = Vec::new();
        encode_record(&mut out, 7, &every_kind(), 0x0102_0304_0506_0708);
        let payload = &out[RECORD_PREFIX..];
        let (mut decoded, mut refused) = (0, 0);
        for at in 0..payload.len() {
            for byte in 0..=u8::MAX {
                let mut edited = payload.to_vec();
                edited[at] = byte;
                match decode_payload(&edited) {
                    Ok(record) => {
                        let mut again = Vec::new();
                        encode_record(&mut again, record.tick, &record.commands, record.digest);
                        assert_eq!(again[RECORD_PREFIX..], edited[..], "byte {at} = {byte}");
                        decoded += 1;
                    }
                    Err(_) => refused += 1,
                }
            }
        }
        // Both outcomes occur: tags and observer flags refuse, fields decode.
        assert!(
            decoded > 0 && refused > 0,
            "{decoded} decoded, {refused} refused"
        );
    }
}
