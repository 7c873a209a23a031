//! `AppState`: the handles and settings every handler of the HTTP layer reads, built once at
//! start-up from the handles `runledger_runs` makes for the edge. It holds state and builds it;
//! it decides nothing about a request.

use std::sync::Arc;

use crate::ratelimit::RateLimiter;
use crate::render;
use crate::sessions::Sessions;
use runledger_config::Config;
use runledger_runs::actor::{
    AdminAudit, Artifacts, Audit, Deliveries, EdgeHandles, RunHandle, Status, TranscriptReader,
};
use runledger_runs::api_keys::Keys;

/// Shared state of the HTTP layer.
pub struct AppState {
    /// Run commands and reads (`runledger_runs::actor::RunHandle`).
    pub runs: RunHandle,
    /// The instance's API keys.
    pub keys: Keys,
    /// The agents' output.
    pub transcripts: TranscriptReader,
    /// Attachments, artifacts and plans in the content store.
    pub artifacts: Artifacts,
    /// What the probes and `/metrics` show.
    pub status: Status,
    /// Runs' webhook deliveries.
    pub deliveries: Deliveries,
    /// Run events across runs, and the store's export (`audit/`).
    pub audit: Audit,
    /// The admin audit log.
    pub admin_audit: AdminAudit,
    /// Runs' proofs (chain head, seal, Merkle path).
    pub proofs: runledger_runs::seals::Proofs,
    /// One run's bundle (`bundle.rs`).
    pub bundles: runledger_runs::actor::Bundles,
    /// What each execution changed, and the run's patch (`changes.rs`).
    pub changes: runledger_runs::actor::Changes,
    /// Every schedule (`runledger_runs::schedules`).
    pub schedules: runledger_runs::schedules::Schedules,
    pub config: Arc<Config>,
    /// Base of `session_link`s (the configured public URL or the bound address).
    pub public_url: String,
    pub session_secret: [u8; 32],
    pub ready: std::sync::atomic::AtomicBool,
    /// Per-key token buckets; `None` when rate limiting is off.
    pub rate_limiter: Option<RateLimiter>,
    /// Set once the shutdown has stopped the agents and recorded their runs: live event
    /// streams then send what is new and end, instead of holding the workers' graceful stop.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// The JSON of runs recently answered, for the clients that poll them.
    pub rendered: render::RenderCache,
    /// The web console's sessions (`console`).
    pub console: Sessions,
}

impl AppState {
    pub fn new(
        handles: EdgeHandles,
        schedules: runledger_runs::schedules::Schedules,
        config: Arc<Config>,
        public_url: String,
        session_secret: [u8; 32],
    ) -> AppState {
        let EdgeHandles {
            runs,
            keys,
            transcripts,
            artifacts,
            status,
            deliveries,
            audit,
            admin_audit,
            proofs,
            bundles,
            changes,
        } = handles;
        AppState {
            rate_limiter: config.rate_limit.map(RateLimiter::new),
            runs,
            keys,
            transcripts,
            artifacts,
            status,
            deliveries,
            audit,
            admin_audit,
            proofs,
            bundles,
            changes,
            schedules,
            config,
            public_url,
            session_secret,
            ready: std::sync::atomic::AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            rendered: render::RenderCache::new(render::DEFAULT_BUDGET),
            console: Sessions::default(),
        }
    }
}
