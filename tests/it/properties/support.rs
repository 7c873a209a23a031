//! What the `properties` tests share: fixtures, servers and helpers.

use proptest::prelude::*;
use runledger::domain::{
    decide, evolve, AgentConfig, Artifact, ArtifactKind, Command, Content, CostSource, Creator,
    CreatorKind, ExecutionUsage, FollowupMode, InferenceCost, Run, RunAdmitted, RunCreated, RunId,
    RunSchedule, SourceType, StatusMessage, Timestamp, Tokens,
};
use runledger::projection::Index;
use runledger::store::{self, Store};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub(super) struct RunSpec {
    /// The team the run is admitted into (`team{n}`; see `team_name`).
    pub(super) team: u8,
    pub(super) name: Option<u8>,
    pub(super) model: u8,
    pub(super) env: u8,
    pub(super) creator: u8,
    pub(super) title: u8,
    pub(super) meta: Option<u8>,
    /// `Some(n)`, n < 3: made by a firing of schedule `n` (`schedule_of`); `Some(3)`: admitted
    /// with the source `SCHEDULED_AGENT` but no schedule (as an imported log may hold).
    pub(super) schedule: Option<u8>,
    pub(super) steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Start,
    /// A start at a place a cluster scheduler gave it (a Slurm job on node `n % 3`).
    StartOn(u8),
    /// The execution in progress is lost with its node and the run queued again.
    Lose,
    Succeed,
    Fail,
    Cancel,
    Followup,
    /// The execution in progress takes one follow-up owed to it.
    Deliver,
    /// What the latest execution used (refused, like a stale finish, when there is none or it
    /// was recorded already).
    Usage(u8),
    /// The execution in progress reports an artifact (of type `n % 4`; refused, like a stale
    /// finish, when no execution is in progress).
    Report(u8),
}

pub(super) fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Start),
        any::<u8>().prop_map(Step::StartOn),
        Just(Step::Lose),
        Just(Step::Succeed),
        Just(Step::Fail),
        Just(Step::Cancel),
        Just(Step::Followup),
        Just(Step::Deliver),
        any::<u8>().prop_map(Step::Usage),
        any::<u8>().prop_map(Step::Report),
        any::<u8>().prop_map(Step::Report),
    ]
}

/// Team 0 is the team every run of a store from before teams belongs to.
pub(super) fn team_name(n: u8) -> String {
    if n == 0 {
        runledger::domain::DEFAULT_TEAM.to_string()
    } else {
        format!("team{n}")
    }
}

pub(super) fn run_spec() -> impl Strategy<Value = RunSpec> {
    (
        0u8..3,
        proptest::option::of(0u8..3),
        0u8..3,
        0u8..2,
        0u8..3,
        0u8..5,
        proptest::option::of(0u8..2),
        proptest::option::of(0u8..4),
        proptest::collection::vec(step(), 0..7),
    )
        .prop_map(
            |(team, name, model, env, creator, title, meta, schedule, steps)| RunSpec {
                team,
                name,
                model,
                env,
                creator,
                title,
                meta,
                schedule,
                steps,
            },
        )
}

/// The id of schedule `n`.
pub(super) fn schedule_id(n: u8) -> RunId {
    RunId::new(Timestamp(900_000), u128::from(n) + 1)
}

/// The schedule a run of `spec` was made by, if a firing made it.
pub(super) fn schedule_of(spec: &RunSpec, due: u64) -> Option<RunSchedule> {
    spec.schedule.filter(|n| *n < 3).map(|n| RunSchedule {
        schedule_id: schedule_id(n),
        schedule_name: format!("schedule {n}"),
        cron_schedule: "*/5 * * * *".into(),
        due: Timestamp(due),
    })
}

pub(super) fn created(spec: &RunSpec) -> RunCreated {
    RunCreated {
        title: format!("title {}\0{}", spec.title, spec.title % 2),
        prompt: format!("prompt about bug {}", spec.title),
        config: AgentConfig {
            name: spec.name.map(|n| format!("name{n}")),
            model_id: Some(format!("model{}", spec.model)),
            environment_id: Some(format!("env{}", spec.env)),
            ..AgentConfig::default()
        },
        creator: Creator {
            kind: CreatorKind::User,
            uid: format!("key{}", spec.creator),
            display_name: "k".into(),
        },
        source: if spec.schedule.is_some() {
            SourceType::ScheduledAgent
        } else {
            SourceType::Api
        },
        metadata: spec
            .meta
            .map(|m| BTreeMap::from([("team".to_string(), format!("t{m}"))]))
            .unwrap_or_default(),
    }
}

