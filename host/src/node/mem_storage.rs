//! [`Storage`] in memory: a simulated disk that knows which writes are
//! durable, for tests and the whole-server simulation.
//!
//! The journal is kept as its records, with how many of them were last
//! synced. [`MemStorage::crash`] gives the disk as a reboot would find it:
//! the synced records, then a seeded number of the unsynced ones, possibly
//! followed by a torn one that opening cuts off and reports (how the real
//! journal tells a torn record from corruption, byte by byte, is the
//! journal's own tests' business). Snapshots are written
//! atomically, as the real writer does (temporary file, fsync, rename), so a
//! crash leaves each one whole or absent; [`MemStorage::rot_snapshot`]
//! damages a stored one to exercise the readers' checks.
//!
//! Faults are injected per operation ([`MemStorage::inject`]): an I/O
//! error, a full disk, or a power cut, after which every operation fails
//! until the disk is rebuilt with [`crash`](MemStorage::crash).

use std::collections::BTreeMap;
use std::io;

use lockgrid_kernel::{Command, Config, Snapshot};

use super::storage::{Opened, Storage, StorageError};
use crate::journal::Record;

/// The operations faults can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiskOp {
    /// [`Storage::append`].
    Append,
    /// [`Storage::sync`].
    Sync,
    /// [`Storage::write_snapshot`].
    Snapshot,
}

/// What an injected fault does to the operation it hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// The operation fails with an I/O error and changes nothing.
    Error,
    /// The operation fails as on a full disk and changes nothing.
    Full,
    /// The power goes: the operation writes part of its bytes (unsynced)
    /// and fails, and so does every later one.
    PowerCut,
}

/// Counters of what the disk saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemDiskStats {
    /// Records appended.
    pub appends: u64,
    /// Syncs that made bytes durable.
    pub syncs: u64,
    /// Snapshots written.
    pub snapshots: u64,
    /// Faults that hit an operation.
    pub faults: u64,
}

/// A simulated disk holding one journal and a set of snapshots.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    /// The journal's config (`None`: not created).
    config: Option<Config>,
    /// The records as the running system sees them.
    records: Vec<Record>,
    /// How many of them are durable.
    synced: usize,
    /// A record torn by a crash, which the next open cuts off.
    torn: bool,
    /// Snapshot files by tick: postcard payload and a CRC-32 trailer.
    snapshots: BTreeMap<u64, Vec<u8>>,
    keep_snapshots: usize,
    faults: BTreeMap<DiskOp, DiskFault>,
    dead: bool,
    stats: MemDiskStats,
}

/// splitmix64 step: the crash's only source of randomness, from its seed.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl MemStorage {
    /// An empty disk keeping the newest `keep_snapshots` snapshots (0: all).
    pub fn new(keep_snapshots: usize) -> MemStorage {
        MemStorage {
            keep_snapshots,
            ..MemStorage::default()
        }
    }

    /// Makes the next `op` fail with `fault` (once).
    pub fn inject(&mut self, op: DiskOp, fault: DiskFault) {
        self.faults.insert(op, fault);
    }

    /// Whether the power went (every operation now fails).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Counters.
    pub fn stats(&self) -> MemDiskStats {
        self.stats
    }

    /// The last durable tick (0 when none).
    pub fn synced_tick(&self) -> u64 {
        self.synced
            .checked_sub(1)
            .and_then(|i| self.records.get(i))
            .map_or(0, |r| r.tick)
    }

    /// The last tick appended, durable or not (0 when none).
    pub fn last_tick(&self) -> u64 {
        self.records.last().map_or(0, |r| r.tick)
    }

    /// The journaled records, durable or not.
    pub fn journal(&self) -> &[Record] {
        &self.records
    }

    /// The disk after a power cut and reboot: synced records stay; of the
    /// unsynced ones a seeded number survive, possibly followed by a torn
    /// one. Pending faults are cleared.
    pub fn crash(&self, seed: u64) -> MemStorage {
        let mut rng = seed;
        let mut disk = self.clone();
        disk.dead = false;
        disk.faults.clear();
        let unsynced = self.records.len() - self.synced;
        let keep = match next(&mut rng) % 3 {
            0 => 0,
            _ => (next(&mut rng) % (unsynced as u64 + 1)) as usize,
        };
        disk.records.truncate(self.synced + keep);
        disk.torn = disk.torn || (keep < unsynced && next(&mut rng).is_multiple_of(2));
        disk
    }

    /// Damages the stored snapshot of `tick` (one byte flipped); false when
    /// there is none.
    pub fn rot_snapshot(&mut self, tick: u64, at: usize) -> bool {
        match self.snapshots.get_mut(&tick) {
            Some(bytes) if !bytes.is_empty() => {
                let i = at % bytes.len();
                bytes[i] ^= 0x10;
                true
            }
            _ => false,
        }
    }

    /// Takes the fault injected into `op`, if any, and applies its effect on
    /// the disk's life.
    fn fault(&mut self, op: DiskOp) -> Result<(), (DiskFault, io::Error)> {
        if self.dead {
            return Err((
                DiskFault::PowerCut,
                io::Error::other("the simulated disk lost power"),
            ));
        }
        let Some(fault) = self.faults.remove(&op) else {
            return Ok(());
        };
        self.stats.faults += 1;
        let error = match fault {
            DiskFault::Error => io::Error::other("injected I/O error"),
            DiskFault::Full => io::Error::new(io::ErrorKind::StorageFull, "injected: disk full"),
            DiskFault::PowerCut => {
                self.dead = true;
                io::Error::other("the simulated disk lost power")
            }
        };
        Err((fault, error))
    }
}

