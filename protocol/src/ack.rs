//! Packet acknowledgement: what was received, what the peer has received,
//! round-trip time, and loss detection.

use alloc::collections::VecDeque;
use core::time::Duration;

use crate::time::{micros, Instant};

/// Ack bitfield width: how far back behind `ack` a receipt can be reported.
pub(crate) const ACK_WINDOW: u32 = 32;
/// A packet is declared lost once a packet this many numbers later is acknowledged.
const REORDER_THRESHOLD: u32 = 3;

/// Received packet numbers, as reported in the header's `ack` and `ack_bits`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecvTracker {
    largest: u32,
    bits: u32,
}

/// Whether a received packet number is new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// Not seen before: process it.
    New,
    /// Already processed.
    Duplicate,
    /// Older than the ack window can express; dropped (its contents are resent).
    TooOld,
}

impl RecvTracker {
    pub(crate) fn ack(&self) -> (u32, u32) {
        (self.largest, self.bits)
    }

    pub(crate) fn check(&self, seq: u32) -> Receipt {
        if self.largest == 0 || seq > self.largest {
            return Receipt::New;
        }
        let d = self.largest - seq;
        if d == 0 {
            Receipt::Duplicate
        } else if d > ACK_WINDOW {
            Receipt::TooOld
        } else if self.bits >> (d - 1) & 1 == 1 {
            Receipt::Duplicate
        } else {
            Receipt::New
        }
    }

    /// Records `seq` (which `check` found new).
    pub(crate) fn record(&mut self, seq: u32) {
        if seq == 0 {
            return;
        }
        if self.largest == 0 {
            self.largest = seq;
        } else if seq > self.largest {
            let shift = seq - self.largest;
            // Bits that move past the window are forgotten.
            self.bits = if shift > ACK_WINDOW {
                0
            } else {
                (u64::from(self.bits) << shift | 1u64 << (shift - 1)) as u32
            };
            self.largest = seq;
        } else {
            let d = self.largest - seq;
            if (1..=ACK_WINDOW).contains(&d) {
                self.bits |= 1 << (d - 1);
            }
        }
    }
}

/// Smoothed round-trip time (RFC 6298 style), in microseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rtt {
    srtt: u64,
    rttvar: u64,
    sampled: bool,
}

impl Rtt {
    pub(crate) fn new(initial: Duration) -> Self {
        let i = micros(initial);
        Rtt {
            srtt: i,
            rttvar: i / 2,
            sampled: false,
        }
    }

    pub(crate) fn sample(&mut self, rtt: Duration) {
        let r = micros(rtt);
        if !self.sampled {
            self.srtt = r;
            self.rttvar = r / 2;
            self.sampled = true;
        } else {
            self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(r)) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
    }

    /// The smoothed round-trip time.
    pub(crate) fn smoothed(&self) -> Duration {
        Duration::from_micros(self.srtt)
    }

    /// Retransmission timeout: srtt + 4·rttvar + the peer's ack delay, clamped.
    pub(crate) fn rto(&self, ack_delay: Duration) -> Duration {
        let us = self.srtt + (4 * self.rttvar).max(1_000) + micros(ack_delay);
        Duration::from_micros(us.clamp(5_000, 5_000_000))
    }
}

/// A sent packet awaiting acknowledgement.
#[derive(Clone, Debug)]
struct Sent<T> {
    seq: u32,
    at: Instant,
    data: T,
}

/// Ack-eliciting packets in flight, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct SentLog<T> {
    q: VecDeque<Sent<T>>,
    spare: VecDeque<Sent<T>>,
    largest_acked: u32,
    cap: usize,
}

/// What happened to a packet in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Acked,
    Lost,
}

