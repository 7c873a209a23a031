//! The run state machine: the state a run's events fold into, the commands clients and the
//! executor issue, and the rules that decide them.
//!
//! `QUEUED → INPROGRESS → SUCCEEDED | FAILED`; `QUEUED | INPROGRESS → CANCELLED` by cancel; a
//! follow-up on a terminal run puts it back to `QUEUED` for a new execution. Decisions return
//! side effects as data (`Effect`); the shell performs them only after the events are durable,
//! and replay never performs them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::events::{
    AgentConfig, Creator, Event, ExecutionUsage, FollowupMode, RunCreated, SourceType,
    StatusMessage,
};
use super::ids::{RunId, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RunState {
    Queued,
    InProgress,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunState {
    pub const ALL: [RunState; 5] = [
        RunState::Queued,
        RunState::InProgress,
        RunState::Succeeded,
        RunState::Failed,
        RunState::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Cancelled
        )
    }

    /// The wire name (OpenAPI `RunState`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "QUEUED",
            RunState::InProgress => "INPROGRESS",
            RunState::Succeeded => "SUCCEEDED",
            RunState::Failed => "FAILED",
            RunState::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A follow-up message waiting for, or handed to, an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Followup {
    pub message: String,
    pub mode: FollowupMode,
}

/// The state of one run: the fold of its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub id: RunId,
    pub title: String,
    pub prompt: String,
    pub config: AgentConfig,
    pub creator: Creator,
    pub source: SourceType,
    pub metadata: BTreeMap<String, String>,
    pub state: RunState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When the first execution started.
    pub started_at: Option<Timestamp>,
    pub status_message: Option<StatusMessage>,
    /// How many executions have started (0 while the first one is queued).
    pub executions: u32,
    /// Follow-ups received while queued, handed to the next execution when it starts.
    pub pending_followups: Vec<Followup>,
    /// The follow-up that resumed a finished run, for the execution it resumes.
    pub resumed_by: Option<Followup>,
    /// Follow-ups owed to the current (or just ended) execution that it has not reported
    /// taking: the ones handed to it at its start and the ones received while it ran, oldest
    /// first. What an execution ends without taking is requeued (`Event::Requeued`), so no
    /// follow-up is lost to a turn that could not take it or to a crash.
    pub owed: Vec<Followup>,
    /// Time spent in finished executions.
    pub run_time_ms: u64,
    /// Start of the execution in progress, if any.
    pub execution_started_at: Option<Timestamp>,
    /// Number of events folded; the next event's sequence number.
    pub next_seq: u64,
    /// What the run's executions used, summed over those whose usage was recorded.
    pub usage: RunUsage,
}

/// The sum of a run's recorded `ExecutionUsage`s. A cost is `None` until some execution
/// recorded one: an unknown cost is never reported as 0.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunUsage {
    pub inference_nano_usd: Option<u64>,
    pub compute_nano_usd: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cpu_ms: u64,
    /// The latest execution whose usage was recorded (0: none), so each is recorded once.
    pub recorded: u32,
}

impl RunUsage {
    /// Adds one execution's usage. Saturating: a sum never wraps into a small number.
    fn add(&mut self, execution: u32, usage: &ExecutionUsage) {
        fn plus(sum: &mut Option<u64>, part: Option<u64>) {
            if let Some(part) = part {
                *sum = Some(sum.unwrap_or(0).saturating_add(part));
            }
        }
        plus(
            &mut self.inference_nano_usd,
            usage.inference.map(|c| c.nano_usd),
        );
        plus(&mut self.compute_nano_usd, usage.compute_nano_usd);
        if let Some(tokens) = usage.tokens {
            self.input_tokens = self.input_tokens.saturating_add(tokens.input);
            self.output_tokens = self.output_tokens.saturating_add(tokens.output);
        }
        self.cpu_ms = self.cpu_ms.saturating_add(usage.cpu_ms.unwrap_or(0));
        self.recorded = self.recorded.max(execution);
    }
}

