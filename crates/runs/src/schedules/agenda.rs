//! The schedules' state in memory and the agenda the scheduler reads: every schedule's folded
//! state with its expression and next due time, ordered by due time; and the due-time rules
//! (the next due time, the missed one a start catches up on). It records nothing and fires
//! nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::cron;
use runledger_domain::{Schedule, ScheduleId, Timestamp};

/// A schedule as the API shows it: its state and when it fires next.
#[derive(Debug, Clone)]
pub struct View {
    pub schedule: Arc<Schedule>,
    /// The next due time; `None` when paused (or when the expression never matches again).
    pub next_run: Option<Timestamp>,
}

/// Every schedule in memory, and the agenda of the enabled ones.
#[derive(Default)]
pub(super) struct State {
    pub(super) entries: HashMap<ScheduleId, Entry>,
    /// `(next due time, schedule)` of every enabled schedule: the scheduler's agenda.
    pub(super) agenda: BTreeSet<(Timestamp, ScheduleId)>,
}

/// One schedule in memory: its state, its expression as read, its next due time.
pub(super) struct Entry {
    pub(super) schedule: Arc<Schedule>,
    pub(super) when: Option<cron::When>,
    pub(super) next: Option<Timestamp>,
}

/// When `schedule` fires next after `now`: nothing while paused or deleted.
pub(super) fn next_due(
    schedule: &Schedule,
    when: Option<&cron::When>,
    now: Timestamp,
) -> Option<Timestamp> {
    if !schedule.enabled || schedule.deleted {
        return None;
    }
    let after = schedule.last_due.unwrap_or(Timestamp(0)).max(now);
    when?.next_after(after)
}

/// The due time a start catches up on: the latest one at or before `now`, if it is after the
/// last firing and after the schedule's last change.
pub(super) fn missed(
    schedule: &Schedule,
    when: Option<&cron::When>,
    now: Timestamp,
) -> Option<Timestamp> {
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

/// The schedule's expression, read in its zone. Checked when the schedule was recorded; one
/// that no longer parses (a zone removed from the time-zone database) never fires, and says so.
pub(super) fn parse_when(schedule: &Schedule, seconds: bool) -> Option<cron::When> {
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
    pub(super) fn view(&self) -> View {
        View {
            schedule: self.schedule.clone(),
            next_run: self.next,
        }
    }
}

impl State {
    /// Puts `schedule` (new or changed) in place, with its next due time after `at`.
    pub(super) fn install(
        &mut self,
        schedule: Arc<Schedule>,
        when: Option<cron::When>,
        at: Timestamp,
    ) {
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

    pub(super) fn remove(&mut self, id: ScheduleId) {
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
    use runledger_domain::{
        evolve_schedule, AgentConfig, Creator, CreatorKind, RunId, ScheduleEvent, ScheduleSpec,
    };

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
