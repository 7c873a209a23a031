//! The payloads of the message and reported-lifecycle events as JSON, both ways: from the
//! domain's events (the events API, exports) and back (`runledger import`). Owned strings:
//! these payloads are small beside a run's `Created`, and one shape serves both directions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::{Event, LifecycleReport, ReceivedMessage, ReportedLifecycle};

use super::error::EventJsonError;

/// `MessageSent`: this run sent message `message_id` to run `to`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSentData {
    pub message_id: String,
    pub to: String,
    pub subject: String,
}

/// `MessageReceived`: a message from run `sender_run_id` arrived.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageReceivedData {
    pub message_id: String,
    pub sender_run_id: String,
    pub subject: String,
    pub body: String,
}

/// `MessageDelivered` and `MessageRead`: which message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageIdData {
    pub message_id: String,
}

/// `LifecycleReported`: what the run's agent or worker reported, during which execution (0:
/// none had started), with the client's own ids, by which key.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleReportedData {
    /// `run_in_progress`, `run_succeeded`, `run_failed`, `run_errored` or `run_cancelled`.
    pub event_type: String,
    pub execution: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_id: Option<String>,
    pub by: String,
}

impl MessageReceivedData {
    pub(crate) fn from(m: &ReceivedMessage) -> MessageReceivedData {
        MessageReceivedData {
            message_id: m.message_id.clone(),
            sender_run_id: m.from.clone(),
            subject: m.subject.clone(),
            body: m.body.clone(),
        }
    }

    pub(crate) fn event(self) -> Event {
        Event::MessageReceived(ReceivedMessage {
            message_id: self.message_id,
            from: self.sender_run_id,
            subject: self.subject,
            body: self.body,
        })
    }
}

impl LifecycleReportedData {
    pub(crate) fn from(r: &ReportedLifecycle) -> LifecycleReportedData {
        LifecycleReportedData {
            event_type: r.report.as_str().to_string(),
            execution: r.execution,
            execution_id: r.execution_id.clone(),
            ref_id: r.ref_id.clone(),
            by: r.by.clone(),
        }
    }

    pub(crate) fn event(self) -> Result<Event, EventJsonError> {
        let report = LifecycleReport::parse(&self.event_type).ok_or_else(|| {
            super::error::bad(format!("event_type {:?} is unknown", self.event_type))
        })?;
        Ok(Event::LifecycleReported(ReportedLifecycle {
            report,
            execution: self.execution,
            execution_id: self.execution_id,
            ref_id: self.ref_id,
            by: self.by,
        }))
    }
}
