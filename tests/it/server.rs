//! Integration tests: the real binary, real HTTP, a real data directory.

use crate::common;

use common::{cli, problem, Server};
use serde_json::{json, Value};

fn assert_problem(status: u16, body: &Value, want_status: u16, code: &str) {
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

#[tokio::test]
async fn a_run_goes_queued_inprogress_succeeded_with_a_transcript() {
    let s = Server::start();
    s.wait_ready().await;
    let (status, created) = s
        .post(
            &s.key,
            "/agent/run",
            json!({"prompt": "Fix <b>the</b> bug\nin auth.go"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["state"], "QUEUED");
    assert_eq!(created["task_id"], created["run_id"]);
    assert_eq!(created["at_capacity"], false);
    let id = created["run_id"].as_str().expect("id").to_string();

    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(run["title"], "Fix <b>the</b> bug");
    assert_eq!(run["agent_config"]["environment_id"], "fast");
    assert_eq!(run["agent_config"]["model_id"], "fast-model");
    assert_eq!(run["source"], "API");
    assert_eq!(run["creator"]["type"], "user");
    assert!(
        run["started_at"].is_string() && run["run_time"].is_string(),
        "{run}"
    );
    let link = run["session_link"]
        .as_str()
        .expect("session_link when SUCCEEDED")
        .to_string();

    let kinds: Vec<Value> = s
        .events(&id)
        .await
        .iter()
        .map(|e| e["type"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("Created"), json!("Started"), json!("Succeeded")]
    );

    // A finished run holds no actor.
    assert!(s.metrics().await.contains("runledger_durable_syncs_total"));
    s.wait_live_actors(0).await;

    let (status, transcript) = s.get(&s.key, &format!("/agent/runs/{id}/transcript")).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = transcript["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("Fix <b>the</b> bug")),
        "{texts:?}"
    );
    assert_eq!(texts.last(), Some(&"done"));

    // The capability link works without a key and escapes the transcript; without the token
    // the page does not exist.
    let page = s.client.get(&link).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("Fix &lt;b&gt;the&lt;/b&gt; bug") && !html.contains("<b>the</b>"));
    let no_token = s
        .client
        .get(s.url(&format!("/sessions/{id}")))
        .send()
        .await
        .expect("page");
    assert_eq!(no_token.status(), 404);
    let bad_token = s
        .client
        .get(s.url(&format!("/sessions/{id}?token=00")))
        .send()
        .await
        .expect("page");
    assert_eq!(bad_token.status(), 404);
}

#[tokio::test]
async fn cancel_is_durable_before_the_answer_and_refused_on_finished_runs() {
    let s = Server::start();
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "long job", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    let (status, body) = s
        .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!(id));
    // No waiting: the answer came after the event was durable and indexed.
    assert_eq!(s.run(&id).await["state"], "CANCELLED");

    let (status, body) = s
        .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_problem(status, &body, 400, "invalid_request");
    let (status, body) = s
        .post(
            &s.key,
            "/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel",
            json!({}),
        )
        .await;
    assert_problem(status, &body, 404, "resource_not_found");
    let (status, body) = s.get(&s.key, "/agent/runs/not-a-run").await;
    assert_problem(status, &body, 404, "resource_not_found");
}

/// Creates a run with `prompt` in the one-slot `single` environment: the create's answer.
async fn create_single(s: &Server, prompt: &str) -> Value {
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

fn run_id(created: &Value) -> String {
    created["run_id"].as_str().expect("id").to_string()
}

/// The entries of run `id`'s transcript.
async fn transcript_entries(s: &Server, id: &str) -> Vec<Value> {
    let (_, t) = s.get(&s.key, &format!("/agent/runs/{id}/transcript")).await;
    t["entries"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn capacity_is_fifo_and_waiting_runs_hold_no_actor() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;
    let second = create_single(&s, "second").await;
    assert_eq!(second["at_capacity"], true, "{second}");
    let second = run_id(&second);
    let third = run_id(&create_single(&s, "third").await);

    // Waiting runs hold no actor; only the run in progress does.
    s.wait_live_actors(1).await;

    // Freeing the slot starts the oldest waiting run, not the newest.
    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&second, "INPROGRESS").await;
    assert_eq!(s.run(&third).await["state"], "QUEUED");
}

#[tokio::test]
async fn a_followup_to_a_queued_run_is_kept_for_its_agent() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;
    let second = run_id(&create_single(&s, "second").await);

    let (status, body) = s
        .followup(&second, json!({"message": "queued note", "mode": "plan"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "QUEUED");

    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&second, "INPROGRESS").await;
    // The agent's introduction, written as it starts, names the follow-ups that waited for it.
    let names_the_note = |lines: &[Value]| {
        lines.iter().any(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.contains("queued follow-up (plan): queued note"))
        })
    };
    let mut second_lines = transcript_entries(&s, &second).await;
    for _ in 0..100 {
        if names_the_note(&second_lines) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        second_lines = transcript_entries(&s, &second).await;
    }
    assert!(names_the_note(&second_lines), "{second_lines:?}");
}

