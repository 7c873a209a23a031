//! What a failure below the HTTP layer means to a caller that must answer for it: the run
//! refused the command, the store refused or lost a write, a record is damaged, or something
//! unexpected happened. The layers below keep their own error types; this module is the one
//! place that reads a store error for its consequence, so the HTTP layer maps consequences to
//! status codes without knowing the store.

use runledger_domain::Rejection;
use runledger_store as store;

/// The consequence of a failure, as a caller answering a request needs it.
#[derive(Debug)]
pub enum Cause<'a> {
    /// The run's state machine refused the command.
    Rejected(&'a Rejection),
    /// The run's actor, or the server, is unavailable for now.
    Unavailable,
    /// A create would exceed a cap on waiting runs.
    /// The message names the cap.
    QueueFull(String),
    /// A list cursor that does not belong to the query, with why.
    BadCursor(&'static str),
    /// A stored record failed its checksum: the damage stays until an operator repairs it.
    Damaged,
    /// The store refused a write before writing anything: `reason` says why, and
    /// `retryable` whether the condition can clear without a restart (low on space).
    Refused { reason: String, retryable: bool },
    /// A write reached the store but could not be made durable; `words` names the cause.
    OutcomeUnknown { words: &'static str },
    /// A storage operation failed with an I/O error before or instead of writing.
    StorageFailed { words: &'static str },
    /// Anything else: unexpected.
    Internal,
}

/// The consequence of a store error.
pub fn of_store(e: &store::Error) -> Cause<'static> {
    match e {
        store::Error::Corrupt { .. } | store::Error::ScheduleCorrupt { .. } => Cause::Damaged,
        store::Error::Refused(refusal) => Cause::Refused {
            reason: refusal.condition.reason().unwrap_or_default(),
            retryable: refusal.retryable(),
        },
        store::Error::Sync(sync) => Cause::OutcomeUnknown {
            words: sync.cause.words(),
        },
        store::Error::Sled(sled::Error::Io(io))
        | store::Error::Content(store::content::Error::Io { source: io, .. }) => {
            Cause::StorageFailed {
                words: store::health::Cause::of_io(io).words(),
            }
        }
        _ => Cause::Internal,
    }
}

/// A failed storage operation of a handle that reads or writes beside the runs' log (API
/// keys, idempotency keys).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StorageError(#[from] store::Error);

impl StorageError {
    /// What the failure means to the caller.
    pub fn cause(&self) -> Cause<'static> {
        of_store(&self.0)
    }
}
