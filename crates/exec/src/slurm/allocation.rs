//! Allocating an execution on Slurm: the `salloc --no-shell` command line of its job (the
//! environment's partition, constraint, account, QOS, GRES, CPUs, memory and a time limit just
//! beyond `max_runtime_secs`), waiting while the job is pending, withdrawing it, and reading
//! whether Slurm granted it and on which node. The run stays `QUEUED` meanwhile.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use super::cluster::{slurm_command, Cluster};
use runledger_config::Environment;
use runledger_domain::harness::Slurm;
use runledger_domain::{Placement, RunId, StatusMessage};

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
pub(super) fn cpus(env: &Environment) -> u64 {
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

/// An allocation Slurm refused or failed; `retryable` says whether asking again may help.
fn refused(message: String, retryable: bool) -> NotAllocated {
    NotAllocated::Refused(StatusMessage {
        message,
        error_code: Some("environment_setup_failed".into()),
        retryable: Some(retryable),
    })
}

impl Cluster {
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
            self.withdraw(&mut child, pid, job).await;
            return Err(NotAllocated::Withdrawn);
        }
        let status = child.wait().await;
        self.granted(status, job, granted, said.join("; ")).await
    }

    /// Gives up a request the run no longer wants: SIGTERM makes a pending salloc cancel its
    /// job; `scancel` covers a job granted just now.
    async fn withdraw(&self, child: &mut Child, pid: Option<u32>, job: Option<u64>) {
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
    }

    /// What salloc's end says, with what it `said` on stderr: the allocation, on the node
    /// Slurm's record names, or why there is none (a job granted without a node is released).
    async fn granted(
        &self,
        status: std::io::Result<std::process::ExitStatus>,
        job: Option<u64>,
        granted: bool,
        text: String,
    ) -> Result<Allocation, NotAllocated> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
