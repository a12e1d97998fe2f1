//! Hostile bytes against tokens and sealed packets: every input is refused
//! with a typed error or decodes canonically, never a panic; keyed
//! endpoints survive mutated traffic while an honest client goes on. This
//! bounded run is what CI executes; the `token` and `sealed` fuzz targets
//! run the same checks open-ended.

mod common;
#[path = "common/secure_checks.rs"]
mod secure_checks;

use std::time::Duration;

use common::lan::Lan;
use common::Rng;
use lockgrid_protocol::ClientState;
use proptest::prelude::*;

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(4) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next_u64() as u8;
            }
            2 => {
                let n = rng.below(b.len() as u64 + 1) as usize;
                b.truncate(n);
            }
            _ => {
                let i = rng.below(b.len() as u64 + 1) as usize;
                b.insert(i, rng.next_u64() as u8);
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_as_tokens(data in proptest::collection::vec(any::<u8>(), 0..700)) {
        secure_checks::check_token(&data);
    }

    #[test]
    fn arbitrary_bytes_as_sealed_packets(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        secure_checks::check_sealed(&data);
        let mut prefixed = b"LG\x01".to_vec();
        prefixed.extend_from_slice(&data);
        secure_checks::check_sealed(&prefixed);
    }
}

#[test]
fn mutated_tokens_are_refused_or_canonical() {
    let mut lan = Lan::new(true);
    let token = lan.token(5);
    let whole = token.encode();
    let mut rng = Rng::new(7);
    for _ in 0..2_000 {
        secure_checks::check_token(&mutate(&mut rng, &whole));
        secure_checks::check_token(&mutate(&mut rng, token.hello_token()));
    }
}

#[test]
fn keyed_endpoints_survive_mutated_traffic() {
    let mut lan = Lan::new(true);
    let t = lan.token(501);
    lan.add_client(1, &t);
    lan.run(Duration::from_millis(500));
    assert_eq!(lan.state(1), ClientState::Connected);
    let seen: Vec<_> = lan.tap.clone();
    let mut rng = Rng::new(11);
    for round in 0..40 {
        for _ in 0..25 {
            let d = &seen[rng.below(seen.len() as u64) as usize];
            let bad = mutate(&mut rng, &d.bytes);
            // To the server from the client's address or a stranger's, and to the client.
            let from = if rng.below(2) == 0 {
                d.from
            } else {
                900 + round
            };
            if d.to == common::lan::SERVER {
                lan.inject(from, bad);
            } else {
                lan.inject_to(common::lan::SERVER, 1, bad);
            }
        }
        lan.run(Duration::from_millis(50));
    }
    let before = lan.applied(1);
    lan.run(Duration::from_secs(1));
    assert_eq!(lan.state(1), ClientState::Connected);
    assert!(lan.applied(1) >= before + 15);
    let conn = lan.server.connections().next().unwrap();
    let s = lan.server.conn_stats(conn).unwrap();
    assert!(s.auth_failed + s.replayed + s.packets_dropped > 0);
    // One connection: the server's total is its count.
    assert_eq!(lan.server.stats().packets_dropped, s.packets_dropped);
}
