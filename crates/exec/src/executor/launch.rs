//! Launching an execution and recording its end: the assignment the agent works on, the checks
//! that refuse to run it, its harness (`demo` or `command`) beside the recording of what it
//! reports, the Slurm job's last word, and the run's end through `Report` before the slot is
//! given back. It writes no event itself; the run's actor refuses a stale end.

use tokio::sync::mpsc;

use runledger_config::Environment;
use runledger_domain::harness::Harness;
use runledger_domain::{ExecutionUsage, Followup, Run, StatusMessage};
use runledger_store::credentials::Unsealable;

use super::handle::Executor;
use super::live::interrupted_by_shutdown;
use super::state::Live;
use crate::assignment::{
    record_artifacts, record_deliveries, Artifacts, Assignment, Control, Deliveries,
};
use crate::provenance::{record_provenances, Provenances};
use crate::reporting::Report;
use crate::{command, demo, slurm};

/// The handles a harness reports through, whose receiving ends `execute` records from.
struct Reporting {
    deliveries: Deliveries,
    artifacts: Artifacts,
    provenances: Provenances,
}

/// How an execution ended: `None` if it was stopped (or lost), otherwise success or failure.
type Outcome = Option<Result<(), StatusMessage>>;

impl Executor {
    /// Launches an execution of the run's agent.
    pub fn launch(
        &self,
        runs: &impl Report,
        run: &Run,
        execution: u32,
        followups: Vec<Followup>,
        resumed_by: Option<Followup>,
    ) {
        let environment = self.environment_of(run).clone();
        let (tx, rx) = mpsc::unbounded_channel();
        self.state().live.insert(
            run.id,
            Live {
                execution,
                control: tx,
            },
        );
        // The agent gets the run's real credentials; the run as recorded holds `***`.
        let mut run = run.clone();
        let unsealed = self.supervision.credentials.restore(&mut run).err();
        let (allocation, not_allocated) = match self.state().placed.remove(&run.id) {
            Some(Ok(allocation)) => (Some(allocation), None),
            Some(Err(status)) => (None, Some(status)),
            None => (None, None),
        };
        let assignment = Assignment {
            run,
            execution,
            followups,
            resumed_by,
            environment: environment.clone(),
            allocation,
        };
        let runs = runs.clone();
        let executor = self.clone();
        actix_rt::spawn(async move {
            let refused = executor.refusal(&assignment, &environment, not_allocated, unsealed);
            executor
                .execute(&runs, &assignment, &environment, refused, rx)
                .await;
        });
    }

    /// Why an execution must not run its agent, as the outcome it ends with at once (`Some`),
    /// checked in this order; `None`: its harness runs.
    fn refusal(
        &self,
        assignment: &Assignment,
        environment: &Environment,
        not_allocated: Option<StatusMessage>,
        unsealed: Option<Unsealable>,
    ) -> Option<Outcome> {
        let configured = self.configured_environment(&assignment.run).is_some();
        // `live` holds this execution already, so a shutdown that began before this check
        // is seen here, and one that begins after it sends the execution `Stop`.
        if self.state().shutting_down {
            return Some(None);
        }
        // Running it elsewhere could mean another harness and other credentials.
        if !configured {
            return Some(Some(Err(StatusMessage {
                message: format!(
                    "the run's environment {:?} is no longer configured",
                    assignment
                        .run
                        .config
                        .environment_id
                        .as_deref()
                        .unwrap_or("")
                ),
                error_code: Some("resource_not_found".into()),
                retryable: Some(false),
            })));
        }
        // Slurm refused the allocation: the execution fails with what it said.
        if let Some(status) = not_allocated {
            return Some(Some(Err(status)));
        }
        if environment.slurm.is_some() && assignment.allocation.is_none() {
            return Some(Some(Err(StatusMessage {
                message: "the run's execution has no Slurm allocation (it was \
                          started without one)"
                    .into(),
                error_code: Some("internal_error".into()),
                retryable: Some(true),
            })));
        }
        // Never launched with `***` where a credential should be.
        if let Some(unsealed) = unsealed {
            return Some(Some(Err(StatusMessage {
                message: unsealed.to_string(),
                error_code: Some("internal_error".into()),
                retryable: Some(false),
            })));
        }
        None
    }

