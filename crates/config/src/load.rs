//! The configuration as a whole: `Config`, the command line's `Overrides`, and `Config::load`,
//! which reads the file, resolves each section through its module (in an order that decides
//! which of several mistakes is reported), and names the file and line of a value a section
//! refuses. The sections' rules are theirs; this module only puts their results together.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::environments::{environments, Environment};
use crate::error::Error;
use crate::file::ConfigFile;
use crate::limits::{self, ArtifactLimits, RateLimit};
use crate::prices::{self, Prices};
use crate::secrets::{read_secrets, Secret, SecretValue};
use crate::server::{self, Tls};
use crate::webhooks::{webhooks, Webhook};
use crate::{access, schedules};

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
    /// How often, at most, the chains' heads are sealed while anything was written
    /// (`server.seal_interval_secs`).
    pub seal_interval: std::time::Duration,
    /// Where each seal is sent, signed (`server.seal_webhook`); `None`: nowhere.
    pub seal_webhook: Option<Webhook>,
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
    /// The reverse proxies whose forwarded client address is believed
    /// (`server.trusted_proxies`); empty by default.
    pub trusted_proxies: crate::proxies::TrustedProxies,
    /// `limits.max_depth` and `limits.max_children`, defaults applied; an environment may set
    /// its own (`Config::tree_limits`).
    pub tree: runledger_domain::TreeLimits,
    /// Set by `runledger inspect` only, never by the file: the server answers reads only,
    /// starts no agent, fires no schedule, sends no webhook and makes no seal.
    pub read_only: bool,
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

    /// The limits of a tree of runs for a run created in environment `id` (the default
    /// environment when `None`): the environment's own, else `[limits]`'.
    pub fn tree_limits(&self, id: Option<&str>) -> runledger_domain::TreeLimits {
        let environment = match id {
            Some(id) => self.environment(id),
            None => self.environments.first(),
        };
        environment.map_or(self.tree, |e| e.tree.over(self.tree))
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

/// The configuration a parsed file gives with the command line's overrides: each section in
/// turn, so that of several mistakes the first in this order is the one reported.
fn resolve(
    file: ConfigFile,
    overrides: &Overrides,
    loaded_at: runledger_domain::Timestamp,
) -> Result<Config, Error> {
    let bind = server::bind_address(overrides.bind.clone(), file.server.bind)?;
    let tls = server::tls(file.server.tls_cert, file.server.tls_key)?;
    server::plain_http_only_on_loopback(bind, tls.is_some(), file.server.allow_non_loopback)?;
    let public_url = file
        .server
        .public_url
        .map(|u| u.trim_end_matches('/').to_string());
    let data_dir = server::data_dir(overrides.data_dir.clone(), file.server.data_dir)?;
    let secrets = read_secrets(file.secrets)?;
    let environments = environments(file.environments, &secrets)?;
    let rate_limit = limits::rate_limit(&file.limits)?;
    let prices = prices::prices(file.prices)?;
    let webhooks = webhooks(file.webhooks, &secrets)?;
    let seal_webhook = crate::webhooks::seal_webhook(
        file.server.seal_webhook,
        file.server.seal_webhook_secret,
        file.server.seal_webhook_allow_private,
        &secrets,
    )?;
    let metrics_token = access::metrics_token(file.server.metrics_token, &secrets)?;
    Ok(Config {
        bind,
        public_url,
        tls,
        data_dir,
        cache_bytes: server::cache_bytes(file.server.cache_mb)?,
        stop_grace_secs: file.server.stop_grace_secs.unwrap_or(5),
        disk_reserve_bytes: server::disk_reserve_bytes(file.server.disk_reserve_mb)?,
        rate_limit,
        max_queued_per_team: limits::max_queued_per_team(&file.limits)?,
        environments,
        loaded_at,
        file: None,
        secrets,
        agent_user: server::agent_user(file.server.agent_user)?,
        agent_uids: server::agent_uids(file.server.agent_uids)?,
        prices,
        body_timeout: server::body_timeout(file.server.body_timeout_secs)?,
        transcript_max_bytes: server::transcript_max_bytes(file.server.transcript_max_mb)?,
        seal_interval: server::seal_interval(file.server.seal_interval_secs)?,
        seal_webhook,
        artifacts: limits::artifact_limits(&file.limits)?,
        webhooks,
        metrics_token,
        session_link_ttl_secs: access::session_link_ttl_secs(file.server.session_link_ttl_secs)?,
        schedule_seconds: file.schedules.seconds.unwrap_or(false),
        max_schedules_per_team: schedules::max_per_team(&file.schedules)?,
        trusted_proxies: crate::proxies::trusted_proxies(file.server.trusted_proxies)?,
        tree: crate::tree::instance_limits(file.limits.max_depth, file.limits.max_children)?,
        read_only: false,
    })
}

/// The configuration `text` gives as the file `runledger.toml`, loaded at time 0: what the unit
/// tests of every section load.
#[cfg(test)]
pub(crate) fn load_text(text: &str) -> Result<Config, Error> {
    let parsed = parse(Path::new("runledger.toml"), text)?;
    resolve(
        parsed,
        &Overrides::default(),
        runledger_domain::Timestamp(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::DEFAULT_BIND;

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
    fn unknown_fields_name_the_file_and_line() {
        let err = load_text("[server]\nbind = \"127.0.0.1:9\"\n\n[[environments]]\nid = \"x\"\nharness = \"demo\"\nmax_concurent = 3\n")
            .expect_err("typo");
        let text = err.to_string();
        assert!(text.contains("runledger.toml"), "{text}");
        assert!(text.contains("line 7"), "{text}");
        assert!(text.contains("max_concurent"), "{text}");
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
}
