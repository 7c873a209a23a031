//! How executions report to runs: `exec`'s `Report` interface, carried out by the `Runs`
//! handle. Living here, beside `Runs`, it keeps `exec` from importing the actors: `exec` knows
//! only the interface, and the actors import `exec`.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::{Artifact, Command, ExecutionUsage, Placement, RunId, StatusMessage};
use runledger_exec::{Report, Started};
use runledger_store as store;

impl Report for Runs {
    fn accepts_new_work(&self) -> bool {
        self.accepts_writes()
    }

    async fn start(&self, id: RunId, placement: Option<Placement>) -> Started {
        match self.execute(id, Command::Start { placement }).await {
            Ok(_) => Started::Yes,
            Err(Error::Store(store::Error::Refused(_))) => Started::Deferred,
            Err(_) => Started::Refused,
        }
    }

    async fn finish(&self, id: RunId, execution: u32, outcome: Result<(), StatusMessage>) {
        self.record(id, Command::Finish { execution, outcome }, "finish")
            .await;
    }

    async fn lose(&self, id: RunId, execution: u32, status: StatusMessage) {
        self.record(id, Command::Lose { execution, status }, "lost execution")
            .await;
    }

    async fn delivered(&self, id: RunId, execution: u32, count: u32) {
        self.record(id, Command::Delivered { execution, count }, "delivery")
            .await;
    }

    async fn record_usage(&self, id: RunId, execution: u32, usage: ExecutionUsage) {
        self.record(id, Command::RecordUsage { execution, usage }, "usage")
            .await;
    }

    async fn report_artifact(&self, id: RunId, execution: u32, artifact: Artifact) {
        let uid = artifact.uid.clone();
        if let Err(e) = self
            .execute(
                id,
                Command::ReportArtifact {
                    execution,
                    artifact,
                },
            )
            .await
        {
            tracing::info!(run_id = %id, artifact_uid = %uid, error = %e, "artifact not recorded");
        }
    }
}

impl Runs {
    /// Records what an execution reports. A refusal (a cancel or a later execution came
    /// first, nothing was owed, usage was recorded already) is expected and only logged.
    async fn record(&self, id: RunId, command: Command, what: &'static str) {
        if let Err(e) = self.execute(id, command).await {
            tracing::debug!(run_id = %id, error = %e, what, "execution report not recorded");
        }
    }
}
