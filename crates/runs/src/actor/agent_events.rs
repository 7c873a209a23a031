//! `AgentEvents`: what the HTTP edge's event-polling endpoints may do (`/api/v1/agent/events…`)
//! — list the lifecycle events and received messages of some runs after an instance-wide
//! sequence number, and record a lifecycle event a run's agent or worker reports. The sequence
//! is the store's (`store/agent_index.rs`): one counter for the instance whose entries become
//! visible in order. Only durable events are listed (those the run's acknowledged row counts),
//! so a poller never sees an event a crash could take back. Who may see which run is the
//! caller's to decide.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::orchestration::agent_event_type;
use runledger_domain::{Command, Event, Origin, RunId, Timestamp};

/// One event as `GET /agent/events` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolledEvent {
    pub sequence: u64,
    pub run_id: RunId,
    pub event_type: &'static str,
    /// The message id of a `new_message`; what the reporter gave of a reported event.
    pub ref_id: Option<String>,
    /// The execution's number for the service's own events; what the reporter gave of a
    /// reported event.
    pub execution_id: Option<String>,
    pub occurred_at: Timestamp,
}

/// A cheap-to-clone handle on the runs for the event-polling endpoints.
#[derive(Clone)]
pub struct AgentEvents {
    runs: Runs,
}

impl AgentEvents {
    pub(super) fn new(runs: &Runs) -> AgentEvents {
        AgentEvents { runs: runs.clone() }
    }

    /// Up to `limit` events of `runs` with a sequence above `since`, in sequence order.
    ///
    /// Only entries below a ceiling drawn first are answered, so the runs read later cannot
    /// add entries newer than ones of runs read earlier. And an entry is visible before its
    /// event is durable (it is written with the append, the sync comes after): such an entry
    /// is not answered, and neither is any entry after it, since a client that moved its
    /// `since` past it would never see it once it became durable.
    pub fn poll(
        &self,
        runs: &[RunId],
        since: u64,
        limit: usize,
    ) -> Result<Vec<PolledEvent>, Error> {
        let store = &self.runs.inner.store;
        let mut entries = Vec::new();
        let mut horizon = store.agent_event_ceiling()?;
        for &run in runs {
            let Some(state) = self.runs.get(run)? else {
                continue;
            };
            // A run's entries are in sequence order, so its first `limit` durable ones are
            // all it can contribute.
            for entry in store.agent_events_after(run, since)?.take(limit) {
                let entry = entry?;
                if entry.sequence >= horizon {
                    break;
                }
                if entry.seq >= state.next_seq {
                    horizon = horizon.min(entry.sequence);
                    break;
                }
                entries.push(entry);
            }
        }
        entries.retain(|e| e.sequence < horizon);
        entries.sort_by_key(|e| e.sequence);
        entries.truncate(limit);
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Some(envelope) = store
                .run_events(entry.run_id, entry.seq)
                .next()
                .transpose()?
            else {
                continue;
            };
            if envelope.seq != entry.seq {
                continue;
            }
            if let Some(polled) = polled(entry.sequence, &envelope) {
                out.push(polled);
            }
        }
        Ok(out)
    }

    /// Records a lifecycle event reported for `run` (`command` is a `ReportLifecycle`) and
    /// answers its sequence number.
    pub async fn report(&self, run: RunId, command: Command, origin: Origin) -> Result<u64, Error> {
        let outcome = self.runs.execute_as(run, command, Some(origin)).await?;
        // The report is one of the decision's last two events (a report that ends the run is
        // followed by the end).
        let from = outcome.run.next_seq.saturating_sub(2);
        let store = &self.runs.inner.store;
        for envelope in store.run_events(run, from) {
            let envelope = envelope?;
            if matches!(envelope.event, Event::LifecycleReported(_)) {
                if let Some(sequence) = store.agent_event_sequence(run, envelope.seq)? {
                    return Ok(sequence);
                }
            }
        }
        Err(Error::Store(runledger_store::Error::CorruptRecord {
            tree: "agent_events",
            detail: format!("the report recorded for run {run} has no entry"),
        }))
    }
}

/// The polled form of an event listed under `sequence`.
fn polled(sequence: u64, envelope: &runledger_store::Envelope) -> Option<PolledEvent> {
    let event_type = agent_event_type(&envelope.event)?;
    let number = |execution: &u32| Some(execution.to_string());
    let (ref_id, execution_id) = match &envelope.event {
        Event::Started { execution }
        | Event::StartedOn { execution, .. }
        | Event::Succeeded { execution }
        | Event::Failed { execution, .. } => (None, number(execution)),
        Event::MessageReceived(m) => (Some(m.message_id.clone()), None),
        Event::LifecycleReported(r) => (r.ref_id.clone(), r.execution_id.clone()),
        _ => (None, None),
    };
    Some(PolledEvent {
        sequence,
        run_id: envelope.run_id,
        event_type,
        ref_id,
        execution_id,
        occurred_at: envelope.at,
    })
}
