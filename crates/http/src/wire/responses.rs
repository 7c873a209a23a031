//! Response bodies of the v1 API (OpenAPI `RunItem`, `ListRunsResponse`, …) and their mapping
//! from the domain. Absent optional fields are omitted, never sent as null.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::token::{session_id, session_token, SessionLink};
use runledger_domain::{Run, RunUsage, Timestamp};
use runledger_format::events::RunEvent;
use runledger_format::keys::ApiKey;
use runledger_format::run::*;
use runledger_format::schema::*;
use runledger_format::time::TIME_TEXT;
use runledger_format::time::*;

/// Answer of a create (OpenAPI `RunAgentResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunAgentResponse {
    pub run_id: String,
    /// The same as `run_id`.
    #[schema(deprecated)]
    pub task_id: String,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    /// Whether the run had to wait for a free slot of its environment when it was queued.
    pub at_capacity: bool,
}

/// One run in full (OpenAPI `RunItem`). Absent optional fields are omitted, never null.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunItem<'a> {
    /// A ULID: 26 Crockford base-32 characters whose time part is `created_at`.
    #[schema(value_type = String)]
    pub run_id: Inline<{ ulid::ULID_LEN }>,
    /// The same as `run_id`.
    #[schema(deprecated, value_type = String)]
    pub task_id: Inline<{ ulid::ULID_LEN }>,
    #[schema(value_type = String)]
    pub title: &'a str,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    #[schema(value_type = String)]
    pub prompt: &'a str,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Inline<TIME_TEXT>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Inline<TIME_TEXT>,
    /// Start of the first execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Option<Inline<TIME_TEXT>>,
    #[schema(value_type = SourceTypeSchema)]
    pub source: &'static str,
    /// The schedule whose firing made the run, as it was at that firing; only on runs a
    /// schedule made (their `source` is `SCHEDULED_AGENT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleInfo<'a>>,
    pub creator: CreatorOut<'a>,
    pub agent_config: AgentConfigOut<'a>,
    /// The run id's 128 bits as a UUID; set once an execution has started.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uuid")]
    pub session_id: Option<Inline<36>>,
    /// The run's transcript page, openable without an API key until the link's `expires`
    /// (Unix seconds; `server.session_link_ttl_secs` after it was handed out, 7 days by
    /// default) or until the run's links are revoked; set once an execution has started.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uri")]
    pub session_link: Option<String>,
    /// Set while the run is `FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = StatusMessageOut)]
    pub status_message: Option<StatusMessageOut<'a>>,
    /// ISO 8601 duration of all executions so far, e.g. `PT2.004S`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub run_time: Option<Inline<32>>,
    /// What the run's executions cost, summed; present once one of them recorded a cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = RequestUsage)]
    pub request_usage: Option<RequestUsage>,
    /// The metadata given at create, when there is any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: &'a BTreeMap<String, String>,
    /// The files attached at create, when there are any (beyond the hosted service's
    /// `RunItem`). Their agent finds them in `$RUNLEDGER_ATTACHMENTS_DIR`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentItem<'a>>,
    /// What the run's executions reported (`RUNLEDGER_REPORT`), in report order; omitted
    /// while there is nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactItem>,
    /// For a fork (`POST /agent/runs/{id}/fork`): the run and execution it started from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<super::ForkedFrom<'a>>,
    /// The run that spawned this one (`parent_run_id` at create); absent on a run no run
    /// spawned. Its ancestors further up are the parent's own `parent_run_id`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub parent_run_id: Option<&'a str>,
    /// The run this one reruns (runledger only; `POST /agent/runs/{id}/rerun`); absent on
    /// every other run.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub rerun_of: Option<&'a str>,
    /// What the latest execution ran with (`docs/api.md`, "Provenance"): only in the answer
    /// of `GET /agent/runs/{id}` (a list leaves it out), once an execution recorded it. Always
    /// the last field, so `crate::provenance` can add it to a cached rendering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<runledger_format::events::ProvenanceData>,
}

/// The schedule that made a run (OpenAPI `ScheduleInfo`), as it was when it fired.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleInfo<'a> {
    /// The schedule's id (a ULID), as `/agent/schedules/{scheduleId}` names it.
    #[schema(value_type = String)]
    pub schedule_id: Inline<{ ulid::ULID_LEN }>,
    /// The schedule's name when the run was created.
    #[schema(value_type = String)]
    pub schedule_name: &'a str,
    /// The schedule's cron expression when the run was created.
    #[schema(value_type = String)]
    pub cron_schedule: &'a str,
}

