//! One step of a conversation being built: the messages of one execution, a block joining the
//! last message when it has the same role, and the step's first and last times. It assembles;
//! which block goes where is `conversation`'s.

use crate::wire::{
    format_time, ConversationContentBlock, ConversationMessage, ConversationMessageRole,
    ConversationStep,
};
use runledger_domain::Timestamp;

/// A step being built.
pub(super) struct Step {
    pub(super) execution: u32,
    messages: Vec<(ConversationMessageRole, Timestamp, ConversationMessage)>,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
}

impl Step {
    pub(super) fn new(execution: u32) -> Step {
        Step {
            execution,
            messages: Vec::new(),
            first: None,
            last: None,
        }
    }

    /// Adds a block: to the last message if it has the same role, else as a new message.
    pub(super) fn push(
        &mut self,
        role: ConversationMessageRole,
        id: String,
        at: Timestamp,
        block: ConversationContentBlock,
    ) {
        self.first = Some(self.first.map_or(at, |f| f.min(at)));
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
        match self.messages.last_mut() {
            Some((r, _, message)) if *r == role => {
                message.message_ids.push(id);
                message.content.push(block);
            }
            _ => self.messages.push((
                role,
                at,
                ConversationMessage {
                    message_ids: vec![id],
                    role,
                    timestamp: format_time(at),
                    content: vec![block],
                },
            )),
        }
    }

    /// Records one more transcript entry (a piece of a joined line) in the last message.
    pub(super) fn note_id(&mut self, id: String) {
        if let Some((_, _, message)) = self.messages.last_mut() {
            if !message.message_ids.contains(&id) {
                message.message_ids.push(id);
            }
        }
    }

    pub(super) fn finish(self) -> ConversationStep {
        ConversationStep {
            id: format!("execution-{}", self.execution),
            started_at: self.first.map(format_time),
            completed_at: self.last.map(format_time),
            messages: self.messages.into_iter().map(|(_, _, m)| m).collect(),
            steps: Vec::new(),
        }
    }
}
