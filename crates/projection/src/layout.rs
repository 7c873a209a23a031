//! The layout marker: the version of the row encoding and key layout this build writes, and
//! its record in sled's default tree, which tells an open whether the index must be rebuilt.
//! It must not decide how the rebuild is done (`rebuild.rs`).

use crate::{Error, Index};

/// Bumped whenever the row encoding or key layout changes, or what every writer must do; a
/// mismatch triggers a rebuild. 6: writers remove the saved runs-per-state tally
/// (`SAVED_TALLY_KEY`) before they write. 7: rows carry the follow-ups owed to the run's
/// execution (`Run::owed`) and the run's usage (`Run::usage`), and writers remove the saved
/// usage totals (`SAVED_USAGE_KEY`) too. 8: rows carry the run's team and sealed credentials
/// (`Run::team`, `Run::sealed`), every range is scoped by the team (`F field team hash`,
/// `T team`), and a `C team` range holds the runs in created-at order; a store of layout 7
/// rebuilds, and its runs (legacy `Created`) land in the team `default`. 9: rows carry the
/// run's artifacts and attachments (`Run::artifacts`, `Run::attachments`), an `F 07` range per
/// artifact type holds the runs with such an artifact, and an `A` range per artifact uid its
/// run (`keys.rs`). 10: rows carry the schedule whose firing made the run (`Run::schedule`),
/// and an `F 08` range per schedule id holds its runs; a row of layout 9 lacks the field and
/// fails to decode rather than reading as something else, and the store rebuilds. 11: rows
/// carry the run's session epoch (`Run::session_epoch`, moved by `SessionLinkRevoked`). 12: the
/// audit index (`audit/`) holds every run event by team, type and actor; a store of layout 11
/// rebuilds, which builds it. 13: rows carry the run another was made from (`Run::derived`); a
/// row of layout 12 fails to decode, and the store rebuilds. 14: rows carry the latest
/// execution's provenance (`Run::provenance`), an `F 09` range per original run holds its
/// reruns, and the audit index's entries (position and summary) are stored in blocks of
/// consecutive entries per range (`audit/keys.rs`), not one sled key each; a row of layout 13
/// lacks the field and fails to decode, and the store rebuilds. 15: rows carry the run that
/// spawned the run and its ancestors (`Run::parent`), an `F 11` range per run holds its
/// children and an `F 10` range per run its descendants at any depth; a row of layout 14
/// lacks the field and fails to decode, and the store rebuilds.
pub const LAYOUT_VERSION: u32 = 15;
pub(crate) const LAYOUT_KEY: &str = "projection_layout";

impl Index {
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
}
