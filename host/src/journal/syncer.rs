//! A thread that waits for the disk on the journal's behalf, so that the
//! server can route and encode a tick while its record is made durable.
//!
//! `fdatasync` applies to the file, not to the descriptor, so the thread
//! syncs its own duplicate of the journal's descriptor. One request is in
//! flight at a time: [`Syncer::start`] hands it over, [`Syncer::finish`]
//! waits for its result. The channels are bounded to one message, so
//! neither side allocates per tick.

use std::fs::File;
use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// The journal's sync thread (see the module docs).
pub(super) struct Syncer {
    requests: Option<SyncSender<()>>,
    results: Receiver<io::Result<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts a thread that syncs `file` (a duplicate of the journal's
    /// descriptor) on request.
    pub(super) fn spawn(file: File) -> io::Result<Syncer> {
        let (requests, wanted) = sync_channel::<()>(1);
        let (done, results) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("journal-sync".into())
            .spawn(move || {
                while wanted.recv().is_ok() {
                    if done.send(file.sync_data()).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Syncer {
            requests: Some(requests),
            results,
            thread: Some(thread),
        })
    }

    /// Asks the thread to sync; false when it is gone.
    pub(super) fn start(&self) -> bool {
        self.requests.as_ref().is_some_and(|r| r.send(()).is_ok())
    }

    /// Waits for the result of the sync [`start`](Self::start) asked for.
    pub(super) fn finish(&self) -> io::Result<()> {
        self.results
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the journal's sync thread stopped")))
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        // Closing the request channel ends the thread's loop.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
