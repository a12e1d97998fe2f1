//! Rules that record every decision about client input, so the
//! simulation can tell where each acknowledged input went.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use lockgrid_host::node::{ClientHello, ClientInput, Refusal, Rules};
use lockgrid_kernel::{Command, EntityId, Spawn, World};
use lockgrid_protocol::DisconnectReason;

/// One decision: the tick the input went into, whose it was, the command,
/// and what it became.
#[derive(Clone, Debug)]
pub struct Decision {
    pub tick: u64,
    pub entity: EntityId,
    pub command: Command,
    pub outcome: Result<Vec<Command>, Refusal>,
}

/// Decisions by (entity, heading tag, x, y): the simulated clients give
/// every move a distinct heading, so a key names one input.
pub type Log = BTreeMap<(EntityId, u16, i64, i64), Decision>;

/// Wraps rules `R`, logging every `check_input` into a shared log that
/// outlives the node (a crash drops the node, not the log).
pub struct Recorded<R> {
    pub inner: R,
    pub log: Rc<RefCell<Log>>,
}

impl<R: Rules> Rules for Recorded<R> {
    fn start(&mut self, world: &World, out: &mut Vec<Command>) {
        self.inner.start(world, out);
    }

    fn admit(&mut self, world: &World, hello: &ClientHello<'_>) -> Result<(), Refusal> {
        self.inner.admit(world, hello)
    }

    fn spawn(&mut self, world: &World, entity: EntityId, hello: &ClientHello<'_>) -> Spawn {
        self.inner.spawn(world, entity, hello)
    }

    fn check_input(
        &mut self,
        world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        let entity = input.entity;
        let tick = input.tick;
        let command = input.command;
        let from = out.len();
        let r = self.inner.check_input(world, input, out);
        if let Command::Move(m) = command {
            let key = (entity, m.dir, m.pos.x.to_bits(), m.pos.y.to_bits());
            let decision = Decision {
                tick,
                entity,
                command: *command,
                outcome: r.map(|()| out[from..].to_vec()),
            };
            // The protocol hands over each input exactly once.
            assert!(
                self.log.borrow_mut().insert(key, decision).is_none(),
                "input {m:?} of entity {entity} was handed over twice"
            );
        }
        r
    }

    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>) {
        self.inner.server_commands(world, tick, out);
    }

    fn left(
        &mut self,
        world: &World,
        entity: EntityId,
        reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        self.inner.left(world, entity, reason, out);
    }
}
