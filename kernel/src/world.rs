//! The world: the entity table and the tick that drives everything else.

use alloc::vec;
use alloc::vec::Vec;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::cell_locator::CellLocator;
use crate::cell_sorted::CellSorted;
use crate::command::{Command, EntityId, Move, Spawn};
use crate::config::{axis_span, Config, ConfigError, Visibility, MAX_ENTITIES, MAX_RADIUS};
use crate::coverage::{Path, PathCounts};
use crate::digest::{config_hash, DigestSums, PairHasher};
use crate::due_cells::DueCells;
use crate::emit::{send_enter, send_leave};
use crate::event::{CountingSink, Event, EventSink, RejectReason};
use crate::fixed_point::{Dir, Fix, Pos};
use crate::fork::{Fork, Serial};
use crate::grid::{CellRect, Grid};
use crate::id_index::IdIndex;
use crate::layers::LayerSummary;
use crate::margin::{Listed, Margins};
use crate::plan::{
    self, PairSource, Pairing, PairingCounts, RebuildSource, Refresh, RefreshCounts, SweepOutcome,
    TickPlan, Updates, ViewWrite,
};
use crate::rule::{RuleTables, Zone};
use crate::scan::{Candidates, Ranked, Reach, ScanRecord};
use crate::slot_bits::SlotBits;
use crate::slot_ids::SlotIds;
use crate::slot_table::{Entity, Gone, Sight, SlotTable, Watcher, NO_VIEW, UNBORN};
use crate::source::Source;
use crate::squares::{PackedSquares, Squares, Steps};
use crate::subject_pairs::{self, PairKind, SubjectPairs};
use crate::sweep::{Scene, Sweep, ViewEdit};
use crate::throttle::{throttle_of, Motion, Sent, Throttle};
use crate::view::Views;
use crate::view_marks::{MarkSlice, ViewMarks};

mod culled;
mod incremental;
mod pair_split;
mod query;
mod renumber;
mod split;
mod stamps;

use incremental::{Changed, Dues, PairMarks, PairScene};
pub use query::BufferTooSmall;
pub(crate) use stamps::stamp;
use stamps::Stamps;

/// The public state of one entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct EntityState {
    /// Host-chosen id.
    pub id: EntityId,
    /// Position.
    pub pos: Pos,
    /// Heading.
    pub dir: Dir,
    /// Speed.
    pub speed: Fix,
    /// Whether it receives view events.
    pub observer: bool,
    /// View radius (radius mode).
    pub radius: Fix,
    /// What it is.
    pub layers: u32,
    /// What it wants to see.
    pub interest: u32,
}

impl EntityState {
    /// The spawn command that recreates this entity as it is.
    pub fn spawn(&self) -> Spawn {
        Spawn {
            id: self.id,
            pos: self.pos,
            dir: self.dir,
            speed: self.speed,
            observer: self.observer,
            radius: self.radius,
            layers: self.layers,
            interest: self.interest,
        }
    }
}

/// The public state of the entity recorded as `e` and `sight`.
fn state_of(e: &Entity, sight: &Sight) -> EntityState {
    EntityState {
        id: e.id,
        pos: e.cur.pos,
        dir: e.cur.dir,
        speed: e.cur.speed,
        observer: e.is_observer(),
        radius: sight.radius,
        layers: e.layers,
        interest: sight.interest,
    }
}

/// What one tick reports besides its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickReport {
    /// The tick just run (the first is 1).
    pub tick: u64,
    /// Digest of the full state after the tick.
    pub digest: u64,
    /// Number of events delivered to the sink, rejections included.
    pub events: u64,
}

/// How a touched subject may change views this tick.
#[derive(Clone, Copy)]
struct ViewChange {
    /// Spawned this tick.
    fresh: bool,
    /// New, or its state differs from the end of last tick.
    moved: bool,
    /// Moved in a way that can change who sees it.
    relocated: bool,
    /// Its update is due.
    due: bool,
}

/// Slots beyond `max_entities` (an eighth more, within [`MAX_ENTITIES`]),
/// so that a spawn rarely needs a slot freed in the same tick, and spawns
/// under fresh ids can take slots above every live one for many ticks
/// before the slots are renumbered (see `World::top`). A despawned
/// subject whose slot stays vacant until the tick ends leaves the views
/// around it by pairing, like a subject that moved away; one whose slot a
/// spawn took over (even one despawned again in the same tick) is still
/// named by old views in the same slot as the newcomer, so every observer
/// around it is rebuilt instead.
fn spare_slots(max_entities: u32) -> u32 {
    (max_entities / 8).min(MAX_ENTITIES.saturating_sub(max_entities))
}

/// How the subject `e`, spawned in tick `born` and last tick in cell
/// `prev_cell`, may change views in tick `t`; `None` when it is not
/// alive. With `cells_only`, a move inside its cell is not a relocation.
#[inline(always)]
fn view_change(
    e: &Entity,
    born: u64,
    prev_cell: u32,
    throttle: &Throttle,
    t: u64,
    cells_only: bool,
) -> Option<ViewChange> {
    if !e.alive {
        return None;
    }
    let fresh = born == t;
    let moved = fresh || e.cur != e.prev;
    let crossed = fresh || prev_cell != e.cell;
    Some(ViewChange {
        fresh,
        moved,
        relocated: moved && (!cells_only || crossed),
        due: throttle.is_due(&e.cur, &e.prev, e.sent().as_ref(), t),
    })
}

/// The path that refreshes one observer's view in a tick, chosen by
/// [`World::observer_path`] from the plan and the observer's marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObserverPath {
    /// Not affected: the view stays as it is.
    Keep,
    /// Not affected, but walked for its due subjects ([`Updates::Walked`]).
    KeepAndWalk,
    /// Edited by its pairs (`world/incremental.rs`).
    Edit,
    /// A culled view edited through its margin (`world/culled.rs`).
    EditCulled,
    /// Edited by the changes the sweep found (`sweep.rs`).
    Swept,
    /// Rebuilt from the candidates around it.
    Rebuild,
}

/// A deterministic lockstep AOI world. See the [crate docs](crate) for the contract.
pub struct World {
    config: Config,
    /// Finds a position's cell for the config, without dividing.
    cells: CellLocator,
    config_hash: u64,
    throttle: Throttle,
    tick: u64,
    digest: u64,
    sums: DigestSums,

    /// Every array kept by slot (`slot_table.rs`).
    slots: SlotTable,
    /// Free slots: on top, those at or above `top`, the lowest last; below
    /// them, those freed since, handed out only once the top ones are
    /// gone. Slots freed this tick wait in `released` until it ends (see
    /// [`spare_slots`]).
    free_slots: Vec<u32>,
    released: Vec<u32>,
    /// One past the highest slot handed out since slots were last
    /// numbered in id order, and the highest id any slot below it has
    /// held since. A spawn above `top` under a greater id keeps slots in
    /// id order, as fresh ids do.
    top: u32,
    top_id: Option<EntityId>,
    count: u32,
    /// Live observers.
    observers: u32,
    index: IdIndex,
    /// The slot last looked up by id: see [`World::slot_of`]. Only a
    /// guess, so no part of the state.
    last_slot: u32,
    grid: Grid,
    views: Views,
    /// Observers per ring size; `max_ring` is the largest non-empty one.
    ring_counts: Vec<u32>,
    max_ring: u32,

    /// Live observers as `(id, slot)`; while `by_id_clean`, ascending and
    /// with no despawned one left in.
    by_id: Vec<(EntityId, u32)>,
    by_id_clean: bool,
    /// How many leading entries of `by_id` were sorted when it was last
    /// sorted; spawns append after them.
    by_id_sorted: u32,
    /// Room to merge `by_id`'s appended tail into its sorted head, for an
    /// eighth of `max_observers`.
    by_id_tail: Vec<(EntityId, u32)>,
    /// A bit per slot for renumbering, which plans in the pairs' room.
    numbering_done: SlotBits,

    /// Entities whose state differs from what was last sent (`s ≠ L`).
    pending: Vec<u32>,

