//! The launcher seam: turns an execution's plan (argv, environment, the paths it may use, its
//! network) into a process that the command harness then supervises.
//!
//! Two launchers exist. `Bubblewrap` starts every process inside bubblewrap: the host read-only,
//! the data directory, every workspace root, the configuration file and the secret files hidden
//! under empty mounts, the execution's own paths bound back in, a private `/tmp`, its own PID,
//! IPC and UTS namespaces, and an empty network namespace when the environment has
//! `network = false`. `Unconfined` starts the process as it is (`sandbox = "none"`). Both run
//! the process as the plan's user: when the server is root, a uid of the run's own from
//! `server.agent_uids` (or the one `agent_user`), so no agent holds more privilege than the
//! server and none can reach another run's processes or files. Neither decides what an agent
//! may see: the plan says that, and a container or remote backend would be one more
//! implementation of `Launcher`.
//!
//! This module only builds commands and checks the host at start-up; it never waits for or
//! signals a process (that is `command/` and `process.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::process::Command;

pub use super::agents::AgentUser;
use super::agents::Agents;
use super::safe_fs::{self, Owner};
use runledger_config::Config;
use runledger_domain::harness::Sandbox;

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
fn build(argv: Vec<std::ffi::OsString>, plan: &Plan) -> Command {
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

/// `sandbox = "bwrap"`.
pub struct Bubblewrap {
    program: PathBuf,
    /// Directories and files hidden under empty mounts, whatever the host's permissions.
    hidden: Vec<PathBuf>,
    /// The seccomp filter that refuses nested user namespaces (`seccomp.rs`), which bwrap
    /// reads from descriptor `FILTER_FD`; `None` on an architecture it does not know.
    filter: Option<Arc<[u8]>>,
    /// Where the filter is kept for this host's launches (in the data directory); each
    /// launcher on another host (a Slurm node) writes its own copy where that host reads it.
    filter_file: Option<PathBuf>,
}

/// The descriptor bwrap reads the seccomp filter from (`--seccomp`): the one after `--args`'s.
pub const FILTER_FD: &str = "4";

/// Opens the filter file named first as `FILTER_FD`, then execs the rest (bwrap).
const OPEN_FILTER: &str = r#"exec 4<"$1" || exit 125; shift; exec "$@""#;

impl Bubblewrap {
    /// The bwrap program found at start-up (the same path is expected on Slurm nodes).
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// A bwrap at its usual path that hides nothing and keeps the user: for tests of what
    /// wraps it.
    #[cfg(test)]
    pub fn for_tests() -> Bubblewrap {
        Bubblewrap {
            program: PathBuf::from("/usr/bin/bwrap"),
            hidden: Vec::new(),
            filter: None,
            filter_file: None,
        }
    }

    /// `for_tests` with a seccomp filter of `bytes`.
    #[cfg(test)]
    pub fn for_tests_with_filter(bytes: &[u8]) -> Bubblewrap {
        Bubblewrap {
            filter: Some(Arc::from(bytes)),
            ..Bubblewrap::for_tests()
        }
    }

    /// The seccomp filter's bytes, for a launcher that writes them where its host reads them.
    pub fn filter(&self) -> Option<&[u8]> {
        self.filter.as_deref()
    }

    /// bwrap's arguments for `plan`, after the program.
    pub fn args(&self, plan: &Plan) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut push = |parts: &[&std::ffi::OsStr]| {
            args.extend(parts.iter().map(|p| p.to_os_string()));
        };
        push(&[
            "--ro-bind".as_ref(),
            "/".as_ref(),
            "/".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            // Writable by the agent user, as a /tmp is.
            "--perms".as_ref(),
            "1777".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
        ]);
        self.mounts(plan, &mut push);
        // No user namespace when root: the agent then runs as a real unprivileged user (below),
        // which needs no user namespaces from the host. A non-root server's bwrap makes one.
        push(&[
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
            "--unshare-uts".as_ref(),
            "--unshare-cgroup-try".as_ref(),
            // No controlling terminal to push input into (TIOCSTI).
            "--new-session".as_ref(),
        ]);
        if self.filter.is_some() {
            push(&["--seccomp".as_ref(), FILTER_FD.as_ref()]);
        }
        if !plan.network {
            push(&["--unshare-net".as_ref()]);
        }
        push(&["--chdir".as_ref(), plan.cwd.as_os_str(), "--".as_ref()]);
        if let Some(user) = &plan.user {
            // bwrap run by root keeps root's capabilities for the process it starts; setpriv
            // changes to the agent user (which clears them), drops the rest from the inheritable
            // and bounding sets, and sets no_new_privs so no setuid program gives them back.
            let (uid, gid) = (
                format!("--reuid={}", user.uid),
                format!("--regid={}", user.gid),
            );
            push(&[
                "setpriv".as_ref(),
                uid.as_ref(),
                gid.as_ref(),
                "--clear-groups".as_ref(),
                "--inh-caps=-all".as_ref(),
                "--bounding-set=-all".as_ref(),
                "--no-new-privs".as_ref(),
                "--".as_ref(),
            ]);
        }
        push(&[plan.program.as_ref()]);
        args.extend(plan.args.iter().map(Into::into));
        args
    }

    /// The mounts of an execution, each at the path the agent knows it by: closed host
    /// directories replaced by passable empty ones, hidden paths covered, the workspace and
    /// writable paths bound read-write, the readable ones read-only.
    fn mounts(&self, plan: &Plan, push: &mut impl FnMut(&[&std::ffi::OsStr])) {
        // Every mount below is made at the path the agent knows it by. Its missing parents are
        // made first, passable (not listable) by the agent user: bwrap would make them private
        // to root. Host directories on the way that the agent user cannot pass through (a
        // private home such as /root holding the data directory) are replaced by empty ones
        // it can: what they held was closed to the agent user anyway.
        let own = std::iter::once(&plan.cwd)
            .chain(&plan.writable)
            .chain(&plan.readable);
        let opaque = match &plan.user {
            Some(user) => closed_ancestors(own.clone(), &self.hidden, user),
            None => Vec::new(),
        };
        let mut layout = Layout {
            areas: vec![PathBuf::from("/tmp")],
            made: Vec::new(),
        };
        for dir in &opaque {
            layout.parents(dir, push);
            push(&[
                "--perms".as_ref(),
                "0711".as_ref(),
                "--tmpfs".as_ref(),
                dir.as_os_str(),
            ]);
            layout.areas.push(dir.clone());
        }
        for path in &self.hidden {
            // Checked now rather than at start-up: a workspace root appears with its first run.
            match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => {
                    layout.parents(path, push);
                    push(&["--tmpfs".as_ref(), path.as_os_str()]);
                    layout.areas.push(path.clone());
                }
                Ok(_) => {
                    layout.parents(path, push);
                    push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), path.as_os_str()]);
                }
                Err(_) => {}
            }
        }
        layout.parents(&plan.cwd, push);
        let workspace = if plan.read_only_workspace {
            "--ro-bind"
        } else {
            "--bind"
        };
        push(&[
            workspace.as_ref(),
            plan.cwd.as_os_str(),
            plan.cwd.as_os_str(),
        ]);
        for path in &plan.writable {
            layout.parents(path, push);
            push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        for path in &plan.readable {
            layout.parents(path, push);
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
}

/// The directories the sandbox makes itself (empty mounts, and `/tmp`), and the parents of
/// mount points made in them so far.
struct Layout {
    areas: Vec<PathBuf>,
    made: Vec<PathBuf>,
}

impl Layout {
    /// Makes the missing parents of `path` that lie inside a directory of the sandbox's own,
    /// outermost first, passable by the agent user.
    fn parents(&mut self, path: &Path, push: &mut impl FnMut(&[&std::ffi::OsStr])) {
        let mut missing: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .filter(|p| {
                self.areas
                    .iter()
                    .any(|a| p.starts_with(a) && *p != a.as_path())
                    && !self.made.iter().any(|m| m == p)
            })
            .collect();
        missing.reverse();
        for parent in missing {
            push(&[
                "--perms".as_ref(),
                "0711".as_ref(),
                "--dir".as_ref(),
                parent.as_os_str(),
            ]);
            self.made.push(parent.to_path_buf());
        }
    }
}

/// The outermost host directories on the way to `paths` that `user` cannot pass through, leaving
/// out those inside `/tmp` or a hidden directory (the sandbox makes those itself).
fn closed_ancestors<'a>(
    paths: impl Iterator<Item = &'a PathBuf>,
    hidden: &[PathBuf],
    user: &AgentUser,
) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let passable = |m: &std::fs::Metadata| {
        let mode = m.mode();
        mode & 0o001 != 0
            || (m.uid() == user.uid && mode & 0o100 != 0)
            || (m.gid() == user.gid && mode & 0o010 != 0)
    };
    let mut closed: Vec<PathBuf> = Vec::new();
    for path in paths {
        let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
        ancestors.reverse();
        for dir in ancestors {
            if dir.starts_with("/tmp") || hidden.iter().any(|h| dir.starts_with(h)) {
                break;
            }
            if std::fs::metadata(dir).is_ok_and(|m| !passable(&m)) {
                closed.push(dir.to_path_buf());
                break;
            }
        }
    }
    closed.sort();
    closed.dedup();
    // One inside another is replaced with it.
    let mut outermost: Vec<PathBuf> = Vec::new();
    for dir in closed {
        if !outermost.iter().any(|o| dir.starts_with(o)) {
            outermost.push(dir);
        }
    }
    outermost
}

