//! The webhook topics (`run.queued`, `run.succeeded`, …) and the one pure mapping from a run's
//! events to the topics they announce. A topic is owed for every change of a run's state
//! (compared before and after each event) and for the events that announce something of their
//! own (`run.artifact`); nothing else. The webhook shell (`runledger_runs::webhooks`) only writes down
//! what this mapping says.

use super::events::Event;
use super::ids::{RunId, Timestamp};
use super::run::{evolve, Run, RunState};

/// What a webhook delivery announces (its body's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topic {
    Queued,
    Started,
    Succeeded,
    Failed,
    Cancelled,
    Artifact,
}

impl Topic {
    pub const ALL: [Topic; 6] = [
        Topic::Queued,
        Topic::Started,
        Topic::Succeeded,
        Topic::Failed,
        Topic::Cancelled,
        Topic::Artifact,
    ];

    /// What a subscription gets when it names no `events`: every change of state.
    pub const STATE_CHANGES: [Topic; 5] = [
        Topic::Queued,
        Topic::Started,
        Topic::Succeeded,
        Topic::Failed,
        Topic::Cancelled,
    ];

    /// The wire name, the body's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Queued => "run.queued",
            Topic::Started => "run.started",
            Topic::Succeeded => "run.succeeded",
            Topic::Failed => "run.failed",
            Topic::Cancelled => "run.cancelled",
            Topic::Artifact => "run.artifact",
        }
    }

    pub fn parse(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// A stable one-byte code, for durable records.
    pub fn code(self) -> u8 {
        match self {
            Topic::Queued => 0,
            Topic::Started => 1,
            Topic::Succeeded => 2,
            Topic::Failed => 3,
            Topic::Cancelled => 4,
            Topic::Artifact => 5,
        }
    }

    pub fn from_code(code: u8) -> Option<Topic> {
        Topic::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The topic of a run entering `state`.
    fn entering(state: RunState) -> Topic {
        match state {
            RunState::Queued => Topic::Queued,
            RunState::InProgress => Topic::Started,
            RunState::Succeeded => Topic::Succeeded,
            RunState::Failed => Topic::Failed,
            RunState::Cancelled => Topic::Cancelled,
        }
    }
}

/// The topic one event announces, given the run's state before and after it: the event's own
/// topic if it has one, else the state it entered if it changed the state.
pub fn topic(before: Option<RunState>, event: &Event, after: Option<RunState>) -> Option<Topic> {
    // Every variant is listed, so a new one does not compile until it is decided here whether
    // it announces something of its own.
    let own = match event {
        Event::Created(_)
        | Event::Admitted(_)
        | Event::Started { .. }
        | Event::FollowupReceived { .. }
        | Event::Succeeded { .. }
        | Event::Failed { .. }
        | Event::Cancelled { .. }
        | Event::FollowupsDelivered { .. }
        | Event::Requeued { .. }
        | Event::UsageRecorded { .. }
        | Event::Attached { .. }
        | Event::Scheduled { .. }
        | Event::StartedOn { .. }
        | Event::Lost { .. }
        | Event::SessionLinkRevoked { .. }
        | Event::Derived(_)
        | Event::Provenance { .. }
        | Event::Changes { .. } => None,
        Event::ArtifactReported { .. } => Some(Topic::Artifact),
    };
    match (own, after) {
        (Some(own), _) => Some(own),
        (None, Some(after)) if before != Some(after) => Some(Topic::entering(after)),
        _ => None,
    }
}

/// The topics a decision's events announce when applied to `current` at `at`, each with the
/// index of its event in `events`.
pub fn topics(
    current: Option<&Run>,
    id: RunId,
    events: &[Event],
    at: Timestamp,
) -> Vec<(usize, Topic)> {
    let mut out = Vec::new();
    let mut run = current.cloned();
    for (i, event) in events.iter().enumerate() {
        let before = run.as_ref().map(|r| r.state);
        run = evolve(run, id, event, at);
        if let Some(t) = topic(before, event, run.as_ref().map(|r| r.state)) {
            out.push((i, t));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sample_created, RunAdmitted, StatusMessage};

    fn admitted() -> Event {
        Event::Admitted(RunAdmitted::from_legacy(sample_created(1)))
    }

    fn id() -> RunId {
        RunId::new(Timestamp(1_000_001), 1)
    }

    /// Given the run as these events leave it.
    fn given(events: &[Event]) -> Option<Run> {
        events
            .iter()
            .fold(None, |run, e| evolve(run, id(), e, Timestamp(1_000_001)))
    }

    fn names(topics: Vec<(usize, Topic)>) -> Vec<(usize, &'static str)> {
        topics.into_iter().map(|(i, t)| (i, t.as_str())).collect()
    }

    #[test]
    fn an_admission_announces_queued() {
        let when = [admitted()];
        assert_eq!(
            names(topics(None, id(), &when, Timestamp(1_000_001))),
            [(0, "run.queued")]
        );
    }

    #[test]
    fn an_admission_with_attachments_announces_queued_once() {
        let when = [
            admitted(),
            Event::Attached {
                attachments: vec![crate::Attachment {
                    file_name: "a.txt".into(),
                    content: crate::Content {
                        sha256: [1; 32],
                        size: 1,
                        mime_type: "text/plain".into(),
                    },
                }],
            },
        ];
        assert_eq!(
            names(topics(None, id(), &when, Timestamp(1_000_001))),
            [(0, "run.queued")]
        );
    }

    #[test]
    fn a_reported_artifact_announces_an_artifact_and_no_state() {
        let running = given(&[admitted(), Event::Started { execution: 1 }]);
        let report = [Event::ArtifactReported {
            execution: 1,
            artifact: crate::Artifact {
                uid: "u".into(),
                kind: crate::ArtifactKind::PullRequest {
                    url: "https://git.example.com/a/b/pull/1".into(),
                    branch: "b".into(),
                    title: None,
                },
            },
        }];
        assert_eq!(
            names(topics(running.as_ref(), id(), &report, Timestamp(3))),
            [(0, "run.artifact")]
        );
    }

    #[test]
    fn a_start_announces_started_and_each_end_its_state() {
        let queued = given(&[admitted()]);
        let started = [Event::Started { execution: 1 }];
        assert_eq!(
            names(topics(queued.as_ref(), id(), &started, Timestamp(2))),
            [(0, "run.started")]
        );
        let running = given(&[admitted(), Event::Started { execution: 1 }]);
        let cases = [
            (Event::Succeeded { execution: 1 }, "run.succeeded"),
            (
                Event::Failed {
                    execution: 1,
                    status: StatusMessage {
                        message: "x".into(),
                        error_code: None,
                        retryable: None,
                    },
                },
                "run.failed",
            ),
            (Event::Cancelled { by: "k".into() }, "run.cancelled"),
        ];
        for (event, name) in cases {
            assert_eq!(
                names(topics(running.as_ref(), id(), &[event], Timestamp(3))),
                [(0, name)]
            );
        }
    }

    #[test]
    fn a_finish_that_requeues_announces_the_end_and_then_queued() {
        // A follow-up the execution never took is owed at its end.
        let running = given(&[
            admitted(),
            Event::Started { execution: 1 },
            Event::FollowupReceived {
                message: "more".into(),
                mode: crate::FollowupMode::Normal,
                by: "k".into(),
            },
        ]);
        let when = [
            Event::Succeeded { execution: 1 },
            Event::Requeued { execution: 1 },
        ];
        assert_eq!(
            names(topics(running.as_ref(), id(), &when, Timestamp(3))),
            [(0, "run.succeeded"), (1, "run.queued")]
        );
    }

    #[test]
    fn a_followup_on_a_finished_run_announces_queued_and_one_on_a_live_run_nothing() {
        let followup = Event::FollowupReceived {
            message: "more".into(),
            mode: crate::FollowupMode::Normal,
            by: "k".into(),
        };
        let done = given(&[
            admitted(),
            Event::Started { execution: 1 },
            Event::Succeeded { execution: 1 },
        ]);
        assert_eq!(
            names(topics(
                done.as_ref(),
                id(),
                std::slice::from_ref(&followup),
                Timestamp(4)
            )),
            [(0, "run.queued")]
        );
        let running = given(&[admitted(), Event::Started { execution: 1 }]);
        assert!(topics(running.as_ref(), id(), &[followup], Timestamp(4)).is_empty());
    }

    #[test]
    fn bookkeeping_events_announce_nothing() {
        let running = given(&[admitted(), Event::Started { execution: 1 }]);
        let when = [
            Event::FollowupsDelivered {
                execution: 1,
                count: 1,
            },
            Event::UsageRecorded {
                execution: 1,
                usage: Default::default(),
            },
            Event::SessionLinkRevoked { by: "k".into() },
        ];
        assert!(topics(running.as_ref(), id(), &when, Timestamp(4)).is_empty());
    }

    #[test]
    fn names_and_codes_round_trip() {
        for t in Topic::ALL {
            assert_eq!(Topic::parse(t.as_str()), Some(t));
            assert_eq!(Topic::from_code(t.code()), Some(t));
        }
        assert_eq!(Topic::parse("run.finished"), None);
    }
}
