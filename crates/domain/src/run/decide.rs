//! The rules: which command is accepted in which state, and with which events and effects
//! (`decide`); and the check that a stored event is one those rules would record
//! (`recordable`). Pure: it reads the state and returns data, it never changes the state.

use crate::events::Event;

use super::command::{Command, Decision, Effect, Rejection, MAX_ARTIFACTS, MAX_PENDING_FOLLOWUPS};
use super::state::{Followup, Run, RunState};

/// Decides `command` against the current state of a run (`None`: the run does not exist).
pub fn decide(run: Option<&Run>, command: Command) -> Result<Decision, Rejection> {
    let decision = |events, effects| Ok(Decision { events, effects });
    let Some(run) = run else {
        return decide_new(command);
    };
    match command {
        Command::Create { .. } => Err(Rejection::AlreadyExists),
        Command::Start { placement } => {
            if run.state != RunState::Queued {
                return Err(Rejection::NotQueued);
            }
            let execution = run.executions + 1;
            let started = match placement {
                None => Event::Started { execution },
                Some(placement) => Event::StartedOn {
                    execution,
                    placement,
                },
            };
            decision(
                vec![started],
                vec![Effect::Launch {
                    execution,
                    followups: run.pending_followups.clone(),
                    resumed_by: run.resumed_by.clone(),
                }],
            )
        }
        Command::Followup { message, mode, by } => {
            if message.is_empty() {
                return Err(Rejection::EmptyMessage);
            }
            let waiting = match run.state {
                RunState::Queued => run.pending_followups.len(),
                RunState::InProgress => run.owed.len(),
                _ => 0,
            };
            if waiting >= MAX_PENDING_FOLLOWUPS {
                return Err(Rejection::TooManyPending);
            }
            let effects = match run.state {
                RunState::Queued => vec![],
                RunState::InProgress => vec![Effect::Deliver(Followup {
                    message: message.clone(),
                    mode,
                })],
                // A finished run resumes: it waits for a slot like a new one.
                _ => vec![Effect::Enqueue],
            };
            decision(vec![Event::FollowupReceived { message, mode, by }], effects)
        }
        Command::Cancel { by } => match run.state {
            RunState::Queued => decision(vec![Event::Cancelled { by }], vec![Effect::Dequeue]),
            RunState::InProgress => decision(
                vec![Event::Cancelled { by }],
                vec![Effect::Stop {
                    execution: run.executions,
                }],
            ),
            terminal => Err(Rejection::AlreadyTerminal(terminal)),
        },
        Command::Finish { execution, outcome } => {
            if run.state != RunState::InProgress || execution != run.executions {
                return Err(Rejection::StaleExecution(execution));
            }
            let event = match outcome {
                Ok(()) => Event::Succeeded { execution },
                Err(status) => Event::Failed { execution, status },
            };
            if run.owed.is_empty() {
                decision(vec![event], vec![])
            } else {
                // However the execution ended, what it did not take goes to the next one.
                decision(
                    vec![event, Event::Requeued { execution }],
                    vec![Effect::Enqueue],
                )
            }
        }
        // Like a `Finish`, only the execution in progress can be lost; what it owed goes to
        // the next one, which starts as this one did.
        Command::Lose { execution, status } => {
            if run.state != RunState::InProgress || execution != run.executions {
                return Err(Rejection::StaleExecution(execution));
            }
            decision(
                vec![Event::Lost { execution, status }],
                vec![Effect::Enqueue],
            )
        }
        Command::Delivered { execution, count } => {
            if run.state != RunState::InProgress || execution != run.executions {
                return Err(Rejection::StaleExecution(execution));
            }
            // An execution reports what it took; it cannot take more than it was owed.
            let count = count.min(u32::try_from(run.owed.len()).unwrap_or(u32::MAX));
            if count == 0 {
                return Err(Rejection::NothingOwed(execution));
            }
            decision(vec![Event::FollowupsDelivered { execution, count }], vec![])
        }
        // The latest execution only, and once: its usage is recorded before its end, or
        // after a cancel stopped it (the CPU time was spent all the same). An earlier
        // execution's report is as stale as its `Finish` would be.
        Command::RecordUsage { execution, usage } => {
            if execution == 0 || execution != run.executions || run.usage.recorded >= execution {
                return Err(Rejection::StaleExecution(execution));
            }
            decision(vec![Event::UsageRecorded { execution, usage }], vec![])
        }
        // Only the execution in progress reports: what a cancelled or superseded execution
        // says afterwards is as stale as its `Finish`.
        Command::ReportArtifact {
            execution,
            artifact,
        } => {
            if run.state != RunState::InProgress || execution != run.executions {
                return Err(Rejection::StaleExecution(execution));
            }
            if run.artifacts.len() >= MAX_ARTIFACTS {
                return Err(Rejection::TooManyArtifacts);
            }
            decision(
                vec![Event::ArtifactReported {
                    execution,
                    artifact,
                }],
                vec![],
            )
        }
        // In any state: a finished run's page stays readable through its links, so a link
        // shared too widely must be revocable after the run ends too.
        Command::RevokeSessionLink { by } => {
            decision(vec![Event::SessionLinkRevoked { by }], vec![])
        }
    }
}

