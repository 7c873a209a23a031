//! Webhook notifications of runs' changes, delivered at least once from the durable log
//! (`docs/webhooks.md`).
//!
//! The run actor asks `owed` which deliveries a decision owes (the pure mapping is
//! `domain::topics`), writes them to the outbox (`outbox`, a sled tree) *before* the decision's
//! events, and hands them over in memory only once the events are durable. sled recovers a
//! prefix of its writes, so a durable event always has its outbox entries; an entry without
//! its event was never acknowledged and is dropped at start-up, before anything is served. The
//! dispatcher (its own thread and runtime, so a slow receiver never slows the actors or the API)
//! signs each delivery the Standard Webhooks way (`sign`), connects only to addresses the SSRF
//! rule allows (`address`), retries on the schedule of `backoff`, and removes the entry once
//! the delivery ends (2xx, 410 Gone, or the schedule exhausted). What it holds in memory is
//! bounded; the outbox is the truth it rescans when it had to let go.

pub mod address;
pub mod backoff;
pub mod outbox;
pub mod sign;

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use outbox::{Attempt, Delivery, Ending, Owed};
use runledger_base::metrics::METRICS;
use runledger_config::{Config, Webhook};
use runledger_domain::{evolve, Event, Run, RunId, Timestamp};
use runledger_store::{self as store, Store};

/// Turns a run, as of an event at the given time, into its API JSON (`RunItem`); supplied by
/// the server, which owns the wire format.
pub type Render = Arc<dyn Fn(&Run, Timestamp) -> Result<Vec<u8>, String> + Send + Sync>;

/// Deliveries the dispatcher holds in memory at most; beyond, the outbox alone holds them
/// until a rescan picks them up.
const MAX_TRACKED: usize = 10_000;
/// Attempts in flight together, across subscriptions.
const MAX_IN_FLIGHT: usize = 64;
/// How often the dispatcher looks for owed deliveries it let go of.
const RESCAN_EVERY: Duration = Duration::from_secs(1);
/// A rescan leaves entries this young alone: their command may still be waiting for its sync,
/// and its actor hands them over when it is durable.
const RESCAN_MIN_AGE_MS: u64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Outbox(#[from] outbox::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("cannot build the HTTP client of webhook {name}: {source}")]
    Client {
        name: String,
        source: reqwest::Error,
    },
    #[error("cannot start the webhook dispatcher: {0}")]
    Runtime(std::io::Error),
}

/// The webhooks of this server: a cheap handle; without configured subscriptions it does and
/// writes nothing.
#[derive(Clone, Default)]
pub struct Webhooks {
    inner: Option<Arc<Inner>>,
}

struct Subscription {
    config: Webhook,
    /// What a 410 disabling is tied to: the URL, key and filters it was given under.
    fingerprint: [u8; 32],
    disabled: AtomicBool,
    client: reqwest::Client,
    slots: Arc<tokio::sync::Semaphore>,
}

struct Inner {
    subscriptions: Vec<Subscription>,
    trees: outbox::Trees,
    store: Store,
    /// Outbox keys of the deliveries the dispatcher holds.
    tracked: Mutex<HashSet<Vec<u8>>>,
    /// The time (ms) of the latest delivery left to the outbox alone, 0 when none is.
    overflow: AtomicU64,
    tx: tokio::sync::mpsc::UnboundedSender<Job>,
    rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Job>>>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Recent bodies by event: every subscription owed the same event sends the same bytes.
    bodies: Mutex<Bodies>,
    /// `MAX_TRACKED`, smaller in tests.
    max_tracked: usize,
}

/// Rendered bodies by the event they announce.
type Bodies = HashMap<(RunId, u64), Arc<Vec<u8>>>;

/// Bodies kept at most; reaching it empties the memo.
const MAX_BODIES: usize = 512;

/// One delivery the dispatcher holds: what is owed, the attempts made so far, and when the
/// next is due.
struct Job {
    owed: Owed,
    attempts: u32,
    due: Instant,
}

