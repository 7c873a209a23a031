//! The launcher seam: turns an execution's plan (argv, environment, the paths it may use, its
//! network) into a process that the command harness then supervises.
//!
//! Two launchers exist. `Bubblewrap` starts every process inside bubblewrap: the host read-only,
//! the data directory, every workspace root, the configuration file and the secret files hidden
//! under empty mounts, the execution's own paths bound back in, a private `/tmp`, its own PID,
//! IPC and UTS namespaces, and an empty network namespace when the environment has
//! `network = false`. `Unconfined` starts the process as it is (`sandbox = "none"`). Both run
//! agents as `agent_user` when the server is root, so no agent holds more privilege than the
//! server. Neither decides what an agent may see: the plan says that, and a container or remote
//! backend would be one more implementation of `Launcher`.
//!
//! This module only builds commands and checks the host at start-up; it never waits for or
//! signals a process (that is `command.rs` and `process.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::process::Command;

use super::safe_fs::{self, Owner};
use crate::config::Config;
use crate::harness::Sandbox;

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
}

/// The unprivileged user agents run as when the server is root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Starts the processes of an execution.
pub trait Launcher: Send + Sync {
    /// The command that runs `plan`, with stdio and the process group left to the caller.
    fn command(&self, plan: &Plan) -> Command;
}

/// `sandbox = "none"`: the process sees what its user sees on the host.
pub struct Unconfined {
    user: Option<AgentUser>,
}

impl Launcher for Unconfined {
    fn command(&self, plan: &Plan) -> Command {
        let mut argv = drop_privileges(self.user.as_ref());
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
    user: Option<AgentUser>,
}

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
            user: None,
        }
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
        if !plan.network {
            push(&["--unshare-net".as_ref()]);
        }
        push(&["--chdir".as_ref(), plan.cwd.as_os_str(), "--".as_ref()]);
        if let Some(user) = &self.user {
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
        let opaque = match &self.user {
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

impl Launcher for Bubblewrap {
    fn command(&self, plan: &Plan) -> Command {
        let mut argv = vec![self.program.clone().into_os_string()];
        argv.extend(self.args(plan));
        build(argv, plan)
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
    user: Option<AgentUser>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("server.agent_user: {0}")]
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
    /// Resolves the agent user and, when an environment asks for bubblewrap, checks that it can
    /// create the sandbox it will be asked for, so that a host without it stops start-up rather
    /// than failing every run. Blocking: it runs bwrap once.
    pub fn prepare(config: &Config) -> Result<Sandboxes, Error> {
        // Only environments that start processes need a user to run them as: the embedded
        // defaults (the in-process demo) start on a host without one.
        let starts_processes = config.environments.iter().any(|e| e.sandbox.is_some());
        let user = if starts_processes && nix::unistd::geteuid().is_root() {
            let name = &config.agent_user;
            let found = nix::unistd::User::from_name(name)
                .map_err(|e| Error::User(format!("cannot look up user {name:?}: {e}")))?
                .ok_or_else(|| {
                    Error::User(format!(
                        "the server runs as root and runs agents as {name:?}, which does not \
                         exist; create it or name another unprivileged user"
                    ))
                })?;
            if found.uid.is_root() {
                return Err(Error::User(format!(
                    "{name:?} is root; agents must run as an unprivileged user"
                )));
            }
            if find_program("setpriv").is_none() {
                return Err(Error::User(format!(
                    "the server runs as root and drops agents to {name:?} with setpriv, which is \
                     not on its PATH; install util-linux"
                )));
            }
            Some(AgentUser {
                name: name.clone(),
                uid: found.uid.as_raw(),
                gid: found.gid.as_raw(),
            })
        } else {
            None
        };
        let unconfined = Arc::new(Unconfined { user: user.clone() });
        let first_bwrap = config
            .environments
            .iter()
            .find(|e| e.sandbox == Some(Sandbox::Bwrap));
        let bwrap = match first_bwrap {
            None => None,
            Some(env) => {
                let bwrap = Bubblewrap {
                    program: find_program("bwrap").ok_or_else(|| Error::Bwrap {
                        environment: env.id.clone(),
                        problem: "no bwrap program is on the server's PATH".into(),
                    })?,
                    hidden: hidden_paths(config),
                    user: user.clone(),
                };
                // A network namespace is only asked of the host when an environment needs one.
                let offline = config
                    .environments
                    .iter()
                    .any(|e| e.sandbox == Some(Sandbox::Bwrap) && !e.network);
                probe(&bwrap, !offline).map_err(|problem| Error::Bwrap {
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
                user: b.user.clone(),
            })
        });
        Ok(Sandboxes {
            bwrap,
            node_bwrap,
            unconfined,
            user,
        })
    }

    /// Without any sandbox or user change: for tests of the harness that need neither.
    pub fn unconfined() -> Sandboxes {
        Sandboxes {
            bwrap: None,
            node_bwrap: None,
            unconfined: Arc::new(Unconfined { user: None }),
            user: None,
        }
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

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs `true` in the sandbox an agent would get (as the agent user; without network unless
/// `network`).
fn probe(bwrap: &Bubblewrap, network: bool) -> Result<(), String> {
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
    };
    let output = std::process::Command::new(&bwrap.program)
        .args(bwrap.args(&plan))
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
            user: Some(AgentUser {
                name: "nobody".into(),
                uid: 65534,
                gid: 65534,
            }),
        };
        let args = text(b.args(&plan(false)));
        let hide = format!("--tmpfs {}", dir.path().display());
        let bind = "--bind /data/workspaces/r1 /data/workspaces/r1";
        assert!(args.starts_with("--ro-bind / / --dev /dev --proc /proc --perms 1777 --tmpfs /tmp"));
        assert!(args.find(&hide) < args.find(bind), "{args}");
        assert!(args.contains(&format!("--ro-bind /dev/null {}", secret.display())));
        assert!(!args.contains("absent"), "{args}");
        assert!(args.contains("--unshare-net"), "{args}");
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
