//! The index's incremental writes: applying runs' new states, and catching runs up with their
//! logs after a crash (including the repair of an update a crash cut short). Every write takes
//! the lock that serialises writes and moves the tally and usage totals by what it changed; it
//! must not read the log except to catch a run up.

use std::collections::BTreeSet;

use runledger_domain::{Run, RunId};
use runledger_store::{Envelope, Store};

use crate::audit::Gathered;

use crate::row::encode_row;
use crate::tally::move_usage;
use crate::{keys, Error, Index};

/// Events whose audit entries a catch-up writes at once.
const CATCH_UP_BATCH: usize = 4096;

impl Index {
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

    /// Applies the projector's batch of rows (row, ticket, commands) against the stored ones,
    /// all in one index write (entries of several runs in the same index block cost one
    /// write), and gathers the audit entries of their new events into `audit` (written later,
    /// `backlog.rs`); `false` (logged) if the index could not follow.
    pub(crate) fn apply_batch(
        &self,
        store: &Store,
        batch: &[(Run, u64, u32)],
        events: &[Vec<Envelope>],
        audit: &mut Gathered,
    ) -> bool {
        let result = batch
            .iter()
            .map(|(row, ..)| self.get(row.id))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|stored| {
                let changes: Vec<(Option<&Run>, &Run)> = stored
                    .iter()
                    .zip(batch)
                    .map(|(old, (new, ..))| (old.as_ref(), new))
                    .collect();
                self.gather_events(store, &changes, events, audit)?;
                self.apply_all(&changes)
            });
        match result {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(runs = batch.len(), error = %e, "cannot update the read index; its runs are repaired on their next activation or start");
                false
            }
        }
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
            let from_log =
                self.fold_with_audit(store, id, |run| passed.extend(keys::entries(run)))?;
            let indexed = self.get(id)?;
            if from_log != indexed {
                self.repair(indexed.as_ref(), from_log.as_ref(), passed)?;
                fixed += 1;
            }
            store.clear_dirty(id)?;
        }
        Ok(fixed)
    }

    /// Indexes a run the index has never held (`runledger import --run`: its id is new to the
    /// store): its row, its entries and its audit entries, from its log, then clears its dirty
    /// marker. Unlike `catch_up` it keeps no entry of the run's past states, which only a run
    /// the projector once applied can have in the index, so a run of 100,000 events is
    /// indexed within the memory of a short one.
    pub fn index_new_run(&self, store: &Store, id: RunId) -> Result<(), Error> {
        let run = self.fold_with_audit(store, id, |_| {})?;
        if let Some(run) = &run {
            self.repair(None, Some(run), BTreeSet::new())?;
        }
        store.clear_dirty(id)?;
        Ok(())
    }

    /// Folds a run's log, calling `each` with every state, and writes the audit entries of its
    /// events (the index may lack those of the commands it lacks, and writing one again changes
    /// nothing) a bounded batch at a time, so a run of 100,000 events is never held whole.
    fn fold_with_audit(
        &self,
        store: &Store,
        id: RunId,
        mut each: impl FnMut(&Run),
    ) -> Result<Option<Run>, Error> {
        let mut run = None;
        let mut events = Vec::with_capacity(CATCH_UP_BATCH);
        let write = |events: &mut Vec<(String, runledger_store::Envelope)>| {
            let written = self
                .trees()
                .audit
                .insert_all(events.iter().map(|(team, e)| (team.as_str(), e)));
            events.clear();
            written
        };
        for envelope in store.run_events(id, 0) {
            let envelope = envelope?;
            run = runledger_domain::evolve(run, id, &envelope.event, envelope.at);
            if let Some(run) = &run {
                each(run);
                events.push((run.team.clone(), envelope));
            }
            if events.len() == CATCH_UP_BATCH {
                write(&mut events)?;
            }
        }
        write(&mut events)?;
        Ok(run)
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
