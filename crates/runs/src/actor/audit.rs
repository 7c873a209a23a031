//! `Audit`: what the HTTP edge's audit endpoints may do — query the run events of many runs
//! through the projection's audit index (`GET /api/v1/audit/events`), follow the index as it
//! grows (its live stream), and write the store's export (`GET /api/v1/admin/export`). Reads
//! only: it holds the store, the index and the projector's progress, and shows no way to
//! command a run or reach keys and secrets. Who may see which team is the caller's to decide.

use std::sync::Arc;

use super::error::Error;
use super::runs::Runs;
use runledger_domain::Timestamp;
use runledger_format::export::Exported;
use runledger_projection::projector::Projector;
use runledger_projection::{AuditItem, AuditPage, AuditQuery, Index, Position};
use runledger_store::Store;

/// A cheap-to-clone handle on the audit index and the log for the audit endpoints.
#[derive(Clone)]
pub struct Audit {
    store: Store,
    index: Index,
    projector: Arc<Projector>,
}

impl Audit {
    pub(super) fn new(runs: &Runs) -> Audit {
        Audit {
            store: runs.inner.store.clone(),
            index: runs.inner.index.clone(),
            projector: runs.inner.projector.clone(),
        }
    }

    /// One page of `query`, newest first, before `cursor` if given. Waits for the projector to
    /// apply every command acknowledged before the call, so a caller sees its own commands.
    pub async fn page(
        &self,
        query: &AuditQuery,
        cursor: Option<Position>,
        limit: usize,
    ) -> Result<AuditPage, Error> {
        self.projector.audit_caught_up().await;
        Ok(self.index.audit_page(&self.store, query, cursor, limit)?)
    }

    /// Up to `max` events of `query` after `after`, recorded at or before `upto`, oldest first
    /// (a follower's next batch).
    pub fn after(
        &self,
        query: &AuditQuery,
        after: Position,
        upto: Timestamp,
        max: usize,
    ) -> Result<Vec<AuditItem>, Error> {
        self.projector.write_audit_backlog();
        Ok(self
            .index
            .audit_after(&self.store, query, after, upto, max)?)
    }

    /// Wakes when the projector has applied more to the index.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.projector.watch_applied()
    }

    /// Writes the run part of the store's export (`runledger export` without `--with-keys`)
    /// to `out` as it reads the store; blocking, for a blocking thread.
    pub fn export(
        &self,
        out: &mut dyn std::io::Write,
        skipped: &mut dyn FnMut(String),
    ) -> std::io::Result<Exported> {
        runledger_format::export::write_run_records(&self.store, out, skipped)
    }
}
