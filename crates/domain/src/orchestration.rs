//! What the orchestration operations read from a run's log: the type an event has in
//! `GET /agent/events` (`agent_event_type`) and a run's inbox folded from its message events
//! (`fold_inbox`). Pure, like the rest of the domain; the payloads are `messages`'s.

use crate::events::Event;
use crate::ids::Timestamp;
use crate::messages::ReceivedMessage;

/// The type an event has in `GET /agent/events` (the Oz document's `event_type`), if it is one
/// that endpoint lists: a run's lifecycle changes, what its agent reported, and the messages it
/// received (`new_message`).
pub fn agent_event_type(event: &Event) -> Option<&'static str> {
    match event {
        Event::Started { .. } | Event::StartedOn { .. } => Some("run_in_progress"),
        Event::Succeeded { .. } => Some("run_succeeded"),
        Event::Failed { .. } => Some("run_failed"),
        Event::Cancelled { .. } => Some("run_cancelled"),
        Event::MessageReceived(_) => Some("new_message"),
        Event::LifecycleReported(r) => Some(r.report.as_str()),
        _ => None,
    }
}

/// One message of a run's inbox as its log tells it: received, then perhaps delivered and read
/// (the first of each counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxMessage {
    pub message: ReceivedMessage,
    pub sent_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub read_at: Option<Timestamp>,
}

/// A run's inbox, oldest first, from its log's events with their times.
pub fn fold_inbox<'a>(
    events: impl IntoIterator<Item = (&'a Event, Timestamp)>,
) -> Vec<InboxMessage> {
    let mut inbox: Vec<InboxMessage> = Vec::new();
    for (event, at) in events {
        match event {
            Event::MessageReceived(message) => inbox.push(InboxMessage {
                message: message.clone(),
                sent_at: at,
                delivered_at: None,
                read_at: None,
            }),
            Event::MessageDelivered { message_id } => {
                if let Some(m) = inbox
                    .iter_mut()
                    .find(|m| &m.message.message_id == message_id)
                {
                    m.delivered_at.get_or_insert(at);
                }
            }
            Event::MessageRead { message_id } => {
                if let Some(m) = inbox
                    .iter_mut()
                    .find(|m| &m.message.message_id == message_id)
                {
                    m.read_at.get_or_insert(at);
                }
            }
            _ => {}
        }
    }
    inbox
}
