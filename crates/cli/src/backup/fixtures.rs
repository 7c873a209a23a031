//! Test fixtures shared by the backup's unit tests: one event of each variant, every optional
//! field set. Compiled for tests only.

use std::collections::BTreeMap;

use runledger_domain::{
    AgentConfig, Artifact, ArtifactKind, Attachment, Content, CostSource, Creator, CreatorKind,
    Event, ExecutionUsage, FollowupMode, InferenceCost, McpServer, RunAdmitted, RunCreated, RunId,
    Sealed, SourceType, StatusMessage, Timestamp, Tokens,
};

/// One event of each variant, with every optional field set.
pub(super) fn one_of_each() -> Vec<Event> {
    let server = McpServer {
        warp_id: None,
        command: Some("npx".into()),
        args: vec!["srv".into()],
        url: None,
        env: BTreeMap::from([("TOKEN".into(), "t".into())]),
        headers: BTreeMap::new(),
    };
    vec![
        Event::Created(RunCreated {
            title: "t".into(),
            prompt: "p \u{0} \"q\"".into(),
            config: AgentConfig {
                name: Some("n".into()),
                model_id: Some("m".into()),
                base_prompt: Some("b".into()),
                environment_id: Some("e".into()),
                skill_spec: Some("o/r:s".into()),
                mcp_servers: BTreeMap::from([("fs".into(), server)]),
            },
            creator: Creator {
                kind: CreatorKind::ServiceAccount,
                uid: "u".into(),
                display_name: "d".into(),
            },
            source: SourceType::CloudMode,
            metadata: BTreeMap::from([("k".into(), "v".into())]),
        }),
        Event::Started { execution: 1 },
        Event::FollowupReceived {
            message: "m".into(),
            mode: FollowupMode::Orchestrate,
            by: "k".into(),
        },
        Event::Succeeded { execution: 1 },
        Event::Failed {
            execution: 2,
            status: StatusMessage {
                message: "setup".into(),
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(false),
            },
        },
        Event::Cancelled { by: "k".into() },
        Event::FollowupsDelivered {
            execution: 2,
            count: 3,
        },
        Event::Requeued { execution: 2 },
        Event::UsageRecorded {
            execution: 3,
            usage: ExecutionUsage {
                tokens: Some(Tokens {
                    input: 1200,
                    cached_input: 200,
                    output: 80,
                }),
                model: Some("claude-x".into()),
                inference: Some(InferenceCost {
                    nano_usd: 12_300_000,
                    source: CostSource::Cli,
                }),
                cpu_ms: Some(1500),
                compute_nano_usd: Some(20_833),
            },
        },
        Event::Admitted(RunAdmitted {
            created: RunCreated {
                title: "a".into(),
                prompt: "p".into(),
                config: AgentConfig::default(),
                creator: Creator {
                    kind: CreatorKind::User,
                    uid: "u".into(),
                    display_name: "d".into(),
                },
                source: SourceType::Api,
                metadata: BTreeMap::new(),
            },
            team: "infra".into(),
            sealed: Some(Sealed {
                nonce: [7; 24],
                ciphertext: vec![1, 2, 3, 255],
            }),
        }),
        Event::ArtifactReported {
            execution: 1,
            artifact: Artifact {
                uid: "u1".into(),
                kind: ArtifactKind::PullRequest {
                    url: "https://git.example.com/a/b/pull/1".into(),
                    branch: "b".into(),
                    title: Some("t".into()),
                },
            },
        },
        Event::ArtifactReported {
            execution: 1,
            artifact: Artifact {
                uid: "u2".into(),
                kind: ArtifactKind::File {
                    path: "out/a b.txt".into(),
                    description: Some("d".into()),
                    content: Content {
                        sha256: [0xab; 32],
                        size: 12,
                        mime_type: "text/plain".into(),
                    },
                },
            },
        },
        Event::ArtifactReported {
            execution: 1,
            artifact: Artifact {
                uid: "u3".into(),
                kind: ArtifactKind::Plan {
                    title: Some("p".into()),
                    content: Content {
                        sha256: [0x01; 32],
                        size: 3000,
                        mime_type: "text/markdown".into(),
                    },
                },
            },
        },
        Event::ArtifactReported {
            execution: 2,
            artifact: Artifact {
                uid: "u4".into(),
                kind: ArtifactKind::Screenshot {
                    path: "s.png".into(),
                    description: None,
                    content: Content {
                        sha256: [0xfe; 32],
                        size: 99999,
                        mime_type: "image/png".into(),
                    },
                },
            },
        },
        Event::Attached {
            attachments: vec![Attachment {
                file_name: "spec.md".into(),
                content: Content {
                    sha256: [0x00; 32],
                    size: 0,
                    mime_type: "text/markdown".into(),
                },
            }],
        },
        Event::Scheduled {
            schedule: runledger_domain::RunSchedule {
                schedule_id: RunId::new(Timestamp(1_763_700_000_000), 9),
                schedule_name: "nightly \"deps\"".into(),
                cron_schedule: "0 3 * * 1-5".into(),
                due: Timestamp(1_763_780_400_000),
            },
        },
        Event::StartedOn {
            execution: 2,
            placement: runledger_domain::Placement::Slurm {
                job_id: 4_294_967_301,
                node: "gpu-07".into(),
            },
        },
        Event::Lost {
            execution: 2,
            status: StatusMessage {
                message: "node gpu-07 failed".into(),
                error_code: Some("internal_error".into()),
                retryable: Some(true),
            },
        },
        Event::SessionLinkRevoked { by: "k".into() },
        Event::Derived(runledger_domain::RunDerivation {
            from: RunId::new(Timestamp(1_763_700_000_000), 3).to_string(),
            kind: runledger_domain::Derivation::Rerun {
                pinned: true,
                pins: vec![runledger_domain::RepoPin {
                    repository: "https://git.example.com/acme/api.git".into(),
                    commit: "9fceb02d0ae598e95dc970b74767f19372d61af8".into(),
                }],
            },
        }),
        Event::Derived(runledger_domain::RunDerivation {
            from: RunId::new(Timestamp(1_763_700_000_000), 3).to_string(),
            kind: runledger_domain::Derivation::Fork {
                after_execution: 1,
                message: "again, \"differently\"".into(),
            },
        }),
        Event::Provenance {
            execution: 2,
            provenance: sample_provenance(),
        },
        Event::Changes {
            execution: 2,
            changes: sample_changes(),
        },
    ]
}

