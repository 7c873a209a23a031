//! The events of a run and the value types they carry.
//!
//! This is the schema of the append-only log. Variants and fields are encoded positionally
//! (postcard), so the rules are: add enum variants only at the end, never reorder or remove
//! them, and never change a field of an existing variant — add a new variant instead and bump
//! the envelope's schema version. The golden-byte fixtures in `tests/fixtures` guard this.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::changes::ExecutionChanges;
pub use super::content::Content;
use super::ids::{ScheduleId, Timestamp};
use super::provenance::ExecutionProvenance;

/// One change to a run. The time of the change lives in the envelope, not here.
// `Created` is much larger than the rest, but events live one at a time on the stack while
// being folded or encoded; boxing would add an allocation to every create for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The run was accepted. Always the first event of a run (sequence 0).
    Created(RunCreated),
    /// An execution of the agent began. `execution` counts from 1; resumed runs get 2, 3, …
    Started { execution: u32 },
    /// A follow-up message arrived, from the key `by`.
    FollowupReceived {
        message: String,
        mode: FollowupMode,
        by: String,
    },
    /// The execution ended successfully.
    Succeeded { execution: u32 },
    /// The execution ended in failure; `status` says why.
    Failed {
        execution: u32,
        status: StatusMessage,
    },
    /// The run was cancelled by the key `by`.
    Cancelled { by: String },
    /// Execution `execution` took the next `count` follow-ups owed to it (handed at its start,
    /// or received while it ran), in the order they were received.
    FollowupsDelivered { execution: u32, count: u32 },
    /// Execution `execution` ended without taking every follow-up owed to it, so the run is
    /// queued again for them: the first resumes it, the rest wait for its next execution.
    /// Recorded with the execution's `Succeeded` or `Failed`.
    Requeued { execution: u32 },
    /// What execution `execution` used, with its costs priced when it was recorded (so a later
    /// change of the configured prices never rewrites history). Recorded once per execution,
    /// before the event that ends it.
    UsageRecorded {
        execution: u32,
        usage: ExecutionUsage,
    },
    /// The run was accepted into team `team`. Always the first event of a run (sequence 0);
    /// every run created since teams exist starts with it, and a log's `Created` is a run of
    /// the team `default` from before (`RunAdmitted::from_legacy`).
    Admitted(RunAdmitted),
    /// Execution `execution`'s agent reported something it produced (a pull request, a file,
    /// a plan, a screenshot). The bytes of files, screenshots and plans are in the content
    /// store, named by `Content::sha256`; the event holds only their address.
    ArtifactReported { execution: u32, artifact: Artifact },
    /// The files the client attached to the run when it created it, kept in the content
    /// store. Recorded right after the run's `Admitted`, in the same decision (sequence 1), so a
    /// run never starts without them.
    Attached { attachments: Vec<Attachment> },
    /// The run was made by a firing of `schedule`. Recorded right after the run's `Admitted`,
    /// in the same decision (sequence 1, before an `Attached`), so the run is a scheduled one
    /// from its first moment and a reader never sees it without its schedule.
    Scheduled { schedule: RunSchedule },
    /// An execution began at a place a cluster scheduler gave it (`placement`); otherwise as
    /// `Started`, whose wire type it shares (the placement is added to its data).
    StartedOn {
        execution: u32,
        placement: Placement,
    },
    /// Execution `execution` was lost with the node it ran on (or with the service, on a
    /// restart), and the run is queued again for a new execution, resumed as that one would
    /// have been (`on_node_failure = "requeue"`); `status` says what was lost.
    Lost {
        execution: u32,
        status: StatusMessage,
    },
    /// Every session link handed out for the run so far was revoked by the key `by`: the run's
    /// session epoch, part of what a link's token signs, moved on, so only links handed out
    /// from now on open its page.
    SessionLinkRevoked { by: String },
    /// The run was made from another run: a rerun of it, or a fork of it after one of its
    /// executions. Recorded right after the run's `Admitted`, in the same decision (sequence
    /// 1, before an `Attached`), so the run is a derived one from its first moment.
    Derived(RunDerivation),
    /// What execution `execution` runs with (`crate::provenance`): recorded after its
    /// checkout and setup and before its agent starts, once per execution.
    Provenance {
        execution: u32,
        provenance: ExecutionProvenance,
    },
    /// What execution `execution` left changed in its workspace, from the run's base
    /// (`crate::changes`): recorded after its agent exits and before its end, once per
    /// execution; a failure to compute is recorded in it, never as the run's failure.
    Changes {
        execution: u32,
        changes: ExecutionChanges,
    },
}