impl Bubblewrap {
    /// The whole argv of `plan` on this host: bwrap, behind the shell that opens its filter.
    fn argv(&self, plan: &Plan) -> Vec<std::ffi::OsString> {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let (Some(_), Some(file)) = (&self.filter, &self.filter_file) {
            argv.extend(["/bin/sh", "-c", OPEN_FILTER, "sh"].map(Into::into));
            argv.push(file.clone().into_os_string());
        }
        argv.push(self.program.clone().into_os_string());
        argv.extend(self.args(plan));
        argv
    }
}

impl Launcher for Bubblewrap {
    fn command(&self, plan: &Plan) -> Command {
        build(self.argv(plan), plan)
    }
}

/// The launchers of the configured environments, and who agents run as.
#[derive(Clone)]
pub struct Sandboxes {
    bwrap: Option<Arc<Bubblewrap>>,
    /// The same bubblewrap for Slurm's nodes: it hides only the Slurm environments'
    /// workspace roots, the shared filesystem every node has. The server's own paths (its data
    /// directory, configuration and secret files) are not on the nodes, and bubblewrap cannot
    /// mount over a path that is not there (`docs/slurm.md`).
    node_bwrap: Option<Arc<Bubblewrap>>,
    unconfined: Arc<Unconfined>,
    agents: Agents,
    /// The user of the run this handle was made for (`for_run`): whom its files are handed to
    /// and its processes run as. `None` for the server-wide handle and for a server that is
    /// not root.
    user: Option<AgentUser>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Who agents would run as is not there (`agents.rs` says what).
    #[error("{0}")]
    User(String),
    #[error(
        "environment {environment:?} runs its agents in a bubblewrap sandbox (the default), but \
         {problem}. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) on a host that \
         allows it to create namespaces, or set sandbox = \"none\" in that environment to run \
         its agents unconfined"
    )]
    Bwrap {
        environment: String,
        problem: String,
    },
}

