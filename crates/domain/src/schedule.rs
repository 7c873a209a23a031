//! The schedule aggregate (issue #21): a named prompt and agent config that fires on a cron
//! expression in a time zone, each firing an ordinary run. Pure like the run state machine:
//! `decide_schedule` turns a command into events or a rejection, `evolve_schedule` folds one
//! event and is total.
//!
//! When a schedule is due is the shell's business (cron and time zones need a calendar);
//! what the domain guarantees is that a firing is recorded once per due time: a `Fire` for a
//! due time at or before the last recorded one is refused, so a firing retried after a crash
//! never makes a second run, and a paused or deleted schedule never fires.
//!
//! The events are encoded positionally (postcard) like the run's: add variants and fields only
//! as new variants at the end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::events::{AgentConfig, Creator, Sealed};
use super::ids::{RunId, ScheduleId, Timestamp};

/// What a create or an update sets. `cron` and `time_zone` are checked by the shell before a
/// command is made (a standard 5-field expression or a macro; an IANA name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub prompt: String,
    /// Resolved like a run's config, with `***` for credential values (sealed in `sealed`,
    /// bound to the schedule's team and the key that created it: its runs' creator).
    pub config: AgentConfig,
    pub sealed: Option<Sealed>,
    /// Given to every run the schedule makes.
    pub metadata: BTreeMap<String, String>,
}

/// One change to a schedule. The time of the change lives in the envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScheduleEvent {
    /// The schedule was made by `by`, for team `team`. Always its first event.
    Created {
        spec: ScheduleSpec,
        enabled: bool,
        team: String,
        by: Creator,
    },
    /// `by` replaced what the schedule runs and when, and whether it is enabled.
    Updated {
        spec: ScheduleSpec,
        enabled: bool,
        by: Creator,
    },
    /// The schedule stops firing until resumed (by the key `by`).
    Paused { by: String },
    /// The schedule fires again from its next due time (by the key `by`).
    Resumed { by: String },
    /// The schedule is gone (by the key `by`); its runs stay.
    Deleted { by: String },
    /// The firing due at `due` created run `run_id`.
    Fired { due: Timestamp, run_id: RunId },
    /// The firing due at `due` could not create its run, for `error`.
    FireFailed { due: Timestamp, error: String },
}

impl ScheduleEvent {
    /// A stable, human-readable name of the variant (exports and the `events` command).
    pub fn kind(&self) -> &'static str {
        match self {
            ScheduleEvent::Created { .. } => "ScheduleCreated",
            ScheduleEvent::Updated { .. } => "ScheduleUpdated",
            ScheduleEvent::Paused { .. } => "SchedulePaused",
            ScheduleEvent::Resumed { .. } => "ScheduleResumed",
            ScheduleEvent::Deleted { .. } => "ScheduleDeleted",
            ScheduleEvent::Fired { .. } => "ScheduleFired",
            ScheduleEvent::FireFailed { .. } => "ScheduleFireFailed",
        }
    }
}

/// How many firings a schedule remembers (its history in the API: last runs and their states).
pub const MAX_REMEMBERED_FIRINGS: usize = 20;

/// A firing: when it was due and the run it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firing {
    pub due: Timestamp,
    pub run_id: RunId,
    /// When it was recorded (the lag from `due` is the scheduler's).
    pub at: Timestamp,
}

/// The state of one schedule: the fold of its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub id: ScheduleId,
    pub spec: ScheduleSpec,
    pub enabled: bool,
    pub team: String,
    pub created_by: Creator,
    pub updated_by: Creator,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted: bool,
    /// The latest due time that fired or failed: nothing at or before it fires again.
    pub last_due: Option<Timestamp>,
    /// The latest firings, newest last, at most `MAX_REMEMBERED_FIRINGS`.
    pub firings: Vec<Firing>,
    /// Why the latest firing could not create its run; cleared by a firing that did.
    pub last_error: Option<String>,
    /// When the schedule was last enabled (created enabled, resumed, or updated to enabled):
    /// a resumed schedule fires from its next due time after this, never for what it missed.
    pub enabled_since: Timestamp,
    /// Number of events folded; the next event's sequence number.
    pub next_seq: u64,
}

/// What a client or the scheduler asks of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleCommand {
    Create {
        spec: ScheduleSpec,
        enabled: bool,
        team: String,
        by: Creator,
    },
    Update {
        spec: ScheduleSpec,
        enabled: bool,
        by: Creator,
    },
    Pause {
        by: String,
    },
    Resume {
        by: String,
    },
    Delete {
        by: String,
    },
    /// The firing due at `due` is to make run `run_id` (an id the shell derives from the
    /// schedule and the due time, so a retried firing names the same run).
    Fire {
        due: Timestamp,
        run_id: RunId,
    },
    /// The firing due at `due` could not make its run.
    FailFire {
        due: Timestamp,
        error: String,
    },
}

