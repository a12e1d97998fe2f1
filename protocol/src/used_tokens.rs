//! The server's memory of used tokens: a token that opened a connection is
//! refused until it expires, from any other address (so a token seen on
//! the path cannot be replayed by someone else) and from its own (a second
//! connection would seal with the same keys, restarting the packet numbers
//! that make the nonces). The client's repeated Hellos never get here: they
//! reach the connection its address already has.

use alloc::collections::{BTreeMap, VecDeque};

use crate::token::TAG_LEN;

/// Used tokens by tag, with their expiry; at most `capacity`.
pub(crate) struct UsedTokens {
    capacity: usize,
    expiry: BTreeMap<[u8; TAG_LEN], u64>,
    /// Tags in the order they were first used, for eviction when full.
    order: VecDeque<[u8; TAG_LEN]>,
}

/// A token already opened a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AlreadyUsed;

impl UsedTokens {
    pub(crate) fn new(capacity: usize) -> Self {
        UsedTokens {
            capacity,
            expiry: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Records that the token `tag` (valid until `expire`) opens a
    /// connection, unless it already opened one. Returns how many entries
    /// were evicted while alive to make room (the table was full of live
    /// tokens).
    pub(crate) fn use_token(
        &mut self,
        tag: [u8; TAG_LEN],
        expire: u64,
        now_unix: u64,
    ) -> Result<u64, AlreadyUsed> {
        if self.expiry.contains_key(&tag) {
            return Err(AlreadyUsed);
        }
        let mut evicted = 0;
        if self.expiry.len() >= self.capacity {
            // Expired tokens are refused anyway: forget them first.
            let expiry = &mut self.expiry;
            self.order.retain(|t| match expiry.get(t) {
                Some(&e) if e <= now_unix => {
                    expiry.remove(t);
                    false
                }
                _ => true,
            });
            while self.expiry.len() >= self.capacity {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                self.expiry.remove(&oldest);
                evicted += 1;
            }
        }
        self.expiry.insert(tag, expire);
        self.order.push_back(tag);
        Ok(evicted)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.expiry.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_opens_one_connection() {
        let mut t = UsedTokens::new(4);
        assert_eq!(t.use_token([1; TAG_LEN], 100, 0), Ok(0));
        assert_eq!(t.use_token([1; TAG_LEN], 100, 0), Err(AlreadyUsed));
        assert_eq!(t.use_token([2; TAG_LEN], 100, 0), Ok(0));
    }

    #[test]
    fn full_table_forgets_expired_then_oldest() {
        let mut t = UsedTokens::new(2);
        assert_eq!(t.use_token([1; TAG_LEN], 50, 0), Ok(0));
        assert_eq!(t.use_token([2; TAG_LEN], 100, 0), Ok(0));
        // At time 60 the first has expired: it goes, nothing live is evicted.
        assert_eq!(t.use_token([3; TAG_LEN], 100, 60), Ok(0));
        assert_eq!(t.len(), 2);
        // Full of live tokens: the oldest live one goes, and it is counted.
        assert_eq!(t.use_token([4; TAG_LEN], 100, 60), Ok(1));
        assert_eq!(t.len(), 2);
        // The evicted token is forgotten: the bound on memory has this price.
        assert_eq!(t.use_token([2; TAG_LEN], 100, 60), Ok(1));
    }
}