    // Scratch, sized at construction and reused every tick.
    touched: Vec<u32>,
    /// Each touched subject's [`ViewChange`] (`None`: not alive), when
    /// [`World::paired_by_cells`] worked them out for the whole tick.
    changes: Vec<Option<ViewChange>>,
    /// Subjects despawned this tick that were visible somewhere, with room
    /// for an eighth of the slots: a tick that despawns more of them
    /// rebuilds every view instead (`gone_overflowed`), as one that
    /// despawns as many as there are observers would anyway.
    gone: Vec<Gone>,
    /// This tick despawned more than `gone` has room for.
    gone_overflowed: bool,
    /// Observers affected by this tick's changes, by slot.
    affected: Vec<u32>,
    /// How many affected observers pairing marked for a rebuild this tick.
    marked: u32,
    /// How many of them have full views (see `plan::CROWD_REBUILD_WEIGHT`).
    crowds: u32,
    /// This tick's plan (`plan.rs`), made in two steps; the last tick's
    /// between ticks.
    plan: TickPlan,
    /// The observers around the subject being paired.
    around: Vec<u32>,
    /// The events changed subjects make for observers that are not rebuilt.
    pairs: SubjectPairs,
    /// One updated observer's resolved pairs.
    group: Vec<(PairKind, EntityId, u32)>,
    /// The same records by cell with their slots, valid this tick while
    /// the plan pairs from [`PairSource::CellCopy`] (grid mode, or radius
    /// mode without squares).
    observer_cells: CellSorted<(u32, Watcher)>,
    /// The same records by square, in radius mode where the world allows
    /// (then there is no copy by cells).
    observer_squares: Option<Squares<(u32, Watcher)>>,
    candidates: Candidates,
    /// Crowd culling: visible candidates with their `dist²`.
    ranked: Ranked,
    /// Per view: the `dist²` its crowd was last cut off at, a guess that
    /// spares the next ranking most of the crowd (see [`Ranked`]). Views
    /// come out the same whatever it holds, so it is no part of the state:
    /// snapshots leave it out and a restored world starts without guesses.
    /// [`NO_CUTOFF`] is none, as is a cut-off of `2^64 − 1` or more, which
    /// only worlds more than `2^31` raw units across have.
    cutoffs: Vec<u64>,
    /// Per view, how far past its last cut-off a crowd ranks first: within
    /// `last + last >> shift` (see [`GUESS_NARROW`]).
    guess_shifts: Vec<u8>,
    /// Per view: its margin around the cut-off, while its crowd stands
    /// still enough for one to pay (see `margin.rs`). Like the guesses, no
    /// part of the state.
    margins: Margins,
    /// A rebuilt crowd's candidates around its cut-off, in key order.
    margin_keys: Listed,
    /// Sorted copies of the world, valid for the current tick as the
    /// plan's [`RebuildSource`] says: by squares in radius mode where the
    /// world allows, else by cells (and then, in grid mode with a full
    /// view, by squares too: [`TickPlan::crowd_squares`]).
    packed: CellSorted<ScanRecord>,
    squares: Option<PackedSquares>,
    /// Whether any subject already visible somewhere may be due an update
    /// this tick (one spawned this tick is due, but enters instead).
    any_due: bool,
    /// Whether this tick's views are walked for due subjects by listing
    /// them first (`gathers_due`).
    gather_due: bool,
    /// A rebuilding observer's entered subjects (slots), sorted by id.
    entered: Candidates,
    stamps: Stamps,
    /// Busy radius-mode ticks: views kept from the pairs that crossed.
    sweep: Sweep,
    /// The buffers of a pass over every view split into tasks.
    split: split::Split,
    /// Pairing's buffers for the same tasks (`world/pair_split.rs`).
    pair_split: pair_split::PairSplit,
    /// Subjects whose update is due this tick.
    due: SlotBits,
    /// Grid mode: the due subjects by cell, in a tick that walks views for
    /// them while few are due.
    due_cells: DueCells,
    /// The slots live observers hold, so that every observer's record can
    /// be read in slot order.
    observer_slots: SlotBits,
    /// Grid mode: the cells holding an observer whose view is full or
    /// keeps a margin, marked in ticks that pair while some view is full
    /// (see `World::mark_full_cells`).
    full_cells: SlotBits,
    /// The rebuilding observer's old view (same incarnation only) and new view.
    marks: ViewMarks,
    /// The live entities' layers (see `layers.rs`).
    layers: LayerSummary,
    /// Some view was cut below `max_view` to the room `max_visible` left
    /// it, in the last tick: the next one rebuilds every view, since the
    /// fast paths take a view below `max_view` to hold every candidate.
    /// Set, to be safe, in a world restored with `max_visible` bounding
    /// its views. No part of the state.
    capped: bool,
    /// This tick rebuilds every view because of `capped`.
    recheck: bool,
    /// How often each path was taken (`coverage.rs`); no part of the state.
    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    paths: PathCounts,
}

impl World {
    /// Builds an empty world; every buffer it will ever use is allocated here.
    pub fn new(config: Config) -> Result<World, ConfigError> {
        config.validate()?;
        let slots = config.max_entities + spare_slots(config.max_entities);
        let n = slots as usize;
        let max_ring = config.width_cells.max(config.height_cells);
        let squares = PackedSquares::by_index(&config, config.max_entities);
        let cells = config.width_cells * config.height_cells;
        // The copy by cells is only needed where there are no squares, or in
        // grid mode, where visibility follows cells.
        let (packed_cells, packed_slots) = match (&squares, config.visibility) {
            (Some(_), Visibility::Radius) => (0, 0),
            _ => (cells, config.max_entities),
        };
        // Copying the observers costs a walk of every cell: worlds with more
        // than four cells per observer keep no copy. Radius mode copies them
        // into squares where the world allows (a subject's disc covers less
        // of those than of cells), else into cells.
        let copy_observers = u64::from(cells)
            <= plan::OBSERVER_COPY_MAX_CELLS_PER_OBSERVER * u64::from(config.max_observers);
        let observer_squares = match config.visibility {
            Visibility::Radius if copy_observers => {
                Squares::by_index(&config, config.max_observers)
            }
            _ => None,
        };
        let observer_cells = match copy_observers && observer_squares.is_none() {
            true => cells,
            false => 0,
        };
        let mut world = World {
            config,
            cells: CellLocator::new(&config),
            config_hash: config_hash(&config),
            throttle: throttle_of(&config),
            tick: 0,
            digest: 0,
            sums: DigestSums::default(),
            slots: SlotTable::new(slots),
            // Popped from the back: hand out low slots first.
            free_slots: (0..slots).rev().collect(),
            released: Vec::with_capacity(n),
            top: 0,
            top_id: None,
            count: 0,
            observers: 0,
            index: IdIndex::with_capacity(config.max_entities),
            last_slot: u32::MAX,
            grid: Grid::new(config.width_cells, config.height_cells, slots),
            // A view holds distinct live entities, so it never needs more than max_entities.
            views: Views::new(
                config.max_observers,
                config.view_room(),
                config.visible_room(),
            ),
            ring_counts: vec![0; max_ring as usize + 1],
            max_ring: 0,
            // An eighth more than the observers: despawned ones stay
            // listed until the next sort, and dropping them costs a pass
            // over the list, so one pass every eighth of the observers
            // despawned (twice the observers took 14 bytes an entity more).
            by_id: Vec::with_capacity(
                config.max_observers as usize + (config.max_observers as usize / 8).max(1),
            ),
            by_id_clean: true,
            by_id_sorted: 0,
            // Room to merge an eighth of the observers spawned since the
            // last sort; more are sorted with the rest (room for every
            // observer took 16 bytes an observer).
            by_id_tail: Vec::with_capacity((config.max_observers as usize / 8).max(1)),
            numbering_done: SlotBits::new(slots),
            pending: Vec::with_capacity(n),
            touched: Vec::with_capacity(n),
            // Only grid mode pairs by border crossing (`paired_by_cells`).
            changes: match config.visibility {
                Visibility::Grid => Vec::with_capacity(n),
                Visibility::Radius => Vec::new(),
            },
            gone: Vec::with_capacity((n / 8).max(1)),
            gone_overflowed: false,
            affected: Vec::with_capacity(config.max_observers as usize),
            marked: 0,
            crowds: 0,
            plan: TickPlan::IDLE,
            around: Vec::with_capacity(config.max_observers as usize),
            pairs: SubjectPairs::new(slots, subject_pairs::room_per_entity(&config)),
            // A group of more pairs than two full views grows its view past
            // `max_view`, and the view is rebuilt instead (as split tasks do).
            group: Vec::with_capacity(2 * config.view_room() as usize + 2),
            observer_cells: CellSorted::new(observer_cells, config.max_observers),
            observer_squares,
            candidates: Candidates::new(config.max_entities),
            ranked: Ranked::new(config.max_entities, !config.all_near()),
            cutoffs: vec![NO_CUTOFF; config.max_observers as usize],
            guess_shifts: vec![GUESS_NARROW; config.max_observers as usize],
            // A view can only be culled if more than max_view others exist.
            margins: match u64::from(config.max_view) + 1 < u64::from(config.max_entities) {
                // Only a full view keeps one: as many as that many fill
                // the views' room.
                true => Margins::new(
                    config.max_observers,
                    config.visible_room().div_ceil(config.view_room().max(1)),
                ),
                false => Margins::new(0, 0),
            },
            margin_keys: Listed::new(),
            packed: CellSorted::new(packed_cells, packed_slots),
            squares,
            any_due: false,
            gather_due: false,
            entered: Candidates::new(config.max_view.min(config.max_entities)),
            stamps: Stamps::new(slots),
            sweep: Sweep::new(&config, slots),
            split: split::Split::default(),
            pair_split: pair_split::PairSplit::default(),
            due: SlotBits::new(slots),
            due_cells: match config.visibility {
                Visibility::Grid => DueCells::new(cells, slots),
                Visibility::Radius => DueCells::new(0, 0),
            },
            observer_slots: SlotBits::new(slots),
            full_cells: SlotBits::new(match config.visibility {
                Visibility::Grid => cells,
                Visibility::Radius => 0,
            }),
            marks: ViewMarks::new(slots),
            layers: LayerSummary::NONE,
            capped: false,
            recheck: false,
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            paths: PathCounts::default(),
        };
        world.digest = world.compute_digest();
        Ok(world)
    }

    /// The configuration the world was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The last tick run; 0 before the first.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The digest of the full state after the last tick.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Number of live entities.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether no entity is alive.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The state of a live entity.
    pub fn entity(&self, id: EntityId) -> Option<EntityState> {
        let slot = self.index.get(id, &self.slots.ids)?;
        Some(state_of(
            &self.slots.entities[slot as usize],
            &self.slots.sights[slot as usize],
        ))
    }

