//! Crash loop (issue #4): concurrent clients create runs, send follow-ups and cancel while the
//! server is SIGKILLed at random moments and restarted, for `CRASHLOOP_CYCLES` cycles (default 4;
//! the long form is `CRASHLOOP_CYCLES=200 cargo nextest run --release --test crashloop
//! --no-capture`). Then:
//! - every acknowledged create exists, and every create whose answer was lost, retried with
//!   its `Idempotency-Key`, exists exactly once;
//! - every run's history agrees with the acknowledged commands: each acknowledged follow-up and
//!   cancel is in it, nothing is in it that no client asked for, sequences are contiguous;
//! - `runledger replay --verify` is clean and no server ever panicked.
//!
//! Every prompt is 60 KB (issue #27: a group commit racing sled's removal of blob files once
//! refused every write after a few dozen such creates).
//!
//! Every request's outcome is one of: acknowledged (2xx), refused (4xx/503: the command was
//! not applied), or unknown (the connection broke, typically by the kill) — unknown commands
//! may or may not be in the history, but at most once.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{cli, Server};
use rand::Rng;
use serde_json::{json, Value};

const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

# One key does all the work, faster than any client should: this test is about crashes.
[limits]
rate_limit = false

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 100

[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 30000
max_concurrent = 4
"#;

const CLIENTS: usize = 6;

/// The body of every create's prompt: 60 KB of log lines.
static PASTED_LOG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    "2026-11-25T12:00:00.000Z ERROR worker: request failed: connection reset by peer\n"
        .repeat(60 * 1024 / 80)
});

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Acked,
    Refused,
    Unknown,
}

#[derive(Debug)]
struct Create {
    body: Value,
    marker: String,
    run_id: Option<String>,
    outcome: Outcome,
}

#[derive(Default)]
struct Ledger {
    /// By idempotency key.
    creates: BTreeMap<String, Create>,
    /// (run id, message, outcome); messages are unique.
    followups: Vec<(String, String, Outcome)>,
    /// (run id, outcome).
    cancels: Vec<(String, Outcome)>,
    /// Runs whose create was acknowledged: targets for follow-ups and cancels.
    runs: Vec<String>,
}

fn outcome(result: &Result<(u16, Value), reqwest::Error>) -> Outcome {
    match result {
        Ok((s, _)) if (200..300).contains(s) => Outcome::Acked,
        Ok((s, _)) if (400..500).contains(s) || *s == 503 => Outcome::Refused,
        _ => Outcome::Unknown,
    }
}

