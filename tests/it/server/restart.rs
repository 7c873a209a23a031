//! A restart fails lost executions and starts queued runs; the list's filters and the environments.

use super::support::*;
use crate::common;
use common::{cli, Server};
use serde_json::{json, Value};

#[tokio::test]
async fn restart_fails_lost_executions_and_starts_queued_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(dir.path(), common::CONFIG);
    let key = s.key.clone();
    s.wait_ready().await;
    let single = json!({"environment_id": "single"});
    let running = s
        .create(json!({"prompt": "running", "config": single}))
        .await;
    s.wait_state(&running, "INPROGRESS").await;
    let queued = s
        .create(json!({"prompt": "queued", "config": single}))
        .await;
    let mut acknowledged = vec![running.clone(), queued.clone()];
    for i in 0..20 {
        acknowledged.push(s.create(json!({"prompt": format!("bulk {i}")})).await);
    }
    s.kill();

    // The CLI refuses to read a directory a server holds, and says why.
    let mut s = Server::start_in(dir.path(), common::CONFIG);
    s.key = key;
    let data = s.data_dir.to_str().expect("utf8").to_string();
    let (ok, _, err) = cli(&["--data-dir", &data, "events", &running], &[]);
    assert!(!ok);
    assert!(err.contains("held by a running runledger server"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    s.wait_ready().await;
    for id in &acknowledged {
        s.run(id).await;
    }
    let lost = s.wait_state(&running, "FAILED").await;
    assert_eq!(
        lost["status_message"]["error_code"], "internal_error",
        "{lost}"
    );
    assert_eq!(lost["status_message"]["retryable"], true);
    s.wait_state(&queued, "INPROGRESS").await;
    s.kill();

    // Offline tools agree with what the server wrote.
    let (ok, out, err) = cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(ok, "{err}");
    assert!(
        out.is_empty() && err.contains("0 differences"),
        "{out}{err}"
    );
    let (ok, out, _) = cli(&["--data-dir", &data, "events", &running, "--json"], &[]);
    assert!(ok);
    let types: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(types, ["Created", "Started", "Failed"]);
    let (ok, out, err) = cli(&["--data-dir", &data, "export"], &[]);
    assert!(ok, "{err}");
    let exported = out
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok())
        .count();
    assert!(exported >= acknowledged.len(), "{exported}");
    let (ok, _, err) = cli(&["--data-dir", &data, "replay"], &[]);
    assert!(ok && err.contains("rebuilt the read index"), "{err}");
    // Where the time went, for an operator timing a rebuild.
    assert!(
        err.contains("s to build it, ") && err.contains("s to drop the previous one"),
        "{err}"
    );
    let (ok, _, err) = cli(&["--data-dir", &data, "replay", "--cache-mb", "16"], &[]);
    assert!(ok && err.contains("rebuilt the read index"), "{err}");
    let (ok, _, err) = cli(&["--data-dir", &data, "replay", "--cache-mb", "0"], &[]);
    assert!(!ok && err.contains("--cache-mb"), "{err}");
}

