//! The read index: a projection of the event log that answers `GET /agent/runs` and
//! `GET /agent/runs/{id}` without folding logs.
//!
//! Two sled trees: `runs` maps a run id to its folded state (a row), and `run_index` holds the
//! secondary keys of `keys.rs`. The index is derived data: it is updated after each durable
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

mod blocks;
pub mod keys;
pub mod projector;
pub mod query;

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock, RwLock};

use crate::domain::{Run, RunId, RunState};
use crate::store::{self, Store};

pub use query::{Cursor, Order, Page, Query, SortBy};

const ROWS: &str = "runs";
const INDEX: &str = "run_index";
/// Bumped whenever the row encoding or key layout changes, or what every writer must do; a
/// mismatch triggers a rebuild. 6: writers remove the saved runs-per-state tally
/// (`SAVED_TALLY_KEY`) before they write. 7: rows carry the follow-ups owed to the run's
/// execution (`Run::owed`) and the run's usage (`Run::usage`), and writers remove the saved
/// usage totals (`SAVED_USAGE_KEY`) too.
pub const LAYOUT_VERSION: u32 = 7;
const LAYOUT_KEY: &str = "projection_layout";
/// The generation of the trees in use (absent: 0), in sled's default tree.
const GENERATION_KEY: &str = "projection_generation";
/// The runs-per-state tally as of the last clean stop or rebuild (a `SavedTally`), in sled's
/// default tree; absent while writes are being made.
const SAVED_TALLY_KEY: &str = "projection_state_counts";
/// The usage totals per environment as of the last clean stop (a `SavedUsage`), in sled's
/// default tree; absent while writes are being made.
const SAVED_USAGE_KEY: &str = "projection_usage_totals";
/// The index writes in progress when a block is split or re-keyed (see `Trees::commit`).
const JOURNAL_KEY: &str = "projection_journal";
/// Scratch trees that `verify` of earlier versions built inside the store; `open` drops them if
/// an interrupted verification left them behind.
const VERIFY_ROWS: &str = "verify_runs";
const VERIFY_INDEX: &str = "verify_run_index";
/// Where `verify` builds its scratch index, in the data directory: a sled database of its own,
/// so that a verification writes nothing to the store. (Built inside the store, the scratch
/// copy grew its file by the index's size and left the page ids it freed in sled's page table
/// until new pages reused them: 28 MB more memory for the server at 410k runs.)
const VERIFY_DIR: &str = "verify-scratch";
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

/// What the runs of one environment used, summed over their recorded executions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UsageTotals {
    pub inference_nano_usd: u64,
    pub compute_nano_usd: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cpu_ms: u64,
}

/// Usage totals by environment id.
pub type UsageByEnvironment = std::collections::BTreeMap<String, UsageTotals>;

impl UsageTotals {
    fn of(run: &Run) -> UsageTotals {
        let u = &run.usage;
        UsageTotals {
            inference_nano_usd: u.inference_nano_usd.unwrap_or(0),
            compute_nano_usd: u.compute_nano_usd.unwrap_or(0),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cpu_ms: u.cpu_ms,
        }
    }

    fn is_zero(&self) -> bool {
        *self == UsageTotals::default()
    }

    /// Adds (`sign` +1) or takes away (-1) `other`; `None` if taking away would go below 0,
    /// which cannot happen while the totals match the rows. Adding saturates.
    fn moved(self, other: UsageTotals, add: bool) -> Option<UsageTotals> {
        let f = |a: u64, b: u64| {
            if add {
                Some(a.saturating_add(b))
            } else {
                a.checked_sub(b)
            }
        };
        Some(UsageTotals {
            inference_nano_usd: f(self.inference_nano_usd, other.inference_nano_usd)?,
            compute_nano_usd: f(self.compute_nano_usd, other.compute_nano_usd)?,
            input_tokens: f(self.input_tokens, other.input_tokens)?,
            output_tokens: f(self.output_tokens, other.output_tokens)?,
            cpu_ms: f(self.cpu_ms, other.cpu_ms)?,
        })
    }
}

/// The environment a run's usage counts for.
fn environment_of(run: &Run) -> &str {
    run.config.environment_id.as_deref().unwrap_or_default()
}