    /// One execution, from its harness to its recorded end and its slot given back.
    async fn execute(
        &self,
        runs: &impl Report,
        assignment: &Assignment,
        environment: &Environment,
        refused: Option<Outcome>,
        control: mpsc::UnboundedReceiver<Control>,
    ) {
        let id = assignment.run.id;
        let execution = assignment.execution;
        let (reports, delivered) = mpsc::unbounded_channel();
        let (artifacts, reported) = mpsc::unbounded_channel();
        let (provenances, measured) = mpsc::unbounded_channel();
        let work = self.work(
            assignment,
            environment,
            refused,
            control,
            Reporting {
                deliveries: Deliveries(reports),
                artifacts: Artifacts(artifacts),
                provenances: Provenances(provenances),
            },
        );
        // The harness's handles go with it, so the recording ends after the harness.
        let ((outcome, usage, changes), (), (), ()) = tokio::join!(
            work,
            record_deliveries(runs, id, execution, delivered),
            record_artifacts(runs, id, execution, reported),
            record_provenances(runs, id, execution, measured)
        );
        {
            let mut state = self.state();
            if state
                .live
                .get(&id)
                .is_some_and(|l| l.execution == execution)
            {
                state.live.remove(&id);
            }
        }
        // Before the end: a reader of the end finds the changes already recorded.
        if let Some(changes) = changes {
            runs.record_changes(id, execution, changes).await;
        }
        let (outcome, lost) = self.settle(assignment, environment, outcome).await;
        self.record_end(runs, assignment, environment, outcome, usage, lost)
            .await;
        self.release(runs, environment);
    }

    /// Runs the environment's harness, unless the execution was refused; it takes the
    /// execution's handles and drops them when it returns.
    async fn work(
        &self,
        assignment: &Assignment,
        environment: &Environment,
        refused: Option<Outcome>,
        control: mpsc::UnboundedReceiver<Control>,
        reporting: Reporting,
    ) -> (
        Outcome,
        Option<ExecutionUsage>,
        Option<runledger_domain::ExecutionChanges>,
    ) {
        let Reporting {
            deliveries,
            artifacts,
            provenances,
        } = reporting;
        if let Some(outcome) = refused {
            return (outcome, None, None);
        }
        match environment.harness {
            // In-process: no tokens, and no process of its own to measure.
            Harness::Demo => {
                drop((artifacts, provenances));
                let transcripts = &self.supervision.transcripts;
                (
                    demo::run(assignment, transcripts, control, deliveries).await,
                    None,
                    None,
                )
            }
            Harness::Command | Harness::Claude | Harness::Codex | Harness::Gemini => {
                command::run(
                    assignment,
                    &self.supervision,
                    control,
                    deliveries,
                    artifacts,
                    provenances,
                )
                .await
            }
        }
    }

    /// On Slurm, the job's record has the last word on how the execution ended (`srun` exits
    /// 0 after a node failure); then the allocation is given back. Returns the outcome, and
    /// why the execution was lost with its node, if it was.
    async fn settle(
        &self,
        assignment: &Assignment,
        environment: &Environment,
        mut outcome: Outcome,
    ) -> (Outcome, Option<StatusMessage>) {
        let mut lost = None;
        if let Some(allocation) = &assignment.allocation {
            let cluster = &self.supervision.cluster;
            if outcome.is_some() {
                let memory = environment.limits.memory_mb;
                match cluster
                    .verdict(allocation.job_id, memory, slurm::NODE_SETTLE)
                    .await
                {
                    slurm::Verdict::Stands => {}
                    slurm::Verdict::Failed(status) => outcome = Some(Err(status)),
                    slurm::Verdict::Lost(status) => lost = Some(status),
                }
            }
            cluster.release(allocation.job_id).await;
        }
        (outcome, lost)
    }

    /// Records the execution's usage, then its end: finished, or lost with its node (queued
    /// again or failed, as the environment says).
    async fn record_end(
        &self,
        runs: &impl Report,
        assignment: &Assignment,
        environment: &Environment,
        outcome: Outcome,
        usage: Option<ExecutionUsage>,
        lost: Option<StatusMessage>,
    ) {
        let id = assignment.run.id;
        let execution = assignment.execution;
        let outcome = match outcome {
            _ if lost.is_some() => None,
            Some(Ok(())) => Some(Ok(())),
            // However it ended during a shutdown (stopped by it, or killed by a supervisor
            // that signalled the agent's process group too), the shutdown ended it. A run
            // cancelled meanwhile refuses this `Finish` (`StaleExecution`).
            _ if self.state().shutting_down => Some(Err(interrupted_by_shutdown())),
            other => other,
        };
        // Before the end, so the usage is durable when the run's end is; also for a stopped
        // execution (its CPU time and tokens were spent all the same).
        if let Some(usage) = usage {
            runs.record_usage(id, execution, usage).await;
        }
        // `None`: the agent was stopped (the run is already cancelled), or lost.
        if let Some(outcome) = outcome {
            runs.finish(id, execution, outcome).await;
        }
        if let Some(status) = lost {
            let requeue = environment
                .slurm
                .as_ref()
                .is_some_and(runledger_domain::harness::Slurm::requeues_lost);
            tracing::warn!(run_id = %id, execution, requeue, reason = %status.message, "execution lost with its node");
            if requeue {
                runs.lose(id, execution, status).await;
            } else {
                runs.finish(id, execution, Err(status)).await;
            }
        }
    }
}
