//! Event polling and reported lifecycle events over raw HTTP (`/api/v1/agent/events…`),
//! against the real binary with demo agents: the lifecycle and message events of watched runs
//! in the order of a sequence that only grows across the instance (and across a restart),
//! paging with `since`, reports checked against the run's state machine, and the refusals.

use crate::common;

use common::Server;
use serde_json::{json, Value};

async fn poll(s: &Server, key: &str, query: &str) -> (u16, Value) {
    s.get(key, &format!("/agent/events?{query}")).await
}

async fn events_of(s: &Server, runs: &[&str], since: u64) -> Vec<Value> {
    let query: String = runs.iter().map(|r| format!("run_ids={r}&")).collect();
    let (status, v) = poll(s, &s.key, &format!("{query}since={since}&limit=500")).await;
    assert_eq!(status, 200, "{v}");
    v.as_array().expect("array").clone()
}

fn sequences(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["sequence"].as_u64().expect("sequence"))
        .collect()
}

fn kinds(events: &[Value], run: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["run_id"] == run)
        .map(|e| e["event_type"].as_str().expect("type").to_string())
        .collect()
}

async fn report(s: &Server, run: &str, body: Value) -> (u16, Value) {
    s.post(&s.key, &format!("/agent/events/{run}"), body).await
}

