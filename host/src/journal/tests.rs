use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn};

use super::*;

const TICKS: u64 = 5;

fn commands(tick: u64) -> Vec<Command> {
    let id = tick % 3;
    match tick % 3 {
        0 => vec![Command::Despawn { id }],
        1 => vec![
            Command::Spawn(Spawn::observer(
                tick,
                Pos::from_ints(tick as i32, 3),
                Fix::from_num(50),
            )),
            Command::Move(Move {
                id,
                pos: Pos::from_ints(-1, 2),
                dir: 7,
                speed: Fix::from_bits(5),
            }),
        ],
        _ => vec![],
    }
}

/// A journal of `TICKS` ticks; returns its path and each record's start offset.
fn journal(dir: &tempfile::TempDir) -> (PathBuf, Vec<u64>) {
    let path = dir.path().join("journal.lgj");
    let mut j = Journal::create(&path, &Config::default(), SyncPolicy::Never).unwrap();
    let mut starts = Vec::new();
    for tick in 1..=TICKS {
        starts.push(std::fs::metadata(&path).unwrap().len());
        j.append(tick, &commands(tick), tick * 1000).unwrap();
        j.sync().unwrap();
    }
    j.close().unwrap();
    (path, starts)
}

fn read_all(path: &Path) -> Result<(Vec<Record>, Option<TornTail>), JournalError> {
    let mut r = JournalReader::open(path)?;
    let mut records = Vec::new();
    while let Some(rec) = r.next_record()? {
        records.push(rec);
    }
    Ok((records, r.torn_tail()))
}

#[test]
fn records_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let (records, torn) = read_all(&path).unwrap();
    assert_eq!(torn, None);
    assert_eq!(records.len() as u64, TICKS);
    for (i, r) in records.iter().enumerate() {
        let tick = i as u64 + 1;
        assert_eq!(
            *r,
            Record {
                tick,
                digest: tick * 1000,
                commands: commands(tick)
            }
        );
    }
}

#[test]
fn torn_tail_is_cut_at_every_byte_offset_of_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = journal(&dir);
    let full = std::fs::read(&path).unwrap();
    let last = *starts.last().unwrap() as usize;
    for cut in last + 1..full.len() {
        let torn_path = dir.path().join("torn.lgj");
        std::fs::write(&torn_path, &full[..cut]).unwrap();
        let (mut j, report) = Journal::open(&torn_path, SyncPolicy::EveryTick).unwrap();
        let torn = report
            .truncated
            .unwrap_or_else(|| panic!("cut {cut}: no torn tail"));
        assert_eq!(torn.offset, last as u64, "cut {cut}");
        assert_eq!(torn.bytes, (cut - last) as u64);
        assert_eq!(torn.after_tick, TICKS - 1);
        assert_eq!(report.last_tick, TICKS - 1);
        assert_eq!(report.last_digest, Some((TICKS - 1) * 1000));
        assert_eq!(std::fs::metadata(&torn_path).unwrap().len(), last as u64);
        // The journal goes on from the last complete tick.
        j.append(TICKS, &commands(TICKS), 1).unwrap();
        j.close().unwrap();
        let (records, torn) = read_all(&torn_path).unwrap();
        assert_eq!((records.len() as u64, torn), (TICKS, None));
    }
    // Cut exactly at a record boundary: a clean end, nothing to report.
    let clean = dir.path().join("clean.lgj");
    std::fs::write(&clean, &full[..last]).unwrap();
    let (_, report) = Journal::open(&clean, SyncPolicy::EveryTick).unwrap();
    assert_eq!((report.last_tick, report.truncated), (TICKS - 1, None));
}

#[test]
fn zero_filled_tail_is_torn() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0; 4096]);
    std::fs::write(&path, &bytes).unwrap();
    let (_, report) = Journal::open(&path, SyncPolicy::EveryTick).unwrap();
    let torn = report.truncated.unwrap();
    assert_eq!(
        (torn.offset, torn.bytes, torn.fault),
        (len, 4096, RecordFault::Length(0))
    );
    assert_eq!(report.last_tick, TICKS);
}

