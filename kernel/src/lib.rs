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
//! # Cost
//!
//! Work per tick follows what changed. Let `C` be the entities touched by
//! commands plus those still settling (moved last tick without an update
//! being due), and `R` the largest observer ring in cells (1 in grid mode;
//! `⌈(r + hysteresis) / cell_size⌉` in radius mode).
//!
//! Each changed subject classifies itself against every observer within `R`
//! cells of its old or new cell: visible at the end of last tick and now,
//! by the rule alone (only inside the hysteresis band does it ask the
//! view). Only pairs that make an event are kept. An observer that did not
//! change applies its `p` pairs to its view of size `v` in `O(p log v)`
//! plus a splice of the view when something entered or left. A full view
//! may be culled, so any move in range can change who is kept: one ranked
//! in a calm tick keeps a margin of `2 × 8` candidates around its
//! cut-off, in `(dist², id)` order, and a subject moving near it only
//! moves between the kept core, the margin and beyond. Who is kept is read
//! off the margin in `O(p × 16)`. A despawned subject pairs like one that
//! moved away, while no spawn has taken its slot in the same tick (the
//! world keeps an eighth more slots than `max_entities` for that).
//! Observers whose own state changed, whose margin ran out (or was never
//! kept) or that saw a despawned subject whose slot was taken at once
//! are rebuilt instead, in `O(k + v + e log e)` each, with `k` the
//! entities in its ring and `e` those entering. An entity that did not
//! move, in a region where nothing moved, costs nothing. The pairs have
//! room for 16 per entity; a tick that needs more rebuilds every affected
//! observer.
//!
//! Observers are rebuilt in id order and per-entity records are kept by
//! slot, so slots are kept in id order too: a spawn takes a slot above
//! every one used since the last renumbering while there is one, which
//! keeps the order when its id is fresh (above every id below). While
//! slots follow ids, views are searched and merged by slot without
//! looking ids up. Once the slots above are used up, or an eighth of the
//! entities sit out of id order (spawns under old ids), the world
//! renumbers its slots and views in id order at the end of a tick,
//! `O(entities log entities + visible pairs)`, which nothing outside can
//! see, all in that tick. Until then, a spawn under an old id turns the
//! search by slot off.
//! When many subjects change, the observers' records are first copied out
//! cell by cell (`O(observers + cells)`), so that each subject reads the
//! observers of a row of its ring as one run; in radius mode the copy is
//! sorted into squares of about a third of a cell instead, and a subject
//! reads only the squares within reach of its old and new positions.
//!
//! In grid mode visibility follows cells, so while no view is full, a move
//! inside its cell is no change: only subjects that cross a cell border
//! (or are due an update) are paired, and only observers that cross one
//! are rebuilt. The tick rebuilds every view instead when those subjects
//! have, around their old and new cells, more than an eighth as many
//! observers as there are visible pairs: pairing one observer costs about
//! eight times as much as rebuilding one pair (grid observers are counted
//! per cell, so the estimate is a sum over each subject's ring).
//! A subject due an update that did not cross a border gets one in
//! exactly the views that hold it. When pairing such subjects would cost
//! more, by the same estimate, than a pass over every visible pair, they
//! are not paired: every view is walked for its due subjects instead,
//! `O(v)` each, after its Leaves and Enters. That is the common case at
//! the default throttle where everything moves.
//!
//! Otherwise, when at least as many entities changed as there are
//! observers, pairing would cost more than rebuilding every view, so every
//! observer is rebuilt instead, scanning a sorted copy of the world made by
//! one walk of the cells (`O(entities + cells)`), which keeps each row of a
//! ring contiguous in memory. The same copy serves once rebuilt observers
//! are more than about 1.5% of the entities, and when they are a sixteenth,
//! every view is streamed into fresh storage, the others copied unchanged.
//! So is every view when the pairs would edit views four times as often as
//! there are observers: nearly every view is rewritten then anyway, and a
//! view rewritten in place is copied twice.
//! In radius mode the copy is sorted into squares of about a third of a
//! cell, so a rebuild scans the bounding box of its disc rather than its
//! whole ring. The new views are then written one after another in rebuild
//! order, so the next such tick reads them as a stream.
//!
//! In radius mode without hysteresis, a view below `max_view` whose
//! observer's interest takes every subject is exactly the subjects within
//! `r`, so in such a tick it changes by the pairs that crossed `r`. Where
//! at least half of the entities are observers with such views, at most
//! one entity in 32 spawned, despawned or jumped farther than a square, and
//! no slot changed hands, one sweep over pairs of nearby entities finds
//! those changes instead of the rebuilds: each pair once for both its
//! directions, tested at both positions only when it is now within `r`
//! plus or minus three times the tick's largest step, in
//! `O(pairs in reach + changes)`. Each such view is then merged with its
//! `c` changes in `O(v + c log c)`; a spawn, despawn or jump is tested
//! against the views around where it was and is. The other observers are
//! rebuilt as above.
//!
//! Memory is fixed by [`Config`] at construction, dominated by
//! `max_observers × min(max_view, max_entities) × 8` bytes of views (two
//! halves of 4-byte entries), then each observer's margin (432 bytes,
//! where views can be culled at all), the per-entity records, the room for
//! pairs, the copies and, in radius mode without hysteresis, the sweep's
//! changes (about 1.5 KB per entity in all where every entity is an
//! observer, 1.9 KB with the sweep): `step` never allocates.
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
//!   max_observers, max_view)`.
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

mod cell_locator;
mod command;
mod config;
pub mod coverage;
mod digest;
mod event;
mod fixed_point;
mod grid;
mod id_index;
pub mod jsonl;
mod margin;
mod packed;
pub mod plan;
mod renumbering;
mod rule;
mod scan;
mod slot_bits;
mod slot_ids;
mod snapshot;
mod source;
mod squares;
mod subject_pairs;
mod throttle;
mod view;
mod view_marks;
mod world;

pub use command::{Command, CommandKind, EntityId, Move, Spawn};
pub use config::{
    Config, ConfigError, Visibility, MAX_CELLS, MAX_ENTITIES, MAX_LENGTH_RAW, MAX_RADIUS,
    MAX_VIEW_SLOTS,
};
pub use event::{contract_order, CountingSink, Event, EventKind, EventSink, FnSink, RejectReason};
pub use fixed_point::{angle_diff, len2_raw, Dir, Fix, Pos};
pub use snapshot::{EntitySnapshot, RestoreError, Snapshot, MAX_TICK};
pub use throttle::{Motion, Sent};
pub use world::{BufferTooSmall, EntityState, TickReport, World};
