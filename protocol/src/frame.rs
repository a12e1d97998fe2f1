//! Frames: the typed units a packet carries, each with a stable code.

use alloc::vec::Vec;

use lockgrid_kernel::{Command, Config, Dir, EntityId, Fix, Move, Pos, Spawn, Visibility};

use crate::error::{DecodeError, EncodeError};
use crate::reason::DisconnectReason;
use crate::refusal::{InputRefusal, RefusedInput, MAX_REFUSALS_PER_FRAME};
use crate::wire::{Reader, Writer};

/// Frame codes. A released code is never reused; codes `0x80..=0xFF` are
/// reserved for a future extension mechanism.
pub mod code {
    /// One byte of padding, ignored (either direction).
    pub const PADDING: u8 = 0x00;
    /// Client → server: open a connection.
    pub const HELLO: u8 = 0x01;
    /// Client → server: the client's not-yet-acknowledged inputs.
    pub const INPUT: u8 = 0x02;
    /// Client → server: every tick up to this one is applied.
    pub const ACK: u8 = 0x03;
    /// Client → server: keepalive and round-trip probe.
    pub const PING: u8 = 0x04;
    /// Client → server: the client is leaving.
    pub const BYE: u8 = 0x05;
    /// Server → client: the connection is accepted.
    pub const WELCOME: u8 = 0x10;
    /// Server → client: one part of one tick's events for this client.
    pub const TICK_BATCH: u8 = 0x11;
    /// Server → client: answer to a Ping.
    pub const PONG: u8 = 0x12;
    /// Server → client: the connection is over.
    pub const DISCONNECT: u8 = 0x13;
    /// Server → client: commands of the client's inputs the host refused.
    pub const REFUSED: u8 = 0x14;
}

/// Longest Hello token, in bytes (room for a connect token's
/// [`HELLO_TOKEN_LEN`](crate::token::HELLO_TOKEN_LEN)).
pub const MAX_TOKEN_LEN: usize = 512;
/// Most inputs one Input frame carries.
pub const MAX_INPUTS_PER_FRAME: usize = 64;
/// Most commands one input carries.
pub const MAX_COMMANDS_PER_INPUT: usize = 32;
/// Most parts one tick batch is split into.
pub const MAX_PARTS: u16 = 1024;

/// One tick of a client's input: its commands, in the order to apply them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputEntry {
    /// The tick the client means these commands for.
    pub tick: u64,
    /// The commands, for the client's own entity.
    pub commands: Vec<Command>,
}

/// The client's unacknowledged inputs, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFrame {
    /// Input sequence number of the first entry; the next entries follow on.
    pub first_seq: u64,
    /// Inputs with strictly increasing ticks.
    pub entries: Vec<InputEntry>,
}

/// The world parameters a client needs to interpret positions and views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldParams {
    /// World-space position of the corner of cell (0, 0).
    pub origin: Pos,
    /// Edge length of a cell.
    pub cell_size: Fix,
    /// Cells along x.
    pub width_cells: u32,
    /// Cells along y.
    pub height_cells: u32,
    /// Visibility rule.
    pub visibility: Visibility,
    /// Radius-mode hysteresis.
    pub hysteresis: Fix,
    /// Most subjects one observer sees.
    pub max_view: u32,
}

impl From<&Config> for WorldParams {
    fn from(c: &Config) -> Self {
        WorldParams {
            origin: c.origin,
            cell_size: c.cell_size,
            width_cells: c.width_cells,
            height_cells: c.height_cells,
            visibility: c.visibility,
            hysteresis: c.hysteresis,
            max_view: c.max_view,
        }
    }
}

/// The server's limits that bind a client's inputs, as its Welcome states
/// them. `None` is a limit the server does not state (its host may still
/// refuse inputs for reasons of its own, each with a reason code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientLimits {
    /// Highest speed a Move may carry, in world units per second, and the
    /// rate at which the client's distance allowance fills.
    pub max_speed: Option<Fix>,
    /// How long unused allowance (distance and moves) is saved up, in
    /// microseconds: the most a client may spend at once.
    pub burst_us: Option<u64>,
    /// Moves per second the client may send on average (the rate at which
    /// its move allowance fills).
    pub moves_per_sec: Option<u32>,
    /// The bytes per second the server sends this client at most (plus
    /// one packet), Enter and Leave events excepted.
    pub budget_bytes_per_sec: Option<u32>,
}