/// A file attached to a run at create.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachmentItem<'a> {
    #[schema(value_type = String)]
    pub file_name: &'a str,
    #[schema(value_type = String)]
    pub mime_type: &'a str,
    pub size_bytes: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
}

/// What a run cost, in US dollars (OpenAPI `RequestUsage`). A cost nobody could tell (no
/// report from the CLI and no configured price; CPU time not measurable on the host) is
/// omitted, never sent as 0.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestUsage {
    /// Inference: the CLI's own cost report, otherwise its tokens at the configured prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Double, nullable = false)]
    pub inference_cost: Option<f64>,
    /// Compute: the CPU time of the executions at the configured price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Double, nullable = false)]
    pub compute_cost: Option<f64>,
}

/// Nano-dollars as dollars.
pub fn usd(nano_usd: u64) -> f64 {
    nano_usd as f64 / 1e9
}

impl RequestUsage {
    /// `None` while neither cost is known.
    pub fn from(usage: &RunUsage) -> Option<Self> {
        let out = RequestUsage {
            inference_cost: usage.inference_nano_usd.map(usd),
            compute_cost: usage.compute_nano_usd.map(usd),
        };
        (out.inference_cost.is_some() || out.compute_cost.is_some()).then_some(out)
    }
}

/// What a `RunItem` needs beyond the run itself.
pub struct Links<'a> {
    pub public_url: &'a str,
    pub secret: &'a [u8; 32],
    pub now: Timestamp,
    /// How long a `session_link` handed out at `now` stays valid (`server.session_link_ttl_secs`).
    pub ttl_secs: u64,
}

impl Links<'_> {
    /// The session link `run` gets at `now`.
    pub fn session_link(&self, run: &Run) -> SessionLink {
        SessionLink::handed_out(run, self.now, self.ttl_secs)
    }
}

impl<'a> RunItem<'a> {
    pub fn from(run: &'a Run, links: &Links<'_>) -> Self {
        let id = id_text(run.id);
        let session = run.has_session();
        RunItem {
            task_id: id,
            title: &run.title,
            state: run.state.as_str(),
            prompt: &run.prompt,
            created_at: time_text(run.created_at),
            updated_at: time_text(run.updated_at),
            started_at: run.started_at.map(time_text),
            source: run.source.as_str(),
            schedule: run.schedule.as_ref().map(|s| ScheduleInfo {
                schedule_id: id_text(s.schedule_id),
                schedule_name: &s.schedule_name,
                cron_schedule: &s.cron_schedule,
            }),
            creator: CreatorOut::from(&run.creator),
            agent_config: AgentConfigOut::from(&run.config),
            session_id: session.then(|| session_id(run.id)),
            session_link: session.then(|| {
                let link = links.session_link(run);
                format!(
                    "{}/sessions/{id}?expires={}&epoch={}&token={}",
                    links.public_url,
                    link.expires,
                    link.epoch,
                    session_token(links.secret, &link)
                )
            }),
            status_message: run.status_message.as_ref().map(StatusMessageOut::from),
            run_time: session.then(|| format_duration(run.run_time_ms(links.now))),
            request_usage: RequestUsage::from(&run.usage),
            metadata: &run.metadata,
            attachments: run
                .attachments
                .iter()
                .map(|a| AttachmentItem {
                    file_name: &a.file_name,
                    mime_type: &a.content.mime_type,
                    size_bytes: a.content.size,
                    sha256: hex(&a.content.sha256),
                })
                .collect(),
            artifacts: run.artifacts.iter().map(ArtifactItem::from).collect(),
            forked_from: super::ForkedFrom::of(run),
            parent_run_id: run.parent.as_ref().map(|p| p.parent.as_str()),
            rerun_of: match &run.derived {
                Some(runledger_domain::RunDerivation {
                    from,
                    kind: runledger_domain::Derivation::Rerun { .. },
                }) => Some(from.as_str()),
                _ => None,
            },
            provenance: None,
            run_id: id,
        }
    }
}

/// Paging state of a list answer (OpenAPI `PageInfo`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PageInfo {
    /// Exact: the server looks one match ahead.
    pub has_next_page: bool,
    /// Opaque; present exactly when `has_next_page` is true. Valid only with the same filters
    /// and sort.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub next_cursor: Option<String>,
}

/// One page of runs (OpenAPI `ListRunsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListRunsResponse<'a> {
    pub runs: Vec<RunItem<'a>>,
    pub page_info: PageInfo,
}

