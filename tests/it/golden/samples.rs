//! One sample of every run event variant and every schedule event variant: the values the
//! golden fixtures encode (`../golden.rs`), which the replay corpus also builds histories from.

use runledger::domain::{
    AgentCli, EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit,
};
use runledger::domain::{
    AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, Creator, CreatorKind,
    Event, ExecutionUsage, FollowupMode, InferenceCost, McpServer, Placement, RunAdmitted,
    RunCreated, RunId, RunSchedule, Sealed, SourceType, StatusMessage, Timestamp, Tokens,
};
use std::collections::BTreeMap;

pub(crate) fn samples() -> Vec<(&'static str, Event)> {
    let mut mcp = BTreeMap::new();
    mcp.insert(
        "github".to_string(),
        McpServer {
            url: Some("https://mcp.example.com/sse".into()),
            headers: [("X-Token".to_string(), "t".to_string())].into(),
            ..McpServer::default()
        },
    );
    mcp.insert(
        "files".to_string(),
        McpServer {
            command: Some("npx".into()),
            args: vec!["-y".into(), "server-files".into()],
            env: [("ROOT".to_string(), "/srv".to_string())].into(),
            ..McpServer::default()
        },
    );
    vec![
        (
            "created",
            Event::Created(RunCreated {
                title: "Fix the bug".into(),
                prompt: "Fix the bug in auth.go".into(),
                config: AgentConfig {
                    name: Some("deploy".into()),
                    model_id: Some("gpt-x".into()),
                    base_prompt: Some("Be careful".into()),
                    environment_id: Some("demo".into()),
                    skill_spec: Some("acme/tools:deploy".into()),
                    mcp_servers: mcp,
                },
                creator: Creator {
                    kind: CreatorKind::ServiceAccount,
                    uid: "01KEY".into(),
                    display_name: "ci-bot".into(),
                },
                source: SourceType::Api,
                metadata: [("ticket".to_string(), "VIS-1".to_string())].into(),
            }),
        ),
        ("started", Event::Started { execution: 2 }),
        (
            "followup_received",
            Event::FollowupReceived {
                message: "also add tests".into(),
                mode: FollowupMode::Plan,
                by: "01KEY".into(),
            },
        ),
        ("succeeded", Event::Succeeded { execution: 1 }),
        (
            "failed",
            Event::Failed {
                execution: 3,
                status: StatusMessage {
                    message: "exit code 2".into(),
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                },
            },
        ),
        ("cancelled", Event::Cancelled { by: "01KEY".into() }),
        (
            "followups_delivered",
            Event::FollowupsDelivered {
                execution: 2,
                count: 3,
            },
        ),
        ("requeued", Event::Requeued { execution: 2 }),
        (
            "usage_recorded",
            Event::UsageRecorded {
                execution: 2,
                usage: ExecutionUsage {
                    tokens: Some(Tokens {
                        input: 12_000,
                        cached_input: 3_000,
                        output: 800,
                    }),
                    model: Some("claude-sonnet-x".into()),
                    inference: Some(InferenceCost {
                        nano_usd: 41_250_000,
                        source: CostSource::Prices,
                    }),
                    cpu_ms: Some(1_750),
                    compute_nano_usd: Some(175_000),
                },
            },
        ),
        (
            "admitted",
            Event::Admitted(RunAdmitted {
                created: RunCreated {
                    title: "Rotate the keys".into(),
                    prompt: "Rotate the staging keys".into(),
                    config: AgentConfig {
                        environment_id: Some("infra".into()),
                        mcp_servers: [(
                            "github".to_string(),
                            McpServer {
                                url: Some("https://mcp.example.com/sse".into()),
                                headers: [("Authorization".to_string(), "***".to_string())].into(),
                                ..McpServer::default()
                            },
                        )]
                        .into(),
                        ..AgentConfig::default()
                    },
                    creator: Creator {
                        kind: CreatorKind::User,
                        uid: "01KEY2".into(),
                        display_name: "bob".into(),
                    },
                    source: SourceType::Cli,
                    metadata: Default::default(),
                },
                team: "infra".into(),
                sealed: Some(Sealed {
                    nonce: [0x24; 24],
                    ciphertext: vec![0xde, 0xad, 0xbe, 0xef, 0x01],
                }),
            }),
        ),
        (
            "artifact_reported",
            Event::ArtifactReported {
                execution: 2,
                artifact: Artifact {
                    uid: "0b6f3a52-8d1e-4c2a-9f00-5e2d7c1a4b39".into(),
                    kind: ArtifactKind::File {
                        path: "out/report.pdf".into(),
                        description: Some("The audit report".into()),
                        content: Content {
                            sha256: [0xab; 32],
                            size: 48_213,
                            mime_type: "application/pdf".into(),
                        },
                    },
                },
            },
        ),
        (
            "artifact_reported_pull_request",
            Event::ArtifactReported {
                execution: 1,
                artifact: Artifact {
                    uid: "5d1c2e9a-0f3b-4a7e-8c61-2b9e4d0f7a13".into(),
                    kind: ArtifactKind::PullRequest {
                        url: "https://git.example.com/acme/app/pull/42".into(),
                        branch: "fix-auth".into(),
                        title: Some("Fix the auth bug".into()),
                    },
                },
            },
        ),
        (
            "artifact_reported_plan",
            Event::ArtifactReported {
                execution: 1,
                artifact: Artifact {
                    uid: "9e7a4c10-3b2d-4f6e-a8d5-c1f0e2b3a495".into(),
                    kind: ArtifactKind::Plan {
                        title: Some("Migration plan".into()),
                        content: Content {
                            sha256: [0x11; 32],
                            size: 2_048,
                            mime_type: "text/markdown".into(),
                        },
                    },
                },
            },
        ),
        (
            "artifact_reported_screenshot",
            Event::ArtifactReported {
                execution: 3,
                artifact: Artifact {
                    uid: "c4b2a1f0-6e5d-4c3b-9a8f-7e6d5c4b3a21".into(),
                    kind: ArtifactKind::Screenshot {
                        path: "shots/login.png".into(),
                        description: None,
                        content: Content {
                            sha256: [0x77; 32],
                            size: 183_422,
                            mime_type: "image/png".into(),
                        },
                    },
                },
            },
        ),
        (
            "attached",
            Event::Attached {
                attachments: vec![Attachment {
                    file_name: "design.png".into(),
                    content: Content {
                        sha256: [0x5c; 32],
                        size: 1_024,
                        mime_type: "image/png".into(),
                    },
                }],
            },
        ),
        (
            "scheduled",
            Event::Scheduled {
                schedule: RunSchedule {
                    schedule_id: RunId(0x0190_0000_0000_0000_0000_0000_0000_0007),
                    schedule_name: "Nightly dependency update".into(),
                    cron_schedule: "0 3 * * 1-5".into(),
                    due: Timestamp(1_764_126_000_000),
                },
            },
        ),
        (
            "started_on",
            Event::StartedOn {
                execution: 2,
                placement: Placement::Slurm {
                    job_id: 4217,
                    node: "gpu-07".into(),
                },
            },
        ),
        (
            "lost",
            Event::Lost {
                execution: 2,
                status: StatusMessage {
                    message: "node gpu-07 failed while this run was in progress".into(),
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                },
            },
        ),
        (
            "session_link_revoked",
            Event::SessionLinkRevoked { by: "01KEY".into() },
        ),
        (
            "derived_rerun",
            Event::Derived(runledger::domain::RunDerivation {
                from: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a).to_string(),
                kind: runledger::domain::Derivation::Rerun {
                    pinned: true,
                    pins: vec![runledger::domain::RepoPin {
                        repository: "https://git.example.com/acme/api.git".into(),
                        commit: "9fceb02d0ae598e95dc970b74767f19372d61af8".into(),
                    }],
                },
            }),
        ),
        (
            "derived_fork",
            Event::Derived(runledger::domain::RunDerivation {
                from: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a).to_string(),
                kind: runledger::domain::Derivation::Fork {
                    after_execution: 2,
                    message: "Try the other approach: keep the cache".into(),
                },
            }),
        ),
        (
            "provenance",
            Event::Provenance {
                execution: 2,
                provenance: ExecutionProvenance {
                    repositories: vec![RepositoryCommit {
                        url: "https://git.example/acme/app.git".into(),
                        path: "app".into(),
                        reference: Some("main".into()),
                        commit: "0123456789abcdef0123456789abcdef01234567".into(),
                    }],
                    environment: EnvironmentDefinition {
                        id: "infra".into(),
                        sha256: "ab".repeat(32),
                        definition: r#"{"env":["TOKEN"],"id":"infra"}"#.into(),
                    },
                    harness: "claude".into(),
                    agent_cli: Some(AgentCli {
                        name: "claude".into(),
                        version: Some("2.0.1 (Claude Code)".into()),
                    }),
                    runledger_version: "0.1.0".into(),
                    sandbox: "bwrap".into(),
                    network: false,
                    limits: ProvenanceLimits {
                        memory_mb: Some(512),
                        pids_max: None,
                        cpu_percent: Some(150),
                    },
                    model_id: Some("claude-x".into()),
                },
            },
        ),
        (
            "parented",
            Event::Parented(runledger::domain::RunParent {
                parent: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a).to_string(),
                ancestors: vec![RunId(0x0190_0000_0000_0000_0000_0000_0000_0007).to_string()],
            }),
        ),
        (
            "message_sent",
            Event::MessageSent {
                message_id: "01JMSG0000000000000000000A".into(),
                to: RunId(0x0190_0000_0000_0000_0000_0000_0000_002b).to_string(),
                subject: "split the \"api\" task".into(),
            },
        ),
        (
            "message_received",
            Event::MessageReceived(runledger::domain::ReceivedMessage {
                message_id: "01JMSG0000000000000000000A".into(),
                from: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a).to_string(),
                subject: "split the \"api\" task".into(),
                body: "Take the handlers;\nI take the tests.".into(),
            }),
        ),
        (
            "message_delivered",
            Event::MessageDelivered {
                message_id: "01JMSG0000000000000000000A".into(),
            },
        ),
        (
            "message_read",
            Event::MessageRead {
                message_id: "01JMSG0000000000000000000A".into(),
            },
        ),
        (
            "lifecycle_reported",
            Event::LifecycleReported(runledger::domain::ReportedLifecycle {
                report: runledger::domain::LifecycleReport::Errored,
                execution: 2,
                execution_id: Some("worker-7/attempt-2".into()),
                ref_id: Some("01JMSG0000000000000000000A".into()),
                by: "01KEY".into(),
            }),
        ),
        (
            "changes",
            Event::Changes {
                execution: 2,
                changes: runledger::domain::ExecutionChanges {
                    repositories: vec![runledger::domain::RepositoryChanges {
                        path: "app".into(),
                        base: "0123456789abcdef0123456789abcdef01234567".into(),
                        files: vec![runledger::domain::ChangedFile {
                            path: "src/new.rs".into(),
                            old_path: Some("src/old.rs".into()),
                            status: runledger::domain::FileStatus::Renamed,
                            additions: 3,
                            deletions: 1,
                            binary: false,
                        }],
                        error: Some("timed out".into()),
                    }],
                    diff: Some(Content {
                        sha256: [7; 32],
                        size: 120,
                        mime_type: "text/x-diff".into(),
                    }),
                    cut: true,
                },
            },
        ),
    ]
}