impl ClientLimits {
    /// No stated limits.
    pub const NONE: ClientLimits = ClientLimits {
        max_speed: None,
        burst_us: None,
        moves_per_sec: None,
        budget_bytes_per_sec: None,
    };
}

/// Server → client: the connection is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The connection id every later packet carries.
    pub conn_id: u32,
    /// The nonce of the Hello this Welcome answers: a client believes only
    /// a Welcome that echoes its own.
    pub nonce: u64,
    /// The entity this client acts for and observes through.
    pub entity: EntityId,
    /// The client entity's spawn as the server will apply it in tick
    /// `tick + 1` (its `id` is `entity`); the client's first accepted
    /// move is measured from `spawn.pos`.
    pub spawn: Spawn,
    /// The limits the server checks the client's inputs against.
    pub limits: ClientLimits,
    /// The last tick the server has run; the first batch is for `tick + 1`.
    pub tick: u64,
    /// Time between ticks, in microseconds (the tick rate).
    pub tick_interval_us: u64,
    /// How many ticks ahead of its last applied tick the client must buffer.
    pub window: u32,
    /// World parameters.
    pub world: WorldParams,
}

/// Server → client: one part of one tick's events for this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickBatch<'a> {
    /// The tick.
    pub tick: u64,
    /// This part's index, `0..parts`.
    pub part: u16,
    /// How many parts the tick's batch has (at least 1).
    pub parts: u16,
    /// The kernel's state digest after the tick.
    pub digest: u64,
    /// The part's events in the batch encoding ([`crate::batch`]).
    pub payload: &'a [u8],
}

/// One frame. Byte fields borrow from the decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// One ignored byte.
    Padding,
    /// Client → server: open a connection.
    Hello {
        /// The protocol version the client speaks.
        version: u8,
        /// A number the client draws for this run (never reused by the
        /// same address): the Welcome echoes it, so a client never takes
        /// a delayed Welcome meant for an earlier run of itself.
        nonce: u64,
        /// Opaque credentials for the host's token check (at most [`MAX_TOKEN_LEN`] bytes).
        token: &'a [u8],
    },
    /// Client → server: unacknowledged inputs.
    Input(InputFrame),
    /// Client → server: every tick up to `tick` is applied.
    Ack {
        /// The client's last applied tick.
        tick: u64,
    },
    /// Client → server: keepalive; the server echoes `stamp` in a Pong.
    Ping {
        /// Opaque to the server (the client puts its clock there).
        stamp: u64,
    },
    /// Client → server: the client is leaving.
    Bye,
    /// Server → client: the connection is accepted.
    Welcome(Welcome),
    /// Server → client: one part of a tick batch.
    TickBatch(TickBatch<'a>),
    /// Server → client: answer to a Ping.
    Pong {
        /// The Ping's stamp.
        stamp: u64,
    },
    /// Server → client: the connection is over.
    Disconnect {
        /// Why.
        reason: DisconnectReason,
    },
    /// Server → client: commands of the client's inputs that the host
    /// refused (1 to [`MAX_REFUSALS_PER_FRAME`]).
    Refused(Vec<RefusedInput>),
}

