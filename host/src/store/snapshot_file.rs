//! Snapshot files: one kernel [`Snapshot`], checksummed, written atomically.

use core::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lockgrid_kernel::{RestoreError, Snapshot};

use crate::journal::sync_parent;

/// First eight bytes of every snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"LGSNAPSH";
/// Snapshot file format version written by this build. Version 2 changed
/// no byte, only the digest it carries, as the journal's version 2 did.
/// Version 3 adds `max_visible` to the config.
pub const SNAPSHOT_VERSION: u32 = 3;
/// Bytes before the payload: magic, version, flags, tick, digest, length, CRC.
pub const SNAPSHOT_HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8 + 4;

/// Why a snapshot file cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// An operating-system error.
    Io(io::Error),
    /// Shorter than its header, or its length field disagrees with its size.
    Truncated,
    /// Not a snapshot file.
    BadMagic,
    /// A format version this build cannot read.
    UnsupportedVersion(u32),
    /// The CRC does not match.
    Checksum,
    /// The payload does not decode as a kernel snapshot.
    Decode(postcard::Error),
    /// The header's tick or digest disagrees with the payload's.
    HeaderMismatch,
    /// The kernel refused the state.
    Restore(RestoreError),
    /// Writing a snapshot failed at this step (its temporary file removed).
    Write {
        /// The step that failed.
        step: WriteStep,
        /// The operating system's error.
        error: io::Error,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io(e) => write!(f, "{e}"),
            SnapshotError::Truncated => f.write_str("truncated snapshot file"),
            SnapshotError::BadMagic => f.write_str("not a lockgrid snapshot (bad magic)"),
            SnapshotError::UnsupportedVersion(v) => write!(
                f,
                "unsupported snapshot version {v} (this build reads version {SNAPSHOT_VERSION})"
            ),
            SnapshotError::Checksum => f.write_str("snapshot CRC mismatch"),
            SnapshotError::Decode(e) => write!(f, "snapshot payload does not decode: {e}"),
            SnapshotError::HeaderMismatch => {
                f.write_str("snapshot header disagrees with its payload")
            }
            SnapshotError::Restore(e) => write!(f, "snapshot cannot be restored: {e}"),
            SnapshotError::Write { step, error } => write!(f, "{step}: {error}"),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io(e) => Some(e),
            SnapshotError::Decode(e) => Some(e),
            SnapshotError::Restore(e) => Some(e),
            SnapshotError::Write { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for SnapshotError {
    fn from(e: io::Error) -> Self {
        SnapshotError::Io(e)
    }
}

/// The file name of the snapshot of `tick`.
pub fn snapshot_file_name(tick: u64) -> String {
    format!("snapshot-{tick:020}.lgs")
}

/// Writes `snapshot` into folder `dir` atomically: temporary file, fsync,
/// rename over the final name, fsync of the folder. The folder is created
/// when missing (snapshots are a cache: someone may have removed it). On
/// any failure the temporary file is removed, so a full disk leaves nothing
/// behind, and the error says which step failed.
pub fn write_snapshot(dir: &Path, snapshot: &Snapshot) -> Result<PathBuf, SnapshotError> {
    let bytes = encode_snapshot(snapshot)?;

    let name = snapshot_file_name(snapshot.tick);
    let path = dir.join(&name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let step = |step: WriteStep| move |error: io::Error| SnapshotError::Write { step, error };
    fs::create_dir_all(dir).map_err(step(WriteStep::CreateFolder))?;
    let written = File::create(&tmp)
        .map_err(step(WriteStep::Create))
        .and_then(|mut f| {
            f.write_all(&bytes).map_err(step(WriteStep::Write))?;
            f.sync_all().map_err(step(WriteStep::Sync))
        })
        .and_then(|()| fs::rename(&tmp, &path).map_err(step(WriteStep::Rename)));
    if let Err(e) = written {
        // Best effort: the write already failed, and a leftover is also
        // removed at the next start.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_parent(&path).map_err(step(WriteStep::SyncFolder))?;
    Ok(path)
}

/// A snapshot file's bytes (header, CRC, payload), as [`write_snapshot`]
/// writes them and [`decode_snapshot`] reads them.
pub fn encode_snapshot(snapshot: &Snapshot) -> Result<Vec<u8>, SnapshotError> {
    let payload = postcard::to_stdvec(snapshot).map_err(SnapshotError::Decode)?;
    let mut bytes = Vec::with_capacity(SNAPSHOT_HEADER_LEN + payload.len());
    bytes.extend_from_slice(&SNAPSHOT_MAGIC);
    bytes.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&snapshot.tick.to_le_bytes());
    bytes.extend_from_slice(&snapshot.digest.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes);
    crc.update(&payload);
    bytes.extend_from_slice(&crc.finalize().to_le_bytes());
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// The step of [`write_snapshot`] that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteStep {
    /// Creating the snapshots folder.
    CreateFolder,
    /// Creating the temporary file.
    Create,
    /// Writing it (a full disk fails here).
    Write,
    /// Syncing it to the disk.
    Sync,
    /// Renaming it over the final name.
    Rename,
    /// Syncing the folder after the rename (the snapshot is in place but
    /// may not survive a power loss).
    SyncFolder,
}

impl fmt::Display for WriteStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteStep::CreateFolder => "cannot create the snapshots folder",
            WriteStep::Create => "cannot create the temporary file",
            WriteStep::Write => "cannot write the temporary file",
            WriteStep::Sync => "cannot sync the temporary file",
            WriteStep::Rename => "cannot rename the temporary file into place",
            WriteStep::SyncFolder => "cannot sync the snapshots folder",
        })
    }
}

