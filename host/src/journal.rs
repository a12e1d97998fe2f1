//! The append-only journal: every tick's kernel input and resulting digest.
//!
//! One file, a versioned header holding the world config, then one
//! length-prefixed, CRC-checked record per tick, ticks 1, 2, 3, … without
//! gaps. The byte layout and the durability policy are specified in
//! `docs/journal.md`. Replaying the records through a fresh
//! [`World`](lockgrid_kernel::World) must reproduce every journaled digest.
//!
//! ```no_run
//! use lockgrid_host::journal::{Journal, SyncPolicy};
//! use lockgrid_kernel::{Config, World};
//!
//! let config = Config::default();
//! let mut world = World::new(config)?;
//! let mut journal = Journal::create("journal.lgj".as_ref(), &config, SyncPolicy::EveryTick)?;
//! let mut events = Vec::new();
//! let commands = []; // this tick's commands, in the order applied
//! let report = world.step(&commands, &mut events);
//! journal.append(report.tick, &commands, report.digest)?;
//! journal.sync()?; // durable from here on: now send `events` to clients
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub(crate) mod format;
mod reader;
mod syncer;
mod tail;
mod writer;

pub use error::{JournalError, RecordFault, TornTail};
pub use format::{Record, HEADER_LEN, MAGIC, MAX_PAYLOAD, VERSION};
pub use reader::{JournalReader, MAX_TAIL};
pub(crate) use writer::sync_parent;
pub use writer::{Journal, OpenReport, SyncPolicy};

#[cfg(test)]
mod tests;
