//! Keeping slots in id order: see `permutation.rs` for why.

use super::World;

impl World {
    /// Renumbers the slots in id order once more than an eighth of the
    /// live entities are out of it (with an id below that of the live
    /// entity in the slot before), or once spawns have used up the slots
    /// above every live one (see `World::top`). Spawns under fresh ids
    /// take those in order; at 1% churn a tick and an eighth of spare
    /// slots that lasts about 12 ticks. A world spawned in id order and
    /// never churned never renumbers. Also records whether live slots
    /// follow ids, which lets views be searched by slot. Called after
    /// ticks with churn only. Counting is `O(slots)`, a few µs per 10 000,
    /// and needed only after a spawn broke the order.
    pub(super) fn renumber_if_shuffled(&mut self) {
        // Spawns that kept the order leave nothing to count: a despawn
        // never breaks it.
        let shuffled = match self.slots.ids.in_order() {
            true => 0,
            false => self.shuffled(),
        };
        self.slots.ids.set_in_order(shuffled == 0);
        // With no slot left above `top`, the next spawn takes a freed one
        // and breaks the order; renumbering first gives spawns the top
        // again, if it frees enough of one (at least a sixteenth of the
        // live entities) not to come round again within a few ticks.
        let slots = u64::from(self.slots.len());
        let (live, top) = (u64::from(self.count), u64::from(self.top));
        let top_used_up = top == slots && (slots - live) * 16 >= live;
        if u64::from(shuffled) * 8 > live || top_used_up {
            self.hit(crate::coverage::Path::Renumbered);
            self.renumber_slots();
        }
    }

    /// How many live entities have a smaller id than the live entity in
    /// the slot before theirs.
    fn shuffled(&self) -> u32 {
        let (mut last, mut descents) = (None, 0);
        for slot in self.slots.live_slots() {
            let id = self.slots.ids.id(slot);
            descents += u32::from(last.is_some_and(|last| id < last));
            last = Some(id);
        }
        descents
    }

    /// Gives every live entity the slot of its rank by id, and every live
    /// view the number of its observer's rank, and moves or rewrites
    /// everything kept by slot or by view to match. Between ticks only: the
    /// per-tick sets are empty and no slot is churned.
    pub(crate) fn renumber_slots(&mut self) {
        debug_assert!(self.released.is_empty(), "between ticks only");
        self.sort_observers();
        let (live, ids) = (self.slots.live_slots(), &self.slots.ids);
        self.slot_numbering.plan_by_key(live, |s| ids.id(s));
        let r = &mut self.slot_numbering;
        self.slots.permute(r);
        // Tick stamps need no moving: each is compared with the tick it is
        // set in only, and every one names a tick now over.
        self.grid.renumber(r);
        self.index.renumber(r);
        self.views.renumber_entries(r);
        self.margins.renumber(r);
        for (_, slot) in &mut self.by_id {
            *slot = r.to(*slot);
        }
        for slot in &mut self.pending {
            *slot = r.to(*slot);
        }
        self.last_slot = r.to(self.last_slot);
        // Live entities now hold 0..count: forget the layers of the departed.
        self.common_layers = self.slots.shown[..self.count as usize]
            .iter()
            .fold(u32::MAX, |all, s| all & s.layers);
        self.observer_slots.clear_all();
        for &(_, slot) in &self.by_id {
            self.observer_slots.set(slot);
        }
        // Live entities hold 0..count; hand out the lowest free slot first.
        self.free_slots.clear();
        self.free_slots.extend((self.count..self.slots.len()).rev());
        self.top = self.count;
        self.top_id = self
            .count
            .checked_sub(1)
            .map(|last| self.slots.ids.id(last));

        // Views in their observers' order: `by_id` is sorted and clean.
        let entities = &self.slots.entities;
        let views = self
            .by_id
            .iter()
            .map(|&(_, slot)| entities[slot as usize].view);
        self.view_numbering.plan(views);
        let r = &mut self.view_numbering;
        self.views.renumber_views(r, self.observers);
        self.margins.renumber_views(r);
        r.permute(&mut self.cutoffs);
        for &(_, slot) in &self.by_id {
            let (e, w) = (
                &mut self.slots.entities[slot as usize],
                &mut self.slots.watchers[slot as usize],
            );
            e.view = r.to(e.view);
            *w = w.with_view(e.view);
        }
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
            assert!(plain.shuffled() * 8 <= plain.count);
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
