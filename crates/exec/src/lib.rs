//! Execution: environment queues and capacity, and the agents that work on runs.
//!
//! The executor keeps, per environment, a FIFO queue of runs waiting for a slot and the number
//! of slots in use (`max_concurrent`). It is driven by the effects of decided commands (enqueue,
//! dequeue, launch, deliver, stop) and drives runs back through `Runs` (start, finish). It never
//! writes events itself: every state change goes through the run's actor, so a late agent can
//! never overwrite a cancellation. Agent output goes to the transcript, beside the log.
//!
//! Harnesses: `demo` (in-process, `demo.rs`) and the `command` harness with its presets
//! (`command/`, `presets.rs`), whose child processes `process.rs` finds and stops, and whose
//! agents report artifacts through a file (`report.rs`). This
//! module alone knows processes; nothing else in the service spawns or signals one.

#![forbid(unsafe_code)]

mod agents;
pub mod attachments;
pub mod cgroup;
mod command;
mod demo;
mod denied_writes;
pub mod lines;
pub mod observe;
pub mod presets;
pub mod process;
pub mod report;
pub mod repos;
pub mod safe_fs;
pub mod sandbox;
mod seccomp;
pub mod slurm;
pub mod transcript;
pub mod usage;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use runledger_config::Environment;
use runledger_domain::harness::Harness;
use runledger_domain::{Artifact, ExecutionUsage, Followup, Placement, Run, RunId, StatusMessage};
pub use transcript::Transcripts;

/// How the executor reports back: a queued run taking its slot, what an execution used, and its
/// end. All go through the run's actor (`actor::Runs` implements this), so the executor never
/// writes an event itself and never needs more of the service than these calls.
pub trait Report: Clone + 'static {
    /// Whether new work may start: `false` while the store refuses writes (it is low on space
    /// or failed), when an agent would only add output to a filling disk and its start would be
    /// refused anyway.
    fn accepts_new_work(&self) -> bool;
    /// Starts a run that took a slot (at `placement`, when a cluster scheduler placed it).
    fn start(
        &self,
        id: RunId,
        placement: Option<Placement>,
    ) -> impl std::future::Future<Output = Started>;
    /// Records how an execution ended. A refusal (a cancel or a later execution came first)
    /// is expected and only logged.
    fn finish(
        &self,
        id: RunId,
        execution: u32,
        outcome: Result<(), StatusMessage>,
    ) -> impl std::future::Future<Output = ()>;
    /// Records that execution `execution` was lost with its node and queues the run again for
    /// a new execution (`on_node_failure = "requeue"`). A refusal (a cancel came first) is
    /// only logged.
    fn lose(
        &self,
        id: RunId,
        execution: u32,
        status: StatusMessage,
    ) -> impl std::future::Future<Output = ()>;
    /// Records that execution `execution` took the next `count` follow-ups owed to it. A
    /// refusal (the run was cancelled, or it owes nothing) is expected and only logged.
    fn delivered(
        &self,
        id: RunId,
        execution: u32,
        count: u32,
    ) -> impl std::future::Future<Output = ()>;
    /// Records what an execution used, before its `finish` (so the usage is durable with the
    /// run's end). A refusal (an earlier execution's report, or a second one) is only logged.
    fn record_usage(
        &self,
        id: RunId,
        execution: u32,
        usage: ExecutionUsage,
    ) -> impl std::future::Future<Output = ()>;
    /// Records an artifact the execution reported (`report.rs`), before its usage and its
    /// end. A refusal (the execution is no longer the run's current one, or the run holds
    /// `MAX_ARTIFACTS`) is only logged, never retried.
    fn report_artifact(
        &self,
        id: RunId,
        execution: u32,
        artifact: Artifact,
    ) -> impl std::future::Future<Output = ()>;
}

/// Where a harness hands the artifacts its agent reported, in report order; recorded by
/// `record_artifacts` before the execution's usage and end.
#[derive(Clone)]
pub struct Artifacts(mpsc::UnboundedSender<Artifact>);

impl Artifacts {
    pub fn reported(&self, artifact: Artifact) {
        let _ = self.0.send(artifact);
    }
}

