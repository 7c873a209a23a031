//! One actix actor per active run, the `Runs` handle through which start-up, the schedules and
//! the executor talk to runs, and the narrow handles the HTTP edge holds instead of it.
//!
//! The actor serialises a run's commands: it folds the run's log when activated, decides each
//! command against that state, appends the events, waits for them to be durable, hands the new
//! row to the projector (which updates the read index in the background, see
//! `projection::projector`), dispatches the decision's side effects, and replies. No effect is
//! performed before its events are durable, and replaying the log performs none. It stops as
//! soon as the run has no execution in progress (queued or finished), and after a quiet spell
//! otherwise, so idle, waiting and finished runs hold no actor. Callers never see actor
//! addresses: `Runs` activates actors on demand.
//!
//! This file is the folder's table of contents: `runs` (the `Runs` handle), `run_actor` (the
//! actor and the registry of live ones), `recovery` (start-up recovery), `report` (how
//! executions report back), `causes` (how the service words the origins of what it
//! records on its own), `error`, and one file per edge handle
//! (`admin_audit`: the admin audit log; `changes`: what executions changed), gathered by `handles`
//! (`history`, the past states, is reached through `RunHandle::history`).

mod admin_audit;
mod artifacts;
mod audit;
mod bundles;
mod causes;
mod changes;
mod deliveries;
mod error;
mod handles;
mod history;
mod recovery;
mod report;
mod rerun;
mod run_actor;
mod run_handle;
mod runs;
mod status;
mod transcripts;

pub use admin_audit::{AdminAudit, AdminPage, AdminQuery, MAX_PAGE as MAX_ADMIN_PAGE};
pub use artifacts::{Artifacts, Upload};
pub use audit::Audit;
pub use bundles::Bundles;
pub use changes::{Changes, Patch};
pub use deliveries::Deliveries;
pub use error::Error;
pub use handles::EdgeHandles;
pub use history::{fold_through, state_at, History, Step};
pub use rerun::Unpinnable;
pub use run_actor::Outcome;
pub use run_handle::RunHandle;
pub use runs::Runs;
pub use status::{Status, StoreHealth};
pub use transcripts::TranscriptReader;

/// One stored event with its place in the run's log and the time it was recorded, as
/// `RunHandle::durable_events` yields it.
pub use runledger_store::Envelope;