impl Sandboxes {
    /// Resolves who agents run as and, when an environment asks for bubblewrap, checks that it
    /// can create the sandbox it will be asked for, so that a host without it stops start-up
    /// rather than failing every run. Blocking: it runs bwrap once.
    pub fn prepare(config: &Config) -> Result<Sandboxes, Error> {
        let agents = Agents::resolve(config).map_err(Error::User)?;
        // The sandbox is tried as an agent would get it: as the first uid of the range.
        let probe_user = agents.probe_user();
        let unconfined = Arc::new(Unconfined);
        let first_bwrap = config
            .environments
            .iter()
            .find(|e| e.sandbox == Some(Sandbox::Bwrap));
        let bwrap = match first_bwrap {
            None => None,
            Some(env) => {
                let filter = super::seccomp::nested_userns_filter().map(Arc::<[u8]>::from);
                let filter_file = match &filter {
                    Some(bytes) => {
                        Some(
                            write_filter(&config.data_dir, bytes).map_err(|e| Error::Bwrap {
                                environment: env.id.clone(),
                                problem: format!(
                                "its seccomp filter cannot be written in the data directory: {e}"
                            ),
                            })?,
                        )
                    }
                    None => {
                        tracing::warn!(
                            "no seccomp filter for this architecture: sandboxed agents can \
                             create user namespaces of their own (docs/security.md)"
                        );
                        None
                    }
                };
                let bwrap = Bubblewrap {
                    program: super::process::find_program("bwrap").ok_or_else(|| Error::Bwrap {
                        environment: env.id.clone(),
                        problem: "no bwrap program is on the server's PATH".into(),
                    })?,
                    hidden: hidden_paths(config),
                    filter,
                    filter_file,
                };
                // A network namespace is only asked of the host when an environment needs one.
                let offline = config
                    .environments
                    .iter()
                    .any(|e| e.sandbox == Some(Sandbox::Bwrap) && !e.network);
                probe(&bwrap, !offline, probe_user).map_err(|problem| Error::Bwrap {
                    environment: env.id.clone(),
                    problem,
                })?;
                Some(Arc::new(bwrap))
            }
        };
        for env in &config.environments {
            if env.sandbox == Some(Sandbox::None) {
                tracing::warn!(
                    environment = %env.id,
                    "sandbox = \"none\": this environment's agents run unconfined and can read \
                     what their user can read on the host, the data directory included where \
                     permissions allow (docs/security.md)"
                );
            }
        }
        let node_bwrap = bwrap.as_ref().map(|b| {
            let mut roots: Vec<PathBuf> = config
                .environments
                .iter()
                .filter(|e| e.slurm.is_some())
                .filter_map(|e| e.workspace_root.clone())
                .collect();
            roots.sort();
            roots.dedup();
            Arc::new(Bubblewrap {
                program: b.program.clone(),
                hidden: roots,
                filter: b.filter.clone(),
                filter_file: None,
            })
        });
        let user = agents.shared_user();
        Ok(Sandboxes {
            bwrap,
            node_bwrap,
            unconfined,
            agents,
            user,
        })
    }

