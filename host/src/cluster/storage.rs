//! The node's [`Storage`] in a cluster: the stream is the journal, so the
//! node's own storage only hands the node the snapshot it starts from and
//! the record of that snapshot's tick (to check its digest). Appends are
//! counted, never kept: the stream holds them.

use lockgrid_kernel::{Command, Config, Snapshot};

use crate::journal::Record;
use crate::node::{Opened, Storage, StorageError};

/// A snapshot and the stream's record of its tick, to open a node from.
#[derive(Debug)]
pub struct StreamStorage {
    config: Config,
    start: Option<(Snapshot, Record)>,
    last_tick: u64,
}

impl StreamStorage {
    /// A node of a world of `config`, starting from `start` (the empty
    /// world when `None`).
    pub fn new(config: Config, start: Option<(Snapshot, Record)>) -> StreamStorage {
        let last_tick = start.as_ref().map_or(0, |(s, _)| s.tick);
        StreamStorage {
            config,
            start,
            last_tick,
        }
    }
}

impl Storage for StreamStorage {
    fn open(&mut self) -> Result<Option<Opened>, StorageError> {
        Ok(Some(Opened {
            config: self.config,
            last_tick: self.last_tick,
            cut: None,
        }))
    }

    fn create(&mut self, config: &Config) -> Result<(), StorageError> {
        self.config = *config;
        Ok(())
    }

    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError> {
        Ok(Box::new(
            self.start.iter().map(|(_, record)| Ok(record.clone())),
        ))
    }

    fn append(
        &mut self,
        tick: u64,
        _commands: &[Command],
        _digest: u64,
    ) -> Result<(), StorageError> {
        self.last_tick = tick;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    fn write_snapshot(&mut self, _snapshot: &Snapshot) -> Result<(), StorageError> {
        Ok(())
    }

    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError> {
        Ok(self.start.iter().map(|(s, _)| s.tick).collect())
    }

    fn read_snapshot(&mut self, tick: u64) -> Result<Snapshot, StorageError> {
        match &self.start {
            Some((s, _)) if s.tick == tick => Ok(s.clone()),
            _ => Err(StorageError::Refused(format!("no snapshot of tick {tick}"))),
        }
    }

    fn snapshot_place(&self, tick: u64) -> String {
        format!("snapshot-{tick:020} of the world's object store")
    }

    fn close(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
}
