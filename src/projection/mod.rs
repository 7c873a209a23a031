//! The read index: a projection of the event log that answers `GET /agent/runs` and
//! `GET /agent/runs/{id}` without folding logs.
//!
//! Two sled trees: `runs` maps a run id to its folded state (a row), and `run_index` holds the
//! secondary keys of `keys.rs`. The index is derived data: it is updated right after each
//! append (before the write is acknowledged), caught up at startup for runs the store marked
//! dirty, and can be rebuilt from the log at any time — and a rebuild must equal the
//! incrementally maintained index (`verify`, and a property test, check exactly that).

pub mod keys;
pub mod query;

use std::collections::BTreeSet;

use crate::domain::{Run, RunId};
use crate::store::{self, Store};

pub use query::{Cursor, Order, Page, Query, SortBy};

const ROWS: &str = "runs";
const INDEX: &str = "run_index";
/// Bumped whenever the row encoding or key layout changes; a mismatch triggers a rebuild.
pub const LAYOUT_VERSION: u32 = 2;
const LAYOUT_KEY: &str = "projection_layout";

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

/// The read index: a cheap-to-clone pair of sled trees.
#[derive(Clone)]
pub struct Index {
    rows: sled::Tree,
    index: sled::Tree,
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
    pub fn open(db: &sled::Db) -> Result<Index, Error> {
        Self::open_named(db, ROWS, INDEX)
    }

    fn open_named(db: &sled::Db, rows: &str, index: &str) -> Result<Index, Error> {
        Ok(Index {
            rows: db.open_tree(rows)?,
            index: db.open_tree(index)?,
        })
    }

    /// The indexed state of one run.
    pub fn get(&self, id: RunId) -> Result<Option<Run>, Error> {
        match self.rows.get(id.to_bytes())? {
            None => Ok(None),
            Some(bytes) => decode_row(id, &bytes).map(Some),
        }
    }

    /// Moves the index from `old` (the run's previous state, if any) to `new`.
    pub fn apply(&self, old: Option<&Run>, new: &Run) -> Result<(), Error> {
        let new_keys = keys::entries(new);
        let old_keys = old.map(keys::entries).unwrap_or_default();
        for key in &old_keys {
            if new_keys.binary_search(key).is_err() {
                self.index.remove(key)?;
            }
        }
        for key in &new_keys {
            if old_keys.binary_search(key).is_err() {
                self.index.insert(key.as_slice(), &[])?;
            }
        }
        let row = postcard::to_allocvec(new).map_err(|e| Error::CorruptRow {
            run_id: new.id.to_string(),
            detail: e.to_string(),
        })?;
        self.rows.insert(new.id.to_bytes(), row)?;
        Ok(())
    }

    /// Number of runs in the index.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
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
            for key in keys::entries(run) {
                self.index.remove(key)?;
            }
            self.rows.remove(run.id.to_bytes())?;
        }
        Ok(())
    }

    fn clear(&self) -> Result<(), Error> {
        self.rows.clear()?;
        self.index.clear()?;
        Ok(())
    }

    /// Folds every run of the log into this (emptied) index. Returns (runs, events).
    fn build_from(&self, store: &Store) -> Result<(u64, u64), Error> {
        self.clear()?;
        let mut runs = 0u64;
        let mut events = 0u64;
        let mut current: Option<Run> = None;
        for envelope in store.scan() {
            let envelope = envelope?;
            events += 1;
            let same = current.as_ref().is_some_and(|r| r.id == envelope.run_id);
            if !same {
                if let Some(run) = current.take() {
                    self.apply(None, &run)?;
                    runs += 1;
                }
            }
            let base = if same { current.take() } else { None };
            current = crate::domain::evolve(base, envelope.run_id, &envelope.event, envelope.at);
        }
        if let Some(run) = current.take() {
            self.apply(None, &run)?;
            runs += 1;
        }
        Ok((runs, events))
    }

    /// Rebuilds the index from the log. Returns (runs, events) folded.
    pub fn rebuild(&self, store: &Store) -> Result<(u64, u64), Error> {
        let counts = self.build_from(store)?;
        store
            .db()
            .insert(LAYOUT_KEY, &LAYOUT_VERSION.to_be_bytes())?;
        Ok(counts)
    }

    /// Rebuilds the index from the log into scratch trees and compares it with this one.
    pub fn verify(&self, store: &Store) -> Result<(u64, u64, Vec<Difference>), Error> {
        let db = store.db();
        let scratch = Index::open_named(db, "verify_runs", "verify_run_index")?;
        let (runs, events) = scratch.build_from(store)?;
        let mut differences = Vec::new();
        compare_trees(&self.rows, &scratch.rows, |key, side| {
            let id = keys::id_of_position(key).unwrap_or(RunId(0));
            differences.push(match side {
                Side::OnlyLive => Difference::RowExtra(id),
                Side::OnlyRebuilt => Difference::RowMissing(id),
                Side::Both => Difference::RowDiffers(id),
            });
        })?;
        compare_trees(&self.index, &scratch.index, |key, side| {
            differences.push(match side {
                Side::OnlyLive => Difference::EntryExtra(key.to_vec()),
                _ => Difference::EntryMissing(key.to_vec()),
            });
        })?;
        db.drop_tree("verify_runs")?;
        db.drop_tree("verify_run_index")?;
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
        let rows = self
            .rows
            .iter()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        let index = self
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

fn decode_row(id: RunId, bytes: &[u8]) -> Result<Run, Error> {
    postcard::from_bytes(bytes).map_err(|e| Error::CorruptRow {
        run_id: id.to_string(),
        detail: e.to_string(),
    })
}