/// Records what a harness reports through `Artifacts`, in order; returns when every handle is
/// dropped and everything reported is recorded.
async fn record_artifacts(
    runs: &impl Report,
    id: RunId,
    execution: u32,
    mut reports: mpsc::UnboundedReceiver<Artifact>,
) {
    while let Some(artifact) = reports.recv().await {
        runs.report_artifact(id, execution, artifact).await;
    }
}

/// How a harness says that its agent took follow-ups: the ones handed to it at its start and
/// the ones sent while it runs, in the order it was given them. What an execution ends without
/// taking is requeued for the run's next execution (`Event::Requeued`).
#[derive(Clone)]
pub struct Deliveries(mpsc::UnboundedSender<u32>);

impl Deliveries {
    /// The agent took the next `count` follow-ups.
    pub fn took(&self, count: u32) {
        if count > 0 {
            let _ = self.0.send(count);
        }
    }
}

/// Records what a harness reports through `Deliveries`, in order, several reports at once
/// when they come faster than the log takes them; returns when every handle is dropped and
/// everything reported is recorded, so an execution's `Finish` comes after its deliveries.
async fn record_deliveries(
    runs: &impl Report,
    id: RunId,
    execution: u32,
    mut reports: mpsc::UnboundedReceiver<u32>,
) {
    while let Some(first) = reports.recv().await {
        let mut count = first;
        while let Ok(more) = reports.try_recv() {
            count = count.saturating_add(more);
        }
        runs.delivered(id, execution, count).await;
    }
}

/// What became of a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// The run is in progress: its `Launch` effect holds the slot.
    Yes,
    /// Refused for good (the run was cancelled meanwhile): the slot is handed back.
    Refused,
    /// The store stopped writing since the check: the run stays first in line for when writes
    /// resume, and the slot is handed back.
    Deferred,
}

/// What a live agent can be told.
#[derive(Debug)]
pub enum Control {
    Followup(Followup),
    Stop,
}

struct Live {
    execution: u32,
    control: mpsc::UnboundedSender<Control>,
}

#[derive(Default)]
struct EnvState {
    queue: VecDeque<RunId>,
    /// The members of `queue` with their teams, so that a run is never queued twice and the
    /// team's count goes down when it leaves.
    queued: HashMap<RunId, Arc<str>>,
    running: usize,
    /// Creates admitted against the cap that have not reached the queue yet.
    reserved: usize,
}

struct State {
    envs: HashMap<String, EnvState>,
    /// Runs whose Slurm allocation is being asked for (they hold a slot and are still
    /// `QUEUED`), each with the sender that withdraws the request.
    placing: HashMap<RunId, tokio::sync::oneshot::Sender<()>>,
    /// What became of the allocation of a run being started: its `launch` takes it.
    placed: HashMap<RunId, Result<slurm::Allocation, StatusMessage>>,
    /// Runs waiting in any queue, and creates admitted but not yet queued, per team.
    teams: HashMap<Arc<str>, TeamLoad>,
    live: HashMap<RunId, Live>,
    /// Set once by `shutdown`: no execution starts any more, and the ones that end without
    /// success are recorded as interrupted by the shutdown.
    shutting_down: bool,
}

#[derive(Default)]
struct TeamLoad {
    queued: usize,
    reserved: usize,
}

impl State {
    fn team(&mut self, team: &Arc<str>) -> &mut TeamLoad {
        self.teams.entry(team.clone()).or_default()
    }

    /// Adds a run to its environment's queue (at the back, or the front for one put back);
    /// false if it was there already.
    fn push(&mut self, env: &str, id: RunId, team: &Arc<str>, front: bool) -> bool {
        // A run whose Slurm allocation is being asked for has left the queue, but is still
        // waiting to start: queueing it again would ask for a second allocation.
        if self.placing.contains_key(&id) {
            return false;
        }
        let slot = self.envs.entry(env.to_string()).or_default();
        if slot.queued.contains_key(&id) {
            return false;
        }
        slot.queued.insert(id, team.clone());
        if front {
            slot.queue.push_front(id);
        } else {
            slot.queue.push_back(id);
        }
        self.team(team).queued += 1;
        true
    }

