//! Pairing split into tasks by subject (see `fork.rs` and "Threads" in
//! `docs/kernel-internals.md`).
//!
//! Serially, pairing walks the touched subjects in order, and each one
//! records its pairs (`SubjectPairs`) and marks the observers it affects.
//! Split, the touched subjects are first walked as before for what writes
//! per subject (which are due, and the observers rebuilt for their own
//! move), listing the subjects to pair. That list is cut into one run per
//! task; each task pairs its run into its own share of the pairs' room and
//! lists the observers it marks for a rebuild, reading only what pairing
//! reads. The calling thread then takes each task's pairs in task order,
//! as if pushed one by one (marking each pair's observer affected), and
//! its rebuild marks: the pairs come out in the serial order, and the
//! marks are the same set. Should any task's share or list run out of
//! room, every task's work is dropped and the whole list is paired
//! serially, so a full room means what it means serially.

use alloc::vec::Vec;

use super::incremental::{push_within, PairMarks, PairOut, PairScene};
use super::ViewChange;
use crate::coverage::Path;
#[cfg(any(debug_assertions, feature = "path-coverage"))]
use crate::coverage::PathCounts;
use crate::fork::{self, Fork, MAX_WIDTH};
use crate::slot_bits::SlotBits;
use crate::slot_table::Entity;
use crate::subject_pairs::{PairKind, SubjectPairs};

/// Subjects fewer than this per task are paired serially: the join would
/// cost more than it saves. A subject takes about 0.6 µs at uniform-10k
/// grid (a task's 450 in 0.29 ms, bench `--joins`), so 128 take about
/// twice a join's wake-up on the 2-core machine.
const MIN_RUN: usize = 128;

/// The high bit of a rebuild mark: the observer's view is full.
const CROWD: u32 = 1 << 31;

/// The split's buffers, made by `World::reserve_width`; empty (never
/// splitting) for one task.
#[derive(Default)]
pub(crate) struct PairSplit {
    /// The subjects to pair this tick, with their change.
    subjects: Vec<(u32, ViewChange)>,
    tasks: Vec<PairTask>,
}

/// One task's room besides its share of the pairs.
struct PairTask {
    /// Observers marked for a rebuild, each once, with [`CROWD`] where
    /// their view is full; and which are listed.
    rebuilds: Vec<u32>,
    rebuilt: SlotBits,
    /// Room for the observers around one subject.
    around: Vec<u32>,
    /// Pairs recorded at the start of the task's share.
    len: usize,
    /// Whether the share or `rebuilds` ran out of room.
    overflowed: bool,
    #[cfg(any(debug_assertions, feature = "path-coverage"))]
    paths: PathCounts,
}

impl PairSplit {
    /// Buffers for up to `width` tasks in a world of `slots` slots and
    /// `max_observers` observers.
    pub(crate) fn new(width: usize, slots: u32, max_observers: u32) -> Self {
        // Room for every observer once: a task lists each at most once.
        let width = width.min(MAX_WIDTH);
        if width < 2 {
            return PairSplit::default();
        }
        let observers = max_observers as usize;
        let task = || PairTask {
            rebuilds: Vec::with_capacity(observers),
            rebuilt: SlotBits::new(slots),
            around: Vec::with_capacity(observers),
            len: 0,
            overflowed: false,
            #[cfg(any(debug_assertions, feature = "path-coverage"))]
            paths: PathCounts::default(),
        };
        PairSplit {
            subjects: Vec::with_capacity(slots as usize),
            tasks: (0..width).map(|_| task()).collect(),
        }
    }

    /// This split, its list emptied, where pairing may be split: `mark`
    /// (subjects are paired at all), `fork` lends two threads or more, and
    /// `touched` subjects could fill a run per task.
    pub(super) fn begin<F: Fork + ?Sized>(
        &mut self,
        fork: &F,
        mark: bool,
        touched: usize,
    ) -> Option<&mut PairSplit> {
        let width = fork::width_of(fork, self.tasks.len());
        if !mark || width < 2 || touched < width * MIN_RUN {
            return None;
        }
        self.subjects.clear();
        Some(self)
    }