/// Where an execution ran, when a cluster scheduler placed it rather than the server's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Placement {
    /// Slurm job `job_id`, whose steps ran on node `node`.
    Slurm { job_id: u64, node: String },
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Slurm { job_id, node } => write!(f, "Slurm job {job_id} on node {node}"),
        }
    }
}

impl Event {
    /// Whether this is the event that makes a run: `Admitted`, or a legacy `Created`.
    pub fn is_creation(&self) -> bool {
        matches!(self, Event::Created(_) | Event::Admitted(_))
    }

    /// Whether this event is recorded with a run's admission, in the same decision right
    /// after it: its origin in another run (`Derived`), its schedule (`Scheduled`) or its
    /// attachments (`Attached`).
    pub fn completes_admission(&self) -> bool {
        matches!(
            self,
            Event::Scheduled { .. } | Event::Attached { .. } | Event::Derived(_)
        )
    }

    /// The contents (in the content store) the event names.
    pub fn contents(&self) -> Vec<&Content> {
        match self {
            Event::ArtifactReported { artifact, .. } => {
                artifact.kind.content().into_iter().collect()
            }
            Event::Attached { attachments } => attachments.iter().map(|a| &a.content).collect(),
            Event::Changes { changes, .. } => changes.diff.iter().collect(),
            _ => Vec::new(),
        }
    }

    /// A stable, human-readable name of the variant (used in exports and the events API).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Created(_) => "Created",
            Event::Started { .. } => "Started",
            Event::FollowupReceived { .. } => "FollowupReceived",
            Event::Succeeded { .. } => "Succeeded",
            Event::Failed { .. } => "Failed",
            Event::Cancelled { .. } => "Cancelled",
            Event::FollowupsDelivered { .. } => "FollowupsDelivered",
            Event::Requeued { .. } => "Requeued",
            Event::UsageRecorded { .. } => "UsageRecorded",
            // The same type on the wire: `team` tells the two apart in an export.
            Event::Admitted(_) => "Created",
            Event::ArtifactReported { .. } => "ArtifactReported",
            Event::Attached { .. } => "Attached",
            Event::Scheduled { .. } => "Scheduled",
            Event::StartedOn { .. } => "Started",
            Event::Lost { .. } => "Lost",
            Event::SessionLinkRevoked { .. } => "SessionLinkRevoked",
            Event::Derived(_) => "Derived",
            Event::Provenance { .. } => "Provenance",
            Event::Changes { .. } => "Changes",
        }
    }
}

/// The team every key and run of an instance from before teams belongs to, and the team of
/// the first key of a new instance.
pub const DEFAULT_TEAM: &str = "default";

/// What a team name is, for messages that refuse one.
pub const TEAM_NAME_RULE: &str =
    "1-63 characters of a-z, 0-9, '-' and '_', starting with a letter or a digit";

/// Whether `name` can name a team: 1–63 characters of `a-z`, `0-9`, `-` and `_`, starting with
/// a letter or a digit, so a team name is safe in a path, a URL, a log line and a metric label.
pub fn valid_team_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_')
}

/// A run accepted into a team. `created.config` holds `REDACTED` in place of every credential
/// value (MCP `env` and `headers`): the values themselves are in `sealed`, encrypted with the
/// instance's credential key, which is kept outside the log. So the log, the events API and a
/// plain export never carry a usable credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAdmitted {
    pub created: RunCreated,
    pub team: String,
    pub sealed: Option<Sealed>,
}

impl RunAdmitted {
    /// The admission a legacy `Created` stands for: a run of the team `default` whose
    /// credentials, if any, were stored in plain text.
    pub fn from_legacy(created: RunCreated) -> RunAdmitted {
        RunAdmitted {
            created,
            team: DEFAULT_TEAM.to_string(),
            sealed: None,
        }
    }
}

