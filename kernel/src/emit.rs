//! The events that change a view, each sent together with its term in the
//! digest's sum of view pairs, so that no path of the tick can change a
//! view without its digest.

use crate::command::EntityId;
use crate::digest::{DigestSums, PairHasher};
use crate::event::{Event, EventSink};
use crate::slot_table::Shown;

/// Sends a Leave and takes its pair out of the digest's sum of view pairs,
/// so that no view loses a subject without its term.
#[inline(always)]
pub(crate) fn send_leave<S: EventSink>(
    sink: &mut S,
    sums: &mut DigestSums,
    pairs: &PairHasher,
    subject: EntityId,
) {
    sums.remove_pair(pairs, subject);
    let observer = pairs.observer();
    sink.event(Event::Leave { observer, subject });
}

/// Sends an Enter carrying what the subject shows and adds its pair to the
/// digest's sum of view pairs, so that no view gains a subject without its
/// term.
#[inline(always)]
pub(crate) fn send_enter<S: EventSink>(
    sink: &mut S,
    sums: &mut DigestSums,
    pairs: &PairHasher,
    subject: EntityId,
    shown: &Shown,
) {
    sums.add_pair(pairs, subject);
    sink.event(Event::Enter {
        observer: pairs.observer(),
        subject,
        pos: shown.pos,
        dir: shown.dir,
        speed: shown.speed,
        layers: shown.layers,
    });
}
