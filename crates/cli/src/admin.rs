//! How `keys` and `teams` reach what they manage: the data directory when no server holds
//! it, else the running server's admin API with an admin key (given, from the environment or
//! from the login profile), and the printing of the records either answers. It decides where
//! a command goes; what each command does is in `keys` and `teams`.

use std::io::Write;

use anyhow::{bail, Context as _};

use runledger_config::Config;
use runledger_store::{self as store, Store};

use crate::commands::{Cli, RunningServer};
use crate::open::{open, require_store};
use crate::{profile, remote, terminal};

/// Runs an admin command on the data directory when no server holds it, else through the
/// running server's admin API with an admin key. A `read_only` command fails, creating
/// nothing, where there is no store, unless an admin key is at hand and the config's server
/// answers (a relative `server.data_dir` names another directory from another working
/// directory than the server's).
pub(crate) fn administer(
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
pub(crate) struct Admin {
    remote: remote::Remote,
    runtime: tokio::runtime::Runtime,
}

impl Admin {
    pub(crate) fn new(
        url: &str,
        key: &str,
        chain: Option<&std::path::Path>,
    ) -> anyhow::Result<Admin> {
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

    pub(crate) fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        Ok(self.runtime.block_on(self.remote.get(path, &[]))?)
    }

    pub(crate) fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        Ok(self.runtime.block_on(self.remote.post(path, body))?)
    }
}

/// Prints records of the admin API on stdout: one JSON object per line with `--json`, else
/// the line `text` makes of each.
pub(crate) fn print_records(
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
