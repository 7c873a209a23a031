//! The service configuration: embedded defaults, the TOML file of SPEC §6, and the command-line
//! overrides. Parsing is strict (unknown fields are errors) so that a typo in a production
//! config stops start-up with the file, line and field instead of being silently ignored.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use runledger_domain::harness::{
    AgentPermissions, Harness, Limits, OnNodeFailure, RunsOn, Sandbox, Slurm,
};

mod access;
mod range;
pub mod tls;
pub use access::{DEFAULT_SESSION_LINK_TTL_SECS, MIN_METRICS_TOKEN_BYTES};
use range::Range;

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
pub const DEFAULT_DATA_DIR: &str = "./runledger-data";
/// Per-key rate limit when the file sets none: far above what a person or a well-behaved
/// script sends, low enough that one runaway client loop cannot take the whole server.
pub const DEFAULT_RATE_PER_SEC: f64 = 100.0;
/// The default of `server.cache_mb`: sled's page cache, which is what the process keeps of a load once the load is over. A larger
/// cache holds more of the index and event pages in memory; a smaller one keeps the idle
/// server's memory low after a load. Reads of the index are dominated by its blocks, not by
/// cache misses, so the default sits at the small end (figures in `docs/performance.md`).
pub const DEFAULT_CACHE_MB: u64 = 16;
/// The largest `cache_mb` accepted (1 TiB); sled needs at least 256 bytes, so the least is 1.
pub const MAX_CACHE_MB: u64 = 1 << 20;
pub const DEFAULT_BURST: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// One `[[environments]]` table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvironmentFile {
    id: String,
    harness: Harness,
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    setup: Vec<String>,
    model_id: Option<String>,
    max_concurrent: Option<usize>,
    max_runtime_secs: Option<u64>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    workspace_root: Option<PathBuf>,
    demo_duration_ms: Option<u64>,
    sandbox: Option<Sandbox>,
    network: Option<bool>,
    #[serde(default)]
    inherit_env: Vec<String>,
    #[serde(default)]
    secrets: Vec<String>,
    memory_mb: Option<u64>,
    pids_max: Option<u64>,
    cpu_percent: Option<u64>,
    #[serde(default)]
    repos: Vec<RepoFile>,
    agent_permissions: Option<AgentPermissions>,
    model_base_url: Option<String>,
    teams: Option<Vec<String>>,
    max_queued: Option<usize>,
    runs_on: Option<RunsOn>,
    slurm: Option<SlurmFile>,
    on_node_failure: Option<OnNodeFailure>,
}

/// `[environments.slurm]` as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlurmFile {
    partition: Option<String>,
    constraint: Option<String>,
    account: Option<String>,
    qos: Option<String>,
    gres: Option<String>,
    #[serde(default)]
    extra_args: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoFile {
    url: String,
    #[serde(rename = "ref")]
    reference: Option<String>,
    path: Option<PathBuf>,
}

/// A repository every run of an environment starts with, checked out in its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub url: String,
    /// A branch, tag or commit; `None`: the remote's default branch.
    pub reference: Option<String>,
    /// Relative to the workspace, without `..`; `.` is the workspace itself.
    pub path: PathBuf,
}

/// Where a secret's value comes from; the file never holds the value itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum SecretSource {
    File(PathBuf),
    Env(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    bind: Option<String>,
    public_url: Option<String>,
    data_dir: Option<PathBuf>,
    allow_non_loopback: Option<bool>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    cache_mb: Option<u64>,
    stop_grace_secs: Option<u64>,
    agent_user: Option<String>,
    agent_uids: Option<String>,
    disk_reserve_mb: Option<u64>,
    body_timeout_secs: Option<u64>,
    transcript_max_mb: Option<u64>,
    metrics_token: Option<String>,
    session_link_ttl_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    rate_limit: Option<bool>,
    rate_per_sec: Option<f64>,
    burst: Option<u32>,
    max_queued_per_team: Option<usize>,
    artifact_file_mb: Option<u64>,
    artifact_screenshot_mb: Option<u64>,
    artifact_plan_kb: Option<u64>,
    artifact_report_line_kb: Option<u64>,
    artifact_run_total_mb: Option<u64>,
    artifact_link_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    server: ServerFile,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    environments: Vec<EnvironmentFile>,
    #[serde(default)]
    secrets: BTreeMap<String, SecretSource>,
    #[serde(default)]
    prices: PricesFile,
    #[serde(default)]
    webhooks: Vec<WebhookFile>,
    #[serde(default)]
    schedules: SchedulesFile,
}

/// The most schedules a team may have unless `schedules.max_per_team` says otherwise.
pub const DEFAULT_MAX_SCHEDULES_PER_TEAM: usize = 10_000;

/// `[schedules]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchedulesFile {
    /// The test mode: cron expressions may have a sixth, leading seconds field.
    seconds: Option<bool>,
    max_per_team: Option<usize>,
}

/// One `[[webhooks]]` table as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookFile {
    name: String,
    url: String,
    secret: Option<String>,
    secret_file: Option<PathBuf>,
    events: Option<Vec<String>>,
    #[serde(default)]
    allow_private: bool,
    teams: Option<Vec<String>>,
    timeout_secs: Option<u64>,
    retry_initial_ms: Option<u64>,
    max_in_flight: Option<usize>,
}

/// How long one delivery attempt may take when `timeout_secs` is not set.
pub const DEFAULT_WEBHOOK_TIMEOUT_SECS: u64 = 15;
/// The first retry's delay when `retry_initial_ms` is not set (`docs/webhooks.md`).
pub const DEFAULT_WEBHOOK_RETRY_INITIAL_MS: u64 = 5_000;
/// Attempts of one subscription in flight together when `max_in_flight` is not set.
pub const DEFAULT_WEBHOOK_MAX_IN_FLIGHT: usize = 8;

/// A webhook subscription (`[[webhooks]]`), defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The subscription's durable identity: in its deliveries' ids, their records and metrics.
    pub name: String,
    /// `http` or `https`, with a host and no credentials.
    pub url: url::Url,
    /// The HMAC key: a `whsec_` secret decoded from base64, any other value as its bytes.
    pub key: WebhookKey,
    /// The topics delivered, each once, in `Topic::ALL` order.
    pub events: Vec<runledger_domain::Topic>,
    /// Whether the URL may resolve to a loopback, private or link-local address.
    pub allow_private: bool,
    /// Only runs of these teams; empty: every team.
    pub teams: Vec<String>,
    /// One attempt's limit, connection to the end of the answer.
    pub timeout: std::time::Duration,
    /// The delay before the first retry; every later one doubles it (capped).
    pub retry_initial: std::time::Duration,
    /// Attempts of this subscription in flight together.
    pub max_in_flight: usize,
}

/// A webhook's signing key. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookKey(pub Vec<u8>);

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookKey(…)")
    }
}

/// `[prices]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricesFile {
    compute_per_cpu_hour: Option<f64>,
    #[serde(default)]
    models: BTreeMap<String, ModelPricesFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelPricesFile {
    input_per_mtok: f64,
    output_per_mtok: f64,
    cached_input_per_mtok: Option<f64>,
}

/// The highest price accepted, in US dollars per million tokens or per CPU hour: far above any
/// real one, low enough that no token count a CLI may report overflows a cost.
pub const MAX_PRICE_USD: f64 = 1_000.0;

/// What usage costs (`[prices]`), in US dollars. Costs are computed with the prices in force
/// when an execution's usage is recorded, and stored with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    /// Per hour of CPU time of an execution's process tree; `None`: no `compute_cost`.
    pub compute_per_cpu_hour: Option<f64>,
    /// By model id, as the CLI reports it (or as the run's `model_id` names it).
    pub models: BTreeMap<String, ModelPrices>,
}

/// The token prices of one model, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrices {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// For prompt tokens read from the provider's cache; `None`: the input price.
    pub cached_input_per_mtok: Option<f64>,
}

