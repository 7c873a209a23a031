//! The cluster as the server reaches it (`Cluster`): Slurm's commands run with the markers of
//! the run they serve, the job's record and its verdict, stopping a job's steps, releasing a
//! job, and the start-up reconciliation that cancels what an earlier server left. Allocating
//! is `allocation.rs`; running the steps `steps.rs`.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::record::{verdict, JobRecord, Verdict};
use crate::process::{INSTANCE_VAR, RUN_VAR};
use runledger_domain::RunId;

/// How long one query of the controller may take before it counts as unanswered: beyond
/// Slurm's own `MessageTimeout` (10 s by default) so a slow controller is not mistaken for
/// a missing one.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the verdict on an execution waits for Slurm to decide about a node that stopped
/// answering: beyond a usual `SlurmdTimeout` and the controller's ping cycle (the test
/// cluster's timeout is 6 s).
pub const NODE_SETTLE: Duration = Duration::from_secs(60);

/// The cluster, as the server reaches it: the prefix of its jobs' names.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub(super) instance: String,
}

/// A command of Slurm's for run `run`, with the markers that let the server's orphan scan
/// find it if it outlives the server.
pub(super) fn slurm_command(program: &str, run: RunId, instance: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env(INSTANCE_VAR, instance)
        .env(RUN_VAR, run.to_string());
    cmd.stdin(Stdio::null()).kill_on_drop(false);
    cmd
}

/// Runs one query and returns its stdout, or what went wrong.
pub(super) async fn query(program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let shown = format!("{program} {}", args.join(" "));
    let output = match tokio::time::timeout(QUERY_TIMEOUT, cmd.output()).await {
        Err(_) => return Err(format!("`{shown}` did not answer within {QUERY_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(format!("`{shown}` cannot be run: {e}")),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{shown}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Cluster {
    pub fn new(instance: &str) -> Cluster {
        Cluster {
            instance: instance.to_string(),
        }
    }

    /// What the names of this instance's jobs start with.
    pub(super) fn prefix(&self) -> String {
        format!("runledger.{}.", self.instance)
    }

    pub(super) fn job_name(&self, run: RunId) -> String {
        format!("{}{run}", self.prefix())
    }

    /// Slurm's record of job `job`.
    pub async fn record(&self, job: u64) -> Result<JobRecord, String> {
        let id = job.to_string();
        let out = query("scontrol", &["show", "job", "-d", "-o", &id]).await?;
        Ok(JobRecord::parse(out.lines().next().unwrap_or_default()))
    }

    /// How an execution whose processes have ended ended, by Slurm's record of its job. The
    /// record of a job whose node just died can still say `RUNNING` for a moment while the
    /// controller marks the node down: a job whose node does not answer is asked again, for up
    /// to `settle`.
    pub async fn verdict(&self, job: u64, memory_mb: Option<u64>, settle: Duration) -> Verdict {
        let deadline = tokio::time::Instant::now() + settle;
        loop {
            match self.record(job).await {
                Ok(record) => {
                    let verdict = verdict(job, &record, memory_mb);
                    if verdict != Verdict::Stands
                        || tokio::time::Instant::now() >= deadline
                        || !self.node_unresponsive(&record.nodes).await
                    {
                        return verdict;
                    }
                }
                Err(e) => {
                    // A record purged already (a very short MinJobAge) tells nothing more.
                    tracing::warn!(job, error = %e, "cannot read the Slurm job's record");
                    return Verdict::Stands;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Whether Slurm marks `node` as not responding (a `*` state) or down.
    async fn node_unresponsive(&self, node: &str) -> bool {
        if node.is_empty() {
            return false;
        }
        match query("sinfo", &["-h", "-N", "-n", node, "-o", "%T"]).await {
            Ok(out) => out.lines().any(|state| {
                let state = state.trim();
                state.ends_with('*')
                    || state.starts_with("down")
                    || state.contains("not_responding")
            }),
            Err(_) => false,
        }
    }

    /// Stops every step of job `job`: SIGTERM (with SIGCONT) to every process of the job's
    /// steps (Slurm finds them by cgroup, those that left the tree too), SIGKILL to the steps
    /// left after `grace`; returns once no step is left, or soon after the SIGKILL. (`scancel
    /// --signal=KILL` of the whole job waits for Slurm's `KillWait`; a step's own `scancel`
    /// kills at once.)
    pub async fn stop_steps(&self, job: u64, grace: Duration) {
        let id = job.to_string();
        for signal in ["TERM", "CONT"] {
            if let Err(e) = query("scancel", &[&format!("--signal={signal}"), &id]).await {
                tracing::debug!(job, error = %e, "scancel --signal");
            }
        }
        let left = self.steps_left(job, grace).await;
        if left.is_empty() {
            return;
        }
        for step in &left {
            if let Err(e) = query("scancel", &["--signal=KILL", step]).await {
                tracing::warn!(job, step, error = %e, "cannot kill the job's step");
            }
        }
        self.steps_left(job, Duration::from_secs(10)).await;
    }

    /// Waits up to `limit` until job `job` has no step left; the steps left then (`J.S`).
    async fn steps_left(&self, job: u64, limit: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + limit;
        let id = job.to_string();
        loop {
            let steps: Vec<String> =
                match query("squeue", &["-h", "-s", "-j", &id, "-o", "%i"]).await {
                    Ok(out) => out.split_whitespace().map(str::to_string).collect(),
                    // A job that is gone has no steps either.
                    Err(_) => Vec::new(),
                };
            if steps.is_empty() || tokio::time::Instant::now() >= deadline {
                return steps;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ends job `job` and gives its resources back.
    pub async fn release(&self, job: u64) {
        if let Err(e) = query("scancel", &[&job.to_string()]).await {
            tracing::warn!(job, error = %e, "cannot cancel the Slurm job");
        }
    }

    /// The jobs of this instance that Slurm still holds (pending, running or completing).
    async fn ours(&self) -> Result<Vec<(u64, String)>, String> {
        let out = query("squeue", &["-h", "-o", "%i|%j|%T"]).await?;
        let prefix = self.prefix();
        Ok(out
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('|');
                let id = fields.next()?.trim().parse().ok()?;
                let name = fields.next()?;
                let state = fields.next()?.trim();
                name.starts_with(&prefix).then(|| (id, state.to_string()))
            })
            .filter(|(_, state)| state != "COMPLETED" && state != "CANCELLED")
            .collect())
    }

    /// At start-up, before any execution: cancels every job an earlier server of this data
    /// directory left in Slurm (nothing reads them any more; their runs are failed or queued
    /// again by `Runs::fail_lost_executions`), and waits until Slurm has ended them, so that no
    /// agent of an earlier execution works on beside the next one. Returns how many it
    /// cancelled.
    pub async fn reconcile(&self, limit: Duration) -> Result<usize, String> {
        let left = self.ours().await?;
        for (job, _) in &left {
            self.release(*job).await;
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let still = self.ours().await?;
            if still.is_empty() {
                return Ok(left.len());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "Slurm still holds {} job(s) of an earlier server of this data directory \
                     {:?} after they were cancelled",
                    still.len(),
                    still
                        .iter()
                        .map(|(j, s)| format!("{j} {s}"))
                        .collect::<Vec<_>>()
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
