//! Each process of an execution on Slurm as a step of its job (`StepLauncher`): `srun --jobid`
//! wrapping the same bubblewrap command a local execution runs, with the variables handed over
//! in a file only the job's user reads, removed by the step before bubblewrap starts. The
//! server never signals a process on a node; stops go through `Cluster::stop_steps`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::process::Command;

use super::allocation::{cpus, Allocation};
use crate::sandbox::{Bubblewrap, Launcher, Plan};
use runledger_config::Environment;

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
        let mut file = crate::safe_fs::Dir::open(&self.files)?.create_new(&name, 0o600, None)?;
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
