//! The launchers of the configured environments, and who agents run as (`Sandboxes`): prepared
//! at start-up (bubblewrap found and probed, its hidden paths and seccomp filter written), then
//! narrowed to one run's own user for each execution. It decides which launcher an
//! environment gets; what a launcher runs is the plan's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bubblewrap::Bubblewrap;
use super::plan::{Launcher, Plan, Unconfined};
use crate::agents::{AgentUser, Agents};
use crate::safe_fs::{self, Owner};
use runledger_config::Config;
use runledger_domain::harness::Sandbox;

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
                let filter = crate::seccomp::nested_userns_filter().map(Arc::<[u8]>::from);
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
                    program: crate::process::find_program("bwrap").ok_or_else(|| Error::Bwrap {
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
