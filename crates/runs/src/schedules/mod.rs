//! Schedules (issue #21): named prompts that fire on a cron expression, each firing an
//! ordinary run. This module is the shell around the pure aggregate (`domain::schedule`): it
//! holds every schedule's folded state in memory (a schedule is a few hundred bytes; 10,000 of
//! them are a few MB), records commands in the schedules' logs (`store/schedules.rs`), and runs
//! the scheduler, one task that sleeps until the earliest due time.
//!
//! **Exactly once.** A firing is two durable steps: `Fired { due, run_id }` in the schedule's
//! log, then the run under that id (`Runs::create_scheduled`). The run id is chosen before the
//! first step, so a crash between the two leaves a firing that names a run which does not
//! exist, and the next start makes that run, under that id: never a second one. A crash
//! before the first step leaves nothing, and the start's catch-up fires that due time (below).
//! The domain refuses a second `Fired` for a due time at or before the last one recorded.
//!
//! **Catch-up.** At start, a schedule that missed due times while the server was down fires
//! once, for the latest of them, and then waits for its next due time: at most one catch-up
//! run per schedule, however long the server was down. A due time counts as missed when it is
//! after both the last firing and the schedule's last change (a paused-then-resumed schedule
//! never catches up on what it missed while paused).
//!
//! **Commands** on one schedule are serialised by a per-schedule lock held across decide,
//! append and sync; different schedules' commands share group commits.

pub mod cron;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;

use crate::actor::Runs;
use crate::failure::{self, Cause};
use runledger_base::clock::now;
use runledger_config::Config;
use runledger_domain::{
    decide_schedule, evolve_schedule, Creator, Firing, Run, RunAdmitted, RunCreated, RunId,
    RunSchedule, Schedule, ScheduleCommand, ScheduleId, ScheduleRejection, ScheduleSpec,
    SourceType, Timestamp,
};
use runledger_store::{self as store, ScheduleEnvelope, Store, Writer};

/// How many firings may be making their runs at once (a minute boundary where thousands of
/// schedules are due is many firings at once; they share group commits).
const FIRING_CONCURRENCY: usize = 64;

/// The longest the scheduler sleeps before it reads the wall clock again: a clock stepped by
/// NTP (or a suspended host) is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The variable that makes a debug build kill itself at a point of a firing, for the crash
/// tests: `schedule-fired` (after the firing is durable, before its run is made).
pub const CRASH_VAR: &str = "RUNLEDGER_TEST_CRASH";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rejected(#[from] ScheduleRejection),
    #[error("team {0:?} already has {1} schedules, the most a team may have (schedules.max_per_team); delete one first")]
    TooMany(String, usize),
    #[error(transparent)]
    Store(#[from] store::Error),
}

impl Error {
    /// What the failure means to a caller that must answer for it (`Rejected` is the
    /// caller's to read).
    pub fn cause(&self) -> Option<Cause<'static>> {
        match self {
            Error::Rejected(_) | Error::TooMany(..) => None,
            Error::Store(e) => Some(failure::of_store(e)),
        }
    }
}

/// A schedule as the API shows it: its state and when it fires next.
#[derive(Debug, Clone)]
pub struct View {
    pub schedule: Arc<Schedule>,
    /// The next due time; `None` when paused (or when the expression never matches again).
    pub next_run: Option<Timestamp>,
}

/// A cheap-to-clone handle on every schedule.
#[derive(Clone)]
pub struct Schedules {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    runs: Runs,
    config: Arc<Config>,
    state: Mutex<State>,
    /// One lock per schedule, held by a command from its decision to its state's update.
    writers: Mutex<HashMap<ScheduleId, Arc<tokio::sync::Mutex<()>>>>,
    /// Woken when a due time earlier than the scheduler's wait may have appeared.
    wake: tokio::sync::Notify,
    stopping: AtomicBool,
    crash_after_fired: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<ScheduleId, Entry>,
    /// `(next due time, schedule)` of every enabled schedule: the scheduler's agenda.
    agenda: BTreeSet<(Timestamp, ScheduleId)>,
}

struct Entry {
    schedule: Arc<Schedule>,
    when: Option<cron::When>,
    next: Option<Timestamp>,
}

/// When `schedule` fires next after `now`: nothing while paused or deleted.
fn next_due(schedule: &Schedule, when: Option<&cron::When>, now: Timestamp) -> Option<Timestamp> {
    if !schedule.enabled || schedule.deleted {
        return None;
    }
    let after = schedule.last_due.unwrap_or(Timestamp(0)).max(now);
    when?.next_after(after)
}

/// The due time a start catches up on: the latest one at or before `now`, if it is after the
/// last firing and after the schedule's last change.
fn missed(schedule: &Schedule, when: Option<&cron::When>, now: Timestamp) -> Option<Timestamp> {
    if !schedule.enabled || schedule.deleted {
        return None;
    }
    let latest = when?.latest_at_or_before(now)?;
    let anchor = schedule
        .last_due
        .unwrap_or(Timestamp(0))
        .max(schedule.updated_at);
    (latest > anchor).then_some(latest)
}