/// Moves the usage totals from `old` rows to `new` ones; on a contradiction, forgets them so
/// the next ask sums the rows again rather than report a wrong figure.
fn move_usage(usage: &mut Option<UsageByEnvironment>, old: Option<&Run>, new: Option<&Run>) {
    let Some(totals) = usage else { return };
    let mut step = |run: &Run, add: bool| -> Option<()> {
        let part = UsageTotals::of(run);
        if part.is_zero() {
            return Some(());
        }
        let slot = totals.entry(environment_of(run).to_string()).or_default();
        *slot = slot.moved(part, add)?;
        Some(())
    };
    let moved = old
        .map_or(Some(()), |o| step(o, false))
        .and_then(|()| new.map_or(Some(()), |n| step(n, true)));
    if moved.is_none() {
        *usage = None;
    }
}

/// The usage totals as saved in sled's default tree, with the generation of the trees they sum.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedUsage {
    generation: u64,
    totals: Vec<(String, UsageTotals)>,
}

fn read_saved_usage(db: &sled::Db, generation: u64) -> Result<Option<UsageByEnvironment>, Error> {
    let Some(bytes) = db.get(SAVED_USAGE_KEY)? else {
        return Ok(None);
    };
    Ok(postcard::from_bytes::<SavedUsage>(&bytes)
        .ok()
        .filter(|saved| saved.generation == generation)
        .map(|saved| saved.totals.into_iter().collect()))
}

/// The tally as saved in sled's default tree: the generation of the trees it counts, and the
/// runs per state in `RunState::ALL` order.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedTally {
    generation: u64,
    counts: Vec<u64>,
}

/// The generation of the trees in use.
fn current_generation(db: &sled::Db) -> Result<u64, Error> {
    match db.get(GENERATION_KEY)? {
        None => Ok(0),
        Some(v) => Ok(u64::from_be_bytes(v.as_ref().try_into().map_err(|_| {
            Error::CorruptRow {
                run_id: String::new(),
                detail: format!("{GENERATION_KEY} has {} bytes", v.len()),
            }
        })?)),
    }
}

/// The saved tally, if there is one for the trees of `generation` that decodes.
///
/// Every writer of this layout removes the saved tally before it writes, which is why the
/// layout version went up with it: a version from before would write the index and leave a
/// stale copy, and it rebuilds an index of another layout instead of writing to it.
fn read_saved_tally(db: &sled::Db, generation: u64) -> Result<Tally, Error> {
    let Some(bytes) = db.get(SAVED_TALLY_KEY)? else {
        return Ok(None);
    };
    // One that does not decode, or counts another generation or a different list of states,
    // is not used; the ranges are counted instead, and the next save replaces it.
    Ok(postcard::from_bytes::<SavedTally>(&bytes)
        .ok()
        .filter(|saved| saved.generation == generation)
        .and_then(|saved| saved.counts.try_into().ok()))
}

fn write_saved_tally(db: &sled::Db, generation: u64, counts: &StateCounts) -> Result<(), Error> {
    let saved = SavedTally {
        generation,
        counts: counts.to_vec(),
    };
    let bytes = postcard::to_allocvec(&saved).map_err(|e| Error::CorruptRow {
        run_id: String::new(),
        detail: format!("cannot encode the saved state counts: {e}"),
    })?;
    db.insert(SAVED_TALLY_KEY, bytes)?;
    Ok(())
}

/// Runs per state (the positions each state's range holds), in `RunState::ALL` order.
type StateCounts = [u64; RunState::ALL.len()];

/// The runs per state as the writes keep them. `None` until the open takes a saved tally or
/// `count_by_state` first counts the ranges, and again after a write that failed part of the
/// way (some of its block writes may have been made).
type Tally = Option<StateCounts>;

/// The range prefixes of the states, in `RunState::ALL` order.
static STATE_PREFIXES: LazyLock<[Vec<u8>; RunState::ALL.len()]> =
    LazyLock::new(|| RunState::ALL.map(|s| keys::filter_prefix(keys::Field::State, s.as_str())));

