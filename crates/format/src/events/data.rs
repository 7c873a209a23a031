//! The payload of each event as JSON, one type per event kind, with both directions: from the
//! domain's values (what the API writes) and back (what an import reads, refused unless it is
//! exactly what was written). Must not know the line around a payload or how lines are read.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::run::*;
use crate::schema::*;
use crate::time::{format_time, parse_exact_time};
use runledger_domain::{
    Artifact, ArtifactKind, Attachment, Content, Event, ExecutionUsage, Placement, RunCreated,
    RunSchedule, Sealed,
};

use super::error::{bad, EventJsonError};

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
    pub(crate) fn from(c: &'a RunCreated, team: Option<&'a str>, sealed: Option<&Sealed>) -> Self {
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
    /// The run was made from another run (`from`): a rerun of it or a fork of it (sequence 1,
    /// after `Created`).
    Derived(super::derived::DerivedData),
    /// What the execution runs with, measured before its agent started (`docs/api.md`,
    /// "Provenance").
    Provenance(super::provenance::ProvenanceData),
    /// What the workspace held changed at the execution's end, from the run's base
    /// (`docs/api.md`, "Changes").
    Changes(super::changes::ChangesData),
}

/// Where a cluster scheduler ran an execution: `{"scheduler": "slurm", "job_id", "node"}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, tag = "scheduler", rename_all = "lowercase")]
pub enum PlacementData {
    Slurm { job_id: u64, node: String },
}

impl PlacementData {
    pub(crate) fn from(p: &Placement) -> PlacementData {
        match p {
            Placement::Slurm { job_id, node } => PlacementData::Slurm {
                job_id: *job_id,
                node: node.clone(),
            },
        }
    }

    pub(crate) fn placement(self) -> Placement {
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
    pub(crate) fn from(c: &Content) -> ContentData {
        ContentData {
            sha256: crate::time::hex(&c.sha256),
            size: c.size,
            mime_type: c.mime_type.clone(),
        }
    }

    pub(crate) fn content(self) -> Result<Content, EventJsonError> {
        let sha256 = crate::time::unhex32(&self.sha256)
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
    pub(crate) fn from(execution: u32, a: &Artifact) -> ArtifactReportedData {
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

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
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
    pub(crate) fn from(attachments: &[Attachment]) -> AttachedData {
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

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
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
    pub(crate) fn from(s: &RunSchedule) -> ScheduledData {
        ScheduledData {
            schedule_id: s.schedule_id.to_string(),
            schedule_name: s.schedule_name.clone(),
            cron_schedule: s.cron_schedule.clone(),
            due: format_time(s.due),
        }
    }

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
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
    pub(crate) fn from(execution: u32, u: &'a ExecutionUsage) -> Self {
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
