//! The projector's audit backlog: the audit entries of rows it has applied but not yet
//! written, and the dirty markers those rows would have let it clear.
//!
//! Why: the audit index keeps its entries in blocks (`blocks.rs`), and a write rewrites the tail
//! block of every range it touches. Written batch by batch, a create cost its share of three
//! block rewrites, about 2 KB of sled log per create, more than its own record. Gathered over
//! many batches, a block is written about once, full.
//!
//! Crash safety (`projector.rs`): an entry is lost with the process until it is written, so the
//! run it belongs to must stay for the next start to catch up, which indexes every event of the
//! run again. A young run stays under the index floor: the floor is stored only right after the
//! backlog is written (`Shared::store_floor`). An older run keeps its dirty marker: the clear
//! waits here and is made right after the write. A failed write leaves both as they are, for
//! good (`broken`): the markers stay and the stored floor no longer moves, so the next start
//! catches those runs up.

use std::collections::HashMap;

use runledger_domain::RunId;
use runledger_store::Store;

use crate::audit::Gathered;
use crate::Index;

/// Entries gathered before the backlog is written regardless of the floor: bounds its memory
/// (a few hundred bytes an event) and how much a crash leaves the next start to catch up.
pub(crate) const MAX_EVENTS: usize = 8192;

#[derive(Default)]
pub(crate) struct Backlog {
    pub(crate) gathered: Gathered,
    /// Dirty markers to clear once the gathered entries are written: run and generation.
    clears: HashMap<RunId, u64>,
    /// A write of the backlog failed: nothing is cleared or stored on its strength any more.
    broken: bool,
}

impl Backlog {
    /// A marker to clear after the next write.
    pub(crate) fn clear_later(&mut self, id: RunId, generation: u64) {
        self.clears.insert(id, generation);
    }

    /// Whether a run's marker waits here to be cleared (it is the projector's, not a leftover).
    pub(crate) fn holds(&self, id: RunId) -> bool {
        self.clears.contains_key(&id)
    }

    /// Writes the gathered entries if `due` or `MAX_EVENTS` are gathered, then clears the
    /// markers they held back. `true` if everything applied so far is written: the floor may
    /// be stored. A failed write drops the entries and keeps the markers, for good.
    pub(crate) fn write(&mut self, index: &Index, store: &Store, due: bool) -> bool {
        if self.broken || !(due || self.gathered.events() >= MAX_EVENTS) {
            return false;
        }
        if !self.gathered.is_empty() {
            if let Err(e) = index.write_audit(&self.gathered) {
                tracing::error!(error = %e, "cannot write the audit index; the runs it lacks are caught up at the next start");
                self.gathered.clear();
                self.clears.clear();
                self.broken = true;
                return false;
            }
            self.gathered.clear();
        }
        for (id, generation) in self.clears.drain() {
            if let Err(e) = store.clear_dirty_generation(id, generation) {
                tracing::error!(run_id = %id, error = %e, "cannot clear a run's dirty marker; the next start checks it again");
            }
        }
        true
    }
}
