//! Why a command or a read of runs failed, and what that means to a caller that must answer
//! for it (`crate::failure`). It names the failures only; it decides nothing about them.

use crate::failure::{self, Cause};
use runledger_domain::Rejection;
use runledger_projection as projection;
use runledger_store as store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rejected(#[from] Rejection),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Index(#[from] projection::Error),
    #[error("the run's actor, or the server, is unavailable")]
    Unavailable,
    #[error(transparent)]
    QueueFull(#[from] runledger_exec::QueueFull),
}

impl Error {
    /// Whether this is a damaged record in the run's log (as opposed to a failing store).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Store(store::Error::Corrupt { .. })
                | Error::Index(projection::Error::Store(store::Error::Corrupt { .. }))
        )
    }

    /// What the failure means to a caller that must answer for it.
    pub fn cause(&self) -> Cause<'_> {
        match self {
            Error::Rejected(rejection) => Cause::Rejected(rejection),
            Error::Unavailable => Cause::Unavailable,
            Error::QueueFull(full) => Cause::QueueFull(full.to_string()),
            Error::Index(projection::Error::BadCursor(why)) => Cause::BadCursor(why),
            Error::Store(e) | Error::Index(projection::Error::Store(e)) => failure::of_store(e),
            Error::Index(_) => Cause::Internal,
        }
    }
}
