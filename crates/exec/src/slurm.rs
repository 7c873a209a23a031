//! Execution on a Slurm cluster (`runs_on = "slurm"`): the allocation of each execution, its
//! processes as job steps, stopping them, Slurm's record of how the job ended, and the
//! start-up checks and reconciliation.
//!
//! An execution is one Slurm job: `salloc --no-shell` allocates one task on one node of the
//! environment's partition (with its constraint, account, QOS, GRES, CPUs, memory and a time
//! limit just beyond `max_runtime_secs`), under the name `runledger.<instance>.<run id>`, while
//! the run stays `QUEUED`. Once Slurm grants it, the run starts (its `Started` names the job
//! and the node), and every process of the execution runs as a step of that job: `srun
//! --jobid` wraps the same bubblewrap command a local execution would run, so the step's
//! stdin, stdout and stderr are the process's, forwarded live by Slurm. The agent's variables
//! (its secrets among them) never pass through Slurm: `srun` runs with `--export=NONE`, and
//! the step reads them from a file readable only by the job's user, which the step removes
//! before bubblewrap starts (`StepLauncher`). The server never signals a process on a node:
//! stops go through `scancel`. How the execution ended is read from Slurm's record of the job
//! (`scontrol show job`), never from `srun`'s exit status alone, which is 0 after a node failure
//! (`verdict`). The allocation is released (`scancel`) when the execution ends.
//!
//! Slurm's commands run as the server's user with the server's environment, so `SLURM_CONF`
//! and munge are the host's. Names and texts of Slurm's output parsed here are those of
//! Slurm 22.05 (`docs/slurm.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::process::{INSTANCE_VAR, RUN_VAR};
use super::sandbox::{Bubblewrap, Launcher, Plan};
use runledger_config::Environment;
use runledger_domain::harness::Slurm;
use runledger_domain::{Placement, RunId, StatusMessage};

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
    instance: String,
}

/// A granted allocation: the job and the node its steps run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub job_id: u64,
    pub node: String,
}

impl Allocation {
    pub fn placement(&self) -> Placement {
        Placement::Slurm {
            job_id: self.job_id,
            node: self.node.clone(),
        }
    }
}

/// Why an allocation was not granted.
#[derive(Debug)]
pub enum NotAllocated {
    /// The run was cancelled (or the service is stopping) while Slurm held the job pending;
    /// the job is cancelled.
    Withdrawn,
    /// Slurm refused or failed it; the execution fails with this.
    Refused(StatusMessage),
}

/// What Slurm's record of a job says about how an execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing beyond what the execution's processes told: their outcome stands.
    Stands,
    /// The node was lost (it failed, or the job was preempted): `on_node_failure` decides.
    Lost(StatusMessage),
    /// Slurm ended the job (time limit, memory, an administrator's cancel).
    Failed(StatusMessage),
}

/// The fields of `scontrol show job -o` that decide a verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRecord {
    pub state: String,
    pub reason: String,
    pub nodes: String,
    /// The status of the job's last finished step (`show job -d`), `code:signal`; Slurm
    /// records a step killed for memory with signal 125.
    pub derived_exit_code: String,
}

impl JobRecord {
    /// Reads one line of `scontrol show job -o`: space-separated `Key=Value` pairs (values of
    /// the fields read here have no spaces).
    pub fn parse(line: &str) -> JobRecord {
        let mut record = JobRecord::default();
        for pair in line.split_whitespace() {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            match key {
                "JobState" => record.state = value.to_string(),
                "Reason" => record.reason = value.to_string(),
                "NodeList" => record.nodes = value.to_string(),
                "DerivedExitCode" => record.derived_exit_code = value.to_string(),
                _ => {}
            }
        }
        record
    }
}

