//! The pure core of runledger: what a run is, which events change it, and which commands are
//! allowed in which state.
//!
//! Nothing in here performs I/O or knows about actix, sled, tokio, postcard framing or JSON
//! DTOs. `decide` turns a command into events (or a rejection) plus the side effects the
//! shell must carry out *after* those events are durable; `evolve` folds one event into the
//! state and is total, so replaying any stored log can never fail. Time comes in as a value.

#![forbid(unsafe_code)]

pub mod admin;
pub mod changes;
pub mod content;
pub mod events;
pub mod harness;
pub mod ids;
pub mod origin;
pub mod provenance;
pub mod run;
pub mod schedule;
#[cfg(any(test, feature = "testing"))]
mod testing;
pub mod topics;
pub mod uid_range;

pub use admin::AdminEvent;
pub use changes::{ChangedFile, ChangesTotals, ExecutionChanges, FileStatus, RepositoryChanges};
pub use events::{
    valid_team_name, AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, Creator,
    CreatorKind, Derivation, Event, ExecutionUsage, FollowupMode, InferenceCost, McpServer,
    Placement, RepoPin, RunAdmitted, RunCreated, RunDerivation, RunSchedule, Sealed, SourceType,
    StatusMessage, Tokens, DEFAULT_TEAM, REDACTED, TEAM_NAME_RULE,
};
pub use ids::{RunId, ScheduleId, Timestamp};
pub use origin::{Channel, Origin, OriginKey};
pub use provenance::{
    AgentCli, EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit,
};
pub use run::{
    decide, evolve, fold, recordable, Command, Decision, Effect, Followup, Rejection,
    ReportedArtifact, Run, RunState, RunUsage, MAX_ARTIFACTS,
};
pub use schedule::{
    decide_schedule, evolve_schedule, Firing, Schedule, ScheduleCommand, ScheduleEvent,
    ScheduleRejection, ScheduleSpec, MAX_REMEMBERED_FIRINGS,
};
#[cfg(any(test, feature = "testing"))]
pub use testing::{sample_created, sample_run};
pub use topics::Topic;