impl Run {
    /// Total time the agent has worked on the run, counting a live execution up to `now`.
    pub fn run_time_ms(&self, now: Timestamp) -> u64 {
        let live = match (self.state, self.execution_started_at) {
            (RunState::InProgress, Some(start)) => now.0.saturating_sub(start.0),
            _ => 0,
        };
        self.run_time_ms + live
    }

    /// Whether the run has had a session (an execution has started).
    pub fn has_session(&self) -> bool {
        self.executions > 0
    }
}

/// What a client or the executor asks of a run.
#[allow(clippy::large_enum_variant)] // as for `Event`: one command at a time, never collected
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Create(RunCreated),
    /// The executor has a free slot for this queued run.
    Start,
    Followup {
        message: String,
        mode: FollowupMode,
        by: String,
    },
    Cancel {
        by: String,
    },
    /// Execution `execution` ended: `Ok` for success, `Err` with the reason for failure.
    Finish {
        execution: u32,
        outcome: Result<(), StatusMessage>,
    },
    /// Execution `execution` took the next `count` follow-ups owed to it.
    Delivered {
        execution: u32,
        count: u32,
    },
    /// What execution `execution` used, priced by the shell.
    RecordUsage {
        execution: u32,
        usage: ExecutionUsage,
    },
}

/// Why a command was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the run already exists")]
    AlreadyExists,
    #[error("the run does not exist")]
    NotFound,
    #[error("the run is already {}", .0.as_str())]
    AlreadyTerminal(RunState),
    #[error("the run is not queued")]
    NotQueued,
    #[error("execution {0} is not the one in progress")]
    StaleExecution(u32),
    #[error("a follow-up needs a non-empty message")]
    EmptyMessage,
    #[error("the run already has {MAX_PENDING_FOLLOWUPS} follow-ups waiting to reach its agent")]
    TooManyPending,
    #[error("execution {0} owes no follow-up")]
    NothingOwed(u32),
}

/// How many follow-ups may wait for a queued run, or wait to reach the agent of a running
/// one; bounds the size of its state.
pub const MAX_PENDING_FOLLOWUPS: usize = 100;

/// Work for the shell to do once the decision's events are durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Put the run in its environment's queue to wait for a slot.
    Enqueue,
    /// Take the run out of its environment's queue.
    Dequeue,
    /// Launch execution `execution` of the agent with what it needs to know.
    Launch {
        execution: u32,
        followups: Vec<Followup>,
        resumed_by: Option<Followup>,
    },
    /// Hand a follow-up to the live execution.
    Deliver(Followup),
    /// Stop the live execution and its process tree.
    Stop { execution: u32 },
}

/// The outcome of deciding a command: events to append, then effects to perform.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub events: Vec<Event>,
    pub effects: Vec<Effect>,
}

