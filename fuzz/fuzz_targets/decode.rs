//! Feeds arbitrary bytes to every decoder and to both endpoints.
//!
//! Checks (`protocol/tests/common/canonical.rs`, shared with the bounded
//! runs): no panic; whatever decodes as a packet re-encodes to the same
//! bytes; whatever decodes as a batch part re-encodes to the same bytes
//! against the same view, and a failed decode leaves the view alone.
//! Run with `cargo +nightly fuzz run decode` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_kernel::Config;
use lockgrid_protocol::batch::decode_part;
use lockgrid_protocol::{Client, ClientConfig, Instant, Server, ServerConfig, View, WorldParams};

#[path = "../../protocol/tests/common/canonical.rs"]
mod canonical;

fuzz_target!(|data: &[u8]| {
    canonical::check_packet(data);

    // Build a view from a first part, then check the rest against it.
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (first, rest) = data.split_at(split);
    let mut view = View::new();
    let _ = decode_part(first, 7, &mut view, &mut Vec::new());
    canonical::check_part(rest, &view);

    let mut server: Server<u8> = Server::new(
        ServerConfig::default(),
        WorldParams::from(&Config::default()),
    )
    .expect("default config is valid");
    server.handle_datagram(Instant::ZERO, 1, data);
    let mut out = vec![0u8; 1200];
    while let Ok(Some(_)) = server.poll_transmit(Instant::ZERO, &mut out) {}
    let mut client =
        Client::new(ClientConfig::default(), 0u8, b"t", 1, Instant::ZERO).expect("valid config");
    client.handle_datagram(Instant::ZERO, 0, data);
    while client.poll_event().is_some() {}
});
