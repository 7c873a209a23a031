//! Stored events as JSON: `RunEvent` (one line of the events endpoint, of `runledger export`
//! and of `events --json`) and its exact inverse `event_from_json` (`runledger import`), which
//! accepts only what `event_json` writes so that a backup restores every event byte for byte.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::run::*;
use super::schema::*;
use super::time::{format_time, parse_exact_time};
use runledger_domain::{
    AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, CreatorKind, Event,
    ExecutionUsage, InferenceCost, McpServer, Placement, RunAdmitted, RunCreated, RunId,
    RunSchedule, Sealed, StatusMessage, Tokens,
};
use runledger_store::Envelope;

/// The payload of a `Created` event.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedData<'a> {
    #[schema(value_type = String)]
    pub title: &'a str,
    #[schema(value_type = String)]
    pub prompt: &'a str,
    pub config: AgentConfigOut<'a>,
    pub creator: CreatorOut<'a>,
    #[schema(value_type = SourceTypeSchema)]
    pub source: &'static str,
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: &'a BTreeMap<String, String>,
    /// The team the run belongs to; absent on runs created before teams, which belong to
    /// `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub team: Option<&'a str>,
    /// The run's credential values, encrypted with the instance's credential key (which only
    /// `export --with-keys` carries); `config` shows them as `***`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sealed_credentials: Option<SealedOut>,
}

/// Encrypted credential values (XChaCha20-Poly1305), base64 (standard, padded).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SealedOut {
    pub nonce: String,
    pub ciphertext: String,
}

impl SealedOut {
    pub fn from(s: &Sealed) -> SealedOut {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        SealedOut {
            nonce: b64.encode(s.nonce),
            ciphertext: b64.encode(&s.ciphertext),
        }
    }

    pub fn sealed(&self) -> Result<Sealed, EventJsonError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let nonce = b64
            .decode(&self.nonce)
            .ok()
            .and_then(|n| <[u8; 24]>::try_from(n).ok())
            .ok_or_else(|| bad("sealed_credentials.nonce is not 24 bytes of base64".into()))?;
        let ciphertext = b64
            .decode(&self.ciphertext)
            .map_err(|_| bad("sealed_credentials.ciphertext is not base64".into()))?;
        Ok(Sealed { nonce, ciphertext })
    }
}

impl<'a> CreatedData<'a> {
    fn from(c: &'a RunCreated, team: Option<&'a str>, sealed: Option<&Sealed>) -> Self {
        CreatedData {
            title: &c.title,
            prompt: &c.prompt,
            config: AgentConfigOut::from(&c.config),
            creator: CreatorOut::from(&c.creator),
            source: c.source.as_str(),
            metadata: &c.metadata,
            team,
            sealed_credentials: sealed.map(SealedOut::from),
        }
    }
}

