//! A schedule's commands: create (within the team's cap), a client's update, pause, resume
//! and delete, and the record step every command and firing goes through (decide, append,
//! sync, install the new state, wake the scheduler if the agenda's head moved earlier), under
//! the schedule's own lock.

use std::sync::Arc;

use super::agenda::{parse_when, View};
use super::error::Error;
use super::handle::Schedules;
use runledger_base::clock::now;
use runledger_domain::{
    decide_schedule, evolve_schedule, Creator, Schedule, ScheduleCommand, ScheduleId,
    ScheduleRejection, ScheduleSpec, Timestamp,
};
use runledger_store::{ScheduleEnvelope, Writer};

impl Schedules {
    /// Creates a schedule with a fresh id.
    pub async fn create(
        &self,
        spec: ScheduleSpec,
        enabled: bool,
        team: String,
        by: Creator,
    ) -> Result<View, Error> {
        let count = self
            .state()
            .entries
            .values()
            .filter(|e| e.schedule.team == team)
            .count();
        // Each schedule's state, its prompt included (up to 64 KiB), is in memory: the cap
        // bounds what one team's keys can make the server hold.
        let cap = self.inner.config.max_schedules_per_team;
        if count >= cap {
            return Err(Error::TooMany(team, cap));
        }
        let id = self.inner.runs.new_id();
        let command = ScheduleCommand::Create {
            spec,
            enabled,
            team,
            by,
        };
        self.execute(id, command, Writer::Client).await
    }

    /// Runs a client's command (update, pause, resume, delete) on schedule `id`.
    pub async fn execute_client(
        &self,
        id: ScheduleId,
        command: ScheduleCommand,
    ) -> Result<View, Error> {
        self.execute(id, command, Writer::Client).await
    }

    pub(super) fn writer(&self, id: ScheduleId) -> Arc<tokio::sync::Mutex<()>> {
        let mut writers = self.inner.writers.lock().unwrap_or_else(|p| p.into_inner());
        // Locks nobody holds or waits for are dropped now and then, so the map stays the size
        // of the commands in flight.
        if writers.len() > 1024 {
            writers.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        writers.entry(id).or_default().clone()
    }

    async fn execute(
        &self,
        id: ScheduleId,
        command: ScheduleCommand,
        writer: Writer,
    ) -> Result<View, Error> {
        let lock = self.writer(id);
        let _held = lock.lock().await;
        let current = self.current(id);
        let schedule = self.record(id, current, command, writer).await?;
        Ok(View {
            next_run: self.state().entries.get(&id).and_then(|e| e.next),
            schedule,
        })
    }

    /// Decides `command`, appends its events, waits until they are durable and installs the
    /// new state. The caller holds the schedule's lock.
    pub(super) async fn record(
        &self,
        id: ScheduleId,
        current: Option<Arc<Schedule>>,
        command: ScheduleCommand,
        writer: Writer,
    ) -> Result<Arc<Schedule>, Error> {
        let events = decide_schedule(current.as_deref(), command)?;
        if events.is_empty() {
            // Nothing to record (pausing a paused schedule): the state as it is.
            return current.ok_or(Error::Rejected(ScheduleRejection::NotFound));
        }
        self.inner.store.admit(writer)?;
        let at = now().max(current.as_ref().map_or(Timestamp(0), |s| s.updated_at));
        let first_seq = current.as_ref().map_or(0, |s| s.next_seq);
        let envelopes: Vec<ScheduleEnvelope> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| ScheduleEnvelope {
                schedule_id: id,
                seq: first_seq + i as u64,
                at,
                event,
            })
            .collect();
        self.inner.store.append_schedule(&envelopes)?;
        self.inner.store.sync().await?;
        let mut folded = current.as_deref().cloned();
        for e in &envelopes {
            folded = evolve_schedule(folded, id, &e.event, e.at);
        }
        let schedule = Arc::new(folded.ok_or(Error::Rejected(ScheduleRejection::NotFound))?);
        let when = parse_when(&schedule, self.seconds());
        let earlier = {
            let mut state = self.state();
            let before = state.agenda.first().map(|(due, _)| *due);
            if schedule.deleted {
                state.remove(id);
            } else {
                state.install(schedule.clone(), when, now());
            }
            let after = state.agenda.first().map(|(due, _)| *due);
            after.is_some() && (before.is_none() || after < before)
        };
        if earlier {
            self.inner.wake.notify_one();
        }
        Ok(schedule)
    }
}
