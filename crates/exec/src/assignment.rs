//! What a harness is given for one execution (`Assignment`), what it can be told while it runs
//! (`Control`), and how it says what its agent took and reported (`Deliveries`, `Artifacts`),
//! with the executor's ends of those channels that record it through `Report`. Harnesses see
//! only this, never the executor's queues or slots.

use tokio::sync::mpsc;

use runledger_config::Environment;
use runledger_domain::{Artifact, Followup, Run, RunId};

use crate::reporting::Report;
use crate::slurm;

/// What an agent needs to know to work on one execution.
pub struct Assignment {
    pub run: Run,
    pub execution: u32,
    pub followups: Vec<Followup>,
    pub resumed_by: Option<Followup>,
    pub environment: Environment,
    /// The Slurm job the execution runs in, for an environment on Slurm.
    pub allocation: Option<slurm::Allocation>,
}

/// What a live agent can be told.
#[derive(Debug)]
pub enum Control {
    Followup(Followup),
    Stop,
}

/// Where a harness hands the artifacts its agent reported, in report order; recorded by
/// `record_artifacts` before the execution's usage and end.
#[derive(Clone)]
pub struct Artifacts(pub(crate) mpsc::UnboundedSender<Artifact>);

impl Artifacts {
    pub fn reported(&self, artifact: Artifact) {
        let _ = self.0.send(artifact);
    }
}

/// Records what a harness reports through `Artifacts`, in order; returns when every handle is
/// dropped and everything reported is recorded.
pub(crate) async fn record_artifacts(
    runs: &impl Report,
    id: RunId,
    execution: u32,
    mut reports: mpsc::UnboundedReceiver<Artifact>,
) {
    while let Some(artifact) = reports.recv().await {
        runs.report_artifact(id, execution, artifact).await;
    }
}

/// How a harness says that its agent took follow-ups: the ones handed to it at its start and
/// the ones sent while it runs, in the order it was given them. What an execution ends without
/// taking is requeued for the run's next execution (`Event::Requeued`).
#[derive(Clone)]
pub struct Deliveries(pub(crate) mpsc::UnboundedSender<u32>);

impl Deliveries {
    /// The agent took the next `count` follow-ups.
    pub fn took(&self, count: u32) {
        if count > 0 {
            let _ = self.0.send(count);
        }
    }
}

/// Records what a harness reports through `Deliveries`, in order, several reports at once
/// when they come faster than the log takes them; returns when every handle is dropped and
/// everything reported is recorded, so an execution's `Finish` comes after its deliveries.
pub(crate) async fn record_deliveries(
    runs: &impl Report,
    id: RunId,
    execution: u32,
    mut reports: mpsc::UnboundedReceiver<u32>,
) {
    while let Some(first) = reports.recv().await {
        let mut count = first;
        while let Ok(more) = reports.try_recv() {
            count = count.saturating_add(more);
        }
        runs.delivered(id, execution, count).await;
    }
}