/// An event's kind (`type`) and payload (`data`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", content = "data")]
pub enum EventData<'a> {
    /// The run was accepted (always sequence 0).
    Created(CreatedData<'a>),
    /// An execution of the agent began; executions count from 1. `placement` is where a
    /// cluster scheduler ran it (absent for the server's own host).
    Started {
        execution: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        placement: Option<PlacementData>,
    },
    /// A follow-up arrived from the API key `by`.
    FollowupReceived {
        #[schema(value_type = String)]
        message: &'a str,
        #[schema(value_type = FollowupModeSchema)]
        mode: &'static str,
        #[schema(value_type = String)]
        by: &'a str,
    },
    /// The execution ended successfully.
    Succeeded { execution: u32 },
    /// The execution ended in failure.
    Failed {
        execution: u32,
        status_message: StatusMessageOut<'a>,
    },
    /// The run was cancelled by the API key `by`.
    Cancelled {
        #[schema(value_type = String)]
        by: &'a str,
    },
    /// The execution took the next `count` follow-ups owed to it (handed at its start or
    /// received while it ran), oldest first.
    FollowupsDelivered { execution: u32, count: u32 },
    /// The execution ended without taking every follow-up owed to it; the run is queued again
    /// for them (the first resumes it). Follows that execution's `Succeeded` or `Failed`.
    Requeued { execution: u32 },
    /// What an execution used, priced when it was recorded; absent fields were not known.
    UsageRecorded(UsageData<'a>),
    /// The execution's agent reported an artifact.
    ArtifactReported(ArtifactReportedData),
    /// The files attached to the run at its creation (right after `Created`, or after
    /// `Scheduled` when the run has both).
    Attached(AttachedData),
    /// The schedule whose firing made the run (sequence 1, after `Created`).
    Scheduled(ScheduledData),
    /// The execution was lost with its node (or with the service) and the run is queued
    /// again for a new execution (`on_node_failure = "requeue"`).
    Lost {
        execution: u32,
        status_message: StatusMessageOut<'a>,
    },
    /// Every session link handed out for the run until now was revoked by the API key `by`.
    SessionLinkRevoked {
        #[schema(value_type = String)]
        by: &'a str,
    },
}

/// Where a cluster scheduler ran an execution: `{"scheduler": "slurm", "job_id", "node"}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, tag = "scheduler", rename_all = "lowercase")]
pub enum PlacementData {
    Slurm { job_id: u64, node: String },
}

impl PlacementData {
    fn from(p: &Placement) -> PlacementData {
        match p {
            Placement::Slurm { job_id, node } => PlacementData::Slurm {
                job_id: *job_id,
                node: node.clone(),
            },
        }
    }

    fn placement(self) -> Placement {
        match self {
            PlacementData::Slurm { job_id, node } => Placement::Slurm { job_id, node },
        }
    }
}

/// Bytes in the content store: their SHA-256 (lower-case hex), size and media type.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContentData {
    pub sha256: String,
    pub size: u64,
    pub mime_type: String,
}

impl ContentData {
    fn from(c: &Content) -> ContentData {
        ContentData {
            sha256: super::time::hex(&c.sha256),
            size: c.size,
            mime_type: c.mime_type.clone(),
        }
    }

    fn content(self) -> Result<Content, EventJsonError> {
        let sha256 = super::time::unhex32(&self.sha256)
            .ok_or_else(|| bad(format!("sha256 {:?} is not 64 hex digits", self.sha256)))?;
        Ok(Content {
            sha256,
            size: self.size,
            mime_type: self.mime_type,
        })
    }
}

/// The payload of an `ArtifactReported` event.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactReportedData {
    pub execution: u32,
    pub artifact_uid: String,
    pub artifact: ArtifactData,
}

/// An artifact as stored: its type and what it holds.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(
    tag = "artifact_type",
    rename_all = "SCREAMING_SNAKE_CASE",
    deny_unknown_fields
)]
pub enum ArtifactData {
    PullRequest {
        url: String,
        branch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    File {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        content: ContentData,
    },
    Plan {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        content: ContentData,
    },
    Screenshot {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        content: ContentData,
    },
}

impl ArtifactReportedData {
    fn from(execution: u32, a: &Artifact) -> ArtifactReportedData {
        let artifact = match &a.kind {
            ArtifactKind::PullRequest { url, branch, title } => ArtifactData::PullRequest {
                url: url.clone(),
                branch: branch.clone(),
                title: title.clone(),
            },
            ArtifactKind::File {
                path,
                description,
                content,
            } => ArtifactData::File {
                path: path.clone(),
                description: description.clone(),
                content: ContentData::from(content),
            },
            ArtifactKind::Plan { title, content } => ArtifactData::Plan {
                title: title.clone(),
                content: ContentData::from(content),
            },
            ArtifactKind::Screenshot {
                path,
                description,
                content,
            } => ArtifactData::Screenshot {
                path: path.clone(),
                description: description.clone(),
                content: ContentData::from(content),
            },
        };
        ArtifactReportedData {
            execution,
            artifact_uid: a.uid.clone(),
            artifact,
        }
    }

