//! Operations: `/metrics` (requests by route and status with latency histograms, runs by
//! state, queue depth, append and sync latency) and structured logs whose request id is the
//! error body's `trace_id`.

use crate::common;

use common::{Server, CONFIG};
use serde_json::{json, Value};

#[tokio::test]
async fn metrics_and_json_logs_carry_what_an_operator_needs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(
        tmp.path(),
        CONFIG,
        &[
            ("RUNLEDGER_LOG_FORMAT", "json".to_string()),
            ("RUST_LOG", "info,runledger=debug".to_string()),
        ],
    );
    server.wait_ready().await;
    let id = server.create(json!({"prompt": "count me"})).await;
    server.wait_state(&id, "SUCCEEDED").await;
    server
        .create(json!({"prompt": "wait", "config": {"environment_id": "single"}}))
        .await;
    server
        .create(json!({"prompt": "queue", "config": {"environment_id": "single"}}))
        .await;

    // An error answered to a request that named its own id: body and logs carry the server's
    // id, and the logs the client's beside it (never echoed back).
    let r = server
        .client
        .get(server.api("/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV"))
        .bearer_auth(&server.key)
        .header("x-request-id", "trace-ops-4242")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let body: Value = r.json().await.expect("json");
    let trace_id = body["trace_id"].as_str().expect("trace_id").to_string();
    assert_ne!(trace_id, "trace-ops-4242");

    let metrics = server.metrics().await;
    for want in [
        "runledger_http_request_duration_seconds_count{route=\"/api/v1/agent/runs/{run_id}\",method=\"GET\",status=\"404\"} 1",
        "runledger_runs{state=\"SUCCEEDED\"} 1",
        "runledger_runs{state=\"INPROGRESS\"} 1",
        "runledger_runs{state=\"QUEUED\"} 1",
        "runledger_queue_depth{environment=\"single\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == want), "missing {want}:\n{metrics}");
    }
    for histogram in [
        "runledger_event_append_duration_seconds",
        "runledger_durable_sync_duration_seconds",
        "runledger_durable_sync_wait_seconds",
    ] {
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{histogram}_count ")))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            count >= 3,
            "{histogram} has {count} observations:\n{metrics}"
        );
        assert!(metrics.contains(&format!("{histogram}_bucket{{le=\"+Inf\"}} {count}")));
    }
    assert!(metrics.contains(
        "runledger_http_request_duration_seconds_bucket{route=\"/api/v1/agent/runs\",method=\"POST\",status=\"200\",le=\"+Inf\"} 3"
    ), "{metrics}");

    // Logs are JSON lines; the request's lines carry its id.
    common::eventually(5, "a JSON log line carrying the request id", || {
        server.log.lock().expect("log").iter().any(|line| {
            serde_json::from_str::<Value>(line).is_ok_and(|v| {
                v["span"]["request_id"] == trace_id.as_str()
                    && v["span"]["client_request_id"] == "trace-ops-4242"
                    && v["fields"]["status"] == 404
            })
        })
    })
    .await;
    let log = server.log.lock().expect("log").clone();
    // Besides the logs, stderr holds two lines meant for the person starting the server: the
    // address it listens on, and the first key's banner (documented in docs/operations.md).
    let unparsable: Vec<&String> = log
        .iter()
        .filter(|l| !l.starts_with("runledger listening on ") && !l.starts_with("runledger: "))
        .filter(|l| serde_json::from_str::<Value>(l).is_err())
        .collect();
    assert!(unparsable.is_empty(), "non-JSON log lines: {unparsable:?}");
}

/// The index is written behind the log, in batches; `/metrics` counts runs only once the
/// index holds every command acknowledged before the request, as a list does, and its states
/// add up to the number of runs while runs move between them.
#[tokio::test]
async fn metrics_count_every_run_acknowledged_before_the_request() {
    let server = Server::start();
    server.wait_ready().await;
    let single = |prompt: String| json!({"prompt": prompt, "config": {"environment_id": "single"}});
    let first = server.create(single("hold the slot".into())).await;
    server.wait_state(&first, "INPROGRESS").await;
    for n in 1..=30 {
        server.create(single(format!("run {n}"))).await;
        let metrics = server.metrics().await;
        let want = format!("runledger_runs{{state=\"QUEUED\"}} {n}");
        assert!(
            metrics.lines().any(|l| l == want),
            "after create {n}, missing {want}:\n{metrics}"
        );
    }
    // Runs of the "fast" environment go through every state within 200 ms, while the scrapes
    // below count.
    for n in 1..=30 {
        server
            .create(json!({"prompt": format!("fast {n}"), "config": {"environment_id": "fast"}}))
            .await;
        let metrics = server.metrics().await;
        let total: u64 = metrics
            .lines()
            .filter_map(|l| l.strip_prefix("runledger_runs{state="))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum();
        assert_eq!(total, 31 + n, "after fast create {n}:\n{metrics}");
    }
}

/// The names of sled's page-table snapshots (`snap.<lsn>`) in a data directory.
fn snapshots(data: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data.join("sled"))
        .expect("sled directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("snap."))
        .collect();
    names.sort();
    names
}

