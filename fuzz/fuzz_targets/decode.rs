//! Feeds arbitrary bytes to every decoder and to both endpoints.
//!
//! Checks: no panic; whatever decodes as a packet re-encodes to the same
//! bytes; whatever decodes as a batch part re-encodes to the same bytes
//! against the same view, and a failed decode leaves the view alone.
//! Run with `cargo +nightly fuzz run decode` from the repository root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_kernel::Config;
use lockgrid_protocol::batch::{decode_part, encode_part};
use lockgrid_protocol::{
    Client, ClientConfig, Instant, Packet, Server, ServerConfig, View, WorldParams,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::decode(data) {
        let mut buf = vec![0u8; data.len()];
        assert_eq!(p.encode(&mut buf), Ok(data.len()));
        assert_eq!(buf, data, "packet encoding is canonical");
    }

    // Build a view from a first part, then decode the rest against it.
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (first, rest) = data.split_at(split);
    let mut view = View::new();
    let mut events = Vec::new();
    let _ = decode_part(first, 1, &mut view, &mut events);
    let before = view.clone();
    events.clear();
    match decode_part(rest, 1, &mut view, &mut events) {
        Ok(()) => {
            let mut again = before.clone();
            let mut buf = vec![0u8; rest.len() + 16];
            let p = encode_part(&events, &mut again, &mut buf).expect("decoded events re-encode");
            assert_eq!(&buf[..p.len], rest, "batch encoding is canonical");
            assert_eq!(again, view);
        }
        Err(_) => assert_eq!(view, before, "a failed decode leaves the view alone"),
    }

    let mut server: Server<u8> = Server::new(
        ServerConfig::default(),
        WorldParams::from(&Config::default()),
    )
    .expect("default config is valid");
    server.handle_datagram(Instant::ZERO, 1, data);
    let mut out = vec![0u8; 1200];
    while let Ok(Some(_)) = server.poll_transmit(Instant::ZERO, &mut out) {}
    let mut client =
        Client::new(ClientConfig::default(), 0u8, b"t", Instant::ZERO).expect("valid config");
    client.handle_datagram(Instant::ZERO, 0, data);
    while client.poll_event().is_some() {}
});
