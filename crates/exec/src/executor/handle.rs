//! The executor's handle (`Executor`): cheap to clone, it holds the environments, what harnesses
//! need (`Supervision`) and the shared state; here are its construction, its accessors and how
//! a run finds its environment. What it does lives beside it: `queues.rs`, `placement.rs`,
//! `launch.rs`, `live.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use runledger_config::Environment;
use runledger_domain::Run;

use super::state::State;
use crate::slurm;
use crate::supervision::Supervision;
use crate::transcript::Transcripts;

/// A cheap-to-clone handle on the executor.
#[derive(Clone)]
pub struct Executor {
    pub(super) environments: Arc<Vec<Environment>>,
    pub(super) supervision: Supervision,
    pub(super) state: Arc<Mutex<State>>,
    /// Woken whenever a slot is released, for `shutdown` to wait on.
    pub(super) released: Arc<tokio::sync::Notify>,
    /// Most runs of one team that may wait in the queues together.
    pub(super) team_queue_cap: usize,
}

impl Executor {
    pub fn new(environments: Vec<Environment>, supervision: Supervision) -> Executor {
        Executor {
            environments: Arc::new(environments),
            supervision,
            state: Arc::new(Mutex::new(State {
                envs: HashMap::new(),
                placing: HashMap::new(),
                placed: HashMap::new(),
                teams: HashMap::new(),
                live: HashMap::new(),
                shutting_down: false,
            })),
            released: Arc::new(tokio::sync::Notify::new()),
            team_queue_cap: runledger_config::DEFAULT_MAX_QUEUED,
        }
    }

    /// Sets the most runs of one team that may wait in the queues together
    /// (`limits.max_queued_per_team`).
    pub fn with_team_queue_cap(mut self, cap: usize) -> Executor {
        self.team_queue_cap = cap;
        self
    }

    pub fn transcripts(&self) -> &Transcripts {
        &self.supervision.transcripts
    }

    /// The Slurm cluster of the environments that run on it.
    pub fn cluster(&self) -> &slurm::Cluster {
        &self.supervision.cluster
    }

    /// Whether an execution of `run` that is lost with its node (or with the service) is
    /// queued again rather than failed: its environment runs on Slurm with
    /// `on_node_failure = "requeue"`.
    pub fn requeues_lost(&self, run: &Run) -> bool {
        self.configured_environment(run)
            .and_then(|e| e.slurm.as_ref())
            .is_some_and(runledger_domain::harness::Slurm::requeues_lost)
    }

    /// The instance's credential key (`runledger_store::credentials`).
    pub fn credentials(&self) -> &runledger_store::credentials::Credentials {
        &self.supervision.credentials
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's environment, if it is still configured.
    pub(super) fn configured_environment(&self, run: &Run) -> Option<&Environment> {
        self.configured(run.config.environment_id.as_deref())
    }

    /// The environment `id` names (`None`: the default one), if it is configured.
    fn configured(&self, id: Option<&str>) -> Option<&Environment> {
        match id {
            Some(id) => self.environments.iter().find(|e| e.id == id),
            None => self.environments.first(),
        }
    }

    /// The environment whose queue and slots a run in environment `id` uses. A run whose
    /// environment was removed from the configuration waits in the default environment's
    /// queue, and fails at launch.
    ///
    /// Borrowed, not cloned: every create asks twice (its reservation and its queueing), and an
    /// environment's clone is dozens of allocations (`docs/performance.md`, "Create path
    /// against 3db3b62").
    pub(super) fn queue_environment(&self, id: Option<&str>) -> &Environment {
        static DEMO: std::sync::OnceLock<Environment> = std::sync::OnceLock::new();
        self.configured(id)
            .or_else(|| self.environments.first())
            .unwrap_or_else(|| DEMO.get_or_init(Environment::demo))
    }

    /// The environment whose queue and slots a run uses (`queue_environment`).
    pub(super) fn environment_of(&self, run: &Run) -> &Environment {
        self.queue_environment(run.config.environment_id.as_deref())
    }
}