    /// Every live entity, in no particular order.
    pub fn entities(&self) -> impl Iterator<Item = EntityState> + '_ {
        self.live().map(|(e, sight)| state_of(e, sight))
    }

    /// Every live entity's record with its sight, by slot.
    fn live(&self) -> impl Iterator<Item = (&Entity, &Sight)> + '_ {
        let all = self.slots.entities.iter().zip(&self.slots.sights);
        all.filter(|(e, _)| e.alive)
    }

    /// The subjects an observer sees after the last tick, ascending by id;
    /// `None` if `observer` is not a live observer.
    pub fn view(&self, observer: EntityId) -> Option<impl Iterator<Item = EntityId> + '_> {
        let slot = self.index.get(observer, &self.slots.ids)?;
        let view = self.slots.entities[slot as usize].view;
        (view != NO_VIEW).then(|| self.views.slots(view).iter().map(|&s| self.slots.ids.id(s)))
    }

    /// The last state sent for an entity and when (the throttle's `L` and `T`).
    pub fn last_sent(&self, id: EntityId) -> Option<Sent> {
        let slot = self.index.get(id, &self.slots.ids)?;
        self.slots.entities[slot as usize].sent()
    }

    /// Runs one tick: applies `commands` in order, evaluates visibility once,
    /// and delivers the tick's events to `sink` in contract order.
    ///
    /// Never allocates and never panics; a command that cannot apply becomes
    /// an [`Event::Rejected`] and the rest of the tick still applies.
    pub fn step<S: EventSink>(&mut self, commands: &[Command], sink: &mut S) -> TickReport {
        self.step_with(commands, sink, &Serial)
    }

    /// [`World::step`], with the host's threads: parts of the tick are
    /// split into tasks run by `fork` (see [`Fork`]), up to the width
    /// reserved with [`World::reserve_width`]. Events, their order and
    /// the digest are exactly those of [`World::step`], for every width.
    ///
    /// The split parts are the radius-mode sweep's search for the pairs
    /// that crossed a radius (`sweep.rs`) and, in both modes, a pass that
    /// refreshes every view, by observer (`world/split.rs`); every other
    /// stage, and handing the events to `sink`, runs on the calling
    /// thread.
    ///
    /// ```
    /// use lockgrid_kernel::{Config, CountingSink, Serial, World};
    ///
    /// let mut world = World::new(Config::default()).unwrap();
    /// world.reserve_width(4);
    /// let report = world.step_with(&[], &mut CountingSink::default(), &Serial);
    /// assert_eq!(report.tick, 1);
    /// ```
    pub fn step_with<S: EventSink, F: Fork + ?Sized>(
        &mut self,
        commands: &[Command],
        sink: &mut S,
        fork: &F,
    ) -> TickReport {
        self.step_in_parts(commands, sink, &mut [] as &mut [CountingSink], fork)
    }

    /// [`World::step_with`], with the events handed over on the tasks'
    /// threads too: where the pass that refreshes every view is split,
    /// each task sends the events of the observers it refreshed to its
    /// own part, `parts[task]`, while the others do the same, instead of
    /// leaving them all to the calling thread. The kernel stays the one
    /// that decides what goes where; what each place receives is fixed:
    ///
    /// - every event goes out once, to `sink` or to one part;
    /// - rejections go to `sink`, first, in input order;
    /// - all the events of one observer go to the same place, in contract
    ///   order, and each place receives its observers in ascending id
    ///   order;
    /// - which observers go to a part depends on the width and the tick,
    ///   not on how the tasks ran.
    ///
    /// So a host that takes events per observer (routing them to the
    /// observer's connection, counting them) can read every place as it
    /// is, in any order or at once; and a stable merge of `sink` and the
    /// parts by observer, `sink` first, gives [`World::step`]'s order
    /// exactly. The digest and the report are [`World::step`]'s. With
    /// fewer parts than the width, every event goes to `sink`, as with
    /// [`World::step_with`].
    ///
    /// ```
    /// use lockgrid_kernel::{Config, CountingSink, Serial, World};
    ///
    /// let mut world = World::new(Config::default()).unwrap();
    /// world.reserve_width(2);
    /// let (mut sink, mut parts) = (CountingSink::default(), [CountingSink::default(); 2]);
    /// let report = world.step_in_parts(&[], &mut sink, &mut parts, &Serial);
    /// let sent = sink.count + parts.iter().map(|p| p.count).sum::<u64>();
    /// assert_eq!(report.events, sent);
    /// ```
    pub fn step_in_parts<S: EventSink, P: EventSink + Send, F: Fork + ?Sized>(
        &mut self,
        commands: &[Command],
        sink: &mut S,
        parts: &mut [P],
        fork: &F,
    ) -> TickReport {
        // Debug builds check every event against the one comparator.
        #[cfg(debug_assertions)]
        let sink = &mut crate::event::InOrder::new(sink);
        self.run_tick(commands, sink, parts, fork)
    }

    /// Makes room for [`World::step_with`] to split a tick into up to
    /// `width` tasks (at most [`MAX_WIDTH`](crate::MAX_WIDTH)); returns the
    /// width it has room for. Allocates (per task, a scratch buffer of 4
    /// bytes per entity for the sweep; and, from 2 tasks on, 128 bytes per
    /// entity of event records shared out between the tasks, plus 16 bytes
    /// per observer, per task about 5 bytes per entity for rebuilding
    /// views, and a second ring for the views, 4 bytes per entry of their
    /// room, which split passes write into; for split pairing, 8 bytes per
    /// entity, and per task 8 bytes per observer and a bit per entity), so
    /// call it once, after construction, not between ticks that must not
    /// allocate.
    pub fn reserve_width(&mut self, width: usize) -> usize {
        let c = &self.config;
        let slots = c.max_entities + spare_slots(c.max_entities);
        self.split = split::Split::new(width, (c.max_entities, slots), c.max_observers, c.max_view);
        self.pair_split = pair_split::PairSplit::new(width, slots, c.max_observers);
        if self.split.width() >= 2 {
            self.views.reserve_back();
        }
        self.sweep.reserve_width(width).min(self.split.width())
    }

    /// The tick's body, for [`World::step_in_parts`], which the other
    /// steps call.
    fn run_tick<S: EventSink, P: EventSink + Send, F: Fork + ?Sized>(
        &mut self,
        commands: &[Command],
        sink: &mut S,
        parts: &mut [P],
        fork: &F,
    ) -> TickReport {
        let t = self.tick + 1;
        let mut events = 0u64;
        self.stamps.begin(t);
        self.touched.clear();
        self.gone.clear();
        self.gone_overflowed = false;
        self.affected.clear();
        self.marked = 0;
        self.crowds = 0;
        self.pairs.clear();
        self.any_due = false;
        self.recheck = core::mem::take(&mut self.capped);

        for command in commands {
            if let Err(reason) = self.apply(command, t) {
                sink.event(Event::Rejected {
                    entity: command.entity(),
                    command: command.kind(),
                    reason,
                });
                events += 1;
            }
        }

        // Entities that moved last tick without being due may settle now.
        // Most that keep moving were touched by their move already: the
        // stamp says so without reading the entity's record.
        for k in 0..self.pending.len() {
            let slot = self.pending[k];
            if self.stamps.touched[slot as usize] != stamp(t)
                && self.slots.entities[slot as usize].alive
            {
                self.touch(slot, t);
            }
        }
        self.pending.clear();

        // Step 1 of the plan (`plan.rs`): how the changes reach the views.
        let border = match self.recheck {
            true => None,
            false => self.paired_by_cells(t),
        };
        let copy = match (&self.observer_squares, self.observer_cells.available()) {
            (Some(_), _) => Some(PairSource::SquareCopy),
            (None, true) => Some(PairSource::CellCopy),
            (None, false) => None,
        };
        let (mut pairing, pair_source) = plan::plan_pairing(PairingCounts {
            changes: border.map_or(self.touched.len(), |(n, _)| n) as u64,
            border_crossers: border.is_some(),
            gone: self.gone.len() as u64,
            observers: u64::from(self.observers),
            cells: u64::from(self.config.width_cells) * u64::from(self.config.height_cells),
            sweepable: self.sweep_could_run(),
            copy,
        });
        if self.recheck {
            self.hit(Path::RecheckedAfterCut);
            pairing = Pairing::RebuildAll;
        }
        if self.gone_overflowed {
            // Not every despawned subject is listed to pair or sweep.
            self.hit(Path::GoneOverflowed);
            pairing = Pairing::RebuildAll;
        }
        self.plan = TickPlan {
            pairing,
            pair_source,
            updates: border.map_or(Updates::Paired, |(_, u)| u),
            ..TickPlan::IDLE
        };
        self.hit(match pairing {
            Pairing::RebuildAll => Path::PairingRebuildAll,
            Pairing::Changed => Path::PairingChanged,
            Pairing::BorderCrossers => Path::PairingBorderCrossers,
        });
        if self.plan.updates == Updates::Walked {
            self.hit(Path::UpdatesWalked);
        }
        self.copy_observers(fork);
        let mark = pairing != Pairing::RebuildAll;
        let near_full = mark && self.config.visibility == Visibility::Grid && self.views.any_full();
        if near_full {
            self.mark_full_cells();
        }
        // Pairing (`world/incremental.rs`): what it reads, what it marks,
        // what deciding dues writes.
        let scene = PairScene {
            config: &self.config,
            grid: &self.grid,
            watchers: &self.slots.watchers,
            sights: &self.slots.sights,
            born: &self.slots.born,
            ids: &self.slots.ids,
            views: &self.views,
            margins: &self.margins,
            max_ring: self.max_ring,
            pair_source: self.plan.pair_source,
            updates: self.plan.updates,
            observer_cells: &self.observer_cells,
            observer_squares: self.observer_squares.as_ref(),
            full_cells: near_full.then_some(&self.full_cells),
        };
        let mut marks = PairMarks {
            affected_at: &mut self.stamps.affected,
            rebuild_at: &mut self.stamps.rebuild,
            affected: &mut self.affected,
            marked: &mut self.marked,
            crowds: &mut self.crowds,
            pairs: &mut self.pairs,
            around: &mut self.around,
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            paths: &mut self.paths,
        };
        let dues = Dues {
            entities: &mut self.slots.entities,
            prev_cells: &self.slots.prev_cells,
            throttle: &self.throttle,
            due: &mut self.due,
            any_due: &mut self.any_due,
        };
        let changed = Changed {
            touched: &self.touched,
            changes: border.is_some().then_some(&self.changes[..]),
            gone: &self.gone,
        };
        let split = (&mut self.pair_split, fork);
        incremental::pair_changes(&scene, &mut marks, dues, &changed, (mark, t), split);
        self.gather_due = self.any_due && gathers_due(self.due.count(), self.count);
        if self.gather_due {
            self.hit(Path::DueGathered);
        }

        // Step 2: how the affected observers get their views.
        let (refresh, rebuild_source, view_write, rebuilds) = plan::plan_refresh(
            pairing,
            RefreshCounts {
                overflowed: self.pairs.overflowed(),
                marked: u64::from(self.marked),
                crowds: u64::from(self.crowds),
                affected: self.affected.len() as u64,
                edits: u64::from(self.pairs.edits()),
                observers: u64::from(self.observers),
                entities: u64::from(self.count),
                radius_squares: self.squares.is_some()
                    && self.config.visibility == Visibility::Radius,
            },
        );
        self.plan.refresh = refresh;
        self.plan.rebuild_source = rebuild_source;
        self.plan.view_write = view_write;
        self.plan.rebuilds = u32::try_from(rebuilds).unwrap_or(u32::MAX);
        match refresh {
            Refresh::Edit => self.pairs.group(),
            Refresh::RebuildAffected => self.hit(Path::PairsOverflowed),
            Refresh::RebuildAll => {}
        }
        if view_write == ViewWrite::Stream {
            self.hit(Path::ViewsStreamed);
        }
        match rebuild_source {
            RebuildSource::Lists => {}
            RebuildSource::Squares => {
                self.hit(Path::RebuildFromSquares);
                self.sort_and_sweep(refresh == Refresh::RebuildAll, t, fork);
            }
            RebuildSource::SortedCells => {
                self.hit(Path::RebuildFromSortedCells);
                let grid = &self.grid;
                let of_cell = |c| grid.members(c).map(|(slot, m)| ScanRecord::of(slot, m));
                self.packed
                    .rebuild_split(grid.member_counts(), of_cell, fork);
                // Grid mode: crowds rank from squares (a crowd's cut-off
                // is well inside its ring of cells).
                if let Some(squares) = self.squares.as_mut().filter(|_| self.views.any_full()) {
                    squares.sort_entities(grid, &self.slots.born, None);
                    self.plan.crowd_squares = true;
                    self.hit(Path::CrowdSquares);
                }
            }
        }
        let walk = self.plan.updates == Updates::Walked;
        if walk && self.due_cells.build(&self.due, &self.slots, self.count, t) {
            self.hit(Path::DueByCells);
        }
        if view_write == ViewWrite::Stream || walk {
            self.sort_observers();
            if view_write == ViewWrite::Stream {
                self.views.begin_pass();
            }
            match self.refresh_split(t, sink, parts, fork) {
                Some(n) => events += n,
                None => {
                    for k in 0..self.by_id.len() {
                        let slot = self.by_id[k].1;
                        events += self.refresh_view(slot, t, sink);
                    }
                }
            }
            self.views.end_pass();
        } else {
            // In id order: by slot while slots follow ids.
            let ids = &self.slots.ids;
            self.affected.sort_unstable_by_key(|&s| ids.key(s));
            for k in 0..self.affected.len() {
                let slot = self.affected[k];
                events += self.refresh_view(slot, t, sink);
            }
        }

        if let Some(room) = self.sweep.end_tick() {
            self.pairs.take_back(room);
        }
        self.due_cells.clear();
        self.slots.settle(
            &self.touched,
            &mut self.due,
            &mut self.sums,
            &mut self.pending,
        );

        // Only spawns and despawns move slots out of id order.
        let churned = self.slots.ids.any_churned();
        self.slots.ids.end_tick();
        // Freed slots go under the top ones: spawns keep to the top while
        // it lasts (see `top`).
        let freed = self.released.len();
        self.free_slots.append(&mut self.released);
        self.free_slots.rotate_right(freed);
        // Renumbering (`world/renumber.rs`), lent everything kept by slot
        // or by view.
        if churned && renumber::renumbering_due(&mut self.slots, self.count, self.top) {
            self.hit(Path::Renumbered);
            self.renumber_slots();
        }
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        {
            let seen = self.views.take_seen();
            self.paths.hit_times(Path::ViewsPacked, seen.packs);
            self.paths
                .hit_times(Path::UnreadViewsSlid, seen.compactions);
        }
        self.tick = t;
        self.digest = self.compute_digest();
        TickReport {
            tick: t,
            digest: self.digest,
            events,
        }
    }

    /// Grid mode, pairing while some view is full: marks the cells of the
    /// observers whose views are full or keep a margin, the only views a
    /// subject that stays in its cell can change (the others follow
    /// cells). `O(slots / 64 + observers)`, against pairing each such
    /// subject with every observer of its ring.
    fn mark_full_cells(&mut self) {
        let (full_cells, watchers) = (&mut self.full_cells, &self.slots.watchers);
        full_cells.clear_all();
        for o in self.observer_slots.ones() {
            let Some(w) = watchers.get(o as usize) else {
                continue;
            };
            let full = w.has_margin() || self.views.is_full(w.view());
            full_cells.set_if(w.cell, full);
        }
    }

    /// Copies every observer's pairing record by cells or squares, where
    /// the plan pairs from a copy.
    fn copy_observers<F: Fork + ?Sized>(&mut self, fork: &F) {
        let (grid, watchers) = (&self.grid, &self.slots.watchers);
        match (self.plan.pair_source, &mut self.observer_squares) {
            (PairSource::SquareCopy, Some(squares)) => {
                // Squares sort by position anyway: read the records in
                // slot order, one stream, not cell by cell; and read them
                // again to copy them, a second stream, rather than keep
                // them in between.
                let all = self.observer_slots.ones().filter_map(|o| {
                    let (x, y) = watchers.get(o as usize)?.at();
                    Some((x, y, o))
                });
                let record = |o: u32| (o, watchers.get(o as usize).copied().unwrap_or_default());
                squares.rebuild_by_index(all, record);
            }
            (PairSource::CellCopy, _) => {
                let of_cell = |c| {
                    grid.observers(c)
                        .filter_map(|o| Some((o, *watchers.get(o as usize)?)))
                };
                let counts = grid.observer_counts();
                self.observer_cells.rebuild_split(counts, of_cell, fork);
            }
            _ => {}
        }
    }

    /// How often this world took each path of the tick (see
    /// [`crate::coverage`]), counted since it was built or restored; `None`
    /// where counting is compiled away (release builds without the
    /// `path-coverage` feature).
    pub fn path_counts(&self) -> Option<&PathCounts> {
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        return Some(&self.paths);
        #[cfg(not(any(debug_assertions, feature = "path-coverage")))]
        None
    }

    /// Counts a path taken; compiled away with the counts.
    #[inline(always)]
    pub(crate) fn hit(&mut self, _path: Path) {
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        self.paths.hit(_path);
    }

    /// The plan of the last tick: which paths it took (see `plan.rs`).
    /// Before the first tick, [`TickPlan::IDLE`].
    pub fn last_plan(&self) -> &TickPlan {
        &self.plan
    }

    /// In grid mode, while no view is full (so none is culled by
    /// distance), a move inside its cell changes no view: only subjects
    /// that are new, crossed a cell border or are due need pairing. Their
    /// number and how due subjects reach their views, unless this is not
    /// grid mode, some view is full, or pairing them would cost more than
    /// rebuilding every view (`None`). With `Some`, `changes` holds every
    /// touched subject's change.
    ///
    /// A subject due an update that stayed in its cell gets one in exactly
    /// the views that hold it. When pairing such subjects would cost more
    /// than a walk over every view, they are not paired (nor counted):
    /// [`Updates::Walked`].
    fn paired_by_cells(&mut self, t: u64) -> Option<(usize, Updates)> {
        self.changes.clear();
        if self.config.visibility != Visibility::Grid || self.views.any_full() {
            return None;
        }
        // Pairing a subject costs about a pass over the observers around
        // where it was and is; rebuilding, a pass over every visible pair.
        let budget = self.sums.pair_count;
        let (mut reach, mut due_reach, mut paired, mut due_only) = (0u64, 0u64, 0, 0);
        for k in 0..self.touched.len() {
            let slot = self.touched[k];
            let change = self.view_change(slot, t, true);
            if let Some(c) = change.filter(|c| c.relocated || c.due) {
                let e = &self.slots.entities[slot as usize];
                if !c.relocated {
                    // Counted as pairing counts a crosser (around its old
                    // and new cell, here the same one), and only until the
                    // sum decides for a walk.
                    due_only += 1;
                    if plan::pairing_affordable(due_reach, budget) {
                        let around = self.grid.ring(e.cell, self.max_ring);
                        due_reach += 2 * self.grid.observers_counted(around);
                    }
                    self.changes.push(change);
                    continue;
                }
                paired += 1;
                let before = match c.fresh {
                    true => None,
                    false => Some(self.slots.prev_cells[slot as usize]),
                };
                for cell in before.into_iter().chain([e.cell]) {
                    let around = self.grid.ring(cell, self.max_ring);
                    reach += self.grid.observers_counted(around);
                }
                if !plan::pairing_affordable(reach, budget) {
                    return None;
                }
            }
            self.changes.push(change);
        }
        // A walk reads every view once: about a pass over the visible pairs.
        let updates = plan::plan_border_pairing(reach, due_reach, budget, self.margins.any())?;
        Some(match updates {
            Updates::Walked => (paired, updates),
            Updates::Paired => (paired + due_only, updates),
        })
    }

    fn compute_digest(&self) -> u64 {
        self.sums
            .finish(self.tick, self.config_hash, u64::from(self.count))
    }

    fn touch(&mut self, slot: u32, t: u64) {
        let now = stamp(t);
        let at = &mut self.stamps.touched[slot as usize];
        if *at != now {
            *at = now;
            self.touched.push(slot);
        }
    }

    fn apply(&mut self, command: &Command, t: u64) -> Result<(), RejectReason> {
        match command {
            Command::Spawn(s) => self.spawn(s, t),
            Command::Move(m) => self.move_entity(m, t),
            Command::Despawn { id } => self.despawn(*id, t),
        }
    }

    fn cell_index(&self, pos: Pos) -> Option<u32> {
        self.cells.cell_of(pos).map(|xy| self.grid.index(xy))
    }

    fn spawn(&mut self, s: &Spawn, t: u64) -> Result<(), RejectReason> {
        if self.index.get(s.id, &self.slots.ids).is_some() {
            return Err(RejectReason::DuplicateId);
        }
        if s.speed < Fix::ZERO || s.radius < Fix::ZERO || s.radius > MAX_RADIUS {
            return Err(RejectReason::Invalid);
        }
        let cell = self.cell_index(s.pos).ok_or(RejectReason::OutOfBounds)?;
        if self.count >= self.config.max_entities {
            return Err(RejectReason::Capacity);
        }
        let view = if s.observer {
            self.views.alloc(s.id).ok_or(RejectReason::Capacity)?
        } else {
            NO_VIEW
        };
        let Some(slot) = self.free_slots.pop().or_else(|| self.released.pop()) else {
            // count < max_entities guarantees a free slot; stay total anyway.
            if view != NO_VIEW {
                self.views.release(view);
            }
            return Err(RejectReason::Capacity);
        };
        let keeps_order = slot >= self.top && self.top_id.is_none_or(|top| s.id > top);
        if !keeps_order {
            self.slots.ids.set_in_order(false);
        }
        self.top = self.top.max(slot + 1);
        self.top_id = self.top_id.max(Some(s.id));
        let motion = Motion {
            pos: s.pos,
            dir: s.dir,
            speed: s.speed,
        };
        let entity = Entity::spawned(s.id, view, motion, s.layers, cell);
        // Both are at most 2^61 raw, so the sum does not overflow.
        let stay = s.radius.to_bits() + self.config.hysteresis.to_bits();
        let ring = self.ring_of(stay);
        let disc = self.config.visibility == Visibility::Radius;
        let near = self.near(ring, stay);
        let sight = Sight::new(s.radius, stay, s.interest, ring, disc, near);
        self.slots.occupy(slot, entity, sight, t);
        self.index.insert(slot, &self.slots.ids);
        self.grid.insert(cell, slot, s.observer, s.pos, s.layers);
        self.layers.add(s.layers);
        self.count += 1;
        if s.observer {
            if self.by_id.len() == self.by_id.capacity() {
                // Only despawned observers can fill it: drop them first.
                self.sort_observers();
            }
            self.by_id.push((s.id, slot));
            self.by_id_clean = false;
            self.observer_slots.set(slot);
            self.observers += 1;
            self.ring_counts[ring as usize] += 1;
            self.max_ring = self.max_ring.max(ring);
        }
        self.touch(slot, t);
        Ok(())
    }

    /// Whether every candidate of an observer is less than `2^31` raw away
    /// on each axis: its ring of cells, or the squares around its disc of
    /// radius `stay` (`r + hysteresis`, raw).
    fn near(&self, ring: u32, stay: i64) -> bool {
        if self.config.all_near() {
            return true;
        }
        let cell = u128::from(self.config.cell_size.to_bits().unsigned_abs());
        let by_cells = u128::from(ring + 1) * cell;
        let by_squares = match self
            .squares
            .as_ref()
            .filter(|_| self.config.visibility == Visibility::Radius)
        {
            Some(squares) => {
                u128::from(stay.unsigned_abs()) + 2 * u128::from(squares.side().unsigned_abs())
            }
            None => 0,
        };
        by_cells.max(by_squares) < 1 << 31
    }

    /// How many cells around its own an observer reaches whose stay
    /// distance (`r + hysteresis`, raw) is `stay`.
    fn ring_of(&self, stay: i64) -> u32 {
        let max_ring = self.config.width_cells.max(self.config.height_cells);
        match self.config.visibility {
            Visibility::Grid => 1.min(max_ring),
            Visibility::Radius => {
                // Both are at most 2^61 raw, so the ceiling does not overflow.
                let cell = self.config.cell_size.to_bits();
                let ring = (stay + cell - 1) / cell;
                u32::try_from(ring).unwrap_or(u32::MAX).min(max_ring)
            }
        }
    }

    /// The slot of the live entity `id`. Servers tend to send a tick's
    /// commands in the order their entities were spawned, so the slot after
    /// the last one looked up is tried first, where the index's scattered
    /// probes miss the cache. The guess reads the compact spawn-tick and id
    /// arrays, not the entity record: one command's look-up then does not
    /// wait on the previous command's record coming in from memory.
    fn slot_of(&mut self, id: EntityId) -> Option<u32> {
        let next = self.last_slot.wrapping_add(1);
        let slot = match self.slots.born.get(next as usize) {
            // A vacant slot's id is stale.
            Some(&born) if born != UNBORN && self.slots.ids.id(next) == id => next,
            _ => self.index.get(id, &self.slots.ids)?,
        };
        self.last_slot = slot;
        Some(slot)
    }

    fn move_entity(&mut self, m: &Move, t: u64) -> Result<(), RejectReason> {
        let slot = self.slot_of(m.id).ok_or(RejectReason::UnknownEntity)?;
        if m.speed < Fix::ZERO {
            return Err(RejectReason::Invalid);
        }
        let cell = self.cell_index(m.pos).ok_or(RejectReason::OutOfBounds)?;
        let e = &mut self.slots.entities[slot as usize];
        e.cur = Motion {
            pos: m.pos,
            dir: m.dir,
            speed: m.speed,
        };
        let shown = &mut self.slots.shown[slot as usize];
        (shown.pos, shown.speed, shown.dir) = (m.pos, m.speed, m.dir);
        if e.cell == cell {
            self.grid.set_pos(slot, m.pos);
        } else {
            let (old, observer, layers) = (e.cell, e.is_observer(), e.layers);
            e.cell = cell;
            self.grid.remove(old, slot, observer);
            self.grid.insert(cell, slot, observer, m.pos, layers);
        }
        let e = &self.slots.entities[slot as usize];
        if e.is_observer() {
            // A new pairing record carries no margin; nor may the view: its
            // keys were measured from where the observer stood.
            self.slots.watchers[slot as usize] = Watcher::of(e, &self.slots.sights[slot as usize]);
            if self.margins.any() {
                self.margins.clear(e.view);
            }
        }
        self.touch(slot, t);
        Ok(())
    }

    fn despawn(&mut self, id: EntityId, t: u64) -> Result<(), RejectReason> {
        let slot = self.slot_of(id).ok_or(RejectReason::UnknownEntity)?;
        let e = self.slots.entities[slot as usize];
        if self.slots.born[slot as usize] < t {
            // It was visible somewhere at the end of last tick, from there.
            match self.gone.len() < self.gone.capacity() {
                true => self.gone.push(Gone {
                    slot,
                    id,
                    layers: e.layers,
                    pos: e.prev.pos,
                    cell: self.slots.prev_cells[slot as usize],
                }),
                false => self.gone_overflowed = true,
            }
        }
        self.grid.remove(e.cell, slot, e.is_observer());
        self.index.remove(id, &self.slots.ids);
        if e.is_observer() {
            // A despawned observer gets no further events: drop its view silently.
            let pairs = PairHasher::new(e.id);
            for k in 0..self.views.slots(e.view).len() {
                let subject = self.slots.ids.old(self.views.slots(e.view)[k]);
                self.sums.remove_pair(&pairs, subject);
            }
            self.views.release(e.view);
            self.margins.clear(e.view);
            self.release_ring(self.slots.sights[slot as usize].ring);
            self.by_id_clean = false;
            self.observer_slots.clear(slot);
            self.observers -= 1;
        }
        self.sums.entities = self.sums.entities.wrapping_sub(e.hash);
        self.slots.vacate(slot);
        self.released.push(slot);
        self.count -= 1;
        Ok(())
    }

    /// Sorts `by_id`, dropping observers no longer alive, so that a tick
    /// rebuilding every view need neither walk the entity table nor sort.
    /// Only the spawns appended since the last sort are sorted, then merged
    /// in: `O(observers + spawned · log spawned)`.
    fn sort_observers(&mut self) {
        if self.by_id_clean {
            return;
        }
        let (ids, observer_slots) = (&self.slots.ids, &self.observer_slots);
        let (mut k, mut head) = (0, 0);
        let sorted = self.by_id_sorted;
        self.by_id.retain(|&(id, slot)| {
            let live = observer_slots.get(slot) && ids.id(slot) == id;
            head += usize::from(live && k < sorted);
            k += 1;
            live
        });
        let (sorted_head, tail) = self.by_id.split_at_mut(head);
        if tail.len() > self.by_id_tail.capacity() {
            // More spawned than the merge has room for: sort them all.
            self.by_id.sort_unstable();
        } else {
            tail.sort_unstable();
            if let (Some(last), Some(first)) = (sorted_head.last(), tail.first()) {
                if last > first {
                    self.by_id_tail.clear();
                    self.by_id_tail.extend_from_slice(tail);
                    merge_back(&mut self.by_id, head, &self.by_id_tail);
                }
            }
        }
        // The same id despawned and spawned again into the same slot.
        self.by_id.dedup();
        self.by_id_clean = true;
        // by_id holds at most an eighth more than max_observers ≤ 2^22.
        self.by_id_sorted = self.by_id.len() as u32;
    }

    fn release_ring(&mut self, ring: u32) {
        self.ring_counts[ring as usize] -= 1;
        while self.max_ring > 0 && self.ring_counts[self.max_ring as usize] == 0 {
            self.max_ring -= 1;
        }
    }

    /// Which path refreshes the view of the observer at `slot` this tick.
    #[inline]
    fn observer_path(&self, slot: u32, t: u64) -> ObserverPath {
        let affected = self.plan.refresh == Refresh::RebuildAll
            || self.stamps.affected[slot as usize] == stamp(t);
        if !affected {
            return match self.plan.updates {
                Updates::Walked => ObserverPath::KeepAndWalk,
                Updates::Paired => ObserverPath::Keep,
            };
        }
        if self.plan.refresh == Refresh::Edit && self.stamps.rebuild[slot as usize] != stamp(t) {
            let view = self.slots.entities[slot as usize].view;
            return match self.margins.any() && self.margins.bounds(view).is_some() {
                true => ObserverPath::EditCulled,
                false => ObserverPath::Edit,
            };
        }
        match self.sweep.keeps(slot) {
            true => ObserverPath::Swept,
            false => ObserverPath::Rebuild,
        }
    }

    /// Refreshes the view of the observer at `slot` by its path this tick
    /// ([`World::observer_path`]). Returns the event count.
    fn refresh_view<S: EventSink>(&mut self, slot: u32, t: u64, sink: &mut S) -> u64 {
        let path = self.observer_path(slot, t);
        if self.views.bounded() {
            // The view may have to be cut to the room the others leave it.
            let view = self.slots.entities[slot as usize].view;
            let room = self.views.room(view);
            if room < self.views.max_view() && self.view_bound(path, slot, view) > room {
                self.hit(Path::ObserverWithinRoom);
                return self.rebuild_within(slot, room as usize, sink);
            }
        }
        match path {
            ObserverPath::Keep => {
                self.views.keep(self.slots.entities[slot as usize].view);
                0
            }
            ObserverPath::KeepAndWalk => {
                self.hit(Path::ObserverWalked);
                self.views.keep(self.slots.entities[slot as usize].view);
                self.send_updates(slot, core::iter::empty(), true, sink)
            }
            ObserverPath::Edit => {
                self.hit(Path::ObserverEdited);
                self.update_view(slot, sink)
            }
            ObserverPath::EditCulled => {
                self.hit(Path::ObserverEditedCulled);
                self.update_culled_view(slot, sink)
            }
            // A view the sweep would have to cull is rebuilt after all.
            ObserverPath::Swept => match self.apply_swept(slot, sink) {
                Some(events) => {
                    self.hit(Path::ObserverSwept);
                    events
                }
                None => {
                    self.hit(Path::SweptButRebuilt);
                    self.rebuild_view(slot, sink)
                }
            },
            ObserverPath::Rebuild => {
                self.hit(match self.plan.rebuild_source {
                    RebuildSource::Lists => Path::ObserverRebuiltFromLists,
                    _ => Path::ObserverRebuiltFromCopy,
                });
                self.rebuild_view(slot, sink)
            }
        }
    }

    /// The most entries the view of the observer at `slot` (`view`) can
    /// hold after this tick by `path`: what a split pass leaves it room
    /// for, and what [`World::refresh_view`] holds against the room
    /// `max_visible` leaves it.
    fn view_bound(&self, path: ObserverPath, slot: u32, view: u32) -> u32 {
        let old = self.views.slots(view).len() as u32;
        let most = self.views.max_view();
        let grows = |n: usize| old.saturating_add(n as u32).min(most);
        match path {
            ObserverPath::Keep | ObserverPath::KeepAndWalk => old,
            // Each pair or change enters at most one subject.
            ObserverPath::Edit => grows(self.pairs.of(slot).len()),
            ObserverPath::Swept => grows(self.sweep.changes_of(slot).len()),
            // A view holds entities of its observer's ring other than
            // the observer.
            ObserverPath::EditCulled | ObserverPath::Rebuild => {
                let (o, sight) = (
                    &self.slots.entities[slot as usize],
                    &self.slots.sights[slot as usize],
                );
                let around = self
                    .grid
                    .members_counted(self.grid.ring(o.cell, sight.ring));
                most.min(u32::try_from(around.saturating_sub(1)).unwrap_or(u32::MAX))
            }
        }
    }

    /// Whether the sweep could take every view this tick, by the config
    /// and how many entities are observers (before this tick's jumps,
    /// spawns and despawns are counted).
    fn sweep_could_run(&self) -> bool {
        self.sweep.possible()
            && plan::sweep_allowed(u64::from(self.observers), u64::from(self.count), None)
    }

    /// Sorts every entity into the squares for tick `t`, recording steps
    /// and sweeping (`sweep.rs`) where the tick allows it: every view
    /// rebuilt (`mark_all`) or swept, no slot taken over, and few enough
    /// spawns, despawns and jumps.
    fn sort_and_sweep<F: Fork + ?Sized>(&mut self, mark_all: bool, t: u64, fork: &F) {
        // Sweeping needs every view to be a function of last tick's
        // positions, and pairs to name subjects by slot.
        let steady = mark_all
            && !self.recheck
            && !self.gone_overflowed
            && self.sweep_could_run()
            && !self.gone.iter().any(|g| self.slots.taken_over(g));
        let Some(squares) = self.squares.as_mut() else {
            return;
        };
        let steps = steady.then_some(Steps {
            before: &self.slots.before,
            within: squares.side(),
            tick: t,
        });
        let (largest, jumped) = squares.sort_entities(&self.grid, &self.slots.born, steps);
        self.plan.sweep = match self.sweep.possible() && mark_all {
            true => SweepOutcome::Declined,
            false => SweepOutcome::Off,
        };
        // Each jump, spawn and despawn costs a look around it.
        let special = u64::from(jumped) + self.gone.len() as u64;
        let (observers, count) = (u64::from(self.observers), u64::from(self.count));
        if steady && plan::sweep_allowed(observers, count, Some(special)) {
            // The sweep walks the live observers by id, and records its
            // changes where pairs would be: this tick edits no view by pairs.
            self.sort_observers();
            self.sweep.borrow_room(self.pairs.lend());
            let scene = Scene {
                slots: &self.slots,
                views: &self.views,
                by_id: &self.by_id,
                gone: &self.gone,
                layers: self.layers,
                max_view: self.config.max_view,
                count: self.count,
                due: self.any_due.then_some(&self.due),
            };
            let swept = match &self.squares {
                Some(squares) => self.sweep.find_changes(squares, &scene, (largest, t), fork),
                None => false,
            };
            if swept {
                self.plan.sweep = SweepOutcome::Swept;
                if self.sweep.due_grouped() {
                    self.hit(Path::SweptDueGrouped);
                }
            }
        }
        match self.plan.sweep {
            SweepOutcome::Off => {}
            SweepOutcome::Declined => self.hit(Path::SweepDeclined),
            SweepOutcome::Swept => self.hit(Path::SweepSwept),
        }
    }

    /// Applies the sweep's changes to the view of the observer at `slot`,
    /// then its margin and its due updates. Returns the event count, or
    /// `None` when the sweep does not keep this view (it must be rebuilt).
    fn apply_swept<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> Option<u64> {
        let edit = ViewEdit {
            slots: &self.slots,
            views: &mut self.views,
            sums: &mut self.sums,
            entered: &mut self.entered,
            max_view: self.config.max_view,
            #[cfg(debug_assertions)]
            rule: RuleTables {
                visibility: self.config.visibility,
                entities: &self.slots.entities,
                sights: &self.slots.sights,
                grid: &self.grid,
            },
        };
        let mut events = self.sweep.edit_view(slot, edit, sink)?;
        let view = self.slots.entities[slot as usize].view;
        if self.margins.any() {
            self.margins.clear(view);
            self.sync_margin(slot, view);
        }
        if self.any_due {
            let entered = self.entered.as_slice().iter().copied();
            events += self.send_updates(slot, entered, true, sink);
        }
        Some(events)
    }

    /// How a touched subject may change views this tick; `None` when it
    /// is not alive. With `cells_only`, a move inside its cell is not a
    /// relocation.
    fn view_change(&self, slot: u32, t: u64, cells_only: bool) -> Option<ViewChange> {
        let s = slot as usize;
        let (e, born, prev_cell) = (
            &self.slots.entities[s],
            self.slots.born[s],
            self.slots.prev_cells[s],
        );
        view_change(e, born, prev_cell, &self.throttle, t, cells_only)
    }

    /// Recomputes one observer's view from its ring of cells and emits the
    /// difference as Leave, Enter and Update events. Returns the event count.
    ///
    /// The old and new views are marked per slot while the view is rebuilt,
    /// and every mark set here is cleared again before returning.
    fn rebuild_view<S: EventSink>(&mut self, slot: u32, sink: &mut S) -> u64 {
        self.rebuild_within(slot, self.config.max_view as usize, sink)
    }

    /// [`World::rebuild_view`], keeping at most `limit` subjects (at most
    /// `max_view`): the nearest, as crowds are culled. A view cut below
    /// `max_view` has the next tick rebuild every view (`capped`).
    fn rebuild_within<S: EventSink>(&mut self, slot: u32, limit: usize, sink: &mut S) -> u64 {
        let Rebuild {
            reach,
            observer,
            view,
            ring,
            around,
        } = self.rebuild_of(slot);
        debug_assert!(self
            .views
            .slots(view)
            .iter()
            .all(|&s| self.slots.ids.churned(s) || self.slots.entities[s as usize].alive));
        let old = self.views.slots(view);
        mark_was(&mut self.marks.slice(), old, &self.slots.ids, &reach);
        self.candidates.clear();
        let source = rebuild_source(
            &self.squares,
            &self.grid,
            &self.packed,
            self.plan.rebuild_source,
        );
        let max_view = limit;
        let cut_short = limit < self.config.max_view as usize;
        // A view that was full most likely still is: rank at once rather
        // than scan first to find out.
        let crowd = self.views.slots(view).len() >= max_view;
        if !crowd {
            source.visit(ring, around, |run| {
                self.candidates.scan(&reach, run, &self.marks);
            });
        }
        let ranked = crowd || self.candidates.len() > max_view + usize::from(reach.everyone);
        if ranked {
            // Crowds only: rank the same runs by dist², select the
            // max_view-th nearest (everyone when there are not more), and
            // break ties at its distance by id. A crowd ranks only within
            // its guess past its last cut-off dist², unless that leaves
            // too few.
            let last = match self.cutoffs[view as usize] {
                NO_CUTOFF => u128::MAX,
                cutoff => u128::from(cutoff),
            };
            let shift = self.guess_shifts[view as usize];
            let guess = if crowd {
                last.saturating_add(last >> shift)
            } else {
                u128::MAX
            };
            // A crowd on one spot (cut off at dist² 0) keeps its cut-off
            // tick after tick: ranking confirms it rather than finds it.
            // Elsewhere a cut-off moves with every step, and trying the
            // last one cost hotspot-10k radius 4% more instructions.
            let hint = (crowd && last == 0).then_some(0);
            let mut missed = false;
            // Counted on the field: `source` borrows the world.
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            self.paths.hit(Path::CrowdRanked);
            for within in [guess, u128::MAX] {
                #[cfg(any(debug_assertions, feature = "path-coverage"))]
                if within != guess {
                    self.paths.hit(Path::CrowdGuessMissed);
                }
                self.ranked.clear(within);
                let (ring, around, by_squares) = self.within_guess(ring, around, within);
                let source = match (&self.squares, by_squares) {
                    (Some(squares), true) => Source::Squares(squares),
                    _ => source,
                };
                source.visit(ring, around, |run| {
                    self.ranked.rank(&reach, run, &self.marks);
                });
                if self.ranked.len() >= max_view || within == u128::MAX {
                    break;
                }
                missed = true;
            }
            if crowd {
                self.guess_shifts[view as usize] = match missed {
                    true => GUESS_WIDE,
                    false => (shift + 1).min(GUESS_NARROW),
                };
            }
            let ids = &self.slots.ids;
            let id_of = |s: u32| ids.id(s);
            let candidates = &mut self.candidates;
            let held = hint.is_some_and(|last| {
                self.ranked
                    .keep_within_last(reach.near, (max_view, last), id_of, candidates)
            });
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            if held {
                self.paths.hit(Path::CrowdCutOffHeld);
            }
            if !held {
                if let Some(cutoff) = self
                    .ranked
                    .keep_nearest(reach.near, max_view, id_of, candidates)
                {
                    self.cutoffs[view as usize] = u64::try_from(cutoff).unwrap_or(NO_CUTOFF);
                }
            }
        }
        // A margin is kept only around a `max_view` cut-off; a view cut
        // shorter is rebuilt next tick anyway.
        self.capped |= ranked && cut_short;
        self.keep_margin(view, &reach, ranked && !cut_short);
        self.entered.clear();
        let mut marks = self.marks.slice();
        self.entered
            .extend_kept(self.candidates.as_slice(), |s| !marks.set_now(s));
        // Slots in id order compare as themselves: a sort of plain
        // integers, without looking ids up.
        let ids = &self.slots.ids;
        self.entered
            .as_mut_slice()
            .sort_unstable_by_key(|&s| ids.key(s));

        // One pass over the old view, in id order: a kept entry (visible
        // before, same incarnation, and after) goes into the new view, merged
        // with `entered` (just sorted); any other gets its Leave. Kept
        // subjects due an update get theirs after the Enters.
        let mut leaves = 0;
        let pairs = PairHasher::new(observer);
        let (mut marks, sums) = (self.marks.slice(), &mut self.sums);
        let entered = self.entered.as_slice();
        let ids = &self.slots.ids;
        self.views.rewrite(view, |old, out| {
            merge_rebuilt(old, entered, out, &mut marks, ids, |s| {
                send_leave(sink, sums, &pairs, ids.old(s));
                leaves += 1;
            })
        });
        self.marks.slice().clear(slot);
        let mut events = leaves;
        for &s in self.entered.as_slice() {
            let id = self.slots.ids.id(s);
            self.marks.slice().clear(s);
            send_enter(
                sink,
                &mut self.sums,
                &pairs,
                id,
                &self.slots.shown[s as usize],
            );
            events += 1;
        }
        if self.any_due {
            // The new view, just written, is still in cache. A view culled
            // (ranked) is walked: culling decides who stays in it.
            let entered = self.entered.as_slice().iter().copied();
            events += self.send_updates(slot, entered, !ranked, sink);
        }
        events
    }

    /// What a rebuild needs of the observer at `slot`, not a copy of its
    /// record.
    pub(super) fn rebuild_of(&self, slot: u32) -> Rebuild {
        let (o, sight) = (
            &self.slots.entities[slot as usize],
            &self.slots.sights[slot as usize],
        );
        // Squares (radius mode) cover the disc of radius r + hysteresis.
        let stay = sight.radius.to_bits() + self.config.hysteresis.to_bits();
        let reach = Reach {
            slot,
            interest: sight.interest,
            x: o.cur.pos.x.to_bits(),
            y: o.cur.pos.y.to_bits(),
            radius: (self.config.visibility == Visibility::Radius)
                .then_some((sight.enter2(), sight.stay2())),
            near: sight.near,
            // Only the loops for grid mode and for radius mode without
            // hysteresis (the common cases) leave the two tests out.
            everyone: match self.config.visibility {
                Visibility::Grid => self.layers.all_of_interest(sight.interest),
                Visibility::Radius => sight.plain_disc(&self.layers),
            },
        };
        Rebuild {
            around: (reach.x, reach.y, stay),
            reach,
            observer: o.id,
            view: o.view,
            ring: self.grid.ring(o.cell, sight.ring),
        }
    }

    /// What a ranking within `within` (`dist²`) needs to visit of an
    /// observer's `ring` and `around` (see `Source::visit`), and whether
    /// grid mode can take it from the squares.
    fn within_guess(
        &self,
        ring: CellRect,
        around: (i64, i64, i64),
        within: u128,
    ) -> (CellRect, (i64, i64, i64), bool) {
        let (x, y, stay) = around;
        let Ok(by) = i64::try_from(within.isqrt()) else {
            return (ring, around, false);
        };
        let c = &self.config;
        let (by, by_squares) = match c.visibility {
            // Radius mode never visits beyond the stay distance anyway.
            Visibility::Radius => (by.min(stay), false),
            // Everything closer than a cell to the observer is in its ring.
            Visibility::Grid => (by, self.plan.crowd_squares && by < c.cell_size.to_bits()),
        };
        let ring = ring.clip(
            axis_span(x, by, c.origin.x, c.cell_size, c.width_cells),
            axis_span(y, by, c.origin.y, c.cell_size, c.height_cells),
        );
        (ring, (x, y, by), by_squares)
    }

    /// Walks an observer's view for its subjects due an update and sends
    /// their Updates, in view (that is, id) order; the subjects at the
    /// slots `entered`, ascending by id, just entered the view and get no
    /// Update. Where the sweep grouped the few due subjects around a view
    /// it keeps ([`Sweep::due_of`]), each of them is looked up in the view
    /// instead. Where the tick lists its few due subjects by cell
    /// (`due_cells.rs`) and the view is the rule's without culling
    /// (`exact`: not ranked in this tick), an observer that stayed in its
    /// cell takes them from the cells around it. Returns the event count.
    pub(super) fn send_updates<S: EventSink>(
        &self,
        slot: u32,
        entered: impl Iterator<Item = u32>,
        exact: bool,
        sink: &mut S,
    ) -> u64 {
        let observer = self.slots.entities[slot as usize].id;
        let mut events = 0;
        if exact && self.due_cells.active() {
            let s = slot as usize;
            let stayed = self.slots.entities[s].cell == self.slots.prev_cells[s]
                && self.slots.born[s] <= self.tick;
            let mut due = heapless::Vec::<u32, 256>::new();
            if stayed
                && self
                    .due_cells
                    .seen_by(slot, &self.grid, &self.slots, &mut due)
            {
                let ids = &self.slots.ids;
                match ids.in_order() {
                    true => due.sort_unstable(),
                    false => due.sort_unstable_by_key(|&s| ids.key(s)),
                }
                for &s in &due {
                    sink.event(self.update(observer, ids.id(s), s));
                }
                // Debug builds: exactly what the walk below would send.
                #[cfg(debug_assertions)]
                {
                    let (mut entered, mut k) = (entered.peekable(), 0);
                    let view = self.views.slots(self.slots.entities[s].view);
                    for &v in view.iter().filter(|&&v| self.due.get(v)) {
                        if !just_entered(&mut entered, ids, v) {
                            debug_assert_eq!(due.get(k), Some(&v), "due by cells, slot {slot}");
                            k += 1;
                        }
                    }
                    debug_assert_eq!(k, due.len(), "due by cells, slot {slot}");
                }
                return due.len() as u64;
            }
        }
        // The entered are in the view, in its order: each is met in turn.
        let mut entered = entered.peekable();
        let view = self.views.slots(self.slots.entities[slot as usize].view);
        let ids = &self.slots.ids;
        if let Some(due) = self.sweep.due_of(slot) {
            // Few are due: look each one up rather than walk the view,
            // unless the view holds them all.
            let held = exact && self.sweep.holds_every_due(slot);
            for &s in due {
                if just_entered(&mut entered, ids, s) {
                    continue;
                }
                debug_assert!(
                    !held || ids.search(view, s).is_ok(),
                    "due {s} held by {slot}"
                );
                if held || ids.search(view, s).is_ok() {
                    sink.event(self.update(observer, ids.id(s), s));
                    events += 1;
                }
            }
            return events;
        }
        // Where a fraction of the subjects is due in no order (those that
        // stopped, under a throttle that spares the movers), a test per
        // entry mispredicts: each run of entries lists its due ones first,
        // without a branch, then sends them (`gathers_due`).
        if !self.gather_due {
            for &s in view {
                if entered.next_if_eq(&s).is_some() {
                    continue;
                }
                if self.due.get(s) {
                    sink.event(self.update(observer, ids.id(s), s));
                    events += 1;
                }
            }
            return events;
        }
        let mut due = [0u32; WALK_RUN];
        for run in view.chunks(WALK_RUN) {
            let mut n = 0;
            for &s in run {
                // n ≤ the entry's place in its run, so the write is in bounds.
                if let Some(at) = due.get_mut(n) {
                    *at = s;
                }
                n += usize::from(self.due.get(s));
            }
            for &s in &due[..n] {
                if !just_entered(&mut entered, ids, s) {
                    sink.event(self.update(observer, ids.id(s), s));
                    events += 1;
                }
            }
        }
        events
    }

    /// The Update event of the subject at `slot`, with its current state.
    #[inline(always)]
    fn update(&self, observer: EntityId, subject: EntityId, slot: u32) -> Event {
        let m = &self.slots.shown[slot as usize];
        Event::Update {
            observer,
            subject,
            pos: m.pos,
            dir: m.dir,
            speed: m.speed,
        }
    }
}

