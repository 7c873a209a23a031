//! The audit index: every run event by time, across runs, for `GET /api/v1/audit/events`.
//! `keys` is its layout (pure); `write` indexes the events of runs the projector applies, the
//! catch-up and the rebuild; `query` answers a page newest first and a follower's next events
//! (tested end to end with the projector in `../audit_tests.rs`). Like the rest of the
//! projection it is derived from the log and rebuilt with the index.

mod keys;
mod query;
mod write;

#[cfg(test)]
pub(crate) use keys::summary;
pub use keys::{actor_named_in, actor_of, Position, Summary};
pub use query::{AuditItem, AuditPage, AuditQuery};
pub(crate) use write::{write_gathered, Gathered};
