//! A connection's backlog: the ticks queued for its client and not yet
//! acknowledged, split into parts, with what they hold counted as they
//! change (bytes, parts waiting to be sent), so that no question about
//! them scans them.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::mem::size_of;

use lockgrid_kernel::{EntityId, Event};

use crate::ack::Fate;
use crate::batch::{encode_part_with_resets, retain_updates};
use crate::budget::Pacer;
use crate::config::TICK_BATCH_OVERHEAD;
use crate::frame::{Frame, TickBatch};
use crate::reason::DisconnectReason;
use crate::view::View;
use crate::wire::Writer;

/// Parts a new pending tick and a new packet record have room for, so
/// that most never grow.
pub(super) const FIRST_PARTS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PartState {
    Unsent,
    InFlight(u32),
    Acked,
}

/// One part of a pending tick, its payload the first `len` bytes of a
/// block of the server's [`Blocks`].
#[derive(Debug)]
struct PendingPart {
    block: Vec<u8>,
    len: usize,
    state: PartState,
    /// Where its update section starts in the payload.
    updates_at: usize,
    /// With a budget: the subjects it updates are
    /// `updated[first..first + count]` of its tick.
    first: usize,
    count: usize,
}

/// One tick's parts for one connection, until every part is acknowledged.
/// Its vectors are reused (see [`Backlog::spare`]), so a steady tick
/// allocates nothing.
#[derive(Debug, Default)]
struct PendingTick {
    tick: u64,
    digest: u64,
    parts: Vec<PendingPart>,
    /// With a budget: the subjects each part updates (see [`PendingPart`]).
    updated: Vec<EntityId>,
    unacked: usize,
}

impl PendingTick {
    /// Before part `k` is sent again: drops the Updates the pacer says a
    /// newer state superseded (see `Pacer::resend_keeps`), so that a
    /// resent part never takes a client back to a stale state; the pacer
    /// sends each such subject its newest state later, as a reset. Returns
    /// by how many bytes the part shrank.
    fn supersede(&mut self, k: usize, pacer: &mut Pacer, scratch: &mut Vec<u8>) -> usize {
        let Some(p) = self.parts.get_mut(k) else {
            return 0;
        };
        let updated = &mut self.updated[p.first..p.first + p.count];
        let part = k as u16;
        let keep = |n: usize| {
            updated
                .get(n)
                .is_some_and(|&s| pacer.resend_keeps(self.tick, part, s))
        };
        if updated.is_empty() || (0..updated.len()).all(keep) {
            return 0;
        }
        let Ok(len) = retain_updates(&mut p.block[..p.len], p.updates_at, scratch, keep) else {
            return 0;
        };
        let shrunk = p.len - len;
        p.len = len;
        // Which subjects were dropped, before the pacer hears of it.
        let mut kept = 0;
        for n in 0..updated.len() {
            let s = updated[n];
            if pacer.resend_keeps(self.tick, part, s) {
                updated[kept] = s;
                kept += 1;
            } else {
                pacer.superseded(self.tick, part, s);
            }
        }
        p.count = kept;
        shrunk
    }
}

fn new_tick() -> PendingTick {
    PendingTick {
        parts: Vec::with_capacity(FIRST_PARTS),
        ..PendingTick::default()
    }
}

/// Payload blocks of parts, shared by every connection of a server: each
/// is `size` bytes long and holds one part of at most that many, so no
/// block ever grows nor is cleared (a part is encoded over whatever the
/// block held and knows its own length), and a
/// block freed by one connection's acknowledgement carries another's next
/// tick. Connections add their share when accepted
/// ([`Blocks::add`]); only a burst of more parts pending at once than
/// ever before takes new ones.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    free: Vec<Vec<u8>>,
    size: usize,
    /// Blocks and pending ticks made after accept because none was free
    /// (see [`ServerStats::pool_grown`](crate::ServerStats::pool_grown)).
    pub(super) grown: u64,
}

