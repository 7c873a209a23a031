//! Idempotency keys, and API keys made offline or through the admin API while a server runs.

use super::support::*;
use crate::common;
use common::{cli, Server};
use serde_json::{json, Value};

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
