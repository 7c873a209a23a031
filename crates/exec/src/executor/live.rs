//! The live executions: handing one a follow-up, stopping one, and the shutdown that stops them
//! all and waits until each is recorded (or kills what is left). Each is only told through its
//! `Control` channel; its end is recorded by `launch.rs`.

use runledger_domain::{Followup, RunId};

use super::handle::Executor;
use crate::assignment::Control;
use crate::process;

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

impl Executor {
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
}