    fn event(self) -> Result<Event, EventJsonError> {
        let kind = match self.artifact {
            ArtifactData::PullRequest { url, branch, title } => {
                ArtifactKind::PullRequest { url, branch, title }
            }
            ArtifactData::File {
                path,
                description,
                content,
            } => ArtifactKind::File {
                path,
                description,
                content: content.content()?,
            },
            ArtifactData::Plan { title, content } => ArtifactKind::Plan {
                title,
                content: content.content()?,
            },
            ArtifactData::Screenshot {
                path,
                description,
                content,
            } => ArtifactKind::Screenshot {
                path,
                description,
                content: content.content()?,
            },
        };
        Ok(Event::ArtifactReported {
            execution: self.execution,
            artifact: Artifact {
                uid: self.artifact_uid,
                kind,
            },
        })
    }
}

/// The payload of an `Attached` event.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachedData {
    pub attachments: Vec<AttachmentData>,
}

/// One attached file: its name in the run's attachments directory and its bytes.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentData {
    pub file_name: String,
    pub content: ContentData,
}

impl AttachedData {
    fn from(attachments: &[Attachment]) -> AttachedData {
        AttachedData {
            attachments: attachments
                .iter()
                .map(|a| AttachmentData {
                    file_name: a.file_name.clone(),
                    content: ContentData::from(&a.content),
                })
                .collect(),
        }
    }

    fn event(self) -> Result<Event, EventJsonError> {
        Ok(Event::Attached {
            attachments: self
                .attachments
                .into_iter()
                .map(|a| {
                    Ok(Attachment {
                        file_name: a.file_name,
                        content: a.content.content()?,
                    })
                })
                .collect::<Result<_, EventJsonError>>()?,
        })
    }
}

/// The payload of a `Scheduled` event: the schedule as it was when it fired, and the due time
/// of that firing.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduledData {
    pub schedule_id: String,
    pub schedule_name: String,
    pub cron_schedule: String,
    #[schema(format = DateTime)]
    pub due: String,
}

impl ScheduledData {
    fn from(s: &RunSchedule) -> ScheduledData {
        ScheduledData {
            schedule_id: s.schedule_id.to_string(),
            schedule_name: s.schedule_name.clone(),
            cron_schedule: s.cron_schedule.clone(),
            due: format_time(s.due),
        }
    }

    fn event(self) -> Result<Event, EventJsonError> {
        let schedule_id = self.schedule_id.parse().map_err(|_| {
            bad(format!(
                "schedule_id {:?} is not a schedule id (a ULID)",
                self.schedule_id
            ))
        })?;
        let due = parse_exact_time(&self.due).ok_or_else(|| {
            bad(format!(
                "due {:?} is not a time as runledger writes it (2026-11-21T23:41:29.123Z)",
                self.due
            ))
        })?;
        Ok(Event::Scheduled {
            schedule: RunSchedule {
                schedule_id,
                schedule_name: self.schedule_name,
                cron_schedule: self.cron_schedule,
                due,
            },
        })
    }
}

/// The payload of a `UsageRecorded` event. Costs are integers of nano-dollars (1e-9 USD), as
/// stored, so an export and import keep them exactly.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageData<'a> {
    pub execution: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = TokensData)]
    pub tokens: Option<TokensData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub model: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = InferenceCostData)]
    pub inference_cost: Option<InferenceCostData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cpu_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub compute_cost_nano_usd: Option<u64>,
}

/// Tokens an execution's CLI reported; `input` includes `cached_input`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokensData {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

/// An inference cost and its source: `cli` (the CLI's own report) or `prices` (the configured
/// per-model prices).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceCostData<'a> {
    pub nano_usd: u64,
    #[schema(value_type = String)]
    pub source: Cow<'a, str>,
}

impl<'a> UsageData<'a> {
    fn from(execution: u32, u: &'a ExecutionUsage) -> Self {
        UsageData {
            execution,
            tokens: u.tokens.map(|t| TokensData {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
            }),
            model: u.model.as_deref().map(Cow::Borrowed),
            inference_cost: u.inference.map(|c| InferenceCostData {
                nano_usd: c.nano_usd,
                source: Cow::Borrowed(c.source.as_str()),
            }),
            cpu_ms: u.cpu_ms,
            compute_cost_nano_usd: u.compute_nano_usd,
        }
    }
}

/// One stored event of a run (the events endpoint, `runledger export` and `events --json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunEvent<'a> {
    pub run_id: String,
    /// Position in the run's log, from 0.
    pub seq: u64,
    #[schema(format = DateTime)]
    pub at: String,
    #[serde(flatten)]
    pub event: EventData<'a>,
}

