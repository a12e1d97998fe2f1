//! Events: what one tick produced, per observer, in contract order.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::command::{CommandKind, EntityId};
use crate::fixed_point::{Dir, Fix, Pos};

/// Why a command was not applied. When several apply, the first in this
/// declaration order is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum RejectReason {
    /// Move or despawn of an id that is not alive.
    UnknownEntity,
    /// Spawn of an id that is already alive.
    DuplicateId,
    /// A field out of its domain (negative speed, radius beyond limits).
    Invalid,
    /// The position is outside the world's half-open box.
    OutOfBounds,
    /// A capacity fixed at construction is exhausted.
    Capacity,
}

impl RejectReason {
    /// Every reason, in priority order.
    pub const ALL: [RejectReason; 5] = [
        RejectReason::UnknownEntity,
        RejectReason::DuplicateId,
        RejectReason::Invalid,
        RejectReason::OutOfBounds,
        RejectReason::Capacity,
    ];

    /// The snake-case name used in event streams.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::UnknownEntity => "unknown_entity",
            RejectReason::DuplicateId => "duplicate_id",
            RejectReason::Invalid => "invalid",
            RejectReason::OutOfBounds => "out_of_bounds",
            RejectReason::Capacity => "capacity",
        }
    }
}

/// One output of a tick.
///
/// A tick's events come in one total order: all `Rejected` first, in input
/// order; then the rest sorted by `(observer, kind, subject)` with
/// `Leave < Enter < Update`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum Event {
    /// A command that could not be applied; the rest of the tick still applied.
    Rejected {
        /// The entity the command named.
        entity: EntityId,
        /// Which command it was.
        command: CommandKind,
        /// Why it was rejected.
        reason: RejectReason,
    },
    /// `subject` left `observer`'s view (moved, despawned or culled).
    Leave {
        /// Who stopped seeing.
        observer: EntityId,
        /// Who is no longer seen.
        subject: EntityId,
    },
    /// `subject` entered `observer`'s view, with its full state.
    Enter {
        /// Who sees.
        observer: EntityId,
        /// Who is now seen.
        subject: EntityId,
        /// Subject position at tick end.
        pos: Pos,
        /// Subject heading at tick end.
        dir: Dir,
        /// Subject speed at tick end.
        speed: Fix,
        /// Subject layer mask.
        layers: u32,
    },
    /// A visible subject's update is due under the throttle rule.
    Update {
        /// Who sees.
        observer: EntityId,
        /// Who moved.
        subject: EntityId,
        /// Subject position at tick end.
        pos: Pos,
        /// Subject heading at tick end.
        dir: Dir,
        /// Subject speed at tick end.
        speed: Fix,
    },
}

/// Rank of an event kind inside one observer's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// Rejections precede every view event.
    Rejected,
    /// [`Event::Leave`].
    Leave,
    /// [`Event::Enter`].
    Enter,
    /// [`Event::Update`].
    Update,
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Rejected { .. } => EventKind::Rejected,
            Event::Leave { .. } => EventKind::Leave,
            Event::Enter { .. } => EventKind::Enter,
            Event::Update { .. } => EventKind::Update,
        }
    }

    /// `(observer, kind, subject)` for view events; `None` for rejections,
    /// whose order is their input order.
    pub fn order_key(&self) -> Option<(EntityId, EventKind, EntityId)> {
        match *self {
            Event::Rejected { .. } => None,
            Event::Leave { observer, subject } => Some((observer, EventKind::Leave, subject)),
            Event::Enter {
                observer, subject, ..
            } => Some((observer, EventKind::Enter, subject)),
            Event::Update {
                observer, subject, ..
            } => Some((observer, EventKind::Update, subject)),
        }
    }
}

/// The contract's order of two events of one tick, the one comparator
/// every part of the kernel keeps to: rejections first, among themselves
/// in input order (they compare equal, so a stable sort keeps it); then
/// view events by `(observer id, Leave < Enter < Update, subject id)`.
///
/// ```
/// use lockgrid_kernel::{contract_order, Event};
/// let leave = Event::Leave { observer: 1, subject: 9 };
/// let later = Event::Leave { observer: 2, subject: 3 };
/// assert!(contract_order(&leave, &later).is_lt());
/// ```
pub fn contract_order(a: &Event, b: &Event) -> core::cmp::Ordering {
    // `None` (a rejection) sorts before every `Some`.
    a.order_key().cmp(&b.order_key())
}

/// Debug builds wrap the tick's sink in this: every event must follow
/// the one before it in [`contract_order`].
#[cfg(debug_assertions)]
pub(crate) struct InOrder<'a, S> {
    sink: &'a mut S,
    last: Option<Event>,
}

#[cfg(debug_assertions)]
impl<'a, S: EventSink> InOrder<'a, S> {
    pub(crate) fn new(sink: &'a mut S) -> Self {
        InOrder { sink, last: None }
    }
}

#[cfg(debug_assertions)]
impl<S: EventSink> EventSink for InOrder<'_, S> {
    fn event(&mut self, event: Event) {
        if let Some(last) = &self.last {
            assert!(
                contract_order(last, &event).is_lt()
                    || matches!(
                        (last, &event),
                        (Event::Rejected { .. }, Event::Rejected { .. })
                    ),
                "events out of contract order: {last:?} then {event:?}"
            );
        }
        self.last = Some(event);
        self.sink.event(event);
    }
}

/// Where [`World::step`](crate::World::step) delivers a tick's events, in contract order.
///
/// The kernel never buffers a tick's events itself, so the number of events
/// per tick is bounded only by what the sink accepts; a sink that keeps a
/// `Vec` with reserved capacity allocates nothing in steady state.
pub trait EventSink {
    /// Receive the next event.
    fn event(&mut self, event: Event);
}

impl EventSink for alloc::vec::Vec<Event> {
    fn event(&mut self, event: Event) {
        self.push(event);
    }
}

/// Adapts a closure into an [`EventSink`].
pub struct FnSink<F: FnMut(Event)>(pub F);

impl<F: FnMut(Event)> EventSink for FnSink<F> {
    fn event(&mut self, event: Event) {
        (self.0)(event);
    }
}

/// A sink that only counts, for hosts and benchmarks that need no events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountingSink {
    /// Events received so far.
    pub count: u64,
}

impl EventSink for CountingSink {
    fn event(&mut self, _event: Event) {
        self.count += 1;
    }
}
