//! The game rules a node runs: the trait an embedder implements.

use lockgrid_kernel::{Command, EntityId, Spawn, World};
use lockgrid_protocol::{ClientLimits, DisconnectReason, InputRefusal, Instant, TokenClaims};

/// What a client brought to its Hello, for [`Rules::admit`] and
/// [`Rules::spawn`] to decide on.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ClientHello<'a> {
    /// The Hello's token bytes as sent: without a key, the client's
    /// self-chosen, unauthenticated name (its entity is
    /// [`name_entity`](super::name_entity) of it; empty: a new entity each
    /// connection); with a key, the sealed connect token the protocol has
    /// already opened.
    pub token: &'a [u8],
    /// With a key, what the connect token said: its `client_id` is the
    /// entity the client acts for (the node refuses an NPC's id or one in
    /// use), its `user_data` the backend's word on the player. `None`
    /// without a key.
    pub claims: Option<&'a TokenClaims>,
}

impl<'a> ClientHello<'a> {
    /// A Hello with `token` and, for a keyed server, the token's `claims`.
    pub fn new(token: &'a [u8], claims: Option<&'a TokenClaims>) -> Self {
        ClientHello { token, claims }
    }

    /// The backend's user data from the connect token (zero-padded to its
    /// fixed length), or `None` without a key.
    pub fn user_data(&self) -> Option<&'a [u8]> {
        self.claims.map(|c| &c.user_data[..])
    }
}

/// One command a client sent for its own entity, for
/// [`Rules::check_input`] to judge.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ClientInput<'a> {
    /// The client's entity (the protocol has already dropped commands
    /// naming another one).
    pub entity: EntityId,
    /// The tick the command will be applied in if accepted.
    pub tick: u64,
    /// When the node received the datagram carrying it, on the node's
    /// clock: rules that limit a rate judge it by this, not by ticks, which
    /// run late when the machine is busy.
    pub received: Instant,
    /// The command as sent.
    pub command: &'a Command,
}

impl<'a> ClientInput<'a> {
    /// `command` from `entity`'s client, received at `received`, for `tick`.
    pub fn new(entity: EntityId, tick: u64, received: Instant, command: &'a Command) -> Self {
        ClientInput {
            entity,
            tick,
            received,
            command,
        }
    }
}

/// Why the node refused something a client sent. Counted per reason in
/// [`NodeStats::refused`](super::NodeStats::refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// A command naming another entity than the connection's own.
    Spoofed,
    /// A spawn or despawn from a client where only moves are allowed.
    NotAMove,
    /// A move farther than the max speed allows since the last accepted move.
    TooFast,
    /// Too many moves of one client in one tick.
    TooManyMoves,
    /// A speed below zero or above the max speed.
    BadSpeed,
    /// A move outside the world.
    OutOfBounds,
    /// A datagram longer than the MTU.
    Oversized,
    /// A datagram the protocol could not use (malformed, duplicate, stale, unknown sender).
    Malformed,
    /// A datagram over the per-address rate limit.
    Flood,
    /// A connection refused because the server or the world is full.
    Full,
    /// A connection refused for its token: by the rules, by the node (a
    /// connect token naming an NPC or an entity in use), or by the
    /// protocol (missing, forged, expired, for another server, reused).
    Token,
    /// A sealed packet that failed authentication, or a packet naming a
    /// connection from an address that is not the connection's.
    Unauthentic,
    /// A sealed packet whose number was already received or is older than
    /// the replay window (a network duplicate or a replay).
    Replayed,
    /// A reason of the embedder's own rules, by name.
    Custom(&'static str),
}

impl Refusal {
    /// The reasons every stats report lists, in report order (custom ones
    /// follow when they occurred).
    pub const ALL: [Refusal; 13] = [
        Refusal::Spoofed,
        Refusal::NotAMove,
        Refusal::TooFast,
        Refusal::TooManyMoves,
        Refusal::BadSpeed,
        Refusal::OutOfBounds,
        Refusal::Oversized,
        Refusal::Malformed,
        Refusal::Flood,
        Refusal::Full,
        Refusal::Token,
        Refusal::Unauthentic,
        Refusal::Replayed,
    ];

