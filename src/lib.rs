//! runledger: a self-hosted, event-sourced service that runs AI coding agents on request.
//! See `docs/architecture.md` for the map.

// The package denies `unsafe` (Cargo.toml); the library forbids it outright. The binary
// configures its allocator through FFI (`main.rs`, docs/decisions/0007-allocator-purge.md).
#![forbid(unsafe_code)]

pub mod actor;
pub mod api_keys;
pub mod cli;
pub mod clock;
pub mod config;
pub mod credentials;
pub mod domain;
pub mod exec;
pub mod failure;
pub mod format;
pub mod harness;
pub mod http;
pub mod idempotency;
pub mod memo;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod projection;
pub mod schedules;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod uid_range;
pub mod webhooks;
