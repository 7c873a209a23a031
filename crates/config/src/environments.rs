//! `[[environments]]`: what an environment runs (harness, command, model), how its agents'
//! processes are contained, what they get (variables, secrets, repositories) and which teams
//! may use it. Each table is checked against the ones before it and given its defaults; its
//! Slurm settings are `slurm.rs`'s. Nothing here starts a process or reads a secret's value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runledger_domain::harness::{AgentPermissions, Harness, Limits, Sandbox, Slurm};

use crate::error::Error;
use crate::file::{EnvironmentFile, RepoFile};
use crate::limits::DEFAULT_MAX_QUEUED;
use crate::names::{teams, variable_name};
use crate::range::Range;
use crate::secrets::Secret;
use crate::server::MAX_CACHE_MB;
use crate::slurm::slurm;

/// A repository every run of an environment starts with, checked out in its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub url: String,
    /// A branch, tag or commit; `None`: the remote's default branch.
    pub reference: Option<String>,
    /// Relative to the workspace, without `..`; `.` is the workspace itself.
    pub path: PathBuf,
}

/// A configured environment, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub harness: Harness,
    pub command: Vec<String>,
    pub setup: Vec<String>,
    pub model_id: String,
    pub max_concurrent: usize,
    pub max_runtime_secs: u64,
    pub env: BTreeMap<String, String>,
    pub workspace_root: Option<PathBuf>,
    /// How long the demo agent works.
    pub demo_duration_ms: u64,
    /// How the agents' processes are contained; `None` for the in-process `demo` harness.
    pub sandbox: Option<Sandbox>,
    /// Whether agents reach the network (`false`: an empty network namespace of their own).
    pub network: bool,
    /// Variables of the server's environment that agents get.
    pub inherit_env: Vec<String>,
    /// Names of `[secrets]` entries that agents get as variables of the same name.
    pub secrets: Vec<String>,
    /// Per-execution resource limits, enforced with cgroups.
    pub limits: Limits,
    /// Checked out in every new workspace, before setup.
    pub repos: Vec<Repo>,
    /// What a preset's agent may do (`command` agents get it as `RUNLEDGER_AGENT_PERMISSIONS`).
    pub agent_permissions: AgentPermissions,
    /// The model endpoint a preset's CLI is pointed at; `None`: the CLI's own default.
    pub model_base_url: Option<String>,
    /// The teams whose keys may run in this environment; empty: every team.
    pub teams: Vec<String>,
    /// Most runs that may wait in this environment's queue; a create beyond is refused (429).
    pub max_queued: usize,
    /// `Some` when the environment runs its agents as Slurm job steps (`runs_on = "slurm"`);
    /// `max_concurrent` then bounds the executions handed to Slurm, pending or running.
    pub slurm: Option<Slurm>,
    /// The snapshot kept at the end of each execution (workspace, home, CLI session), from
    /// which a fork starts; `None`: none is kept (`snapshots = false`, or the demo harness).
    pub snapshots: Option<Snapshots>,
    /// The most bytes of the diff an execution's changes keep (`changes_max_mb`); a longer
    /// diff is cut at a file's start and marked so, its summary kept whole.
    pub changes_max_bytes: u64,
}

/// `changes_max_mb` when the file sets none.
pub const DEFAULT_CHANGES_MAX_MB: u64 = 10;
/// The largest `changes_max_mb`: the diff is held in memory while it is redacted and stored.
pub const MAX_CHANGES_MAX_MB: u64 = 1024;

/// How big an execution's snapshot may be; a bigger one is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshots {
    /// Bytes of the files and link targets, plus `SNAPSHOT_ENTRY_BYTES` per entry.
    pub max_bytes: u64,
}

