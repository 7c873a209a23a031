//! One actix actor per active run, and the `Runs` handle through which everything else talks
//! to runs.
//!
//! The actor serialises a run's commands: it folds the run's log when activated, decides each
//! command against that state, appends the events, waits for them to be durable, hands the new
//! row to the projector (which updates the read index in the background, see
//! `projection::projector`), dispatches the decision's side effects, and replies. No effect is
//! performed before its events are durable, and replaying the log performs none. It stops as
//! soon as the run has no execution in progress (queued or finished), and after a quiet spell
//! otherwise, so idle, waiting and finished runs hold no actor. Callers never see actor
//! addresses: `Runs` activates actors on demand.

mod report;
mod run_actor;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;

use crate::api_keys::Keys;
use crate::failure::{self, Cause};
use crate::idempotency::Idempotency;
use run_actor::{Execute, Handles, RunActor};
use runledger_base::clock::now;
use runledger_domain::{
    Attachment, Command, Rejection, Run, RunAdmitted, RunId, RunSchedule, RunState, SourceType,
    StatusMessage,
};
use runledger_exec::{transcript, Executor, Transcripts};
use runledger_projection::projector::Projector;
use runledger_projection::{self as projection, Index, Page, Query};
use runledger_store::{self as store, Store};

/// One stored event with its place in the run's log and the time it was recorded, as
/// `Runs::durable_events` yields it.
pub use runledger_store::Envelope;

/// How long a live run's actor waits for a message before it stops.
const IDLE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rejected(#[from] Rejection),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Index(#[from] projection::Error),
    #[error("the run's actor, or the server, is unavailable")]
    Unavailable,
    #[error(transparent)]
    QueueFull(#[from] runledger_exec::QueueFull),
}

impl Error {
    /// Whether this is a damaged record in the run's log (as opposed to a failing store).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Store(store::Error::Corrupt { .. })
                | Error::Index(projection::Error::Store(store::Error::Corrupt { .. }))
        )
    }

    /// What the failure means to a caller that must answer for it.
    pub fn cause(&self) -> Cause<'_> {
        match self {
            Error::Rejected(rejection) => Cause::Rejected(rejection),
            Error::Unavailable => Cause::Unavailable,
            Error::QueueFull(full) => Cause::QueueFull(full.to_string()),
            Error::Index(projection::Error::BadCursor(why)) => Cause::BadCursor(why),
            Error::Store(e) | Error::Index(projection::Error::Store(e)) => failure::of_store(e),
            Error::Index(_) => Cause::Internal,
        }
    }
}

/// A file of a create, validated and decoded, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub file_name: String,
    pub mime_type: String,
    pub bytes: Vec<u8>,
}

/// What the health endpoints and metrics show of the store.
#[derive(Debug, Clone)]
pub struct StoreHealth {
    /// Why the store refuses writes; `None` while it accepts them.
    pub refusal: Option<String>,
    /// Whether the refusal can clear without a restart (the store is low on space).
    pub refusal_clears: bool,
    /// Group-commit syncs so far, and the microseconds spent in them.
    pub syncs: (u64, u64),
    /// Writes refused because the store could not durably write.
    pub refused_writes: u64,
}

/// Reads of the runs' transcripts (the agents' output), without the writers.
#[derive(Clone, Copy)]
pub struct TranscriptReader<'a>(&'a Transcripts);

impl TranscriptReader<'_> {
    /// Entries of run `id` from `offset`: at most `limit` of them and about `max_bytes`.
    pub fn read(
        &self,
        id: RunId,
        offset: u64,
        limit: usize,
        max_bytes: u64,
    ) -> std::io::Result<transcript::Slice> {
        self.0.read(id, offset, limit, max_bytes)
    }

    /// Complete lines of run `id`'s transcript from `offset`, unparsed (see
    /// `Transcripts::read_raw`).
    pub fn read_raw(
        &self,
        id: RunId,
        offset: u64,
        max_bytes: u64,
    ) -> std::io::Result<transcript::RawSlice> {
        self.0.read_raw(id, offset, max_bytes)
    }

    /// Notices of run `id`'s transcript growing and of its writers closing.
    pub fn follow(&self, id: RunId) -> runledger_base::notify::Follower<RunId> {
        self.0.follow(id)
    }

    /// The last entries of run `id`, about `max_bytes` of them.
    pub fn tail(&self, id: RunId, max_bytes: u64) -> std::io::Result<transcript::Slice> {
        self.0.tail(id, max_bytes)
    }
}