#[tokio::test]
async fn polling_follows_one_growing_sequence_and_reports_drive_the_state_machine() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut s = Server::start_in(tmp.path(), common::CONFIG);
    let slow = s
        .create(json!({"prompt": "slow", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&slow, "INPROGRESS").await;
    let fast = s.create(json!({"prompt": "fast"})).await;
    s.wait_state(&fast, "SUCCEEDED").await;

    let all = events_of(&s, &[&slow, &fast], 0).await;
    let seq = sequences(&all);
    assert!(seq.windows(2).all(|w| w[0] < w[1]), "growing: {seq:?}");
    assert_eq!(kinds(&all, &slow), ["run_in_progress"]);
    assert_eq!(kinds(&all, &fast), ["run_in_progress", "run_succeeded"]);
    let started = all
        .iter()
        .find(|e| e["run_id"] == fast.as_str())
        .expect("fast");
    assert_eq!(started["execution_id"], "1");
    assert!(started["ref_id"].is_null());
    assert!(started["occurred_at"].is_string());

    // Paging one at a time with `since` walks the same events.
    let mut walked = Vec::new();
    let mut since = 0;
    loop {
        let (_, page) = poll(
            &s,
            &s.key,
            &format!("run_ids={slow}&run_ids={fast}&since={since}&limit=1"),
        )
        .await;
        let page = page.as_array().expect("array").clone();
        let Some(last) = page.last() else { break };
        since = last["sequence"].as_u64().expect("sequence");
        walked.extend(sequences(&page));
    }
    assert_eq!(walked, seq);

    // A message is a `new_message` of its recipient, its id in `ref_id`.
    let (status, v) = s
        .post(
            &s.key,
            "/agent/messages",
            json!({"to": [slow], "subject": "s", "body": "b", "sender_run_id": fast}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let message = v["message_ids"][0].as_str().expect("id").to_string();
    let new = events_of(&s, &[&slow], since).await;
    assert_eq!(kinds(&new, &slow), ["new_message"]);
    assert_eq!(new[0]["ref_id"], message.as_str());
    let since = new[0]["sequence"].as_u64().expect("sequence");

    // Reports: a confirmation, then the end, each listed once with the reporter's ids.
    let (status, v) = report(
        &s,
        &slow,
        json!({"event_type": "run_in_progress", "execution_id": "worker-1", "ref_id": message}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let confirmed = v["sequence"].as_u64().expect("sequence");
    assert!(confirmed > since);
    let (status, v) = report(&s, &slow, json!({"event_type": "run_succeeded"})).await;
    assert_eq!(status, 200, "{v}");
    let ended = v["sequence"].as_u64().expect("sequence");
    assert!(ended > confirmed);
    s.wait_state(&slow, "SUCCEEDED").await;
    let reported = events_of(&s, &[&slow], since).await;
    assert_eq!(
        kinds(&reported, &slow),
        ["run_in_progress", "run_succeeded"]
    );
    assert_eq!(sequences(&reported), [confirmed, ended]);
    assert_eq!(reported[0]["execution_id"], "worker-1");
    assert_eq!(reported[0]["ref_id"], message.as_str());
    let log = s.events(&slow).await;
    assert!(log
        .iter()
        .any(|e| e["type"] == "LifecycleReported" && e["data"]["event_type"] == "run_succeeded"));

    // A report the state machine contradicts, one that cannot happen here, and bad bodies.
    let (status, v) = report(&s, &fast, json!({"event_type": "run_failed"})).await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["detail"].as_str().expect("detail").contains("SUCCEEDED"),
        "{v}"
    );
    let (status, v) = report(&s, &slow, json!({"event_type": "run_blocked"})).await;
    assert_eq!(status, 422, "{v}");
    for body in [
        json!({"event_type": "run_paused"}),
        json!({}),
        json!({"event_type": "run_in_progress", "execution_id": "x".repeat(300)}),
    ] {
        let (status, v) = report(&s, &slow, body).await;
        assert_eq!(status, 400, "{v}");
    }
    let queued_blocker = s
        .create(json!({"prompt": "b", "config": {"environment_id": "single"}}))
        .await;
    s.wait_state(&queued_blocker, "INPROGRESS").await;
    let queued = s
        .create(json!({"prompt": "q", "config": {"environment_id": "single"}}))
        .await;
    let (status, v) = report(&s, &queued, json!({"event_type": "run_succeeded"})).await;
    assert_eq!(status, 409, "a queued run has no execution to end: {v}");

    // The sequence keeps growing across a restart.
    let before = events_of(&s, &[&slow, &fast, &queued_blocker], 0).await;
    let highest = *sequences(&before).last().expect("some");
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    let key = s.key.clone();
    let mut s = Server::start_in(tmp.path(), common::CONFIG);
    s.key = key;
    s.wait_ready().await;
    let after = s.create(json!({"prompt": "after"})).await;
    s.wait_state(&after, "SUCCEEDED").await;
    let new = events_of(&s, &[&after], 0).await;
    assert!(
        sequences(&new).iter().all(|q| *q > highest),
        "{new:?} after {highest}"
    );
}

#[tokio::test]
async fn polls_refuse_what_they_cannot_answer() {
    let s = Server::start();
    let run = s.create(json!({"prompt": "p"})).await;
    for query in [
        String::new(),
        format!("run_ids={run}&limit=0"),
        format!("run_ids={run}&limit=501"),
        format!("run_ids={run}&since=-1"),
        format!("run_ids={run}&since=9223372036854775808"),
        (0..101)
            .map(|i| format!("run_ids=01BX5ZZKBKACTAV9WEVGEMM{i:03}&"))
            .collect(),
    ] {
        let (status, v) = poll(&s, &s.key, &query).await;
        assert!(status == 400 || status == 404, "{query}: {status} {v}");
        if query.is_empty() || query.contains("limit") || query.contains("since") {
            assert_eq!(status, 400, "{query}: {v}");
        }
    }
    let (status, v) = poll(&s, &s.key, &format!("run_ids={run}&run_ids=../x")).await;
    assert_eq!(status, 404, "{v}");
    // Another team's key: the run does not exist for it.
    let (status, v) = s
        .post(&s.key, "/admin/teams", json!({"name": "infra"}))
        .await;
    assert_eq!(status, 201, "{v}");
    let (_, v) = s
        .post(
            &s.key,
            "/admin/keys",
            json!({"name": "ops", "team": "infra"}),
        )
        .await;
    let other = v["key"].as_str().expect("key").to_string();
    let (status, _) = poll(&s, &other, &format!("run_ids={run}")).await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            &other,
            &format!("/agent/events/{run}"),
            json!({"event_type": "run_cancelled"}),
        )
        .await;
    assert_eq!(status, 404);
}
