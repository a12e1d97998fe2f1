//! The node driven from outside the tick: for drivers whose log of ticks is
//! not the node's own storage (the cluster driver, where one leader
//! decides each tick and every node applies it from a replicated stream).
//!
//! Instead of [`Node::handle_timeout`] running the whole tick, such a
//! driver:
//!
//! 1. takes the node's pending commands ([`Node::take_local`]) and hands
//!    them to whoever decides the tick;
//! 2. once a tick is decided and durable elsewhere, steps it
//!    ([`Node::step_commands`]), checks the digest, and releases it to the
//!    clients ([`Node::release_tick`]);
//! 3. handles protocol timers with [`Node::handle_timers`].
//!
//! The node's storage is not written by these calls: the driver's log is
//! the record.

use lockgrid_kernel::{Command, TickReport, World};
use lockgrid_protocol::Instant;
use tracing::debug;

use super::{Node, Rules, Storage};

impl<A, R, S> Node<A, R, S>
where
    A: Clone + Ord + core::fmt::Debug,
    R: Rules,
    S: Storage,
{
    /// Takes every command this node gathered for the next tick, in the
    /// order [`handle_timeout`](Self::handle_timeout) would apply them: the
    /// rules' queued commands, admitted clients' spawns, then accepted
    /// client input by entity id. The rules' server commands are not
    /// included ([`server_commands`](Self::server_commands)).
    pub fn take_local(&mut self) -> Vec<Command> {
        let mut out = std::mem::take(&mut self.queued);
        out.extend(
            std::mem::take(&mut self.spawns)
                .into_values()
                .map(Command::Spawn),
        );
        for moves in std::mem::take(&mut self.inputs).into_values() {
            out.extend(moves);
        }
        out
    }

    /// Whether commands are waiting for [`take_local`](Self::take_local).
    pub fn has_local(&self) -> bool {
        !self.queued.is_empty() || !self.spawns.is_empty() || !self.inputs.is_empty()
    }

    /// Drops the commands the rules queued (their [`Rules::start`] at
    /// open, say): a node joining a running world must not despawn the
    /// other nodes' clients.
    pub fn discard_queued(&mut self) {
        self.queued.clear();
    }

    /// The rules' server commands for `tick` (NPC scripts, timers): what
    /// the node deciding a tick adds to it.
    pub fn server_commands(&mut self, tick: u64) -> Vec<Command> {
        let mut out = Vec::new();
        self.rules.server_commands(&self.world, tick, &mut out);
        out
    }

    /// Acts on the protocol endpoint's timers only (never runs a tick).
    pub fn handle_timers(&mut self, now: Instant) {
        if self.stopped {
            return;
        }
        if self.server.poll_timeout().is_some_and(|t| t <= now) {
            self.server.handle_timeout(now);
            self.timers_at = self.timers_at.max(now);
        }
        self.drain_events(now);
    }

    /// Steps the world through one decided tick's `commands`; the tick's
    /// events are kept for [`release_tick`](Self::release_tick). Nothing
    /// is sent, nothing is written.
    pub fn step_commands(&mut self, commands: &[Command]) -> TickReport {
        self.events.clear();
        let report = self.world.step(commands, &mut self.events);
        self.stats.ticks_run += 1;
        self.stats.events += report.events;
        self.stats.count_kinds(&self.events);
        report
    }

    /// Hands the last stepped tick to the protocol endpoint and lets
    /// [`poll_transmit`](Self::poll_transmit) send: call it only once the
    /// tick is durable wherever the driver keeps its record.
    pub fn release_tick(&mut self, now: Instant, report: &TickReport) {
        self.release(now, report);
    }

    /// Replaces the world by `world` (rebuilt from the driver's record,
    /// after a tick this node stepped was not the one recorded). The
    /// protocol endpoint must not have been given a tick past `world`'s.
    pub fn replace_world(&mut self, world: World) {
        debug!(tick = world.tick(), "world replaced");
        self.world = world;
        self.events.clear();
    }

    /// Stops the node for good (a desync): every later call does nothing
    /// or returns [`NodeError::Stopped`](super::NodeError::Stopped).
    pub fn stop(&mut self) {
        self.stopped = true;
        self.sending = false;
    }
}
