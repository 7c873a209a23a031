//! Schedules across crashes and backups: exactly one run when killed at the firing instant, one
//! catch-up after a down time, export, import and verify.

use super::support::*;
use crate::common;
use common::{cli, Server};
use serde_json::json;
use std::time::{Duration, Instant};

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
