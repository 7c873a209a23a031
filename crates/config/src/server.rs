//! `[server]`: where the service listens and keeps its data, TLS, the user ids its agents run
//! as, and the sizes and times of the process as a whole, checked and given their defaults (the
//! command line's `--bind` and `--data-dir` win over the file). The `server.*` settings of what
//! may be read without a team's key are `access.rs`'s. It reads no file itself but the TLS
//! pair, through `tls.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use runledger_domain::uid_range::UidRange;

use crate::error::Error;
use crate::range::Range;

/// Where the service listens unless the file or `--bind` says otherwise.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";

/// Where the service keeps its store unless the file or `--data-dir` says otherwise.
pub const DEFAULT_DATA_DIR: &str = "./runledger-data";

/// The default of `server.cache_mb`: sled's page cache, which is what the process keeps of a load once the load is over. A larger
/// cache holds more of the index and event pages in memory; a smaller one keeps the idle
/// server's memory low after a load. Reads of the index are dominated by its blocks, not by
/// cache misses, so the default sits at the small end (figures in `docs/performance.md`).
pub const DEFAULT_CACHE_MB: u64 = 16;
/// The largest `cache_mb` accepted (1 TiB); sled needs at least 256 bytes, so the least is 1.
pub const MAX_CACHE_MB: u64 = 1 << 20;

/// The default space reserve: room for recording how many runs end and for sled's snapshot,
/// small beside any disk a service runs on.
pub const DEFAULT_DISK_RESERVE_MB: u64 = 64;

/// How long a request body may take by default: ample for 1 MiB over a slow link, short
/// enough that connections trickling a byte at a time cannot pile up for long.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// The longest `body_timeout_secs` accepted (an hour).
const MAX_BODY_TIMEOUT_SECS: u64 = 3600;

/// A run's transcript size by default (1 GiB): far beyond what an agent's useful output
/// reaches, small enough that one runaway loop cannot fill the disk on its own.
pub const DEFAULT_TRANSCRIPT_MAX_MB: u64 = 1024;

/// TLS for the listener: the files it came from and the configuration loaded from them.
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Loaded and checked when the configuration is, so that a bad file stops start-up with the
    /// field and line that name it rather than failing the first handshake.
    pub server_config: Arc<rustls::ServerConfig>,
}

/// `server.bind`, or the command line's address (`given`), which wins.
pub(crate) fn bind_address(
    given: Option<String>,
    file: Option<String>,
) -> Result<SocketAddr, Error> {
    let bind_text = given.or(file).unwrap_or_else(|| DEFAULT_BIND.to_string());
    bind_text.parse().map_err(|_| {
        Error::Invalid(format!(
            "server.bind: {bind_text:?} is not an address like 127.0.0.1:8080"
        ))
    })
}

/// `server.tls_cert` and `server.tls_key`: both or neither, loaded now so that a bad file
/// names its field.
pub(crate) fn tls(cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Option<Tls>, Error> {
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
pub(crate) fn plain_http_only_on_loopback(
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

/// `server.data_dir`, or the command line's directory (`given`), which wins; made absolute.
pub(crate) fn data_dir(given: Option<PathBuf>, file: Option<PathBuf>) -> Result<PathBuf, Error> {
    let data_dir = given
        .or(file)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    // Agents run in their workspaces, so every path handed to them must be absolute.
    std::path::absolute(&data_dir)
        .map_err(|e| Error::Invalid(format!("server.data_dir: {}: {e}", data_dir.display())))
}

pub(crate) fn agent_user(user: Option<String>) -> Result<Option<String>, Error> {
    match user {
        Some(user) if user.is_empty() => Err(Error::Invalid(
            "server.agent_user: must name a user (or be left out for a uid of each run's own \
             from server.agent_uids)"
                .into(),
        )),
        user => Ok(user),
    }
}

/// `server.agent_uids`, default `UidRange::default()`.
pub(crate) fn agent_uids(text: Option<String>) -> Result<UidRange, Error> {
    match text {
        None => Ok(UidRange::default()),
        Some(text) => text
            .parse()
            .map_err(|e: runledger_domain::uid_range::Error| Error::Invalid(e.to_string())),
    }
}

pub(crate) fn cache_bytes(cache_mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(1, MAX_CACHE_MB, "a cache size", "MiB").or_default(
        "server.cache_mb",
        cache_mb,
        DEFAULT_CACHE_MB,
    )?;
    Ok(mb << 20)
}

pub(crate) fn disk_reserve_bytes(mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(0, MAX_CACHE_MB, "a size", "MiB").or_default(
        "server.disk_reserve_mb",
        mb,
        DEFAULT_DISK_RESERVE_MB,
    )?;
    Ok(mb << 20)
}

pub(crate) fn body_timeout(secs: Option<u64>) -> Result<std::time::Duration, Error> {
    let secs = Range::between(1, MAX_BODY_TIMEOUT_SECS, "a time", "seconds").or_default(
        "server.body_timeout_secs",
        secs,
        DEFAULT_BODY_TIMEOUT_SECS,
    )?;
    Ok(std::time::Duration::from_secs(secs))
}

/// The default of `server.seal_interval_secs`: how often, at most, the chains' heads are sealed.
pub const DEFAULT_SEAL_INTERVAL_SECS: u64 = 60;
/// The longest `seal_interval_secs` accepted (an hour).
const MAX_SEAL_INTERVAL_SECS: u64 = 3600;

pub(crate) fn seal_interval(secs: Option<u64>) -> Result<std::time::Duration, Error> {
    let secs = Range::between(1, MAX_SEAL_INTERVAL_SECS, "a time", "seconds").or_default(
        "server.seal_interval_secs",
        secs,
        DEFAULT_SEAL_INTERVAL_SECS,
    )?;
    Ok(std::time::Duration::from_secs(secs))
}

pub(crate) fn transcript_max_bytes(mb: Option<u64>) -> Result<u64, Error> {
    let mb = Range::between(1, MAX_CACHE_MB, "a size", "MiB").or_default(
        "server.transcript_max_mb",
        mb,
        DEFAULT_TRANSCRIPT_MAX_MB,
    )?;
    Ok(mb << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load_text, Config, Overrides};

    #[test]
    fn the_body_timeout_and_transcript_cap_have_defaults_and_bounds() {
        let config = load_text("").expect("valid");
        assert_eq!(config.body_timeout, std::time::Duration::from_secs(30));
        assert_eq!(config.transcript_max_bytes, 1 << 30);
        assert_eq!(config.seal_interval, std::time::Duration::from_secs(60));
        let config =
            load_text("[server]\nbody_timeout_secs = 2\ntranscript_max_mb = 3\n").expect("valid");
        assert_eq!(config.body_timeout, std::time::Duration::from_secs(2));
        assert_eq!(config.transcript_max_bytes, 3 << 20);
        for bad in [
            "body_timeout_secs = 0",
            "body_timeout_secs = 3601",
            "transcript_max_mb = 0",
            "seal_interval_secs = 0",
            "seal_interval_secs = 3601",
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
    fn non_loopback_needs_explicit_permission() {
        assert!(load_text("[server]\nbind = \"0.0.0.0:8080\"\n").is_err());
        let ok = load_text("[server]\nbind = \"0.0.0.0:8080\"\nallow_non_loopback = true\n")
            .expect("allowed");
        assert!(!ok.bind.ip().is_loopback());
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
}
