//! Placement on Slurm: asking for the allocation of a run that took a slot, waiting while its
//! job is pending, withdrawing the request when the run is cancelled or the service stops, and
//! giving an allocation back when the run's start is refused. The run stays `QUEUED` meanwhile.

use runledger_config::Environment;
use runledger_domain::{Placement, RunId};

use super::handle::Executor;
use crate::slurm;

impl Executor {
    /// Asks Slurm for the allocation of run `id`'s next execution and waits while the job is
    /// pending. `None`: withdrawn (`dequeue`, `shutdown`). `Some(placement)`: start the run
    /// there, or, with `None` inside, start it to fail it with what Slurm said (kept in
    /// `placed` for its `launch`).
    pub(super) async fn place(&self, id: RunId, env: &Environment) -> Option<Option<Placement>> {
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
    pub(super) async fn unplace(&self, id: RunId) {
        let placed = self.state().placed.remove(&id);
        if let Some(Ok(allocation)) = placed {
            self.supervision.cluster.release(allocation.job_id).await;
        }
    }
}