fn fingerprint(hook: &Webhook) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(hook.url.as_str().as_bytes());
    h.update([0]);
    h.update(&hook.key.0);
    h.update([0, u8::from(hook.allow_private)]);
    for t in &hook.events {
        h.update([t.code()]);
    }
    for team in &hook.teams {
        h.update(team.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

fn client(hook: &Webhook) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .use_rustls_tls()
        // A 3xx is a failed attempt: following it would reach an address the SSRF rule never
        // saw.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy from the environment would take the connection out of the resolver's hands.
        .no_proxy()
        .dns_resolver(Arc::new(address::Guard {
            allow_private: hook.allow_private,
        }))
        .timeout(hook.timeout)
        .user_agent(concat!("runledger-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|source| Error::Client {
            name: hook.name.clone(),
            source,
        })
}

/// The time in milliseconds as a `Timestamp` (the shell's clock).
fn now() -> Timestamp {
    runledger_base::clock::now()
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

    /// The deliveries a decision owes: for each event of `events` (the first at `first_seq`)
    /// that announces a topic, one per subscription that wants the topic and the run's team.
    /// Empty, without allocating, when no webhook is configured.
    pub fn owed(
        &self,
        current: Option<&Run>,
        new: Option<&Run>,
        id: RunId,
        first_seq: u64,
        at: Timestamp,
        events: &[Event],
    ) -> Vec<Owed> {
        let (Some(inner), Some(new)) = (&self.inner, new) else {
            return Vec::new();
        };
        let team = new.team.as_str();
        // A decision of one event (nearly all of them) needs no fold: the states before and
        // after it are at hand.
        let topics = match events {
            [event] => {
                runledger_domain::topics::topic(current.map(|r| r.state), event, Some(new.state))
                    .map(|t| vec![(0, t)])
                    .unwrap_or_default()
            }
            _ => runledger_domain::topics::topics(current, id, events, at),
        };
        let mut owed = Vec::new();
        for (i, topic) in topics {
            for sub in &inner.subscriptions {
                let hook = &sub.config;
                if hook.events.contains(&topic)
                    && (hook.teams.is_empty() || hook.teams.iter().any(|t| t == team))
                    && !sub.disabled.load(Ordering::Relaxed)
                {
                    owed.push(Owed {
                        at,
                        run_id: id,
                        seq: first_seq + i as u64,
                        subscription: hook.name.clone(),
                        topic,
                    });
                }
            }
        }
        owed
    }

    /// Writes owed deliveries to the outbox: before the events that owe them, after the store
    /// admitted the command (`Store::admit`). Not durable until the command's sync.
    pub fn write(&self, owed: &[Owed]) -> Result<(), store::Error> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        for o in owed {
            inner.trees.insert(o).map_err(|e| match e {
                outbox::Error::Sled(e) => store::Error::Sled(e),
                outbox::Error::Corrupt { tree, detail } => {
                    store::Error::CorruptRecord { tree, detail }
                }
            })?;
        }
        METRICS
            .webhook_owed
            .fetch_add(owed.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Takes back what `write` wrote for a command whose events were refused without reaching
    /// the log (their positions may be written by a later command).
    pub fn withdraw(&self, owed: &[Owed]) {
        let Some(inner) = &self.inner else {
            return;
        };
        for o in owed {
            if let Err(e) = inner.trees.remove(o) {
                tracing::warn!(error = %e, "cannot withdraw a webhook delivery; the next start drops it");
            } else {
                owed_done(1);
            }
        }
    }

    /// Hands durable owed deliveries to the dispatcher, in memory, never waiting: past its
    /// bound, they stay in the outbox for a rescan.
    pub fn hand_over(&self, owed: Vec<Owed>) {
        if let Some(inner) = &self.inner {
            for o in owed {
                inner.track(o, 0);
            }
        }
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

fn owed_done(n: u64) {
    let _ = METRICS
        .webhook_owed
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
}

impl Inner {
    fn subscription(&self, name: &str) -> Option<&Subscription> {
        self.subscriptions.iter().find(|s| s.config.name == name)
    }

    /// Whether the log holds the event at `(run_id, seq)`.
    fn event_exists(&self, run_id: RunId, seq: u64) -> Result<bool, store::Error> {
        match self.store.run_events(run_id, seq).next() {
            Some(e) => Ok(e?.seq == seq),
            None => Ok(false),
        }
    }

    /// The start-up pass over the outbox (see `Webhooks::open`).
    fn settle(&self) -> Result<(), Error> {
        let (mut kept, mut unacknowledged, mut orphaned) = (0u64, 0u64, 0u64);
        let mut drop = Vec::new();
        let mut owed = Vec::new();
        for item in self.trees.scan(&[]) {
            let (key, owed_entry) = match item {
                Ok(item) => item,
                Err(e) => {
                    tracing::error!(error = %e, "a damaged webhook outbox entry is dropped");
                    continue;
                }
            };
            let live = self
                .subscription(&owed_entry.subscription)
                .is_some_and(|s| !s.disabled.load(Ordering::Relaxed));
            if !self.event_exists(owed_entry.run_id, owed_entry.seq)? {
                unacknowledged += 1;
                drop.push(key);
            } else if !live {
                orphaned += 1;
                drop.push(key);
            } else {
                kept += 1;
                owed.push(owed_entry);
            }
        }
        for key in drop {
            self.trees.outbox.remove(key).map_err(outbox::Error::from)?;
        }
        if unacknowledged + orphaned > 0 {
            self.store.sync_blocking()?;
        }
        METRICS.webhook_owed.store(kept, Ordering::Relaxed);
        // Every entry left is acknowledged, and nothing is in flight yet: into memory with
        // them (what does not fit waits for a rescan), oldest first.
        for o in owed {
            let attempts = self.trees.last_attempt(&o)?;
            if !self.track(o, attempts) {
                break;
            }
        }
        tracing::info!(
            owed = kept,
            unacknowledged,
            of_removed_or_disabled_subscriptions = orphaned,
            "webhook outbox settled"
        );
        Ok(())
    }

    /// Takes a delivery into memory unless it is there already or memory is full.
    fn track(&self, owed: Owed, attempts: u32) -> bool {
        let key = owed.key();
        {
            let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            if tracked.contains(&key) {
                return true;
            }
            if tracked.len() >= self.max_tracked {
                self.overflow.fetch_max(now().0.max(1), Ordering::Relaxed);
                return false;
            }
            tracked.insert(key);
        }
        let job = Job {
            owed,
            attempts,
            due: Instant::now(),
        };
        // The receiver lives as long as the dispatcher; once it stopped, the entry waits in
        // the outbox for the next start.
        let _ = self.tx.send(job);
        true
    }

    fn tracked_len(&self) -> usize {
        self.tracked.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn is_tracked(&self, key: &[u8]) -> bool {
        self.tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    fn untrack(&self, owed: &Owed) {
        self.tracked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&owed.key());
    }

    /// Takes into memory the owed deliveries that only the outbox holds, oldest first, up to
    /// the bound. Entries younger than `RESCAN_MIN_AGE_MS` are left to their actors: their
    /// command may not be durable yet.
    fn rescan(&self) {
        // After a failed sync, an entry's event may be in sled's memory and not on disk.
        if matches!(self.store.condition(), store::health::Condition::Failed(_)) {
            return;
        }
        // Nothing was let go of, or memory is still more than half full: walking the outbox
        // now would find nothing room could be made for.
        if self.overflow.load(Ordering::Relaxed) == 0 || self.tracked_len() > self.max_tracked / 2 {
            return;
        }
        let dropped_at = self.overflow.swap(0, Ordering::Relaxed);
        let young = now().0.saturating_sub(RESCAN_MIN_AGE_MS);
        for item in self.trees.scan(&[]) {
            let (key, owed) = match item {
                Ok(item) => item,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the webhook outbox");
                    self.overflow.fetch_max(dropped_at, Ordering::Relaxed);
                    return;
                }
            };
            if owed.at.0 > young {
                // Keys sort by time: every later entry is younger still. One let go of since
                // `young` may be among them: the next pass looks again.
                if dropped_at > young {
                    self.overflow.fetch_max(dropped_at, Ordering::Relaxed);
                }
                return;
            }
            if self.is_tracked(&key) {
                continue;
            }
            let attempts = match self.trees.last_attempt(&owed) {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read a webhook delivery's attempts");
                    0
                }
            };
            if !self.track(owed, attempts) {
                return;
            }
        }
    }

    /// The body of a delivery: `{"type", "timestamp", "data"}`, with the run as of its event,
    /// so every attempt sends the same bytes.
    fn body(&self, owed: &Owed, render: &Render) -> Result<Arc<Vec<u8>>, String> {
        let memo = |bodies: &Mutex<Bodies>| {
            bodies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(owed.run_id, owed.seq))
                .cloned()
        };
        if let Some(body) = memo(&self.bodies) {
            return Ok(body);
        }
        let body = Arc::new(self.render_body(owed, render)?);
        let mut bodies = self.bodies.lock().unwrap_or_else(|p| p.into_inner());
        if bodies.len() >= MAX_BODIES {
            bodies.clear();
        }
        bodies.insert((owed.run_id, owed.seq), body.clone());
        Ok(body)
    }

    fn render_body(&self, owed: &Owed, render: &Render) -> Result<Vec<u8>, String> {
        let mut run = None;
        let mut at = None;
        for e in self.store.run_events(owed.run_id, 0) {
            let e = e.map_err(|e| format!("cannot read the run's log: {e}"))?;
            // The admission's own decision goes on with the run's schedule and attachments:
            // `run.queued` shows the run as that decision made it, never a scheduled run
            // without its `schedule`.
            let same_decision = owed.seq == 0 && e.event.completes_admission();
            if e.seq > owed.seq && !(same_decision && run.is_some()) {
                break;
            }
            run = evolve(run, owed.run_id, &e.event, e.at);
            if e.seq == owed.seq {
                at = Some(e.at);
            }
        }
        let (Some(run), Some(at)) = (run, at) else {
            return Err(format!(
                "event {} of run {} is not in the log",
                owed.seq, owed.run_id
            ));
        };
        let data = render(&run, at)?;
        let mut body = Vec::with_capacity(data.len() + 80);
        body.extend_from_slice(b"{\"type\":\"");
        body.extend_from_slice(owed.topic.as_str().as_bytes());
        body.extend_from_slice(b"\",\"timestamp\":\"");
        body.extend_from_slice(runledger_format::time::time_text(at).as_bytes());
        body.extend_from_slice(b"\",\"data\":");
        body.extend_from_slice(&data);
        body.push(b'}');
        Ok(body)
    }

    /// One attempt of a delivery; returns the job again when another attempt follows.
    async fn attempt(&self, mut job: Job, render: &Render) -> Option<Job> {
        let owed = &job.owed;
        let Some(sub) = self
            .subscription(&owed.subscription)
            .filter(|s| !s.disabled.load(Ordering::Relaxed))
        else {
            self.end(owed);
            return None;
        };
        let number = job.attempts + 1;
        let started_at = now();
        let started = Instant::now();
        let id = owed.webhook_id();
        let result = match self.body(owed, render) {
            Ok(body) => send(sub, &id, body).await,
            Err(why) => Err(Failure::Payload(why)),
        };
        let took = started.elapsed();
        let (status, error, outcome) = match &result {
            Ok(status) if (200..300).contains(status) => (Some(*status), None, "delivered"),
            Ok(410) => (
                Some(410),
                Some("410 Gone: the subscription is disabled".to_string()),
                "gone",
            ),
            Ok(status) => (Some(*status), Some(format!("HTTP {status}")), "http_error"),
            Err(Failure::Refused(why)) => (None, Some(why.clone()), "refused"),
            Err(Failure::Transport(why)) => (None, Some(why.clone()), "error"),
            Err(Failure::Payload(why)) => (None, Some(why.clone()), "payload_error"),
        };
        METRICS.webhook_attempt(&sub.config.name, outcome, took);
        let retry = backoff::next_delay(sub.config.retry_initial, number);
        let ending = ending(outcome, number);
        let next_retry_at = (ending == Ending::Retrying)
            .then(|| Timestamp(now().0 + u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)));
        if ending != Ending::Delivered {
            tracing::warn!(
                subscription = %sub.config.name,
                run_id = %owed.run_id,
                webhook_id = %id,
                r#type = owed.topic.as_str(),
                attempt = number,
                status = ?status,
                reason = error.as_deref().unwrap_or(""),
                ending = ending.as_str(),
                "webhook delivery attempt failed"
            );
        }
        let record = Attempt {
            topic: owed.topic.code(),
            attempt: number,
            at: started_at,
            status,
            error,
            latency_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            next_retry_at,
            ending,
        };
        if let Err(e) = self.trees.record(owed, &record) {
            tracing::error!(error = %e, "cannot record a webhook delivery attempt");
        }
        if ending == Ending::Disabled {
            sub.disabled.store(true, Ordering::Relaxed);
            if let Err(e) = self.trees.disable(&sub.config.name, &sub.fingerprint) {
                tracing::error!(error = %e, "cannot record that a webhook is disabled");
            }
            tracing::warn!(
                subscription = %sub.config.name,
                "webhook disabled: its receiver answered 410 Gone; its owed deliveries are \
                 dropped, and it stays disabled until its configuration changes"
            );
        }
        match ending {
            Ending::Retrying => {
                job.attempts = number;
                job.due = Instant::now() + retry;
                Some(job)
            }
            _ => {
                self.end(&job.owed);
                // A disabling must outlive a crash: the next start would call the receiver
                // that asked to hear no more. (Other endings may be lost to a crash: the
                // delivery is then repeated, which at least once allows.)
                if ending == Ending::Disabled {
                    if let Err(e) = self.store.sync().await {
                        tracing::error!(error = %e, "cannot make a webhook's disabling durable");
                    }
                }
                None
            }
        }
    }

    /// A delivery is over: its entry leaves the outbox, then memory.
    fn end(&self, owed: &Owed) {
        match self.trees.remove(owed) {
            Ok(()) => owed_done(1),
            Err(e) => tracing::error!(error = %e, "cannot remove an ended webhook delivery"),
        }
        self.untrack(owed);
    }
}

/// How attempt `number` (from 1) with this outcome ends its delivery: a 2xx delivers, a 410
/// disables, a payload that cannot be made now never can, the schedule's last attempt gives up,
/// anything else is retried.
fn ending(outcome: &str, number: u32) -> Ending {
    match outcome {
        "delivered" => Ending::Delivered,
        "gone" => Ending::Disabled,
        "payload_error" => Ending::GaveUp,
        _ if number >= backoff::MAX_ATTEMPTS => Ending::GaveUp,
        _ => Ending::Retrying,
    }
}

/// Why an attempt got no answer.
enum Failure {
    /// The SSRF rule refused the address.
    Refused(String),
    /// Connection, TLS, timeout.
    Transport(String),
    /// The payload could not be made.
    Payload(String),
}

/// Sends one signed attempt; the receiver's status, or why there was none.
async fn send(sub: &Subscription, id: &str, body: Arc<Vec<u8>>) -> Result<u16, Failure> {
    let hook = &sub.config;
    // A literal address never reaches the resolver, so it is checked here.
    let literal = match hook.url.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = literal.filter(|_| !hook.allow_private) {
        if let Some(why) = address::forbidden(ip) {
            return Err(Failure::Refused(
                address::Refused {
                    host: ip.to_string(),
                    ip,
                    why,
                }
                .to_string(),
            ));
        }
    }
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let signature = sign::signature(&hook.key.0, id, timestamp, &body);
    let sent = sub
        .client
        .post(hook.url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body.as_ref().clone())
        .send()
        .await;
    match sent {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) => Err(match address::refusal_in(&e) {
            Some(refused) => Failure::Refused(refused),
            None => Failure::Transport(describe(&e, hook.timeout)),
        }),
    }
}