    /// Takes a run out of its environment's queue's membership, counting it off its team.
    fn leave(&mut self, env: &str, id: RunId) -> Option<Arc<str>> {
        let team = self.envs.get_mut(env)?.queued.remove(&id)?;
        let load = self.team(&team);
        load.queued = load.queued.saturating_sub(1);
        Some(team)
    }
}

/// A queue's cap that a create would exceed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueFull {
    #[error(
        "team {team:?} already has {cap} runs waiting to start, the most `limits.max_queued_per_team` allows; retry once some have started"
    )]
    Team { team: String, cap: usize },
    #[error(
        "environment {environment:?} already has {cap} runs waiting to start, the most its `max_queued` allows; retry once some have started"
    )]
    Environment { environment: String, cap: usize },
}

/// A create admitted against the queues' caps: it counts as waiting until it is dropped, which
/// its caller does once the run is queued (or was not created), so concurrent creates can never
/// overshoot a cap together.
pub struct Reservation {
    state: Arc<Mutex<State>>,
    env: String,
    team: Arc<str>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = state.envs.get_mut(&self.env) {
            slot.reserved = slot.reserved.saturating_sub(1);
        }
        let load = state.team(&self.team);
        load.reserved = load.reserved.saturating_sub(1);
    }
}

/// What harnesses need from the service to run and supervise agents.
#[derive(Clone)]
pub struct Supervision {
    pub transcripts: Transcripts,
    /// Where workspaces (by default) and per-run agent files live.
    pub data_dir: std::path::PathBuf,
    /// This data directory's instance id: the marker that finds our agents' processes.
    pub instance: String,
    /// Time between SIGTERM and SIGKILL when a process tree is stopped.
    pub grace: std::time::Duration,
    /// The launchers of the environments' agent processes.
    pub sandboxes: sandbox::Sandboxes,
    /// Where executions' cgroups are made, for environments with limits.
    pub cgroups: cgroup::Cgroups,
    /// The mirrors of the environments' repositories.
    pub mirrors: repos::Mirrors,
    /// `[secrets]`, for the environments that list them.
    pub secrets: Arc<std::collections::BTreeMap<String, runledger_config::Secret>>,
    /// `[prices]`, for the cost of each execution's usage when it is recorded.
    pub prices: Arc<runledger_config::Prices>,
    /// The instance's credential key: seals runs' MCP credentials at admission and puts them
    /// back at launch.
    pub credentials: runledger_store::credentials::Credentials,
    /// Where attachments are read from and reported artifacts' bytes are kept.
    pub content: runledger_store::content::ContentStore,
    /// What agents may report through `RUNLEDGER_REPORT` (`report.rs`).
    pub artifact_limits: runledger_config::ArtifactLimits,
    /// The Slurm cluster of the environments with `runs_on = "slurm"`.
    pub cluster: slurm::Cluster,
}

impl Supervision {
    /// The supervision of one run: its sandboxes hand its files to, and run its processes as,
    /// the run's own user (`Sandboxes::for_run`).
    pub async fn for_run(&self, run: RunId) -> Result<Supervision, String> {
        Ok(Supervision {
            sandboxes: self.sandboxes.for_run(run).await?,
            ..self.clone()
        })
    }
}

/// A cheap-to-clone handle on the executor.
#[derive(Clone)]
pub struct Executor {
    environments: Arc<Vec<Environment>>,
    supervision: Supervision,
    state: Arc<Mutex<State>>,
    /// Woken whenever a slot is released, for `shutdown` to wait on.
    released: Arc<tokio::sync::Notify>,
    /// Most runs of one team that may wait in the queues together.
    team_queue_cap: usize,
}

/// How an execution that the service's shutdown interrupted is recorded: the service lost it
/// (SPEC §2), and it can be resumed with a follow-up.
pub fn interrupted_by_shutdown() -> runledger_domain::StatusMessage {
    runledger_domain::StatusMessage {
        message: "the service shut down while this run was in progress; its agent was stopped. \
                  Send a follow-up to resume the run in its workspace"
            .into(),
        error_code: Some("internal_error".into()),
        retryable: Some(true),
    }
}

