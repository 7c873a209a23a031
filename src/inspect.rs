//! `runledger inspect FILE [--bind ADDR]`: one run's bundle served read-only, so a run can be
//! looked at on a machine that never ran it. The bundle is imported (checked whole, as
//! `runledger import --run` does) into a store in a private temporary directory, and a server
//! starts on it in read-only mode (`Config::read_only`: no executor work, no schedules, no
//! webhooks, no seals, every write answered 405), with a new admin key for the session printed
//! on standard output. The directory is removed when the server stops (SIGINT or SIGTERM).

use std::path::Path;

use anyhow::Context as _;

use runledger_cli::Cli;
use runledger_config::{Config, Overrides};
use runledger_store as store;

/// Imports `file` into a temporary store and serves it read-only until a signal.
pub fn inspect(cli: &Cli, file: &Path, bind: Option<String>) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("runledger-inspect-")
        .tempdir()
        .context("cannot create the temporary data directory")?;
    let data_dir = dir.path().join("data");
    store::private_umask();
    // Opened as the server opens a store, so its empty index is marked as of this build's
    // layout: a bare store would make the server's start rebuild the index the import has
    // just written.
    drop(runledger_projection::open(
        &data_dir,
        &store::Options::default(),
    )?);
    let run_id = runledger_cli::import_run_into(&data_dir, file, false)?;
    let mut config = Config::load(
        cli.config.as_deref(),
        &Overrides {
            data_dir: Some(data_dir),
            bind: Some(bind.unwrap_or_else(|| "127.0.0.1:0".into())),
        },
    )?;
    config.read_only = true;
    // Nothing of the bundle's is sent anywhere.
    config.webhooks.clear();
    config.seal_webhook = None;
    actix_rt::System::new().block_on(async move {
        let app = crate::startup::Application::build(config).await?;
        let base = format!("{}://{}", app.scheme(), app.addr());
        eprintln!("runledger listening on {base}");
        eprintln!(
            "runledger inspect: run {run_id}, read-only: open {base}/runs/{run_id} and sign in \
             with the admin key printed above (valid for this session only), or read \
             {base}/api/v1/agent/runs/{run_id} with it. Ctrl-C ends the session and removes {}",
            dir.path().display()
        );
        let served = app.run().await;
        drop(dir);
        served.map_err(anyhow::Error::from)
    })
}
