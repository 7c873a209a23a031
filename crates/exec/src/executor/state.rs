//! The executor's state behind its one mutex: per environment the FIFO queue of waiting runs
//! and the slots in use, per team the runs waiting, the Slurm allocations being asked for and
//! granted, the live executions, and whether the shutdown has begun. Bookkeeping only: it
//! starts, stops and records nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::mpsc;

use runledger_domain::{RunId, StatusMessage};

use crate::assignment::Control;
use crate::slurm;

pub(super) struct Live {
    pub(super) execution: u32,
    pub(super) control: mpsc::UnboundedSender<Control>,
}

#[derive(Default)]
pub(super) struct EnvState {
    pub(super) queue: VecDeque<RunId>,
    /// The members of `queue` with their teams, so that a run is never queued twice and the
    /// team's count goes down when it leaves.
    pub(super) queued: HashMap<RunId, Arc<str>>,
    pub(super) running: usize,
    /// Creates admitted against the cap that have not reached the queue yet.
    pub(super) reserved: usize,
}

pub(super) struct State {
    pub(super) envs: HashMap<String, EnvState>,
    /// Runs whose Slurm allocation is being asked for (they hold a slot and are still
    /// `QUEUED`), each with the sender that withdraws the request.
    pub(super) placing: HashMap<RunId, tokio::sync::oneshot::Sender<()>>,
    /// What became of the allocation of a run being started: its `launch` takes it.
    pub(super) placed: HashMap<RunId, Result<slurm::Allocation, StatusMessage>>,
    /// Runs waiting in any queue, and creates admitted but not yet queued, per team.
    pub(super) teams: HashMap<Arc<str>, TeamLoad>,
    pub(super) live: HashMap<RunId, Live>,
    /// Set once by `shutdown`: no execution starts any more, and the ones that end without
    /// success are recorded as interrupted by the shutdown.
    pub(super) shutting_down: bool,
}

#[derive(Default)]
pub(super) struct TeamLoad {
    pub(super) queued: usize,
    pub(super) reserved: usize,
}

impl State {
    pub(super) fn team(&mut self, team: &Arc<str>) -> &mut TeamLoad {
        self.teams.entry(team.clone()).or_default()
    }

    /// Adds a run to its environment's queue (at the back, or the front for one put back);
    /// false if it was there already.
    pub(super) fn push(&mut self, env: &str, id: RunId, team: &Arc<str>, front: bool) -> bool {
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
    pub(super) fn leave(&mut self, env: &str, id: RunId) -> Option<Arc<str>> {
        let team = self.envs.get_mut(env)?.queued.remove(&id)?;
        let load = self.team(&team);
        load.queued = load.queued.saturating_sub(1);
        Some(team)
    }
}