/// sled 0.34 writes its snapshot only when it opens a database, so the next start would scan
/// everything this server wrote (seconds per million runs). A clean shutdown leaves a snapshot
/// that covers the whole log.
#[tokio::test]
async fn a_clean_shutdown_leaves_a_storage_snapshot_for_a_fast_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_with(tmp.path(), CONFIG, &[("RUST_LOG", "info".to_string())]);
    server.wait_ready().await;
    let data = server.data_dir.clone();
    let at_start = snapshots(&data);
    for i in 0..20 {
        let id = server.create(json!({"prompt": format!("run {i}")})).await;
        server.wait_state(&id, "SUCCEEDED").await;
    }
    assert_eq!(
        snapshots(&data),
        at_start,
        "sled snapshots only when it opens"
    );
    let status = server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    assert!(status.success(), "clean shutdown: {status:?}");
    assert!(
        server.log_text().contains("storage snapshot written"),
        "{}",
        server.log_text()
    );
    let after = snapshots(&data);
    assert_ne!(after, at_start, "no new snapshot after a clean shutdown");
    assert!(
        after.last() > at_start.last(),
        "the new snapshot covers more of the log"
    );
}

/// The runs per state of `/metrics`, as (state, count) lines.
fn runs_by_state(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("runledger_runs{state="))
        .map(str::to_string)
        .collect()
}

/// A server counts its runs per state by walking the read index the first time it is asked
/// (seconds at 1M runs). A clean stop saves the counts, so the next start answers its first
/// scrape without that walk; `replay --verify` checks what was saved against the log, and a
/// crash leaves nothing behind that could be stale.
#[tokio::test]
async fn runs_per_state_are_saved_at_a_clean_stop_and_checked_by_verify() {
    const WALKED: &str = "counted the runs in each state from the read index";
    let tmp = tempfile::tempdir().expect("tempdir");
    let info = [("RUST_LOG", "info".to_string())];
    let mut server = Server::start_with(tmp.path(), CONFIG, &info);
    server.wait_ready().await;
    let key = server.key.clone();
    for i in 0..3 {
        let id = server.create(json!({"prompt": format!("run {i}")})).await;
        server.wait_state(&id, "SUCCEEDED").await;
    }
    let counted = runs_by_state(&server.metrics().await);
    assert!(counted.contains(&"runledger_runs{state=\"SUCCEEDED\"} 3".to_string()));
    // The server logs the walk before it answers, but the test reads its stderr on a thread of
    // its own, which can lag behind on a busy machine.
    common::eventually(10, "the walk to be logged", || {
        server.log_text().contains(WALKED)
    })
    .await;
    let status = server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    assert!(status.success(), "clean shutdown: {status:?}");

    let config = server.config.to_string_lossy().into_owned();
    let data = server.data_dir.to_string_lossy().into_owned();
    let offline = ["--config", &config, "--data-dir", &data];
    let (ok, _, err) = common::cli(&[&offline[..], &["replay", "--verify"]].concat(), &[]);
    assert!(ok && err.contains(": 0 differences"), "{err}");

    let mut server = Server::start_with(tmp.path(), CONFIG, &info);
    server.key = key.clone();
    server.wait_ready().await;
    assert_eq!(runs_by_state(&server.metrics().await), counted);
    assert!(!server.log_text().contains(WALKED), "{}", server.log_text());
    // The first write after the start removed the saved counts: a crash now leaves none.
    let id = server.create(json!({"prompt": "one more"})).await;
    server.wait_state(&id, "SUCCEEDED").await;
    server.kill();
    let mut server = Server::start_with(tmp.path(), CONFIG, &info);
    server.key = key;
    server.wait_ready().await;
    let after_crash = runs_by_state(&server.metrics().await);
    assert!(
        after_crash.contains(&"runledger_runs{state=\"SUCCEEDED\"} 4".to_string()),
        "{after_crash:?}"
    );
    // The server logs the walk before it answers, but the test reads its stderr on a thread of
    // its own, which can lag behind on a busy machine.
    common::eventually(10, "the walk to be logged", || {
        server.log_text().contains(WALKED)
    })
    .await;
    server.kill();
}

/// `replay` writes a whole new index, which the snapshot of the stop before it does not cover;
/// it leaves a new snapshot so that the next start need not scan it (at 1M runs the start took
/// 2.6–6.3 s without one, under 1 s with).
#[tokio::test]
async fn a_replay_leaves_a_storage_snapshot_for_a_fast_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(tmp.path(), CONFIG);
    server.wait_ready().await;
    for i in 0..20 {
        let id = server.create(json!({"prompt": format!("run {i}")})).await;
        server.wait_state(&id, "SUCCEEDED").await;
    }
    let status = server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    assert!(status.success(), "clean shutdown: {status:?}");
    let data = server.data_dir.clone();
    let after_stop = snapshots(&data);

    let data_arg = data.to_string_lossy().into_owned();
    let (ok, _, err) = common::cli(&["replay", "--data-dir", &data_arg], &[]);
    assert!(ok, "{err}");
    assert!(
        err.contains("wrote sled's snapshot of its page table"),
        "{err}"
    );
    let after_replay = snapshots(&data);
    assert!(
        after_replay.last() > after_stop.last(),
        "no snapshot covers the rebuild: {after_stop:?} then {after_replay:?}"
    );

    let key = server.key.clone();
    let mut server = Server::start_in(tmp.path(), CONFIG);
    server.key = key;
    server.wait_ready().await;
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("runledger_runs{state=\"SUCCEEDED\"} 20"),
        "{metrics}"
    );
}
