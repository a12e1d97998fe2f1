//! Per-connection bandwidth budget and update priority (the BigWorld witness).
//!
//! A connection with a budget ([`ServerConfig::budget_bytes_per_sec`]) gets,
//! each tick, an allowance of `budget × tick_interval` bytes (the fraction of
//! a byte carried to the next tick, so the long-run rate is exact). Every
//! byte the server sends the client — tick batches, resent parts, Pongs,
//! acknowledgements, the seal's tag — is charged against it when sent. What
//! was overspent (the *deficit*) is carried over and comes off the next
//! allowance, as in BigWorld's witness; what is left unspent is carried
//! over only up to one packet (the MTU), so that a budget too small for an
//! Update in a single tick still sends one now and then, but a quiet
//! spell never saves up a burst. Over any `n` consecutive ticks the server
//! therefore sends at most `n` allowances, plus one packet, plus the
//! deficit it ends with; and it ends with a deficit only when what must go
//! (below) overran the allowance.
//!
//! Each tick the connection's batch carries, in the kernel's order:
//! - every rejection, Leave and Enter of the tick, always: they change what
//!   the client sees, so they are never dropped, delayed or reordered, and
//!   when they alone exceed the allowance they still go and the deficit
//!   records it ([`BudgetStats::overrun_ticks`]);
//! - then Updates, chosen by priority until the allowance is spent.
//!
//! **Priority.** For each visible subject the connection keeps the newest
//! state the kernel reported (its *target*: the Enter, then each Update)
//! and the state the client will hold once it has applied everything sent
//! (*sent*). A subject is *stale* while the two differ. When every stale
//! subject's Update fits the bytes left, all are sent. Otherwise each stale
//! subject's priority first grows by its nearness weight
//!
//! ```text
//! n = c²,  m = c² + d²                  (u128, saturating)
//! s = max(0, bits(m) − 56)              (bits: position of the highest set bit, 1-based)
//! w = 1 + (255 · (n >> s)) / max(1, m >> s)
//! ```
//!
//! where `c` is the world's cell size and `d` the distance from the
//! observer to the subject's target position, both as raw I48F16 values
//! (the shift, zero closer than about 4 000 units with cells of 100, keeps
//! the division in 64 bits): 256 at the observer's feet, 128 one cell
//! away, 26 at three cells, 3 at ten. Then stale subjects are taken
//! highest priority first (ties: lower id first) while their Update fits
//! the bytes left; a taken subject is sent its target — the newest state,
//! whatever states it went through while it waited are never sent — and
//! its priority drops to zero. A subject nothing changed for is never sent
//! an Update. The rule reads no clock and
//! no float, and depends only on the kernel's events, the observer's
//! position and the bytes already sent, so it is deterministic. When the
//! host does not say where the observer is, every weight is 1: the stalest
//! subject goes first.
//!
//! Once subjects stop moving, the kernel reports their final states and
//! nothing becomes stale again; every tick grants at least
//! [`MIN_BUDGET_PER_TICK`] bytes (a smaller budget is refused), room for an
//! Update beside an empty tick's packet, so the stale subjects are sent
//! one after another and the client holds every exact state after a
//! bounded number of ticks for a given budget and view; `cargo bench -p
//! lockgrid-protocol --bench budget` measures how many.
//!
//! **Loss.** Before a lost part goes again, the Updates in it that a newer
//! state superseded and that nothing sent later depends on are dropped
//! (see `Pacer::resend_keeps`): a resend never takes the client back to a
//! stale state. What the client holds of such a subject is then uncertain
//! (the first copy may still arrive), so its next Update is a *reset* —
//! its whole state, absolute — sent in the next tick ahead of every other
//! Update and whatever the allowance has left, as the part would have gone.

use alloc::vec::Vec;
use core::time::Duration;

use lockgrid_kernel::{Dir, EntityId, Event, Fix, Pos};

