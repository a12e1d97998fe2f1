//! Verification: what the bots received against a re-run of the server's
//! journal.
//!
//! The server journals every tick's commands and digest before it sends
//! anything about that tick. The journal is re-run through a fresh kernel
//! from the newest usable snapshot before the bots' first tick
//! ([`restore_newest`]), and for every tick each bot applied the digest it
//! was sent and the exact list of events it received (its rejections, then
//! Leave, Enter and Update of its view) are compared with the kernel's
//! events for the bot's entity; at the end, each bot's final view: its ids
//! against the kernel's view of its entity at the bot's last applied tick,
//! its states against the states the kernel's own events for the entity
//! imply (under the update throttle a moving subject's current state may
//! be ahead of its last sent one, so the current state is not the
//! reference). Every move a bot saw acknowledged must be in the journal,
//! in order, for its entity: the server acknowledges only inputs of
//! durable ticks, even across a crash. Any difference is one mismatch.

use std::collections::BTreeMap;
use std::path::Path;

use lockgrid_kernel::{Command, EntityId, Event, Move};
use lockgrid_protocol::Seen;

use super::seen::{apply_events, drop_unchanged_updates, fingerprint, membership, BotRecord};
use super::{BotsError, BotsReport};
use crate::journal::JournalReader;
use crate::store::{journal_path, restore_newest, PassedOverReason};

/// What the server's stats file says about the moves it refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RefusedMoves {
    /// No stats file: an acknowledged move missing from the journal is
    /// unexplained.
    Unknown,
    /// The file the server wrote as it stopped: its exact count.
    Exactly(u64),
    /// The file of a server that did not stop cleanly (killed): written up
    /// to a second before its end, so refusals after it are not counted.
    AtLeast(u64),
}

