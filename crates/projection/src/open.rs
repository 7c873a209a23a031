//! Opening a data directory for use: the store, and the read index brought up to date with
//! its log (rebuilt when its layout changed, caught up for the runs a crash may have left
//! behind) before anything reads it. The server's start-up and the offline commands open a
//! store only through here, so both see the same index.

use std::path::Path;
use std::time::Duration;

use runledger_store::{self as store, Store};

use crate::{Error, Index};

/// How long a start waits for a data directory another process has locked (see `open`).
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// Opens the store and brings the read index up to date with the log. A store that lost
/// acknowledged writes is refused unless `accept_lost_writes` (see `store::watermark`).
/// A data directory locked by another process is retried for `LOCK_WAIT` first.
pub fn open(data_dir: &Path, options: &store::Options) -> Result<(Store, Index), Error> {
    // A server killed a moment ago may leave its lock held for a moment longer: a child it
    // had forked but not yet exec'd holds the locked file until its exec closes it. A start
    // right after a crash (a supervisor's restart) waits that out; another process that
    // really holds the data directory is still refused, a few seconds later.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let store = loop {
        match Store::open(data_dir, options) {
            Err(store::Error::Locked(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            result => break result?,
        }
    };
    let index = Index::open(store.db())?;
    if Index::remove_verify_scratch(data_dir)? {
        tracing::info!("removed the scratch database of an interrupted `replay --verify`");
    }
    if !Index::layout_is_current(store.db())? {
        if !index.is_empty() || store.event_count() > 0 {
            tracing::info!("read index layout changed; rebuilding it from the log");
            let rebuilt = index.rebuild(&store)?;
            tracing::info!(
                runs = rebuilt.runs,
                events = rebuilt.events,
                build_ms = rebuilt.build.as_millis() as u64,
                drop_ms = rebuilt.drop.as_millis() as u64,
                "rebuilt the read index"
            );
        } else {
            Index::mark_layout_current(store.db())?;
        }
        store.sync_blocking()?;
    }
    // Runs whose log may have got ahead of the index before a crash: those marked dirty and
    // those created since the index floor (see `projection::projector`). Caught up before any
    // request is served, so no live command can race the repair.
    let mut check = store.dirty_runs()?;
    if let Some(floor) = store.index_floor()? {
        check.extend(store.runs_created_since(floor)?);
        check.sort_unstable();
        check.dedup();
    }
    let (mut fixed, mut damaged) = (0, 0);
    for id in &check {
        match index.catch_up(&store, &[*id]) {
            Ok(n) => fixed += n,
            // A run whose log is damaged stays dirty and fails on its own (its commands and
            // history answer "damaged"); it must not keep every other run from being served.
            // Marked, because the floor is about to pass it.
            Err(Error::Store(e @ store::Error::Corrupt { .. })) => {
                tracing::error!(run_id = %id, error = %e, "cannot catch up a run with a damaged log");
                store.mark_dirty(*id)?;
                damaged += 1;
            }
            Err(e) => return Err(e),
        }
    }
    // Every run is caught up (or marked): this process covers the runs created from now on.
    store.set_index_floor(runledger_base::clock::now())?;
    store.sync_blocking()?;
    if !check.is_empty() {
        tracing::info!(
            checked = check.len(),
            fixed,
            damaged,
            "read index caught up with the log"
        );
    }
    Ok((store, index))
}