/// Decides a command for a run that does not exist yet: only a `Create`, which admits it.
fn decide_new(command: Command) -> Result<Decision, Rejection> {
    match command {
        Command::Create {
            admitted,
            attachments,
            schedule,
        } => {
            let mut events = vec![Event::Admitted(admitted)];
            if let Some(schedule) = schedule {
                events.push(Event::Scheduled { schedule });
            }
            if !attachments.is_empty() {
                events.push(Event::Attached { attachments });
            }
            Ok(Decision {
                events,
                effects: vec![Effect::Enqueue],
            })
        }
        _ => Err(Rejection::NotFound),
    }
}

/// Whether `decide` would record `event` in the run's current state: the event is turned back
/// into the command it records, and that command must be accepted with exactly this event.
/// Every log the service writes passes; a log from an edited file, or from a version with
/// other rules, may not. `evolve` still folds such a log (it is total), so this is for tools
/// that want to report it (`runledger import`), not a condition of folding.
pub fn recordable(run: Option<&Run>, event: &Event) -> bool {
    let command = match event.clone() {
        // Runs are admitted since teams exist: a `Created` is only ever the first event of a
        // run from before.
        Event::Created(_) => return run.is_none(),
        // With the schedule and the attachments, if any: recorded in the same decision,
        // checked below.
        Event::Admitted(admitted) => Command::create(admitted, Vec::new(), None),
        Event::Started { .. } => Command::Start { placement: None },
        Event::StartedOn { placement, .. } => Command::Start {
            placement: Some(placement),
        },
        Event::Lost { execution, status } => Command::Lose { execution, status },
        Event::FollowupReceived { message, mode, by } => Command::Followup { message, mode, by },
        Event::Succeeded { execution } => Command::Finish {
            execution,
            outcome: Ok(()),
        },
        Event::Failed { execution, status } => Command::Finish {
            execution,
            outcome: Err(status),
        },
        Event::Cancelled { by } => Command::Cancel { by },
        Event::SessionLinkRevoked { by } => Command::RevokeSessionLink { by },
        Event::FollowupsDelivered { execution, count } => Command::Delivered { execution, count },
        // Recorded right after the `Succeeded` or `Failed` of an execution that ended owing
        // follow-ups (the second event of that `Finish`).
        Event::Requeued { execution } => {
            return run.is_some_and(|r| {
                matches!(r.state, RunState::Succeeded | RunState::Failed)
                    && r.executions == execution
                    && !r.owed.is_empty()
            });
        }
        Event::UsageRecorded { execution, usage } => Command::RecordUsage { execution, usage },
        Event::ArtifactReported {
            execution,
            artifact,
        } => Command::ReportArtifact {
            execution,
            artifact,
        },
        // The event after the admission (and its `Scheduled`, if any) of a create with
        // attachments.
        Event::Attached { attachments } => {
            return !attachments.is_empty()
                && run.is_some_and(|r| {
                    r.next_seq == 1 + u64::from(r.schedule.is_some()) && r.attachments.is_empty()
                });
        }
        // The second event of a create a schedule's firing made.
        Event::Scheduled { .. } => {
            return run.is_some_and(|r| {
                r.next_seq == 1 && r.schedule.is_none() && r.attachments.is_empty()
            });
        }
    };
    // An event is recordable as the first event of its command's decision (a `Finish` may
    // add a `Requeued`, checked on its own above).
    decide(run, command).is_ok_and(|d| d.events.first() == Some(event))
}