/// Why a schedule command was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleRejection {
    #[error("the schedule already exists")]
    AlreadyExists,
    #[error("the schedule does not exist")]
    NotFound,
    #[error("the schedule is paused")]
    Paused,
    #[error("the firing due at {0} ms was already recorded")]
    AlreadyFired(u64),
}

/// Decides `command` against a schedule's state (`None`: it does not exist). A deleted schedule
/// is answered as missing. Pausing a paused schedule or resuming an enabled one records
/// nothing and succeeds: both are idempotent, as clients retry them.
pub fn decide_schedule(
    schedule: Option<&Schedule>,
    command: ScheduleCommand,
) -> Result<Vec<ScheduleEvent>, ScheduleRejection> {
    let live = schedule.filter(|s| !s.deleted);
    let Some(s) = live else {
        return match (schedule, command) {
            (
                None,
                ScheduleCommand::Create {
                    spec,
                    enabled,
                    team,
                    by,
                },
            ) => Ok(vec![ScheduleEvent::Created {
                spec,
                enabled,
                team,
                by,
            }]),
            (Some(_), ScheduleCommand::Create { .. }) => Err(ScheduleRejection::AlreadyExists),
            _ => Err(ScheduleRejection::NotFound),
        };
    };
    match command {
        ScheduleCommand::Create { .. } => Err(ScheduleRejection::AlreadyExists),
        ScheduleCommand::Update { spec, enabled, by } => {
            Ok(vec![ScheduleEvent::Updated { spec, enabled, by }])
        }
        ScheduleCommand::Pause { by } => Ok(if s.enabled {
            vec![ScheduleEvent::Paused { by }]
        } else {
            Vec::new()
        }),
        ScheduleCommand::Resume { by } => Ok(if s.enabled {
            Vec::new()
        } else {
            vec![ScheduleEvent::Resumed { by }]
        }),
        ScheduleCommand::Delete { by } => Ok(vec![ScheduleEvent::Deleted { by }]),
        ScheduleCommand::Fire { due, run_id } => {
            fireable(s, due)?;
            Ok(vec![ScheduleEvent::Fired { due, run_id }])
        }
        ScheduleCommand::FailFire { due, error } => {
            // The firing may have been recorded already (`Fired`) and its run then refused:
            // the failure replaces that firing.
            let recorded = s.firings.last().is_some_and(|f| f.due == due);
            if !recorded {
                fireable(s, due)?;
            }
            Ok(vec![ScheduleEvent::FireFailed { due, error }])
        }
    }
}

/// Whether the firing due at `due` may be recorded: the schedule is enabled and nothing at or
/// after `due` was recorded.
fn fireable(s: &Schedule, due: Timestamp) -> Result<(), ScheduleRejection> {
    if !s.enabled {
        return Err(ScheduleRejection::Paused);
    }
    if s.last_due.is_some_and(|last| due <= last) {
        return Err(ScheduleRejection::AlreadyFired(due.0));
    }
    Ok(())
}

