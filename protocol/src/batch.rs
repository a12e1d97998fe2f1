//! The compact tick-batch encoding: one observer's events of one tick.
//!
//! A batch is split into *parts*, each a self-contained byte string that
//! applies to the [`View`] left by the previous part:
//!
//! ```text
//! part    := rejected-section leave-section enter-section update-section
//! section := count:varint item*
//! ```
//!
//! The observer is implicit (the connection's entity). Leaves and Updates
//! name subjects by their *index* in the sorted view, delta-coded, so most
//! take one byte; Enters carry delta-coded ids and positions relative to the
//! previous Enter; Updates carry only the fields that changed, relative to
//! the subject's last known state. The full rules are in `docs/protocol.md`.

use alloc::vec::Vec;

use lockgrid_kernel::{CommandKind, EntityId, Event, EventKind, Fix, Pos, RejectReason};

use crate::error::{BatchError, DecodeError};
use crate::view::{Seen, View};
use crate::wire::{varint_len, Reader, Writer};

/// Update flag: the position changed.
const UPD_POS: u64 = 1;
/// Update flag: the heading changed.
const UPD_DIR: u64 = 2;
/// Update flag: the speed changed.
const UPD_SPEED: u64 = 4;
/// Update flags of a *reset*: no flag set, and the whole movable state
/// follows as absolute values instead of deltas.
const UPD_RESET: u64 = 0;

/// Smallest possible part: four empty sections.
pub const EMPTY_PART_LEN: usize = 4;

/// What [`encode_part`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedPart {
    /// Bytes written at the start of the output buffer.
    pub len: usize,
    /// How many leading events the part holds; encode the rest into the next part.
    pub consumed: usize,
    /// Where the update section (its count) starts: a sender that drops
    /// the part's Updates keeps the bytes before it and a zero count.
    pub updates_at: usize,
}

/// Wire code of a command kind.
pub(crate) const fn command_code(k: CommandKind) -> u8 {
    match k {
        CommandKind::Spawn => 0,
        CommandKind::Move => 1,
        CommandKind::Despawn => 2,
    }
}

pub(crate) fn command_from_code(c: u8) -> Option<CommandKind> {
    match c {
        0 => Some(CommandKind::Spawn),
        1 => Some(CommandKind::Move),
        2 => Some(CommandKind::Despawn),
        _ => None,
    }
}

/// Wire code of a rejection reason (its rank in [`RejectReason::ALL`]).
pub(crate) const fn reason_code(r: RejectReason) -> u8 {
    match r {
        RejectReason::UnknownEntity => 0,
        RejectReason::DuplicateId => 1,
        RejectReason::Invalid => 2,
        RejectReason::OutOfBounds => 3,
        RejectReason::Capacity => 4,
    }
}

fn reason_from_code(c: u8) -> Option<RejectReason> {
    RejectReason::ALL.get(usize::from(c)).copied()
}

/// Checks that `events` are one observer's events in contract order.
pub fn check_order(events: &[Event]) -> Result<(), BatchError> {
    let mut last: Option<(EventKind, EntityId)> = None;
    let mut observer: Option<EntityId> = None;
    for e in events {
        let Some((obs, _, subject)) = e.order_key() else {
            if last.is_some() {
                return Err(BatchError::OutOfOrder);
            }
            continue;
        };
        if *observer.get_or_insert(obs) != obs {
            return Err(BatchError::MixedObservers);
        }
        let key = (e.kind(), subject);
        if last.is_some_and(|l| key <= l) {
            return Err(BatchError::OutOfOrder);
        }
        last = Some(key);
    }
    Ok(())
}

fn run_of(events: &[Event], kind: EventKind) -> usize {
    events.iter().take_while(|e| e.kind() == kind).count()
}

/// Encoder state for one part: the writer, the budget and the bookkeeping
/// for "the part is full".
struct PartWriter<'a> {
    w: Writer<'a>,
    cap: usize,
    full: bool,
    /// Bytes a part holding only the first event would need, once it failed to fit.
    needed: Option<usize>,
    section_at: usize,
    section_width: usize,
}

