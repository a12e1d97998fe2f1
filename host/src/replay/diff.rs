//! Readable differences between two kernel states.

use core::fmt;

use lockgrid_kernel::{EntitySnapshot, EntityState, Pos, Sent, Snapshot};

use crate::decimal::ExactDecimal as D;

/// How one entity differs between a recorded and a replayed state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntityDiff {
    /// Alive only in the recorded state.
    OnlyRecorded(EntityState),
    /// Alive only in the replayed state.
    OnlyReplayed(EntityState),
    /// Alive in both, with these fields differing.
    Changed {
        /// The entity.
        id: u64,
        /// `(field, recorded, replayed)`, each value already formatted.
        fields: Vec<(&'static str, String, String)>,
    },
}

/// Compares two states entity by entity (both list entities by ascending id).
pub fn diff_snapshots(recorded: &Snapshot, replayed: &Snapshot) -> Vec<EntityDiff> {
    let mut out = Vec::new();
    let (mut a, mut b) = (
        recorded.entities.iter().peekable(),
        replayed.entities.iter().peekable(),
    );
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(x), None) => {
                out.push(EntityDiff::OnlyRecorded(x.state));
                a.next();
            }
            (None, Some(y)) => {
                out.push(EntityDiff::OnlyReplayed(y.state));
                b.next();
            }
            (Some(x), Some(y)) => match x.state.id.cmp(&y.state.id) {
                core::cmp::Ordering::Less => {
                    out.push(EntityDiff::OnlyRecorded(x.state));
                    a.next();
                }
                core::cmp::Ordering::Greater => {
                    out.push(EntityDiff::OnlyReplayed(y.state));
                    b.next();
                }
                core::cmp::Ordering::Equal => {
                    let fields = diff_entity(x, y);
                    if !fields.is_empty() {
                        out.push(EntityDiff::Changed {
                            id: x.state.id,
                            fields,
                        });
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
    out
}

/// Compares two optional states of one entity, for "before/after" listings.
pub fn diff_states(
    id: u64,
    recorded: Option<EntityState>,
    replayed: Option<EntityState>,
) -> Option<EntityDiff> {
    match (recorded, replayed) {
        (None, None) => None,
        (Some(r), None) => Some(EntityDiff::OnlyRecorded(r)),
        (None, Some(p)) => Some(EntityDiff::OnlyReplayed(p)),
        (Some(r), Some(p)) => {
            let fields = state_fields(&r, &p);
            (!fields.is_empty()).then_some(EntityDiff::Changed { id, fields })
        }
    }
}

fn state_fields(x: &EntityState, y: &EntityState) -> Vec<(&'static str, String, String)> {
    let mut f = Vec::new();
    let mut field = |name, a: String, b: String| {
        if a != b {
            f.push((name, a, b));
        }
    };
    field("pos", pos(x.pos), pos(y.pos));
    field("dir", x.dir.to_string(), y.dir.to_string());
    field("speed", D(x.speed).to_string(), D(y.speed).to_string());
    field("observer", x.observer.to_string(), y.observer.to_string());
    field("radius", D(x.radius).to_string(), D(y.radius).to_string());
    field(
        "layers",
        format!("{:#x}", x.layers),
        format!("{:#x}", y.layers),
    );
    field(
        "interest",
        format!("{:#x}", x.interest),
        format!("{:#x}", y.interest),
    );
    f
}

fn diff_entity(x: &EntitySnapshot, y: &EntitySnapshot) -> Vec<(&'static str, String, String)> {
    let mut f = state_fields(&x.state, &y.state);
    if x.sent != y.sent {
        f.push(("last sent", sent(x.sent), sent(y.sent)));
    }
    if x.view != y.view {
        let only_x: Vec<String> = x
            .view
            .iter()
            .filter(|s| !y.view.contains(s))
            .map(u64::to_string)
            .collect();
        let only_y: Vec<String> = y
            .view
            .iter()
            .filter(|s| !x.view.contains(s))
            .map(u64::to_string)
            .collect();
        f.push((
            "view",
            format!("{} seen, only here: [{}]", x.view.len(), only_x.join(", ")),
            format!("{} seen, only here: [{}]", y.view.len(), only_y.join(", ")),
        ));
    }
    f
}

fn pos(p: Pos) -> String {
    format!("[{}, {}]", D(p.x), D(p.y))
}

fn sent(s: Option<Sent>) -> String {
    match s {
        None => "never".to_owned(),
        Some(s) => format!(
            "tick {}: {} dir {} speed {}",
            s.tick,
            pos(s.motion.pos),
            s.motion.dir,
            D(s.motion.speed)
        ),
    }
}

fn state_line(s: &EntityState) -> String {
    format!(
        "{} at {} dir {} speed {} radius {} layers {:#x} interest {:#x}",
        if s.observer { "observer" } else { "npc" },
        pos(s.pos),
        s.dir,
        D(s.speed),
        D(s.radius),
        s.layers,
        s.interest
    )
}

impl fmt::Display for EntityDiff {
    /// Several indented lines: the entity, then one line per differing field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntityDiff::OnlyRecorded(s) => {
                write!(
                    f,
                    "  entity {}: only in the recorded state: {}",
                    s.id,
                    state_line(s)
                )
            }
            EntityDiff::OnlyReplayed(s) => {
                write!(
                    f,
                    "  entity {}: only in the replayed state: {}",
                    s.id,
                    state_line(s)
                )
            }
            EntityDiff::Changed { id, fields } => {
                write!(f, "  entity {id}:")?;
                for (name, a, b) in fields {
                    write!(
                        f,
                        "\n    {name:<10} recorded {a}\n    {:<10} replayed {b}",
                        ""
                    )?;
                }
                Ok(())
            }
        }
    }
}
