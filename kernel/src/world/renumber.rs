//! Keeping slots in id order: see `permutation.rs` for why.

use alloc::vec::Vec;

use super::World;
use crate::command::EntityId;
use crate::grid::Grid;
use crate::id_index::IdIndex;
use crate::layers::LayerSummary;
use crate::margin::Margins;
use crate::permutation::Permutation;
use crate::slot_bits::SlotBits;
use crate::slot_table::SlotTable;
use crate::view::Views;

/// Whether slots should be renumbered at the end of a tick with churn, and
/// records in `slots` whether live slots still follow ids, which lets
/// views be searched by slot.
///
/// Renumbering pays once more than an eighth of the `live` entities are
/// out of id order (with an id below that of the live entity in the slot
/// before), or once spawns have used up the slots above every live one
/// (`top`, see `World::top`). Spawns under fresh ids take those in order;
/// at 1% churn a tick and an eighth of spare slots that lasts about 12
/// ticks. A world spawned in id order and never churned never renumbers.
/// Counting is `O(slots)`, a few µs per 10 000, and needed only after a
/// spawn broke the order.
pub(super) fn renumbering_due(slots: &mut SlotTable, live: u32, top: u32) -> bool {
    // Spawns that kept the order leave nothing to count: a despawn
    // never breaks it.
    let shuffled = match slots.ids.in_order() {
        true => 0,
        false => shuffled(slots),
    };
    slots.ids.set_in_order(shuffled == 0);
    // With no slot left above `top`, the next spawn takes a freed one
    // and breaks the order; renumbering first gives spawns the top
    // again, if it frees enough of one (at least a sixteenth of the
    // live entities) not to come round again within a few ticks.
    let len = u64::from(slots.len());
    let (live, top) = (u64::from(live), u64::from(top));
    let top_used_up = top == len && (len - live) * 16 >= live;
    u64::from(shuffled) * 8 > live || top_used_up
}

/// How many live entities have a smaller id than the live entity in
/// the slot before theirs.
fn shuffled(slots: &SlotTable) -> u32 {
    let (mut last, mut descents) = (None, 0);
    for slot in slots.live_slots() {
        let id = slots.ids.id(slot);
        descents += u32::from(last.is_some_and(|last| id < last));
        last = Some(id);
    }
    descents
}

/// What renumbering rewrites: everything kept by slot, everything kept by
/// view, and how slots are handed out.
pub(super) struct Renumbered<'a> {
    /// Every array kept by slot (`SlotTable::permute`).
    pub(super) slots: &'a mut SlotTable,
    pub(super) grid: &'a mut Grid,
    pub(super) index: &'a mut IdIndex,
    /// The live observers, ascending by id and clean.
    pub(super) by_id: &'a mut [(EntityId, u32)],
    pub(super) pending: &'a mut [u32],
    pub(super) last_slot: &'a mut u32,
    pub(super) observer_slots: &'a mut SlotBits,
    pub(super) layers: &'a mut LayerSummary,
    /// Kept by view.
    pub(super) views: &'a mut Views,
    pub(super) margins: &'a mut Margins,
    pub(super) cutoffs: &'a mut [u64],
    pub(super) guess_shifts: &'a mut [u8],
    /// How slots are handed out (see `World::top`).
    pub(super) free_slots: &'a mut Vec<u32>,
    pub(super) top: &'a mut u32,
    pub(super) top_id: &'a mut Option<EntityId>,
    /// Room for the two permutations, one after the other: the pairs'
    /// (at least two entries a slot), and a bit per slot.
    pub(super) room: &'a mut [u32],
    pub(super) done: &'a mut SlotBits,
    /// Live entities and observers.
    pub(super) count: u32,
    pub(super) observers: u32,
}

