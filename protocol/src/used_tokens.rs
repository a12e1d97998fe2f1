//! The server's memory of used tokens: a token that opened a connection
//! from one address is refused from any other until it expires, so a token
//! seen on the path cannot be replayed by someone else.

use alloc::collections::{BTreeMap, VecDeque};

use crate::token::TAG_LEN;

/// Used tokens by tag, with the address that used each; at most `capacity`.
pub(crate) struct UsedTokens<A> {
    capacity: usize,
    by_tag: BTreeMap<[u8; TAG_LEN], (A, u64)>,
    /// Tags in the order they were first used, for eviction when full.
    order: VecDeque<[u8; TAG_LEN]>,
}

/// A token was already used from another address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UsedElsewhere;

impl<A: Clone + Ord> UsedTokens<A> {
    pub(crate) fn new(capacity: usize) -> Self {
        UsedTokens {
            capacity,
            by_tag: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Records that `from` uses the token `tag` (valid until `expire`),
    /// unless another address used it first. Returns how many entries were
    /// evicted while alive to make room (the table is full of live tokens).
    pub(crate) fn use_token(
        &mut self,
        tag: [u8; TAG_LEN],
        from: &A,
        expire: u64,
        now_unix: u64,
    ) -> Result<u64, UsedElsewhere> {
        if let Some((addr, _)) = self.by_tag.get(&tag) {
            return if addr == from {
                Ok(0)
            } else {
                Err(UsedElsewhere)
            };
        }
        let mut evicted = 0;
        if self.by_tag.len() >= self.capacity {
            // Expired tokens are refused anyway: forget them first.
            let by_tag = &mut self.by_tag;
            self.order.retain(|t| match by_tag.get(t) {
                Some((_, e)) if *e <= now_unix => {
                    by_tag.remove(t);
                    false
                }
                _ => true,
            });
            while self.by_tag.len() >= self.capacity {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                self.by_tag.remove(&oldest);
                evicted += 1;
            }
        }
        self.by_tag.insert(tag, (from.clone(), expire));
        self.order.push_back(tag);
        Ok(evicted)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_tag.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_address_may_reuse_another_may_not() {
        let mut t = UsedTokens::new(4);
        assert_eq!(t.use_token([1; TAG_LEN], &10u32, 100, 0), Ok(0));
        assert_eq!(t.use_token([1; TAG_LEN], &10u32, 100, 0), Ok(0));
        assert_eq!(
            t.use_token([1; TAG_LEN], &11u32, 100, 0),
            Err(UsedElsewhere)
        );
    }

    #[test]
    fn full_table_forgets_expired_then_oldest() {
        let mut t = UsedTokens::new(2);
        assert_eq!(t.use_token([1; TAG_LEN], &1u32, 50, 0), Ok(0));
        assert_eq!(t.use_token([2; TAG_LEN], &2u32, 100, 0), Ok(0));
        // At time 60 the first has expired: it goes, nothing live is evicted.
        assert_eq!(t.use_token([3; TAG_LEN], &3u32, 100, 60), Ok(0));
        assert_eq!(t.len(), 2);
        // Full of live tokens: the oldest live one goes, and it is counted.
        assert_eq!(t.use_token([4; TAG_LEN], &4u32, 100, 60), Ok(1));
        assert_eq!(t.len(), 2);
        // The evicted token is forgotten: the bound on memory has this price.
        assert_eq!(t.use_token([2; TAG_LEN], &9u32, 100, 60), Ok(1));
    }
}
