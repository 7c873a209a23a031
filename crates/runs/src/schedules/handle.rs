//! The `Schedules` handle: every schedule folded from its log at start, the queries the API
//! answers (one schedule, a team's, a schedule's recent runs), and the scheduler's start and
//! stop. Commands are `commands`'; firing is `scheduler`'s; the start's catch-up is
//! `recovery`'s.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::agenda::{parse_when, Entry, State, View};
use crate::actor::Runs;
use runledger_base::clock::now;
use runledger_config::Config;
use runledger_domain::{evolve_schedule, Firing, Run, Schedule, ScheduleId};
use runledger_store::{self as store, Store};

/// The variable that makes a debug build kill itself at a point of a firing, for the crash
/// tests: `schedule-fired` (after the firing is durable, before its run is made).
pub const CRASH_VAR: &str = "RUNLEDGER_TEST_CRASH";

/// A cheap-to-clone handle on every schedule.
#[derive(Clone)]
pub struct Schedules {
    pub(super) inner: Arc<Inner>,
}

/// What the handles share.
pub(super) struct Inner {
    pub(super) store: Store,
    pub(super) runs: Runs,
    pub(super) config: Arc<Config>,
    pub(super) state: Mutex<State>,
    /// One lock per schedule, held by a command from its decision to its state's update.
    pub(super) writers: Mutex<HashMap<ScheduleId, Arc<tokio::sync::Mutex<()>>>>,
    /// Woken when a due time earlier than the scheduler's wait may have appeared.
    pub(super) wake: tokio::sync::Notify,
    pub(super) stopping: AtomicBool,
    pub(super) crash_after_fired: bool,
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

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The schedule's state as of its last recorded command, deleted or not.
    pub(super) fn current(&self, id: ScheduleId) -> Option<Arc<Schedule>> {
        self.state().entries.get(&id).map(|e| e.schedule.clone())
    }
}