fn prices(file: PricesFile) -> Result<Prices, Error> {
    let price = Range::between(0.0, MAX_PRICE_USD, "a price", "US dollars");
    let check = |field: String, value: f64| price.check(&field, value);
    let compute_per_cpu_hour = file
        .compute_per_cpu_hour
        .map(|v| check("prices.compute_per_cpu_hour".into(), v))
        .transpose()?;
    let mut models = BTreeMap::new();
    for (id, m) in file.models {
        let field = |name: &str| format!("prices.models.{id:?}.{name}");
        if id.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "prices.models: a model id must not be empty ({id:?})"
            )));
        }
        let prices = ModelPrices {
            input_per_mtok: check(field("input_per_mtok"), m.input_per_mtok)?,
            output_per_mtok: check(field("output_per_mtok"), m.output_per_mtok)?,
            cached_input_per_mtok: m
                .cached_input_per_mtok
                .map(|v| check(field("cached_input_per_mtok"), v))
                .transpose()?,
        };
        models.insert(id, prices);
    }
    Ok(Prices {
        compute_per_cpu_hour,
        models,
    })
}

/// A secret's value. Its `Debug` never shows the value, so neither can a log line or an error
/// that formats the configuration.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(…)")
    }
}

/// One entry of `[secrets]`, read at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub value: SecretValue,
    /// The file it was read from, which the sandbox hides from agents.
    pub file: Option<PathBuf>,
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
}

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
        }
    }
}

/// The token bucket every API key gets: `burst` requests at once, refilled at `per_sec`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Positive and finite.
    pub per_sec: f64,
    /// At least 1.
    pub burst: u32,
}

/// TLS for the listener: the files it came from and the configuration loaded from them.
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Loaded and checked when the configuration is, so that a bad file stops start-up with the
    /// field and line that name it rather than failing the first handshake.
    pub server_config: Arc<rustls::ServerConfig>,
}

/// The resolved configuration of the service.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: SocketAddr,
    /// Base of `session_link`s; when not configured, the address the server is bound to.
    pub public_url: Option<String>,
    /// `None`: plain HTTP.
    pub tls: Option<Tls>,
    pub data_dir: PathBuf,
    pub cache_bytes: u64,
    /// Time an agent's process tree gets between SIGTERM and SIGKILL when it is stopped.
    pub stop_grace_secs: u64,
    /// The space reserve of the data directory's filesystem, in bytes (0: none). Below it, new
    /// work is refused; a ballast file of this size keeps room for recording how the runs in
    /// progress end (`store::space`).
    pub disk_reserve_bytes: u64,
    /// Per-key request limit on `/api/v1`; `None` when `limits.rate_limit = false`.
    pub rate_limit: Option<RateLimit>,
    /// Most runs of one team that may wait in the queues together (`limits.max_queued_per_team`).
    pub max_queued_per_team: usize,
    /// The first environment is the default.
    pub environments: Vec<Environment>,
    /// Where the configuration came from, for `GET /agent/environments`' `last_updated`.
    pub loaded_at: runledger_domain::Timestamp,
    /// The file the configuration was read from, which the sandbox hides from agents.
    pub file: Option<PathBuf>,
    /// `[secrets]`, by name, values read.
    pub secrets: BTreeMap<String, Secret>,
    /// The one named user every run's agents run as when the server runs as root
    /// (`server.agent_user`); `None`: each run gets a uid of its own from `agent_uids`.
    pub agent_user: Option<String>,
    /// The uids a root server gives its runs' agents, one per run (`server.agent_uids`).
    pub agent_uids: runledger_domain::uid_range::UidRange,
    /// `[prices]`: what inference and compute cost.
    pub prices: Prices,
    /// How long a request's body may take to arrive once its head has (`server.body_timeout_secs`);
    /// a slower one is answered 408 and its connection closed.
    pub body_timeout: std::time::Duration,
    /// The size of a run's transcript after which its output is dropped
    /// (`server.transcript_max_mb`), in bytes.
    pub transcript_max_bytes: u64,
    /// What agents may report as artifacts, and how long a download link lives (`[limits]`).
    pub artifacts: ArtifactLimits,
    /// `[[webhooks]]`: who is told about runs' changes.
    pub webhooks: Vec<Webhook>,
    /// `schedules.seconds`: cron expressions may have a leading seconds field. A test mode
    /// (a schedule then fires every few seconds); off by default.
    pub schedule_seconds: bool,
    /// `schedules.max_per_team`: the most schedules one team may have (default 10,000).
    pub max_schedules_per_team: usize,
    /// The bearer token of `/metrics` (`server.metrics_token`, a `[secrets]` entry); `None`:
    /// only admin keys read it.
    pub metrics_token: Option<SecretValue>,
    /// How long a run's `session_link` opens its page (`server.session_link_ttl_secs`).
    pub session_link_ttl_secs: u64,
}

/// The sizes of what an agent may report through `RUNLEDGER_REPORT` (`exec::report`), and how
/// long an artifact's download link is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Most bytes of one reported file (`limits.artifact_file_mb`, default 100 MiB).
    pub file_bytes: u64,
    /// Most bytes of one screenshot (`limits.artifact_screenshot_mb`, default 20 MiB).
    pub screenshot_bytes: u64,
    /// Most bytes of one plan's Markdown (`limits.artifact_plan_kb`, default 1 MiB).
    pub plan_bytes: u64,
    /// Most bytes of one line of the report file (`limits.artifact_report_line_kb`, default
    /// 2 MiB); a longer line is skipped unread.
    pub line_bytes: u64,
    /// Most bytes of all the artifacts of one run together (`limits.artifact_run_total_mb`,
    /// default 1 GiB).
    pub run_total_bytes: u64,
    /// How long a `download_url` is valid (`limits.artifact_link_secs`, default 900 s).
    pub link_secs: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        ArtifactLimits {
            file_bytes: 100 << 20,
            screenshot_bytes: 20 << 20,
            plan_bytes: 1 << 20,
            line_bytes: 2 << 20,
            run_total_bytes: 1 << 30,
            link_secs: 900,
        }
    }
}

/// `[limits]`' artifact sizes; each must be at least 1 (0 would refuse every report).
fn artifact_limits(limits: &LimitsFile) -> Result<ArtifactLimits, Error> {
    let d = ArtifactLimits::default();
    let size = |name: &str, given: Option<u64>, unit: u32, default: u64| match given {
        None => Ok(default),
        Some(n) => Range::at_least(1)
            .check(&format!("limits.{name}"), n)?
            .checked_shl(unit)
            .filter(|b| b >> unit == n)
            .ok_or_else(|| Error::Invalid(format!("limits.{name}: {n} is too large"))),
    };
    Ok(ArtifactLimits {
        file_bytes: size(
            "artifact_file_mb",
            limits.artifact_file_mb,
            20,
            d.file_bytes,
        )?,
        screenshot_bytes: size(
            "artifact_screenshot_mb",
            limits.artifact_screenshot_mb,
            20,
            d.screenshot_bytes,
        )?,
        plan_bytes: size(
            "artifact_plan_kb",
            limits.artifact_plan_kb,
            10,
            d.plan_bytes,
        )?,
        line_bytes: size(
            "artifact_report_line_kb",
            limits.artifact_report_line_kb,
            10,
            d.line_bytes,
        )?,
        run_total_bytes: size(
            "artifact_run_total_mb",
            limits.artifact_run_total_mb,
            20,
            d.run_total_bytes,
        )?,
        link_secs: size(
            "artifact_link_secs",
            limits.artifact_link_secs,
            0,
            d.link_secs,
        )?,
    })
}

/// Command-line overrides; each wins over the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub bind: Option<String>,
}

