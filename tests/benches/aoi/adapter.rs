//! The one adapter every peer is driven through.
//!
//! It applies a tick's commands to its own entity table, lets the peer
//! update its index, then for every observer in ascending id order asks the
//! peer for neighbours, applies the kernel's visibility rule exactly (cell
//! rule or `dist² ≤ r²` with the observer's own radius, crowd culling by
//! `(dist², id)`), sorts by id and diffs against the last tick, emitting
//! Leave then Enter events as the kernel does. Only the neighbour query
//! differs between peers, and the diff for a peer that brings its own
//! ([`Peer::diff`]). With a hysteresis band `h`, peers are asked for the
//! disc of the stay distance `r + h`, and the adapter keeps a subject
//! beyond `r` only if the observer's last view holds it. Where some
//! observer's interest leaves a layer out, candidates of no interest are
//! dropped before culling.
//!
//! Peers index *seats*, dense from 0: the first entities' ids are their
//! seats, and a despawn is always followed by the spawn that takes over
//! its seat (the churn workload), which a peer sees as a move. A despawned
//! observer's view goes without events, as in the kernel.

use std::cell::RefCell;
use std::collections::HashMap;

use lockgrid_kernel::{Command, Dir, Event, EventSink, Fix, Pos, Visibility};

use crate::workload::{CELL, Q};

/// The seats' state as a peer's index sees it, all by seat.
pub struct Seats<'a> {
    /// Positions in world units, exact in `f64`.
    pub f: &'a [[f64; 2]],
    /// The same positions in lattice units.
    pub q: &'a [(i64, i64)],
    /// An observer's stay distance (its view radius and the hysteresis
    /// band) in lattice units; `None` for an NPC.
    pub sight: &'a [Option<i64>],
}

/// A spatial index under test (`Send`: the timed loop runs on a thread of
/// the kernel's pool).
pub trait Peer: Send {
    /// Brings the index up to date with this tick's positions; `moved` lists
    /// the entities (seats) that spawned or moved.
    fn sync(&mut self, seats: &Seats, moved: &[u32]);

    /// Visits every entity inside the closed box `lo..=hi`, the nine cells
    /// around observer `o`; extra ones are allowed (the adapter filters by
    /// cell).
    fn visit_box(&mut self, o: u32, lo: [f64; 2], hi: [f64; 2], f: impl FnMut(u32));

    /// Visits exactly the entities with `dist² ≤ r2` from `p`, where
    /// observer `o` stands.
    fn visit_within(&mut self, o: u32, p: [f64; 2], r2: f64, f: impl FnMut(u32));

    /// Emits the Leaves and then the Enters, each ascending, that turn the
    /// view `old` (ids, ascending) into `new` (`(id, seat)`, ascending by
    /// id): `leave(id)`, `enter(id, seat)`. By default, one merge of the
    /// two sorted lists.
    fn diff(
        &mut self,
        old: &[u32],
        new: &[(i64, u32)],
        mut leave: impl FnMut(u32),
        mut enter: impl FnMut(u32, u32),
    ) {
        let id = |c: &(i64, u32)| c.0 as u32;
        // Leaves: old entries missing from the new set.
        let mut k = 0;
        for &s in old {
            while k < new.len() && id(&new[k]) < s {
                k += 1;
            }
            if k == new.len() || id(&new[k]) != s {
                leave(s);
            }
        }
        // Enters: new entries missing from the old set.
        let mut k = 0;
        for c in new {
            let s = id(c);
            while k < old.len() && old[k] < s {
                k += 1;
            }
            if k == old.len() || old[k] != s {
                enter(s, c.1);
            }
        }
    }
}

/// Per-entity state the events carry.
#[derive(Clone, Copy)]
struct Shown {
    pos: Pos,
    dir: Dir,
    speed: Fix,
    layers: u32,
}