use crate::batch::EMPTY_PART_LEN;
use crate::config::TICK_BATCH_OVERHEAD;
use crate::packet::HEADER_LEN;
use crate::seal::SEAL_OVERHEAD;
use crate::wire::{varint_len, zigzag};
#[cfg(doc)]
use crate::ServerConfig;

/// Weight of a subject at distance 0; the weight halves at one cell.
const NEAR_WEIGHT: u128 = 255;

/// Fewest bytes a budget must grant per tick: a sealed packet holding an
/// empty tick (header, TickBatch frame, four empty sections, tag) and the
/// largest Update item beside it. A smaller budget could never send an
/// Update, so [`ServerConfig::validate`] refuses it.
pub const MIN_BUDGET_PER_TICK: usize =
    HEADER_LEN + TICK_BATCH_OVERHEAD + SEAL_OVERHEAD + EMPTY_PART_LEN + MAX_UPDATE_ITEM;

/// The largest Update item: a two-byte head (gaps up to 2¹¹), two 64-bit
/// position deltas, a heading delta and a 64-bit speed delta.
const MAX_UPDATE_ITEM: usize = 2 + 10 + 10 + 3 + 10;

/// Counters and state of one connection's budget, from
/// [`Server::budget_stats`](crate::Server::budget_stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// The budget, in bytes per second.
    pub bytes_per_sec: u32,
    /// Bytes overspent and not yet paid back by later allowances (0 when
    /// within budget).
    pub deficit: u64,
    /// Ticks whose rejections, Leaves and Enters alone did not fit what the
    /// allowance left: they were sent anyway, into deficit.
    pub overrun_ticks: u64,
    /// Updates sent.
    pub updates_sent: u64,
    /// Sum over ticks of the stale subjects left for a later tick.
    pub updates_deferred: u64,
    /// Updates sent as resets (the whole state, absolute): those of a
    /// subject whose last Update was unacknowledged or dropped.
    pub resets_sent: u64,
    /// Updates dropped from lost parts before they were sent again (their
    /// subjects' newest states were sent in later ticks instead).
    pub updates_superseded: u64,
    /// Visible subjects whose newest state the client has not been sent.
    pub stale_now: u32,
    /// The longest any visible subject has been stale, in ticks: the tick
    /// now minus the last tick at which what was sent matched the kernel's
    /// newest state (0 when nothing is stale).
    pub max_staleness: u64,
}

impl BudgetStats {
    /// Adds another connection's figures: counters and stale subjects
    /// summed, the largest deficit and staleness kept.
    pub(crate) fn absorb(&mut self, o: &BudgetStats) {
        self.deficit = self.deficit.max(o.deficit);
        self.overrun_ticks += o.overrun_ticks;
        self.updates_sent += o.updates_sent;
        self.updates_deferred += o.updates_deferred;
        self.resets_sent += o.resets_sent;
        self.updates_superseded += o.updates_superseded;
        self.stale_now += o.stale_now;
        self.max_staleness = self.max_staleness.max(o.max_staleness);
    }
}

/// Movable state of a subject, what an Update carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    pos: Pos,
    dir: Dir,
    speed: Fix,
}

/// What the connection knows of one visible subject.
/// Bytes a pacer keeps for each subject of the view.
pub(crate) const TRACK_BYTES: usize = core::mem::size_of::<Track>();

#[derive(Clone, Copy, Debug)]
struct Track {
    id: EntityId,
    /// The newest state the kernel reported.
    target: State,
    /// The state the client holds once it applied everything sent.
    sent: State,
    /// Accumulated priority while stale; zero when sent.
    priority: u64,
    /// First tick of the current staleness; 0 while not stale.
    stale_since: u64,
    /// The tick of its Enter.
    entered: u64,
    /// The tick and part that carried its last Update.
    last: (u64, u16),
    /// Whether what the client holds is uncertain: an Update was dropped
    /// from a part sent again, and the first copy may yet arrive.
    unsure: bool,
}

