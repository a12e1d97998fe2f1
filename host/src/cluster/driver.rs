//! `lockgrid serve --cluster`: the server node driven by a UDP socket, the
//! clock and the world's stream on NATS JetStream.
//!
//! One task on a single-threaded tokio runtime waits for whichever comes
//! first: a tick record from the stream, a datagram, a forwarded batch
//! (when leading), the tick timer (when leading), or the 100 ms
//! housekeeping timer (lease, resends, protocol timers, stop).
//!
//! - **Every node** consumes the stream in order, steps its kernel with
//!   each record's commands and compares the digest; a differing digest
//!   stops the node with a desync report. A tick's results reach clients
//!   only after its record is in the stream.
//! - **Input** is gathered per node: in the first 60 % of the interval
//!   after each applied tick, datagrams go to the node as they arrive and
//!   the commands they become go to the leader at once as a numbered batch
//!   (request/reply; the leader keeps its own); later datagrams wait for
//!   the next tick. The node sends nothing to its clients — no
//!   acknowledgement — while a batch of its awaits a record naming it (its
//!   `Lockgrid-Batches` header): an input is acknowledged only once a tick
//!   holding it is appended. A batch that missed a tick closes the window
//!   until it is in, so the next tick releases everything.
//! - **The leader** holds the lease key, and every tick interval appends the
//!   next tick: its rules' server commands, then the batches of each node in
//!   order, each taken once (batch numbers at or below the last one
//!   recorded for its node are duplicates). The append carries the
//!   expected last sequence `tick - 1`, so a second node that believes it
//!   leads cannot append the same tick; the loser rebuilds its world from
//!   the stream and follows.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use lockgrid_kernel::{Command, Config, Event, TickReport, World};
use lockgrid_protocol::{Instant, MAX_MTU};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::log::{Appended, ClusterLog};
use super::record::{decode_batches, decode_record, encode_batches, encode_tick, Batch};
use super::storage::StreamStorage;
use super::ClusterError;
use crate::journal::format::{payload_len, MAX_PAYLOAD};
use crate::journal::Record;
use crate::metrics::{ClusterFigures, ServeMetrics};
use crate::node::{Node, NodeConfig, StatsReadings, CLIENT_ID_BASE};
use crate::serve::{DefaultRules, ServeOptions};
use crate::store::{decode_snapshot, encode_snapshot};
use crate::threads::Threads;

/// How `lockgrid serve` joins a cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// NATS server URLs (`nats://127.0.0.1:4222`, …).
    pub urls: Vec<String>,
    /// The world's name.
    pub world: String,
    /// How long a leader's lease lasts without renewal.
    pub lease_time: Duration,
}

/// What a cluster node did, when it stopped.
#[derive(Clone, Debug, Default)]
pub struct ClusterSummary {
    /// The last tick applied.
    pub tick: u64,
    /// Ticks this node appended as leader.
    pub appended: u64,
    /// Ticks applied from the stream, appended by others.
    pub followed: u64,
    /// Times this node took the lease.
    pub leads: u64,
    /// Appends lost to another leader (the world was rebuilt each time).
    pub lost_appends: u64,
    /// This node's slot.
    pub slot: u32,
    /// Datagrams the system dropped at the node's socket, its receive
    /// buffer full, when last read (once a second); `None` where the
    /// system does not say (no `/proc`).
    pub socket_drops: Option<u64>,
}

impl core::fmt::Display for ClusterSummary {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "node slot {} stopped at tick {}: appended {} ticks, followed {}, led {} times, lost {} appends",
            self.slot, self.tick, self.appended, self.followed, self.leads, self.lost_appends
        )?;
        match self.socket_drops {
            Some(drops) => write!(f, ", {drops} datagrams dropped at the socket"),
            None => Ok(()),
        }
    }
}

/// Most datagrams held between ticks; more are dropped (the protocol
/// retransmits).
const MAX_HELD_DATAGRAMS: usize = 16_384;
/// Most batches the leader holds per node, waiting for a tick.
const MAX_PENDING_BATCHES: usize = 64;
/// Most nodes whose batches the leader holds.
const MAX_PENDING_NODES: usize = 1024;
/// Largest record the leader writes (NATS's default max payload is 1 MiB;
/// headers need room too).
const MAX_RECORD: usize = 1000 * 1024;
/// Most batches of this node awaiting a tick; past it, datagrams are held.
const MAX_IN_FLIGHT: usize = 64;
/// Snapshots kept in the object store.
const KEEP_SNAPSHOTS: usize = 4;
const HOUSEKEEPING: Duration = Duration::from_millis(100);
/// How often the node reads its socket's drops: reading `/proc` every
/// tick would cost more than the figure is worth.
const DROPS_EVERY: Duration = Duration::from_secs(1);
/// No record for this long (counted from the last record, the last such
/// check, or when the consumer was made, whichever is later): read what
/// the stream holds beyond this node's tick from its replicas, and when
/// there was some, make a new consumer.
const STALL: Duration = Duration::from_millis(1000);
/// After a consumer or a rebuild could not be made: wait this long before
/// trying again.
const RETRY_AFTER: Duration = Duration::from_millis(500);
/// A node with no connection to any NATS server for this long says
/// goodbye (`shutting_down`) to its clients and exits with an error: they
/// move to another node instead of waiting on one that can acknowledge
/// nothing. A node whose server died reconnects to another listed server
/// well within it.
pub const NATS_LOST: Duration = Duration::from_secs(3);
/// Longest a background attempt to make a consumer (or to read the
/// stream's last tick) may take; the JetStream requests themselves give up
/// after 2 s.
const CONSUME_CALL: Duration = Duration::from_secs(3);

type ClusterNode = Node<SocketAddr, DefaultRules, StreamStorage>;

struct Clock(std::time::Instant);