async fn send(
    client: &reqwest::Client,
    url: String,
    key: &str,
    headers: &[(&str, String)],
    body: Value,
) -> Result<(u16, Value), reqwest::Error> {
    let mut req = client.post(url).bearer_auth(key).json(&body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let r = req.send().await?;
    let status = r.status().as_u16();
    let v = r.json().await.unwrap_or(Value::Null);
    Ok((status, v))
}

/// One client: random commands until `alive` goes false.
async fn client(
    base: String,
    key: String,
    ledger: Arc<Mutex<Ledger>>,
    alive: Arc<AtomicBool>,
    id: usize,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let mut n = 0u64;
    while alive.load(Ordering::Relaxed) {
        n += 1;
        let (pick, target, slow) = {
            let mut rng = rand::thread_rng();
            let ledger = ledger.lock().expect("ledger");
            let target = (!ledger.runs.is_empty())
                .then(|| ledger.runs[rng.gen_range(0..ledger.runs.len())].clone());
            (rng.gen_range(0..10), target, rng.gen_bool(0.4))
        };
        match (pick, target) {
            (0..=4, _) | (_, None) => {
                let marker = format!("crashloop-{}", ulid::Ulid::new());
                let idem = format!("k-{id}-{n}-{marker}");
                let body = json!({
                    // 60 KB, as an issue with pasted logs: above sled's blob threshold once a
                    // page holds a few, where blob files come and go under the group commit.
                    "prompt": format!("task {marker}\n{}", PASTED_LOG.as_str()),
                    "config": {"environment_id": if slow { "slow" } else { "fast" }},
                });
                let result = send(
                    &http,
                    format!("{base}/api/v1/agent/runs"),
                    &key,
                    &[("Idempotency-Key", idem.clone())],
                    body.clone(),
                )
                .await;
                let outcome = outcome(&result);
                let run_id = match &result {
                    Ok((_, v)) if outcome == Outcome::Acked => {
                        v["run_id"].as_str().map(str::to_string)
                    }
                    _ => None,
                };
                let mut ledger = ledger.lock().expect("ledger");
                if let Some(id) = &run_id {
                    ledger.runs.push(id.clone());
                }
                ledger.creates.insert(
                    idem,
                    Create {
                        body,
                        marker,
                        run_id,
                        outcome,
                    },
                );
            }
            (5..=7, Some(run)) => {
                let message = format!("followup-{}", ulid::Ulid::new());
                let result = send(
                    &http,
                    format!("{base}/api/v1/agent/runs/{run}/followups"),
                    &key,
                    &[],
                    json!({"message": message}),
                )
                .await;
                let outcome = outcome(&result);
                ledger
                    .lock()
                    .expect("ledger")
                    .followups
                    .push((run, message, outcome));
            }
            (_, Some(run)) => {
                let result = send(
                    &http,
                    format!("{base}/api/v1/agent/runs/{run}/cancel"),
                    &key,
                    &[],
                    json!({}),
                )
                .await;
                let outcome = outcome(&result);
                ledger.lock().expect("ledger").cancels.push((run, outcome));
            }
        }
    }
}

fn cycles() -> usize {
    std::env::var("CRASHLOOP_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

fn restart(dir: &Path, key: &str, logs: &mut Vec<Arc<Mutex<Vec<String>>>>) -> Server {
    let mut server = Server::start_in(dir, CONFIG);
    server.key = key.to_string();
    logs.push(server.log.clone());
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_work_survives_random_sigkills() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut logs = Vec::new();
    let first = Server::start_in(tmp.path(), CONFIG);
    let key = first.key.clone();
    assert!(key.starts_with("rl_"), "no admin key printed");
    logs.push(first.log.clone());
    let mut server = first;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let cycles = cycles();

    for cycle in 0..cycles {
        server.wait_ready().await;
        let alive = Arc::new(AtomicBool::new(true));
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|i| {
                tokio::spawn(client(
                    server.base.clone(),
                    key.clone(),
                    ledger.clone(),
                    alive.clone(),
                    cycle * CLIENTS + i,
                ))
            })
            .collect();
        let run_for = rand::thread_rng().gen_range(200..1500);
        tokio::time::sleep(Duration::from_millis(run_for)).await;
        server.kill();
        alive.store(false, Ordering::Relaxed);
        for t in tasks {
            t.await.expect("client task");
        }
        server = restart(tmp.path(), &key, &mut logs);
    }
    server.wait_ready().await;

    // Creates whose answer was lost are retried with their key: exactly-once creation.
    let retries: Vec<(String, Value)> = ledger
        .lock()
        .expect("ledger")
        .creates
        .iter()
        .filter(|(_, c)| c.outcome != Outcome::Acked)
        .map(|(k, c)| (k.clone(), c.body.clone()))
        .collect();
    let http = reqwest::Client::new();
    for (idem, body) in retries {
        let (status, v) = send(
            &http,
            server.api("/agent/runs"),
            &key,
            &[("Idempotency-Key", idem.clone())],
            body,
        )
        .await
        .expect("retry");
        assert_eq!(status, 200, "{v}");
        let id = v["run_id"].as_str().expect("run id").to_string();
        ledger
            .lock()
            .expect("ledger")
            .creates
            .get_mut(&idem)
            .expect("create")
            .run_id = Some(id);
    }

    let ledger = Arc::try_unwrap(ledger)
        .map_err(|_| "ledger still shared")
        .expect("ledger")
        .into_inner()
        .expect("ledger");
    let mut checked = 0usize;

    // Every create exists exactly once, under the id it was acknowledged with: one walk over
    // all runs, counting the runs that carry each create's unique prompt. The walk is in
    // creation order, where positions never move: runs queued before the last kill are still
    // starting and finishing, and would move in the default `updated_at` order.
    let mut by_prompt: HashMap<String, Vec<String>> = HashMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/agent/runs?limit=100&sort_by=created_at&cursor={c}"),
            None => "/agent/runs?limit=100&sort_by=created_at".to_string(),
        };
        let (status, page) = server.get(&key, &path).await;
        assert_eq!(status, 200, "{page}");
        for r in page["runs"].as_array().into_iter().flatten() {
            let prompt = r["prompt"].as_str().unwrap_or_default().to_string();
            let id = r["run_id"].as_str().unwrap_or_default().to_string();
            by_prompt.entry(prompt).or_default().push(id);
        }
        match page["page_info"]["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let mut histories: HashMap<String, Vec<Value>> = HashMap::new();
    for c in ledger.creates.values() {
        let id = c.run_id.as_ref().expect("every create has an id by now");
        let prompt = c.body["prompt"].as_str().unwrap_or_default();
        assert_eq!(server.run(id).await["prompt"], prompt);
        assert_eq!(
            by_prompt.get(prompt).map(Vec::as_slice),
            Some([id.clone()].as_slice()),
            "create {} is not exactly once",
            c.marker
        );
        let events = server.events(id).await;
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["seq"], i as u64, "run {id}: sequence gap: {events:?}");
        }
        assert_eq!(events.first().map(|e| &e["type"]), Some(&json!("Created")));
        histories.insert(id.clone(), events);
        checked += 1;
    }
    assert_eq!(
        by_prompt.values().map(Vec::len).sum::<usize>(),
        ledger.creates.len(),
        "runs that no client created"
    );

    // Every acknowledged follow-up and cancel is in its run's history; nothing else is.
    let mut sent_messages: HashMap<&str, &str> = HashMap::new();
    for (run, message, outcome) in &ledger.followups {
        sent_messages.insert(message, run);
        let history = &histories[run];
        let times = history
            .iter()
            .filter(|e| e["type"] == "FollowupReceived" && e["data"]["message"] == *message)
            .count();
        match outcome {
            Outcome::Acked => assert_eq!(times, 1, "acknowledged follow-up {message} on {run}"),
            Outcome::Refused => assert_eq!(times, 0, "refused follow-up {message} on {run}"),
            Outcome::Unknown => assert!(times <= 1, "follow-up {message} twice on {run}"),
        }
        checked += 1;
    }
    let cancel_sent: HashSet<&str> = ledger
        .cancels
        .iter()
        .filter(|(_, o)| *o != Outcome::Refused)
        .map(|(r, _)| r.as_str())
        .collect();
    for (run, outcome) in &ledger.cancels {
        if *outcome == Outcome::Acked {
            assert!(
                histories[run].iter().any(|e| e["type"] == "Cancelled"),
                "acknowledged cancel of {run} is not in its history"
            );
        }
        checked += 1;
    }
    for (run, history) in &histories {
        for e in history {
            match e["type"].as_str() {
                Some("FollowupReceived") => {
                    let message = e["data"]["message"].as_str().unwrap_or_default();
                    assert_eq!(
                        sent_messages.get(message).copied(),
                        Some(run.as_str()),
                        "follow-up nobody sent to {run}"
                    );
                }
                Some("Cancelled") => {
                    assert!(
                        cancel_sent.contains(run.as_str()),
                        "cancel nobody sent: {run}"
                    )
                }
                _ => {}
            }
        }
    }

    // The index agrees with the log, and nothing panicked.
    server.kill();
    let data = server.data_dir.to_str().expect("utf-8 path").to_string();
    let (ok, out, err) = cli(&["replay", "--verify", "--data-dir", &data], &[]);
    assert!(ok, "replay --verify: {out}{err}");
    for log in &logs {
        let log = log.lock().expect("log").join("\n");
        assert!(!log.contains("panicked"), "a server panicked:\n{log}");
        assert!(
            !log.contains("refuses every write"),
            "a server took a write for failed:\n{log}"
        );
    }
    let acked = ledger
        .creates
        .values()
        .filter(|c| c.outcome == Outcome::Acked)
        .count();
    eprintln!(
        "crash loop: {cycles} SIGKILL cycles survived; {} creates ({acked} acknowledged), {} follow-ups, {} cancels; {checked} operations checked",
        ledger.creates.len(),
        ledger.followups.len(),
        ledger.cancels.len()
    );
}
