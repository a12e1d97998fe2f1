//! Every frame round-trips through its encoding, and the encoding is canonical.

mod common;

use common::{random_frames, Rng};
use lockgrid_protocol::frame::MAX_TOKEN_LEN;
use lockgrid_protocol::packet::{encode_packet, peek_version};
use lockgrid_protocol::{DecodeError, EncodeError, Frame, Header, Packet};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_frame_round_trips(seed in any::<u64>(), store in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut rng = Rng::new(seed);
        for f in random_frames(&mut rng, &store) {
            let len = f.encoded_len().unwrap();
            let mut buf = vec![0u8; len];
            prop_assert_eq!(f.encode(&mut buf), Ok(len));
            let (back, used) = Frame::decode(&buf).unwrap();
            prop_assert_eq!(used, len);
            prop_assert_eq!(&back, &f);
            // One byte short: the exact size needed is reported.
            if len > 0 {
                prop_assert_eq!(f.encode(&mut buf[..len - 1]), Err(EncodeError::BufferTooSmall { needed: len }));
            }
            // Every strict prefix is an error, never a panic or a different frame.
            for cut in 0..len {
                prop_assert!(Frame::decode(&buf[..cut]).is_err());
            }
        }
    }

    #[test]
    fn packets_round_trip(seed in any::<u64>(), store in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut rng = Rng::new(seed);
        let frames = random_frames(&mut rng, &store);
        let header = Header { conn_id: rng.next_u64() as u32, seq: rng.next_u64() as u32, ack: rng.next_u64() as u32, ack_bits: rng.next_u64() as u32 };
        let pick: Vec<Frame<'_>> = frames.into_iter().filter(|_| rng.chance(600_000)).collect();
        let mut buf = vec![0u8; 8192];
        let len = encode_packet(&header, &pick, &mut buf).unwrap();
        let p = Packet::decode(&buf[..len]).unwrap();
        prop_assert_eq!(p.header, header);
        prop_assert_eq!(&p.frames, &pick);
        prop_assert_eq!(peek_version(&buf[..len]), Some(2));
    }
}

#[test]
fn invalid_values_have_no_encoding() {
    let long = [0u8; MAX_TOKEN_LEN + 1];
    let hello = Frame::Hello {
        version: 2,
        nonce: 0,
        token: &long,
    };
    assert!(matches!(hello.encoded_len(), Err(EncodeError::Invalid(_))));
    let batch = Frame::TickBatch(lockgrid_protocol::TickBatch {
        tick: 1,
        part: 2,
        parts: 2,
        digest: 0,
        payload: &[],
    });
    assert!(matches!(batch.encoded_len(), Err(EncodeError::Invalid(_))));
}

#[test]
fn typed_errors_for_bad_headers_and_codes() {
    assert_eq!(Header::decode(b"XX\x01"), Err(DecodeError::BadMagic));
    assert_eq!(
        Header::decode(b"LG\x07"),
        Err(DecodeError::UnsupportedVersion(7))
    );
    // Version 1 is not this version: its peers get version_mismatch.
    assert_eq!(
        Header::decode(
            b"LG\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
        ),
        Err(DecodeError::UnsupportedVersion(1))
    );
    assert_eq!(
        Header::decode(b"LG\x02\x00"),
        Err(DecodeError::UnexpectedEnd)
    );
    assert_eq!(Frame::decode(&[0x42]), Err(DecodeError::UnknownFrame(0x42)));
    // A huge count with few bytes behind it is refused before any allocation.
    assert_eq!(
        Frame::decode(&[0x02, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(DecodeError::TooMany("inputs"))
    );
    assert_eq!(
        Frame::decode(&[0x01, 0x02, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0x01]),
        Err(DecodeError::TooMany("token bytes"))
    );
}
