//! `Messages`: what the HTTP edge's message endpoints may do (`/api/v1/agent/messages…`) —
//! send a message to runs, read a run's inbox, find the run a message id belongs to, and mark
//! a message delivered or read. Every message is events in the logs of the runs concerned
//! (`MessageReceived`, `MessageDelivered`, `MessageRead` in the recipient's, `MessageSent` in
//! the sender's), written through the runs' actors; the inbox is folded from the recipient's
//! durable events. Who may see which run is the caller's to decide.

use super::error::Error;
use super::runs::Runs;
use runledger_domain::orchestration::fold_inbox;
use runledger_domain::{Command, InboxMessage, Origin, ReceivedMessage, RunId};

/// A cheap-to-clone handle on the runs for the message endpoints.
#[derive(Clone)]
pub struct Messages {
    runs: Runs,
}

impl Messages {
    pub(super) fn new(runs: &Runs) -> Messages {
        Messages { runs: runs.clone() }
    }

    /// Sends one message from `sender` to each of `to`, in order, and answers their ids (one
    /// per recipient). Each recipient's `MessageReceived` is written before the sender's
    /// `MessageSent`; a recipient that refuses (it ended meanwhile) stops the send there,
    /// so the recipients before it have their message and the sender's log names only those.
    pub async fn send(
        &self,
        sender: RunId,
        to: &[RunId],
        subject: &str,
        body: &str,
        origin: &Origin,
    ) -> Result<Vec<String>, Error> {
        let mut sent = Vec::with_capacity(to.len());
        for recipient in to {
            let message_id = self.runs.new_id().to_string();
            let message = ReceivedMessage {
                message_id: message_id.clone(),
                from: sender.to_string(),
                subject: subject.to_string(),
                body: body.to_string(),
            };
            let received = self
                .runs
                .execute_as(
                    *recipient,
                    Command::ReceiveMessage(message),
                    Some(origin.clone()),
                )
                .await;
            if let Err(e) = received {
                self.record_sent(sender, &sent, subject, origin).await?;
                return Err(e);
            }
            sent.push((message_id, *recipient));
        }
        self.record_sent(sender, &sent, subject, origin).await?;
        Ok(sent.into_iter().map(|(id, _)| id).collect())
    }

    async fn record_sent(
        &self,
        sender: RunId,
        sent: &[(String, RunId)],
        subject: &str,
        origin: &Origin,
    ) -> Result<(), Error> {
        for (message_id, recipient) in sent {
            let command = Command::SendMessage {
                message_id: message_id.clone(),
                to: recipient.to_string(),
                subject: subject.to_string(),
            };
            self.runs
                .execute_as(sender, command, Some(origin.clone()))
                .await?;
        }
        Ok(())
    }

    /// The run that received message `message_id`, if there is one.
    pub fn recipient(&self, message_id: &str) -> Result<Option<RunId>, Error> {
        Ok(self.runs.inner.store.message_recipient(message_id)?)
    }

    /// The inbox of `run`, oldest first, as its durable events tell it.
    pub fn inbox(&self, run: RunId) -> Result<Vec<InboxMessage>, Error> {
        let Some(state) = self.runs.get(run)? else {
            return Ok(Vec::new());
        };
        let end = state.next_seq;
        let mut events = Vec::new();
        for envelope in self.runs.inner.store.run_events(run, 0) {
            let envelope = envelope?;
            if envelope.seq >= end {
                break;
            }
            // Only what an inbox is made of is kept, not a long log's every event.
            if matches!(
                envelope.event,
                runledger_domain::Event::MessageReceived(_)
                    | runledger_domain::Event::MessageDelivered { .. }
                    | runledger_domain::Event::MessageRead { .. }
            ) {
                events.push((envelope.event, envelope.at));
            }
        }
        Ok(fold_inbox(events.iter().map(|(e, at)| (e, *at))))
    }

    /// Message `message_id` of `run`'s inbox, if it is one.
    pub fn message(&self, run: RunId, message_id: &str) -> Result<Option<InboxMessage>, Error> {
        Ok(self
            .inbox(run)?
            .into_iter()
            .find(|m| m.message.message_id == message_id))
    }

    /// Marks message `message_id` of `run` delivered, unless it already is (idempotent).
    /// `None` if `run` has no such message.
    pub async fn mark_delivered(
        &self,
        run: RunId,
        message_id: &str,
        origin: Origin,
    ) -> Result<Option<InboxMessage>, Error> {
        let command = Command::MarkDelivered {
            message_id: message_id.to_string(),
        };
        self.record_once(
            run,
            message_id,
            origin,
            |m| m.delivered_at.is_some(),
            command,
        )
        .await
    }

    /// Records that message `message_id` of `run` was read, the first time, and answers it.
    /// `None` if `run` has no such message.
    pub async fn read(
        &self,
        run: RunId,
        message_id: &str,
        origin: Origin,
    ) -> Result<Option<InboxMessage>, Error> {
        let command = Command::ReadMessage {
            message_id: message_id.to_string(),
        };
        self.record_once(run, message_id, origin, |m| m.read_at.is_some(), command)
            .await
    }

    /// Executes `command` on `run` unless its message `message_id` is `done` already; the
    /// message as it is then (`None` if `run` has no such message).
    async fn record_once(
        &self,
        run: RunId,
        message_id: &str,
        origin: Origin,
        done: impl Fn(&InboxMessage) -> bool,
        command: Command,
    ) -> Result<Option<InboxMessage>, Error> {
        let Some(message) = self.message(run, message_id)? else {
            return Ok(None);
        };
        if done(&message) {
            return Ok(Some(message));
        }
        self.runs.execute_as(run, command, Some(origin)).await?;
        self.message(run, message_id)
    }
}
