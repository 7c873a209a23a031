//! The live service: one actor per active run and the `Runs` handle that reaches them, the
//! schedules that fire runs, the webhook outbox, API keys, idempotent creates, and what a
//! failure below means to a caller. It wires the store, the read index and the executor
//! together; the HTTP layer sees only what this crate exports.

#![forbid(unsafe_code)]

pub mod actor;
pub mod api_keys;
pub mod failure;
pub mod idempotency;
pub mod schedules;
pub mod seals;
pub mod webhooks;

/// The read index's query vocabulary, as the handles take and answer it.
pub mod query {
    pub use runledger_projection::keys::schedule_value;
    /// The audit index's query vocabulary (`actor::Audit`).
    pub use runledger_projection::{AuditItem, AuditPage, AuditQuery, Position};
    pub use runledger_projection::{Cursor, Order, Query, SortBy, UsageTotals};
}

/// A transcript's entries, as the handles answer them.
pub mod transcript {
    pub use runledger_exec::transcript::Entry;
}

/// A run's steps as read back from its transcript (`exec/steps`), for the HTTP edge.
pub mod steps {
    pub use runledger_exec::steps::*;
}