impl Frame<'_> {
    /// This frame's code.
    pub fn code(&self) -> u8 {
        match self {
            Frame::Padding => code::PADDING,
            Frame::Hello { .. } => code::HELLO,
            Frame::Input(_) => code::INPUT,
            Frame::Ack { .. } => code::ACK,
            Frame::Ping { .. } => code::PING,
            Frame::Bye => code::BYE,
            Frame::Welcome(_) => code::WELCOME,
            Frame::TickBatch(_) => code::TICK_BATCH,
            Frame::Pong { .. } => code::PONG,
            Frame::Disconnect { .. } => code::DISCONNECT,
            Frame::Refused(_) => code::REFUSED,
        }
    }

    /// Whether receiving this frame obliges the receiver to acknowledge the
    /// packet soon (Padding and Ack do not).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(self, Frame::Padding | Frame::Ack { .. })
    }

    /// Encodes the frame into `buf`; returns the bytes written, or how many are needed.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf);
        self.write(&mut w)?;
        Ok(w.finish()?)
    }

    /// Bytes the frame's encoding takes.
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        let mut w = Writer::new(&mut []);
        self.write(&mut w)?;
        Ok(w.pos())
    }

    /// Writes a frame the endpoint built itself, whose fields are valid by
    /// construction (parts within limits, ticks increasing, token short).
    pub(crate) fn write_infallible(&self, w: &mut Writer<'_>) {
        let r = self.write(w);
        debug_assert!(r.is_ok(), "endpoint built an invalid frame: {r:?}");
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.u8(self.code());
        match self {
            Frame::Padding | Frame::Bye => {}
            Frame::Hello {
                version,
                nonce,
                token,
            } => {
                if token.len() > MAX_TOKEN_LEN {
                    return Err(EncodeError::Invalid("token longer than MAX_TOKEN_LEN"));
                }
                w.varint(u64::from(*version));
                w.u64_le(*nonce);
                w.varint(token.len() as u64);
                w.bytes(token);
            }
            Frame::Input(input) => write_input(w, input)?,
            Frame::Ack { tick } => w.varint(*tick),
            Frame::Ping { stamp } | Frame::Pong { stamp } => w.varint(*stamp),
            Frame::Welcome(wel) => {
                if wel.spawn.id != wel.entity {
                    return Err(EncodeError::Invalid(
                        "the Welcome's spawn names another entity",
                    ));
                }
                w.varint(u64::from(wel.conn_id));
                w.u64_le(wel.nonce);
                w.varint(wel.entity);
                w.varint(wel.tick);
                w.varint(wel.tick_interval_us);
                w.varint(u64::from(wel.window));
                let p = &wel.world;
                w.svarint(p.origin.x.to_bits());
                w.svarint(p.origin.y.to_bits());
                w.svarint(p.cell_size.to_bits());
                w.varint(u64::from(p.width_cells));
                w.varint(u64::from(p.height_cells));
                w.u8(match p.visibility {
                    Visibility::Grid => 0,
                    Visibility::Radius => 1,
                });
                w.svarint(p.hysteresis.to_bits());
                w.varint(u64::from(p.max_view));
                write_spawn_state(w, &wel.spawn);
                write_limits(w, &wel.limits);
            }
            Frame::TickBatch(b) => {
                if b.parts == 0 || b.part >= b.parts || b.parts > MAX_PARTS {
                    return Err(EncodeError::Invalid(
                        "part must be below parts, parts in 1..=MAX_PARTS",
                    ));
                }
                w.varint(b.tick);
                w.varint(u64::from(b.part));
                w.varint(u64::from(b.parts));
                w.u64_le(b.digest);
                w.varint(b.payload.len() as u64);
                w.bytes(b.payload);
            }
            Frame::Disconnect { reason } => w.u8(reason.code()),
            Frame::Refused(list) => write_refused_body(w, list)?,
        }
        Ok(())
    }
}

impl<'a> Frame<'a> {
    /// Decodes one frame from the start of `bytes`; returns it and the bytes it took.
    pub fn decode(bytes: &'a [u8]) -> Result<(Frame<'a>, usize), DecodeError> {
        let mut r = Reader::new(bytes);
        let f = Frame::read(&mut r)?;
        Ok((f, bytes.len() - r.remaining()))
    }

