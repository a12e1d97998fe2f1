//! A local web page to scrub through the ticks of a data folder or a
//! scenario: the engine of `lockgrid view`.
//!
//! [`serve_view`] indexes the source on a thread of its own — a data
//! folder's journal is verified with [`crate::replay::verify`] and read
//! with [`crate::replay::export_scenario`], the code behind `lockgrid
//! replay` — and serves, on a loopback address only, a page built into the
//! binary: a timeline with each tick's digest, play/pause, an observer
//! picker, the picture of the tick ([`crate::render::to_svg`]) and the
//! chosen observer's events for that tick. While a long journal is indexed
//! the page shows a progress bar.
//!
//! # Endpoints
//!
//! Every endpoint answers `GET`; errors are JSON `{"error": "…"}` with
//! status 400 (bad query), 404 (no such page, tick or observer), 500
//! (indexing failed) or 503 (still indexing).
//!
//! | path | reply |
//! | --- | --- |
//! | `/` , `/app.js`, `/style.css` | the page |
//! | `/api/progress` | `{"state": "indexing", "source", "phase", "step", "steps", "done", "total", "unit": "bytes"\|"ticks"}`, then `{"state": "ready", "source", "last_tick", "visibility": "grid"\|"radius"}` or `{"state": "failed", "source", "error"}` |
//! | `/api/ticks?from=A&to=B` | `{"last_tick", "from", "to", "ticks": [{"tick", "digest": "<16 hex>", "view_events", "rejected"}, …]}`, at most [`TICKS_PER_PAGE`] ticks (default: from 1 to the end) |
//! | `/api/tick?t=T&observer=ID` | `{"tick", "digest", "observers": [ids], "entities", "observer": ID\|null, "view": [ids]\|null, "events": [lines], "rejected": [{"entity", "command", "reason"}]}` (ids in `observers`, `observer` and `view` are decimal strings, which JavaScript keeps exact); `events` are the JSON Lines `lockgrid replay DIR --events --observer ID --from T --to T` prints, tick line included; without `observer`, the lowest live observer id |
//! | `/api/tick.svg?t=T&observer=ID` | the picture of the tick, as `lockgrid render` draws it |

mod api;
mod index;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

pub use api::{respond, Reply, TICKS_PER_PAGE};
pub use index::{Index, Progress, Source};

/// Threads answering requests: a picture takes a few milliseconds, so a
/// few threads keep the page responsive while a long tick is re-run.
const WORKERS: usize = 4;

/// Serves the page for `source` on `127.0.0.1:port` (0: any free port)
/// until the process ends. `on_listen` hears the bound address once the
/// socket is open, before indexing is done. `title` names the source on
/// the page.
pub fn serve_view(
    source: Source,
    title: &str,
    port: u16,
    on_listen: impl FnOnce(SocketAddr),
) -> io::Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let server = tiny_http::Server::http(addr).map_err(io::Error::other)?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| io::Error::other("the server is not on an IP address"))?;
    let index = Index::start(source);
    on_listen(bound);
    let server = Arc::new(server);
    let title: Arc<str> = title.into();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (server, index, title) =
                (Arc::clone(&server), Arc::clone(&index), Arc::clone(&title));
            std::thread::spawn(move || answer(&server, &index, &title))
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

fn answer(server: &tiny_http::Server, index: &Index, title: &str) {
    for request in server.incoming_requests() {
        let reply = match request.method() {
            tiny_http::Method::Get | tiny_http::Method::Head => {
                respond(index, title, request.url())
            }
            _ => Reply {
                status: 405,
                content_type: "application/json",
                body: br#"{"error":"only GET is served"}"#.to_vec(),
            },
        };
        let mut response =
            tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
        for (name, value) in [
            ("Content-Type", reply.content_type),
            ("Cache-Control", "no-store"),
        ] {
            if let Ok(h) = tiny_http::Header::from_bytes(name, value) {
                response.add_header(h);
            }
        }
        // A client that went away needs no answer.
        let _ = request.respond(response);
    }
}
