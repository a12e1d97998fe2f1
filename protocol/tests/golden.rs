//! Golden wire vectors: the exact bytes of every frame kind and of a whole
//! packet, with the decoded value beside them. A changed byte here is a
//! wire-format change and needs a version bump.

use lockgrid_kernel::{
    Command, CommandKind, Event, Fix, Move, Pos, RejectReason, Spawn, Visibility,
};
use lockgrid_protocol::batch::encode_part_with_resets;
use lockgrid_protocol::packet::encode_packet;
use lockgrid_protocol::{
    ClientLimits, DisconnectReason, Frame, Header, InputEntry, InputFrame, InputRefusal, Packet,
    RefusedInput, TickBatch, View, Welcome, WorldParams,
};

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn frame_vector(f: &Frame<'_>) -> String {
    let mut buf = vec![0u8; f.encoded_len().unwrap()];
    f.encode(&mut buf).unwrap();
    let (back, _) = Frame::decode(&buf).unwrap();
    assert_eq!(&back, f);
    format!("code 0x{:02x}\nhex  {}\n{:#?}\n", f.code(), hex(&buf), back)
}

macro_rules! golden {
    ($name:expr, $value:expr) => {
        insta::with_settings!({ snapshot_path => "../../snapshots/protocol", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn world() -> WorldParams {
    WorldParams {
        origin: Pos::from_ints(-3200, -3200),
        cell_size: Fix::from_num(100),
        width_cells: 64,
        height_cells: 64,
        visibility: Visibility::Grid,
        hysteresis: Fix::ZERO,
        max_view: 1024,
    }
}

#[test]
fn frame_codes_and_bytes() {
    let token = b"secret";
    let welcome = Welcome {
        conn_id: 0x1234_5678,
        nonce: 0x0102_0304_0506_0708,
        entity: 1001,
        spawn: Spawn::observer(1001, Pos::from_ints(-150, 40), Fix::from_num(100)),
        limits: ClientLimits {
            max_speed: Some(Fix::from_num(200)),
            burst_us: Some(1_000_000),
            moves_per_sec: Some(160),
            budget_bytes_per_sec: None,
        },
        tick: 300,
        tick_interval_us: 50_000,
        window: 100,
        world: world(),
    };
    let frames: Vec<(&str, Frame<'_>)> = vec![
        ("00_padding", Frame::Padding),
        (
            "01_hello",
            Frame::Hello {
                version: 2,
                nonce: 0x0102_0304_0506_0708,
                token,
            },
        ),
        (
            "02_input",
            Frame::Input(InputFrame {
                first_seq: 7,
                entries: vec![
                    InputEntry {
                        tick: 301,
                        commands: vec![Command::Move(Move {
                            id: 1001,
                            pos: Pos::new(Fix::from_num(12.5), Fix::from_num(-3)),
                            dir: 16384,
                            speed: Fix::from_num(2),
                        })],
                    },
                    InputEntry {
                        tick: 303,
                        commands: vec![Command::Despawn { id: 1001 }],
                    },
                ],
            }),
        ),
        ("03_ack", Frame::Ack { tick: 300 }),
        ("04_ping", Frame::Ping { stamp: 1_000_000 }),
        ("05_bye", Frame::Bye),
        ("10_welcome", Frame::Welcome(welcome)),
        (
            "11_tick_batch",
            Frame::TickBatch(TickBatch {
                tick: 301,
                part: 0,
                parts: 1,
                digest: 0x0123_4567_89ab_cdef,
                payload: &[0, 0, 0, 0],
            }),
        ),
        ("12_pong", Frame::Pong { stamp: 1_000_000 }),
        (
            "13_disconnect",
            Frame::Disconnect {
                reason: DisconnectReason::VersionMismatch,
            },
        ),
        (
            "14_refused",
            Frame::Refused(vec![
                RefusedInput {
                    seq: 7,
                    index: 0,
                    reason: InputRefusal::TooFast,
                },
                RefusedInput {
                    seq: 300,
                    index: 2,
                    reason: InputRefusal::NotAllowed,
                },
            ]),
        ),
    ];
    for (name, f) in &frames {
        golden!(format!("frame_{name}"), frame_vector(f));
    }
}

#[test]
fn reason_codes() {
    let table: String = (0..=20u8)
        .map(|c| format!("{c:>3} {:?}\n", DisconnectReason::from_code(c)))
        .collect();
    golden!("disconnect_reasons", table);
}

#[test]
fn a_tick_batch_payload() {
    // Tick 1: two subjects enter observer 1's view; tick 2: one moves, one leaves,
    // a command is rejected.
    let mut view = View::new();
    let t1 = [
        Event::Enter {
            observer: 1,
            subject: 2,
            pos: Pos::from_ints(10, 20),
            dir: 0,
            speed: Fix::ZERO,
            layers: 1,
        },
        Event::Enter {
            observer: 1,
            subject: 5,
            pos: Pos::from_ints(12, 18),
            dir: 90,
            speed: Fix::from_num(1.5),
            layers: 3,
        },
    ];
    let t2 = [
        Event::Rejected {
            entity: 1,
            command: CommandKind::Move,
            reason: RejectReason::OutOfBounds,
        },
        Event::Leave {
            observer: 1,
            subject: 2,
        },
        Event::Update {
            observer: 1,
            subject: 5,
            pos: Pos::new(Fix::from_num(12.5), Fix::from_num(18)),
            dir: 90,
            speed: Fix::from_num(1.5),
        },
    ];
    // Tick 3: the sender is unsure what the client holds of 5 and resets it.
    let t3 = [Event::Update {
        observer: 1,
        subject: 5,
        pos: Pos::new(Fix::from_num(20), Fix::from_num(-4.25)),
        dir: 180,
        speed: Fix::ZERO,
    }];
    let mut out = String::new();
    for (name, events, resets) in [
        ("tick 1", &t1[..], &[][..]),
        ("tick 2", &t2[..], &[]),
        ("tick 3, a reset", &t3[..], &[5]),
    ] {
        let mut buf = [0u8; 256];
        let p = encode_part_with_resets(events, &mut view, &mut buf, resets).unwrap();
        out += &format!("{name}\nhex  {}\n{events:#?}\n\n", hex(&buf[..p.len]));
    }
    golden!("batch_payload", out);
}

#[test]
fn a_whole_packet() {
    let header = Header {
        conn_id: 0x1234_5678,
        seq: 42,
        ack: 17,
        ack_bits: 0b1011,
    };
    let frames = [
        Frame::Pong { stamp: 99 },
        Frame::TickBatch(TickBatch {
            tick: 301,
            part: 0,
            parts: 1,
            digest: 0x0123_4567_89ab_cdef,
            payload: &[0, 0, 0, 0],
        }),
    ];
    let mut buf = [0u8; 128];
    let len = encode_packet(&header, &frames, &mut buf).unwrap();
    let p = Packet::decode(&buf[..len]).unwrap();
    golden!("packet", format!("hex  {}\n{p:#?}\n", hex(&buf[..len])));
}
