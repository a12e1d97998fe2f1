//! The JSON Lines stream of cell-addressed events, `lockgrid run --by-cell`.
//!
//! One object per line, keys in a fixed order, no spaces, cells as
//! `[x, y]`, positions and speeds as exact decimals. A tick's lines come in
//! the kernel's order, `(kind, entity, cell)` with `leave < enter <
//! update` (see [`lockgrid_kernel::CellEvents`]), then a closing line with
//! the world's digest and the number of cell events:
//!
//! ```text
//! {"tick":2,"type":"leave","entity":7,"cell":[0,0],"to":[1,0]}
//! {"tick":2,"type":"leave","entity":9,"cell":[3,3]}
//! {"tick":2,"type":"enter","entity":7,"cell":[1,0],"from":[0,0],"pos":[150,50],"dir":0,"speed":0,"layers":1}
//! {"tick":2,"type":"enter","entity":8,"cell":[0,2],"pos":[5.5,250],"dir":16384,"speed":1.5,"layers":2}
//! {"tick":2,"type":"update","entity":3,"cell":[4,1],"pos":[410.25,130],"dir":0,"speed":2}
//! {"tick":2,"type":"tick","digest":"00c0ffee00c0ffee","events":5}
//! ```
//!
//! `to` is left out when the entity was despawned, `from` when it was
//! spawned (a despawn and spawn of one id in a tick gives both lines
//! without them: a new incarnation). Rejected commands change no cell and
//! give no line; the per-observer stream of `lockgrid run` reports them.

use std::io::{self, Write};

use lockgrid_kernel::{Cell, CellEvent, CellEvents, Event, World};

use crate::decimal::ExactDecimal as D;
use crate::jsonl;
use crate::run::RunError;
use crate::scenario::Scenario;

/// `,"key":[x,y]`, or nothing when there is no cell.
struct OptCell(&'static str, Option<Cell>);

impl core::fmt::Display for OptCell {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.1 {
            Some((x, y)) => write!(f, ",\"{}\":[{x},{y}]", self.0),
            None => Ok(()),
        }
    }
}

/// Writes one cell event of tick `tick` as a line.
pub fn write_cell_event<W: Write + ?Sized>(
    out: &mut W,
    tick: u64,
    event: &CellEvent,
) -> io::Result<()> {
    match *event {
        CellEvent::Leave {
            entity,
            cell: (x, y),
            to,
        } => writeln!(
            out,
            "{{\"tick\":{tick},\"type\":\"leave\",\"entity\":{entity},\"cell\":[{x},{y}]{}}}",
            OptCell("to", to)
        ),
        CellEvent::Enter {
            entity,
            cell: (x, y),
            from,
            pos,
            dir,
            speed,
            layers,
        } => writeln!(
            out,
            "{{\"tick\":{tick},\"type\":\"enter\",\"entity\":{entity},\"cell\":[{x},{y}]{},\"pos\":[{},{}],\"dir\":{dir},\"speed\":{},\"layers\":{layers}}}",
            OptCell("from", from),
            D(pos.x),
            D(pos.y),
            D(speed)
        ),
        CellEvent::Update {
            entity,
            cell: (x, y),
            pos,
            dir,
            speed,
        } => writeln!(
            out,
            "{{\"tick\":{tick},\"type\":\"update\",\"entity\":{entity},\"cell\":[{x},{y}],\"pos\":[{},{}],\"dir\":{dir},\"speed\":{}}}",
            D(pos.x),
            D(pos.y),
            D(speed)
        ),
    }
}

