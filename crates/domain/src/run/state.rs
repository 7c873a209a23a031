//! The state of a run: what its events fold into (`Run`), its lifecycle (`RunState`), and the
//! follow-ups, artifacts and usage it carries. Plain data with a few readings of it; what
//! changes it is `evolve` alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::events::{
    AgentConfig, Artifact, Attachment, Creator, ExecutionUsage, FollowupMode, RunDerivation,
    RunSchedule, Sealed, SourceType, StatusMessage,
};
use crate::ids::{RunId, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RunState {
    Queued,
    InProgress,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunState {
    pub const ALL: [RunState; 5] = [
        RunState::Queued,
        RunState::InProgress,
        RunState::Succeeded,
        RunState::Failed,
        RunState::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Cancelled
        )
    }

    /// The wire name (OpenAPI `RunState`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "QUEUED",
            RunState::InProgress => "INPROGRESS",
            RunState::Succeeded => "SUCCEEDED",
            RunState::Failed => "FAILED",
            RunState::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A follow-up message waiting for, or handed to, an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Followup {
    pub message: String,
    pub mode: FollowupMode,
}

/// The state of one run: the fold of its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub id: RunId,
    pub title: String,
    pub prompt: String,
    pub config: AgentConfig,
    pub creator: Creator,
    pub source: SourceType,
    pub metadata: BTreeMap<String, String>,
    /// The team of the key that created the run: only that team's keys see it.
    pub team: String,
    /// The run's credential values, sealed (see `RunAdmitted`); `None` when it has none or
    /// they were stored in plain text in `config` (a legacy `Created`).
    pub sealed: Option<Sealed>,
    pub state: RunState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When the first execution started.
    pub started_at: Option<Timestamp>,
    pub status_message: Option<StatusMessage>,
    /// How many executions have started (0 while the first one is queued).
    pub executions: u32,
    /// Follow-ups received while queued, handed to the next execution when it starts.
    pub pending_followups: Vec<Followup>,
    /// The follow-up that resumed a finished run, for the execution it resumes.
    pub resumed_by: Option<Followup>,
    /// Follow-ups owed to the current (or just ended) execution that it has not reported
    /// taking: the ones handed to it at its start and the ones received while it ran, oldest
    /// first. What an execution ends without taking is requeued (`Event::Requeued`), so no
    /// follow-up is lost to a turn that could not take it or to a crash.
    pub owed: Vec<Followup>,
    /// Time spent in finished executions.
    pub run_time_ms: u64,
    /// Start of the execution in progress, if any.
    pub execution_started_at: Option<Timestamp>,
    /// Number of events folded; the next event's sequence number.
    pub next_seq: u64,
    /// What the run's executions used, summed over those whose usage was recorded.
    pub usage: RunUsage,
    /// What the run's executions produced, in the order they reported it.
    pub artifacts: Vec<ReportedArtifact>,
    /// The files attached when the run was created.
    pub attachments: Vec<Attachment>,
    /// The schedule whose firing made the run; `None` for every other run, including one
    /// admitted with the source `SCHEDULED_AGENT` but no schedule (`POST /agent/runs` always
    /// admits `API`, but an imported log may hold such a run).
    pub schedule: Option<RunSchedule>,
    /// The run this one was made from, and how (a rerun, a fork); `None` for every other run.
    pub derived: Option<RunDerivation>,
    /// How many times the run's session links were revoked (`Event::SessionLinkRevoked`): a
    /// link's token signs the epoch it was handed out in, so a revoke ends every earlier link
    /// and survives a restart with the log.
    pub session_epoch: u32,
    /// What the latest execution that recorded it ran with (`Event::Provenance`), with that
    /// execution's number.
    pub provenance: Option<(u32, crate::provenance::ExecutionProvenance)>,
    /// The run that spawned this one and its ancestors (`Event::Parented`); `None` for a root.
    pub parent: Option<crate::parent::RunParent>,
}

/// An artifact with when, and by which execution, it was reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedArtifact {
    pub at: Timestamp,
    pub execution: u32,
    pub artifact: Artifact,
}

/// The sum of a run's recorded `ExecutionUsage`s. A cost is `None` until some execution
/// recorded one: an unknown cost is never reported as 0.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunUsage {
    pub inference_nano_usd: Option<u64>,
    pub compute_nano_usd: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cpu_ms: u64,
    /// The latest execution whose usage was recorded (0: none), so each is recorded once.
    pub recorded: u32,
}

impl RunUsage {
    /// Adds one execution's usage. Saturating: a sum never wraps into a small number.
    pub(super) fn add(&mut self, execution: u32, usage: &ExecutionUsage) {
        fn plus(sum: &mut Option<u64>, part: Option<u64>) {
            if let Some(part) = part {
                *sum = Some(sum.unwrap_or(0).saturating_add(part));
            }
        }
        plus(
            &mut self.inference_nano_usd,
            usage.inference.map(|c| c.nano_usd),
        );
        plus(&mut self.compute_nano_usd, usage.compute_nano_usd);
        if let Some(tokens) = usage.tokens {
            self.input_tokens = self.input_tokens.saturating_add(tokens.input);
            self.output_tokens = self.output_tokens.saturating_add(tokens.output);
        }
        self.cpu_ms = self.cpu_ms.saturating_add(usage.cpu_ms.unwrap_or(0));
        self.recorded = self.recorded.max(execution);
    }
}

impl Run {
    /// Total time the agent has worked on the run, counting a live execution up to `now`.
    pub fn run_time_ms(&self, now: Timestamp) -> u64 {
        let live = match (self.state, self.execution_started_at) {
            (RunState::InProgress, Some(start)) => now.0.saturating_sub(start.0),
            _ => 0,
        };
        self.run_time_ms + live
    }

    /// How many events the run's admission recorded after its `Admitted` (its `Derived`,
    /// `Scheduled` and `Attached`, each at most once), before any `Parented`.
    pub(crate) fn admission_after(&self) -> u64 {
        u64::from(self.derived.is_some())
            + u64::from(self.schedule.is_some())
            + u64::from(!self.attachments.is_empty())
    }

    /// Whether the run has had a session (an execution has started).
    pub fn has_session(&self) -> bool {
        self.executions > 0
    }
}
