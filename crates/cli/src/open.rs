//! The data directory as the offline commands open it: the config the global flags name, a
//! store that must already exist, the store opened with or without a loss of writes accepted,
//! and the messages for a directory a running server holds or a store that lost writes. It
//! opens only; what is read or written is the commands' own.

use anyhow::bail;

use runledger_config::{Config, Overrides};
use runledger_store::{self as store, Store};

use crate::commands::Cli;

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

/// Fails, creating nothing, unless `config.data_dir` holds a store: the commands that only
/// read must not leave an empty store behind a mistyped `--data-dir` (a backup script would
/// then write empty backups and report success).
pub(crate) fn require_store(config: &Config) -> anyhow::Result<()> {
    if !Store::present_in(&config.data_dir) {
        bail!(
            "{} holds no runledger store (no sled/db in it); check --data-dir, \
             RUNLEDGER_DATA_DIR or server.data_dir",
            config.data_dir.display()
        );
    }
    Ok(())
}

pub(crate) fn open(config: &Config, accept_lost_writes: bool) -> Result<Store, store::Error> {
    Store::open(
        &config.data_dir,
        &store::Options {
            accept_lost_writes,
            ..store::Options::default()
        },
    )
}

/// Opens the store for a command that reads what it can, even from a store that lost writes.
pub(crate) fn open_salvage(config: &Config) -> anyhow::Result<Store> {
    let store = open_offline_with(config, true)?;
    if let Some(lost) = store.lost_writes() {
        eprintln!("{}", lost_warning(&config.data_dir, lost));
    }
    Ok(store)
}

pub(crate) fn lost_warning(dir: &std::path::Path, lost: store::LostWrites) -> String {
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

pub(crate) fn held(dir: &std::path::Path) -> anyhow::Error {
    anyhow::anyhow!(
        "the data directory {} is held by a running runledger server; stop it first \
         (this command reads the directory directly)",
        dir.display()
    )
}