pub struct Adapter {
    mode: Visibility,
    max_view: usize,
    /// The id holding each seat. Workload ids fit `u32`, as the views'
    /// entries do.
    ids: Vec<u32>,
    /// The seat of each id that took a seat over; a first id is its seat.
    seats: HashMap<u64, u32>,
    /// Whether any seat has changed hands, so that seats are not ids.
    churned: bool,
    /// The seat just vacated by a despawn, for the spawn that follows.
    vacated: Option<u32>,
    /// Observer seats that changed hands this tick, in spawn order.
    respawned: Vec<u32>,
    /// The largest id spawned so far.
    last_id: u64,
    /// Lattice positions, by seat.
    q: Vec<(i64, i64)>,
    /// The same positions in world units, exact in `f64`: what peers index.
    f: Vec<[f64; 2]>,
    cell: Vec<(i64, i64)>,
    /// Stay distance (view radius and `band`) in lattice units, by seat
    /// (`None` for NPCs).
    sight: Vec<Option<i64>>,
    /// The hysteresis band in lattice units.
    band: i64,
    /// Each observer's interest, by seat (`u32::MAX` for NPCs).
    interest: Vec<u32>,
    /// Whether some observer's interest leaves a layer out, so that
    /// candidates are tested against it.
    partial_interest: bool,
    shown: Vec<Shown>,
    /// Observer seats, ascending by id.
    observers: Vec<u32>,
    /// Sorted subject ids, by seat (empty for NPCs).
    views: Vec<Vec<u32>>,
    moved: Vec<u32>,
    candidates: Vec<(i64, u32)>,
    /// Largest candidate count of any observer in the last tick.
    pub max_candidates: usize,
}

impl Adapter {
    pub fn new(mode: Visibility, max_view: u32, band: i64) -> Adapter {
        Adapter {
            band,
            interest: Vec::new(),
            partial_interest: false,
            mode,
            max_view: max_view as usize,
            ids: Vec::new(),
            seats: HashMap::new(),
            churned: false,
            vacated: None,
            respawned: Vec::new(),
            last_id: 0,
            q: Vec::new(),
            f: Vec::new(),
            cell: Vec::new(),
            sight: Vec::new(),
            shown: Vec::new(),
            observers: Vec::new(),
            views: Vec::new(),
            moved: Vec::new(),
            candidates: Vec::new(),
            max_candidates: 0,
        }
    }

    /// Runs one tick through `peer`, delivering events to `sink`.
    pub fn step<P: Peer, S: EventSink>(
        &mut self,
        commands: &[Command],
        peer: &mut P,
        sink: &mut S,
    ) {
        self.apply(commands);
        let seats = Seats {
            f: &self.f,
            q: &self.q,
            sight: &self.sight,
        };
        peer.sync(&seats, &self.moved);
        self.evaluate(peer, sink);
    }

    /// The subjects the observer at `seat` saw after the last tick, ascending.
    pub fn view(&self, seat: u32) -> &[u32] {
        &self.views[seat as usize]
    }

    /// The observer seats, ascending by id.
    pub fn observers(&self) -> &[u32] {
        &self.observers
    }

    /// The id holding `seat`.
    pub fn id(&self, seat: u32) -> u64 {
        u64::from(self.ids[seat as usize])
    }

