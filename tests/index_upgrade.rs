//! The read index of a store written before teams (layout 7) is rebuilt when the server starts:
//! its runs join the team `default`, each team's key lists only its own team's runs, and the
//! startup recovery still finds the waiting runs of every team.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{cli, Server, CONFIG};
use runledger::domain::{
    decide, evolve, AgentConfig, Command, Creator, CreatorKind, Event, RunCreated, RunId,
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
            .append(&store::envelopes(id, 0, at, vec![created]))
            .expect("append");
        let cancel = decide(Some(&run), Command::Cancel { by: "old".into() }).expect("cancel");
        store
            .append(&store::envelopes(
                id,
                run.next_seq,
                Timestamp(at.0 + 1),
                cancel.events,
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