/// Whether the subject at `slot` is among the `entered` (ascending by id,
/// as the view), passing over those before it: for walks that meet only
/// some of the view's entries, in its order.
#[inline(always)]
fn just_entered(
    entered: &mut core::iter::Peekable<impl Iterator<Item = u32>>,
    ids: &SlotIds,
    slot: u32,
) -> bool {
    while entered.next_if(|&e| ids.key(e) < ids.key(slot)).is_some() {}
    entered.next_if_eq(&slot).is_some()
}

/// Entries of a view that [`World::send_updates`] sorts out at a time.
const WALK_RUN: usize = 64;

/// Whether views are walked for their `due` subjects (of `count`) by
/// listing them first: where between a sixteenth and three quarters are
/// due, a test per entry would go either way at random. With nearly all
/// due (a walk at the default throttle) or nearly none, it is predicted.
fn gathers_due(due: u32, count: u32) -> bool {
    let (due, count) = (u64::from(due), u64::from(count));
    16 * due >= count && 4 * due <= 3 * count
}

/// What a rebuild reads of its observer (see [`World::rebuild_of`]).
pub(super) struct Rebuild {
    pub(super) reach: Reach,
    pub(super) observer: EntityId,
    pub(super) view: u32,
    /// Its ring of cells.
    pub(super) ring: CellRect,
    /// Its position and the stay distance around it, raw.
    pub(super) around: (i64, i64, i64),
}