/// Answer of a follow-up: the run's state after it (`QUEUED` when it resumed a finished run).
#[derive(Debug, Serialize, ToSchema)]
pub struct FollowupResponse {
    pub run_id: String,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
}

/// A page of a run's event history, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunEvents<'a> {
    pub run_id: String,
    pub events: Vec<RunEvent<'a>>,
    /// Present when the run has more events after this page: pass it as `after_seq` to get
    /// the next page. It is the `seq` of the page's last event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// One transcript entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TranscriptEntry<'a> {
    /// Byte offset of the entry in the transcript.
    pub offset: u64,
    #[schema(format = DateTime)]
    pub at: String,
    /// The execution that wrote it (0 for entries written before any execution).
    pub execution: u32,
    /// `stdout` or `stderr` (of the agent or a setup command), `system` (what the harness
    /// did) or `followup`.
    #[schema(value_type = String)]
    pub stream: &'a str,
    #[schema(value_type = String)]
    pub text: &'a str,
    /// The last line of `text` goes on in the next entry of the same stream and execution:
    /// join the two texts without a newline. Lines longer than 16 KiB are split this way.
    pub continued: bool,
}

impl<'a> TranscriptEntry<'a> {
    /// The stored entry at byte `offset`, as the page and the stream write it.
    pub fn of(offset: u64, e: &'a runledger_runs::transcript::Entry) -> TranscriptEntry<'a> {
        TranscriptEntry {
            offset,
            at: format_time(e.at),
            execution: e.execution,
            stream: &e.stream,
            text: &e.text,
            continued: e.continued,
        }
    }
}

/// One page of a run's transcript.
#[derive(Debug, Serialize, ToSchema)]
pub struct TranscriptPage<'a> {
    pub run_id: String,
    /// The run's state when the page was read.
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    pub entries: Vec<TranscriptEntry<'a>>,
    /// The `offset` to ask for next.
    pub next_offset: u64,
    /// Whether the transcript holds more after this page.
    pub has_more: bool,
}

/// What a client learns about an environment (OpenAPI `CloudEnvironmentConfig`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CloudEnvironmentConfig<'a> {
    #[schema(value_type = String)]
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub description: Option<&'a str>,
    #[schema(value_type = Vec<String>)]
    pub setup_commands: &'a [String],
}

impl<'a> CloudEnvironmentConfig<'a> {
    /// What a client learns of `env`.
    pub fn of(env: &'a runledger_config::Environment) -> Self {
        CloudEnvironmentConfig {
            name: &env.name,
            description: env.description.as_deref(),
            setup_commands: &env.setup,
        }
    }
}

/// A configured environment (OpenAPI `CloudEnvironment`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CloudEnvironment<'a> {
    /// The id that `config.environment_id` names.
    #[schema(value_type = String)]
    pub uid: &'a str,
    pub config: CloudEnvironmentConfig<'a>,
    /// When the configuration was loaded.
    #[schema(format = DateTime)]
    pub last_updated: String,
    pub setup_failed: bool,
}

/// The configured environments, the default one first (OpenAPI `ListEnvironmentsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListEnvironmentsResponse<'a> {
    pub environments: Vec<CloudEnvironment<'a>>,
}

/// Every API key of the instance, revoked ones included.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList<'a> {
    pub keys: Vec<ApiKey<'a>>,
}

/// A new API key with its secret, which is shown only here.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey<'a> {
    #[serde(flatten)]
    pub record: ApiKey<'a>,
    /// The secret to send as `Authorization: Bearer <key>`.
    #[schema(value_type = String)]
    pub key: &'a str,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
}

/// Answer of `/healthz`: the process serves requests.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: HealthStatus,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyStatus {
    Ready,
}

/// Answer of `/readyz` once startup recovery is done.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    pub status: ReadyStatus,
}

/// A team: the keys of a team see and create only that team's runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct Team<'a> {
    #[schema(value_type = String)]
    pub name: &'a str,
    /// Null for `default`, which is as old as the instance.
    #[schema(format = DateTime, required = true)]
    pub created_at: Option<String>,
}

impl<'a> Team<'a> {
    pub fn from(name: &'a str, created_at: Option<runledger_domain::Timestamp>) -> Self {
        Team {
            name,
            created_at: created_at.map(runledger_format::time::format_time),
        }
    }
}

/// Every team of the instance, `default` first.
#[derive(Debug, Serialize, ToSchema)]
pub struct TeamList<'a> {
    pub teams: Vec<Team<'a>>,
}
