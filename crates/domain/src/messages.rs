//! Messages between runs and the lifecycle events a run's agent reports itself: the payloads
//! of `Event::MessageReceived` and `Event::LifecycleReported`, their limits, and the text a
//! message reaches its recipient's agent as. Vocabulary only; the rules are `run::decide`'s.

use serde::{Deserialize, Serialize};

/// The longest subject, in characters (the Oz document's `maxLength: 1024`).
pub const MAX_SUBJECT: usize = 1024;
/// The longest body, in characters (the Oz document's `maxLength: 131072`, "128KB").
pub const MAX_BODY: usize = 128 * 1024;

/// A message as its recipient's log holds it (`Event::MessageReceived`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedMessage {
    /// A ULID made by the shell when the message is sent; one per recipient.
    pub message_id: String,
    /// The sender's run id.
    pub from: String,
    pub subject: String,
    pub body: String,
}

impl ReceivedMessage {
    /// What the recipient's agent is handed, as a follow-up's message: who sent it, its id
    /// (so the agent can answer or mark it) and its subject before the body.
    pub fn agent_text(&self) -> String {
        format!(
            "Message {} from run {}\nSubject: {}\n\n{}",
            self.message_id, self.from, self.subject, self.body
        )
    }
}

/// A lifecycle event a run's agent or worker reports (`POST /agent/events/{runId}`), as the
/// run's log holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedLifecycle {
    pub report: LifecycleReport,
    /// The execution in progress when it was reported (0: none had started).
    pub execution: u32,
    /// The client's own execution id, for correlation.
    pub execution_id: Option<String>,
    /// The client's reference (a message id, …).
    pub ref_id: Option<String>,
    /// The key that reported it.
    pub by: String,
}

/// What was reported. `run_blocked` has no value: a run cannot be `BLOCKED` here. Append new
/// values at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LifecycleReport {
    InProgress,
    Succeeded,
    Failed,
    Errored,
    Cancelled,
}

impl LifecycleReport {
    pub const ALL: [LifecycleReport; 5] = [
        LifecycleReport::InProgress,
        LifecycleReport::Succeeded,
        LifecycleReport::Failed,
        LifecycleReport::Errored,
        LifecycleReport::Cancelled,
    ];

    /// The wire name (the Oz document's `event_type`).
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleReport::InProgress => "run_in_progress",
            LifecycleReport::Succeeded => "run_succeeded",
            LifecycleReport::Failed => "run_failed",
            LifecycleReport::Errored => "run_errored",
            LifecycleReport::Cancelled => "run_cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<LifecycleReport> {
        LifecycleReport::ALL.into_iter().find(|r| r.as_str() == s)
    }
}
