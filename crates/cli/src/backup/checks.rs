//! The order a backup's events must come in, checked as the lines stream by: each run's and
//! each schedule's events contiguous from their creation at seq 0 and never back in time.
//! Only a little is kept per run; nothing is written.

use std::collections::HashMap;

use runledger_domain::{RunId, Timestamp};
use runledger_format::time::format_time;
use runledger_store::{Envelope, ScheduleEnvelope};

/// Checks event lines as they stream by. Only a little is kept per run (what its next event
/// must be), so the file is never held in memory; runs may be interleaved.
#[derive(Default)]
pub(super) struct Checker {
    runs: HashMap<RunId, Next>,
    schedules: HashMap<RunId, Next>,
}

struct Next {
    seq: u64,
    at: Timestamp,
}

impl Checker {
    /// A schedule's events must be contiguous from its `ScheduleCreated` at seq 0, in time
    /// order, like a run's.
    pub(super) fn schedule_event(&mut self, e: &ScheduleEnvelope) -> Result<(), String> {
        let id = e.schedule_id;
        let created = matches!(e.event, runledger_domain::ScheduleEvent::Created { .. });
        let Some(next) = self.schedules.get_mut(&id) else {
            if e.seq != 0 || !created {
                return Err(format!(
                    "event {} ({}) of schedule {id} comes before the schedule's \
                     ScheduleCreated event at seq 0",
                    e.seq,
                    e.event.kind()
                ));
            }
            self.schedules.insert(id, Next { seq: 1, at: e.at });
            return Ok(());
        };
        if e.seq != next.seq || created {
            return Err(format!(
                "schedule {id}: event {} ({}) where event {} was due: a schedule's events must \
                 be contiguous and created once",
                e.seq,
                e.event.kind(),
                next.seq
            ));
        }
        if e.at < next.at {
            return Err(format!(
                "event {} of schedule {id} is before the schedule's previous event",
                e.seq
            ));
        }
        next.seq += 1;
        next.at = e.at;
        Ok(())
    }

    pub(super) fn event(&mut self, e: &Envelope) -> Result<(), String> {
        let id = e.run_id;
        let Some(next) = self.runs.get_mut(&id) else {
            if e.seq != 0 || !e.event.is_creation() {
                return Err(format!(
                    "event {} ({}) of run {id} comes before the run's Created event: a run's \
                     events must be in order, starting with Created at seq 0",
                    e.seq,
                    e.event.kind()
                ));
            }
            // The store and the index order runs by id because of this (docs/architecture.md).
            if e.at != id.created_at() {
                return Err(format!(
                    "run {id} was created at {}, but its id says {}: a run id's time is its \
                     creation time",
                    format_time(e.at),
                    format_time(id.created_at())
                ));
            }
            self.runs.insert(id, Next { seq: 1, at: e.at });
            return Ok(());
        };
        if e.seq != next.seq {
            return Err(if e.seq < next.seq {
                format!("run {id} has an event {} already", e.seq)
            } else {
                format!(
                    "run {id} skips from event {} to event {}: events are missing",
                    next.seq - 1,
                    e.seq
                )
            });
        }
        if e.event.is_creation() {
            return Err(format!(
                "run {id} is created a second time (event {})",
                e.seq
            ));
        }
        if e.at < next.at {
            return Err(format!(
                "event {} of run {id} is at {}, before the run's previous event ({}): a run's \
                 events never go back in time",
                e.seq,
                format_time(e.at),
                format_time(next.at)
            ));
        }
        next.seq += 1;
        next.at = e.at;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::Event;

    use super::super::fixtures::one_of_each;

    fn at(id: RunId, seq: u64, at: u64, event: Event) -> Envelope {
        Envelope {
            run_id: id,
            seq,
            at: Timestamp(at),
            origin: None,
            event,
        }
    }

    #[test]
    fn the_checker_wants_each_run_contiguous_from_its_created_event() {
        let id = RunId::new(Timestamp(1000), 9);
        let other = RunId::new(Timestamp(2000), 9);
        let create = || one_of_each().swap_remove(0);
        // The tenth of `one_of_each` is its `Admitted`.
        let admit = || one_of_each().swap_remove(9);
        let started = Event::Started { execution: 1 };
        let mut c = Checker::default();
        assert_eq!(c.event(&at(id, 0, 1000, create())), Ok(()));
        // Runs may interleave; a run since teams starts with `Admitted`.
        assert_eq!(c.event(&at(other, 0, 2000, admit())), Ok(()));
        assert_eq!(c.event(&at(id, 1, 1500, started.clone())), Ok(()));
        let refusals = [
            (
                at(id, 3, 1600, started.clone()),
                "skips from event 1 to event 3",
            ),
            (at(id, 1, 1600, started.clone()), "has an event 1 already"),
            (at(id, 2, 1400, started.clone()), "back in time"),
            (at(id, 2, 1600, create()), "created a second time"),
            (at(id, 2, 1600, admit()), "created a second time"),
            (
                at(RunId::new(Timestamp(5), 1), 1, 9, started.clone()),
                "comes before the run's Created event",
            ),
            (
                at(RunId::new(Timestamp(5), 1), 0, 5, started.clone()),
                "comes before the run's Created event",
            ),
            (
                at(RunId::new(Timestamp(5), 1), 0, 6, create()),
                "its id says",
            ),
        ];
        for (e, needle) in refusals {
            let err = c.event(&e).expect_err("refused");
            assert!(err.contains(needle), "{needle}: {err}");
        }
        assert_eq!(c.event(&at(id, 2, 1500, started)), Ok(()));
    }
}
