//! JSON of the orchestration operations, as the Oz document defines them: messages between
//! runs (`sendAgentMessage`, `listAgentMessages`, `readAgentMessage`) and event polling
//! (`pollAgentEvents`, `reportAgentEvent`). The times and ids a message or event carries that
//! may be unknown are sent as `null`, as the document marks them `nullable`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use runledger_domain::InboxMessage;
use runledger_format::time::format_time;

/// Body of `POST /agent/messages`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SendMessageRequest {
    /// The recipients' run ids: one message each, in this order.
    #[schema(min_items = 1, max_items = 100)]
    pub to: Vec<String>,
    /// At most 1,024 characters.
    #[schema(max_length = 1024)]
    pub subject: String,
    /// At most 131,072 characters (128 KiB).
    #[schema(max_length = 131072)]
    pub body: String,
    /// The sending run's id.
    pub sender_run_id: String,
}

/// Answer of `POST /agent/messages`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SendMessageResponse {
    /// One message id (a ULID) per recipient, in the order of `to`.
    pub message_ids: Vec<String>,
}

/// One message of an inbox without its body (`GET /agent/messages/{runId}`).
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageHeader {
    pub message_id: String,
    pub sender_run_id: String,
    pub subject: String,
    #[schema(format = DateTime)]
    pub sent_at: String,
    /// When the recipient's agent took it (or a client marked it delivered).
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    /// When its body was first read through the API.
    #[schema(format = DateTime)]
    pub read_at: Option<String>,
}

/// A message with its body (`POST /agent/messages/{messageId}/read`).
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageContent {
    pub message_id: String,
    pub sender_run_id: String,
    pub subject: String,
    pub body: String,
    #[schema(format = DateTime)]
    pub sent_at: String,
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    #[schema(format = DateTime)]
    pub read_at: Option<String>,
}

impl From<&InboxMessage> for MessageHeader {
    fn from(m: &InboxMessage) -> MessageHeader {
        MessageHeader {
            message_id: m.message.message_id.clone(),
            sender_run_id: m.message.from.clone(),
            subject: m.message.subject.clone(),
            sent_at: format_time(m.sent_at),
            delivered_at: m.delivered_at.map(format_time),
            read_at: m.read_at.map(format_time),
        }
    }
}

impl From<InboxMessage> for MessageContent {
    fn from(m: InboxMessage) -> MessageContent {
        MessageContent {
            message_id: m.message.message_id,
            sender_run_id: m.message.from,
            subject: m.message.subject,
            body: m.message.body,
            sent_at: format_time(m.sent_at),
            delivered_at: m.delivered_at.map(format_time),
            read_at: m.read_at.map(format_time),
        }
    }
}

/// One event of `GET /agent/events`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentEventItem {
    /// `run_in_progress`, `run_succeeded`, `run_failed`, `run_cancelled`, `new_message`, or
    /// what a run's agent reported (`run_errored`, …).
    pub event_type: String,
    pub run_id: String,
    /// The message id of a `new_message`; the reporter's `ref_id` of a reported event.
    pub ref_id: Option<String>,
    /// The execution's number (`"1"`, `"2"`, …) of the service's own lifecycle events; the
    /// reporter's `execution_id` of a reported event.
    pub execution_id: Option<String>,
    #[schema(format = DateTime)]
    pub occurred_at: String,
    /// The event's place in the instance's one growing sequence: pass the last one seen as
    /// `since`.
    #[schema(format = Int64, minimum = 1)]
    pub sequence: u64,
}

impl From<runledger_runs::actor::PolledEvent> for AgentEventItem {
    fn from(e: runledger_runs::actor::PolledEvent) -> AgentEventItem {
        AgentEventItem {
            event_type: e.event_type.to_string(),
            run_id: e.run_id.to_string(),
            ref_id: e.ref_id,
            execution_id: e.execution_id,
            occurred_at: format_time(e.occurred_at),
            sequence: e.sequence,
        }
    }
}

/// Body of `POST /agent/events/{runId}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReportEventRequest {
    #[schema(value_type = ReportedEventType)]
    pub event_type: String,
    /// The client's own execution id, for correlation (at most 256 bytes).
    #[schema(max_length = 256)]
    pub execution_id: Option<String>,
    /// The client's reference (at most 256 bytes).
    #[schema(max_length = 256)]
    pub ref_id: Option<String>,
}

/// What a run's agent or worker may report; `run_blocked` is answered 422.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // a schema only: the body is read as a string and parsed by the domain
pub enum ReportedEventType {
    RunInProgress,
    RunSucceeded,
    RunFailed,
    RunErrored,
    RunBlocked,
    RunCancelled,
}

/// Answer of `POST /agent/events/{runId}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReportEventResponse {
    /// The recorded event's sequence (as `GET /agent/events` lists it).
    #[schema(format = Int64, minimum = 1)]
    pub sequence: u64,
}
