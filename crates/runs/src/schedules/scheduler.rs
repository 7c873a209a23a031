//! The scheduler: one task that sleeps until the earliest due time (or a change, or a clock
//! check), and each firing: recorded first, then its run made under the id recorded with it;
//! a firing that cannot make its run is recorded as failed. What is due is the agenda's
//! (`agenda`); recording is `commands`'.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::error::Error;
use super::handle::{Schedules, CRASH_VAR};
use runledger_base::clock::now;
use runledger_domain::{
    RunAdmitted, RunCreated, RunId, RunSchedule, Schedule, ScheduleCommand, ScheduleId, SourceType,
    Timestamp,
};
use runledger_store::{self as store, Writer};

/// How many firings may be making their runs at once (a minute boundary where thousands of
/// schedules are due is many firings at once; they share group commits).
pub(super) const FIRING_CONCURRENCY: usize = 64;

/// The longest the scheduler sleeps before it reads the wall clock again: a clock stepped by
/// NTP (or a suspended host) is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(1);

impl Schedules {
    /// The scheduler: fires what is due, sleeps until the next due time or a change.
    pub(super) async fn serve(&self) {
        let permits = Arc::new(tokio::sync::Semaphore::new(FIRING_CONCURRENCY));
        tracing::info!("the scheduler is running");
        loop {
            if self.inner.stopping.load(Ordering::Acquire) || self.inner.runs.is_shutting_down() {
                tracing::info!("the scheduler stopped");
                return;
            }
            let at = now();
            let step = {
                let mut state = self.state();
                match state.agenda.first().copied() {
                    Some((due, id)) if due <= at => {
                        state.agenda.remove(&(due, id));
                        if let Some(entry) = state.entries.get_mut(&id) {
                            entry.next = None;
                        }
                        Ok((id, due))
                    }
                    Some((due, _)) => Err(Duration::from_millis(due.0 - at.0).min(MAX_SLEEP)),
                    None => Err(MAX_SLEEP),
                }
            };
            match step {
                Ok((id, due)) => {
                    let Ok(permit) = permits.clone().acquire_owned().await else {
                        return;
                    };
                    let this = self.clone();
                    actix_rt::spawn(async move {
                        this.fire(id, due).await;
                        drop(permit);
                    });
                }
                Err(wait) => {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.inner.wake.notified() => {}
                    }
                }
            }
        }
    }

    /// Fires schedule `id` for `due`: records the firing, then makes its run.
    pub(super) async fn fire(&self, id: ScheduleId, due: Timestamp) {
        let lock = self.writer(id);
        let _held = lock.lock().await;
        let Some((current, when)) = self
            .state()
            .entries
            .get(&id)
            .map(|e| (e.schedule.clone(), e.when.clone()))
        else {
            return;
        };
        // An update may have changed the expression since `due` was put on the agenda: a due
        // time the current expression does not have is not fired.
        let still_due = when.is_some_and(|w| w.latest_at_or_before(due) == Some(due));
        if !current.enabled
            || current.deleted
            || current.last_due.is_some_and(|l| due <= l)
            || !still_due
        {
            self.reschedule(id, due);
            return;
        }
        // The run's id is chosen, and recorded with the firing, before the run is made: the
        // firing completed after a crash makes the run under this same id.
        let run_id = self.inner.runs.new_id();
        // A firing adds work: refused while the store refuses new work (low on space), and
        // then recorded as a failed firing, which is how the work already under way ends.
        let fired = self
            .record(
                id,
                Some(current.clone()),
                ScheduleCommand::Fire { due, run_id },
                Writer::Client,
            )
            .await;
        let schedule = match fired {
            Ok(s) => s,
            Err(Error::Store(store::Error::Refused(refusal))) => {
                tracing::warn!(schedule_id = %id, due = due.0, %refusal, "a schedule's firing was refused");
                runledger_base::metrics::METRICS.schedule_fired(false);
                let failed = ScheduleCommand::FailFire {
                    due,
                    error: refusal.to_string(),
                };
                if let Err(e) = self
                    .record(id, Some(current), failed, Writer::Internal)
                    .await
                {
                    tracing::error!(schedule_id = %id, error = %e, "could not record a schedule's refused firing");
                    self.reschedule(id, due);
                }
                return;
            }
            Err(e) => {
                tracing::error!(schedule_id = %id, due = due.0, error = %e, "could not record a schedule's firing; it is retried at the next start");
                self.reschedule(id, due);
                return;
            }
        };
        if self.inner.crash_after_fired {
            tracing::warn!(schedule_id = %id, "{CRASH_VAR}: killing the server after a firing");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        self.make_run(&schedule, due, run_id).await;
    }

    /// Puts a schedule whose firing was skipped or failed back on the agenda, after `due`.
    fn reschedule(&self, id: ScheduleId, due: Timestamp) {
        let mut state = self.state();
        let at = now().max(due);
        if let Some(entry) = state.entries.get(&id) {
            let (schedule, when) = (entry.schedule.clone(), entry.when.clone());
            state.install(schedule, when, at);
        }
    }

    /// Makes the run of the firing of `schedule` due at `due`, under `run_id`; a run that
    /// cannot be made (the queue is full, the environment is gone) is recorded as the
    /// firing's failure (`last_spawn_error`). The caller holds the schedule's lock.
    pub(super) async fn make_run(&self, schedule: &Arc<Schedule>, due: Timestamp, run_id: RunId) {
        let made = match self.admission(schedule) {
            Ok(admitted) => {
                let info = RunSchedule {
                    schedule_id: schedule.id,
                    schedule_name: schedule.spec.name.clone(),
                    cron_schedule: schedule.spec.cron.clone(),
                    due,
                };
                self.inner
                    .runs
                    .create_scheduled(run_id, admitted, info)
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(why) => Err(why),
        };
        match made {
            Ok(_) => {
                let lag = Duration::from_millis(now().0.saturating_sub(due.0));
                runledger_base::metrics::METRICS.schedule_lag.observe(lag);
                runledger_base::metrics::METRICS.schedule_fired(true);
                tracing::info!(schedule_id = %schedule.id, %run_id, due = due.0, lag_ms = lag.as_millis() as u64, "a schedule fired");
            }
            Err(error) => {
                runledger_base::metrics::METRICS.schedule_fired(false);
                tracing::warn!(schedule_id = %schedule.id, due = due.0, %error, "a schedule's firing could not make its run");
                let current = self.current(schedule.id);
                let failed = ScheduleCommand::FailFire { due, error };
                if let Err(e) = self
                    .record(schedule.id, current, failed, Writer::Internal)
                    .await
                {
                    tracing::error!(schedule_id = %schedule.id, error = %e, "could not record a schedule's failed firing");
                }
            }
        }
    }

    /// The admission of a run of `schedule`: its prompt, config and metadata, its team, the
    /// key that created it as the run's creator (the sealed credentials are bound to that
    /// key), source `SCHEDULED_AGENT`. Refused when its environment is no longer configured
    /// or no longer open to the schedule's team.
    fn admission(&self, schedule: &Schedule) -> Result<RunAdmitted, String> {
        let spec = &schedule.spec;
        if let Some(env_id) = &spec.config.environment_id {
            match self.inner.config.environment(env_id) {
                None => return Err(format!("environment {env_id:?} is no longer configured")),
                Some(env) if !env.open_to(&schedule.team) => {
                    return Err(format!(
                        "environment {env_id:?} is no longer open to team {:?}",
                        schedule.team
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(RunAdmitted {
            created: RunCreated {
                title: spec.name.clone(),
                prompt: spec.prompt.clone(),
                config: spec.config.clone(),
                creator: schedule.created_by.clone(),
                source: SourceType::ScheduledAgent,
                metadata: spec.metadata.clone(),
            },
            team: schedule.team.clone(),
            sealed: spec.sealed.clone(),
        })
    }
}
