//! Checking the index against the log: a rebuild into a scratch database of its own, compared
//! row by row and entry by entry with the live index (and with the saved runs-per-state tally).

use std::collections::BTreeSet;

use super::trees::Trees;
use super::{blocks, keys, Error, Index};
use runledger_domain::{RunId, RunState};
use runledger_store::Store;

/// Where `verify` builds its scratch index, in the data directory: a sled database of its own,
/// so that a verification writes nothing to the store. (Built inside the store, the scratch
/// copy would grow its file by the index's size and leave the page ids it freed in sled's page
/// table, in the server's memory, until new pages reused them.)
pub(super) const VERIFY_DIR: &str = "verify-scratch";

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
            Difference::EntryMissing(k) => write!(f, "index entry missing: {}", keys::hex(k)),
            Difference::EntryExtra(k) => write!(f, "stale index entry: {}", keys::hex(k)),
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

pub(super) enum Side {
    OnlyLive,
    OnlyRebuilt,
    Both,
}

/// Walks two sorted trees side by side, reporting keys present on one side only and keys whose
/// values differ.
pub(super) fn compare_trees(
    live: &sled::Tree,
    rebuilt: &sled::Tree,
    report: impl FnMut(&[u8], Side),
) -> Result<(), Error> {
    compare_sorted(pairs(live), pairs(rebuilt), report)
}

pub(super) fn pairs(tree: &sled::Tree) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), Error>> {
    tree.iter().map(|item| {
        item.map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(Error::from)
    })
}

/// Walks two sorted streams of (key, value) side by side, reporting keys present on one side
/// only and keys whose values differ.
pub(super) fn compare_sorted(
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

impl Index {
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

    pub(super) fn compare_with_build(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::write_saved_tally;
    use crate::trees::{VERIFY_INDEX, VERIFY_ROWS};
    /// `replay --verify` checks a saved tally the open took against the log.
    #[test]
    fn verify_reports_a_saved_tally_the_log_contradicts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = runledger_store::Options {
            cache_bytes: 8 << 20,
            ..runledger_store::Options::default()
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
}