    /// Where the uids of runs are recorded, once the store is open: needed before any run
    /// starts when each run gets a uid of its own.
    pub fn with_store(mut self, store: runledger_store::Store) -> Sandboxes {
        self.agents.record_in(store);
        self
    }

    /// Without any sandbox or user change: for tests of the harness that need neither.
    pub fn unconfined() -> Sandboxes {
        Sandboxes {
            bwrap: None,
            node_bwrap: None,
            unconfined: Arc::new(Unconfined),
            agents: Agents::server(),
            user: None,
        }
    }

    /// The handle of one run: its files are handed to, and its processes run as, the run's
    /// user. A run's first execution takes a uid of the range and records it durably before
    /// anything of the run is made; every later one (after a restart too) finds it again.
    /// `Err` says why the run cannot have one (the range is used up, the store failed).
    pub async fn for_run(&self, run: runledger_domain::RunId) -> Result<Sandboxes, String> {
        Ok(Sandboxes {
            user: self.agents.user_of(run).await?,
            ..self.clone()
        })
    }

    /// Whether agents run as a user other than the server's, so that what they must reach in
    /// the data directory has to be traversable by others.
    pub fn agents_of_another_user(&self) -> bool {
        !self.agents.are_the_servers()
    }

    /// The bubblewrap of Slurm's job steps (`node_bwrap`), when an environment asked for
    /// bubblewrap at start-up.
    pub fn node_bubblewrap(&self) -> Option<&Arc<Bubblewrap>> {
        self.node_bwrap.as_ref()
    }

    /// The launcher of an environment's processes; `None` if its sandbox was not prepared.
    pub fn launcher(&self, sandbox: Option<Sandbox>) -> Option<&dyn Launcher> {
        match sandbox {
            Some(Sandbox::Bwrap) => self.bwrap.as_deref().map(|b| b as &dyn Launcher),
            Some(Sandbox::None) | None => Some(self.unconfined.as_ref()),
        }
    }

    /// The user agents run as, when it is not the server's.
    pub fn agent_user(&self) -> Option<&AgentUser> {
        self.user.as_ref()
    }

    /// The name agents see in `USER`.
    pub fn user_name(&self) -> String {
        match &self.user {
            Some(user) => user.name.clone(),
            None => nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .or_else(|| std::env::var("USER").ok())
                .unwrap_or_default(),
        }
    }

    /// The owner what the server prepares for agents is given to (`safe_fs`); `None` when
    /// agents run as the server's user.
    pub fn owner(&self) -> Option<Owner> {
        self.user.as_ref().map(|user| Owner {
            uid: user.uid,
            gid: user.gid,
        })
    }

    /// Makes the whole tree at `root` (a directory in one only the server can write) the agent
    /// user's, walked by descriptors without following a link (`safe_fs::Dir::hand_over_tree`).
    /// Nothing to do when agents run as the server's user.
    pub fn hand_over_tree(&self, root: &Path) -> Result<(), safe_fs::Error> {
        safe_fs::Dir::open(root)?.hand_over_tree(self.owner())
    }
}

/// What no agent may see: the data directory (the store, the secrets that sign links, every
/// run's transcript, workspace and MCP file), every workspace root, the configuration file (every
/// environment's `env`), the secret files, and, for a server that is not root (whose agents run
/// as its own user), the server user's home.
fn hidden_paths(config: &Config) -> Vec<PathBuf> {
    let mut hidden = vec![config.data_dir.clone()];
    hidden.extend(
        config
            .environments
            .iter()
            .filter_map(|e| e.workspace_root.clone()),
    );
    hidden.extend(config.file.clone());
    hidden.extend(config.secrets.values().filter_map(|s| s.file.clone()));
    if !nix::unistd::geteuid().is_root() {
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            if home.is_absolute() && home.parent().is_some() {
                hidden.push(home);
            }
        }
    }
    hidden.sort();
    hidden.dedup();
    // A path inside another hidden directory is hidden with it.
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in hidden {
        if !kept.iter().any(|k| path.starts_with(k)) {
            kept.push(path);
        }
    }
    kept
}

