//! The sled trees of the seals (`seals`, `seal_leaves`, `sealed_runs`), opened with the store.
//! Only the handles; what they hold is `seals/`'s.

use crate::layout::{SEALED_RUNS, SEALS, SEAL_LEAVES};
use crate::Error;

/// The trees of the seals.
pub struct SealTrees {
    pub(crate) seals: sled::Tree,
    pub(crate) leaves: sled::Tree,
    pub(crate) sealed_runs: sled::Tree,
}

impl SealTrees {
    pub(crate) fn open(db: &sled::Db) -> Result<SealTrees, Error> {
        Ok(SealTrees {
            seals: db.open_tree(SEALS)?,
            leaves: db.open_tree(SEAL_LEAVES)?,
            sealed_runs: db.open_tree(SEALED_RUNS)?,
        })
    }
}