impl Config {
    /// The URL clients reach the server at: `public_url`, or the bind address.
    pub fn base_url(&self) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("{}://{}", self.scheme(), self.bind))
    }

    /// `https` when TLS is configured, otherwise `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    pub fn environment(&self, id: &str) -> Option<&Environment> {
        self.environments.iter().find(|e| e.id == id)
    }

    pub fn default_environment(&self) -> &Environment {
        // `load` guarantees at least one environment.
        &self.environments[0]
    }

    /// Loads the configuration: the file if one is given, then the overrides.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, Error> {
        let (parsed, text) = match file {
            None => (ConfigFile::default(), String::new()),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                (parse(path, &text)?, text)
            }
        };
        let loaded_at = file
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| runledger_domain::Timestamp(d.as_millis() as u64))
            .unwrap_or_else(runledger_base::clock::now);
        let resolved = resolve(parsed, overrides, loaded_at).map(|mut config| {
            config.file = file.and_then(|p| std::path::absolute(p).ok());
            config
        });
        resolved.map_err(|e| match (e, file) {
            // A value that is well-formed TOML but not acceptable: name the file and the line.
            // (A bad --bind is the command line's, not the file's.)
            (Error::Invalid(message), Some(path))
                if !(overrides.bind.is_some() && message.starts_with("server.bind")) =>
            {
                Error::Parse {
                    path: path.to_path_buf(),
                    message: match locate(&text, &message) {
                        Some(line) => format!("line {line}: {message}"),
                        None => message,
                    },
                }
            }
            (e, _) => e,
        })
    }
}

/// The line of the field a validation message starts with (`server.bind: …`, `limits.burst: …`,
/// `environments[2].command: …`), if the file spells it out.
fn locate(text: &str, message: &str) -> Option<usize> {
    let field = message.split(": ").next()?;
    let lines: Vec<&str> = text.lines().collect();
    let header = |l: &str| l.trim_start().starts_with('[');
    // A field of a nested table (`prices.models."m".input_per_mtok`): its own header, if the
    // file spells it out.
    if let Some((table, key)) = field.rsplit_once('.').filter(|(t, _)| t.contains('.')) {
        let wanted = format!("[{table}]");
        if let Some(start) = lines.iter().position(|l| l.trim() == wanted) {
            let key_line = lines[start + 1..]
                .iter()
                .take_while(|l| !header(l))
                .position(|l| {
                    l.trim_start()
                        .strip_prefix(key)
                        .is_some_and(|rest| rest.trim_start().starts_with('='))
                })
                .map(|i| start + 1 + i);
            return Some(key_line.unwrap_or(start) + 1);
        }
    }
    let (table, key) = field.split_once('.')?;
    // An element of an array field (`events[0]`) is on the array's line.
    let key = key.split('[').next().unwrap_or(key);
    // An array of tables (`environments[2]`, `webhooks[0]`): its n-th header.
    let start = match table.strip_suffix(']').and_then(|t| t.split_once('[')) {
        None => {
            let header = format!("[{table}]");
            lines.iter().position(|l| l.trim() == header)?
        }
        Some((array, index)) => {
            let index: usize = index.parse().ok()?;
            let header = format!("[[{array}]]");
            lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.trim() == header)
                .nth(index)?
                .0
        }
    };
    let key_line = lines[start + 1..]
        .iter()
        .take_while(|l| !header(l))
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| start + 1 + i);
    Some(key_line.unwrap_or(start) + 1)
}

fn parse(path: &Path, text: &str) -> Result<ConfigFile, Error> {
    toml::from_str(text).map_err(|e| {
        let location = e
            .span()
            .map(|span| {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}: ")
            })
            .unwrap_or_default();
        Error::Parse {
            path: path.to_path_buf(),
            message: format!("{location}{}", e.message()),
        }
    })
}

fn resolve(
    file: ConfigFile,
    overrides: &Overrides,
    loaded_at: runledger_domain::Timestamp,
) -> Result<Config, Error> {
    let bind = bind_address(overrides, file.server.bind)?;
    let tls = tls(file.server.tls_cert, file.server.tls_key)?;
    plain_http_only_on_loopback(bind, tls.is_some(), file.server.allow_non_loopback)?;
    let public_url = file
        .server
        .public_url
        .map(|u| u.trim_end_matches('/').to_string());
    let data_dir = data_dir(overrides, file.server.data_dir)?;
    let secrets = read_secrets(file.secrets)?;
    let mut environments = Vec::new();
    for (i, env) in file.environments.into_iter().enumerate() {
        let resolved = environment(&format!("environments[{i}]"), env, &secrets, &environments)?;
        environments.push(resolved);
    }
    if environments.is_empty() {
        environments.push(Environment::demo());
    }
    let rate_limit = rate_limit(&file.limits)?;
    let prices = prices(file.prices)?;
    let mut webhooks: Vec<Webhook> = Vec::new();
    for (i, hook) in file.webhooks.into_iter().enumerate() {
        let resolved = webhook(&format!("webhooks[{i}]"), hook, &secrets)?;
        if webhooks.iter().any(|w| w.name == resolved.name) {
            return Err(Error::Invalid(format!(
                "webhooks[{i}].name: {:?} is used by another webhook; names must be unique",
                resolved.name
            )));
        }
        webhooks.push(resolved);
    }
    let metrics_token = access::metrics_token(file.server.metrics_token, &secrets)?;
    Ok(Config {
        bind,
        public_url,
        tls,
        data_dir,
        cache_bytes: cache_bytes(file.server.cache_mb)?,
        stop_grace_secs: file.server.stop_grace_secs.unwrap_or(5),
        disk_reserve_bytes: disk_reserve_bytes(file.server.disk_reserve_mb)?,
        rate_limit,
        max_queued_per_team: Range::at_least(1).or_default(
            "limits.max_queued_per_team",
            file.limits.max_queued_per_team,
            DEFAULT_MAX_QUEUED,
        )?,
        environments,
        loaded_at,
        file: None,
        secrets,
        agent_user: agent_user(file.server.agent_user)?,
        agent_uids: match file.server.agent_uids {
            None => runledger_domain::uid_range::UidRange::default(),
            Some(text) => text
                .parse()
                .map_err(|e: runledger_domain::uid_range::Error| Error::Invalid(e.to_string()))?,
        },
        prices,
        body_timeout: body_timeout(file.server.body_timeout_secs)?,
        transcript_max_bytes: transcript_max_bytes(file.server.transcript_max_mb)?,
        artifacts: artifact_limits(&file.limits)?,
        webhooks,
        metrics_token,
        session_link_ttl_secs: access::session_link_ttl_secs(file.server.session_link_ttl_secs)?,
        schedule_seconds: file.schedules.seconds.unwrap_or(false),
        max_schedules_per_team: Range::between(1, 1_000_000, "a number", "").or_default(
            "schedules.max_per_team",
            file.schedules.max_per_team,
            DEFAULT_MAX_SCHEDULES_PER_TEAM,
        )?,
    })
}

/// The prefix of a Standard Webhooks secret, whose rest is the key in base64.
const WHSEC_PREFIX: &str = "whsec_";

/// The fewest bytes a webhook's key may have: the Standard Webhooks specification asks for
/// 24 to 64 random bytes.
const MIN_WEBHOOK_KEY_BYTES: usize = 16;

/// The key a webhook secret stands for: `whsec_<base64>` decoded as the Standard Webhooks
/// specification says, any other value taken as its UTF-8 bytes.
pub fn webhook_key(secret: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let key = match secret.strip_prefix(WHSEC_PREFIX) {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("the part after {WHSEC_PREFIX} is not base64 ({e})"))?,
        None => secret.as_bytes().to_vec(),
    };
    if key.len() < MIN_WEBHOOK_KEY_BYTES {
        return Err(format!(
            "the key has {} bytes; give at least {MIN_WEBHOOK_KEY_BYTES} (24 to 64 random bytes \
             as whsec_<base64> is what the Standard Webhooks specification asks for)",
            key.len()
        ));
    }
    Ok(key)
}

