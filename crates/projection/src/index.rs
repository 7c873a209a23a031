//! The `Index` handle: what its clones share (the trees of the current generation, the lock
//! that serialises writes and what it guards, the gate that keeps list walks from overlapping
//! writes), opening it, and reading one run. The writes are `apply.rs`'s, the counts
//! `counts.rs`'s; each adds its methods to `Index`. It must not write the index.

use std::sync::{Arc, RwLock};

use runledger_domain::{Run, RunId};

use crate::row::decode_row;
use crate::tally::{read_saved_tally, read_saved_usage, Tally, SAVED_TALLY_KEY, SAVED_USAGE_KEY};
use crate::trees::{current_generation, generation_of, Trees, VERIFY_INDEX, VERIFY_ROWS};
use crate::{blocks, keys, Error, UsageByEnvironment};

/// The read index: a cheap-to-clone handle on a pair of sled trees. Clones share the pair, so
/// a rebuild through any handle is seen by all of them.
#[derive(Clone)]
pub struct Index {
    pub(crate) db: sled::Db,
    pub(crate) trees: Arc<RwLock<Trees>>,
    pub(crate) writes: Arc<Writes>,
    /// Held by every write: `F` ranges are stored in blocks that a write reads, changes and
    /// writes back, so two writers must not interleave (see `blocks.rs`). It guards the
    /// runs-per-state tally, which the writes move.
    pub(crate) serial: Arc<parking_lot::Mutex<Serial>>,
}

/// What the lock that serialises the index's writes guards.
#[derive(Default)]
pub(crate) struct Serial {
    pub(crate) tally: Tally,
    /// Whether sled's default tree holds a saved tally that matches the index (`SAVED_TALLY_KEY`).
    pub(crate) saved: bool,
    /// The usage totals per environment; `None` until counted or taken from a saved copy, and
    /// again after a write that failed part of the way.
    pub(crate) usage: Option<UsageByEnvironment>,
    /// Whether sled's default tree holds saved usage totals that match the index.
    pub(crate) usage_saved: bool,
}

/// Coordinates index writes with list walks. sled iterators are not snapshots: a run that
/// changes state while a list walks the index can move from a position the walk has not reached
/// to one it has already passed, and be missed. A list first walks optimistically and compares
/// the counts of writes begun and finished before and after; when writes keep overlapping its
/// walks it takes the gate exclusively, which waits for the writes in progress and holds new
/// ones back for the length of one walk. Every answer therefore comes from a walk no write
/// overlapped.
#[derive(Default)]
pub(crate) struct Writes {
    pub(crate) begun: std::sync::atomic::AtomicU64,
    pub(crate) finished: std::sync::atomic::AtomicU64,
    /// Writers hold it shared; a list that could not get a quiet walk holds it exclusively.
    /// parking_lot's lock is task-fair: once the list waits, new writers queue behind it. (With
    /// std's lock a tight loop of writers kept a waiting list out for tens of milliseconds.)
    pub(crate) gate: parking_lot::RwLock<()>,
}

/// A write in progress; finishes when dropped, on every path.
pub(crate) struct Writing<'a> {
    writes: &'a Writes,
    _shared: parking_lot::RwLockReadGuard<'a, ()>,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.writes
            .finished
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Writes {
    pub(crate) fn begin(&self) -> Writing<'_> {
        let shared = self.gate.read();
        self.begun.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Writing {
            writes: self,
            _shared: shared,
        }
    }

    /// `Some(n)` if no write is in progress, `n` counting all writes so far.
    pub(crate) fn quiet(&self) -> Option<u64> {
        let finished = self.finished.load(std::sync::atomic::Ordering::SeqCst);
        let begun = self.begun.load(std::sync::atomic::Ordering::SeqCst);
        (begun == finished).then_some(begun)
    }

    /// Waits until no write is in progress and keeps new ones waiting until dropped.
    pub(crate) fn exclusive(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }
}

impl Index {
    /// Opens the index of the current generation, and drops the trees of any other generation
    /// (left behind by a rebuild that was interrupted) and the scratch trees an interrupted
    /// `verify` of an earlier version left inside the store.
    pub fn open(db: &sled::Db) -> Result<Index, Error> {
        let generation = current_generation(db)?;
        for name in db.tree_names() {
            let stale = generation_of(&name).is_some_and(|g| g != generation)
                || [VERIFY_ROWS, VERIFY_INDEX]
                    .map(str::as_bytes)
                    .contains(&name.as_ref());
            if stale {
                db.drop_tree(&name)?;
            }
        }
        let trees = Trees::open(db, generation)?;
        let redone = trees.redo(db)?;
        if redone {
            tracing::warn!("replayed the read index writes a crash interrupted");
        }
        // A journal left by a crash means index writes were under way, and the first of them
        // removed any saved tally; should one be there all the same, it is not trusted.
        let (tally, usage) = if redone {
            db.remove(SAVED_TALLY_KEY)?;
            db.remove(SAVED_USAGE_KEY)?;
            (None, None)
        } else {
            (
                read_saved_tally(db, generation)?,
                read_saved_usage(db, generation)?,
            )
        };
        if tally.is_some() {
            tracing::debug!("took the runs in each state from the count saved at the last stop");
        }
        Ok(Index {
            db: db.clone(),
            trees: Arc::new(RwLock::new(trees)),
            writes: Arc::default(),
            serial: Arc::new(parking_lot::Mutex::new(Serial {
                saved: tally.is_some(),
                tally,
                usage_saved: usage.is_some(),
                usage,
            })),
        })
    }

    /// Takes the lock that serialises writes, first removing the saved tally, which the write
    /// about to be made would leave stale. sled recovers a prefix of its log, so a crash that
    /// keeps any part of the write keeps the removal too.
    pub(crate) fn lock_for_writing(&self) -> Result<parking_lot::MutexGuard<'_, Serial>, Error> {
        let mut serial = self.serial.lock();
        if serial.saved {
            self.db.remove(SAVED_TALLY_KEY)?;
            serial.saved = false;
        }
        if serial.usage_saved {
            self.db.remove(SAVED_USAGE_KEY)?;
            serial.usage_saved = false;
        }
        Ok(serial)
    }

    pub(crate) fn trees(&self) -> Trees {
        self.trees.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The indexed state of one run.
    pub fn get(&self, id: RunId) -> Result<Option<Run>, Error> {
        match self.trees().rows.get(id.to_bytes())? {
            None => Ok(None),
            Some(bytes) => decode_row(id, &bytes).map(Some),
        }
    }

    /// The run holding artifact `uid`, from its `A` range (`keys.rs`): one seek, never a scan.
    /// A candidate whose row does not hold the uid (a hash collision of a non-UUID uid) is
    /// passed over.
    pub fn artifact_run(&self, uid: &str) -> Result<Option<Run>, Error> {
        let trees = self.trees();
        let prefix = keys::artifact_prefix(uid);
        for pos in blocks::positions(&trees.index, &prefix, None, false) {
            let Some(id) = keys::id_of_position(&pos?) else {
                continue;
            };
            if let Some(run) = self.get(id)? {
                if run.artifacts.iter().any(|a| a.artifact.uid == uid) {
                    return Ok(Some(run));
                }
            }
        }
        Ok(None)
    }

    /// Number of runs in the index.
    pub fn len(&self) -> usize {
        self.trees().rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trees().rows.is_empty()
    }
}
