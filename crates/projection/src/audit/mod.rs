//! The audit index: every run event by time, across runs, for `GET /api/v1/audit/events`.
//! `keys` is its layout (pure); `write` indexes the events of runs the projector applies, the
//! catch-up and the rebuild; `query` answers a page newest first and a follower's next events.
//! Like the rest of the projection it is derived from the log and rebuilt with the index.

mod keys;
mod query;
#[cfg(test)]
mod tests;
mod write;

pub use keys::{actor_named_in, actor_of, Position, Summary};
pub use query::{AuditItem, AuditPage, AuditQuery};
pub(crate) use write::{write_gathered, Gathered};
