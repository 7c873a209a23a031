//! What the server's tests share: the problem+json check, a single create, a run's id and
//! transcript, a raw create, and a server with keys made offline.

use crate::common;
use common::{cli, Server};
use serde_json::{json, Value};

pub(super) fn assert_problem(status: u16, body: &Value, want_status: u16, code: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["status"], want_status, "{body}");
    assert_eq!(
        body["type"],
        format!("https://docs.warp.dev/reference/api-and-sdk/troubleshooting/errors/{code}"),
        "{body}"
    );
    for field in ["title", "detail", "instance", "error", "trace_id"] {
        assert!(body[field].is_string(), "{field} missing in {body}");
    }
    assert!(body["retryable"].is_boolean(), "{body}");
}

/// Creates a run with `prompt` in the one-slot `single` environment: the create's answer.
pub(super) async fn create_single(s: &Server, prompt: &str) -> Value {
    let (status, body) = s
        .post(
            &s.key,
            "/agent/runs",
            json!({"prompt": prompt, "config": {"environment_id": "single"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

pub(super) fn run_id(created: &Value) -> String {
    created["run_id"].as_str().expect("id").to_string()
}

/// The entries of run `id`'s transcript.
pub(super) async fn transcript_entries(s: &Server, id: &str) -> Vec<Value> {
    let (_, t) = s.get(&s.key, &format!("/agent/runs/{id}/transcript")).await;
    t["entries"].as_array().cloned().unwrap_or_default()
}

/// POSTs `body` as a create with the server's key.
pub(super) async fn post_create(s: &Server, body: impl Into<reqwest::Body>) -> reqwest::Response {
    s.client
        .post(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("req")
}

/// A data directory given an agent key ("ci-bot") and an admin key ("ops") offline, and a
/// server started on it with the admin key: `(dir, agent key, admin key, server)`.
pub(super) async fn offline_keys() -> (tempfile::TempDir, String, String, Server) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf8");
    let (ok, agent_key, err) = cli(
        &[
            "--data-dir",
            data,
            "keys",
            "create",
            "--name",
            "ci-bot",
            "--kind",
            "agent",
        ],
        &[],
    );
    assert!(ok, "{err}");
    let agent_key = agent_key.trim().to_string();
    assert!(
        agent_key.starts_with("rl_") && agent_key.len() >= 40,
        "{agent_key}"
    );
    let (ok, admin_key, _) = cli(
        &[
            "--data-dir",
            data,
            "keys",
            "create",
            "--name",
            "ops",
            "--admin",
        ],
        &[],
    );
    assert!(ok);
    let admin_key = admin_key.trim().to_string();

    let mut s = Server::start_in(dir.path(), common::CONFIG);
    assert!(
        s.key.is_empty(),
        "a key is printed only when the store has none"
    );
    s.key = admin_key.clone();
    s.wait_ready().await;

    (dir, agent_key, admin_key, s)
}