impl Clock {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// A batch of this node's that no applied record has named yet.
struct InFlight {
    seq: u64,
    /// Sent to the leader over NATS at least once.
    forwarded: bool,
    bytes: Bytes,
    commands: Vec<Command>,
    resend_at: std::time::Instant,
}

/// The leader's state.
struct Lead {
    revision: u64,
    renewed: std::time::Instant,
    /// Ticks up to this one must be applied before appending.
    ready_at: u64,
    announced: bool,
}

struct Member {
    log: ClusterLog,
    node: ClusterNode,
    clock: Clock,
    slot: u32,
    holder: String,
    lease_time: Duration,
    snapshot_every: u64,
    next_batch: u64,
    /// This node's batches no applied record has named yet, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Until when datagrams go to the node (and their commands to the
    /// leader) as they arrive: the first part of the tick interval after a
    /// tick, so that batches reach the leader before its next tick and the
    /// next tick's release is not held back.
    window_until: Option<std::time::Instant>,
    interval: Duration,
    held: VecDeque<(SocketAddr, Vec<u8>)>,
    /// When the consumer last delivered a record, or was made.
    last_record_at: std::time::Instant,
    /// Background work finishing (consumers made, worlds rebuilt).
    done_tx: mpsc::Sender<Done>,
    /// A consumer is being made in the background.
    consuming: bool,
    /// Records are being read straight from the stream's replicas.
    reading: bool,
    /// Bumped whenever a consumer being made must not be used (the world
    /// was put back by a rebuild): results of an older generation are dropped.
    consumer_gen: u64,
    /// No new consumer is asked for before this.
    consume_retry_at: std::time::Instant,
    /// The tick the world is being rebuilt at (after an append that was
    /// not taken), and whether an attempt is running: records are not
    /// applied and the lease is not taken until it is done.
    rebuilding: Option<(u64, bool)>,
    /// No new rebuild attempt before this.
    rebuild_retry_at: std::time::Instant,
    /// Since when the NATS client has had no connection.
    nats_lost_since: Option<std::time::Instant>,
    dropped_datagrams: u64,
    lead: Option<Lead>,
    pending: BTreeMap<u32, BTreeMap<u64, Vec<Command>>>,
    included: BTreeMap<u32, u64>,
    /// The last record this node appended (tick, bytes), to recognise it on the stream.
    appended: Option<(u64, Bytes)>,
    digests: BufWriter<File>,
    data_dir: PathBuf,
    summary: ClusterSummary,
    outcome_tx: mpsc::Sender<(u64, bool)>,
    metrics: ServeMetrics,
    /// The node's counters as the metrics saw them the last two calls.
    readings: StatsReadings,
    /// The last tick this node appended.
    appended_tick: u64,
    batches_forwarded: u64,
    commands_forwarded: u64,
    batches_taken: u64,
}

/// What the stream's consumer gave.
type Next = Option<Result<async_nats::jetstream::Message, String>>;

/// Background work of the node that finished. Making a consumer and
/// rebuilding the world wait on NATS, which may answer nothing for seconds
/// while the NATS cluster re-elects after losing a server; the node's loop
/// goes on meanwhile (clients, timers, the lease).
enum Done {
    /// A consumer of the stream from tick `from`; `None` when the stream
    /// turned out not to be ahead of `from - 1` (nothing to consume).
    Consumer {
        gen: u64,
        from: u64,
        consumer: Option<Result<Box<Ordered>, ClusterError>>,
    },
    /// Records `from`, `from + 1`, … read straight from the stream's
    /// replicas (sequence, bytes, batch header), while no consumer delivers.
    Records {
        gen: u64,
        from: u64,
        records: Vec<(u64, Bytes, Option<String>)>,
    },
    /// The world put back at tick `tick` from the snapshots and the stream.
    Rebuilt {
        tick: u64,
        world: Result<Box<World>, ClusterError>,
    },
}

type Ordered = async_nats::jetstream::consumer::pull::Ordered;

enum Wake {
    Record(Box<Next>),
    Datagram(std::io::Result<(usize, SocketAddr)>),
    Forward(Option<async_nats::Message>),
    Tick,
    Housekeeping,
    Outcome(Option<(u64, bool)>),
    Done(Option<Done>),
}

/// Joins the cluster and serves until `stop` is set or a limit passes.
/// `on_ready` gets the bound UDP address once the node has caught up with
/// the stream and listens.
pub fn serve_cluster(
    opts: ServeOptions,
    cluster: ClusterOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(SocketAddr) + Send,
) -> Result<ClusterSummary, ClusterError> {
    // The runtime runs on one of the threads that step the world, as
    // `lockgrid serve`'s loop does, so that its ticks' joins start the
    // other thread's task in tens of microseconds and allocate nothing
    // (see `crate::threads`); with one thread, here.
    let threads = Threads::new(opts.threads);
    threads.clone().run(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClusterError::Io)?;
        runtime.block_on(run(opts, cluster, stop, on_ready, threads))
    })
}

/// Refuses a world this node's options cannot serve: more NPCs than it
/// holds, or more memory than the limit with `--max-clients` connections.
fn check_world(world: &Config, opts: &ServeOptions) -> Result<(), ClusterError> {
    crate::serve::check_npcs(opts, world).map_err(ClusterError::Options)?;
    crate::serve::check_memory_for(world, opts).map_err(ClusterError::Options)
}