impl Track {
    fn fresh(id: EntityId, s: State, entered: u64) -> Track {
        Track {
            id,
            entered,
            target: s,
            sent: s,
            priority: 0,
            stale_since: 0,
            last: (0, 0),
            unsure: false,
        }
    }

    fn stale(&self) -> bool {
        self.unsure || self.target != self.sent
    }

    /// Bytes of its next Update, but for the head's gap: a reset when what
    /// the client holds is uncertain, else a delta.
    fn body(&self) -> usize {
        if self.unsure {
            reset_body(&self.target)
        } else {
            update_body(&self.sent, &self.target)
        }
    }
}

/// Bytes per tick granted by a budget, with the deficit carried over.
#[derive(Clone, Debug)]
struct Allowance {
    bytes_per_sec: u32,
    tick_us: u128,
    /// Millionths of a byte granted but not yet whole.
    frac: u128,
    /// Bytes left this tick; negative is a deficit.
    level: i64,
    /// Most unspent bytes carried into the next tick.
    carry: i64,
}

impl Allowance {
    fn new(bytes_per_sec: u32, tick: Duration, carry: usize) -> Allowance {
        Allowance {
            bytes_per_sec,
            tick_us: tick.as_micros(),
            frac: 0,
            level: 0,
            carry: i64::try_from(carry).unwrap_or(i64::MAX),
        }
    }

    /// Starts a tick: keeps a deficit and at most `carry` of a surplus,
    /// grants one tick's bytes.
    fn refill(&mut self) -> i64 {
        let num = self.frac + u128::from(self.bytes_per_sec) * self.tick_us;
        self.frac = num % 1_000_000;
        let whole = i64::try_from(num / 1_000_000).unwrap_or(i64::MAX);
        self.level = self.level.min(self.carry).saturating_add(whole);
        self.level
    }
}

/// One connection's budget and update priorities.
///
/// A [`Pacer`]'s working vectors for one tick, which a server keeps once
/// and lends to each connection ([`Pacer::trade_scratch`]).
#[derive(Debug, Default)]
pub(crate) struct PacerScratch {
    order: Vec<u128>,
    picked: Vec<u32>,
    resets: Vec<EntityId>,
}

impl PacerScratch {
    /// Room for a view of `view` subjects: every one stale and picked.
    pub(crate) fn with_room(view: usize) -> PacerScratch {
        PacerScratch {
            order: Vec::with_capacity(view),
            picked: Vec::with_capacity(view),
            resets: Vec::with_capacity(view),
        }
    }
}

/// Its tracks mirror the server's shadow of the client's view (same ids,
/// same order), so a track's index is the subject's index in the view
/// after the tick's Leaves and Enters, which is what the Update encoding
/// refers to. Every buffer is kept between ticks: once the view has been
/// as large as it gets, a tick allocates nothing here.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    allowance: Allowance,
    tracks: Vec<Track>,
    /// Stale tracks as `!priority << 64 | index`: sorted, priority order
    /// (ties by index, which is by id: tracks are sorted by id).
    order: Vec<u128>,
    /// How many of `order` are taken this tick.
    taken: usize,
    /// Indices of the tracks taken, ascending.
    picked: Vec<u32>,
    /// Subjects of this tick's Updates that are resets, ascending.
    resets: Vec<EntityId>,
    stats: BudgetStats,
}

/// Encoded size of an Update from `old` to `new`, but for its head's gap.
fn update_body(old: &State, new: &State) -> usize {
    let mut n = 0;
    if new.pos != old.pos {
        n += varint_len(zigzag(
            new.pos.x.to_bits().wrapping_sub(old.pos.x.to_bits()),
        ));
        n += varint_len(zigzag(
            new.pos.y.to_bits().wrapping_sub(old.pos.y.to_bits()),
        ));
    }
    if new.dir != old.dir {
        n += varint_len(zigzag(i64::from(new.dir.wrapping_sub(old.dir) as i16)));
    }
    if new.speed != old.speed {
        n += varint_len(zigzag(
            new.speed.to_bits().wrapping_sub(old.speed.to_bits()),
        ));
    }
    n
}