/// What Slurm's record of job `job` says of an execution whose processes have ended, for an
/// environment that limits memory to `memory_mb`.
pub fn verdict(job: u64, record: &JobRecord, memory_mb: Option<u64>) -> Verdict {
    let node = if record.nodes.is_empty() || record.nodes == "(null)" {
        "its node".to_string()
    } else {
        format!("node {}", record.nodes)
    };
    let lost = |what: &str| {
        Verdict::Lost(StatusMessage {
            message: format!(
                "{what} while this run was in progress (Slurm job {job}: {} {}); its execution \
                 was lost",
                record.state, record.reason
            ),
            error_code: Some("internal_error".into()),
            retryable: Some(true),
        })
    };
    let failed = |message: String, retryable: bool| {
        Verdict::Failed(StatusMessage {
            message,
            error_code: Some("internal_error".into()),
            retryable: Some(retryable),
        })
    };
    // Slurm's signal for a step its cgroup killed for memory (SIG_OOM & 0x7f); the job itself
    // stays RUNNING, its allocation held.
    let step_oom = record.derived_exit_code.split_once(':').map(|(_, s)| s) == Some("125");
    let out_of_memory = || {
        failed(
            format!(
                "the memory limit ({}) was exceeded: Slurm's cgroup killed the agent on {node} \
                 (job {job})",
                memory_mb.map_or("the job's".to_string(), |mb| format!("memory_mb = {mb}"))
            ),
            false,
        )
    };
    match record.state.as_str() {
        "NODE_FAIL" | "BOOT_FAIL" => lost(&format!("{node} failed")),
        "OUT_OF_MEMORY" => out_of_memory(),
        _ if step_oom => out_of_memory(),
        "PREEMPTED" => lost(&format!("Slurm preempted the job on {node}")),
        "TIMEOUT" | "DEADLINE" => failed(
            format!("Slurm ended job {job} at its time limit ({})", record.state),
            false,
        ),
        "CANCELLED" | "FAILED" => failed(
            format!(
                "Slurm ended job {job} on {node}: {} ({})",
                record.state, record.reason
            ),
            true,
        ),
        _ if record.reason.contains("NodeDown") || record.reason.contains("NodeFail") => {
            lost(&format!("{node} failed"))
        }
        _ => Verdict::Stands,
    }
}

/// The whole `salloc` command line of an execution's allocation, after the program.
pub fn allocation_args(
    name: &str,
    env: &Environment,
    slurm: &Slurm,
    grace: Duration,
) -> Vec<String> {
    let mut args = vec![
        "--no-shell".to_string(),
        format!("--job-name={name}"),
        format!("--partition={}", slurm.partition),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--cpus-per-task={}", cpus(env)),
        format!("--time={}", time_limit_minutes(env.max_runtime_secs, grace)),
    ];
    for (option, value) in [
        ("constraint", &slurm.constraint),
        ("account", &slurm.account),
        ("qos", &slurm.qos),
        ("gres", &slurm.gres),
    ] {
        if let Some(value) = value {
            args.push(format!("--{option}={value}"));
        }
    }
    if let Some(mb) = env.limits.memory_mb {
        args.push(format!("--mem={mb}M"));
    }
    args.extend(slurm.extra_args.iter().cloned());
    args
}

/// The CPUs of an execution: `cpu_percent` rounded up to whole CPUs, one by default.
fn cpus(env: &Environment) -> u64 {
    env.limits.cpu_percent.map_or(1, |p| p.div_ceil(100).max(1))
}

/// Slurm's time limit of an execution, in whole minutes: beyond `max_runtime_secs` and the stop
/// grace, so the server's own limit (which records why) ends the execution first and Slurm's
/// only ends a job the server no longer reads.
fn time_limit_minutes(max_runtime_secs: u64, grace: Duration) -> u64 {
    (max_runtime_secs + grace.as_secs() + 60).div_ceil(60)
}

/// The job id an `salloc` line names, if it is one of the two that do.
fn job_id_of(line: &str) -> Option<u64> {
    ["Pending job allocation ", "Granted job allocation "]
        .iter()
        .find_map(|prefix| line.split_once(prefix))
        .and_then(|(_, rest)| rest.trim().parse().ok())
}

/// A command of Slurm's for run `run`, with the markers that let the server's orphan scan
/// find it if it outlives the server.
fn slurm_command(program: &str, run: RunId, instance: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env(INSTANCE_VAR, instance)
        .env(RUN_VAR, run.to_string());
    cmd.stdin(Stdio::null()).kill_on_drop(false);
    cmd
}