    /// Lists the subject at `slot` to pair, with its `change`.
    pub(super) fn list(&mut self, slot: u32, change: ViewChange) {
        // Room for every slot: each is touched at most once a tick.
        let _ = push_within(&mut self.subjects, (slot, change));
    }

    /// Pairs the listed subjects, split into `fork`'s tasks where there
    /// are enough, into `marks` (see the module docs).
    pub(super) fn pair<F: Fork + ?Sized>(
        &mut self,
        scene: &PairScene<'_>,
        marks: &mut PairMarks<'_>,
        (entities, prev_cells): (&[Entity], &[u32]),
        t: u64,
        fork: &F,
    ) {
        let n = self.subjects.len();
        let width = fork::width_of(fork, self.tasks.len()).min(n / MIN_RUN);
        let serially = |marks: &mut PairMarks<'_>, subjects: &[(u32, ViewChange)]| {
            for &subject in subjects {
                scene.pair_moved(marks, subject, (entities, prev_cells), t);
            }
        };
        if width < 2 {
            serially(marks, &self.subjects);
            return;
        }
        let started = {
            let mut jobs = heapless::Vec::<_, MAX_WIDTH>::new();
            let parts = marks.pairs.parts(width);
            let runs = self.subjects.chunks(n.div_ceil(width));
            for ((task, part), run) in self.tasks.iter_mut().zip(parts).zip(runs) {
                let job = move || {
                    for &r in &task.rebuilds {
                        task.rebuilt.clear(r & !CROWD);
                    }
                    task.rebuilds.clear();
                    let mut out = TaskPairs {
                        part,
                        task: &mut *task,
                    };
                    out.task.len = 0;
                    out.task.overflowed = false;
                    for &subject in run {
                        scene.pair_moved(&mut out, subject, (entities, prev_cells), t);
                        if out.task.overflowed {
                            break;
                        }
                    }
                };
                if jobs.push(job).is_err() {
                    break;
                }
            }
            fork::join_all(fork, &mut jobs);
            jobs.len()
        };
        let overflowed = started < width || self.tasks[..width].iter().any(|task| task.overflowed);
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        for task in &mut self.tasks[..width] {
            if !overflowed {
                marks.paths.add(&task.paths);
            }
            task.paths = PathCounts::default();
        }
        if overflowed {
            serially(marks, &self.subjects);
            return;
        }
        marks.hit(Path::PairingSplit);
        for (w, task) in self.tasks[..width].iter().enumerate() {
            marks.take_part(w, width, task.len, t);
            for &r in &task.rebuilds {
                marks.rebuild(r & !CROWD, r & CROWD != 0, t);
            }
        }
    }
}

/// Where one task's pairing writes: its share of the pairs' room, and its
/// task's lists.
struct TaskPairs<'a> {
    part: &'a mut [(u32, u32)],
    task: &'a mut PairTask,
}

impl PairOut for TaskPairs<'_> {
    #[inline(always)]
    fn hit(&mut self, _path: Path) {
        #[cfg(any(debug_assertions, feature = "path-coverage"))]
        self.task.paths.hit(_path);
    }

    #[inline(always)]
    fn pair(&mut self, o: u32, subject: u32, kind: PairKind, _t: u64) {
        match self.part.get_mut(self.task.len) {
            Some(at) => {
                *at = (o, SubjectPairs::word(subject, kind));
                self.task.len += 1;
            }
            None => self.task.overflowed = true,
        }
    }

    #[inline(always)]
    fn rebuild(&mut self, o: u32, crowd: bool, _t: u64) {
        if self.task.rebuilt.get(o) {
            return;
        }
        self.task.rebuilt.set(o);
        let mark = o | if crowd { CROWD } else { 0 };
        self.task.overflowed |= !push_within(&mut self.task.rebuilds, mark);
    }

    #[inline(always)]
    fn around(&mut self) -> &mut Vec<u32> {
        &mut self.task.around
    }
}