async fn run(
    opts: ServeOptions,
    cluster: ClusterOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(SocketAddr),
    threads: Threads,
) -> Result<ClusterSummary, ClusterError> {
    crate::serve::check_options(&opts).map_err(|e| ClusterError::Options(e.to_string()))?;
    std::fs::create_dir_all(&opts.data_dir).map_err(ClusterError::Io)?;
    let client = super::log::connect(&cluster.urls).await?;
    let log = ClusterLog::open(
        client,
        cluster.urls.len(),
        &cluster.world,
        cluster.lease_time,
    )
    .await?;
    // Refused before this node stores a new world's config: the stored
    // world when there is one, else the options'; checked again should
    // another node have stored one meanwhile.
    let stored = log.stored_world_config().await?;
    let checked = stored.unwrap_or(opts.world);
    check_world(&checked, &opts)?;
    let (config, created) = log.world_config(&opts.world).await?;
    if config != checked {
        check_world(&config, &opts)?;
    }
    if !created && config != opts.world {
        info!("the stream's world config is kept; world options apply to new worlds only");
    }
    let slot = log.claim_slot().await?;
    let last = log.last_tick().await?;
    let start = newest_snapshot(&log, &config, last).await;
    let start_tick = start.as_ref().map_or(0, |(s, _)| s.tick);
    info!(world = %cluster.world, slot, replicas = log.replicas, last_tick = last, snapshot = start_tick, "joined the cluster");

    let interval = Duration::from_micros(1_000_000 / u64::from(opts.tick_rate));
    let node_config = NodeConfig {
        server: crate::serve::server_config(
            &opts,
            u64::from(slot).rotate_left(40) ^ u64::from(std::process::id()),
        ),
        snapshot_every: 0,
        max_packets_per_sec: opts.max_packets_per_sec,
        // Each node names its clients from its own range, so two nodes
        // never give one id to two clients; with a key, clients bring
        // their ids in their tokens, minted by one backend.
        first_client_id: if opts.key.is_some() {
            CLIENT_ID_BASE + 1
        } else {
            CLIENT_ID_BASE + (u64::from(slot) << 24) + 1
        },
        threads: opts.threads,
    };
    let rules = DefaultRules::new(opts.max_speed, opts.tick_rate, opts.npcs, opts.seed)
        .with_spawn_area(opts.spawn_area);
    let clock = Clock(std::time::Instant::now());
    // The Unix time of the clock's zero, for connect tokens' expiry.
    let unix_secs_at_zero = crate::token::unix_now();
    let storage = StreamStorage::new(config, start);
    let (mut node, report) =
        Node::open_on(clock.now(), node_config, &config, rules, storage, threads)
            .map_err(ClusterError::Node)?;
    info!("{report}");
    if last > 0 {
        // A running world: its clients belong to other nodes.
        node.discard_queued();
    }
    let digests = File::options()
        .create(true)
        .append(true)
        .open(opts.data_dir.join("cluster-digests.txt"))
        .map_err(ClusterError::Io)?;
    let (outcome_tx, mut outcome_rx) = mpsc::channel(64);
    let (done_tx, mut done_rx) = mpsc::channel(8);
    let mut m = Member {
        log,
        node,
        clock,
        slot,
        holder: format!("slot {slot} pid {}", std::process::id()),
        lease_time: cluster.lease_time,
        snapshot_every: opts.snapshot_every,
        next_batch: 1,
        in_flight: VecDeque::new(),
        window_until: None,
        interval,
        held: VecDeque::new(),
        last_record_at: std::time::Instant::now(),
        done_tx,
        consuming: false,
        reading: false,
        consumer_gen: 0,
        consume_retry_at: std::time::Instant::now(),
        rebuilding: None,
        rebuild_retry_at: std::time::Instant::now(),
        nats_lost_since: None,
        dropped_datagrams: 0,
        lead: None,
        pending: BTreeMap::new(),
        included: BTreeMap::new(),
        appended: None,
        digests: BufWriter::new(digests),
        data_dir: opts.data_dir.clone(),
        summary: ClusterSummary {
            slot,
            ..ClusterSummary::default()
        },
        outcome_tx,
        metrics: opts.metrics.clone(),
        readings: StatsReadings::default(),
        appended_tick: 0,
        batches_forwarded: 0,
        commands_forwarded: 0,
        batches_taken: 0,
    };
    let mut consumer = Some(m.log.consume(start_tick + 1).await?);
    // Catch up before taking clients.
    let target = m.log.last_tick().await?;
    while m.node.world().tick() < target {
        match next_record(&mut consumer).await {
            Some(Ok(msg)) => m.on_message(msg)?,
            other => {
                warn!(
                    "the stream's consumer failed ({}); consuming again",
                    describe(other)
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
                consumer = Some(m.log.consume(m.node.world().tick() + 1).await?);
            }
        }
    }
    m.last_record_at = std::time::Instant::now();
    if last == 0 && m.node.has_local() {
        // A new world: the rules' start commands (NPCs) go in as a batch.
        m.start_batch().await;
    }
    let socket = UdpSocket::bind(opts.addr).await.map_err(ClusterError::Io)?;
    crate::serve::socket_buffers::size_and_report(&socket, opts.max_clients)
        .map_err(ClusterError::Io)?;
    let local = socket.local_addr().map_err(ClusterError::Io)?;
    match &opts.key {
        // As `lockgrid serve --key`: tokens must name this node's address.
        Some(key) => m
            .node
            .set_security(lockgrid_protocol::ServerSecurity::new(
                key.clone(),
                lockgrid_protocol::token::DEFAULT_PROTOCOL_ID,
                vec![local],
                unix_secs_at_zero,
            ))
            .map_err(ClusterError::Node)?,
        None => warn!("no --key: connections are unauthenticated and unencrypted; anyone who can reach {local} can connect, and a client's name (its Hello token) is its unchecked claim to an entity on every node: anyone who knows a name can claim it (use a key in production)"),
    }
    info!(addr = %local, tick = m.node.world().tick(), "serving");
    on_ready(local);

    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
    let mut drops = crate::serve::socket_buffers::Drops::of(&socket);
    let mut drops_read_at = std::time::Instant::now();
    let mut sub: Option<async_nats::Subscriber> = None;
    let mut buf = vec![0u8; MAX_MTU + 1];
    let started = std::time::Instant::now();
    let result = loop {
        let wake = tokio::select! {
            biased;
            r = next_record(&mut consumer) => Wake::Record(Box::new(r)),
            d = done_rx.recv() => Wake::Done(d),
            f = next_forward(&mut sub) => Wake::Forward(f),
            _ = ticker.tick() => Wake::Tick,
            _ = housekeeping.tick() => Wake::Housekeeping,
            o = outcome_rx.recv() => Wake::Outcome(o),
            r = socket.recv_from(&mut buf) => Wake::Datagram(r),
        };
        let step = match wake {
            Wake::Record(r) => match *r {
                Some(Ok(msg)) => m.on_message(msg).map(|()| m.after_tick(&socket)),
                other => {
                    // Made again in the background; the loop goes on.
                    warn!(
                        "the stream's consumer failed ({}); consuming again",
                        describe(other)
                    );
                    consumer = None;
                    m.request_consumer();
                    Ok(())
                }
            },
            Wake::Done(Some(Done::Consumer {
                gen,
                from,
                consumer: made,
            })) => {
                m.consuming = false;
                match made {
                    _ if gen != m.consumer_gen || m.rebuilding.is_some() => {}
                    None => {}
                    Some(Ok(c)) => {
                        debug!(from, "consuming the stream");
                        // A consumer from before a tick this node appended
                        // since is fine: records at or below the node's
                        // tick are its own and recognised.
                        consumer = Some(*c);
                        m.last_record_at = std::time::Instant::now();
                    }
                    Some(Err(e)) => {
                        warn!(from, "cannot consume the stream yet ({e}); trying again");
                        m.consume_retry_at = std::time::Instant::now() + RETRY_AFTER;
                    }
                }
                Ok(())
            }
            Wake::Done(Some(Done::Records { gen, from, records })) => {
                m.reading = false;
                let mut applied = Ok(());
                if gen == m.consumer_gen
                    && m.rebuilding.is_none()
                    && from == m.node.world().tick() + 1
                    && !records.is_empty()
                {
                    debug!(
                        from,
                        n = records.len(),
                        "records read from the stream's replicas"
                    );
                    for (seq, payload, batches) in &records {
                        applied = m.on_record(*seq, payload, batches.as_deref());
                        if applied.is_err() {
                            break;
                        }
                    }
                    if applied.is_ok() {
                        m.after_tick(&socket);
                        if !m.consuming {
                            // The consumer did not deliver them: another.
                            warn!(
                                from,
                                n = records.len(),
                                "no record from the consumer though the stream was ahead: read them from its replicas; consuming again"
                            );
                            m.request_consumer();
                        }
                    }
                }
                applied
            }
            Wake::Done(Some(Done::Rebuilt { tick, world })) => match world {
                Ok(world) => {
                    m.node.replace_world(*world);
                    m.rebuilding = None;
                    info!(tick, "world rebuilt from the stream: following");
                    consumer = None;
                    m.request_consumer();
                    Ok(())
                }
                // NATS not answering yet: try again, the loop going on.
                Err(e @ ClusterError::Nats { .. }) => {
                    warn!(tick, "cannot rebuild the world yet ({e}); trying again");
                    m.rebuilding = Some((tick, false));
                    m.rebuild_retry_at = std::time::Instant::now() + RETRY_AFTER;
                    Ok(())
                }
                // The stream itself is unusable.
                Err(e) => Err(e),
            },
            Wake::Done(None) => Ok(()),
            Wake::Datagram(Ok((n, from))) => {
                m.on_datagram(from, &buf[..n]);
                Ok(())
            }
            Wake::Datagram(Err(e)) => {
                debug!("receive: {e}");
                Ok(())
            }
            Wake::Forward(Some(msg)) => {
                m.on_forward(msg).await;
                Ok(())
            }
            Wake::Forward(None) => {
                sub = None;
                Ok(())
            }
            Wake::Tick => {
                if m.leading() {
                    match m.propose().await {
                        Ok(true) => {
                            m.after_tick(&socket);
                            Ok(())
                        }
                        Ok(false) => {
                            // Not appended: the world is being rebuilt;
                            // a consumer is made again once it is.
                            sub = None;
                            consumer = None;
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    Ok(())
                }
            }
            Wake::Housekeeping => {
                if stop.load(Ordering::Relaxed)
                    || opts.stop_after.is_some_and(|d| started.elapsed() >= d)
                    || opts
                        .stop_after_ticks
                        .is_some_and(|n| m.summary.appended + m.summary.followed >= n)
                {
                    break Ok(());
                }
                let now = std::time::Instant::now();
                if m.log.client.connection_state() == async_nats::connection::State::Connected {
                    m.nats_lost_since = None;
                } else if now.duration_since(*m.nats_lost_since.get_or_insert(now)) >= NATS_LOST {
                    // Ends below with a goodbye to every client.
                    break Err(ClusterError::Nats {
                        what: "reach NATS",
                        detail: format!(
                            "no connection to any NATS server for {} s",
                            NATS_LOST.as_secs()
                        ),
                    });
                }
                let kept = m.housekeeping(&mut sub).await;
                let now = std::time::Instant::now();
                if now.duration_since(drops_read_at) >= DROPS_EVERY {
                    drops_read_at = now;
                    m.summary.socket_drops = drops.read();
                    if let Some(total) = m.summary.socket_drops {
                        m.metrics.record_socket_drops(total);
                    }
                }
                if let Some((tick, false)) = m.rebuilding {
                    if now >= m.rebuild_retry_at {
                        m.start_rebuild(tick);
                    }
                } else if m.rebuilding.is_none() {
                    if consumer.is_none() && !m.consuming && now >= m.consume_retry_at {
                        m.request_consumer();
                    }
                    if !m.reading && m.last_record_at.elapsed() > STALL {
                        // A consumer whose server died can stay silent, and
                        // making a new one can take seconds: when nothing
                        // came for a while, read what the stream holds
                        // beyond this node's tick from its replicas.
                        m.last_record_at = now;
                        m.start_read();
                    }
                }
                kept
            }
            Wake::Outcome(Some((seq, ok))) => {
                m.on_outcome(seq, ok);
                Ok(())
            }
            Wake::Outcome(None) => Ok(()),
        };
        if let Err(e) = step {
            break Err(e);
        }
    };
    drop(sub);
    // Tell every client, however this node ends (a stop, or NATS lost
    // for good): a goodbye (reason shutting_down) acknowledges nothing
    // (its ack fields are 0, and the connections are gone before anything
    // else could be sent), so an input still awaiting its tick is never
    // taken for acknowledged, and a client can move to another node at once.
    m.node.shutdown();
    m.flush(&socket);
    if let Some(lead) = m.lead.take() {
        m.log.release_lease(lead.revision).await;
    }
    let _ = m.digests.flush();
    m.summary.tick = m.node.world().tick();
    m.summary.socket_drops = drops.read();
    result.map(|()| m.summary)
}

/// One line on stdout for scripts and tests (a closed stdout is no reason to stop).
fn say(what: core::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "lockgrid serve: {what}");
    let _ = out.flush();
}

fn describe(next: Next) -> String {
    match next {
        Some(Err(e)) => e,
        _ => "it ended".into(),
    }
}

async fn next_record(consumer: &mut Option<Ordered>) -> Next {
    match consumer {
        Some(c) => c.next().await.map(|r| r.map_err(|e| e.to_string())),
        None => std::future::pending().await,
    }
}

async fn next_forward(sub: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    match sub {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

impl Member {
    fn leading(&self) -> bool {
        self.rebuilding.is_none()
            && self
                .lead
                .as_ref()
                .is_some_and(|l| self.node.world().tick() >= l.ready_at)
    }

    /// Holds a datagram until the node may take input again.
    fn hold(&mut self, from: SocketAddr, bytes: &[u8]) {
        if self.held.len() >= MAX_HELD_DATAGRAMS {
            self.dropped_datagrams += 1;
            return;
        }
        self.held.push_back((from, bytes.to_vec()));
    }

    /// One record from the stream's consumer.
    fn on_message(&mut self, msg: async_nats::jetstream::Message) -> Result<(), ClusterError> {
        let seq = msg
            .info()
            .map_err(|e| ClusterError::nats("read a record's sequence", e))?
            .stream_sequence;
        let batches = msg
            .headers
            .as_ref()
            .and_then(|h| h.get(super::record::BATCHES_HEADER))
            .map(|v| v.as_str().to_owned());
        self.on_record(seq, &msg.payload, batches.as_deref())
    }

    /// One record from the stream (its sequence, bytes and batch header):
    /// decoded, checked, stepped and released.
    fn on_record(
        &mut self,
        seq: u64,
        payload: &Bytes,
        batches: Option<&str>,
    ) -> Result<(), ClusterError> {
        self.last_record_at = std::time::Instant::now();
        let tick = self.node.world().tick();
        if seq <= tick {
            // This node's own append coming back: it must be the very bytes.
            if let Some((t, bytes)) = &self.appended {
                if *t == seq && bytes != payload {
                    return Err(ClusterError::Corrupt {
                        seq,
                        what: format!(
                            "tick {seq} in the stream is not the record this node appended"
                        ),
                    });
                }
            }
            return Ok(());
        }
        if seq != tick + 1 {
            return Err(ClusterError::OutOfSequence {
                seq,
                expected: tick + 1,
            });
        }
        let record = decode_record(seq, payload).map_err(|f| ClusterError::BadRecord {
            seq,
            fault: f.to_string(),
        })?;
        let batches = match batches {
            Some(v) => decode_batches(v).map_err(|f| ClusterError::BadRecord {
                seq,
                fault: f.to_string(),
            })?,
            None => Vec::new(),
        };
        let began = std::time::Instant::now();
        let report = self.node.step_commands(&record.commands);
        if report.digest != record.digest {
            self.node.stop();
            let path = write_desync_report(&self.data_dir, seq, &record, report.digest);
            return Err(ClusterError::Desync {
                seq,
                stream: record.digest,
                local: report.digest,
                report: path,
            });
        }
        self.summary.followed += 1;
        self.commit(&report, &batches);
        self.record_metrics(Some(began.elapsed()));
        Ok(())
    }

    /// A tick is in the stream and stepped: release it, note which batches it took.
    fn commit(&mut self, report: &TickReport, batches: &[(u32, u64)]) {
        self.node.release_tick(self.clock.now(), report);
        let _ = writeln!(self.digests, "{} {:016x}", report.tick, report.digest);
        let _ = self.digests.flush();
        for &(slot, seq) in batches {
            let last = self.included.entry(slot).or_insert(0);
            *last = (*last).max(seq);
            if let Some(p) = self.pending.get_mut(&slot) {
                p.retain(|s, _| *s > seq);
                if p.is_empty() {
                    self.pending.remove(&slot);
                }
            }
        }
        let mine = self.included.get(&self.slot).copied().unwrap_or(0);
        while self.in_flight.front().is_some_and(|f| f.seq <= mine) {
            self.in_flight.pop_front();
        }
    }

    /// After a tick: when no batch of ours awaits a tick, send what the
    /// node holds for clients, then hand it the held datagrams and
    /// forward what they became.
    fn after_tick(&mut self, socket: &UdpSocket) {
        if !self.in_flight.is_empty() {
            // A batch missed this tick: take no new input until it is in,
            // so that the next tick can release everything.
            self.window_until = None;
            return;
        }
        self.flush(socket);
        let now = self.clock.now();
        while let Some((from, bytes)) = self.held.pop_front() {
            self.node.handle_datagram(now, from, &bytes);
        }
        self.node.handle_timers(now);
        if self.node.has_local() {
            self.send_batch();
        }
        self.window_until = Some(std::time::Instant::now() + self.interval * 3 / 5);
    }

    /// A datagram: to the node at once, and its commands to the leader,
    /// while the window after a tick is open; held otherwise.
    fn on_datagram(&mut self, from: SocketAddr, bytes: &[u8]) {
        if self.in_flight.len() < MAX_IN_FLIGHT
            && self
                .window_until
                .is_some_and(|t| std::time::Instant::now() < t)
        {
            self.node.handle_datagram(self.clock.now(), from, bytes);
            if self.node.has_local() {
                self.send_batch();
            }
        } else {
            self.hold(from, bytes);
        }
    }

    /// The rules' start commands of a new world, forwarded as a first batch.
    async fn start_batch(&mut self) {
        self.send_batch();
    }

    fn send_batch(&mut self) {
        let commands = self.node.take_local();
        let batch = Batch {
            slot: self.slot,
            seq: self.next_batch,
            commands,
        };
        self.next_batch += 1;
        let bytes = Bytes::from(batch.encode());
        let seq = batch.seq;
        self.in_flight.push_back(InFlight {
            seq,
            forwarded: false,
            bytes,
            commands: batch.commands,
            resend_at: std::time::Instant::now(),
        });
        self.forward(seq);
    }

    /// Sends the batch in flight to the leader (or keeps it, when leading).
    fn forward(&mut self, seq: u64) {
        let Some(f) = self.in_flight.iter_mut().find(|f| f.seq == seq) else {
            return;
        };
        if self.lead.is_some() {
            let (slot, seq, commands) = (self.slot, f.seq, f.commands.clone());
            f.resend_at = std::time::Instant::now() + Duration::from_secs(3600);
            self.take_batch(slot, seq, commands);
            return;
        }
        f.resend_at = std::time::Instant::now() + Duration::from_millis(500);
        self.batches_forwarded += 1;
        if !f.forwarded {
            f.forwarded = true;
            self.commands_forwarded += f.commands.len() as u64;
        }
        let client = self.log.client.clone();
        let subject = self.log.names.input.clone();
        let tx = self.outcome_tx.clone();
        let (seq, bytes) = (f.seq, f.bytes.clone());
        tokio::spawn(async move {
            let ok = match tokio::time::timeout(
                Duration::from_millis(400),
                client.request(subject, bytes),
            )
            .await
            {
                Ok(Ok(reply)) => reply.payload.as_ref() == b"ok",
                _ => false,
            };
            let _ = tx.send((seq, ok)).await;
        });
    }

    fn on_outcome(&mut self, seq: u64, ok: bool) {
        if let Some(f) = self.in_flight.iter_mut().find(|f| f.seq == seq) {
            {
                let wait = if ok {
                    // Taken; sent again only if no tick names it for a while
                    // (the leader may die before appending it).
                    Duration::from_millis(1000)
                } else {
                    Duration::from_millis(50)
                };
                f.resend_at = std::time::Instant::now() + wait;
            }
        }
    }

    /// The leader keeps a batch for the next tick, once.
    fn take_batch(&mut self, slot: u32, seq: u64, commands: Vec<Command>) -> bool {
        if seq <= self.included.get(&slot).copied().unwrap_or(0) {
            return true; // a duplicate of one already in a tick
        }
        if !self.pending.contains_key(&slot) && self.pending.len() >= MAX_PENDING_NODES {
            return false;
        }
        let p = self.pending.entry(slot).or_default();
        if p.len() >= MAX_PENDING_BATCHES && !p.contains_key(&seq) {
            return false;
        }
        p.insert(seq, commands);
        true
    }

    async fn on_forward(&mut self, msg: async_nats::Message) {
        let answer: &'static [u8] = match Batch::decode(&msg.payload) {
            Ok(b) => {
                if self.lead.is_some() && self.take_batch(b.slot, b.seq, b.commands) {
                    b"ok"
                } else {
                    b"busy"
                }
            }
            Err(fault) => {
                warn!("a forwarded batch does not decode: {fault}");
                b"bad"
            }
        };
        if let Some(reply) = msg.reply {
            let _ = self
                .log
                .client
                .publish(reply, Bytes::from_static(answer))
                .await;
        }
    }

    /// Appends the next tick. `Ok(false)`: the append failed or lost, this
    /// node no longer leads and its world was rebuilt from the stream.
    async fn propose(&mut self) -> Result<bool, ClusterError> {
        let began = std::time::Instant::now();
        let tick = self.node.world().tick() + 1;
        let mut commands = self.node.server_commands(tick);
        let mut taken = Vec::new();
        let mut size = payload_len(&commands);
        'nodes: for (&slot, batches) in &self.pending {
            let mut next = self.included.get(&slot).copied().unwrap_or(0) + 1;
            let first = next;
            while let Some(cmds) = batches.get(&next) {
                let more = payload_len(cmds) - payload_len(&[]);
                if size + more > MAX_RECORD.min(MAX_PAYLOAD) {
                    if next > first {
                        taken.push((slot, next - 1));
                    }
                    break 'nodes;
                }
                size += more;
                commands.extend_from_slice(cmds);
                next += 1;
            }
            if next > first {
                taken.push((slot, next - 1));
            }
        }
        let others: u64 = taken
            .iter()
            .filter(|(slot, _)| *slot != self.slot)
            .map(|&(slot, last)| last - self.included.get(&slot).copied().unwrap_or(0))
            .sum();
        let report = self.node.step_commands(&commands);
        let bytes = encode_tick(tick, &commands, report.digest);
        let header = encode_batches(&taken);
        let appending = std::time::Instant::now();
        let outcome = self.log.append(tick, bytes.clone(), &header).await;
        self.metrics.record_append(appending.elapsed());
        match outcome {
            Ok(Appended::Taken) => {
                self.appended = Some((tick, Bytes::from(bytes)));
                self.summary.appended += 1;
                self.appended_tick = tick;
                self.batches_taken += others;
                if let Some(lead) = &mut self.lead {
                    if !lead.announced {
                        lead.announced = true;
                        say(format_args!("leading, appended tick {tick}"));
                    }
                }
                self.commit(&report, &taken);
                if self.snapshot_every > 0 && tick.is_multiple_of(self.snapshot_every) {
                    self.snapshot();
                }
                self.record_metrics(Some(began.elapsed()));
                Ok(true)
            }
            Ok(Appended::Lost) => {
                warn!(tick, "another node appended this tick first: following");
                self.summary.lost_appends += 1;
                self.step_down().await;
                self.start_rebuild(tick - 1);
                Ok(false)
            }
            Err(e) => {
                warn!(
                    tick,
                    "append failed ({e}): not leading, rebuilding from the stream"
                );
                self.summary.lost_appends += 1;
                self.step_down().await;
                self.start_rebuild(tick - 1);
                Ok(false)
            }
        }
    }

    /// Writes a snapshot of the world to the object store, in the background.
    fn snapshot(&mut self) {
        let snapshot = self.node.world().snapshot();
        let tick = snapshot.tick;
        let bytes = match encode_snapshot(&snapshot) {
            Ok(b) => b,
            Err(e) => {
                warn!(tick, "cannot encode a snapshot: {e}");
                return;
            }
        };
        let log = self.log.clone();
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            match log.put_snapshot(tick, bytes, KEEP_SNAPSHOTS).await {
                Ok(()) => metrics.record_snapshot(true),
                Err(e) => {
                    metrics.record_snapshot(false);
                    warn!(
                        tick,
                        "cannot store a snapshot ({e}); the next snapshot tick tries again"
                    );
                }
            }
        });
    }

    async fn step_down(&mut self) {
        if let Some(lead) = self.lead.take() {
            self.log.release_lease(lead.revision).await;
            say(format_args!(
                "following at tick {}",
                self.node.world().tick()
            ));
        }
        self.pending.clear();
        // Our own batches go to whoever leads now.
        for f in &mut self.in_flight {
            f.resend_at = std::time::Instant::now();
        }
    }

    /// Starts putting the world back at `tick` from the snapshots and the
    /// stream, in the background, after a tick this node stepped was not
    /// appended. Until it is done the node applies no record and does not
    /// take the lease; a consumer being made meanwhile is not used.
    fn start_rebuild(&mut self, tick: u64) {
        self.rebuilding = Some((tick, true));
        self.consumer_gen += 1;
        let config = *self.node.world().config();
        let log = self.log.clone();
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let world = load_world(&log, &config, tick).await.map(Box::new);
            let _ = tx.send(Done::Rebuilt { tick, world }).await;
        });
    }

    /// Starts making a consumer of the stream from the next tick, in the
    /// background (one attempt, bounded).
    fn request_consumer(&mut self) {
        self.consuming = true;
        let (gen, from) = (self.consumer_gen, self.node.world().tick() + 1);
        let log = self.log.clone();
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let made = tokio::time::timeout(CONSUME_CALL, log.consume_once(from))
                .await
                .unwrap_or_else(|_| {
                    Err(ClusterError::Nats {
                        what: "create a consumer",
                        detail: format!("no answer within {CONSUME_CALL:?}"),
                    })
                });
            let consumer = Some(made.map(Box::new));
            let _ = tx
                .send(Done::Consumer {
                    gen,
                    from,
                    consumer,
                })
                .await;
        });
    }

    /// Starts reading, in the background, the records after this node's
    /// tick that the stream holds, straight from its replicas (a direct get
    /// needs no consumer to place and no stream leader): what a silent
    /// consumer did not deliver. Answered with [`Done::Records`], empty
    /// when the stream is not ahead or does not answer.
    fn start_read(&mut self) {
        self.reading = true;
        let (gen, from) = (self.consumer_gen, self.node.world().tick() + 1);
        let log = self.log.clone();
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let records = match log.last_tick_now().await {
                Ok(last) if last >= from => {
                    let read = tokio::time::timeout(CONSUME_CALL, log.read_direct(from, last));
                    read.await.unwrap_or_default()
                }
                Ok(_) => Vec::new(),
                Err(e) => {
                    debug!("the stream's state: {e}");
                    Vec::new()
                }
            };
            let _ = tx.send(Done::Records { gen, from, records }).await;
        });
    }

    async fn housekeeping(
        &mut self,
        sub: &mut Option<async_nats::Subscriber>,
    ) -> Result<(), ClusterError> {
        let now = std::time::Instant::now();
        if let Some(lead) = &self.lead {
            if now.duration_since(lead.renewed) >= self.lease_time / 4 {
                match self.log.renew_lease(&self.holder, lead.revision).await {
                    Some(revision) => {
                        if let Some(lead) = &mut self.lead {
                            lead.revision = revision;
                            lead.renewed = now;
                        }
                    }
                    None => {
                        warn!("lost the lease: following");
                        *sub = None;
                        self.step_down().await;
                    }
                }
            }
        } else if self.rebuilding.is_some() {
            // The world is not at a tick of the stream: lead only once it is.
        } else if let Some(revision) = self.log.take_lease(&self.holder).await {
            match self.log.last_tick_now().await {
                Ok(ready_at) => {
                    match self
                        .log
                        .client
                        .subscribe(self.log.names.input.clone())
                        .await
                    {
                        Ok(s) => {
                            info!(ready_at, "took the lease");
                            *sub = Some(s);
                            self.summary.leads += 1;
                            self.lead = Some(Lead {
                                revision,
                                renewed: now,
                                ready_at,
                                announced: false,
                            });
                            for f in &mut self.in_flight {
                                f.resend_at = now;
                            }
                        }
                        Err(e) => {
                            warn!("cannot listen for forwarded input: {e}");
                            self.log.release_lease(revision).await;
                        }
                    }
                }
                Err(e) => {
                    warn!("took the lease but cannot read the stream ({e}); giving it back");
                    self.log.release_lease(revision).await;
                }
            }
        }
        if self.lead.is_some() && sub.is_none() {
            // The subscription ended under a held lease: listen again.
            match self
                .log
                .client
                .subscribe(self.log.names.input.clone())
                .await
            {
                Ok(s) => *sub = Some(s),
                Err(e) => warn!("cannot listen for forwarded input: {e}"),
            }
        }
        let due: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|f| now >= f.resend_at)
            .map(|f| f.seq)
            .collect();
        for seq in due {
            self.forward(seq);
        }
        let t = self.clock.now();
        self.node.handle_timers(t);
        self.record_metrics(None);
        Ok(())
    }

    /// Hands the node's counters and the cluster's figures to the metrics;
    /// `took`: the work of a tick just applied or appended.
    fn record_metrics(&mut self, took: Option<Duration>) {
        let node = &self.node;
        let (before, now) = self.readings.read(|s| node.stats_into(s));
        let entities = node.world().len();
        match took {
            Some(t) => self
                .metrics
                .record_tick(t, t > self.interval, before, now, entities),
            None => self.metrics.record_node(before, now, entities),
        }
        self.metrics.record_cluster(&ClusterFigures {
            leading: self.lead.is_some(),
            appended_tick: self.appended_tick,
            applied_tick: self.node.world().tick(),
            appended: self.summary.appended,
            followed: self.summary.followed,
            leads: self.summary.leads,
            lost_appends: self.summary.lost_appends,
            batches_forwarded: self.batches_forwarded,
            commands_forwarded: self.commands_forwarded,
            batches_taken: self.batches_taken,
        });
    }

    /// Sends every datagram the node releases.
    fn flush(&mut self, socket: &UdpSocket) {
        let mut out = [0u8; MAX_MTU];
        let now = self.clock.now();
        while let Ok(Some(t)) = self.node.poll_transmit(now, &mut out) {
            if let Err(e) = socket.try_send_to(&out[..t.len], t.destination) {
                debug!(to = %t.destination, "send failed: {e}");
            }
        }
    }
}

