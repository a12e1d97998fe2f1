//! The candidate scan: the visibility rule applied to every entity of the
//! runs an observer's candidates come from (see `source.rs`), the innermost
//! loop of a view rebuild; and the ranking that culls crowds to `max_view`.
//!
//! Visible slots are appended without branching: every scanned slot is
//! written, and the length only advances for visible ones. Visibility is
//! close to a coin toss per entity, so a branch would mispredict often.

use alloc::vec;
use alloc::vec::Vec;

use crate::config::Visibility;
use crate::grid::Member;
use crate::margin::{Key, Listed};
use crate::rule::{self, Zone};
use crate::view_marks::ViewMarks;

/// What the scan reads of one entity: one record, so a run of them is one
/// stream from memory.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanRecord {
    pub(crate) x: i64,
    pub(crate) y: i64,
    pub(crate) slot: u32,
    pub(crate) layers: u32,
    /// This tick's step on each axis (`x - dx` is where it stood at the
    /// end of last tick), where the copy records steps (see `sweep.rs`);
    /// `JUMPED` for an entity with none to record.
    pub(crate) dx: i32,
    pub(crate) dy: i32,
}

impl ScanRecord {
    /// This record with `layers` holding the radius `r` (raw, below
    /// `2^31`) instead: the sweep's pairs are found by distance alone
    /// (a view drops the subjects of no interest from its changes), so
    /// its copy of the viewers never reads layers, and a pair's test reads
    /// both radii from the records it already holds.
    #[inline(always)]
    pub(crate) fn with_radius(self, r: u32) -> ScanRecord {
        ScanRecord { layers: r, ..self }
    }

    /// The radius a [`ScanRecord::with_radius`] record carries.
    #[inline(always)]
    pub(crate) fn radius(&self) -> i64 {
        i64::from(self.layers)
    }

    /// The record of the entity at `slot`, from its grid member.
    #[inline(always)]
    pub(crate) fn of(slot: u32, m: &Member) -> ScanRecord {
        let (x, y) = (m.pos.x.to_bits(), m.pos.y.to_bits());
        ScanRecord {
            x,
            y,
            slot,
            layers: m.layers,
            dx: 0,
            dy: 0,
        }
    }
}

/// What the rule needs to know about the observer.
pub(crate) struct Reach {
    pub(crate) slot: u32,
    pub(crate) interest: u32,
    pub(crate) x: i64,
    pub(crate) y: i64,
    /// Radius mode: `r²` and `(r + hysteresis)²` in raw units. Grid mode
    /// has no distance test (the ring of one cell is the nine-grid).
    pub(crate) radius: Option<(u128, u128)>,
    /// Every candidate's offset on each axis is below `2^31` raw, so
    /// squares fit 64 bits.
    pub(crate) near: bool,
    /// Every entity's layers share a bit with `interest`, and the caller
    /// takes the observer out of what the scan keeps: the scan tests
    /// neither.
    pub(crate) everyone: bool,
}

/// A fixed buffer of slots: a rebuild's visible candidates, or those of
/// them that entered the view.
pub(crate) struct Candidates {
    buf: Vec<u32>,
    len: usize,
}