/// The result of a command that was accepted.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub run: Run,
    /// Whether the run had to wait for capacity when it was queued.
    pub at_capacity: bool,
}

/// A cheap-to-clone handle on all runs: commands go through actors, reads through the index.
#[derive(Clone)]
pub struct Runs {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    index: Index,
    executor: Executor,
    keys: Keys,
    idempotency: Idempotency,
    actors: Mutex<HashMap<RunId, Addr<RunActor>>>,
    feed: Arc<runledger_base::notify::Feed<RunId>>,
    projector: Arc<Projector>,
    webhooks: crate::webhooks::Webhooks,
}

impl Runs {
    pub fn new(
        store: Store,
        index: Index,
        executor: Executor,
        webhooks: crate::webhooks::Webhooks,
    ) -> Runs {
        Runs {
            inner: Arc::new(Inner {
                projector: Arc::new(Projector::start(index.clone(), store.clone())),
                keys: Keys::new(store.clone()),
                idempotency: Idempotency::new(store.clone()),
                store,
                index,
                executor,
                actors: Mutex::new(HashMap::new()),
                feed: Arc::default(),
                webhooks,
            }),
        }
    }

    /// The instance's API keys.
    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The webhook subscriptions, for their deliveries' records.
    pub fn webhooks(&self) -> &crate::webhooks::Webhooks {
        &self.inner.webhooks
    }

    /// The records of idempotent creates.
    pub fn idempotency(&self) -> &Idempotency {
        &self.inner.idempotency
    }

    /// The instance's credential key, which seals a run's MCP credentials before it is
    /// created (the executor opens them at launch).
    pub fn credentials(&self) -> &runledger_store::credentials::Credentials {
        self.inner.executor.credentials()
    }

    /// The bytes of a content the log names (a plan's Markdown), read whole.
    pub fn read_content(&self, content: &runledger_domain::Content) -> Result<Vec<u8>, Error> {
        Ok(self
            .inner
            .store
            .content()
            .read(content)
            .map_err(store::Error::from)?)
    }

    /// A content the log names, opened for streaming (a download).
    pub fn open_content(
        &self,
        content: &runledger_domain::Content,
    ) -> Result<std::fs::File, Error> {
        Ok(self
            .inner
            .store
            .content()
            .open_content(content)
            .map_err(store::Error::from)?)
    }

