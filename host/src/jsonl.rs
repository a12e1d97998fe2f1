//! The JSON Lines event stream of `lockgrid run`, byte for byte.
//!
//! One object per line, keys in a fixed order, no spaces, positions and
//! speeds as exact decimals:
//!
//! ```text
//! {"tick":1,"type":"rejected","entity":7,"command":"move","reason":"unknown_entity"}
//! {"tick":1,"type":"leave","observer":1,"subject":2}
//! {"tick":1,"type":"enter","observer":1,"subject":2,"pos":[5,0],"dir":0,"speed":0,"layers":1}
//! {"tick":1,"type":"update","observer":1,"subject":3,"pos":[5.5,-0.25],"dir":16384,"speed":1.5}
//! {"tick":1,"type":"tick","digest":"00c0ffee00c0ffee","events":4}
//! ```
//!
//! The lines are the kernel's own ([`lockgrid_kernel::jsonl`]), written
//! straight into the output with `write!`: no per-event allocation. Give
//! the writers a buffered writer.

use std::io::{self, Write};

use lockgrid_kernel::jsonl::{EventLine, TickLine};
use lockgrid_kernel::{Event, TickReport};

/// Writes one event of tick `tick` as a line.
pub fn write_event<W: Write + ?Sized>(out: &mut W, tick: u64, event: &Event) -> io::Result<()> {
    writeln!(out, "{}", EventLine { tick, event })
}

/// Writes the line that closes a tick: its digest as 16 lowercase hex digits
/// and the number of event lines written for it.
pub fn write_tick_line<W: Write + ?Sized>(
    out: &mut W,
    tick: u64,
    digest: u64,
    events: u64,
) -> io::Result<()> {
    let line = TickLine {
        tick,
        digest,
        events,
    };
    writeln!(out, "{line}")
}

/// Writes a whole tick: its events in the order given (the kernel's
/// contract order), then the closing line from `report`.
pub fn write_tick<W: Write + ?Sized>(
    out: &mut W,
    report: &TickReport,
    events: &[Event],
) -> io::Result<()> {
    for event in events {
        write_event(out, report.tick, event)?;
    }
    write_tick_line(out, report.tick, report.digest, report.events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::{CommandKind, Fix, Pos, RejectReason};

    fn line(tick: u64, e: Event) -> String {
        let mut out = Vec::new();
        write_event(&mut out, tick, &e).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn events_match_the_documented_lines() {
        assert_eq!(
            line(
                1,
                Event::Enter {
                    observer: 1,
                    subject: 2,
                    pos: Pos::from_ints(5, 0),
                    dir: 0,
                    speed: Fix::ZERO,
                    layers: 1
                }
            ),
            "{\"tick\":1,\"type\":\"enter\",\"observer\":1,\"subject\":2,\"pos\":[5,0],\"dir\":0,\"speed\":0,\"layers\":1}\n"
        );
        assert_eq!(
            line(
                1,
                Event::Leave {
                    observer: 1,
                    subject: 2
                }
            ),
            "{\"tick\":1,\"type\":\"leave\",\"observer\":1,\"subject\":2}\n"
        );
        assert_eq!(
            line(
                12,
                Event::Update {
                    observer: 3,
                    subject: 18446744073709551615,
                    pos: Pos::new(Fix::from_bits(-(1 << 15)), Fix::from_bits(1)),
                    dir: 65535,
                    speed: Fix::from_bits(3 << 15),
                }
            ),
            "{\"tick\":12,\"type\":\"update\",\"observer\":3,\"subject\":18446744073709551615,\"pos\":[-0.5,0.0000152587890625],\"dir\":65535,\"speed\":1.5}\n"
        );
        assert_eq!(
            line(
                1,
                Event::Rejected {
                    entity: 7,
                    command: CommandKind::Move,
                    reason: RejectReason::UnknownEntity
                }
            ),
            "{\"tick\":1,\"type\":\"rejected\",\"entity\":7,\"command\":\"move\",\"reason\":\"unknown_entity\"}\n"
        );
    }

    #[test]
    fn tick_line_has_sixteen_hex_digits() {
        let mut out = Vec::new();
        let report = TickReport {
            tick: 4,
            digest: 0xc0ffee,
            events: 1,
        };
        write_tick(
            &mut out,
            &report,
            &[Event::Leave {
                observer: 1,
                subject: 2,
            }],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"tick\":4,\"type\":\"leave\",\"observer\":1,\"subject\":2}\n\
             {\"tick\":4,\"type\":\"tick\",\"digest\":\"0000000000c0ffee\",\"events\":1}\n"
        );
    }
}