/// What an agent needs to know to work on one execution.
pub struct Assignment {
    pub run: Run,
    pub execution: u32,
    pub followups: Vec<Followup>,
    pub resumed_by: Option<Followup>,
    pub environment: Environment,
    /// The Slurm job the execution runs in, for an environment on Slurm.
    pub allocation: Option<slurm::Allocation>,
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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's environment, if it is still configured.
    fn configured_environment(&self, run: &Run) -> Option<&Environment> {
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
    fn queue_environment(&self, id: Option<&str>) -> Environment {
        self.configured(id)
            .or_else(|| self.environments.first())
            .cloned()
            .unwrap_or_else(Environment::demo)
    }

    /// The environment whose queue and slots a run uses (`queue_environment`).
    fn environment_of(&self, run: &Run) -> Environment {
        self.queue_environment(run.config.environment_id.as_deref())
    }

    /// Admits a create of a run of `team` in environment `environment` (`None`: the default)
    /// against the caps on waiting runs: the environment's `max_queued` and the team's
    /// `max_queued_per_team`. Runs already queued and creates admitted before count.
    pub fn reserve(&self, team: &str, environment: Option<&str>) -> Result<Reservation, QueueFull> {
        let team_cap = self.team_queue_cap;
        let env = self.queue_environment(environment);
        let team: Arc<str> = Arc::from(team);
        let mut state = self.state();
        let load = state.team(&team);
        if load.queued + load.reserved >= team_cap {
            return Err(QueueFull::Team {
                team: team.to_string(),
                cap: team_cap,
            });
        }
        let slot = state.envs.entry(env.id.clone()).or_default();
        if slot.queue.len() + slot.reserved >= env.max_queued {
            return Err(QueueFull::Environment {
                environment: env.id.clone(),
                cap: env.max_queued,
            });
        }
        slot.reserved += 1;
        state.team(&team).reserved += 1;
        Ok(Reservation {
            state: self.state.clone(),
            env: env.id,
            team,
        })
    }

    /// Queues a run for a slot in its environment. Returns whether it has to wait.
    pub fn enqueue(&self, runs: &impl Report, run: &Run) -> bool {
        let env = self.environment_of(run);
        let at_capacity = {
            let mut state = self.state();
            let slot = state.envs.entry(env.id.clone()).or_default();
            let at_capacity = slot.running >= env.max_concurrent || !slot.queue.is_empty();
            state.push(&env.id, run.id, &Arc::from(run.team.as_str()), false);
            at_capacity
        };
        self.pump(runs, &env);
        at_capacity
    }

    /// Removes a cancelled run from its queue, or withdraws its pending Slurm allocation.
    pub fn dequeue(&self, run: &Run) {
        let env = self.environment_of(run);
        let mut state = self.state();
        if let Some(withdraw) = state.placing.remove(&run.id) {
            let _ = withdraw.send(());
        }
        if state.leave(&env.id, run.id).is_some() {
            if let Some(slot) = state.envs.get_mut(&env.id) {
                slot.queue.retain(|id| *id != run.id);
            }
        }
    }

    /// Runs waiting and running, per environment: `(id, queued, running)`.
    pub fn load(&self) -> Vec<(String, usize, usize)> {
        let state = self.state();
        self.environments
            .iter()
            .map(|e| {
                let slot = state.envs.get(&e.id);
                (
                    e.id.clone(),
                    slot.map_or(0, |s| s.queue.len()),
                    slot.map_or(0, |s| s.running),
                )
            })
            .collect()
    }

    /// Starts queued runs while the environment has free slots.
    fn pump(&self, runs: &impl Report, env: &Environment) {
        loop {
            let next = {
                let mut state = self.state();
                // Runs queued during a shutdown stay QUEUED in the log; the next start queues
                // them again.
                if state.shutting_down {
                    return;
                }
                // A store that refuses new work leaves the queue as it is: starting an agent
                // would add output to a filling disk, and its `Start` would be refused anyway.
                // `resume` pumps again once the store writes again.
                if !runs.accepts_new_work() {
                    return;
                }
                let slot = state.envs.entry(env.id.clone()).or_default();
                if slot.running >= env.max_concurrent {
                    return;
                }
                let Some(id) = slot.queue.pop_front() else {
                    return;
                };
                slot.running += 1;
                let team = state.leave(&env.id, id);
                (id, team)
            };
            let (next, team) = next;
            let runs = runs.clone();
            let executor = self.clone();
            let env = env.clone();
            actix_rt::spawn(async move {
                // On Slurm the run starts once its job is allocated; until then it is QUEUED.
                let placement = match &env.slurm {
                    None => None,
                    Some(_) => match executor.place(next, &env).await {
                        Some(placement) => placement,
                        // Withdrawn: the run was cancelled, or the service is stopping (the
                        // run stays QUEUED for the next start).
                        None => {
                            executor.release(&runs, &env);
                            return;
                        }
                    },
                };
                // The Launch effect of an accepted start hands the slot to the agent; a refused
                // start (the run was cancelled meanwhile) gives it back at once.
                match runs.start(next, placement).await {
                    Started::Yes => {}
                    Started::Deferred => {
                        executor.unplace(next).await;
                        if let Some(team) = &team {
                            executor.put_back(next, team, &env);
                        }
                        executor.release(&runs, &env);
                    }
                    Started::Refused => {
                        executor.unplace(next).await;
                        executor.release(&runs, &env);
                    }
                }
            });
        }
    }

    /// Asks Slurm for the allocation of run `id`'s next execution and waits while the job is
    /// pending. `None`: withdrawn (`dequeue`, `shutdown`). `Some(placement)`: start the run
    /// there, or, with `None` inside, start it to fail it with what Slurm said (kept in
    /// `placed` for its `launch`).
    async fn place(&self, id: RunId, env: &Environment) -> Option<Option<Placement>> {
        let slurm = env.slurm.as_ref()?;
        let (withdraw, withdrawn) = tokio::sync::oneshot::channel();
        {
            let mut state = self.state();
            if state.shutting_down || state.placing.contains_key(&id) {
                return None;
            }
            state.placing.insert(id, withdraw);
        }
        let allocated = self
            .supervision
            .cluster
            .allocate(env, slurm, id, self.supervision.grace, async {
                let _ = withdrawn.await;
            })
            .await;
        let still_wanted = self.state().placing.remove(&id).is_some();
        tracing::debug!(run_id = %id, ?allocated, still_wanted, "Slurm allocation");
        match allocated {
            Err(slurm::NotAllocated::Withdrawn) => None,
            Ok(allocation) if !still_wanted => {
                // Withdrawn just as it was granted.
                self.supervision.cluster.release(allocation.job_id).await;
                None
            }
            Ok(allocation) => {
                let placement = allocation.placement();
                self.state().placed.insert(id, Ok(allocation));
                Some(Some(placement))
            }
            Err(slurm::NotAllocated::Refused(status)) => {
                tracing::warn!(run_id = %id, reason = %status.message, "Slurm did not allocate the run's execution");
                self.state().placed.insert(id, Err(status));
                Some(None)
            }
        }
    }

    /// Releases the allocation of a run whose start was refused.
    async fn unplace(&self, id: RunId) {
        let placed = self.state().placed.remove(&id);
        if let Some(Ok(allocation)) = placed {
            self.supervision.cluster.release(allocation.job_id).await;
        }
    }

    /// Puts a run whose start the store refused back at the head of its queue.
    fn put_back(&self, id: RunId, team: &Arc<str>, env: &Environment) {
        self.state().push(&env.id, id, team, true);
    }

    /// Starts what waits in every queue, once the store writes again after refusing.
    pub fn resume(&self, runs: &impl Report) {
        for env in self.environments.iter() {
            self.pump(runs, env);
        }
    }

    fn release(&self, runs: &impl Report, env: &Environment) {
        {
            let mut state = self.state();
            let slot = state.envs.entry(env.id.clone()).or_default();
            slot.running = slot.running.saturating_sub(1);
        }
        self.released.notify_waiters();
        self.pump(runs, env);
    }

    /// Whether `shutdown` has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.state().shutting_down
    }

