//! `History`: the read handle on a run's past states (time travel). A run's state after its
//! event N is the fold of its first N+1 events, so both reads here fold the log from its first
//! event, one record at a time, as the store's iterator yields it: what they hold is one state
//! (and, for a step, the state before it), never the history. They read only durable events,
//! bounded like `RunHandle::durable_events` by the index row, and start no actor. The cost of
//! reaching event N is N decodes and `evolve`s; nothing is cached or snapshotted.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::{evolve, Run, RunId};
use runledger_store::{Envelope, Store};

/// A cheap-to-clone handle on runs' histories, for `GET /agent/runs/{id}?as_of_seq=N`,
/// `GET /agent/runs/{id}/states` and the console's timeline ("the run at this event").
/// Visibility (the key's team) is the caller's check, made on `RunHandle::get` first.
#[derive(Clone)]
pub struct History {
    runs: Runs,
}

/// One event of a run with the run's state before it (`None` before the first) and after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub envelope: Envelope,
    pub before: Option<Run>,
    pub after: Run,
}

impl History {
    pub(super) fn new(runs: &Runs) -> History {
        History { runs: runs.clone() }
    }

    /// Run `id` as it was right after its event `seq`: `None` when the run does not exist or
    /// has no durable event `seq`.
    pub fn as_of(&self, id: RunId, seq: u64) -> Result<Option<Run>, Error> {
        let Some(run) = self.runs.get(id)? else {
            return Ok(None);
        };
        if seq >= run.next_seq {
            return Ok(None);
        }
        state_at(&self.runs.inner.store, id, seq)
    }

    /// The run's durable events from sequence `from` on, each with the state before and after
    /// it, read and folded as the iterator is advanced. Reaching `from` folds every event
    /// before it (and yields none of them). `None` if the run does not exist.
    pub fn steps(
        &self,
        id: RunId,
        from: u64,
    ) -> Result<Option<impl Iterator<Item = Result<Step, Error>> + Send + 'static>, Error> {
        let Some(run) = self.runs.get(id)? else {
            return Ok(None);
        };
        let end = run.next_seq;
        let events = self
            .runs
            .inner
            .store
            .run_events(id, 0)
            .take_while(move |e| e.as_ref().map_or(true, |e| e.seq < end))
            .map(|e| e.map_err(Error::from));
        Ok(Some(Steps {
            id,
            events,
            run: None,
            from,
        }))
    }
}

/// Run `id` as it was right after its event `seq`, folded from the store's log one record at a
/// time: `None` when the log has no event `seq`. What `History::as_of` answers (it first
/// bounds `seq` by the durable events); public so the benchmark measures this very fold.
pub fn state_at(store: &Store, id: RunId, seq: u64) -> Result<Option<Run>, Error> {
    fold_through(id, store.run_events(id, 0), seq).map_err(Error::from)
}

/// The fold of the events of `events` up to and including sequence `seq`, or `None` when
/// `events` ends before `seq`. Stops reading at `seq`.
pub fn fold_through<E>(
    id: RunId,
    events: impl Iterator<Item = Result<Envelope, E>>,
    seq: u64,
) -> Result<Option<Run>, E> {
    let mut run = None;
    for envelope in events {
        let envelope = envelope?;
        if envelope.seq > seq {
            break;
        }
        run = evolve(run, id, &envelope.event, envelope.at);
        if envelope.seq == seq {
            return Ok(run);
        }
    }
    Ok(None)
}

/// The steps of a log from `from` on (see `History::steps`).
struct Steps<I> {
    id: RunId,
    events: I,
    run: Option<Run>,
    from: u64,
}

impl<I: Iterator<Item = Result<Envelope, Error>>> Iterator for Steps<I> {
    type Item = Result<Step, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let envelope = match self.events.next()? {
                Ok(envelope) => envelope,
                Err(e) => return Some(Err(e)),
            };
            if envelope.seq < self.from {
                // Only folded: no clone of the state until the page starts.
                self.run = evolve(self.run.take(), self.id, &envelope.event, envelope.at);
                continue;
            }
            let before = self.run.clone();
            self.run = evolve(self.run.take(), self.id, &envelope.event, envelope.at);
            // A log whose first event makes no run (never written by `decide`) shows nothing.
            let after = self.run.clone()?;
            return Some(Ok(Step {
                envelope,
                before,
                after,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::sample_created;
    use runledger_domain::{Event, FollowupMode, Timestamp};

    fn log(n: u64) -> Vec<Envelope> {
        (0..n)
            .map(|seq| Envelope {
                run_id: RunId(3),
                seq,
                at: Timestamp(1_000 + seq),
                event: if seq == 0 {
                    Event::Created(sample_created(1))
                } else {
                    Event::FollowupReceived {
                        message: format!("m{seq}"),
                        mode: FollowupMode::Normal,
                        by: "k".into(),
                    }
                },
                origin: None,
            })
            .collect()
    }

    #[test]
    fn fold_through_stops_at_its_event_and_misses_one_past_the_end() {
        let events = log(5);
        let ok = || events.iter().cloned().map(Ok::<_, ()>);
        let expected = |n: usize| {
            events[..n]
                .iter()
                .fold(None, |run, e| evolve(run, RunId(3), &e.event, e.at))
        };
        for seq in 0..5u64 {
            assert_eq!(
                fold_through(RunId(3), ok(), seq),
                Ok(expected(seq as usize + 1))
            );
        }
        assert_eq!(fold_through(RunId(3), ok(), 5), Ok(None));
        // The iterator is not read past the event asked for: a damaged later record is no error.
        let damaged = ok().take(2).chain(std::iter::once(Err(())));
        assert_eq!(fold_through(RunId(3), damaged, 1), Ok(expected(2)));
    }

    #[test]
    fn steps_start_at_from_with_the_state_before() {
        let events = log(4);
        let steps: Vec<Step> = Steps {
            id: RunId(3),
            events: events.iter().cloned().map(Ok),
            run: None,
            from: 2,
        }
        .collect::<Result<_, Error>>()
        .expect("steps");
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].envelope.seq, 2);
        assert_eq!(steps[0].before.as_ref().map(|r| r.next_seq), Some(2));
        assert_eq!(steps[0].after.next_seq, 3);
        assert_eq!(Some(steps[0].after.clone()), steps[1].before);
    }
}
