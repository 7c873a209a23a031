//! Two small trees written beside the run log by every append, so that what the log holds is
//! also findable by what the Oz orchestration operations ask for:
//!
//! - `message_index`: a message id → the run that received it (`Event::MessageReceived`), for
//!   `…/messages/{messageId}/read` and `…/delivered`;
//! - `agent_events`: `run_id ‖ sequence` → the event's seq in that run's log, one entry per
//!   lifecycle change and received message (`domain::orchestration::agent_event_type`), for
//!   `GET /agent/events`. `sequence` is one counter for the whole instance, drawn and written
//!   under one lock, so entries become visible in the order of their sequence numbers: a poller
//!   that has seen sequence N of a run will never later find an entry below N for it.
//!
//! Both are written by `append` (the service, `import`, `restore` alike), after the records
//! they name, and made durable by the same group commit. A run's creation writes neither (its
//! events are not among those indexed), so the create path pays a match per event. Entries of
//! events recorded before these trees existed are absent: those events are not polled.

use std::sync::Mutex;

use runledger_domain::{Event, RunId};

use crate::codec::Envelope;
use crate::{Error, Store};

const MESSAGE_INDEX: &str = "message_index";
const AGENT_EVENTS: &str = "agent_events";

/// Held while a sequence number is drawn and its entry written: see the module's doc.
static SEQUENCE: Mutex<()> = Mutex::new(());

/// One entry of `agent_events`: the instance-wide sequence and the event's seq in its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentEventEntry {
    pub sequence: u64,
    pub run_id: RunId,
    pub seq: u64,
}

impl Store {
    /// Writes the entries `envelopes` (just appended) call for.
    pub(crate) fn index_agent_events(&self, envelopes: &[Envelope]) -> Result<(), Error> {
        for (i, envelope) in envelopes.iter().enumerate() {
            if let Event::MessageReceived(message) = &envelope.event {
                let tree = self.inner.db.open_tree(MESSAGE_INDEX)?;
                tree.insert(message.message_id.as_bytes(), &envelope.run_id.to_bytes())
                    .inspect_err(|e| self.failed(e))?;
            }
            if runledger_domain::orchestration::agent_event_type(&envelope.event).is_none() {
                continue;
            }
            // The end a report caused is the report's own entry (its type is what was
            // reported), so it is not listed a second time.
            if envelope.event.ends_run() {
                let reported = |e: &Event| matches!(e, Event::LifecycleReported(_));
                let after_report = match i.checked_sub(1).map(|p| &envelopes[p]) {
                    Some(p) if p.run_id == envelope.run_id => reported(&p.event),
                    _ => self.previous_event(envelope)?.is_some_and(|e| reported(&e)),
                };
                if after_report {
                    continue;
                }
            }
            self.add_agent_event(envelope.run_id, envelope.seq)?;
        }
        Ok(())
    }

    fn previous_event(&self, envelope: &Envelope) -> Result<Option<Event>, Error> {
        let Some(seq) = envelope.seq.checked_sub(1) else {
            return Ok(None);
        };
        match self.run_events(envelope.run_id, seq).next() {
            Some(Ok(e)) if e.seq == seq => Ok(Some(e.event)),
            Some(Err(e)) => Err(e),
            _ => Ok(None),
        }
    }

    fn add_agent_event(&self, run_id: RunId, seq: u64) -> Result<(), Error> {
        let tree = self.inner.db.open_tree(AGENT_EVENTS)?;
        // A poisoned lock only means another writer panicked; the counter is sled's.
        let _order = SEQUENCE.lock().unwrap_or_else(|p| p.into_inner());
        let sequence = self
            .inner
            .db
            .generate_id()
            .inspect_err(|e| self.failed(e))?
            + 1;
        tree.insert(key(run_id, sequence), &seq.to_be_bytes())
            .inspect_err(|e| self.failed(e))?;
        Ok(())
    }