#[test]
fn bit_flips_before_the_last_record_are_corruption_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = journal(&dir);
    let full = std::fs::read(&path).unwrap();
    let flipped = dir.path().join("flipped.lgj");
    for (k, window) in starts.windows(2).enumerate() {
        let (start, end) = (window[0] as usize, window[1] as usize);
        for byte in start..end {
            for bit in 0..8 {
                let mut bytes = full.clone();
                bytes[byte] ^= 1 << bit;
                std::fs::write(&flipped, &bytes).unwrap();
                match Journal::open(&flipped, SyncPolicy::EveryTick) {
                    Err(JournalError::Corrupt {
                        offset, after_tick, ..
                    }) => {
                        assert_eq!((offset, after_tick), (start as u64, k as u64));
                    }
                    Err(e) => panic!("byte {byte} bit {bit}: {e}"),
                    Ok(_) => panic!("byte {byte} bit {bit}: accepted"),
                }
                assert_eq!(std::fs::read(&flipped).unwrap(), bytes, "file was modified");
                assert!(matches!(
                    read_all(&flipped),
                    Err(JournalError::Corrupt { .. })
                ));
            }
        }
    }
}

#[test]
fn bit_flips_in_the_last_record_are_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = journal(&dir);
    let full = std::fs::read(&path).unwrap();
    let last = *starts.last().unwrap() as usize;
    let flipped = dir.path().join("flipped.lgj");
    for byte in last..full.len() {
        let mut bytes = full.clone();
        bytes[byte] ^= 0x10;
        std::fs::write(&flipped, &bytes).unwrap();
        let (_, report) = Journal::open(&flipped, SyncPolicy::EveryTick).unwrap();
        assert_eq!(report.last_tick, TICKS - 1, "byte {byte}");
        assert_eq!(report.truncated.map(|t| t.offset), Some(last as u64));
    }
}

#[test]
fn damaged_headers_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let full = std::fs::read(&path).unwrap();
    let bad = dir.path().join("bad.lgj");
    for cut in 0..HEADER_LEN {
        std::fs::write(&bad, &full[..cut]).unwrap();
        assert!(matches!(
            Journal::open(&bad, SyncPolicy::EveryTick),
            Err(JournalError::TruncatedHeader { len }) if len == cut as u64
        ));
    }
    for byte in 0..HEADER_LEN {
        let mut bytes = full.clone();
        bytes[byte] ^= 0x01;
        std::fs::write(&bad, &bytes).unwrap();
        let err = Journal::open(&bad, SyncPolicy::EveryTick).err();
        let expected = match byte {
            0..8 => matches!(err, Some(JournalError::BadMagic)),
            8..12 => matches!(err, Some(JournalError::UnsupportedVersion(_))),
            12..16 => matches!(err, Some(JournalError::BadConfigLength(_))),
            _ => matches!(err, Some(JournalError::HeaderChecksum)),
        };
        assert!(expected, "byte {byte}: {err:?}");
    }
    // A journal from another version says which one this build reads.
    let mut bytes = full;
    bytes[8] = 1;
    std::fs::write(&bad, &bytes).unwrap();
    let err = Journal::open(&bad, SyncPolicy::EveryTick).err().unwrap();
    assert_eq!(
        err.to_string(),
        "unsupported journal version 1 (this build reads version 3)"
    );
}

#[test]
fn appends_must_follow_the_last_tick() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let (mut j, report) = Journal::open(&path, SyncPolicy::EveryTick).unwrap();
    assert_eq!((report.last_tick, report.truncated), (TICKS, None));
    assert_eq!(*j.config(), Config::default());
    assert!(matches!(
        j.append(TICKS + 2, &[], 0),
        Err(JournalError::OutOfSequence {
            expected: 6,
            given: 7
        })
    ));
    assert!(matches!(
        j.append(TICKS, &[], 0),
        Err(JournalError::OutOfSequence { .. })
    ));
    let huge = vec![Command::Despawn { id: 1 }; MAX_PAYLOAD / 9 + 1];
    assert!(matches!(
        j.append(TICKS + 1, &huge, 0),
        Err(JournalError::TickTooLarge { .. })
    ));
    j.append(TICKS + 1, &[], 0).unwrap();
    j.sync().unwrap();
    assert!(matches!(
        Journal::create(&path, &Config::default(), SyncPolicy::EveryTick),
        Err(JournalError::Exists)
    ));
}

/// Deterministic bytes that look random (xorshift64*), for garbage tails.
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn random_garbage_tail_is_torn_and_says_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let tail = garbage(2 << 20, 7);
    let nonzero = tail.iter().filter(|b| **b != 0).count() as u64;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&tail);
    std::fs::write(&path, &bytes).unwrap();
    let (_, report) = Journal::open(&path, SyncPolicy::EveryTick).unwrap();
    let torn = report.truncated.unwrap();
    assert_eq!(
        (torn.offset, torn.bytes, torn.nonzero),
        (len, 2 << 20, nonzero)
    );
    assert_eq!(report.last_tick, TICKS);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    let text = torn.to_string();
    assert!(
        text.contains(&format!("{nonzero} non-zero bytes"))
            && text.contains("no valid record follows"),
        "{text}"
    );
}