/// Moves the tally by the net change of each range a write made.
fn tally_writes(tally: &mut Tally, net: &[(&[u8], i64)]) {
    let Some(counts) = tally else { return };
    for &(prefix, change) in net {
        let Some(slot) = STATE_PREFIXES.iter().position(|p| p.as_slice() == prefix) else {
            continue;
        };
        match counts[slot].checked_add_signed(change) {
            Some(n) => counts[slot] = n,
            // Cannot happen while the tally matches the ranges; count again rather than lie.
            None => {
                *tally = None;
                return;
            }
        }
    }
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

    /// Writes the difference between two entry sets, through their ranges' blocks, and moves
    /// the tally (the caller holds `Index::serial`) by what the ranges gained and lost.
    fn write_entries(
        &self,
        db: &sled::Db,
        removals: Vec<Vec<u8>>,
        insertions: Vec<Vec<u8>>,
        tally: &mut Tally,
    ) -> Result<(), Error> {
        let mut ops: Vec<blocks::Op> = Vec::new();
        let planned = blocks::write(&self.index, &removals, &insertions, &mut ops)?;
        if let Err(e) = self.commit(db, &ops, planned.reshaped) {
            *tally = None;
            return Err(e);
        }
        tally_writes(tally, &planned.net);
        Ok(())
    }

    /// Makes the writes. When a block was split or re-keyed, a crash in the middle could lose
    /// positions of runs the update is not about (and whose markers are long gone), so the
    /// writes are first recorded whole in a journal in sled's default tree, which `redo`
    /// replays at the next open. sled recovers a prefix of its log, so any of the writes that
    /// survived a crash implies that the journal did. (sled's own atomic batches would do, but
    /// measured here they cost a quarter of the create rate.)
    fn commit(&self, db: &sled::Db, ops: &[blocks::Op], journal: bool) -> Result<(), Error> {
        // A journal left by a write that failed half-way is finished first: replayed later,
        // after newer writes, it would put old blocks back.
        self.redo(db)?;
        if journal {
            let record = postcard::to_allocvec(ops).map_err(|e| Error::CorruptRow {
                run_id: String::new(),
                detail: format!("cannot encode the index journal: {e}"),
            })?;
            db.insert(JOURNAL_KEY, record)?;
        }
        self.write_ops(ops)?;
        if journal {
            db.remove(JOURNAL_KEY)?;
        }
        Ok(())
    }

    fn write_ops(&self, ops: &[blocks::Op]) -> Result<(), Error> {
        for (key, value) in ops {
            match value {
                Some(v) => {
                    self.index.insert(key.as_slice(), v.as_slice())?;
                }
                None => {
                    self.index.remove(key.as_slice())?;
                }
            }
        }
        Ok(())
    }

    /// Replays the journal a crash or a failed write left behind (its writes are idempotent),
    /// then removes it. `false` if there was none.
    fn redo(&self, db: &sled::Db) -> Result<bool, Error> {
        let Some(record) = db.get(JOURNAL_KEY)? else {
            return Ok(false);
        };
        let ops: Vec<blocks::Op> =
            postcard::from_bytes(&record).map_err(|e| Error::CorruptRow {
                run_id: String::new(),
                detail: format!("the index journal does not decode: {e}"),
            })?;
        self.write_ops(&ops)?;
        db.remove(JOURNAL_KEY)?;
        Ok(true)
    }

    /// Folds every run of the log into these (empty) trees. Returns (runs, events) and the runs
    /// in each state.
    ///
    /// The calling thread scans and folds the log; one thread writes the rows it sends, and
    /// another gathers the index entries by range and, once the log is folded, writes each
    /// range in full blocks. The result does not depend on the order of the writes: rows and
    /// entries are sets.
    fn build_from(&self, store: &Store) -> Result<(u64, u64, StateCounts), Error> {
        let (entries_tx, entries_rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(4);
        let (rows_tx, rows_rx) = std::sync::mpsc::sync_channel::<Vec<(RunId, Vec<u8>)>>(4);
        let index = self.index.clone();
        let rows = self.rows.clone();
        std::thread::scope(|scope| {
            let entries = scope.spawn(move || -> Result<StateCounts, Error> {
                let mut ranges: std::collections::BTreeMap<Vec<u8>, blocks::Gathered> =
                    std::collections::BTreeMap::new();
                for batch in entries_rx {
                    for key in batch {
                        let (prefix, pos) = blocks::split(&key)?;
                        match ranges.get_mut(prefix) {
                            Some(range) => range.push(pos)?,
                            None => ranges
                                .entry(prefix.to_vec())
                                .or_insert_with(|| blocks::Gathered::new(prefix))
                                .push(pos)?,
                        }
                    }
                }
                build_ranges(&index, ranges)
            });
            let rows = scope.spawn(move || -> Result<(), Error> {
                for batch in rows_rx {
                    for (id, row) in batch {
                        rows.insert(id.to_bytes(), row)?;
                    }
                }
                Ok(())
            });
            let folded = fold_log(store, entries_tx, rows_tx);
            let entries = entries
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let rows = rows
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // A failed writer makes the folding side stop too (its sends fail); report the
            // writer's error then, it is the cause.
            let counts = entries?;
            rows?;
            let (runs, events) = folded?;
            Ok((runs, events, counts))
        })
    }
}

/// Writes gathered ranges into an empty index tree, on two threads: the log is folded by then,
/// and the rows' writer is the only other work left. Returns the positions written to each
/// state's range.
fn build_ranges(
    index: &sled::Tree,
    ranges: std::collections::BTreeMap<Vec<u8>, blocks::Gathered>,
) -> Result<StateCounts, Error> {
    let total: usize = ranges.values().map(blocks::Gathered::len).sum();
    let mut first = Vec::new();
    let mut second = Vec::new();
    let mut taken = 0;
    for range in ranges {
        if taken < total / 2 {
            taken += range.1.len();
            first.push(range);
        } else {
            second.push(range);
        }
    }
    let build = |ranges: Vec<(Vec<u8>, blocks::Gathered)>| -> Result<StateCounts, Error> {
        let mut counts = [0; RunState::ALL.len()];
        for (prefix, positions) in ranges {
            let written = positions.build(index, &prefix)?;
            if let Some(slot) = STATE_PREFIXES.iter().position(|p| *p == prefix) {
                counts[slot] = written;
            }
        }
        Ok(counts)
    };
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| build(second));
        let built = build(first);
        let helped = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let (mut counts, other) = (built?, helped?);
        for (n, m) in counts.iter_mut().zip(other) {
            *n += m;
        }
        Ok(counts)
    })
}

