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
        // Only the execution in progress, and once: it describes what that execution's agent
        // starts with, so a second or a late one would describe something else.
        Command::RecordProvenance {
            execution,
            provenance,
        } => {
            let recorded = run.provenance.as_ref().map_or(0, |(e, _)| *e);
            if run.state != RunState::InProgress
                || execution != run.executions
                || recorded >= execution
            {
                return Err(Rejection::StaleExecution(execution));
            }
            decision(
                vec![Event::Provenance {
                    execution,
                    provenance,
                }],
                vec![],
            )
        }
        // Only the execution in progress, before its end: the shell computes them once, after
        // the agent exits; a cancel that came first ended the execution, and they are dropped.
        Command::RecordChanges { execution, changes } => {
            if run.state != RunState::InProgress || execution != run.executions {
                return Err(Rejection::StaleExecution(execution));
            }
            decision(vec![Event::Changes { execution, changes }], vec![])
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
            derived,
        } => {
            let mut events = vec![Event::Admitted(admitted)];
            if let Some(derived) = derived {
                events.push(Event::Derived(derived));
            }
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
        Event::Provenance {
            execution,
            provenance,
        } => Command::RecordProvenance {
            execution,
            provenance,
        },
        Event::Changes { execution, changes } => Command::RecordChanges { execution, changes },
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
                    r.next_seq
                        == 1 + u64::from(r.schedule.is_some()) + u64::from(r.derived.is_some())
                        && r.attachments.is_empty()
                });
        }
        // The second event of a create that made the run from another.
        Event::Derived(_) => {
            return run.is_some_and(|r| {
                r.next_seq == 1
                    && r.derived.is_none()
                    && r.schedule.is_none()
                    && r.attachments.is_empty()
            });
        }
        // The second event of a create a schedule's firing made.
        Event::Scheduled { .. } => {
            return run.is_some_and(|r| {
                r.next_seq == 1
                    && r.schedule.is_none()
                    && r.derived.is_none()
                    && r.attachments.is_empty()
            });
        }
    };
    // An event is recordable as the first event of its command's decision (a `Finish` may
    // add a `Requeued`, checked on its own above).
    decide(run, command).is_ok_and(|d| d.events.first() == Some(event))
}

