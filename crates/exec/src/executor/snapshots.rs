//! What the API asks the executor about snapshots before it creates a fork: whether the
//! snapshot of one execution of a run was kept, where its environment keeps a run's files.

use super::handle::Executor;
use crate::snapshot;
use runledger_domain::Run;

impl Executor {
    /// Whether the snapshot execution `execution` of `run` left exists (a whole one).
    pub fn snapshot_kept(&self, run: &Run, execution: u32) -> bool {
        let environment = self.environment_of(run);
        let files = crate::run_files::run_files(
            environment,
            &self.supervision.data_dir,
            &run.id.to_string(),
        );
        snapshot::exists(&files, execution)
    }
}
