//! The state digest: a 64-bit hash of the full kernel state, kept incrementally.
//!
//! See the crate docs ("Digest") for the algorithm; this file is its only
//! implementation: the word hash, every term (entity, view pair, config)
//! and the tick's digest over their sums. The tests re-derive it
//! independently (`tests/src/digest.rs` in the repository).

use crate::command::EntityId;
use crate::config::{Config, Visibility};
use crate::fixed_point::Fix;
use crate::throttle::{Motion, Sent};

/// splitmix64's finalizer: a bijective avalanche on 64 bits.
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashes a sequence of 64-bit words: `h = mix64(h ^ w) + GOLDEN` per word,
/// starting from a domain tag, then one more `mix64` over the word count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WordHasher {
    h: u64,
    n: u64,
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl WordHasher {
    pub(crate) const fn new(domain: u64) -> Self {
        WordHasher { h: domain, n: 0 }
    }

    pub(crate) fn word(&mut self, w: u64) -> &mut Self {
        self.h = mix64(self.h ^ w).wrapping_add(GOLDEN);
        self.n += 1;
        self
    }

    pub(crate) fn finish(&self) -> u64 {
        mix64(self.h ^ self.n)
    }
}

/// The words of one [`WordHasher`] input, at most `N`. `N` is sized to the
/// input: every new `Words` is zeroed, and terms are hashed per entity and
/// tick.
#[derive(Clone, Copy)]
pub(crate) struct Words<const N: usize> {
    words: [u64; N],
    len: usize,
}

impl<const N: usize> Words<N> {
    pub(crate) const fn new() -> Self {
        Words {
            words: [0; N],
            len: 0,
        }
    }

    /// Appends a word; words past `N` are a caller bug: dropped, and
    /// caught in debug builds here rather than as a moved digest.
    pub(crate) fn word(&mut self, w: u64) -> &mut Self {
        debug_assert!(self.len < N, "more than {N} words");
        if let Some(at) = self.words.get_mut(self.len) {
            *at = w;
            self.len += 1;
        }
        self
    }
}

/// Advances `L` chains at once, each by its own lane's words, giving each
/// the state it would reach alone. The chains are independent, so the CPU
/// overlaps them instead of waiting on one multiply after another.
#[inline(always)]
pub(crate) fn chain_lanes<const L: usize, const N: usize>(
    chains: &mut [WordHasher; L],
    lanes: &[Words<N>; L],
) {
    let longest = lanes.iter().map(|l| l.len).max().unwrap_or(0);
    for k in 0..longest {
        for (c, lane) in chains.iter_mut().zip(lanes) {
            let next = mix64(c.h ^ lane.words[k]).wrapping_add(GOLDEN);
            let more = k < lane.len;
            c.h = if more { next } else { c.h };
            c.n += u64::from(more);
        }
    }
}

/// [`chain_lanes`] where every lane has exactly `N` words: with no lane
/// running short, the steps unroll into `L` independent chains.
#[inline(always)]
pub(crate) fn chain_full_lanes<const L: usize, const N: usize>(
    chains: &mut [WordHasher; L],
    lanes: &[[u64; N]; L],
) {
    for k in 0..N {
        for (c, lane) in chains.iter_mut().zip(lanes) {
            c.h = mix64(c.h ^ lane[k]).wrapping_add(GOLDEN);
        }
    }
    for c in chains {
        c.n += N as u64;
    }
}

/// Domain tags keep entity, view and tick hashes apart.
pub(crate) const DOMAIN_CONFIG: u64 = 0x6c67_636f_6e66_6967; // "lgconfig"
pub(crate) const DOMAIN_ENTITY: u64 = 0x6c67_656e_7469_7479; // "lgentity"
pub(crate) const DOMAIN_VIEW: u64 = 0x6c67_7669_6577_0000; // "lgview"
pub(crate) const DOMAIN_TICK: u64 = 0x6c67_7469_636b_0000; // "lgtick"

/// The most words an entity's digest head has: five of the entity, the
/// sent flag, and five of what was sent.
pub(crate) const HEAD_WORDS: usize = 11;
/// The words of an entity's motion in its digest term.
pub(crate) const MOTION_WORDS: usize = 4;

/// The words of an entity's term that change only at spawn or when an
/// update is sent: `id, observer, radius, layers, interest`, then `0`
/// when nothing was sent yet, else `1, Lx, Ly, Ldir, Lspeed, T`. They come
/// first so that a move rehashes only its motion.
pub(crate) fn entity_head_words(
    id: EntityId,
    observer: bool,
    radius: Fix,
    layers: u32,
    interest: u32,
    sent: Option<&Sent>,
) -> Words<HEAD_WORDS> {
    let mut h = Words::new();
    h.word(id)
        .word(u64::from(observer))
        .word(radius.to_bits() as u64)
        .word(u64::from(layers))
        .word(u64::from(interest));
    match sent {
        None => h.word(0),
        Some(s) => h
            .word(1)
            .word(s.motion.pos.x.to_bits() as u64)
            .word(s.motion.pos.y.to_bits() as u64)
            .word(u64::from(s.motion.dir))
            .word(s.motion.speed.to_bits() as u64)
            .word(s.tick),
    };
    h
}

/// The words of an entity's term that follow its head: `x, y, dir, speed`.
pub(crate) fn entity_motion_words(m: &Motion) -> [u64; MOTION_WORDS] {
    [
        m.pos.x.to_bits() as u64,
        m.pos.y.to_bits() as u64,
        u64::from(m.dir),
        m.speed.to_bits() as u64,
    ]
}

