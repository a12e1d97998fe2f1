//! lockgrid-kernel: the deterministic spatial core of a lockstep game server.
//!
//! It is `#![no_std]` and contains no I/O, reads no clock, draws no
//! randomness and uses no floats. A host feeds it one tick of commands
//! (spawn, move, despawn); it updates a grid area-of-interest index and
//! returns, for every observer, what entered its view, what left it and
//! which visible subjects moved, in one documented order, plus a 64-bit
//! digest of the whole state. It is not a network layer (see
//! `lockgrid-protocol`), not a physics engine, and keeps no history.
//!
//! # Embedding
//!
//! ```
//! use lockgrid_kernel::{Command, Config, Event, Fix, Move, Pos, Spawn, World};
//!
//! let mut world = World::new(Config::default()).expect("the defaults are valid");
//! let mut events = Vec::with_capacity(1024); // reused every tick: no allocation
//!
//! // Tick 1: a player and an NPC in neighbouring cells: the player sees the NPC.
//! let player = Spawn::observer(1, Pos::from_ints(50, 50), Fix::from_num(100));
//! let npc = Spawn::npc(2, Pos::from_ints(150, 50));
//! let report = world.step(&[Command::Spawn(player), Command::Spawn(npc)], &mut events);
//! assert_eq!(report.tick, 1);
//! assert!(matches!(events[0], Event::Enter { observer: 1, subject: 2, .. }));
//!
//! // Tick 2: the NPC walks out of the player's nine cells.
//! events.clear();
//! let walk = Move { id: 2, pos: Pos::from_ints(350, 50), dir: 0, speed: Fix::from_num(5) };
//! world.step(&[Command::Move(walk)], &mut events);
//! assert_eq!(events, [Event::Leave { observer: 1, subject: 2 }]);
//! println!("tick {} digest {:016x}", world.tick(), world.digest());
//! ```
//!
//! # The tick
//!
//! [`World::step`] applies its commands in input order — spawn creates, move
//! overwrites position, heading and speed, despawn removes and frees its
//! capacity at once — and then evaluates visibility **once**, at tick end.
//! A command that cannot apply becomes [`Event::Rejected`] with the first
//! applicable [`RejectReason`]; the rest of the tick still applies.
//!
//! Visibility requires `subject.layers & observer.interest != 0` and
//! `subject != observer`, and then, per [`Visibility`]:
//! * `Grid`: the subject's cell is within ±1 cell of the observer's.
//! * `Radius`: enter at `dist² ≤ r²`, stay while `dist² ≤ (r + hysteresis)²`.
//!
//! An observer with more candidates than `max_view` keeps the nearest by
//! `(dist², id)`. Despawn and spawn of one id in a tick is a new
//! incarnation: its observers get `Leave` then `Enter`. A despawned observer
//! gets no further events; a respawned one starts from an empty view.
//!
//! **Updates** follow the throttle rule: a subject with state `s_t`, last
//! sent state `L` at tick `T`, is due when `s_t ≠ L` and (`L` is none, or
//! `t − T ≥ update_interval`, or `|pos − L.pos| ≥ move_epsilon`, or
//! `angle_diff(dir, L.dir) ≥ dir_epsilon`, or `s_t = s_{t−1}`); then
//! `L := s_t, T := t`. Every observer that saw it before and after the tick
//! gets an [`Event::Update`].
//!
//! **Order**: rejections first, in input order; then events sorted by
//! `(observer id, Leave < Enter < Update, subject id)`.
//!
//! # Visible pairs
//!
//! Every capacity is fixed when the world is built, views included: by
//! default each observer has room for `max_view` subjects, and the world
//! reserves that much for every one of `max_observers`, however few they
//! see. [`Config::max_visible`] bounds instead the entries all views hold
//! together (the (observer, subject) pairs visible at once), and the world
//! reserves only that. A tick whose views would need more cuts them, the
//! same way on every machine: observers are taken in ascending id, and
//! each keeps the nearest of its candidates (by `(dist², id)`, as a crowd
//! is culled), at most `max_view` and at most what is left of
//! `max_visible` once the other views are counted: the new views of the
//! observers before it and, of those after it, their views as they were
//! at the end of the last tick. So a view never holds fewer than it did
//! because another grew (the room counts what each view held), a
//! crowd that forms is seen less fully by the observers that come last,
//! and a view cut short grows again, in id order, as room comes free.
//! "Was visible" for hysteresis is the view as it was cut. Without
//! `max_visible`, or with one no tick reaches, nothing changes.
//!
//! # Threads
//!
//! The kernel spawns no thread. A host lends its own through the [`Fork`]
//! trait to [`World::step_with`], which splits parts of a busy tick into
//! tasks over disjoint buffers; the events, their order and the digest
//! are those of [`World::step`] for every number of threads
//! (`docs/kernel-internals.md`, "Threads", says what splits and how far
//! it scales). [`World::step_in_parts`] also hands the events over on
//! those threads, each to a part of the host's, whole observers to a
//! part, for a host that takes events per observer.
//!
//! # Where each rule lives
//!
//! Each rule of the contract is written in one file of `kernel/src`; the
//! fast paths of the tick call it or, in debug builds, check themselves
//! against it with `debug_assert!`:
//!
//! | Rule | File |
//! |---|---|
//! | Visibility (grid, radius, layers, self, hysteresis) | `rule.rs` |
//! | Crowd culling to `max_view` by `(dist², id)` | `scan.rs` (`Ranked`) |
//! | Update throttle | `throttle.rs` |
//! | Event order | `event.rs` ([`contract_order`]) |
//! | Rejection reasons and their priority | `event.rs` ([`RejectReason`]), `world.rs` (`apply`) |
//! | Digest: word hash, every term, config hash, tick digest | `digest.rs` |
//! | Cell of a position, bounds | `cell_locator.rs` |
//!
//! The repository's `tests/src/oracle.rs` is an independent, simple
//! implementation of the whole contract that the tests compare every
//! tick with, and `tests/src/digest.rs` re-derives the digest.
//!
//! # Internals
//!
//! How a tick plans and pays for its work (the cost model, the plan's
//! thresholds, and a glossary of internal names with the tests that cover
//! them) is in the repository's `docs/kernel-internals.md`;
//! [`World::last_plan`] shows the plan a tick took.
//!
//! # Beyond the per-observer events
//!
//! - [`CellEvents`] reports each tick's changes addressed to cells (enter,
//!   leave, update per cell), for a fan-out with one channel per cell.
//! - [`World::entities_within`] and [`World::entities_in_cells`] answer a
//!   game rule's questions between ticks (who is near a point, who is in a
//!   block of cells) from the index the tick uses.
//! - [`Config::reserved_bytes`] tells what a world of that config reserves
//!   before it is built, so a host can refuse one that would not fit.
//! - [`jsonl`] writes a tick's events in the JSON Lines format, for
//!   snapshot tests.
//!
//! # Digest
//!
//! The digest covers the configuration, the tick, every entity's state and
//! throttle record, and every view. It is kept incrementally and defined as
//! follows (all arithmetic wrapping on `u64`; signed values are their two's
//! complement bits; fixed-point values are their raw `i64` bits):
//!
//! * `mix(z)`: `z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27;
//!   z *= 0x94d049bb133111eb; z ^= z >> 31`.
//! * `H(domain; w1..wn)`: `h = domain`; for each word `h = mix(h ^ w) +
//!   0x9e3779b97f4a7c15`; result `mix(h ^ n)`.
//! * entity term: `H("lgentity"; id, observer, radius, layers, interest, 0,
//!   x, y, dir, speed)` when nothing was sent yet, else with the `0`
//!   replaced by `1, Lx, Ly, Ldir, Lspeed, T`. The motion comes last so
//!   that a move rehashes only its own four words: the chain up to them
//!   changes only at spawn and when an update is sent.
//! * view term: `H("lgview"; observer, subject)` for each visible pair.
//! * config hash: `H("lgconfig"; origin x, origin y, cell_size, width_cells,
//!   height_cells, visibility (grid 0, radius 1), hysteresis,
//!   update_interval, move_epsilon, dir_epsilon, max_entities,
//!   max_observers, max_view)`, and `max_visible` as a last word where it
//!   is set.
//! * digest: `H("lgtick"; tick, config hash, entity count, Σ entity terms,
//!   pair count, Σ view terms)`.
//!
//! Domains are the ASCII bytes read as a big-endian `u64`, zero-padded on
//! the right (`"lgview"` is `0x6c67766965770000`). The sums make the digest
//! independent of internal layout, so a restored [`Snapshot`] continues with
//! the same digests as the world it was taken from.
#![no_std]
#![forbid(unsafe_code)]
#![deny(clippy::float_arithmetic)]

