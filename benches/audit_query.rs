//! The audit index at scale: builds a store of `RUNS` runs (default 100,000) of 10 events each
//! through the library (log appends, then the index's rebuild, which writes the audit trees),
//! and times the first page (100 events) of the audit queries `GET /api/v1/audit/events`
//! answers, each filter on its own and combined, over one team and over every team.
//!
//! Run with `RUNS=1000000 cargo bench --bench audit_query` (1M runs, 10M events: several GB of
//! disk and minutes to build; `DIR=` keeps the store in that directory and reuses it on the next
//! run). A measurement, not a test: it asserts nothing about time. The target is a first page in
//! ≤ 200 ms at 1M runs / 10M events (issue #38).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use runledger::domain::{
    AgentConfig, Creator, CreatorKind, Event, FollowupMode, RunAdmitted, RunCreated, RunId,
    SourceType, Timestamp,
};
use runledger::projection::{AuditQuery, Index};
use runledger::store::{Envelope, Options, Store};

const T0: u64 = 1_763_000_000_000;
const TEAMS: u64 = 10;
const KEYS_PER_TEAM: u64 = 100;
/// Runs a second of the history: 1M runs span about 3 hours.
const RUNS_PER_SECOND: u64 = 100;

fn team(i: u64) -> String {
    format!("team-{}", i % TEAMS)
}

/// The key that created run `i` (every team has its own keys).
fn creator(i: u64) -> String {
    format!("key-{}-{}", i % TEAMS, (i / TEAMS) % KEYS_PER_TEAM)
}

/// Run `i`'s ten events: created, started, three follow-ups and their delivery, a requeue, a
/// second start, and its end: one run in 10 cancelled by another key of its team (every run
/// of `team-3`), one in 20 failed (half of `team-7`'s), the rest succeeded.
fn history(i: u64) -> Vec<Envelope> {
    let at = T0 + i * 1000 / RUNS_PER_SECOND;
    let id = RunId::new(Timestamp(at), u128::from(i) + 1);
    let by = creator(i);
    let mut events = vec![Event::Admitted(RunAdmitted {
        created: RunCreated {
            title: format!("run {i}"),
            prompt: "Fix the flaky test".into(),
            config: AgentConfig {
                environment_id: Some("demo".into()),
                ..AgentConfig::default()
            },
            creator: Creator {
                kind: CreatorKind::User,
                uid: by.clone(),
                display_name: by.clone(),
            },
            source: SourceType::Api,
            metadata: BTreeMap::new(),
        },
        team: team(i),
        sealed: None,
    })];
    events.push(Event::Started { execution: 1 });
    for n in 0..3 {
        events.push(Event::FollowupReceived {
            message: format!("and also {n}"),
            mode: FollowupMode::Normal,
            by: by.clone(),
        });
    }
    events.push(Event::FollowupsDelivered {
        execution: 1,
        count: 3,
    });
    events.push(Event::Requeued { execution: 1 });
    events.push(Event::Started { execution: 2 });
    events.push(Event::FollowupsDelivered {
        execution: 2,
        count: 0,
    });
    events.push(if i % 10 == 3 {
        Event::Cancelled {
            by: format!("key-{}-{}", i % TEAMS, (i / TEAMS + 1) % KEYS_PER_TEAM),
        }
    } else if i % 20 == 7 {
        Event::Failed {
            execution: 2,
            status: runledger::domain::StatusMessage {
                message: "setup failed".into(),
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(false),
            },
        }
    } else {
        Event::Succeeded { execution: 2 }
    });
    events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| Envelope {
            run_id: id,
            seq: seq as u64,
            at: Timestamp(at + seq as u64 * 7),
            event,
            origin: None,
        })
        .collect()
}

fn build(store: &Store, runs: u64) -> Duration {
    let started = Instant::now();
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..runs {
        batch.extend(history(i));
        if batch.len() >= 10_000 {
            store.append(&batch).expect("append");
            batch.clear();
        }
        if i > 0 && i % 100_000 == 0 {
            eprintln!("  appended {i} runs ({:.0?})", started.elapsed());
        }
    }
    store.append(&batch).expect("append");
    store.sync_blocking().expect("sync");
    started.elapsed()
}