    /// Slots in use in all environments: executions starting, running or being stopped.
    fn running(&self) -> usize {
        self.state().envs.values().map(|e| e.running).sum()
    }

    /// Shuts execution down: no queued run starts any more, every live execution is stopped
    /// (its process tree gets SIGTERM, then SIGKILL after the grace), and each one is recorded
    /// as `FAILED` with `interrupted_by_shutdown` — unless it succeeded or was cancelled first.
    /// Returns once every slot is released, which is after those events are durable, or after
    /// `limit`. Then it returns `false`, after SIGKILL to every process of this instance that
    /// is still alive, so that no agent outlives the server; the next start records the runs
    /// that are left, as after a crash.
    pub async fn shutdown(&self, limit: std::time::Duration) -> bool {
        let stopped = {
            let mut state = self.state();
            state.shutting_down = true;
            for live in state.live.values() {
                let _ = live.control.send(Control::Stop);
            }
            for (_, withdraw) in state.placing.drain() {
                let _ = withdraw.send(());
            }
            state.live.len()
        };
        tracing::info!(executions = stopped, "stopping the running agents");
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before the check, so a release between the two is not missed.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.running() == 0 {
                self.supervision.cgroups.remove();
                return true;
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                let instance = self.supervision.instance.clone();
                let killed = tokio::task::spawn_blocking(move || process::kill_orphans(&instance))
                    .await
                    .unwrap_or(0);
                tracing::warn!(
                    killed,
                    "agents were not stopped and recorded in time; killed what was left"
                );
                return false;
            }
        }
    }

    /// Launches an execution of the run's agent.
    pub fn launch(
        &self,
        runs: &impl Report,
        run: &Run,
        execution: u32,
        followups: Vec<Followup>,
        resumed_by: Option<Followup>,
    ) {
        let environment = self.environment_of(run);
        let (tx, rx) = mpsc::unbounded_channel();
        self.state().live.insert(
            run.id,
            Live {
                execution,
                control: tx,
            },
        );
        // The agent gets the run's real credentials; the run as recorded holds `***`.
        let mut run = run.clone();
        let unsealed = self.supervision.credentials.restore(&mut run).err();
        let (allocation, not_allocated) = match self.state().placed.remove(&run.id) {
            Some(Ok(allocation)) => (Some(allocation), None),
            Some(Err(status)) => (None, Some(status)),
            None => (None, None),
        };
        let assignment = Assignment {
            run,
            execution,
            followups,
            resumed_by,
            environment: environment.clone(),
            allocation,
        };
        let runs = runs.clone();
        let executor = self.clone();
        actix_rt::spawn(async move {
            let id = assignment.run.id;
            let configured = executor.configured_environment(&assignment.run).is_some();
            // `live` holds this execution already, so a shutdown that began before this check
            // is seen here, and one that begins after it sends the execution `Stop`.
            let shutting_down = executor.state().shutting_down;
            let (reports, delivered) = mpsc::unbounded_channel();
            let deliveries = Deliveries(reports);
            let (artifacts, reported) = mpsc::unbounded_channel();
            let artifacts = Artifacts(artifacts);
            let work = async {
                match environment.harness {
                    _ if shutting_down => (None, None),
                    // Running it elsewhere could mean another harness and other credentials.
                    _ if !configured => (
                        Some(Err(StatusMessage {
                            message: format!(
                                "the run's environment {:?} is no longer configured",
                                assignment
                                    .run
                                    .config
                                    .environment_id
                                    .as_deref()
                                    .unwrap_or("")
                            ),
                            error_code: Some("resource_not_found".into()),
                            retryable: Some(false),
                        })),
                        None,
                    ),
                    // Slurm refused the allocation: the execution fails with what it said.
                    _ if not_allocated.is_some() => (not_allocated.clone().map(Err), None),
                    _ if environment.slurm.is_some() && assignment.allocation.is_none() => (
                        Some(Err(StatusMessage {
                            message: "the run's execution has no Slurm allocation (it was \
                                      started without one)"
                                .into(),
                            error_code: Some("internal_error".into()),
                            retryable: Some(true),
                        })),
                        None,
                    ),
                    // Never launched with `***` where a credential should be.
                    _ if unsealed.is_some() => (
                        Some(Err(StatusMessage {
                            message: unsealed
                                .as_ref()
                                .map(ToString::to_string)
                                .unwrap_or_default(),
                            error_code: Some("internal_error".into()),
                            retryable: Some(false),
                        })),
                        None,
                    ),
                    // In-process: no tokens, and no process of its own to measure.
                    Harness::Demo => {
                        drop(artifacts);
                        let transcripts = &executor.supervision.transcripts;
                        (
                            demo::run(&assignment, transcripts, rx, deliveries).await,
                            None,
                        )
                    }
                    Harness::Command | Harness::Claude | Harness::Codex | Harness::Gemini => {
                        command::run(
                            &assignment,
                            &executor.supervision,
                            rx,
                            deliveries,
                            artifacts,
                        )
                        .await
                    }
                }
            };
            // The harness's handles go with it, so the recording ends after the harness.
            let ((outcome, usage), (), ()) = tokio::join!(
                work,
                record_deliveries(&runs, id, execution, delivered),
                record_artifacts(&runs, id, execution, reported)
            );
            {
                let mut state = executor.state();
                if state
                    .live
                    .get(&id)
                    .is_some_and(|l| l.execution == execution)
                {
                    state.live.remove(&id);
                }
            }
            // On Slurm, the job's record has the last word on how the execution ended (`srun`
            // exits 0 after a node failure); then the allocation is given back.
            let mut lost = None;
            let mut outcome = outcome;
            if let Some(allocation) = &assignment.allocation {
                let cluster = &executor.supervision.cluster;
                if outcome.is_some() {
                    let memory = environment.limits.memory_mb;
                    match cluster
                        .verdict(allocation.job_id, memory, slurm::NODE_SETTLE)
                        .await
                    {
                        slurm::Verdict::Stands => {}
                        slurm::Verdict::Failed(status) => outcome = Some(Err(status)),
                        slurm::Verdict::Lost(status) => lost = Some(status),
                    }
                }
                cluster.release(allocation.job_id).await;
            }
            let outcome = match outcome {
                _ if lost.is_some() => None,
                Some(Ok(())) => Some(Ok(())),
                // However it ended during a shutdown (stopped by it, or killed by a supervisor
                // that signalled the agent's process group too), the shutdown ended it. A run
                // cancelled meanwhile refuses this `Finish` (`StaleExecution`).
                _ if executor.state().shutting_down => Some(Err(interrupted_by_shutdown())),
                other => other,
            };
            // Before the end, so the usage is durable when the run's end is; also for a stopped
            // execution (its CPU time and tokens were spent all the same).
            if let Some(usage) = usage {
                runs.record_usage(id, execution, usage).await;
            }
            // `None`: the agent was stopped (the run is already cancelled), or lost.
            if let Some(outcome) = outcome {
                runs.finish(id, execution, outcome).await;
            }
            if let Some(status) = lost {
                let requeue = environment
                    .slurm
                    .as_ref()
                    .is_some_and(runledger_domain::harness::Slurm::requeues_lost);
                tracing::warn!(run_id = %id, execution, requeue, reason = %status.message, "execution lost with its node");
                if requeue {
                    runs.lose(id, execution, status).await;
                } else {
                    runs.finish(id, execution, Err(status)).await;
                }
            }
            executor.release(&runs, &environment);
        });
    }

    /// Hands a follow-up to a live execution.
    pub fn deliver(&self, id: RunId, followup: Followup) {
        if let Some(live) = self.state().live.get(&id) {
            let _ = live.control.send(Control::Followup(followup));
        }
    }

    /// Stops a live execution.
    pub fn stop(&self, id: RunId, execution: u32) {
        if let Some(live) = self.state().live.get(&id) {
            if live.execution == execution {
                let _ = live.control.send(Control::Stop);
            }
        }
    }
}