/// Gives every live entity the slot of its rank by id, and every live
/// view the number of its observer's rank, and moves or rewrites
/// everything kept by slot or by view to match. Between ticks only: the
/// per-tick sets are empty and no slot is churned.
pub(super) fn renumber(r: Renumbered<'_>) {
    let Renumbered {
        slots,
        grid,
        index,
        by_id,
        pending,
        last_slot,
        observer_slots,
        layers,
        views,
        margins,
        cutoffs,
        guess_shifts,
        free_slots,
        top,
        top_id,
        room,
        done,
        count,
        observers,
    } = r;
    // Slots never reach outputs: a world whose room could not hold the
    // numbering (none can) would only keep its slots as they are.
    let Some(mut r) = Permutation::within(slots.len(), &mut *room, &mut *done) else {
        return;
    };
    let (live, ids) = (slots.live_slots(), &slots.ids);
    r.plan_by_key(live, |s| ids.id(s));
    slots.permute(&mut r);
    // Tick stamps need no moving: each is compared with the tick it is
    // set in only, and every one names a tick now over.
    grid.renumber(&mut r);
    index.renumber(&r);
    views.renumber_entries(&r);
    margins.renumber(&r);
    for (_, slot) in by_id.iter_mut() {
        *slot = r.to(*slot);
    }
    for slot in pending.iter_mut() {
        *slot = r.to(*slot);
    }
    *last_slot = r.to(*last_slot);
    // Live entities now hold 0..count: forget the layers of the departed.
    *layers = LayerSummary::of(slots.shown[..count as usize].iter().map(|s| s.layers));
    observer_slots.clear_all();
    for &(_, slot) in by_id.iter() {
        observer_slots.set(slot);
    }
    // Live entities hold 0..count; hand out the lowest free slot first.
    free_slots.clear();
    free_slots.extend((count..slots.len()).rev());
    *top = count;
    *top_id = count.checked_sub(1).map(|last| slots.ids.id(last));

    // Views in their observers' order: `by_id` is sorted and clean.
    let entities = &slots.entities;
    let order = by_id.iter().map(|&(_, slot)| entities[slot as usize].view);
    let Some(mut r) = Permutation::within(views.count(), room, done) else {
        return;
    };
    r.plan(order);
    views.renumber_views(&mut r, observers);
    margins.renumber_views(&mut r);
    r.permute(cutoffs);
    r.permute(guess_shifts);
    for &(_, slot) in by_id.iter() {
        let (e, w) = (
            &mut slots.entities[slot as usize],
            &mut slots.watchers[slot as usize],
        );
        e.view = r.to(e.view);
        *w = w.with_view(e.view);
    }
}

impl World {
    /// Renumbers slots and views in id order ([`renumber`]), lending it
    /// what it rewrites; the observers are sorted by id first.
    pub(crate) fn renumber_slots(&mut self) {
        debug_assert!(self.released.is_empty(), "between ticks only");
        self.sort_observers();
        renumber(Renumbered {
            slots: &mut self.slots,
            grid: &mut self.grid,
            index: &mut self.index,
            by_id: &mut self.by_id,
            pending: &mut self.pending,
            last_slot: &mut self.last_slot,
            observer_slots: &mut self.observer_slots,
            layers: &mut self.layers,
            views: &mut self.views,
            margins: &mut self.margins,
            cutoffs: &mut self.cutoffs,
            guess_shifts: &mut self.guess_shifts,
            free_slots: &mut self.free_slots,
            top: &mut self.top,
            top_id: &mut self.top_id,
            room: self.pairs.scratch(),
            done: &mut self.numbering_done,
            count: self.count,
            observers: self.observers,
        });
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use crate::digest::mix64;
    use crate::slot_table::Entity;
    use crate::{Command, Config, Event, EventSink, Fix, Move, Pos, Spawn, Visibility, World};

    /// A deterministic stream from the digest's mixer, as other kernel
    /// tests draw theirs.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = mix64(self.0);
            self.0 % n
        }