impl Blocks {
    /// An empty pool of blocks of `size` bytes.
    pub(super) fn new(size: usize) -> Blocks {
        Blocks {
            free: Vec::new(),
            size,
            grown: 0,
        }
    }

    /// Adds `n` free blocks.
    pub(super) fn add(&mut self, n: usize) {
        self.free.reserve(n);
        for _ in 0..n {
            self.free.push(vec![0; self.size]);
        }
    }

    /// Gives back up to `n` free blocks' memory (a connection left).
    pub(super) fn remove(&mut self, n: usize) {
        self.free.truncate(self.free.len().saturating_sub(n));
    }

    fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_else(|| {
            self.grown += 1;
            vec![0; self.size]
        })
    }

    fn put(&mut self, block: Vec<u8>) {
        self.free.push(block);
    }
}

/// How a tick's events are split into parts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Split {
    /// Most payload bytes a part holds.
    pub(super) budget: usize,
    /// Most parts a tick may take; a tick needing more closes the
    /// connection ([`DisconnectReason::LimitReached`]).
    pub(super) max_parts: usize,
}

/// The ticks a connection has queued and its client has not acknowledged,
/// oldest first, with their counts kept as parts are queued, sent, lost
/// and acknowledged.
#[derive(Debug, Default)]
pub(super) struct Backlog {
    ticks: VecDeque<PendingTick>,
    /// Payload bytes of the parts not yet acknowledged.
    bytes: usize,
    /// Parts waiting to be sent, so that whether the connection has
    /// something to send costs O(1).
    unsent: u32,
    /// Payload bytes of those parts, so that what a resend will cost (the
    /// budget's first charge each tick) is read, not summed.
    unsent_len: usize,
    /// Acknowledged ticks, emptied, kept for their buffers: a connection
    /// holds at most as many ticks, pending and spare, as it ever had
    /// pending at once (bounded by the server's `max_unacked_ticks`).
    spare: Vec<PendingTick>,
    /// Scratch for rewriting a part's update section.
    rewrite: Vec<u8>,
}

impl Backlog {
    /// An empty backlog whose rewrite of a resent part (with a budget) has
    /// room for `rewrite` bytes from the start.
    pub(super) fn new(rewrite: usize) -> Backlog {
        Backlog {
            rewrite: Vec::with_capacity(rewrite),
            ..Backlog::default()
        }
    }

    /// Ticks queued and not fully acknowledged.
    pub(super) fn ticks(&self) -> usize {
        self.ticks.len()
    }

    /// The oldest of them.
    pub(super) fn oldest(&self) -> Option<u64> {
        self.ticks.front().map(|t| t.tick)
    }

    /// Payload bytes not yet acknowledged.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether some part waits to be sent.
    pub(super) fn has_unsent(&self) -> bool {
        self.unsent > 0
    }

    /// Bytes the parts waiting to be sent take in packets, frames included.
    pub(super) fn unsent_bytes(&self) -> usize {
        self.unsent_len + self.unsent as usize * TICK_BATCH_OVERHEAD
    }

    /// Drops every tick (the connection is closing), its blocks back to `blocks`.
    pub(super) fn clear(&mut self, blocks: &mut Blocks) {
        while let Some(t) = self.ticks.pop_front() {
            self.put_spare(t, blocks);
        }
        self.bytes = 0;
        self.unsent = 0;
        self.unsent_len = 0;
    }