/// One `[[webhooks]]` table (`at` names it in errors), defaults applied.
fn webhook(
    at: &str,
    hook: WebhookFile,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Webhook, Error> {
    let invalid = |field: &str, message: String| Error::Invalid(format!("{at}.{field}: {message}"));
    if !runledger_domain::valid_team_name(&hook.name) {
        return Err(invalid(
            "name",
            format!(
                "{:?} is not a webhook name ({})",
                hook.name,
                runledger_domain::TEAM_NAME_RULE
            ),
        ));
    }
    let url = url::Url::parse(&hook.url)
        .map_err(|e| invalid("url", format!("{:?} is not a URL ({e})", hook.url)))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(
            "url",
            format!(
                "{:?} is not an http:// or https:// URL with a host",
                hook.url
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "url",
            "must not carry credentials (they would be sent in clear in every log line that \
             names the URL); authenticate deliveries by their signature"
                .into(),
        ));
    }
    let secret =
        match (hook.secret, hook.secret_file) {
            (Some(name), None) => match secrets.get(&name) {
                Some(secret) => secret.value.expose().to_string(),
                None => {
                    return Err(invalid(
                        "secret",
                        format!("{name:?} is not defined in [secrets]"),
                    ))
                }
            },
            (None, Some(path)) => {
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    invalid(
                        "secret_file",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                text.trim().to_string()
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "secret",
                    "give either secret (a [secrets] entry) or secret_file, not both".into(),
                ))
            }
            (None, None) => return Err(invalid(
                "secret",
                "missing: every delivery is signed; name a [secrets] entry (or set secret_file)"
                    .into(),
            )),
        };
    let key = webhook_key(&secret).map_err(|m| invalid("secret", m))?;
    let events = match hook.events {
        None => runledger_domain::Topic::STATE_CHANGES.to_vec(),
        Some(names) if names.is_empty() => {
            return Err(invalid(
                "events",
                "an empty list would deliver nothing; leave `events` out for every change of \
                 state"
                    .into(),
            ))
        }
        Some(names) => {
            let mut events = Vec::new();
            for (i, name) in names.iter().enumerate() {
                let topic = runledger_domain::Topic::parse(name).ok_or_else(|| {
                    let known: Vec<&str> = runledger_domain::Topic::ALL
                        .iter()
                        .map(|t| t.as_str())
                        .collect();
                    invalid(
                        &format!("events[{i}]"),
                        format!("{name:?} is not an event; known: {}", known.join(", ")),
                    )
                })?;
                if !events.contains(&topic) {
                    events.push(topic);
                }
            }
            events.sort();
            events
        }
    };
    if hook.teams.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(
            "teams",
            "an empty list would deliver nothing; leave `teams` out for the runs of every team"
                .into(),
        ));
    }
    let teams = teams(at, hook.teams)?;
    let timeout_secs = Range::between(1, 300, "a time", "seconds").or_default(
        &format!("{at}.timeout_secs"),
        hook.timeout_secs,
        DEFAULT_WEBHOOK_TIMEOUT_SECS,
    )?;
    let retry_initial_ms = Range::between(1, 3_600_000, "a time", "milliseconds").or_default(
        &format!("{at}.retry_initial_ms"),
        hook.retry_initial_ms,
        DEFAULT_WEBHOOK_RETRY_INITIAL_MS,
    )?;
    let max_in_flight = Range::between(1, 256, "a number", "").or_default(
        &format!("{at}.max_in_flight"),
        hook.max_in_flight,
        DEFAULT_WEBHOOK_MAX_IN_FLIGHT,
    )?;
    Ok(Webhook {
        name: hook.name,
        url,
        key: WebhookKey(key),
        events,
        allow_private: hook.allow_private,
        teams,
        timeout: std::time::Duration::from_secs(timeout_secs),
        retry_initial: std::time::Duration::from_millis(retry_initial_ms),
        max_in_flight,
    })
}

fn bind_address(overrides: &Overrides, file: Option<String>) -> Result<SocketAddr, Error> {
    let bind_text = overrides
        .bind
        .clone()
        .or(file)
        .unwrap_or_else(|| DEFAULT_BIND.to_string());
    bind_text.parse().map_err(|_| {
        Error::Invalid(format!(
            "server.bind: {bind_text:?} is not an address like 127.0.0.1:8080"
        ))
    })
}

/// `server.tls_cert` and `server.tls_key`: both or neither, loaded now so that a bad file
/// names its field.
fn tls(cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Option<Tls>, Error> {
    Ok(match (cert, key) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(Error::Invalid(
                "server.tls_key: missing; TLS needs the private key as well as server.tls_cert"
                    .into(),
            ))
        }
        (None, Some(_)) => return Err(Error::Invalid(
            "server.tls_cert: missing; TLS needs the certificate chain as well as server.tls_key"
                .into(),
        )),
        (Some(cert), Some(key)) => {
            let absolute = |field: &str, path: PathBuf| {
                std::path::absolute(&path)
                    .map_err(|e| Error::Invalid(format!("server.{field}: {}: {e}", path.display())))
            };
            let (cert, key) = (absolute("tls_cert", cert)?, absolute("tls_key", key)?);
            let server_config = crate::tls::load(&cert, &key).map_err(|e| match e {
                crate::tls::Error::Cert(m) => Error::Invalid(format!("server.tls_cert: {m}")),
                crate::tls::Error::Key(m) => Error::Invalid(format!("server.tls_key: {m}")),
            })?;
            Some(Tls {
                cert,
                key,
                server_config: Arc::new(server_config),
            })
        }
    })
}

/// Plain HTTP on a reachable address would carry API keys and transcripts in clear text.
fn plain_http_only_on_loopback(
    bind: SocketAddr,
    tls: bool,
    allow_non_loopback: Option<bool>,
) -> Result<(), Error> {
    if !tls && !bind.ip().is_loopback() && !allow_non_loopback.unwrap_or(false) {
        return Err(Error::Invalid(format!(
            "server.bind: {bind} is not a loopback address, and plain HTTP is only served on \
             loopback. Either serve HTTPS (set server.tls_cert and server.tls_key to PEM files), \
             or, behind a TLS-terminating proxy, set server.allow_non_loopback = true"
        )));
    }
    Ok(())
}

fn data_dir(overrides: &Overrides, file: Option<PathBuf>) -> Result<PathBuf, Error> {
    let data_dir = overrides
        .data_dir
        .clone()
        .or(file)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    // Agents run in their workspaces, so every path handed to them must be absolute.
    std::path::absolute(&data_dir)
        .map_err(|e| Error::Invalid(format!("server.data_dir: {}: {e}", data_dir.display())))
}

fn agent_user(user: Option<String>) -> Result<Option<String>, Error> {
    match user {
        Some(user) if user.is_empty() => Err(Error::Invalid(
            "server.agent_user: must name a user (or be left out for a uid of each run's own \
             from server.agent_uids)"
                .into(),
        )),
        user => Ok(user),
    }
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
    })
}

/// The options `runledger` gives `salloc` itself: `extra_args` may not name them.
const SLURM_OPTIONS_OF_OURS: &[&str] = &[
    "--job-name",
    "-J",
    "--partition",
    "-p",
    "--constraint",
    "-C",
    "--account",
    "-A",
    "--qos",
    "-q",
    "--gres",
    "--mem",
    "--mem-per-cpu",
    "--mem-per-gpu",
    "--cpus-per-task",
    "-c",
    "--time",
    "-t",
    "--nodes",
    "-N",
    "--ntasks",
    "-n",
    "--no-shell",
    "--requeue",
    "--no-requeue",
    "--export",
    "--chdir",
    "-D",
    "--jobid",
    "--comment",
];

