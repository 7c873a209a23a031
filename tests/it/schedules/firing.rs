//! Schedules firing: every minute, the seconds test mode with pause and resume, a prompt at the
//! limit reaching every run whole.

use super::support::*;
use crate::common;
use common::Server;
use serde_json::json;
use std::time::{Duration, Instant};

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
