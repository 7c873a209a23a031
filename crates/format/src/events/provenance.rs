//! The payload of a `Provenance` event as JSON (`ProvenanceData`), both ways: from the domain's
//! `ExecutionProvenance` (the events API, `GET` of a run, exports) and back (`runledger
//! import`, which also checks that the line round-trips). The environment's definition stays
//! the exact text its digest covers, so a reader can check the digest.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::{
    AgentCli, EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit,
};

/// What an execution ran with, measured before its agent started.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceData {
    /// The execution it describes.
    pub execution: u32,
    /// The environment's repositories in checkout order, with the commit each held.
    pub repositories: Vec<RepositoryCommitData>,
    pub environment: EnvironmentDefinitionData,
    /// `claude`, `codex`, `gemini`, `command` or `demo`.
    pub harness: String,
    /// The agent CLI and what its `--version` printed; absent for a `command` agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_cli: Option<AgentCliData>,
    pub runledger_version: String,
    /// `bwrap`, `none` or `in-process`.
    pub sandbox: String,
    pub network: bool,
    pub limits: LimitsData,
    /// The model the agent was given: the run's `model_id`, else the environment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

/// One repository and the commit (40 hex digits; empty when it could not be told) its
/// checkout held.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepositoryCommitData {
    pub url: String,
    pub path: String,
    /// The branch, tag or commit the environment names; absent: the default branch.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    pub commit: String,
}

/// The environment's definition as canonical JSON text (variable and secret names, never
/// values) and the SHA-256 of that text.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentDefinitionData {
    pub id: String,
    pub sha256: String,
    pub definition: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCliData {
    pub name: String,
    /// The first line of `--version`; absent when the CLI did not report one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The limits in force; an absent one was not set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<u64>,
}

impl ProvenanceData {
    pub fn from(execution: u32, p: &ExecutionProvenance) -> ProvenanceData {
        ProvenanceData {
            execution,
            repositories: p
                .repositories
                .iter()
                .map(|r| RepositoryCommitData {
                    url: r.url.clone(),
                    path: r.path.clone(),
                    reference: r.reference.clone(),
                    commit: r.commit.clone(),
                })
                .collect(),
            environment: EnvironmentDefinitionData {
                id: p.environment.id.clone(),
                sha256: p.environment.sha256.clone(),
                definition: p.environment.definition.clone(),
            },
            harness: p.harness.clone(),
            agent_cli: p.agent_cli.as_ref().map(|c| AgentCliData {
                name: c.name.clone(),
                version: c.version.clone(),
            }),
            runledger_version: p.runledger_version.clone(),
            sandbox: p.sandbox.clone(),
            network: p.network,
            limits: LimitsData {
                memory_mb: p.limits.memory_mb,
                pids_max: p.limits.pids_max,
                cpu_percent: p.limits.cpu_percent,
            },
            model_id: p.model_id.clone(),
        }
    }

    /// The execution and its provenance, back from JSON.
    pub fn provenance(self) -> (u32, ExecutionProvenance) {
        let provenance = ExecutionProvenance {
            repositories: self
                .repositories
                .into_iter()
                .map(|r| RepositoryCommit {
                    url: r.url,
                    path: r.path,
                    reference: r.reference,
                    commit: r.commit,
                })
                .collect(),
            environment: EnvironmentDefinition {
                id: self.environment.id,
                sha256: self.environment.sha256,
                definition: self.environment.definition,
            },
            harness: self.harness,
            agent_cli: self.agent_cli.map(|c| AgentCli {
                name: c.name,
                version: c.version,
            }),
            runledger_version: self.runledger_version,
            sandbox: self.sandbox,
            network: self.network,
            limits: ProvenanceLimits {
                memory_mb: self.limits.memory_mb,
                pids_max: self.limits.pids_max,
                cpu_percent: self.limits.cpu_percent,
            },
            model_id: self.model_id,
        };
        (self.execution, provenance)
    }
}
