//! Writing the audit index: the events a projector batch made durable (those its commands handed
//! over, else read from the log from each run's previously indexed `next_seq`), every event of a
//! run being caught up, and the entries of a rebuild. Every writer hands over a whole set of
//! events; their entries are grouped by range and written in blocks (`blocks.rs`), each block
//! touched read and written once. Writing an entry twice is harmless (a block holds each entry
//! once). It must not decide what an entry looks like (`keys.rs`).

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
        let mut per_tree: [Vec<(Vec<u8>, Vec<u8>)>; 3] = Default::default();
        let mut prefixes = Prefixes::default();
        for (team, envelope) in events {
            for (tree, prefix, entry) in entries_with(team, envelope, &mut prefixes) {
                per_tree[tree as usize].push((prefix, entry));
            }
        }
        // A block is read, changed and written back: two writers must not interleave.
        let _serial = self.serial.lock();
        for (which, changes) in [Tree::Team, Tree::Type, Tree::Actor].iter().zip(&per_tree) {
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
    /// Indexes the events that moved each run from `old` (the row the index holds, if any) to
    /// `new`: those from `old.next_seq` up to `new.next_seq`. `carried[i]` are the events the
    /// commands behind `changes[i]` appended, if the caller has them: used when they are
    /// exactly those, else the events are read back from the log (a batch that failed took
    /// its runs' events with it). Called by the projector before it writes the rows, so a
    /// crash in between leaves the run to the catch-up, which indexes its events again.
    pub fn index_events(
        &self,
        store: &Store,
        changes: &[(Option<&Run>, &Run)],
        carried: &[Vec<Envelope>],
    ) -> Result<(), Error> {
        let mut read: Vec<(&str, Envelope)> = Vec::new();
        let mut taken: Vec<(&str, &Envelope)> = Vec::with_capacity(changes.len());
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
                taken.extend(carried.iter().map(|e| (new.team.as_str(), e)));
                continue;
            }
            for envelope in store.run_events(new.id, from) {
                let envelope = envelope?;
                if envelope.seq >= new.next_seq {
                    break;
                }
                read.push((&new.team, envelope));
            }
        }
        let read = read.iter().map(|(team, envelope)| (*team, envelope));
        self.trees().audit.insert_all(taken.into_iter().chain(read))
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
