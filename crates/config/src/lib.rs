//! The service configuration: embedded defaults, the TOML file of SPEC §6, and the command-line
//! overrides. Parsing is strict (unknown fields are errors) so that a typo in a production
//! config stops start-up with the file, line and field instead of being silently ignored.
//!
//! This file is the table of contents. `file` is the file as written, `load` the `Config` it
//! becomes (naming the file and line of a refused value), and each section of the file has a
//! module that checks it and applies its defaults: `server` (with `tls`, `access` and
//! `proxies`),
//! `limits` (with `tree`: how deep and wide trees of runs grow), `environments` (with `slurm`), `secrets`, `prices`, `webhooks` and `schedules`.
//! `error`, `range` and `names` are the checks the sections share.

#![forbid(unsafe_code)]

mod access;
mod environments;
mod error;
mod file;
mod limits;
mod load;
mod names;
mod prices;
mod proxies;
mod range;
mod schedules;
mod secrets;
mod server;
mod slurm;
pub mod tls;
mod tree;
mod webhooks;

pub use access::{DEFAULT_SESSION_LINK_TTL_SECS, MIN_METRICS_TOKEN_BYTES};
pub use environments::{
    Environment, Repo, Snapshots, DEFAULT_SNAPSHOT_MAX_MB, SNAPSHOT_ENTRY_BYTES,
};
pub use error::Error;
pub use limits::{
    ArtifactLimits, RateLimit, DEFAULT_BURST, DEFAULT_MAX_QUEUED, DEFAULT_RATE_PER_SEC,
};
pub use load::{Config, Overrides};
pub use prices::{ModelPrices, Prices, MAX_PRICE_USD};
pub use proxies::TrustedProxies;
pub use schedules::DEFAULT_MAX_SCHEDULES_PER_TEAM;
pub use secrets::{Secret, SecretValue};
pub use server::{
    Tls, DEFAULT_BIND, DEFAULT_BODY_TIMEOUT_SECS, DEFAULT_CACHE_MB, DEFAULT_DATA_DIR,
    DEFAULT_DISK_RESERVE_MB, DEFAULT_TRANSCRIPT_MAX_MB, MAX_CACHE_MB,
};
pub use tree::{EnvironmentTreeLimits, DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};
pub use webhooks::{
    webhook_key, Webhook, WebhookKey, DEFAULT_WEBHOOK_MAX_IN_FLIGHT,
    DEFAULT_WEBHOOK_RETRY_INITIAL_MS, DEFAULT_WEBHOOK_TIMEOUT_SECS,
};
