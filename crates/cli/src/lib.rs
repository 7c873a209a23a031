//! The command line. `serve` runs the service. `keys`, `teams`, `events`, `export`, `import`,
//! `replay` and `secrets` work on a data directory directly and reuse `domain`, `store` and
//! `projection`; `keys` and `teams` fall back to the running server's admin API when the server
//! holds the directory. `run`, `runs`, `login` and `logout` are the terminal client of a server
//! anywhere, through its public API only (`runs`, `remote`, `profile`). Data goes to stdout,
//! diagnostics to stderr. Backup and restore live in `backup`.

#![forbid(unsafe_code)]

mod backup;
pub mod profile;
pub mod remote;
mod runs;
mod schedule_logs;
mod terminal;

pub use backup::{export, import};
pub use runs::{login, logout, run, runs};

use runledger_domain::DEFAULT_TEAM;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};

use runledger_base::clock::now;
use runledger_config::{Config, Overrides};
use runledger_format::events::event_json;
use runledger_format::time::format_time;
use runledger_store::api_keys::Key;
use runledger_store::api_keys::{KeyKind, KeyRecord};
use runledger_store::{self as store, Store};

/// The exit codes, shown by `--help` (docs/cli.md says the same).
const EXIT_CODES: &str = "\
Exit codes of run, runs, login and logout:
  0   done; with --follow or --wait, or runs logs -f: the run SUCCEEDED
  1   the run FAILED (run --follow/--wait, runs logs -f)
  2   the run was CANCELLED (run --follow/--wait, runs logs -f)
  64  the command line is wrong
  65  the server refused the request (bad value, unknown run, conflict)
  69  the server cannot be reached or cannot serve now (429, 5xx)
  70  another error (writing the output failed)
  76  the server's answer is not runledger's (not JSON, too large)
  77  the API key was refused (401, 403)
  78  no server or API key given, or an unreadable profile or CA file
Other commands exit 0 on success, 1 on failure and 64 on a wrong command line.";