#[tokio::test]
async fn a_followup_reaches_a_running_agent_and_resumes_a_finished_run_as_a_new_execution() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;

    // In progress: delivered to the agent.
    let (status, _) = s.followup(&first, json!({"message": "live note"})).await;
    assert_eq!(status, 200);
    // The agent reports taking it (so the cancel below drops nothing it was owed).
    s.wait_events(&first, "FollowupsDelivered", 1).await;
    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&first, "CANCELLED").await;

    // Finished: the run resumes as a new execution.
    let (status, body) = s.followup(&first, json!({"message": "try again"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "QUEUED");
    s.wait_state(&first, "INPROGRESS").await;

    let kinds: Vec<(String, Value)> = s
        .events(&first)
        .await
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["data"].clone(),
            )
        })
        .collect();
    let names: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "Created",
            "Started",
            "FollowupReceived",
            "FollowupsDelivered",
            "Cancelled",
            "FollowupReceived",
            "Started"
        ]
    );
    assert_eq!(kinds[6].1["execution"], 2);

    let first_lines = transcript_entries(&s, &first).await;
    assert!(first_lines.iter().any(|e| e["stream"] == "followup"
        && e["text"].as_str().is_some_and(|t| t.contains("live note"))));
    assert!(first_lines.iter().any(
        |e| e["execution"] == 2 && e["text"].as_str().is_some_and(|t| t.contains("try again"))
    ));
}

#[tokio::test]
async fn an_empty_followup_is_refused() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    let (status, body) = s.followup(&first, json!({"message": ""})).await;
    assert_problem(status, &body, 400, "invalid_request");
}