/// `runs_on` and `[environments.slurm]`: both or neither; the settings Slurm would reject or
/// that runledger sets itself are refused here, so a typo stops start-up instead of failing
/// every run.
fn slurm(
    at: &str,
    env: &EnvironmentFile,
    sandbox: Option<Sandbox>,
) -> Result<Option<Slurm>, Error> {
    let runs_on = env.runs_on.unwrap_or_default();
    if runs_on == RunsOn::Local {
        if env.slurm.is_some() {
            return Err(Error::Invalid(format!(
                "{at}.slurm: the environment runs on the server's host; set runs_on = \"slurm\" \
                 to run it on Slurm, or remove [environments.slurm]"
            )));
        }
        if env.on_node_failure.is_some() {
            return Err(Error::Invalid(format!(
                "{at}.on_node_failure: only an environment with runs_on = \"slurm\" has nodes \
                 that can fail"
            )));
        }
        return Ok(None);
    }
    if env.harness == Harness::Demo {
        return Err(Error::Invalid(format!(
            "{at}.runs_on: the 'demo' harness runs in-process; only agents that are processes \
             can run on Slurm"
        )));
    }
    if sandbox != Some(Sandbox::Bwrap) {
        return Err(Error::Invalid(format!(
            "{at}.sandbox: runs_on = \"slurm\" runs every agent in bubblewrap on its node, \
             which is how the agent gets its variables and secrets without them passing \
             through Slurm; leave sandbox out or set it to \"bwrap\""
        )));
    }
    if env.workspace_root.is_none() {
        return Err(Error::Invalid(format!(
            "{at}.workspace_root: runs_on = \"slurm\" needs a workspace_root on a filesystem \
             the server and every node share at the same path (docs/slurm.md)"
        )));
    }
    if env.pids_max.is_some() {
        return Err(Error::Invalid(format!(
            "{at}.pids_max: Slurm has no per-job limit on processes; leave pids_max out of an \
             environment with runs_on = \"slurm\""
        )));
    }
    let Some(file) = &env.slurm else {
        return Err(Error::Invalid(format!(
            "{at}.slurm: runs_on = \"slurm\" needs an [environments.slurm] table with at least \
             the partition, e.g. partition = \"agents\""
        )));
    };
    let Some(partition) = file.partition.clone() else {
        return Err(Error::Invalid(format!(
            "{at}.slurm.partition: required (the Slurm partition the environment's executions \
             are allocated in)"
        )));
    };
    for (field, value) in [
        ("partition", Some(&partition)),
        ("constraint", file.constraint.as_ref()),
        ("account", file.account.as_ref()),
        ("qos", file.qos.as_ref()),
        ("gres", file.gres.as_ref()),
    ] {
        if let Some(value) = value {
            if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(Error::Invalid(format!(
                    "{at}.slurm.{field}: {value:?} must be non-empty, without spaces or control \
                     characters"
                )));
            }
        }
    }
    for (i, arg) in file.extra_args.iter().enumerate() {
        if !arg.starts_with('-') || arg.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "{at}.slurm.extra_args[{i}]: {arg:?} is not an option; write each option with its \
                 value as one element, e.g. \"--reservation=agents\""
            )));
        }
        let name = arg.split('=').next().unwrap_or(arg);
        // A short option with its value attached (`-c4`) is named by its first two bytes; a
        // first character beyond ASCII names no option of ours (and is no char boundary).
        let name = match name.get(..2) {
            Some(short) if !name.starts_with("--") => short,
            _ => name,
        };
        if SLURM_OPTIONS_OF_OURS.contains(&name) {
            return Err(Error::Invalid(format!(
                "{at}.slurm.extra_args[{i}]: {arg:?} is set by runledger itself (from the \
                 environment's slurm table, limits and max_runtime_secs); remove it"
            )));
        }
    }
    Ok(Some(Slurm {
        partition,
        constraint: file.constraint.clone(),
        account: file.account.clone(),
        qos: file.qos.clone(),
        gres: file.gres.clone(),
        extra_args: file.extra_args.clone(),
        on_node_failure: env.on_node_failure.unwrap_or_default(),
    }))
}

/// Most runs waiting in one environment's queue, and in one team's queues together, unless
/// configured: far beyond what a single host works through in a day, there to stop one key
/// from filling the store with work that will never start.
pub const DEFAULT_MAX_QUEUED: usize = 10_000;

/// An environment's `teams`: valid team names, each once; absent means every team, and an
/// empty list would mean no team at all, which is refused as a mistake.
fn teams(at: &str, teams: Option<Vec<String>>) -> Result<Vec<String>, Error> {
    let Some(teams) = teams else {
        return Ok(Vec::new());
    };
    if teams.is_empty() {
        return Err(Error::Invalid(format!(
            "{at}.teams: an empty list would let no team use the environment; leave `teams` \
             out to let every team use it"
        )));
    }
    for (i, team) in teams.iter().enumerate() {
        if !runledger_domain::valid_team_name(team) {
            return Err(Error::Invalid(format!(
                "{at}.teams[{i}]: {team:?} is not a team name ({})",
                runledger_domain::TEAM_NAME_RULE
            )));
        }
        if teams[..i].contains(team) {
            return Err(Error::Invalid(format!(
                "{at}.teams[{i}]: {team:?} is listed twice"
            )));
        }
    }
    Ok(teams)
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

/// A name an agent's variable can have: a portable shell name that is not one of ours.
fn variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("RUNLEDGER_")
}

/// Reads every secret's value now, so that a missing file or variable stops start-up instead of
/// failing runs later. Error messages name the source, never a value.
fn read_secrets(
    sources: BTreeMap<String, SecretSource>,
) -> Result<BTreeMap<String, Secret>, Error> {
    let mut secrets = BTreeMap::new();
    for (name, source) in sources {
        let at = format!("secrets.{name}");
        if !variable_name(&name) {
            return Err(Error::Invalid(format!(
                "{at}: {name:?} is not a variable name (letters, digits and '_', not starting \
                 with a digit, and not a reserved RUNLEDGER_ variable)"
            )));
        }
        let (value, file) = match source {
            SecretSource::File(path) => {
                let path = std::path::absolute(&path)
                    .map_err(|e| Error::Invalid(format!("{at}: {}: {e}", path.display())))?;
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    Error::Invalid(format!("{at}: cannot read {}: {e}", path.display()))
                })?;
                // `echo key > file` leaves a newline that is not part of the key.
                let value = text.strip_suffix('\n').unwrap_or(&text);
                let value = value.strip_suffix('\r').unwrap_or(value).to_string();
                (value, Some(path))
            }
            SecretSource::Env(var) => match std::env::var(&var) {
                Ok(value) => (value, None),
                Err(_) => {
                    return Err(Error::Invalid(format!(
                        "{at}: the server's environment variable {var} is not set (or not UTF-8)"
                    )))
                }
            },
        };
        if value.is_empty() {
            return Err(Error::Invalid(format!(
                "{at}: the value is empty; a secret must have one"
            )));
        }
        secrets.insert(
            name,
            Secret {
                value: SecretValue(value),
                file,
            },
        );
    }
    Ok(secrets)
}

fn cache_bytes(cache_mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(1, MAX_CACHE_MB, "a cache size", "MiB").or_default(
        "server.cache_mb",
        cache_mb,
        DEFAULT_CACHE_MB,
    )?;
    Ok(mb << 20)
}

/// The default space reserve: room for recording how many runs end and for sled's snapshot,
/// small beside any disk a service runs on.
pub const DEFAULT_DISK_RESERVE_MB: u64 = 64;

fn disk_reserve_bytes(mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(0, MAX_CACHE_MB, "a size", "MiB").or_default(
        "server.disk_reserve_mb",
        mb,
        DEFAULT_DISK_RESERVE_MB,
    )?;
    Ok(mb << 20)
}

/// How long a request body may take by default: ample for 1 MiB over a slow link, short
/// enough that connections trickling a byte at a time cannot pile up for long.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// The longest `body_timeout_secs` accepted (an hour).
const MAX_BODY_TIMEOUT_SECS: u64 = 3600;

fn body_timeout(secs: Option<u64>) -> Result<std::time::Duration, Error> {
    let secs = Range::between(1, MAX_BODY_TIMEOUT_SECS, "a time", "seconds").or_default(
        "server.body_timeout_secs",
        secs,
        DEFAULT_BODY_TIMEOUT_SECS,
    )?;
    Ok(std::time::Duration::from_secs(secs))
}

