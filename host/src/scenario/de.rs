//! The serde side of scenario parsing: document shapes with defaults, and
//! numbers read from their decimal text.

use core::fmt;
use core::marker::PhantomData;

use lockgrid_kernel::{Command, Config, Dir, Fix, Move, Pos, Spawn, Visibility};
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use super::{Scenario, ScenarioError};
use crate::decimal::{self, DecimalError};

pub(super) fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    refuse_top_level_array(text)?;
    let mut json = serde_json::Deserializer::from_str(text);
    let doc: DocDe = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let path = e.path().to_string();
        json_error(&path, e.into_inner())
    })?;
    // Trailing characters after the document are an error too.
    json.end().map_err(|e| json_error("", e))?;
    Ok(doc.into_scenario())
}

/// serde reads a struct from an array too, which would make `[]` fail with
/// "invalid length"; a scenario is an object, and the error says so.
fn refuse_top_level_array(text: &str) -> Result<(), ScenarioError> {
    let Some(at) = text.find(|c: char| !matches!(c, ' ' | '\t' | '\n' | '\r')) else {
        return Ok(());
    };
    if !text[at..].starts_with('[') {
        return Ok(());
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    Err(ScenarioError::Json {
        path: String::new(),
        message: "expected a scenario object {\"config\": {...}, \"ticks\": [...]}, found an array"
            .to_owned(),
        line,
        column,
    })
}

fn json_error(path: &str, inner: serde_json::Error) -> ScenarioError {
    let path = if path == "." { "" } else { path };
    let (line, column) = (inner.line(), inner.column());
    let mut message = inner.to_string();
    // serde_json appends the position; it is reported separately.
    let suffix = format!(" at line {line} column {column}");
    if message.ends_with(&suffix) {
        message.truncate(message.len() - suffix.len());
    }
    ScenarioError::Json {
        path: one_line(path),
        message: one_line(&message),
        line,
        column,
    }
}

/// Escapes control characters (a key may hold a newline) so an error stays one line.
fn one_line(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a scenario object {\"config\": {...}, \"ticks\": [...]}"
)]
struct DocDe {
    #[serde(default)]
    config: ConfigDe,
    ticks: Vec<TickDe>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a config object")]
struct ConfigDe {
    origin: Option<PosDe>,
    cell_size: Option<FixDe>,
    width_cells: Option<Int<u32>>,
    height_cells: Option<Int<u32>>,
    visibility: Option<VisibilityDe>,
    hysteresis: Option<FixDe>,
    update_interval: Option<Int<u64>>,
    move_epsilon: Option<FixDe>,
    dir_epsilon: Option<Int<Dir>>,
    max_entities: Option<Int<u32>>,
    max_observers: Option<Int<u32>>,
    max_view: Option<Int<u32>>,
    max_visible: Option<Int<u32>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase", expecting = "\"grid\" or \"radius\"")]
enum VisibilityDe {
    Grid,
    Radius,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tick object {\"commands\": [...]}")]
struct TickDe {
    #[serde(default)]
    commands: Vec<CommandDe>,
}

#[derive(Deserialize)]
#[serde(
    rename_all = "lowercase",
    expecting = "a command: {\"spawn\": {...}}, {\"move\": {...}} or {\"despawn\": {...}}"
)]
enum CommandDe {
    Spawn(SpawnDe),
    Move(MoveDe),
    Despawn(DespawnDe),
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a spawn object {\"id\": ..., \"pos\": [x, y], ...}"
)]
struct SpawnDe {
    id: Int<u64>,
    pos: PosDe,
    dir: Option<Int<Dir>>,
    speed: Option<FixDe>,
    observer: Option<bool>,
    radius: Option<FixDe>,
    layers: Option<Int<u32>>,
    interest: Option<Int<u32>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a move object {\"id\": ..., \"pos\": [x, y], ...}"
)]
struct MoveDe {
    id: Int<u64>,
    pos: PosDe,
    dir: Option<Int<Dir>>,
    speed: Option<FixDe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a despawn object {\"id\": ...}")]
struct DespawnDe {
    id: Int<u64>,
}

impl DocDe {
    fn into_scenario(self) -> Scenario {
        let config = self.config.into_config();
        let ticks = self
            .ticks
            .into_iter()
            .map(|t| {
                t.commands
                    .into_iter()
                    .map(|c| c.into_command(&config))
                    .collect()
            })
            .collect();
        Scenario { config, ticks }
    }
}