/// Where a tick's rebuilds read the entities around an observer: the
/// world's `squares`, `grid` or `packed` cells, by the plan's `source`.
pub(super) fn rebuild_source<'a>(
    squares: &'a Option<PackedSquares>,
    grid: &'a Grid,
    packed: &'a CellSorted<ScanRecord>,
    source: RebuildSource,
) -> Source<'a> {
    match (squares, source) {
        (Some(squares), RebuildSource::Squares) => Source::Squares(squares),
        (_, RebuildSource::Lists) => Source::Lists(grid),
        _ => Source::Cells(packed),
    }
}

/// How far past its last cut-off `c` (`dist²`) a crowd first ranks, as a
/// shift: within `c + c >> GUESS_NARROW`, about 3% farther. Where that
/// leaves fewer than `max_view` (the crowd moved apart, or its observer
/// away, by more than that in a tick), the crowd ranks again within its
/// whole reach, and its next guesses are `c + c >> GUESS_WIDE` (about 12%
/// farther), narrowing one step a tick while they hold. Measured at
/// dense-cull-50k radius (everyone walking, every view culled, loops
/// aligned): a fixed quarter 198–201 ms a tick, an eighth 192–195, a
/// sixteenth 186–188.
const GUESS_NARROW: u8 = 4;

/// A view's last cut-off when it has none to guess from (see
/// [`World::cutoffs`]): 8 bytes a view, not a 128-bit `dist²`'s 16.
const NO_CUTOFF: u64 = u64::MAX;
const GUESS_WIDE: u8 = 2;

