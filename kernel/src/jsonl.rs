//! A tick's events in the documented JSON Lines format, written with
//! `core::fmt` into any [`fmt::Write`] (a `String`, a fixed buffer): no
//! allocation, no I/O. `lockgrid run` prints exactly these bytes, and a
//! snapshot test of a scenario needs nothing beyond the kernel.
//!
//! One object per line, keys in a fixed order, no spaces, positions and
//! speeds as exact decimals ([`ExactDecimal`]):
//!
//! ```text
//! {"tick":1,"type":"rejected","entity":7,"command":"move","reason":"unknown_entity"}
//! {"tick":1,"type":"leave","observer":1,"subject":2}
//! {"tick":1,"type":"enter","observer":1,"subject":2,"pos":[5,0],"dir":0,"speed":0,"layers":1}
//! {"tick":1,"type":"update","observer":1,"subject":3,"pos":[5.5,-0.25],"dir":16384,"speed":1.5}
//! {"tick":1,"type":"tick","digest":"00c0ffee00c0ffee","events":4}
//! ```
//!
//! # Snapshot-testing a scenario
//!
//! With `insta` as a dev-dependency, a test runs the scenario's ticks and
//! checks their lines in, to be reviewed like code:
//!
//! ```
//! use lockgrid_kernel::{jsonl, Command, Config, Fix, Move, Pos, Spawn, World};
//!
//! let mut world = World::new(Config::default()).unwrap();
//! let ticks = [
//!     vec![
//!         Command::Spawn(Spawn::observer(1, Pos::from_ints(50, 50), Fix::from_num(100))),
//!         Command::Spawn(Spawn::npc(2, Pos::from_ints(150, 50))),
//!     ],
//!     vec![Command::Move(Move { id: 2, pos: Pos::from_ints(150, 62), dir: 0, speed: Fix::from_num(0.5) })],
//!     vec![Command::Despawn { id: 2 }, Command::Despawn { id: 9 }],
//! ];
//! let (mut text, mut events) = (String::new(), Vec::new());
//! for commands in &ticks {
//!     events.clear();
//!     let report = world.step(commands, &mut events);
//!     jsonl::write_tick(&mut text, &report, &events).unwrap();
//! }
//! insta::assert_snapshot!(text, @r#"
//! {"tick":1,"type":"enter","observer":1,"subject":2,"pos":[150,50],"dir":0,"speed":0,"layers":1}
//! {"tick":1,"type":"tick","digest":"212987b33009710b","events":1}
//! {"tick":2,"type":"update","observer":1,"subject":2,"pos":[150,62],"dir":0,"speed":0.5}
//! {"tick":2,"type":"tick","digest":"d476039b12485c6f","events":1}
//! {"tick":3,"type":"rejected","entity":9,"command":"despawn","reason":"unknown_entity"}
//! {"tick":3,"type":"leave","observer":1,"subject":2}
//! {"tick":3,"type":"tick","digest":"ca5c6dd196460e2b","events":2}
//! "#);
//! ```

use core::fmt;

use crate::event::Event;
use crate::fixed_point::Fix;
use crate::world::TickReport;

/// Displays an `I48F16` as its exact decimal value: `5`, `-0.5`,
/// `0.0000152587890625` (every such value has at most 16 decimals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactDecimal(pub Fix);

impl fmt::Display for ExactDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.0.to_bits();
        let mag = bits.unsigned_abs();
        if bits < 0 {
            f.write_str("-")?;
        }
        write!(f, "{}", mag >> 16)?;
        let frac = mag & 0xFFFF;
        if frac == 0 {
            return Ok(());
        }
        // 2^-16 = 152587890625 × 10^-16: the fraction in units of 10^-16.
        let mut scaled = frac * 152_587_890_625;
        let mut digits = 16;
        while scaled.is_multiple_of(10) {
            scaled /= 10;
            digits -= 1;
        }
        write!(f, ".{scaled:0digits$}")
    }
}

/// One event of tick `tick` as its line, without the line break.
#[derive(Clone, Copy, Debug)]
pub struct EventLine<'a> {
    /// The tick the event belongs to.
    pub tick: u64,
    /// The event.
    pub event: &'a Event,
}

impl fmt::Display for EventLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tick = self.tick;
        match *self.event {
            Event::Rejected {
                entity,
                command,
                reason,
            } => write!(
                f,
                "{{\"tick\":{tick},\"type\":\"rejected\",\"entity\":{entity},\"command\":\"{}\",\"reason\":\"{}\"}}",
                command.as_str(),
                reason.as_str()
            ),
            Event::Leave { observer, subject } => write!(
                f,
                "{{\"tick\":{tick},\"type\":\"leave\",\"observer\":{observer},\"subject\":{subject}}}"
            ),
            Event::Enter {
                observer,
                subject,
                pos,
                dir,
                speed,
                layers,
            } => write!(
                f,
                "{{\"tick\":{tick},\"type\":\"enter\",\"observer\":{observer},\"subject\":{subject},\"pos\":[{},{}],\"dir\":{dir},\"speed\":{},\"layers\":{layers}}}",
                ExactDecimal(pos.x),
                ExactDecimal(pos.y),
                ExactDecimal(speed)
            ),
            Event::Update {
                observer,
                subject,
                pos,
                dir,
                speed,
            } => write!(
                f,
                "{{\"tick\":{tick},\"type\":\"update\",\"observer\":{observer},\"subject\":{subject},\"pos\":[{},{}],\"dir\":{dir},\"speed\":{}}}",
                ExactDecimal(pos.x),
                ExactDecimal(pos.y),
                ExactDecimal(speed)
            ),
        }
    }
}

/// The line that closes a tick, without the line break: its digest as 16
/// lowercase hex digits and the number of event lines written for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickLine {
    /// The tick.
    pub tick: u64,
    /// Its digest.
    pub digest: u64,
    /// How many events it had.
    pub events: u64,
}

impl fmt::Display for TickLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let TickLine {
            tick,
            digest,
            events,
        } = *self;
        write!(
            f,
            "{{\"tick\":{tick},\"type\":\"tick\",\"digest\":\"{digest:016x}\",\"events\":{events}}}"
        )
    }
}

impl From<&TickReport> for TickLine {
    fn from(r: &TickReport) -> TickLine {
        TickLine {
            tick: r.tick,
            digest: r.digest,
            events: r.events,
        }
    }
}

/// Writes a whole tick: each of its events (in the order given: the
/// kernel's contract order) as a line, then the closing line from
/// `report`, each ended by `\n`.
pub fn write_tick<W: fmt::Write + ?Sized>(
    out: &mut W,
    report: &TickReport,
    events: &[Event],
) -> fmt::Result {
    for event in events {
        let tick = report.tick;
        writeln!(out, "{}", EventLine { tick, event })?;
    }
    writeln!(out, "{}", TickLine::from(report))
}
