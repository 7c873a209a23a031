//! Start-up recovery: the runs of firings a crash cut short are made under their recorded
//! ids, then each schedule that missed due times while the server was down fires once, for
//! the latest of them (see the folder's docs). Nothing here runs after the start.

use std::sync::Arc;

use futures_util::StreamExt;

use super::agenda::missed;
use super::cron;
use super::handle::Schedules;
use super::scheduler::FIRING_CONCURRENCY;
use runledger_base::clock::now;
use runledger_domain::Schedule;

impl Schedules {
    /// At start: makes the run of every firing a crash cut short, then fires each schedule
    /// that missed due times once (see the module's docs).
    pub(super) async fn recover(&self) {
        let at = now();
        let schedules: Vec<(Arc<Schedule>, Option<cron::When>)> = self
            .state()
            .entries
            .values()
            .map(|e| (e.schedule.clone(), e.when.clone()))
            .collect();
        let completed = futures_util::stream::iter(schedules.iter())
            .map(|(s, _)| self.complete(s))
            .buffer_unordered(FIRING_CONCURRENCY)
            .filter(|done| std::future::ready(*done))
            .count()
            .await;
        let caught_up = futures_util::stream::iter(schedules.iter())
            .filter_map(|(s, when)| std::future::ready(missed(s, when.as_ref(), at).map(|due| (s.id, due))))
            .map(|(id, due)| async move {
                tracing::info!(schedule_id = %id, due = due.0, "catching up on a due time missed while the server was down");
                self.fire(id, due).await;
            })
            .buffer_unordered(FIRING_CONCURRENCY)
            .count()
            .await;
        tracing::info!(completed, caught_up, "schedules recovered");
    }

    /// Makes the run of `schedule`'s latest firing if it does not exist (a crash came between
    /// the firing and its run); whether it did.
    async fn complete(&self, schedule: &Arc<Schedule>) -> bool {
        let Some(firing) = schedule.firings.last().copied() else {
            return false;
        };
        match self.inner.runs.run_exists(firing.run_id) {
            Ok(true) => false,
            Ok(false) => {
                let lock = self.writer(schedule.id);
                let _held = lock.lock().await;
                let Some(current) = self.current(schedule.id) else {
                    return false;
                };
                if current.firings.last().map(|f| f.run_id) != Some(firing.run_id) {
                    return false;
                }
                tracing::info!(schedule_id = %schedule.id, run_id = %firing.run_id, "making the run of a firing cut short by a crash");
                self.make_run(&current, firing.due, firing.run_id).await;
                true
            }
            Err(e) => {
                tracing::error!(schedule_id = %schedule.id, error = %e, "could not check the run of a schedule's last firing");
                false
            }
        }
    }
}
