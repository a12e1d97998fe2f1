//! A per-address datagram budget, so one sender cannot take the node's time.

use std::collections::BTreeMap;
use std::time::Duration;

use lockgrid_protocol::Instant;

/// Most addresses tracked in one window; past it datagrams from new
/// addresses are dropped (the map stays bounded under a spoofed flood).
pub const MAX_TRACKED_ADDRS: usize = 65_536;

/// Datagrams per source address in the current one-second window.
pub(crate) struct RateLimit<A> {
    window_start: Instant,
    counts: BTreeMap<A, u32>,
    per_sec: u32,
    /// Whether this window already dropped the last window's entries.
    pruned: bool,
}

impl<A: Ord + Clone> RateLimit<A> {
    pub(crate) fn new(now: Instant, per_sec: u32) -> Self {
        RateLimit {
            window_start: now,
            counts: BTreeMap::new(),
            per_sec,
            pruned: false,
        }
    }

    /// Counts one datagram from `from`; false when it is over the budget.
    pub(crate) fn allow(&mut self, now: Instant, from: &A) -> bool {
        if now.saturating_duration_since(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            // Addresses that sent in the last window keep their entry at
            // zero (a steady client costs no allocation a second); the
            // others are forgotten.
            self.counts.retain(|_, n| {
                let active = *n > 0;
                *n = 0;
                active
            });
            self.pruned = false;
        }
        if let Some(n) = self.counts.get_mut(from) {
            *n = n.saturating_add(1);
            return *n <= self.per_sec;
        }
        if self.counts.len() >= MAX_TRACKED_ADDRS && !self.pruned {
            // Only addresses heard in this window count against the limit
            // (pruned once a window, so a flood of new addresses costs no
            // scan each).
            self.counts.retain(|_, n| *n > 0);
            self.pruned = true;
        }
        if self.counts.len() >= MAX_TRACKED_ADDRS {
            return false;
        }
        self.counts.insert(from.clone(), 1);
        self.per_sec >= 1
    }

    /// Addresses tracked now: heard in this window, or in the last one.
    pub(crate) fn tracked(&self) -> usize {
        self.counts.len()
    }
}