    /// Heap bytes the adapter itself holds, to tell them from the peer's.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.ids.capacity() * size_of::<u32>()
            + self.seats.capacity() * size_of::<(u64, u32)>()
            + self.q.capacity() * size_of::<(i64, i64)>()
            + self.f.capacity() * size_of::<[f64; 2]>()
            + self.cell.capacity() * size_of::<(i64, i64)>()
            + self.sight.capacity() * size_of::<Option<i64>>()
            + self.shown.capacity() * size_of::<Shown>()
            + self.observers.capacity() * size_of::<u32>()
            + self.views.capacity() * size_of::<Vec<u32>>()
            + self
                .views
                .iter()
                .map(|v| v.capacity() * size_of::<u32>())
                .sum::<usize>()
            + self.moved.capacity() * size_of::<u32>()
            + self.candidates.capacity() * size_of::<(i64, u32)>()
    }

    pub fn visible_pairs(&self) -> u64 {
        self.views.iter().map(|v| v.len() as u64).sum()
    }

    fn apply(&mut self, commands: &[Command]) {
        self.moved.clear();
        for c in commands {
            let (seat, pos, dir, speed) = match c {
                Command::Spawn(s) => {
                    let seat = match self.vacated.take() {
                        Some(seat) => {
                            assert!(s.id > self.last_id, "a seat changes hands to a fresh id");
                            self.ids[seat as usize] = u32::try_from(s.id).expect("ids fit u32");
                            self.churned = true;
                            self.seats.insert(s.id, seat);
                            if s.observer {
                                self.respawned.push(seat);
                            }
                            seat
                        }
                        None => self.add_seat(s.id, s.observer),
                    };
                    self.last_id = self.last_id.max(s.id);
                    self.shown[seat as usize].layers = s.layers;
                    self.interest[seat as usize] = s.interest;
                    self.partial_interest |= s.observer && s.interest != u32::MAX;
                    self.sight[seat as usize] = s.observer.then(|| {
                        let bits = s.radius.to_bits();
                        assert_eq!(bits % (65536 / Q), 0, "radii lie on the lattice");
                        bits / (65536 / Q) + self.band
                    });
                    (seat, s.pos, s.dir, s.speed)
                }
                Command::Move(m) => (self.seat(m.id), m.pos, m.dir, m.speed),
                Command::Despawn { id } => {
                    let seat = self.seat(*id);
                    self.seats.remove(id);
                    // Its spawn comes next; its view goes without events.
                    self.views[seat as usize].clear();
                    self.vacated = Some(seat);
                    continue;
                }
            };
            let i = seat as usize;
            let step = 65536 / Q;
            let q = (pos.x.to_bits() / step, pos.y.to_bits() / step);
            self.q[i] = q;
            self.f[i] = [q.0 as f64 / Q as f64, q.1 as f64 / Q as f64];
            self.cell[i] = (q.0.div_euclid(CELL * Q), q.1.div_euclid(CELL * Q));
            let s = &mut self.shown[i];
            (s.pos, s.dir, s.speed) = (pos, dir, speed);
            self.moved.push(seat);
        }
        assert!(
            self.vacated.is_none(),
            "a despawn's seat is taken in the same tick"
        );
        // Fresh ids are above every other: their seats go to the end, in
        // spawn order, which is id order.
        if let Some(&first) = self.respawned.first() {
            let (ids, first) = (&self.ids, self.ids[first as usize]);
            self.observers.retain(|&o| ids[o as usize] < first);
            self.observers.append(&mut self.respawned);
        }
    }

    /// The seat of live entity `id`: a first id is its own seat, and any
    /// later one is above them all.
    fn seat(&self, id: u64) -> u32 {
        match id < self.ids.len() as u64 {
            true => id as u32,
            false => self.seats[&id],
        }
    }

    /// A new seat for the first spawn of `id`, which must be the seat's number.
    fn add_seat(&mut self, id: u64, observer: bool) -> u32 {
        assert_eq!(id, self.ids.len() as u64, "first ids are dense");
        let seat = id as u32;
        self.ids.push(seat);
        self.q.push((0, 0));
        self.f.push([0.0; 2]);
        self.cell.push((0, 0));
        self.sight.push(None);
        self.interest.push(u32::MAX);
        self.shown.push(Shown {
            pos: Pos::default(),
            dir: 0,
            speed: Fix::ZERO,
            layers: 0,
        });
        // Reserved up front as the kernel reserves its views, so the
        // adapter itself never allocates after spawning.
        let cap = if observer { self.max_view } else { 0 };
        self.views.push(Vec::with_capacity(cap));
        if observer {
            self.observers.push(seat);
        }
        seat
    }

    fn evaluate<P: Peer, S: EventSink>(&mut self, peer: &mut P, sink: &mut S) {
        let Adapter {
            mode,
            max_view,
            q,
            f,
            cell,
            sight,
            shown,
            observers,
            views,
            candidates,
            max_candidates,
            ids,
            churned,
            band,
            interest,
            partial_interest,
            ..
        } = self;
        let churned = *churned;
        *max_candidates = 0;
        let dist2 = |a: (i64, i64), b: (i64, i64)| {
            let (dx, dy) = (a.0 - b.0, a.1 - b.1);
            dx * dx + dy * dy
        };
        // Until a seat changes hands, seats are ids, and sorting by seat is
        // sorting by id.
        let id_at = |seat: u32| match churned {
            false => seat,
            true => ids[seat as usize],
        };
        for &o in observers.iter() {
            let oi = o as usize;
            candidates.clear();
            let qo = q[oi];
            match mode {
                Visibility::Grid => {
                    let (cx, cy) = cell[oi];
                    let lo = [((cx - 1) * CELL) as f64, ((cy - 1) * CELL) as f64];
                    // The last lattice point of the nine cells: a closed box
                    // that touches no tenth cell (positions are on the lattice).
                    let last = 1.0 / Q as f64;
                    let hi = [
                        ((cx + 2) * CELL) as f64 - last,
                        ((cy + 2) * CELL) as f64 - last,
                    ];
                    peer.visit_box(o, lo, hi, |s| {
                        let (sx, sy) = cell[s as usize];
                        if s != o && (sx - cx).abs() <= 1 && (sy - cy).abs() <= 1 {
                            candidates.push((dist2(qo, q[s as usize]), s));
                        }
                    });
                }
                Visibility::Radius => {
                    let stay = sight[oi].expect("observers have a radius");
                    // Exact in f64: a lattice distance squared.
                    let r = stay as f64 / Q as f64;
                    let enter2 = (stay - *band).pow(2);
                    let was = &views[oi];
                    peer.visit_within(o, f[oi], r * r, |s| {
                        let d = dist2(qo, q[s as usize]);
                        // In the band, visible exactly if it was.
                        if s != o && (d <= enter2 || was.binary_search(&id_at(s)).is_ok()) {
                            candidates.push((d, s));
                        }
                    });
                }
            }
            if *partial_interest {
                // The layers of no interest to the observer are not seen.
                let interest = interest[oi];
                candidates.retain(|&(_, s)| shown[s as usize].layers & interest != 0);
            }
            *max_candidates = (*max_candidates).max(candidates.len());
            if candidates.len() > *max_view {
                // Crowd culling, as the kernel does: the nearest by (dist², id).
                if *max_view > 0 {
                    let nth = *max_view - 1;
                    candidates.select_nth_unstable_by_key(nth, |&(d, s)| (d, id_at(s)));
                }
                candidates.truncate(*max_view);
            }
            // Then the distance is done with: it makes room for the id.
            for c in candidates.iter_mut() {
                c.0 = i64::from(id_at(c.1));
            }
            if churned {
                candidates.sort_unstable_by_key(|c| c.0);
            } else {
                candidates.sort_unstable_by_key(|c| c.1);
            }

            let old = &mut views[oi];
            let observer = u64::from(ids[oi]);
            let sink = RefCell::new(&mut *sink);
            peer.diff(
                old,
                candidates,
                |s| {
                    sink.borrow_mut().event(Event::Leave {
                        observer,
                        subject: u64::from(s),
                    })
                },
                |s, seat| {
                    let e = shown[seat as usize];
                    sink.borrow_mut().event(Event::Enter {
                        observer,
                        subject: u64::from(s),
                        pos: e.pos,
                        dir: e.dir,
                        speed: e.speed,
                        layers: e.layers,
                    });
                },
            );
            old.clear();
            old.extend(candidates.iter().map(|c| c.0 as u32));
        }
    }
}
