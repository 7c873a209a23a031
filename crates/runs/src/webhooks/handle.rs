//! The `Webhooks` handle: opening (and settling) the outbox at start-up, the dispatcher's
//! thread started and stopped, and a run's deliveries as the API shows them. What a decision
//! owes is `owed`; the delivering is `dispatch`'s.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::client::{client, fingerprint, Subscription};
use super::dispatch::dispatch;
use super::error::Error;
use super::outbox::{self, Delivery};
use super::payload::Render;
use super::tracking::{Inner, MAX_TRACKED};
use runledger_config::Config;
use runledger_domain::RunId;
use runledger_store::Store;

/// The webhooks of this server: a cheap handle; without configured subscriptions it does and
/// writes nothing.
#[derive(Clone, Default)]
pub struct Webhooks {
    pub(super) inner: Option<Arc<Inner>>,
}

impl Webhooks {
    /// Opens the outbox and settles it, before anything is served: drops the entries whose
    /// event is not in the log (their command was never acknowledged), of subscriptions no
    /// longer configured, and of subscriptions a 410 disabled. Nothing is delivered until
    /// `start`. Without configured webhooks the outbox is left alone.
    pub fn open(config: &Config, store: &Store) -> Result<Webhooks, Error> {
        if config.webhooks.is_empty() {
            return Ok(Webhooks::default());
        }
        let trees = outbox::Trees::open(store.db())?;
        let mut subscriptions = Vec::new();
        for hook in &config.webhooks {
            let fp = fingerprint(hook);
            let disabled = trees.is_disabled(&hook.name, &fp)?;
            if !disabled {
                trees.enable(&hook.name)?;
            } else {
                tracing::warn!(
                    subscription = %hook.name,
                    "webhook stays disabled: its receiver answered 410 Gone; change its \
                     configuration to enable it again"
                );
            }
            subscriptions.push(Subscription {
                fingerprint: fp,
                disabled: AtomicBool::new(disabled),
                client: client(hook)?,
                slots: Arc::new(tokio::sync::Semaphore::new(hook.max_in_flight)),
                config: hook.clone(),
            });
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let inner = Inner {
            subscriptions,
            trees,
            store: store.clone(),
            tracked: Mutex::new(HashSet::new()),
            overflow: AtomicU64::new(0),
            tx,
            rx: Mutex::new(Some(rx)),
            stop: tokio::sync::watch::channel(false).0,
            thread: Mutex::new(None),
            bodies: Mutex::new(HashMap::new()),
            max_tracked: MAX_TRACKED,
        };
        inner.settle()?;
        Ok(Webhooks {
            inner: Some(Arc::new(inner)),
        })
    }

    /// Whether any subscription is configured.
    pub fn configured(&self) -> bool {
        self.inner.is_some()
    }
    /// A run's deliveries with their attempts, oldest event first.
    pub fn deliveries(&self, id: RunId) -> Result<Vec<Delivery>, Error> {
        match &self.inner {
            Some(inner) => Ok(inner.trees.deliveries(id)?),
            None => Ok(Vec::new()),
        }
    }

    /// Starts the dispatcher thread, which renders payloads with `render`.
    pub fn start(&self, render: Render) -> Result<(), Error> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        let Some(rx) = inner.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let dispatcher = inner.clone();
        let stop = inner.stop.subscribe();
        let thread = std::thread::Builder::new()
            .name("runledger-webhooks".into())
            .spawn(move || {
                runtime.block_on(dispatch(dispatcher, rx, stop, render));
                // A name lookup still running on the blocking pool must not hold up a stop.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(Error::Runtime)?;
        *inner.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(())
    }

    /// Stops the dispatcher (attempts in flight are abandoned; their entries stay owed) and
    /// waits for its thread, so that it holds no handle of the store.
    pub fn stop(&self) {
        let Some(inner) = &self.inner else {
            return;
        };
        inner.stop.send_replace(true);
        let thread = inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::warn!("the webhook dispatcher ended abnormally");
            }
        }
    }
}