/// Runs `scenario`, writing its cell-event stream to `out`; returns the
/// number of ticks run. Flushes `out` at the end.
pub fn run_by_cell<W: Write + ?Sized>(scenario: &Scenario, out: &mut W) -> Result<u64, RunError> {
    let mut world = World::new(scenario.config).map_err(RunError::Config)?;
    let mut tracker = CellEvents::new(&world);
    // The per-observer events are not printed; a sink that keeps them
    // would only grow.
    let mut sink = lockgrid_kernel::FnSink(|_: Event| {});
    let mut ticks = 0;
    for commands in &scenario.ticks {
        let report = tracker.step(&mut world, commands, &mut sink);
        for event in tracker.events() {
            write_cell_event(out, report.tick, event)?;
        }
        let count = tracker.events().len() as u64;
        jsonl::write_tick_line(out, report.tick, report.digest, count)?;
        ticks += 1;
    }
    out.flush()?;
    Ok(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::{Fix, Pos};

    fn line(e: CellEvent) -> String {
        let mut out = Vec::new();
        write_cell_event(&mut out, 2, &e).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn events_match_the_documented_lines() {
        let leave = CellEvent::Leave {
            entity: 7,
            cell: (0, 0),
            to: Some((1, 0)),
        };
        assert_eq!(
            line(leave),
            "{\"tick\":2,\"type\":\"leave\",\"entity\":7,\"cell\":[0,0],\"to\":[1,0]}\n"
        );
        let gone = CellEvent::Leave {
            entity: 9,
            cell: (3, 3),
            to: None,
        };
        assert_eq!(
            line(gone),
            "{\"tick\":2,\"type\":\"leave\",\"entity\":9,\"cell\":[3,3]}\n"
        );
        let enter = CellEvent::Enter {
            entity: 8,
            cell: (0, 2),
            from: None,
            pos: Pos::new(Fix::from_num(5.5), Fix::from_num(250)),
            dir: 16384,
            speed: Fix::from_num(1.5),
            layers: 2,
        };
        assert_eq!(
            line(enter),
            "{\"tick\":2,\"type\":\"enter\",\"entity\":8,\"cell\":[0,2],\"pos\":[5.5,250],\"dir\":16384,\"speed\":1.5,\"layers\":2}\n"
        );
        let crossed = CellEvent::Enter {
            entity: 7,
            cell: (1, 0),
            from: Some((0, 0)),
            pos: Pos::from_ints(150, 50),
            dir: 0,
            speed: Fix::ZERO,
            layers: 1,
        };
        assert_eq!(
            line(crossed),
            "{\"tick\":2,\"type\":\"enter\",\"entity\":7,\"cell\":[1,0],\"from\":[0,0],\"pos\":[150,50],\"dir\":0,\"speed\":0,\"layers\":1}\n"
        );
        let update = CellEvent::Update {
            entity: 3,
            cell: (4, 1),
            pos: Pos::new(Fix::from_num(410.25), Fix::from_num(130)),
            dir: 0,
            speed: Fix::from_num(2),
        };
        assert_eq!(
            line(update),
            "{\"tick\":2,\"type\":\"update\",\"entity\":3,\"cell\":[4,1],\"pos\":[410.25,130],\"dir\":0,\"speed\":2}\n"
        );
    }

    #[test]
    fn a_scenario_runs_to_cell_lines() {
        let scenario = Scenario::from_json_str(
            r#"{"ticks": [
                {"commands": [{"spawn": {"id": 7, "pos": [50, 50]}}]},
                {"commands": [{"move": {"id": 7, "pos": [150, 50]}}, {"move": {"id": 8, "pos": [0, 0]}}]},
                {"commands": [{"despawn": {"id": 7}}]}
            ]}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        assert_eq!(run_by_cell(&scenario, &mut out).unwrap(), 3);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let kinds: Vec<String> = lines
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!("{} {} {}", v["tick"], v["type"], v["cell"])
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "1 \"enter\" [0,0]",
                "1 \"tick\" null",
                "2 \"leave\" [0,0]",
                "2 \"enter\" [1,0]",
                "2 \"tick\" null",
                "3 \"leave\" [1,0]",
                "3 \"tick\" null",
            ]
        );
        assert!(lines[4].ends_with("\"events\":2}"));
    }
}
