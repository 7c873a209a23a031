//! The HTTP edge: routes, authentication, JSON DTOs, problem+json errors and pagination
//! cursors. It talks to runs only through the narrow handles `runledger_runs` makes for it at
//! start-up (`EdgeHandles`: runs, API keys, transcripts, artifacts, status, deliveries, audit) and the
//! schedules, never to the store, and owns every status code. This file is the crate's table
//! of contents; `AppState` (state.rs), the state every file reads, holds the console's
//! sessions (sessions.rs, at the root so that neither `state` nor `console/` needs the other's
//! folder for them).

#![forbid(unsafe_code)]

mod access;
mod admin;
mod agent_events;
mod agents;
mod artifacts;
mod audit;
mod audit_admin;
mod auth;
mod bundle;
mod changes;
mod changes_view;
mod charge;
pub mod console;
mod deliveries;
mod diff;
mod error_responses;
mod fields;
mod fork;
mod history;
mod html;
mod messages;
mod middleware;
pub mod openapi;
mod origin;
mod past;
mod probes;
pub mod problem;
mod prometheus;
mod proof;
mod provenance;
pub mod ratelimit;
mod read_only;
pub mod render;
mod rerun;
mod review;
mod routes;
mod runs;
mod schedules;
mod scrape;
mod session;
pub mod sessions;
mod sse;
mod state;
mod step_pages;
mod steps;
mod stream;
mod transcript_stream;
mod travel;
mod tree;
pub mod validate;
pub mod wire;

pub use auth::{MaybePrincipal, Principal};
pub(crate) use charge::charge;
pub use middleware::{install_dispatcher_answers, MAX_BODY_BYTES, MAX_CREATE_BODY_BYTES};
pub use origin::CLIENT_HEADER;
pub use routes::{app, configure};
pub use state::AppState;
