//! The command line's shape: the clap definitions of `runledger`, its commands, their flags
//! and help texts, and the exit codes `--help` lists. Parsing only: what a command does lives
//! in its own module (`keys`, `replay`, `runs`, …), and nothing here reads a file or the store.

use runledger_domain::DEFAULT_TEAM;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

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
    /// Query the audit trail of a running server: run events across runs, newest first (the
    /// `events` subcommand, also the default; a key sees its team's runs, an admin key all),
    /// or with --admin the admin audit log (admin keys only).
    #[command(after_help = EXIT_CODES, args_conflicts_with_subcommands = true)]
    Audit {
        #[command(subcommand)]
        command: Option<AuditCmd>,
        #[command(flatten)]
        events: AuditEventsArgs,
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
        /// Write one run's bundle instead (docs/backup.md): its events with their hash chain
        /// and seal proof, state, transcript, attachments and artifacts, in one file.
        #[arg(long, value_name = "ID", conflicts_with = "with_keys")]
        run: Option<String>,
    },
    /// Restore an export into a new or empty data directory (all or nothing; never merges).
    Import {
        /// The export to read; `-` or nothing reads stdin.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
        /// Import an export whose hash chains or seals do not verify (refused otherwise), and
        /// record in the store that it was; `runledger verify` reports it from then on.
        #[arg(long)]
        unverified: bool,
        /// Add the one run of this bundle (`export --run`) to the existing store instead.
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        run: Option<PathBuf>,
    },
    /// Serve one run's bundle read-only (the API's reads and the console; no agents, no
    /// writes) from a private temporary data directory, removed when it ends (Ctrl-C).
    Inspect {
        /// The bundle (`export --run`, or `GET /api/v1/agent/runs/{id}/export`).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Address to listen on (default 127.0.0.1:0, a free port).
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Check the hash chains and seals of a stopped store, of an export (--export), or one
    /// run's proof offline (--proof with --pubkey); names the first run and event that does
    /// not verify and exits 1.
    Verify {
        /// Check this export file instead of the store.
        #[arg(long, value_name = "FILE", conflicts_with = "proof")]
        export: Option<PathBuf>,
        /// Check this proof (the answer of GET /api/v1/agent/runs/{id}/proof) offline.
        #[arg(long, value_name = "FILE", requires = "pubkey")]
        proof: Option<PathBuf>,
        /// The instance's seal public key (`runledger audit pubkey`): 64 hex digits or base64.
        #[arg(long, value_name = "KEY", requires = "proof")]
        pubkey: Option<String>,
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
        /// Fold every run's events anew with this build and compare each run's state with the
        /// one the store recorded, printing each difference as run, field, stored value,
        /// rebuilt value (exit 1 when any); the check after an upgrade. Changes nothing.
        #[arg(long, conflicts_with = "verify")]
        check: bool,
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
pub enum AuditCmd {
    /// Run events across runs, newest first (what `runledger audit` does without a
    /// subcommand).
    Events(AuditEventsArgs),
    /// Print the public half of the instance's seal key (Ed25519): 64 hex digits, or base64
    /// with --base64. Reads the data directory; works while the server runs.
    Pubkey {
        #[arg(long)]
        base64: bool,
    },
}

/// The filters of `runledger audit [events]` (`GET /api/v1/audit/events`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct AuditEventsArgs {
    /// The admin audit log instead (keys, teams, secrets, the server's starts and stops; admin
    /// keys only): --type (as KeyCreated), --actor, --since, --until and --json apply.
    #[arg(long)]
    pub admin: bool,
    /// Only events of this type (Created, Started, Cancelled, Failed, …); repeatable.
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Only events caused by this API key id.
    #[arg(long, value_name = "KEY_ID")]
    pub actor: Option<String>,
    /// Only this run's events.
    #[arg(long = "run", value_name = "RUN_ID")]
    pub run_id: Option<String>,
    /// Only this team's runs (an admin key's filter).
    #[arg(long, value_name = "TEAM")]
    pub team: Option<String>,
    /// Only events at or after this time: RFC 3339, or an age such as 30m, 12h, 7d.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only events before this time: RFC 3339, or an age such as 30m, 12h, 7d.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Events on the page, 1 to 1000 (the server's default: 100).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// The page after a previous answer's next cursor (printed on stderr).
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Keep following: print each new matching event as the server records it, until
    /// interrupted.
    #[arg(long)]
    pub follow: bool,
    /// The API's JSON: the page, or with --follow one event per line.
    #[arg(long)]
    pub json: bool,
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
        /// The run as it was right after its event with this seq (`runs events` numbers them).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
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
    /// Start a new run from the snapshot execution K of a run left (its workspace, agent home
    /// and CLI session), its agent continuing the session with MESSAGE; prints the new run's id.
    Fork {
        run_id: String,
        /// The execution whose end the fork starts from (1 is the first).
        #[arg(long, value_name = "K")]
        after: u32,
        #[arg(long, value_name = "MESSAGE")]
        message: String,
        /// Stream the new run's transcript until it ends; exits 0, 1 or 2 as it SUCCEEDED,
        /// FAILED or was CANCELLED.
        #[arg(short, long)]
        follow: bool,
    },
    /// Cancel a run, and the unfinished runs it spawned at any depth.
    Cancel {
        run_id: String,
        /// Leave the runs it spawned running.
        #[arg(long)]
        no_cascade: bool,
    },
    /// Rerun a run: a new run with its prompt, configuration, attachments and environment, its
    /// repositories at the commits its first execution recorded; the new run's id is printed.
    Rerun {
        run_id: String,
        /// Check the repositories out at their refs as they are now instead.
        #[arg(long)]
        unpinned: bool,
        /// Follow the rerun's transcript until it ends; exits 0, 1 or 2 as it SUCCEEDED,
        /// FAILED or was CANCELLED.
        #[arg(short, long)]
        follow: bool,
    },
    /// Print a run and every run it spawned, at any depth, as a tree: each run's id, state
    /// and title, children under their parent, oldest first.
    Tree {
        run_id: String,
        /// The run and its descendants as the API answers them, as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's steps: the agent's messages, each tool call with its exit status,
    /// denials, usage per turn, follow-ups; a command agent's output lines.
    Steps {
        run_id: String,
        /// Each step as the API's JSON, one a line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a run's session links: every link handed out so far stops opening its page; the
    /// new link is printed.
    RevokeLink { run_id: String },
    /// Print a run's event history (its audit trail) from the server.
    Events {
        run_id: String,
        /// Each event with the fields of the run it changed (`GET …/states`).
        #[arg(long)]
        states: bool,
        /// The history as one JSON document, as the API answers it.
        #[arg(long)]
        json: bool,
    },
    /// Print what a run's executions changed in its workspace: each changed file with its
    /// status and lines added and removed, and the total; with `--patch`, the run's patch
    /// (one unified diff that `git apply` applies to the base commit) on stdout.
    Changes {
        run_id: String,
        /// The run's patch instead of the summary.
        #[arg(long)]
        patch: bool,
        /// The summary as the API answers it (JSON).
        #[arg(long, conflicts_with = "patch")]
        json: bool,
    },
    /// Compare two runs' histories side by side, aligned by seq: each pair's event types and
    /// the run's fields that differ in the states after them. Exits 0 when both runs exist.
    Diff {
        run_a: String,
        run_b: String,
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
