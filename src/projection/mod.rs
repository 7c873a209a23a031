//! The read index: a projection of the event log that answers `GET /agent/runs` and
//! `GET /agent/runs/{id}` without folding logs.
//!
//! Two sled trees: `runs` maps a run id to its folded state (a row), and `run_index` holds the
//! secondary keys of `keys.rs`. The index is derived data: it is updated after each durable
//! append by the projector thread (`actor/projector.rs`), caught up at startup for runs the
//! store marked dirty, and can be rebuilt from the log at any time — and a rebuild must equal the
//! incrementally maintained index (`verify`, and a property test, check exactly that).
//!
//! A rebuild writes into a fresh pair of trees (the next *generation*: `runs.N`, `run_index.N`;
//! generation 0 is the plain names), switches the generation recorded in sled's default tree,
//! and drops the old pair: dropping a tree frees its pages, where clearing it would remove
//! every key one by one (about as slow as writing them). While it builds, one thread folds
//! the log and writes the rows while another writes the secondary keys.

pub mod keys;
pub mod query;

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use crate::domain::{Run, RunId};
use crate::store::{self, Store};

pub use query::{Cursor, Order, Page, Query, SortBy};

const ROWS: &str = "runs";
const INDEX: &str = "run_index";
/// Bumped whenever the row encoding or key layout changes; a mismatch triggers a rebuild.
pub const LAYOUT_VERSION: u32 = 3;
const LAYOUT_KEY: &str = "projection_layout";
/// The generation of the trees in use (absent: 0), in sled's default tree.
const GENERATION_KEY: &str = "projection_generation";
/// Scratch trees of `verify`.
const VERIFY_ROWS: &str = "verify_runs";
const VERIFY_INDEX: &str = "verify_run_index";
/// Index keys handed to the writer thread of a rebuild at a time.
const BUILD_BATCH: usize = 4096;

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
}

/// The read index: a cheap-to-clone handle on a pair of sled trees. Clones share the pair, so
/// a rebuild through any handle is seen by all of them.
#[derive(Clone)]
pub struct Index {
    db: sled::Db,
    trees: Arc<RwLock<Trees>>,
    writes: Arc<Writes>,
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

/// The trees of one generation of the index.
#[derive(Clone)]
struct Trees {
    generation: u64,
    rows: sled::Tree,
    index: sled::Tree,
}

/// The names of the trees of a generation.
fn tree_names(generation: u64) -> (String, String) {
    if generation == 0 {
        (ROWS.to_string(), INDEX.to_string())
    } else {
        (
            format!("{ROWS}.{generation}"),
            format!("{INDEX}.{generation}"),
        )
    }
}

/// The generation a tree name belongs to, if it is one of the index's trees.
fn generation_of(name: &[u8]) -> Option<u64> {
    let name = std::str::from_utf8(name).ok()?;
    if name == ROWS || name == INDEX {
        return Some(0);
    }
    let rest = name
        .strip_prefix(ROWS)
        .or_else(|| name.strip_prefix(INDEX))?
        .strip_prefix('.')?;
    rest.parse().ok().filter(|g| *g > 0)
}

impl Trees {
    fn open(db: &sled::Db, generation: u64) -> Result<Trees, Error> {
        let (rows, index) = tree_names(generation);
        Ok(Trees {
            generation,
            rows: db.open_tree(rows)?,
            index: db.open_tree(index)?,
        })
    }

    /// Folds every run of the log into these (empty) trees. Returns (runs, events).
    ///
    /// The calling thread scans and folds the log and writes rows and the `T` keys;
    /// a second thread writes the `F` keys, which are most of the work. The result does not
    /// depend on the order of the writes: rows and keys are sets.
    fn build_from(&self, store: &Store) -> Result<(u64, u64), Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(4);
        let index = self.index.clone();
        std::thread::scope(|scope| {
            let writer = scope.spawn(move || -> Result<(), sled::Error> {
                for batch in rx {
                    for key in batch {
                        index.insert(key, &[])?;
                    }
                }
                Ok(())
            });
            let folded = self.fold_log(store, tx);
            let written = writer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // A failed writer makes the folding side stop too (its sends fail); report the
            // writer's error then, it is the cause.
            written?;
            folded
        })
    }

