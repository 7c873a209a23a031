//! The HTTP edge: routes, authentication, JSON DTOs, problem+json errors and pagination
//! cursors. It talks to runs only through the narrow handles `runledger_runs` makes for it at
//! start-up (`EdgeHandles`: runs, API keys, transcripts, artifacts, status, deliveries) and the
//! schedules, never to the store, and owns every status code. This file is the folder's table
//! of contents, plus `AppState`, the state every file reads: it holds the console's sessions
//! and the console reads it, so no file of its own could hold it without an import circle with
//! `console/`.

#![forbid(unsafe_code)]

mod access;
mod admin;
mod agents;
mod artifacts;
mod auth;
mod charge;
pub mod console;
mod deliveries;
mod error_responses;
mod fields;
mod history;
mod html;
mod middleware;
pub mod openapi;
mod probes;
pub mod problem;
mod prometheus;
pub mod ratelimit;
pub mod render;
mod routes;
mod runs;
mod schedules;
mod scrape;
mod session;
mod sse;
mod stream;
mod transcript_stream;
pub mod validate;
pub mod wire;

use std::sync::Arc;

use ratelimit::RateLimiter;
use runledger_config::Config;
use runledger_runs::actor::{
    Artifacts, Deliveries, EdgeHandles, RunHandle, Status, TranscriptReader,
};
use runledger_runs::api_keys::Keys;

pub use auth::{MaybePrincipal, Principal};
pub(crate) use charge::charge;
pub use middleware::{install_dispatcher_answers, MAX_BODY_BYTES, MAX_CREATE_BODY_BYTES};
pub use routes::{app, configure};

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
    pub console: console::Sessions,
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
        } = handles;
        AppState {
            rate_limiter: config.rate_limit.map(RateLimiter::new),
            runs,
            keys,
            transcripts,
            artifacts,
            status,
            deliveries,
            schedules,
            config,
            public_url,
            session_secret,
            ready: std::sync::atomic::AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            rendered: render::RenderCache::new(render::DEFAULT_BUDGET),
            console: console::Sessions::default(),
        }
    }
}