    /// Reads one frame as [`read`](Self::read) does, except that an Input
    /// frame is read into `input` (reusing its vectors) and `None` returned.
    pub(crate) fn read_reusing(
        r: &mut Reader<'a>,
        input: &mut InputScratch,
    ) -> Result<Option<Frame<'a>>, DecodeError> {
        let mut peek = r.clone();
        if peek.u8()? == code::INPUT {
            *r = peek;
            read_input_into(r, input)?;
            return Ok(None);
        }
        Frame::read(r).map(Some)
    }

    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Frame<'a>, DecodeError> {
        let c = r.u8()?;
        Ok(match c {
            code::PADDING => Frame::Padding,
            code::HELLO => {
                let version =
                    u8::try_from(r.varint()?).map_err(|_| DecodeError::OutOfRange("version"))?;
                let nonce = r.u64_le()?;
                let len = r.count(MAX_TOKEN_LEN, 1, "token bytes")?;
                Frame::Hello {
                    version,
                    nonce,
                    token: r.bytes(len)?,
                }
            }
            code::INPUT => Frame::Input(read_input(r)?),
            code::ACK => Frame::Ack { tick: r.varint()? },
            code::PING => Frame::Ping { stamp: r.varint()? },
            code::BYE => Frame::Bye,
            code::WELCOME => {
                let conn_id = r.varint_u32("conn_id")?;
                let nonce = r.u64_le()?;
                let entity = r.varint()?;
                let tick = r.varint()?;
                let tick_interval_us = r.varint()?;
                let window = r.varint_u32("window")?;
                let origin = Pos::new(Fix::from_bits(r.svarint()?), Fix::from_bits(r.svarint()?));
                let cell_size = Fix::from_bits(r.svarint()?);
                let width_cells = r.varint_u32("width_cells")?;
                let height_cells = r.varint_u32("height_cells")?;
                let visibility = match r.u8()? {
                    0 => Visibility::Grid,
                    1 => Visibility::Radius,
                    _ => return Err(DecodeError::OutOfRange("visibility")),
                };
                let hysteresis = Fix::from_bits(r.svarint()?);
                let max_view = r.varint_u32("max_view")?;
                let spawn = read_spawn_state(r, entity)?;
                let limits = read_limits(r)?;
                Frame::Welcome(Welcome {
                    conn_id,
                    nonce,
                    entity,
                    spawn,
                    limits,
                    tick,
                    tick_interval_us,
                    window,
                    world: WorldParams {
                        origin,
                        cell_size,
                        width_cells,
                        height_cells,
                        visibility,
                        hysteresis,
                        max_view,
                    },
                })
            }
            code::TICK_BATCH => {
                let tick = r.varint()?;
                let part = r.varint_u16("part")?;
                let parts = r.varint_u16("parts")?;
                if parts == 0 || parts > MAX_PARTS || part >= parts {
                    return Err(DecodeError::OutOfRange("part"));
                }
                let digest = r.u64_le()?;
                let len = r.count(usize::MAX, 1, "payload bytes")?;
                Frame::TickBatch(TickBatch {
                    tick,
                    part,
                    parts,
                    digest,
                    payload: r.bytes(len)?,
                })
            }
            code::PONG => Frame::Pong { stamp: r.varint()? },
            code::DISCONNECT => Frame::Disconnect {
                reason: DisconnectReason::from_code(r.u8()?),
            },
            code::REFUSED => {
                // An item is at least three bytes.
                let n = r.count(MAX_REFUSALS_PER_FRAME, 3, "refusals")?;
                if n == 0 {
                    return Err(DecodeError::OutOfRange("refusals"));
                }
                let mut list = Vec::with_capacity(n);
                for _ in 0..n {
                    let seq = r.varint()?;
                    let index = u8::try_from(r.varint()?)
                        .ok()
                        .filter(|&i| usize::from(i) < MAX_COMMANDS_PER_INPUT)
                        .ok_or(DecodeError::OutOfRange("command index"))?;
                    let reason = InputRefusal::from_code(r.u8()?);
                    list.push(RefusedInput { seq, index, reason });
                }
                Frame::Refused(list)
            }
            other => return Err(DecodeError::UnknownFrame(other)),
        })
    }
}

/// Command kind codes inside an Input frame.
const CMD_SPAWN: u8 = 0;
const CMD_MOVE: u8 = 1;
const CMD_DESPAWN: u8 = 2;

fn write_input(w: &mut Writer<'_>, input: &InputFrame) -> Result<(), EncodeError> {
    if input.entries.len() > MAX_INPUTS_PER_FRAME {
        return Err(EncodeError::Invalid(
            "more than MAX_INPUTS_PER_FRAME inputs",
        ));
    }
    w.varint(input.first_seq);
    w.varint(input.entries.len() as u64);
    let mut prev: Option<u64> = None;
    for e in &input.entries {
        match prev {
            None => w.varint(e.tick),
            Some(p) if e.tick > p => w.varint(e.tick - p - 1),
            Some(_) => return Err(EncodeError::Invalid("input ticks must strictly increase")),
        }
        prev = Some(e.tick);
        if e.commands.len() > MAX_COMMANDS_PER_INPUT {
            return Err(EncodeError::Invalid(
                "more than MAX_COMMANDS_PER_INPUT commands",
            ));
        }
        w.varint(e.commands.len() as u64);
        for c in &e.commands {
            write_command(w, c);
        }
    }
    Ok(())
}

