//! Temporary files a stopped writer can leave in a data folder, and their
//! removal when the folder is opened again.
//!
//! Every file of a data folder is written to a temporary name, synced and
//! renamed into place, so a crash (or a full disk) mid-write leaves the
//! temporary file behind, whole or partial. Nothing ever reads one: the
//! renamed files are the only truth. They are removed when a writer opens
//! the folder (under the server's lock, so no live writer owns them).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use tracing::warn;

use super::{snapshot_dir, JOURNAL_FILE};

/// The stats file's temporary name (the serve loop writes `serve-stats.json`
/// through it).
const STATS_TMP: &str = "serve-stats.json.tmp";

/// Whether `name`, in the data folder itself, is one of its temporary files.
fn is_folder_temp(name: &str) -> bool {
    name == STATS_TMP || Path::new(JOURNAL_FILE).with_extension("tmp").as_os_str() == name
}

/// Whether `name`, in the snapshots folder, is a snapshot's temporary file
/// (`.snapshot-<tick>.lgs.tmp`).
fn is_snapshot_temp(name: &str) -> bool {
    name.strip_prefix(".snapshot-")
        .and_then(|n| n.strip_suffix(".lgs.tmp"))
        .is_some_and(|tick| !tick.is_empty() && tick.bytes().all(|b| b.is_ascii_digit()))
}

/// Removes the temporary files a stopped writer left in data folder `dir`
/// (`journal.tmp`, `serve-stats.json.tmp`, `snapshots/.snapshot-*.lgs.tmp`),
/// logs each one, and returns their paths. Other files are never touched.
/// A folder that does not exist holds nothing to remove.
pub fn remove_leftover_temp_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    remove_matching(dir, is_folder_temp, &mut removed)?;
    remove_matching(&snapshot_dir(dir), is_snapshot_temp, &mut removed)?;
    removed.sort();
    Ok(removed)
}

fn remove_matching(
    dir: &Path,
    is_temp: fn(&str) -> bool,
    removed: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        // No folder (or a file in its place, which the snapshot writer
        // reports when it needs the folder): no temporary file in it.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_temp) || !entry.file_type()?.is_file() {
            continue;
        }
        let path = entry.path();
        let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
        match fs::remove_file(&path) {
            Ok(()) => {}
            // Gone meanwhile: nothing left to clean.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
        warn!(
            file = %path.display(),
            bytes,
            "removed a temporary file left by an interrupted write"
        );
        removed.push(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_temporary_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let snaps = snapshot_dir(dir.path());
        fs::create_dir_all(&snaps).unwrap();
        let temps = [
            dir.path().join("journal.tmp"),
            dir.path().join("serve-stats.json.tmp"),
            snaps.join(".snapshot-00000000000000000600.lgs.tmp"),
        ];
        for t in &temps {
            fs::write(t, b"partial").unwrap();
        }
        // A partial file from a full disk is empty or short: removed all the same.
        let empty = snaps.join(".snapshot-00000000000000001200.lgs.tmp");
        fs::write(&empty, b"").unwrap();
        let kept = [
            dir.path().join("journal.lgj"),
            dir.path().join("serve-stats.json"),
            dir.path().join("notes.tmp"),
            snaps.join("snapshot-00000000000000000600.lgs"),
            snaps.join(".snapshot-x.lgs.tmp"),
            snaps.join("journal.tmp"),
        ];
        for k in &kept {
            fs::write(k, b"keep").unwrap();
        }
        let mut expected: Vec<PathBuf> = temps.to_vec();
        expected.push(empty);
        expected.sort();
        assert_eq!(remove_leftover_temp_files(dir.path()).unwrap(), expected);
        for t in &expected {
            assert!(!t.exists(), "{} left", t.display());
        }
        for k in &kept {
            assert!(k.exists(), "{} removed", k.display());
        }
        assert!(remove_leftover_temp_files(dir.path()).unwrap().is_empty());
        let missing = dir.path().join("nothing-here");
        assert!(remove_leftover_temp_files(&missing).unwrap().is_empty());
    }

    #[test]
    fn opening_a_data_folder_removes_and_reports_them() {
        use crate::journal::SyncPolicy;
        use crate::node::{FileStorage, Storage};
        use crate::store::{Recorder, StoreOptions};
        use lockgrid_kernel::Config;

        let dir = tempfile::tempdir().unwrap();
        let snaps = snapshot_dir(dir.path());
        fs::create_dir_all(&snaps).unwrap();
        let stale = snaps.join(".snapshot-00000000000000000600.lgs.tmp");
        fs::write(&stale, b"half a snap").unwrap();
        let recorder =
            Recorder::create(dir.path(), &Config::default(), StoreOptions::default()).unwrap();
        assert_eq!(recorder.removed_temp_files(), std::slice::from_ref(&stale));
        recorder.close().unwrap();

        let stats = dir.path().join("serve-stats.json.tmp");
        fs::write(&stats, b"{\"ticks\": 1").unwrap();
        let journal_tmp = dir.path().join("journal.tmp");
        fs::write(&journal_tmp, b"").unwrap();
        // The node's storage on a data folder, as a server opens it.
        let mut storage = FileStorage::new(dir.path(), SyncPolicy::EveryTick, 4);
        assert!(storage.open().unwrap().is_some());
        let mut expected = vec![journal_tmp, stats];
        expected.sort();
        assert_eq!(storage.removed_temp_files(), expected.as_slice());
        storage.close().unwrap();
        assert!(expected.iter().all(|p| !p.exists()));
    }
}
