//! Start-up recovery through the `Runs` handle: the executions a stopped service left in
//! progress are recorded as lost, and the runs that were waiting go back in their queues. It
//! walks the index a page at a time and never holds a state's runs whole.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::{Command, RunState, StatusMessage};
use runledger_projection::{self as projection, Page, Query};

impl Runs {
    /// Startup recovery, part one — before any request is served: fails the executions that
    /// were in progress when the service stopped (their agent is gone). Doing this before
    /// serving means no run started by this process can be mistaken for a lost one.
    pub async fn fail_lost_executions(&self) -> Result<usize, Error> {
        let mut failed = 0;
        let mut cursor = None;
        loop {
            let page = self
                .page_in_state(RunState::InProgress, cursor.take())
                .await?;
            for run in &page.runs {
                let lost = StatusMessage {
                    message: "the service restarted while this run was in progress; its execution was lost".into(),
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                };
                // On Slurm with `on_node_failure = "requeue"`, the run's job was cancelled at
                // start-up (`exec::slurm::Cluster::reconcile`) and it runs again.
                let finish = if self.inner.executor.requeues_lost(run) {
                    Command::Lose {
                        execution: run.executions,
                        status: lost,
                    }
                } else {
                    Command::Finish {
                        execution: run.executions,
                        outcome: Err(lost),
                    }
                };
                let origin = super::causes::recovered(run.executions);
                match self.execute_as(run.id, finish, Some(origin)).await {
                    Ok(_) | Err(Error::Rejected(_)) => failed += 1,
                    // A run with a damaged log fails on its own (its commands answer
                    // "damaged"); it must not keep the service from starting.
                    Err(e) if e.is_damage() => {
                        tracing::error!(run_id = %run.id, error = %e, "cannot record the lost execution of a run with a damaged log");
                    }
                    Err(e) => return Err(e),
                }
            }
            // Failed runs leave the range behind the cursor; what follows it is untouched.
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(failed),
            }
        }
    }

    /// Startup recovery, part two — may run while requests are served: puts the runs that were
    /// waiting back in their queues, oldest-queued first. A run that a request queues meanwhile
    /// is not queued twice (the executor's queues ignore duplicates).
    pub async fn requeue_waiting(&self) -> Result<usize, Error> {
        let mut requeued = 0;
        let mut cursor = None;
        loop {
            let page = self.page_in_state(RunState::Queued, cursor.take()).await?;
            for run in &page.runs {
                self.inner.executor.enqueue(self, run);
                requeued += 1;
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(requeued),
            }
        }
    }

    /// One page of the runs in `state`, of every team, oldest update first: recovery walks
    /// the state's index ranges a page at a time and never holds them whole.
    async fn page_in_state(
        &self,
        state: RunState,
        cursor: Option<projection::Cursor>,
    ) -> Result<Page, Error> {
        self.list(&Query {
            states: vec![state],
            every_team: true,
            order: projection::Order::Asc,
            limit: 500,
            cursor,
            ..Query::default()
        })
        .await
    }
}