/// A spawn's fields after its id, as in a Spawn command and a Welcome.
fn write_spawn_state(w: &mut Writer<'_>, s: &Spawn) {
    w.svarint(s.pos.x.to_bits());
    w.svarint(s.pos.y.to_bits());
    w.varint(u64::from(s.dir));
    w.svarint(s.speed.to_bits());
    w.u8(u8::from(s.observer));
    w.svarint(s.radius.to_bits());
    w.varint(u64::from(s.layers));
    w.varint(u64::from(s.interest));
}

fn read_spawn_state(r: &mut Reader<'_>, id: EntityId) -> Result<Spawn, DecodeError> {
    Ok(Spawn {
        id,
        pos: read_pos(r)?,
        dir: read_dir(r)?,
        speed: Fix::from_bits(r.svarint()?),
        observer: match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::OutOfRange("observer")),
        },
        radius: Fix::from_bits(r.svarint()?),
        layers: r.varint_u32("layers")?,
        interest: r.varint_u32("interest")?,
    })
}

/// Which of a Welcome's limits follow its presence byte.
mod limit_bit {
    pub const MAX_SPEED: u8 = 1;
    pub const BURST: u8 = 2;
    pub const MOVES_PER_SEC: u8 = 4;
    pub const BUDGET: u8 = 8;
    pub const ALL: u8 = MAX_SPEED | BURST | MOVES_PER_SEC | BUDGET;
}

fn write_limits(w: &mut Writer<'_>, l: &ClientLimits) {
    let bit = |present: bool, b: u8| if present { b } else { 0 };
    w.u8(bit(l.max_speed.is_some(), limit_bit::MAX_SPEED)
        | bit(l.burst_us.is_some(), limit_bit::BURST)
        | bit(l.moves_per_sec.is_some(), limit_bit::MOVES_PER_SEC)
        | bit(l.budget_bytes_per_sec.is_some(), limit_bit::BUDGET));
    if let Some(v) = l.max_speed {
        w.svarint(v.to_bits());
    }
    if let Some(v) = l.burst_us {
        w.varint(v);
    }
    if let Some(v) = l.moves_per_sec {
        w.varint(u64::from(v));
    }
    if let Some(v) = l.budget_bytes_per_sec {
        w.varint(u64::from(v));
    }
}

fn read_limits(r: &mut Reader<'_>) -> Result<ClientLimits, DecodeError> {
    let present = r.u8()?;
    if present & !limit_bit::ALL != 0 {
        return Err(DecodeError::OutOfRange("limits"));
    }
    let has = |b: u8| present & b != 0;
    Ok(ClientLimits {
        max_speed: if has(limit_bit::MAX_SPEED) {
            Some(Fix::from_bits(r.svarint()?))
        } else {
            None
        },
        burst_us: if has(limit_bit::BURST) {
            Some(r.varint()?)
        } else {
            None
        },
        moves_per_sec: if has(limit_bit::MOVES_PER_SEC) {
            Some(r.varint_u32("moves_per_sec")?)
        } else {
            None
        },
        budget_bytes_per_sec: if has(limit_bit::BUDGET) {
            Some(r.varint_u32("budget")?)
        } else {
            None
        },
    })
}

pub(crate) fn write_command(w: &mut Writer<'_>, c: &Command) {
    match c {
        Command::Spawn(s) => {
            w.u8(CMD_SPAWN);
            w.varint(s.id);
            write_spawn_state(w, s);
        }
        Command::Move(m) => {
            w.u8(CMD_MOVE);
            w.varint(m.id);
            w.svarint(m.pos.x.to_bits());
            w.svarint(m.pos.y.to_bits());
            w.varint(u64::from(m.dir));
            w.svarint(m.speed.to_bits());
        }
        Command::Despawn { id } => {
            w.u8(CMD_DESPAWN);
            w.varint(*id);
        }
    }
}

/// Bytes a command takes in an Input frame.
pub(crate) fn command_len(c: &Command) -> usize {
    let mut w = Writer::new(&mut []);
    write_command(&mut w, c);
    w.pos()
}

