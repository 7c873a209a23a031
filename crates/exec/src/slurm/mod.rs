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
//!
//! `allocation.rs` asks for a job and waits for it, `cluster.rs` runs Slurm's other commands
//! (records, stops, releases, the start-up reconciliation), `record.rs` reads a job's record
//! into a verdict, `steps.rs` runs processes as steps, `check.rs` is the start-up check. This
//! file is their table of contents.

mod allocation;
mod check;
mod cluster;
mod record;
mod steps;

pub use allocation::{allocation_args, Allocation, NotAllocated};
pub use check::{check, Unavailable};
pub use cluster::{Cluster, NODE_SETTLE};
pub use record::{verdict, JobRecord, Verdict};
pub use steps::{remove_step_files, StepLauncher};
