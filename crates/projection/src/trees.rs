//! The trees of one generation of the index (`runs.N`, `run_index.N` and the audit index's
//! `audit_team.N`, `audit_type.N`, `audit_actor.N`), how a generation is
//! named and found, and the journal that makes a write touching several blocks of a range
//! (a block split or re-key) whole after a crash: the writes are recorded first and redone by
//! the next open. The tally of what such writes move is `tally.rs`'s, which writes through
//! these trees.

use super::{blocks, Error};

/// The names of the trees of generation 0; a later generation's add `.N`.
const ROWS: &str = "runs";
const INDEX: &str = "run_index";
/// The audit index's trees (`audit/`): run events by team, by team and type, by team and actor.
const AUDIT: [&str; 3] = ["audit_team", "audit_type", "audit_actor"];

/// Scratch trees that `verify` of earlier versions built inside the store; `Index::open` drops
/// them if an interrupted verification left them behind.
pub(super) const VERIFY_ROWS: &str = "verify_runs";

pub(super) const VERIFY_INDEX: &str = "verify_run_index";

/// The generation of the trees in use (absent: 0), in sled's default tree.
pub(super) const GENERATION_KEY: &str = "projection_generation";

/// The index writes in progress when a block is split or re-keyed (see `Trees::commit`).
pub(super) const JOURNAL_KEY: &str = "projection_journal";

/// The trees of one generation of the index.
#[derive(Clone)]
pub(super) struct Trees {
    pub(super) generation: u64,
    pub(super) rows: sled::Tree,
    pub(super) index: sled::Tree,
    /// The audit index of run events (`audit/keys.rs`).
    pub(super) audit: AuditTrees,
}

/// The audit index's trees of one generation; what goes in them is `audit/`'s.
#[derive(Clone)]
pub(crate) struct AuditTrees {
    pub(crate) team: sled::Tree,
    pub(crate) kind: sled::Tree,
    pub(crate) actor: sled::Tree,
    /// Held by every write: entries are stored in blocks that a write reads, changes and
    /// writes back (`audit/write.rs`).
    pub(crate) serial: std::sync::Arc<parking_lot::Mutex<()>>,
}

/// The names of the audit index's trees of a generation.
pub(super) fn audit_tree_names(generation: u64) -> [String; 3] {
    AUDIT.map(|name| {
        if generation == 0 {
            name.to_string()
        } else {
            format!("{name}.{generation}")
        }
    })
}

/// The names of the trees of a generation.
pub(super) fn tree_names(generation: u64) -> (String, String) {
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
pub(super) fn generation_of(name: &[u8]) -> Option<u64> {
    let name = std::str::from_utf8(name).ok()?;
    if name == ROWS || name == INDEX || AUDIT.contains(&name) {
        return Some(0);
    }
    let rest = AUDIT
        .iter()
        .find_map(|audit| name.strip_prefix(audit))
        .or_else(|| name.strip_prefix(ROWS))
        .or_else(|| name.strip_prefix(INDEX))?
        .strip_prefix('.')?;
    rest.parse().ok().filter(|g| *g > 0)
}

/// The generation of the trees in use.
pub(super) fn current_generation(db: &sled::Db) -> Result<u64, Error> {
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

impl Trees {
    pub(super) fn open(db: &sled::Db, generation: u64) -> Result<Trees, Error> {
        let (rows, index) = tree_names(generation);
        let [team, kind, actor] = audit_tree_names(generation);
        Ok(Trees {
            generation,
            rows: db.open_tree(rows)?,
            index: db.open_tree(index)?,
            audit: AuditTrees {
                team: db.open_tree(team)?,
                kind: db.open_tree(kind)?,
                actor: db.open_tree(actor)?,
                serial: Default::default(),
            },
        })
    }

    /// Makes the writes. When a block was split or re-keyed, a crash in the middle could lose
    /// positions of runs the update is not about (and whose markers are long gone), so the
    /// writes are first recorded whole in a journal in sled's default tree, which `redo`
    /// replays at the next open. sled recovers a prefix of its log, so any of the writes that
    /// survived a crash implies that the journal did. (sled's own atomic batches would do, but
    /// they serialise every index write behind one lock and cost a large share of the create
    /// rate; the journal is paid only by the writes that split or re-key a block.)
    pub(super) fn commit(
        &self,
        db: &sled::Db,
        ops: &[blocks::Op],
        journal: bool,
    ) -> Result<(), Error> {
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

    pub(super) fn write_ops(&self, ops: &[blocks::Op]) -> Result<(), Error> {
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
    pub(super) fn redo(&self, db: &sled::Db) -> Result<bool, Error> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{keys, Index};
    /// A crash between the writes of a split block leaves the journal behind; the next open
    /// makes all of its writes.
    #[test]
    fn an_interrupted_block_split_is_redone_at_the_next_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("sled");
        let index = Index::open(&db).expect("open");
        let trees = index.trees();
        let prefix = keys::filter_prefix(&keys::team_hash("default"), keys::Field::State, "QUEUED");
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
