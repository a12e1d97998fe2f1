//! A seeded, sans-IO network: datagrams queued with a delivery time; loss,
//! duplication, jitter (hence reordering), delay spikes and partitions
//! drawn from one seed.

use std::collections::BTreeMap;

use lockgrid_protocol::Instant;

use super::Rng;

/// Address of the node; clients have 1, 2, 3, …
pub const SERVER: u32 = 0;

/// The network's faults, per million datagrams or in microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Loss probability, per million.
    pub loss: u64,
    /// Duplication probability, per million.
    pub dup: u64,
    /// Extra latency drawn uniformly in `0..=jitter`, µs.
    pub jitter: u64,
    /// Probability of a delay spike, per million.
    pub spike: u64,
    /// Largest delay spike, µs.
    pub spike_us: u64,
}

pub struct Net {
    rng: Rng,
    pub faults: Faults,
    /// Base one-way latency, µs.
    pub latency: u64,
    pub mtu: usize,
    queue: BTreeMap<(u64, u64), (u32, u32, Vec<u8>)>,
    serial: u64,
    /// Addresses cut off until the given time (the node's is `SERVER`).
    down: BTreeMap<u32, Instant>,
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
}

impl Net {
    pub fn new(seed: u64, mtu: usize) -> Self {
        Net {
            rng: Rng::new(seed),
            faults: Faults::default(),
            latency: 15_000,
            queue: BTreeMap::new(),
            serial: 0,
            down: BTreeMap::new(),
            mtu,
            sent: 0,
            delivered: 0,
            dropped: 0,
        }
    }

    /// Cuts `addr` off the network until `until`.
    pub fn partition(&mut self, addr: u32, until: Instant) {
        self.down.insert(addr, until);
    }

    fn is_down(&self, addr: u32, now: Instant) -> bool {
        self.down.get(&addr).is_some_and(|&t| now < t)
    }

    pub fn send(&mut self, now: Instant, from: u32, to: u32, bytes: &[u8]) {
        assert!(
            bytes.len() <= self.mtu,
            "datagram of {} bytes exceeds the mtu {}",
            bytes.len(),
            self.mtu
        );
        self.sent += 1;
        if self.is_down(from, now) || self.rng.chance(self.faults.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut delay = self.latency + self.rng.below(self.faults.jitter + 1);
            if self.rng.chance(self.faults.spike) {
                delay += self.rng.below(self.faults.spike_us + 1);
            }
            self.serial += 1;
            self.queue.insert(
                (now.as_micros() + delay, self.serial),
                (from, to, bytes.to_vec()),
            );
        }
    }

    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue
            .keys()
            .next()
            .map(|&(t, _)| Instant::from_micros(t))
    }

    /// The next datagram due at or before `now`: (from, to, bytes).
    /// Datagrams to a cut-off address are lost.
    pub fn pop_due(&mut self, now: Instant) -> Option<(u32, u32, Vec<u8>)> {
        loop {
            let (&key, _) = self.queue.iter().next()?;
            if key.0 > now.as_micros() {
                return None;
            }
            let (from, to, bytes) = self.queue.remove(&key)?;
            if self.is_down(to, now) {
                self.dropped += 1;
                continue;
            }
            self.delivered += 1;
            return Some((from, to, bytes));
        }
    }

    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}