fn read_pos(r: &mut Reader<'_>) -> Result<Pos, DecodeError> {
    Ok(Pos::new(
        Fix::from_bits(r.svarint()?),
        Fix::from_bits(r.svarint()?),
    ))
}

fn read_dir(r: &mut Reader<'_>) -> Result<Dir, DecodeError> {
    r.varint_u16("dir")
}

fn read_command(r: &mut Reader<'_>) -> Result<Command, DecodeError> {
    Ok(match r.u8()? {
        CMD_SPAWN => {
            let id = r.varint()?;
            Command::Spawn(read_spawn_state(r, id)?)
        }
        CMD_MOVE => Command::Move(Move {
            id: r.varint()?,
            pos: read_pos(r)?,
            dir: read_dir(r)?,
            speed: Fix::from_bits(r.svarint()?),
        }),
        CMD_DESPAWN => Command::Despawn { id: r.varint()? },
        other => return Err(DecodeError::UnknownCommand(other)),
    })
}

fn read_input(r: &mut Reader<'_>) -> Result<InputFrame, DecodeError> {
    let mut s = InputScratch::default();
    read_input_into(r, &mut s)?;
    s.entries.truncate(s.len);
    Ok(InputFrame {
        first_seq: s.first_seq,
        entries: s.entries,
    })
}

/// An Input frame read into reused buffers: `entries[..len]` are its
/// inputs; the entries past `len` keep their command vectors for the next.
#[derive(Debug, Default)]
pub(crate) struct InputScratch {
    pub(crate) first_seq: u64,
    pub(crate) entries: Vec<InputEntry>,
    pub(crate) len: usize,
}

impl InputScratch {
    /// The inputs of the frame last read.
    pub(crate) fn inputs(&self) -> &[InputEntry] {
        &self.entries[..self.len]
    }
}

/// Reads an Input frame's body into `into`, reusing its vectors.
fn read_input_into(r: &mut Reader<'_>, into: &mut InputScratch) -> Result<(), DecodeError> {
    into.len = 0;
    let first_seq = r.varint()?;
    // An entry is at least a tick byte and a count byte.
    let n = r.count(MAX_INPUTS_PER_FRAME, 2, "inputs")?;
    let mut prev: Option<u64> = None;
    for i in 0..n {
        let d = r.varint()?;
        let tick = match prev {
            None => d,
            Some(p) => p
                .checked_add(d)
                .and_then(|t| t.checked_add(1))
                .ok_or(DecodeError::OutOfRange("input tick"))?,
        };
        prev = Some(tick);
        // A command is at least a kind byte and an id byte.
        let m = r.count(MAX_COMMANDS_PER_INPUT, 2, "commands")?;
        if i == into.entries.len() {
            into.entries.push(InputEntry {
                tick,
                commands: Vec::with_capacity(m),
            });
        }
        let e = &mut into.entries[i];
        e.tick = tick;
        e.commands.clear();
        for _ in 0..m {
            e.commands.push(read_command(r)?);
        }
    }
    first_seq
        .checked_add(n as u64)
        .ok_or(DecodeError::OutOfRange("input seq"))?;
    into.first_seq = first_seq;
    into.len = n;
    Ok(())
}

/// Writes a Refused frame (its code and body) from a slice, so that the
/// server tells refusals without building a [`Frame::Refused`] vector.
pub(crate) fn write_refused(w: &mut Writer<'_>, list: &[RefusedInput]) -> Result<(), EncodeError> {
    w.u8(code::REFUSED);
    write_refused_body(w, list)
}

fn write_refused_body(w: &mut Writer<'_>, list: &[RefusedInput]) -> Result<(), EncodeError> {
    if list.is_empty()
        || list.len() > MAX_REFUSALS_PER_FRAME
        || list
            .iter()
            .any(|r| usize::from(r.index) >= MAX_COMMANDS_PER_INPUT)
    {
        return Err(EncodeError::Invalid(
            "a Refused frame holds 1..=MAX_REFUSALS_PER_FRAME refusals of commands below MAX_COMMANDS_PER_INPUT",
        ));
    }
    w.varint(list.len() as u64);
    for r in list {
        w.varint(r.seq);
        w.varint(u64::from(r.index));
        w.u8(r.reason.code());
    }
    Ok(())
}
