//! The HTTP endpoint Prometheus scrapes: `GET /metrics` on its own thread.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Response, Server};
use tracing::debug;

use super::ServeMetrics;

/// The content type of the OpenMetrics text format, which Prometheus
/// negotiates and parses.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A listening metrics endpoint; dropping it stops the listener and joins
/// its thread.
pub struct MetricsEndpoint {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Listens on `addr` (port 0 picks a free one) and answers
    /// `GET /metrics` with `metrics` encoded at the time of the request;
    /// any other path is 404, any other method 405.
    pub fn start(addr: SocketAddr, metrics: ServeMetrics) -> io::Result<MetricsEndpoint> {
        let server = Server::http(addr).map_err(io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other("the listener has no IP address"))?;
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || answer(&serving, &metrics))?;
        Ok(MetricsEndpoint {
            server,
            addr,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(server: &Server, metrics: &ServeMetrics) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("");
        let response = match (request.method(), path) {
            (Method::Get, "/metrics") => {
                // The header is a constant known to be valid.
                let header = Header::from_bytes("Content-Type", CONTENT_TYPE).ok();
                let mut r = Response::from_string(metrics.encode());
                if let Some(h) = header {
                    r.add_header(h);
                }
                r
            }
            (Method::Get, _) => {
                Response::from_string("not found: try /metrics\n").with_status_code(404)
            }
            _ => Response::from_string("method not allowed\n").with_status_code(405),
        };
        if let Err(e) = request.respond(response) {
            debug!("metrics response: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let endpoint =
            MetricsEndpoint::start("127.0.0.1:0".parse().unwrap(), ServeMetrics::new()).unwrap();
        let addr = endpoint.addr();
        let ok = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            ok.starts_with("HTTP/1.0 200") || ok.starts_with("HTTP/1.1 200"),
            "{ok}"
        );
        assert!(ok.contains("application/openmetrics-text"), "{ok}");
        assert!(ok.contains("lockgrid_ticks_total 0"), "{ok}");
        let missing = get(addr, "GET /nothing HTTP/1.0\r\n\r\n");
        assert!(missing.contains(" 404 "), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
        assert!(post.contains(" 405 "), "{post}");
        drop(endpoint); // joins the thread: a hang here fails the test
    }
}
