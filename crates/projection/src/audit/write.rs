//! Writing the audit index: the events a projector batch made durable (those its commands handed
//! over, else read from the log from each run's previously indexed `next_seq`), every event of a
//! run being caught up, and the entries of a rebuild. Entries are gathered in `Gathered` (small:
//! positions and summaries, never the events) and written together, grouped by range, in blocks
//! (`blocks.rs`), each block touched read and written once: the more entries a write carries,
//! the fewer times a block is rewritten (the projector gathers the entries of many batches, see
//! `backlog.rs`). Writing an entry twice is harmless (a block holds each entry once). It must
//! not decide what an entry looks like (`keys.rs`).

use std::collections::BTreeMap;

use runledger_domain::Run;
use runledger_store::{Envelope, Store};

use super::keys::{entries_with, Prefixes, Tree};
use crate::blocks::{self, Shape};
use crate::trees::AuditTrees;
use crate::{Error, Index};

/// The audit index's blocks: the read index's sizes. An entry is 50 to 100 bytes (a 32-byte
/// position and a summary naming the type, team and key), so a block holds 10 to 20; the
/// events of a projector batch that land at the tail of a range cost one or a few block
/// writes. Larger blocks cost more than they save: sled copies a whole leaf, values and all, on
/// every write to it.
const AUDIT_BLOCKS: Shape = Shape {
    max: 32,
    max_bytes: 1024,
    fill: 24,
    fill_bytes: 768,
};

/// Audit entries waiting to be written, per tree: `(range prefix, entry)`.
#[derive(Default)]
pub(crate) struct Gathered {
    per_tree: [Vec<(Vec<u8>, Vec<u8>)>; 3],
    prefixes: Prefixes,
    events: usize,
}

impl Gathered {
    /// Adds the entries of one event of a run of `team`.
    pub(crate) fn add(&mut self, team: &str, envelope: &Envelope) {
        for (tree, prefix, entry) in entries_with(team, envelope, &mut self.prefixes) {
            self.per_tree[tree as usize].push((prefix, entry));
        }
        self.events += 1;
    }

    /// Takes over the entries `other` gathered.
    pub(crate) fn append(&mut self, other: Gathered) {
        for (mine, theirs) in self.per_tree.iter_mut().zip(other.per_tree) {
            mine.extend(theirs);
        }
        self.events += other.events;
    }

    /// Events gathered since the last write.
    pub(crate) fn events(&self) -> usize {
        self.events
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Forgets the entries (after a write, or after a failed one: the runs they belong to are
    /// then caught up at the next start, see `backlog.rs`).
    pub(crate) fn clear(&mut self) {
        for tree in &mut self.per_tree {
            tree.clear();
        }
        self.events = 0;
    }
}

impl AuditTrees {
    fn tree(&self, tree: Tree) -> &sled::Tree {
        match tree {
            Tree::Team => &self.team,
            Tree::Type => &self.kind,
            Tree::Actor => &self.actor,
        }
    }

    /// Writes the entries of `events`, each of a run of the team it is given with.
    pub(crate) fn insert_all<'e>(
        &self,
        events: impl IntoIterator<Item = (&'e str, &'e Envelope)>,
    ) -> Result<(), Error> {
        let mut gathered = Gathered::default();
        for (team, envelope) in events {
            gathered.add(team, envelope);
        }
        self.write(&gathered)
    }

    /// Writes gathered entries (and keeps them: the caller clears them).
    pub(crate) fn write(&self, gathered: &Gathered) -> Result<(), Error> {
        // A block is read, changed and written back: two writers must not interleave.
        let _serial = self.serial.lock();
        for (which, changes) in [Tree::Team, Tree::Type, Tree::Actor]
            .iter()
            .zip(&gathered.per_tree)
        {
            if changes.is_empty() {
                continue;
            }
            let tree = self.tree(*which);
            let mut by_range: BTreeMap<&[u8], Vec<(&[u8], bool)>> = BTreeMap::new();
            for (prefix, entry) in changes {
                by_range
                    .entry(prefix.as_slice())
                    .or_default()
                    .push((entry.as_slice(), true));
            }
            let mut ops = Vec::new();
            blocks::write_ranges(tree, by_range, &AUDIT_BLOCKS, &mut ops)?;
            if let [(key, value)] = ops.as_slice() {
                match value {
                    Some(value) => tree.insert(key.as_slice(), value.as_slice())?,
                    None => tree.remove(key.as_slice())?,
                };
                continue;
            }
            // A split or re-key is several writes: one batch, so that a crash between them
            // cannot lose the entries of the block they move (sled applies a batch whole).
            let mut batch = sled::Batch::default();
            for (key, value) in ops {
                match value {
                    Some(value) => batch.insert(key, value),
                    None => batch.remove(key),
                }
            }
            tree.apply_batch(batch)?;
        }
        Ok(())
    }
}

impl Index {
    /// Gathers the audit entries of the events that moved each run from `old` (the row the
    /// index holds, if any) to `new`: those from `old.next_seq` up to `new.next_seq`.
    /// `carried[i]` are the events the commands behind `changes[i]` appended, if the caller has
    /// them: used when they are exactly those, else the events are read back from the log (a
    /// batch that failed took its runs' events with it). The projector writes them later
    /// (`write_audit`); until then its runs stay marked or under the floor, so a crash leaves
    /// them to the catch-up, which indexes their events again.
    pub(crate) fn gather_events(
        &self,
        store: &Store,
        changes: &[(Option<&Run>, &Run)],
        carried: &[Vec<Envelope>],
        into: &mut Gathered,
    ) -> Result<(), Error> {
        for (i, (old, new)) in changes.iter().enumerate() {
            let from = old.map_or(0, |run| run.next_seq);
            if from >= new.next_seq {
                continue;
            }
            let carried = carried.get(i).map_or(&[][..], Vec::as_slice);
            let exact = carried.len() as u64 == new.next_seq - from
                && carried
                    .iter()
                    .zip(from..)
                    .all(|(e, seq)| e.seq == seq && e.run_id == new.id);
            if exact {
                for envelope in carried {
                    into.add(&new.team, envelope);
                }
                continue;
            }
            for envelope in store.run_events(new.id, from) {
                let envelope = envelope?;
                if envelope.seq >= new.next_seq {
                    break;
                }
                into.add(&new.team, &envelope);
            }
        }
        Ok(())
    }

    /// Writes gathered audit entries.
    pub(crate) fn write_audit(&self, gathered: &Gathered) -> Result<(), Error> {
        self.trees().audit.write(gathered)
    }
}

/// Writes the audit entries a rebuild gathered, on its writer thread.
pub(crate) fn write_gathered(
    audit: &AuditTrees,
    batches: std::sync::mpsc::Receiver<Vec<(String, Envelope)>>,
) -> Result<(), Error> {
    for batch in batches {
        audit.insert_all(
            batch
                .iter()
                .map(|(team, envelope)| (team.as_str(), envelope)),
        )?;
    }
    Ok(())
}