/// POSTs `body` as a create with the server's key.
async fn post_create(s: &Server, body: impl Into<reqwest::Body>) -> reqwest::Response {
    s.client
        .post(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("req")
}

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
                       "parent_run_id": "p", "agent_identity_uid": "a", "mode": "normal",
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

#[tokio::test]
async fn an_idempotency_key_returns_the_first_run() {
    let s = Server::start();
    s.wait_ready().await;
    let send = |body: Value, key: &'static str| {
        s.client
            .post(s.api("/agent/runs"))
            .bearer_auth(&s.key)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let a: Value = send(json!({"prompt": "once"}), "k1")
        .await
        .expect("req")
        .json()
        .await
        .expect("json");
    // The same JSON with other formatting is the same request.
    let same = s
        .client
        .post(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .header("Idempotency-Key", "k1")
        .header("content-type", "application/json")
        .body("{ \"prompt\" :  \"once\" }")
        .send()
        .await
        .expect("req");
    let same: Value = same.json().await.expect("json");
    assert_eq!(a["run_id"], same["run_id"]);
    let b: Value = send(json!({"prompt": "once"}), "k1")
        .await
        .expect("req")
        .json()
        .await
        .expect("json");
    assert_eq!(a["run_id"], b["run_id"]);
    let other = send(json!({"prompt": "twice"}), "k1").await.expect("req");
    assert_eq!(other.status().as_u16(), 409);
    let c: Value = send(json!({"prompt": "once"}), "k2")
        .await
        .expect("req")
        .json()
        .await
        .expect("json");
    assert_ne!(a["run_id"], c["run_id"]);
    let (_, list) = s.get(&s.key, "/agent/runs?q=once").await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(2));
}

/// A data directory given an agent key ("ci-bot") and an admin key ("ops") offline, and a
/// server started on it with the admin key: `(dir, agent key, admin key, server)`.
async fn offline_keys() -> (tempfile::TempDir, String, String, Server) {
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

#[tokio::test]
async fn keys_made_offline_authenticate_as_their_creator_and_only_admins_manage_keys() {
    let (_dir, agent_key, admin_key, s) = offline_keys().await;
    let (st, created) = s
        .post(&agent_key, "/agent/runs", json!({"prompt": "by the bot"}))
        .await;
    assert_eq!(st, 200);
    let id = created["run_id"].as_str().expect("id");
    let run = s.run(id).await;
    assert_eq!(run["creator"]["type"], "service_account");
    assert_eq!(run["creator"]["display_name"], "ci-bot");
    let (_, mine) = s
        .get(
            &admin_key,
            &format!(
                "/agent/runs?creator={}",
                run["creator"]["uid"].as_str().expect("uid")
            ),
        )
        .await;
    assert_eq!(mine["runs"].as_array().map(Vec::len), Some(1));

    // Non-admin keys may not manage keys.
    let (st, body) = s.get(&agent_key, "/admin/keys").await;
    assert_problem(st, &body, 403, "not_authorized");
}

#[tokio::test]
async fn keys_are_revoked_live_through_the_admin_api_while_a_server_runs() {
    let (dir, agent_key, admin_key, s) = offline_keys().await;
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf8");
    // While the server holds the directory, the CLI goes through the admin API.
    let env = [
        ("RUNLEDGER_ADMIN_KEY", admin_key.as_str()),
        ("RUNLEDGER_URL", s.base.as_str()),
    ];
    let (ok, listed, err) = cli(&["--data-dir", data, "keys", "list", "--json"], &env);
    assert!(ok, "{err}");
    let bot = listed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|k| k["name"] == "ci-bot")
        .expect("ci-bot listed");
    let (ok, _, err) = cli(
        &[
            "--data-dir",
            data,
            "keys",
            "revoke",
            bot["id"].as_str().expect("id"),
        ],
        &env,
    );
    assert!(ok, "{err}");
    let (st, body) = s.get(&agent_key, "/agent/runs").await;
    assert_problem(st, &body, 401, "authentication_required");
}

#[tokio::test]
async fn the_keys_cli_without_an_admin_key_says_what_it_needs_while_a_server_runs() {
    let (dir, _agent_key, _admin_key, _s) = offline_keys().await;
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf8");
    // Without an admin key the CLI says what it needs instead of failing obscurely.
    let (ok, _, err) = cli(&["--data-dir", data, "keys", "list"], &[]);
    assert!(!ok);
    assert!(
        err.contains("running server") && err.contains("--admin-key"),
        "{err}"
    );
}

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
        "ancestor_run_id=x",
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

#[tokio::test]
async fn tls_serves_the_api_on_any_address_and_plain_http_gets_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, pem) = common::self_signed(dir.path());
    // TLS needs no permission to bind every interface; tests only ever talk to loopback.
    let config = format!(
        "[server]\nbind = \"0.0.0.0:0\"\ntls_cert = {cert:?}\ntls_key = {key:?}\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 40\n"
    );
    let mut s = Server::start_in(dir.path(), &config);
    assert!(s.base.starts_with("https://0.0.0.0:"), "{}", s.base);
    s.base = s.base.replace("0.0.0.0", "127.0.0.1");
    s.client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).expect("cert"))
        .build()
        .expect("client");

    let health = s
        .client
        .get(s.url("/healthz"))
        .send()
        .await
        .expect("healthz over https");
    assert_eq!(health.status(), 200);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "over TLS"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    // Links default to the scheme the server speaks.
    let link = run["session_link"].as_str().expect("session_link");
    assert!(link.starts_with("https://0.0.0.0:"), "{link}");
    let page = s
        .client
        .get(link.replace("0.0.0.0", "127.0.0.1"))
        .send()
        .await
        .expect("session page");
    assert_eq!(page.status(), 200);
    let (status, body) = s.get("rl_wrong", "/agent/runs").await;
    assert_problem(status, &body, 401, "authentication_required");

    // The CLI manages keys through the running HTTPS server, trusting the config's certificate.
    let config_path = s.config.to_str().expect("utf-8 path").to_string();
    let data = s.data_dir.to_str().expect("utf-8 path").to_string();
    let key = s.key.clone();
    for host in ["127.0.0.1", "localhost"] {
        let url = s.base.replace("127.0.0.1", host);
        let env = [
            ("RUNLEDGER_ADMIN_KEY", key.as_str()),
            ("RUNLEDGER_URL", url.as_str()),
        ];
        let (ok, listed, err) = cli(
            &[
                "--config",
                &config_path,
                "--data-dir",
                &data,
                "keys",
                "list",
                "--json",
            ],
            &env,
        );
        assert!(ok, "keys list over https via {host}: {err}");
        assert!(listed.contains("\"admin\""), "{listed}");
    }

    // Plain HTTP on the TLS port, and TLS without trusting the certificate, both fail.
    let plain = reqwest::Client::new()
        .get(s.url("/healthz").replacen("https://", "http://", 1))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
    let untrusted = reqwest::Client::new().get(s.url("/healthz")).send().await;
    assert!(untrusted.is_err(), "an untrusted certificate was accepted");
}

