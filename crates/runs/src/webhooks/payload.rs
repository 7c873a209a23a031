//! The body of a delivery, `{"type", "timestamp", "data"}`, with the run as of the event it
//! announces, rendered once per event (a small memo) so every subscription and every attempt
//! sends the same bytes. The server supplies the run's JSON (`Render`); this never sends.

use std::sync::{Arc, Mutex};

use super::outbox::Owed;
use super::tracking::{Bodies, Inner};
use runledger_domain::{evolve, Run, Timestamp};

/// Turns a run, as of an event at the given time, into its API JSON (`RunItem`); supplied by
/// the server, which owns the wire format.
pub type Render = Arc<dyn Fn(&Run, Timestamp) -> Result<Vec<u8>, String> + Send + Sync>;

/// Bodies kept at most; reaching it empties the memo.
const MAX_BODIES: usize = 512;

impl Inner {
    /// The body of a delivery: `{"type", "timestamp", "data"}`, with the run as of its event,
    /// so every attempt sends the same bytes.
    pub(super) fn body(&self, owed: &Owed, render: &Render) -> Result<Arc<Vec<u8>>, String> {
        let memo = |bodies: &Mutex<Bodies>| {
            bodies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(owed.run_id, owed.seq))
                .cloned()
        };
        if let Some(body) = memo(&self.bodies) {
            return Ok(body);
        }
        let body = Arc::new(self.render_body(owed, render)?);
        let mut bodies = self.bodies.lock().unwrap_or_else(|p| p.into_inner());
        if bodies.len() >= MAX_BODIES {
            bodies.clear();
        }
        bodies.insert((owed.run_id, owed.seq), body.clone());
        Ok(body)
    }

    pub(super) fn render_body(&self, owed: &Owed, render: &Render) -> Result<Vec<u8>, String> {
        let mut run = None;
        let mut at = None;
        // The latest changes recorded up to the event: an execution's end announces them.
        let mut changes = None;
        for e in self.store.run_events(owed.run_id, 0) {
            let e = e.map_err(|e| format!("cannot read the run's log: {e}"))?;
            // The admission's own decision goes on with the run's schedule and attachments:
            // `run.queued` shows the run as that decision made it, never a scheduled run
            // without its `schedule`.
            let same_decision = owed.seq == 0 && e.event.completes_admission();
            if e.seq > owed.seq && !(same_decision && run.is_some()) {
                break;
            }
            run = evolve(run, owed.run_id, &e.event, e.at);
            if let runledger_domain::Event::Changes { changes: c, .. } = &e.event {
                changes = Some(c.totals());
            }
            if e.seq == owed.seq {
                at = Some(e.at);
            }
        }
        let (Some(run), Some(at)) = (run, at) else {
            return Err(format!(
                "event {} of run {} is not in the log",
                owed.seq, owed.run_id
            ));
        };
        let data = render(&run, at)?;
        let mut body = Vec::with_capacity(data.len() + 80);
        body.extend_from_slice(b"{\"type\":\"");
        body.extend_from_slice(owed.topic.as_str().as_bytes());
        body.extend_from_slice(b"\",\"timestamp\":\"");
        body.extend_from_slice(runledger_format::time::time_text(at).as_bytes());
        body.extend_from_slice(b"\",\"data\":");
        body.extend_from_slice(&data);
        // An execution's end carries what the run changed so far (`docs/webhooks.md`), when
        // its executions recorded changes (the demo agent records none).
        let ends = matches!(
            owed.topic,
            runledger_domain::Topic::Succeeded | runledger_domain::Topic::Failed
        );
        if let (true, Some(totals)) = (ends, changes) {
            body.extend_from_slice(
                format!(
                    ",\"changes\":{{\"files\":{},\"additions\":{},\"deletions\":{}}}",
                    totals.files, totals.additions, totals.deletions
                )
                .as_bytes(),
            );
        }
        body.push(b'}');
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::test_support::{owed, setup};
    use crate::webhooks::Webhooks;
    use runledger_domain::{sample_created, Event, RunAdmitted, RunId, Topic};
    use runledger_store as store;

    /// `run.queued` is rendered with the whole admission: a scheduled run's payload carries its
    /// `schedule` (and attachments), recorded right after `Admitted` in the same decision,
    /// and nothing recorded later (a start) leaks into it.
    #[test]
    fn a_queued_payload_shows_the_whole_admission() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (config, store, _) = setup(dir.path());
        let hooks = Webhooks::open(&config, &store).expect("open");
        let inner = hooks.inner.as_ref().expect("configured");
        let id = RunId::new(Timestamp(5_000), 2);
        let schedule = runledger_domain::RunSchedule {
            schedule_id: RunId::new(Timestamp(4_000), 3),
            schedule_name: "nightly".into(),
            cron_schedule: "0 3 * * *".into(),
            due: Timestamp(4_900),
        };
        let decision = runledger_domain::decide(
            None,
            runledger_domain::Command::create(
                RunAdmitted::from_legacy(sample_created(2)),
                Vec::new(),
                Some(schedule.clone()),
            ),
        )
        .expect("create");
        assert_eq!(decision.events.len(), 2);
        store
            .append(&store::envelopes(
                id,
                0,
                Timestamp(5_000),
                decision.events,
                None,
            ))
            .expect("append");
        store
            .append(&store::envelopes(
                id,
                2,
                Timestamp(6_000),
                vec![Event::Started { execution: 1 }],
                None,
            ))
            .expect("append");
        let render: Render = Arc::new(|run, _| {
            Ok(format!(
                "{:?}|{}|{:?}",
                run.state,
                run.next_seq,
                run.schedule.as_ref().map(|s| s.schedule_name.clone())
            )
            .into_bytes())
        });
        let body = |seq, topic| {
            let owed = Owed {
                seq,
                topic,
                ..owed(id, 0, "ci")
            };
            let body = inner.render_body(&owed, &render).expect("body");
            String::from_utf8(body).expect("text")
        };
        let queued = body(0, Topic::Queued);
        assert!(
            queued.contains(r#""data":Queued|2|Some("nightly")"#),
            "{queued}"
        );
        let started = body(2, Topic::Started);
        assert!(
            started.contains(r#""data":InProgress|3|Some("nightly")"#),
            "{started}"
        );
    }
}
