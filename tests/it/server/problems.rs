//! What a wrong request gets: problem+json for unknown routes and methods, missing keys, bad bodies and queries, oversize bodies, unknown fields; the per-key rate limit.

use super::support::*;
use crate::common;
use common::{problem, Server};
use serde_json::{json, Value};

#[tokio::test]
async fn an_unknown_route_or_method_is_problem_json() {
    let s = Server::start();
    s.wait_ready().await;
    let c = &s.client;
    let (st, b) = problem(c.get(s.url("/nope")).send().await.expect("req")).await;
    assert_problem(st, &b, 404, "resource_not_found");
    let r = c
        .delete(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .send()
        .await
        .expect("req");
    assert_eq!(
        r.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("GET, POST")
    );
    let (st, b) = problem(r).await;
    assert_eq!(st, 405, "{b}");
}

#[tokio::test]
async fn a_missing_or_wrong_key_is_problem_json() {
    let s = Server::start();
    s.wait_ready().await;
    let c = &s.client;
    let (st, b) = problem(c.get(s.api("/agent/runs")).send().await.expect("req")).await;
    assert_problem(st, &b, 401, "authentication_required");
    let (st, b) = problem(
        c.get(s.api("/agent/runs"))
            .bearer_auth("rl_wrong")
            .send()
            .await
            .expect("req"),
    )
    .await;
    assert_problem(st, &b, 401, "authentication_required");
}

#[tokio::test]
async fn a_bad_create_body_is_problem_json() {
    let s = Server::start();
    s.wait_ready().await;
    for bad in [
        "{not json",
        "",
        r#"{"prompt": 5}"#,
        r#"{"prompt": "x", "config": {"mcp_servers": []}}"#,
        r#"{"prompt": ""}"#,
        r#"{"config": {"name": "x"}}"#,
        r#"{"prompt": "x", "config": {"environment_id": "nowhere"}}"#,
        r#"{"prompt": "x", "config": {"skill_spec": "not a skill"}}"#,
        r#"{"prompt": "x", "config": {"mcp_servers": {"a": {"url": "https://a", "command": "b"}}}}"#,
        r#"{"prompt": "x", "metadata": {"bad key": "v"}}"#,
        r#"{"prompt": "a\u0000b"}"#,
    ] {
        let (st, b) = problem(post_create(&s, bad).await).await;
        assert_problem(st, &b, 400, "invalid_request");
        assert!(b["instance"] == "/api/v1/agent/runs", "{b}");
    }
}

#[tokio::test]
async fn a_bad_query_value_is_problem_json_naming_its_parameter() {
    let s = Server::start();
    s.wait_ready().await;
    let c = &s.client;
    let (st, b) = problem(
        c.get(s.api("/agent/runs?limit=0"))
            .bearer_auth(&s.key)
            .send()
            .await
            .expect("req"),
    )
    .await;
    assert_problem(st, &b, 400, "invalid_request");
    // Query values are refused with the parameter's name, whatever the endpoint.
    let long_q = format!("/agent/runs?q={}", "x".repeat(1025));
    for (path, name) in [
        ("/agent/runs?limit=ten", "limit"),
        (long_q.as_str(), "q"),
        (
            "/agent/runs/01M808HFKP3VA5PZ8KKNFW4921/transcript?limit=ten",
            "limit",
        ),
        (
            "/agent/runs/01M808HFKP3VA5PZ8KKNFW4921/transcript?offset=-1",
            "offset",
        ),
    ] {
        let r = c.get(s.api(path)).bearer_auth(&s.key).send().await;
        let (st, b) = problem(r.expect("req")).await;
        assert_problem(st, &b, 400, "invalid_request");
        assert!(
            b["detail"].as_str().is_some_and(|d| d.starts_with(name)),
            "{path}: {b}"
        );
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_problem_json() {
    let s = Server::start();
    s.wait_ready().await;
    let huge = "x".repeat(runledger::http::MAX_CREATE_BODY_BYTES);
    let (st, b) = problem(post_create(&s, format!(r#"{{"prompt":"{huge}"}}"#)).await).await;
    assert_problem(st, &b, 413, "invalid_request");
    // A create body has room for attachments; a prompt in it still has its own limit.
    let long = "x".repeat(2 * 1024 * 1024);
    let (st, b) = problem(post_create(&s, format!(r#"{{"prompt":"{long}"}}"#)).await).await;
    assert_problem(st, &b, 400, "invalid_request");
    assert_eq!(b["detail"], "prompt is longer than 65536 bytes");
}

/// A field neither runledger nor the Oz document (nor an official client) defines is refused
/// naming it, on both create paths, at the top and in `config`; the document's fields that
/// runledger does not use are still accepted; nothing refused makes a run.
#[tokio::test]
async fn unknown_fields_of_a_create_are_refused_naming_them() {
    let s = Server::start();
    s.wait_ready().await;
    for path in ["/agent/runs", "/agent/run"] {
        for (body, field) in [
            (json!({"prompt": "x", "surprise": {"a": 1}}), "surprise"),
            (
                json!({"prompt": "x", "agent_config": {"environment_id": "slow"}}),
                "agent_config",
            ),
            (
                json!({"prompt": "x", "config": {"enviroment_id": "slow"}}),
                "config.enviroment_id",
            ),
        ] {
            let (st, b) = s.post(&s.key, path, body.clone()).await;
            assert_problem(st, &b, 400, "invalid_request");
            let detail = b["detail"].as_str().unwrap_or_default();
            assert!(
                detail.starts_with(&format!("unknown field \"{field}\"")),
                "{path} {body}: {detail}"
            );
        }
        let (st, b) = s
            .post(
                &s.key,
                path,
                json!({"prompt": "x", "team": true, "interactive": false, "conversation_id": "c",
                       "agent_identity_uid": "a", "mode": "normal",
                       "on_behalf_of": "u", "images": [],
                       "config": {"computer_use_enabled": false, "worker_host": "warp",
                                  "idle_timeout_minutes": 10, "harness": {"type": "oz"}}}),
            )
            .await;
        assert_eq!(st, 200, "{path}: {b}");
    }
    let (_, list) = s.get(&s.key, "/agent/runs").await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(2), "{list}");
}

#[tokio::test]
async fn a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_do_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One request every 2 s, two at once.
    let config = format!(
        "{}\n[limits]\nrate_per_sec = 0.5\nburst = 2\n",
        common::CONFIG
    );
    let s = Server::start_in(dir.path(), &config);
    s.wait_ready().await;
    let (st, other) = s
        .post(&s.key, "/admin/keys", json!({"name": "other"}))
        .await;
    assert_eq!(st, 200, "{other}");
    let other = other["key"].as_str().expect("secret").to_string();
    let (st, _) = s.get(&s.key, "/agent/runs").await;
    assert_eq!(st, 200);

    // The bucket is empty: a create is refused before its body is read, and creates nothing.
    let r = s
        .client
        .post(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .json(&json!({"prompt": "one too many"}))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 429);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    // The next token is 2 s away (less the few ms since the last one), rounded up.
    assert_eq!(header("retry-after").as_deref(), Some("2"));
    assert_eq!(
        header("content-type").as_deref(),
        Some("application/problem+json")
    );
    let body: Value = r.json().await.expect("json");
    assert_problem(429, &body, 429, "resource_unavailable");
    assert_eq!(body["retryable"], true, "{body}");
    assert_eq!(body["title"], "Too many requests", "{body}");
    assert_eq!(body["instance"], "/api/v1/agent/runs", "{body}");
    let detail = body["detail"].as_str().expect("detail");
    assert!(
        detail.contains("0.5 requests per second")
            && detail.contains("bursts of up to 2")
            && detail.contains("retry after 2 s"),
        "{detail}"
    );

    // Another key has its own bucket, and sees that the refused create made no run.
    let (st, list) = s.get(&other, "/agent/runs").await;
    assert_eq!(st, 200, "{list}");
    assert_eq!(list["runs"], json!([]), "{list}");
    // Requests without a valid key are not charged to anyone: still 401, not 429.
    for key in [None, Some("rl_wrong")] {
        let mut req = s.client.get(s.api("/agent/runs"));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        assert_eq!(req.send().await.expect("req").status(), 401);
    }
    // Nothing outside /api/v1 is limited.
    for _ in 0..5 {
        let r = s.client.get(s.url("/healthz")).send().await.expect("req");
        assert_eq!(r.status(), 200);
    }
    assert!(
        s.metrics()
            .await
            .lines()
            .any(|l| l == "runledger_rate_limited_total 1"),
        "one refusal counted"
    );
}
