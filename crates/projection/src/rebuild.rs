//! Rebuilding the index from the log into the next generation of trees: one thread folds the
//! log, a second writes the rows and a third the secondary keys; then the generation is
//! switched and the previous one dropped.

use super::layout::{LAYOUT_KEY, LAYOUT_VERSION};
use super::row::encode_row;
use super::tally::{state_slot, write_saved_tally, StateCounts};
use super::trees::{audit_tree_names, tree_names, Trees, GENERATION_KEY};
use super::{blocks, keys, Error, Index};
use runledger_domain::{Run, RunId, RunState};
use runledger_store::{Envelope, Store};

/// Index keys handed to the writer thread of a rebuild at a time.
pub(super) const BUILD_BATCH: usize = 4096;

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

/// Writes gathered ranges into an empty index tree, on two threads: the log is folded by then,
/// and the rows' writer is the only other work left. Returns the positions written to each
/// state (summed over the teams' ranges of that state).
pub(super) fn build_ranges(
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
            if let Some(slot) = state_slot(&prefix) {
                counts[slot] += written;
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
pub(super) fn fold_log(
    store: &Store,
    entries_tx: std::sync::mpsc::SyncSender<Vec<Vec<u8>>>,
    rows_tx: std::sync::mpsc::SyncSender<Vec<(RunId, Vec<u8>)>>,
    audit_tx: std::sync::mpsc::SyncSender<Vec<(String, Envelope)>>,
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
    let mut audit = Vec::with_capacity(BUILD_BATCH);
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
        current = runledger_domain::evolve(base, envelope.run_id, &envelope.event, envelope.at);
        if let Some(run) = &current {
            audit.push((run.team.clone(), envelope));
            if audit.len() >= BUILD_BATCH {
                let full = std::mem::replace(&mut audit, Vec::with_capacity(BUILD_BATCH));
                if audit_tx.send(full).is_err() {
                    return Ok((runs, events));
                }
            }
        }
    }
    if audit_tx.send(audit).is_err() {
        return Ok((runs, events));
    }
    if let Some(run) = current.take() {
        runs += 1;
        entries.extend(keys::entries(&run));
        rows.push((run.id, encode_row(&run)?));
    }
    send(&mut entries, &mut rows);
    Ok((runs, events))
}

impl Trees {
    /// Folds every run of the log into these (empty) trees. Returns (runs, events) and the runs
    /// in each state.
    ///
    /// The calling thread scans and folds the log; one thread writes the rows it sends, and
    /// another gathers the index entries by range and, once the log is folded, writes each
    /// range in full blocks. The result does not depend on the order of the writes: rows and
    /// entries are sets.
    pub(super) fn build_from(&self, store: &Store) -> Result<(u64, u64, StateCounts), Error> {
        let (entries_tx, entries_rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(4);
        let (rows_tx, rows_rx) = std::sync::mpsc::sync_channel::<Vec<(RunId, Vec<u8>)>>(4);
        let (audit_tx, audit_rx) = std::sync::mpsc::sync_channel::<Vec<(String, Envelope)>>(4);
        let index = self.index.clone();
        let rows = self.rows.clone();
        let audit = self.audit.clone();
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
            let audit = scope.spawn(move || crate::audit::write_gathered(&audit, audit_rx));
            let folded = fold_log(store, entries_tx, rows_tx, audit_tx);
            let audit = audit
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
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
            audit?;
            let (runs, events) = folded?;
            Ok((runs, events, counts))
        })
    }
}

impl Index {
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
        for name in audit_tree_names(next) {
            self.db.drop_tree(name)?;
        }
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
            let audit = scope.spawn(|| -> sled::Result<()> {
                for name in audit_tree_names(previous) {
                    self.db.drop_tree(name)?;
                }
                Ok(())
            });
            self.db.drop_tree(index)?;
            rows.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            audit
                .join()
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
}