impl Schedules {
    /// Folds every schedule's log. A schedule whose log has a damaged record is left out (it
    /// neither fires nor shows; the error is logged): firing from a partial history could
    /// repeat a firing.
    pub fn open(store: &Store, runs: &Runs, config: Arc<Config>) -> Schedules {
        let seconds = config.schedule_seconds;
        let mut folded: HashMap<ScheduleId, Schedule> = HashMap::new();
        let mut damaged: BTreeSet<String> = BTreeSet::new();
        for record in store.scan_schedules() {
            match record {
                Ok(e) => {
                    let previous = folded.remove(&e.schedule_id);
                    if let Some(s) = evolve_schedule(previous, e.schedule_id, &e.event, e.at) {
                        folded.insert(e.schedule_id, s);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "a schedule's log is damaged; the schedule is left out");
                    if let store::Error::ScheduleCorrupt { schedule_id, .. } = &e {
                        damaged.insert(schedule_id.clone());
                    }
                }
            }
        }
        let at = now();
        let mut state = State::default();
        for (id, schedule) in folded {
            if schedule.deleted || damaged.contains(&id.to_string()) {
                continue;
            }
            let when = parse_when(&schedule, seconds);
            state.install(Arc::new(schedule), when, at);
        }
        tracing::info!(schedules = state.entries.len(), "schedules loaded");
        Schedules {
            inner: Arc::new(Inner {
                store: store.clone(),
                runs: runs.clone(),
                config,
                state: Mutex::new(state),
                writers: Mutex::new(HashMap::new()),
                wake: tokio::sync::Notify::new(),
                stopping: AtomicBool::new(false),
                crash_after_fired: cfg!(debug_assertions)
                    && std::env::var(CRASH_VAR).is_ok_and(|v| v == "schedule-fired"),
            }),
        }
    }

    /// Whether cron expressions may have a leading seconds field (the test mode).
    pub fn seconds(&self) -> bool {
        self.inner.config.schedule_seconds
    }

    /// Completes the firings a crash cut short, fires the catch-ups, then runs the scheduler
    /// until `stop`. Spawned once the runs that were waiting are back in their queues.
    pub async fn run(self) {
        self.recover().await;
        self.serve().await;
    }

    /// Stops firing (at shutdown). A firing in progress finishes or is completed by the next
    /// start.
    pub fn stop(&self) {
        self.inner.stopping.store(true, Ordering::Release);
        self.inner.wake.notify_one();
    }

    /// One schedule, if it exists and is not deleted.
    pub fn get(&self, id: ScheduleId) -> Option<View> {
        self.state().entries.get(&id).map(Entry::view)
    }

    /// The schedules of `team`, sorted by name (then id).
    pub fn list(&self, team: &str) -> Vec<View> {
        let mut views: Vec<View> = self
            .state()
            .entries
            .values()
            .filter(|e| e.schedule.team == team)
            .map(Entry::view)
            .collect();
        views.sort_by(|a, b| {
            (a.schedule.spec.name.as_str(), a.schedule.id)
                .cmp(&(b.schedule.spec.name.as_str(), b.schedule.id))
        });
        views
    }