/// What each entry of a snapshot (file, directory, link) counts for besides its bytes, so a
/// tree of a million empty files is bounded too.
pub const SNAPSHOT_ENTRY_BYTES: u64 = 512;
/// `snapshot_max_mb` when the file sets none.
pub const DEFAULT_SNAPSHOT_MAX_MB: u64 = 256;
/// The largest `snapshot_max_mb`: a snapshot is a copy on the server's own disk.
pub const MAX_SNAPSHOT_MAX_MB: u64 = 64 * 1024;

impl Environment {
    /// Whether keys of `team` may run agents here: `teams` is empty (every team) or names it.
    pub fn open_to(&self, team: &str) -> bool {
        self.teams.is_empty() || self.teams.iter().any(|t| t == team)
    }

    /// The built-in environment used when no config file names any.
    pub fn demo() -> Environment {
        Environment {
            id: "demo".into(),
            name: "demo".into(),
            description: Some("Built-in demo agent: needs nothing installed".into()),
            harness: Harness::Demo,
            command: Vec::new(),
            setup: Vec::new(),
            model_id: "demo".into(),
            max_concurrent: 64,
            max_runtime_secs: 3600,
            env: BTreeMap::new(),
            workspace_root: None,
            demo_duration_ms: 2000,
            sandbox: None,
            network: true,
            inherit_env: Vec::new(),
            secrets: Vec::new(),
            limits: Limits::default(),
            repos: Vec::new(),
            agent_permissions: AgentPermissions::Edit,
            model_base_url: None,
            teams: Vec::new(),
            max_queued: DEFAULT_MAX_QUEUED,
            slurm: None,
            snapshots: None,
            changes_max_bytes: DEFAULT_CHANGES_MAX_MB << 20,
        }
    }
}

/// Every `[[environments]]` table in order, each checked against the ones before it; the
/// built-in demo environment when the file names none.
pub(crate) fn environments(
    files: Vec<EnvironmentFile>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Vec<Environment>, Error> {
    let mut environments = Vec::new();
    for (i, env) in files.into_iter().enumerate() {
        let resolved = environment(&format!("environments[{i}]"), env, secrets, &environments)?;
        environments.push(resolved);
    }
    if environments.is_empty() {
        environments.push(Environment::demo());
    }
    Ok(environments)
}

/// One `[[environments]]` table (`at` names it in errors), checked against the ones before it
/// (`defined`), defaults applied.
fn environment(
    at: &str,
    env: EnvironmentFile,
    secrets: &BTreeMap<String, Secret>,
    defined: &[Environment],
) -> Result<Environment, Error> {
    check_id(at, &env, defined)?;
    check_command(at, &env)?;
    check_runtime(at, &env, secrets)?;
    let sandbox = containment(at, &env)?;
    let slurm = slurm(at, &env, sandbox)?;
    let snapshots = snapshots(at, &env)?;
    let changes_max_mb = Range::between(1, MAX_CHANGES_MAX_MB, "a size", "MiB").or_default(
        &format!("{at}.changes_max_mb"),
        env.changes_max_mb,
        DEFAULT_CHANGES_MAX_MB,
    )?;
    let repos = repos(at, env.repos)?;
    let max_concurrent =
        Range::at_least(1).or_default(&format!("{at}.max_concurrent"), env.max_concurrent, 64)?;
    let demo = Environment::demo();
    Ok(Environment {
        name: env.name.unwrap_or_else(|| env.id.clone()),
        id: env.id,
        description: env.description,
        harness: env.harness,
        command: env.command,
        setup: env.setup,
        // The built-in `demo` model is the demo agent's; a CLI without a configured model
        // uses its own default (no `--model` flag at all).
        model_id: env.model_id.unwrap_or(if env.harness == Harness::Demo {
            demo.model_id
        } else {
            String::new()
        }),
        max_concurrent,
        max_runtime_secs: env.max_runtime_secs.unwrap_or(demo.max_runtime_secs),
        env: env.env,
        workspace_root: match env.workspace_root {
            Some(root) => Some(
                std::path::absolute(&root)
                    .map_err(|e| Error::Invalid(format!("{at}.workspace_root: {e}")))?,
            ),
            None => None,
        },
        demo_duration_ms: env.demo_duration_ms.unwrap_or(demo.demo_duration_ms),
        sandbox,
        network: env.network.unwrap_or(true),
        inherit_env: env.inherit_env,
        secrets: env.secrets,
        limits: Limits {
            memory_mb: env.memory_mb,
            pids_max: env.pids_max,
            cpu_percent: env.cpu_percent,
        },
        repos,
        agent_permissions: env.agent_permissions.unwrap_or_default(),
        model_base_url: env.model_base_url,
        teams: teams(at, env.teams)?,
        max_queued: Range::at_least(1)
            .because("a run waits in the queue whenever every slot is busy")
            .or_default(
                &format!("{at}.max_queued"),
                env.max_queued,
                DEFAULT_MAX_QUEUED,
            )?,
        slurm,
        snapshots,
        changes_max_bytes: changes_max_mb << 20,
    })
}

/// `snapshots` (default on) and `snapshot_max_mb` (default `DEFAULT_SNAPSHOT_MAX_MB`); the
/// demo harness has no workspace to keep.
fn snapshots(at: &str, env: &EnvironmentFile) -> Result<Option<Snapshots>, Error> {
    let max_mb = Range::between(1, MAX_SNAPSHOT_MAX_MB, "a size", "MiB").or_default(
        &format!("{at}.snapshot_max_mb"),
        env.snapshot_max_mb,
        DEFAULT_SNAPSHOT_MAX_MB,
    )?;
    if env.harness == Harness::Demo || env.snapshots == Some(false) {
        return Ok(None);
    }
    Ok(Some(Snapshots {
        max_bytes: max_mb << 20,
    }))
}

/// Ids are path- and URL-safe, and unique.
fn check_id(at: &str, env: &EnvironmentFile, defined: &[Environment]) -> Result<(), Error> {
    if env.id.is_empty()
        || env.id.len() > 64
        || !env
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(Error::Invalid(format!(
            "{at}.id: {:?} must be 1-64 characters of letters, digits, '-', '_' or '.'",
            env.id
        )));
    }
    if defined.iter().any(|e| e.id == env.id) {
        return Err(Error::Invalid(format!(
            "{at}.id: {:?} is defined twice",
            env.id
        )));
    }
    Ok(())
}