/// Runs one query and returns its stdout, or what went wrong.
async fn query(program: &str, args: &[&str]) -> Result<String, String> {
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
    fn prefix(&self) -> String {
        format!("runledger.{}.", self.instance)
    }

    fn job_name(&self, run: RunId) -> String {
        format!("{}{run}", self.prefix())
    }

    /// Allocates the next execution of `run`: waits while Slurm holds the job pending, and
    /// gives up (cancelling the job) when `withdrawn` completes first.
    pub async fn allocate(
        &self,
        env: &Environment,
        slurm: &Slurm,
        run: RunId,
        grace: Duration,
        withdrawn: impl std::future::Future<Output = ()>,
    ) -> Result<Allocation, NotAllocated> {
        let args = allocation_args(&self.job_name(run), env, slurm, grace);
        let mut cmd = slurm_command("salloc", run, &self.instance);
        cmd.args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let refused = |message: String, retryable: bool| {
            NotAllocated::Refused(StatusMessage {
                message,
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(retryable),
            })
        };
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                return Err(refused(
                    format!("salloc cannot be started on the server: {e}"),
                    true,
                ))
            }
        };
        let pid = child.id();
        let mut lines = child.stderr.take().map(|s| BufReader::new(s).lines());
        let mut job: Option<u64> = None;
        let mut said: Vec<String> = Vec::new();
        let mut granted = false;
        tokio::pin!(withdrawn);
        let read_all = async {
            if let Some(lines) = lines.as_mut() {
                while let Ok(Some(line)) = lines.next_line().await {
                    if job.is_none() {
                        job = job_id_of(&line);
                    }
                    granted |= line.contains("Granted job allocation");
                    if said.len() < 20 {
                        said.push(line);
                    }
                }
            }
        };
        let withdrawn_first = tokio::select! {
            () = read_all => false,
            () = &mut withdrawn => true,
        };
        if withdrawn_first {
            // SIGTERM makes a pending salloc cancel its job; `scancel` covers a job granted
            // just now.
            if let Some(pid) = pid {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
            let _ = child.start_kill();
            if let Some(job) = job {
                self.release(job).await;
            }
            return Err(NotAllocated::Withdrawn);
        }
        let status = child.wait().await;
        let text = said.join("; ");
        match (status, job) {
            (Ok(status), Some(job)) if status.success() && granted => {
                match self.record(job).await {
                    Ok(record) if !record.nodes.is_empty() && record.nodes != "(null)" => {
                        Ok(Allocation {
                            job_id: job,
                            node: record.nodes,
                        })
                    }
                    Ok(record) => {
                        self.release(job).await;
                        Err(refused(
                            format!(
                                "Slurm granted job {job} but names no node for it ({})",
                                record.state
                            ),
                            true,
                        ))
                    }
                    Err(e) => {
                        self.release(job).await;
                        Err(refused(format!("Slurm granted job {job}, but {e}"), true))
                    }
                }
            }
            (status, job) => {
                if let Some(job) = job {
                    self.release(job).await;
                }
                let how = match status {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                // "Job submit/allocate failed" is Slurm refusing the request itself (a
                // constraint no node has, an unknown account): trying again changes nothing,
                // unless the controller could not be reached, which salloc words the same way.
                let unreachable = ["Unable to contact", "timed out", "Connection refused"]
                    .iter()
                    .any(|t| text.contains(t));
                let retryable = unreachable || !text.contains("submit/allocate failed");
                Err(refused(
                    format!("Slurm did not allocate the execution (salloc {how}): {text}"),
                    retryable,
                ))
            }
        }
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

/// Why the host cannot run an environment on Slurm.
#[derive(Debug, thiserror::Error)]
#[error(
    "environment {environment:?} runs on Slurm (runs_on = \"slurm\"), but {problem}. Install \
     slurm-client and munge on the server's host and point it at the cluster (SLURM_CONF), or \
     set runs_on = \"local\" (docs/slurm.md)"
)]
pub struct Unavailable {
    pub environment: String,
    pub problem: String,
}

/// At start-up: every Slurm command the server uses answers, and every partition an environment
/// names exists. Blocking (it runs the commands).
pub fn check(environments: &[Environment]) -> Result<(), Unavailable> {
    let mut checked: Vec<&str> = Vec::new();
    for env in environments {
        let Some(slurm) = &env.slurm else { continue };
        let fail = |problem: String| Unavailable {
            environment: env.id.clone(),
            problem,
        };
        if checked.is_empty() {
            for program in ["salloc", "srun", "scancel", "squeue", "scontrol", "sinfo"] {
                let ran = std::process::Command::new(program)
                    .arg("--version")
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| fail(format!("`{program}` cannot be run: {e}")))?;
                if !ran.status.success() {
                    return Err(fail(format!(
                        "`{program} --version` failed ({})",
                        ran.status
                    )));
                }
            }
        }
        if checked.contains(&slurm.partition.as_str()) {
            continue;
        }
        let out = std::process::Command::new("scontrol")
            .args(["show", "partition", "-o", &slurm.partition])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| fail(format!("`scontrol` cannot be run: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !text.contains(&format!("PartitionName={}", slurm.partition)) {
            return Err(fail(format!(
                "Slurm does not answer for partition {:?}: {}{}",
                slurm.partition,
                String::from_utf8_lossy(&out.stderr).trim(),
                text.trim()
            )));
        }
        checked.push(&slurm.partition);
    }
    Ok(())
}