#[derive(Parser, Debug)]
#[command(
    name = "runledger",
    version,
    about = "Runs AI coding agents on request; every change is an event.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// Config file (TOML).
    #[arg(long, global = true, env = "RUNLEDGER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory; wins over the config file.
    #[arg(long, global = true, env = "RUNLEDGER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// On failure, print the error's full chain of causes and, with RUST_BACKTRACE=1, where it
    /// happened (by default, one line).
    #[arg(long, global = true)]
    pub debug: bool,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run the service.
    Serve {
        /// Listen address; wins over the config file.
        #[arg(long, env = "RUNLEDGER_BIND")]
        bind: Option<String>,
    },
    /// Start a run on a server; with --follow, stream its transcript, with --wait, wait for it.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// What the agent is asked to do.
        prompt: String,
        /// The environment to run in (default: the server's first).
        #[arg(long = "env", value_name = "ID")]
        environment: Option<String>,
        /// The model (default: the environment's).
        #[arg(long)]
        model: Option<String>,
        #[arg(long)]
        title: Option<String>,
        /// Stream the transcript until the run ends (stdout and follow-ups to stdout, stderr to
        /// stderr, runledger's notes to stderr); lines typed on a terminal are sent as
        /// follow-ups. Exits 0, 1 or 2 as the run SUCCEEDED, FAILED or was CANCELLED.
        #[arg(long, conflicts_with = "wait")]
        follow: bool,
        /// Wait until the run ends, showing its state on a terminal; exits as --follow does.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List, inspect, follow, steer and cancel runs on a server.
    #[command(after_help = EXIT_CODES)]
    Runs {
        #[command(subcommand)]
        command: RunsCmd,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Check an API key against a server and save both in the login profile
    /// ($XDG_CONFIG_HOME/runledger/profile.toml, mode 0600). Without --api-key, the key is read
    /// from stdin (without echo on a terminal).
    #[command(after_help = EXIT_CODES)]
    Login {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Remove the login profile.
    Logout,
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCmd,
        #[command(flatten)]
        server: RunningServer,
    },
    /// Manage teams: a key sees and creates only its team's runs.
    Teams {
        #[command(subcommand)]
        command: TeamsCmd,
        #[command(flatten)]
        server: RunningServer,
    },
    /// Print a run's or a schedule's event history.
    Events {
        run_id: String,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print every event of every run as JSON lines (a backup, with --with-keys).
    Export {
        /// Also write the API key records (their hashes, never the keys) and the instance
        /// secrets, framed so that an import notices truncation: a full backup. It holds
        /// secrets; keep it private.
        #[arg(long)]
        with_keys: bool,
        /// Write to FILE (mode 0600, replaced only once the export is whole) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Restore an export into a new or empty data directory (all or nothing; never merges).
    Import {
        /// The export to read; `-` or nothing reads stdin.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Manage the instance's secrets.
    Secrets {
        #[command(subcommand)]
        command: SecretsCmd,
    },
    /// Rebuild the read index from the log.
    Replay {
        /// Rebuild into a scratch database (`verify-scratch` in the data directory, removed
        /// afterwards) and report differences instead of replacing the index; the store is
        /// left as it was.
        #[arg(long)]
        verify: bool,
        /// Storage cache for the replay, in MiB. A replay reads the whole log once while it
        /// writes a new index; a larger cache than the server's keeps the index being written
        /// in memory (at 1.15M runs: 12.1 s with 64 MiB, 10.4 s with 1024 MiB). With
        /// `--verify`, half of it caches the scratch database.
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(8..=1_048_576))]
        cache_mb: u64,
    },
}

/// The server and key of the terminal client. A flag wins over its variable, which wins over
/// the login profile.
#[derive(clap::Args, Debug, Default)]
pub struct ApiArgs {
    /// The server's base URL, as https://runs.example.com.
    #[arg(long, global = true, env = "RUNLEDGER_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// An API key (rl_…).
    #[arg(
        long,
        global = true,
        env = "RUNLEDGER_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
    /// A PEM file of certificates to trust besides the public CAs (a self-signed server).
    #[arg(long, global = true, env = "RUNLEDGER_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum RunsCmd {
    /// List runs, most recently updated first: a table on a terminal, tab-separated lines
    /// (id, state, title, created_at, environment) otherwise, the API's page with --json.
    List {
        /// Only runs in this state (QUEUED, INPROGRESS, SUCCEEDED, FAILED, CANCELLED);
        /// repeatable.
        #[arg(long = "state", value_name = "STATE")]
        states: Vec<String>,
        #[arg(long = "env", value_name = "ID")]
        environment: Option<String>,
        /// The agent config's name.
        #[arg(long)]
        name: Option<String>,
        /// The creator's id (an API key id).
        #[arg(long)]
        creator: Option<String>,
        /// The source (API, SCHEDULED_AGENT, …).
        #[arg(long)]
        source: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// Created after this time: RFC 3339, or an age such as 30m, 12h, 7d.
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Created before this time: RFC 3339, or an age such as 30m, 12h, 7d.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Runs whose title, prompt or skill contains this text (any case).
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// Runs on the page, 1 to 500 (the server's default: 20).
        #[arg(long)]
        limit: Option<u32>,
        /// The next page: the cursor a previous page named.
        #[arg(long)]
        cursor: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show a run.
    Get {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a run's transcript: agent stdout and follow-ups to stdout, its stderr to stderr,
    /// runledger's notes to stderr.
    Logs {
        run_id: String,
        /// Keep following until the run ends; exits 0, 1 or 2 as it SUCCEEDED, FAILED or was
        /// CANCELLED.
        #[arg(short, long)]
        follow: bool,
    },
    /// Send a follow-up message to a run (a finished run resumes).
    Followup {
        run_id: String,
        message: String,
        #[arg(long, default_value = "normal", value_parser = ["normal", "plan", "orchestrate"])]
        mode: String,
    },
    /// Cancel a run.
    Cancel { run_id: String },
    /// Revoke a run's session links: every link handed out so far stops opening its page; the
    /// new link is printed.
    RevokeLink { run_id: String },
    /// Print a run's event history (its audit trail) from the server.
    Events {
        run_id: String,
        /// The history as one JSON document, as the API answers it.
        #[arg(long)]
        json: bool,
    },
}

/// How `keys` and `teams` reach a running server that holds the data directory.
#[derive(clap::Args, Debug)]
pub struct RunningServer {
    /// Admin key for the running server's admin API (used when the server holds the data
    /// directory).
    #[arg(
        long,
        global = true,
        env = "RUNLEDGER_ADMIN_KEY",
        hide_env_values = true
    )]
    pub admin_key: Option<String>,
    /// Base URL of the running server (default: the config's public_url).
    #[arg(long, global = true, env = "RUNLEDGER_URL")]
    pub url: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum KeysCmd {
    /// Create a key; prints the key alone on stdout.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "personal", value_parser = ["personal", "agent"])]
        kind: String,
        /// Allow this key to manage keys and teams.
        #[arg(long)]
        admin: bool,
        /// The team whose runs the key sees and creates (it must exist: `teams create`).
        #[arg(long, default_value = DEFAULT_TEAM)]
        team: String,
    },
    /// List keys.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id.
    Revoke { id: String },
}

#[derive(Subcommand, Debug)]
pub enum TeamsCmd {
    /// Create a team.
    Create { name: String },
    /// List teams, `default` first.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SecretsCmd {
    /// Replace the secret that signs session links: every link given out so far stops working.
    /// Offline only (stop the server first); the server reads the secret when it starts.
    RotateSession,
}

/// Prints a failed command's error on stderr: one line, its causes joined by `: `; with
/// `--debug`, anyhow's report (each cause on its own line, and the backtrace when
/// RUST_BACKTRACE=1 captured one). A backtrace is for whoever debugs runledger, not for the
/// operator whose typo it was.
pub fn report(error: &anyhow::Error, debug: bool) {
    // A server's problem detail or a stored message can quote an agent.
    let text = if debug {
        format!("{error:?}")
    } else {
        format!("{error:#}")
    };
    eprintln!(
        "runledger: error: {}",
        terminal::printable(&text, terminal::Origin::Field)
    );
}

/// Fails, creating nothing, unless `config.data_dir` holds a store: the commands that only
/// read must not leave an empty store behind a mistyped `--data-dir` (a backup script would
/// then write empty backups and report success).
fn require_store(config: &Config) -> anyhow::Result<()> {
    if !Store::present_in(&config.data_dir) {
        bail!(
            "{} holds no runledger store (no sled/db in it); check --data-dir, \
             RUNLEDGER_DATA_DIR or server.data_dir",
            config.data_dir.display()
        );
    }
    Ok(())
}

/// `runledger secrets rotate-session`.
pub fn secrets(cli: &Cli, command: &SecretsCmd) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    match command {
        SecretsCmd::RotateSession => {
            require_store(&config)?;
            let store = match open(&config, false) {
                Ok(store) => store,
                Err(store::Error::Locked(dir)) => bail!(
                    "a running server holds {}: stop it, rotate the secret, and start it again \
                     (the server reads the session-link secret when it starts, so links keep \
                     working until it restarts)",
                    dir.display()
                ),
                Err(e) => return Err(e.into()),
            };
            store.rotate_secret(store::SESSION_SECRET)?;
            store.sync_blocking()?;
            eprintln!(
                "rotated the session-link secret of {}: every session link given out before \
                 now answers 404; runs answer new links once the server starts",
                config.data_dir.display()
            );
        }
    }
    Ok(())
}