/// What the harness is told to run: the command, its placeholders, the model endpoint and the
/// agent's permissions, each where the harness takes it.
fn check_command(at: &str, env: &EnvironmentFile) -> Result<(), Error> {
    if env.harness == Harness::Command && env.command.is_empty() {
        return Err(Error::Invalid(format!(
            "{at}.command: the 'command' harness needs the argv to run, e.g. [\"bash\", \"agent.sh\"]"
        )));
    }
    if env.harness == Harness::Demo && !env.command.is_empty() {
        return Err(Error::Invalid(format!(
            "{at}.command: the 'demo' harness runs the built-in agent and takes no command"
        )));
    }
    if let Some(name) = runledger_domain::harness::unknown_placeholder(&env.command) {
        return Err(Error::Invalid(format!(
            "{at}.command: unknown placeholder {{{name}}}; known: {{prompt}}, {{full_prompt}}, \
             {{model_id}}, {{base_prompt}}, {{mcp_config}}, {{workspace}}"
        )));
    }
    let preset = env.harness.is_preset();
    if preset {
        if let Some(arg) = env.command.iter().find(|a| {
            a.contains("{prompt}") || a.contains("{full_prompt}") || a.contains("{base_prompt}")
        }) {
            return Err(Error::Invalid(format!(
                "{at}.command: {arg:?}: a preset's command replaces only the CLI program (and \
                 arguments of its own, e.g. [\"npx\", \"-y\", \"@openai/codex@0.169.0\"]); \
                 the preset adds the prompt, the session to resume and its flags itself"
            )));
        }
    }
    if let Some(url) = &env.model_base_url {
        if !preset {
            return Err(Error::Invalid(format!(
                "{at}.model_base_url: only the claude, codex and gemini presets take a model \
                 endpoint; a command agent reads its own configuration"
            )));
        }
        let parsed = url::Url::parse(url).ok();
        if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
            return Err(Error::Invalid(format!(
                "{at}.model_base_url: {url:?} is not an http:// or https:// URL"
            )));
        }
    }
    if env.agent_permissions.is_some() && env.harness == Harness::Demo {
        return Err(Error::Invalid(format!(
            "{at}.agent_permissions: the 'demo' harness runs in-process and uses no tools"
        )));
    }
    Ok(())
}