/// What stands in a stored or returned config for a credential value.
pub const REDACTED: &str = "***";

/// Credential values encrypted with an AEAD (XChaCha20-Poly1305: a 24-byte random nonce, the
/// ciphertext with its tag). What the plaintext is, and the key, are the shell's business.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub nonce: [u8; 24],
    pub ciphertext: Vec<u8>,
}

/// Everything known about a run when it is accepted. `config` is already resolved:
/// defaults are filled in, so replaying the log never depends on today's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCreated {
    pub title: String,
    pub prompt: String,
    pub config: AgentConfig,
    pub creator: Creator,
    pub source: SourceType,
    pub metadata: BTreeMap<String, String>,
}

/// The resolved agent configuration of a run (OpenAPI `AmbientAgentConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentConfig {
    pub name: Option<String>,
    pub model_id: Option<String>,
    pub base_prompt: Option<String>,
    pub environment_id: Option<String>,
    pub skill_spec: Option<String>,
    pub mcp_servers: BTreeMap<String, McpServer>,
}

/// One MCP server made available to the agent; exactly one of `warp_id`, `command`, `url`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct McpServer {
    pub warp_id: Option<String>,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub url: Option<String>,
    pub env: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
}

/// Who created a run: the API key's principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Creator {
    pub kind: CreatorKind,
    /// The id of the API key that created the run.
    pub uid: String,
    /// The key's name.
    pub display_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CreatorKind {
    /// A personal key: the run is attributed to its user.
    User,
    /// An agent key: the run is attributed to the agent (a service account).
    ServiceAccount,
}

/// Where a run came from (OpenAPI `RunSourceType`). Append new values at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SourceType {
    Api,
    Cli,
    Linear,
    Slack,
    Local,
    ScheduledAgent,
    WebApp,
    GithubAction,
    CloudMode,
}

impl SourceType {
    pub const ALL: [SourceType; 9] = [
        SourceType::Api,
        SourceType::Cli,
        SourceType::Linear,
        SourceType::Slack,
        SourceType::Local,
        SourceType::ScheduledAgent,
        SourceType::WebApp,
        SourceType::GithubAction,
        SourceType::CloudMode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Api => "API",
            SourceType::Cli => "CLI",
            SourceType::Linear => "LINEAR",
            SourceType::Slack => "SLACK",
            SourceType::Local => "LOCAL",
            SourceType::ScheduledAgent => "SCHEDULED_AGENT",
            SourceType::WebApp => "WEB_APP",
            SourceType::GithubAction => "GITHUB_ACTION",
            SourceType::CloudMode => "CLOUD_MODE",
        }
    }

    pub fn parse(s: &str) -> Option<SourceType> {
        SourceType::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// How the agent should treat a follow-up (OpenAPI follow-up `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum FollowupMode {
    #[default]
    Normal,
    Plan,
    Orchestrate,
}

impl FollowupMode {
    pub const ALL: [FollowupMode; 3] = [
        FollowupMode::Normal,
        FollowupMode::Plan,
        FollowupMode::Orchestrate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FollowupMode::Normal => "normal",
            FollowupMode::Plan => "plan",
            FollowupMode::Orchestrate => "orchestrate",
        }
    }

    pub fn parse(s: &str) -> Option<FollowupMode> {
        FollowupMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// Why a run failed (OpenAPI `RunStatusMessage`). `error_code` is a `PlatformErrorCode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMessage {
    pub message: String,
    pub error_code: Option<String>,
    pub retryable: Option<bool>,
}

/// What one execution used. Every figure is optional: absent means not known (the agent
/// reported no tokens, no price was configured, the host could not measure CPU time), never 0.
/// Costs are in nano-dollars (1e-9 USD): integers, so sums are exact and the log stays `Eq`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecutionUsage {
    /// The tokens the agent's CLI reported.
    pub tokens: Option<Tokens>,
    /// The model the tokens were priced for: the one the CLI reported, else the run's
    /// `model_id`.
    pub model: Option<String>,
    /// The inference cost and where it came from.
    pub inference: Option<InferenceCost>,
    /// CPU time of the execution's whole process tree (setup included), in milliseconds.
    pub cpu_ms: Option<u64>,
    /// `cpu_ms` at the configured compute price, in nano-dollars.
    pub compute_nano_usd: Option<u64>,
}

