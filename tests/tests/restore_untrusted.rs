//! `World::restore` takes snapshots from disk, so from anyone: corrupted or
//! hand-edited snapshots are restored or refused with an error, never a
//! panic, and a world that was accepted steps without panicking.

use lockgrid_kernel::{Command, Snapshot, World};
use lockgrid_tests::gen::{self, Shape};
use lockgrid_tests::wild;
use lockgrid_tests::{check, digest};
use proptest::prelude::*;
use serde_json::Value;

const SMALL: Shape = Shape {
    ticks: 8,
    commands: 8,
    ids: 8,
    ..Shape::DEFAULT
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
    #![proptest_config(lockgrid_tests::cases(256))]

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
                ByteEdit::Truncate(i) if !bytes.is_empty() => bytes.truncate(i.index(bytes.len())),
                ByteEdit::Truncate(_) => {}
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
        if snapshot.entities.is_empty() {
            snapshot.tick += 1;
        } else {
            let i = which.index(snapshot.entities.len());
            snapshot.entities[i].state.dir = snapshot.entities[i].state.dir.wrapping_add(1);
        }
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

/// A structural edit of a snapshot.
#[derive(Clone, Debug)]
enum Forge {
    ViewAdd(prop::sample::Index, prop::sample::Index),
    ViewAddId(prop::sample::Index, u64),
    ViewClear(prop::sample::Index),
    FlipObserver(prop::sample::Index),
    Pos(prop::sample::Index, lockgrid_kernel::Pos),
    Radius(prop::sample::Index, lockgrid_kernel::Fix),
    Speed(prop::sample::Index, lockgrid_kernel::Fix),
    Masks(prop::sample::Index, u32, u32),
    SentTick(prop::sample::Index, u64),
    SentPos(prop::sample::Index, lockgrid_kernel::Pos),
    Tick(u64),
    Swap(prop::sample::Index, prop::sample::Index),
    Duplicate(prop::sample::Index),
    Id(prop::sample::Index, u64),
    MaxView(u32),
    MaxEntities(u32),
    MaxObservers(u32),
    Origin(lockgrid_kernel::Pos),
    FlipVisibility,
}

fn forge() -> impl Strategy<Value = Forge> {
    use prop::sample::Index;
    let i = any::<Index>;
    prop_oneof![
        3 => (i(), i()).prop_map(|(a, b)| Forge::ViewAdd(a, b)),
        1 => (i(), wild::wild_id()).prop_map(|(a, b)| Forge::ViewAddId(a, b)),
        1 => i().prop_map(Forge::ViewClear),
        2 => i().prop_map(Forge::FlipObserver),
        2 => (i(), wild::wild_pos()).prop_map(|(a, p)| Forge::Pos(a, p)),
        1 => (i(), wild::wild_fix()).prop_map(|(a, r)| Forge::Radius(a, r)),
        1 => (i(), wild::wild_fix()).prop_map(|(a, r)| Forge::Speed(a, r)),
        1 => (i(), any::<u32>(), any::<u32>()).prop_map(|(a, l, m)| Forge::Masks(a, l, m)),
        1 => (i(), prop_oneof![any::<u64>(), Just(u64::MAX), 0u64..40]).prop_map(|(a, t)| Forge::SentTick(a, t)),
        1 => (i(), wild::wild_pos()).prop_map(|(a, p)| Forge::SentPos(a, p)),
        1 => prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), any::<u64>(), 0u64..40].prop_map(Forge::Tick),
        1 => (i(), i()).prop_map(|(a, b)| Forge::Swap(a, b)),
        1 => i().prop_map(Forge::Duplicate),
        1 => (i(), wild::wild_id()).prop_map(|(a, b)| Forge::Id(a, b)),
        1 => (0u32..4).prop_map(Forge::MaxView),
        1 => (0u32..6).prop_map(Forge::MaxEntities),
        1 => (0u32..4).prop_map(Forge::MaxObservers),
        1 => wild::wild_pos().prop_map(Forge::Origin),
        1 => Just(Forge::FlipVisibility),
    ]
}

