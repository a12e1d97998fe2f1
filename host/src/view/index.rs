//! Indexing a source in the background while the page polls its progress.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use crate::render::{journal_scenario, Timeline};
use crate::replay::{self, TickRange};
use crate::scenario::Scenario;

/// What `lockgrid view` shows.
#[derive(Clone, Debug)]
pub enum Source {
    /// A data folder: its journal is verified and replayed by the replay code.
    DataDir(PathBuf),
    /// A scenario, already parsed.
    Scenario(Box<Scenario>),
}

/// How far indexing got, as `/api/progress` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// What is being done now, in words.
    pub phase: &'static str,
    /// Work done, in `unit`s.
    pub done: u64,
    /// Work to do, in `unit`s (0 while unknown).
    pub total: u64,
    /// `"bytes"` (of the journal) or `"ticks"`.
    pub unit: &'static str,
    /// Which of the `steps` this is (1-based).
    pub step: u32,
    /// How many steps indexing takes.
    pub steps: u32,
}

/// A source being indexed, then indexed.
pub struct Index {
    progress: Mutex<Progress>,
    result: OnceLock<Result<Timeline, String>>,
}

impl Index {
    /// Starts indexing `source` on a thread of its own.
    pub fn start(source: Source) -> Arc<Index> {
        let steps = match source {
            Source::DataDir(_) => 3,
            Source::Scenario(_) => 1,
        };
        let index = Arc::new(Index {
            progress: Mutex::new(Progress {
                phase: "starting",
                done: 0,
                total: 0,
                unit: "ticks",
                step: 1,
                steps,
            }),
            result: OnceLock::new(),
        });
        let worker = Arc::clone(&index);
        std::thread::spawn(move || {
            let result = worker.build(source);
            // Only this thread sets the result.
            let _ = worker.result.set(result);
        });
        index
    }

    /// Indexing progress; meaningful until [`Index::result`] is `Some`.
    pub fn progress(&self) -> Progress {
        self.progress
            .lock()
            .map(|p| p.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The timeline, or why it could not be made; `None` while indexing.
    pub fn result(&self) -> Option<&Result<Timeline, String>> {
        self.result.get()
    }

    fn set(&self, phase: &'static str, unit: &'static str, step: u32, done: u64, total: u64) {
        if let Ok(mut p) = self.progress.lock() {
            *p = Progress {
                phase,
                done,
                total,
                unit,
                step,
                steps: p.steps,
            };
        }
    }

    fn build(&self, source: Source) -> Result<Timeline, String> {
        let (scenario, step) = match source {
            Source::Scenario(s) => (*s, 1),
            Source::DataDir(dir) => {
                // Every digest checked against the journal first, so the
                // timeline's digests are the recorded ones.
                let phase = "verifying the journal's digests";
                self.set(phase, "bytes", 1, 0, 0);
                let verified = replay::verify(&dir, TickRange::default(), |done, total| {
                    self.set(phase, "bytes", 1, done, total)
                })
                .map_err(|e| format!("{}: {e}", dir.display()))?;
                if let Some(desync) = verified.desync {
                    return Err(format!(
                        "{}: the replay diverges from the journal at tick {} (see lockgrid replay --verify)",
                        dir.display(),
                        desync.tick
                    ));
                }
                self.set("reading the journal's commands", "ticks", 2, 0, 0);
                let scenario =
                    journal_scenario(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                (scenario, 3)
            }
        };
        let total = scenario.ticks.len() as u64;
        self.set("running the ticks", "ticks", step, 0, total);
        Timeline::index(scenario, |done, total| {
            self.set("running the ticks", "ticks", step, done, total)
        })
        .map_err(|e| format!("config: {e}"))
    }
}