/// Re-runs the journal and compares every bot's ticks and final view.
///
/// Against a server with a bandwidth budget (`budgeted`) a tick's
/// rejections, Leaves and Enters are compared exactly but its Updates are
/// the server's choice, and final views are compared by their ids only (a
/// subject's state may be a few ticks behind when the bots stop).
pub(super) fn verify(
    dir: &Path,
    bots: &[BotRecord],
    refused_moves: RefusedMoves,
    budgeted: bool,
    report: &mut BotsReport,
) -> Result<(), BotsError> {
    let first = bots
        .iter()
        .filter_map(|b| b.ticks.first().map(|t| t.tick))
        .min();
    let Some(first) = first else {
        return Ok(());
    };
    let last = bots
        .iter()
        .flat_map(|b| {
            b.ticks
                .last()
                .map(|t| t.tick)
                .into_iter()
                .chain(b.final_view.as_ref().map(|v| v.0))
        })
        .max()
        .unwrap_or(first);
    // The newest usable state before the bots' first tick: every tick they
    // saw is then re-run.
    let restored = restore_newest(dir, first - 1).map_err(|e| BotsError::Verify(e.to_string()))?;
    if let Some(e) = &restored.unlisted {
        tracing::info!(
            "verification starts from the journal alone: the snapshots cannot be listed ({e})"
        );
    }
    for passed in &restored.passed_over {
        if !matches!(passed.reason, PassedOverReason::NewerThanWanted { .. }) {
            tracing::info!("verification could not start from {passed}");
        }
    }
    let mut world = restored.world;
    let mut reader =
        JournalReader::open(&journal_path(dir)).map_err(|e| BotsError::Verify(e.to_string()))?;
    // Per bot: index of its next tick to compare, and the view the kernel's
    // own events for its entity build from the bot's first tick on.
    let mut next: Vec<usize> = vec![0; bots.len()];
    let mut kernel_models: Vec<BTreeMap<EntityId, Seen>> = vec![BTreeMap::new(); bots.len()];
    let spans: Vec<Option<(u64, u64)>> = bots
        .iter()
        .map(|b| {
            let first = b.ticks.first()?.tick;
            let last = b.ticks.last().map_or(first, |t| t.tick);
            Some((first, last.max(b.final_view.as_ref().map_or(0, |v| v.0))))
        })
        .collect();
    let mut events = Vec::new();
    let mut mine = Vec::new();
    // Per bot: the moves of its entity the journal holds, from its first
    // tick until the journal despawns it.
    let mut journaled: Vec<Vec<Move>> = vec![Vec::new(); bots.len()];
    let mut alive: Vec<bool> = vec![true; bots.len()];
    loop {
        let record = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(BotsError::Verify(e.to_string())),
        };
        for (i, b) in bots.iter().enumerate() {
            let (Some(me), Some(joined)) = (b.entity, b.joined) else {
                continue;
            };
            if record.tick < joined || !alive[i] {
                continue;
            }
            for c in &record.commands {
                match c {
                    Command::Move(m) if m.id == me => journaled[i].push(*m),
                    Command::Despawn { id } if *id == me => alive[i] = false,
                    _ => {}
                }
            }
        }
        if record.tick <= world.tick() || world.tick() >= last {
            continue;
        }
        events.clear();
        let rep = world.step(&record.commands, &mut events);
        let tick = rep.tick;
        for (i, b) in bots.iter().enumerate() {
            let Some(me) = b.entity else {
                continue;
            };
            let Some((from, to)) = spans[i] else {
                continue;
            };
            if tick < from || tick > to {
                continue;
            }
            mine.clear();
            mine.extend(events.iter().copied().filter(|e| match e {
                Event::Rejected { entity, .. } => *entity == me,
                _ => e.order_key().is_some_and(|k| k.0 == me),
            }));
            drop_unchanged_updates(&kernel_models[i], &mut mine);
            apply_events(&mut kernel_models[i], &mine);
            if let Some(seen) = b.ticks.get(next[i]) {
                if seen.tick == tick {
                    next[i] += 1;
                    report.ticks_checked += 1;
                    if seen.digest != rep.digest || record.digest != rep.digest {
                        report.note(format!(
                            "bot {i} tick {tick}: digest sent {:016x}, journal {:016x}, re-run {:016x}",
                            seen.digest, record.digest, rep.digest
                        ));
                    } else if budgeted {
                        let kernel = membership(&mine);
                        if seen.membership != kernel {
                            report.note(format!(
                                "bot {i} tick {tick}: received {} rejections, Leaves and Enters, the kernel has {} for entity {me}{}",
                                seen.membership.0,
                                kernel.0,
                                if seen.membership.0 == kernel.0 { " (contents differ)" } else { "" }
                            ));
                        }
                    } else if seen.events != mine.len() || seen.fingerprint != fingerprint(&mine) {
                        report.note(format!(
                            "bot {i} tick {tick}: received {} events, the kernel has {} for entity {me}{}",
                            seen.events,
                            mine.len(),
                            if seen.events == mine.len() { " (contents differ)" } else { "" }
                        ));
                    }
                }
            }
            if let Some((t, view)) = &b.final_view {
                if *t == tick {
                    // Ids against the kernel's view itself; states against
                    // what the kernel's events for the entity say (a moving
                    // subject's current state may be ahead of its last sent
                    // one: that is the update throttle, not a mismatch).
                    report.views_checked += 1;
                    let kernel: Vec<EntityId> =
                        world.view(me).map(|v| v.collect()).unwrap_or_default();
                    let ids: Vec<EntityId> = view.keys().copied().collect();
                    let model_ids: Vec<EntityId> = kernel_models[i].keys().copied().collect();
                    if kernel != ids || model_ids != kernel {
                        report.note(format!(
                            "bot {i} final view at tick {tick}: {} subjects, the kernel's view of {me} has {} (its events build {})",
                            ids.len(),
                            kernel.len(),
                            model_ids.len()
                        ));
                    } else if !budgeted && *view != kernel_models[i] {
                        report.note(format!(
                            "bot {i} final view at tick {tick}: subject states differ from the kernel's events"
                        ));
                    }
                }
            }
        }
    }
    // Every acknowledged move is in the journal, in order, unless the
    // server refused it (it counts refusals but does not say which).
    let mut missing_total = 0u64;
    for (i, b) in bots.iter().enumerate() {
        let acked = &b.sent[..b.acked.min(b.sent.len())];
        let mut j = 0;
        let mut found = 0u64;
        for m in acked {
            if let Some(at) = journaled[i][j..].iter().position(|x| x == m) {
                j += at + 1;
                found += 1;
            }
        }
        report.inputs_checked += found;
        let missing = acked.len() as u64 - found;
        report.inputs_refused += missing;
        missing_total += missing;
        if missing > 0 && refused_moves == RefusedMoves::Unknown {
            report.note(format!(
                "bot {i}: {missing} of {} acknowledged moves are not in the journal",
                acked.len()
            ));
        }
    }
    match refused_moves {
        RefusedMoves::Exactly(refused) if missing_total > refused => report.note(format!(
            "{missing_total} acknowledged moves are not in the journal, but the server refused only {refused}"
        )),
        RefusedMoves::AtLeast(refused) if missing_total > refused => tracing::info!(
            "{missing_total} acknowledged moves are not in the journal; the server's last stats (it did not stop cleanly) count {refused} refused, refusals after them are not counted"
        ),
        _ => {}
    }
    // Ticks a bot applied that the journal does not hold.
    for (i, b) in bots.iter().enumerate() {
        let missing = b.ticks.len().saturating_sub(next[i]);
        if missing > 0 && b.entity.is_some() {
            report.note(format!(
                "bot {i}: {missing} applied ticks from tick {} were not compared (not in the journal, or out of order)",
                b.ticks[next[i]].tick
            ));
        }
    }
    Ok(())
}
