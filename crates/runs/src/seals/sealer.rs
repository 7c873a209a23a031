//! The seal task: at start it seals the writes no seal covers (after a crash, an upgrade or an
//! offline writer; start-up finds them with `Store::find_unsealed`); then, every `interval`
//! while anything was written, it seals the heads of the chains written since the previous
//! seal, with the heads of the named chains that changed (the admin log's, through
//! `NamedHeads`); at shutdown it makes a last, clean seal. Each seal is made durable before the next. It never runs on the create path: the
//! hashing there is `store::chain`'s, the sealing here is off to the side.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use runledger_store::chain::Head;
use runledger_store::seals::Seal;
use runledger_store::Store;

use super::webhook::SealWebhook;

/// The current heads of chains beside the runs', by name (e.g. `admin`); the sealer seals a
/// named chain when its head differs from the one it sealed last.
pub type NamedHeads = Arc<dyn Fn() -> Vec<(String, Head)> + Send + Sync>;

/// The running seal task.
pub struct Sealer {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    store: Store,
    named: NamedHeads,
    sealed_named: Arc<std::sync::Mutex<HashMap<String, Head>>>,
}

/// Seals what was written, off the async threads, and makes the seal durable.
async fn seal_now(
    store: &Store,
    named: &NamedHeads,
    sealed_named: &std::sync::Mutex<HashMap<String, Head>>,
    clean: bool,
) -> Result<Option<Seal>, String> {
    let changed: Vec<(String, Head)> = {
        let sealed = sealed_named.lock().unwrap_or_else(|p| p.into_inner());
        named()
            .into_iter()
            .filter(|(name, head)| sealed.get(name) != Some(head))
            .collect()
    };
    let sealing = store.clone();
    let extra = changed.clone();
    let seal = tokio::task::spawn_blocking(move || {
        sealing.seal(runledger_base::clock::now(), &extra, clean)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    store.sync().await.map_err(|e| e.to_string())?;
    if seal.is_some() {
        let mut sealed = sealed_named.lock().unwrap_or_else(|p| p.into_inner());
        sealed.extend(changed);
    }
    Ok(seal)
}

fn log_seal(seal: &Option<Seal>, why: &str, webhook: Option<&SealWebhook>) {
    if let Some(seal) = seal {
        if let Some(webhook) = webhook {
            webhook.send(seal);
        }
        tracing::info!(
            seal = seal.number,
            leaves = seal.leaves,
            new_key = seal.new_key,
            why,
            "sealed the chains' heads"
        );
        if seal.new_key {
            tracing::warn!(
                seal = seal.number,
                "this seal is signed by a new instance key (a first start, or a restored store)"
            );
        }
    }
}

impl Sealer {
    /// Starts the task on the current runtime: first, with `seal_at_start`, the tail no seal
    /// covered, then a seal every `interval` while anything was written.
    /// Each seal goes to `webhook` once durable (the final one, made as the process stops, is
    /// in the store and the next export only).
    pub fn start(
        store: Store,
        interval: Duration,
        named: NamedHeads,
        webhook: Option<SealWebhook>,
        seal_at_start: bool,
    ) -> Sealer {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let sealed_named = Arc::new(std::sync::Mutex::new(HashMap::new()));
        let task = {
            let store = store.clone();
            let named = named.clone();
            let sealed_named = sealed_named.clone();
            tokio::spawn(async move {
                // A tail left by a crash, an upgrade or an offline writer (found by
                // `Store::find_unsealed` before this process wrote anything) is sealed at once;
                // what this process writes waits for the first interval.
                if seal_at_start {
                    match seal_now(&store, &named, &sealed_named, false).await {
                        Ok(seal) => log_seal(&seal, "start", webhook.as_ref()),
                        Err(e) => tracing::error!(error = %e, "the seal at start failed"),
                    }
                }
                let mut ticks = tokio::time::interval(interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticks.tick().await;
                loop {
                    tokio::select! {
                        _ = ticks.tick() => {}
                        _ = stopped.changed() => return,
                    }
                    match seal_now(&store, &named, &sealed_named, false).await {
                        Ok(seal) => log_seal(&seal, "interval", webhook.as_ref()),
                        Err(e) => {
                            tracing::error!(error = %e, "sealing failed; retried at the next interval")
                        }
                    }
                }
            })
        };
        Sealer {
            stop,
            task,
            store,
            named,
            sealed_named,
        }
    }

    /// Stops the task and makes the last seal, which also records that every write is
    /// sealed (so the next start need not look for a tail). For a graceful shutdown, after the
    /// last write.
    pub async fn finish(self) -> Result<(), String> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let seal = seal_now(&self.store, &self.named, &self.sealed_named, true).await?;
        log_seal(&seal, "shutdown", None);
        Ok(())
    }
}
