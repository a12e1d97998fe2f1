//! What every decoded byte string must satisfy: it re-encodes to the same
//! bytes (the format is canonical), and a batch part that fails to decode
//! leaves its view as it was. Shared by the bounded runs in
//! `malformed_input.rs` and the `decode` fuzz target.

use lockgrid_protocol::batch::{decode_part_with_resets, encode_part_with_resets};
use lockgrid_protocol::{Packet, View};

/// Decodes as a packet; if it decodes, the re-encoding must be identical.
pub fn check_packet(bytes: &[u8]) {
    if let Ok(p) = Packet::decode(bytes) {
        let mut buf = vec![0u8; bytes.len()];
        assert_eq!(
            p.encode(&mut buf),
            Ok(bytes.len()),
            "decoded packet must re-encode"
        );
        assert_eq!(buf, bytes, "packet encoding is canonical");
    }
}

/// Decodes as a batch part for observer 7 against `view`; if it decodes,
/// encoding the events against the same view, with the same Updates as
/// resets, must give the same bytes.
pub fn check_part(bytes: &[u8], view: &View) {
    let mut v = view.clone();
    let (mut events, mut resets) = (Vec::new(), Vec::new());
    match decode_part_with_resets(bytes, 7, &mut v, &mut events, &mut resets) {
        Ok(()) => {
            let mut again = view.clone();
            let mut buf = vec![0u8; bytes.len() + 16];
            let p = encode_part_with_resets(&events, &mut again, &mut buf, &resets)
                .expect("decoded events re-encode");
            assert_eq!(&buf[..p.len], bytes, "batch encoding is canonical");
            assert_eq!(again, v);
        }
        Err(_) => {
            assert_eq!(&v, view, "a failed decode leaves the view alone");
            assert!(events.is_empty() && resets.is_empty());
        }
    }
}