impl<'a> RunEvent<'a> {
    pub fn from(e: &'a Envelope) -> Self {
        let event = match &e.event {
            Event::Created(c) => EventData::Created(CreatedData::from(c, None, None)),
            // One type on the wire: a client reads a run's first event as `Created` whichever
            // variant stored it; `team` tells them apart for `import`.
            Event::Admitted(a) => EventData::Created(CreatedData::from(
                &a.created,
                Some(&a.team),
                a.sealed.as_ref(),
            )),
            Event::Started { execution } => EventData::Started {
                execution: *execution,
                placement: None,
            },
            Event::StartedOn {
                execution,
                placement,
            } => EventData::Started {
                execution: *execution,
                placement: Some(PlacementData::from(placement)),
            },
            Event::Lost { execution, status } => EventData::Lost {
                execution: *execution,
                status_message: StatusMessageOut::from(status),
            },
            Event::FollowupReceived { message, mode, by } => EventData::FollowupReceived {
                message,
                mode: mode.as_str(),
                by,
            },
            Event::Succeeded { execution } => EventData::Succeeded {
                execution: *execution,
            },
            Event::Failed { execution, status } => EventData::Failed {
                execution: *execution,
                status_message: StatusMessageOut::from(status),
            },
            Event::Cancelled { by } => EventData::Cancelled { by },
            Event::SessionLinkRevoked { by } => EventData::SessionLinkRevoked { by },
            Event::FollowupsDelivered { execution, count } => EventData::FollowupsDelivered {
                execution: *execution,
                count: *count,
            },
            Event::Requeued { execution } => EventData::Requeued {
                execution: *execution,
            },
            Event::UsageRecorded { execution, usage } => {
                EventData::UsageRecorded(UsageData::from(*execution, usage))
            }
            Event::ArtifactReported {
                execution,
                artifact,
            } => EventData::ArtifactReported(ArtifactReportedData::from(*execution, artifact)),
            Event::Attached { attachments } => EventData::Attached(AttachedData::from(attachments)),
            Event::Scheduled { schedule } => EventData::Scheduled(ScheduledData::from(schedule)),
        };
        RunEvent {
            run_id: e.run_id.to_string(),
            seq: e.seq,
            at: format_time(e.at),
            event,
        }
    }
}

/// One stored event as JSON (`runledger export` and `events --json`).
pub fn event_json(e: &Envelope) -> serde_json::Value {
    // Plain structs and string-keyed maps always serialise.
    serde_json::to_value(RunEvent::from(e)).unwrap_or(serde_json::Value::Null)
}

/// Why a JSON value is not an event as `event_json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventJsonError(String);

#[derive(Deserialize)]
struct EventIn<'a> {
    #[serde(borrow)]
    run_id: &'a str,
    seq: u64,
    #[serde(borrow)]
    at: &'a str,
    #[serde(rename = "type", borrow)]
    kind: &'a str,
}

#[derive(Deserialize)]
struct CreatedIn {
    title: String,
    prompt: String,
    config: AgentConfigIn,
    creator: CreatorIn,
    source: String,
    metadata: BTreeMap<String, String>,
    team: Option<String>,
    sealed_credentials: Option<SealedOut>,
}

#[derive(Deserialize)]
struct CreatorIn {
    #[serde(rename = "type")]
    kind: String,
    uid: String,
    display_name: String,
}

#[derive(Deserialize)]
struct ExecutionIn {
    execution: u32,
}

#[derive(Deserialize)]
struct StartedIn {
    execution: u32,
    placement: Option<PlacementData>,
}

#[derive(Deserialize)]
struct DeliveredIn {
    execution: u32,
    count: u32,
}

#[derive(Deserialize)]
struct FollowupIn {
    message: String,
    mode: String,
    by: String,
}

#[derive(Deserialize)]
struct FailedIn {
    execution: u32,
    status_message: StatusMessageIn,
}

#[derive(Deserialize)]
struct StatusMessageIn {
    message: String,
    error_code: Option<String>,
    retryable: Option<bool>,
}

