//! A frame as SVG text. The text is deterministic: integers and exact
//! decimals only (world coordinates are written as the exact value of
//! their fixed-point bits), elements in ascending id order, no clock, no
//! floating point. World `y` grows downward, as on most game maps.

use core::fmt::Write;

use lockgrid_kernel::{Config, EntityState, Visibility};

use super::{Frame, Sight};

/// Width of the picture in pixels: the map, then the side panel.
pub const WIDTH: u32 = MAP + PANEL;
/// Height of the picture in pixels.
pub const HEIGHT: u32 = MAP;
const MAP: u32 = 900;
const PANEL: u32 = 400;
/// Ids per line and lines per list in the side panel.
const IDS_PER_LINE: usize = 8;
const LIST_LINES: usize = 5;
const REJECTIONS_SHOWN: usize = 16;

const NPC: &str = "#6b7280";
const OBSERVER: &str = "#2563eb";
const CHOSEN: &str = "#1e3a8a";
const AREA: &str = "#3b82f6";
const IN_VIEW: &str = "#f59e0b";
const ENTERED: &str = "#16a34a";
const LEFT: &str = "#dc2626";

/// Draws `frame`: the grid and its cells, every entity with its heading,
/// and, with a `sight`, its observer's area (nine cells or radius and
/// hysteresis ring), its view, and the tick's Enters and Leaves for it.
/// A side panel lists the tick, digest, view and rejected commands.
pub fn to_svg(config: &Config, frame: &Frame, sight: Option<&Sight>) -> String {
    let mut s = String::with_capacity(4096 + 400 * frame.entities.len());
    // Writing to a String cannot fail.
    let _ = draw(&mut s, config, frame, sight);
    s
}

/// Exact decimal text of a fixed-point value given by its raw bits (2^-16 units).
fn dec(bits: i128) -> String {
    let mag = bits.unsigned_abs();
    let sign = if bits < 0 { "-" } else { "" };
    let int = mag >> 16;
    let frac = mag & 0xFFFF;
    if frac == 0 {
        return format!("{sign}{int}");
    }
    // 2^-16 = 152587890625 × 10^-16.
    let mut scaled = frac * 152_587_890_625;
    let mut digits = 16;
    while scaled.is_multiple_of(10) {
        scaled /= 10;
        digits -= 1;
    }
    format!("{sign}{int}.{scaled:0digits$}")
}

/// The part of the world shown: whole cells `x0..=x1`, `y0..=y1`.
struct Viewport {
    x0: i128,
    y0: i128,
    x1: i128,
    y1: i128,
}

/// The cells worth showing: around every entity and the observer's area,
/// one cell of margin, within the world; the whole world when empty.
fn viewport(config: &Config, frame: &Frame, sight: Option<&Sight>) -> Viewport {
    let (w, h) = (
        i128::from(config.width_cells),
        i128::from(config.height_cells),
    );
    let cs = i128::from(config.cell_size.to_bits());
    let (ox, oy) = (
        i128::from(config.origin.x.to_bits()),
        i128::from(config.origin.y.to_bits()),
    );
    let cell = |p: i128, o: i128, n: i128| (p - o).div_euclid(cs).clamp(0, n - 1);
    let mut span: Option<Viewport> = None;
    let mut add = |x: i128, y: i128, reach: i128| {
        let (a, b) = (cell(x - reach, ox, w), cell(x + reach, ox, w));
        let (c, d) = (cell(y - reach, oy, h), cell(y + reach, oy, h));
        span = Some(match span.take() {
            None => Viewport {
                x0: a,
                y0: c,
                x1: b,
                y1: d,
            },
            Some(v) => Viewport {
                x0: v.x0.min(a),
                y0: v.y0.min(c),
                x1: v.x1.max(b),
                y1: v.y1.max(d),
            },
        });
    };
    for e in &frame.entities {
        add(
            i128::from(e.pos.x.to_bits()),
            i128::from(e.pos.y.to_bits()),
            cs,
        );
    }
    if let Some(o) = sight.and_then(|s| frame.entity(s.observer)) {
        let reach = match config.visibility {
            Visibility::Grid => 2 * cs,
            Visibility::Radius => {
                i128::from(o.radius.to_bits()) + i128::from(config.hysteresis.to_bits()) + cs
            }
        };
        add(
            i128::from(o.pos.x.to_bits()),
            i128::from(o.pos.y.to_bits()),
            reach,
        );
    }
    span.unwrap_or(Viewport {
        x0: 0,
        y0: 0,
        x1: w - 1,
        y1: h - 1,
    })
}