/// Marks the `old` view of the observer `reach` describes as "was
/// visible": old entries still naming the same incarnation. A slot
/// churned this tick holds another incarnation (or none); one churned
/// earlier has left every view that held it, since each such view was
/// rebuilt in the tick its subject was despawned.
pub(super) fn mark_was(marks: &mut MarkSlice<'_>, old: &[u32], ids: &SlotIds, reach: &Reach) {
    // Where the scan keeps the observer itself, it counts as seen
    // already, so it never enters.
    marks.set_was(reach.slot, reach.everyone);
    if !ids.any_churned() {
        for &s in old {
            marks.set_was(s, true);
        }
    } else {
        for &s in old {
            marks.set_was(s, !ids.churned(s));
        }
    }
}

/// One pass over a rebuilt view's `old` entries, in id order: a kept
/// entry (visible before, same incarnation, and after) goes into `out`,
/// merged with `entered` (sorted by id); any other's slot is handed to
/// `leave` (its subject's id is then `ids.old`: the prior one if the slot
/// churned). Clears the old entries' marks; returns the new view's length.
pub(super) fn merge_rebuilt(
    old: &[u32],
    entered: &[u32],
    out: &mut [u32],
    marks: &mut MarkSlice<'_>,
    ids: &SlotIds,
    mut leave: impl FnMut(u32),
) -> usize {
    let mut w = 0;
    let mut put = |slot: u32| {
        // Never short: candidates are capped at max_view.
        if let Some(at) = out.get_mut(w) {
            *at = slot;
            w += 1;
        }
    };
    let mut next = 0;
    for &s in old {
        let kept = marks.kept(s);
        marks.clear(s);
        // Ids are looked up only where needed: for a Leave, and while
        // entered subjects remain to be placed.
        if !kept {
            leave(s);
            continue;
        }
        if next < entered.len() {
            let key = ids.key(s);
            while let Some(&e) = entered.get(next).filter(|&&e| ids.key(e) < key) {
                put(e);
                next += 1;
            }
        }
        put(s);
    }
    for &e in entered.get(next..).unwrap_or(&[]) {
        put(e);
    }
    w
}

