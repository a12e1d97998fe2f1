//! Feeds arbitrary bytes to the journal reader behind `lockgrid replay` and
//! crash recovery: once as a whole file, once as the payload of a record
//! with a valid header, length and checksum, so that the payload decoder
//! is reached rather than stopped at the checksum.
//!
//! Checks: no panic; records come out in tick order; reading ends in a
//! record list, a torn tail or a typed error.
//! Run with `cargo +nightly fuzz run journal` from the repository root.
#![no_main]

use std::fs;

use libfuzzer_sys::fuzz_target;
use lockgrid_host::journal::{Journal, JournalReader, SyncPolicy, MAX_PAYLOAD};
use lockgrid_kernel::Config;

fn read_all(path: &std::path::Path) {
    let Ok(mut reader) = JournalReader::open(path) else {
        return;
    };
    let mut last = 0;
    while let Ok(Some(record)) = reader.next_record() {
        assert_eq!(record.tick, last + 1, "records come out in tick order");
        last = record.tick;
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temporary folder");

    let raw = dir.path().join("raw.lgj");
    fs::write(&raw, data).expect("write");
    read_all(&raw);

    // A valid header, then one record framed around the fuzzer's payload.
    let framed = dir.path().join("framed.lgj");
    Journal::create(&framed, &Config::default(), SyncPolicy::Never)
        .and_then(|j| j.close())
        .expect("create");
    let payload = &data[..data.len().min(MAX_PAYLOAD)];
    let len = (payload.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len);
    crc.update(payload);
    let mut bytes = fs::read(&framed).expect("read");
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&crc.finalize().to_le_bytes());
    bytes.extend_from_slice(payload);
    fs::write(&framed, &bytes).expect("write");
    read_all(&framed);
});