    /// A sequence number above every entry written so far and below every entry written
    /// later: drawn from the same counter under the same lock as the entries, so a reader that
    /// answers only entries below it never answers a later entry of one run before an earlier
    /// entry of another that it read too soon to see.
    pub fn agent_event_ceiling(&self) -> Result<u64, Error> {
        let _order = SEQUENCE.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self
            .inner
            .db
            .generate_id()
            .inspect_err(|e| self.failed(e))?
            + 1)
    }

    /// The run that received message `message_id`, if a message of that id was recorded.
    pub fn message_recipient(&self, message_id: &str) -> Result<Option<RunId>, Error> {
        let tree = self.inner.db.open_tree(MESSAGE_INDEX)?;
        Ok(tree
            .get(message_id.as_bytes())?
            .and_then(|v| <[u8; 16]>::try_from(v.as_ref()).ok())
            .map(RunId::from_bytes))
    }

    /// The entries of `run_id` with a sequence above `since`, in order, read as the iterator is
    /// advanced.
    pub fn agent_events_after(
        &self,
        run_id: RunId,
        since: u64,
    ) -> Result<impl Iterator<Item = Result<AgentEventEntry, Error>> + Send + 'static, Error> {
        let tree = self.inner.db.open_tree(AGENT_EVENTS)?;
        let start = key(run_id, since.saturating_add(1));
        let end = key(run_id, u64::MAX);
        Ok(tree.range(start..=end).map(move |item| {
            let (key, value) = item?;
            let sequence = key
                .get(16..24)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes);
            let seq = <[u8; 8]>::try_from(value.as_ref())
                .ok()
                .map(u64::from_be_bytes);
            match (sequence, seq) {
                (Some(sequence), Some(seq)) => Ok(AgentEventEntry {
                    sequence,
                    run_id,
                    seq,
                }),
                _ => Err(Error::CorruptRecord {
                    tree: AGENT_EVENTS,
                    detail: format!("an entry of run {run_id} is not a sequence and a seq"),
                }),
            }
        }))
    }

    /// The sequence of the entry of event `seq` of `run_id`, if it has one (the answer of
    /// `POST /agent/events/{runId}`): the run's entries are read newest first, and a report is
    /// among the newest.
    pub fn agent_event_sequence(&self, run_id: RunId, seq: u64) -> Result<Option<u64>, Error> {
        let tree = self.inner.db.open_tree(AGENT_EVENTS)?;
        for item in tree.range(key(run_id, 0)..=key(run_id, u64::MAX)).rev() {
            let (key, value) = item?;
            let entry_seq = <[u8; 8]>::try_from(value.as_ref())
                .ok()
                .map(u64::from_be_bytes);
            match entry_seq {
                Some(s) if s == seq => {
                    return Ok(key
                        .get(16..24)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_be_bytes));
                }
                Some(s) if s < seq => return Ok(None),
                _ => {}
            }
        }
        Ok(None)
    }
}

fn key(run_id: RunId, sequence: u64) -> [u8; 24] {
    let mut key = [0u8; 24];
    key[..16].copy_from_slice(&run_id.to_bytes());
    key[16..].copy_from_slice(&sequence.to_be_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{LifecycleReport, ReceivedMessage, ReportedLifecycle, Timestamp};

    fn envelope(run_id: RunId, seq: u64, event: Event) -> Envelope {
        Envelope {
            run_id,
            seq,
            at: Timestamp(1_000 + seq),
            origin: None,
            event,
        }
    }

    /// Sequences grow across runs in the order entries were written; a received message is
    /// findable by its id; the end a report caused is listed once, as the report.
    #[test]
    fn entries_follow_the_appends() {
        let dir = tempfile::tempdir().expect("dir");
        let store = Store::open(dir.path(), &crate::Options::default()).expect("open");
        let (a, b) = (RunId(1), RunId(2));
        let admitted =
            runledger_domain::RunAdmitted::from_legacy(runledger_domain::sample_created(1));
        store
            .append(&[
                envelope(a, 0, Event::Admitted(admitted.clone())),
                envelope(a, 1, Event::Started { execution: 1 }),
            ])
            .expect("append");
        store
            .append(&[
                envelope(b, 0, Event::Admitted(admitted)),
                envelope(
                    b,
                    1,
                    Event::MessageReceived(ReceivedMessage {
                        message_id: "M1".into(),
                        from: a.to_string(),
                        subject: "s".into(),
                        body: "b".into(),
                    }),
                ),
            ])
            .expect("append");
        store
            .append(&[envelope(
                a,
                2,
                Event::LifecycleReported(ReportedLifecycle {
                    report: LifecycleReport::Succeeded,
                    execution: 1,
                    execution_id: None,
                    ref_id: None,
                    by: "k".into(),
                }),
            )])
            .expect("append");
        // Appended on its own, as `restore` does: the report is found in the log.
        store
            .append(&[envelope(a, 3, Event::Succeeded { execution: 1 })])
            .expect("append");
        let of = |run| -> Vec<AgentEventEntry> {
            store
                .agent_events_after(run, 0)
                .expect("range")
                .collect::<Result<_, _>>()
                .expect("entries")
        };
        let (ea, eb) = (of(a), of(b));
        assert_eq!(ea.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(eb.iter().map(|e| e.seq).collect::<Vec<_>>(), [1]);
        assert!(ea[0].sequence < eb[0].sequence && eb[0].sequence < ea[1].sequence);
        assert_eq!(
            store.agent_event_sequence(a, 2).expect("read"),
            Some(ea[1].sequence)
        );
        assert_eq!(store.agent_event_sequence(a, 3).expect("read"), None);
        assert_eq!(
            store
                .agent_events_after(a, ea[0].sequence)
                .expect("range")
                .count(),
            1
        );
        // A ceiling lies above every entry so far and below every later one.
        let ceiling = store.agent_event_ceiling().expect("ceiling");
        assert!(ea.iter().chain(&eb).all(|e| e.sequence < ceiling));
        store
            .append(&[envelope(b, 2, Event::Cancelled { by: "k".into() })])
            .expect("append");
        assert!(of(b).last().is_some_and(|e| e.sequence > ceiling));
        assert_eq!(store.message_recipient("M1").expect("read"), Some(b));
        assert_eq!(store.message_recipient("M2").expect("read"), None);
    }
}
