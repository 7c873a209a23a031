//! `Status`: what the health probes and `/metrics` show of the service — the store's
//! condition and counters, the queues' load, the live actors, and the runs per state and
//! their usage per environment. It only reads.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::RunState;
use runledger_store as store;

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

/// A cheap-to-clone handle for `GET /readyz` (`store_health`) and `GET /metrics` (all of its
/// methods).
#[derive(Clone)]
pub struct Status {
    runs: Runs,
}

impl Status {
    pub(super) fn new(runs: &Runs) -> Status {
        Status { runs: runs.clone() }
    }

    /// The store's condition and counters.
    pub fn store_health(&self) -> StoreHealth {
        let log = &self.runs.inner.store;
        let condition = log.condition();
        StoreHealth {
            refusal: condition.reason(),
            refusal_clears: condition == store::health::Condition::LowSpace,
            syncs: log.sync_stats(),
            refused_writes: log.refused_writes(),
        }
    }

    /// Per environment: its name, the runs waiting for a slot and the executions holding one.
    pub fn load(&self) -> Vec<(String, usize, usize)> {
        self.runs.inner.executor.load()
    }

    /// Number of live actors (for metrics and tests).
    pub fn live_actors(&self) -> usize {
        self.runs.inner.actors.live()
    }

    /// Runs per state, from an index that holds every command acknowledged before the call.
    /// The first call walks the index's state blocks (see `Index::count_by_state`), so it runs
    /// off the async worker.
    pub async fn count_by_state(&self) -> Result<Vec<(RunState, u64)>, Error> {
        let inner = &self.runs.inner;
        inner.projector.caught_up().await;
        let index = inner.index.clone();
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
        let inner = &self.runs.inner;
        inner.projector.caught_up().await;
        let index = inner.index.clone();
        match actix_web::web::block(move || index.usage_by_environment()).await {
            Ok(usage) => Ok(usage?),
            Err(_) => Err(Error::Unavailable),
        }
    }
}