/// What the agent's process gets: its time, its variables and the secrets it names.
fn check_runtime(
    at: &str,
    env: &EnvironmentFile,
    secrets: &BTreeMap<String, Secret>,
) -> Result<(), Error> {
    if let Some(secs) = env.max_runtime_secs {
        Range::at_least(1).check(&format!("{at}.max_runtime_secs"), secs)?;
    }
    if let Some(bad) = env
        .env
        .keys()
        .find(|k| k.is_empty() || k.contains('=') || k.starts_with("RUNLEDGER_"))
    {
        return Err(Error::Invalid(format!(
            "{at}.env: {bad:?} is not allowed (empty, contains '=', or a reserved RUNLEDGER_ variable)"
        )));
    }
    if let Some(bad) = env.inherit_env.iter().find(|n| !variable_name(n)) {
        return Err(Error::Invalid(format!(
            "{at}.inherit_env: {bad:?} is not a variable name (letters, digits and '_', not \
             starting with a digit, and not a reserved RUNLEDGER_ variable)"
        )));
    }
    if let Some(bad) = env.secrets.iter().find(|n| !secrets.contains_key(*n)) {
        return Err(Error::Invalid(format!(
            "{at}.secrets: {bad:?} is not defined in [secrets]"
        )));
    }
    Ok(())
}

/// How the agent's processes are contained (`None`: the in-process demo agent) and the limits
/// they run under, refused where they could not be enforced.
fn containment(at: &str, env: &EnvironmentFile) -> Result<Option<Sandbox>, Error> {
    // The demo agent runs in-process: there is no process to contain.
    for (field, set) in [
        ("sandbox", env.sandbox.is_some()),
        ("network", env.network.is_some()),
        ("memory_mb", env.memory_mb.is_some()),
        ("pids_max", env.pids_max.is_some()),
        ("cpu_percent", env.cpu_percent.is_some()),
        ("repos", !env.repos.is_empty()),
    ] {
        if env.harness == Harness::Demo && set {
            return Err(Error::Invalid(format!(
                "{at}.{field}: the 'demo' harness runs in-process and starts no process to contain"
            )));
        }
    }
    let sandbox = match (env.harness, env.sandbox) {
        (Harness::Demo, None) => None,
        (_, chosen) => Some(chosen.unwrap_or(Sandbox::Bwrap)),
    };
    // Without a sandbox there is no network namespace to take the network away with; a
    // limit that cannot be enforced is refused rather than ignored.
    if sandbox == Some(Sandbox::None) && env.network == Some(false) {
        return Err(Error::Invalid(format!(
            "{at}.network: network = false needs sandbox = \"bwrap\" (an unconfined agent \
             cannot be cut off from the network)"
        )));
    }
    // Below these an agent could not even start; a typo of 0 must not mean "no limit".
    // Above these a number is no limit at all: 1 PiB of memory, 1,024 cores.
    for (field, value, range) in [
        (
            "memory_mb",
            env.memory_mb,
            Range::between(16, MAX_CACHE_MB * 1024, "a memory limit", "MiB"),
        ),
        ("pids_max", env.pids_max, Range::at_least(8)),
        (
            "cpu_percent",
            env.cpu_percent,
            Range::between(1, 100 * 1024, "a CPU limit", "percent of one core"),
        ),
    ] {
        if let Some(value) = value {
            range.check(&format!("{at}.{field}"), value)?;
        }
    }
    Ok(sandbox)
}

