//! The `Runs` handle: the one way in to the runs for start-up, the schedules and the executor
//! (through `Report`). Commands go through the runs' actors, which it activates on demand;
//! reads go through the projector and the read index. It hands the HTTP edge narrower handles
//! (`super::handles`) and is not given to HTTP itself. Callers never see actor addresses.

use std::sync::Arc;
use std::time::Duration;

use super::error::Error;
use super::run_actor::{Execute, Handles, Outcome, Registry};
use crate::api_keys::Keys;
use crate::idempotency::Idempotency;
use runledger_base::clock::now;
use runledger_domain::{
    Attachment, Command, Origin, Rejection, Run, RunAdmitted, RunDerivation, RunId, RunSchedule,
    SourceType,
};
use runledger_exec::Executor;
use runledger_projection::projector::Projector;
use runledger_projection::{Index, Page, Query};
use runledger_store::{self as store, Store};

/// A cheap-to-clone handle on all runs: commands go through actors, reads through the index.
#[derive(Clone)]
pub struct Runs {
    pub(super) inner: Arc<Inner>,
}

/// What every handle on the runs shares; the narrow handles of `super::handles` read it too.
pub(super) struct Inner {
    pub(super) store: Store,
    pub(super) index: Index,
    pub(super) executor: Executor,
    pub(super) keys: Keys,
    pub(super) idempotency: Idempotency,
    pub(super) actors: Arc<Registry<Runs>>,
    pub(super) feed: Arc<runledger_base::notify::Feed<RunId>>,
    pub(super) projector: Arc<Projector>,
    pub(super) webhooks: crate::webhooks::Webhooks,
    /// What every run's actor works with, made once: an activation (one per create) then
    /// costs one reference count, not a clone of each handle and its drop when the actor
    /// stops (`docs/performance.md`, "Create path against 3db3b62").
    pub(super) handles: Arc<Handles>,
}

impl Runs {
    pub fn new(
        store: Store,
        index: Index,
        executor: Executor,
        webhooks: crate::webhooks::Webhooks,
    ) -> Runs {
        let projector = Arc::new(Projector::start(index.clone(), store.clone()));
        let feed: Arc<runledger_base::notify::Feed<RunId>> = Arc::default();
        let handles = Arc::new(Handles {
            store: store.clone(),
            index: index.clone(),
            projector: projector.clone(),
            executor: executor.clone(),
            feed: feed.clone(),
            webhooks: webhooks.clone(),
        });
        Runs {
            inner: Arc::new(Inner {
                projector,
                handles,
                keys: Keys::new(store.clone()),
                idempotency: Idempotency::new(store.clone()),
                store,
                index,
                executor,
                actors: Arc::new(Registry::new()),
                feed,
                webhooks,
            }),
        }
    }

    /// The webhook subscriptions, for their deliveries' records.
    pub fn webhooks(&self) -> &crate::webhooks::Webhooks {
        &self.inner.webhooks
    }

    /// Whether the store accepts writes (it is neither low on space nor failed).
    pub fn accepts_writes(&self) -> bool {
        self.inner.store.condition() == store::health::Condition::Writable
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

    /// Runs a command on a run through its actor, its events recorded without an origin: for
    /// callers with no cause to name (tests, tools); the service's own callers use
    /// `execute_as`.
    pub async fn execute(&self, id: RunId, command: Command) -> Result<Outcome, Error> {
        self.execute_inner(id, command, None, false).await
    }

    /// Runs a command on a run through its actor, its events recorded with `origin`.
    pub async fn execute_as(
        &self,
        id: RunId,
        command: Command,
        origin: Option<Origin>,
    ) -> Result<Outcome, Error> {
        self.execute_inner(id, command, origin, false).await
    }

    pub(super) async fn execute_inner(
        &self,
        id: RunId,
        command: Command,
        origin: Option<Origin>,
        fresh: bool,
    ) -> Result<Outcome, Error> {
        // An actor may stop between lookup and send; a second activation then succeeds.
        for _ in 0..5 {
            let addr = self
                .inner
                .actors
                .activate(id, fresh, self, &self.inner.handles);
            match addr.send(Execute(command.clone(), origin.clone())).await {
                Ok(result) => {
                    if result.is_ok() {
                        self.inner.projector.throttle().await;
                    }
                    return result;
                }
                Err(_) => self.inner.actors.deactivated(id, &addr),
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

    /// Creates a run with a fresh id, if its team's and its environment's queues have room;
    /// its first events are recorded with `origin`.
    pub async fn create(
        &self,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
        origin: Option<Origin>,
    ) -> Result<Outcome, Error> {
        // A fresh id has no log yet, so the actor need not read one.
        self.admit(self.new_id(), created, attachments, None, origin, true)
            .await
    }

    /// Creates a run made from another run (`derived`: a rerun or a fork of it) with a fresh
    /// id, if its team's and its environment's queues have room.
    pub async fn create_derived(
        &self,
        admitted: RunAdmitted,
        attachments: Vec<Attachment>,
        derived: RunDerivation,
        origin: Option<Origin>,
    ) -> Result<Outcome, Error> {
        let _waiting = self.reserve(&admitted)?;
        let command = Command::derive(admitted, attachments, derived);
        self.execute_inner(self.new_id(), command, origin, true)
            .await
    }

    /// Holds a place for a run about to be created in the queues' caps, until it is queued.
    pub(super) fn reserve(
        &self,
        created: &RunAdmitted,
    ) -> Result<runledger_exec::Reservation, Error> {
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
        origin: Option<Origin>,
    ) -> Result<Outcome, Error> {
        self.admit(id, created, attachments, None, origin, false)
            .await
    }

    /// Creates the run a firing of `schedule` makes, under the id the scheduler chose and
    /// recorded for that firing beforehand. Like `create_with_id`, an id that exists is
    /// answered with the existing run, so a firing retried after a crash makes no second run;
    /// that answer comes before the queues' caps are asked, so a retry finds its run even when
    /// the queues are full. The run's source is `SCHEDULED_AGENT` whatever `admitted` says,
    /// and its first events name the firing as their origin (`Origin::schedule`).
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
        let origin = super::causes::fired(&schedule);
        self.admit(
            id,
            admitted,
            Vec::new(),
            Some(schedule),
            Some(origin),
            false,
        )
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
        origin: Option<Origin>,
        fresh: bool,
    ) -> Result<Outcome, Error> {
        let _waiting = self.reserve(&admitted)?;
        let command = Command::create(admitted, attachments, schedule);
        match self.execute_inner(id, command, origin, fresh).await {
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

    /// One page of runs, from an index that holds every command acknowledged before the call.
    pub async fn list(&self, query: &Query) -> Result<Page, Error> {
        self.inner.projector.caught_up().await;
        Ok(self.inner.index.list(query)?)
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
}
