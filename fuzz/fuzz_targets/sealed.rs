//! Feeds arbitrary bytes to the sealed-packet layer and to keyed endpoints.
//!
//! Checks (`protocol/tests/common/secure_checks.rs`, shared with the
//! bounded runs): no panic; bytes that do not authenticate are refused;
//! bytes sealed and opened come back unchanged, and any flipped bit of a
//! sealed packet fails to open. Run with `cargo +nightly fuzz run sealed`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgrid_kernel::Config;
use lockgrid_protocol::token::{ConnectToken, PrivateKey, TokenParams};
use lockgrid_protocol::{
    Client, ClientConfig, Instant, Server, ServerConfig, ServerSecurity, WorldParams,
};

#[path = "../../protocol/tests/common/secure_checks.rs"]
mod secure_checks;

fuzz_target!(|data: &[u8]| {
    secure_checks::check_sealed(data);

    let server_addr = "127.0.0.1:7777".parse().expect("an address");
    let security = ServerSecurity::new(PrivateKey(secure_checks::KEY), 1, vec![server_addr], 0);
    let mut server: Server<u8> = Server::with_security(
        ServerConfig::default(),
        WorldParams::from(&Config::default()),
        security,
    )
    .expect("valid config");
    server.handle_datagram(Instant::ZERO, 1, data);
    let mut out = vec![0u8; 1200];
    while let Ok(Some(_)) = server.poll_transmit(Instant::ZERO, &mut out) {}

    let params = TokenParams {
        protocol_id: 1,
        create_unix_secs: 0,
        expire_unix_secs: 60,
        client_id: 7,
        server_addresses: &[server_addr],
        user_data: &[],
    };
    let token = ConnectToken::generate(&PrivateKey(secure_checks::KEY), &params, |b| b.fill(3))
        .expect("valid params");
    let mut client = Client::with_token(ClientConfig::default(), 0u8, &token, Instant::ZERO)
        .expect("valid config");
    client.handle_datagram(Instant::ZERO, 0, data);
    while client.poll_event().is_some() {}
});