impl PartWriter<'_> {
    /// Opens a section of at most `run` items, reserving room for its count.
    fn open(&mut self, run: usize) -> usize {
        let run = if self.full { 0 } else { run };
        self.section_at = self.w.pos();
        self.section_width = varint_len(run as u64);
        for _ in 0..self.section_width {
            self.w.u8(0);
        }
        run
    }

    /// After writing an item begun at `mark`: keeps it if it fits with the
    /// `rest` bytes the remaining section counts need, else rewinds and marks
    /// the part full.
    fn keep(&mut self, mark: usize, rest: usize, first: bool) -> bool {
        if self.w.pos() + rest <= self.cap {
            return true;
        }
        if first {
            self.needed = Some(self.w.pos() + rest - (self.section_width - 1));
        }
        self.w.rewind(mark);
        self.full = true;
        false
    }

    /// Writes the section's real count and closes the gap if it is shorter.
    fn close(&mut self, count: usize) {
        let len = varint_len(count as u64);
        self.w.put_varint_at(self.section_at, count as u64);
        self.w.shift_left(
            self.section_at + self.section_width,
            self.section_width - len,
        );
    }
}

/// Encodes as many leading `events` as fit into `out` as one batch part,
/// and applies them to `view` (the sender's shadow of the receiver's view).
///
/// `events` must be one observer's events of one tick in contract order
/// (rejections first, then Leave < Enter < Update, each by ascending
/// subject). Call again with the unconsumed rest to produce the next part;
/// the split depends only on the events, the view and `out.len()`, so it
/// is deterministic. On error `view` is unchanged.
///
/// An Update is written as the fields that changed, relative to the
/// view; one that would change nothing is consumed and not written.
pub fn encode_part(
    events: &[Event],
    view: &mut View,
    out: &mut [u8],
) -> Result<EncodedPart, BatchError> {
    encode_part_with_resets(events, view, out, &[])
}

