//! Property tests of the event-sourced core against a real sled store:
//! - folding a run's stored log equals the state the index holds (replay == live);
//! - rebuilding the read index from the log equals the incrementally maintained index;
//! - paging through any list query of any team (the `artifact_type` filter included) returns
//!   exactly that team's matching runs, in order, once each;
//! - every reported artifact is found by its uid, through the index, on its run;
//! - the runs-per-state tally the index's writes keep equals a fresh count;
//! - values on both sides of sled's blob threshold sync without a false failure and read back
//!   whole after a reopen.

use std::collections::BTreeMap;

use proptest::prelude::*;
use runledger::domain::{
    decide, evolve, AgentConfig, Artifact, ArtifactKind, Command, Content, CostSource, Creator,
    CreatorKind, ExecutionUsage, FollowupMode, InferenceCost, Run, RunAdmitted, RunCreated, RunId,
    RunSchedule, RunState, SourceType, StatusMessage, Timestamp, Tokens,
};
use runledger::projection::{keys, Index, Order, Query, SortBy};
use runledger::store::{self, Store};

#[derive(Debug, Clone)]
struct RunSpec {
    /// The team the run is admitted into (`team{n}`; see `team_name`).
    team: u8,
    name: Option<u8>,
    model: u8,
    env: u8,
    creator: u8,
    title: u8,
    meta: Option<u8>,
    /// `Some(n)`, n < 3: made by a firing of schedule `n` (`schedule_of`); `Some(3)`: admitted
    /// with the source `SCHEDULED_AGENT` but no schedule (as an imported log may hold).
    schedule: Option<u8>,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy)]