/// One sample of every schedule event variant (the payload as postcard encodes it; the
/// envelope that frames it in the log is the store's).
pub(super) fn schedule_samples() -> Vec<(&'static str, runledger::domain::schedule::ScheduleEvent)>
{
    use runledger::domain::schedule::{ScheduleEvent, ScheduleSpec};
    let spec = ScheduleSpec {
        name: "nightly".into(),
        cron: "0 3 * * 1-5".into(),
        time_zone: "Europe/Berlin".into(),
        prompt: "Update the dependencies".into(),
        config: AgentConfig {
            environment_id: Some("infra".into()),
            ..AgentConfig::default()
        },
        sealed: None,
        metadata: [("ticket".to_string(), "OPS-7".to_string())].into(),
    };
    let by = Creator {
        kind: CreatorKind::User,
        uid: "01KEY".into(),
        display_name: "alice".into(),
    };
    vec![
        (
            "schedule_created",
            ScheduleEvent::Created {
                spec: spec.clone(),
                enabled: true,
                team: "infra".into(),
                by: by.clone(),
            },
        ),
        (
            "schedule_updated",
            ScheduleEvent::Updated {
                spec: ScheduleSpec {
                    cron: "@daily".into(),
                    time_zone: "UTC".into(),
                    sealed: Some(Sealed {
                        nonce: [0x11; 24],
                        ciphertext: vec![1, 2, 3],
                    }),
                    ..spec
                },
                enabled: false,
                by,
            },
        ),
        (
            "schedule_paused",
            ScheduleEvent::Paused { by: "01KEY".into() },
        ),
        (
            "schedule_resumed",
            ScheduleEvent::Resumed { by: "01KEY".into() },
        ),
        (
            "schedule_deleted",
            ScheduleEvent::Deleted { by: "01KEY".into() },
        ),
        (
            "schedule_fired",
            ScheduleEvent::Fired {
                due: Timestamp(1_764_126_000_000),
                run_id: RunId(0x0190_0000_0000_0000_0000_0000_0000_002a),
            },
        ),
        (
            "schedule_fire_failed",
            ScheduleEvent::FireFailed {
                due: Timestamp(1_764_212_400_000),
                error: "environment \"infra\" already has 10000 runs waiting".into(),
            },
        ),
    ]
}