/// [`encode_part`], writing the Updates of the subjects in `resets`
/// (ascending ids) as *resets*: the whole state in absolute values, which
/// the receiver takes whatever it held before. A sender uses them when it
/// cannot be sure what the receiver holds (an earlier Update of that
/// subject is unacknowledged or was dropped from a resent part).
pub fn encode_part_with_resets(
    events: &[Event],
    view: &mut View,
    out: &mut [u8],
    resets: &[EntityId],
) -> Result<EncodedPart, BatchError> {
    check_order(events)?;
    let mut p = PartWriter {
        cap: out.len(),
        w: Writer::new(out),
        full: false,
        needed: None,
        section_at: 0,
        section_width: 1,
    };
    let mut i = 0usize;

    // Rejections.
    let run = p.open(run_of(events, EventKind::Rejected));
    let mut c = 0;
    while c < run {
        let Some(&Event::Rejected {
            entity,
            command,
            reason,
        }) = events.get(i)
        else {
            break;
        };
        let mark = p.w.pos();
        p.w.varint(entity);
        p.w.u8(command_code(command) << 4 | reason_code(reason));
        if !p.keep(mark, 3, i == 0) {
            break;
        }
        c += 1;
        i += 1;
    }
    p.close(c);

    // Leaves: indices into the view as it was before this part.
    let View { entries, scratch } = &mut *view;
    scratch.leaves.clear();
    scratch.enters.clear();
    scratch.updates.clear();
    let run = p.open(run_of(&events[i..], EventKind::Leave));
    let (mut c, mut j, mut next_min) = (0, 0usize, 0usize);
    while c < run {
        let Some(&Event::Leave { subject, .. }) = events.get(i) else {
            break;
        };
        while entries.get(j).is_some_and(|e| e.0 < subject) {
            j += 1;
        }
        if entries.get(j).is_none_or(|e| e.0 != subject) {
            return Err(BatchError::NotVisible(subject));
        }
        let mark = p.w.pos();
        p.w.varint((j - next_min) as u64);
        if !p.keep(mark, 2, i == 0) {
            break;
        }
        scratch.leaves.push(j);
        next_min = j + 1;
        j += 1;
        c += 1;
        i += 1;
    }
    p.close(c);

    // Enters: ascending ids not visible once the leaves are applied.
    let run = p.open(run_of(&events[i..], EventKind::Enter));
    let (mut c, mut j, mut lk) = (0, 0usize, 0usize);
    let mut prev: Option<EntityId> = None;
    let mut prev_pos = (0i64, 0i64);
    while c < run {
        let Some(&Event::Enter {
            subject,
            pos,
            dir,
            speed,
            layers,
            ..
        }) = events.get(i)
        else {
            break;
        };
        while entries.get(j).is_some_and(|e| e.0 < subject) {
            j += 1;
        }
        if entries.get(j).is_some_and(|e| e.0 == subject) {
            while scratch.leaves.get(lk).is_some_and(|&l| l < j) {
                lk += 1;
            }
            if scratch.leaves.get(lk) != Some(&j) {
                return Err(BatchError::AlreadyVisible(subject));
            }
        }
        let (x, y) = (pos.x.to_bits(), pos.y.to_bits());
        let mark = p.w.pos();
        // check_order guarantees ascending subjects, so the delta cannot underflow.
        p.w.varint(prev.map_or(subject, |p| subject - p - 1));
        p.w.svarint(x.wrapping_sub(prev_pos.0));
        p.w.svarint(y.wrapping_sub(prev_pos.1));
        p.w.varint(u64::from(dir));
        p.w.svarint(speed.to_bits());
        p.w.varint(u64::from(layers));
        if !p.keep(mark, 1, i == 0) {
            break;
        }
        scratch.enters.push((
            subject,
            Seen {
                pos,
                dir,
                speed,
                layers,
            },
        ));
        prev = Some(subject);
        prev_pos = (x, y);
        c += 1;
        i += 1;
    }
    p.close(c);

    let merged = !scratch.leaves.is_empty() || !scratch.enters.is_empty();
    if merged {
        view.merge_staged();
    }
    let View { entries, scratch } = &mut *view;
    let base: &[(EntityId, Seen)] = if merged { &scratch.next } else { entries };

    // Updates: indices into the view after this part's leaves and enters.
    let updates_at = p.w.pos();
    let run = p.open(run_of(&events[i..], EventKind::Update));
    let end = i + run;
    let (mut c, mut j, mut next_min, mut r) = (0, 0usize, 0usize, 0usize);
    while i < end {
        let Some(&Event::Update {
            subject,
            pos,
            dir,
            speed,
            ..
        }) = events.get(i)
        else {
            break;
        };
        while base.get(j).is_some_and(|e| e.0 < subject) {
            j += 1;
        }
        let old = match base.get(j) {
            Some(e) if e.0 == subject => e.1,
            _ => return Err(BatchError::NotVisible(subject)),
        };
        while resets.get(r).is_some_and(|&s| s < subject) {
            r += 1;
        }
        let reset = resets.get(r) == Some(&subject);
        if !reset && !old.changed_by(pos, dir, speed) {
            // Nothing the receiver holds would change: not sent at all.
            i += 1;
            continue;
        }
        let mut flags = 0;
        if pos != old.pos {
            flags |= UPD_POS;
        }
        if dir != old.dir {
            flags |= UPD_DIR;
        }
        if speed != old.speed {
            flags |= UPD_SPEED;
        }
        let mark = p.w.pos();
        if reset {
            p.w.varint(((j - next_min) as u64) << 3 | UPD_RESET);
            p.w.svarint(pos.x.to_bits());
            p.w.svarint(pos.y.to_bits());
            p.w.varint(u64::from(dir));
            p.w.svarint(speed.to_bits());
        } else {
            p.w.varint(((j - next_min) as u64) << 3 | flags);
            if flags & UPD_POS != 0 {
                p.w.svarint(pos.x.to_bits().wrapping_sub(old.pos.x.to_bits()));
                p.w.svarint(pos.y.to_bits().wrapping_sub(old.pos.y.to_bits()));
            }
            if flags & UPD_DIR != 0 {
                p.w.svarint(i64::from(dir.wrapping_sub(old.dir) as i16));
            }
            if flags & UPD_SPEED != 0 {
                p.w.svarint(speed.to_bits().wrapping_sub(old.speed.to_bits()));
            }
        }
        if !p.keep(mark, 0, i == 0) {
            break;
        }
        scratch.updates.push((
            j,
            Seen {
                pos,
                dir,
                speed,
                layers: old.layers,
            },
        ));
        next_min = j + 1;
        j += 1;
        c += 1;
        i += 1;
    }
    p.close(c);

    if let Some(needed) = p.needed {
        return Err(BatchError::BufferTooSmall { needed });
    }
    let len =
        p.w.finish()
            .map_err(|e| BatchError::BufferTooSmall { needed: e.needed })?;
    view.commit(merged);
    Ok(EncodedPart {
        len,
        consumed: i,
        updates_at,
    })
}

/// Decodes one batch part received for `observer`, appends its events to
/// `out` in contract order and applies them to `view`.
///
/// Validates everything before changing anything: on error `view` and
/// `out` are unchanged. A Leave or Update can only name a subject the view
/// holds and an Enter only one it does not, so a client applying parts
/// never sees a Leave for an entity it never entered.
pub fn decode_part(
    payload: &[u8],
    observer: EntityId,
    view: &mut View,
    out: &mut Vec<Event>,
) -> Result<(), BatchError> {
    let base_len = out.len();
    let r = decode_inner(payload, observer, view, out, None);
    if r.is_err() {
        out.truncate(base_len);
    }
    r
}

