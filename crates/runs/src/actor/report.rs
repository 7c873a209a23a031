//! How executions report to runs: `exec`'s `Report` interface, carried out by the `Runs`
//! handle. Living here, beside `Runs`, it keeps `exec` from importing the actors: `exec` knows
//! only the interface, and the actors import `exec`. Each report is recorded with the
//! service's own origin, naming its cause (`super::causes`).

use super::causes;
use super::error::Error;
use super::runs::Runs;
use runledger_domain::{
    Artifact, Command, ExecutionProvenance, ExecutionUsage, Origin, Placement, RunId, StatusMessage,
};
use runledger_exec::{Report, Started};
use runledger_store as store;

impl Report for Runs {
    fn accepts_new_work(&self) -> bool {
        self.accepts_writes()
    }

    async fn start(&self, id: RunId, placement: Option<Placement>) -> Started {
        let origin = causes::started(placement.as_ref());
        match self
            .execute_as(id, Command::Start { placement }, Some(origin))
            .await
        {
            Ok(_) => Started::Yes,
            Err(Error::Store(store::Error::Refused(_))) => Started::Deferred,
            Err(_) => Started::Refused,
        }
    }

    async fn finish(&self, id: RunId, execution: u32, outcome: Result<(), StatusMessage>) {
        let origin = causes::finished(execution, &outcome);
        let command = Command::Finish { execution, outcome };
        self.record(id, command, origin, "finish").await;
    }

    async fn lose(&self, id: RunId, execution: u32, status: StatusMessage) {
        let origin = causes::lost(execution, &status);
        let command = Command::Lose { execution, status };
        self.record(id, command, origin, "lost execution").await;
    }

    async fn delivered(&self, id: RunId, execution: u32, count: u32) {
        let origin = causes::delivered(execution, count);
        let command = Command::Delivered { execution, count };
        self.record(id, command, origin, "delivery").await;
    }

    async fn record_usage(&self, id: RunId, execution: u32, usage: ExecutionUsage) {
        let origin = causes::usage(execution);
        let command = Command::RecordUsage { execution, usage };
        self.record(id, command, origin, "usage").await;
    }

    async fn record_provenance(&self, id: RunId, execution: u32, provenance: ExecutionProvenance) {
        let origin = causes::provenance(execution);
        let command = Command::RecordProvenance {
            execution,
            provenance,
        };
        self.record(id, command, origin, "provenance").await;
    }

    async fn record_changes(
        &self,
        id: RunId,
        execution: u32,
        changes: runledger_domain::ExecutionChanges,
    ) {
        let origin = causes::changes(execution);
        let command = Command::RecordChanges { execution, changes };
        self.record(id, command, origin, "changes").await;
    }

    async fn report_artifact(&self, id: RunId, execution: u32, artifact: Artifact) {
        let uid = artifact.uid.clone();
        let origin = causes::artifact(execution, &artifact);
        let command = Command::ReportArtifact {
            execution,
            artifact,
        };
        if let Err(e) = self.execute_as(id, command, Some(origin)).await {
            tracing::info!(run_id = %id, artifact_uid = %uid, error = %e, "artifact not recorded");
        }
    }
}

impl Runs {
    /// Records what an execution reports. A refusal (a cancel or a later execution came
    /// first, nothing was owed, usage was recorded already) is expected and only logged.
    async fn record(&self, id: RunId, command: Command, origin: Origin, what: &'static str) {
        if let Err(e) = self.execute_as(id, command, Some(origin)).await {
            tracing::debug!(run_id = %id, error = %e, what, "execution report not recorded");
        }
    }
}
