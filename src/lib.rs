//! runledger: a self-hosted, event-sourced service that runs AI coding agents on request.
//! The crates under `crates/` hold the code (`docs/architecture.md` maps them); this package is
//! the binary that wires them at start-up (`startup`, with its own admin audit records in `admin_acts`) and sets up logging
//! (`telemetry`). Its
//! library re-exports the crates under their module names for the integration tests and
//! benches; no crate depends on it.

// The package denies `unsafe` (Cargo.toml); the library forbids it outright. The binary
// configures its allocator through FFI (`main.rs`, docs/decisions/0007-allocator-purge.md).
#![forbid(unsafe_code)]

pub mod admin_acts;
pub mod inspect;
mod sealing;
pub mod startup;
pub mod telemetry;

pub use runledger_base::{clock, memo, memory, metrics, notify};
pub use runledger_cli as cli;
pub use runledger_config as config;
pub use runledger_config::tls;
pub use runledger_domain as domain;
pub use runledger_domain::{harness, uid_range};
pub use runledger_exec as exec;
pub use runledger_format as format;
pub use runledger_http as http;
pub use runledger_projection as projection;
pub use runledger_runs::{actor, api_keys, failure, idempotency, schedules, webhooks};
pub use runledger_store as store;
pub use runledger_store::credentials;
