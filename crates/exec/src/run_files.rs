//! Where a run's own files live (its agent home, MCP file, session id, `setup.done`, report
//! files, snapshots): under the data directory, or for an environment on Slurm beside the
//! workspaces, on the filesystem the server and the nodes share. One rule, for the executions
//! that make them and for the API that asks about a run's snapshots.

use std::path::{Path, PathBuf};

use runledger_config::Environment;

/// The directory under a Slurm environment's `workspace_root` that holds each run's own files.
pub const SHARED_FILES: &str = ".runledger-files";

/// The files directory of run `run` in `environment`.
pub fn run_files(environment: &Environment, data_dir: &Path, run: &str) -> PathBuf {
    match (&environment.slurm, &environment.workspace_root) {
        (Some(_), Some(root)) => root.join(SHARED_FILES).join(run),
        _ => data_dir.join("agent-files").join(run),
    }
}