/// Encoded size of a reset to `s`, but for its head.
fn reset_body(s: &State) -> usize {
    varint_len(zigzag(s.pos.x.to_bits()))
        + varint_len(zigzag(s.pos.y.to_bits()))
        + varint_len(u64::from(s.dir))
        + varint_len(zigzag(s.speed.to_bits()))
}

/// An upper bound of the bytes the rejections, Leaves and Enters of
/// `events` take in a part, section counts included, for a view of
/// `view_len` subjects before the tick.
pub(crate) fn membership_bytes(events: &[Event], view_len: usize) -> usize {
    let (mut n, mut counts) = (0usize, [0u64; 4]);
    let mut prev: Option<(EntityId, i64, i64)> = None;
    for e in events {
        match *e {
            Event::Rejected { entity, .. } => {
                counts[0] += 1;
                n += varint_len(entity) + 1;
            }
            Event::Leave { .. } => {
                counts[1] += 1;
                n += varint_len(view_len as u64);
            }
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                layers,
                ..
            } => {
                counts[2] += 1;
                let (x, y) = (pos.x.to_bits(), pos.y.to_bits());
                let (id, px, py) = match prev {
                    Some((p, px, py)) => (subject.wrapping_sub(p).wrapping_sub(1), px, py),
                    None => (subject, 0, 0),
                };
                n += varint_len(id)
                    + varint_len(zigzag(x.wrapping_sub(px)))
                    + varint_len(zigzag(y.wrapping_sub(py)))
                    + varint_len(u64::from(dir))
                    + varint_len(zigzag(speed.to_bits()))
                    + varint_len(u64::from(layers));
                prev = Some((subject, x, y));
            }
            Event::Update { .. } => {}
        }
    }
    n + counts.iter().map(|&c| varint_len(c)).sum::<usize>()
}

/// The nearness weight of a subject at `at` for an observer at `from`
/// (1 when the observer's position is unknown).
fn weight(from: Option<Pos>, at: Pos, cell: i64) -> u64 {
    let Some(from) = from else {
        return 1;
    };
    let dx = i128::from(at.x.to_bits()) - i128::from(from.x.to_bits());
    let dy = i128::from(at.y.to_bits()) - i128::from(from.y.to_bits());
    // |d| < 2^65, so d² < 2^130 would overflow: saturate the far field.
    let d2 = (dx.unsigned_abs().saturating_mul(dx.unsigned_abs()))
        .saturating_add(dy.unsigned_abs().saturating_mul(dy.unsigned_abs()));
    let c = u128::from(cell.unsigned_abs());
    let c2 = c.saturating_mul(c);
    let den = c2.saturating_add(d2).max(1);
    // 128-bit division is a library call, ten times a 64-bit one: scale
    // both terms down until they fit 56 bits (the ratio barely moves), so
    // that in a world of ordinary size the weight costs a u64 division.
    let shift = (128 - den.leading_zeros()).saturating_sub(56);
    let (num, den) = ((c2 >> shift) as u64, ((den >> shift) as u64).max(1));
    1 + (NEAR_WEIGHT as u64 * num) / den
}

impl Pacer {
    /// A pacer for `bytes_per_sec`, ticking every `tick`, carrying at
    /// most `carry` unspent bytes (one packet) into the next tick.
    /// A pacer with room for `view` tracks (a view of up to that many
    /// subjects never grows it).
    pub(crate) fn new(bytes_per_sec: u32, tick: Duration, carry: usize, view: usize) -> Pacer {
        Pacer {
            allowance: Allowance::new(bytes_per_sec, tick, carry),
            tracks: Vec::with_capacity(view),
            order: Vec::new(),
            taken: 0,
            picked: Vec::new(),
            resets: Vec::new(),
            stats: BudgetStats {
                bytes_per_sec,
                ..BudgetStats::default()
            },
        }
    }