    /// The reason the client is told when its command is refused for
    /// this (the wire's refusal codes; a reason of the rules' own is told
    /// as [`InputRefusal::Refused`]).
    pub const fn told(self) -> InputRefusal {
        match self {
            Refusal::Spoofed => InputRefusal::NotYours,
            Refusal::NotAMove => InputRefusal::NotAllowed,
            Refusal::TooFast => InputRefusal::TooFast,
            Refusal::TooManyMoves => InputRefusal::TooManyMoves,
            Refusal::BadSpeed => InputRefusal::BadSpeed,
            Refusal::OutOfBounds => InputRefusal::OutOfBounds,
            _ => InputRefusal::Refused,
        }
    }

    /// The reason's name in logs and stats.
    pub const fn as_str(self) -> &'static str {
        match self {
            Refusal::Spoofed => "spoofed_id",
            Refusal::NotAMove => "not_a_move",
            Refusal::TooFast => "too_fast",
            Refusal::TooManyMoves => "too_many_moves",
            Refusal::BadSpeed => "bad_speed",
            Refusal::OutOfBounds => "out_of_bounds",
            Refusal::Oversized => "oversized",
            Refusal::Malformed => "malformed",
            Refusal::Flood => "flood",
            Refusal::Full => "full",
            Refusal::Token => "token",
            Refusal::Unauthentic => "unauthentic",
            Refusal::Replayed => "replayed",
            Refusal::Custom(name) => name,
        }
    }
}

/// The game rules of a node: who may connect, where clients start, what
/// their commands become, what the server itself does every tick.
///
/// The node calls these between ticks and while gathering a tick, always
/// with the world as it stands after the last applied tick. Every command
/// the rules hand back goes into the journal as it is, so rules need not be
/// deterministic themselves: a replay re-runs the journal, not the rules.
/// A rule that refuses says why with a [`Refusal`]; the node counts it.
///
/// The default implementation of `lockgrid serve` is
/// [`DefaultRules`](crate::serve::DefaultRules).
pub trait Rules {
    /// The commands that make the world this node opened (new or recovered)
    /// ready for its first tick: for example despawning the entities of
    /// clients of a previous run and spawning the server's own entities.
    fn start(&mut self, world: &World, out: &mut Vec<Command>);

    /// A client said Hello: admit it, or refuse with a reason (the client is
    /// told [`DisconnectReason::TokenRejected`]). With a key, `hello.claims`
    /// holds the connect token's client id and user data, so the rules
    /// decide on the identity the backend vouched for.
    fn admit(&mut self, world: &World, hello: &ClientHello<'_>) -> Result<(), Refusal>;

    /// The spawn of an admitted client's entity, which gets id `entity`
    /// (the connect token's client id with a key, else the entity of the
    /// client's name, else chosen by the node); `hello` is the one
    /// [`admit`](Self::admit) accepted (an account, a saved position in the
    /// user data). It is applied in the next tick — or, when `entity` is
    /// still alive in `world` (the client takes back an entity no client of
    /// this node holds: its node died, or it moved), once the node has
    /// despawned it, so that the client's view starts fresh.
    fn spawn(&mut self, world: &World, entity: EntityId, hello: &ClientHello<'_>) -> Spawn;

    /// The limits a client's inputs are checked against, as its Welcome
    /// tells the client (none stated by default).
    fn client_limits(&self) -> ClientLimits {
        ClientLimits::NONE
    }

    /// One command a client sent for its own entity: push what it becomes
    /// onto `out` (itself, a rewritten command, several, or none), or
    /// refuse it.
    fn check_input(
        &mut self,
        world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal>;

    /// The server's own commands for `tick` (NPCs, timers, game events),
    /// applied after the tick's client spawns and before client input.
    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>);

    /// A client's connection ended. Push what that does to the world
    /// (usually a despawn of `entity`); if the entity had not spawned yet,
    /// the node drops commands naming it.
    fn left(
        &mut self,
        world: &World,
        entity: EntityId,
        reason: DisconnectReason,
        out: &mut Vec<Command>,
    );
}