        fn pos(&mut self) -> Pos {
            Pos::from_ints(self.below(600) as i32, self.below(600) as i32)
        }
    }

    /// One tick of a churning world: a third of the entities step, some
    /// creep, a few jump, a few despawn, and new ids spawn into the freed
    /// slots, which shuffles slots out of id order. A `calm` tick does a
    /// tenth of that, so views are updated rather than rebuilt, and crowds
    /// keep margins.
    fn tick(
        rng: &mut Rng,
        calm: bool,
        live: &mut Vec<(u64, Pos)>,
        next_id: &mut u64,
    ) -> Vec<Command> {
        let mut commands = Vec::new();
        let mut k = 0;
        while k < live.len() {
            let (id, pos) = live[k];
            match rng.below(if calm { 1000 } else { 100 }) {
                0..=2 => {
                    commands.push(Command::Despawn { id });
                    live.swap_remove(k);
                    continue;
                }
                3..=5 => live[k].1 = rng.pos(),
                6..=40 => {
                    let step = |p: Fix, d: u64| {
                        let p = p + Fix::from_num(d as i32 - 8);
                        p.clamp(Fix::ZERO, Fix::from_num(599))
                    };
                    live[k].1 = Pos::new(step(pos.x, rng.below(17)), step(pos.y, rng.below(17)));
                }
                // Steps below the move epsilon: not due, so they settle later.
                41..=55 => live[k].1.x = pos.x + Fix::from_bits(1 + rng.below(2000) as i64),
                _ => {}
            }
            if live[k].1 != pos {
                commands.push(Command::Move(Move {
                    id,
                    pos: live[k].1,
                    dir: 0,
                    speed: Fix::ZERO,
                }));
            }
            k += 1;
        }
        // The population swings, so that freed slots stay vacant a while.
        let target = match calm {
            true => live.len() + rng.below(2) as usize,
            false => 180 + rng.below(70) as usize,
        };
        while live.len() < target {
            *next_id += 1 + rng.below(3);
            let (id, pos) = (*next_id, rng.pos());
            commands.push(Command::Spawn(match id % 2 {
                0 => Spawn::observer(id, pos, Fix::from_num(90 + rng.below(40) as i32)),
                _ => Spawn::npc(id, pos),
            }));
            live.push((id, pos));
        }
        commands
    }

    fn config(visibility: Visibility) -> Config {
        Config {
            visibility,
            width_cells: 6,
            height_cells: 6,
            hysteresis: Fix::from_num(12),
            max_entities: 256,
            max_observers: 160,
            // Crowds get culled and keep margins.
            max_view: 24,
            ..Config::default()
        }
    }

    /// Whether the live entities hold the lowest slots, ascending by id,
    /// and their observers the lowest views, in the same order.
    fn in_id_order(w: &World) -> bool {
        let live: Vec<&Entity> = w.slots.entities.iter().take_while(|e| e.alive).collect();
        let views = live.iter().filter(|e| e.is_observer()).map(|e| e.view);
        live.len() == w.count as usize
            && live.windows(2).all(|p| p[0].id < p[1].id)
            && views.eq(0..w.observers)
    }

    #[test]
    fn renumbered_worlds_send_the_same_events_and_digests() {
        for visibility in [Visibility::Grid, Visibility::Radius] {
            let mut plain = World::new(config(visibility)).unwrap();
            let mut renumbered = World::new(config(visibility)).unwrap();
            let (mut rng, mut live, mut next_id) = (Rng(7), Vec::new(), 0);
            let mut shuffles = 0;
            for t in 1..=200 {
                let calm = t % 20 >= 10;
                let commands = tick(&mut rng, calm, &mut live, &mut next_id);
                let (mut a, mut b) = (Vec::<Event>::new(), Vec::<Event>::new());
                let report = plain.step(&commands, &mut a);
                assert_eq!(renumbered.step(&commands, &mut b), report, "tick {t}");
                assert_eq!(a, b, "tick {t}, {visibility:?}");
                shuffles += usize::from(!in_id_order(&renumbered));
                renumbered.renumber_slots();
                assert!(in_id_order(&renumbered), "tick {t}");
                for &(id, _) in &live {
                    let view = |w: &World| w.view(id).map(Iterator::collect::<Vec<_>>);
                    assert_eq!(view(&plain), view(&renumbered), "view of {id}, tick {t}");
                }
            }
            // Churn did shuffle the slots every so often, and the world
            // left alone renumbered itself at least once.
            assert!(shuffles > 50, "{shuffles} shuffled ticks");
            assert!(super::shuffled(&plain.slots) * 8 <= plain.count);
            let _ = <Vec<Event> as EventSink>::event;
        }
    }

    #[test]
    fn spawns_under_fresh_ids_keep_slots_in_id_order() {
        let mut w = World::new(Config {
            max_entities: 64,
            max_observers: 64,
            ..config(Visibility::Grid)
        })
        .unwrap();
        let (mut rng, mut sink) = (Rng(11), Vec::<Event>::new());
        let spawn = |id, rng: &mut Rng| Command::Spawn(Spawn::observer(id, rng.pos(), Fix::ONE));
        let mut live: Vec<u64> = (1..=64).collect();
        let first: Vec<Command> = live.iter().map(|&id| spawn(id, &mut rng)).collect();
        w.step(&first, &mut sink);
        // Two log out and two new ids log in every tick: the slots above
        // run out every few ticks and the world renumbers.
        for next in (65..265).step_by(2) {
            let mut commands = Vec::new();
            for _ in 0..2 {
                let id = live.swap_remove(rng.below(live.len() as u64) as usize);
                commands.push(Command::Despawn { id });
            }
            for id in [next, next + 1] {
                commands.push(spawn(id, &mut rng));
                live.push(id);
            }
            w.step(&commands, &mut sink);
            assert!(w.slots.ids.in_order(), "after id {next}");
        }
        // An old id back breaks the order until the slots are renumbered.
        let gone = (1..).find(|id| !live.contains(id)).unwrap();
        let commands = [Command::Despawn { id: live[0] }, spawn(gone, &mut rng)];
        w.step(&commands, &mut sink);
        assert!(!w.slots.ids.in_order());
        w.renumber_slots();
        assert!(w.slots.ids.in_order() && in_id_order(&w));
    }
}
