//! The rules of messages between runs and of reported lifecycle events: which of these
//! commands a run accepts in which state, and with which events and effects. Pure, like the
//! rest of `decide`; the shell has already checked that a message id names a message of this
//! run (the log is the only place that knows).

use crate::events::{Event, StatusMessage};
use crate::messages::{LifecycleReport, ReportedLifecycle};

use super::command::{Command, Decision, Effect, Rejection, MAX_PENDING_FOLLOWUPS};
use super::state::{Followup, Run, RunState};

/// Decides the message and report commands (`decide` hands them over).
pub(super) fn decide_message(run: &Run, command: Command) -> Result<Decision, Rejection> {
    let events = |events| {
        Ok(Decision {
            events,
            effects: vec![],
        })
    };
    match command {
        Command::SendMessage {
            message_id,
            to,
            subject,
        } => events(vec![Event::MessageSent {
            message_id,
            to,
            subject,
        }]),
        Command::ReceiveMessage(message) => {
            let waiting = match run.state {
                RunState::Queued => run.pending_followups.len(),
                RunState::InProgress => run.owed.len(),
                terminal => return Err(Rejection::AlreadyTerminal(terminal)),
            };
            if waiting >= MAX_PENDING_FOLLOWUPS {
                return Err(Rejection::TooManyPending);
            }
            // A queued run's agent is handed it at the start (`Launch`); a running one's now.
            let effects = match run.state {
                RunState::InProgress => vec![Effect::Deliver(Followup {
                    message: message.agent_text(),
                    mode: crate::events::FollowupMode::Normal,
                    message_id: Some(message.message_id.clone()),
                })],
                _ => vec![],
            };
            Ok(Decision {
                events: vec![Event::MessageReceived(message)],
                effects,
            })
        }
        Command::MarkDelivered { message_id } => {
            events(vec![Event::MessageDelivered { message_id }])
        }
        Command::ReadMessage { message_id } => events(vec![Event::MessageRead { message_id }]),
        Command::ReportLifecycle {
            report,
            execution_id,
            ref_id,
            by,
        } => {
            let reported = Event::LifecycleReported(ReportedLifecycle {
                report,
                execution: run.executions,
                execution_id,
                ref_id,
                by: by.clone(),
            });
            report_lifecycle(run, report, reported, by)
        }
        _ => Err(Rejection::NotFound),
    }
}

/// A report agrees with the state machine or is refused: `run_in_progress` confirms the
/// execution in progress; `run_succeeded`, `run_failed` and `run_errored` end it as its
/// agent's exit would (and stop its processes); `run_cancelled` is a cancel. Nothing is
/// reported of a run that has ended, and only a cancel of one that has not started.
fn report_lifecycle(
    run: &Run,
    report: LifecycleReport,
    reported: Event,
    by: String,
) -> Result<Decision, Rejection> {
    let contradicts = || Rejection::ContradictsState {
        state: run.state,
        report,
    };
    let execution = run.executions;
    let (end, effects) = match (run.state, report) {
        (state, _) if state.is_terminal() => return Err(contradicts()),
        (RunState::Queued, LifecycleReport::Cancelled) => {
            (Some(Event::Cancelled { by }), vec![Effect::Dequeue])
        }
        (RunState::Queued, _) => return Err(contradicts()),
        (_, LifecycleReport::InProgress) => (None, vec![]),
        (_, LifecycleReport::Succeeded) => (
            Some(Event::Succeeded { execution }),
            vec![Effect::Stop { execution }],
        ),
        (_, LifecycleReport::Failed | LifecycleReport::Errored) => (
            Some(Event::Failed {
                execution,
                status: StatusMessage {
                    message: format!("the run's agent reported {}", report.as_str()),
                    error_code: None,
                    retryable: None,
                },
            }),
            vec![Effect::Stop { execution }],
        ),
        (_, LifecycleReport::Cancelled) => (
            Some(Event::Cancelled { by }),
            vec![Effect::Stop { execution }],
        ),
    };
    Ok(Decision {
        events: std::iter::once(reported).chain(end).collect(),
        effects,
    })
}

/// The deliveries recorded with a `FollowupsDelivered` of `count`: one `MessageDelivered` for
/// each message among the follow-ups it takes.
pub(super) fn delivered_with(run: &Run, count: u32) -> Vec<Event> {
    run.owed
        .iter()
        .take(count as usize)
        .filter_map(|f| f.message_id.clone())
        .map(|message_id| Event::MessageDelivered { message_id })
        .collect()
}
