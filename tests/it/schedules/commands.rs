//! A schedule through the API: created, read, listed, updated, paused, resumed and deleted; bad
//! ones refused naming the problem; the per-team cap; unknown fields refused.

use super::support::*;
use crate::common;
use common::{Server, CONFIG};
use serde_json::{json, Value};

#[tokio::test]
async fn a_schedule_is_created_read_listed_updated_paused_resumed_and_deleted() {
    let server = Server::start();
    let key = server.key.clone();
    let created = create(
        &server,
        json!({
            "name": "Nightly deps",
            "cron_schedule": "CRON_TZ=Europe/Berlin 0 3 * * *",
            "prompt": "Upgrade the dependencies",
            "agent_config": { "environment_id": "slow", "mcp_servers": {
                "s": { "url": "https://mcp.example/x", "headers": { "Authorization": "Bearer secret-token" } }
            } },
            "metadata": { "team": "infra" }
        }),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(created["time_zone"], "Europe/Berlin");
    assert_eq!(created["cron_schedule"], "CRON_TZ=Europe/Berlin 0 3 * * *");
    assert_eq!(created["enabled"], true);
    assert_eq!(
        created["scope"],
        json!({ "type": "Team", "uid": "default" })
    );
    assert_eq!(created["agent_config"]["environment_id"], "slow");
    assert_eq!(created["metadata"]["team"], "infra");
    // The credential is sealed: never shown, never stored in the clear.
    assert_eq!(
        created["agent_config"]["mcp_servers"]["s"]["headers"]["Authorization"],
        "***"
    );
    let next = created["history"]["next_run"].as_str().expect("next_run");
    assert!(
        next.ends_with("T02:00:00.000Z") || next.ends_with("T01:00:00.000Z"),
        "03:00 in Berlin: {next}"
    );

    // A second schedule sorts before it by name.
    let other = create(
        &server,
        json!({ "name": "Hourly", "cron_schedule": "@hourly", "prompt": "p", "enabled": false }),
    )
    .await;
    assert_eq!(other["enabled"], false);
    assert!(other["history"].get("next_run").is_none(), "{other}");
    let (status, list) = server.get(&key, "/agent/schedules").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["Hourly", "Nightly deps"]);

    // An update replaces what it names and keeps the config it leaves out.
    let (status, updated) = send(
        &server,
        reqwest::Method::PUT,
        &key,
        &format!("/agent/schedules/{id}"),
        Some(json!({ "name": "Nightly", "cron_schedule": "30 4 * * 1-5", "enabled": true, "prompt": "Upgrade" })),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["name"], "Nightly");
    assert_eq!(updated["time_zone"], "UTC");
    assert_eq!(updated["agent_config"]["environment_id"], "slow");
    assert_eq!(updated["metadata"]["team"], "infra");
    assert!(updated["history"]["next_run"]
        .as_str()
        .is_some_and(|t| t.ends_with("T04:30:00.000Z")));

    // Pause and resume, each idempotent.
    for _ in 0..2 {
        let (status, paused) = server
            .post(&key, &format!("/agent/schedules/{id}/pause"), json!({}))
            .await;
        assert_eq!(status, 200, "{paused}");
        assert_eq!(paused["enabled"], false);
        assert!(paused["history"].get("next_run").is_none());
    }
    for _ in 0..2 {
        let (status, resumed) = server
            .post(&key, &format!("/agent/schedules/{id}/resume"), json!({}))
            .await;
        assert_eq!(status, 200, "{resumed}");
        assert_eq!(resumed["enabled"], true);
        assert!(resumed["history"]["next_run"].is_string());
    }
    let (status, got) = server.get(&key, &format!("/agent/schedules/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(got["name"], "Nightly");

    // Delete: gone for every operation, and from the list.
    let (status, deleted) = send(
        &server,
        reqwest::Method::DELETE,
        &key,
        &format!("/agent/schedules/{id}"),
        None,
    )
    .await;
    assert_eq!((status, deleted), (200, json!({ "success": true })));
    for (method, path) in [
        (reqwest::Method::GET, format!("/agent/schedules/{id}")),
        (reqwest::Method::DELETE, format!("/agent/schedules/{id}")),
        (
            reqwest::Method::POST,
            format!("/agent/schedules/{id}/pause"),
        ),
    ] {
        let (status, v) = send(&server, method, &key, &path, None).await;
        assert_eq!(status, 404, "{path}: {v}");
    }
    let (_, list) = server.get(&key, "/agent/schedules").await;
    assert_eq!(list["schedules"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn bad_schedules_are_refused_naming_the_problem_and_other_teams_see_nothing() {
    let server = Server::start();
    let key = server.key.clone();
    let base = json!({ "name": "n", "cron_schedule": "0 9 * * *", "prompt": "p" });
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let without = |field: &str| {
        let mut body = base.clone();
        body.as_object_mut().expect("object").remove(field);
        body
    };
    for (body, wanted) in [
        (
            with("cron_schedule", json!("* * * *")),
            "must have 5 fields",
        ),
        (with("cron_schedule", json!("0 0 9 * * *")), "found 6"),
        (with("cron_schedule", json!("61 * * * *")), "cron_schedule"),
        (with("cron_schedule", json!("@reboot")), "unknown macro"),
        (with("cron_schedule", json!("0 0 31 2 *")), "never fires"),
        (
            with("cron_schedule", json!("CRON_TZ=Mars/Base 0 9 * * *")),
            "IANA",
        ),
        (with("time_zone", json!("Nowhere/City")), "time_zone"),
        (with("cron_schedule", json!("CRON_TZ=UTC 0 9 * * *")), ""),
        (without("cron_schedule"), "cron_schedule is required"),
        (without("name"), "name is required"),
        (with("name", json!("   ")), "name must not be blank"),
        (with("name", json!("x".repeat(257))), "name must be at most"),
        (without("prompt"), "prompt is required"),
        (
            with("prompt", json!("x".repeat(64 * 1024 + 1))),
            "prompt is longer",
        ),
        (with("team", json!(false)), "personal schedules"),
        (with("agent_uid", json!("a1")), "agent identities"),
        (with("mode", json!("plan")), "normal mode"),
        (with("metadata", json!({ "bad key": "v" })), "metadata key"),
        (
            with("agent_config", json!({ "environment_id": "nope" })),
            "no environment named",
        ),
        (with("cron_schedule", json!(5)), "wrong type"),
    ] {
        let (status, v) = server.post(&key, "/agent/schedules", body.clone()).await;
        if wanted.is_empty() {
            assert_eq!(status, 201, "{body}: {v}");
            continue;
        }
        assert_eq!(status, 400, "{body}: {v}");
        let detail = v["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(wanted), "{wanted:?} not in {detail:?}");
    }
    // A zone named twice, differently.
    let (status, v) = server
        .post(
            &key,
            "/agent/schedules",
            with("cron_schedule", json!("CRON_TZ=UTC 0 9 * * *"))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("time_zone".into(), json!("Europe/Paris"));
                    Value::Object(o)
                })
                .expect("object"),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Without the test mode, seconds are refused.
    let (status, _) = server
        .post(
            &key,
            "/agent/schedules",
            with("cron_schedule", json!("*/5 * * * * *")),
        )
        .await;
    assert_eq!(status, 400);
    // Unauthenticated, and an update missing what the document requires.
    let (status, _) = server.post("wrong", "/agent/schedules", base.clone()).await;
    assert_eq!(status, 401);
    let mine = create(&server, base.clone()).await;
    let id = mine["id"].as_str().expect("id").to_string();
    let (status, v) = send(
        &server,
        reqwest::Method::PUT,
        &key,
        &format!("/agent/schedules/{id}"),
        Some(json!({ "name": "n", "cron_schedule": "0 9 * * *", "prompt": "p" })),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("enabled is required"));
    for bad in ["nope", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "%2e%2e"] {
        let (status, _) = server.get(&key, &format!("/agent/schedules/{bad}")).await;
        assert_eq!(status, 404, "{bad}");
    }

    // Another team sees none of it, and cannot change it.
    let (status, _) = server
        .post(&key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201);
    let (status, v) = server
        .post(
            &key,
            "/admin/keys",
            json!({ "name": "bob", "team": "infra" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let bob = v["key"].as_str().expect("key").to_string();
    let (_, list) = server.get(&bob, "/agent/schedules").await;
    assert_eq!(list, json!({ "schedules": [] }));
    for (method, path) in [
        (reqwest::Method::GET, format!("/agent/schedules/{id}")),
        (reqwest::Method::PUT, format!("/agent/schedules/{id}")),
        (reqwest::Method::DELETE, format!("/agent/schedules/{id}")),
        (
            reqwest::Method::POST,
            format!("/agent/schedules/{id}/pause"),
        ),
        (
            reqwest::Method::POST,
            format!("/agent/schedules/{id}/resume"),
        ),
    ] {
        let body = Some(
            json!({ "name": "x", "cron_schedule": "0 9 * * *", "enabled": true, "prompt": "p" }),
        );
        let (status, v) = send(&server, method, &bob, &path, body).await;
        assert_eq!(status, 404, "{path}: {v}");
    }
    let (_, still) = server.get(&key, &format!("/agent/schedules/{id}")).await;
    assert_eq!(still["enabled"], true);
}

/// A team's schedules are capped (`schedules.max_per_team`); deleting one makes room, and
/// another team has its own count.
#[tokio::test]
async fn a_team_cannot_hold_more_schedules_than_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(
        dir.path(),
        &format!("{CONFIG}\n[schedules]\nmax_per_team = 2\n"),
    );
    let body = json!({ "name": "n", "cron_schedule": "@daily", "prompt": "p" });
    let first = create(&server, body.clone()).await;
    create(&server, body.clone()).await;
    let (status, v) = server
        .post(&server.key, "/agent/schedules", body.clone())
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("max_per_team"),
        "{v}"
    );
    let id = first["id"].as_str().expect("id");
    let (status, _) = send(
        &server,
        reqwest::Method::DELETE,
        &server.key,
        &format!("/agent/schedules/{id}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    create(&server, body.clone()).await;
    let (status, _) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201);
    let (_, v) = server
        .post(
            &server.key,
            "/admin/keys",
            json!({ "name": "bob", "team": "infra" }),
        )
        .await;
    let bob = v["key"].as_str().expect("key").to_string();
    let (status, v) = server.post(&bob, "/agent/schedules", body).await;
    assert_eq!(status, 201, "{v}");
}

/// A schedule sent with `config` instead of `agent_config` ran in the default environment; it
/// is refused naming `config`, on create and on update, and so is an unknown field of
/// `agent_config`. A refused update leaves the schedule as it was.
#[tokio::test]
async fn unknown_fields_of_a_schedule_are_refused_naming_them() {
    let server = Server::start();
    let key = server.key.clone();
    let base = json!({"name": "n", "cron_schedule": "@daily", "prompt": "p"});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    for (body, field) in [
        (with("config", json!({"environment_id": "slow"})), "config"),
        (
            with("agent_config", json!({"enviroment_id": "slow"})),
            "agent_config.enviroment_id",
        ),
        (with("cron", json!("@hourly")), "cron"),
    ] {
        let (status, v) = server.post(&key, "/agent/schedules", body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        let detail = v["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(&format!("unknown field \"{field}\"")),
            "{body}: {detail}"
        );
    }
    let (_, list) = server.get(&key, "/agent/schedules").await;
    assert_eq!(list["schedules"], json!([]), "nothing refused was created");

    let created = create(
        &server,
        with("agent_config", json!({"environment_id": "slow"})),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_string();
    let path = format!("/agent/schedules/{id}");
    let update = json!({"name": "m", "cron_schedule": "@hourly", "enabled": true, "prompt": "q",
                        "config": {"environment_id": "fast"}});
    let (status, v) = send(&server, reqwest::Method::PUT, &key, &path, Some(update)).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("unknown field \"config\"")),
        "{v}"
    );
    // `team` is the document's on a create only.
    let update = json!({"name": "m", "cron_schedule": "@hourly", "enabled": true, "prompt": "q",
                        "team": true});
    let (status, v) = send(&server, reqwest::Method::PUT, &key, &path, Some(update)).await;
    assert_eq!(status, 400, "{v}");
    let (_, now) = server.get(&key, &path).await;
    assert_eq!(now["name"], "n", "{now}");
    assert_eq!(now["agent_config"]["environment_id"], "slow", "{now}");
    // The fields the document defines but runledger does not use keep their answers.
    let (status, v) = server
        .post(&key, "/agent/schedules", with("team", json!(false)))
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains("personal schedules")),
        "{v}"
    );
    let (status, v) = server
        .post(
            &key,
            "/agent/schedules",
            with(
                "agent_config",
                json!({"environment_id": "slow", "worker_host": "warp"}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{v}");
}