/// The first page of `query` (100 events): the time of the first ask (the cache as the build
/// left it) and the median of five more.
fn time_page(index: &Index, store: &Store, name: &str, query: &AuditQuery) {
    let mut times = Vec::new();
    let mut answered = 0;
    for _ in 0..6 {
        let started = Instant::now();
        let page = index.audit_page(store, query, None, 100).expect("page");
        times.push(started.elapsed());
        answered = page.items.len();
    }
    let first = times[0];
    let mut warm = times[1..].to_vec();
    warm.sort();
    println!(
        "{name:<58} {answered:>4} events  first {:>8.2} ms  median {:>8.2} ms",
        first.as_secs_f64() * 1e3,
        warm[warm.len() / 2].as_secs_f64() * 1e3
    );
}

fn main() {
    let runs: u64 = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let scratch;
    let dir = match std::env::var_os("DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            scratch = tempfile::tempdir().expect("tempdir");
            scratch.path().to_path_buf()
        }
    };
    let options = Options {
        cache_bytes: 512 << 20,
        ..Options::default()
    };
    let store = Store::open(&dir, &options).expect("store");
    let index = Index::open(store.db()).expect("index");
    if index.len() as u64 != runs {
        println!(
            "building {runs} runs, {} events in {}",
            runs * 10,
            dir.display()
        );
        let appended = build(&store, runs);
        println!("appended the log in {:.1} s", appended.as_secs_f64());
        let rebuilt = index.rebuild(&store).expect("rebuild");
        println!(
            "rebuilt the index and the audit index in {:.1} s (+ {:.1} s dropping the old)",
            rebuilt.build.as_secs_f64(),
            rebuilt.drop.as_secs_f64()
        );
        store.sync_blocking().expect("sync");
    } else {
        println!("reusing the store of {runs} runs in {}", dir.display());
    }
    let last = runs - 1;
    let end = T0 + last * 1000 / RUNS_PER_SECOND;
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut query = AuditQuery::default();
        f(&mut query);
        query
    };
    let one_team = Some(team(3));
    let rare_key = creator(last / 2);
    let cases: Vec<(&str, AuditQuery)> = vec![
        ("every team, no filter", q(&|_| {})),
        ("one team, no filter", q(&|x| x.team = one_team.clone())),
        (
            "every team, type=Cancelled",
            q(&|x| x.types = vec!["Cancelled".into()]),
        ),
        (
            "one team, type=Cancelled",
            q(&|x| {
                x.team = one_team.clone();
                x.types = vec!["Cancelled".into()];
            }),
        ),
        (
            "every team, type=Failed&type=Cancelled",
            q(&|x| x.types = vec!["Failed".into(), "Cancelled".into()]),
        ),
        (
            "one team, actor=<one key>",
            q(&|x| {
                x.team = Some(team(last / 2));
                x.actor = Some(rare_key.clone());
            }),
        ),
        (
            "every team, actor=<one key>&type=Cancelled",
            q(&|x| {
                x.actor = Some(rare_key.clone());
                x.types = vec!["Cancelled".into()];
            }),
        ),
        (
            "every team, type=Failed, until=<the middle>",
            q(&|x| {
                x.types = vec!["Failed".into()];
                x.until = Some(Timestamp(T0 + (end - T0) / 2));
            }),
        ),
        (
            "one team, since/until=<an hour's tenth in the middle>",
            q(&|x| {
                x.team = one_team.clone();
                x.since = Some(Timestamp(T0 + (end - T0) / 2));
                x.until = Some(Timestamp(T0 + (end - T0) / 2 + 360_000));
            }),
        ),
        (
            "every team, run_id=<one run>",
            q(&|x| x.run_id = Some(history(last / 3)[0].run_id)),
        ),
        (
            "every team, actor=<unknown key> (empty answer)",
            q(&|x| x.actor = Some("nobody".into())),
        ),
    ];
    for (name, query) in &cases {
        time_page(&index, &store, name, query);
    }
}