    fn fold_log(
        &self,
        store: &Store,
        tx: std::sync::mpsc::SyncSender<Vec<Vec<u8>>>,
    ) -> Result<(u64, u64), Error> {
        let mut runs = 0u64;
        let mut events = 0u64;
        let mut batch = Vec::with_capacity(BUILD_BATCH);
        let write = |run: &Run, batch: &mut Vec<Vec<u8>>| -> Result<bool, Error> {
            for key in keys::entries(run) {
                if key.first() == Some(&keys::FILTER) {
                    batch.push(key);
                } else {
                    self.index.insert(key, &[])?;
                }
            }
            self.rows.insert(run.id.to_bytes(), encode_row(run)?)?;
            if batch.len() >= BUILD_BATCH {
                let full = std::mem::replace(batch, Vec::with_capacity(BUILD_BATCH));
                // The writer is gone only if it failed; `build_from` reports its error.
                return Ok(tx.send(full).is_ok());
            }
            Ok(true)
        };
        let mut current: Option<Run> = None;
        for envelope in store.scan() {
            let envelope = envelope?;
            events += 1;
            let same = current.as_ref().is_some_and(|r| r.id == envelope.run_id);
            if !same {
                if let Some(run) = current.take() {
                    runs += 1;
                    if !write(&run, &mut batch)? {
                        return Ok((runs, events));
                    }
                }
            }
            let base = if same { current.take() } else { None };
            current = crate::domain::evolve(base, envelope.run_id, &envelope.event, envelope.at);
        }
        if let Some(run) = current.take() {
            runs += 1;
            write(&run, &mut batch)?;
        }
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        Ok((runs, events))
    }
}

/// Every row (id, encoded run) and every index key, for comparing two indexes in tests.
pub type Dump = (Vec<(Vec<u8>, Vec<u8>)>, BTreeSet<Vec<u8>>);