impl Cli {
    pub fn load_config(&self, bind: Option<String>) -> anyhow::Result<Config> {
        Ok(Config::load(
            self.config.as_deref(),
            &Overrides {
                data_dir: self.data_dir.clone(),
                bind,
            },
        )?)
    }
}

fn open(config: &Config, accept_lost_writes: bool) -> Result<Store, store::Error> {
    Store::open(
        &config.data_dir,
        &store::Options {
            accept_lost_writes,
            ..store::Options::default()
        },
    )
}

/// Opens the store for a command that reads what it can, even from a store that lost writes.
fn open_salvage(config: &Config) -> anyhow::Result<Store> {
    let store = open_offline_with(config, true)?;
    if let Some(lost) = store.lost_writes() {
        eprintln!("{}", lost_warning(&config.data_dir, lost));
    }
    Ok(store)
}

fn lost_warning(dir: &std::path::Path, lost: store::LostWrites) -> String {
    format!(
        "runledger: WARNING: the store in {} lost acknowledged writes (recovered commit {}, \
         acknowledged commit {}): sled dropped its log from a damaged record on. What follows \
         is what is left; see \"Recovering from damage\" in docs/operations.md",
        dir.display(),
        lost.recovered,
        lost.acknowledged
    )
}

/// Opens the store for an offline command, with a clear message when a server holds it.
fn open_offline_with(config: &Config, accept_lost_writes: bool) -> anyhow::Result<Store> {
    match open(config, accept_lost_writes) {
        Ok(s) => Ok(s),
        Err(store::Error::Locked(dir)) => Err(held(&dir)),
        Err(e) => Err(e.into()),
    }
}

