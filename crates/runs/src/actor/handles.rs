//! The narrow handles the HTTP edge holds instead of `Runs`, made from it at start-up: one per
//! concern, each with only the methods that concern's endpoints call. `Runs` keeps what
//! start-up, the schedules and the executor use, and is never handed to HTTP.

use super::admin_audit::AdminAudit;
use super::artifacts::Artifacts;
use super::audit::Audit;
use super::bundles::Bundles;
use super::changes::Changes;
use super::deliveries::Deliveries;
use super::run_handle::RunHandle;
use super::runs::Runs;
use super::status::Status;
use super::transcripts::TranscriptReader;
use crate::api_keys::Keys;

/// The HTTP edge's handles on the runs, all from one `Runs` (see `Runs::edge_handles`).
#[derive(Clone)]
pub struct EdgeHandles {
    /// Run commands and reads.
    pub runs: RunHandle,
    /// The instance's API keys (authentication, the admin endpoints and the console's login).
    pub keys: Keys,
    /// The agents' output.
    pub transcripts: TranscriptReader,
    /// Attachments in, artifacts and plans out.
    pub artifacts: Artifacts,
    /// The probes' and `/metrics`' view of the service.
    pub status: Status,
    /// A run's webhook deliveries.
    pub deliveries: Deliveries,
    /// Run events across runs, and the store's export.
    pub audit: Audit,
    /// The admin audit log (`GET /api/v1/audit/admin`).
    pub admin_audit: AdminAudit,
    /// Runs' chain heads, seals and Merkle paths (`crate::seals`).
    pub proofs: crate::seals::Proofs,
    /// One run's bundle (`GET /api/v1/agent/runs/{id}/export`).
    pub bundles: Bundles,
    /// What each execution changed in the workspace, and the run's patch.
    pub changes: Changes,
}

impl Runs {
    /// The handles the HTTP edge serves with; they share this `Runs`'s actors, store and index.
    pub fn edge_handles(&self) -> EdgeHandles {
        let inner = &self.inner;
        EdgeHandles {
            runs: RunHandle::new(self),
            keys: inner.keys.clone(),
            transcripts: TranscriptReader::new(&inner.executor),
            artifacts: Artifacts::new(self),
            status: Status::new(self),
            deliveries: Deliveries::new(&inner.webhooks),
            audit: Audit::new(self),
            admin_audit: AdminAudit::new(inner.store.clone()),
            proofs: crate::seals::Proofs::new(inner.store.clone()),
            bundles: Bundles::new(inner.store.clone()),
            changes: Changes::new(self),
        }
    }
}
