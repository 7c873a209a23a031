//! Slurm's record of a job (`scontrol show job -o`) and what it says about how an execution
//! ended (`verdict`): the node lost, a limit Slurm enforced, or nothing beyond what the
//! execution's processes told. Pure: it reads a line and decides; it runs no command.

use runledger_domain::StatusMessage;

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
}