/// Runs each process of one execution as a step of its job: the execution's bubblewrap
/// command, started on the job's node by `srun`, with the variables of the plan handed over
/// in a file.
pub struct StepLauncher {
    pub bwrap: Arc<Bubblewrap>,
    pub allocation: Allocation,
    /// Where the step files are written: the execution's own directory on the shared
    /// filesystem, private to the server's user (who is the job's user).
    pub files: PathBuf,
    pub cpus: u64,
    /// The markers of the local `srun`, so that the server's stop and orphan scan find it.
    pub markers: BTreeMap<String, String>,
    pub steps: AtomicU32,
}

/// Run by the step on the node: opens the variables file as descriptor 3 for bubblewrap's
/// `--args 3` and the seccomp filter file as descriptor 4 for its `--seccomp 4` (when it has
/// one: an empty name otherwise), removes both, and becomes bubblewrap.
const STEP: &str = r#"exec 3<"$1" || exit 125; if [ -n "$2" ]; then exec 4<"$2" || exit 125; fi; rm -f -- "$1" ${2:+"$2"}; shift 2; exec "$@""#;

impl StepLauncher {
    pub fn new(
        bwrap: Arc<Bubblewrap>,
        allocation: Allocation,
        files: PathBuf,
        env: &Environment,
        markers: BTreeMap<String, String>,
    ) -> StepLauncher {
        StepLauncher {
            bwrap,
            allocation,
            files,
            cpus: cpus(env),
            markers,
            steps: AtomicU32::new(0),
        }
    }

    /// Writes the plan's variables as bubblewrap arguments (`--clearenv`, then `--setenv NAME
    /// VALUE` for each), NUL-separated, into a new file readable only by the server's user.
    fn write_variables(&self, plan: &Plan) -> std::io::Result<PathBuf> {
        use std::io::Write;
        let step = self.steps.fetch_add(1, Ordering::Relaxed);
        let name = format!("step-{step}.args");
        let path = self.files.join(&name);
        let mut bytes: Vec<u8> = b"--clearenv\0".to_vec();
        for (name, value) in &plan.env {
            for part in ["--setenv", name.as_str(), value.as_str()] {
                bytes.extend_from_slice(part.as_bytes());
                bytes.push(0);
            }
        }
        // Beside the files handed to the agent: made new (never through a link), the server's.
        let mut file = super::safe_fs::Dir::open(&self.files)?.create_new(&name, 0o600, None)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        Ok(path)
    }

    /// Writes bubblewrap's seccomp filter for the next step beside its variables, on the
    /// filesystem its node shares (the server's data directory is not there).
    fn write_filter(&self, variables: &Path) -> std::io::Result<Option<PathBuf>> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let Some(bytes) = self.bwrap.filter() else {
            return Ok(None);
        };
        let path = variables.with_extension("bpf");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(Some(path))
    }

    /// Removes what the steps left of their files (a step that never started keeps its own).
    pub fn clean(&self) {
        remove_step_files(&self.files);
    }
}

