//! Schedules end to end with the real binary (issue #21): the CRUD API and its refusals, a real
//! every-minute firing, the seconds test mode, exactly one run when the server is killed at
//! the firing instant, one catch-up after a down time, and schedules in export, import,
//! `events` and `replay --verify`.

use crate::common;

use std::time::{Duration, Instant};

use common::{cli, Server, CONFIG};
use serde_json::{json, Value};

/// `CONFIG` with the seconds test mode on.
fn seconds_config() -> String {
    format!("{CONFIG}\n[schedules]\nseconds = true\n")
}

async fn send(
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

async fn create(server: &Server, body: Value) -> Value {
    let (status, v) = server.post(&server.key, "/agent/schedules", body).await;
    assert_eq!(status, 201, "{v}");
    v
}

/// The runs a schedule made, from the runs list filtered by `schedule_id`, oldest first; each
/// names the schedule in its `schedule`.
async fn runs_of(server: &Server, schedule_id: &str) -> Vec<Value> {
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
fn once_at(secs: u64) -> (String, std::time::SystemTime) {
    let at = std::time::SystemTime::now() + Duration::from_secs(secs);
    let since = at
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs();
    let (s, m, h) = (since % 60, since / 60 % 60, since / 3600 % 24);
    (format!("{s} {m} {h} * * *"), at)
}

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

/// One real firing of an every-minute schedule: within about a minute (70 s at most), an
/// ordinary run appears with source SCHEDULED_AGENT, and the schedule's history names it.
#[tokio::test]
async fn an_every_minute_schedule_fires_a_run() {
    let server = Server::start();
    let schedule = create(
        &server,
        json!({ "name": "every minute", "cron_schedule": "* * * * *", "prompt": "tick",
                "agent_config": { "environment_id": "fast" } }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(70);
    let run = loop {
        if let Some(run) = runs_of(&server, &id).await.into_iter().next() {
            break run;
        }
        assert!(Instant::now() < deadline, "no run within 70 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(run["source"], "SCHEDULED_AGENT");
    assert_eq!(run["prompt"], "tick");
    assert_eq!(run["agent_config"]["environment_id"], "fast");
    let run_id = run["run_id"].as_str().expect("run_id").to_string();
    server.wait_state(&run_id, "SUCCEEDED").await;
    let (_, got) = server
        .get(&server.key, &format!("/agent/schedules/{id}"))
        .await;
    assert!(got["history"]["last_ran"].is_string(), "{got}");
    assert_eq!(got["history"]["recent_runs"][0]["run_id"], run_id.as_str());
    assert_eq!(got["history"]["recent_runs"][0]["state"], "SUCCEEDED");
    assert!(server
        .metrics()
        .await
        .contains("runledger_schedule_firings_total{outcome=\"fired\"} 1"));
}

/// The seconds test mode: a schedule fires every 2 s; paused it stops; resumed it goes on
/// from its next due time, never for what it missed.
#[tokio::test]
async fn in_the_seconds_test_mode_a_schedule_fires_pauses_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), &seconds_config());
    let schedule = create(
        &server,
        json!({ "name": "every 2 s", "cron_schedule": "*/2 * * * * *", "prompt": "tick",
                "agent_config": { "environment_id": "fast" } }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs_of(&server, &id).await.len() < 2 {
        assert!(Instant::now() < deadline, "fewer than 2 runs in 20 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, _) = server
        .post(
            &server.key,
            &format!("/agent/schedules/{id}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let paused_with = runs_of(&server, &id).await.len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        runs_of(&server, &id).await.len(),
        paused_with,
        "a paused schedule fired"
    );
    let (_, resumed) = server
        .post(
            &server.key,
            &format!("/agent/schedules/{id}/resume"),
            json!({}),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while runs_of(&server, &id).await.len() <= paused_with {
        assert!(
            Instant::now() < deadline,
            "a resumed schedule did not fire: {resumed}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Not a burst for the 5 s missed: one firing per due time after the resume.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(runs_of(&server, &id).await.len() <= paused_with + 2);
}

/// A schedule carries a prompt at its limit (64 KiB of multi-byte text) and metadata to every
/// run it makes, unchanged; one byte more is refused.
#[tokio::test]
async fn a_prompt_at_the_limit_reaches_every_run_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), &seconds_config());
    let unit = "Prüfe die Abhängigkeiten ✓ — ";
    let mut prompt = unit.repeat(64 * 1024 / unit.len());
    while prompt.len() < 64 * 1024 {
        prompt.push('x');
    }
    assert_eq!(prompt.len(), 64 * 1024);
    let (status, _) = server
        .post(
            &server.key,
            "/agent/schedules",
            json!({ "name": "big", "cron_schedule": "@daily", "prompt": format!("{prompt}y") }),
        )
        .await;
    assert_eq!(status, 400, "one byte over the limit");
    let schedule = create(
        &server,
        json!({ "name": "big", "cron_schedule": "*/2 * * * * *", "prompt": prompt,
                "agent_config": { "environment_id": "fast" }, "metadata": { "size": "64k" } }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        if let Some(run) = runs_of(&server, &id).await.into_iter().next() {
            break run;
        }
        assert!(Instant::now() < deadline, "no firing");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (status, _) = server
        .post(
            &server.key,
            &format!("/agent/schedules/{id}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(run["prompt"].as_str(), Some(prompt.as_str()));
    assert_eq!(run["metadata"]["size"], "64k");
    assert_eq!(run["title"], "big");
}

/// SIGKILL at the firing instant (after the firing is durable, before its run exists): the
/// next start makes exactly that run, once.
#[tokio::test]
async fn a_server_killed_at_the_firing_instant_makes_exactly_one_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = seconds_config();
    let crash = [("RUNLEDGER_TEST_CRASH", "schedule-fired".to_string())];
    let mut server = Server::start_with(dir.path(), &config, &crash);
    let key = server.key.clone();
    let (cron, at) = once_at(3);
    let schedule = create(
        &server,
        json!({ "name": "once", "cron_schedule": cron, "prompt": "p",
                "agent_config": { "environment_id": "fast" } }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    let status = server.wait_exit(20).await;
    assert!(!status.success(), "the server killed itself at the firing");
    // Killed at the due second (`at` has the fraction of a second `once_at` dropped).
    assert!(std::time::SystemTime::now() + Duration::from_secs(1) >= at);
    // The firing is in the log; its run is not.
    let (ok, out, err) = cli(
        &[
            "events",
            &id,
            "--data-dir",
            server.data_dir.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(out.contains("ScheduleFired"), "{out}");
    drop(server);

    let mut server = Server::start_in(dir.path(), &config);
    server.key = key;
    server.wait_ready().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs_of(&server, &id).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the cut-short firing was not completed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = runs_of(&server, &id).await;
    assert_eq!(runs.len(), 1, "exactly one run: {runs:?}");
    let (_, got) = server
        .get(&server.key, &format!("/agent/schedules/{id}"))
        .await;
    assert_eq!(
        got["history"]["recent_runs"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        got["history"]["recent_runs"][0]["run_id"],
        runs[0]["run_id"]
    );
    // The next due time is tomorrow's: nothing else fires.
    assert!(got["history"]["next_run"].is_string());
}

/// Down across several due times: one catch-up run on start, for the latest of them.
#[tokio::test]
async fn a_start_after_missed_due_times_catches_up_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = seconds_config();
    let mut server = Server::start_in(dir.path(), &config);
    let key = server.key.clone();
    let schedule = create(
        &server,
        json!({ "name": "every second", "cron_schedule": "* * * * * *", "prompt": "p",
                "agent_config": { "environment_id": "fast" }, "enabled": false }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    // Enabled, then killed before its first due time: about 4 due times pass while down.
    let (status, _) = server
        .post(&key, &format!("/agent/schedules/{id}/resume"), json!({}))
        .await;
    assert_eq!(status, 200);
    server.kill();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Paused as it comes back, so that only the catch-up can fire before the pause.
    let mut server = Server::start_in(dir.path(), &config);
    server.key = key.clone();
    server.wait_ready().await;
    let (status, _) = server
        .post(&key, &format!("/agent/schedules/{id}/pause"), json!({}))
        .await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let runs = runs_of(&server, &id).await;
    // The catch-up, plus at most the one due time between ready and the pause.
    assert!(
        (1..=2).contains(&runs.len()),
        "one catch-up, not one per missed second: {runs:?}"
    );
}

/// Schedules take part in export, import, `events` and `replay --verify`.
#[tokio::test]
async fn schedules_survive_export_and_import_and_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), &seconds_config());
    let schedule = create(
        &server,
        json!({ "name": "backed up", "cron_schedule": "*/2 * * * * *", "prompt": "p",
                "agent_config": { "environment_id": "fast" }, "metadata": { "k": "v" } }),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs_of(&server, &id).await.is_empty() {
        assert!(Instant::now() < deadline, "no firing");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, _) = server
        .post(
            &server.key,
            &format!("/agent/schedules/{id}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 20)
        .await;
    let data = server.data_dir.to_str().expect("utf-8").to_string();

    let (ok, out, err) = cli(&["replay", "--verify", "--data-dir", &data], &[]);
    assert!(ok, "{out}{err}");
    assert!(err.contains("schedules: 0 differences"), "{err}");
    let (ok, out, err) = cli(&["events", &id, "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    for kind in ["ScheduleCreated", "ScheduleFired", "SchedulePaused"] {
        assert!(out.contains(kind), "{kind} missing: {out}");
    }
    let backup = dir.path().join("backup.jsonl");
    let (ok, _, err) = cli(
        &[
            "export",
            "--with-keys",
            "--output",
            backup.to_str().expect("utf-8"),
            "--data-dir",
            &data,
        ],
        &[],
    );
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&backup).expect("backup");
    assert!(text.contains("\"record\":\"schedule_event\""));
    assert!(
        text.contains("\"schedule_events\":"),
        "the end record counts them"
    );

    let restored = dir.path().join("restored");
    let (ok, _, err) = cli(
        &[
            "import",
            backup.to_str().expect("utf-8"),
            "--data-dir",
            restored.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(err.contains("schedule events"), "{err}");
    let (ok, out, err) = cli(
        &[
            "events",
            &id,
            "--json",
            "--data-dir",
            restored.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    let original = cli(&["events", &id, "--json", "--data-dir", &data], &[]).1;
    assert_eq!(out, original, "the schedule's log comes back as it was");

    // A backup whose schedule log skips an event is refused whole.
    let broken: String = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"ScheduleFired\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let broken_path = dir.path().join("broken.jsonl");
    std::fs::write(&broken_path, broken).expect("write");
    let (ok, _, err) = cli(
        &[
            "import",
            broken_path.to_str().expect("utf-8"),
            "--data-dir",
            dir.path().join("other").to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(!ok, "a gap in a schedule's log must be refused");
    assert!(err.contains("schedule"), "{err}");
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