/// [`decode_part`], also appending to `resets` the subjects whose Update
/// was a reset (ascending): with them, [`encode_part_with_resets`] gives
/// back the same bytes.
pub fn decode_part_with_resets(
    payload: &[u8],
    observer: EntityId,
    view: &mut View,
    out: &mut Vec<Event>,
    resets: &mut Vec<EntityId>,
) -> Result<(), BatchError> {
    let (base_len, resets_len) = (out.len(), resets.len());
    let r = decode_inner(payload, observer, view, out, Some(&mut *resets));
    if r.is_err() {
        out.truncate(base_len);
        resets.truncate(resets_len);
    }
    r
}

fn decode_inner(
    payload: &[u8],
    observer: EntityId,
    view: &mut View,
    out: &mut Vec<Event>,
    mut resets: Option<&mut Vec<EntityId>>,
) -> Result<(), BatchError> {
    let mut r = Reader::new(payload);

    let n = r.count(usize::MAX, 2, "rejections")?;
    for _ in 0..n {
        let entity = r.varint()?;
        let kr = r.u8()?;
        let command = command_from_code(kr >> 4).ok_or(DecodeError::OutOfRange("command kind"))?;
        let reason = reason_from_code(kr & 0xf).ok_or(DecodeError::OutOfRange("reject reason"))?;
        out.push(Event::Rejected {
            entity,
            command,
            reason,
        });
    }

    let View { entries, scratch } = &mut *view;
    scratch.leaves.clear();
    scratch.enters.clear();
    scratch.updates.clear();
    let n = r.count(usize::MAX, 1, "leaves")?;
    let mut next_min = 0usize;
    for _ in 0..n {
        let gap = r.varint()?;
        let idx = usize::try_from(gap)
            .ok()
            .and_then(|g| next_min.checked_add(g))
            .filter(|&k| k < entries.len())
            .ok_or(DecodeError::OutOfRange("leave index"))?;
        scratch.leaves.push(idx);
        next_min = idx + 1;
        out.push(Event::Leave {
            observer,
            subject: entries[idx].0,
        });
    }

    let n = r.count(usize::MAX, 6, "enters")?;
    let (mut j, mut lk) = (0usize, 0usize);
    let mut prev: Option<EntityId> = None;
    let mut prev_pos = (0i64, 0i64);
    for _ in 0..n {
        let d = r.varint()?;
        let subject = match prev {
            None => d,
            Some(p) => p
                .checked_add(d)
                .and_then(|v| v.checked_add(1))
                .ok_or(DecodeError::OutOfRange("enter id"))?,
        };
        let x = prev_pos.0.wrapping_add(r.svarint()?);
        let y = prev_pos.1.wrapping_add(r.svarint()?);
        let dir = r.varint_u16("dir")?;
        let speed = Fix::from_bits(r.svarint()?);
        let layers = r.varint_u32("layers")?;
        while entries.get(j).is_some_and(|e| e.0 < subject) {
            j += 1;
        }
        if entries.get(j).is_some_and(|e| e.0 == subject) {
            while scratch.leaves.get(lk).is_some_and(|&l| l < j) {
                lk += 1;
            }
            if scratch.leaves.get(lk) != Some(&j) {
                return Err(BatchError::AlreadyVisible(subject));
            }
        }
        let pos = Pos::new(Fix::from_bits(x), Fix::from_bits(y));
        scratch.enters.push((
            subject,
            Seen {
                pos,
                dir,
                speed,
                layers,
            },
        ));
        out.push(Event::Enter {
            observer,
            subject,
            pos,
            dir,
            speed,
            layers,
        });
        prev = Some(subject);
        prev_pos = (x, y);
    }

    let merged = !scratch.leaves.is_empty() || !scratch.enters.is_empty();
    if merged {
        view.merge_staged();
    }
    let View { entries, scratch } = &mut *view;
    let base: &[(EntityId, Seen)] = if merged { &scratch.next } else { entries };

    let n = r.count(usize::MAX, 1, "updates")?;
    let mut next_min = 0usize;
    for _ in 0..n {
        let head = r.varint()?;
        let flags = head & 7;
        let idx = usize::try_from(head >> 3)
            .ok()
            .and_then(|g| next_min.checked_add(g))
            .filter(|&k| k < base.len())
            .ok_or(DecodeError::OutOfRange("update index"))?;
        let (subject, old) = base[idx];
        let mut s = old;
        if flags == UPD_RESET {
            let (x, y) = (r.svarint()?, r.svarint()?);
            s.pos = Pos::new(Fix::from_bits(x), Fix::from_bits(y));
            s.dir = r.varint_u16("dir")?;
            s.speed = Fix::from_bits(r.svarint()?);
            if let Some(resets) = resets.as_deref_mut() {
                resets.push(subject);
            }
        }
        if flags & UPD_POS != 0 {
            let (dx, dy) = (r.svarint()?, r.svarint()?);
            if dx == 0 && dy == 0 {
                return Err(DecodeError::OutOfRange("update position delta").into());
            }
            s.pos = Pos::new(
                Fix::from_bits(old.pos.x.to_bits().wrapping_add(dx)),
                Fix::from_bits(old.pos.y.to_bits().wrapping_add(dy)),
            );
        }
        if flags & UPD_DIR != 0 {
            let d = i16::try_from(r.svarint()?)
                .ok()
                .filter(|&d| d != 0)
                .ok_or(DecodeError::OutOfRange("update dir delta"))?;
            s.dir = old.dir.wrapping_add(d as u16);
        }
        if flags & UPD_SPEED != 0 {
            let d = r.svarint()?;
            if d == 0 {
                return Err(DecodeError::OutOfRange("update speed delta").into());
            }
            s.speed = Fix::from_bits(old.speed.to_bits().wrapping_add(d));
        }
        scratch.updates.push((idx, s));
        out.push(Event::Update {
            observer,
            subject,
            pos: s.pos,
            dir: s.dir,
            speed: s.speed,
        });
        next_min = idx + 1;
    }
    if !r.is_empty() {
        return Err(DecodeError::TrailingBytes.into());
    }
    view.commit(merged);
    Ok(())
}

