//! What a world knows of its live entities' layers: enough to tell when
//! every subject is of an observer's interest, so that a rebuild of its
//! view skips the interest test per subject, and the radius sweep's
//! changes for it need no check of interest.

/// The layers of the live entities, summed up. Spawns add to it; despawns
/// leave it as it is until slots are next renumbered
/// ([`LayerSummary::of`]), which only makes it claim less than it could.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LayerSummary {
    /// Bits every live entity has (all of them while none lives).
    common: u32,
    /// Bits some live entity has.
    some: u32,
    /// Whether some live entity has no layer at all, so no one sees it.
    layerless: bool,
}

impl LayerSummary {
    /// A world with no entity.
    pub(crate) const NONE: LayerSummary = LayerSummary {
        common: u32::MAX,
        some: 0,
        layerless: false,
    };

    /// Counts in an entity of `layers`.
    pub(crate) fn add(&mut self, layers: u32) {
        self.common &= layers;
        self.some |= layers;
        self.layerless |= layers == 0;
    }

    /// The summary of exactly these entities' layers.
    pub(crate) fn of(layers: impl Iterator<Item = u32>) -> LayerSummary {
        layers.fold(LayerSummary::NONE, |mut all, l| {
            all.add(l);
            all
        })
    }

    /// Whether every live entity is of `interest`: a layer they all share
    /// is, or every layer any of them has is and none has no layer. A
    /// world of players and NPCs in layers of their own, seen by
    /// observers interested in both, shares no layer but passes the
    /// second test.
    #[inline]
    pub(crate) fn all_of_interest(&self, interest: u32) -> bool {
        interest & self.common != 0 || (!self.layerless && interest & self.some == self.some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the definition, for every small world of layers 0..8 and
    /// every interest below 8.
    #[test]
    fn all_of_interest_means_every_entity_is_of_interest() {
        let (mut claims, mut true_ones) = (0, 0);
        for world in 0u32..(1 << 8) {
            // Entity `l` (layers `l`) lives where bit `l` of `world` is set.
            let alive: alloc::vec::Vec<u32> = (0..8).filter(|l| world >> l & 1 == 1).collect();
            let summary = LayerSummary::of(alive.iter().copied());
            for interest in 0..8 {
                let every = alive.iter().all(|&l| l & interest != 0);
                let claimed = summary.all_of_interest(interest);
                // It may claim less than is true (entities of layers 0b011
                // and 0b110 are all of interest 0b101), never more.
                assert!(
                    !claimed || every,
                    "world {world:#b}, interest {interest:#b}"
                );
                claims += u32::from(claimed);
                true_ones += u32::from(every);
            }
        }
        // It knows most of the cases that hold: 267 of these 369.
        assert_eq!((claims, true_ones), (267, 369));
    }

    #[test]
    fn players_and_npcs_in_layers_of_their_own_are_all_seen() {
        let s = LayerSummary::of([0b01, 0b10, 0b01].into_iter());
        assert!(s.all_of_interest(u32::MAX));
        assert!(s.all_of_interest(0b11));
        assert!(!s.all_of_interest(0b01));
        let with_hidden = LayerSummary::of([0b01, 0].into_iter());
        assert!(!with_hidden.all_of_interest(u32::MAX));
    }
}