/// Decides `command` against the current state of a run (`None`: the run does not exist).
pub fn decide(run: Option<&Run>, command: Command) -> Result<Decision, Rejection> {
    let decision = |events, effects| Ok(Decision { events, effects });
    let Some(run) = run else {
        return match command {
            Command::Create(created) => {
                decision(vec![Event::Created(created)], vec![Effect::Enqueue])
            }
            _ => Err(Rejection::NotFound),
        };
    };
    match command {
        Command::Create(_) => Err(Rejection::AlreadyExists),
        Command::Start => {
            if run.state != RunState::Queued {
                return Err(Rejection::NotQueued);
            }
            let execution = run.executions + 1;
            decision(
                vec![Event::Started { execution }],
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
    }
}

/// Folds one event, recorded at `at`, into the state of run `id`. Total: an event that does not
/// apply (which a log written through `decide` never contains) changes nothing but the run's
/// bookkeeping (`next_seq`, `updated_at`), so positions in the log stay consistent.
pub fn evolve(run: Option<Run>, id: RunId, event: &Event, at: Timestamp) -> Option<Run> {
    let Some(mut run) = run else {
        return match event {
            Event::Created(created) => Some(Run {
                id,
                title: created.title.clone(),
                prompt: created.prompt.clone(),
                config: created.config.clone(),
                creator: created.creator.clone(),
                source: created.source,
                metadata: created.metadata.clone(),
                state: RunState::Queued,
                created_at: at,
                updated_at: at,
                started_at: None,
                status_message: None,
                executions: 0,
                pending_followups: Vec::new(),
                resumed_by: None,
                owed: Vec::new(),
                run_time_ms: 0,
                execution_started_at: None,
                next_seq: 1,
                usage: RunUsage::default(),
            }),
            _ => None,
        };
    };
    run.next_seq += 1;
    run.updated_at = run.updated_at.max(at);
    match event {
        Event::Created(_) => {}
        Event::Started { execution } => {
            run.state = RunState::InProgress;
            run.executions = *execution;
            run.started_at.get_or_insert(at);
            run.execution_started_at = Some(at);
            // Handed to this execution at its start; owed until it reports taking them.
            run.owed = std::mem::take(&mut run.pending_followups);
            run.status_message = None;
        }
        Event::FollowupReceived { message, mode, .. } => {
            let followup = Followup {
                message: message.clone(),
                mode: *mode,
            };
            match run.state {
                RunState::Queued => run.pending_followups.push(followup),
                RunState::InProgress => run.owed.push(followup),
                _ => {
                    run.state = RunState::Queued;
                    run.resumed_by = Some(followup);
                    run.status_message = None;
                }
            }
        }
        Event::Succeeded { .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Succeeded;
        }
        Event::Failed { status, .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Failed;
            run.status_message = Some(status.clone());
        }
        Event::Cancelled { .. } => {
            finish_execution(&mut run, at);
            run.state = RunState::Cancelled;
            run.pending_followups.clear();
            run.owed.clear();
        }
        Event::FollowupsDelivered { execution, count } => {
            if run.state == RunState::InProgress && *execution == run.executions {
                let taken = (*count as usize).min(run.owed.len());
                run.owed.drain(..taken);
            }
        }
        Event::Requeued { execution } => {
            let finished = matches!(run.state, RunState::Succeeded | RunState::Failed);
            if finished && *execution == run.executions && !run.owed.is_empty() {
                let mut owed = std::mem::take(&mut run.owed).into_iter();
                run.state = RunState::Queued;
                run.resumed_by = owed.next();
                run.pending_followups = owed.collect();
                run.status_message = None;
            }
        }
        Event::UsageRecorded { execution, usage } => run.usage.add(*execution, usage),
    }
    Some(run)
}

fn finish_execution(run: &mut Run, at: Timestamp) {
    if let Some(start) = run.execution_started_at.take() {
        run.run_time_ms += at.0.saturating_sub(start.0);
    }
}

/// Whether `decide` would record `event` in the run's current state: the event is turned back
/// into the command it records, and that command must be accepted with exactly this event.
/// Every log the service writes passes; a log from an edited file, or from a version with
/// other rules, may not. `evolve` still folds such a log (it is total), so this is for tools
/// that want to report it (`runledger import`), not a condition of folding.
pub fn recordable(run: Option<&Run>, event: &Event) -> bool {
    let command = match event.clone() {
        Event::Created(created) => Command::Create(created),
        Event::Started { .. } => Command::Start,
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
    };
    // An event is recordable as the first event of its command's decision (a `Finish` may
    // add a `Requeued`, checked on its own above).
    decide(run, command).is_ok_and(|d| d.events.first() == Some(event))
}

/// Folds a whole log, oldest first.
pub fn fold<'a>(
    id: RunId,
    events: impl IntoIterator<Item = (&'a Event, Timestamp)>,
) -> Option<Run> {
    events
        .into_iter()
        .fold(None, |run, (event, at)| evolve(run, id, event, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::events::CreatorKind;

    fn created() -> RunCreated {
        RunCreated {
            title: "Fix the bug".into(),
            prompt: "Fix the bug in auth.go".into(),
            config: AgentConfig::default(),
            creator: Creator {
                kind: CreatorKind::User,
                uid: "key1".into(),
                display_name: "alice".into(),
            },
            source: SourceType::Api,
            metadata: BTreeMap::new(),
        }
    }

    const ID: RunId = RunId(42);

    /// Given `history`, when `command` is decided: the result.
    fn given(history: &[Event], command: Command) -> Result<Decision, Rejection> {
        let run = fold(
            ID,
            history
                .iter()
                .enumerate()
                .map(|(i, e)| (e, Timestamp(i as u64 * 10))),
        );
        decide(run.as_ref(), command)
    }

    fn state_after(history: &[Event]) -> Run {
        fold(
            ID,
            history
                .iter()
                .enumerate()
                .map(|(i, e)| (e, Timestamp(i as u64 * 10))),
        )
        .expect("history creates the run")
    }

    fn failure() -> StatusMessage {
        StatusMessage {
            message: "exit code 1".into(),
            error_code: None,
            retryable: None,
        }
    }

    #[test]
    fn recordable_accepts_what_decide_records_and_nothing_else() {
        let history = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            Event::Failed {
                execution: 1,
                status: failure(),
            },
        ];
        for (i, event) in history.iter().enumerate() {
            let run = (i > 0).then(|| state_after(&history[..i]));
            assert!(recordable(run.as_ref(), event), "event {i}");
        }
        let queued = state_after(&history[..1]);
        // A second Created, a skipped execution number, a finish of a run never started, and
        // a cancel of a finished run are not what the service writes.
        assert!(!recordable(Some(&queued), &Event::Created(created())));
        assert!(!recordable(Some(&queued), &Event::Started { execution: 2 }));
        assert!(!recordable(
            Some(&queued),
            &Event::Succeeded { execution: 0 }
        ));
        assert!(!recordable(None, &Event::Started { execution: 1 }));
        let failed = state_after(&history);
        let cancel = Event::Cancelled { by: "key1".into() };
        assert!(!recordable(Some(&failed), &cancel));
    }

    #[test]
    fn create_queues_a_new_run() {
        let d = given(&[], Command::Create(created())).expect("accepted");
        assert_eq!(d.events, vec![Event::Created(created())]);
        assert_eq!(d.effects, vec![Effect::Enqueue]);
        let run = state_after(&d.events);
        assert_eq!(run.state, RunState::Queued);
        assert_eq!(run.next_seq, 1);
    }

    #[test]
    fn create_twice_is_rejected() {
        assert_eq!(
            given(&[Event::Created(created())], Command::Create(created())),
            Err(Rejection::AlreadyExists)
        );
    }

    #[test]
    fn commands_on_missing_runs_are_not_found() {
        for cmd in [
            Command::Start,
            Command::Cancel { by: "k".into() },
            Command::Followup {
                message: "hi".into(),
                mode: FollowupMode::Normal,
                by: "k".into(),
            },
        ] {
            assert_eq!(given(&[], cmd), Err(Rejection::NotFound));
        }
    }

    #[test]
    fn start_launches_the_first_execution_with_queued_followups() {
        let history = [
            Event::Created(created()),
            Event::FollowupReceived {
                message: "also add tests".into(),
                mode: FollowupMode::Plan,
                by: "k".into(),
            },
        ];
        let d = given(&history, Command::Start).expect("accepted");
        assert_eq!(d.events, vec![Event::Started { execution: 1 }]);
        assert_eq!(
            d.effects,
            vec![Effect::Launch {
                execution: 1,
                followups: vec![Followup {
                    message: "also add tests".into(),
                    mode: FollowupMode::Plan
                }],
                resumed_by: None,
            }]
        );
        let mut all = history.to_vec();
        all.extend(d.events);
        let run = state_after(&all);
        assert_eq!(run.state, RunState::InProgress);
        assert!(run.pending_followups.is_empty());
        assert_eq!(run.started_at, Some(Timestamp(20)));
    }

    #[test]
    fn start_is_refused_unless_queued() {
        let history = [Event::Created(created()), Event::Started { execution: 1 }];
        assert_eq!(given(&history, Command::Start), Err(Rejection::NotQueued));
    }

    #[test]
    fn finish_records_success_and_run_time() {
        let history = [Event::Created(created()), Event::Started { execution: 1 }];
        let d = given(
            &history,
            Command::Finish {
                execution: 1,
                outcome: Ok(()),
            },
        )
        .expect("accepted");
        assert_eq!(d.events, vec![Event::Succeeded { execution: 1 }]);
        let mut all = history.to_vec();
        all.extend(d.events);
        let run = state_after(&all);
        assert_eq!(run.state, RunState::Succeeded);
        assert_eq!(run.run_time_ms, 10);
    }

    #[test]
    fn failure_carries_its_status_message() {
        let history = [Event::Created(created()), Event::Started { execution: 1 }];
        let d = given(
            &history,
            Command::Finish {
                execution: 1,
                outcome: Err(failure()),
            },
        )
        .expect("accepted");
        let mut all = history.to_vec();
        all.extend(d.events);
        let run = state_after(&all);
        assert_eq!(run.state, RunState::Failed);
        assert_eq!(run.status_message, Some(failure()));
    }

    #[test]
    fn finish_of_a_stale_execution_is_refused() {
        let cancelled = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ];
        let finish = Command::Finish {
            execution: 1,
            outcome: Ok(()),
        };
        assert_eq!(
            given(&cancelled, finish.clone()),
            Err(Rejection::StaleExecution(1))
        );
        let wrong = [Event::Created(created()), Event::Started { execution: 2 }];
        assert_eq!(given(&wrong, finish), Err(Rejection::StaleExecution(1)));
    }

    #[test]
    fn cancel_queued_dequeues_and_in_progress_stops() {
        let queued = [Event::Created(created())];
        let d = given(&queued, Command::Cancel { by: "k".into() }).expect("accepted");
        assert_eq!(d.events, vec![Event::Cancelled { by: "k".into() }]);
        assert_eq!(d.effects, vec![Effect::Dequeue]);

        let running = [Event::Created(created()), Event::Started { execution: 1 }];
        let d = given(&running, Command::Cancel { by: "k".into() }).expect("accepted");
        assert_eq!(d.effects, vec![Effect::Stop { execution: 1 }]);
        let mut all = running.to_vec();
        all.extend(d.events);
        assert_eq!(state_after(&all).state, RunState::Cancelled);
    }

    #[test]
    fn cancel_of_a_finished_run_is_refused() {
        for end in [
            Event::Succeeded { execution: 1 },
            Event::Failed {
                execution: 1,
                status: failure(),
            },
            Event::Cancelled { by: "k".into() },
        ] {
            let history = [
                Event::Created(created()),
                Event::Started { execution: 1 },
                end,
            ];
            let state = state_after(&history).state;
            assert_eq!(
                given(&history, Command::Cancel { by: "k".into() }),
                Err(Rejection::AlreadyTerminal(state))
            );
        }
    }

    #[test]
    fn followup_while_in_progress_is_delivered() {
        let running = [Event::Created(created()), Event::Started { execution: 1 }];
        let d = given(
            &running,
            Command::Followup {
                message: "more".into(),
                mode: FollowupMode::Normal,
                by: "k".into(),
            },
        )
        .expect("accepted");
        assert_eq!(
            d.effects,
            vec![Effect::Deliver(Followup {
                message: "more".into(),
                mode: FollowupMode::Normal
            })]
        );
    }

    #[test]
    fn followup_on_a_finished_run_resumes_it_as_a_new_execution() {
        let done = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            Event::Failed {
                execution: 1,
                status: failure(),
            },
        ];
        let followup = Event::FollowupReceived {
            message: "try again".into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        };
        let d = given(
            &done,
            Command::Followup {
                message: "try again".into(),
                mode: FollowupMode::Normal,
                by: "k".into(),
            },
        )
        .expect("accepted");
        assert_eq!(d.events, vec![followup.clone()]);
        assert_eq!(d.effects, vec![Effect::Enqueue]);
        let mut all = done.to_vec();
        all.push(followup);
        let run = state_after(&all);
        assert_eq!(run.state, RunState::Queued);
        assert_eq!(run.status_message, None);
        let d = decide(Some(&run), Command::Start).expect("accepted");
        assert_eq!(d.events, vec![Event::Started { execution: 2 }]);
        assert!(matches!(
            &d.effects[..],
            [Effect::Launch { execution: 2, resumed_by: Some(f), .. }] if f.message == "try again"
        ));
    }

    #[test]
    fn empty_followups_are_refused() {
        assert_eq!(
            given(
                &[Event::Created(created())],
                Command::Followup {
                    message: String::new(),
                    mode: FollowupMode::Normal,
                    by: "k".into()
                }
            ),
            Err(Rejection::EmptyMessage)
        );
    }

    #[test]
    fn followups_waiting_for_a_queued_run_are_bounded() {
        let mut history = vec![Event::Created(created())];
        history.extend((0..MAX_PENDING_FOLLOWUPS).map(|i| Event::FollowupReceived {
            message: format!("note {i}"),
            mode: FollowupMode::Normal,
            by: "k".into(),
        }));
        let more = Command::Followup {
            message: "one more".into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        };
        assert_eq!(given(&history, more), Err(Rejection::TooManyPending));
    }

    fn usage(input: u64, nano_usd: Option<u64>, cpu_ms: Option<u64>) -> ExecutionUsage {
        use crate::domain::events::{CostSource, InferenceCost, Tokens};
        ExecutionUsage {
            tokens: Some(Tokens {
                input,
                cached_input: 0,
                output: 1,
            }),
            model: Some("m".into()),
            inference: nano_usd.map(|nano_usd| InferenceCost {
                nano_usd,
                source: CostSource::Prices,
            }),
            cpu_ms,
            compute_nano_usd: cpu_ms.map(|ms| ms * 10),
        }
    }

    #[test]
    fn usage_is_recorded_once_for_the_latest_execution_and_summed() {
        let running = [Event::Created(created()), Event::Started { execution: 1 }];
        let record = |execution, u: ExecutionUsage| Command::RecordUsage {
            execution,
            usage: u,
        };
        let d = given(&running, record(1, usage(10, Some(5), None))).expect("accepted");
        assert_eq!(d.effects, vec![]);
        let mut all = running.to_vec();
        all.extend(d.events);
        assert_eq!(
            given(&all, record(1, usage(1, None, None))),
            Err(Rejection::StaleExecution(1)),
            "once per execution"
        );
        assert_eq!(
            given(&all, record(2, usage(1, None, None))),
            Err(Rejection::StaleExecution(2)),
            "not an execution that never started"
        );
        all.push(Event::Succeeded { execution: 1 });
        all.push(Event::FollowupReceived {
            message: "more".into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        });
        all.push(Event::Started { execution: 2 });
        assert_eq!(
            given(&all, record(1, usage(1, None, None))),
            Err(Rejection::StaleExecution(1)),
            "an earlier execution is stale"
        );
        let d = given(&all, record(2, usage(20, None, Some(7)))).expect("accepted");
        all.extend(d.events);
        let run = state_after(&all);
        assert_eq!(
            run.usage,
            RunUsage {
                inference_nano_usd: Some(5),
                compute_nano_usd: Some(70),
                input_tokens: 30,
                output_tokens: 2,
                cpu_ms: 7,
                recorded: 2,
            }
        );
        // The state is not moved: recording usage changes only the sums.
        assert_eq!(run.state, RunState::InProgress);
        for (i, event) in all.iter().enumerate() {
            let before = (i > 0).then(|| state_after(&all[..i]));
            assert!(recordable(before.as_ref(), event), "event {i}");
        }
    }

    #[test]
    fn a_cancelled_execution_still_records_its_usage() {
        let cancelled = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ];
        let d = given(
            &cancelled,
            Command::RecordUsage {
                execution: 1,
                usage: usage(1, None, Some(3)),
            },
        )
        .expect("accepted");
        let mut all = cancelled.to_vec();
        all.extend(d.events);
        let run = state_after(&all);
        assert_eq!(run.state, RunState::Cancelled);
        assert_eq!(run.usage.cpu_ms, 3);
        assert_eq!(run.usage.inference_nano_usd, None, "unknown stays unknown");
    }

    #[test]
    fn usage_sums_saturate() {
        let mut sums = RunUsage::default();
        sums.add(1, &usage(u64::MAX, Some(u64::MAX), Some(u64::MAX / 10)));
        sums.add(2, &usage(u64::MAX, Some(u64::MAX), Some(u64::MAX / 10)));
        assert_eq!(sums.input_tokens, u64::MAX);
        assert_eq!(sums.inference_nano_usd, Some(u64::MAX));
    }

    #[test]
    fn evolve_ignores_events_that_do_not_apply() {
        assert_eq!(
            evolve(None, ID, &Event::Started { execution: 1 }, Timestamp(1)),
            None
        );
        let run = state_after(&[Event::Created(created())]);
        let again = evolve(
            Some(run.clone()),
            ID,
            &Event::Created(created()),
            Timestamp(5),
        )
        .expect("still exists");
        assert_eq!(again.state, run.state);
        assert_eq!(again.title, run.title);
    }

    fn received(message: &str) -> Event {
        Event::FollowupReceived {
            message: message.into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        }
    }

    fn followup(message: &str) -> Followup {
        Followup {
            message: message.into(),
            mode: FollowupMode::Normal,
        }
    }

    #[test]
    fn an_execution_owes_the_followups_handed_at_its_start_and_sent_while_it_runs() {
        // Given a follow-up sent while the run was queued, and one while it ran,
        let history = [
            Event::Created(created()),
            received("while queued"),
            Event::Started { execution: 1 },
            received("while running"),
        ];
        let run = state_after(&history);
        // then both are owed to execution 1, oldest first,
        assert_eq!(
            run.owed,
            vec![followup("while queued"), followup("while running")]
        );
        assert!(run.pending_followups.is_empty());
        // and when it takes one, the other is still owed.
        let d = given(
            &history,
            Command::Delivered {
                execution: 1,
                count: 1,
            },
        )
        .expect("accepted");
        assert_eq!(
            d.events,
            vec![Event::FollowupsDelivered {
                execution: 1,
                count: 1
            }]
        );
        let mut all = history.to_vec();
        all.extend(d.events);
        assert_eq!(state_after(&all).owed, vec![followup("while running")]);
    }

    #[test]
    fn an_execution_cannot_take_more_than_it_is_owed_nor_report_for_another() {
        let history = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            received("one"),
        ];
        // More than owed is recorded as what was owed.
        let d = given(
            &history,
            Command::Delivered {
                execution: 1,
                count: 5,
            },
        )
        .expect("accepted");
        assert_eq!(
            d.events,
            vec![Event::FollowupsDelivered {
                execution: 1,
                count: 1
            }]
        );
        let mut all = history.to_vec();
        all.extend(d.events);
        assert_eq!(
            given(
                &all,
                Command::Delivered {
                    execution: 1,
                    count: 1
                }
            ),
            Err(Rejection::NothingOwed(1))
        );
        assert_eq!(
            given(
                &history,
                Command::Delivered {
                    execution: 2,
                    count: 1
                }
            ),
            Err(Rejection::StaleExecution(2))
        );
    }

    #[test]
    fn an_execution_that_ends_owing_followups_requeues_the_run_for_them() {
        for outcome in [Ok(()), Err(failure())] {
            // Given an execution that took the first of three follow-ups,
            let history = [
                Event::Created(created()),
                Event::Started { execution: 1 },
                received("a"),
                received("b"),
                received("c"),
                Event::FollowupsDelivered {
                    execution: 1,
                    count: 1,
                },
            ];
            // when it ends, however it ends,
            let d = given(
                &history,
                Command::Finish {
                    execution: 1,
                    outcome: outcome.clone(),
                },
            )
            .expect("accepted");
            // then the run is queued again: "b" resumes it and "c" waits for that execution.
            assert_eq!(d.events.len(), 2);
            assert_eq!(d.events[1], Event::Requeued { execution: 1 });
            assert_eq!(d.effects, vec![Effect::Enqueue]);
            let mut all = history.to_vec();
            all.extend(d.events.clone());
            let run = state_after(&all);
            assert_eq!(run.state, RunState::Queued);
            assert_eq!(run.resumed_by, Some(followup("b")));
            assert_eq!(run.pending_followups, vec![followup("c")]);
            assert!(run.owed.is_empty());
            // Both events are what the service records.
            let before = state_after(&history);
            assert!(recordable(Some(&before), &d.events[0]));
            let after_end = state_after(&all[..all.len() - 1]);
            assert!(recordable(Some(&after_end), &d.events[1]));
            // The next execution is handed "c" and owes it.
            let start = decide(Some(&run), Command::Start).expect("start");
            assert_eq!(
                start.effects,
                vec![Effect::Launch {
                    execution: 2,
                    followups: vec![followup("c")],
                    resumed_by: Some(followup("b")),
                }]
            );
        }
    }

    #[test]
    fn an_execution_that_took_everything_ends_the_run() {
        let history = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::FollowupsDelivered {
                execution: 1,
                count: 1,
            },
        ];
        let d = given(
            &history,
            Command::Finish {
                execution: 1,
                outcome: Ok(()),
            },
        )
        .expect("accepted");
        assert_eq!(d.events, vec![Event::Succeeded { execution: 1 }]);
        assert!(d.effects.is_empty());
        // A Requeued the service would not write is not recordable.
        let mut all = history.to_vec();
        all.extend(d.events);
        assert!(!recordable(
            Some(&state_after(&all)),
            &Event::Requeued { execution: 1 }
        ));
    }

    #[test]
    fn a_cancel_drops_what_is_owed() {
        let history = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::Cancelled { by: "k".into() },
        ];
        let run = state_after(&history);
        assert!(run.owed.is_empty());
        assert_eq!(run.state, RunState::Cancelled);
    }

    #[test]
    fn followups_waiting_for_a_running_agent_are_bounded() {
        let mut history = vec![Event::Created(created()), Event::Started { execution: 1 }];
        history.extend((0..MAX_PENDING_FOLLOWUPS).map(|i| received(&format!("note {i}"))));
        let more = Command::Followup {
            message: "one more".into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        };
        assert_eq!(
            given(&history, more.clone()),
            Err(Rejection::TooManyPending)
        );
        // Once the agent takes them, there is room again.
        history.push(Event::FollowupsDelivered {
            execution: 1,
            count: 50,
        });
        assert!(given(&history, more).is_ok());
    }

    /// Logs written before follow-ups were tracked have in-progress follow-ups without
    /// `FollowupsDelivered`; they fold to the same states as before.
    #[test]
    fn a_log_without_deliveries_folds_as_it_always_did() {
        let history = [
            Event::Created(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::Succeeded { execution: 1 },
        ];
        let run = state_after(&history);
        assert_eq!(run.state, RunState::Succeeded);
        assert_eq!(run.resumed_by, None);
    }
}