/// A transport error in one line: its kind and the chain of its causes.
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {} s", timeout.as_secs());
    }
    let mut text = String::from(if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    });
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The dispatcher: a schedule of due deliveries, each attempt a task bounded by the
/// subscription's slots and the overall limit.
async fn dispatch(
    inner: Arc<Inner>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    render: Render,
) {
    let everything = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let mut schedule: BinaryHeap<std::cmp::Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    let mut counter = 0u64;
    let mut rescan = tokio::time::interval(RESCAN_EVERY);
    let tasks = tokio::task::LocalSet::new();
    tasks
        .run_until(async move {
            loop {
                let next = schedule.peek().map(|std::cmp::Reverse((due, _))| *due);
                let due = async move {
                    match next {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop.changed() => return,
                    job = rx.recv() => {
                        let Some(job) = job else { return };
                        counter += 1;
                        schedule.push(std::cmp::Reverse((job.due, counter)));
                        jobs.insert(counter, job);
                    }
                    _ = due => {
                        let now = Instant::now();
                        while let Some(std::cmp::Reverse((at, n))) = schedule.peek().copied() {
                            if at > now {
                                break;
                            }
                            schedule.pop();
                            let Some(job) = jobs.remove(&n) else { continue };
                            let inner = inner.clone();
                            let render = render.clone();
                            let everything = everything.clone();
                            tokio::task::spawn_local(async move {
                                let slots = inner
                                    .subscription(&job.owed.subscription)
                                    .map(|s| s.slots.clone());
                                let _one = match slots {
                                    Some(slots) => slots.acquire_owned().await.ok(),
                                    None => None,
                                };
                                let _all = everything.acquire_owned().await.ok();
                                if let Some(again) = inner.attempt(job, &render).await {
                                    let _ = inner.tx.send(again);
                                }
                            });
                        }
                    }
                    _ = rescan.tick() => {
                        if inner.overflow.load(Ordering::Relaxed) != 0 {
                            let pass = inner.clone();
                            // A walk of the outbox reads sled; off this thread's loop.
                            let _ = tokio::task::spawn_blocking(move || pass.rescan()).await;
                        }
                    }
                }
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{sample_created, RunAdmitted, Topic};

    /// A store with the first event of one run in its log, and a configuration with one
    /// subscription, `ci`.
    fn setup(dir: &std::path::Path) -> (Config, Store, RunId) {
        let secret = dir.join("secret");
        std::fs::write(&secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("write");
        let path = dir.join("runledger.toml");
        std::fs::write(
            &path,
            format!(
                "[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\nsecret_file = {:?}\n",
                secret.display().to_string()
            ),
        )
        .expect("write");
        let overrides = runledger_config::Overrides {
            data_dir: Some(dir.join("data")),
            ..Default::default()
        };
        let config = Config::load(Some(&path), &overrides).expect("config");
        let store = Store::open(&dir.join("data"), &store::Options::default()).expect("store");
        let id = RunId::new(Timestamp(1_000), 1);
        let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
        store
            .append(&store::envelopes(id, 0, Timestamp(1_000), vec![admitted]))
            .expect("append");
        (config, store, id)
    }

    fn owed(id: RunId, seq: u64, subscription: &str) -> Owed {
        Owed {
            at: Timestamp(1_000),
            run_id: id,
            seq,
            subscription: subscription.into(),
            topic: Topic::Queued,
        }
    }

    #[test]
    fn settling_keeps_acknowledged_entries_and_drops_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, id) = setup(dir.path());
        let trees = outbox::Trees::open(store.db()).expect("trees");
        let acknowledged = owed(id, 0, "ci");
        // Written before events that never reached the log: their command was not acknowledged.
        let unacknowledged = owed(id, 1, "ci");
        let elsewhere = owed(RunId::new(Timestamp(2_000), 9), 0, "ci");
        // Of a subscription no longer configured.
        let removed = owed(id, 0, "removed");
        for o in [&acknowledged, &unacknowledged, &elsewhere, &removed] {
            trees.insert(o).expect("insert");
        }
        let hooks = Webhooks::open(&config, &store).expect("open");
        let left: Vec<Owed> = trees.scan(&[]).map(|item| item.expect("entry").1).collect();
        assert_eq!(left, std::slice::from_ref(&acknowledged));
        let inner = hooks.inner.as_ref().expect("configured");
        assert!(inner.is_tracked(&acknowledged.key()));
        assert_eq!(inner.tracked_len(), 1);
    }

    #[test]
    fn without_subscriptions_nothing_is_owed_or_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut config, store, id) = setup(dir.path());
        config.webhooks.clear();
        let hooks = Webhooks::open(&config, &store).expect("open");
        assert!(!hooks.configured());
        let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
        let run = runledger_domain::evolve(None, id, &admitted, Timestamp(1_000));
        let owed = hooks.owed(None, run.as_ref(), id, 0, Timestamp(1_000), &[admitted]);
        assert!(owed.is_empty() && owed.capacity() == 0);
        assert!(!store
            .db()
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == outbox::OUTBOX.as_bytes()));
    }

    #[test]
    fn a_decision_owes_one_delivery_per_topic_and_wanting_subscription() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut config, store, id) = setup(dir.path());
        let mut other = config.webhooks[0].clone();
        other.name = "terminal".into();
        other.events = vec![Topic::Succeeded];
        let mut infra = config.webhooks[0].clone();
        infra.name = "infra".into();
        infra.teams = vec!["infra".into()];
        config.webhooks.extend([other, infra]);
        let hooks = Webhooks::open(&config, &store).expect("open");
        let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
        let run = runledger_domain::evolve(None, id, &admitted, Timestamp(1_000));
        let owed = hooks.owed(None, run.as_ref(), id, 0, Timestamp(1_000), &[admitted]);
        // `terminal` does not want run.queued; `infra` wants another team's runs.
        assert_eq!(owed, [owed_for(id, "ci")]);
        assert_eq!(owed[0].webhook_id(), format!("msg_{id}_0_ci"));
    }

    #[test]
    fn deliveries_past_the_memory_bound_wait_in_the_outbox_for_a_rescan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, id) = setup(dir.path());
        let mut hooks = Webhooks::open(&config, &store).expect("open");
        // A bound of 4 instead of 10,000; the entries are old enough for a rescan.
        let only = hooks
            .inner
            .as_mut()
            .and_then(Arc::get_mut)
            .expect("one handle");
        only.max_tracked = 4;
        let inner = hooks.inner.as_ref().expect("configured");
        let owed: Vec<Owed> = (0..10u64).map(|seq| owed(id, seq, "ci")).collect();
        for o in &owed {
            inner.trees.insert(o).expect("insert");
        }
        for o in &owed {
            inner.track(o.clone(), 0);
        }
        assert_eq!(inner.tracked_len(), 4);
        assert_ne!(inner.overflow.load(Ordering::Relaxed), 0);
        // Memory more than half full: no walk yet.
        inner.end(&owed[0]);
        inner.rescan();
        assert_eq!(inner.tracked_len(), 3);
        // Room again: the oldest entries only the outbox holds come back, up to the bound.
        inner.end(&owed[1]);
        inner.end(&owed[2]);
        inner.rescan();
        assert_eq!(inner.tracked_len(), 4);
        for o in &owed[3..7] {
            assert!(inner.is_tracked(&o.key()), "{o:?}");
        }
        assert_ne!(inner.overflow.load(Ordering::Relaxed), 0, "more are left");
        for o in &owed[3..7] {
            inner.end(o);
        }
        inner.rescan();
        for o in &owed[7..] {
            assert!(inner.is_tracked(&o.key()), "{o:?}");
        }
        assert_eq!(
            inner.overflow.load(Ordering::Relaxed),
            0,
            "nothing is left behind"
        );
    }

    #[test]
    fn the_last_attempt_of_the_schedule_gives_up_and_2xx_and_410_end_at_once() {
        for outcome in ["http_error", "refused", "error"] {
            for n in 1..backoff::MAX_ATTEMPTS {
                assert_eq!(ending(outcome, n), Ending::Retrying, "{outcome} {n}");
            }
            assert_eq!(ending(outcome, backoff::MAX_ATTEMPTS), Ending::GaveUp);
        }
        assert_eq!(ending("delivered", 1), Ending::Delivered);
        assert_eq!(
            ending("delivered", backoff::MAX_ATTEMPTS),
            Ending::Delivered
        );
        assert_eq!(ending("gone", 3), Ending::Disabled);
        assert_eq!(ending("payload_error", 1), Ending::GaveUp);
    }

    fn owed_for(id: RunId, name: &str) -> Owed {
        owed(id, 0, name)
    }

    /// `run.queued` is rendered with the whole admission: a scheduled run's payload carries its
    /// `schedule` (and attachments), recorded right after `Admitted` in the same decision,
    /// and nothing recorded later (a start) leaks into it.
    #[test]
    fn a_queued_payload_shows_the_whole_admission() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, _) = setup(dir.path());
        let hooks = Webhooks::open(&config, &store).expect("open");
        let inner = hooks.inner.as_ref().expect("configured");
        let id = RunId::new(Timestamp(5_000), 2);
        let schedule = runledger_domain::RunSchedule {
            schedule_id: RunId::new(Timestamp(4_000), 3),
            schedule_name: "nightly".into(),
            cron_schedule: "0 3 * * *".into(),
            due: Timestamp(4_900),
        };
        let decision = runledger_domain::decide(
            None,
            runledger_domain::Command::create(
                RunAdmitted::from_legacy(sample_created(2)),
                Vec::new(),
                Some(schedule.clone()),
            ),
        )
        .expect("create");
        assert_eq!(decision.events.len(), 2);
        store
            .append(&store::envelopes(id, 0, Timestamp(5_000), decision.events))
            .expect("append");
        store
            .append(&store::envelopes(
                id,
                2,
                Timestamp(6_000),
                vec![Event::Started { execution: 1 }],
            ))
            .expect("append");
        let render: Render = Arc::new(|run, _| {
            Ok(format!(
                "{:?}|{}|{:?}",
                run.state,
                run.next_seq,
                run.schedule.as_ref().map(|s| s.schedule_name.clone())
            )
            .into_bytes())
        });
        let body = |seq, topic| {
            let owed = Owed {
                seq,
                topic,
                ..owed(id, 0, "ci")
            };
            let body = inner.render_body(&owed, &render).expect("body");
            String::from_utf8(body).expect("text")
        };
        let queued = body(0, Topic::Queued);
        assert!(
            queued.contains(r#""data":Queued|2|Some("nightly")"#),
            "{queued}"
        );
        let started = body(2, Topic::Started);
        assert!(
            started.contains(r#""data":InProgress|3|Some("nightly")"#),
            "{started}"
        );
    }
}
