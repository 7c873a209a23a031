//! `Changes`: what each execution of a run left changed in its workspace, read back from the
//! run's log (`Event::Changes`), and the run's patch from the content store. Used by
//! `GET /api/v1/agent/runs/{id}/changes` (both forms), the CLI through it, the review pages
//! and the webhooks' summary. Whether the caller may see the run is the caller's check (HTTP
//! answers another team's run as missing before asking); this handle never writes.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::{Event, ExecutionChanges, RunId};
use runledger_store as store;

/// A cheap-to-clone handle on runs' recorded changes.
#[derive(Clone)]
pub struct Changes {
    runs: Runs,
}

/// The run's patch: the latest recorded changes' diff, opened for streaming.
pub struct Patch {
    /// The execution whose changes it is (its diff counts from the run's base).
    pub execution: u32,
    pub size: u64,
    /// The diff was cut at the environment's `changes_max_mb`.
    pub cut: bool,
    pub file: std::fs::File,
}

impl Changes {
    pub(super) fn new(runs: &Runs) -> Changes {
        Changes { runs: runs.clone() }
    }

    /// Each execution's recorded changes, oldest first. Each counts from the run's base, so
    /// the last is the run's total.
    pub fn summary(&self, run: RunId) -> Result<Vec<(u32, ExecutionChanges)>, Error> {
        let mut out = Vec::new();
        for envelope in self.runs.inner.store.run_events(run, 0) {
            if let Event::Changes { execution, changes } = envelope?.event {
                out.push((execution, changes));
            }
        }
        Ok(out)
    }

    /// The run's patch (the latest execution's diff), opened for streaming; `None` when no
    /// execution recorded a diff (nothing changed, or nothing could be computed).
    pub fn patch(&self, run: RunId) -> Result<Option<Patch>, Error> {
        let Some((execution, changes)) = self.summary(run)?.pop() else {
            return Ok(None);
        };
        let Some(content) = changes.diff else {
            return Ok(None);
        };
        let file = self
            .runs
            .inner
            .store
            .content()
            .open_content(&content)
            .map_err(store::Error::from)?;
        Ok(Some(Patch {
            execution,
            size: content.size,
            cut: changes.cut,
            file,
        }))
    }

    /// The bytes of the run's patch, read whole (at most the environment's `changes_max_mb`);
    /// `None` as for `patch`.
    pub fn patch_bytes(&self, run: RunId) -> Result<Option<Vec<u8>>, Error> {
        let Some((_, changes)) = self.summary(run)?.pop() else {
            return Ok(None);
        };
        let Some(content) = changes.diff else {
            return Ok(None);
        };
        Ok(Some(
            self.runs
                .inner
                .store
                .content()
                .read(&content)
                .map_err(store::Error::from)?,
        ))
    }
}