fn draw(
    s: &mut String,
    config: &Config,
    frame: &Frame,
    sight: Option<&Sight>,
) -> core::fmt::Result {
    let cs = i128::from(config.cell_size.to_bits());
    let (ox, oy) = (
        i128::from(config.origin.x.to_bits()),
        i128::from(config.origin.y.to_bits()),
    );
    let v = viewport(config, frame, sight);
    let (vx, vy) = (ox + v.x0 * cs, oy + v.y0 * cs);
    let (vw, vh) = ((v.x1 - v.x0 + 1) * cs, (v.y1 - v.y0 + 1) * cs);
    // Marker size: an eighth of a cell, but never lost in a wide view.
    let u = (cs / 8).max(vw.max(vh) / 250).max(1);
    writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans Mono, monospace">"#
    )?;
    writeln!(
        s,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    )?;
    writeln!(
        s,
        r#"<svg x="10" y="10" width="{m}" height="{m}" viewBox="{} {} {} {}">"#,
        dec(vx),
        dec(vy),
        dec(vw),
        dec(vh),
        m = MAP - 20
    )?;
    // Cells: one pattern tile per cell, so the text stays small for any world.
    writeln!(
        s,
        r##"<defs><pattern id="cell" x="{}" y="{}" width="{c}" height="{c}" patternUnits="userSpaceOnUse"><path d="M {c} 0 L 0 0 L 0 {c}" fill="none" stroke="#cbd5e1" stroke-width="{}"/></pattern></defs>"##,
        dec(ox),
        dec(oy),
        dec(u / 5),
        c = dec(cs),
    )?;
    writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f1f5f9"/>"##,
        dec(vx),
        dec(vy),
        dec(vw),
        dec(vh)
    )?;
    let (ww, wh) = (
        i128::from(config.width_cells) * cs,
        i128::from(config.height_cells) * cs,
    );
    writeln!(
        s,
        r##"<rect id="world" x="{}" y="{}" width="{}" height="{}" fill="#ffffff"/>"##,
        dec(ox),
        dec(oy),
        dec(ww),
        dec(wh)
    )?;
    writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="url(#cell)" stroke="#64748b" stroke-width="{}"/>"##,
        dec(ox),
        dec(oy),
        dec(ww),
        dec(wh),
        dec(u / 3)
    )?;
    let chosen = sight.and_then(|si| frame.entity(si.observer).map(|e| (si, e)));
    if let Some((_, o)) = chosen {
        area(s, config, o, u)?;
    }
    for e in &frame.entities {
        entity(s, e, sight, u)?;
    }
    writeln!(s, "</svg>")?;
    panel(s, config, frame, sight)?;
    writeln!(s, "</svg>")
}

/// The chosen observer's nine cells (grid) or radius and hysteresis ring.
fn area(s: &mut String, config: &Config, o: &EntityState, u: i128) -> core::fmt::Result {
    let (x, y) = (i128::from(o.pos.x.to_bits()), i128::from(o.pos.y.to_bits()));
    match config.visibility {
        Visibility::Grid => {
            let Some((cx, cy)) = config.cell_of(o.pos) else {
                return Ok(());
            };
            let cs = i128::from(config.cell_size.to_bits());
            let (x0, y0) = (
                i128::from(cx.saturating_sub(1)),
                i128::from(cy.saturating_sub(1)),
            );
            let x1 = i128::from(cx.saturating_add(1).min(config.width_cells - 1));
            let y1 = i128::from(cy.saturating_add(1).min(config.height_cells - 1));
            writeln!(
                s,
                r#"<rect id="area" x="{}" y="{}" width="{}" height="{}" fill="{AREA}" fill-opacity="0.12" stroke="{AREA}" stroke-width="{}"/>"#,
                dec(i128::from(config.origin.x.to_bits()) + x0 * cs),
                dec(i128::from(config.origin.y.to_bits()) + y0 * cs),
                dec((x1 - x0 + 1) * cs),
                dec((y1 - y0 + 1) * cs),
                dec(u / 3)
            )
        }
        Visibility::Radius => {
            writeln!(
                s,
                r#"<circle id="area" cx="{}" cy="{}" r="{}" fill="{AREA}" fill-opacity="0.12" stroke="{AREA}" stroke-width="{}"/>"#,
                dec(x),
                dec(y),
                dec(i128::from(o.radius.to_bits())),
                dec(u / 3)
            )?;
            if config.hysteresis.to_bits() > 0 {
                writeln!(
                    s,
                    r#"<circle id="hysteresis" cx="{}" cy="{}" r="{}" fill="none" stroke="{AREA}" stroke-width="{}" stroke-dasharray="{} {}"/>"#,
                    dec(x),
                    dec(y),
                    dec(i128::from(o.radius.to_bits()) + i128::from(config.hysteresis.to_bits())),
                    dec(u / 4),
                    dec(u),
                    dec(u / 2)
                )?;
            }
            Ok(())
        }
    }
}

