//! What the dispatcher holds: the subscriptions, the outbox's trees, and a bounded set of the
//! deliveries in memory. It settles the outbox at start-up, takes deliveries into memory (or
//! leaves them to the outbox past the bound), finds those it let go of again (`rescan`), and
//! ends a delivery. It makes no attempt itself (`dispatch`) and renders no body (`payload`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::client::Subscription;
use super::error::Error;
use super::outbox::{self, Owed};
use runledger_base::metrics::METRICS;
use runledger_domain::{RunId, Timestamp};
use runledger_store::{self as store, Store};

/// Deliveries the dispatcher holds in memory at most; beyond, the outbox alone holds them
/// until a rescan picks them up.
pub(super) const MAX_TRACKED: usize = 10_000;
/// A rescan leaves entries this young alone: their command may still be waiting for its sync,
/// and its actor hands them over when it is durable.
const RESCAN_MIN_AGE_MS: u64 = 10_000;

/// What the handle and the dispatcher's thread share.
pub(super) struct Inner {
    pub(super) subscriptions: Vec<Subscription>,
    pub(super) trees: outbox::Trees,
    pub(super) store: Store,
    /// Outbox keys of the deliveries the dispatcher holds.
    pub(super) tracked: Mutex<HashSet<Vec<u8>>>,
    /// The time (ms) of the latest delivery left to the outbox alone, 0 when none is.
    pub(super) overflow: AtomicU64,
    pub(super) tx: tokio::sync::mpsc::UnboundedSender<Job>,
    pub(super) rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Job>>>,
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Recent bodies by event: every subscription owed the same event sends the same bytes.
    pub(super) bodies: Mutex<Bodies>,
    /// `MAX_TRACKED`, smaller in tests.
    pub(super) max_tracked: usize,
}

/// Rendered bodies by the event they announce.
pub(super) type Bodies = HashMap<(RunId, u64), Arc<Vec<u8>>>;

/// One delivery the dispatcher holds: what is owed, the attempts made so far, and when the
/// next is due.
pub(super) struct Job {
    pub(super) owed: Owed,
    pub(super) attempts: u32,
    pub(super) due: Instant,
}

/// The time in milliseconds as a `Timestamp` (the shell's clock).
pub(super) fn now() -> Timestamp {
    runledger_base::clock::now()
}

/// `n` owed deliveries ended: the gauge of owed deliveries goes down by `n`.
pub(super) fn owed_done(n: u64) {
    let _ = METRICS
        .webhook_owed
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
}

impl Inner {
    pub(super) fn subscription(&self, name: &str) -> Option<&Subscription> {
        self.subscriptions.iter().find(|s| s.config.name == name)
    }

    /// Whether the log holds the event at `(run_id, seq)`.
    pub(super) fn event_exists(&self, run_id: RunId, seq: u64) -> Result<bool, store::Error> {
        match self.store.run_events(run_id, seq).next() {
            Some(e) => Ok(e?.seq == seq),
            None => Ok(false),
        }
    }

    /// The start-up pass over the outbox (see `Webhooks::open`).
    pub(super) fn settle(&self) -> Result<(), Error> {
        let (mut kept, mut unacknowledged, mut orphaned) = (0u64, 0u64, 0u64);
        let mut drop = Vec::new();
        let mut owed = Vec::new();
        for item in self.trees.scan(&[]) {
            let (key, owed_entry) = match item {
                Ok(item) => item,
                Err(e) => {
                    tracing::error!(error = %e, "a damaged webhook outbox entry is dropped");
                    continue;
                }
            };
            let live = self
                .subscription(&owed_entry.subscription)
                .is_some_and(|s| !s.disabled.load(Ordering::Relaxed));
            if !self.event_exists(owed_entry.run_id, owed_entry.seq)? {
                unacknowledged += 1;
                drop.push(key);
            } else if !live {
                orphaned += 1;
                drop.push(key);
            } else {
                kept += 1;
                owed.push(owed_entry);
            }
        }
        for key in drop {
            self.trees.outbox.remove(key).map_err(outbox::Error::from)?;
        }
        if unacknowledged + orphaned > 0 {
            self.store.sync_blocking()?;
        }
        METRICS.webhook_owed.store(kept, Ordering::Relaxed);
        // Every entry left is acknowledged, and nothing is in flight yet: into memory with
        // them (what does not fit waits for a rescan), oldest first.
        for o in owed {
            let attempts = self.trees.last_attempt(&o)?;
            if !self.track(o, attempts) {
                break;
            }
        }
        tracing::info!(
            owed = kept,
            unacknowledged,
            of_removed_or_disabled_subscriptions = orphaned,
            "webhook outbox settled"
        );
        Ok(())
    }

    /// Takes a delivery into memory unless it is there already or memory is full.
    pub(super) fn track(&self, owed: Owed, attempts: u32) -> bool {
        let key = owed.key();
        {
            let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            if tracked.contains(&key) {
                return true;
            }
            if tracked.len() >= self.max_tracked {
                self.overflow.fetch_max(now().0.max(1), Ordering::Relaxed);
                return false;
            }
            tracked.insert(key);
        }
        let job = Job {
            owed,
            attempts,
            due: Instant::now(),
        };
        // The receiver lives as long as the dispatcher; once it stopped, the entry waits in
        // the outbox for the next start.
        let _ = self.tx.send(job);
        true
    }