/// Merges `tail` (sorted) into `items`, whose first `head` entries are
/// sorted and whose rest has room for `tail`, from the back.
fn merge_back<T: Ord + Copy>(items: &mut [T], head: usize, tail: &[T]) {
    let (mut i, mut j) = (head, tail.len());
    for w in (0..items.len()).rev() {
        let Some(&t) = j.checked_sub(1).and_then(|j| tail.get(j)) else {
            break; // The rest of the head is in place already.
        };
        match i.checked_sub(1).map(|i| items[i]) {
            Some(h) if h > t => {
                items[w] = h;
                i -= 1;
            }
            _ => {
                items[w] = t;
                j -= 1;
            }
        }
    }
}

/// Restore support: rebuilding internal structures from canonical state.
impl World {
    /// Every live entity with its sent record and view, in slot order.
    pub(crate) fn live_entities(
        &self,
    ) -> impl Iterator<Item = (EntityState, Option<Sent>, Vec<EntityId>)> + '_ {
        self.live().map(|(e, sight)| {
            let view = if e.is_observer() {
                let ids = self.views.slots(e.view).iter();
                ids.map(|&s| self.slots.ids.id(s)).collect()
            } else {
                Vec::new()
            };
            (state_of(e, sight), e.sent(), view)
        })
    }

    /// Inserts a restored entity as if it had existed before tick 1.
    pub(crate) fn restore_entity(&mut self, s: &Spawn, sent: Option<Sent>) -> bool {
        // Tick 0 never runs, so the touched stamp (also 0) keeps it off the touched list.
        if self.spawn(s, 0).is_err() {
            return false;
        }
        let Some(slot) = self.index.get(s.id, &self.slots.ids) else {
            return false;
        };
        let e = &mut self.slots.entities[slot as usize];
        e.set_sent(sent);
        (e.hash, self.slots.heads[slot as usize]) =
            e.digest_term(&self.slots.sights[slot as usize]);
        self.sums.entities = self.sums.entities.wrapping_add(e.hash);
        if e.sent().map(|s| s.motion) != Some(e.cur) {
            self.pending.push(slot);
        }
        true
    }

    /// Sets a restored observer's view; false if it is not a valid view.
    pub(crate) fn restore_view(&mut self, id: EntityId, view: &[EntityId]) -> bool {
        let Some(slot) = self.index.get(id, &self.slots.ids) else {
            return false;
        };
        let (e, sight) = (
            self.slots.entities[slot as usize],
            self.slots.sights[slot as usize],
        );
        if !e.is_observer() {
            return view.is_empty();
        }
        let room = self.views.capacity() - self.views.held();
        if view.len() > self.config.max_view as usize
            || view.len() > room as usize
            || view.windows(2).any(|w| w[0] >= w[1])
            || view.contains(&id)
        {
            return false;
        }
        self.candidates.clear();
        for &subject in view {
            let Some(s) = self.index.get(subject, &self.slots.ids) else {
                return false;
            };
            // Only a subject the rule could show may be in the view (in
            // the hysteresis band, it was visible), and only one inside
            // the observer's ring: one outside would never be revisited.
            let sub = &self.slots.entities[s as usize];
            let in_ring = self.grid.cell_distance(e.cell, sub.cell) <= sight.ring;
            if !in_ring || self.rule_zone(slot, s) == Zone::Out {
                return false;
            }
            self.candidates.push_if(s, true);
        }
        let pairs = PairHasher::new(id);
        for &subject in view {
            self.sums.add_pair(&pairs, subject);
        }
        let slots: Vec<u32> = self.candidates.as_slice().to_vec();
        self.views.set(e.view, &slots);
        true
    }

    /// Rebuilds every view in the restored state: `Err` names the first
    /// observer whose view that changes, as it would not had the view been
    /// the rule applied at the end of a tick. Where `max_visible` bounds
    /// the views, a view below `max_view` may have been cut to the room
    /// the others left it, which the state no longer tells: it is checked
    /// to be the nearest of its candidates, as many as it holds.
    pub(crate) fn check_views(&mut self) -> Result<(), EntityId> {
        self.sort_observers();
        let bounded = self.views.bounded();
        for k in 0..self.by_id.len() {
            let (id, slot) = self.by_id[k];
            let held = self
                .views
                .slots(self.slots.entities[slot as usize].view)
                .len();
            let limit = match bounded {
                true => held,
                false => self.config.max_view as usize,
            };
            if self.rebuild_within(slot, limit, &mut CountingSink::default()) > 0 {
                return Err(id);
            }
        }
        Ok(())
    }

    pub(crate) fn finish_restore(&mut self, tick: u64) {
        // Whether some view was cut to its room is not in the state: the
        // first tick rebuilds every view, which is always right.
        self.capped = self.views.bounded();
        self.slots.ids.end_tick();
        self.tick = tick;
        // No tick to come may read a stamp from before the restore.
        self.stamps.restart(tick);
        self.digest = self.compute_digest();
    }
}

impl World {
    /// What the rule reads, borrowed apart from the rest of the world.
    pub(crate) fn rule_tables(&self) -> RuleTables<'_> {
        RuleTables {
            visibility: self.config.visibility,
            entities: &self.slots.entities,
            sights: &self.slots.sights,
            grid: &self.grid,
        }
    }

    /// Where the subject at `subject` stands in the rule of the observer
    /// at `observer`, both live.
    pub(crate) fn rule_zone(&self, observer: u32, subject: u32) -> Zone {
        self.rule_tables().zone(observer, subject)
    }
}