    /// Puts the files of a create in the content store, durably, before the run that names
    /// them is recorded; on the blocking pool. Refused, storing nothing, while the store
    /// refuses new work.
    pub async fn store_attachments(&self, files: Vec<Upload>) -> Result<Vec<Attachment>, Error> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.store.admit(store::Writer::Client)?;
        let content = self.inner.store.content().clone();
        let stored = tokio::task::spawn_blocking(move || {
            files
                .into_iter()
                .map(|u| {
                    Ok(Attachment {
                        content: content.put_bytes(&u.bytes, &u.mime_type)?,
                        file_name: u.file_name,
                    })
                })
                .collect::<Result<Vec<_>, store::content::Error>>()
        })
        .await
        .map_err(|_| Error::Unavailable)?;
        Ok(stored.map_err(store::Error::from)?)
    }

    /// The agents' output.
    pub fn transcripts(&self) -> TranscriptReader<'_> {
        TranscriptReader(self.inner.executor.transcripts())
    }

    /// Whether the store accepts writes (it is neither low on space nor failed).
    pub fn accepts_writes(&self) -> bool {
        self.inner.store.condition() == store::health::Condition::Writable
    }

    /// The store's condition and counters.
    pub fn store_health(&self) -> StoreHealth {
        let condition = self.inner.store.condition();
        StoreHealth {
            refusal: condition.reason(),
            refusal_clears: condition == store::health::Condition::LowSpace,
            syncs: self.inner.store.sync_stats(),
            refused_writes: self.inner.store.refused_writes(),
        }
    }

    /// Per environment: its name, the runs waiting for a slot and the executions holding one.
    pub fn load(&self) -> Vec<(String, usize, usize)> {
        self.inner.executor.load()
    }

    /// Whether the shutdown has begun (no execution starts any more).
    pub fn is_shutting_down(&self) -> bool {
        self.inner.executor.is_shutting_down()
    }

    /// Starts what waits in every queue, once the store writes again after refusing.
    pub fn resume_queues(&self) {
        self.inner.executor.resume(self);
    }

    /// Stops every agent and records its run (see `Executor::shutdown`); `false` if some were
    /// still running after `limit`.
    pub async fn stop_agents(&self, limit: Duration) -> bool {
        self.inner.executor.shutdown(limit).await
    }

    /// Makes everything written so far durable.
    pub async fn sync(&self) -> Result<(), store::Error> {
        self.inner.store.sync().await
    }

    /// Number of live actors (for metrics and tests).
    pub fn live_actors(&self) -> usize {
        self.actors().len()
    }

    fn actors(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Addr<RunActor>>> {
        self.inner.actors.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn activate(&self, id: RunId, fresh: bool) -> Addr<RunActor> {
        let mut actors = self.actors();
        if let Some(addr) = actors.get(&id) {
            if addr.connected() {
                return addr.clone();
            }
        }
        let handles = Handles {
            store: self.inner.store.clone(),
            index: self.inner.index.clone(),
            projector: self.inner.projector.clone(),
            executor: self.inner.executor.clone(),
            feed: self.inner.feed.clone(),
            webhooks: self.inner.webhooks.clone(),
        };
        let addr = RunActor::new(id, self.clone(), handles, fresh).start();
        actors.insert(id, addr.clone());
        addr
    }

    /// Called by an actor that stops, so that the next command activates a new one.
    fn deactivated(&self, id: RunId, addr: &Addr<RunActor>) {
        let mut actors = self.actors();
        if actors.get(&id) == Some(addr) {
            actors.remove(&id);
        }
    }

    /// Runs a command on a run through its actor.
    pub async fn execute(&self, id: RunId, command: Command) -> Result<Outcome, Error> {
        self.execute_inner(id, command, false).await
    }

    async fn execute_inner(
        &self,
        id: RunId,
        command: Command,
        fresh: bool,
    ) -> Result<Outcome, Error> {
        // An actor may stop between lookup and send; a second activation then succeeds.
        for _ in 0..5 {
            let addr = self.activate(id, fresh);
            match addr.send(Execute(command.clone())).await {
                Ok(result) => {
                    if result.is_ok() {
                        self.inner.projector.throttle().await;
                    }
                    return result;
                }
                Err(_) => self.deactivated(id, &addr),
            }
        }
        Err(Error::Unavailable)
    }

    /// A fresh run id for a run created now.
    pub fn new_id(&self) -> RunId {
        use rand::RngCore;
        let mut random = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut random);
        RunId::new(now(), u128::from_be_bytes(random))
    }

    /// Creates a run with a fresh id, if its team's and its environment's queues have room.
    pub async fn create(
        &self,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
    ) -> Result<Outcome, Error> {
        // A fresh id has no log yet, so the actor need not read one.
        self.admit(self.new_id(), created, attachments, None, true)
            .await
    }

    /// Holds a place for a run about to be created in the queues' caps, until it is queued.
    fn reserve(&self, created: &RunAdmitted) -> Result<runledger_exec::Reservation, Error> {
        Ok(self.inner.executor.reserve(
            &created.team,
            created.created.config.environment_id.as_deref(),
        )?)
    }

    /// Creates a run under an id chosen beforehand (see `new_id`). Creating an id that exists
    /// is refused with `AlreadyExists`, and answered here with the existing run, which is what
    /// an idempotent retry needs.
    pub async fn create_with_id(
        &self,
        id: RunId,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
    ) -> Result<Outcome, Error> {
        self.admit(id, created, attachments, None, false).await
    }

    /// Creates the run a firing of `schedule` makes, under the id the scheduler chose and
    /// recorded for that firing beforehand. Like `create_with_id`, an id that exists is
    /// answered with the existing run, so a firing retried after a crash makes no second run;
    /// that answer comes before the queues' caps are asked, so a retry finds its run even when
    /// the queues are full. The run's source is `SCHEDULED_AGENT` whatever `admitted` says.
    pub async fn create_scheduled(
        &self,
        id: RunId,
        admitted: RunAdmitted,
        schedule: RunSchedule,
    ) -> Result<Outcome, Error> {
        if let Some(run) = self.get(id)? {
            return Ok(Outcome {
                run,
                at_capacity: false,
            });
        }
        let mut admitted = admitted;
        admitted.created.source = SourceType::ScheduledAgent;
        self.admit(id, admitted, Vec::new(), Some(schedule), false)
            .await
    }

    /// Whether run `id` exists: a run acknowledged but not yet in the index is among the
    /// projector's newest runs, else the index's row says (one point read). Exact, since a
    /// run's creation is acknowledged only once it is durable and handed to the projector.
    pub fn run_exists(&self, id: RunId) -> Result<bool, Error> {
        Ok(self.get(id)?.is_some())
    }

    /// Creates run `id`: holds its place in the queues' caps while `Create` is executed, and
    /// answers an id that exists with the existing run. `fresh`: the id was made just now, so
    /// the actor need not look for a log.
    async fn admit(
        &self,
        id: RunId,
        admitted: RunAdmitted,
        attachments: Vec<Attachment>,
        schedule: Option<RunSchedule>,
        fresh: bool,
    ) -> Result<Outcome, Error> {
        let _waiting = self.reserve(&admitted)?;
        let command = Command::create(admitted, attachments, schedule);
        match self.execute_inner(id, command, fresh).await {
            Err(Error::Rejected(Rejection::AlreadyExists)) => match self.get(id)? {
                Some(run) => Ok(Outcome {
                    run,
                    at_capacity: false,
                }),
                None => Err(Error::Rejected(Rejection::AlreadyExists)),
            },
            other => other,
        }
    }

    /// One run as of its latest acknowledged command: from the projector while the index has
    /// not caught up with the run, else from the index.
    pub fn get(&self, id: RunId) -> Result<Option<Run>, Error> {
        if let Some(run) = self.inner.projector.newest(id) {
            return Ok(Some(run));
        }
        // A store that refuses writes cannot keep its index up to date either: the projector's
        // writes fail, and an acknowledged command may be missing from the index. The log is
        // the truth, so the run is folded from it (tens of µs) while the condition lasts.
        if self.inner.store.condition() != store::health::Condition::Writable {
            return Ok(self.inner.store.load_run(id)?);
        }
        Ok(self.inner.index.get(id)?)
    }

    /// The run holding artifact `uid` (`GET /agent/artifacts/{uid}`), found by the index's
    /// artifact lookup once it holds every command acknowledged before the call.
    pub async fn artifact_run(&self, uid: &str) -> Result<Option<Run>, Error> {
        self.inner.projector.caught_up().await;
        match self.inner.index.artifact_run(uid)? {
            Some(run) => self.get(run.id),
            None => Ok(None),
        }
    }

    /// One page of runs, from an index that holds every command acknowledged before the call.
    pub async fn list(&self, query: &Query) -> Result<Page, Error> {
        self.inner.projector.caught_up().await;
        Ok(self.inner.index.list(query)?)
    }

    /// Runs per state, from an index that holds every command acknowledged before the call.
    /// The first call walks the index's state blocks (see `Index::count_by_state`), so it runs
    /// off the async worker.
    pub async fn count_by_state(&self) -> Result<Vec<(RunState, u64)>, Error> {
        self.inner.projector.caught_up().await;
        let index = self.inner.index.clone();
        match actix_web::web::block(move || index.count_by_state()).await {
            Ok(counts) => Ok(counts?),
            // The blocking pool only fails when the server is stopping.
            Err(_) => Err(Error::Unavailable),
        }
    }

    /// What the runs of each environment used, from an index that holds every command
    /// acknowledged before the call. The first call after a start without saved totals sums
    /// the index's rows (see `Index::usage_by_environment`), so it runs off the async worker.
    pub async fn usage_by_environment(
        &self,
    ) -> Result<runledger_projection::UsageByEnvironment, Error> {
        self.inner.projector.caught_up().await;
        let index = self.inner.index.clone();
        match actix_web::web::block(move || index.usage_by_environment()).await {
            Ok(usage) => Ok(usage?),
            Err(_) => Err(Error::Unavailable),
        }
    }

    /// Applies every acknowledged command to the index, stops the projector and saves the
    /// index's runs per state for the next start (at shutdown, before the last sync, so that no
    /// run is left marked dirty and the next start need not count the runs per state).
    pub fn stop_projector(&self) {
        self.inner.projector.stop();
        if let Err(e) = self.inner.index.save_tally() {
            tracing::warn!(error = %e, "could not save the runs per state; the next start counts them");
        }
    }

    /// Follows a run: the subscription wakes when new events of the run are durable.
    pub fn follow(&self, id: RunId) -> runledger_base::notify::Follower<RunId> {
        self.inner.feed.follow(id)
    }

    /// The run's durable, indexed events from sequence `from` on, read from the log as the
    /// iterator is advanced (so a caller holds only what it keeps). Bounded by the index row,
    /// which is updated only after a sync, so an event appended but not yet durable is never
    /// shown. `None` if the run does not exist.
    pub fn durable_events(
        &self,
        id: RunId,
        from: u64,
    ) -> Result<Option<impl Iterator<Item = Result<Envelope, Error>> + Send + 'static>, Error> {
        let Some(run) = self.get(id)? else {
            return Ok(None);
        };
        let end = run.next_seq;
        Ok(Some(
            self.inner
                .store
                .run_events(id, from.min(end))
                .take_while(move |e| e.as_ref().map_or(true, |e| e.seq < end))
                .map(|e| e.map_err(Error::from)),
        ))
    }

    /// Startup recovery, part one — before any request is served: fails the executions that
    /// were in progress when the service stopped (their agent is gone). Doing this before
    /// serving means no run started by this process can be mistaken for a lost one.
    pub async fn fail_lost_executions(&self) -> Result<usize, Error> {
        let mut failed = 0;
        let mut cursor = None;
        loop {
            let page = self
                .page_in_state(RunState::InProgress, cursor.take())
                .await?;
            for run in &page.runs {
                let lost = StatusMessage {
                    message: "the service restarted while this run was in progress; its execution was lost".into(),
                    error_code: Some("internal_error".into()),
                    retryable: Some(true),
                };
                // On Slurm with `on_node_failure = "requeue"`, the run's job was cancelled at
                // start-up (`exec::slurm::Cluster::reconcile`) and it runs again.
                let finish = if self.inner.executor.requeues_lost(run) {
                    Command::Lose {
                        execution: run.executions,
                        status: lost,
                    }
                } else {
                    Command::Finish {
                        execution: run.executions,
                        outcome: Err(lost),
                    }
                };
                match self.execute(run.id, finish).await {
                    Ok(_) | Err(Error::Rejected(_)) => failed += 1,
                    // A run with a damaged log fails on its own (its commands answer
                    // "damaged"); it must not keep the service from starting.
                    Err(e) if e.is_damage() => {
                        tracing::error!(run_id = %run.id, error = %e, "cannot record the lost execution of a run with a damaged log");
                    }
                    Err(e) => return Err(e),
                }
            }
            // Failed runs leave the range behind the cursor; what follows it is untouched.
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(failed),
            }
        }
    }

    /// Startup recovery, part two — may run while requests are served: puts the runs that were
    /// waiting back in their queues, oldest-queued first. A run that a request queues meanwhile
    /// is not queued twice (the executor's queues ignore duplicates).
    pub async fn requeue_waiting(&self) -> Result<usize, Error> {
        let mut requeued = 0;
        let mut cursor = None;
        loop {
            let page = self.page_in_state(RunState::Queued, cursor.take()).await?;
            for run in &page.runs {
                self.inner.executor.enqueue(self, run);
                requeued += 1;
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(requeued),
            }
        }
    }

    /// One page of the runs in `state`, of every team, oldest update first: recovery walks
    /// the state's index ranges a page at a time and never holds them whole.
    async fn page_in_state(
        &self,
        state: RunState,
        cursor: Option<projection::Cursor>,
    ) -> Result<Page, Error> {
        self.list(&Query {
            states: vec![state],
            every_team: true,
            order: projection::Order::Asc,
            limit: 500,
            cursor,
            ..Query::default()
        })
        .await
    }
}
