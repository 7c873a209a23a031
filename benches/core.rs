//! Micro-benchmarks of the core: record codec, log append, fold, read-index update, and the
//! rendering of a list page as JSON.
//!
//! Run with `cargo bench --bench core` (a few minutes; every group measures for 2-3 s).
//! These are measurements, not tests: nothing here asserts a time. The HTTP load test is
//! `benches/load.sh`; both are described in `docs/performance.md`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use runledger::domain::{
    fold, AgentConfig, Creator, CreatorKind, Event, FollowupMode, Run, RunCreated, RunId, RunState,
    SourceType, StatusMessage, Timestamp,
};
use runledger::projection::Index;
use runledger::store::codec::{decode_run, encode_run};
use runledger::store::{Envelope, Options, Store};

const T0: u64 = 1_763_000_000_000;

/// A created event the size of a typical API create (~250 bytes encoded).
fn created() -> RunCreated {
    RunCreated {
        title: "Fix the flaky integration test in the billing service".into(),
        prompt:
            "The test `billing::invoices::renews_monthly` fails about one run in twenty on CI. \
                 Find the race and fix it; keep the public API unchanged."
                .into(),
        config: AgentConfig {
            name: Some("nightly-fixer".into()),
            model_id: Some("demo".into()),
            base_prompt: None,
            environment_id: Some("demo".into()),
            skill_spec: None,
            mcp_servers: BTreeMap::new(),
        },
        creator: Creator {
            kind: CreatorKind::User,
            uid: "01JD2Q7ZK9X4M3N5P6R7S8T9VW".into(),
            display_name: "admin".into(),
        },
        source: SourceType::Api,
        metadata: BTreeMap::from([("team".to_string(), "payments".to_string())]),
    }
}

fn run_id(n: u64) -> RunId {
    RunId::new(
        Timestamp(T0 + n / 16),
        u128::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
    )
}

fn envelope(id: RunId, seq: u64, event: Event) -> Envelope {
    Envelope {
        run_id: id,
        seq,
        at: Timestamp(T0 + seq),
        origin: None,
        event,
    }
}

/// A run's life in ten events: created, executed, followed up twice, resumed, failed, resumed,
/// succeeded.
fn life(id: RunId) -> Vec<Envelope> {
    let followup = |m: &str| Event::FollowupReceived {
        message: m.into(),
        mode: FollowupMode::Normal,
        by: "01JD2Q7ZK9X4M3N5P6R7S8T9VW".into(),
    };
    let events = vec![
        Event::Created(created()),
        Event::Started { execution: 1 },
        followup("also check the retry path"),
        Event::Succeeded { execution: 1 },
        followup("the test still fails on arm64"),
        Event::Started { execution: 2 },
        Event::Failed {
            execution: 2,
            status: StatusMessage {
                message: "agent exited with status 1".into(),
                error_code: Some("agent_error".into()),
                retryable: Some(true),
            },
        },
        followup("try again with the lock"),
        Event::Started { execution: 3 },
        Event::Succeeded { execution: 3 },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, e)| envelope(id, i as u64, e))
        .collect()
}

fn open_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path(), &Options::default()).expect("open store");
    (dir, store)
}

fn codec(c: &mut Criterion) {
    let record = envelope(run_id(1), 0, Event::Created(created()));
    let bytes = encode_run(&record).expect("encodes");
    let mut g = c.benchmark_group("codec");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(1));
    g.bench_function(format!("encode_created_{}B", bytes.len()), |b| {
        b.iter(|| encode_run(black_box(&record)).expect("encodes"))
    });
    g.bench_function(format!("decode_created_{}B", bytes.len()), |b| {
        b.iter(|| decode_run(black_box(&bytes)).expect("decodes"))
    });
    let small =
        encode_run(&envelope(run_id(1), 1, Event::Started { execution: 1 })).expect("encodes");
    g.bench_function(format!("decode_started_{}B", small.len()), |b| {
        b.iter(|| decode_run(black_box(&small)).expect("decodes"))
    });
    g.finish();
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_append");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    g.throughput(Throughput::Elements(1));
    let template = envelope(run_id(0), 0, Event::Created(created()));

    // Plain inserts: what one append costs before any durability is paid for.
    {
        let (_dir, store) = open_store();
        let mut n = 0u64;
        g.bench_function("created_event_no_sync", |b| {
            b.iter_batched(
                || {
                    n += 1;
                    let mut e = template.clone();
                    e.run_id = run_id(n);
                    [e]
                },
                |batch| store.append(&batch).expect("append"),
                BatchSize::SmallInput,
            )
        });
    }

    // Group commit as the server sees it under load: one flush + fdatasync per 64 appends.
    {
        let (_dir, store) = open_store();
        let mut n = 0u64;
        g.bench_function("created_event_sync_every_64", |b| {
            b.iter_custom(|iters| {
                let batches: Vec<[Envelope; 1]> = (0..iters)
                    .map(|i| {
                        let mut e = template.clone();
                        e.run_id = run_id(n + i + 1);
                        [e]
                    })
                    .collect();
                n += iters;
                let started = Instant::now();
                for (i, batch) in batches.iter().enumerate() {
                    store.append(batch).expect("append");
                    if i % 64 == 63 {
                        store.sync_blocking().expect("sync");
                    }
                }
                store.sync_blocking().expect("sync");
                started.elapsed()
            })
        });
    }
    g.finish();
}

