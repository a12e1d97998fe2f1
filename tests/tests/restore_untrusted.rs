//! `World::restore` takes snapshots from disk, so from anyone: corrupted or
//! hand-edited snapshots are restored or refused with an error, never a
//! panic, and a world that was accepted steps without panicking.

use lockgrid_kernel::{Command, Snapshot, World};
use lockgrid_tests::check;
use lockgrid_tests::gen::{self, Shape};
use lockgrid_tests::wild;
use proptest::prelude::*;
use serde_json::Value;

const SMALL: Shape = Shape {
    ticks: 8,
    commands: 8,
    ids: 8,
    roomy: false,
    mode: None,
};

/// A world built by a random scenario, and its snapshot.
fn snapshot_of(s: &gen::Scenario) -> Result<Snapshot, TestCaseError> {
    let mut world = check::world(s).map_err(TestCaseError::fail)?;
    check::run(&mut world, &s.ticks).map_err(TestCaseError::fail)?;
    Ok(world.snapshot())
}

/// Restores, and if accepted, keeps stepping; nothing may panic.
fn restore_and_step(snapshot: &Snapshot, after: &[Vec<Command>]) {
    if let Ok(mut world) = World::restore(snapshot) {
        let mut events = Vec::new();
        for commands in after {
            events.clear();
            world.step(commands, &mut events);
        }
        let _ = world.snapshot();
    }
}

#[derive(Clone, Debug)]
enum ByteEdit {
    Flip(prop::sample::Index, u8),
    Truncate(prop::sample::Index),
    Insert(prop::sample::Index, u8),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, b)| ByteEdit::Flip(i, b)),
        1 => any::<prop::sample::Index>().prop_map(ByteEdit::Truncate),
        1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Insert(i, b)),
    ]
}

/// Replaces numbers inside the snapshot's JSON tree: structure stays valid,
/// so most edits get past serde and reach the kernel's own validation.
fn edit_numbers(
    v: &mut Value,
    picks: &mut impl Iterator<Item = (u64, u64)>,
    replacement: &[Value],
) {
    match v {
        Value::Number(_) | Value::Bool(_) => {
            if let Some((p, r)) = picks.next() {
                if p % 8 == 0 {
                    *v = replacement[(r % replacement.len() as u64) as usize].clone();
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                edit_numbers(item, picks, replacement);
            }
        }
        Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                edit_numbers(item, picks, replacement);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn corrupted_postcard_snapshots_never_panic(
        s in gen::scenario(SMALL),
        edits in prop::collection::vec(byte_edit(), 1..4),
        after in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..8), 0..4),
    ) {
        let snapshot = snapshot_of(&s)?;
        let mut bytes = postcard::to_allocvec(&snapshot).expect("snapshots encode");
        for edit in edits {
            match edit {
                ByteEdit::Flip(i, b) if !bytes.is_empty() => {
                    let i = i.index(bytes.len());
                    bytes[i] ^= b;
                }
                ByteEdit::Flip(..) => {}
                ByteEdit::Truncate(i) => bytes.truncate(i.index(bytes.len())),
                ByteEdit::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), b),
            }
        }
        if let Ok(decoded) = postcard::from_bytes::<Snapshot>(&bytes) {
            restore_and_step(&decoded, &after);
        }
    }

    #[test]
    fn edited_json_snapshots_never_panic(
        s in gen::scenario(SMALL),
        picks in prop::collection::vec((any::<u64>(), any::<u64>()), 0..400),
        after in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..8), 0..4),
    ) {
        let snapshot = snapshot_of(&s)?;
        let mut tree = serde_json::to_value(&snapshot).expect("snapshots encode");
        let replacement: Vec<Value> = vec![
            0.into(), 1.into(), (-1).into(), u64::MAX.into(), i64::MIN.into(), i64::MAX.into(),
            u32::MAX.into(), 65535.into(), (1u64 << 61).into(), true.into(), false.into(),
        ];
        edit_numbers(&mut tree, &mut picks.into_iter(), &replacement);
        if let Ok(decoded) = serde_json::from_value::<Snapshot>(tree) {
            restore_and_step(&decoded, &after);
        }
    }

    /// A snapshot whose fields were edited consistently (the digest no
    /// longer matches) is refused, not silently accepted.
    #[test]
    fn edited_state_with_stale_digest_is_refused(s in gen::scenario(SMALL), which in any::<prop::sample::Index>()) {
        let mut snapshot = snapshot_of(&s)?;
        prop_assume!(!snapshot.entities.is_empty());
        let i = which.index(snapshot.entities.len());
        snapshot.entities[i].state.dir = snapshot.entities[i].state.dir.wrapping_add(1);
        prop_assert!(World::restore(&snapshot).is_err());
    }
}

#[test]
fn empty_and_garbage_inputs_are_refused_without_panicking() {
    assert!(postcard::from_bytes::<Snapshot>(&[]).is_err());
    for b in 0u8..=255 {
        if let Ok(s) = postcard::from_bytes::<Snapshot>(&[b; 64]) {
            restore_and_step(&s, &[]);
        }
    }
}
