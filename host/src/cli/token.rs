//! `lockgrid token --key FILE --client-id N [--expires 60s] [--server ADDR …]`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use lockgrid_host::token::{mint, read_key_file, to_hex, unix_now};
use lockgrid_protocol::token::{TokenParams, DEFAULT_PROTOCOL_ID, USER_DATA_LEN};

use super::Failure;

/// Flags of `lockgrid token`.
#[derive(Args, Debug)]
pub(crate) struct TokenArgs {
    /// The private key file shared with the servers (64 hex digits).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The entity the client may act for.
    #[arg(long, value_name = "N")]
    client_id: u64,
    /// How long the token stays valid: seconds, or a number with s, m or h.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "60s",
        allow_hyphen_values = true
    )]
    expires: String,
    /// A server the token is valid for (repeat for up to 8).
    #[arg(long = "server", value_name = "ADDR", default_value = "127.0.0.1:7777")]
    servers: Vec<SocketAddr>,
    /// The game's protocol id (decimal, or hex with 0x) [default: the lockgrid tools' id].
    #[arg(long, value_name = "ID")]
    protocol_id: Option<String>,
    /// Data for the server's rules, as text (at most 128 bytes).
    #[arg(long, value_name = "TEXT", default_value = "")]
    user_data: String,
}

/// Seconds of "90", "90s", "15m", "2h".
fn parse_duration(text: &str) -> Result<u64, Failure> {
    if text.starts_with('-') {
        return Err(Failure::new(format_args!(
            "--expires {text}: must be positive"
        )));
    }
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| {
        Failure::new(format_args!(
            "--expires {text}: not a duration like 60s, 5m or 1h"
        ))
    })?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            return Err(Failure::new(format_args!(
                "--expires {text}: the unit must be s, m or h"
            )))
        }
    };
    match n.checked_mul(scale) {
        Some(secs) if secs > 0 => Ok(secs),
        _ => Err(Failure::new(format_args!(
            "--expires {text}: must be positive and not absurd"
        ))),
    }
}

fn parse_protocol_id(text: &str) -> Result<u64, Failure> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| Failure::new(format_args!("--protocol-id {text}: not a 64-bit number")))
}

pub(crate) fn run(args: TokenArgs) -> Result<(), Failure> {
    let key = read_key_file(&args.key).map_err(Failure::new)?;
    let lifetime = parse_duration(&args.expires)?;
    let protocol_id = match &args.protocol_id {
        Some(text) => parse_protocol_id(text)?,
        None => DEFAULT_PROTOCOL_ID,
    };
    if args.user_data.len() > USER_DATA_LEN {
        return Err(Failure::new(format_args!(
            "--user-data is {} bytes; at most {USER_DATA_LEN}",
            args.user_data.len()
        )));
    }
    let now = unix_now();
    let params = TokenParams {
        protocol_id,
        create_unix_secs: now,
        expire_unix_secs: now.saturating_add(lifetime),
        client_id: args.client_id,
        server_addresses: &args.servers,
        user_data: args.user_data.as_bytes(),
    };
    let token = mint(&key, &params).map_err(|e| Failure::new(format_args!("token: {e}")))?;
    println!("{}", to_hex(&token.encode()));
    Ok(())
}