/// The payload of `Cancelled` and `SessionLinkRevoked`: the key that asked.
#[derive(Deserialize)]
struct CancelledIn {
    by: String,
}

/// The inverse of `event_json`: the envelope an event line was written from (`runledger
/// import`). Only what `event_json` writes is accepted: the envelope is rendered again and
/// must equal the input, so an unknown field, a null or a time in another spelling is refused
/// instead of being silently dropped, and a field that `event_json` stopped writing would fail
/// the round-trip tests rather than vanish from backups.
pub fn event_from_json(value: &serde_json::Value) -> Result<Envelope, EventJsonError> {
    let head = EventIn::deserialize(value).map_err(|e| bad(format!("not an event: {e}")))?;
    let data = value
        .get("data")
        .ok_or_else(|| bad("not an event: missing field `data`".into()))?;
    let (run_id, at) = place(&head)?;
    let envelope = Envelope {
        run_id,
        seq: head.seq,
        at,
        event: event_of(head.kind, data)?,
    };
    round_trips(value, &envelope)?;
    Ok(envelope)
}

fn bad(what: String) -> EventJsonError {
    EventJsonError(what)
}

/// Reads `value` as a `T`, naming `what` it is in the error.
fn read<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    what: &str,
) -> Result<T, EventJsonError> {
    T::deserialize(value).map_err(|e| EventJsonError(format!("{what}: {e}")))
}

/// The run and the time of an event line.
fn place(head: &EventIn<'_>) -> Result<(RunId, runledger_domain::Timestamp), EventJsonError> {
    let run_id: RunId = head
        .run_id
        .parse()
        .map_err(|_| bad(format!("run_id {:?} is not a run id (a ULID)", head.run_id)))?;
    let at = parse_exact_time(head.at).ok_or_else(|| {
        bad(format!(
            "at {:?} is not a time as runledger writes it (2026-11-21T23:41:29.123Z)",
            head.at
        ))
    })?;
    Ok((run_id, at))
}

