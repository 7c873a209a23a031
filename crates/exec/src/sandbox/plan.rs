//! The launcher seam: what one process of an execution needs (`Plan`), what starts it
//! (`Launcher`), and the unconfined launcher (`sandbox = "none"`), with what every launcher
//! shares: dropping to the agent user and entering the execution's cgroups first. It builds
//! commands; it never spawns, waits for or signals one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tokio::process::Command;

use crate::agents::AgentUser;

/// What one process of an execution needs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub program: String,
    pub args: Vec<String>,
    /// The workspace: the working directory, writable unless `read_only_workspace`.
    pub cwd: PathBuf,
    /// The workspace is mounted read-only (a read-only preset run's agent): the kernel, not the
    /// CLI, refuses its writes there. Only bubblewrap can honour it.
    pub read_only_workspace: bool,
    /// The complete environment; nothing of the server's is added.
    pub env: BTreeMap<String, String>,
    /// Further paths the process may write (its `HOME`).
    pub writable: Vec<PathBuf>,
    /// Paths it may read (its MCP file).
    pub readable: Vec<PathBuf>,
    pub network: bool,
    /// The `cgroup.procs` files of the execution's cgroups, entered before anything runs.
    pub cgroups: Vec<PathBuf>,
    /// Who the process runs as; `None`: the server's own user (a server that is not root).
    pub user: Option<AgentUser>,
}

/// Starts the processes of an execution.
pub trait Launcher: Send + Sync {
    /// The command that runs `plan`, with stdio and the process group left to the caller.
    fn command(&self, plan: &Plan) -> Command;
}

/// `sandbox = "none"`: the process sees what its user sees on the host.
pub struct Unconfined;

impl Launcher for Unconfined {
    fn command(&self, plan: &Plan) -> Command {
        let mut argv = drop_privileges(plan.user.as_ref());
        argv.push(plan.program.clone().into());
        argv.extend(plan.args.iter().map(Into::into));
        build(argv, plan)
    }
}

/// The argv prefix that runs the rest as the agent user: a real unprivileged user, with no
/// capabilities left in any set and no_new_privs, so no setuid program gives them back.
fn drop_privileges(user: Option<&AgentUser>) -> Vec<std::ffi::OsString> {
    let Some(user) = user else {
        return Vec::new();
    };
    [
        "setpriv".to_string(),
        format!("--reuid={}", user.uid),
        format!("--regid={}", user.gid),
        "--clear-groups".into(),
        "--inh-caps=-all".into(),
        "--bounding-set=-all".into(),
        "--no-new-privs".into(),
        "--".into(),
    ]
    .into_iter()
    .map(Into::into)
    .collect()
}

/// Enters the execution's cgroups, then execs the rest: a shell that writes its own pid to each
/// `cgroup.procs` and then becomes the launcher, so no process of the execution ever runs
/// outside them (placing a child after it started would race with its first forks).
const ENTER_CGROUPS: &str =
    r#"for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; exec "$@""#;

/// The command for a launcher's argv: the environment cleared and set to the plan's, in the
/// workspace, inside the execution's cgroups.
pub(super) fn build(argv: Vec<std::ffi::OsString>, plan: &Plan) -> Command {
    let mut argv = argv.into_iter();
    let program = argv.next().unwrap_or_default();
    let mut cmd = if plan.cgroups.is_empty() {
        let mut cmd = Command::new(program);
        cmd.args(argv);
        cmd
    } else {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", ENTER_CGROUPS, "sh"])
            .args(&plan.cgroups)
            .arg("--")
            .arg(program)
            .args(argv);
        cmd
    };
    cmd.current_dir(&plan.cwd).env_clear().envs(&plan.env);
    cmd
}
