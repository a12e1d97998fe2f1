//! The server's connections by id, side by side in one vector.
//!
//! A tick visits every connection several times (routing, transmit,
//! acknowledgements), each time by id. In a `BTreeMap<u32, Conn>` each
//! visit searched nodes holding eleven connections of more than a
//! kilobyte each, and boxing them scattered them across the heap (see
//! BENCHMARKS.md). Here connections sit in one vector, in the order they
//! were accepted (a place freed by a closed connection is taken by the
//! next one), and ids map to places through a small ordered map of
//! `u32` pairs that stays in cache: a lookup is that map's search and one
//! index. Clients accepted one after another get neighbouring places and,
//! in a host that numbers entities as it accepts them, neighbouring
//! entity ids, so a tick's walk in entity order reads them nearly in
//! order.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Values by `u32` id, iterated in ascending id order.
#[derive(Debug)]
pub(super) struct Conns<T> {
    places: Vec<Option<T>>,
    index: BTreeMap<u32, u32>,
    /// Places emptied since, reused before the vector grows.
    free: Vec<u32>,
}

impl<T> Conns<T> {
    pub(super) fn new() -> Self {
        Conns {
            places: Vec::new(),
            index: BTreeMap::new(),
            free: Vec::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub(super) fn contains_key(&self, id: &u32) -> bool {
        self.index.contains_key(id)
    }

    pub(super) fn get(&self, id: &u32) -> Option<&T> {
        let &at = self.index.get(id)?;
        self.places.get(at as usize)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, id: &u32) -> Option<&mut T> {
        let &at = self.index.get(id)?;
        self.places.get_mut(at as usize)?.as_mut()
    }

    /// Puts `value` under `id`, returning the value it replaces.
    pub(super) fn insert(&mut self, id: u32, value: T) -> Option<T> {
        if let Some(old) = self.get_mut(&id) {
            return Some(core::mem::replace(old, value));
        }
        let at = match self.free.pop() {
            Some(at) => {
                self.places[at as usize] = Some(value);
                at
            }
            None => {
                // Fewer connections than u32 ids: a place always has a u32 index.
                let at = self.places.len() as u32;
                self.places.push(Some(value));
                at
            }
        };
        self.index.insert(id, at);
        None
    }

    pub(super) fn remove(&mut self, id: &u32) -> Option<T> {
        let at = self.index.remove(id)?;
        let value = self.places.get_mut(at as usize)?.take();
        self.free.push(at);
        value
    }

    /// Ids in ascending order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &u32> + '_ {
        self.index.keys()
    }

    /// Values in ascending order of their ids.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.index
            .values()
            .filter_map(|&at| self.places.get(at as usize)?.as_ref())
    }

    /// Bytes one more value may take here: its place, room for the vector
    /// to double, and its entry in the index.
    pub(super) fn bytes_per_value() -> usize {
        2 * core::mem::size_of::<Option<T>>() + 4 * core::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::Conns;
    use alloc::collections::BTreeMap;
    use alloc::vec::Vec;

    /// Any sequence of inserts and removes leaves the same contents, in
    /// the same order, as a `BTreeMap` given the same calls.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut conns = Conns::new();
        let mut model = BTreeMap::new();
        let mut z = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..5_000u64 {
            z = z.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let id = (z >> 40) as u32 % 64;
            if (z >> 20).is_multiple_of(3) {
                assert_eq!(conns.remove(&id), model.remove(&id), "remove {id}");
            } else {
                assert_eq!(
                    conns.insert(id, step),
                    model.insert(id, step),
                    "insert {id}"
                );
            }
            assert_eq!(conns.len(), model.len());
            assert_eq!(conns.get(&id), model.get(&id));
            assert_eq!(conns.contains_key(&id), model.contains_key(&id));
        }
        let keys: Vec<u32> = conns.keys().copied().collect();
        assert_eq!(keys, model.keys().copied().collect::<Vec<_>>());
        let values: Vec<u64> = conns.values().copied().collect();
        assert_eq!(values, model.values().copied().collect::<Vec<_>>());
        // Places freed are reused: never more than the most held at once.
        assert!(conns.places.len() <= 64);
    }
}