extern crate alloc;

mod cell_events;
mod cell_locator;
mod cell_sorted;
mod command;
mod config;
pub mod coverage;
mod digest;
mod due_cells;
mod emit;
mod event;
mod fixed_point;
mod fork;
mod grid;
mod id_index;
pub mod jsonl;
mod layers;
mod margin;
mod permutation;
pub mod plan;
mod reserved;
mod rule;
mod scan;
mod slot_bits;
mod slot_ids;
mod slot_table;
mod snapshot;
mod source;
mod squares;
mod subject_pairs;
mod sweep;
mod throttle;
mod view;
mod view_marks;
mod world;

pub use cell_events::{Cell, CellEvent, CellEventKind, CellEvents};
pub use command::{Command, CommandKind, EntityId, Move, Spawn};
pub use config::{
    Config, ConfigError, Visibility, MAX_CELLS, MAX_ENTITIES, MAX_LENGTH_RAW, MAX_RADIUS,
    MAX_VIEW_SLOTS,
};
pub use event::{contract_order, CountingSink, Event, EventKind, EventSink, FnSink, RejectReason};
pub use fixed_point::{angle_diff, len2_raw, Dir, Fix, Pos};
pub use fork::{Backwards, Fork, Serial, MAX_WIDTH};
pub use snapshot::{EntitySnapshot, RestoreError, Snapshot, MAX_TICK};
pub use throttle::{Motion, Sent};
pub use world::{BufferTooSmall, EntityState, TickReport, World};
