//! The page's files and JSON endpoints, as a pure function from a request
//! line to a reply (the HTTP server around it only moves bytes).

use lockgrid_kernel::{EntityId, Visibility};
use serde_json::json;

use super::index::Index;
use crate::jsonl;
use crate::render::{to_svg, Timeline};

/// Most ticks `/api/ticks` lists in one reply.
pub const TICKS_PER_PAGE: u64 = 2000;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// An HTTP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Content-Type` header.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            content_type,
            body: body.into(),
        }
    }

    fn json(value: &serde_json::Value) -> Reply {
        Reply::ok("application/json", value.to_string())
    }

    fn error(status: u16, message: impl core::fmt::Display) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: json!({ "error": message.to_string() })
                .to_string()
                .into_bytes(),
        }
    }
}

/// Answers `GET path?query`. `title` names the source on the page.
pub fn respond(index: &Index, title: &str, url: &str) -> Reply {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    match path {
        "/" | "/index.html" => Reply::ok("text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => Reply::ok("text/javascript; charset=utf-8", APP_JS),
        "/style.css" => Reply::ok("text/css; charset=utf-8", STYLE_CSS),
        "/api/progress" => progress(index, title),
        "/api/ticks" | "/api/tick" | "/api/tick.svg" => match index.result() {
            None => Reply::error(503, "still indexing; poll /api/progress"),
            Some(Err(e)) => Reply::error(500, e),
            Some(Ok(timeline)) => {
                let q = match Query::parse(query) {
                    Ok(q) => q,
                    Err(e) => return Reply::error(400, e),
                };
                match path {
                    "/api/ticks" => ticks(timeline, &q),
                    "/api/tick" => tick(timeline, &q, false),
                    _ => tick(timeline, &q, true),
                }
            }
        },
        _ => Reply::error(404, format_args!("no such page: {path}")),
    }
}

fn progress(index: &Index, title: &str) -> Reply {
    match index.result() {
        None => {
            let p = index.progress();
            Reply::json(&json!({
                "state": "indexing",
                "source": title,
                "phase": p.phase,
                "step": p.step,
                "steps": p.steps,
                "done": p.done,
                "total": p.total,
                "unit": p.unit,
            }))
        }
        Some(Err(e)) => Reply::json(&json!({ "state": "failed", "source": title, "error": e })),
        Some(Ok(t)) => Reply::json(&json!({
            "state": "ready",
            "source": title,
            "last_tick": t.last_tick(),
            "visibility": match t.config().visibility {
                Visibility::Grid => "grid",
                Visibility::Radius => "radius",
            },
        })),
    }
}

/// The query parameters the endpoints take, all unsigned integers.
#[derive(Default)]
struct Query {
    t: Option<u64>,
    observer: Option<EntityId>,
    from: Option<u64>,
    to: Option<u64>,
}

impl Query {
    fn parse(query: &str) -> Result<Query, String> {
        let mut q = Query::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "t" => &mut q.t,
                "observer" => &mut q.observer,
                "from" => &mut q.from,
                "to" => &mut q.to,
                _ => return Err(format!("unknown parameter {key:?}")),
            };
            if value.is_empty() {
                continue;
            }
            *slot =
                Some(value.parse().map_err(|_| {
                    format!("{key}: expected an unsigned integer, found {value:?}")
                })?);
        }
        Ok(q)
    }
}

/// `/api/ticks?from=A&to=B`: each tick's digest and event counts.
fn ticks(timeline: &Timeline, q: &Query) -> Reply {
    let last = timeline.last_tick();
    let from = q.from.unwrap_or(1).max(1);
    let to =
        q.to.unwrap_or(last)
            .min(last)
            .min(from.saturating_add(TICKS_PER_PAGE - 1));
    let list: Vec<_> = if from > to {
        Vec::new()
    } else {
        // from >= 1 and to <= last, so the range is inside the slice.
        timeline.ticks()[(from - 1) as usize..to as usize]
            .iter()
            .map(|t| {
                json!({
                    "tick": t.tick,
                    "digest": format!("{:016x}", t.digest),
                    "view_events": t.view_events,
                    "rejected": t.rejected,
                })
            })
            .collect()
    };
    Reply::json(&json!({ "last_tick": last, "from": from, "to": to, "ticks": list }))
}

/// `/api/tick?t=T&observer=ID` (JSON) and `/api/tick.svg?…` (the picture).
fn tick(timeline: &Timeline, q: &Query, svg: bool) -> Reply {
    let Some(t) = q.t else {
        return Reply::error(400, "t: the tick is required");
    };
    let frame = match timeline.frame(t, q.observer) {
        Ok(f) => f,
        Err(e) => return Reply::error(404, e),
    };
    let sight = &frame.sight;
    if svg {
        return Reply::ok(
            "image/svg+xml",
            to_svg(timeline.config(), &frame, sight.as_ref()),
        );
    }
    // The lines `lockgrid replay --events --observer ID --from T --to T` prints.
    let mut lines = Vec::new();
    if let Some(s) = sight {
        let mut n = 0;
        for e in frame.events_for(s.observer) {
            // Writing to a Vec cannot fail.
            let _ = jsonl::write_event(&mut lines, frame.tick, e);
            n += 1;
        }
        let _ = jsonl::write_tick_line(&mut lines, frame.tick, frame.digest, n);
    }
    let lines: Vec<&str> = core::str::from_utf8(&lines)
        .unwrap_or_default()
        .lines()
        .collect();
    let rejected: Vec<_> = frame
        .rejections()
        .map(|r| json!({ "entity": r.entity, "command": r.command.as_str(), "reason": r.reason.as_str() }))
        .collect();
    Reply::json(&json!({
        "tick": frame.tick,
        "digest": format!("{:016x}", frame.digest),
        // Ids as strings: a u64 does not survive a JavaScript number.
        "observers": frame.observers.iter().map(u64::to_string).collect::<Vec<_>>(),
        "entities": frame.entities.len(),
        "observer": sight.as_ref().map(|s| s.observer.to_string()),
        "view": sight.as_ref().map(|s| s.view.iter().map(u64::to_string).collect::<Vec<_>>()),
        "events": lines,
        "rejected": rejected,
    }))
}
