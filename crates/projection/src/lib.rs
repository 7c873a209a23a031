//! The read index: a projection of the event log that answers `GET /agent/runs` and
//! `GET /agent/runs/{id}` without folding logs.
//!
//! Two sled trees: `runs` maps a run id to its folded state (a row), and `run_index` holds the
//! secondary keys of `keys.rs`, every one of them scoped by the run's team, so that a list for
//! one team walks that team's runs only. The index is derived data: it is updated after each durable
//! append by the projector thread (`projection/projector.rs`), caught up at startup for runs the
//! store marked dirty, and can be rebuilt from the log at any time — and a rebuild must equal the
//! incrementally maintained index (`verify`, and a property test, check exactly that).
//!
//! A rebuild writes into a fresh pair of trees (the next *generation*: `runs.N`, `run_index.N`;
//! generation 0 is the plain names), switches the generation recorded in sled's default tree,
//! and drops the old pair: dropping a tree frees its pages, where clearing it would remove
//! every key one by one (about as slow as writing them). While it builds, one thread folds
//! the log, a second writes the rows and a third the secondary keys.
//!
//! The index also keeps the number of runs in each state (for `/metrics`) in memory: counted
//! from the state ranges the first time it is asked for, then moved by every write with the
//! exact change each range went through, under the same lock that serialises the writes. A
//! clean stop and a rebuild save it in sled's default tree, and the next open takes it from
//! there instead of walking the ranges again (at 1M runs that walk took 0.7–6 s and left
//! 30–40 MB in the cache). The first write after an open or a save removes the saved copy
//! before it changes anything, so a copy that is there always matches the index.
//!
//! The usage totals per environment (`/metrics`) are kept the same way, from the rows rather
//! than the ranges: every write moves them by the difference between the run's stored row and
//! its new one; the first ask after an open without a saved copy (or after a failed write)
//! sums the rows.
//!
//! By concern: this file holds the `Index` handle and its incremental writes; `trees.rs` the
//! generations of trees and the write journal; `rebuild.rs` the rebuild from the log;
//! `verify.rs` the comparison with a fresh rebuild; `tally.rs` the runs-per-state tally and the
//! usage totals; `keys.rs` and `blocks.rs` the key layout; `query.rs` the list queries;
//! `projector.rs` the thread that applies acknowledged commands.

#![forbid(unsafe_code)]

mod blocks;
pub mod keys;
mod open;
pub mod projector;
pub mod query;
mod rebuild;
mod tally;
mod trees;
mod verify;

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use runledger_domain::{Run, RunId};
use runledger_store::{self as store, Store};

pub use open::open;
pub use query::{Cursor, Order, Page, Query, SortBy};
pub use rebuild::Rebuilt;
use tally::{move_usage, read_saved_tally, read_saved_usage, Tally};
pub use tally::{UsageByEnvironment, UsageTotals};
use trees::{current_generation, generation_of, Trees};
pub use verify::{Difference, Dump};
use verify::{VERIFY_INDEX, VERIFY_ROWS};