impl Candidates {
    /// Room for `room` slots (the candidates: every entity but the
    /// observer), plus the one speculative write.
    pub(crate) fn new(room: u32) -> Self {
        Candidates {
            buf: vec![0; room as usize + 1],
            len: 0,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u32] {
        &self.buf[..self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u32] {
        &mut self.buf[..self.len]
    }

    /// Holds those of `slots` that `keep` holds for, in order, after what
    /// it held. Without a branch per slot, and with the length in a
    /// register while it runs rather than stored after each one. `slots`
    /// must fit the room.
    #[inline(always)]
    pub(crate) fn extend_kept(&mut self, slots: &[u32], mut keep: impl FnMut(u32) -> bool) {
        let out = &mut self.buf[..];
        let mut n = self.len;
        for &s in slots {
            let k = keep(s);
            if let Some(at) = out.get_mut(n) {
                *at = s;
            }
            n += usize::from(k);
        }
        self.len = n.min(out.len());
    }

    #[inline(always)]
    pub(crate) fn push_if(&mut self, slot: u32, keep: bool) {
        // len ≤ entities scanned so far < buf.len(), so the write is in bounds.
        if let Some(at) = self.buf.get_mut(self.len) {
            *at = slot;
            self.len += usize::from(keep);
        }
    }

    /// Scans one run of entities. `marks` holds the observer's old view,
    /// which hysteresis lets stay out to the stay radius.
    #[inline(always)]
    pub(crate) fn scan(&mut self, reach: &Reach, run: &[ScanRecord], marks: &ViewMarks) {
        // Each entity is scanned at most once per rebuild, so len + run.len()
        // stays within the buffer; locals keep the loop out of memory.
        let out = &mut self.buf[self.len..];
        let mut k = 0;
        match reach.radius {
            // The common case gets its own loop: 64-bit squares, no hysteresis.
            Some((enter2, stay2)) if reach.near && enter2 == stay2 => {
                // near ⇒ dist² < 2^63, so a clamped r² compares the same.
                let enter2 = u64::try_from(enter2).unwrap_or(u64::MAX);
                if reach.everyone {
                    // The distance alone: six instructions fewer a candidate.
                    for e in run {
                        let keep = reach.near_dist2(e) <= enter2;
                        if let Some(at) = out.get_mut(k) {
                            *at = e.slot;
                        }
                        reach.check(e, marks, keep);
                        k += usize::from(keep);
                    }
                } else {
                    for e in run {
                        let (_, keep) = reach.near_within(e, enter2);
                        if let Some(at) = out.get_mut(k) {
                            *at = e.slot;
                        }
                        reach.check(e, marks, keep);
                        k += usize::from(keep);
                    }
                }
            }
            // With hysteresis: the same, plus the stay test for old entries.
            Some((enter2, stay2)) if reach.near => {
                let enter2 = u64::try_from(enter2).unwrap_or(u64::MAX);
                let stay2 = u64::try_from(stay2).unwrap_or(u64::MAX);
                for e in run {
                    let dist2 = reach.near_dist2(e);
                    let near_enough = (dist2 <= enter2) | ((dist2 <= stay2) & marks.was(e.slot));
                    let keep =
                        (e.layers & reach.interest != 0) & (e.slot != reach.slot) & near_enough;
                    if let Some(at) = out.get_mut(k) {
                        *at = e.slot;
                    }
                    reach.check(e, marks, keep);
                    k += usize::from(keep);
                }
            }
            // Grid mode: every candidate in the ring is seen.
            None if reach.everyone => {
                for (at, e) in out.iter_mut().zip(run) {
                    *at = e.slot;
                    reach.check(e, marks, true);
                }
                k = run.len().min(out.len());
            }
            _ => {
                for e in run {
                    let keep = reach.sees(e.slot, e.x, e.y, e.layers, marks);
                    if let Some(at) = out.get_mut(k) {
                        *at = e.slot;
                    }
                    reach.check(e, marks, keep);
                    k += usize::from(keep);
                }
            }
        }
        self.len += k;
    }
}

/// Crowd culling's buffer: `(dist², slot)` of every visible candidate,
/// appended without branching like [`Candidates`]. Near observers' squares
/// fit 64 bits, which halves what the selection moves.
///
/// A crowd's cut-off barely moves from one tick to the next, so ranking can
/// be told to leave out candidates beyond a guess (`within`): the selection
/// then sorts a few more than `max_view` entries instead of the whole crowd.
/// Any guess gives the same result as long as at least `max_view`
/// candidates are within it, since those include the `max_view` nearest
/// and everyone at the cut-off distance; with fewer, the caller ranks again
/// without one.
pub(crate) struct Ranked {
    near: Vec<(u64, u32)>,
    far: Vec<(u128, u32)>,
    len: usize,
    within: u128,
}

impl Ranked {
    /// Room for every entity, plus the one speculative write; for far
    /// observers' 128-bit distances only where some observer can be far.
    pub(crate) fn new(max_entities: u32, far: bool) -> Self {
        let room = max_entities as usize + 1;
        Ranked {
            near: vec![(0, 0); room],
            far: vec![(0, 0); if far { room } else { 0 }],
            len: 0,
            within: u128::MAX,
        }
    }

    /// Empties the buffer; candidates ranked next count only within
    /// `within` (`dist²`, raw units).
    pub(crate) fn clear(&mut self, within: u128) {
        self.len = 0;
        self.within = within;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends every entity of `run` the observer sees within `within`,
    /// with its distance.
    #[inline(always)]
    pub(crate) fn rank(&mut self, reach: &Reach, run: &[ScanRecord], marks: &ViewMarks) {
        let mut k = 0;
        // As in the scan, the common case gets its own loop: without
        // hysteresis the radius and the guess are one bound.
        if let Some((enter2, _)) = reach.radius.filter(|&(e, s)| reach.near && e == s) {
            let within = u64::try_from(self.within.min(enter2)).unwrap_or(u64::MAX);
            let out = &mut self.near[self.len..];
            for e in run {
                let (dist2, keep) = reach.near_within(e, within);
                if let Some(at) = out.get_mut(k) {
                    *at = (dist2, e.slot);
                }
                reach.check_ranked(e, marks, keep, u128::from(dist2) <= self.within);
                k += usize::from(keep);
            }
        } else if reach.near {
            let within = u64::try_from(self.within).unwrap_or(u64::MAX);
            let out = &mut self.near[self.len..];
            for e in run {
                let dist2 = reach.near_dist2(e);
                let keep = reach.sees_at(e.slot, || u128::from(dist2), e.layers, marks)
                    & (dist2 <= within);
                if let Some(at) = out.get_mut(k) {
                    *at = (dist2, e.slot);
                }
                reach.check_ranked(e, marks, keep, u128::from(dist2) <= self.within);
                k += usize::from(keep);
            }
        } else {
            let out = &mut self.far[self.len..];
            for e in run {
                let dist2 = rule::dist2(e.x, e.y, reach.x, reach.y);
                let keep =
                    reach.sees_at(e.slot, || dist2, e.layers, marks) & (dist2 <= self.within);
                if let Some(at) = out.get_mut(k) {
                    *at = (dist2, e.slot);
                }
                reach.check_ranked(e, marks, keep, dist2 <= self.within);
                k += usize::from(keep);
            }
        }
        self.len += k;
    }

    /// Puts the `max_view` nearest ranked candidates into `out`, breaking
    /// ties at the cut-off distance by id. Returns the cut-off `dist²` when
    /// there were more than `max_view`.
    pub(crate) fn keep_nearest(
        &mut self,
        near: bool,
        max_view: usize,
        id_of: impl Fn(u32) -> u64,
        out: &mut Candidates,
    ) -> Option<u128> {
        out.clear();
        if near {
            nearest(&mut self.near[..self.len], max_view, id_of, out).map(u128::from)
        } else {
            nearest(&mut self.far[..self.len], max_view, id_of, out)
        }
    }

    /// [`Ranked::keep_nearest`] where `last` (the view's cut-off at its last
    /// ranking) is still the cut-off, confirmed by counting rather than
    /// found by a selection; `false`, with nothing kept, where it is not.
    #[inline(never)]
    pub(crate) fn keep_within_last(
        &mut self,
        near: bool,
        (max_view, last): (usize, u128),
        id_of: impl Fn(u32) -> u64,
        out: &mut Candidates,
    ) -> bool {
        out.clear();
        match (near, u64::try_from(last)) {
            (true, Ok(last)) => confirmed(&mut self.near[..self.len], max_view, last, id_of, out),
            (true, Err(_)) => false,
            (false, _) => confirmed(&mut self.far[..self.len], max_view, last, id_of, out),
        }
    }
}

impl Ranked {
    /// The ranked candidates whose place in key order `(dist², id)` is in
    /// `from..to`, in that order, into `out` (which has room for them), as
    /// far as their `dist²` fits a [`Key`]. Returns the key up to which
    /// `out` lists every ranked candidate from place `from` on: its last
    /// key, or everything within the ranking's bound where the ranking ends
    /// before `to`.
    pub(crate) fn places(
        &mut self,
        near: bool,
        (from, to): (usize, usize),
        id_of: impl Fn(u32) -> u64,
        out: &mut Listed,
    ) -> Key {
        out.clear();
        let all = if near {
            places(&mut self.near[..self.len], (from, to), &id_of, out)
        } else {
            places(&mut self.far[..self.len], (from, to), &id_of, out)
        };
        match (out.last(), all) {
            (Some(&(last, _)), false) => last,
            _ => Key {
                dist2: u64::try_from(self.within).unwrap_or(u64::MAX),
                id: u64::MAX,
            },
        }
    }
}

/// See [`Ranked::places`]; returns whether `out` holds every ranked
/// candidate from place `from` on.
fn places<K: Ord + Copy + Into<u128>>(
    ranked: &mut [(K, u32)],
    (from, to): (usize, usize),
    id_of: &impl Fn(u32) -> u64,
    out: &mut Listed,
) -> bool {
    // Ids break ties only: most comparisons never look one up.
    let by_key =
        |a: &(K, u32), b: &(K, u32)| a.0.cmp(&b.0).then_with(|| id_of(a.1).cmp(&id_of(b.1)));
    if from >= ranked.len() {
        return true;
    }
    ranked.select_nth_unstable_by(from, by_key);
    let rest = &mut ranked[from..];
    let n = (to - from).min(rest.len());
    if n < rest.len() {
        rest.select_nth_unstable_by(n, by_key);
    }
    let listed = &mut rest[..n];
    listed.sort_unstable_by(by_key);
    for &(dist2, s) in listed.iter() {
        let Ok(dist2) = u64::try_from(dist2.into()) else {
            return false;
        };
        let key = Key {
            dist2,
            id: id_of(s),
        };
        if out.push((key, s)).is_err() {
            return false;
        }
    }
    n == rest.len()
}

fn nearest<K: Ord + Copy + From<u64>>(
    ranked: &mut [(K, u32)],
    max_view: usize,
    id_of: impl Fn(u32) -> u64,
    out: &mut Candidates,
) -> Option<K> {
    if ranked.len() <= max_view {
        // Not a crowd after all: keep everyone.
        for &(_, s) in ranked.iter() {
            out.push_if(s, true);
        }
        return None;
    }
    let last = max_view.checked_sub(1)?;
    let (nearer, &mut (bound, _), farther) = ranked.select_nth_unstable_by_key(last, |r| r.0);
    // `nearer` is at most the bound and `farther` at least it: the ties
    // gather around the bound in place, at the end of `nearer` and the
    // start of `farther` (a room of their own took 16 bytes an entity).
    for &(dist2, s) in nearer.iter() {
        out.push_if(s, dist2 < bound);
    }
    // Ties are few, and usually none is nearer than the bound's own.
    let below = match out.len() == last {
        true => last,
        false => partition(nearer, |r| r.0 < bound),
    };
    let beyond = partition(farther, |r| r.0 == bound);
    let take = max_view - below;
    break_ties(&mut ranked[below..=last + beyond], take, bound, id_of, out);
    Some(bound)
}

/// [`nearest`] where `last` is still the cut-off of a crowd: fewer than
/// `max_view` nearer than it, and at least `max_view` at most as far.
/// Then the nearer and the ties at `last` are found by counting, without
/// a branch a candidate (and where some are elsewhere, a partition or
/// two), rather than by a selection's several passes, and `true`
/// returned; else `ranked` and `out` are left as they were. A crowd on
/// one spot (everyone at `dist²` 0) keeps its cut-off tick after tick.
fn confirmed<K: Ord + Copy + From<u64>>(
    ranked: &mut [(K, u32)],
    max_view: usize,
    last: K,
    id_of: impl Fn(u32) -> u64,
    out: &mut Candidates,
) -> bool {
    let (mut nearer, mut at) = (0, 0);
    for r in ranked.iter() {
        nearer += usize::from(r.0 < last);
        at += usize::from(r.0 == last);
    }
    // Not a crowd (everyone kept, no cut-off), or the cut-off moved.
    if ranked.len() <= max_view || nearer >= max_view || nearer + at < max_view {
        return false;
    }
    if nearer > 0 {
        partition(ranked, |r| r.0 < last);
    }
    if nearer + at < ranked.len() {
        partition(&mut ranked[nearer..], |r| r.0 == last);
    }
    for &(_, s) in &ranked[..nearer] {
        out.push_if(s, true);
    }
    let take = max_view - nearer;
    break_ties(&mut ranked[nearer..nearer + at], take, last, id_of, out);
    true
}

/// Keeps the `take` of `ties` (all at `dist²` `bound`) with the least ids.
#[inline(always)]
fn break_ties<K: Ord + Copy + From<u64>>(
    ties: &mut [(K, u32)],
    take: usize,
    bound: K,
    id_of: impl Fn(u32) -> u64,
    out: &mut Candidates,
) {
    // They share the bound's dist², so their keys can hold their ids while
    // they are ranked: one lookup each, not two per comparison, and only
    // the places left are selected (a crowd on one spot ties by hundreds).
    for r in ties.iter_mut() {
        r.0 = K::from(id_of(r.1));
    }
    if take < ties.len() {
        ties.select_nth_unstable_by_key(take, |r| r.0);
    }
    for &(_, s) in ties.iter().take(take) {
        out.push_if(s, true);
    }
    // The margin (`places`) ranks the same candidates again by dist².
    for r in ties.iter_mut() {
        r.0 = bound;
    }
}

/// Moves the items for which `first` holds to the front, in no
/// particular order; returns how many there are.
fn partition<T>(items: &mut [T], first: impl Fn(&T) -> bool) -> usize {
    let mut k = 0;
    for i in 0..items.len() {
        if first(&items[i]) {
            items.swap(k, i);
            k += 1;
        }
    }
    k
}

impl Reach {
    /// A candidate's `dist²` when the observer is `near` (then 64 bits
    /// hold it).
    #[inline(always)]
    fn near_dist2(&self, e: &ScanRecord) -> u64 {
        let (dx, dy) = (e.x.wrapping_sub(self.x), e.y.wrapping_sub(self.y));
        (dx * dx) as u64 + (dy * dy) as u64
    }

    /// A near candidate's `dist²`, and whether the rule without hysteresis
    /// keeps it within `bound`.
    #[inline(always)]
    fn near_within(&self, e: &ScanRecord, bound: u64) -> (u64, bool) {
        let dist2 = self.near_dist2(e);
        let keep = (e.layers & self.interest != 0) & (e.slot != self.slot) & (dist2 <= bound);
        (dist2, keep)
    }

    /// The rule for one entity, in full.
    #[inline(always)]
    pub(crate) fn sees(&self, slot: u32, x: i64, y: i64, layers: u32, marks: &ViewMarks) -> bool {
        // Grid mode never needs the distance.
        let dist2 = || rule::dist2(x, y, self.x, self.y);
        self.sees_at(slot, dist2, layers, marks)
    }

    /// The rule for one entity, its `dist²` computed only in radius mode.
    #[inline(always)]
    pub(crate) fn sees_at(
        &self,
        slot: u32,
        dist2: impl FnOnce() -> u128,
        layers: u32,
        marks: &ViewMarks,
    ) -> bool {
        let mut keep = rule::interested(self.interest, layers) & (slot != self.slot);
        if let Some((enter2, stay2)) = self.radius {
            // The view is asked only inside the band, as before the rule
            // had a home: a load per candidate otherwise.
            let zone = rule::radius_zone(dist2(), enter2, stay2);
            keep &= zone == Zone::In || (zone == Zone::Band && marks.was(slot));
        }
        keep
    }

    /// The rule's own answer ([`rule::sees`]) for a candidate of the
    /// observer's ring, which every loop here is checked against in debug
    /// builds. The ring itself is the source's part, so cells are not
    /// compared here.
    pub(crate) fn rule_sees(&self, e: &ScanRecord, marks: &ViewMarks) -> bool {
        let (mode, (enter2, stay2)) = match self.radius {
            Some(r) => (Visibility::Radius, r),
            None => (Visibility::Grid, (0, 0)),
        };
        let eye = rule::Eye {
            slot: self.slot,
            interest: self.interest,
            col_row: (0, 0),
            x: self.x,
            y: self.y,
            enter2,
            stay2,
        };
        let seen = rule::Seen {
            slot: e.slot,
            layers: e.layers,
            col_row: (0, 0),
            x: e.x,
            y: e.y,
        };
        rule::sees(mode, &eye, &seen, marks.was(e.slot))
    }

    /// Debug builds: `keep` is the rule's answer for `e`, except that a
    /// scan for `everyone` keeps the observer itself (the caller takes it
    /// out) and tests no layers (every entity has one of interest).
    #[inline(always)]
    fn check(&self, e: &ScanRecord, marks: &ViewMarks, keep: bool) {
        debug_assert!(
            keep == self.rule_sees(e, marks) || (self.everyone && e.slot == self.slot),
            "a scan loop disagrees with the rule for slot {}",
            e.slot
        );
    }

    /// Debug builds: a ranking keeps `e` exactly when the rule sees it and
    /// it is within the ranking's bound.
    #[inline(always)]
    fn check_ranked(&self, e: &ScanRecord, marks: &ViewMarks, keep: bool, in_bound: bool) {
        debug_assert!(
            keep == (self.rule_sees(e, marks) && in_bound),
            "a ranking loop disagrees with the rule for slot {}",
            e.slot
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::mix64;

    /// The view a crowd culls to, as a sorted set of slots.
    fn kept(reach: &Reach, run: &[ScanRecord], max_view: usize, within: u128) -> Option<Vec<u32>> {
        let n = run.len() as u32;
        let marks = ViewMarks::new(n);
        let mut ranked = Ranked::new(n, true);
        ranked.clear(within);
        ranked.rank(reach, run, &marks);
        if ranked.len() < max_view && within != u128::MAX {
            return None;
        }
        let mut out = Candidates::new(n);
        let id_of = |s: u32| mix64(u64::from(s));
        ranked.keep_nearest(reach.near, max_view, id_of, &mut out);
        let mut slots = out.as_slice().to_vec();
        slots.sort_unstable();
        Some(slots)
    }

    /// The nearest `max_view`, ties at the cut-off broken by id, against
    /// a sort of every candidate by `(dist², id)`, on few distances so that
    /// most cut-offs fall among ties; with no last cut-off, and with every
    /// one it could have been (the right one confirmed, the others not).
    #[test]
    fn keeps_the_nearest_with_ties_broken_by_id() {
        let id_of = |s: u32| mix64(u64::from(s));
        for case in 0..500u64 {
            let n = 1 + (mix64(case) % 200) as u32;
            let ranked: Vec<(u64, u32)> = (0..n)
                .map(|s| (mix64(case ^ u64::from(s) << 20) % 7, s))
                .collect();
            let max_view = 1 + (mix64(case + 1) % 64) as usize;
            let mut want = ranked.clone();
            want.sort_unstable_by_key(|&(d, s)| (d, id_of(s)));
            let cut_off = (want.len() > max_view).then(|| want[max_view - 1].0);
            let mut want: Vec<u32> = want.iter().take(max_view).map(|r| r.1).collect();
            want.sort_unstable();
            for hint in core::iter::once(None).chain((0..8).map(Some)) {
                let mut out = Candidates::new(n);
                let mut work = ranked.clone();
                let bound = match hint {
                    Some(last) if confirmed(&mut work, max_view, last, id_of, &mut out) => {
                        Some(last)
                    }
                    _ => nearest(&mut work, max_view, id_of, &mut out),
                };
                let mut got = out.as_slice().to_vec();
                got.sort_unstable();
                assert_eq!(got, want, "case {case}, last cut-off {hint:?}");
                // Every candidate keeps its dist², for the margin to rank.
                work.sort_unstable_by_key(|r| r.1);
                assert_eq!(work, ranked, "case {case}, last cut-off {hint:?}");
                assert_eq!(bound, cut_off, "case {case}, last cut-off {hint:?}");
            }
        }
    }

    #[test]
    fn a_guess_with_max_view_within_it_keeps_the_same_view() {
        let mut state = 7u64;
        let mut next = |bound: u64| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            mix64(state) % bound
        };
        let mut guessed = 0;
        for case in 0..300 {
            // A small lattice, so that many candidates tie at the cut-off.
            let run: Vec<ScanRecord> = (0..1 + next(300) as u32)
                .map(|slot| ScanRecord {
                    x: next(21) as i64 - 10,
                    y: next(21) as i64 - 10,
                    slot,
                    layers: 1,
                    ..ScanRecord::default()
                })
                .collect();
            let max_view = 1 + next(64) as usize;
            let reach = Reach {
                slot: u32::MAX,
                interest: 1,
                x: 0,
                y: 0,
                radius: None,
                near: case % 2 == 0,
                everyone: false,
            };
            let whole = kept(&reach, &run, max_view, u128::MAX);
            for within in [0, 1, 4, 10, 25, 50, 100, 200] {
                if let Some(view) = kept(&reach, &run, max_view, within) {
                    assert_eq!(Some(view), whole, "case {case}, guess {within}");
                    guessed += 1;
                }
            }
        }
        // Both outcomes of a guess occur.
        assert!(guessed > 300 && guessed < 2_400, "{guessed}");
    }
}
