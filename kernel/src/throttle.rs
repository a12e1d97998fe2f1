//! The update throttle: when a subject's new state is worth sending.

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

use crate::fixed_point::{angle_diff, len2_raw, Dir, Fix, Pos};

/// The part of an entity's state that moves: what Updates carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Motion {
    /// Position.
    pub pos: Pos,
    /// Heading.
    pub dir: Dir,
    /// Speed.
    pub speed: Fix,
}

/// The last state sent for a subject and the tick it was sent at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Sent {
    /// The state sent (`L`).
    pub motion: Motion,
    /// The tick it was sent at (`T`).
    pub tick: u64,
}

/// The throttle's parameters, taken from the config.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Throttle {
    pub(crate) update_interval: u64,
    pub(crate) move_epsilon2: u128,
    pub(crate) dir_epsilon: Dir,
}

impl Throttle {
    /// `due = s_t ≠ L ∧ (L is none ∨ t − T ≥ interval ∨ |pos − L.pos| ≥ ε_move
    /// ∨ angle_diff(dir, L.dir) ≥ ε_dir ∨ s_t = s_{t−1})`.
    pub(crate) fn is_due(
        &self,
        now: &Motion,
        before: &Motion,
        sent: Option<&Sent>,
        t: u64,
    ) -> bool {
        let Some(sent) = sent else {
            return true;
        };
        if *now == sent.motion {
            return false;
        }
        t.saturating_sub(sent.tick) >= self.update_interval
            || now.pos.dist2_raw(sent.motion.pos) >= self.move_epsilon2
            || angle_diff(now.dir, sent.motion.dir) >= self.dir_epsilon
            || now == before
    }
}

pub(crate) fn throttle_of(cfg: &crate::Config) -> Throttle {
    Throttle {
        update_interval: cfg.update_interval,
        move_epsilon2: len2_raw(cfg.move_epsilon),
        dir_epsilon: cfg.dir_epsilon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: i32) -> Motion {
        Motion {
            pos: Pos::from_ints(x, 0),
            ..Motion::default()
        }
    }

    #[test]
    fn rule_clauses() {
        let th = Throttle {
            update_interval: 3,
            move_epsilon2: len2_raw(Fix::from_num(2)),
            dir_epsilon: 100,
        };
        let sent = Sent {
            motion: at(0),
            tick: 10,
        };
        // Unchanged from what was sent: never due.
        assert!(!th.is_due(&at(0), &at(1), Some(&sent), 50));
        // Never sent: due.
        assert!(th.is_due(&at(1), &at(0), None, 11));
        // Small move, too soon, still moving: not due.
        assert!(!th.is_due(&at(1), &at(0), Some(&sent), 11));
        // Interval elapsed.
        assert!(th.is_due(&at(1), &at(0), Some(&sent), 13));
        // Far enough (exactly epsilon counts).
        assert!(th.is_due(&at(2), &at(1), Some(&sent), 11));
        // Came to rest: settling update.
        assert!(th.is_due(&at(1), &at(1), Some(&sent), 11));
        // Turned far enough, across the wrap.
        let turned = Motion {
            dir: 65436,
            ..at(0)
        };
        assert!(th.is_due(&turned, &at(1), Some(&sent), 11));
        let nudged = Motion {
            dir: 65437,
            ..at(0)
        };
        assert!(!th.is_due(&nudged, &at(1), Some(&sent), 11));
    }
}
