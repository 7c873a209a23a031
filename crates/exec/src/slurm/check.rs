//! The start-up check of the environments that run on Slurm: every Slurm command the server
//! uses answers, and every partition an environment names exists. It only asks; it changes
//! nothing in the cluster.

use std::process::Stdio;

use runledger_config::Environment;

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