#[tokio::test]
async fn list_filters_and_environments() {
    let s = Server::start();
    s.wait_ready().await;
    let a = s.create(json!({"prompt": "alpha bug", "config": {"name": "nightly", "model_id": "m1"}, "metadata": {"team": "core"}})).await;
    let b = s
        .create(json!({"prompt": "beta", "title": "Beta", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&a, "SUCCEEDED").await;
    let ids = |v: &Value| -> Vec<String> {
        v["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["run_id"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let (_, v) = s.get(&s.key, "/agent/runs?name=nightly").await;
    assert_eq!(ids(&v), [a.as_str()]);
    let (_, v) = s
        .get(
            &s.key,
            "/agent/runs?config_name=nightly&model_id=m1&state=SUCCEEDED",
        )
        .await;
    assert_eq!(ids(&v), [a.as_str()]);
    let (_, v) = s.get(&s.key, "/agent/runs?environment_id=slow").await;
    assert_eq!(ids(&v), [b.as_str()]);
    let (_, v) = s.get(&s.key, "/agent/runs?metadata%5Bteam%5D=core").await;
    assert_eq!(ids(&v), [a.as_str()]);
    let (_, v) = s.get(&s.key, "/agent/runs?q=BUG").await;
    assert_eq!(ids(&v), [a.as_str()]);
    let (_, v) = s
        .get(&s.key, "/agent/runs?sort_by=created_at&sort_order=asc")
        .await;
    assert_eq!(ids(&v), [a.as_str(), b.as_str()]);
    assert_eq!(v["page_info"]["has_next_page"], false);
    let (_, v) = s
        .get(&s.key, "/agent/runs?limit=1&sort_by=title&sort_order=asc")
        .await;
    assert_eq!(
        ids(&v),
        [a.as_str()],
        "titles sort alphabetically ignoring case"
    );
    assert_eq!(v["page_info"]["has_next_page"], true);
    // A title of 256 four-byte characters: an index position longer than a block may hold.
    let long = s
        .create(json!({"prompt": "long", "title": "𝄞".repeat(256), "config": {"environment_id": "slow"}}))
        .await;
    let (_, v) = s
        .get(&s.key, "/agent/runs?limit=1&sort_by=title&sort_order=desc")
        .await;
    assert_eq!(ids(&v), [long.as_str()], "{v}");
    let (_, v) = s
        .get(&s.key, "/agent/runs?limit=2&sort_by=title&sort_order=asc")
        .await;
    assert_eq!(ids(&v), [a.as_str(), b.as_str()], "{v}");

    let c = s
        .create(json!({"skill": "acme/tools:deploy", "config": {"environment_id": "slow"}}))
        .await;
    let run_c = s.run(&c).await;
    assert_eq!(run_c["agent_config"]["name"], "deploy", "{run_c}");
    let (_, v) = s
        .get(&s.key, "/agent/runs?skill_spec=acme%2Ftools%3Adeploy")
        .await;
    assert_eq!(ids(&v), [c.as_str()]);
    let (_, v) = s
        .get(&s.key, "/agent/runs?skill=acme%2Ftools%3Adeploy&q=tools")
        .await;
    assert_eq!(ids(&v), [c.as_str()]);
    // Things our runs never have match nothing; they do not widen the result.
    for none in [
        "schedule_id=s1",
        "artifact_type=PLAN",
        "artifact_type=EXTERNAL_REFERENCE",
        "factory_uid=x",
        "state=BLOCKED",
    ] {
        let (st, v) = s.get(&s.key, &format!("/agent/runs?{none}")).await;
        assert_eq!(st, 200, "{v}");
        assert!(ids(&v).is_empty(), "{none}: {v}");
    }
    // A schedule id in the right shape is a filter: these runs were made by no schedule (a run
    // id, in either case, is no schedule's id); an empty one is refused like any filter's.
    for id in [a.clone(), a.to_lowercase()] {
        let (st, v) = s
            .get(&s.key, &format!("/agent/runs?schedule_id={id}"))
            .await;
        assert_eq!(st, 200, "{v}");
        assert!(ids(&v).is_empty(), "{id}: {v}");
    }
    let (st, v) = s.get(&s.key, "/agent/runs?schedule_id=").await;
    assert_problem(st, &v, 400, "invalid_request");
    let (_, v) = s
        .get(&s.key, "/agent/runs?state=ERROR&state=SUCCEEDED")
        .await;
    assert_eq!(ids(&v), [a.as_str()]);

    let (st, envs) = s.get(&s.key, "/agent/environments").await;
    assert_eq!(st, 200);
    let uids: Vec<&str> = envs["environments"]
        .as_array()
        .expect("envs")
        .iter()
        .filter_map(|e| e["uid"].as_str())
        .collect();
    assert_eq!(uids, ["fast", "slow", "single"]);
}