    /// Encodes a tick's events for this connection into parts as `split`
    /// says (each straight into a block taken from `blocks`), against the
    /// client's view as the server tracks it (`shadow`).
    pub(super) fn queue(
        &mut self,
        (tick, digest): (u64, u64),
        events: &[Event],
        shadow: &mut View,
        pacer: &mut Option<Pacer>,
        split: Split,
        blocks: &mut Blocks,
    ) -> Result<(), DisconnectReason> {
        let mut t = self.spare.pop().unwrap_or_else(|| {
            blocks.grown += 1;
            new_tick()
        });
        let mut rest = events;
        let mut bytes = 0;
        loop {
            if t.parts.len() >= split.max_parts {
                self.put_spare(t, blocks);
                return Err(DisconnectReason::LimitReached);
            }
            let mut block = blocks.take();
            // Blocks are the part budget long; the split budget leaves room for a seal.
            let room = split.budget.min(block.len());
            let resets = pacer.as_ref().map_or(&[][..], Pacer::resets);
            let Ok(p) = encode_part_with_resets(rest, shadow, &mut block[..room], resets) else {
                blocks.put(block);
                self.put_spare(t, blocks);
                return Err(DisconnectReason::Desync);
            };
            let first = t.updated.len();
            if let Some(pacer) = pacer.as_mut() {
                // The view's staged updates are this part's, by index
                // into the view as it now is.
                let entries = &shadow.entries;
                t.updated.extend(
                    shadow
                        .scratch
                        .updates
                        .iter()
                        .filter_map(|&(j, _)| entries.get(j).map(|e| e.0)),
                );
                pacer.sent_in(tick, t.parts.len() as u16, &t.updated[first..]);
            }
            t.parts.push(PendingPart {
                block,
                len: p.len,
                state: PartState::Unsent,
                updates_at: p.updates_at,
                first,
                count: t.updated.len() - first,
            });
            bytes += p.len;
            rest = &rest[p.consumed..];
            if rest.is_empty() {
                break;
            }
        }
        t.tick = tick;
        t.digest = digest;
        t.unacked = t.parts.len();
        self.bytes += bytes;
        self.unsent += t.parts.len() as u32;
        self.unsent_len += bytes;
        self.ticks.push_back(t);
        Ok(())
    }