/// One entity: a circle (NPC) or square (observer), its heading as a line,
/// its id, and rings for the chosen observer's view and this tick's changes.
fn entity(s: &mut String, e: &EntityState, sight: Option<&Sight>, u: i128) -> core::fmt::Result {
    let has = |list: &[u64]| list.binary_search(&e.id).is_ok();
    let chosen = sight.is_some_and(|si| si.observer == e.id);
    let in_view = sight.is_some_and(|si| has(&si.view));
    let entered = sight.is_some_and(|si| has(&si.entered));
    let left = sight.is_some_and(|si| has(&si.left));
    let kind = if chosen {
        "chosen"
    } else if e.observer {
        "observer"
    } else {
        "npc"
    };
    writeln!(
        s,
        r#"<g id="e{}" class="{kind}" transform="translate({} {})">"#,
        e.id,
        dec(i128::from(e.pos.x.to_bits())),
        dec(i128::from(e.pos.y.to_bits()))
    )?;
    if in_view {
        let color = if entered { ENTERED } else { IN_VIEW };
        writeln!(
            s,
            r#"<circle r="{}" fill="none" stroke="{color}" stroke-width="{}"/>"#,
            dec(u * 2),
            dec(u / 2)
        )?;
    }
    if left {
        writeln!(
            s,
            r#"<circle r="{}" fill="none" stroke="{LEFT}" stroke-width="{}" stroke-dasharray="{} {}"/>"#,
            dec(u * 2),
            dec(u / 2),
            dec(u / 2),
            dec(u / 3)
        )?;
    }
    // Heading: 65536 steps to the turn, so degrees are dir × 360 / 65536.
    writeln!(
        s,
        r##"<line x2="{}" stroke="#111827" stroke-width="{}" transform="rotate({})"/>"##,
        dec(u * 3),
        dec(u / 3),
        dec(i128::from(e.dir) * 360)
    )?;
    if e.observer {
        let half = if chosen { u * 3 / 2 } else { u };
        writeln!(
            s,
            r#"<rect x="{}" y="{}" width="{w}" height="{w}" fill="{}"/>"#,
            dec(-half),
            dec(-half),
            if chosen { CHOSEN } else { OBSERVER },
            w = dec(half * 2)
        )?;
    } else {
        writeln!(s, r#"<circle r="{}" fill="{NPC}"/>"#, dec(u))?;
    }
    writeln!(
        s,
        r##"<text x="{}" y="{}" font-size="{}" fill="#111827">{}</text>"##,
        dec(u * 2),
        dec(-u * 2),
        dec(u * 2),
        e.id
    )?;
    writeln!(s, "</g>")
}

/// The side panel: tick, digest, world, the observer's view and the tick's
/// changes for it, rejected commands, and a legend.
fn panel(
    s: &mut String,
    config: &Config,
    frame: &Frame,
    sight: Option<&Sight>,
) -> core::fmt::Result {
    let mut lines: Vec<(String, &str)> = Vec::new();
    let mut line = |text: String, color: &'static str| lines.push((text, color));
    line(format!("tick {}", frame.tick), "#111827");
    line(format!("digest {:016x}", frame.digest), "#111827");
    line(
        format!(
            "world {}x{} cells of {}, {}",
            config.width_cells,
            config.height_cells,
            dec(i128::from(config.cell_size.to_bits())),
            match config.visibility {
                Visibility::Grid => "grid",
                Visibility::Radius => "radius",
            }
        ),
        "#111827",
    );
    let observers = frame.entities.iter().filter(|e| e.observer).count();
    line(
        format!(
            "entities {}: observers {observers}, NPCs {}",
            frame.entities.len(),
            frame.entities.len() - observers
        ),
        "#111827",
    );
    line(String::new(), "#111827");
    match sight.and_then(|si| frame.entity(si.observer).map(|e| (si, e))) {
        Some((si, o)) => {
            let cell = config
                .cell_of(o.pos)
                .map_or_else(String::new, |(x, y)| format!(", cell {x},{y}"));
            line(
                format!(
                    "observer {} at {},{}{cell}",
                    o.id,
                    dec(i128::from(o.pos.x.to_bits())),
                    dec(i128::from(o.pos.y.to_bits()))
                ),
                CHOSEN,
            );
            for (name, ids, color) in [
                ("sees", &si.view, IN_VIEW),
                ("enter", &si.entered, ENTERED),
                ("leave", &si.left, LEFT),
                ("update", &si.updated, "#111827"),
            ] {
                line(format!("{name} {}", ids.len()), color);
                for (i, chunk) in ids.chunks(IDS_PER_LINE).enumerate() {
                    if i == LIST_LINES {
                        let rest = ids.len() - LIST_LINES * IDS_PER_LINE;
                        line(format!("  … {rest} more"), color);
                        break;
                    }
                    let text: Vec<String> = chunk.iter().map(u64::to_string).collect();
                    line(format!("  {}", text.join(" ")), color);
                }
            }
        }
        None => line("no observer".to_owned(), CHOSEN),
    }
    line(String::new(), "#111827");
    let rejected: Vec<_> = frame.rejections().collect();
    line(format!("rejected {}", rejected.len()), LEFT);
    for r in rejected.iter().take(REJECTIONS_SHOWN) {
        line(
            format!(
                "  {} {}: {}",
                r.command.as_str(),
                r.entity,
                r.reason.as_str()
            ),
            LEFT,
        );
    }
    if rejected.len() > REJECTIONS_SHOWN {
        line(
            format!("  … {} more", rejected.len() - REJECTIONS_SHOWN),
            LEFT,
        );
    }
    writeln!(s, r#"<g id="panel" font-size="14" xml:space="preserve">"#)?;
    let x = MAP + 10;
    let mut y = 28;
    for (text, color) in &lines {
        if !text.is_empty() {
            writeln!(s, r#"<text x="{x}" y="{y}" fill="{color}">{text}</text>"#)?;
        }
        y += 18;
    }
    legend(s, x, HEIGHT - 110)?;
    writeln!(s, "</g>")
}

fn legend(s: &mut String, x: u32, y: u32) -> core::fmt::Result {
    let items = [
        (r#"<circle cx="7" cy="-5" r="5" fill="{NPC}"/>"#, "NPC"),
        (
            r#"<rect x="2" y="-10" width="10" height="10" fill="{OBSERVER}"/>"#,
            "observer",
        ),
        (
            r#"<rect x="0" y="-12" width="14" height="14" fill="{CHOSEN}"/>"#,
            "chosen observer",
        ),
        (
            r#"<circle cx="7" cy="-5" r="6" fill="none" stroke="{IN_VIEW}" stroke-width="2"/>"#,
            "in its view",
        ),
        (
            r#"<circle cx="7" cy="-5" r="6" fill="none" stroke="{ENTERED}" stroke-width="2"/>"#,
            "entered this tick",
        ),
        (
            r#"<circle cx="7" cy="-5" r="6" fill="none" stroke="{LEFT}" stroke-width="2" stroke-dasharray="3 2"/>"#,
            "left this tick",
        ),
    ];
    for (i, (shape, label)) in items.iter().enumerate() {
        let shape = shape
            .replace("{NPC}", NPC)
            .replace("{OBSERVER}", OBSERVER)
            .replace("{CHOSEN}", CHOSEN)
            .replace("{IN_VIEW}", IN_VIEW)
            .replace("{ENTERED}", ENTERED)
            .replace("{LEFT}", LEFT);
        let (col, row) = ((i % 2) as u32, (i / 2) as u32);
        let (gx, gy) = (x + col * 190, y + row * 22);
        writeln!(
            s,
            r##"<g transform="translate({gx} {gy})">{shape}<text x="20" fill="#111827">{label}</text></g>"##
        )?;
    }
    writeln!(
        s,
        r##"<text x="{x}" y="{}" fill="#6b7280" font-size="12">heading: line from the centre; y grows downward</text>"##,
        y + 72
    )
}