/// A run's transcript size by default (1 GiB): far beyond what an agent's useful output
/// reaches, small enough that one runaway loop cannot fill the disk on its own.
pub const DEFAULT_TRANSCRIPT_MAX_MB: u64 = 1024;

fn transcript_max_bytes(mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(1, MAX_CACHE_MB, "a size", "MiB").or_default(
        "server.transcript_max_mb",
        mb,
        DEFAULT_TRANSCRIPT_MAX_MB,
    )?;
    Ok(mb << 20)
}

fn rate_limit(limits: &LimitsFile) -> Result<Option<RateLimit>, Error> {
    let per_sec = limits.rate_per_sec.unwrap_or(DEFAULT_RATE_PER_SEC);
    // Checked even when the limit is off, so turning it back on cannot reveal an old typo.
    if !per_sec.is_finite() || per_sec <= 0.0 {
        return Err(Error::Invalid(format!(
            "limits.rate_per_sec: {per_sec} must be a positive number of requests per second \
             (to turn rate limiting off, set limits.rate_limit = false)"
        )));
    }
    let burst = Range::at_least(1)
        .because("a key with no burst could never send a request")
        .or_default("limits.burst", limits.burst, DEFAULT_BURST)?;
    Ok(limits
        .rate_limit
        .unwrap_or(true)
        .then_some(RateLimit { per_sec, burst }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<Config, Error> {
        let parsed = parse(Path::new("runledger.toml"), text)?;
        resolve(
            parsed,
            &Overrides::default(),
            runledger_domain::Timestamp(0),
        )
    }

    #[test]
    fn embedded_defaults() {
        let config = load_text("").expect("valid");
        assert_eq!(config.bind.to_string(), DEFAULT_BIND);
        assert!(config.data_dir.is_absolute());
        assert!(config.data_dir.ends_with("runledger-data"));
        assert_eq!(config.base_url(), "http://127.0.0.1:8080");
        assert_eq!(config.default_environment().id, "demo");
        assert_eq!(config.cache_bytes, 16 << 20);
    }

    #[test]
    fn the_body_timeout_and_transcript_cap_have_defaults_and_bounds() {
        let config = load_text("").expect("valid");
        assert_eq!(config.body_timeout, std::time::Duration::from_secs(30));
        assert_eq!(config.transcript_max_bytes, 1 << 30);
        let config =
            load_text("[server]\nbody_timeout_secs = 2\ntranscript_max_mb = 3\n").expect("valid");
        assert_eq!(config.body_timeout, std::time::Duration::from_secs(2));
        assert_eq!(config.transcript_max_bytes, 3 << 20);
        for bad in [
            "body_timeout_secs = 0",
            "body_timeout_secs = 3601",
            "transcript_max_mb = 0",
        ] {
            let err = load_text(&format!("[server]\n{bad}\n")).expect_err(bad);
            let field = bad.split(' ').next().unwrap_or_default();
            assert!(
                err.to_string().contains(&format!("server.{field}")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_cache_size_must_be_one_mib_to_one_tib() {
        for bad in [0, MAX_CACHE_MB + 1, u64::MAX / 2] {
            let err =
                load_text(&format!("[server]\ncache_mb = {bad}\n")).expect_err("out of range");
            assert!(err.to_string().contains("server.cache_mb"), "{err}");
        }
        for good in [1, 64, MAX_CACHE_MB] {
            let config = load_text(&format!("[server]\ncache_mb = {good}\n")).expect("in range");
            assert_eq!(config.cache_bytes, good << 20);
        }
    }

    #[test]
    fn unknown_fields_name_the_file_and_line() {
        let err = load_text("[server]\nbind = \"127.0.0.1:9\"\n\n[[environments]]\nid = \"x\"\nharness = \"demo\"\nmax_concurent = 3\n")
            .expect_err("typo");
        let text = err.to_string();
        assert!(text.contains("runledger.toml"), "{text}");
        assert!(text.contains("line 7"), "{text}");
        assert!(text.contains("max_concurent"), "{text}");
    }

    #[test]
    fn non_loopback_needs_explicit_permission() {
        assert!(load_text("[server]\nbind = \"0.0.0.0:8080\"\n").is_err());
        let ok = load_text("[server]\nbind = \"0.0.0.0:8080\"\nallow_non_loopback = true\n")
            .expect("allowed");
        assert!(!ok.bind.ip().is_loopback());
    }

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

    const SLURM_ENV: &str = "[[environments]]\nid = \"hpc\"\nharness = \"command\"\ncommand = [\"agent\"]\nworkspace_root = \"/shared/ws\"\nruns_on = \"slurm\"\nmemory_mb = 2048\ncpu_percent = 150\n";

    #[test]
    fn a_slurm_environment_reads_its_table_and_defaults_to_failing_lost_executions() {
        let config = load_text(&format!(
            "{SLURM_ENV}on_node_failure = \"requeue\"\n[environments.slurm]\npartition = \"agents\"\nconstraint = \"zone-a\"\naccount = \"lab\"\nqos = \"normal\"\ngres = \"gpu:1\"\nextra_args = [\"--reservation=r1\", \"--exclusive\"]\n"
        ))
        .expect("valid");
        let slurm = config.environment("hpc").and_then(|e| e.slurm.clone());
        assert_eq!(
            slurm,
            Some(Slurm {
                partition: "agents".into(),
                constraint: Some("zone-a".into()),
                account: Some("lab".into()),
                qos: Some("normal".into()),
                gres: Some("gpu:1".into()),
                extra_args: vec!["--reservation=r1".into(), "--exclusive".into()],
                on_node_failure: OnNodeFailure::Requeue,
            })
        );
        let config = load_text(&format!(
            "{SLURM_ENV}[environments.slurm]\npartition = \"agents\"\n"
        ))
        .expect("valid");
        let env = config.environment("hpc").expect("hpc");
        assert_eq!(
            env.slurm.as_ref().map(|s| s.on_node_failure),
            Some(OnNodeFailure::Fail)
        );
        let local =
            load_text("[[environments]]\nid = \"l\"\nharness = \"command\"\ncommand = [\"a\"]\n")
                .expect("valid");
        assert_eq!(local.environment("l").and_then(|e| e.slurm.clone()), None);
    }

    #[test]
    fn an_extra_arg_beyond_ascii_is_read_without_panicking() {
        let config = load_text(&format!(
            "{SLURM_ENV}[environments.slurm]\npartition = \"agents\"\nextra_args = [\"-é\", \"-€x\"]\n"
        ))
        .expect("valid");
        let slurm = config.environment("hpc").and_then(|e| e.slurm.clone());
        assert_eq!(
            slurm.map(|s| s.extra_args),
            Some(vec!["-é".into(), "-€x".into()])
        );
    }

    #[test]
    fn slurm_settings_that_cannot_work_are_refused_naming_the_field() {
        let table = "[environments.slurm]\npartition = \"agents\"\n";
        for (text, field) in [
            // A table without runs_on, and the other way round.
            (
                "[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\n[environments.slurm]\npartition = \"p\"\n".to_string(),
                "environments[0].slurm:",
            ),
            (
                "[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\non_node_failure = \"requeue\"\n".to_string(),
                "environments[0].on_node_failure",
            ),
            (SLURM_ENV.to_string(), "environments[0].slurm:"),
            (
                format!("{SLURM_ENV}[environments.slurm]\nconstraint = \"a\"\n"),
                "environments[0].slurm.partition",
            ),
            (
                format!("{SLURM_ENV}[environments.slurm]\npartition = \"two words\"\n"),
                "environments[0].slurm.partition",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"--mem=1G\"]\n"),
                "environments[0].slurm.extra_args[0]",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"-c4\"]\n"),
                "environments[0].slurm.extra_args[0]",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"--exclusive\", \"reservation\"]\n"),
                "environments[0].slurm.extra_args[1]",
            ),
            (
                format!("{}{table}", SLURM_ENV.replace("workspace_root = \"/shared/ws\"\n", "")),
                "environments[0].workspace_root",
            ),
            (
                format!("{}sandbox = \"none\"\n{table}", SLURM_ENV),
                "environments[0].sandbox",
            ),
            (
                format!("{}pids_max = 64\n{table}", SLURM_ENV),
                "environments[0].pids_max",
            ),
            (
                "[[environments]]\nid = \"d\"\nharness = \"demo\"\nruns_on = \"slurm\"\n".to_string(),
                "environments[0].runs_on",
            ),
        ] {
            let err = load_text(&text).expect_err(&text).to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn invalid_values_name_the_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"ok\"\nharness = \"demo\"\n\n\
             [[environments]]\nid = \"cmd\"\nharness = \"command\"\nmax_concurrent = 0\n",
        )
        .expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err("invalid")
            .to_string();
        // A missing field points at its table.
        assert!(
            err.contains("bad.toml") && err.contains("line 8: environments[1].command"),
            "{err}"
        );
        std::fs::write(
            &path,
            "[[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"a\"]\nmax_concurrent = 0\n",
        )
        .expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err("invalid")
            .to_string();
        assert!(
            err.contains("line 5: environments[0].max_concurrent"),
            "{err}"
        );
        std::fs::write(&path, "[server]\nbind = \"10.1.2.3:80\"\n").expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err("invalid")
            .to_string();
        assert!(err.contains("line 2: server.bind"), "{err}");
    }

    #[test]
    fn rate_limit_defaults_values_and_switch() {
        let default = load_text("").expect("valid").rate_limit;
        assert_eq!(
            default,
            Some(RateLimit {
                per_sec: DEFAULT_RATE_PER_SEC,
                burst: DEFAULT_BURST
            })
        );
        let set = load_text("[limits]\nrate_per_sec = 0.5\nburst = 2\n").expect("valid");
        assert_eq!(
            set.rate_limit,
            Some(RateLimit {
                per_sec: 0.5,
                burst: 2
            })
        );
        // A whole number is accepted for the rate.
        let whole = load_text("[limits]\nrate_per_sec = 3\n").expect("valid");
        assert_eq!(whole.rate_limit.map(|r| r.per_sec), Some(3.0));
        let off = load_text("[limits]\nrate_limit = false\n").expect("valid");
        assert_eq!(off.rate_limit, None);
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

    /// A `[secrets]` entry holding a Standard Webhooks secret (the specification's example).
    const HOOK_SECRETS: &str = "[secrets]\nHOOK = { env = \"RUNLEDGER_TEST_WEBHOOK_SECRET\" }\n\n";

    fn with_hook_secret() {
        std::env::set_var(
            "RUNLEDGER_TEST_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        );
    }

    #[test]
    fn webhooks_get_defaults_and_a_decoded_key() {
        with_hook_secret();
        let config = load_text(&format!(
            "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\nsecret = \"HOOK\"\n\n\
             [[webhooks]]\nname = \"art\"\nurl = \"http://10.0.0.5:9000/\"\nsecret = \"HOOK\"\n\
             events = [\"run.artifact\", \"run.failed\", \"run.failed\"]\nallow_private = true\n\
             teams = [\"infra\"]\ntimeout_secs = 3\nretry_initial_ms = 50\nmax_in_flight = 2\n"
        ))
        .expect("valid");
        let ci = &config.webhooks[0];
        assert_eq!(ci.name, "ci");
        assert_eq!(ci.events, runledger_domain::Topic::STATE_CHANGES);
        assert!(!ci.allow_private && ci.teams.is_empty());
        assert_eq!(ci.timeout, std::time::Duration::from_secs(15));
        assert_eq!(ci.retry_initial, std::time::Duration::from_secs(5));
        // The base64 after whsec_ is the key.
        assert_eq!(ci.key.0.len(), 24);
        assert!(!format!("{ci:?}").contains("MfKQ"));
        let art = &config.webhooks[1];
        assert_eq!(
            art.events,
            [
                runledger_domain::Topic::Failed,
                runledger_domain::Topic::Artifact
            ]
        );
        assert!(art.allow_private);
        assert_eq!(art.teams, ["infra"]);
        assert_eq!(art.max_in_flight, 2);
        assert_eq!(
            webhook_key("a raw secret of some length").expect("raw"),
            b"a raw secret of some length"
        );
    }

    #[test]
    fn bad_webhooks_are_load_errors_naming_the_field() {
        with_hook_secret();
        let hook = "[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\n";
        for (extra, want) in [
            (
                "secret = \"HOOK\"\nevents = [\"run.finished\"]\n",
                "webhooks[0].events[0]: \"run.finished\" is not an event",
            ),
            (
                "secret = \"HOOK\"\nevents = []\n",
                "webhooks[0].events: an empty list",
            ),
            (
                "secret = \"NOPE\"\n",
                "webhooks[0].secret: \"NOPE\" is not defined in [secrets]",
            ),
            ("", "webhooks[0].secret: missing"),
            ("secret = \"HOOK\"\nsecret_file = \"/x\"\n", "not both"),
            (
                "secret_file = \"/nonexistent/secret\"\n",
                "webhooks[0].secret_file: cannot read",
            ),
            (
                "secret = \"HOOK\"\nteams = []\n",
                "webhooks[0].teams: an empty list",
            ),
            (
                "secret = \"HOOK\"\nteams = [\"Infra\"]\n",
                "is not a team name",
            ),
            (
                "secret = \"HOOK\"\ntimeout_secs = 0\n",
                "webhooks[0].timeout_secs",
            ),
            (
                "secret = \"HOOK\"\nretry_initial_ms = 0\n",
                "webhooks[0].retry_initial_ms",
            ),
            (
                "secret = \"HOOK\"\nmax_in_flight = 0\n",
                "webhooks[0].max_in_flight",
            ),
            (
                "secret = \"HOOK\"\nsurprise = 1\n",
                "unknown field `surprise`",
            ),
        ] {
            let err = load_text(&format!("{HOOK_SECRETS}{hook}{extra}"))
                .expect_err(extra)
                .to_string();
            assert!(err.contains(want), "{extra:?}: {err}");
        }
        for (url, want) in [
            ("ftp://hooks.example/", "not an http:// or https:// URL"),
            ("not a url", "is not a URL"),
            (
                "https://user:pw@hooks.example/",
                "must not carry credentials",
            ),
        ] {
            let err = load_text(&format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"{url}\"\nsecret = \"HOOK\"\n"
            ))
            .expect_err(url)
            .to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
        for (name, want) in [
            ("CI", "is not a webhook name"),
            ("", "is not a webhook name"),
        ] {
            let err = load_text(&format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"{name}\"\nurl = \"https://h.example/\"\nsecret = \"HOOK\"\n"
            ))
            .expect_err(name)
            .to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let twice = format!(
            "{HOOK_SECRETS}[[webhooks]]\nname = \"ci\"\nurl = \"https://a.example/\"\nsecret = \"HOOK\"\n\n\
             [[webhooks]]\nname = \"ci\"\nurl = \"https://b.example/\"\nsecret = \"HOOK\"\n"
        );
        let err = load_text(&twice).expect_err("twice").to_string();
        assert!(
            err.contains("webhooks[1].name: \"ci\" is used by another webhook"),
            "{err}"
        );
        assert!(webhook_key("whsec_not*base64").is_err());
        assert!(webhook_key("short")
            .expect_err("short")
            .contains("at least 16"));
    }

    #[test]
    fn a_bad_webhook_names_its_line() {
        with_hook_secret();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hooks.toml");
        std::fs::write(
            &path,
            format!(
                "{HOOK_SECRETS}[[webhooks]]\nname = \"a\"\nurl = \"https://a.example/\"\nsecret = \"HOOK\"\n\n\
                 [[webhooks]]\nname = \"b\"\nurl = \"https://b.example/\"\nsecret = \"HOOK\"\nevents = [\"run.nope\"]\n"
            ),
        )
        .expect("write");
        let err = Config::load(Some(&path), &Overrides::default())
            .expect_err("bad event")
            .to_string();
        assert!(err.contains("line 13: webhooks[1].events[0]"), "{err}");
    }

    #[test]
    fn bad_rate_limits_name_the_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("limits.toml");
        for (text, want) in [
            (
                "[server]\nbind = \"127.0.0.1:0\"\n\n[limits]\nburst = 5\nrate_per_sec = 0\n",
                "line 6: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = -1.5\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = nan\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = inf\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_limit = false\nrate_per_sec = 0\n",
                "line 3: limits.rate_per_sec",
            ),
            ("[limits]\n\nburst = 0\n", "line 3: limits.burst"),
            ("[limits]\nburst = -1\n", "line 2"),
            ("[limits]\nburst = 1.5\n", "line 2"),
            ("[limits]\nrate_per_sec = \"fast\"\n", "line 2"),
            ("[limits]\nrate = 5\n", "line 2"),
        ] {
            std::fs::write(&path, text).expect("write");
            let err = Config::load(Some(&path), &Overrides::default())
                .expect_err(text)
                .to_string();
            assert!(
                err.contains("limits.toml") && err.contains(want),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn tls_binds_anywhere_and_makes_links_https() {
        let dir = tempfile::tempdir().expect("tempdir");
        let generated =
            rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, generated.cert.pem()).expect("write");
        std::fs::write(&key, generated.key_pair.serialize_pem()).expect("write");
        let config = load_text(&format!(
            "[server]\nbind = \"0.0.0.0:8443\"\ntls_cert = {:?}\ntls_key = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ))
        .expect("valid");
        assert_eq!(config.scheme(), "https");
        assert_eq!(config.base_url(), "https://0.0.0.0:8443");
        assert!(config.tls.is_some_and(|t| t.cert == cert && t.key == key));
    }

    #[test]
    fn tls_problems_name_the_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tls.toml");
        let generated =
            rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, generated.cert.pem()).expect("write");
        let load = |text: &str| {
            std::fs::write(&path, text).expect("write");
            Config::load(Some(&path), &Overrides::default())
                .expect_err("invalid")
                .to_string()
        };
        let err = load(&format!(
            "[server]\ntls_cert = {:?}\n",
            cert.display().to_string()
        ));
        assert!(
            err.contains("tls.toml") && err.contains("line 1: server.tls_key: missing"),
            "{err}"
        );
        let err = load(&format!(
            "[server]\nbind = \"127.0.0.1:0\"\ntls_cert = \"/nonexistent/c.pem\"\ntls_key = {:?}\n",
            cert.display().to_string()
        ));
        assert!(
            err.contains("line 3: server.tls_cert: cannot read /nonexistent/c.pem"),
            "{err}"
        );
        // The certificate given as the key.
        let err = load(&format!(
            "[server]\ntls_cert = {0:?}\ntls_key = {0:?}\n",
            cert.display().to_string()
        ));
        assert!(
            err.contains("line 3: server.tls_key:") && err.contains("holds no private key"),
            "{err}"
        );
    }

    #[test]
    fn plain_http_off_loopback_names_both_ways_out() {
        let err = load_text("[server]\nbind = \"0.0.0.0:8080\"\n")
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("server.bind: 0.0.0.0:8080 is not a loopback address")
                && err.contains("server.tls_cert and server.tls_key")
                && err.contains("server.allow_non_loopback = true"),
            "{err}"
        );
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
    fn agent_uids_and_agent_user_are_read_and_bad_ones_refused_naming_the_field() {
        let config = load_text("[server]\nagent_uids = \"300000-399999\"\n").expect("valid");
        assert_eq!(config.agent_uids.uids(), 300_000..=399_999);
        assert_eq!(config.agent_user, None);
        let named = load_text("[server]\nagent_user = \"runledger-agent\"\n").expect("valid");
        assert_eq!(named.agent_user.as_deref(), Some("runledger-agent"));
        for (text, want) in [
            (
                "agent_uids = \"200000-100000\"",
                "server.agent_uids: 200000-100000 starts after it ends",
            ),
            (
                "agent_uids = \"lots\"",
                "server.agent_uids: \"lots\" is not of the form",
            ),
            (
                "agent_uids = \"a-b\"",
                "server.agent_uids: \"a-b\" is not of the form",
            ),
            (
                "agent_uids = \"0-99999\"",
                "server.agent_uids: 0-99999 reaches below 65536",
            ),
            (
                "agent_uids = \"100000-100010\"",
                "server.agent_uids: 100000-100010 holds 11 uids",
            ),
            ("agent_uids = 100000", "expected a string"),
            ("agent_user = \"\"", "server.agent_user: must name a user"),
        ] {
            let err = load_text(&format!("[server]\n{text}\n"))
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
    fn secrets_are_read_at_load_and_never_shown_by_debug() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("k");
        std::fs::write(&key, "value-123\n").expect("write");
        let config = load_text(&format!(
            "[secrets]\nK = {{ file = {:?} }}\n\n[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\nsecrets = [\"K\"]\n",
            key.display().to_string()
        ))
        .expect("valid");
        let secret = &config.secrets["K"];
        assert_eq!(secret.value.expose(), "value-123");
        assert_eq!(secret.file.as_deref(), Some(key.as_path()));
        assert!(!format!("{config:?}").contains("value-123"));
        std::fs::write(&key, "").expect("write");
        let err = load_text(&format!(
            "[secrets]\nK = {{ file = {:?} }}\n",
            key.display().to_string()
        ))
        .expect_err("empty");
        assert!(
            err.to_string().contains("secrets.K: the value is empty"),
            "{err}"
        );
    }

    #[test]
    fn prices_are_read_and_bad_ones_name_the_line_and_field() {
        let config = load_text(
            "[prices]\ncompute_per_cpu_hour = 0.05\n\n[prices.models.\"gpt-5.5\"]\n\
             input_per_mtok = 1.25\noutput_per_mtok = 10\ncached_input_per_mtok = 0.125\n",
        )
        .expect("valid");
        assert_eq!(config.prices.compute_per_cpu_hour, Some(0.05));
        assert_eq!(
            config.prices.models["gpt-5.5"],
            ModelPrices {
                input_per_mtok: 1.25,
                output_per_mtok: 10.0,
                cached_input_per_mtok: Some(0.125),
            }
        );
        assert_eq!(load_text("").expect("valid").prices, Prices::default());
        for (text, wanted) in [
            (
                "[prices]\ncompute_per_cpu_hour = -1\n",
                "line 2: prices.compute_per_cpu_hour: -1 is not a price",
            ),
            (
                "[prices]\ncompute_per_cpu_hour = nan\n",
                "line 2: prices.compute_per_cpu_hour: NaN is not a price",
            ),
            (
                "[prices.models.\"m.1\"]\ninput_per_mtok = 1\noutput_per_mtok = 1e9\n",
                "line 3: prices.models.\"m.1\".output_per_mtok: 1000000000 is not a price",
            ),
            ("[prices.models.m]\ninput_per_mtok = 1\n", "line 1"),
            ("[prices]\ncompute_per_hour = 1\n", "line 2"),
            ("[prices.models.m]\ninput_per_mtok = \"1\"\n", "line 2"),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("prices.toml");
            std::fs::write(&path, text).expect("write");
            let err = Config::load(Some(&path), &Overrides::default())
                .expect_err(text)
                .to_string();
            assert!(
                err.contains("prices.toml") && err.contains(wanted),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let err = load_text("[[environments]]\nid = \"a\"\nharness = \"demo\"\n[[environments]]\nid = \"a\"\nharness = \"demo\"\n")
            .expect_err("duplicate");
        assert!(err.to_string().contains("defined twice"));
    }
}
