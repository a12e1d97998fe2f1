//! A [`Storage`] that times the journal's appends and syncs into the metrics.

use std::time::Instant;

use lockgrid_kernel::{Command, Config, Snapshot};

use super::ServeMetrics;
use crate::journal::Record;
use crate::node::{Opened, Storage, StorageError};

/// Wraps a storage; every `append` and `sync` is timed with the monotonic
/// clock (the node itself reads none) and observed in
/// `lockgrid_journal_append_seconds` and `lockgrid_journal_sync_seconds`,
/// failed ones included. A sync begun by `start_sync` is timed from there
/// to the end of `sync`: the disk's time, of which the tick waited only
/// what its routing and encoding did not cover. Everything else passes
/// through untouched.
pub struct TimedStorage<S> {
    inner: S,
    metrics: ServeMetrics,
    /// When the sync under way began.
    sync_started: Option<Instant>,
}

impl<S: Storage> TimedStorage<S> {
    /// Times `inner`'s journal writes into `metrics`.
    pub fn new(inner: S, metrics: &ServeMetrics) -> TimedStorage<S> {
        TimedStorage {
            inner,
            metrics: metrics.clone(),
            sync_started: None,
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Storage> Storage for TimedStorage<S> {
    fn open(&mut self) -> Result<Option<Opened>, StorageError> {
        self.inner.open()
    }

    fn create(&mut self, config: &Config) -> Result<(), StorageError> {
        self.inner.create(config)
    }

    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError> {
        self.inner.records()
    }

    fn append(&mut self, tick: u64, commands: &[Command], digest: u64) -> Result<(), StorageError> {
        let start = Instant::now();
        let result = self.inner.append(tick, commands, digest);
        let took = start.elapsed().as_secs_f64();
        self.metrics.journal_append().observe(took);
        result
    }

    fn start_sync(&mut self) -> Result<(), StorageError> {
        self.sync_started = Some(Instant::now());
        self.inner.start_sync()
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        let start = self.sync_started.take().unwrap_or_else(Instant::now);
        let result = self.inner.sync();
        let took = start.elapsed().as_secs_f64();
        self.metrics.journal_sync().observe(took);
        result
    }

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        self.inner.write_snapshot(snapshot)
    }

    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError> {
        self.inner.snapshots()
    }

    fn read_snapshot(&mut self, tick: u64) -> Result<Snapshot, StorageError> {
        self.inner.read_snapshot(tick)
    }

    fn close(&mut self) -> Result<(), StorageError> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::MemStorage;

    #[test]
    fn appends_and_syncs_are_timed_and_pass_through() {
        let metrics = ServeMetrics::new();
        let mut storage = TimedStorage::new(MemStorage::new(0), &metrics);
        assert_eq!(storage.open().unwrap(), None);
        storage.create(&Config::default()).unwrap();
        storage.append(1, &[], 7).unwrap();
        storage.sync().unwrap();
        storage.append(2, &[], 8).unwrap();
        storage.sync().unwrap();
        let records: Vec<_> = storage.records().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(records.len(), 2);
        let text = metrics.encode();
        assert!(
            text.contains("lockgrid_journal_append_seconds_count 2\n"),
            "{text}"
        );
        assert!(
            text.contains("lockgrid_journal_sync_seconds_count 2\n"),
            "{text}"
        );
    }
}