/// Changes with every optional field set.
pub(super) fn sample_changes() -> runledger_domain::ExecutionChanges {
    use runledger_domain::{ChangedFile, Content, ExecutionChanges, FileStatus, RepositoryChanges};
    ExecutionChanges {
        repositories: vec![RepositoryChanges {
            path: "app".into(),
            base: "0123456789abcdef0123456789abcdef01234567".into(),
            files: vec![ChangedFile {
                path: "b.txt".into(),
                old_path: Some("a.txt".into()),
                status: FileStatus::Renamed,
                additions: 2,
                deletions: 1,
                binary: false,
            }],
            error: Some("git timed out".into()),
        }],
        diff: Some(Content {
            sha256: [9; 32],
            size: 10,
            mime_type: "text/x-diff".into(),
        }),
        cut: true,
    }
}

/// A provenance with every optional field set.
pub(super) fn sample_provenance() -> runledger_domain::ExecutionProvenance {
    use runledger_domain::{
        AgentCli, EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit,
    };
    ExecutionProvenance {
        repositories: vec![RepositoryCommit {
            url: "https://git.example/acme/app.git".into(),
            path: "app".into(),
            reference: Some("main".into()),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        }],
        environment: EnvironmentDefinition {
            id: "e".into(),
            sha256: "ab".repeat(32),
            definition: r#"{"env":["TOKEN"],"id":"e"}"#.into(),
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
            pids_max: Some(64),
            cpu_percent: Some(150),
        },
        model_id: Some("m".into()),
    }
}
