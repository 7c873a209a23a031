//! What may be asked of a run (`Command`), why it may be refused (`Rejection`), and what a
//! decision returns: the events to append and the side effects (`Effect`) the shell performs
//! once they are durable. Vocabulary only; the rules are `decide`'s.

use crate::events::{
    Artifact, Attachment, Event, ExecutionUsage, FollowupMode, Placement, RunAdmitted,
    RunDerivation, RunSchedule, StatusMessage,
};

use super::state::{Followup, RunState};

/// What a client or the executor asks of a run.
#[allow(clippy::large_enum_variant)] // as for `Event`: one command at a time, never collected
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Admit a new run with the files attached to it (already in the content store) and, for
    /// a run a schedule's firing makes, that schedule; for a run made from another (a rerun,
    /// a fork), how.
    Create {
        admitted: RunAdmitted,
        attachments: Vec<Attachment>,
        schedule: Option<RunSchedule>,
        derived: Option<RunDerivation>,
    },
    /// The executor has a free slot for this queued run (and, for an environment that runs on
    /// a cluster, the scheduler has placed it: `placement`).
    Start {
        placement: Option<Placement>,
    },
    Followup {
        message: String,
        mode: FollowupMode,
        by: String,
    },
    Cancel {
        by: String,
    },
    /// Execution `execution` ended: `Ok` for success, `Err` with the reason for failure.
    Finish {
        execution: u32,
        outcome: Result<(), StatusMessage>,
    },
    /// Execution `execution` was lost with its node (or with the service): the run is queued
    /// again for a new execution instead of failing (`on_node_failure = "requeue"`).
    Lose {
        execution: u32,
        status: StatusMessage,
    },
    /// Execution `execution` took the next `count` follow-ups owed to it.
    Delivered {
        execution: u32,
        count: u32,
    },
    /// What execution `execution` used, priced by the shell.
    RecordUsage {
        execution: u32,
        usage: ExecutionUsage,
    },
    /// Execution `execution`'s agent reported an artifact (its bytes already in the content
    /// store).
    ReportArtifact {
        execution: u32,
        artifact: Artifact,
    },
    /// End every session link handed out for the run so far (asked by the key `by`).
    RevokeSessionLink {
        by: String,
    },
    /// What execution `execution` runs with, measured by the shell before its agent starts.
    RecordProvenance {
        execution: u32,
        provenance: crate::provenance::ExecutionProvenance,
    },
    /// What execution `execution` left changed in its workspace, computed by the shell after
    /// its agent exited and before its end is reported.
    RecordChanges {
        execution: u32,
        changes: crate::changes::ExecutionChanges,
    },
}

impl Command {
    /// The creation of a run: admitted, with the files attached to it (already in the content
    /// store) and, for a run a schedule's firing makes, that schedule. The one way every caller
    /// (a client's create, a schedule's firing, replay checks) spells a `Create`.
    pub fn create(
        admitted: RunAdmitted,
        attachments: Vec<Attachment>,
        schedule: Option<RunSchedule>,
    ) -> Command {
        Command::Create {
            admitted,
            attachments,
            schedule,
            derived: None,
        }
    }

    /// The creation of a run made from another run (`derived`: a rerun or a fork of it), with
    /// the files attached to it. A derived run is never a schedule's.
    pub fn derive(
        admitted: RunAdmitted,
        attachments: Vec<Attachment>,
        derived: RunDerivation,
    ) -> Command {
        Command::Create {
            admitted,
            attachments,
            schedule: None,
            derived: Some(derived),
        }
    }
}

/// Why a command was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the run already exists")]
    AlreadyExists,
    #[error("the run does not exist")]
    NotFound,
    #[error("the run is already {}", .0.as_str())]
    AlreadyTerminal(RunState),
    #[error("the run is not queued")]
    NotQueued,
    #[error("execution {0} is not the one in progress")]
    StaleExecution(u32),
    #[error("a follow-up needs a non-empty message")]
    EmptyMessage,
    #[error("the run already has {MAX_PENDING_FOLLOWUPS} follow-ups waiting to reach its agent")]
    TooManyPending,
    #[error("execution {0} owes no follow-up")]
    NothingOwed(u32),
    #[error("the run already has {MAX_ARTIFACTS} artifacts")]
    TooManyArtifacts,
}

/// How many artifacts one run may hold; bounds the size of its state and of a `RunItem`.
pub const MAX_ARTIFACTS: usize = 200;

/// How many follow-ups may wait for a queued run, or wait to reach the agent of a running
/// one; bounds the size of its state.
pub const MAX_PENDING_FOLLOWUPS: usize = 100;

/// Work for the shell to do once the decision's events are durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Put the run in its environment's queue to wait for a slot.
    Enqueue,
    /// Take the run out of its environment's queue.
    Dequeue,
    /// Launch execution `execution` of the agent with what it needs to know.
    Launch {
        execution: u32,
        followups: Vec<Followup>,
        resumed_by: Option<Followup>,
    },
    /// Hand a follow-up to the live execution.
    Deliver(Followup),
    /// Stop the live execution and its process tree.
    Stop { execution: u32 },
}

/// The outcome of deciding a command: events to append, then effects to perform.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub events: Vec<Event>,
    pub effects: Vec<Effect>,
}
