//! What a bot keeps of a run, for the verification: per applied tick a
//! digest and a fingerprint of its events, its final view, and its moves.
//! Shared by the load generator (which records it) and the verification
//! (which compares it with a re-run of the journal).

use std::collections::BTreeMap;

use lockgrid_kernel::{EntityId, Event, Move};
use lockgrid_protocol::Seen;

/// Everything one bot recorded, handed from the load to the verification.
pub(super) struct BotRecord {
    /// Its entity, once the server accepted it.
    pub entity: Option<EntityId>,
    /// The first tick of its entity (the tick after the Welcome's).
    pub joined: Option<u64>,
    /// Per applied tick, in order.
    pub ticks: Vec<TickSeen>,
    /// Its view when it stopped walking: the tick and the view.
    pub final_view: Option<(u64, BTreeMap<EntityId, Seen>)>,
    /// Every move sent, in order.
    pub sent: Vec<Move>,
    /// How many of `sent` the server acknowledged (a prefix).
    pub acked: usize,
}

/// What a bot kept of one applied tick: the digest, and the count and
/// fingerprint of the events received (not the events: memory stays small
/// over long runs).
pub(super) struct TickSeen {
    pub tick: u64,
    pub digest: u64,
    pub events: usize,
    pub fingerprint: u64,
    /// The count and fingerprint of the events but Updates: what a
    /// server with a bandwidth budget must send exactly.
    pub membership: (usize, u64),
}

/// The count and fingerprint of `events` without their Updates.
pub(super) fn membership(events: &[Event]) -> (usize, u64) {
    let kept: Vec<Event> = events
        .iter()
        .filter(|e| !matches!(e, Event::Update { .. }))
        .copied()
        .collect();
    (kept.len(), fingerprint(&kept))
}

/// A 64-bit fingerprint of a list of events: FNV-1a over their postcard
/// encoding (a stable, complete encoding of every field).
pub(super) fn fingerprint(events: &[Event]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = [0u8; 128];
    for e in events {
        // An event encodes to well under 128 bytes; were it ever not to,
        // its kind still enters the fingerprint and the counts are compared.
        let bytes: &[u8] = match postcard::to_slice(e, &mut buf) {
            Ok(b) => b,
            Err(_) => &[0xff],
        };
        for &byte in bytes.iter().chain([0xa5u8].iter()) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Drops the Updates that would change nothing in `model` (the observer's
/// view before the tick): a server never sends those, so a bot never
/// receives them. The kernel reports one, for example, when a subject that
/// entered a view last tick settles at the state that Enter carried.
pub(super) fn drop_unchanged_updates(model: &BTreeMap<EntityId, Seen>, events: &mut Vec<Event>) {
    events.retain(|e| match *e {
        Event::Update {
            subject,
            pos,
            dir,
            speed,
            ..
        } => model
            .get(&subject)
            .is_none_or(|s| s.changed_by(pos, dir, speed)),
        _ => true,
    });
}

/// Applies one observer's events of a tick to a view model.
pub(super) fn apply_events(model: &mut BTreeMap<EntityId, Seen>, events: &[Event]) {
    for e in events {
        match *e {
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                layers,
                ..
            } => {
                model.insert(
                    subject,
                    Seen {
                        pos,
                        dir,
                        speed,
                        layers,
                    },
                );
            }
            Event::Leave { subject, .. } => {
                model.remove(&subject);
            }
            Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } => {
                if let Some(s) = model.get_mut(&subject) {
                    s.pos = pos;
                    s.dir = dir;
                    s.speed = speed;
                }
            }
            Event::Rejected { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::{CommandKind, Fix, Pos, RejectReason};

    #[test]
    fn fingerprints_see_every_field_and_the_order() {
        let enter = Event::Enter {
            observer: 1,
            subject: 2,
            pos: Pos::from_ints(3, 4),
            dir: 5,
            speed: Fix::from_num(6),
            layers: 7,
        };
        let leave = Event::Leave {
            observer: 1,
            subject: 9,
        };
        let rejected = Event::Rejected {
            entity: 1,
            command: CommandKind::Move,
            reason: RejectReason::OutOfBounds,
        };
        let base = fingerprint(&[rejected, leave, enter]);
        assert_eq!(base, fingerprint(&[rejected, leave, enter]));
        assert_ne!(base, fingerprint(&[rejected, enter, leave]));
        assert_ne!(base, fingerprint(&[leave, enter]));
        let mut moved = enter;
        if let Event::Enter { ref mut pos, .. } = moved {
            pos.x += Fix::from_bits(1);
        }
        assert_ne!(base, fingerprint(&[rejected, leave, moved]));
        let mut turned = enter;
        if let Event::Enter { ref mut layers, .. } = turned {
            *layers = 8;
        }
        assert_ne!(base, fingerprint(&[rejected, leave, turned]));
    }

    #[test]
    fn updates_that_change_nothing_are_dropped_and_others_kept() {
        let seen = Seen {
            pos: Pos::from_ints(3, 4),
            dir: 5,
            speed: Fix::from_num(6),
            layers: 7,
        };
        let model = BTreeMap::from([(2, seen)]);
        let update = |subject, x| Event::Update {
            observer: 1,
            subject,
            pos: Pos::from_ints(x, 4),
            dir: 5,
            speed: Fix::from_num(6),
        };
        let leave = Event::Leave {
            observer: 1,
            subject: 2,
        };
        let mut events = vec![leave, update(2, 3), update(2, 9), update(8, 3)];
        drop_unchanged_updates(&model, &mut events);
        assert_eq!(events, [leave, update(2, 9), update(8, 3)]);
    }
}