/// Scans and folds the whole log, sending each run's row and index entries to the writers of
/// `build_from` in batches. Returns (runs, events).
fn fold_log(
    store: &Store,
    entries_tx: std::sync::mpsc::SyncSender<Vec<Vec<u8>>>,
    rows_tx: std::sync::mpsc::SyncSender<Vec<(RunId, Vec<u8>)>>,
) -> Result<(u64, u64), Error> {
    let mut runs = 0u64;
    let mut events = 0u64;
    let mut entries = Vec::with_capacity(BUILD_BATCH);
    let mut rows = Vec::with_capacity(BUILD_BATCH / 8);
    // `false` once a writer is gone, which happens only if it failed: `build_from` reports why.
    let send = |entries: &mut Vec<Vec<u8>>, rows: &mut Vec<(RunId, Vec<u8>)>| -> bool {
        let full = std::mem::replace(entries, Vec::with_capacity(BUILD_BATCH));
        let full_rows = std::mem::replace(rows, Vec::with_capacity(BUILD_BATCH / 8));
        entries_tx.send(full).is_ok() && rows_tx.send(full_rows).is_ok()
    };
    let mut current: Option<Run> = None;
    for envelope in store.scan() {
        let envelope = envelope?;
        events += 1;
        let same = current.as_ref().is_some_and(|r| r.id == envelope.run_id);
        if !same {
            if let Some(run) = current.take() {
                runs += 1;
                entries.extend(keys::entries(&run));
                rows.push((run.id, encode_row(&run)?));
                if entries.len() >= BUILD_BATCH && !send(&mut entries, &mut rows) {
                    return Ok((runs, events));
                }
            }
        }
        let base = if same { current.take() } else { None };
        current = crate::domain::evolve(base, envelope.run_id, &envelope.event, envelope.at);
    }
    if let Some(run) = current.take() {
        runs += 1;
        entries.extend(keys::entries(&run));
        rows.push((run.id, encode_row(&run)?));
    }
    send(&mut entries, &mut rows);
    Ok((runs, events))
}

