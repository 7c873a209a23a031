//! `GET /api/v1/audit/events`, its live stream, `GET /api/v1/admin/export` and
//! `runledger audit`, against the real binary: `world` makes two teams with keys and a few
//! runs that every file queries.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{json, Value};

mod cli;
mod crash;
mod export;
mod filters;
mod follow;
mod upgrade;

/// A key as a test uses it: its secret and its id.
pub struct TestKey {
    pub secret: String,
    pub id: String,
}

/// The runs and keys of `world`: team `default` (the admin key and `alice`) and team `b`
/// (`bob`). Alice's run `a_done` succeeds, her run `a_cancelled` is cancelled by the admin
/// key, and Bob's run `b_cancelled` is cancelled by Bob.
pub struct World {
    pub admin: TestKey,
    pub alice: TestKey,
    pub bob: TestKey,
    pub a_done: String,
    pub a_cancelled: String,
    pub b_cancelled: String,
}

pub async fn key(s: &Server, name: &str, team: Option<&str>) -> TestKey {
    let mut body = json!({ "name": name });
    if let Some(team) = team {
        body["team"] = json!(team);
    }
    let (status, v) = s.post(&s.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    TestKey {
        secret: v["key"].as_str().expect("key").to_string(),
        id: v["id"].as_str().expect("id").to_string(),
    }
}

pub async fn create(s: &Server, key: &TestKey, environment: &str) -> String {
    let (status, v) = s
        .post(
            &key.secret,
            "/agent/runs",
            json!({"prompt": "audit me", "config": {"environment_id": environment}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v["run_id"].as_str().expect("run_id").to_string()
}

pub async fn cancel(s: &Server, key: &TestKey, id: &str) {
    let (status, v) = s
        .post(&key.secret, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {v}");
}

/// Polls run `id` with `key` until it is in `state`.
pub async fn wait_state(s: &Server, key: &TestKey, id: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, v) = s.get(&key.secret, &format!("/agent/runs/{id}")).await;
        if status == 200 && v["state"] == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "run {id} never became {state}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn world(s: &Server) -> World {
    s.wait_ready().await;
    let (status, v) = s.post(&s.key, "/admin/teams", json!({"name": "b"})).await;
    assert_eq!(status, 201, "{v}");
    let (_, keys) = s.get(&s.key, "/admin/keys").await;
    let admin_id = keys["keys"][0]["id"]
        .as_str()
        .expect("admin id")
        .to_string();
    let admin = TestKey {
        secret: s.key.clone(),
        id: admin_id,
    };
    let alice = key(s, "alice", None).await;
    let bob = key(s, "bob", Some("b")).await;
    let a_done = create(s, &alice, "fast").await;
    let a_cancelled = create(s, &alice, "slow").await;
    let b_cancelled = create(s, &bob, "slow").await;
    cancel(s, &admin, &a_cancelled).await;
    cancel(s, &bob, &b_cancelled).await;
    wait_state(s, &alice, &a_done, "SUCCEEDED").await;
    wait_state(s, &alice, &a_cancelled, "CANCELLED").await;
    wait_state(s, &bob, &b_cancelled, "CANCELLED").await;
    World {
        admin,
        alice,
        bob,
        a_done,
        a_cancelled,
        b_cancelled,
    }
}

/// `GET /audit/events?{query}` with `key`: (status, answer).
pub async fn audit(s: &Server, key: &TestKey, query: &str) -> (u16, Value) {
    s.get(&key.secret, &format!("/audit/events?{query}")).await
}

/// The events of an answer.
pub fn events(v: &Value) -> Vec<Value> {
    v["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {v}"))
        .clone()
}

/// (run_id, type) of each event of an answer, in its order.
pub fn summary(v: &Value) -> Vec<(String, String)> {
    events(v)
        .iter()
        .map(|e| {
            (
                e["run_id"].as_str().unwrap_or("").to_string(),
                e["type"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}