enum Step {
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

fn step() -> impl Strategy<Value = Step> {
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
fn team_name(n: u8) -> String {
    if n == 0 {
        runledger::domain::DEFAULT_TEAM.to_string()
    } else {
        format!("team{n}")
    }
}

fn run_spec() -> impl Strategy<Value = RunSpec> {
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
fn schedule_id(n: u8) -> RunId {
    RunId::new(Timestamp(900_000), u128::from(n) + 1)
}

/// The schedule a run of `spec` was made by, if a firing made it.
fn schedule_of(spec: &RunSpec, due: u64) -> Option<RunSchedule> {
    spec.schedule.filter(|n| *n < 3).map(|n| RunSchedule {
        schedule_id: schedule_id(n),
        schedule_name: format!("schedule {n}"),
        cron_schedule: "*/5 * * * *".into(),
        due: Timestamp(due),
    })
}

fn created(spec: &RunSpec) -> RunCreated {
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

fn command(step: Step, run: &Run) -> Command {
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
fn populate(store: &Store, index: &Index, specs: &[RunSpec]) -> Vec<Run> {
    populate_from(store, index, specs, 0)
}

/// `populate` for runs numbered from `first` (their ids and times follow those of runs
/// numbered before, so that several calls add up to one population).
fn populate_from(store: &Store, index: &Index, specs: &[RunSpec], first: usize) -> Vec<Run> {
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
                .append(&store::envelopes(id, seq, at, decision.events))
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

fn open() -> (tempfile::TempDir, Store, Index) {
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    /// sled writes messages over its blob threshold (a quarter segment, 128 KiB; a node page
    /// of several large values gets there too) to blob files it removes again once superseded.
    /// Group commits racing those removals must never fail, and every acknowledged value must
    /// read back whole, on either side of the threshold.
    #[test]
    fn values_across_the_blob_threshold_sync_and_read_back(
        sizes in proptest::collection::vec(1_024usize..200 * 1024, 4..24),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = store::Options { cache_bytes: 8 << 20, ..store::Options::default() };
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let mut written = Vec::new();
        {
            let store = Store::open(dir.path(), &options).expect("open");
            for (i, size) in sizes.iter().enumerate() {
                let spec = one_queued_run();
                let mut created = created(&spec);
                created.prompt = char::from(b'a' + (i % 26) as u8).to_string().repeat(*size);
                let id = RunId::new(Timestamp(1_000_000 + i as u64), i as u128);
                let decision = decide(
                    None,
                    Command::create(RunAdmitted::from_legacy(created), Vec::new(), None),
                )
                .expect("create");
                let envelopes = store::envelopes(id, 0, Timestamp(1_000_000), decision.events);
                store.append(&envelopes).expect("append");
                runtime.block_on(store.sync()).expect("no false sync failure");
                written.push((id, envelopes));
            }
        }
        // A value over the threshold went to a blob file: the test covers both sides.
        if sizes.iter().any(|s| *s > 130 * 1024) {
            let blobs = std::fs::read_dir(dir.path().join("sled/blobs")).expect("blobs").count();
            prop_assert!(blobs > 0, "no blob file for values up to {:?}", sizes.iter().max());
        }
        // The dropped store's background threads let go of sled's file lock a moment after
        // the drop: the reopen waits for it (as `store::tests` does).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let store = loop {
            match Store::open(dir.path(), &options) {
                Err(store::Error::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                result => break result.expect("reopen"),
            }
        };
        for (id, envelopes) in &written {
            let stored: Vec<_> = store
                .run_events(*id, 0)
                .collect::<Result<_, _>>()
                .expect("read");
            prop_assert_eq!(&stored, envelopes);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn replay_equals_live_and_rebuild_equals_incremental(specs in proptest::collection::vec(run_spec(), 1..25)) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        for run in &live {
            prop_assert_eq!(store.load_run(run.id).expect("load"), Some(run.clone()));
            prop_assert_eq!(index.get(run.id).expect("get"), Some(run.clone()));
            for reported in &run.artifacts {
                let found = index.artifact_run(&reported.artifact.uid).expect("artifact");
                prop_assert_eq!(found.map(|r| r.id), Some(run.id));
            }
        }
        prop_assert_eq!(index.artifact_run("00000000-0000-4000-8000-000000000000").expect("none"), None);
        let incremental = index.dump().expect("dump");
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        prop_assert!(differences.is_empty(), "verify found {:?}", differences);
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(index.dump().expect("dump"), incremental);
    }

    /// The usage totals per environment, like the tally: summed once, moved by every write,
    /// saved (as at a clean stop), and exact whatever the next open or a rebuild starts from.
    #[test]
    fn the_usage_totals_kept_by_writes_equal_a_fresh_sum(
        specs in proptest::collection::vec(run_spec(), 1..25),
        counted_after in 0usize..25,
        saved_after in 0usize..25,
    ) {
        let (_dir, store, index) = open();
        let counted = counted_after.min(specs.len());
        let saved = saved_after.clamp(counted, specs.len());
        let mut live = populate(&store, &index, &specs[..counted]);
        index.usage_by_environment().expect("sum");
        live.extend(populate_from(&store, &index, &specs[counted..saved], counted));
        index.save_tally().expect("save");
        live.extend(populate_from(&store, &index, &specs[saved..], saved));
        let mut want: runledger::projection::UsageByEnvironment = BTreeMap::new();
        for run in &live {
            let u = &run.usage;
            let t = want
                .entry(run.config.environment_id.clone().unwrap_or_default())
                .or_default();
            t.inference_nano_usd += u.inference_nano_usd.unwrap_or(0);
            t.compute_nano_usd += u.compute_nano_usd.unwrap_or(0);
            t.input_tokens += u.input_tokens;
            t.output_tokens += u.output_tokens;
            t.cpu_ms += u.cpu_ms;
        }
        want.retain(|_, t| *t != Default::default());
        let kept = |got: runledger::projection::UsageByEnvironment| -> runledger::projection::UsageByEnvironment {
            got.into_iter().filter(|(_, t)| *t != Default::default()).collect()
        };
        prop_assert_eq!(kept(index.usage_by_environment().expect("kept")), want.clone());
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(kept(fresh.usage_by_environment().expect("reopened")), want.clone());
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(kept(index.usage_by_environment().expect("after rebuild")), want);
    }

    /// The tally is counted once, moved by every write, saved (as at a clean stop) and kept
    /// writing after; whatever the next open takes, a saved copy or a walk of the ranges, and
    /// whatever a rebuild saves, is exact.
    #[test]
    fn the_state_tally_kept_by_writes_equals_a_fresh_count(
        specs in proptest::collection::vec(run_spec(), 1..25),
        counted_after in 0usize..25,
        saved_after in 0usize..25,
    ) {
        let (_dir, store, index) = open();
        let counted = counted_after.min(specs.len());
        let saved = saved_after.clamp(counted, specs.len());
        let mut live = populate(&store, &index, &specs[..counted]);
        // The first count walks the ranges; the writes after it move the tally.
        index.count_by_state().expect("count");
        live.extend(populate_from(&store, &index, &specs[counted..saved], counted));
        prop_assert!(index.save_tally().expect("save"));
        live.extend(populate_from(&store, &index, &specs[saved..], saved));
        let want: Vec<(RunState, u64)> = RunState::ALL
            .into_iter()
            .map(|s| (s, live.iter().filter(|r| r.state == s).count() as u64))
            .collect();
        prop_assert_eq!(index.count_by_state().expect("tally"), want.clone());
        let copy = Index::saved_counts(store.db()).expect("saved copy");
        if saved == specs.len() {
            prop_assert_eq!(copy, Some(want.clone()));
        } else {
            prop_assert_eq!(copy, None, "the writes after the save removed it");
        }
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(fresh.count_by_state().expect("reopened"), want.clone());
        // `verify` checks the tally a handle holds against the counts of its own rebuild.
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        prop_assert!(differences.is_empty(), "verify found {:?}", differences);
        index.rebuild(&store).expect("rebuild");
        prop_assert_eq!(index.count_by_state().expect("after rebuild"), want.clone());
        prop_assert_eq!(Index::saved_counts(store.db()).expect("rebuilt copy"), Some(want.clone()));
        let fresh = Index::open(store.db()).expect("reopen");
        prop_assert_eq!(fresh.count_by_state().expect("after rebuild, reopened"), want);
    }

    /// For every team (and one without runs), paging through a list with any filters and sort
    /// returns exactly that team's matching runs, in order, once each.
    #[test]
    fn paging_returns_every_match_once_in_order(
        specs in proptest::collection::vec(run_spec(), 1..30),
        states in proptest::collection::vec(0usize..5, 0..3),
        name in proptest::option::of(0u8..3),
        model in proptest::option::of(0u8..3),
        creator in proptest::option::of(0u8..3),
        meta in proptest::option::of(0u8..2),
        q in proptest::option::of(0u8..5),
        sort in 0u8..3,
        asc in any::<bool>(),
        limit in 1usize..6,
        after in proptest::option::of(0u64..400),
        created in (proptest::option::of(0u64..1500), proptest::option::of(0u64..1500)),
        artifact in proptest::option::of(0usize..4),
        schedule in proptest::option::of(0u8..4),
    ) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        let base = live.first().map_or(0, |r| r.created_at.0);
        for team in 0u8..4 {
            let query = Query {
                team: team_name(team),
                states: states.iter().map(|&s| RunState::ALL[s]).collect(),
                name: name.map(|n| format!("name{n}")),
                model_id: model.map(|m| format!("model{m}")),
                creator: creator.map(|c| format!("key{c}")),
                metadata: meta.map(|m| vec![("team".to_string(), format!("t{m}"))]).unwrap_or_default(),
                q: q.map(|t| format!("BUG {t}")),
                updated_after: after.map(|a| Timestamp(base + a)),
                created_after: created.0.map(|a| Timestamp(base + a)),
                created_before: created.1.map(|b| Timestamp(base + b)),
                sort_by: [SortBy::UpdatedAt, SortBy::CreatedAt, SortBy::Title][sort as usize],
                order: if asc { Order::Asc } else { Order::Desc },
                limit,
                artifact_type: artifact.map(|a| ArtifactKind::TYPE_NAMES[a]),
                // Schedule 3 made no run.
                schedule_id: schedule.map(|n| schedule_id(n).to_string()),
                ..Query::default()
            };
            let mut expected: Vec<&Run> = live
                .iter()
                .filter(|r| r.team == team_name(team) && query.matches(r))
                .collect();
            expected.sort_by_key(|r| match query.sort_by {
                SortBy::UpdatedAt => keys::updated_position(r),
                SortBy::CreatedAt => r.id.to_bytes().to_vec(),
                SortBy::Title => keys::title_position(r),
            });
            if !asc {
                expected.reverse();
            }
            let mut got = Vec::new();
            let mut q = query.clone();
            for _ in 0..100 {
                let page = index.list(&q).expect("list");
                prop_assert!(page.runs.len() <= limit);
                got.extend(page.runs.into_iter().map(|r| r.id));
                match page.next_cursor {
                    Some(c) => q.cursor = Some(c),
                    None => break,
                }
            }
            let expected: Vec<RunId> = expected.iter().map(|r| r.id).collect();
            prop_assert_eq!(got, expected, "team {}", team_name(team));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    /// A created-at list starts its walk at a creation bound (ids begin with the creation
    /// time): for a bound at, just before and just after every run's creation, in both orders
    /// and for every team, it returns exactly the runs within the bounds.
    #[test]
    fn created_bounds_cut_a_created_at_list_exactly(
        specs in proptest::collection::vec(run_spec(), 1..12),
        limit in 1usize..4,
    ) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        let mut bounds: Vec<u64> = live
            .iter()
            .flat_map(|r| [r.created_at.0 - 1, r.created_at.0, r.created_at.0 + 1])
            .collect();
        bounds.extend([0, u64::MAX, 1 << 48, (1 << 48) - 1]);
        for team in 0u8..3 {
            for &bound in &bounds {
                for (after, asc) in [(true, true), (true, false), (false, true), (false, false)] {
                    let query = Query {
                        team: team_name(team),
                        created_after: after.then_some(Timestamp(bound)),
                        created_before: (!after).then_some(Timestamp(bound)),
                        sort_by: SortBy::CreatedAt,
                        order: if asc { Order::Asc } else { Order::Desc },
                        limit,
                        ..Query::default()
                    };
                    let mut expected: Vec<RunId> = live
                        .iter()
                        .filter(|r| r.team == team_name(team))
                        .filter(|r| if after { r.created_at.0 > bound } else { r.created_at.0 < bound })
                        .map(|r| r.id)
                        .collect();
                    expected.sort();
                    if !asc {
                        expected.reverse();
                    }
                    let mut got = Vec::new();
                    let mut q = query.clone();
                    for _ in 0..100 {
                        let page = index.list(&q).expect("list");
                        got.extend(page.runs.into_iter().map(|r| r.id));
                        match page.next_cursor {
                            Some(c) => q.cursor = Some(c),
                            None => break,
                        }
                    }
                    prop_assert_eq!(got, expected, "{:?}", query);
                }
            }
        }
    }
}

/// One run, created and still queued.
fn one_queued_run() -> RunSpec {
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

#[test]
fn catch_up_repairs_runs_whose_index_fell_behind_the_log() {
    let (_dir, store, index) = open();
    let live = populate(&store, &index, &[one_queued_run()]);
    let run = &live[0];
    // A crash after the append but before the index update: the log is ahead.
    let decision = decide(Some(run), Command::Start { placement: None }).expect("start");
    let at = Timestamp(run.updated_at.0 + 5);
    store.mark_dirty(run.id).expect("mark");
    store
        .append(&store::envelopes(run.id, run.next_seq, at, decision.events))
        .expect("append");
    assert_eq!(
        index.get(run.id).expect("get").map(|r| r.state),
        Some(RunState::Queued)
    );

    let fixed = index
        .catch_up(&store, &store.dirty_runs().expect("dirty"))
        .expect("catch up");
    assert_eq!(fixed, 1);
    assert_eq!(
        index.get(run.id).expect("get").map(|r| r.state),
        Some(RunState::InProgress)
    );
    assert!(store.dirty_runs().expect("dirty").is_empty());
    let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert!(differences.is_empty(), "{differences:?}");
}

/// A crash in the middle of an index update leaves entries of the row being applied without
/// the row; by the next start the log may have moved on further. The catch-up removes them.
#[test]
fn catch_up_removes_the_entries_of_an_update_a_crash_cut_short() {
    let (_dir, store, index) = open();
    let live = populate(&store, &index, &[one_queued_run()]);
    let queued = live[0].clone();
    let counts = |index: &Index| -> Vec<u64> {
        let counts = index.count_by_state().expect("count");
        counts.into_iter().map(|(_, n)| n).collect()
    };
    // Queued, in progress, succeeded, failed, cancelled.
    assert_eq!(counts(&index), [1, 0, 0, 0, 0]);
    store.mark_dirty(queued.id).expect("mark");
    // Started is durable, and the projector was writing its entries when the process died.
    let start = decide(Some(&queued), Command::Start { placement: None }).expect("start");
    let at = Timestamp(queued.updated_at.0 + 5);
    store
        .append(&store::envelopes(
            queued.id,
            queued.next_seq,
            at,
            start.events.clone(),
        ))
        .expect("append");
    let started = start
        .events
        .iter()
        .try_fold(queued.clone(), |r, e| {
            runledger::domain::evolve(Some(r), queued.id, e, at)
        })
        .expect("started");
    index
        .apply_entries_only(Some(&queued), &started)
        .expect("partial update");
    // The finish became durable too before the crash.
    let finish = decide(
        Some(&started),
        Command::Finish {
            execution: started.executions,
            outcome: Ok(()),
        },
    )
    .expect("finish");
    let later = Timestamp(at.0 + 5);
    store
        .append(&store::envelopes(
            queued.id,
            started.next_seq,
            later,
            finish.events,
        ))
        .expect("append");

    // The tally follows the state ranges, as a fresh count would.
    assert_eq!(counts(&index), [0, 1, 0, 0, 0]);

    let fixed = index
        .catch_up(&store, &store.dirty_runs().expect("dirty"))
        .expect("catch up");
    assert_eq!(fixed, 1);
    assert_eq!(
        index.get(queued.id).expect("get").map(|r| r.state),
        Some(RunState::Succeeded)
    );
    assert_eq!(counts(&index), [0, 0, 1, 0, 0]);
    assert_eq!(
        counts(&Index::open(store.db()).expect("reopen")),
        [0, 0, 1, 0, 0]
    );
    let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert!(differences.is_empty(), "{differences:?}");
}

/// `replay --verify` is a check: it builds its scratch index in a database of its own and
/// leaves the store as it found it (built inside the store, the scratch copy grew its file and
/// its page table; see `Index::verify`).
///
/// The store's file is not byte-for-byte unchanged, and need not be: sled 0.34 writes on its
/// own while we only read. Its flusher thread moves live pages out of sparse segments, and a
/// read that meets a leaf an insert left over-full splits it. So the check is that the contents
/// and the trees are the same, and that the file grew by far less than the index it would have
/// held, measured by building that index in a fresh database.
#[test]
fn verify_writes_nothing_to_the_store() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..300).map(|_| one_queued_run()).collect();
    populate(&store, &index, &specs);
    let scratch = store.data_dir().join("verify-scratch");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    std::fs::write(scratch.join("left-behind"), b"by an interrupted verify").expect("write");
    let size = |db: &sled::Db| {
        db.flush().expect("flush");
        db.size_on_disk().expect("size")
    };
    let before = size(store.db());
    let names = store.db().tree_names();
    let contents = store.db().checksum().expect("checksum");

    let (runs, _, differences) = index.verify(&store, 8 << 20).expect("verify");
    assert_eq!(runs, 300);
    assert!(differences.is_empty(), "{differences:?}");
    assert!(!scratch.exists(), "the scratch database is removed");
    assert_eq!(store.db().tree_names(), names);
    assert_eq!(store.db().checksum().expect("checksum"), contents);
    // Saturating: sled also truncates its file when the segments at its end become free.
    let growth = size(store.db()).saturating_sub(before);

    let elsewhere = sled::Config::new()
        .temporary(true)
        .open()
        .expect("scratch db");
    let empty = size(&elsewhere);
    Index::open(&elsewhere)
        .expect("index")
        .rebuild(&store)
        .expect("rebuild");
    let index_size = size(&elsewhere).saturating_sub(empty);
    assert!(
        growth * 10 < index_size,
        "verify grew the store by {growth} bytes; the index takes {index_size}"
    );
}

#[test]
fn a_cursor_cannot_be_used_with_another_query() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..5)
        .map(|i| RunSpec {
            team: 0,
            name: Some(0),
            model: 0,
            env: 0,
            creator: 0,
            title: i,
            meta: None,
            schedule: None,
            steps: vec![],
        })
        .collect();
    populate(&store, &index, &specs);
    let query = Query {
        team: team_name(0),
        limit: 2,
        ..Query::default()
    };
    let page = index.list(&query).expect("list");
    let cursor = page.next_cursor.expect("more pages");
    let other = Query {
        team: team_name(0),
        limit: 2,
        cursor: Some(cursor),
        name: Some("name0".into()),
        ..Query::default()
    };
    assert!(index.list(&other).is_err());
}

/// SPEC: a run is listed as soon as its create call has returned — also while its state keeps
/// changing. sled iterators are not snapshots, so a run whose index entries move during a walk
/// could be missed; a list must never answer with such a torn walk.
#[test]
fn a_run_changing_state_during_lists_is_never_missed() {
    let (_dir, store, index) = open();
    let specs: Vec<RunSpec> = (0..3)
        .map(|i| RunSpec {
            team: 0,
            name: Some(i),
            model: 0,
            env: 0,
            creator: 0,
            title: i,
            meta: None,
            schedule: None,
            steps: vec![],
        })
        .collect();
    let live = populate(&store, &index, &specs);
    let moving = live[1].clone();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Every apply moves the run's updated_at (and so its entries) to a new position.
            let mut current = moving.clone();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut next = current.clone();
                next.updated_at = Timestamp(next.updated_at.0 + 1);
                next.state = if current.state == RunState::Queued {
                    RunState::InProgress
                } else {
                    RunState::Queued
                };
                index.apply(Some(&current), &next).expect("apply");
                current = next;
            }
        });
        let queries = [
            Query {
                team: team_name(0),
                q: Some(moving.title.clone()),
                limit: 20,
                ..Query::default()
            },
            Query {
                team: team_name(0),
                states: vec![RunState::Queued, RunState::InProgress],
                limit: 20,
                ..Query::default()
            },
        ];
        for i in 0..3000 {
            let query = &queries[i % queries.len()];
            let page = index.list(query).expect("list");
            let found = page.runs.iter().filter(|r| r.id == moving.id).count();
            if found != 1 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                panic!("list {i} ({query:?}) returned the moving run {found} times");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
