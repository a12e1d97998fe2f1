//! lockgrid-host: the std layer around the kernel and protocol.
//!
//! It owns everything the kernel leaves out on purpose: files, clocks and
//! the `lockgrid` command-line tool. The pieces are usable on their own:
//!
//! - [`scenario`]: scenario JSON ⇄ [`Scenario`](scenario::Scenario)
//!   (config plus each tick's commands);
//! - [`jsonl`]: the JSON Lines event stream, byte for byte;
//! - [`run`]: drives a scenario through a [`World`](lockgrid_kernel::World);
//! - [`cell_stream`]: a scenario's cell-addressed events as JSON Lines;
//! - [`decimal`]: exact decimal text ⇄ `I48F16`;
//! - [`render`]: the picture of a tick as SVG or PNG (`lockgrid render`);
//! - [`view`]: a local web page to scrub through ticks (`lockgrid view`);
//! - [`memory_limit`]: refusing a world the machine cannot hold;
//! - [`node`]: the sans-IO server node (world, protocol, game rules, storage);
//! - [`serve`]: the UDP driver of the node behind `lockgrid serve`;
//! - [`metrics`]: Prometheus metrics of `lockgrid serve`;
//! - [`bots`]: protocol clients that load a server and check their views.
//!
//! ```
//! use lockgrid_host::{run, scenario::Scenario};
//!
//! let scenario = Scenario::from_json_str(r#"{"ticks": [
//!     {"commands": [{"spawn": {"id": 1, "pos": [10, 10], "observer": true}},
//!                   {"spawn": {"id": 2, "pos": [20, 10]}}]}
//! ]}"#)?;
//! let mut out = Vec::new();
//! run::run_scenario(&scenario, &mut out)?;
//! let text = String::from_utf8(out)?;
//! assert!(text.starts_with(r#"{"tick":1,"type":"enter","observer":1,"subject":2,"pos":[20,10]"#));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod bots;
pub mod cell_stream;
pub mod cluster;
pub mod decimal;
pub mod journal;
pub mod jsonl;
pub mod memory_limit;
pub mod metrics;
pub mod node;
pub mod render;
pub mod replay;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod store;
pub mod threads;
pub mod token;
pub mod view;