/// The newest snapshot at or before `last` that decodes, with the stream's
/// record of its tick; `None` when there is none (start from tick 0).
async fn newest_snapshot(
    log: &ClusterLog,
    config: &Config,
    last: u64,
) -> Option<(lockgrid_kernel::Snapshot, Record)> {
    let ticks = match log.snapshot_ticks().await {
        Ok(t) => t,
        Err(e) => {
            warn!("cannot list the snapshots ({e}); starting from the stream's first tick");
            return None;
        }
    };
    for tick in ticks.into_iter().rev().filter(|&t| t <= last && t > 0) {
        let snapshot = match log.get_snapshot(tick).await.map(|b| decode_snapshot(&b)) {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                warn!(tick, "snapshot passed over: {e}");
                continue;
            }
            Err(e) => {
                warn!(tick, "snapshot passed over: {e}");
                continue;
            }
        };
        if snapshot.config != *config {
            warn!(tick, "snapshot passed over: another world's config");
            continue;
        }
        match log.get(tick).await {
            Ok((record, _, _)) => return Some((snapshot, record)),
            Err(e) => warn!(tick, "snapshot passed over: its tick's record: {e}"),
        }
    }
    None
}

/// The world at `tick`, from the newest usable snapshot and the stream.
pub(crate) async fn load_world(
    log: &ClusterLog,
    config: &Config,
    tick: u64,
) -> Result<World, ClusterError> {
    let mut world = match newest_snapshot(log, config, tick).await {
        Some((s, record)) if record.digest == s.digest => match World::restore(&s) {
            Ok(w) => w,
            Err(e) => {
                warn!(tick = s.tick, "snapshot refused by the kernel: {e}");
                World::new(*config).map_err(|e| ClusterError::Options(e.to_string()))?
            }
        },
        _ => World::new(*config).map_err(|e| ClusterError::Options(e.to_string()))?,
    };
    let mut events: Vec<Event> = Vec::new();
    for seq in world.tick() + 1..=tick {
        let (record, _, _) = log.get(seq).await?;
        events.clear();
        let report = world.step(&record.commands, &mut events);
        if report.digest != record.digest {
            return Err(ClusterError::Desync {
                seq,
                stream: record.digest,
                local: report.digest,
                report: None,
            });
        }
    }
    Ok(world)
}

/// Writes `desync-<tick>.txt` into the data folder: the tick, both
/// digests, the tick's commands. Returns its path when written.
fn write_desync_report(dir: &Path, seq: u64, record: &Record, local: u64) -> Option<PathBuf> {
    let path = dir.join(format!("desync-{:020}.txt", record.tick));
    let mut text = format!(
        "desync at tick {} (stream sequence {seq})\nstream digest {:016x}\nlocal digest  {:016x}\ncommands ({}):\n",
        record.tick,
        record.digest,
        local,
        record.commands.len()
    );
    for c in &record.commands {
        text.push_str(&format!("  {c:?}\n"));
    }
    match std::fs::write(&path, text) {
        Ok(()) => Some(path),
        Err(e) => {
            warn!("cannot write the desync report {}: {e}", path.display());
            None
        }
    }
}