#[tokio::test]
async fn plain_http_binds_off_loopback_only_when_the_config_allows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("refused.toml");
    std::fs::write(&path, "[server]\nbind = \"0.0.0.0:0\"\n").expect("write");
    let config = path.display().to_string();
    let data = dir.path().join("data").display().to_string();
    let serve = ["serve", "--config", &config, "--data-dir", &data];
    let (ok, _, err) = cli(&serve, &[]);
    assert!(!ok);
    assert!(
        err.contains(&config)
            && err.contains("line 2: server.bind: 0.0.0.0:0 is not a loopback address")
            && err.contains("server.tls_cert and server.tls_key")
            && err.contains("server.allow_non_loopback = true")
            && !err.contains("panicked"),
        "{err}"
    );
    // A bad TLS file is a start-up error too, naming the field.
    let (cert, _, _) = common::self_signed(dir.path());
    std::fs::write(
        &path,
        format!("[server]\nbind = \"0.0.0.0:0\"\ntls_cert = {cert:?}\ntls_key = {cert:?}\n"),
    )
    .expect("write");
    let (ok, _, err) = cli(&serve, &[]);
    assert!(!ok);
    assert!(
        err.contains("line 4: server.tls_key:")
            && err.contains("holds no private key")
            && !err.contains("panicked"),
        "{err}"
    );

    let mut s = Server::start_in(
        dir.path(),
        "[server]\nbind = \"0.0.0.0:0\"\nallow_non_loopback = true\n",
    );
    assert!(s.base.starts_with("http://0.0.0.0:"), "{}", s.base);
    s.base = s.base.replace("0.0.0.0", "127.0.0.1");
    s.wait_ready().await;
    let (status, body) = s.get(&s.key.clone(), "/agent/environments").await;
    assert_eq!(status, 200, "{body}");
}

