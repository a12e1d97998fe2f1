//! Rewrites a journal record by record, for tests that need one that says
//! something else than what happened. Shared by the host's unit tests and
//! its CLI tests; the including module has the journal types in scope.

use std::path::Path;

use super::{Journal, JournalReader, Record, SyncPolicy};

/// Rewrites the journal at `path` through `edit(record)`; every record
/// keeps a valid CRC and carries its digest as edited.
pub fn rewrite_journal(path: &Path, edit: impl Fn(&mut Record)) {
    let mut reader = JournalReader::open(path).unwrap();
    let config = *reader.config();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r);
    }
    std::fs::remove_file(path).unwrap();
    let mut journal = Journal::create(path, &config, SyncPolicy::Never).unwrap();
    for mut r in records {
        edit(&mut r);
        journal.append(r.tick, &r.commands, r.digest).unwrap();
    }
    journal.close().unwrap();
}