    pub(super) fn tracked_len(&self) -> usize {
        self.tracked.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub(super) fn is_tracked(&self, key: &[u8]) -> bool {
        self.tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    pub(super) fn untrack(&self, owed: &Owed) {
        self.tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&owed.key());
    }

    /// Takes into memory the owed deliveries that only the outbox holds, oldest first, up to
    /// the bound. Entries younger than `RESCAN_MIN_AGE_MS` are left to their actors: their
    /// command may not be durable yet.
    pub(super) fn rescan(&self) {
        // After a failed sync, an entry's event may be in sled's memory and not on disk.
        if matches!(self.store.condition(), store::health::Condition::Failed(_)) {
            return;
        }
        // Nothing was let go of, or memory is still more than half full: walking the outbox
        // now would find nothing room could be made for.
        if self.overflow.load(Ordering::Relaxed) == 0 || self.tracked_len() > self.max_tracked / 2 {
            return;
        }
        let dropped_at = self.overflow.swap(0, Ordering::Relaxed);
        let young = now().0.saturating_sub(RESCAN_MIN_AGE_MS);
        for item in self.trees.scan(&[]) {
            let (key, owed) = match item {
                Ok(item) => item,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the webhook outbox");
                    self.overflow.fetch_max(dropped_at, Ordering::Relaxed);
                    return;
                }
            };
            if owed.at.0 > young {
                // Keys sort by time: every later entry is younger still. One let go of since
                // `young` may be among them: the next pass looks again.
                if dropped_at > young {
                    self.overflow.fetch_max(dropped_at, Ordering::Relaxed);
                }
                return;
            }
            if self.is_tracked(&key) {
                continue;
            }
            let attempts = match self.trees.last_attempt(&owed) {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read a webhook delivery's attempts");
                    0
                }
            };
            if !self.track(owed, attempts) {
                return;
            }
        }
    }

    /// A delivery is over: its entry leaves the outbox, then memory.
    pub(super) fn end(&self, owed: &Owed) {
        match self.trees.remove(owed) {
            Ok(()) => owed_done(1),
            Err(e) => tracing::error!(error = %e, "cannot remove an ended webhook delivery"),
        }
        self.untrack(owed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::test_support::{owed, setup};
    use crate::webhooks::Webhooks;

    #[test]
    fn settling_keeps_acknowledged_entries_and_drops_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, id) = setup(dir.path());
        let trees = outbox::Trees::open(store.db()).expect("trees");
        let acknowledged = owed(id, 0, "ci");
        // Written before events that never reached the log: their command was not acknowledged.
        let unacknowledged = owed(id, 1, "ci");
        let elsewhere = owed(RunId::new(Timestamp(2_000), 9), 0, "ci");
        // Of a subscription no longer configured.
        let removed = owed(id, 0, "removed");
        for o in [&acknowledged, &unacknowledged, &elsewhere, &removed] {
            trees.insert(o).expect("insert");
        }
        let hooks = Webhooks::open(&config, &store).expect("open");
        let left: Vec<Owed> = trees.scan(&[]).map(|item| item.expect("entry").1).collect();
        assert_eq!(left, std::slice::from_ref(&acknowledged));
        let inner = hooks.inner.as_ref().expect("configured");
        assert!(inner.is_tracked(&acknowledged.key()));
        assert_eq!(inner.tracked_len(), 1);
    }

    #[test]
    fn deliveries_past_the_memory_bound_wait_in_the_outbox_for_a_rescan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, id) = setup(dir.path());
        let mut hooks = Webhooks::open(&config, &store).expect("open");
        // A bound of 4 instead of 10,000; the entries are old enough for a rescan.
        let only = hooks
            .inner
            .as_mut()
            .and_then(Arc::get_mut)
            .expect("one handle");
        only.max_tracked = 4;
        let inner = hooks.inner.as_ref().expect("configured");
        let owed: Vec<Owed> = (0..10u64).map(|seq| owed(id, seq, "ci")).collect();
        for o in &owed {
            inner.trees.insert(o).expect("insert");
        }
        for o in &owed {
            inner.track(o.clone(), 0);
        }
        assert_eq!(inner.tracked_len(), 4);
        assert_ne!(inner.overflow.load(Ordering::Relaxed), 0);
        // Memory more than half full: no walk yet.
        inner.end(&owed[0]);
        inner.rescan();
        assert_eq!(inner.tracked_len(), 3);
        // Room again: the oldest entries only the outbox holds come back, up to the bound.
        inner.end(&owed[1]);
        inner.end(&owed[2]);
        inner.rescan();
        assert_eq!(inner.tracked_len(), 4);
        for o in &owed[3..7] {
            assert!(inner.is_tracked(&o.key()), "{o:?}");
        }
        assert_ne!(inner.overflow.load(Ordering::Relaxed), 0, "more are left");
        for o in &owed[3..7] {
            inner.end(o);
        }
        inner.rescan();
        for o in &owed[7..] {
            assert!(inner.is_tracked(&o.key()), "{o:?}");
        }
        assert_eq!(
            inner.overflow.load(Ordering::Relaxed),
            0,
            "nothing is left behind"
        );
    }
}