/// The run state machine's scenarios: commands decided against the state a history folds to,
/// the events and effects they decide, and the state those fold to. They exercise `decide`,
/// `evolve` and `recordable` together, as the actor uses them.
#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::events::{
        AgentConfig, Artifact, Attachment, Creator, CreatorKind, Event, ExecutionUsage,
        FollowupMode, Placement, RunAdmitted, RunCreated, RunSchedule, SourceType, StatusMessage,
    };
    use crate::ids::{RunId, Timestamp};
    use crate::run::{evolve, fold, RunUsage};

    /// Given / when / then over `decide` and `fold`, as cqrs-es's test framework reads:
    /// `given(history).when(command).then_events(..)`. The n-th event of a history is
    /// recorded at `Timestamp(n * 10)`, so run times in the assertions are multiples of 10.
    mod scenario {
        use super::*;

        const ID: RunId = RunId(42);

        /// The run `history` folds to, each event stamped 10 ms after the one before.
        fn fold_history(history: &[Event]) -> Option<Run> {
            fold(
                ID,
                history
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e, Timestamp(i as u64 * 10))),
            )
        }

        /// A run's recorded history: the "given" of a scenario.
        #[derive(Clone)]
        pub struct Given {
            history: Vec<Event>,
        }

        /// A run that has these events.
        pub fn given(history: impl IntoIterator<Item = Event>) -> Given {
            Given {
                history: history.into_iter().collect(),
            }
        }

        /// A run that does not exist yet.
        pub fn given_no_run() -> Given {
            given(Vec::new())
        }

        impl Given {
            /// The same history followed by `events`.
            pub fn and(mut self, events: impl IntoIterator<Item = Event>) -> Self {
                self.history.extend(events);
                self
            }

            /// The command decided against the state the history folds to.
            pub fn when(self, command: Command) -> When {
                let outcome = decide(fold_history(&self.history).as_ref(), command);
                When {
                    history: self.history,
                    outcome,
                }
            }

            /// The state the history folds to passes `check`.
            #[track_caller]
            pub fn then_state(self, check: impl FnOnce(&Run)) -> Self {
                check(&fold_history(&self.history).expect("the history creates the run"));
                self
            }

            /// The history folds to no run at all.
            #[track_caller]
            pub fn then_no_run(self) -> Self {
                assert_eq!(fold_history(&self.history), None);
                self
            }

            /// Every event of the history is one the service may record where it stands.
            #[track_caller]
            pub fn then_recordable(self) -> Self {
                for (i, event) in self.history.iter().enumerate() {
                    let before = fold_history(&self.history[..i]);
                    assert!(recordable(before.as_ref(), event), "event {i}");
                }
                self
            }

            /// `event` is not one the service would record after this history.
            #[track_caller]
            pub fn then_refuses_to_record(self, event: Event) -> Self {
                let run = fold_history(&self.history);
                assert!(!recordable(run.as_ref(), &event), "{event:?}");
                self
            }
        }

        /// A decided command: the "when" of a scenario, checked by its `then_*` steps.
        pub struct When {
            history: Vec<Event>,
            outcome: Result<Decision, Rejection>,
        }

        impl When {
            #[track_caller]
            fn decision(&self) -> &Decision {
                match &self.outcome {
                    Ok(decision) => decision,
                    Err(rejection) => panic!("the command was rejected: {rejection:?}"),
                }
            }

            /// The history with the decided events appended.
            fn after(&self) -> Vec<Event> {
                let mut all = self.history.clone();
                all.extend(self.decision().events.iter().cloned());
                all
            }

            /// The command is accepted (whatever it decides).
            #[track_caller]
            pub fn then_accepted(self) -> Self {
                self.decision();
                self
            }

            /// The command is accepted and records exactly `events`.
            #[track_caller]
            pub fn then_events(self, events: impl IntoIterator<Item = Event>) -> Self {
                let expected: Vec<Event> = events.into_iter().collect();
                assert_eq!(self.decision().events, expected);
                self
            }

            /// The command is accepted and asks the shell for exactly `effects`.
            #[track_caller]
            pub fn then_effects(self, effects: impl IntoIterator<Item = Effect>) -> Self {
                let expected: Vec<Effect> = effects.into_iter().collect();
                assert_eq!(self.decision().effects, expected);
                self
            }

            /// The command is refused with `rejection`.
            #[track_caller]
            pub fn then_rejects(self, rejection: Rejection) {
                assert_eq!(self.outcome, Err(rejection));
            }

            /// The command is refused with `rejection`, for the reason `why`.
            #[track_caller]
            pub fn then_rejects_because(self, rejection: Rejection, why: &str) {
                assert_eq!(self.outcome, Err(rejection), "{why}");
            }

            /// The state after the decided events passes `check`.
            #[track_caller]
            pub fn then_state(self, check: impl FnOnce(&Run)) -> Self {
                check(&fold_history(&self.after()).expect("the history creates the run"));
                self
            }

            /// Each decided event is one the service may record where it lands.
            #[track_caller]
            pub fn then_recordable(self) -> Self {
                let all = self.after();
                for i in self.history.len()..all.len() {
                    let before = fold_history(&all[..i]);
                    assert!(recordable(before.as_ref(), &all[i]), "event {i}");
                }
                self
            }

            /// A new scenario whose history holds the decided events: the next "given".
            #[track_caller]
            pub fn and_then(self) -> Given {
                given(self.after())
            }
        }
    }

    use scenario::{given, given_no_run};

    fn created() -> RunAdmitted {
        RunAdmitted {
            created: legacy(),
            team: "infra".into(),
            sealed: None,
        }
    }

    /// What a run from before teams started with.
    fn legacy() -> RunCreated {
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

    fn failure() -> StatusMessage {
        StatusMessage {
            message: "exit code 1".into(),
            error_code: None,
            retryable: None,
        }
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

    fn send(message: &str) -> Command {
        Command::Followup {
            message: message.into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        }
    }

    fn cancel() -> Command {
        Command::Cancel { by: "k".into() }
    }

    fn usage(input: u64, nano_usd: Option<u64>, cpu_ms: Option<u64>) -> ExecutionUsage {
        use crate::events::{CostSource, InferenceCost, Tokens};
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

    fn record(execution: u32, usage: ExecutionUsage) -> Command {
        Command::RecordUsage { execution, usage }
    }

    #[test]
    fn recordable_accepts_what_decide_records_and_nothing_else() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Failed {
                execution: 1,
                status: failure(),
            },
        ])
        .then_recordable()
        // A cancel of a finished run is not what the service writes.
        .then_refuses_to_record(Event::Cancelled { by: "key1".into() });
        // A second Created, a skipped execution number, and a finish of a run never started
        // are not what the service writes.
        given([Event::Admitted(created())])
            .then_refuses_to_record(Event::Admitted(created()))
            .then_refuses_to_record(Event::Started { execution: 2 })
            .then_refuses_to_record(Event::Succeeded { execution: 0 });
        given_no_run().then_refuses_to_record(Event::Started { execution: 1 });
    }

    fn provenance() -> crate::ExecutionProvenance {
        crate::ExecutionProvenance {
            repositories: vec![crate::RepositoryCommit {
                url: "file:///r.git".into(),
                path: ".".into(),
                reference: None,
                commit: "a".repeat(40),
            }],
            environment: crate::EnvironmentDefinition {
                id: "e".into(),
                sha256: "b".repeat(64),
                definition: "{}".into(),
            },
            harness: "command".into(),
            agent_cli: None,
            runledger_version: "0.1.0".into(),
            sandbox: "none".into(),
            network: true,
            limits: crate::ProvenanceLimits::default(),
            model_id: None,
        }
    }

    #[test]
    fn provenance_is_recorded_once_by_the_execution_in_progress() {
        let record = |execution| Command::RecordProvenance {
            execution,
            provenance: provenance(),
        };
        let recorded = Event::Provenance {
            execution: 1,
            provenance: provenance(),
        };
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(record(1))
            .then_events([recorded.clone()])
            .then_state(|run| assert_eq!(run.provenance, Some((1, provenance()))));
        // Once, and never for another execution or a run not in progress.
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            recorded.clone(),
        ])
        .when(record(1))
        .then_rejects(Rejection::StaleExecution(1));
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(record(2))
            .then_rejects(Rejection::StaleExecution(2));
        given([Event::Admitted(created())])
            .when(record(0))
            .then_rejects(Rejection::StaleExecution(0));
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .then_recordable()
            .then_refuses_to_record(Event::Provenance {
                execution: 2,
                provenance: provenance(),
            });
    }

    #[test]
    fn changes_are_recorded_by_the_execution_in_progress_only() {
        let changes = || crate::changes::ExecutionChanges {
            repositories: vec![],
            diff: None,
            cut: false,
        };
        let record = |execution| Command::RecordChanges {
            execution,
            changes: changes(),
        };
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(record(1))
            .then_events([Event::Changes {
                execution: 1,
                changes: changes(),
            }]);
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(record(2))
            .then_rejects(Rejection::StaleExecution(2));
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Succeeded { execution: 1 },
        ])
        .when(record(1))
        .then_rejects(Rejection::StaleExecution(1));
    }

    #[test]
    fn create_queues_a_new_run() {
        given_no_run()
            .when(create(created()))
            .then_events([Event::Admitted(created())])
            .then_effects([Effect::Enqueue])
            .then_state(|run| {
                assert_eq!(run.state, RunState::Queued);
                assert_eq!(run.next_seq, 1);
                assert_eq!(run.team, "infra");
            });
    }

    #[test]
    fn a_run_from_before_teams_belongs_to_default_and_works_on() {
        given([Event::Created(legacy()), Event::Started { execution: 1 }])
            .then_state(|run| {
                assert_eq!(run.team, crate::DEFAULT_TEAM);
                assert_eq!(run.sealed, None);
                assert_eq!(run.state, RunState::InProgress);
            })
            .then_recordable()
            // A legacy creation is read, never written again.
            .then_refuses_to_record(Event::Created(legacy()));
    }

    #[test]
    fn create_twice_is_rejected() {
        given([Event::Admitted(created())])
            .when(create(created()))
            .then_rejects(Rejection::AlreadyExists);
    }

    fn create(admitted: RunAdmitted) -> Command {
        Command::create(admitted, Vec::new(), None)
    }

    fn content(byte: u8, mime_type: &str) -> crate::Content {
        crate::Content {
            sha256: [byte; 32],
            size: u64::from(byte) * 100,
            mime_type: mime_type.into(),
        }
    }

    fn attachment(name: &str) -> Attachment {
        Attachment {
            file_name: name.into(),
            content: content(7, "text/plain"),
        }
    }

    fn pull_request(uid: &str) -> Artifact {
        Artifact {
            uid: uid.into(),
            kind: crate::ArtifactKind::PullRequest {
                url: "https://git.example.com/acme/app/pull/7".into(),
                branch: "fix-auth".into(),
                title: Some("Fix auth".into()),
            },
        }
    }

    #[test]
    fn a_create_with_attachments_records_them_with_the_admission() {
        let files = vec![attachment("spec.md"), attachment("logo.png")];
        given_no_run()
            .when(Command::create(created(), files.clone(), None))
            .then_events([
                Event::Admitted(created()),
                Event::Attached {
                    attachments: files.clone(),
                },
            ])
            .then_effects([Effect::Enqueue]);
        given([
            Event::Admitted(created()),
            Event::Attached {
                attachments: files.clone(),
            },
        ])
        .then_state(|run| {
            assert_eq!(run.attachments, files);
            assert_eq!(run.state, RunState::Queued);
        })
        .then_recordable()
        // Only as the second event of the creation, and only once.
        .then_refuses_to_record(Event::Attached {
            attachments: vec![attachment("late.txt")],
        });
        given([Event::Admitted(created())]).then_refuses_to_record(Event::Attached {
            attachments: Vec::new(),
        });
    }

    fn nightly() -> RunSchedule {
        RunSchedule {
            schedule_id: RunId(7),
            schedule_name: "nightly".into(),
            cron_schedule: "0 3 * * *".into(),
            due: Timestamp(86_400_000),
        }
    }

    fn scheduled(admitted: RunAdmitted) -> RunAdmitted {
        let mut admitted = admitted;
        admitted.created.source = SourceType::ScheduledAgent;
        admitted
    }

    #[test]
    fn a_scheduled_create_records_its_schedule_with_the_admission() {
        given_no_run()
            .when(Command::create(
                scheduled(created()),
                Vec::new(),
                Some(nightly()),
            ))
            .then_events([
                Event::Admitted(scheduled(created())),
                Event::Scheduled {
                    schedule: nightly(),
                },
            ])
            .then_effects([Effect::Enqueue])
            .then_state(|run| {
                assert_eq!(run.schedule, Some(nightly()));
                assert_eq!(run.source, SourceType::ScheduledAgent);
                assert_eq!(run.state, RunState::Queued);
                assert_eq!(run.next_seq, 2);
            })
            .then_recordable()
            .and_then()
            // Only as the second event of the creation, and only once.
            .then_refuses_to_record(Event::Scheduled {
                schedule: nightly(),
            })
            .when(create(created()))
            .then_rejects(Rejection::AlreadyExists);
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .then_refuses_to_record(Event::Scheduled {
                schedule: nightly(),
            });
        given_no_run().then_refuses_to_record(Event::Scheduled {
            schedule: nightly(),
        });
    }

    #[test]
    fn a_scheduled_create_with_attachments_records_the_schedule_first() {
        let files = vec![attachment("spec.md")];
        given_no_run()
            .when(Command::create(
                scheduled(created()),
                files.clone(),
                Some(nightly()),
            ))
            .then_events([
                Event::Admitted(scheduled(created())),
                Event::Scheduled {
                    schedule: nightly(),
                },
                Event::Attached {
                    attachments: files.clone(),
                },
            ])
            .then_state(|run| {
                assert_eq!(run.schedule, Some(nightly()));
                assert_eq!(run.attachments, files);
            })
            .then_recordable()
            .and_then()
            .then_refuses_to_record(Event::Scheduled {
                schedule: nightly(),
            });
        // The other order is not what the service writes, and folds without the schedule.
        given([
            Event::Admitted(scheduled(created())),
            Event::Attached {
                attachments: files.clone(),
            },
        ])
        .then_refuses_to_record(Event::Scheduled {
            schedule: nightly(),
        });
        given([
            Event::Admitted(scheduled(created())),
            Event::Attached {
                attachments: files.clone(),
            },
            Event::Scheduled {
                schedule: nightly(),
            },
        ])
        .then_state(|run| {
            assert_eq!(run.schedule, None);
            assert_eq!(run.attachments, files);
        });
    }

    fn fork_of_seven() -> crate::events::RunDerivation {
        crate::events::RunDerivation {
            from: RunId(7).to_string(),
            kind: crate::events::Derivation::Fork {
                after_execution: 1,
                message: "keep the cache".into(),
            },
        }
    }

    #[test]
    fn a_derived_create_records_where_it_came_from_before_its_attachments() {
        let files = vec![attachment("spec.md")];
        given_no_run()
            .when(Command::derive(created(), files.clone(), fork_of_seven()))
            .then_events([
                Event::Admitted(created()),
                Event::Derived(fork_of_seven()),
                Event::Attached {
                    attachments: files.clone(),
                },
            ])
            .then_effects([Effect::Enqueue])
            .then_state(|run| {
                assert_eq!(run.derived, Some(fork_of_seven()));
                // The fork's message is what resumes the original's session.
                assert_eq!(
                    run.resumed_by.as_ref().map(|f| f.message.as_str()),
                    Some("keep the cache")
                );
                assert_eq!(run.attachments, files);
                assert_eq!(run.schedule, None);
                assert_eq!(run.state, RunState::Queued);
                assert_eq!(run.next_seq, 3);
            })
            .then_recordable()
            .and_then()
            // Only as the second event of the creation, and only once.
            .then_refuses_to_record(Event::Derived(fork_of_seven()));
        given_no_run().then_refuses_to_record(Event::Derived(fork_of_seven()));
        // Recorded late (after a start, or after the attachments), it changes nothing.
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Derived(fork_of_seven()),
        ])
        .then_state(|run| assert_eq!(run.derived, None));
        given([
            Event::Admitted(created()),
            Event::Attached {
                attachments: files.clone(),
            },
        ])
        .then_refuses_to_record(Event::Derived(fork_of_seven()));
    }

    #[test]
    fn a_forks_message_resumes_every_execution_until_one_ends() {
        let message = Followup {
            message: "keep the cache".into(),
            mode: FollowupMode::Normal,
        };
        given([Event::Admitted(created()), Event::Derived(fork_of_seven())])
            .when(Command::Start { placement: None })
            .then_effects([Effect::Launch {
                execution: 1,
                followups: Vec::new(),
                resumed_by: Some(message.clone()),
            }]);
        // Execution 1 lost with its node: its successor starts as it did, with the message.
        given([
            Event::Admitted(created()),
            Event::Derived(fork_of_seven()),
            Event::Started { execution: 1 },
            Event::Lost {
                execution: 1,
                status: StatusMessage {
                    message: "node lost".into(),
                    error_code: None,
                    retryable: Some(true),
                },
            },
        ])
        .when(Command::Start { placement: None })
        .then_effects([Effect::Launch {
            execution: 2,
            followups: Vec::new(),
            resumed_by: Some(message),
        }]);
    }

    #[test]
    fn a_schedule_recorded_late_changes_nothing() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Scheduled {
                schedule: nightly(),
            },
        ])
        .then_state(|run| {
            assert_eq!(run.schedule, None);
            assert_eq!(run.next_seq, 3);
        });
    }

    #[test]
    fn a_run_admitted_as_scheduled_without_a_schedule_works_on() {
        given_no_run()
            .when(create(scheduled(created())))
            .then_events([Event::Admitted(scheduled(created()))])
            .then_state(|run| {
                assert_eq!(run.source, SourceType::ScheduledAgent);
                assert_eq!(run.schedule, None);
            })
            .and_then()
            .when(Command::Start { placement: None })
            .then_events([Event::Started { execution: 1 }]);
    }

    #[test]
    fn attachments_recorded_after_the_start_change_nothing() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Attached {
                attachments: vec![attachment("late.txt")],
            },
        ])
        .then_state(|run| assert!(run.attachments.is_empty()));
    }

    #[test]
    fn the_execution_in_progress_reports_artifacts_in_order() {
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(Command::ReportArtifact {
                execution: 1,
                artifact: pull_request("a1"),
            })
            .then_events([Event::ArtifactReported {
                execution: 1,
                artifact: pull_request("a1"),
            }]);
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::ArtifactReported {
                execution: 1,
                artifact: pull_request("a1"),
            },
            Event::ArtifactReported {
                execution: 1,
                artifact: pull_request("a2"),
            },
            Event::Succeeded { execution: 1 },
        ])
        .then_recordable()
        .then_state(|run| {
            let uids: Vec<_> = run
                .artifacts
                .iter()
                .map(|a| a.artifact.uid.as_str())
                .collect();
            assert_eq!(uids, ["a1", "a2"]);
            assert_eq!(run.artifacts[0].at, Timestamp(20));
            assert_eq!(run.artifacts[1].execution, 1);
        });
    }

    #[test]
    fn a_stale_or_finished_execution_cannot_report_artifacts() {
        let report = |execution| Command::ReportArtifact {
            execution,
            artifact: pull_request("late"),
        };
        given([Event::Admitted(created())])
            .when(report(1))
            .then_rejects(Rejection::StaleExecution(1));
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ])
        .when(report(1))
        .then_rejects(Rejection::StaleExecution(1));
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Succeeded { execution: 1 },
            received("again"),
            Event::Started { execution: 2 },
        ])
        .when(report(1))
        .then_rejects(Rejection::StaleExecution(1));
    }

    #[test]
    fn a_run_holds_at_most_max_artifacts() {
        let mut history = vec![Event::Admitted(created()), Event::Started { execution: 1 }];
        history.extend((0..MAX_ARTIFACTS).map(|i| Event::ArtifactReported {
            execution: 1,
            artifact: pull_request(&format!("a{i}")),
        }));
        given(history)
            .when(Command::ReportArtifact {
                execution: 1,
                artifact: pull_request("one-too-many"),
            })
            .then_rejects(Rejection::TooManyArtifacts);
    }

    #[test]
    fn commands_on_missing_runs_are_not_found() {
        for command in [Command::Start { placement: None }, cancel(), send("hi")] {
            given_no_run()
                .when(command)
                .then_rejects(Rejection::NotFound);
        }
    }

    #[test]
    fn start_launches_the_first_execution_with_queued_followups() {
        given([
            Event::Admitted(created()),
            Event::FollowupReceived {
                message: "also add tests".into(),
                mode: FollowupMode::Plan,
                by: "k".into(),
            },
        ])
        .when(Command::Start { placement: None })
        .then_events([Event::Started { execution: 1 }])
        .then_effects([Effect::Launch {
            execution: 1,
            followups: vec![Followup {
                message: "also add tests".into(),
                mode: FollowupMode::Plan,
            }],
            resumed_by: None,
        }])
        .then_state(|run| {
            assert_eq!(run.state, RunState::InProgress);
            assert!(run.pending_followups.is_empty());
            assert_eq!(run.started_at, Some(Timestamp(20)));
        });
    }

    #[test]
    fn start_is_refused_unless_queued() {
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(Command::Start { placement: None })
            .then_rejects(Rejection::NotQueued);
    }

    #[test]
    fn finish_records_success_and_run_time() {
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(Command::Finish {
                execution: 1,
                outcome: Ok(()),
            })
            .then_events([Event::Succeeded { execution: 1 }])
            .then_state(|run| {
                assert_eq!(run.state, RunState::Succeeded);
                assert_eq!(run.run_time_ms, 10);
            });
    }

    #[test]
    fn failure_carries_its_status_message() {
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(Command::Finish {
                execution: 1,
                outcome: Err(failure()),
            })
            .then_state(|run| {
                assert_eq!(run.state, RunState::Failed);
                assert_eq!(run.status_message, Some(failure()));
            });
    }

    #[test]
    fn finish_of_a_stale_execution_is_refused() {
        let finish = Command::Finish {
            execution: 1,
            outcome: Ok(()),
        };
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ])
        .when(finish.clone())
        .then_rejects(Rejection::StaleExecution(1));
        given([Event::Admitted(created()), Event::Started { execution: 2 }])
            .when(finish)
            .then_rejects(Rejection::StaleExecution(1));
    }

    #[test]
    fn a_revoke_moves_the_session_epoch_in_every_state_and_nothing_else() {
        let revoke = || Command::RevokeSessionLink { by: "k".into() };
        let admitted = Event::Admitted(created());
        let started = Event::Started { execution: 1 };
        for history in [
            vec![admitted.clone()],
            vec![admitted.clone(), started.clone()],
            vec![
                admitted.clone(),
                started.clone(),
                Event::Succeeded { execution: 1 },
            ],
            vec![admitted.clone(), Event::Cancelled { by: "k".into() }],
        ] {
            let before = {
                let mut run = None;
                for (i, e) in history.iter().enumerate() {
                    run = evolve(run, RunId(42), e, Timestamp(i as u64 * 10));
                }
                run.expect("a run")
            };
            given(history.clone())
                .when(revoke())
                .then_events([Event::SessionLinkRevoked { by: "k".into() }])
                .then_effects([])
                .then_recordable()
                .then_state(|run| {
                    assert_eq!(run.session_epoch, 1);
                    assert_eq!(run.state, before.state);
                    assert_eq!(run.executions, before.executions);
                });
            let mut twice = history;
            twice.push(Event::SessionLinkRevoked { by: "k".into() });
            given(twice)
                .when(revoke())
                .then_state(|run| assert_eq!(run.session_epoch, 2));
        }
        given_no_run()
            .when(revoke())
            .then_rejects(Rejection::NotFound);
    }

    #[test]
    fn cancel_queued_dequeues_and_in_progress_stops() {
        given([Event::Admitted(created())])
            .when(cancel())
            .then_events([Event::Cancelled { by: "k".into() }])
            .then_effects([Effect::Dequeue]);
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(cancel())
            .then_effects([Effect::Stop { execution: 1 }])
            .then_state(|run| assert_eq!(run.state, RunState::Cancelled));
    }

    #[test]
    fn cancel_of_a_finished_run_is_refused() {
        for (end, state) in [
            (Event::Succeeded { execution: 1 }, RunState::Succeeded),
            (
                Event::Failed {
                    execution: 1,
                    status: failure(),
                },
                RunState::Failed,
            ),
            (Event::Cancelled { by: "k".into() }, RunState::Cancelled),
        ] {
            given([
                Event::Admitted(created()),
                Event::Started { execution: 1 },
                end,
            ])
            .then_state(|run| assert_eq!(run.state, state))
            .when(cancel())
            .then_rejects(Rejection::AlreadyTerminal(state));
        }
    }

    #[test]
    fn followup_while_in_progress_is_delivered() {
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(send("more"))
            .then_effects([Effect::Deliver(followup("more"))]);
    }

    #[test]
    fn followup_on_a_finished_run_resumes_it_as_a_new_execution() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Failed {
                execution: 1,
                status: failure(),
            },
        ])
        .when(send("try again"))
        .then_events([received("try again")])
        .then_effects([Effect::Enqueue])
        .then_state(|run| {
            assert_eq!(run.state, RunState::Queued);
            assert_eq!(run.status_message, None);
        })
        .and_then()
        .when(Command::Start { placement: None })
        .then_events([Event::Started { execution: 2 }])
        .then_effects([Effect::Launch {
            execution: 2,
            followups: vec![],
            resumed_by: Some(followup("try again")),
        }]);
    }

    fn slurm(job_id: u64, node: &str) -> Placement {
        Placement::Slurm {
            job_id,
            node: node.into(),
        }
    }

    fn node_failed() -> StatusMessage {
        StatusMessage {
            message: "node n2 failed".into(),
            error_code: Some("internal_error".into()),
            retryable: Some(true),
        }
    }

    #[test]
    fn a_start_with_a_placement_records_where_it_runs() {
        given([Event::Admitted(created())])
            .when(Command::Start {
                placement: Some(slurm(42, "n2")),
            })
            .then_events([Event::StartedOn {
                execution: 1,
                placement: slurm(42, "n2"),
            }])
            .then_effects([Effect::Launch {
                execution: 1,
                followups: vec![],
                resumed_by: None,
            }])
            .then_state(|run| {
                assert_eq!(run.state, RunState::InProgress);
                assert_eq!(run.executions, 1);
            });
    }

    #[test]
    fn a_lost_execution_is_queued_again_and_the_next_starts_as_it_did() {
        given([
            Event::Admitted(created()),
            Event::Succeeded { execution: 0 },
            received("first"),
            Event::StartedOn {
                execution: 1,
                placement: slurm(42, "n2"),
            },
            received("during"),
        ])
        .when(Command::Lose {
            execution: 1,
            status: node_failed(),
        })
        .then_events([Event::Lost {
            execution: 1,
            status: node_failed(),
        }])
        .then_effects([Effect::Enqueue])
        .then_state(|run| {
            assert_eq!(run.state, RunState::Queued);
            assert_eq!(run.status_message, Some(node_failed()));
            assert!(run.owed.is_empty());
        })
        .and_then()
        .when(Command::Start {
            placement: Some(slurm(43, "n1")),
        })
        .then_events([Event::StartedOn {
            execution: 2,
            placement: slurm(43, "n1"),
        }])
        .then_effects([Effect::Launch {
            execution: 2,
            followups: vec![followup("during")],
            resumed_by: Some(followup("first")),
        }]);
    }

    #[test]
    fn only_the_execution_in_progress_can_be_lost() {
        let lose = |execution| Command::Lose {
            execution,
            status: node_failed(),
        };
        given([Event::Admitted(created())])
            .when(lose(0))
            .then_rejects(Rejection::StaleExecution(0));
        given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(lose(2))
            .then_rejects(Rejection::StaleExecution(2));
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ])
        .when(lose(1))
        .then_rejects(Rejection::StaleExecution(1));
        // A late report of the lost execution is refused like any superseded one.
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Lost {
                execution: 1,
                status: node_failed(),
            },
            Event::Started { execution: 2 },
        ])
        .when(Command::Finish {
            execution: 1,
            outcome: Ok(()),
        })
        .then_rejects(Rejection::StaleExecution(1));
    }

    #[test]
    fn empty_followups_are_refused() {
        given([Event::Admitted(created())])
            .when(send(""))
            .then_rejects(Rejection::EmptyMessage);
    }

    #[test]
    fn followups_waiting_for_a_queued_run_are_bounded() {
        let waiting = (0..MAX_PENDING_FOLLOWUPS).map(|i| received(&format!("note {i}")));
        given(std::iter::once(Event::Admitted(created())).chain(waiting))
            .when(send("one more"))
            .then_rejects(Rejection::TooManyPending);
    }

    #[test]
    fn usage_is_recorded_once_for_the_latest_execution_and_summed() {
        let recorded = given([Event::Admitted(created()), Event::Started { execution: 1 }])
            .when(record(1, usage(10, Some(5), None)))
            .then_effects([])
            .and_then();
        recorded
            .clone()
            .when(record(1, usage(1, None, None)))
            .then_rejects_because(Rejection::StaleExecution(1), "once per execution");
        recorded
            .clone()
            .when(record(2, usage(1, None, None)))
            .then_rejects_because(
                Rejection::StaleExecution(2),
                "not an execution that never started",
            );
        let second = recorded.and([
            Event::Succeeded { execution: 1 },
            received("more"),
            Event::Started { execution: 2 },
        ]);
        second
            .clone()
            .when(record(1, usage(1, None, None)))
            .then_rejects_because(
                Rejection::StaleExecution(1),
                "an earlier execution is stale",
            );
        second
            .when(record(2, usage(20, None, Some(7))))
            .then_state(|run| {
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
            })
            .and_then()
            .then_recordable();
    }

    #[test]
    fn a_cancelled_execution_still_records_its_usage() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::Cancelled { by: "k".into() },
        ])
        .when(record(1, usage(1, None, Some(3))))
        .then_state(|run| {
            assert_eq!(run.state, RunState::Cancelled);
            assert_eq!(run.usage.cpu_ms, 3);
            assert_eq!(run.usage.inference_nano_usd, None, "unknown stays unknown");
        });
    }

    #[test]
    fn usage_sums_saturate() {
        let most = || usage(u64::MAX, Some(u64::MAX), Some(u64::MAX / 10));
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            Event::UsageRecorded {
                execution: 1,
                usage: most(),
            },
            Event::Succeeded { execution: 1 },
            received("more"),
            Event::Started { execution: 2 },
        ])
        .when(record(2, most()))
        .then_state(|run| {
            assert_eq!(run.usage.input_tokens, u64::MAX);
            assert_eq!(run.usage.inference_nano_usd, Some(u64::MAX));
        });
    }

    #[test]
    fn evolve_ignores_events_that_do_not_apply() {
        given([Event::Started { execution: 1 }]).then_no_run();
        let once = given([Event::Admitted(created())]);
        let (mut state, mut title) = (None, None);
        once.then_state(|run| {
            state = Some(run.state);
            title = Some(run.title.clone());
        })
        .and([Event::Admitted(created())])
        .then_state(|again| {
            assert_eq!(Some(again.state), state);
            assert_eq!(Some(&again.title), title.as_ref());
        });
    }

    #[test]
    fn an_execution_owes_the_followups_handed_at_its_start_and_sent_while_it_runs() {
        // Given a follow-up sent while the run was queued, and one while it ran,
        given([
            Event::Admitted(created()),
            received("while queued"),
            Event::Started { execution: 1 },
            received("while running"),
        ])
        // then both are owed to execution 1, oldest first,
        .then_state(|run| {
            assert_eq!(
                run.owed,
                vec![followup("while queued"), followup("while running")]
            );
            assert!(run.pending_followups.is_empty());
        })
        // and when it takes one, the other is still owed.
        .when(Command::Delivered {
            execution: 1,
            count: 1,
        })
        .then_events([Event::FollowupsDelivered {
            execution: 1,
            count: 1,
        }])
        .then_state(|run| assert_eq!(run.owed, vec![followup("while running")]));
    }

    #[test]
    fn an_execution_cannot_take_more_than_it_is_owed_nor_report_for_another() {
        let owing = given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            received("one"),
        ]);
        // More than owed is recorded as what was owed.
        owing
            .clone()
            .when(Command::Delivered {
                execution: 1,
                count: 5,
            })
            .then_events([Event::FollowupsDelivered {
                execution: 1,
                count: 1,
            }])
            .and_then()
            .when(Command::Delivered {
                execution: 1,
                count: 1,
            })
            .then_rejects(Rejection::NothingOwed(1));
        owing
            .when(Command::Delivered {
                execution: 2,
                count: 1,
            })
            .then_rejects(Rejection::StaleExecution(2));
    }

    #[test]
    fn an_execution_that_ends_owing_followups_requeues_the_run_for_them() {
        for (outcome, end) in [
            (Ok(()), Event::Succeeded { execution: 1 }),
            (
                Err(failure()),
                Event::Failed {
                    execution: 1,
                    status: failure(),
                },
            ),
        ] {
            // Given an execution that took the first of three follow-ups,
            given([
                Event::Admitted(created()),
                Event::Started { execution: 1 },
                received("a"),
                received("b"),
                received("c"),
                Event::FollowupsDelivered {
                    execution: 1,
                    count: 1,
                },
            ])
            // when it ends, however it ends,
            .when(Command::Finish {
                execution: 1,
                outcome,
            })
            // then the run is queued again: "b" resumes it and "c" waits for that execution.
            .then_events([end, Event::Requeued { execution: 1 }])
            .then_effects([Effect::Enqueue])
            .then_state(|run| {
                assert_eq!(run.state, RunState::Queued);
                assert_eq!(run.resumed_by, Some(followup("b")));
                assert_eq!(run.pending_followups, vec![followup("c")]);
                assert!(run.owed.is_empty());
            })
            // Both events are what the service records.
            .then_recordable()
            // The next execution is handed "c" and owes it.
            .and_then()
            .when(Command::Start { placement: None })
            .then_effects([Effect::Launch {
                execution: 2,
                followups: vec![followup("c")],
                resumed_by: Some(followup("b")),
            }]);
        }
    }

    #[test]
    fn an_execution_that_took_everything_ends_the_run() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::FollowupsDelivered {
                execution: 1,
                count: 1,
            },
        ])
        .when(Command::Finish {
            execution: 1,
            outcome: Ok(()),
        })
        .then_events([Event::Succeeded { execution: 1 }])
        .then_effects([])
        // A Requeued the service would not write is not recordable.
        .and_then()
        .then_refuses_to_record(Event::Requeued { execution: 1 });
    }

    #[test]
    fn a_cancel_drops_what_is_owed() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::Cancelled { by: "k".into() },
        ])
        .then_state(|run| {
            assert!(run.owed.is_empty());
            assert_eq!(run.state, RunState::Cancelled);
        });
    }

    #[test]
    fn followups_waiting_for_a_running_agent_are_bounded() {
        let waiting = (0..MAX_PENDING_FOLLOWUPS).map(|i| received(&format!("note {i}")));
        let full = given(
            [Event::Admitted(created()), Event::Started { execution: 1 }]
                .into_iter()
                .chain(waiting),
        );
        full.clone()
            .when(send("one more"))
            .then_rejects(Rejection::TooManyPending);
        // Once the agent takes them, there is room again.
        full.and([Event::FollowupsDelivered {
            execution: 1,
            count: 50,
        }])
        .when(send("one more"))
        .then_accepted();
    }

    /// Logs written before follow-ups were tracked have in-progress follow-ups without
    /// `FollowupsDelivered`; they fold to the same states as before.
    #[test]
    fn a_log_without_deliveries_folds_as_it_always_did() {
        given([
            Event::Admitted(created()),
            Event::Started { execution: 1 },
            received("a"),
            Event::Succeeded { execution: 1 },
        ])
        .then_state(|run| {
            assert_eq!(run.state, RunState::Succeeded);
            assert_eq!(run.resumed_by, None);
        });
    }
}
