//! The world's log on NATS JetStream: one stream of tick records, a
//! key-value bucket for the world's config and node slots, a key-value
//! bucket holding the leader's lease, and an object store of snapshots.
//!
//! | what | name |
//! | --- | --- |
//! | stream of ticks (sequence = tick) | `LOCKGRID_<world>`, subject `lockgrid.<world>.ticks` |
//! | config and node slots | key-value bucket `LOCKGRID_<world>_META` |
//! | leader lease | key-value bucket `LOCKGRID_<world>_LEASE`, key `leader`, entries expire after the lease time |
//! | snapshots | object store `LOCKGRID_<world>_SNAP`, objects `snapshot-<tick, 20 digits>` |
//! | forwarded input | subject `lockgrid.<world>.input` (request/reply, only the leader listens) |

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use lockgrid_kernel::Config;
use tokio::io::AsyncReadExt;

use super::record::{decode_record, BATCHES_HEADER};
use super::ClusterError;
use crate::journal::format::{decode_header, encode_header, HEADER_LEN};
use crate::journal::Record;

/// Longest a world name may be.
pub const MAX_WORLD_NAME: usize = 64;

/// Largest snapshot object read back (bounded: a bucket is not trusted).
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 30;

/// Checks a world name: 1 to 64 ASCII letters, digits, `-` or `_`.
pub fn check_world_name(name: &str) -> Result<(), ClusterError> {
    if name.is_empty()
        || name.len() > MAX_WORLD_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ClusterError::Options(format!(
            "world name {name:?}: 1 to {MAX_WORLD_NAME} ASCII letters, digits, '-' or '_'"
        )));
    }
    Ok(())
}

/// The names of one world's stream, subjects and buckets.
#[derive(Clone, Debug)]
pub struct Names {
    /// The stream.
    pub stream: String,
    /// The subject of tick records.
    pub ticks: String,
    /// The subject of forwarded input.
    pub input: String,
    /// The config and slots bucket.
    pub meta: String,
    /// The lease bucket.
    pub lease: String,
    /// The snapshot object store.
    pub snapshots: String,
}

impl Names {
    /// The names for world `world` (already checked).
    pub fn new(world: &str) -> Names {
        Names {
            stream: format!("LOCKGRID_{world}"),
            ticks: format!("lockgrid.{world}.ticks"),
            input: format!("lockgrid.{world}.input"),
            meta: format!("LOCKGRID_{world}_META"),
            lease: format!("LOCKGRID_{world}_LEASE"),
            snapshots: format!("LOCKGRID_{world}_SNAP"),
        }
    }
}

/// What an append came to.
#[derive(Debug)]
pub enum Appended {
    /// The stream took the record at the expected sequence.
    Taken,
    /// Another record is already at that sequence: someone else leads.
    Lost,
}

/// A connection to one world's log.
#[derive(Clone)]
pub struct ClusterLog {
    /// The NATS client (also for forwarded input).
    pub client: async_nats::Client,
    js: jetstream::Context,
    stream: stream::Stream,
    meta: kv::Store,
    lease: kv::Store,
    snapshots: object_store::ObjectStore,
    /// The names.
    pub names: Names,
    /// The replicas the stream was made with.
    pub replicas: usize,
}

