//! What the `schedules` tests share: fixtures, servers and helpers.

use crate::common;
use common::{Server, CONFIG};
use serde_json::Value;
use std::time::Duration;

/// `CONFIG` with the seconds test mode on.
pub(super) fn seconds_config() -> String {
    format!("{CONFIG}\n[schedules]\nseconds = true\n")
}

pub(super) async fn send(
    server: &Server,
    method: reqwest::Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .client
        .request(method, server.api(path))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub(super) async fn create(server: &Server, body: Value) -> Value {
    let (status, v) = server.post(&server.key, "/agent/schedules", body).await;
    assert_eq!(status, 201, "{v}");
    v
}

/// The runs a schedule made, from the runs list filtered by `schedule_id`, oldest first; each
/// names the schedule in its `schedule`.
pub(super) async fn runs_of(server: &Server, schedule_id: &str) -> Vec<Value> {
    let (status, v) = server
        .get(
            &server.key,
            &format!("/agent/runs?limit=500&sort_order=asc&schedule_id={schedule_id}"),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let runs = v["runs"].as_array().expect("runs").clone();
    for run in &runs {
        assert_eq!(run["schedule"]["schedule_id"], schedule_id, "{run}");
        assert_eq!(run["source"], "SCHEDULED_AGENT", "{run}");
    }
    runs
}

/// The time `secs` seconds from now as a 6-field expression that matches it once a day (UTC).
pub(super) fn once_at(secs: u64) -> (String, std::time::SystemTime) {
    let at = std::time::SystemTime::now() + Duration::from_secs(secs);
    let since = at
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs();
    let (s, m, h) = (since % 60, since / 60 % 60, since / 3600 % 24);
    (format!("{s} {m} {h} * * *"), at)
}
