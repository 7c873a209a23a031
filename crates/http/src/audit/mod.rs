//! The audit endpoints: `GET /api/v1/audit/events` (run events across runs, a page newest first
//! or, with `Accept: text/event-stream`, followed live) and `GET /api/v1/admin/export` (the
//! store's export from a running server). `events` owns the page and who may query what,
//! `follow` the live stream, `wire` the JSON of both, `export` the export. They read through
//! the `Audit` handle only.

mod events;
mod export;
mod follow;
mod wire;

pub use events::*;
pub use export::*;