impl<T> SentLog<T> {
    pub(crate) fn new(cap: usize) -> Self {
        SentLog {
            q: VecDeque::new(),
            spare: VecDeque::new(),
            largest_acked: 0,
            cap,
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Room for `n` packets in flight without growing.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.q.reserve(n);
        self.spare.reserve(n);
    }

    /// Records a sent packet; past the cap the oldest is declared lost.
    pub(crate) fn push(&mut self, seq: u32, at: Instant, data: T, mut on: impl FnMut(Fate, T)) {
        self.q.push_back(Sent { seq, at, data });
        while self.q.len() > self.cap {
            if let Some(s) = self.q.pop_front() {
                on(Fate::Lost, s.data);
            }
        }
    }

    /// Applies a peer's `ack`/`ack_bits`: reports acknowledged packets, takes
    /// an RTT sample from the newest, and declares packets lost that are
    /// `REORDER_THRESHOLD` numbers behind the largest acknowledged one.
    pub(crate) fn on_ack(
        &mut self,
        ack: u32,
        bits: u32,
        now: Instant,
        rtt: &mut Rtt,
        mut on: impl FnMut(Fate, T),
    ) {
        if ack == 0 {
            return;
        }
        let acked = |seq: u32| {
            seq == ack || (seq < ack && ack - seq <= ACK_WINDOW && bits >> (ack - seq - 1) & 1 == 1)
        };
        self.largest_acked = self.largest_acked.max(ack);
        let largest = self.largest_acked;
        self.spare.clear();
        while let Some(s) = self.q.pop_front() {
            if acked(s.seq) {
                if s.seq == ack {
                    rtt.sample(now - s.at);
                }
                on(Fate::Acked, s.data);
            } else if s.seq.saturating_add(REORDER_THRESHOLD) <= largest {
                on(Fate::Lost, s.data);
            } else {
                self.spare.push_back(s);
            }
        }
        core::mem::swap(&mut self.q, &mut self.spare);
    }

    /// Declares packets lost that have been in flight for `rto`.
    pub(crate) fn on_timeout(&mut self, now: Instant, rto: Duration, mut on: impl FnMut(Fate, T)) {
        while let Some(s) = self.q.front() {
            if s.at + rto > now {
                break;
            }
            if let Some(s) = self.q.pop_front() {
                on(Fate::Lost, s.data);
            }
        }
    }

    /// When the oldest packet in flight times out.
    pub(crate) fn loss_deadline(&self, rto: Duration) -> Option<Instant> {
        self.q.front().map(|s| s.at + rto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_track_the_window() {
        let mut r = RecvTracker::default();
        assert_eq!(r.check(5), Receipt::New);
        r.record(5);
        assert_eq!(r.check(5), Receipt::Duplicate);
        assert_eq!(r.check(3), Receipt::New);
        r.record(3);
        assert_eq!(r.ack(), (5, 0b10));
        r.record(7);
        assert_eq!(r.ack(), (7, 0b1010));
        assert_eq!(r.check(3), Receipt::Duplicate);
        r.record(100);
        assert_eq!(r.ack(), (100, 0));
        assert_eq!(r.check(60), Receipt::TooOld);
        r.record(132);
        assert_eq!(r.ack(), (132, 1 << 31));
        r.record(200);
        assert_eq!(r.ack(), (200, 0));
    }

    #[test]
    fn acks_and_losses() {
        let mut log = SentLog::new(16);
        let mut rtt = Rtt::new(Duration::from_millis(100));
        let t0 = Instant::from_micros(0);
        for s in 1..=6 {
            log.push(s, t0, s, |_, _| unreachable!());
        }
        let mut acked = alloc::vec::Vec::new();
        let mut lost = alloc::vec::Vec::new();
        // ack 6 with 5 and 3: 1 and 2 are 3+ behind -> lost; 4 still pending.
        log.on_ack(
            6,
            0b101,
            Instant::from_micros(40_000),
            &mut rtt,
            |f, d| match f {
                Fate::Acked => acked.push(d),
                Fate::Lost => lost.push(d),
            },
        );
        assert_eq!(acked, [3, 5, 6]);
        assert_eq!(lost, [1, 2]);
        assert_eq!(rtt.smoothed(), Duration::from_millis(40));
        let mut timed_out = alloc::vec::Vec::new();
        log.on_timeout(
            Instant::from_micros(10_000_000),
            Duration::from_millis(1),
            |_, d| timed_out.push(d),
        );
        assert_eq!(timed_out, [4]);
        assert!(log.is_empty());
    }
}
