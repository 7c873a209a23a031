//! `RunHandle`: what the HTTP edge's run endpoints may do with runs — create, read, list and
//! command them, and follow their events. It holds a `Runs` but shows only these methods, so
//! a handler cannot reach the executor's lifecycle, the recovery or the other handles' data.

use super::error::Error;
use super::history::History;
use super::run_actor::Outcome;
use super::runs::Runs;
use crate::idempotency::Idempotency;
use runledger_domain::{Attachment, Command, Origin, Run, RunAdmitted, RunId};
use runledger_projection::{Page, Query};
use runledger_store::Envelope;

/// A cheap-to-clone handle on the runs for the run endpoints (paths under `/api/v1`):
/// Every command and create takes the `Origin` of the request that asked, recorded beside
/// its events.
///
/// - `POST /agent/run`: `credentials` (sealing), `idempotency`, `new_id`, `create`,
///   `create_with_id`, `get`;
/// - `GET /agent/runs` and the console's `/runs`: `list`;
/// - `GET /agent/runs/{id}` and every endpoint that shows a run only to its team (its
///   conversation, deliveries, transcript, events, the session page `/sessions/{id}`, the
///   console's `/runs/{id}`): `get`;
/// - `POST /agent/runs/{id}/followups`, `…/cancel`, `…/session-link/revoke`: `execute`;
/// - `POST /agent/runs/{id}/fork`: `get`, `snapshot_kept`, `credentials`, `create_derived`;
/// - `GET /agent/runs/{id}/events` (history and live stream): `durable_events`, `follow`;
///   the conversation: `durable_events`; the live transcript stream: `follow`;
/// - `POST`/`PUT /agent/schedules…`: `credentials`, to seal a schedule's agent configuration.
#[derive(Clone)]
pub struct RunHandle {
    pub(super) runs: Runs,
}

impl RunHandle {
    pub(super) fn new(runs: &Runs) -> RunHandle {
        RunHandle { runs: runs.clone() }
    }

    /// A fresh run id for a run created now (see `Runs::new_id`).
    pub fn new_id(&self) -> RunId {
        self.runs.new_id()
    }

    /// Creates a run with a fresh id, its first events recorded with `origin` (see
    /// `Runs::create`).
    pub async fn create(
        &self,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
        origin: Origin,
    ) -> Result<Outcome, Error> {
        self.runs.create(created, attachments, Some(origin)).await
    }

    /// Creates a run under an id chosen beforehand, answering an existing id with its run
    /// (see `Runs::create_with_id`).
    pub async fn create_with_id(
        &self,
        id: RunId,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
        origin: Origin,
    ) -> Result<Outcome, Error> {
        self.runs
            .create_with_id(id, created, attachments, Some(origin))
            .await
    }

    /// Creates a fork of a run with a fresh id (see `Runs::create_derived`).
    pub async fn create_derived(
        &self,
        created: RunAdmitted,
        attachments: Vec<Attachment>,
        derived: runledger_domain::RunDerivation,
        origin: Origin,
    ) -> Result<Outcome, Error> {
        self.runs
            .create_derived(created, attachments, derived, Some(origin))
            .await
    }

    /// Whether the snapshot execution `execution` of `run` left was kept, so a fork can
    /// start from it.
    pub fn snapshot_kept(&self, run: &Run, execution: u32) -> bool {
        self.runs.inner.executor.snapshot_kept(run, execution)
    }

    /// One run as of its latest acknowledged command (see `Runs::get`).
    pub fn get(&self, id: RunId) -> Result<Option<Run>, Error> {
        self.runs.get(id)
    }

    /// One page of runs (see `Runs::list`).
    pub async fn list(&self, query: &Query) -> Result<Page, Error> {
        self.runs.list(query).await
    }

    /// Runs a command on a run through its actor, its events recorded with `origin` (the
    /// request that asked).
    pub async fn execute(
        &self,
        id: RunId,
        command: Command,
        origin: Origin,
    ) -> Result<Outcome, Error> {
        self.runs.execute_as(id, command, Some(origin)).await
    }

    /// The records of idempotent creates.
    pub fn idempotency(&self) -> &Idempotency {
        &self.runs.inner.idempotency
    }

    /// The instance's credential key, which seals a run's MCP credentials before it is
    /// created (the executor opens them at launch).
    pub fn credentials(&self) -> &runledger_store::credentials::Credentials {
        self.runs.inner.executor.credentials()
    }

    /// The runs' past states (`GET /agent/runs/{id}?as_of_seq=N`, `…/states`, the console's
    /// timeline).
    pub fn history(&self) -> History {
        History::new(&self.runs)
    }

    /// Follows a run: the subscription wakes when new events of the run are durable.
    pub fn follow(&self, id: RunId) -> runledger_base::notify::Follower<RunId> {
        self.runs.inner.feed.follow(id)
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
        let Some(run) = self.runs.get(id)? else {
            return Ok(None);
        };
        let end = run.next_seq;
        Ok(Some(
            self.runs
                .inner
                .store
                .run_events(id, from.min(end))
                .take_while(move |e| e.as_ref().map_or(true, |e| e.seq < end))
                .map(|e| e.map_err(Error::from)),
        ))
    }
}