    /// The runs of a schedule's remembered firings, newest first (a run the index does not
    /// hold yet is left out).
    pub fn recent_runs(&self, schedule: &Schedule) -> Vec<(Firing, Run)> {
        schedule
            .firings
            .iter()
            .rev()
            .filter_map(|f| match self.inner.runs.get(f.run_id) {
                Ok(Some(run)) => Some((*f, run)),
                _ => None,
            })
            .collect()
    }

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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn writer(&self, id: ScheduleId) -> Arc<tokio::sync::Mutex<()>> {
        let mut writers = self.inner.writers.lock().unwrap_or_else(|p| p.into_inner());
        // Locks nobody holds or waits for are dropped now and then, so the map stays the size
        // of the commands in flight.
        if writers.len() > 1024 {
            writers.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        writers.entry(id).or_default().clone()
    }

    /// The schedule's state as of its last recorded command, deleted or not.
    fn current(&self, id: ScheduleId) -> Option<Arc<Schedule>> {
        self.state().entries.get(&id).map(|e| e.schedule.clone())
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
    async fn record(
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

    /// The scheduler: fires what is due, sleeps until the next due time or a change.
    async fn serve(&self) {
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
    async fn fire(&self, id: ScheduleId, due: Timestamp) {
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
    async fn make_run(&self, schedule: &Arc<Schedule>, due: Timestamp, run_id: RunId) {
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

    /// At start: makes the run of every firing a crash cut short, then fires each schedule
    /// that missed due times once (see the module's docs).
    async fn recover(&self) {
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

/// The schedule's expression, read in its zone. Checked when the schedule was recorded; one
/// that no longer parses (a zone removed from the time-zone database) never fires, and says so.
fn parse_when(schedule: &Schedule, seconds: bool) -> Option<cron::When> {
    let (_, expression) = cron::split_zone(&schedule.spec.cron);
    match cron::When::parse(expression, &schedule.spec.time_zone, seconds) {
        Ok(when) => Some(when),
        Err(why) => {
            tracing::error!(schedule_id = %schedule.id, cron = %schedule.spec.cron, %why, "a schedule's expression cannot be read; it does not fire");
            None
        }
    }
}

impl Entry {
    fn view(&self) -> View {
        View {
            schedule: self.schedule.clone(),
            next_run: self.next,
        }
    }
}

impl State {
    /// Puts `schedule` (new or changed) in place, with its next due time after `at`.
    fn install(&mut self, schedule: Arc<Schedule>, when: Option<cron::When>, at: Timestamp) {
        let id = schedule.id;
        self.remove(id);
        let next = next_due(&schedule, when.as_ref(), at);
        if let Some(due) = next {
            self.agenda.insert((due, id));
        }
        self.entries.insert(
            id,
            Entry {
                schedule,
                when,
                next,
            },
        );
    }

    fn remove(&mut self, id: ScheduleId) {
        if let Some(entry) = self.entries.remove(&id) {
            if let Some(due) = entry.next {
                self.agenda.remove(&(due, id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{AgentConfig, CreatorKind, ScheduleEvent};

    fn schedule(cron_expr: &str, enabled: bool) -> Schedule {
        let spec = ScheduleSpec {
            name: "n".into(),
            cron: cron_expr.into(),
            time_zone: "UTC".into(),
            prompt: "p".into(),
            config: AgentConfig::default(),
            sealed: None,
            metadata: Default::default(),
        };
        let by = Creator {
            kind: CreatorKind::User,
            uid: "k".into(),
            display_name: "k".into(),
        };
        let created = ScheduleEvent::Created {
            spec,
            enabled,
            team: "t".into(),
            by,
        };
        evolve_schedule(None, RunId(1), &created, Timestamp(60_000)).expect("created")
    }

    fn when(expression: &str) -> cron::When {
        cron::When::parse(expression, "UTC", false).expect("parses")
    }

    const MINUTE: u64 = 60_000;

    #[test]
    fn the_next_due_time_follows_the_last_firing_and_now() {
        let every_minute = when("* * * * *");
        let s = schedule("* * * * *", true);
        assert_eq!(
            next_due(&s, Some(&every_minute), Timestamp(90_000)),
            Some(Timestamp(2 * MINUTE))
        );
        let fired = evolve_schedule(
            Some(s.clone()),
            RunId(1),
            &ScheduleEvent::Fired {
                due: Timestamp(5 * MINUTE),
                run_id: RunId(9),
            },
            Timestamp(5 * MINUTE + 10),
        )
        .expect("fired");
        // A clock that went back does not fire the same due time again.
        assert_eq!(
            next_due(&fired, Some(&every_minute), Timestamp(3 * MINUTE)),
            Some(Timestamp(6 * MINUTE))
        );
        assert_eq!(
            next_due(
                &schedule("* * * * *", false),
                Some(&every_minute),
                Timestamp(0)
            ),
            None,
            "a paused schedule is not on the agenda"
        );
    }

    #[test]
    fn a_start_catches_up_once_on_the_latest_missed_due_time() {
        let every_minute = when("* * * * *");
        let s = schedule("* * * * *", true);
        // Created at minute 1, down until minute 10 + 30 s: minutes 2..=10 were missed; only
        // minute 10 fires.
        assert_eq!(
            missed(&s, Some(&every_minute), Timestamp(10 * MINUTE + 30_000)),
            Some(Timestamp(10 * MINUTE))
        );
        // Nothing missed before the first due time.
        assert_eq!(missed(&s, Some(&every_minute), Timestamp(MINUTE + 5)), None);
        let fired = evolve_schedule(
            Some(s),
            RunId(1),
            &ScheduleEvent::Fired {
                due: Timestamp(10 * MINUTE),
                run_id: RunId(9),
            },
            Timestamp(10 * MINUTE + 40),
        )
        .expect("fired");
        assert_eq!(
            missed(&fired, Some(&every_minute), Timestamp(10 * MINUTE + 50_000)),
            None,
            "the firing of the latest due time was recorded"
        );
        // Resumed after what it missed: no catch-up for the time it was paused.
        let paused = evolve_schedule(
            Some(fired),
            RunId(1),
            &ScheduleEvent::Paused { by: "k".into() },
            Timestamp(11 * MINUTE),
        );
        let resumed = evolve_schedule(
            paused,
            RunId(1),
            &ScheduleEvent::Resumed { by: "k".into() },
            Timestamp(20 * MINUTE + 1),
        )
        .expect("resumed");
        assert_eq!(
            missed(
                &resumed,
                Some(&every_minute),
                Timestamp(20 * MINUTE + 30_000)
            ),
            None
        );
        assert_eq!(
            next_due(
                &resumed,
                Some(&every_minute),
                Timestamp(20 * MINUTE + 30_000)
            ),
            Some(Timestamp(21 * MINUTE))
        );
    }
}
