//! `lockgrid bots`.
use clap::Args;

use super::Failure;

/// Flags of `lockgrid bots`.
#[derive(Args, Debug)]
pub(crate) struct BotsArgs {}

pub(crate) fn run(_args: BotsArgs) -> Result<(), Failure> {
    Ok(())
}
