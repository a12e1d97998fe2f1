//! lockgrid-kernel: a deterministic lockstep area-of-interest kernel.
#![no_std]
#![forbid(unsafe_code)]
#![deny(clippy::float_arithmetic)]

extern crate alloc;

mod command;
mod config;
mod event;
mod fixed_point;
mod world;

pub use command::{Command, CommandKind, EntityId, Move, Spawn};
pub use config::{Config, ConfigError, Visibility, MAX_CELLS, MAX_LENGTH_RAW, MAX_RADIUS};
pub use event::{CountingSink, Event, EventKind, EventSink, FnSink, RejectReason};
pub use fixed_point::{angle_diff, len2_raw, Dir, Fix, Pos};
pub use world::{EntityState, TickReport, World};