const ROWS: &str = "runs";
const INDEX: &str = "run_index";
/// Bumped whenever the row encoding or key layout changes, or what every writer must do; a
/// mismatch triggers a rebuild. 6: writers remove the saved runs-per-state tally
/// (`SAVED_TALLY_KEY`) before they write. 7: rows carry the follow-ups owed to the run's
/// execution (`Run::owed`) and the run's usage (`Run::usage`), and writers remove the saved
/// usage totals (`SAVED_USAGE_KEY`) too. 8: rows carry the run's team and sealed credentials
/// (`Run::team`, `Run::sealed`), every range is scoped by the team (`F field team hash`,
/// `T team`), and a `C team` range holds the runs in created-at order; a store of layout 7
/// rebuilds, and its runs (legacy `Created`) land in the team `default`. 9: rows carry the
/// run's artifacts and attachments (`Run::artifacts`, `Run::attachments`), an `F 07` range per
/// artifact type holds the runs with such an artifact, and an `A` range per artifact uid its
/// run (`keys.rs`). 10: rows carry the schedule whose firing made the run (`Run::schedule`),
/// and an `F 08` range per schedule id holds its runs; a row of layout 9 lacks the field and
/// fails to decode rather than reading as something else, and the store rebuilds. 11: rows
/// carry the run's session epoch (`Run::session_epoch`, moved by `SessionLinkRevoked`).
pub const LAYOUT_VERSION: u32 = 11;
const LAYOUT_KEY: &str = "projection_layout";
/// The runs-per-state tally as of the last clean stop or rebuild (a `SavedTally`), in sled's
/// default tree; absent while writes are being made.
const SAVED_TALLY_KEY: &str = "projection_state_counts";
/// The usage totals per environment as of the last clean stop (a `SavedUsage`), in sled's
/// default tree; absent while writes are being made.
const SAVED_USAGE_KEY: &str = "projection_usage_totals";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("index storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("corrupt index row for run {run_id}: {detail}")]
    CorruptRow { run_id: String, detail: String },
    #[error("invalid cursor: {0}")]
    BadCursor(&'static str),
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// The read index: a cheap-to-clone handle on a pair of sled trees. Clones share the pair, so
/// a rebuild through any handle is seen by all of them.
#[derive(Clone)]
pub struct Index {
    db: sled::Db,
    trees: Arc<RwLock<Trees>>,
    writes: Arc<Writes>,
    /// Held by every write: `F` ranges are stored in blocks that a write reads, changes and
    /// writes back, so two writers must not interleave (see `blocks.rs`). It guards the
    /// runs-per-state tally, which the writes move.
    serial: Arc<parking_lot::Mutex<Serial>>,
}

/// What the lock that serialises the index's writes guards.
#[derive(Default)]
struct Serial {
    tally: Tally,
    /// Whether sled's default tree holds a saved tally that matches the index (`SAVED_TALLY_KEY`).
    saved: bool,
    /// The usage totals per environment; `None` until counted or taken from a saved copy, and
    /// again after a write that failed part of the way.
    usage: Option<UsageByEnvironment>,
    /// Whether sled's default tree holds saved usage totals that match the index.
    usage_saved: bool,
}

/// Coordinates index writes with list walks. sled iterators are not snapshots: a run that
/// changes state while a list walks the index can move from a position the walk has not reached
/// to one it has already passed, and be missed. A list first walks optimistically and compares
/// the counts of writes begun and finished before and after; when writes keep overlapping its
/// walks it takes the gate exclusively, which waits for the writes in progress and holds new
/// ones back for the length of one walk. Every answer therefore comes from a walk no write
/// overlapped.
#[derive(Default)]
struct Writes {
    begun: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicU64,
    /// Writers hold it shared; a list that could not get a quiet walk holds it exclusively.
    /// parking_lot's lock is task-fair: once the list waits, new writers queue behind it. (With
    /// std's lock a tight loop of writers kept a waiting list out for tens of milliseconds.)
    gate: parking_lot::RwLock<()>,
}

/// A write in progress; finishes when dropped, on every path.
struct Writing<'a> {
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
    fn begin(&self) -> Writing<'_> {
        let shared = self.gate.read();
        self.begun.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Writing {
            writes: self,
            _shared: shared,
        }
    }

    /// `Some(n)` if no write is in progress, `n` counting all writes so far.
    fn quiet(&self) -> Option<u64> {
        let finished = self.finished.load(std::sync::atomic::Ordering::SeqCst);
        let begun = self.begun.load(std::sync::atomic::Ordering::SeqCst);
        (begun == finished).then_some(begun)
    }

    /// Waits until no write is in progress and keeps new ones waiting until dropped.
    fn exclusive(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
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
    fn lock_for_writing(&self) -> Result<parking_lot::MutexGuard<'_, Serial>, Error> {
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

    fn trees(&self) -> Trees {
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

    /// Moves the index from `old` (the run's previous state, if any) to `new`.
    pub fn apply(&self, old: Option<&Run>, new: &Run) -> Result<(), Error> {
        self.apply_all(&[(old, new)])
    }

    /// Moves several runs at once (each run at most once): the entries of all of them that
    /// land in the same block of a range cost one write of that block.
    pub fn apply_all(&self, changes: &[(Option<&Run>, &Run)]) -> Result<(), Error> {
        let mut serial = self.lock_for_writing()?;
        let _writing = self.writes.begin();
        let trees = self.trees();
        let (removals, insertions) = changed_entries(changes);
        let written = trees
            .write_entries(&self.db, removals, insertions, &mut serial.tally)
            .and_then(|()| {
                for (_, new) in changes {
                    trees.rows.insert(new.id.to_bytes(), encode_row(new)?)?;
                }
                Ok(())
            });
        match written {
            Ok(()) => {
                for (old, new) in changes {
                    move_usage(&mut serial.usage, *old, Some(new));
                }
                Ok(())
            }
            Err(e) => {
                // Some rows may be written: sum them again when next asked.
                serial.usage = None;
                Err(e)
            }
        }
    }

    /// Number of runs in the index.
    pub fn len(&self) -> usize {
        self.trees().rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trees().rows.is_empty()
    }

    /// Brings the index up to date with the log for the given runs (startup catch-up, and the
    /// activation of a run whose update failed).
    ///
    /// An update cut short by a crash may have written some entries of the row it was applying
    /// but not the row itself (entries go first, the row last). That row is a fold of a prefix
    /// of the run's log, and the log may have grown since (the projector applies the newest
    /// acknowledged row, and a later command may have become durable before the crash). So the
    /// repair removes the entries of every state the log passed through, not only those of the
    /// stored row, except the final state's, and then writes the final state's entries and row.
    pub fn catch_up(&self, store: &Store, runs: &[RunId]) -> Result<usize, Error> {
        let mut fixed = 0;
        for &id in runs {
            let mut passed = BTreeSet::new();
            let mut from_log = None;
            for envelope in store.run_events(id, 0) {
                let envelope = envelope?;
                from_log = runledger_domain::evolve(from_log, id, &envelope.event, envelope.at);
                if let Some(run) = &from_log {
                    passed.extend(keys::entries(run));
                }
            }
            let indexed = self.get(id)?;
            if from_log != indexed {
                self.repair(indexed.as_ref(), from_log.as_ref(), passed)?;
                fixed += 1;
            }
            store.clear_dirty(id)?;
        }
        Ok(fixed)
    }

    /// Sets a run's entries and row to `target`'s, removing the entries of `indexed` and of
    /// every state in `passed` that `target` does not have (see `catch_up`).
    fn repair(
        &self,
        indexed: Option<&Run>,
        target: Option<&Run>,
        mut passed: BTreeSet<Vec<u8>>,
    ) -> Result<(), Error> {
        let mut serial = self.lock_for_writing()?;
        let _writing = self.writes.begin();
        let trees = self.trees();
        passed.extend(indexed.map(keys::entries).unwrap_or_default());
        let wanted = target.map(keys::entries).unwrap_or_default();
        let removals = passed
            .into_iter()
            .filter(|k| wanted.binary_search(k).is_err())
            .collect();
        // Inserting an entry that is there already changes nothing.
        let written = trees
            .write_entries(&self.db, removals, wanted, &mut serial.tally)
            .and_then(|()| {
                match target {
                    Some(run) => trees.rows.insert(run.id.to_bytes(), encode_row(run)?)?,
                    None => match indexed {
                        Some(run) => trees.rows.remove(run.id.to_bytes())?,
                        None => None,
                    },
                };
                Ok(())
            });
        match written {
            Ok(()) => {
                move_usage(&mut serial.usage, indexed, target);
                Ok(())
            }
            Err(e) => {
                serial.usage = None;
                Err(e)
            }
        }
    }

    /// Writes the entries of an update from `old` to `new` but not the row: the state an
    /// update cut short by a crash leaves behind. For tests of `catch_up`.
    #[doc(hidden)]
    pub fn apply_entries_only(&self, old: Option<&Run>, new: &Run) -> Result<(), Error> {
        let mut serial = self.lock_for_writing()?;
        let _writing = self.writes.begin();
        let (removals, insertions) = changed_entries(&[(old, new)]);
        self.trees()
            .write_entries(&self.db, removals, insertions, &mut serial.tally)
    }

    /// Whether the index was written by this build's layout; if not it must be rebuilt.
    pub fn layout_is_current(db: &sled::Db) -> Result<bool, Error> {
        Ok(db
            .get(LAYOUT_KEY)?
            .is_some_and(|v| v.as_ref() == LAYOUT_VERSION.to_be_bytes()))
    }

    pub fn mark_layout_current(db: &sled::Db) -> Result<(), Error> {
        db.insert(LAYOUT_KEY, &LAYOUT_VERSION.to_be_bytes())?;
        Ok(())
    }
}

/// The entries to remove and to insert to move each run from `old` to `new`.
fn changed_entries(changes: &[(Option<&Run>, &Run)]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut removals = Vec::new();
    let mut insertions = Vec::new();
    for (old, new) in changes {
        let new_keys = keys::entries(new);
        let old_keys = old.map(keys::entries).unwrap_or_default();
        removals.extend(
            old_keys
                .iter()
                .filter(|k| new_keys.binary_search(k).is_err())
                .cloned(),
        );
        insertions.extend(
            new_keys
                .iter()
                .filter(|k| old_keys.binary_search(k).is_err())
                .cloned(),
        );
    }
    (removals, insertions)
}

fn encode_row(run: &Run) -> Result<Vec<u8>, Error> {
    postcard::to_allocvec(run).map_err(|e| Error::CorruptRow {
        run_id: run.id.to_string(),
        detail: e.to_string(),
    })
}

fn decode_row(id: RunId, bytes: &[u8]) -> Result<Run, Error> {
    postcard::from_bytes(bytes).map_err(|e| Error::CorruptRow {
        run_id: id.to_string(),
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of an older layout is a row of this one without its trailing fields
    /// (`Run::schedule` since 10, `Run::session_epoch` since 11): it fails to decode rather
    /// than reading as some other run (the start rebuilds such an index anyway,
    /// `LAYOUT_VERSION`), and a row of this layout reads back whole.
    #[test]
    fn a_row_without_the_later_fields_does_not_decode() {
        let mut run = runledger_domain::sample_run(3);
        let row = encode_row(&run).expect("encodes");
        assert_eq!(row.last(), Some(&0), "epoch 0 is the last byte");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
        for cut in [1, 2] {
            let old = &row[..row.len() - cut];
            assert!(matches!(
                decode_row(run.id, old),
                Err(Error::CorruptRow { .. })
            ));
        }
        run.session_epoch = 300;
        let row = encode_row(&run).expect("encodes");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
        run.schedule = Some(runledger_domain::RunSchedule {
            schedule_id: RunId(7),
            schedule_name: "n".into(),
            cron_schedule: "@daily".into(),
            due: runledger_domain::Timestamp(5),
        });
        let row = encode_row(&run).expect("encodes");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
    }
}
