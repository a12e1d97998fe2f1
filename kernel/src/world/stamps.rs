//! Per-slot tick stamps: a slot is "in" one of a tick's sets when its
//! stamp there is the tick's ([`stamp`]), so the sets clear in O(1).
//!
//! A stamp is a tick's low 32 bits, half the memory of the whole tick (14
//! bytes an entity over the three sets). A stamp left from `2^32` ticks
//! before would read as the current tick's, so on the two ticks whose
//! stamps are 0 and `u32::MAX` every stamp is set to the tick before's,
//! which only the other of those two ticks would match again: a fill of
//! the three sets every `2^32` ticks (two years at 60 Hz).

use alloc::vec;
use alloc::vec::Vec;

/// Tick `t`'s stamp: its low 32 bits.
#[inline(always)]
pub(crate) fn stamp(t: u64) -> u32 {
    t as u32
}

/// The tick's sets of slots, by stamp.
pub(super) struct Stamps {
    /// Subjects touched this tick (moved, spawned, due or settling).
    pub(super) touched: Vec<u32>,
    /// Observers affected by a change around them.
    pub(super) affected: Vec<u32>,
    /// Affected observers whose view is rebuilt rather than updated.
    pub(super) rebuild: Vec<u32>,
}

impl Stamps {
    /// Stamps for `slots` slots, none in any set of a tick to come.
    pub(super) fn new(slots: u32) -> Stamps {
        let n = slots as usize;
        Stamps {
            touched: vec![0; n],
            affected: vec![0; n],
            rebuild: vec![0; n],
        }
    }

    /// Readies the stamps for tick `t` (at least 1).
    pub(super) fn begin(&mut self, t: u64) {
        let now = stamp(t);
        if now == 0 || now == u32::MAX {
            self.restart(t - 1);
        }
    }

    /// Sets every stamp to tick `t`'s, as if every slot were last in
    /// every set then: after a restore to tick `t`, no tick to come reads
    /// a stamp from before it.
    pub(super) fn restart(&mut self, t: u64) {
        for stamps in [&mut self.touched, &mut self.affected, &mut self.rebuild] {
            stamps.fill(stamp(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use crate::{Command, Config, Event, Fix, Move, Pos, Spawn, Visibility, World};

    /// A world run across the ticks whose stamps wrap sends the same
    /// events as one run from tick 0: stamps from `2^32` ticks before
    /// never read as the current tick's.
    #[test]
    fn stamps_wrap_without_a_trace() {
        for visibility in [Visibility::Radius, Visibility::Grid] {
            let config = Config {
                visibility,
                width_cells: 8,
                height_cells: 8,
                max_entities: 64,
                max_observers: 64,
                max_view: 64,
                ..Config::default()
            };
            let mut from_zero = World::new(config).unwrap();
            let mut wrapping = World::new(config).unwrap();
            let start = (1u64 << 32) - 3;
            wrapping.tick = start;
            let mut ticks: Vec<Vec<Command>> = Vec::new();
            ticks.push(
                (1..40u64)
                    .map(|id| {
                        let pos = Pos::from_ints((id * 37 % 800) as i32, (id * 53 % 800) as i32);
                        Command::Spawn(Spawn::observer(id, pos, Fix::from_num(120)))
                    })
                    .collect(),
            );
            // Each tick a few of them step and the rest stand, so that the
            // tick pairs the movers rather than rebuild every view.
            for k in 1..12u64 {
                ticks.push(
                    (1..40u64)
                        .filter(|id| (id + k) % 13 == 0)
                        .map(|id| {
                            let step = (k * 31 + id * 17) % 90;
                            let pos = Pos::from_ints(
                                ((id * 37 + step * k) % 800) as i32,
                                ((id * 53 + step) % 800) as i32,
                            );
                            Command::Move(Move {
                                id,
                                pos,
                                dir: 0,
                                speed: Fix::ZERO,
                            })
                        })
                        .collect(),
                );
            }
            for (k, commands) in ticks.iter().enumerate() {
                let (mut a, mut b): (Vec<Event>, Vec<Event>) = (Vec::new(), Vec::new());
                from_zero.step(commands, &mut a);
                wrapping.step(commands, &mut b);
                assert_eq!(a, b, "tick {} of the wrapping world", wrapping.tick);
                for id in 1..40u64 {
                    let (va, vb) = (from_zero.view(id).unwrap(), wrapping.view(id).unwrap());
                    assert!(va.eq(vb), "view of {id} at tick {}", wrapping.tick);
                    assert_eq!(from_zero.entity(id), wrapping.entity(id));
                }
                if k == 0 {
                    // As if every slot was last in every set at tick 5,
                    // whose stamp tick 2^32 + 5 has too.
                    wrapping.stamps.restart(5);
                }
            }
            assert!(wrapping.tick > 1 << 32, "the run crossed the wrap");
        }
    }
}
