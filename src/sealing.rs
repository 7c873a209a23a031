//! Start-up's part in sealing: the unsealed tail found before anything is written, the
//! instance's seal key made (and its public half written beside
//! the store for `runledger audit pubkey`), and the seal task started with the interval the
//! configuration names. The admin audit log's chain joins each seal beside the runs' chains
//! as the named chain `admin` (`NamedHeads`), whenever its head moved.

use std::sync::Arc;

use runledger_config::Config;
use runledger_runs::seals::{NamedHeads, SealWebhook, Sealer};
use runledger_store::chain::Head;
use runledger_store::Store;

/// The name the admin audit log's chain has among a seal's leaves.
pub(crate) const ADMIN_CHAIN: &str = "admin";

/// The runs whose last record no seal covers (a walk of the log, only when the store does not
/// say every write is sealed), noted for the first seal. Before anything is written, so that
/// what this process writes is not taken for a tail.
pub(crate) fn find_tail(store: &Store) -> Result<usize, runledger_store::Error> {
    let started = std::time::Instant::now();
    let found = store.find_unsealed()?;
    if found > 0 {
        tracing::info!(
            runs = found,
            took_ms = started.elapsed().as_millis() as u64,
            "found runs written since the last seal; sealing them now"
        );
    }
    Ok(found)
}

/// Starts the seal task (`runledger_runs::seals`); with a `tail`, its first seal is at once.
/// A read-only server (`runledger inspect`) makes no seal: `None`.
pub(crate) fn start(
    config: &Config,
    store: &Store,
    tail: usize,
) -> Result<Option<Sealer>, runledger_store::Error> {
    if config.read_only {
        return Ok(None);
    }
    let public_key = store.publish_public_key()?;
    tracing::info!(
        public_key = %public_key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        interval_secs = config.seal_interval.as_secs(),
        "sealing the hash chains"
    );
    let admin = store.clone();
    let named: NamedHeads = Arc::new(move || match admin.admin_head() {
        Ok(Some((seq, link))) => vec![(ADMIN_CHAIN.to_string(), Head { seq, link })],
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::error!(error = %e, "the admin audit log's head could not be read; this seal leaves it out");
            Vec::new()
        }
    });
    let webhook = match &config.seal_webhook {
        None => None,
        Some(hook) => match SealWebhook::new(hook.clone()) {
            Ok(webhook) => Some(webhook),
            Err(e) => {
                tracing::error!(error = %e, "server.seal_webhook: cannot make its client; seals are not sent");
                None
            }
        },
    };
    Ok(Some(Sealer::start(
        store.clone(),
        config.seal_interval,
        named,
        webhook,
        tail > 0,
    )))
}

/// The final seal at a clean stop, when there is a seal task.
pub(crate) async fn finish(sealer: Option<Sealer>) -> Result<(), String> {
    match sealer {
        Some(sealer) => sealer.finish().await,
        None => Ok(()),
    }
}