#[test]
fn zero_tail_longer_than_a_crash_leaves_is_refused_honestly() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    // A sparse file: the extension reads as zeros without writing them.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len + MAX_TAIL + 1).unwrap();
    drop(file);
    let err = Journal::open(&path, SyncPolicy::EveryTick).err().unwrap();
    match err {
        JournalError::TailTooLong {
            offset,
            after_tick,
            bytes,
            nonzero,
            fault,
        } => assert_eq!(
            (offset, after_tick, bytes, nonzero, fault),
            (len, TICKS, MAX_TAIL + 1, 0, RecordFault::Length(0))
        ),
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(!text.contains("valid records follow"), "{text}");
    assert!(
        text.contains("all zero bytes")
            && text.contains("no valid record follows")
            && text.contains(&format!("truncate -s {len}")),
        "{text}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len + MAX_TAIL + 1);
}

#[test]
fn records_appended_after_garbage_make_it_corruption_and_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&garbage(100_003, 11));
    let next_offset = bytes.len() as u64;
    // A valid record of the next tick after the garbage, as a writer that
    // did not cut the tail would have appended it.
    super::format::encode_record(&mut bytes, TICKS + 1, &commands(TICKS + 1), 9);
    std::fs::write(&path, &bytes).unwrap();
    let err = Journal::open(&path, SyncPolicy::EveryTick).err().unwrap();
    assert!(
        matches!(
            err,
            JournalError::Corrupt { offset, after_tick: TICKS, next_offset: n, next_tick, .. }
                if offset == len && n == next_offset && next_tick == TICKS + 1
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(&format!(
        "a valid record of tick {} follows at offset {next_offset}",
        TICKS + 1
    )));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "file was modified");
}

#[test]
fn a_tail_crafted_to_look_like_records_everywhere_is_refused_not_scanned_forever() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = journal(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    // Every 1000 bytes a record header whose tick could follow and whose
    // command count fits its length, claiming most of the rest of the
    // file, with a wrong CRC: checking them all would cost far more than
    // the region's size.
    const SPACING: usize = 1000;
    const HEADERS: usize = 300;
    let mut tail = vec![0u8; SPACING * HEADERS + 600_000];
    for k in 1..HEADERS {
        let at = k * SPACING;
        let payload = (tail.len() - at - 8 - 1) as u32;
        let count = (payload - 20) / 9;
        tail[at..at + 4].copy_from_slice(&payload.to_le_bytes());
        tail[at + 4..at + 8].copy_from_slice(&0xdead_beef_u32.to_le_bytes());
        tail[at + 8..at + 16].copy_from_slice(&(TICKS + 2).to_le_bytes());
        tail[at + 24..at + 28].copy_from_slice(&count.to_le_bytes());
        tail[at + 28] = 3;
    }
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&tail);
    std::fs::write(&path, &bytes).unwrap();
    let err = Journal::open(&path, SyncPolicy::EveryTick).err().unwrap();
    assert!(
        matches!(
            err,
            JournalError::Undecided { offset, after_tick: TICKS, bytes: b, .. }
                if offset == len && b == tail.len() as u64
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("too many record-like headers"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "file was modified");
}

#[test]
fn a_sync_started_early_finishes_in_sync_under_every_policy() {
    let every_third = SyncPolicy::EveryTicks(std::num::NonZeroU32::new(3).unwrap());
    for policy in [SyncPolicy::EveryTick, every_third, SyncPolicy::Never] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.lgj");
        let mut j = Journal::create(&path, &Config::default(), policy).unwrap();
        let mut tick = 0;
        while tick < 20 {
            tick += 1;
            j.append(tick, &commands(tick), tick * 1000).unwrap();
            j.start_sync().unwrap();
            // Started twice: the second has nothing more to cover.
            j.start_sync().unwrap();
            if tick % 4 == 0 {
                // A tick appended while a sync is under way: `sync` covers
                // it too, with a second sync of its own.
                tick += 1;
                j.append(tick, &commands(tick), tick * 1000).unwrap();
            }
            j.sync().unwrap();
        }
        // A started sync left unfinished is finished by close.
        tick += 1;
        j.append(tick, &commands(tick), tick * 1000).unwrap();
        j.start_sync().unwrap();
        j.close().unwrap();
        let (_, report) = Journal::open(&path, policy).unwrap();
        assert_eq!(report.last_tick, tick, "{policy:?}");
        assert_eq!(report.truncated, None, "{policy:?}");
    }
}
