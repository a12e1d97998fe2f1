//! Time as the caller passes it in: the crate never reads a clock.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in microseconds since an epoch the caller chooses.
///
/// The endpoints only compare and subtract instants, so any monotonic
/// source works (a host's `std::time::Instant` offset, a virtual clock in
/// tests). Time never goes backwards: an endpoint that is handed an earlier
/// `now` than before treats it as the latest `now` it has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch itself.
    pub const ZERO: Instant = Instant(0);

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

/// Whole microseconds of a duration, saturating at `u64::MAX`.
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the far end of time instead of overflowing.
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(micros(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_micros(10);
        assert_eq!(t + Duration::from_micros(5), Instant::from_micros(15));
        assert_eq!(Instant::from_micros(3) - t, Duration::ZERO);
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
    }
}