fn folding(c: &mut Criterion) {
    let mut g = c.benchmark_group("fold");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    let log = life(run_id(7));
    g.throughput(Throughput::Elements(log.len() as u64));
    g.bench_function("ten_events", |b| {
        b.iter(|| fold(run_id(7), black_box(&log).iter().map(|e| (&e.event, e.at))).expect("a run"))
    });
    // The same from disk: prefix scan, decode and verify each record, fold (what a run's actor
    // does when it is activated).
    let (_dir, store) = open_store();
    for n in 0..2_000 {
        store.append(&life(run_id(n))).expect("append");
    }
    g.bench_function("load_run_ten_events_from_store", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n = (n + 997) % 2_000;
            store.load_run(run_id(n)).expect("load").expect("exists")
        })
    });
    g.finish();
}

/// The three states a run of the demo environment goes through.
fn states(id: RunId, at: u64) -> [Run; 3] {
    let queued = fold(id, [(&Event::Created(created()), Timestamp(at))]).expect("a run");
    let mut started = queued.clone();
    started.state = RunState::InProgress;
    started.executions = 1;
    started.started_at = Some(Timestamp(at + 2));
    started.execution_started_at = Some(Timestamp(at + 2));
    started.updated_at = Timestamp(at + 2);
    started.next_seq = 2;
    let mut done = started.clone();
    done.state = RunState::Succeeded;
    done.execution_started_at = None;
    done.run_time_ms = 5;
    done.updated_at = Timestamp(at + 7);
    done.next_seq = 3;
    [queued, started, done]
}

fn index(c: &mut Criterion) {
    let mut g = c.benchmark_group("index_apply");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    g.throughput(Throughput::Elements(1));
    let (_dir, store) = open_store();
    let index = Index::open(store.db()).expect("index");
    // A populated index, so that the trees have a realistic depth.
    const PRELOAD: u64 = 50_000;
    for n in 0..PRELOAD {
        let [queued, started, done] = states(run_id(n), T0 + n);
        index.apply(None, &queued).expect("apply");
        index.apply(Some(&queued), &started).expect("apply");
        index.apply(Some(&started), &done).expect("apply");
    }
    let mut n = PRELOAD;
    let mut next = move || {
        n += 1;
        states(run_id(n), T0 + n)
    };
    g.bench_function("create", |b| {
        b.iter_batched(
            &mut next,
            |[queued, _, _]| index.apply(None, &queued).expect("apply"),
            BatchSize::SmallInput,
        )
    });
    // A state change: every entry that carries updated_at moves.
    g.bench_function("state_change", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let [queued, started, _] = next();
                index.apply(None, &queued).expect("apply");
                let t = Instant::now();
                index.apply(Some(&queued), &started).expect("apply");
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

/// A list answer of 20 finished runs rendered as the API's JSON, as `GET /agent/runs` does
/// after its index walk: a steadier figure for that part than an HTTP rate.
fn render(c: &mut Criterion) {
    use runledger::http::render::RenderCache;
    use runledger::http::wire::{Links, ListRunsResponse, PageInfo, RunItem};
    let mut g = c.benchmark_group("render");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    g.throughput(Throughput::Elements(20));
    let runs: Vec<Run> = (0..20)
        .map(|n| {
            let [_, _, done] = states(run_id(n), T0 + n);
            done
        })
        .collect();
    let secret = [7u8; 32];
    g.bench_function("list_page_20", |b| {
        b.iter(|| {
            let links = Links {
                public_url: "http://127.0.0.1:8080",
                secret: &secret,
                now: Timestamp(T0 + 100),
                ttl_secs: 7 * 24 * 3600,
            };
            let page = ListRunsResponse {
                runs: runs.iter().map(|r| RunItem::from(r, &links)).collect(),
                page_info: PageInfo {
                    has_next_page: true,
                    next_cursor: Some("cursor".into()),
                },
            };
            black_box(serde_json::to_vec(&page).expect("json"))
        })
    });
    // What a list answers with: the same page from the render cache, which the server fills
    // with the first answer (finished runs are cached until their next event).
    let cache = RenderCache::new(runledger::http::render::DEFAULT_BUDGET);
    let links = Links {
        public_url: "http://127.0.0.1:8080",
        secret: &secret,
        now: Timestamp(T0 + 100),
        ttl_secs: 7 * 24 * 3600,
    };
    g.bench_function("list_page_20_cached", |b| {
        b.iter(|| {
            let next_cursor = Some("cursor".into());
            let page_info = PageInfo {
                has_next_page: true,
                next_cursor,
            };
            black_box(cache.page(&runs, &page_info, &links).expect("json"))
        })
    });
    g.finish();
}

criterion_group!(benches, codec, append, folding, index, render);
criterion_main!(benches);