fn apply_forge(s: &mut Snapshot, f: &Forge) {
    let n = s.entities.len();
    if n == 0 {
        match f {
            Forge::Tick(t) => s.tick = *t,
            Forge::MaxView(v) => s.config.max_view = *v,
            Forge::MaxEntities(v) => s.config.max_entities = *v,
            Forge::MaxObservers(v) => s.config.max_observers = *v,
            Forge::Origin(p) => s.config.origin = *p,
            Forge::FlipVisibility => {}
            _ => {}
        }
        return;
    }
    match f {
        Forge::ViewAdd(a, b) => {
            let id = s.entities[b.index(n)].state.id;
            s.entities[a.index(n)].view.push(id);
        }
        Forge::ViewAddId(a, id) => s.entities[a.index(n)].view.push(*id),
        Forge::ViewClear(a) => s.entities[a.index(n)].view.clear(),
        Forge::FlipObserver(a) => {
            let e = &mut s.entities[a.index(n)].state;
            e.observer = !e.observer;
        }
        Forge::Pos(a, p) => s.entities[a.index(n)].state.pos = *p,
        Forge::Radius(a, r) => s.entities[a.index(n)].state.radius = *r,
        Forge::Speed(a, r) => s.entities[a.index(n)].state.speed = *r,
        Forge::Masks(a, l, m) => {
            let e = &mut s.entities[a.index(n)].state;
            e.layers = *l;
            e.interest = *m;
        }
        Forge::SentTick(a, t) => {
            let e = &mut s.entities[a.index(n)];
            let state = e.state;
            let sent = e.sent.get_or_insert(lockgrid_kernel::Sent {
                motion: lockgrid_kernel::Motion {
                    pos: state.pos,
                    dir: state.dir,
                    speed: state.speed,
                },
                tick: 0,
            });
            sent.tick = *t;
        }
        Forge::SentPos(a, p) => {
            if let Some(sent) = &mut s.entities[a.index(n)].sent {
                sent.motion.pos = *p;
            }
        }
        Forge::Tick(t) => s.tick = *t,
        Forge::Swap(a, b) => s.entities.swap(a.index(n), b.index(n)),
        Forge::Duplicate(a) => {
            let e = s.entities[a.index(n)].clone();
            s.entities.insert(a.index(n), e);
        }
        Forge::Id(a, id) => s.entities[a.index(n)].state.id = *id,
        Forge::MaxView(v) => s.config.max_view = *v,
        Forge::MaxEntities(v) => s.config.max_entities = *v,
        Forge::MaxObservers(v) => s.config.max_observers = *v,
        Forge::Origin(p) => s.config.origin = *p,
        Forge::FlipVisibility => {
            s.config.visibility = match s.config.visibility {
                lockgrid_kernel::Visibility::Grid => lockgrid_kernel::Visibility::Radius,
                lockgrid_kernel::Visibility::Radius => lockgrid_kernel::Visibility::Grid,
            }
        }
    }
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(512))]

    /// Snapshots edited structurally, with the digest recomputed so the
    /// edit is not caught by the digest check alone: restore must refuse
    /// them or produce a world that keeps every invariant while it runs.
    #[test]
    fn forged_snapshots_with_valid_digests_never_panic(
        s in gen::scenario(SMALL),
        forges in prop::collection::vec(forge(), 1..4),
        after in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..8), 1..4),
    ) {
        let mut snapshot = snapshot_of(&s)?;
        for f in &forges {
            apply_forge(&mut snapshot, f);
        }
        snapshot.digest = digest::of_snapshot(&snapshot);
        if let Ok(mut world) = World::restore(&snapshot) {
            let c = *world.config();
            prop_assert_eq!(world.digest(), snapshot.digest);
            let mut events = Vec::new();
            for commands in &after {
                events.clear();
                world.step(commands, &mut events);
                prop_assert!(world.len() <= c.max_entities);
                for e in world.entities() {
                    prop_assert!(c.cell_of(e.pos).is_some());
                    if let Some(view) = world.view(e.id) {
                        prop_assert!(view.count() as u32 <= c.max_view);
                    }
                }
            }
            // A world that runs can always be snapshotted and restored.
            let again = world.snapshot();
            prop_assert!(World::restore(&again).is_ok(), "{:?}", World::restore(&again).err());
        }
    }
}