/// Reads one Update item: its gap, its flags and the bytes of its fields.
fn update_item<'a>(
    r: &mut Reader<'a>,
    bytes: &'a [u8],
) -> Result<(u64, u64, &'a [u8]), DecodeError> {
    let head = r.varint()?;
    let flags = head & 7;
    let at = r.pos();
    let fields = match flags {
        UPD_RESET => 4,
        f => {
            2 * usize::from(f & UPD_POS != 0)
                + usize::from(f & UPD_DIR != 0)
                + usize::from(f & UPD_SPEED != 0)
        }
    };
    for _ in 0..fields {
        r.varint()?;
    }
    Ok((head >> 3, flags, &bytes[at..r.pos()]))
}

/// Keeps only the Update items of a part for which `keep(n)` holds (`n`
/// counts the part's Update items from 0; asked twice for each, it must
/// answer the same), rewriting the gaps of those
/// kept; returns the part's new length, never more than the old. `part`
/// was written by [`encode_part_with_resets`], its update section starting
/// at `updates_at`; `scratch` is reused. Each kept item stays relative to
/// the same state, so the part still applies to the same view.
pub(crate) fn retain_updates(
    part: &mut [u8],
    updates_at: usize,
    scratch: &mut Vec<u8>,
    mut keep: impl FnMut(usize) -> bool,
) -> Result<usize, DecodeError> {
    scratch.clear();
    scratch.extend_from_slice(part.get(updates_at..).ok_or(DecodeError::UnexpectedEnd)?);
    let items = |r: &mut Reader<'_>| r.count(usize::MAX, 1, "updates");
    let mut r = Reader::new(scratch);
    let n = items(&mut r)?;
    let mut kept = 0u64;
    for k in 0..n {
        update_item(&mut r, scratch)?;
        kept += u64::from(keep(k));
    }
    // Removing an item only merges its gap into the next kept one's, and
    // a varint of a sum is no longer than the two varints, so the rewrite
    // never outgrows the part.
    let mut w = Writer::new(&mut part[updates_at..]);
    w.varint(kept);
    let mut r = Reader::new(scratch);
    items(&mut r)?;
    let (mut next, mut wnext) = (0u64, 0u64);
    for k in 0..n {
        let (gap, flags, fields) = update_item(&mut r, scratch)?;
        let idx = next.saturating_add(gap);
        next = idx.saturating_add(1);
        if keep(k) {
            w.varint((idx - wnext) << 3 | flags);
            w.bytes(fields);
            wnext = idx + 1;
        }
    }
    let len = w.finish().map_err(|_| DecodeError::UnexpectedEnd)?;
    Ok(updates_at + len)
}

impl View {
    /// Makes a validated part's staged changes the view.
    fn commit(&mut self, merged: bool) {
        if merged {
            self.commit_merged();
        }
        for &(idx, s) in &self.scratch.updates {
            if let Some(e) = self.entries.get_mut(idx) {
                e.1 = s;
            }
        }
    }
}