/// An entity's term `H("lgentity"; head, motion)`, with the hash chain
/// over its head (which the tick keeps, to rehash only the motion).
pub(crate) fn entity_term(
    head: &Words<HEAD_WORDS>,
    motion: &[u64; MOTION_WORDS],
) -> (u64, WordHasher) {
    let mut chain = [WordHasher::new(DOMAIN_ENTITY)];
    chain_lanes(&mut chain, &[*head]);
    let mut term = chain;
    chain_full_lanes(&mut term, &[*motion]);
    (term[0].finish(), chain[0])
}

/// The config hash: `H("lgconfig"; origin x, origin y, cell_size,
/// width_cells, height_cells, visibility (grid 0, radius 1), hysteresis,
/// update_interval, move_epsilon, dir_epsilon, max_entities,
/// max_observers, max_view)`, with `max_visible` as a last word where it
/// is set (so that worlds without it keep the digests they had).
pub(crate) fn config_hash(c: &Config) -> u64 {
    let mut h = WordHasher::new(DOMAIN_CONFIG);
    h.word(c.origin.x.to_bits() as u64)
        .word(c.origin.y.to_bits() as u64)
        .word(c.cell_size.to_bits() as u64)
        .word(u64::from(c.width_cells))
        .word(u64::from(c.height_cells))
        .word(match c.visibility {
            Visibility::Grid => 0,
            Visibility::Radius => 1,
        })
        .word(c.hysteresis.to_bits() as u64)
        .word(c.update_interval)
        .word(c.move_epsilon.to_bits() as u64)
        .word(u64::from(c.dir_epsilon))
        .word(u64::from(c.max_entities))
        .word(u64::from(c.max_observers))
        .word(u64::from(c.max_view));
    if let Some(n) = c.max_visible {
        h.word(u64::from(n));
    }
    h.finish()
}

/// The hashes of one observer's (observer, subject) view pairs. Its own
/// word is hashed once, not once per pair: that is a third of each pair's
/// hash, and a tick adds or takes out a term for every Enter and Leave.
#[derive(Clone, Copy)]
pub(crate) struct PairHasher {
    observer: u64,
    head: WordHasher,
}

impl PairHasher {
    pub(crate) fn new(observer: u64) -> Self {
        let mut head = WordHasher::new(DOMAIN_VIEW);
        head.word(observer);
        PairHasher { observer, head }
    }

    /// The observer's id.
    pub(crate) fn observer(&self) -> u64 {
        self.observer
    }

    /// The hash of the pair of the observer and `subject`.
    #[inline(always)]
    pub(crate) fn hash(&self, subject: u64) -> u64 {
        let mut h = self.head;
        h.word(subject);
        h.finish()
    }
}

/// Order-independent accumulators of the per-entity and per-pair hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DigestSums {
    pub(crate) entities: u64,
    pub(crate) pairs: u64,
    pub(crate) pair_count: u64,
}

impl DigestSums {
    #[inline(always)]
    pub(crate) fn add_pair(&mut self, observer: &PairHasher, subject: u64) {
        self.pairs = self.pairs.wrapping_add(observer.hash(subject));
        self.pair_count += 1;
    }

    #[inline(always)]
    pub(crate) fn remove_pair(&mut self, observer: &PairHasher, subject: u64) {
        self.pairs = self.pairs.wrapping_sub(observer.hash(subject));
        self.pair_count -= 1;
    }

    pub(crate) fn finish(&self, tick: u64, config_hash: u64, entity_count: u64) -> u64 {
        WordHasher::new(DOMAIN_TICK)
            .word(tick)
            .word(config_hash)
            .word(entity_count)
            .word(self.entities)
            .word(self.pair_count)
            .word(self.pairs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_hasher_is_order_sensitive_and_stable() {
        let ab = WordHasher::new(1).word(2).word(3).finish();
        let ba = WordHasher::new(1).word(3).word(2).finish();
        assert_ne!(ab, ba);
        // Golden value: the algorithm is part of the contract.
        assert_eq!(ab, 15_442_745_777_756_642_593);
        let pair = |o, s| PairHasher::new(o).hash(s);
        assert_ne!(pair(1, 2), pair(2, 1));
        // The observer's word is hashed ahead; the pair is still the
        // documented hash of (observer, subject).
        let whole = WordHasher::new(DOMAIN_VIEW).word(1).word(2).finish();
        assert_eq!(pair(1, 2), whole);
    }

    #[test]
    fn lanes_hash_like_one_hasher_each() {
        let mut lanes = [Words::<16>::new(); 3];
        let mut chains = [WordHasher::new(DOMAIN_ENTITY); 3];
        for (i, lane) in lanes.iter_mut().enumerate() {
            for w in 0..(i as u64 * 7) {
                lane.word(w * 0x1234_5678_9abc + i as u64);
            }
            chains[i].word(i as u64);
        }
        let starts = chains;
        chain_lanes(&mut chains, &lanes);
        for ((lane, got), mut one) in lanes.iter().zip(chains).zip(starts) {
            for &w in &lane.words[..lane.len] {
                one.word(w);
            }
            assert_eq!(got.finish(), one.finish());
        }
    }

    #[test]
    fn full_lanes_hash_like_one_hasher_each() {
        let lanes = [[1, 2, 3, 4], [5, 6, 7, 8]];
        let mut start = WordHasher::new(DOMAIN_ENTITY);
        start.word(9);
        let mut chains = [start; 2];
        chain_full_lanes(&mut chains, &lanes);
        for (lane, got) in lanes.iter().zip(chains) {
            let mut one = WordHasher::new(DOMAIN_ENTITY);
            one.word(9);
            for &w in lane {
                one.word(w);
            }
            assert_eq!(got.finish(), one.finish());
        }
    }
}