fn crc_of(bytes: &[u8]) -> [u8; 4] {
    crc32fast::hash(bytes).to_le_bytes()
}

impl Storage for MemStorage {
    fn open(&mut self) -> Result<Option<Opened>, StorageError> {
        let Some(config) = self.config else {
            if let Some(tick) = self.snapshots.keys().next_back() {
                return Err(StorageError::Refused(format!(
                    "the disk holds snapshots (the newest of tick {tick}) but no journal"
                )));
            }
            return Ok(None);
        };
        let last_tick = self.last_tick();
        let cut =
            std::mem::take(&mut self.torn).then(|| format!("a torn record after tick {last_tick}"));
        // What survived a crash is on the disk now: durable.
        self.synced = self.records.len();
        Ok(Some(Opened {
            config,
            last_tick,
            cut,
        }))
    }

    fn create(&mut self, config: &Config) -> Result<(), StorageError> {
        if self.config.is_some() {
            return Err(StorageError::Refused("a journal exists already".into()));
        }
        // Created durable, as the real journal is (temporary file, sync, rename).
        self.config = Some(*config);
        self.records.clear();
        self.synced = 0;
        Ok(())
    }

    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError> {
        if self.config.is_none() {
            return Err(StorageError::Refused("no journal".into()));
        }
        Ok(Box::new(self.records.iter().cloned().map(Ok)))
    }

    fn append(&mut self, tick: u64, commands: &[Command], digest: u64) -> Result<(), StorageError> {
        if let Err((fault, error)) = self.fault(DiskOp::Append) {
            // A power cut mid-write leaves part of the record behind.
            self.torn |= fault == DiskFault::PowerCut;
            return Err(error.into());
        }
        if self.config.is_none() {
            return Err(StorageError::Refused("no journal".into()));
        }
        let last = self.last_tick();
        if tick != last + 1 {
            return Err(StorageError::Refused(format!(
                "tick {tick} appended after tick {last}"
            )));
        }
        self.records.push(Record {
            tick,
            digest,
            commands: commands.to_vec(),
        });
        self.stats.appends += 1;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.fault(DiskOp::Sync).map_err(|(_, e)| e)?;
        if self.records.len() > self.synced {
            self.synced = self.records.len();
            self.stats.syncs += 1;
        }
        Ok(())
    }

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        // A fault leaves at most a temporary file behind, which the name
        // filter of a listing ignores: the snapshot is simply not there.
        self.fault(DiskOp::Snapshot).map_err(|(_, e)| e)?;
        let mut bytes = postcard::to_stdvec(snapshot)
            .map_err(|e| StorageError::Damaged(format!("snapshot encoding: {e}")))?;
        let crc = crc_of(&bytes);
        bytes.extend_from_slice(&crc);
        self.snapshots.insert(snapshot.tick, bytes);
        self.stats.snapshots += 1;
        if self.keep_snapshots > 0 {
            while self.snapshots.len() > self.keep_snapshots {
                self.snapshots.pop_first();
            }
        }
        Ok(())
    }

    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError> {
        Ok(self.snapshots.keys().copied().collect())
    }

    fn read_snapshot(&mut self, tick: u64) -> Result<Snapshot, StorageError> {
        let bytes = self
            .snapshots
            .get(&tick)
            .ok_or_else(|| StorageError::Damaged(format!("no snapshot of tick {tick}")))?;
        let split = bytes
            .len()
            .checked_sub(4)
            .ok_or_else(|| StorageError::Damaged("truncated snapshot".into()))?;
        let (payload, crc) = bytes.split_at(split);
        if crc != crc_of(payload) {
            return Err(StorageError::Damaged("snapshot CRC mismatch".into()));
        }
        let snapshot: Snapshot = postcard::from_bytes(payload)
            .map_err(|e| StorageError::Damaged(format!("snapshot does not decode: {e}")))?;
        if snapshot.tick != tick {
            return Err(StorageError::Damaged(format!(
                "the snapshot filed under tick {tick} holds tick {}",
                snapshot.tick
            )));
        }
        Ok(snapshot)
    }

    fn snapshot_place(&self, tick: u64) -> String {
        format!("of tick {tick} on the simulated disk")
    }

    fn close(&mut self) -> Result<(), StorageError> {
        self.sync()
    }
}