/// Tokens of one execution. `input` counts every prompt token, the cached ones included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

/// An inference cost in nano-dollars and its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceCost {
    pub nano_usd: u64,
    pub source: CostSource,
}

/// Where an inference cost came from. Append new values at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CostSource {
    /// The CLI's own cost report (Claude Code's `total_cost_usd`).
    Cli,
    /// The tokens at the per-model prices configured when it was recorded.
    Prices,
}

impl CostSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CostSource::Cli => "cli",
            CostSource::Prices => "prices",
        }
    }

    pub fn parse(s: &str) -> Option<CostSource> {
        [CostSource::Cli, CostSource::Prices]
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// Something an execution produced (OpenAPI `ArtifactItem`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// The artifact's id, a UUID made by the shell when the artifact is reported; names it in
    /// `GET /agent/artifacts/{artifactUid}`.
    pub uid: String,
    pub kind: ArtifactKind,
}

/// What an artifact is. Append new values at the end only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArtifactKind {
    PullRequest {
        url: String,
        branch: String,
        title: Option<String>,
    },
    /// A file from the run's workspace; `path` is relative to the workspace.
    File {
        path: String,
        description: Option<String>,
        content: Content,
    },
    /// A plan in Markdown; the Markdown is in the content store.
    Plan {
        title: Option<String>,
        content: Content,
    },
    /// An image from the run's workspace; `path` is relative to the workspace.
    Screenshot {
        path: String,
        description: Option<String>,
        content: Content,
    },
}

impl ArtifactKind {
    /// The wire name (OpenAPI `artifact_type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            ArtifactKind::PullRequest { .. } => "PULL_REQUEST",
            ArtifactKind::File { .. } => "FILE",
            ArtifactKind::Plan { .. } => "PLAN",
            ArtifactKind::Screenshot { .. } => "SCREENSHOT",
        }
    }

    /// Every wire name, in a fixed order.
    pub const TYPE_NAMES: [&'static str; 4] = ["PLAN", "PULL_REQUEST", "SCREENSHOT", "FILE"];

    /// The stored bytes of the artifact, if it has any (a pull request has none).
    pub fn content(&self) -> Option<&Content> {
        match self {
            ArtifactKind::PullRequest { .. } => None,
            ArtifactKind::File { content, .. }
            | ArtifactKind::Plan { content, .. }
            | ArtifactKind::Screenshot { content, .. } => Some(content),
        }
    }
}

/// A file attached to a run when it was created (OpenAPI `AttachmentInput`). `file_name` is a
/// single path component, checked at admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub file_name: String,
    pub content: Content,
}

/// The schedule whose firing made a run (OpenAPI `ScheduleInfo`), as it was at the firing: a
/// later rename or new cron expression of the schedule does not rewrite the runs it made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSchedule {
    pub schedule_id: ScheduleId,
    pub schedule_name: String,
    pub cron_schedule: String,
    /// The due time of the firing that made the run (not when it was created: a catch-up
    /// firing after a restart makes its run later than it was due).
    pub due: Timestamp,
}

/// The run another run was made from, and how (`Event::Derived`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunDerivation {
    /// The original run's id.
    pub from: String,
    pub kind: Derivation,
}

/// How a run was made from another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Derivation {
    /// The same task again: the original's prompt, configuration and attachments. `pinned`
    /// checks out each repository at the commit in `pins` (those the original's first
    /// execution recorded) instead of its ref as it is now.
    Rerun { pinned: bool, pins: Vec<RepoPin> },
    /// A branch off the original after its execution `after_execution`: the workspace, the
    /// agent's home and its CLI session start as they were when that execution ended, and the
    /// agent continues with `message`.
    Fork {
        after_execution: u32,
        message: String,
    },
}

/// A repository of the environment held at one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoPin {
    /// The repository as the environment configures it (its URL).
    pub repository: String,
    /// The commit, 40 hexadecimal digits.
    pub commit: String,
}