/// The OpenAPI document lists exactly the routes the server serves, each one routed (never the
/// fallback's 404 or a 405), each `/api/v1` operation behind the bearer key.
#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let s = Server::start();
    s.wait_ready().await;
    let r = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let doc: Value = r.json().await.expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            documented.push(format!("{} {path}", method.to_uppercase()));
            let responses = operation["responses"].as_object().expect("responses");
            if path.starts_with("/api/v1/") {
                // The redirect checks, which the current clients call without a key, take one
                // optionally.
                let security = if path.ends_with("/redirect") {
                    serde_json::json!([{}, {"bearerAuth": []}])
                } else {
                    serde_json::json!([{"bearerAuth": []}])
                };
                assert_eq!(operation["security"], security, "{method} {path}");
                assert!(responses.contains_key("401"), "{method} {path}");
            }
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let reference = response["$ref"].as_str().map(str::to_string);
                    let media = match reference {
                        Some(r) => {
                            let name = r.rsplit('/').next().expect("name");
                            doc["components"]["responses"][name]["content"].clone()
                        }
                        None => response["content"].clone(),
                    };
                    assert!(
                        media.get("application/problem+json").is_some(),
                        "{method} {path} {status}: {media}"
                    );
                }
            }
        }
    }
    documented.sort();
    let mut served = vec![
        "GET /api/v1/admin/keys",
        "POST /api/v1/admin/keys",
        "POST /api/v1/admin/keys/{key_id}/revoke",
        "GET /api/v1/admin/teams",
        "POST /api/v1/admin/teams",
        "GET /api/v1/admin/export",
        "GET /api/v1/audit/events",
        "GET /api/v1/audit/admin",
        "GET /api/v1/agent",
        "GET /api/v1/agent/models",
        "GET /api/v1/agent/conversations/{conversation_id}",
        "GET /api/v1/agent/conversations/{conversation_id}/redirect",
        "GET /api/v1/agent/sessions/{session_uuid}/redirect",
        "GET /api/v1/agent/identities",
        "POST /api/v1/agent/identities",
        "GET /api/v1/agent/identities/{uid}",
        "PUT /api/v1/agent/identities/{uid}",
        "DELETE /api/v1/agent/identities/{uid}",
        "POST /api/v1/agent/runs/{run_id}/session-link/revoke",
        "GET /api/v1/agent/runs/{run_id}/conversation",
        "GET /api/v1/agent/runs/{run_id}/handoff/attachments",
        "GET /api/v1/agent/environments",
        "GET /api/v1/agent/artifacts/{artifactUid}",
        "GET /artifacts/{artifactUid}/download",
        "POST /api/v1/agent/run",
        "GET /api/v1/agent/runs",
        "POST /api/v1/agent/runs",
        "GET /api/v1/agent/runs/{run_id}",
        "POST /api/v1/agent/runs/{run_id}/cancel",
        "GET /api/v1/agent/runs/{run_id}/deliveries",
        "GET /api/v1/agent/runs/{run_id}/events",
        "GET /api/v1/agent/runs/{run_id}/proof",
        "GET /api/v1/agent/runs/{run_id}/states",
        "POST /api/v1/agent/runs/{run_id}/followups",
        "GET /api/v1/agent/runs/{run_id}/transcript",
        "GET /api/v1/agent/schedules",
        "POST /api/v1/agent/schedules",
        "GET /api/v1/agent/schedules/{schedule_id}",
        "PUT /api/v1/agent/schedules/{schedule_id}",
        "DELETE /api/v1/agent/schedules/{schedule_id}",
        "POST /api/v1/agent/schedules/{schedule_id}/pause",
        "POST /api/v1/agent/schedules/{schedule_id}/resume",
        "GET /healthz",
        "GET /metrics",
        "GET /openapi.json",
        "GET /readyz",
        "GET /sessions/{run_id}",
    ];
    served.sort();
    assert_eq!(documented, served);
    for route in &documented {
        let (method, path) = route.split_once(' ').expect("route");
        let url = s.url(
            &path
                .replace("{run_id}", "01M808HFKP3VA5PZ8KKNFW4921")
                .replace("{schedule_id}", "01M808HFKP3VA5PZ8KKNFW4921")
                .replace("{key_id}", "no-such-key"),
        );
        let request = match method {
            "GET" => s.client.get(url),
            "PUT" => s.client.put(url).body("{}"),
            "DELETE" => s.client.delete(url),
            _ => s.client.post(url).body("{}"),
        };
        let r = request.bearer_auth(&s.key).send().await.expect("req");
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_ne!(status, 405, "{route}: {body}");
        assert_ne!(body["detail"], "no such route", "{route}");
    }
}
