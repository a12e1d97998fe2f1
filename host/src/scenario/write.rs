//! Writes a [`Scenario`] as a JSON document, one command per line.

use std::io::{self, Write};

use lockgrid_kernel::{Command, Config, Pos, Spawn, Visibility};

use super::Scenario;
use crate::decimal::ExactDecimal as D;

/// Writes `scenario` as JSON that parses back to an equal [`Scenario`].
///
/// Every config key is written; command keys equal to their default are
/// left out, so exported scenarios stay readable.
pub fn write_json<W: Write>(scenario: &Scenario, out: &mut W) -> io::Result<()> {
    write!(out, "{{\"config\": ")?;
    write_config(&scenario.config, out)?;
    write!(out, ",\n \"ticks\": [")?;
    for (i, tick) in scenario.ticks.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        if tick.is_empty() {
            write!(out, "{sep}\n  {{\"commands\": []}}")?;
            continue;
        }
        write!(out, "{sep}\n  {{\"commands\": [")?;
        for (j, command) in tick.iter().enumerate() {
            let sep = if j == 0 { "" } else { "," };
            write!(out, "{sep}\n   ")?;
            write_command(command, Some(&scenario.config), out)?;
        }
        write!(out, "\n  ]}}")?;
    }
    writeln!(out, "\n ]}}")
}

fn pos(p: Pos) -> impl core::fmt::Display {
    struct P(Pos);
    impl core::fmt::Display for P {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "[{}, {}]", D(self.0.x), D(self.0.y))
        }
    }
    P(p)
}

fn write_config<W: Write>(c: &Config, out: &mut W) -> io::Result<()> {
    let visibility = match c.visibility {
        Visibility::Grid => "grid",
        Visibility::Radius => "radius",
    };
    write!(
        out,
        "{{\"origin\": {}, \"cell_size\": {}, \"width_cells\": {}, \"height_cells\": {}, \
         \"visibility\": \"{visibility}\", \"hysteresis\": {}, \"update_interval\": {}, \
         \"move_epsilon\": {}, \"dir_epsilon\": {}, \"max_entities\": {}, \
         \"max_observers\": {}, \"max_view\": {}",
        pos(c.origin),
        D(c.cell_size),
        c.width_cells,
        c.height_cells,
        D(c.hysteresis),
        c.update_interval,
        D(c.move_epsilon),
        c.dir_epsilon,
        c.max_entities,
        c.max_observers,
        c.max_view,
    )?;
    if let Some(n) = c.max_visible {
        write!(out, ", \"max_visible\": {n}")?;
    }
    out.write_all(b"}")
}

/// Writes one command as a scenario object; `config` decides which spawn
/// radius is the default (without one, the radius is always written).
pub(crate) fn write_command<W: Write>(
    command: &Command,
    config: Option<&Config>,
    out: &mut W,
) -> io::Result<()> {
    match command {
        Command::Spawn(s) => {
            let d = Spawn::npc(s.id, s.pos);
            write!(
                out,
                "{{\"spawn\": {{\"id\": {}, \"pos\": {}",
                s.id,
                pos(s.pos)
            )?;
            if s.dir != d.dir {
                write!(out, ", \"dir\": {}", s.dir)?;
            }
            if s.speed != d.speed {
                write!(out, ", \"speed\": {}", D(s.speed))?;
            }
            if s.observer {
                write!(out, ", \"observer\": true")?;
            }
            if config.is_none_or(|c| s.radius != c.cell_size) {
                write!(out, ", \"radius\": {}", D(s.radius))?;
            }
            if s.layers != d.layers {
                write!(out, ", \"layers\": {}", s.layers)?;
            }
            if s.interest != d.interest {
                write!(out, ", \"interest\": {}", s.interest)?;
            }
            write!(out, "}}}}")
        }
        Command::Move(m) => {
            write!(
                out,
                "{{\"move\": {{\"id\": {}, \"pos\": {}",
                m.id,
                pos(m.pos)
            )?;
            if m.dir != 0 {
                write!(out, ", \"dir\": {}", m.dir)?;
            }
            if m.speed != lockgrid_kernel::Fix::ZERO {
                write!(out, ", \"speed\": {}", D(m.speed))?;
            }
            write!(out, "}}}}")
        }
        Command::Despawn { id } => write!(out, "{{\"despawn\": {{\"id\": {id}}}}}"),
    }
}
