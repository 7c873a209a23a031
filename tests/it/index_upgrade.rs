//! The read index of a store written before teams (layout 7) is rebuilt when the server starts:
//! its runs join the team `default`, each team's key lists only its own team's runs, and the
//! startup recovery still finds the waiting runs of every team. An index of layout 9, from
//! before runs carried their schedule, is rebuilt too, and lists by `schedule_id`.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{cli, Server, CONFIG};
use runledger::domain::{
    decide, evolve, AgentConfig, Command, Creator, CreatorKind, Event, Run, RunCreated, RunId,
    SourceType, Timestamp,
};
use runledger::projection::keys;
use runledger::store::{self, Store};
use serde_json::{json, Value};

/// Writes a store as a build of layout 7 left it: legacy `Created` runs (cancelled, so that
/// nothing executes them), the layout marker 7, and index trees in that layout's shape (a
/// `F field hash` block with no team, a row in the encoding of then), which the new build must
/// not trust. Returns the run ids, oldest first.
fn write_layout_7_store(data_dir: &std::path::Path) -> Vec<String> {
    let store = Store::open(
        data_dir,
        &store::Options {
            cache_bytes: 8 << 20,
            ..store::Options::default()
        },
    )
    .expect("open store");
    let mut ids = Vec::new();
    for i in 0..3u64 {
        let at = Timestamp(1_700_000_000_000 + i * 1000);
        let id = RunId::new(at, u128::from(i) + 1);
        let created = Event::Created(RunCreated {
            title: format!("legacy {i}"),
            prompt: format!("legacy prompt {i}"),
            config: AgentConfig {
                environment_id: Some("fast".into()),
                ..AgentConfig::default()
            },
            creator: Creator {
                kind: CreatorKind::User,
                uid: "old-key".into(),
                display_name: "old".into(),
            },
            source: SourceType::Api,
            metadata: BTreeMap::new(),
        });
        let run = evolve(None, id, &created, at).expect("a run");
        store
            .append(&store::envelopes(id, 0, at, vec![created], None))
            .expect("append");
        let cancel = decide(Some(&run), Command::Cancel { by: "old".into() }).expect("cancel");
        store
            .append(&store::envelopes(
                id,
                run.next_seq,
                Timestamp(at.0 + 1),
                cancel.events,
                None,
            ))
            .expect("append");
        ids.push(id.to_string());
    }
    let db = store.db();
    // Layout 7's `F State hash(QUEUED)` range, holding a run that is not queued any more.
    let mut block_key = vec![keys::FILTER, keys::Field::State as u8];
    block_key.extend_from_slice(&keys::value_hash(keys::Field::State, "QUEUED"));
    let mut position = 1_700_000_000_000u64.to_be_bytes().to_vec();
    position.extend_from_slice(&RunId::new(Timestamp(1_700_000_000_000), 1).to_bytes());
    block_key.extend_from_slice(&position);
    let mut block = vec![position.len() as u8];
    block.extend_from_slice(&position);
    let index = db.open_tree("run_index").expect("index tree");
    index.insert(block_key, block).expect("block");
    let rows = db.open_tree("runs").expect("rows tree");
    rows.insert(
        RunId::new(Timestamp(1_700_000_000_000), 1).to_bytes(),
        b"a row of layout 7".as_slice(),
    )
    .expect("row");
    db.insert("projection_layout", &7u32.to_be_bytes())
        .expect("marker");
    db.flush().expect("flush");
    ids
}