fn held(dir: &std::path::Path) -> anyhow::Error {
    anyhow::anyhow!(
        "the data directory {} is held by a running runledger server; stop it first \
         (this command reads the directory directly)",
        dir.display()
    )
}

pub fn keys(cli: &Cli, command: &KeysCmd, server: &RunningServer) -> anyhow::Result<()> {
    administer(
        cli,
        "keys",
        matches!(command, KeysCmd::List { .. }),
        server,
        |store| keys_offline(store, command),
        |url, admin_key, chain| keys_online(url, admin_key, command, chain),
    )
}

pub fn teams(cli: &Cli, command: &TeamsCmd, server: &RunningServer) -> anyhow::Result<()> {
    administer(
        cli,
        "teams",
        matches!(command, TeamsCmd::List { .. }),
        server,
        |store| teams_offline(store, command),
        |url, admin_key, chain| teams_online(url, admin_key, command, chain),
    )
}

/// Runs an admin command on the data directory when no server holds it, else through the
/// running server's admin API with an admin key. A `read_only` command fails, creating
/// nothing, where there is no store, unless an admin key is at hand and the config's server
/// answers (a relative `server.data_dir` names another directory from another working
/// directory than the server's).
fn administer(
    cli: &Cli,
    what: &str,
    read_only: bool,
    server: &RunningServer,
    offline: impl FnOnce(&Store) -> anyhow::Result<()>,
    online: impl FnOnce(&str, &str, Option<&std::path::Path>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    let url = server.url.clone().unwrap_or_else(|| server_url(&config));
    let chain = config.tls.as_ref().map(|t| t.cert.as_path());
    let admin_key = admin_key(server);
    if read_only && !Store::present_in(&config.data_dir) {
        if let Some(key) = admin_key.as_deref() {
            return match online(&url, key, chain) {
                Err(e) if unreached(&e) => require_store(&config).and(Err(e)),
                other => other,
            };
        }
        require_store(&config)?;
    }
    match open(&config, false) {
        Ok(store) => offline(&store),
        Err(store::Error::Locked(_)) => {
            let Some(admin_key) = admin_key else {
                bail!(
                    "a running server holds {}; to manage {what} through it, pass an admin key \
                     with --admin-key or RUNLEDGER_ADMIN_KEY (or RUNLEDGER_API_KEY, or log in \
                     with an admin key: `runledger login`)",
                    config.data_dir.display()
                );
            };
            online(&url, &admin_key, chain)
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether a failure of the admin API is that no server answered.
fn unreached(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<remote::Error>(),
        Some(remote::Error::Unreachable { .. })
    )
}

/// The admin key of `keys` and `teams`: `--admin-key` or `RUNLEDGER_ADMIN_KEY`, else the
/// terminal client's `RUNLEDGER_API_KEY`, else the login profile's key.
/// A profile that cannot be read gives no key: the offline commands must not depend on it.
fn admin_key(server: &RunningServer) -> Option<String> {
    let given = |key: Option<String>| key.filter(|k| !k.trim().is_empty());
    given(server.admin_key.clone())
        .or_else(|| given(std::env::var("RUNLEDGER_API_KEY").ok()))
        .or_else(|| given(profile::load().ok().flatten().and_then(|p| p.api_key)))
}

/// Where the server of `config` answers: its `public_url`, else its bind address, with an
/// unspecified address (`0.0.0.0`, `[::]`: every interface) turned into loopback, which a
/// server bound to every interface answers on and which a certificate for this machine names.
pub fn server_url(config: &Config) -> String {
    if let Some(url) = &config.public_url {
        return url.clone();
    }
    let mut addr = config.bind;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("{}://{addr}", config.scheme())
}

/// The admin API of a running server, through the terminal client's HTTP client: the public
/// CAs and, for a self-signed server, the config's own certificate chain.
struct Admin {
    remote: remote::Remote,
    runtime: tokio::runtime::Runtime,
}

impl Admin {
    fn new(url: &str, key: &str, chain: Option<&std::path::Path>) -> anyhow::Result<Admin> {
        let remote = remote::Remote::new(&remote::Target {
            server: url.to_string(),
            key: key.to_string(),
            ca_cert: chain.map(std::path::Path::to_path_buf),
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the client's runtime")?;
        Ok(Admin { remote, runtime })
    }

    fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        Ok(self.runtime.block_on(self.remote.get(path, &[]))?)
    }

    fn post(&self, path: &str, body: &serde_json::Value) -> anyhow::Result<serde_json::Value> {
        Ok(self.runtime.block_on(self.remote.post(path, body))?)
    }
}

fn teams_offline(store: &Store, command: &TeamsCmd) -> anyhow::Result<()> {
    match command {
        TeamsCmd::Create { name } => {
            check_team_name(name)?;
            if !store.keys().create_team(name, now())? {
                bail!("team {name:?} exists already");
            }
            store.sync_blocking()?;
            eprintln!("created team {name}");
        }
        TeamsCmd::List { json } => {
            let teams: Vec<_> = store
                .keys()
                .teams()?
                .into_iter()
                .map(|(name, at)| {
                    serde_json::json!({ "name": name, "created_at": at.map(format_time) })
                })
                .collect();
            print_teams(&teams, *json)?;
        }
    }
    Ok(())
}

fn teams_online(
    url: &str,
    admin_key: &str,
    command: &TeamsCmd,
    trusted_chain: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let admin = Admin::new(url, admin_key, trusted_chain)?;
    let base = "/api/v1/admin/teams";
    match command {
        TeamsCmd::Create { name } => {
            check_team_name(name)?;
            let body = serde_json::json!({ "name": name });
            admin.post(base, &body)?;
            eprintln!("created team {name} through the running server");
        }
        TeamsCmd::List { json } => {
            let reply = admin.get(base)?;
            let teams = reply["teams"].as_array().cloned().unwrap_or_default();
            print_teams(&teams, *json)?;
        }
    }
    Ok(())
}

fn check_team_name(name: &str) -> anyhow::Result<()> {
    if !runledger_domain::valid_team_name(name) {
        bail!(
            "{name:?} is not a team name: {}",
            runledger_domain::TEAM_NAME_RULE
        );
    }
    Ok(())
}

fn print_teams(teams: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    print_records(teams, json, |t| {
        let created = t["created_at"]
            .as_str()
            .map(|at| format!("created {at}"))
            .unwrap_or_else(|| "built in".into());
        format!("{:<24}  {created}", t["name"].as_str().unwrap_or(""))
    })
}

fn print_keys(keys: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    print_records(keys, json, |k| {
        let s = |f: &str| k[f].as_str().unwrap_or("").to_string();
        let revoked = k["revoked_at"]
            .as_str()
            .map(|t| format!("revoked {t}"))
            .unwrap_or_else(|| "active".into());
        let admin = if k["admin"].as_bool() == Some(true) {
            " admin"
        } else {
            ""
        };
        format!(
            "{}  {:<8}{admin}  {:<24}  team {:<16}  created {}  {revoked}",
            s("id"),
            s("kind"),
            s("name"),
            s("team"),
            s("created_at")
        )
    })
}

/// Prints records of the admin API on stdout: one JSON object per line with `--json`, else
/// the line `text` makes of each.
fn print_records(
    records: &[serde_json::Value],
    json: bool,
    text: impl Fn(&serde_json::Value) -> String,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for r in records {
        if json {
            writeln!(out, "{}", terminal::json(r))?;
        } else {
            writeln!(
                out,
                "{}",
                terminal::printable(&text(r), terminal::Origin::Field)
            )?;
        }
    }
    Ok(())
}

fn keys_offline(store: &Store, command: &KeysCmd) -> anyhow::Result<()> {
    let json = |k: &KeyRecord| runledger_format::keys::key_json(&Key::from(k));
    match command {
        KeysCmd::Create {
            name,
            kind,
            admin,
            team,
        } => {
            let kind = KeyKind::parse(kind).context("kind must be personal or agent")?;
            check_team_name(team)?;
            if !store.keys().team_exists(team)? {
                bail!("there is no team {team:?}; create it first with `runledger teams create {team}`");
            }
            let (record, secret) = store.keys().create(name, kind, *admin, team, now())?;
            store.sync_blocking()?;
            eprintln!(
                "created key {} ({}) in team {}",
                record.id, record.name, record.team
            );
            println!("{secret}");
        }
        KeysCmd::List { json: as_json } => {
            let keys: Vec<_> = store.keys().list()?.iter().map(json).collect();
            print_keys(&keys, *as_json)?;
        }
        KeysCmd::Revoke { id } => {
            let Some(record) = store.keys().revoke(id, now())? else {
                bail!("no key with id {id}");
            };
            store.sync_blocking()?;
            eprintln!("revoked key {} ({})", record.id, record.name);
        }
    }
    Ok(())
}

fn keys_online(
    url: &str,
    admin_key: &str,
    command: &KeysCmd,
    trusted_chain: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let admin = Admin::new(url, admin_key, trusted_chain)?;
    let base = "/api/v1/admin/keys";
    match command {
        KeysCmd::Create {
            name,
            kind,
            admin: is_admin,
            team,
        } => {
            let body =
                serde_json::json!({ "name": name, "kind": kind, "admin": is_admin, "team": team });
            let reply = admin.post(base, &body)?;
            eprintln!(
                "created key {} ({}) through the running server",
                reply["id"].as_str().unwrap_or("?"),
                name
            );
            println!(
                "{}",
                reply["key"].as_str().context("the server sent no key")?
            );
        }
        KeysCmd::List { json } => {
            let reply = admin.get(base)?;
            let keys = reply["keys"].as_array().cloned().unwrap_or_default();
            print_keys(&keys, *json)?;
        }
        KeysCmd::Revoke { id } => {
            let escaped: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
            let reply = admin.post(&format!("{base}/{escaped}/revoke"), &serde_json::json!({}))?;
            eprintln!(
                "revoked key {} through the running server",
                reply["id"].as_str().unwrap_or(id)
            );
        }
    }
    Ok(())
}

pub fn events(cli: &Cli, run_id: &str, json: bool) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    require_store(&config)?;
    let store = open_salvage(&config)?;
    let id = run_id
        .parse()
        .map_err(|_| anyhow::anyhow!("{run_id:?} is not a run id"))?;
    // Read and printed one event at a time: a long history costs no more memory than a short one.
    let mut log = store.run_events(id, 0).peekable();
    if log.peek().is_none() {
        // Run and schedule ids are both ULIDs: a schedule's log is printed the same way.
        let mut schedule = store.schedule_events(id, 0).peekable();
        if schedule.peek().is_none() {
            bail!("no run or schedule with id {run_id}");
        }
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for e in schedule {
            let e = &e?;
            let v = runledger_format::schedules::schedule_event_json(e);
            if json {
                writeln!(out, "{}", terminal::json(&v))?;
            } else {
                writeln!(
                    out,
                    "{:>4}  {}  {:<18}  {}",
                    e.seq,
                    format_time(e.at),
                    e.event.kind(),
                    terminal::json(&v["event"])
                )?;
            }
        }
        return Ok(());
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for e in log {
        let e = &e?;
        if json {
            writeln!(out, "{}", terminal::json(&event_json(e)))?;
        } else {
            let v = event_json(e);
            writeln!(
                out,
                "{:>4}  {}  {:<16}  {}",
                e.seq,
                format_time(e.at),
                e.event.kind(),
                terminal::json(&v["data"])
            )?;
        }
    }
    Ok(())
}

pub fn replay(cli: &Cli, verify: bool, cache_mb: u64) -> anyhow::Result<()> {
    let mut config = cli.load_config(None)?;
    let cache_bytes = cache_mb * 1024 * 1024;
    // A verification builds its scratch index in a database of its own: the two share the
    // cache given, so that it takes no more memory than a rebuild.
    let scratch_cache_bytes = cache_bytes / 2;
    config.cache_bytes = if verify {
        cache_bytes - scratch_cache_bytes
    } else {
        cache_bytes
    };
    // Opened as the server opens it: runs whose index entry was left behind by a crash
    // (marked dirty) are caught up first, so verify reports real differences only.
    // A rebuild accepts a store that lost writes (it is how an operator chooses to serve what
    // is left). A verification reports the loss and changes nothing: opening the index may
    // commit a catch-up, which would move the watermark past the loss.
    if verify {
        require_store(&config)?;
        let probe = open_salvage(&config)?;
        if probe.lost_writes().is_some() {
            bail!("the store lost acknowledged writes; `runledger replay` (without --verify) accepts the loss");
        }
    }
    let options = store::Options {
        cache_bytes: config.cache_bytes,
        accept_lost_writes: true,
    };
    let (store, index) = match runledger_projection::open(&config.data_dir, &options) {
        Err(runledger_projection::Error::Store(store::Error::Locked(dir))) => {
            return Err(held(&dir))
        }
        // Accepting the loss is what a rebuild is for: recover from sled's log alone.
        Err(e @ runledger_projection::Error::Store(store::Error::Damaged { .. })) if !verify => {
            let Some(aside) = store::set_aside_snapshots(&config.data_dir)? else {
                return Err(e.into());
            };
            eprintln!(
                "runledger: {e}\nrunledger: moved sled's snapshot to {}; recovering from sled's \
                 log alone",
                aside.display()
            );
            runledger_projection::open(&config.data_dir, &options)?
        }
        other => other?,
    };
    let lost = store.lost_writes();
    if let Some(lost) = lost {
        eprintln!("{}", lost_warning(&config.data_dir, lost));
    }
    let started = Instant::now();
    if verify {
        let schedules = schedule_logs::verify_logs(&store);
        for d in &schedules.differences {
            println!("{d}");
        }
        for p in &schedules.pending {
            eprintln!("runledger: note: {p}; the next start makes it");
        }
        eprintln!(
            "verified {} events of {} schedules: {} differences",
            schedules.events,
            schedules.schedules,
            schedules.differences.len()
        );
        let (runs, events, differences) = index.verify(&store, scratch_cache_bytes)?;
        let secs = started.elapsed().as_secs_f64();
        for d in &differences {
            println!("{d}");
        }
        eprintln!(
            "verified {events} events of {runs} runs in {secs:.2} s ({:.0} events/s): {} differences",
            events as f64 / secs.max(1e-9),
            differences.len()
        );
        if !differences.is_empty() {
            bail!("the read index differs from the log; run `runledger replay` to rebuild it");
        }
        if !schedules.differences.is_empty() {
            bail!("the schedules' logs are damaged or incomplete (see above); restore a backup");
        }
    } else {
        let rebuilt = index.rebuild(&store)?;
        // This commit's number passes the acknowledged one, so the next open is clean.
        store.sync_blocking()?;
        if lost.is_some() {
            eprintln!("runledger: accepted the loss; the server will serve what is left");
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "rebuilt the read index from {} events of {} runs in {secs:.2} s ({:.0} events/s): \
             {:.2} s to build it, {:.2} s to drop the previous one",
            rebuilt.events,
            rebuilt.runs,
            rebuilt.events as f64 / secs.max(1e-9),
            rebuilt.build.as_secs_f64(),
            rebuilt.drop.as_secs_f64(),
        );
        // sled snapshots its page table only when it opens a database, so the next start would
        // scan everything the rebuild wrote (at 1M runs, seconds: 2.6-6.3 s before the server
        // was ready, against under 1 s). Closed, then opened once more, it snapshots now.
        drop((index, store));
        let started = Instant::now();
        match store::refresh_snapshot(&config.data_dir) {
            Ok(()) => eprintln!(
                "wrote sled's snapshot of its page table in {:.2} s, so that the next start \
                 need not scan what the rebuild wrote",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!(
                "runledger: warning: could not write sled's snapshot ({e}); the next start \
                 scans what the rebuild wrote"
            ),
        }
    }
    Ok(())
}