/// One difference found by `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    RowMissing(RunId),
    RowExtra(RunId),
    RowDiffers(RunId),
    EntryMissing(Vec<u8>),
    EntryExtra(Vec<u8>),
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::RowMissing(id) => write!(f, "run {id}: missing from the index"),
            Difference::RowExtra(id) => write!(f, "run {id}: in the index but not in the log"),
            Difference::RowDiffers(id) => write!(f, "run {id}: indexed state differs from its log"),
            Difference::EntryMissing(k) => write!(f, "index entry missing: {}", hex(k)),
            Difference::EntryExtra(k) => write!(f, "stale index entry: {}", hex(k)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Index {
    /// Opens the index of the current generation, and drops the trees of any other generation
    /// (left behind by a rebuild that was interrupted).
    pub fn open(db: &sled::Db) -> Result<Index, Error> {
        let generation = match db.get(GENERATION_KEY)? {
            None => 0,
            Some(v) => {
                u64::from_be_bytes(v.as_ref().try_into().map_err(|_| Error::CorruptRow {
                    run_id: String::new(),
                    detail: format!("{GENERATION_KEY} has {} bytes", v.len()),
                })?)
            }
        };
        for name in db.tree_names() {
            if generation_of(&name).is_some_and(|g| g != generation) {
                db.drop_tree(&name)?;
            }
        }
        Ok(Index {
            db: db.clone(),
            trees: Arc::new(RwLock::new(Trees::open(db, generation)?)),
            writes: Arc::default(),
        })
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

    /// Moves the index from `old` (the run's previous state, if any) to `new`.
    pub fn apply(&self, old: Option<&Run>, new: &Run) -> Result<(), Error> {
        let _writing = self.writes.begin();
        let trees = self.trees();
        let new_keys = keys::entries(new);
        let old_keys = old.map(keys::entries).unwrap_or_default();
        for key in &old_keys {
            if new_keys.binary_search(key).is_err() {
                trees.index.remove(key)?;
            }
        }
        for key in &new_keys {
            if old_keys.binary_search(key).is_err() {
                trees.index.insert(key.as_slice(), &[])?;
            }
        }
        trees.rows.insert(new.id.to_bytes(), encode_row(new)?)?;
        Ok(())
    }

    /// How many runs are in each state: a walk of each state's index range, so it costs time
    /// in proportion to the number of runs (for `/metrics`; about 100 ms per 100k runs).
    pub fn count_by_state(&self) -> Result<Vec<(crate::domain::RunState, u64)>, Error> {
        let trees = self.trees();
        crate::domain::RunState::ALL
            .into_iter()
            .map(|state| {
                let prefix = keys::filter_prefix(keys::Field::State, state.as_str());
                let mut n = 0;
                for item in trees.index.scan_prefix(prefix) {
                    item?;
                    n += 1;
                }
                Ok((state, n))
            })
            .collect()
    }

    /// Number of runs in the index.
    pub fn len(&self) -> usize {
        self.trees().rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trees().rows.is_empty()
    }

    /// Brings the index up to date with the log for the given runs (startup catch-up).
    pub fn catch_up(&self, store: &Store, runs: &[RunId]) -> Result<usize, Error> {
        let mut fixed = 0;
        for &id in runs {
            let from_log = store.load_run(id)?;
            let indexed = self.get(id)?;
            if from_log != indexed {
                match &from_log {
                    Some(run) => self.apply(indexed.as_ref(), run)?,
                    None => self.remove(indexed.as_ref())?,
                }
                fixed += 1;
            }
            store.clear_dirty(id)?;
        }
        Ok(fixed)
    }

    fn remove(&self, run: Option<&Run>) -> Result<(), Error> {
        if let Some(run) = run {
            let _writing = self.writes.begin();
            let trees = self.trees();
            for key in keys::entries(run) {
                trees.index.remove(key)?;
            }
            trees.rows.remove(run.id.to_bytes())?;
        }
        Ok(())
    }

    /// Rebuilds the index from the log. Returns (runs, events) folded.
    ///
    /// Builds the next generation of trees, records it (and the layout version) in sled's
    /// default tree, switches every handle to it and drops the previous generation. A crash
    /// before the switch leaves the old index in place and the new trees to be dropped by the
    /// next `open`; writes are ordered in sled's log, so a recovered switch implies the whole
    /// new generation was recovered too.
    pub fn rebuild(&self, store: &Store) -> Result<(u64, u64), Error> {
        let previous = self.trees().generation;
        let next = previous + 1;
        let (rows, index) = tree_names(next);
        // Left behind by an interrupted rebuild in this process, if any.
        self.db.drop_tree(rows)?;
        self.db.drop_tree(index)?;
        let fresh = Trees::open(&self.db, next)?;
        let counts = fresh.build_from(store)?;
        self.db.insert(GENERATION_KEY, &next.to_be_bytes())?;
        self.db.insert(LAYOUT_KEY, &LAYOUT_VERSION.to_be_bytes())?;
        *self.trees.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        let (rows, index) = tree_names(previous);
        self.db.drop_tree(rows)?;
        self.db.drop_tree(index)?;
        Ok(counts)
    }

    /// Rebuilds the index from the log into scratch trees and compares it with this one.
    pub fn verify(&self, store: &Store) -> Result<(u64, u64, Vec<Difference>), Error> {
        let db = &self.db;
        // Left behind by an interrupted verify, if any: start from empty trees.
        db.drop_tree(VERIFY_ROWS)?;
        db.drop_tree(VERIFY_INDEX)?;
        let scratch = Trees {
            generation: 0,
            rows: db.open_tree(VERIFY_ROWS)?,
            index: db.open_tree(VERIFY_INDEX)?,
        };
        let (runs, events) = scratch.build_from(store)?;
        let live = self.trees();
        let mut differences = Vec::new();
        compare_trees(&live.rows, &scratch.rows, |key, side| {
            let id = keys::id_of_position(key).unwrap_or(RunId(0));
            differences.push(match side {
                Side::OnlyLive => Difference::RowExtra(id),
                Side::OnlyRebuilt => Difference::RowMissing(id),
                Side::Both => Difference::RowDiffers(id),
            });
        })?;
        compare_trees(&live.index, &scratch.index, |key, side| {
            differences.push(match side {
                Side::OnlyLive => Difference::EntryExtra(key.to_vec()),
                _ => Difference::EntryMissing(key.to_vec()),
            });
        })?;
        db.drop_tree(VERIFY_ROWS)?;
        db.drop_tree(VERIFY_INDEX)?;
        Ok((runs, events, differences))
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

    /// Every (key, value) of both trees, for tests that compare two indexes.
    pub fn dump(&self) -> Result<Dump, Error> {
        let trees = self.trees();
        let rows = trees
            .rows
            .iter()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        let index = trees
            .index
            .iter()
            .keys()
            .map(|k| k.map(|k| k.to_vec()))
            .collect::<Result<_, _>>()?;
        Ok((rows, index))
    }
}

enum Side {
    OnlyLive,
    OnlyRebuilt,
    Both,
}

/// Walks two sorted trees side by side, reporting keys present on one side only and keys whose
/// values differ.
fn compare_trees(
    live: &sled::Tree,
    rebuilt: &sled::Tree,
    mut report: impl FnMut(&[u8], Side),
) -> Result<(), Error> {
    use std::cmp::Ordering;
    let (mut a, mut b) = (live.iter(), rebuilt.iter());
    let mut x = a.next().transpose()?;
    let mut y = b.next().transpose()?;
    loop {
        match (&x, &y) {
            (None, None) => return Ok(()),
            (Some((ka, _)), None) => {
                report(ka, Side::OnlyLive);
                x = a.next().transpose()?;
            }
            (None, Some((kb, _))) => {
                report(kb, Side::OnlyRebuilt);
                y = b.next().transpose()?;
            }
            (Some((ka, va)), Some((kb, vb))) => match ka.cmp(kb) {
                Ordering::Less => {
                    report(ka, Side::OnlyLive);
                    x = a.next().transpose()?;
                }
                Ordering::Greater => {
                    report(kb, Side::OnlyRebuilt);
                    y = b.next().transpose()?;
                }
                Ordering::Equal => {
                    if va != vb {
                        report(ka, Side::Both);
                    }
                    x = a.next().transpose()?;
                    y = b.next().transpose()?;
                }
            },
        }
    }
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
