//! The pure core of runledger: what a run is, which events change it, and which commands are
//! allowed in which state.
//!
//! Nothing in here performs I/O or knows about actix, sled, tokio, postcard framing or JSON
//! DTOs. `decide` turns a command into events (or a rejection) plus the side effects the
//! shell must carry out *after* those events are durable; `evolve` folds one event into the
//! state and is total, so replaying any stored log can never fail. Time comes in as a value.

#![forbid(unsafe_code)]

pub mod events;
pub mod harness;
pub mod ids;
pub mod run;
pub mod schedule;
pub mod topics;
pub mod uid_range;

pub use events::{
    valid_team_name, AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, Creator,
    CreatorKind, Event, ExecutionUsage, FollowupMode, InferenceCost, McpServer, Placement,
    RunAdmitted, RunCreated, RunSchedule, Sealed, SourceType, StatusMessage, Tokens, DEFAULT_TEAM,
    REDACTED, TEAM_NAME_RULE,
};
pub use ids::{RunId, ScheduleId, Timestamp};
pub use run::{
    decide, evolve, fold, recordable, Command, Decision, Effect, Followup, Rejection,
    ReportedArtifact, Run, RunState, RunUsage, MAX_ARTIFACTS,
};
pub use schedule::{
    decide_schedule, evolve_schedule, Firing, Schedule, ScheduleCommand, ScheduleEvent,
    ScheduleRejection, ScheduleSpec, MAX_REMEMBERED_FIRINGS,
};
pub use topics::Topic;

/// A freshly created run (id time `1_000_000 + i` ms, title `run {i}`), for unit tests.
#[cfg(any(test, feature = "testing"))]
pub fn sample_run(i: u64) -> Run {
    let id = RunId::new(Timestamp(1_000_000 + i), u128::from(i));
    match evolve(
        None,
        id,
        &Event::Admitted(RunAdmitted::from_legacy(sample_created(i))),
        id.created_at(),
    ) {
        Some(run) => run,
        None => unreachable!("a Created event always makes a run"),
    }
}

/// The creation of `sample_run(i)`.
#[cfg(any(test, feature = "testing"))]
pub fn sample_created(i: u64) -> RunCreated {
    RunCreated {
        title: format!("run {i}"),
        prompt: "p".into(),
        config: AgentConfig::default(),
        creator: Creator {
            kind: CreatorKind::User,
            uid: "k".into(),
            display_name: "k".into(),
        },
        source: SourceType::Api,
        metadata: Default::default(),
    }
}
