//! What an execution ran with (`ExecutionProvenance`), recorded before its agent starts
//! (`Event::Provenance`): each repository's commit, the environment's definition and its
//! digest, the harness and the agent CLI's version, runledger's version, the containment in
//! force and the model. Plain data: the shell measures it (`exec`), the log keeps it, and a
//! rerun reads its commits back. It never holds a variable's or a secret's value: the
//! definition names them only.

use serde::{Deserialize, Serialize};

/// What one execution ran with, as measured right before its agent started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionProvenance {
    /// The environment's repositories, in the order they were checked out, each with the
    /// commit its checkout held when the agent started.
    pub repositories: Vec<RepositoryCommit>,
    /// The environment the execution ran in: its id, a copy of its definition (variable and
    /// secret names, never values) and the SHA-256 of that copy.
    pub environment: EnvironmentDefinition,
    /// The harness's name (`claude`, `codex`, `gemini`, `command`, `demo`).
    pub harness: String,
    /// The agent CLI and what its `--version` printed; `None` for a harness without a CLI
    /// (`command`, `demo`).
    pub agent_cli: Option<AgentCli>,
    /// The version of the runledger that ran the execution.
    pub runledger_version: String,
    /// How the agent was contained: `bwrap`, `none`, or `in-process` (the demo agent).
    pub sandbox: String,
    /// Whether the agent reached the network.
    pub network: bool,
    pub limits: ProvenanceLimits,
    /// The model the agent was given: the run's `model_id`, else the environment's.
    pub model_id: Option<String>,
}

/// One repository of the environment and the commit its checkout held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepositoryCommit {
    /// The repository as configured (its url).
    pub url: String,
    /// Where it is checked out, relative to the workspace.
    pub path: String,
    /// The branch, tag or commit the environment names; `None`: the remote's default branch.
    pub reference: Option<String>,
    /// The commit `HEAD` named (40 hex digits); empty when the checkout could not say.
    pub commit: String,
}

/// An environment's definition as an execution saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentDefinition {
    pub id: String,
    /// The SHA-256 of `definition`, in lowercase hex.
    pub sha256: String,
    /// The definition as canonical JSON text (keys sorted, no values of variables or
    /// secrets), so two executions with the same digest ran in the same definition.
    pub definition: String,
}

/// An agent CLI and the version it reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCli {
    /// The program that was run (`claude`, `codex`, `gemini`, or the environment's own).
    pub name: String,
    /// The first line its `--version` printed; `None` when it printed nothing usable, failed
    /// or did not answer in time.
    pub version: Option<String>,
}

/// The per-execution resource limits in force (`None`: not limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProvenanceLimits {
    pub memory_mb: Option<u64>,
    pub pids_max: Option<u64>,
    pub cpu_percent: Option<u64>,
}

impl ExecutionProvenance {
    /// The commits of its repositories, by url, for a pinned rerun.
    pub fn commits(&self) -> impl Iterator<Item = (&str, &str)> {
        self.repositories
            .iter()
            .filter(|r| !r.commit.is_empty())
            .map(|r| (r.url.as_str(), r.commit.as_str()))
    }
}