/// The repositories checked out in every new workspace: real URLs and refs, each at its own
/// path inside the workspace.
fn repos(at: &str, files: Vec<RepoFile>) -> Result<Vec<Repo>, Error> {
    let mut repos: Vec<Repo> = Vec::new();
    for repo in files {
        let path = repo.path.unwrap_or_else(|| PathBuf::from("."));
        let inside = path.is_relative()
            && path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
        if repo.url.trim().is_empty() || repo.url.starts_with('-') {
            return Err(Error::Invalid(format!(
                "{at}.repos: {:?} is not a repository URL",
                repo.url
            )));
        }
        if !inside {
            return Err(Error::Invalid(format!(
                "{at}.repos: path {:?} must be relative to the workspace, without '..'",
                path.display().to_string()
            )));
        }
        if repo
            .reference
            .as_deref()
            .is_some_and(|r| r.is_empty() || r.starts_with('-'))
        {
            return Err(Error::Invalid(format!(
                "{at}.repos: ref {:?} is not a branch, tag or commit",
                repo.reference.unwrap_or_default()
            )));
        }
        let normal = |p: &Path| {
            p.components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect::<PathBuf>()
        };
        if repos.iter().any(|r| normal(&r.path) == normal(&path)) {
            return Err(Error::Invalid(format!(
                "{at}.repos: two repositories are checked out at {:?}",
                path.display().to_string()
            )));
        }
        repos.push(Repo {
            url: repo.url,
            reference: repo.reference,
            path,
        });
    }
    Ok(repos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load_text, Config, Overrides};

    #[test]
    fn environments_get_defaults_and_the_first_is_default() {
        let config = load_text(
            "[[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 10\nmax_concurrent = 2\n\n[[environments]]\nid = \"slow\"\nharness = \"demo\"\n",
        )
        .expect("valid");
        assert_eq!(config.default_environment().id, "fast");
        assert_eq!(config.default_environment().demo_duration_ms, 10);
        assert_eq!(
            config.environment("slow").map(|e| e.demo_duration_ms),
            Some(2000)
        );
    }

    #[test]
    fn environment_teams_and_queue_caps() {
        let ok = load_text(
            "[limits]\nmax_queued_per_team = 7\n\n[[environments]]\nid = \"a\"\nharness = \"demo\"\nteams = [\"infra\", \"ops-2\"]\nmax_queued = 3\n\n[[environments]]\nid = \"b\"\nharness = \"demo\"\n",
        )
        .expect("valid");
        assert_eq!(ok.max_queued_per_team, 7);
        assert_eq!(ok.environments[0].teams, ["infra", "ops-2"]);
        assert_eq!(ok.environments[0].max_queued, 3);
        assert!(ok.environments[1].teams.is_empty());
        assert_eq!(ok.environments[1].max_queued, DEFAULT_MAX_QUEUED);
        let env = "[[environments]]\nid = \"a\"\nharness = \"demo\"\n";
        for (extra, want) in [
            ("teams = []\n", "environments[0].teams: an empty list"),
            (
                "teams = [\"Infra\"]\n",
                "environments[0].teams[0]: \"Infra\" is not a team name",
            ),
            (
                "teams = [\"a\", \"a\"]\n",
                "environments[0].teams[1]: \"a\" is listed twice",
            ),
            (
                "max_queued = 0\n",
                "environments[0].max_queued: must be at least 1",
            ),
        ] {
            let err = load_text(&format!("{env}{extra}"))
                .expect_err(extra)
                .to_string();
            assert!(err.contains(want), "{extra:?}: {err}");
        }
        let err = load_text("[limits]\nmax_queued_per_team = 0\n")
            .expect_err("zero")
            .to_string();
        assert!(err.contains("limits.max_queued_per_team"), "{err}");
    }

    #[test]
    fn agents_are_sandboxed_by_default_and_bad_containment_settings_are_refused() {
        let config = load_text(
            "[[environments]]\nid = \"c\"\nharness = \"command\"\ncommand = [\"a\"]\n\n\
             [[environments]]\nid = \"p\"\nharness = \"claude\"\nsandbox = \"none\"\n\n\
             [[environments]]\nid = \"d\"\nharness = \"demo\"\n",
        )
        .expect("valid");
        let sandbox = |id: &str| config.environment(id).map(|e| e.sandbox);
        assert_eq!(sandbox("c"), Some(Some(Sandbox::Bwrap)));
        assert_eq!(sandbox("p"), Some(Some(Sandbox::None)));
        assert_eq!(sandbox("d"), Some(None));
        assert!(config.environments.iter().all(|e| e.network));
        assert_eq!(config.agent_user, None);
        assert_eq!(
            config.agent_uids,
            runledger_domain::uid_range::UidRange::default()
        );
        for (text, want) in [
            (
                "harness = \"demo\"\nsandbox = \"bwrap\"",
                "environments[0].sandbox",
            ),
            (
                "harness = \"demo\"\nmemory_mb = 64",
                "environments[0].memory_mb",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\nsandbox = \"none\"\nnetwork = false",
                "environments[0].network: network = false needs sandbox",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\npids_max = 0",
                "environments[0].pids_max: must be at least 8",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\ncpu_percent = 999999999",
                "environments[0].cpu_percent",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\ninherit_env = [\"RUNLEDGER_X\"]",
                "environments[0].inherit_env",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\nsandbox = \"docker\"",
                "unknown variant",
            ),
            (
                "harness = \"claude\"\ncommand = [\"claude\", \"-p\", \"{prompt}\"]",
                "environments[0].command: \"{prompt}\": a preset's command replaces only the CLI program",
            ),
            (
                "harness = \"codex\"\nmodel_base_url = \"127.0.0.1:8080\"",
                "environments[0].model_base_url: \"127.0.0.1:8080\" is not an http:// or https:// URL",
            ),
            (
                "harness = \"command\"\ncommand = [\"a\"]\nmodel_base_url = \"http://x\"",
                "environments[0].model_base_url: only the claude, codex and gemini presets",
            ),
            (
                "harness = \"gemini\"\nagent_permissions = \"write\"",
                "unknown variant `write`",
            ),
            (
                "harness = \"demo\"\nagent_permissions = \"edit\"",
                "environments[0].agent_permissions",
            ),
        ] {
            let err = load_text(&format!("[[environments]]\nid = \"x\"\n{text}\n"))
                .expect_err(text)
                .to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn presets_default_to_edit_permissions_and_no_model() {
        let config = load_text(
            "[[environments]]\nid = \"c\"\nharness = \"claude\"\n\n\
             [[environments]]\nid = \"g\"\nharness = \"gemini\"\nagent_permissions = \"read-only\"\n\
             model_base_url = \"http://127.0.0.1:9\"\n",
        )
        .expect("valid");
        let claude = config.environment("c").expect("c");
        assert_eq!(claude.model_id, "");
        assert_eq!(claude.agent_permissions, AgentPermissions::Edit);
        let gemini = config.environment("g").expect("g");
        assert_eq!(gemini.agent_permissions, AgentPermissions::ReadOnly);
        assert_eq!(gemini.model_base_url.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(
            Config::load(None, &Overrides::default())
                .expect("defaults")
                .default_environment()
                .model_id,
            "demo"
        );
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let err = load_text("[[environments]]\nid = \"a\"\nharness = \"demo\"\n[[environments]]\nid = \"a\"\nharness = \"demo\"\n")
            .expect_err("duplicate");
        assert!(err.to_string().contains("defined twice"));
    }
}