impl ConfigDe {
    fn into_config(self) -> Config {
        let d = Config::default();
        let max_entities = self.max_entities.map_or(d.max_entities, |v| v.0);
        Config {
            origin: self.origin.map_or(d.origin, |p| p.0),
            cell_size: self.cell_size.map_or(d.cell_size, |v| v.0),
            width_cells: self.width_cells.map_or(d.width_cells, |v| v.0),
            height_cells: self.height_cells.map_or(d.height_cells, |v| v.0),
            visibility: self.visibility.map_or(d.visibility, |v| match v {
                VisibilityDe::Grid => Visibility::Grid,
                VisibilityDe::Radius => Visibility::Radius,
            }),
            hysteresis: self.hysteresis.map_or(d.hysteresis, |v| v.0),
            update_interval: self.update_interval.map_or(d.update_interval, |v| v.0),
            move_epsilon: self.move_epsilon.map_or(d.move_epsilon, |v| v.0),
            dir_epsilon: self.dir_epsilon.map_or(d.dir_epsilon, |v| v.0),
            max_entities,
            max_observers: self.max_observers.map_or(max_entities, |v| v.0),
            max_view: self.max_view.map_or(d.max_view, |v| v.0),
            max_visible: self.max_visible.map(|v| v.0),
        }
    }
}

impl CommandDe {
    fn into_command(self, config: &Config) -> Command {
        match self {
            CommandDe::Spawn(s) => {
                let d = Spawn::npc(s.id.0, s.pos.0);
                Command::Spawn(Spawn {
                    dir: s.dir.map_or(d.dir, |v| v.0),
                    speed: s.speed.map_or(d.speed, |v| v.0),
                    observer: s.observer.unwrap_or(d.observer),
                    radius: s.radius.map_or(config.cell_size, |v| v.0),
                    layers: s.layers.map_or(d.layers, |v| v.0),
                    interest: s.interest.map_or(d.interest, |v| v.0),
                    ..d
                })
            }
            CommandDe::Move(m) => Command::Move(Move {
                id: m.id.0,
                pos: m.pos.0,
                dir: m.dir.map_or(0, |v| v.0),
                speed: m.speed.map_or(Fix::ZERO, |v| v.0),
            }),
            CommandDe::Despawn(d) => Command::Despawn { id: d.id.0 },
        }
    }
}

/// Decimal text of a JSON number (serde_json keeps it with `arbitrary_precision`).
fn number_text<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Number, D::Error> {
    serde_json::Number::deserialize(d)
}

/// A fixed-point number.
struct FixDe(Fix);

impl<'de> Deserialize<'de> for FixDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = number_text(d)?;
        decimal::parse_fix(n.as_str())
            .map(FixDe)
            .map_err(|e| match e {
                DecimalError::OutOfRange => de::Error::custom(format_args!(
                    "{} is outside the fixed-point range -2^47..2^47",
                    n.as_str()
                )),
                e => de::Error::custom(format_args!("{}: {e}", n.as_str())),
            })
    }
}

/// An integer of type `T`, from any notation of an exact integer in its range.
struct Int<T>(T);

trait Bounded: TryFrom<i128> {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
bounded!(u16, u32, u64);

impl<'de, T: Bounded> Deserialize<'de> for Int<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = number_text(d)?;
        let fail = || {
            de::Error::custom(format_args!(
                "expected an integer in {}..={}, found {}",
                T::MIN,
                T::MAX,
                n.as_str()
            ))
        };
        let v = decimal::parse_int(n.as_str(), T::MIN, T::MAX).map_err(|_| fail())?;
        // parse_int checked the range of T.
        T::try_from(v).map(Int).map_err(|_| fail())
    }
}

/// A position written `[x, y]`.
struct PosDe(Pos);

impl<'de> Deserialize<'de> for PosDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(PosVisitor(PhantomData))
    }
}

struct PosVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for PosVisitor<'de> {
    type Value = PosDe;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[x, y]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PosDe, A::Error> {
        let x: FixDe = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let y: FixDe = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &self));
        }
        Ok(PosDe(Pos::new(x.0, y.0)))
    }
}
