//! The batch codec: any event sequence in contract order survives any MTU
//! split, and sender shadow and receiver view stay equal.

mod common;

use std::collections::BTreeMap;

use common::{random_tick, view_map, Rng};
use lockgrid_kernel::{Event, Fix, Pos};
use lockgrid_protocol::batch::{decode_part, encode_part, EMPTY_PART_LEN};
use lockgrid_protocol::{BatchError, View};
use proptest::prelude::*;

/// Encodes one tick in parts of at most `budget` bytes, decodes them, and
/// checks events and views.
fn round_trip(
    events: &[Event],
    observer: u64,
    budget: usize,
    shadow: &mut View,
    client: &mut View,
) -> usize {
    let expected = changing(events, shadow);
    let mut rest = events;
    let mut decoded = Vec::new();
    let mut parts = 0;
    let mut buf = vec![0u8; budget];
    loop {
        let p = encode_part(rest, shadow, &mut buf).expect("events fit some part");
        assert!(p.len <= budget);
        decode_part(&buf[..p.len], observer, client, &mut decoded).expect("own encoding decodes");
        parts += 1;
        rest = &rest[p.consumed..];
        if rest.is_empty() {
            break;
        }
        assert!(p.consumed > 0, "a part made no progress");
    }
    assert_eq!(
        decoded, expected,
        "every event but the Updates that change nothing"
    );
    assert_eq!(shadow, client);
    parts
}

/// `events` without the Updates that would change nothing in `view` (after
/// the tick's Enters): the encoder does not send those.
fn changing(events: &[Event], view: &View) -> Vec<Event> {
    let mut entered = BTreeMap::new();
    events
        .iter()
        .filter(|e| match **e {
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                ..
            } => {
                entered.insert(subject, (pos, dir, speed));
                true
            }
            Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } => {
                let held = entered
                    .get(&subject)
                    .copied()
                    .or_else(|| view.get(subject).map(|s| (s.pos, s.dir, s.speed)));
                held != Some((pos, dir, speed))
            }
            _ => true,
        })
        .copied()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_ticks_round_trip_under_any_budget(seed in any::<u64>(), budget in 64usize..1500, ticks in 1usize..30) {
        let mut rng = Rng::new(seed);
        let observer = rng.below(100);
        let mut model = BTreeMap::new();
        let (mut shadow, mut client) = (View::new(), View::new());
        for _ in 0..ticks {
            let events = random_tick(&mut rng, observer, &mut model, 100);
            round_trip(&events, observer, budget, &mut shadow, &mut client);
            prop_assert_eq!(view_map(&client), model.clone());
        }
    }
}

#[test]
fn large_batches_split_deterministically() {
    let mut rng = Rng::new(7);
    let mut model = BTreeMap::new();
    let events = random_tick(&mut rng, 0, &mut model, 1 << 40);
    let mut shadow = View::new();
    let mut client = View::new();
    let big: Vec<Event> = (1..=500u64)
        .map(|i| Event::Enter {
            observer: 0,
            subject: i * 3,
            pos: Pos::from_ints(i as i32, -(i as i32)),
            dir: i as u16,
            speed: Fix::from_num(1),
            layers: 1,
        })
        .collect();
    let a = round_trip(&big, 0, 200, &mut shadow, &mut client);
    let (mut s2, mut c2) = (View::new(), View::new());
    let b = round_trip(&big, 0, 200, &mut s2, &mut c2);
    assert_eq!(a, b);
    assert!(
        a > 10,
        "500 enters in 200-byte parts take many parts, got {a}"
    );
    let _ = events;
}

#[test]
fn an_empty_tick_is_four_bytes() {
    let mut buf = [0u8; 16];
    let p = encode_part(&[], &mut View::new(), &mut buf).unwrap();
    assert_eq!(p.len, EMPTY_PART_LEN);
    assert_eq!(&buf[..4], &[0, 0, 0, 0]);
    assert_eq!(
        encode_part(&[], &mut View::new(), &mut buf[..3]),
        Err(BatchError::BufferTooSmall { needed: 4 })
    );
}

#[test]
fn a_buffer_too_small_for_one_event_says_what_it_needs() {
    let e = [Event::Enter {
        observer: 1,
        subject: 2,
        pos: Pos::from_ints(1000, 1000),
        dir: 7,
        speed: Fix::ZERO,
        layers: 1,
    }];
    let mut view = View::new();
    let mut small = [0u8; 8];
    let Err(BatchError::BufferTooSmall { needed }) = encode_part(&e, &mut view, &mut small) else {
        panic!("expected BufferTooSmall");
    };
    assert!(view.is_empty(), "a failed encode leaves the view alone");
    let mut exact = vec![0u8; needed];
    let p = encode_part(&e, &mut view, &mut exact).unwrap();
    assert_eq!((p.len, p.consumed), (needed, 1));
}

#[test]
fn inconsistent_events_are_typed_errors() {
    let mut view = View::new();
    let mut buf = [0u8; 64];
    let leave = [Event::Leave {
        observer: 1,
        subject: 5,
    }];
    assert_eq!(
        encode_part(&leave, &mut view, &mut buf),
        Err(BatchError::NotVisible(5))
    );
    let up = [Event::Update {
        observer: 1,
        subject: 5,
        pos: Pos::from_ints(0, 0),
        dir: 0,
        speed: Fix::ZERO,
    }];
    assert_eq!(
        encode_part(&up, &mut view, &mut buf),
        Err(BatchError::NotVisible(5))
    );
    let unordered = [
        leave[0],
        Event::Leave {
            observer: 1,
            subject: 4,
        },
    ];
    assert_eq!(
        encode_part(&unordered, &mut view, &mut buf),
        Err(BatchError::OutOfOrder)
    );
    let mixed = [
        leave[0],
        Event::Leave {
            observer: 2,
            subject: 6,
        },
    ];
    assert_eq!(
        encode_part(&mixed, &mut view, &mut buf),
        Err(BatchError::MixedObservers)
    );
    let enter = Event::Enter {
        observer: 1,
        subject: 5,
        pos: Pos::from_ints(0, 0),
        dir: 0,
        speed: Fix::ZERO,
        layers: 1,
    };
    encode_part(&[enter], &mut view, &mut buf).unwrap();
    assert_eq!(
        encode_part(&[enter], &mut view, &mut buf),
        Err(BatchError::AlreadyVisible(5))
    );
    // Leave then Enter of the same id in one tick is a new incarnation.
    let reenter = [leave[0], enter];
    assert!(encode_part(&reenter, &mut view, &mut buf).is_ok());
}

#[test]
fn decoding_rejects_leaves_and_updates_for_unseen_subjects() {
    let mut view = View::new();
    let mut out = Vec::new();
    // One leave at index 0 of an empty view.
    assert!(decode_part(&[0, 1, 0, 0, 0], 1, &mut view, &mut out).is_err());
    // One update at index 0 of an empty view.
    assert!(decode_part(&[0, 0, 0, 1, 0], 1, &mut view, &mut out).is_err());
    assert!(out.is_empty());
}