fn ids(v: &Value) -> Vec<String> {
    v["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("no runs in {v}"))
        .iter()
        .map(|r| r["run_id"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Polls run `id` with `key` until it is in `state`.
async fn wait_state(s: &Server, key: &str, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, v) = s.get(key, &format!("/agent/runs/{id}")).await;
        if status == 200 && v["state"] == state {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "run {id} never became {state}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_layout_7_store_upgrades_with_its_runs_in_default_and_lists_stay_in_their_team() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let legacy = write_layout_7_store(&tmp.path().join("data"));
    let mut s = Server::start_in(tmp.path(), CONFIG);
    s.wait_ready().await;
    let admin = s.key.clone();
    assert!(!admin.is_empty(), "the first start prints an admin key");

    // The legacy runs are the default team's, in every order the index serves.
    let newest_first: Vec<String> = legacy.iter().rev().cloned().collect();
    for (query, want) in [
        ("", &newest_first),
        ("?sort_by=created_at&sort_order=asc", &legacy),
        ("?sort_by=created_at&sort_order=desc", &newest_first),
        ("?sort_by=title&sort_order=asc", &legacy),
        ("?state=CANCELLED", &newest_first),
        ("?creator=old-key&limit=1", &vec![legacy[2].clone()]),
    ] {
        let (status, v) = s.get(&admin, &format!("/agent/runs{query}")).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(&ids(&v), want, "list{query}");
    }
    // Layout 7's stale entry is gone with its layout.
    let (_, v) = s.get(&admin, "/agent/runs?state=QUEUED").await;
    assert_eq!(ids(&v), Vec::<String>::new());

    // A second team: its key lists its own runs only, and the default team's key never sees
    // them.
    let (status, v) = s
        .post(&admin, "/admin/teams", json!({"name": "infra"}))
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = s
        .post(
            &admin,
            "/admin/keys",
            json!({"name": "ops", "team": "infra"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let infra = v["key"].as_str().expect("key").to_string();
    let (_, v) = s.get(&infra, "/agent/runs").await;
    assert_eq!(ids(&v), Vec::<String>::new(), "a new team has no runs");
    let mut theirs = Vec::new();
    for prompt in ["first", "second"] {
        let (status, v) = s
            .post(
                &infra,
                "/agent/runs",
                json!({"prompt": prompt, "config": {"environment_id": "single"}}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        theirs.push(v["run_id"].as_str().expect("run_id").to_string());
    }
    wait_state(&s, &infra, &theirs[0], "INPROGRESS").await;
    for query in [
        "",
        "?sort_by=created_at&sort_order=asc",
        "?sort_by=title&sort_order=asc",
    ] {
        let (_, v) = s.get(&infra, &format!("/agent/runs{query}")).await;
        let mut got = ids(&v);
        got.sort();
        let mut want = theirs.clone();
        want.sort();
        assert_eq!(got, want, "infra list{query}");
        let (_, v) = s.get(&admin, &format!("/agent/runs{query}")).await;
        let mut got = ids(&v);
        got.sort();
        assert_eq!(got, legacy, "default list{query}");
    }
    // The state counts of /metrics are the whole instance's.
    let metrics = s.metrics().await;
    for line in [
        "runledger_runs{state=\"CANCELLED\"} 3",
        "runledger_runs{state=\"INPROGRESS\"} 1",
        "runledger_runs{state=\"QUEUED\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    s.kill();

    // The index the server kept equals a rebuild from the log.
    let data = s.data_dir.to_string_lossy().to_string();
    let (ok, out, err) = cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(ok && err.contains("0 differences"), "{out}{err}");

    // Recovery walks every team's runs: infra's lost execution fails, its queued run starts.
    let mut s = Server::start_in(tmp.path(), CONFIG);
    s.wait_ready().await;
    let lost = wait_state(&s, &infra, &theirs[0], "FAILED").await;
    assert_eq!(lost["status_message"]["retryable"], true, "{lost}");
    wait_state(&s, &infra, &theirs[1], "INPROGRESS").await;
    s.kill();
}

/// Writes a store as a build of layout 9 would hold scheduled runs (written by this build's
/// domain, since layout 9 had none) under an index marked layout 9 whose rows lack
/// `Run::schedule`: two cancelled runs of schedule `schedule`, one of another schedule, and
/// one run admitted as `SCHEDULED_AGENT` without a schedule. Returns the run ids in that order.
fn write_layout_9_store_with_scheduled_runs(
    data_dir: &std::path::Path,
    schedule: RunId,
    other: RunId,
) -> Vec<RunId> {
    use runledger::domain::{RunAdmitted, RunSchedule};
    let store = Store::open(
        data_dir,
        &store::Options {
            cache_bytes: 8 << 20,
            ..store::Options::default()
        },
    )
    .expect("open store");
    let rows = store.db().open_tree("runs").expect("rows tree");
    let mut ids = Vec::new();
    for (i, made_by) in [Some(schedule), Some(schedule), Some(other), None]
        .into_iter()
        .enumerate()
    {
        let at = Timestamp(1_764_000_000_000 + i as u64 * 1000);
        let id = RunId::new(at, i as u128 + 1);
        let admitted = RunAdmitted::from_legacy(RunCreated {
            title: format!("nightly {i}"),
            prompt: "update the dependencies".into(),
            config: AgentConfig {
                environment_id: Some("fast".into()),
                ..AgentConfig::default()
            },
            creator: Creator {
                kind: CreatorKind::User,
                uid: "old-key".into(),
                display_name: "old".into(),
            },
            source: SourceType::ScheduledAgent,
            metadata: BTreeMap::new(),
        });
        let create = decide(
            None,
            Command::create(
                admitted,
                Vec::new(),
                made_by.map(|schedule_id| RunSchedule {
                    schedule_id,
                    schedule_name: format!("Nightly \"{i}\""),
                    cron_schedule: "0 3 * * *".into(),
                    due: Timestamp(at.0 - 500),
                }),
            ),
        )
        .expect("create");
        let run = create
            .events
            .iter()
            .fold(None, |r, e| evolve(r, id, e, at))
            .expect("a run");
        store
            .append(&store::envelopes(id, 0, at, create.events, None))
            .expect("append");
        let cancel = decide(Some(&run), Command::Cancel { by: "old".into() }).expect("cancel");
        let cancelled = cancel
            .events
            .iter()
            .try_fold(run.clone(), |r, e| {
                evolve(Some(r), id, e, Timestamp(at.0 + 1))
            })
            .expect("cancelled");
        store
            .append(&store::envelopes(
                id,
                run.next_seq,
                Timestamp(at.0 + 1),
                cancel.events,
                None,
            ))
            .expect("append");
        // The row as layout 9 encoded it: the same fields but the last (`None`, one byte).
        let mut row = postcard::to_allocvec(&Run {
            schedule: None,
            ..cancelled
        })
        .expect("row");
        row.pop();
        rows.insert(id.to_bytes(), row).expect("row");
        ids.push(id);
    }
    store
        .db()
        .insert("projection_layout", &9u32.to_be_bytes())
        .expect("marker");
    store.db().flush().expect("flush");
    ids
}

/// A store of layout 9 is rebuilt at the start of layout 10: its scheduled runs carry their
/// `schedule` on the wire, and the `schedule_id` filter finds exactly a schedule's runs from the
/// rebuilt index, in any spelling of the id, alone or with other filters and in every order.
#[tokio::test]
async fn a_layout_9_store_upgrades_and_lists_runs_by_schedule() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let schedule = RunId::new(Timestamp(1_763_000_000_000), 77);
    let other = RunId::new(Timestamp(1_763_000_000_000), 78);
    let runs = write_layout_9_store_with_scheduled_runs(&tmp.path().join("data"), schedule, other);
    let text: Vec<String> = runs.iter().map(RunId::to_string).collect();
    let mut s = Server::start_in(tmp.path(), CONFIG);
    s.wait_ready().await;
    let admin = s.key.clone();

    let (status, v) = s.get(&admin, &format!("/agent/runs/{}", text[1])).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["source"], "SCHEDULED_AGENT");
    assert_eq!(
        v["schedule"],
        json!({
            "schedule_id": schedule.to_string(),
            "schedule_name": "Nightly \"1\"",
            "cron_schedule": "0 3 * * *",
        })
    );
    let (_, v) = s.get(&admin, &format!("/agent/runs/{}", text[3])).await;
    assert_eq!(v["source"], "SCHEDULED_AGENT");
    assert!(v.get("schedule").is_none(), "{v}");

    let mine = vec![text[1].clone(), text[0].clone()];
    for (query, want) in [
        (format!("schedule_id={schedule}"), mine.clone()),
        (
            format!("schedule_id={}", schedule.to_string().to_lowercase()),
            mine.clone(),
        ),
        (
            format!("schedule_id={schedule}&sort_by=created_at&sort_order=asc"),
            vec![text[0].clone(), text[1].clone()],
        ),
        (
            format!("schedule_id={schedule}&sort_by=title&sort_order=desc"),
            mine.clone(),
        ),
        (
            format!("schedule_id={schedule}&state=CANCELLED&source=SCHEDULED_AGENT"),
            mine.clone(),
        ),
        (
            format!("schedule_id={schedule}&limit=1"),
            vec![text[1].clone()],
        ),
        (format!("schedule_id={schedule}&state=QUEUED"), vec![]),
        (format!("schedule_id={other}"), vec![text[2].clone()]),
        // Neither a run id nor anything but a ULID names a schedule.
        (format!("schedule_id={}", text[3]), vec![]),
        (
            "schedule_id=7f7c2b1e-8a0a-4c1e-9d35-2f0f3c7b9a10".into(),
            vec![],
        ),
        (
            "source=SCHEDULED_AGENT".into(),
            text.iter().rev().cloned().collect(),
        ),
    ] {
        let (status, v) = s.get(&admin, &format!("/agent/runs?{query}")).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(ids(&v), want, "{query}");
    }
    // Paging through a schedule's runs visits each once.
    let (_, v) = s
        .get(
            &admin,
            &format!("/agent/runs?schedule_id={schedule}&limit=1"),
        )
        .await;
    let cursor = v["page_info"]["next_cursor"].as_str().expect("a next page");
    let (_, v) = s
        .get(
            &admin,
            &format!("/agent/runs?schedule_id={schedule}&limit=1&cursor={cursor}"),
        )
        .await;
    assert_eq!(ids(&v), [text[0].clone()]);
    assert_eq!(v["page_info"]["has_next_page"], false);
    // Another team's key does not see them.
    let (status, v) = s
        .post(&admin, "/admin/teams", json!({"name": "infra"}))
        .await;
    assert_eq!(status, 201, "{v}");
    let (_, v) = s
        .post(
            &admin,
            "/admin/keys",
            json!({"name": "ops", "team": "infra"}),
        )
        .await;
    let infra = v["key"].as_str().expect("key").to_string();
    let (_, v) = s
        .get(&infra, &format!("/agent/runs?schedule_id={schedule}"))
        .await;
    assert_eq!(ids(&v), Vec::<String>::new());
    // The events API shows the firing.
    let (_, v) = s
        .get(&admin, &format!("/agent/runs/{}/events", text[0]))
        .await;
    assert_eq!(v["events"][1]["type"], "Scheduled", "{v}");
    assert_eq!(v["events"][1]["seq"], 1);
    assert_eq!(
        v["events"][1]["data"]["schedule_id"],
        schedule.to_string().as_str()
    );
    assert_eq!(v["events"][1]["data"]["due"], "2025-11-24T15:59:59.500Z");
    s.kill();

    // The index the server rebuilt equals a rebuild from the log.
    let data = s.data_dir.to_string_lossy().to_string();
    let (ok, out, err) = cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(ok, "{out}{err}");
}
