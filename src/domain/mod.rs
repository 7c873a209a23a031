//! The pure core of runledger: what a run is, which events change it, and which commands are
//! allowed in which state.
//!
//! Nothing in here performs I/O or knows about actix, sled, tokio, postcard framing or JSON
//! DTOs. `decide` turns a command into events (or a rejection) plus the side effects the
//! shell must carry out *after* those events are durable; `evolve` folds one event into the
//! state and is total, so replaying any stored log can never fail. Time comes in as a value.

pub mod events;
pub mod ids;
pub mod run;

pub use events::{
    AgentConfig, Creator, CreatorKind, Event, FollowupMode, McpServer, RunCreated, SourceType,
    StatusMessage,
};
pub use ids::{RunId, Timestamp};
pub use run::{
    decide, evolve, fold, recordable, Command, Decision, Effect, Followup, Rejection, Run, RunState,
};
