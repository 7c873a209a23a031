//! Writing the audit index: the events a projector batch made durable (read from the log from
//! each run's previously indexed `next_seq`), every event of a run being caught up, and the
//! entries of a rebuild. Entries are plain inserts of keys that never change, so writing one
//! twice is harmless and no lock is needed. It must not decide what a key looks like
//! (`keys.rs`).

use runledger_domain::Run;
use runledger_store::{Envelope, Store};

use super::keys::{entries, Tree};
use crate::trees::AuditTrees;
use crate::{Error, Index};

impl AuditTrees {
    fn tree(&self, tree: Tree) -> &sled::Tree {
        match tree {
            Tree::Team => &self.team,
            Tree::Type => &self.kind,
            Tree::Actor => &self.actor,
        }
    }

    /// Writes the entries of one event of a run of `team`.
    pub(crate) fn insert(&self, team: &str, envelope: &Envelope) -> Result<(), Error> {
        for (tree, key, value) in entries(team, envelope) {
            self.tree(tree).insert(key, value)?;
        }
        Ok(())
    }
}

impl Index {
    /// Indexes the events that moved each run from `old` (the row the index holds, if any) to
    /// `new`: those from `old.next_seq` up to `new.next_seq`, read back from the log. Called by
    /// the projector before it writes the rows, so a crash in between leaves the run to the
    /// catch-up, which indexes its events again.
    pub fn index_events(
        &self,
        store: &Store,
        changes: &[(Option<&Run>, &Run)],
    ) -> Result<(), Error> {
        let audit = self.trees().audit;
        for (old, new) in changes {
            let from = old.map_or(0, |run| run.next_seq);
            if from >= new.next_seq {
                continue;
            }
            for envelope in store.run_events(new.id, from) {
                let envelope = envelope?;
                if envelope.seq >= new.next_seq {
                    break;
                }
                audit.insert(&new.team, &envelope)?;
            }
        }
        Ok(())
    }
}

/// Writes the audit entries a rebuild gathered, on its writer thread.
pub(crate) fn write_gathered(
    audit: &AuditTrees,
    batches: std::sync::mpsc::Receiver<Vec<(String, Envelope)>>,
) -> Result<(), Error> {
    for batch in batches {
        for (team, envelope) in batch {
            audit.insert(&team, &envelope)?;
        }
    }
    Ok(())
}