/// Connects to any of `urls` (reconnecting on its own later).
pub async fn connect(urls: &[String]) -> Result<async_nats::Client, ClusterError> {
    let addrs: Vec<async_nats::ServerAddr> = urls
        .iter()
        .map(|u| {
            u.parse()
                .map_err(|e| ClusterError::Options(format!("NATS address {u}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .request_timeout(Some(Duration::from_secs(2)))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connect(addrs.as_slice())
        .await
        .map_err(|e| ClusterError::nats("connect", e))
}

impl ClusterLog {
    /// Opens (creating when missing) world `world`'s stream and buckets,
    /// with `min(3, servers in the NATS cluster)` replicas; `named` is how
    /// many servers the caller was given.
    pub async fn open(
        client: async_nats::Client,
        named: usize,
        world: &str,
        lease_time: Duration,
    ) -> Result<ClusterLog, ClusterError> {
        check_world_name(world)?;
        let names = Names::new(world);
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(2))
            .build(client.clone());
        // min(3, cluster size): the servers named, or the client URLs a
        // server gossips for its cluster (itself included), whichever is
        // more. Counting only the gossip would make a stream of one replica
        // when the first node starts before the routes are up.
        let servers = client.server_info().connect_urls.len().max(named).max(1);
        let replicas = servers.min(3);
        // A JetStream cluster that is still electing its meta leader refuses
        // for a few seconds: keep trying for a while.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let stream_config = stream::Config {
                name: names.stream.clone(),
                subjects: vec![names.ticks.clone()],
                storage: stream::StorageType::File,
                num_replicas: replicas,
                allow_direct: true,
                ..Default::default()
            };
            let stream = match js.get_or_create_stream(stream_config).await {
                Ok(s) => s,
                Err(e) if std::time::Instant::now() < deadline => {
                    tracing::debug!("the stream is not ready yet: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                Err(e) => return Err(ClusterError::nats("create the stream", e)),
            };
            let replicas = stream.cached_info().config.num_replicas.max(1);
            let meta = retry_cluster(|| {
                get_or_create_kv(
                    &js,
                    kv::Config {
                        bucket: names.meta.clone(),
                        history: 1,
                        storage: stream::StorageType::File,
                        num_replicas: replicas,
                        ..Default::default()
                    },
                )
            })
            .await?;
            let lease = retry_cluster(|| {
                get_or_create_kv(
                    &js,
                    kv::Config {
                        bucket: names.lease.clone(),
                        history: 1,
                        max_age: lease_time,
                        storage: stream::StorageType::File,
                        num_replicas: replicas,
                        ..Default::default()
                    },
                )
            })
            .await?;
            let snapshots = retry_cluster(|| async {
                match js.get_object_store(&names.snapshots).await {
                    Ok(s) => Ok(s),
                    Err(_) => js
                        .create_object_store(object_store::Config {
                            bucket: names.snapshots.clone(),
                            storage: stream::StorageType::File,
                            num_replicas: replicas,
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| ClusterError::nats("create the snapshot store", e)),
                }
            })
            .await?;
            return Ok(ClusterLog {
                client,
                js,
                stream,
                meta,
                lease,
                snapshots,
                names,
                replicas,
            });
        }
    }

    /// The world's config: the one stored, or `proposed` stored now when
    /// the world is new (the first node to store it wins).
    pub async fn world_config(&self, proposed: &Config) -> Result<(Config, bool), ClusterError> {
        let header = Bytes::copy_from_slice(&encode_header(proposed));
        // Create, else read: a create that failed for want of an answer is
        // tried again until one of the two works.
        let created = std::cell::Cell::new(false);
        let stored = retry(|| async {
            if self.meta.create("config", header.clone()).await.is_ok() {
                created.set(true);
            }
            match self.meta.get("config").await {
                Ok(Some(v)) => Ok(v),
                Ok(None) => Err("the world's config key is missing".to_owned()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
        .map_err(|e| ClusterError::nats("read the world config", e))?;
        Ok((decode_world_config(&stored)?, created.get()))
    }

    /// The world's config if one is stored, without storing any.
    pub async fn stored_world_config(&self) -> Result<Option<Config>, ClusterError> {
        let stored = retry(|| async { self.meta.get("config").await.map_err(|e| e.to_string()) })
            .await
            .map_err(|e| ClusterError::nats("read the world config", e))?;
        stored.map(|v| decode_world_config(&v)).transpose()
    }

    /// A slot number no other node of this world has had (1, 2, 3, …).
    pub async fn claim_slot(&self) -> Result<u32, ClusterError> {
        for _ in 0..100 {
            let entry = retry(|| self.meta.entry("slots"))
                .await
                .map_err(|e| ClusterError::nats("read the node slots", e))?;
            let (last, revision) = match entry {
                Some(e) if e.operation == kv::Operation::Put => (
                    std::str::from_utf8(&e.value)
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok())
                        .unwrap_or(0),
                    Some(e.revision),
                ),
                _ => (0, None),
            };
            let next = last.checked_add(1).ok_or_else(|| {
                ClusterError::Options("this world has used every node slot".into())
            })?;
            let value = Bytes::from(next.to_string());
            let ok = match revision {
                Some(r) => self.meta.update("slots", value, r).await.is_ok(),
                None => self.meta.create("slots", value).await.is_ok(),
            };
            if ok {
                return Ok(next);
            }
        }
        Err(ClusterError::Options(
            "could not claim a node slot (too much contention)".into(),
        ))
    }

    /// The stream's last sequence: the last appended tick.
    pub async fn last_tick(&self) -> Result<u64, ClusterError> {
        let info = retry(|| self.stream.get_info())
            .await
            .map_err(|e| ClusterError::nats("read the stream's state", e))?;
        Ok(info.state.last_sequence)
    }

    /// [`last_tick`](Self::last_tick), asked once (no retries) and given
    /// up after 500 ms: for a loop that must not block. While the stream
    /// re-elects, the node that took the lease asks again every 100 ms
    /// instead of every 2 s (the JetStream request timeout), so it leads
    /// sooner once the stream answers.
    pub async fn last_tick_now(&self) -> Result<u64, ClusterError> {
        let info = tokio::time::timeout(LEASE_CALL, self.stream.get_info())
            .await
            .map_err(|_| ClusterError::nats("read the stream's state", "timed out"))?
            .map_err(|e| ClusterError::nats("read the stream's state", e))?;
        Ok(info.state.last_sequence)
    }

    /// Appends tick `tick`'s record, on condition that the stream's last
    /// sequence is `tick - 1`.
    pub async fn append(
        &self,
        tick: u64,
        record: Vec<u8>,
        batches: &str,
    ) -> Result<Appended, ClusterError> {
        let mut publish = jetstream::message::PublishMessage::build()
            .payload(Bytes::from(record))
            .expected_last_sequence(tick - 1);
        if !batches.is_empty() {
            publish = publish.header(BATCHES_HEADER, batches);
        }
        let ack = self
            .js
            .send_publish(self.names.ticks.clone(), publish)
            .await
            .map_err(|e| ClusterError::nats("append", e))?
            .await;
        match ack {
            Ok(ack) if ack.sequence == tick => Ok(Appended::Taken),
            Ok(ack) => Err(ClusterError::Corrupt {
                seq: ack.sequence,
                what: format!("the stream took tick {tick} at sequence {}", ack.sequence),
            }),
            Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
                Ok(Appended::Lost)
            }
            Err(e) => Err(ClusterError::nats("append", e)),
        }
    }

    /// The record at `seq`, its raw bytes and its batch header value.
    pub async fn get(&self, seq: u64) -> Result<(Record, Bytes, String), ClusterError> {
        // From any replica first (a direct get answers while the stream
        // elects a leader), else from the stream's leader.
        let m = retry(|| async {
            match tokio::time::timeout(DIRECT_CALL, self.stream.direct_get(seq)).await {
                Ok(Ok(m)) if m.sequence == seq => Ok(m),
                _ => self
                    .stream
                    .get_raw_message(seq)
                    .await
                    .map_err(|e| e.to_string()),
            }
        })
        .await
        .map_err(|e| ClusterError::nats("read a record", e))?;
        let record = decode_record(seq, &m.payload).map_err(|fault| ClusterError::BadRecord {
            seq,
            fault: fault.to_string(),
        })?;
        let batches = m
            .headers
            .get(BATCHES_HEADER)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        Ok((record, m.payload, batches))
    }

    /// Records `from..=to` as any replica of the stream has them (direct
    /// gets: no consumer, no stream leader involved), each asked once:
    /// (sequence, bytes, batch header), stopping at the first one not
    /// answered; at most [`MAX_DIRECT_READ`] records.
    pub async fn read_direct(&self, from: u64, to: u64) -> Vec<(u64, Bytes, Option<String>)> {
        let mut out = Vec::new();
        for seq in from..=to.min(from.saturating_add(MAX_DIRECT_READ - 1)) {
            let got = tokio::time::timeout(DIRECT_CALL, self.stream.direct_get(seq)).await;
            let Ok(Ok(m)) = got else { break };
            if m.sequence != seq {
                break;
            }
            let batches = m.headers.get(BATCHES_HEADER).map(|v| v.as_str().to_owned());
            out.push((seq, m.payload, batches));
        }
        out
    }

    /// An ordered consumer of the tick records from `start` on, its
    /// creation retried for a while.
    pub async fn consume(&self, start: u64) -> Result<consumer::pull::Ordered, ClusterError> {
        retry_cluster(|| self.consume_once(start)).await
    }

    /// An ordered consumer of the tick records from `start` on, asked for
    /// once: it fails after the JetStream request timeout (2 s) when no
    /// server answers, so a caller that must stay live can try again later.
    pub async fn consume_once(&self, start: u64) -> Result<consumer::pull::Ordered, ClusterError> {
        let consumer = self
            .stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: self.names.ticks.clone(),
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: start.max(1),
                },
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::nats("create a consumer", e))?;
        consumer
            .messages()
            .await
            .map_err(|e| ClusterError::nats("consume the stream", e))
    }

    /// Tries to take the lease (free or expired): its revision when taken.
    pub async fn take_lease(&self, holder: &str) -> Option<u64> {
        let create = self.lease.create("leader", Bytes::from(holder.to_owned()));
        tokio::time::timeout(LEASE_CALL, create).await.ok()?.ok()
    }

    /// Renews a held lease: the new revision, or `None` when it was lost.
    pub async fn renew_lease(&self, holder: &str, revision: u64) -> Option<u64> {
        let update = self
            .lease
            .update("leader", Bytes::from(holder.to_owned()), revision);
        tokio::time::timeout(LEASE_CALL, update).await.ok()?.ok()
    }

    /// Gives a held lease up (at a clean stop), so another node takes over at once.
    pub async fn release_lease(&self, revision: u64) {
        let delete = self.lease.delete_expect_revision("leader", Some(revision));
        let _ = tokio::time::timeout(LEASE_CALL, delete).await;
    }

    /// Who holds the lease now, as its holder wrote it.
    pub async fn lease_holder(&self) -> Option<String> {
        let v = self.lease.get("leader").await.ok()??;
        Some(String::from_utf8_lossy(&v).into_owned())
    }

    /// Stores a snapshot file's bytes as the snapshot of `tick`, keeping the newest `keep`.
    pub async fn put_snapshot(
        &self,
        tick: u64,
        bytes: Vec<u8>,
        keep: usize,
    ) -> Result<(), ClusterError> {
        let name = snapshot_name(tick);
        self.snapshots
            .put(name.as_str(), &mut bytes.as_slice())
            .await
            .map_err(|e| ClusterError::nats("store a snapshot", e))?;
        let ticks = self.snapshot_ticks().await?;
        if ticks.len() > keep {
            for old in &ticks[..ticks.len() - keep] {
                let _ = self.snapshots.delete(snapshot_name(*old)).await;
            }
        }
        Ok(())
    }

    /// The ticks of the stored snapshots, ascending.
    pub async fn snapshot_ticks(&self) -> Result<Vec<u64>, ClusterError> {
        let mut list = self
            .snapshots
            .list()
            .await
            .map_err(|e| ClusterError::nats("list the snapshots", e))?;
        let mut ticks = Vec::new();
        while let Some(info) = list.next().await {
            let info = info.map_err(|e| ClusterError::nats("list the snapshots", e))?;
            if info.deleted {
                continue;
            }
            if let Some(t) = info
                .name
                .strip_prefix("snapshot-")
                .and_then(|t| t.parse::<u64>().ok())
            {
                ticks.push(t);
            }
            if ticks.len() > 10_000 {
                break;
            }
        }
        ticks.sort_unstable();
        ticks.dedup();
        Ok(ticks)
    }

    /// The bytes of the snapshot of `tick` (at most [`MAX_SNAPSHOT_BYTES`]).
    pub async fn get_snapshot(&self, tick: u64) -> Result<Vec<u8>, ClusterError> {
        let object = self
            .snapshots
            .get(snapshot_name(tick))
            .await
            .map_err(|e| ClusterError::nats("read a snapshot", e))?;
        let mut out = Vec::new();
        object
            .take(MAX_SNAPSHOT_BYTES as u64 + 1)
            .read_to_end(&mut out)
            .await
            .map_err(|e| ClusterError::nats("read a snapshot", e))?;
        if out.len() > MAX_SNAPSHOT_BYTES {
            return Err(ClusterError::Corrupt {
                seq: tick,
                what: format!("snapshot of tick {tick} is over {MAX_SNAPSHOT_BYTES} bytes"),
            });
        }
        Ok(out)
    }
}

/// Most records [`ClusterLog::read_direct`] reads at once.
pub const MAX_DIRECT_READ: u64 = 1000;

/// Longest one direct get may take.
const DIRECT_CALL: Duration = Duration::from_millis(1000);

/// Longest a lease call may take: the node's loop waits for it, and an
/// answer later than the lease's own time is worthless anyway.
const LEASE_CALL: Duration = Duration::from_millis(500);

/// How long a read is retried: a NATS cluster that lost a server answers
/// nothing for a few seconds while its groups elect new leaders.
const RETRY_FOR: Duration = Duration::from_secs(10);

/// Runs `op` until it succeeds or [`RETRY_FOR`] has passed; the last error.
async fn retry<T, E, F, Fut>(mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let deadline = std::time::Instant::now() + RETRY_FOR;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if std::time::Instant::now() < deadline => {
                tracing::debug!("retrying after: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// [`retry`] for calls that already say what failed.
async fn retry_cluster<T, F, Fut>(op: F) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    retry(op).await
}

fn snapshot_name(tick: u64) -> String {
    format!("snapshot-{tick:020}")
}

/// The bucket's stream is made here, as `create_key_value` would make it,
/// because that call first asks for account details in a shape that
/// nats-server 2.9 (Debian's) does not answer.
async fn get_or_create_kv(
    js: &jetstream::Context,
    config: kv::Config,
) -> Result<kv::Store, ClusterError> {
    if let Ok(kv) = js.get_key_value(config.bucket.clone()).await {
        return Ok(kv);
    }
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{}", config.bucket),
        subjects: vec![format!("$KV.{}.>", config.bucket)],
        max_messages_per_subject: config.history.max(1),
        max_age: config.max_age,
        storage: config.storage,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        num_replicas: config.num_replicas.max(1),
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .map_err(|e| ClusterError::nats("create a key-value bucket", e))?;
    js.get_key_value(config.bucket)
        .await
        .map_err(|e| ClusterError::nats("open a key-value bucket", e))
}

/// A stored world config, which must be one whole header.
fn decode_world_config(stored: &[u8]) -> Result<Config, ClusterError> {
    let bytes: &[u8; HEADER_LEN] = stored.try_into().map_err(|_| ClusterError::Corrupt {
        seq: 0,
        what: format!("the world's config is {} bytes", stored.len()),
    })?;
    decode_header(bytes).map_err(|f| ClusterError::Corrupt {
        seq: 0,
        what: format!("the world's config does not decode ({f:?})"),
    })
}