/// Writes the seccomp filter where this host's launches open it: `sandbox/nested-userns.bpf`
/// in the data directory (which agents never see), replaced whole at every start.
fn write_filter(data_dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = data_dir.join("sandbox");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("nested-userns.bpf");
    let partial = dir.join("nested-userns.bpf.partial");
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}

/// Runs `true` in the sandbox an agent would get (as `user`; without network unless
/// `network`).
fn probe(bwrap: &Bubblewrap, network: bool, user: Option<AgentUser>) -> Result<(), String> {
    let plan = Plan {
        program: "true".into(),
        args: Vec::new(),
        cwd: PathBuf::from("/"),
        read_only_workspace: false,
        env: BTreeMap::from([("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())]),
        writable: Vec::new(),
        readable: Vec::new(),
        network,
        cgroups: Vec::new(),
        user,
    };
    let mut argv = bwrap.argv(&plan).into_iter();
    let output = std::process::Command::new(argv.next().unwrap_or_default())
        .args(argv)
        .env_clear()
        .envs(&plan.env)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot be started: {e}", bwrap.program.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "{} cannot create a sandbox here ({}): {}",
        bwrap.program.display(),
        output.status,
        stderr.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(network: bool) -> Plan {
        Plan {
            program: "agent".into(),
            args: vec!["--x".into()],
            cwd: PathBuf::from("/data/workspaces/r1"),
            read_only_workspace: false,
            env: BTreeMap::new(),
            writable: vec![PathBuf::from("/data/agent-files/r1/home")],
            readable: vec![PathBuf::from("/data/agent-files/r1/mcp.json")],
            network,
            cgroups: Vec::new(),
            user: Some(AgentUser {
                name: "nobody".into(),
                uid: 65534,
                gid: 65534,
            }),
        }
    }

    fn text(args: Vec<std::ffi::OsString>) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn bwrap_hides_before_it_binds_and_drops_to_the_agent_user_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("key");
        std::fs::write(&secret, "s").expect("write");
        let b = Bubblewrap {
            program: PathBuf::from("/usr/bin/bwrap"),
            hidden: vec![
                dir.path().to_path_buf(),
                secret.clone(),
                "/nonexistent".into(),
            ],
            filter: Some(Arc::from(&[0u8; 8][..])),
            filter_file: Some(PathBuf::from("/data/sandbox/nested-userns.bpf")),
        };
        let args = text(b.args(&plan(false)));
        let hide = format!("--tmpfs {}", dir.path().display());
        let bind = "--bind /data/workspaces/r1 /data/workspaces/r1";
        assert!(args.starts_with("--ro-bind / / --dev /dev --proc /proc --perms 1777 --tmpfs /tmp"));
        assert!(args.find(&hide) < args.find(bind), "{args}");
        assert!(args.contains(&format!("--ro-bind /dev/null {}", secret.display())));
        assert!(!args.contains("absent"), "{args}");
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--new-session --seccomp 4 "), "{args}");
        assert!(args.ends_with(
            "--chdir /data/workspaces/r1 -- setpriv --reuid=65534 --regid=65534 --clear-groups \
             --inh-caps=-all --bounding-set=-all --no-new-privs -- agent --x"
        ));
        assert!(!text(b.args(&plan(true))).contains("--unshare-net"));
    }

    #[test]
    fn a_read_only_workspace_is_bound_read_only_and_the_home_stays_writable() {
        let b = Bubblewrap::for_tests();
        let read_only = Plan {
            read_only_workspace: true,
            ..plan(true)
        };
        let args = text(b.args(&read_only));
        assert!(
            args.contains("--ro-bind /data/workspaces/r1 /data/workspaces/r1"),
            "{args}"
        );
        assert!(!args.contains("--bind /data/workspaces/r1 "), "{args}");
        assert!(
            args.contains("--bind /data/agent-files/r1/home /data/agent-files/r1/home"),
            "{args}"
        );
        let edit = text(b.args(&plan(true)));
        assert!(edit.contains("--bind /data/workspaces/r1 /data/workspaces/r1"));
        assert!(!edit.contains("--ro-bind /data/workspaces/r1"), "{edit}");
    }
}
