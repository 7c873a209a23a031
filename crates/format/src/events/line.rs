//! One event as a JSON line: the run, its sequence number, its time and its payload, as the
//! events endpoint, `runledger export` and `events --json` write it.

use serde::Serialize;
use utoipa::ToSchema;

use crate::run::*;
use crate::time::format_time;
use runledger_domain::Event;
use runledger_store::Envelope;

use super::data::*;
use super::origin::OriginData;
use super::provenance::ProvenanceData;

/// One stored event of a run (the events endpoint, `runledger export` and `events --json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunEvent<'a> {
    pub run_id: String,
    /// Position in the run's log, from 0.
    pub seq: u64,
    #[schema(format = DateTime)]
    pub at: String,
    #[serde(flatten)]
    pub event: EventData<'a>,
    /// Who and what caused the event; absent on events recorded before origins were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<OriginData>,
}

impl<'a> RunEvent<'a> {
    pub fn from(e: &'a Envelope) -> Self {
        let event = match &e.event {
            Event::Created(c) => EventData::Created(CreatedData::from(c, None, None)),
            // One type on the wire: a client reads a run's first event as `Created` whichever
            // variant stored it; `team` tells them apart for `import`.
            Event::Admitted(a) => EventData::Created(CreatedData::from(
                &a.created,
                Some(&a.team),
                a.sealed.as_ref(),
            )),
            Event::Started { execution } => EventData::Started {
                execution: *execution,
                placement: None,
            },
            Event::StartedOn {
                execution,
                placement,
            } => EventData::Started {
                execution: *execution,
                placement: Some(PlacementData::from(placement)),
            },
            Event::Lost { execution, status } => EventData::Lost {
                execution: *execution,
                status_message: StatusMessageOut::from(status),
            },
            Event::FollowupReceived { message, mode, by } => EventData::FollowupReceived {
                message,
                mode: mode.as_str(),
                by,
            },
            Event::Succeeded { execution } => EventData::Succeeded {
                execution: *execution,
            },
            Event::Failed { execution, status } => EventData::Failed {
                execution: *execution,
                status_message: StatusMessageOut::from(status),
            },
            Event::Cancelled { by } => EventData::Cancelled { by },
            Event::SessionLinkRevoked { by } => EventData::SessionLinkRevoked { by },
            Event::FollowupsDelivered { execution, count } => EventData::FollowupsDelivered {
                execution: *execution,
                count: *count,
            },
            Event::Requeued { execution } => EventData::Requeued {
                execution: *execution,
            },
            Event::UsageRecorded { execution, usage } => {
                EventData::UsageRecorded(UsageData::from(*execution, usage))
            }
            Event::ArtifactReported {
                execution,
                artifact,
            } => EventData::ArtifactReported(ArtifactReportedData::from(*execution, artifact)),
            Event::Attached { attachments } => EventData::Attached(AttachedData::from(attachments)),
            Event::Scheduled { schedule } => EventData::Scheduled(ScheduledData::from(schedule)),
            Event::Derived(d) => EventData::Derived(super::derived::DerivedData::from(d)),
            Event::Provenance {
                execution,
                provenance,
            } => EventData::Provenance(ProvenanceData::from(*execution, provenance)),
            Event::Changes { execution, changes } => {
                EventData::Changes(super::changes::ChangesData::from(*execution, changes))
            }
        };
        RunEvent {
            run_id: e.run_id.to_string(),
            seq: e.seq,
            at: format_time(e.at),
            event,
            origin: e.origin.as_ref().map(OriginData::from),
        }
    }
}

/// One stored event as JSON (`runledger export` and `events --json`).
pub fn event_json(e: &Envelope) -> serde_json::Value {
    // Plain structs and string-keyed maps always serialise.
    serde_json::to_value(RunEvent::from(e)).unwrap_or(serde_json::Value::Null)
}