/// What `Index::rebuild` did. The two durations say where a rebuild's time went: folding the
/// log and writing the new index, then dropping the previous one (which reads back and frees
/// every page of the old trees: a tenth to a quarter of a rebuild at 1M runs, the more when
/// the server wrote that index than when a rebuild did).
#[derive(Debug, Clone, Copy)]
pub struct Rebuilt {
    pub runs: u64,
    pub events: u64,
    pub build: std::time::Duration,
    pub drop: std::time::Duration,
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
    /// The saved runs-per-state tally says `kept` runs are in `state`; the log says `actual`.
    StateCount {
        state: RunState,
        kept: u64,
        actual: u64,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::RowMissing(id) => write!(f, "run {id}: missing from the index"),
            Difference::RowExtra(id) => write!(f, "run {id}: in the index but not in the log"),
            Difference::RowDiffers(id) => write!(f, "run {id}: indexed state differs from its log"),
            Difference::EntryMissing(k) => write!(f, "index entry missing: {}", hex(k)),
            Difference::EntryExtra(k) => write!(f, "stale index entry: {}", hex(k)),
            Difference::StateCount {
                state,
                kept,
                actual,
            } => write!(
                f,
                "runs in state {}: the saved count says {kept}, the log {actual}",
                state.as_str()
            ),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    /// The runs per state that the next open would take from the saved tally, if there is one
    /// it would take. For tests.
    #[doc(hidden)]
    pub fn saved_counts(db: &sled::Db) -> Result<Option<Vec<(RunState, u64)>>, Error> {
        let saved = read_saved_tally(db, current_generation(db)?)?;
        Ok(saved.map(|counts| RunState::ALL.into_iter().zip(counts).collect()))
    }

    /// Saves the runs-per-state tally in sled's default tree, for the next open to take
    /// instead of counting the ranges: at a clean stop, once every acknowledged command is
    /// indexed, before the last sync. Returns whether there was one to save: a tally nobody
    /// asked for since the open is not counted for this.
    pub fn save_tally(&self) -> Result<bool, Error> {
        let mut serial = self.serial.lock();
        if let (Some(usage), false) = (&serial.usage, serial.usage_saved) {
            let saved = SavedUsage {
                generation: self.trees().generation,
                totals: usage.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            };
            let bytes = postcard::to_allocvec(&saved).map_err(|e| Error::CorruptRow {
                run_id: String::new(),
                detail: format!("usage totals do not encode: {e}"),
            })?;
            self.db.insert(SAVED_USAGE_KEY, bytes)?;
            serial.usage_saved = true;
        }
        if serial.saved {
            return Ok(true);
        }
        let Some(counts) = serial.tally else {
            return Ok(false);
        };
        write_saved_tally(&self.db, self.trees().generation, &counts)?;
        serial.saved = true;
        Ok(true)
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

    /// What the runs of each environment used, as of the last write. Unless the open found
    /// saved totals, the first call (and the first after a failed write) sums the rows,
    /// holding writes back meanwhile so that the sum and the writes after it add up exactly.
    pub fn usage_by_environment(&self) -> Result<UsageByEnvironment, Error> {
        let mut serial = self.serial.lock();
        if let Some(usage) = &serial.usage {
            return Ok(usage.clone());
        }
        let started = std::time::Instant::now();
        let mut totals = UsageByEnvironment::new();
        for row in self.trees().rows.iter() {
            let (key, bytes) = row?;
            let bytes16: [u8; 16] = key.as_ref().try_into().map_err(|_| Error::CorruptRow {
                run_id: hex(&key),
                detail: "the key is not a run id".into(),
            })?;
            let id = RunId::from_bytes(bytes16);
            let run = decode_row(id, &bytes)?;
            let part = UsageTotals::of(&run);
            if !part.is_zero() {
                let slot = totals.entry(environment_of(&run).to_string()).or_default();
                *slot = slot.moved(part, true).unwrap_or(*slot);
            }
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "summed the runs' usage per environment from the read index"
        );
        serial.usage = Some(totals.clone());
        Ok(totals)
    }

    /// How many runs are in each state, as of the last write. Unless the open found a saved
    /// tally, the first call (and the first after a failed write) counts the state ranges,
    /// holding writes back while it walks them so that the count and the writes after it add
    /// up exactly; every later call reads the tally the writes keep.
    pub fn count_by_state(&self) -> Result<Vec<(RunState, u64)>, Error> {
        let mut serial = self.serial.lock();
        let counts = match serial.tally {
            Some(counts) => counts,
            None => {
                let started = std::time::Instant::now();
                let trees = self.trees();
                let mut counts = [0; RunState::ALL.len()];
                for (n, prefix) in counts.iter_mut().zip(STATE_PREFIXES.iter()) {
                    *n = blocks::count(&trees.index, prefix)?;
                }
                serial.tally = Some(counts);
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "counted the runs in each state from the read index"
                );
                counts
            }
        };
        Ok(RunState::ALL.into_iter().zip(counts).collect())
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
                from_log = crate::domain::evolve(from_log, id, &envelope.event, envelope.at);
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

    /// Rebuilds the index from the log. Returns what it folded and where the time went.
    ///
    /// Builds the next generation of trees, records it (and the layout version) in sled's
    /// default tree, switches every handle to it and drops the previous generation. A crash
    /// before the switch leaves the old index in place and the new trees to be dropped by the
    /// next `open`; writes are ordered in sled's log, so a recovered switch implies the whole
    /// new generation was recovered too.
    pub fn rebuild(&self, store: &Store) -> Result<Rebuilt, Error> {
        let previous = self.trees().generation;
        let next = previous + 1;
        let (rows, index) = tree_names(next);
        // Left behind by an interrupted rebuild in this process, if any.
        self.db.drop_tree(rows)?;
        self.db.drop_tree(index)?;
        let fresh = Trees::open(&self.db, next)?;
        let started = std::time::Instant::now();
        let (runs, events, counts) = fresh.build_from(store)?;
        let build = started.elapsed();
        {
            let mut serial = self.serial.lock();
            self.db.insert(GENERATION_KEY, &next.to_be_bytes())?;
            self.db.insert(LAYOUT_KEY, &LAYOUT_VERSION.to_be_bytes())?;
            *self.trees.write().unwrap_or_else(|p| p.into_inner()) = fresh;
            // The build counted the new generation's state ranges. Saved after the switch, so
            // that a copy a crash kept implies the switch was kept too.
            serial.tally = Some(counts);
            serial.saved = false;
            write_saved_tally(&self.db, next, &counts)?;
            serial.saved = true;
            // Summed from the new rows when next asked (saved totals name the old generation).
            serial.usage = None;
            serial.usage_saved = false;
        }
        // The two trees of the previous generation are dropped side by side: a drop reads back
        // and frees every page of its tree one at a time, on one core, and nothing else is
        // left to do.
        let (rows, index) = tree_names(previous);
        std::thread::scope(|scope| -> Result<(), Error> {
            let rows = scope.spawn(|| self.db.drop_tree(rows));
            self.db.drop_tree(index)?;
            rows.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            Ok(())
        })?;
        Ok(Rebuilt {
            runs,
            events,
            build,
            drop: started.elapsed() - build,
        })
    }

    /// Rebuilds the index from the log into a scratch database (`verify-scratch` in the data
    /// directory, with a cache of `cache_bytes`, removed afterwards) and compares it with this
    /// one.
    pub fn verify(
        &self,
        store: &Store,
        cache_bytes: u64,
    ) -> Result<(u64, u64, Vec<Difference>), Error> {
        // Left behind by an interrupted verify, if any: start from an empty database.
        Index::remove_verify_scratch(store.data_dir())?;
        let path = store.data_dir().join(VERIFY_DIR);
        let db = sled::Config::new()
            .path(&path)
            .temporary(true)
            .cache_capacity(cache_bytes)
            // Scratch data: nothing to make durable.
            .flush_every_ms(None)
            .mode(sled::Mode::HighThroughput)
            .open()?;
        let result = self.compare_with_build(store, &db);
        drop(db);
        // `temporary` removes the directory when the last handle goes; make sure of it.
        Index::remove_verify_scratch(store.data_dir())?;
        result
    }

    /// Removes the scratch database of a verification from `data_dir`, if there is one (a
    /// verification that was killed leaves it behind: about the index's size). Returns whether
    /// there was. Only for a holder of the data directory's lock.
    pub fn remove_verify_scratch(data_dir: &std::path::Path) -> Result<bool, Error> {
        let path = data_dir.join(VERIFY_DIR);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(Error::Io { path, source }),
        }
    }

    fn compare_with_build(
        &self,
        store: &Store,
        db: &sled::Db,
    ) -> Result<(u64, u64, Vec<Difference>), Error> {
        let scratch = Trees::open(db, 0)?;
        let (runs, events, counts) = scratch.build_from(store)?;
        let live = self.trees();
        let mut differences = Vec::new();
        // The tally this handle holds: the one the open found saved, moved by any catch-up
        // since. (A count walked from the live ranges is checked entry by entry below.)
        if let Some(tally) = self.serial.lock().tally {
            for ((state, kept), actual) in RunState::ALL.into_iter().zip(tally).zip(counts) {
                if kept != actual {
                    differences.push(Difference::StateCount {
                        state,
                        kept,
                        actual,
                    });
                }
            }
        }
        compare_trees(&live.rows, &scratch.rows, |key, side| {
            let id = keys::id_of_position(key).unwrap_or(RunId(0));
            differences.push(match side {
                Side::OnlyLive => Difference::RowExtra(id),
                Side::OnlyRebuilt => Difference::RowMissing(id),
                Side::Both => Difference::RowDiffers(id),
            });
        })?;
        // Compared entry by entry: the blocks of an incrementally maintained range and of a
        // rebuilt one hold the same positions split at different places.
        compare_sorted(
            blocks::logical(&live.index).map(|k| k.map(|k| (k, Vec::new()))),
            blocks::logical(&scratch.index).map(|k| k.map(|k| (k, Vec::new()))),
            |key, side| {
                differences.push(match side {
                    Side::OnlyLive => Difference::EntryExtra(key.to_vec()),
                    _ => Difference::EntryMissing(key.to_vec()),
                });
            },
        )?;
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
        let index = blocks::logical(&trees.index).collect::<Result<_, _>>()?;
        Ok((rows, index))
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
    report: impl FnMut(&[u8], Side),
) -> Result<(), Error> {
    compare_sorted(pairs(live), pairs(rebuilt), report)
}

fn pairs(tree: &sled::Tree) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), Error>> {
    tree.iter().map(|item| {
        item.map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(Error::from)
    })
}

/// Walks two sorted streams of (key, value) side by side, reporting keys present on one side
/// only and keys whose values differ.
fn compare_sorted(
    mut a: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), Error>>,
    mut b: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), Error>>,
    mut report: impl FnMut(&[u8], Side),
) -> Result<(), Error> {
    use std::cmp::Ordering;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `/metrics` asks for the counts on every scrape; after the first, they must not cost a
    /// walk of the state ranges (35 ms warm, 250–460 ms cold at 1M runs). A block written behind
    /// the index's back shows which source an answer came from.
    #[test]
    fn state_counts_come_from_the_tally_once_counted() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        let none: Vec<u64> = vec![0; RunState::ALL.len()];
        assert_eq!(counts(&index), none);
        queued_behind_the_back(&index, 0);
        assert_eq!(counts(&index), none, "answered from the tally");
        let fresh = Index::open(&db).expect("reopen");
        assert_eq!(
            counts(&fresh),
            [1, 0, 0, 0, 0],
            "a new handle counts the ranges"
        );
    }

    /// A block written behind the index's back to the QUEUED range: a walk counts it, a tally
    /// does not, so the answer shows where the counts came from.
    fn queued_behind_the_back(index: &Index, first: u8) {
        let mut key = keys::filter_prefix(keys::Field::State, "QUEUED");
        let mut pos = [0u8; blocks::FILTER_POS];
        pos[0] = first;
        key.extend_from_slice(&pos);
        index
            .trees()
            .index
            .insert(key, blocks::encode(&[pos]))
            .expect("insert");
    }

    fn counts(index: &Index) -> Vec<u64> {
        let counts = index.count_by_state().expect("count");
        counts.into_iter().map(|(_, n)| n).collect()
    }

    /// A clean stop saves the tally and the next open takes it instead of walking the ranges;
    /// the first write after that open removes the saved copy before it changes anything.
    #[test]
    fn the_next_open_takes_a_saved_tally_until_a_write_removes_it() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        assert!(!index.save_tally().expect("save"), "nothing counted yet");
        assert_eq!(db.get(SAVED_TALLY_KEY).expect("get"), None);
        assert_eq!(counts(&index), [0, 0, 0, 0, 0]);
        assert!(index.save_tally().expect("save"));
        queued_behind_the_back(&index, 1);

        let reopened = Index::open(&db).expect("reopen");
        assert_eq!(
            counts(&reopened),
            [0, 0, 0, 0, 0],
            "taken from the saved tally"
        );
        assert!(db.get(SAVED_TALLY_KEY).expect("get").is_some());
        drop(reopened.lock_for_writing().expect("write"));
        assert_eq!(
            db.get(SAVED_TALLY_KEY).expect("get"),
            None,
            "removed by a write"
        );
        assert_eq!(
            counts(&Index::open(&db).expect("open")),
            [1, 0, 0, 0, 0],
            "walked"
        );
    }

    /// A saved tally of another generation (the index was rebuilt since) or of another list
    /// of states is not taken; neither is one that a journal (writes under way at a crash)
    /// contradicts.
    #[test]
    fn a_saved_tally_that_cannot_match_is_not_taken() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let index = Index::open(&db).expect("open");
        queued_behind_the_back(&index, 1);
        let walked = [1, 0, 0, 0, 0];
        write_saved_tally(&db, 7, &[5; RunState::ALL.len()]).expect("save");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        let shorter = SavedTally {
            generation: 0,
            counts: vec![5; RunState::ALL.len() - 1],
        };
        db.insert(
            SAVED_TALLY_KEY,
            postcard::to_allocvec(&shorter).expect("encode"),
        )
        .expect("insert");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        db.insert(SAVED_TALLY_KEY, b"\xff\xff".as_slice())
            .expect("insert");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);

        write_saved_tally(&db, 0, &[5; RunState::ALL.len()]).expect("save");
        let empty: Vec<blocks::Op> = Vec::new();
        db.insert(JOURNAL_KEY, postcard::to_allocvec(&empty).expect("encode"))
            .expect("journal");
        assert_eq!(counts(&Index::open(&db).expect("open")), walked);
        assert_eq!(db.get(SAVED_TALLY_KEY).expect("get"), None);
    }

    /// `replay --verify` checks a saved tally the open took against the log.
    #[test]
    fn verify_reports_a_saved_tally_the_log_contradicts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = crate::store::Options {
            cache_bytes: 8 << 20,
            ..crate::store::Options::default()
        };
        let store = Store::open(dir.path(), &options).expect("store");
        write_saved_tally(store.db(), 0, &[0, 2, 0, 0, 0]).expect("save");
        let index = Index::open(store.db()).expect("open");
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        assert_eq!(
            differences,
            [Difference::StateCount {
                state: RunState::ALL[1],
                kept: 2,
                actual: 0
            }]
        );
        assert_eq!(
            differences[0].to_string(),
            format!(
                "runs in state {}: the saved count says 2, the log 0",
                RunState::ALL[1].as_str()
            )
        );
    }

    #[test]
    fn an_open_drops_the_scratch_trees_of_an_earlier_versions_verify() {
        let db = sled::Config::new().temporary(true).open().expect("sled");
        for name in [VERIFY_ROWS, VERIFY_INDEX] {
            db.open_tree(name)
                .expect("tree")
                .insert(b"k", b"v")
                .expect("insert");
        }
        Index::open(&db).expect("open");
        let names = db.tree_names();
        assert!(!names.iter().any(|n| n == VERIFY_ROWS.as_bytes()));
        assert!(!names.iter().any(|n| n == VERIFY_INDEX.as_bytes()));
    }

    /// A crash between the writes of a split block leaves the journal behind; the next open
    /// makes all of its writes.
    #[test]
    fn an_interrupted_block_split_is_redone_at_the_next_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("sled");
        let index = Index::open(&db).expect("open");
        let trees = index.trees();
        let prefix = keys::filter_prefix(keys::Field::State, "QUEUED");
        let block = |first: u8, n: u8| -> (Vec<u8>, Option<Vec<u8>>) {
            let positions: Vec<[u8; blocks::FILTER_POS]> = (first..first + n)
                .map(|i| {
                    let mut p = [0u8; blocks::FILTER_POS];
                    p[7] = i;
                    p
                })
                .collect();
            let mut key = prefix.clone();
            key.extend_from_slice(&positions[0]);
            (key, Some(blocks::encode(&positions)))
        };
        // The split was journalled, and only its first write reached the tree.
        let ops = vec![block(0, 3), block(3, 3)];
        db.insert(JOURNAL_KEY, postcard::to_allocvec(&ops).expect("encode"))
            .expect("journal");
        trees
            .index
            .insert(ops[0].0.as_slice(), ops[0].1.clone().expect("value"))
            .expect("first half");
        drop((trees, index));
        let index = Index::open(&db).expect("reopen");
        assert_eq!(db.get(JOURNAL_KEY).expect("get"), None);
        assert_eq!(
            blocks::count(&index.trees().index, &prefix).expect("count"),
            6,
            "the second half is back"
        );

        // A journal left by a write that failed half-way (the process went on) is finished
        // before the next write, not replayed after it.
        let trees = index.trees();
        trees
            .index
            .remove(ops[1].0.as_slice())
            .expect("lose it again");
        db.insert(JOURNAL_KEY, postcard::to_allocvec(&ops).expect("encode"))
            .expect("journal");
        trees.commit(&db, &[], false).expect("next write");
        assert_eq!(db.get(JOURNAL_KEY).expect("get"), None);
        assert_eq!(blocks::count(&trees.index, &prefix).expect("count"), 6);
    }
}
