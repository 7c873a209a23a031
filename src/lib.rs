//! runledger: a self-hosted, event-sourced service that runs AI coding agents on request.
//! See `docs/architecture.md` for the map.

pub mod domain;
pub mod projection;
pub mod store;
pub mod actor;
pub mod config;
pub mod exec;
pub mod cli;
pub mod http;
pub mod startup;
pub mod telemetry;