    /// Trades this pacer's working vectors (the stale tracks' order, the
    /// picks, the tick's resets) with `lent`: a server lends one set to
    /// each connection in turn, for one tick's choice and encoding.
    pub(crate) fn trade_scratch(&mut self, lent: &mut PacerScratch) {
        core::mem::swap(&mut self.order, &mut lent.order);
        core::mem::swap(&mut self.picked, &mut lent.picked);
        core::mem::swap(&mut self.resets, &mut lent.resets);
    }

    /// Charges bytes sent to the client.
    pub(crate) fn charge(&mut self, bytes: usize) {
        let b = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.allowance.level = self.allowance.level.saturating_sub(b);
    }

    /// Starts tick `tick`: grants its allowance and returns it (negative
    /// while a deficit outweighs it).
    pub(crate) fn refill(&mut self) -> i64 {
        self.allowance.refill()
    }

    /// Takes in this observer's view events of `tick` (Leaves, Enters,
    /// Updates in contract order): membership follows the Leaves and
    /// Enters, targets follow Enters and Updates.
    pub(crate) fn observe(&mut self, tick: u64, events: &[Event]) {
        let leaves = events.partition_point(|e| matches!(e, Event::Leave { .. }));
        let enters =
            leaves + events[leaves..].partition_point(|e| matches!(e, Event::Enter { .. }));
        let (leave, rest) = events.split_at(leaves);
        let (enter, update) = rest.split_at(enters - leaves);
        if !leave.is_empty() {
            // Leaves ascend, as the tracks do: one pass.
            let mut li = leave.iter().filter_map(leave_id).peekable();
            self.tracks.retain(|t| li.next_if(|&l| l == t.id).is_none());
        }
        if !enter.is_empty() {
            // Merged in place from the back: no second buffer. An id that
            // left this tick is gone already, so its Enter is a new track.
            let old = self.tracks.len();
            let mut entering = enter
                .iter()
                .filter_map(|e| enter_track(e, tick))
                .rev()
                .peekable();
            let added = enter.len();
            if let Some(&first) = entering.peek() {
                self.tracks.resize(old + added, first);
            }
            let (mut r, mut w) = (old, old + added);
            while let Some(en) = entering.peek().copied() {
                w -= 1;
                match r.checked_sub(1).and_then(|i| self.tracks.get(i)).copied() {
                    Some(t) if t.id > en.id => {
                        self.tracks[w] = t;
                        r -= 1;
                    }
                    _ => {
                        self.tracks[w] = en;
                        entering.next();
                    }
                }
            }
        }
        let mut k = 0;
        for e in update {
            if let Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } = *e
            {
                while self.tracks.get(k).is_some_and(|t| t.id < subject) {
                    k += 1;
                }
                if let Some(t) = self.tracks.get_mut(k).filter(|t| t.id == subject) {
                    t.target = State { pos, dir, speed };
                }
            }
        }
        let (mut stale, mut oldest) = (0u32, tick);
        for t in self.tracks.iter_mut() {
            if !t.stale() {
                t.priority = 0;
                t.stale_since = 0;
                continue;
            }
            if t.stale_since == 0 {
                t.stale_since = tick;
            }
            stale += 1;
            oldest = oldest.min(t.stale_since);
        }
        self.stats.stale_now = stale;
        self.stats.max_staleness = if stale == 0 { 0 } else { tick + 1 - oldest };
    }

    /// Chooses the Updates of this tick: stale subjects by priority while
    /// they fit `room` bytes of update section (its count excluded), and
    /// writes them to `out` in ascending subject order as Update events for
    /// `observer`, each carrying the subject's newest state. `at` is where
    /// the observer is, if known, and `cell` the raw cell size: the unit
    /// of nearness.
    ///
    /// When every stale subject fits, all go and no priority is needed:
    /// priorities grow (each stale subject by its weight) only on ticks
    /// where some must wait, which orders them the same way.
    pub(crate) fn choose(
        &mut self,
        observer: EntityId,
        room: i64,
        at: Option<Pos>,
        cell: i64,
        out: &mut Vec<Event>,
    ) {
        self.order.clear();
        // The exact bytes of sending every stale subject.
        let (mut all, mut next) = (0i64, 0u64);
        for (i, t) in self.tracks.iter().enumerate() {
            if t.stale() {
                let gap = i as u64 - next;
                all += (varint_len(gap << 3 | 7) + t.body()) as i64;
                next = i as u64 + 1;
                self.order.push(i as u128);
            }
        }
        self.picked.clear();
        if all <= room {
            // Everything fits: no order needed (`order` is by index already).
            self.taken = self.order.len();
            self.picked.extend(self.order.iter().map(|&o| o as u32));
        } else {
            for o in self.order.iter_mut() {
                if let Some(t) = self.tracks.get_mut(*o as usize) {
                    t.priority = t.priority.saturating_add(weight(at, t.target.pos, cell));
                    *o |= u128::from(!t.priority) << 64;
                }
            }
            self.order.sort_unstable();
            // Optimistically a one-byte head; the exact size is settled below.
            let mut left = room;
            self.taken = 0;
            for &o in &self.order {
                let t = &self.tracks[o as u32 as usize];
                let cost = 1 + t.body() as i64;
                // A reset standing in for an Update dropped from a resent
                // part goes whatever is left, as the part would have.
                if cost > left && !t.unsure {
                    break;
                }
                left -= cost;
                self.taken += 1;
            }
            self.picked
                .extend(self.order[..self.taken].iter().map(|&o| o as u32));
            self.picked.sort_unstable();
            // Drop the lowest-priority picks until the exact size fits (the
            // resets first in line stay).
            while self.taken > 0 && self.exact_bytes() as i64 > room {
                let last = self.order[self.taken - 1] as u32;
                if self.tracks[last as usize].unsure {
                    break;
                }
                self.taken -= 1;
                if let Ok(k) = self.picked.binary_search(&last) {
                    self.picked.remove(k);
                }
            }
        }
        self.stats.updates_deferred += (self.order.len() - self.taken) as u64;
        self.stats.updates_sent += self.taken as u64;
        self.resets.clear();
        // Room for every pick: grows only while the picks do.
        self.resets.reserve(self.picked.len());
        for &i in &self.picked {
            let Some(t) = self.tracks.get_mut(i as usize) else {
                continue;
            };
            if t.unsure {
                self.resets.push(t.id);
            }
            t.sent = t.target;
            t.priority = 0;
            t.unsure = false;
            out.push(Event::Update {
                observer,
                subject: t.id,
                pos: t.target.pos,
                dir: t.target.dir,
                speed: t.target.speed,
            });
        }
        self.stats.stale_now -= self.taken as u32;
        self.stats.resets_sent += self.resets.len() as u64;
    }

    /// The subjects whose Update [`choose`](Self::choose) made a reset,
    /// ascending.
    pub(crate) fn resets(&self) -> &[EntityId] {
        &self.resets
    }

    /// Part `part` of `tick` carries Updates of `subjects` (ascending).
    pub(crate) fn sent_in(&mut self, tick: u64, part: u16, subjects: &[EntityId]) {
        let mut k = 0;
        for &id in subjects {
            k += self.tracks[k..].partition_point(|t| t.id < id);
            if let Some(t) = self.tracks.get_mut(k).filter(|t| t.id == id) {
                t.last = (tick, part);
            }
        }
    }

    /// Whether the Update of `subject` that part `part` of `tick` carried,
    /// now lost, goes again with the part. It is dropped only when it was
    /// the last Update sent of a subject still visible and the subject has
    /// changed since: then nothing sent depends on it and it is stale. It
    /// stays when it is still the newest state, or when a later Update was
    /// sent (which may be a delta from it: the newer state is on its way
    /// right behind it), or when the subject left (Updates sent before the
    /// Leave may be deltas from it).
    pub(crate) fn resend_keeps(&self, tick: u64, part: u16, subject: EntityId) -> bool {
        self.track(subject)
            .is_none_or(|t| t.entered > tick || t.last != (tick, part) || t.target == t.sent)
    }

    /// The Update of `subject` in part `part` of `tick`, which was lost, is
    /// dropped before the part goes again. Where it was the subject's last
    /// Update, the client will hold either the state before it or (should
    /// the first copy arrive after all) the state it carried: the subject
    /// is stale until a reset reaches it.
    pub(crate) fn superseded(&mut self, tick: u64, part: u16, subject: EntityId) {
        self.stats.updates_superseded += 1;
        let Ok(k) = self.tracks.binary_search_by_key(&subject, |t| t.id) else {
            return;
        };
        let t = &mut self.tracks[k];
        if t.last == (tick, part) && !t.unsure {
            if !t.stale() {
                self.stats.stale_now += 1;
            }
            t.unsure = true;
            // Its reset goes in the next tick, ahead of every other Update
            // and whatever the budget has left, as the lost part would have:
            // dropping a stale state must not leave the client further
            // behind than resending it would.
            t.priority = u64::MAX;
        }
    }

    fn track(&self, id: EntityId) -> Option<&Track> {
        self.tracks
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .and_then(|k| self.tracks.get(k))
    }

    /// Exact bytes of the picked Updates, heads included.
    fn exact_bytes(&self) -> usize {
        let mut next = 0u64;
        let mut n = 0;
        for &i in &self.picked {
            let t = &self.tracks[i as usize];
            let gap = u64::from(i) - next;
            n += varint_len(gap << 3 | 7) + t.body();
            next = u64::from(i) + 1;
        }
        n
    }

    /// Records that the tick's rejections, Leaves and Enters alone did not fit.
    pub(crate) fn overran(&mut self) {
        self.stats.overrun_ticks += 1;
    }

    /// Number of visible subjects.
    pub(crate) fn view_len(&self) -> usize {
        self.tracks.len()
    }

    /// The counters, with the current deficit.
    pub(crate) fn stats(&self) -> BudgetStats {
        BudgetStats {
            deficit: self.allowance.level.min(0).unsigned_abs(),
            ..self.stats
        }
    }
}

