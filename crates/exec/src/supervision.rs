//! What harnesses need from the service to run and supervise agents (`Supervision`): the
//! transcripts, the sandboxes, cgroups, mirrors, secrets, prices, credentials, content store
//! and the Slurm cluster. A bundle of handles built at start-up; it decides nothing itself.

use std::sync::Arc;

use runledger_domain::RunId;

use crate::transcript::Transcripts;
use crate::{cgroup, repos, sandbox, slurm};

/// What harnesses need from the service to run and supervise agents.
#[derive(Clone)]
pub struct Supervision {
    pub transcripts: Transcripts,
    /// Where workspaces (by default) and per-run agent files live.
    pub data_dir: std::path::PathBuf,
    /// This data directory's instance id: the marker that finds our agents' processes.
    pub instance: String,
    /// Time between SIGTERM and SIGKILL when a process tree is stopped.
    pub grace: std::time::Duration,
    /// The launchers of the environments' agent processes.
    pub sandboxes: sandbox::Sandboxes,
    /// Where executions' cgroups are made, for environments with limits.
    pub cgroups: cgroup::Cgroups,
    /// The mirrors of the environments' repositories.
    pub mirrors: repos::Mirrors,
    /// `[secrets]`, for the environments that list them.
    pub secrets: Arc<std::collections::BTreeMap<String, runledger_config::Secret>>,
    /// `[prices]`, for the cost of each execution's usage when it is recorded.
    pub prices: Arc<runledger_config::Prices>,
    /// The instance's credential key: seals runs' MCP credentials at admission and puts them
    /// back at launch.
    pub credentials: runledger_store::credentials::Credentials,
    /// Where attachments are read from and reported artifacts' bytes are kept.
    pub content: runledger_store::content::ContentStore,
    /// What agents may report through `RUNLEDGER_REPORT` (`report.rs`).
    pub artifact_limits: runledger_config::ArtifactLimits,
    /// The Slurm cluster of the environments with `runs_on = "slurm"`.
    pub cluster: slurm::Cluster,
}

impl Supervision {
    /// The supervision of one run: its sandboxes hand its files to, and run its processes as,
    /// the run's own user (`Sandboxes::for_run`).
    pub async fn for_run(&self, run: RunId) -> Result<Supervision, String> {
        Ok(Supervision {
            sandboxes: self.sandboxes.for_run(run).await?,
            ..self.clone()
        })
    }
}