    /// Writes parts waiting to be sent, oldest first, as TickBatch frames
    /// into packet `seq` until the next would pass `cap`; records each in
    /// `carried` as (tick, part). Says whether it wrote any.
    pub(super) fn fill(
        &mut self,
        w: &mut Writer<'_>,
        cap: usize,
        seq: u32,
        carried: &mut Vec<(u64, u16)>,
    ) -> bool {
        let mut wrote = false;
        'fill: for t in self.ticks.iter_mut() {
            if self.unsent == 0 {
                break;
            }
            let parts = t.parts.len() as u16;
            for k in 0..t.parts.len() {
                let p = &t.parts[k];
                if p.state != PartState::Unsent {
                    continue;
                }
                let mark = w.pos();
                Frame::TickBatch(TickBatch {
                    tick: t.tick,
                    part: k as u16,
                    parts,
                    digest: t.digest,
                    payload: &p.block[..p.len],
                })
                .write_infallible(w);
                if w.pos() > cap {
                    w.rewind(mark);
                    break 'fill;
                }
                t.parts[k].state = PartState::InFlight(seq);
                self.unsent -= 1;
                self.unsent_len -= t.parts[k].len;
                carried.push((t.tick, k as u16));
                wrote = true;
            }
        }
        wrote
    }

    /// Acts on what became of packet `seq`, which carried `carried`: its
    /// parts are acknowledged, or to be sent again (with a budget, without
    /// the Updates a newer state superseded). Returns how many parts are
    /// to be sent again.
    pub(super) fn settle(
        &mut self,
        fate: Fate,
        seq: u32,
        carried: &[(u64, u16)],
        pacer: &mut Option<Pacer>,
        blocks: &mut Blocks,
    ) -> u64 {
        let Some(first) = self.oldest() else {
            return 0;
        };
        let mut again = 0;
        for &(tick, part) in carried {
            let Some(t) = tick
                .checked_sub(first)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.ticks.get_mut(i))
            else {
                continue;
            };
            let k = usize::from(part);
            let Some(p) = t.parts.get_mut(k) else {
                continue;
            };
            match (fate, p.state) {
                (_, PartState::Acked) => {}
                (Fate::Acked, state) => {
                    if state == PartState::Unsent {
                        self.unsent -= 1;
                        self.unsent_len -= p.len;
                    }
                    p.state = PartState::Acked;
                    self.bytes -= p.len;
                    t.unacked -= 1;
                }
                (Fate::Lost, PartState::InFlight(s)) if s == seq => {
                    p.state = PartState::Unsent;
                    self.unsent += 1;
                    self.unsent_len += p.len;
                    again += 1;
                    // With a budget a part is never resent with Updates that
                    // may have been superseded: they are dropped, and each
                    // subject's newest state goes in a later tick instead.
                    if let Some(pacer) = pacer.as_mut() {
                        let shrunk = t.supersede(k, pacer, &mut self.rewrite);
                        self.bytes -= shrunk;
                        self.unsent_len -= shrunk;
                    }
                }
                (Fate::Lost, _) => {}
            }
        }
        self.pop_acked(blocks);
        again
    }

    /// The client applied every tick up to `tick`: nothing before it needs
    /// resending.
    pub(super) fn ack_through(&mut self, tick: u64, blocks: &mut Blocks) {
        for t in self.ticks.iter_mut() {
            if t.tick > tick {
                break;
            }
            for p in t.parts.iter_mut() {
                if p.state != PartState::Acked {
                    if p.state == PartState::Unsent {
                        self.unsent -= 1;
                        self.unsent_len -= p.len;
                    }
                    p.state = PartState::Acked;
                    self.bytes -= p.len;
                }
            }
            t.unacked = 0;
        }
        self.pop_acked(blocks);
    }

    /// Drops the fully acknowledged ticks at the front, keeping their buffers.
    fn pop_acked(&mut self, blocks: &mut Blocks) {
        while self.ticks.front().is_some_and(|t| t.unacked == 0) {
            if let Some(t) = self.ticks.pop_front() {
                self.put_spare(t, blocks);
            }
        }
    }

    fn put_spare(&mut self, mut t: PendingTick, blocks: &mut Blocks) {
        for p in t.parts.drain(..) {
            blocks.put(p.block);
        }
        t.updated.clear();
        self.spare.push(t);
    }

    /// Bytes [`reserve`](Self::reserve) takes for `ticks` and `updates`.
    pub(super) fn reserved_bytes(ticks: usize, updates: usize) -> usize {
        // Each tick is held in the queue's room and, spare, in the spare list's.
        ticks
            * (2 * size_of::<PendingTick>()
                + FIRST_PARTS * size_of::<PendingPart>()
                + updates * size_of::<EntityId>())
    }

    /// Room for `ticks` pending ticks of up to [`FIRST_PARTS`] parts and
    /// `updates` paced Updates each, made when the client is accepted, so
    /// that a steady connection never grows its backlog.
    pub(super) fn reserve(&mut self, ticks: usize, updates: usize) {
        self.ticks.reserve(ticks);
        self.spare.reserve(ticks);
        while self.spare.len() < ticks {
            self.spare.push(new_tick());
        }
        for t in &mut self.spare {
            t.updated.reserve(updates);
        }
    }

    /// Checks the kept counts against the parts themselves.
    #[cfg(debug_assertions)]
    pub(super) fn check_counts(&self) {
        let parts = || self.ticks.iter().flat_map(|t| t.parts.iter());
        let unsent = parts().filter(|p| p.state == PartState::Unsent).count();
        assert_eq!(self.unsent as usize, unsent, "unsent parts miscounted");
        let unsent_len: usize = parts()
            .filter(|p| p.state == PartState::Unsent)
            .map(|p| p.len)
            .sum();
        assert_eq!(self.unsent_len, unsent_len, "unsent bytes miscounted");
        let bytes: usize = parts()
            .filter(|p| p.state != PartState::Acked)
            .map(|p| p.len)
            .sum();
        assert_eq!(self.bytes, bytes, "unacknowledged bytes miscounted");
    }
}