fn leave_id(e: &Event) -> Option<EntityId> {
    match *e {
        Event::Leave { subject, .. } => Some(subject),
        _ => None,
    }
}

fn enter_track(e: &Event, tick: u64) -> Option<Track> {
    match *e {
        Event::Enter {
            subject,
            pos,
            dir,
            speed,
            ..
        } => Some(Track::fresh(subject, State { pos, dir, speed }, tick)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(subject: EntityId, x: i32) -> Event {
        Event::Update {
            observer: 1,
            subject,
            pos: Pos::from_ints(x, 0),
            dir: 0,
            speed: Fix::ZERO,
        }
    }

    fn enter(subject: EntityId, x: i32) -> Event {
        Event::Enter {
            observer: 1,
            subject,
            pos: Pos::from_ints(x, 0),
            dir: 0,
            speed: Fix::ZERO,
            layers: 1,
        }
    }

    const CELL: i64 = 100 << 16;
    const ORIGIN: Option<Pos> = Some(Pos {
        x: Fix::ZERO,
        y: Fix::ZERO,
    });

    #[test]
    fn a_surplus_is_carried_up_to_a_packet_and_a_deficit_in_full() {
        // 1000 B/s at 20 Hz: 50 bytes a tick.
        let mut p = Pacer::new(1000, Duration::from_millis(50), 0, 0);
        assert_eq!(p.refill(), 50);
        assert_eq!(p.refill(), 50, "an unspent tick does not accumulate");
        let mut q = Pacer::new(1000, Duration::from_millis(50), 120, 0);
        assert_eq!(q.refill(), 50);
        assert_eq!(q.refill(), 100);
        assert_eq!(q.refill(), 150);
        assert_eq!(q.refill(), 170, "at most 120 carried");
        p.charge(170);
        assert_eq!(p.stats().deficit, 120);
        assert_eq!(p.refill(), -70);
        assert_eq!(p.refill(), -20);
        assert_eq!(p.refill(), 30);
    }

    #[test]
    fn fractions_of_a_byte_add_up_exactly() {
        // 1 B/s at 30 Hz: 33 333 µs a tick, one byte every 30 ticks.
        let mut p = Pacer::new(1, Duration::from_micros(33_334), 0, 0);
        let mut granted = 0;
        for _ in 0..3000 {
            let l = p.refill();
            granted += l;
            p.charge(l.max(0) as usize);
        }
        assert_eq!(granted, 100);
    }

    #[test]
    fn nearer_weighs_more_and_unknown_weighs_one() {
        let o = Some(Pos::from_ints(0, 0));
        let w = |x| weight(o, Pos::from_ints(x, 0), CELL);
        assert_eq!(w(0), 256);
        assert_eq!(w(100), 128);
        assert!(w(300) > w(1000) && w(1000) >= 1);
        assert_eq!(weight(None, Pos::from_ints(7, 0), CELL), 1);
        // Extreme coordinates saturate instead of overflowing.
        let far = Pos::new(Fix::MAX, Fix::MIN);
        assert_eq!(weight(Some(Pos::new(Fix::MIN, Fix::MAX)), far, CELL), 1);
    }

    #[test]
    fn nearest_stale_goes_first_and_only_the_newest_state() {
        let mut p = Pacer::new(1000, Duration::from_millis(50), 0, 0);
        let mut out = Vec::new();
        p.observe(1, &[enter(2, 10), enter(3, 500), enter(4, 50)]);
        p.choose(1, 100, ORIGIN, CELL, &mut out);
        assert!(out.is_empty(), "nothing changed since the Enters");
        // All three move; room for one update only.
        p.observe(2, &[upd(2, 11), upd(3, 501), upd(4, 51)]);
        p.choose(1, 6, ORIGIN, CELL, &mut out);
        assert_eq!(out, [upd(2, 11)]);
        out.clear();
        // 4 moves again before it was sent: only its newest state goes.
        p.observe(3, &[upd(4, 60)]);
        p.choose(1, 6, ORIGIN, CELL, &mut out);
        assert_eq!(out, [upd(4, 60)]);
        out.clear();
        assert_eq!(p.stats().stale_now, 1);
        assert_eq!(p.stats().max_staleness, 2, "3 last matched at tick 1");
        // The far one waited longest and is taken now.
        p.observe(4, &[]);
        p.choose(1, 100, ORIGIN, CELL, &mut out);
        assert_eq!(out, [upd(3, 501)]);
        assert_eq!(p.stats().stale_now, 0);
    }

    #[test]
    fn a_subject_that_left_and_came_back_is_a_new_track() {
        let mut p = Pacer::new(1000, Duration::from_millis(50), 0, 0);
        let mut out = Vec::new();
        p.observe(1, &[enter(2, 10), enter(5, 10)]);
        p.observe(2, &[upd(2, 20)]);
        let leave = Event::Leave {
            observer: 1,
            subject: 2,
        };
        p.observe(3, &[leave, enter(2, 30), enter(3, 0)]);
        assert_eq!(p.tracks.iter().map(|t| t.id).collect::<Vec<_>>(), [2, 3, 5]);
        p.choose(1, 100, ORIGIN, CELL, &mut out);
        assert!(out.is_empty(), "the new incarnation is sent as it entered");
    }

    #[test]
    fn membership_bound_covers_the_encoding() {
        use crate::batch::encode_part;
        use crate::view::View;
        let events = [enter(2, 10), enter(300, -5000), enter(70_000, 123)];
        let mut view = View::new();
        let mut buf = [0u8; 256];
        let part = encode_part(&events, &mut view, &mut buf).unwrap();
        assert!(membership_bytes(&events, 0) >= part.len);
        assert!(membership_bytes(&events, 0) <= part.len + 3);
    }
}
