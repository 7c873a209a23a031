//! The environments' queues and slots: admitting a create against the caps on waiting runs
//! (`reserve`), queueing and dequeueing runs, and `pump`, which hands free slots to the runs
//! first in line and starts them through `Report`. It never runs an agent itself (`launch.rs`).

use std::sync::{Arc, Mutex};

use runledger_config::Environment;
use runledger_domain::{Run, RunId};

use super::handle::Executor;
use super::state::State;
use crate::reporting::{Report, Started};

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

impl Executor {
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
            env: env.id.clone(),
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
        self.pump(runs, env);
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

    pub(super) fn release(&self, runs: &impl Report, env: &Environment) {
        {
            let mut state = self.state();
            let slot = state.envs.entry(env.id.clone()).or_default();
            slot.running = slot.running.saturating_sub(1);
        }
        self.released.notify_waiters();
        self.pump(runs, env);
    }
}