/// Reads and checks a snapshot file (not yet restored into a world).
pub fn read_snapshot(path: &Path) -> Result<Snapshot, SnapshotError> {
    decode_snapshot(&fs::read(path)?)
}

/// Checks and decodes a snapshot file's bytes (not yet restored into a world).
pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let header = bytes
        .get(..SNAPSHOT_HEADER_LEN)
        .ok_or(SnapshotError::Truncated)?;
    if header[..8] != SNAPSHOT_MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let half = |at: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&header[at..at + 4]);
        u32::from_le_bytes(b)
    };
    let version = half(8);
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let (tick, digest, len) = (word(16), word(24), word(32));
    let payload = &bytes[SNAPSHOT_HEADER_LEN..];
    if payload.len() as u64 != len {
        return Err(SnapshotError::Truncated);
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header[..SNAPSHOT_HEADER_LEN - 4]);
    crc.update(payload);
    if crc.finalize() != half(SNAPSHOT_HEADER_LEN - 4) {
        return Err(SnapshotError::Checksum);
    }
    let snapshot: Snapshot = postcard::from_bytes(payload).map_err(SnapshotError::Decode)?;
    if snapshot.tick != tick || snapshot.digest != digest {
        return Err(SnapshotError::HeaderMismatch);
    }
    Ok(snapshot)
}

/// The snapshot files in `dir`, ascending by tick. Other files are ignored.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let tick = name
            .strip_prefix("snapshot-")
            .and_then(|n| n.strip_suffix(".lgs"))
            .filter(|n| n.len() == 20)
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(tick) = tick {
            found.push((tick, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::{Command, Config, Pos, Spawn, World};

    fn snapshot() -> Snapshot {
        let mut world = World::new(Config::default()).unwrap();
        let mut events = Vec::new();
        world.step(
            &[
                Command::Spawn(Spawn::observer(
                    1,
                    Pos::from_ints(10, 10),
                    lockgrid_kernel::Fix::from_num(100),
                )),
                Command::Spawn(Spawn::npc(2, Pos::from_ints(20, 10))),
            ],
            &mut events,
        );
        world.snapshot()
    }

    #[test]
    fn snapshots_round_trip_and_list_by_tick() {
        let dir = tempfile::tempdir().unwrap();
        let s = snapshot();
        let path = write_snapshot(dir.path(), &s).unwrap();
        assert_eq!(
            path.file_name().unwrap(),
            "snapshot-00000000000000000001.lgs"
        );
        assert_eq!(read_snapshot(&path).unwrap(), s);
        std::fs::write(dir.path().join("snapshot-x.lgs"), b"").unwrap();
        assert_eq!(list_snapshots(dir.path()).unwrap(), vec![(1, path)]);
    }

    #[test]
    fn damaged_snapshots_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_snapshot(dir.path(), &snapshot()).unwrap();
        let good = std::fs::read(&path).unwrap();
        for byte in 0..good.len() {
            let mut bad = good.clone();
            bad[byte] ^= 0x04;
            std::fs::write(&path, &bad).unwrap();
            assert!(read_snapshot(&path).is_err(), "flip at {byte} accepted");
        }
        for cut in 0..good.len() {
            std::fs::write(&path, &good[..cut]).unwrap();
            assert!(read_snapshot(&path).is_err(), "cut at {cut} accepted");
        }
    }

    #[test]
    fn a_missing_folder_is_recreated() {
        let dir = tempfile::tempdir().unwrap();
        let snaps = dir.path().join("snapshots");
        let path = write_snapshot(&snaps, &snapshot()).unwrap();
        assert_eq!(read_snapshot(&path).unwrap(), snapshot());
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file_and_says_which_step() {
        let dir = tempfile::tempdir().unwrap();
        // The final name is taken by a folder: the rename fails after the
        // temporary file was written and synced.
        let blocker = dir.path().join(snapshot_file_name(1));
        std::fs::create_dir(&blocker).unwrap();
        std::fs::write(blocker.join("keep"), b"x").unwrap();
        let err = write_snapshot(dir.path(), &snapshot()).unwrap_err();
        assert!(
            matches!(
                err,
                SnapshotError::Write {
                    step: WriteStep::Rename,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .starts_with("cannot rename the temporary file into place: "));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [blocker.file_name().unwrap()]);

        // The snapshots "folder" is a file: it cannot be created.
        let file = dir.path().join("not-a-folder");
        std::fs::write(&file, b"").unwrap();
        let err = write_snapshot(&file.join("snapshots"), &snapshot()).unwrap_err();
        assert!(
            matches!(
                err,
                SnapshotError::Write {
                    step: WriteStep::CreateFolder,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_full_disk_leaves_no_temporary_file() {
        // /dev/full fails every write with ENOSPC, like a full disk.
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let name = snapshot_file_name(1);
        std::os::unix::fs::symlink(full, dir.path().join(format!(".{name}.tmp"))).unwrap();
        let err = write_snapshot(dir.path(), &snapshot()).unwrap_err();
        assert!(
            matches!(
                err,
                SnapshotError::Write {
                    step: WriteStep::Write | WriteStep::Sync,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