pub(super) fn command(step: Step, run: &Run) -> Command {
    match step {
        Step::Start => Command::Start { placement: None },
        Step::StartOn(n) => Command::Start {
            placement: Some(runledger::domain::Placement::Slurm {
                job_id: 1000 + u64::from(n),
                node: format!("n{}", n % 3),
            }),
        },
        Step::Lose => Command::Lose {
            execution: run.executions,
            status: StatusMessage {
                message: "node lost".into(),
                error_code: Some("internal_error".into()),
                retryable: Some(true),
            },
        },
        Step::Succeed => Command::Finish {
            execution: run.executions,
            outcome: Ok(()),
        },
        Step::Fail => Command::Finish {
            execution: run.executions,
            outcome: Err(StatusMessage {
                message: "boom".into(),
                error_code: None,
                retryable: None,
            }),
        },
        Step::Cancel => Command::Cancel { by: "k".into() },
        Step::Followup => Command::Followup {
            message: "more".into(),
            mode: FollowupMode::Normal,
            by: "k".into(),
        },
        Step::Deliver => Command::Delivered {
            execution: run.executions,
            count: 1,
        },
        Step::Report(n) => {
            let content = Content {
                sha256: [n; 32],
                size: u64::from(n),
                mime_type: "text/plain".into(),
            };
            let kind = match n % 4 {
                0 => ArtifactKind::PullRequest {
                    url: format!("https://git.example/pr/{n}"),
                    branch: format!("b{n}"),
                    title: None,
                },
                1 => ArtifactKind::File {
                    path: format!("f{n}.txt"),
                    description: None,
                    content,
                },
                2 => ArtifactKind::Plan {
                    title: Some(format!("plan {n}")),
                    content,
                },
                _ => ArtifactKind::Screenshot {
                    path: format!("s{n}.png"),
                    description: None,
                    content,
                },
            };
            // Some uids are not UUIDs (a log from elsewhere): they are found all the same.
            let uid = if n % 5 == 0 {
                format!("legacy-{}-{n}-{}", run.id, run.artifacts.len())
            } else {
                uuid::Uuid::new_v4().to_string()
            };
            Command::ReportArtifact {
                execution: run.executions,
                artifact: Artifact { uid, kind },
            }
        }
        Step::Usage(n) => Command::RecordUsage {
            execution: run.executions,
            usage: ExecutionUsage {
                tokens: (n % 2 == 0).then_some(Tokens {
                    input: u64::from(n) * 1000,
                    cached_input: u64::from(n),
                    output: u64::from(n) * 10,
                }),
                model: Some(format!("model{}", n % 3)),
                inference: (n % 3 != 0).then_some(InferenceCost {
                    nano_usd: u64::from(n) * 1_000_003,
                    source: if n % 2 == 0 {
                        CostSource::Prices
                    } else {
                        CostSource::Cli
                    },
                }),
                cpu_ms: (n % 5 != 0).then_some(u64::from(n) * 7),
                compute_nano_usd: (n % 4 != 0).then_some(u64::from(n) * 11),
            },
        },
    }
}

/// Applies each run's commands the way the actor does (decide, append, evolve, index).
/// Returns the live states.
pub(super) fn populate(store: &Store, index: &Index, specs: &[RunSpec]) -> Vec<Run> {
    populate_from(store, index, specs, 0)
}

/// `populate` for runs numbered from `first` (their ids and times follow those of runs
/// numbered before, so that several calls add up to one population).
pub(super) fn populate_from(
    store: &Store,
    index: &Index,
    specs: &[RunSpec],
    first: usize,
) -> Vec<Run> {
    let mut live = Vec::new();
    let mut clock = 1_000_000u64 + first as u64 * 100;
    for (i, spec) in specs.iter().enumerate() {
        clock += 7;
        let id = RunId::new(Timestamp(clock), (first + i) as u128);
        let mut state: Option<Run> = None;
        let admitted = RunAdmitted {
            team: team_name(spec.team),
            ..RunAdmitted::from_legacy(created(spec))
        };
        let commands = std::iter::once(Command::create(
            admitted,
            Vec::new(),
            schedule_of(spec, clock - 3),
        ))
        .chain(
            spec.steps
                .iter()
                .map(|_| Command::Start { placement: None }),
        );
        for (n, cmd) in commands.enumerate() {
            let cmd = match (n, &state) {
                (0, _) => cmd,
                (_, Some(run)) => command(spec.steps[n - 1], run),
                (_, None) => break,
            };
            let Ok(decision) = decide(state.as_ref(), cmd) else {
                continue;
            };
            let at = if state.is_none() {
                Timestamp(clock)
            } else {
                Timestamp(clock + n as u64 * 3)
            };
            let seq = state.as_ref().map_or(0, |r| r.next_seq);
            let new = decision
                .events
                .iter()
                .fold(state.clone(), |r, e| evolve(r, id, e, at));
            store
                .append(&store::envelopes(id, seq, at, decision.events, None))
                .expect("append");
            let new = new.expect("run exists");
            index.apply(state.as_ref(), &new).expect("apply");
            state = Some(new);
        }
        clock += 30;
        live.extend(state);
    }
    live
}

pub(super) fn open() -> (tempfile::TempDir, Store, Index) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        dir.path(),
        &store::Options {
            cache_bytes: 8 << 20,
            ..store::Options::default()
        },
    )
    .expect("open");
    let index = Index::open(store.db()).expect("index");
    (dir, store, index)
}

/// One run, created and still queued.
pub(super) fn one_queued_run() -> RunSpec {
    RunSpec {
        team: 0,
        name: Some(1),
        model: 0,
        env: 0,
        creator: 0,
        title: 1,
        meta: None,
        schedule: None,
        steps: vec![],
    }
}