/// Folds one event, recorded at `at`, into schedule `id`. Total: an event that does not apply
/// changes only the bookkeeping (`next_seq`, `updated_at`).
pub fn evolve_schedule(
    schedule: Option<Schedule>,
    id: ScheduleId,
    event: &ScheduleEvent,
    at: Timestamp,
) -> Option<Schedule> {
    let Some(mut s) = schedule else {
        let ScheduleEvent::Created {
            spec,
            enabled,
            team,
            by,
        } = event
        else {
            return None;
        };
        return Some(Schedule {
            id,
            spec: spec.clone(),
            enabled: *enabled,
            team: team.clone(),
            created_by: by.clone(),
            updated_by: by.clone(),
            created_at: at,
            updated_at: at,
            deleted: false,
            last_due: None,
            firings: Vec::new(),
            last_error: None,
            enabled_since: at,
            next_seq: 1,
        });
    };
    s.next_seq += 1;
    s.updated_at = s.updated_at.max(at);
    match event {
        ScheduleEvent::Created { .. } => {}
        ScheduleEvent::Updated { spec, enabled, by } => {
            if *enabled && !s.enabled {
                s.enabled_since = at;
            }
            s.spec = spec.clone();
            s.enabled = *enabled;
            s.updated_by = by.clone();
        }
        ScheduleEvent::Paused { .. } => s.enabled = false,
        ScheduleEvent::Resumed { .. } => {
            if !s.enabled {
                s.enabled = true;
                s.enabled_since = at;
            }
        }
        ScheduleEvent::Deleted { .. } => {
            s.deleted = true;
            s.enabled = false;
        }
        ScheduleEvent::Fired { due, run_id } => {
            s.last_due = Some(s.last_due.map_or(*due, |last| last.max(*due)));
            s.last_error = None;
            s.firings.push(Firing {
                due: *due,
                run_id: *run_id,
                at,
            });
            if s.firings.len() > MAX_REMEMBERED_FIRINGS {
                s.firings.remove(0);
            }
        }
        ScheduleEvent::FireFailed { due, error } => {
            s.last_due = Some(s.last_due.map_or(*due, |last| last.max(*due)));
            s.last_error = Some(error.clone());
            // A firing whose run could not be made is no firing: its run does not exist.
            if s.firings.last().is_some_and(|f| f.due == *due) {
                s.firings.pop();
            }
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::CreatorKind;

    const ID: ScheduleId = RunId(7);

    fn creator() -> Creator {
        Creator {
            kind: CreatorKind::User,
            uid: "k".into(),
            display_name: "alice".into(),
        }
    }

    fn spec(name: &str) -> ScheduleSpec {
        ScheduleSpec {
            name: name.into(),
            cron: "0 3 * * *".into(),
            time_zone: "Europe/Berlin".into(),
            prompt: "nightly maintenance".into(),
            config: AgentConfig::default(),
            sealed: None,
            metadata: BTreeMap::from([("team".into(), "infra".into())]),
        }
    }

    fn created(enabled: bool) -> ScheduleEvent {
        ScheduleEvent::Created {
            spec: spec("nightly"),
            enabled,
            team: "infra".into(),
            by: creator(),
        }
    }

    /// The schedule `history` folds to, the n-th event at `Timestamp(n * 10)`.
    fn given(history: &[ScheduleEvent]) -> Option<Schedule> {
        history.iter().enumerate().fold(None, |s, (i, e)| {
            evolve_schedule(s, ID, e, Timestamp(i as u64 * 10))
        })
    }

    fn when(
        history: &[ScheduleEvent],
        command: ScheduleCommand,
    ) -> Result<Vec<ScheduleEvent>, ScheduleRejection> {
        decide_schedule(given(history).as_ref(), command)
    }

    fn fire(due: u64, run: u128) -> ScheduleCommand {
        ScheduleCommand::Fire {
            due: Timestamp(due),
            run_id: RunId(run),
        }
    }

    fn fired(due: u64, run: u128) -> ScheduleEvent {
        ScheduleEvent::Fired {
            due: Timestamp(due),
            run_id: RunId(run),
        }
    }

    #[test]
    fn a_created_schedule_holds_its_spec_and_team() {
        let events = when(
            &[],
            ScheduleCommand::Create {
                spec: spec("nightly"),
                enabled: true,
                team: "infra".into(),
                by: creator(),
            },
        )
        .expect("created");
        assert_eq!(events, [created(true)]);
        let s = given(&events).expect("schedule");
        assert_eq!((s.team.as_str(), s.enabled, s.next_seq), ("infra", true, 1));
        assert_eq!(s.spec.time_zone, "Europe/Berlin");
        assert_eq!(
            when(&events, ScheduleCommand::Pause { by: "k".into() }),
            Ok(vec![ScheduleEvent::Paused { by: "k".into() }])
        );
    }

    #[test]
    fn each_due_time_fires_once_and_in_order() {
        let history = [created(true), fired(1_000, 1)];
        assert_eq!(when(&history, fire(2_000, 2)), Ok(vec![fired(2_000, 2)]));
        // The same firing retried after a crash, or an older one, is refused.
        assert_eq!(
            when(&history, fire(1_000, 1)),
            Err(ScheduleRejection::AlreadyFired(1_000))
        );
        assert_eq!(
            when(&history, fire(500, 3)),
            Err(ScheduleRejection::AlreadyFired(500))
        );
        let failed = [
            created(true),
            ScheduleEvent::FireFailed {
                due: Timestamp(1_000),
                error: "queue full".into(),
            },
        ];
        let s = given(&failed).expect("schedule");
        assert_eq!(s.last_error.as_deref(), Some("queue full"));
        assert_eq!(
            when(&failed, fire(1_000, 1)),
            Err(ScheduleRejection::AlreadyFired(1_000))
        );
        let s = given(&[created(true), failed[1].clone(), fired(2_000, 2)]).expect("schedule");
        assert_eq!(
            s.last_error, None,
            "a firing that made its run clears the error"
        );
    }

    #[test]
    fn a_recorded_firing_whose_run_was_refused_becomes_a_failure() {
        let history = [created(true), fired(1_000, 1)];
        let failure = ScheduleCommand::FailFire {
            due: Timestamp(1_000),
            error: "queue full".into(),
        };
        let events = when(&history, failure.clone()).expect("recorded firing fails");
        let mut all = history.to_vec();
        all.extend(events);
        let s = given(&all).expect("schedule");
        assert!(s.firings.is_empty(), "the firing made no run");
        assert_eq!(s.last_due, Some(Timestamp(1_000)));
        assert_eq!(s.last_error.as_deref(), Some("queue full"));
        // Once failed, neither the firing nor its failure is recorded again.
        assert_eq!(
            when(&all, fire(1_000, 1)),
            Err(ScheduleRejection::AlreadyFired(1_000))
        );
        assert_eq!(
            when(&all, failure),
            Err(ScheduleRejection::AlreadyFired(1_000))
        );
    }

    #[test]
    fn a_paused_schedule_does_not_fire_and_a_resumed_one_fires_from_now() {
        let paused = [created(true), ScheduleEvent::Paused { by: "k".into() }];
        assert_eq!(
            when(&paused, fire(1_000, 1)),
            Err(ScheduleRejection::Paused)
        );
        // Pausing twice records nothing; so does resuming an enabled schedule.
        assert_eq!(
            when(&paused, ScheduleCommand::Pause { by: "k".into() }),
            Ok(vec![])
        );
        assert_eq!(
            when(&[created(true)], ScheduleCommand::Resume { by: "k".into() }),
            Ok(vec![])
        );
        let resumed = [
            created(true),
            ScheduleEvent::Paused { by: "k".into() },
            ScheduleEvent::Resumed { by: "k".into() },
        ];
        let s = given(&resumed).expect("schedule");
        assert!(s.enabled);
        assert_eq!(s.enabled_since, Timestamp(20));
        assert_eq!(when(&resumed, fire(1_000, 1)), Ok(vec![fired(1_000, 1)]));
        // Created disabled: not fired until enabled by an update.
        assert_eq!(
            when(&[created(false)], fire(1_000, 1)),
            Err(ScheduleRejection::Paused)
        );
        let enabled = [
            created(false),
            ScheduleEvent::Updated {
                spec: spec("nightly-2"),
                enabled: true,
                by: creator(),
            },
        ];
        let s = given(&enabled).expect("schedule");
        assert_eq!(
            (s.spec.name.as_str(), s.enabled_since),
            ("nightly-2", Timestamp(10))
        );
    }

    #[test]
    fn a_deleted_schedule_is_gone_for_every_command() {
        let deleted = [created(true), ScheduleEvent::Deleted { by: "k".into() }];
        for command in [
            fire(1_000, 1),
            ScheduleCommand::Pause { by: "k".into() },
            ScheduleCommand::Resume { by: "k".into() },
            ScheduleCommand::Delete { by: "k".into() },
            ScheduleCommand::Update {
                spec: spec("x"),
                enabled: true,
                by: creator(),
            },
        ] {
            assert_eq!(when(&deleted, command), Err(ScheduleRejection::NotFound));
        }
        assert_eq!(
            when(
                &deleted,
                ScheduleCommand::Create {
                    spec: spec("again"),
                    enabled: true,
                    team: "infra".into(),
                    by: creator(),
                }
            ),
            Err(ScheduleRejection::AlreadyExists),
            "an id is never reused"
        );
        assert_eq!(when(&[], fire(1, 1)), Err(ScheduleRejection::NotFound));
    }

    #[test]
    fn the_history_keeps_the_latest_firings() {
        let mut history = vec![created(true)];
        history.extend((1..=25).map(|i| fired(i * 1_000, u128::from(i))));
        let s = given(&history).expect("schedule");
        assert_eq!(s.firings.len(), MAX_REMEMBERED_FIRINGS);
        assert_eq!(s.firings[0].run_id, RunId(6));
        assert_eq!(s.firings.last().map(|f| f.run_id), Some(RunId(25)));
        assert_eq!(s.last_due, Some(Timestamp(25_000)));
    }

    #[test]
    fn folding_is_total() {
        // Events that do not apply change only the bookkeeping.
        assert_eq!(given(&[fired(1, 1)]), None);
        let s = given(&[created(true), created(false)]).expect("schedule");
        assert!(s.enabled);
        assert_eq!(s.next_seq, 2);
    }
}