/// Removes the step files under `files`.
pub fn remove_step_files(files: &Path) {
    let Ok(entries) = std::fs::read_dir(files) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("step-") && (name.ends_with(".args") || name.ends_with(".bpf")) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Launcher for StepLauncher {
    fn command(&self, plan: &Plan) -> Command {
        let mut cmd = Command::new("srun");
        let written = self
            .write_variables(plan)
            .and_then(|variables| Ok((self.write_filter(&variables)?, variables)));
        let (filter, variables) = match written {
            Ok(paths) => paths,
            Err(e) => {
                // The spawn fails with the reason, and the execution with it.
                tracing::error!(error = %e, "cannot write the step's variables");
                let mut failing = Command::new("/bin/sh");
                failing
                    .args(["-c", "echo \"$0\" >&2; exit 125"])
                    .arg(format!(
                        "runledger: cannot write the step's variables in {}: {e}",
                        self.files.display()
                    ));
                return failing;
            }
        };
        cmd.arg(format!("--jobid={}", self.allocation.job_id))
            .args([
                "--nodes=1",
                "--ntasks=1",
                "--overlap",
                "--quiet",
                // Output as the agent writes it, not held until its line ends.
                "--unbuffered",
                "--export=NONE",
            ])
            .arg(format!("--cpus-per-task={}", self.cpus))
            .arg(format!("--chdir={}", plan.cwd.display()))
            .args(["--", "/bin/sh", "-c", STEP, "sh"])
            .arg(&variables)
            .arg(filter.unwrap_or_default())
            .arg(self.bwrap.program())
            .args(["--args", "3"])
            .args(self.bwrap.args(plan));
        // srun itself gets the server's environment (SLURM_CONF, munge) and the markers; none
        // of it reaches the step (`--export=NONE`, and bubblewrap's `--clearenv`).
        cmd.envs(&self.markers);
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: &str, reason: &str) -> JobRecord {
        JobRecord {
            state: state.into(),
            reason: reason.into(),
            nodes: "n2".into(),
            derived_exit_code: "0:0".into(),
        }
    }

    #[test]
    fn a_record_line_is_read_by_its_keys() {
        let line = "JobId=7 JobName=runledger.i.r UserId=root(0) JobState=NODE_FAIL Reason=NodeDown Dependency=(null) Command=(null) WorkDir=/tmp/with space ExitCode=0:0 DerivedExitCode=0:125 NodeList=n2 BatchHost=n2";
        assert_eq!(
            JobRecord::parse(line),
            JobRecord {
                state: "NODE_FAIL".into(),
                reason: "NodeDown".into(),
                nodes: "n2".into(),
                derived_exit_code: "0:125".into(),
            }
        );
    }

    #[test]
    fn a_failed_node_loses_the_execution_whatever_srun_said() {
        for (state, reason) in [
            ("NODE_FAIL", "NodeDown"),
            ("BOOT_FAIL", "None"),
            ("PREEMPTED", "None"),
            ("RUNNING", "NodeDown"),
        ] {
            let v = verdict(7, &record(state, reason), None);
            let Verdict::Lost(status) = v else {
                panic!("{state} {reason}: {v:?}")
            };
            assert_eq!(status.error_code.as_deref(), Some("internal_error"));
            assert_eq!(status.retryable, Some(true));
            assert!(status.message.contains("job 7"), "{}", status.message);
        }
    }

    #[test]
    fn slurm_limits_fail_the_execution_naming_the_limit() {
        let Verdict::Failed(oom) = verdict(7, &record("OUT_OF_MEMORY", "OutOfMemory"), Some(64))
        else {
            panic!("not failed")
        };
        assert!(oom.message.contains("memory_mb = 64"), "{}", oom.message);
        // A step killed for memory leaves the job running, with signal 125 as its last step's.
        let mut step_oom = record("RUNNING", "None");
        step_oom.derived_exit_code = "0:125".into();
        let Verdict::Failed(oom) = verdict(7, &step_oom, Some(64)) else {
            panic!("not failed")
        };
        assert!(oom.message.contains("memory_mb = 64"), "{}", oom.message);
        step_oom.derived_exit_code = "0:9".into();
        assert_eq!(verdict(7, &step_oom, Some(64)), Verdict::Stands);
        let Verdict::Failed(timeout) = verdict(7, &record("TIMEOUT", "TimeLimit"), None) else {
            panic!("not failed")
        };
        assert!(
            timeout.message.contains("time limit"),
            "{}",
            timeout.message
        );
        assert_eq!(
            verdict(7, &record("RUNNING", "None"), None),
            Verdict::Stands
        );
        assert_eq!(
            verdict(7, &record("COMPLETED", "None"), None),
            Verdict::Stands
        );
    }

    #[test]
    fn salloc_lines_name_the_job_pending_or_granted() {
        assert_eq!(job_id_of("salloc: Pending job allocation 7"), Some(7));
        assert_eq!(
            job_id_of("salloc: Granted job allocation 12345"),
            Some(12345)
        );
        assert_eq!(
            job_id_of("salloc: job 7 queued and waiting for resources"),
            None
        );
        assert_eq!(job_id_of("salloc: error: Job submit/allocate failed"), None);
    }

    #[test]
    fn the_allocation_asks_for_the_environment_and_its_limits() {
        let mut env = Environment::demo();
        env.max_runtime_secs = 600;
        env.limits.memory_mb = Some(2048);
        env.limits.cpu_percent = Some(150);
        let slurm = Slurm {
            partition: "agents".into(),
            constraint: Some("zone-a".into()),
            gres: Some("gpu:1".into()),
            extra_args: vec!["--exclusive".into()],
            ..Slurm::default()
        };
        let args = allocation_args("runledger.i.r", &env, &slurm, Duration::from_secs(10));
        assert_eq!(
            args,
            [
                "--no-shell",
                "--job-name=runledger.i.r",
                "--partition=agents",
                "--nodes=1",
                "--ntasks=1",
                "--cpus-per-task=2",
                "--time=12",
                "--constraint=zone-a",
                "--gres=gpu:1",
                "--mem=2048M",
                "--exclusive",
            ]
        );
    }

    #[test]
    fn the_variables_file_holds_them_as_bubblewrap_arguments_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let launcher = StepLauncher::new(
            Arc::new(Bubblewrap::for_tests()),
            Allocation {
                job_id: 7,
                node: "n1".into(),
            },
            dir.path().to_path_buf(),
            &Environment::demo(),
            BTreeMap::new(),
        );
        let plan = Plan {
            program: "agent".into(),
            args: vec![],
            cwd: dir.path().to_path_buf(),
            read_only_workspace: false,
            env: BTreeMap::from([("TOKEN".into(), "s3cr=t\nline".into())]),
            writable: vec![],
            readable: vec![],
            network: true,
            cgroups: vec![],
            user: None,
        };
        let cmd = launcher.command(&plan);
        let argv: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!argv.iter().any(|a| a.contains("s3cr")), "{argv:?}");
        assert!(cmd
            .as_std()
            .get_envs()
            .all(|(_, v)| !v.is_some_and(|v| v.to_string_lossy().contains("s3cr"))));
        let file = dir.path().join("step-0.args");
        assert_eq!(
            std::fs::read(&file).expect("written"),
            b"--clearenv\0--setenv\0TOKEN\0s3cr=t\nline\0"
        );
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        launcher.clean();
        assert!(!file.exists());
    }

    #[test]
    fn a_step_runs_as_the_runs_uid_under_the_seccomp_filter_its_shell_opens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let filter = b"\x20\0\0\0\x04\0\0\0";
        let launcher = StepLauncher::new(
            Arc::new(Bubblewrap::for_tests_with_filter(filter)),
            Allocation {
                job_id: 7,
                node: "n1".into(),
            },
            dir.path().to_path_buf(),
            &Environment::demo(),
            BTreeMap::new(),
        );
        let plan = Plan {
            program: "agent".into(),
            args: vec![],
            cwd: dir.path().to_path_buf(),
            read_only_workspace: false,
            env: BTreeMap::new(),
            writable: vec![],
            readable: vec![],
            network: true,
            cgroups: vec![],
            user: Some(crate::sandbox::AgentUser::of_uid(2_000_000_042)),
        };
        let cmd = launcher.command(&plan);
        let argv: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let text = argv.join(" ");
        assert!(text.contains(" --seccomp 4 "), "{text}");
        assert!(
            text.contains("setpriv --reuid=2000000042 --regid=2000000042 --clear-groups"),
            "{text}"
        );
        let variables = dir.path().join("step-0.args");
        let bpf = dir.path().join("step-0.bpf");
        assert_eq!(std::fs::read(&bpf).expect("written"), filter);
        // The step's shell, as the node runs it: descriptor 3 the variables, 4 the filter,
        // both files gone before bwrap (here a shell that shows them) starts.
        let step = argv
            .iter()
            .position(|a| a == STEP)
            .expect("the step script");
        assert_eq!(argv[step + 2], variables.display().to_string());
        assert_eq!(argv[step + 3], bpf.display().to_string());
        let shown = std::process::Command::new("/bin/sh")
            .args(["-c", STEP, "sh"])
            .args(&argv[step + 2..step + 4])
            .args(["/bin/sh", "-c", "cat <&4; cat <&3"])
            .output()
            .expect("sh");
        assert!(shown.status.success(), "{shown:?}");
        assert_eq!(&shown.stdout[..filter.len()], filter);
        assert!(!variables.exists() && !bpf.exists());
        // Without a filter (an architecture it does not know) the name is empty.
        std::fs::write(&variables, b"v").expect("write");
        let shown = std::process::Command::new("/bin/sh")
            .args(["-c", STEP, "sh"])
            .arg(&variables)
            .arg("")
            .args(["/bin/sh", "-c", "cat <&3"])
            .output()
            .expect("sh");
        assert_eq!(shown.stdout, b"v");
        assert!(!variables.exists());
    }
}