/// The event of type `kind` whose payload is `data`.
fn event_of(kind: &str, data: &serde_json::Value) -> Result<Event, EventJsonError> {
    use runledger_domain::FollowupMode;
    let what = format!("{kind} data");
    Ok(match kind {
        "Created" => created(read(data, &what)?)?,
        "Started" => {
            let started: StartedIn = read(data, &what)?;
            match started.placement {
                None => Event::Started {
                    execution: started.execution,
                },
                Some(placement) => Event::StartedOn {
                    execution: started.execution,
                    placement: placement.placement(),
                },
            }
        }
        "Lost" => {
            let f: FailedIn = read(data, &what)?;
            Event::Lost {
                execution: f.execution,
                status: StatusMessage {
                    message: f.status_message.message,
                    error_code: f.status_message.error_code,
                    retryable: f.status_message.retryable,
                },
            }
        }
        "Succeeded" => Event::Succeeded {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "FollowupReceived" => {
            let f: FollowupIn = read(data, &what)?;
            let mode = FollowupMode::parse(&f.mode)
                .ok_or_else(|| bad(format!("follow-up mode {:?} is unknown", f.mode)))?;
            Event::FollowupReceived {
                message: f.message,
                mode,
                by: f.by,
            }
        }
        "Failed" => {
            let f: FailedIn = read(data, &what)?;
            Event::Failed {
                execution: f.execution,
                status: StatusMessage {
                    message: f.status_message.message,
                    error_code: f.status_message.error_code,
                    retryable: f.status_message.retryable,
                },
            }
        }
        "Cancelled" => Event::Cancelled {
            by: read::<CancelledIn>(data, &what)?.by,
        },
        "SessionLinkRevoked" => Event::SessionLinkRevoked {
            by: read::<CancelledIn>(data, &what)?.by,
        },
        "FollowupsDelivered" => {
            let d: DeliveredIn = read(data, &what)?;
            Event::FollowupsDelivered {
                execution: d.execution,
                count: d.count,
            }
        }
        "Requeued" => Event::Requeued {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "UsageRecorded" => usage_recorded(read(data, &what)?)?,
        "ArtifactReported" => read::<ArtifactReportedData>(data, &what)?.event()?,
        "Attached" => read::<AttachedData>(data, &what)?.event()?,
        "Scheduled" => read::<ScheduledData>(data, &what)?.event()?,
        other => return Err(bad(format!("event type {other:?} is unknown"))),
    })
}

/// A `Created` event from its payload.
fn created(c: CreatedIn) -> Result<Event, EventJsonError> {
    use runledger_domain::{Creator, SourceType};
    let kind = match c.creator.kind.as_str() {
        "user" => CreatorKind::User,
        "service_account" => CreatorKind::ServiceAccount,
        other => return Err(bad(format!("creator type {other:?} is unknown"))),
    };
    let source = SourceType::parse(&c.source)
        .ok_or_else(|| bad(format!("source {:?} is unknown", c.source)))?;
    let config = AgentConfig {
        name: c.config.name,
        model_id: c.config.model_id,
        base_prompt: c.config.base_prompt,
        environment_id: c.config.environment_id,
        skill_spec: c.config.skill_spec,
        mcp_servers: c
            .config
            .mcp_servers
            .unwrap_or_default()
            .into_iter()
            .map(|(name, s)| (name, McpServer::from(s)))
            .collect(),
    };
    let created = RunCreated {
        title: c.title,
        prompt: c.prompt,
        config,
        creator: Creator {
            kind,
            uid: c.creator.uid,
            display_name: c.creator.display_name,
        },
        source,
        metadata: c.metadata,
    };
    let sealed = c
        .sealed_credentials
        .as_ref()
        .map(SealedOut::sealed)
        .transpose()?;
    Ok(match c.team {
        Some(team) if !runledger_domain::valid_team_name(&team) => {
            return Err(bad(format!("team {team:?} is not a team name")))
        }
        Some(team) => Event::Admitted(RunAdmitted {
            created,
            team,
            sealed,
        }),
        None if sealed.is_some() => {
            return Err(bad(
                "sealed_credentials belong to a run with a team; this one has none".into(),
            ))
        }
        None => Event::Created(created),
    })
}

/// A `UsageRecorded` event from its payload.
fn usage_recorded(u: UsageData<'static>) -> Result<Event, EventJsonError> {
    let inference = match u.inference_cost {
        None => None,
        Some(c) => Some(InferenceCost {
            nano_usd: c.nano_usd,
            source: CostSource::parse(&c.source)
                .ok_or_else(|| bad(format!("inference cost source {:?} is unknown", c.source)))?,
        }),
    };
    Ok(Event::UsageRecorded {
        execution: u.execution,
        usage: ExecutionUsage {
            tokens: u.tokens.map(|t| Tokens {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
            }),
            model: u.model.map(Cow::into_owned),
            inference,
            cpu_ms: u.cpu_ms,
            compute_nano_usd: u.compute_cost_nano_usd,
        },
    })
}

/// Refuses a line that `event_json` would not write exactly so: an unknown field, a null, a
/// time in another spelling.
fn round_trips(value: &serde_json::Value, envelope: &Envelope) -> Result<(), EventJsonError> {
    let written = event_json(envelope);
    if &written != value {
        return Err(bad(first_difference(value, &written, "")));
    }
    Ok(())
}

/// Where `given` (a line read back) differs from `written` (what `event_json` makes of it).
fn first_difference(given: &serde_json::Value, written: &serde_json::Value, at: &str) -> String {
    use serde_json::Value;
    let path = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    if let (Value::Object(g), Value::Object(w)) = (given, written) {
        if let Some((key, value)) = g.iter().find(|(k, _)| !w.contains_key(*k)) {
            return if value.is_null() {
                format!("field `{}` is null; runledger leaves it out", path(key))
            } else {
                format!("field `{}` is not part of the event format", path(key))
            };
        }
        if let Some(key) = w.keys().find(|k| !g.contains_key(*k)) {
            return format!("field `{}` is missing", path(key));
        }
        for (key, value) in g {
            if let Some(other) = w.get(key).filter(|other| *other != value) {
                return first_difference(value, other, &path(key));
            }
        }
    }
    let at = if at.is_empty() { "the event" } else { at };
    format!("`{at}` is {given}, which runledger writes as {written}")
}
