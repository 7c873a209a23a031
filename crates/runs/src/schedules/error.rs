//! What a schedule's command can fail with: the domain's refusal, a team's cap, the store; and
//! what a store failure means to a caller. Only the error type; it decides nothing.

use crate::failure::{self, Cause};
use runledger_domain::ScheduleRejection;
use runledger_store as store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rejected(#[from] ScheduleRejection),
    #[error("team {0:?} already has {1} schedules, the most a team may have (schedules.max_per_team); delete one first")]
    TooMany(String, usize),
    #[error(transparent)]
    Store(#[from] store::Error),
}

impl Error {
    /// What the failure means to a caller that must answer for it (`Rejected` is the
    /// caller's to read).
    pub fn cause(&self) -> Option<Cause<'static>> {
        match self {
            Error::Rejected(_) | Error::TooMany(..) => None,
            Error::Store(e) => Some(failure::of_store(e)),
        }
    }
}
