//! Webhook deliveries with the real binary and a command agent (issue #20): every owed
//! notification arrives after a SIGKILL, no `run.succeeded` is lost across kill cycles, a
//! redirect is never followed, and a 410 Gone disables a subscription across a restart. The
//! receiver checks every signature with the crate's own verifier (the Python suite,
//! `tests/sdk/test_webhooks.py`, checks them with the `standardwebhooks` library).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, Server};
use rand::Rng;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    topic: String,
    run_id: String,
    state: String,
    /// The status the receiver answered.
    answered: u16,
}

/// A local webhook receiver: answers every request with `status` (a 3xx with a `Location` to
/// `redirect_to`), checks each signature, and keeps what it got.
#[derive(Clone)]
struct Receiver {
    url: String,
    status: Arc<AtomicU16>,
    /// How long it thinks before answering: a kill then often lands while a delivery is owed.
    delay_ms: Arc<AtomicU64>,
    got: Arc<Mutex<Vec<Received>>>,
    bad_signatures: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    async fn start(status: u16, redirect_to: Option<String>) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let receiver = Receiver {
            url,
            status: Arc::new(AtomicU16::new(status)),
            delay_ms: Arc::default(),
            got: Arc::default(),
            bad_signatures: Arc::default(),
        };
        let r = receiver.clone();
        let key = runledger::config::webhook_key(SECRET).expect("key");
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let r = r.clone();
                let key = key.clone();
                let redirect_to = redirect_to.clone();
                tokio::spawn(async move {
                    let Some((headers, body)) = read_request(&mut conn).await else {
                        return;
                    };
                    let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
                    let id = header("webhook-id");
                    let timestamp: i64 = header("webhook-timestamp").parse().unwrap_or(0);
                    let ok = runledger::webhooks::sign::verify(
                        &key,
                        &id,
                        timestamp,
                        &body,
                        &header("webhook-signature"),
                    );
                    if !ok {
                        r.bad_signatures.lock().expect("lock").push(id.clone());
                    }
                    let delay = r.delay_ms.load(Ordering::SeqCst);
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        // A sender that went away (killed) never learns of the answer: the
                        // request does not count as delivered.
                        let mut probe = [0u8; 1];
                        match conn.try_read(&mut probe) {
                            Ok(0) => return,
                            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return,
                            _ => {}
                        }
                    }
                    let status = r.status.load(Ordering::SeqCst);
                    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    r.got.lock().expect("lock").push(Received {
                        id,
                        topic: value["type"].as_str().unwrap_or("").to_string(),
                        run_id: value["data"]["run_id"].as_str().unwrap_or("").to_string(),
                        state: value["data"]["state"].as_str().unwrap_or("").to_string(),
                        answered: status,
                    });
                    let location = match (&redirect_to, status) {
                        (Some(to), 300..=399) => format!("Location: {to}\r\n"),
                        _ => String::new(),
                    };
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\n{location}Content-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                });
            }
        });
        receiver
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().expect("lock").clone()
    }

    /// The (run, type) pairs answered 2xx.
    fn delivered(&self) -> BTreeSet<(String, String)> {
        self.got()
            .into_iter()
            .filter(|r| (200..300).contains(&r.answered))
            .map(|r| (r.run_id, r.topic))
            .collect()
    }

    fn assert_signatures(&self) {
        let bad = self.bad_signatures.lock().expect("lock");
        assert!(bad.is_empty(), "deliveries with a bad signature: {bad:?}");
    }
}

/// Reads one HTTP/1.1 request: lower-cased headers and the body of `Content-Length` bytes.
async fn read_request(
    conn: &mut tokio::net::TcpStream,
) -> Option<(BTreeMap<String, String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let headers: BTreeMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((headers, body))
}

/// A config with a command agent that succeeds after `agent_ms`, and one subscription per
/// `(name, url, extra)`.
fn config(dir: &Path, agent_ms: u64, hooks: &[(&str, &str, &str)]) -> String {
    let agent = dir.join("agent.sh");
    common::script(&agent, &format!("sleep {}", agent_ms as f64 / 1000.0));
    let mut text = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n[limits]\nrate_limit = false\n\n\
         [secrets]\nHOOK = {{ env = \"TEST_WEBHOOK_SECRET\" }}\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\nsandbox = \"none\"\n\
         max_concurrent = 8\n",
        agent.display()
    );
    for (name, url, extra) in hooks {
        text.push_str(&format!(
            "\n[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret = \"HOOK\"\n\
             allow_private = true\nretry_initial_ms = 100\ntimeout_secs = 5\n{extra}"
        ));
    }
    text
}

fn start(dir: &Path, config: &str) -> Server {
    Server::start_with(dir, config, &[("TEST_WEBHOOK_SECRET", SECRET.to_string())])
}

/// Restarts on the same data directory with the admin key of the first start.
fn restart(dir: &Path, config: &str, key: &str) -> Server {
    let mut s = start(dir, config);
    s.key = key.to_string();
    s
}

/// Every state change of a run that ran once and succeeded.
const LIFE: [&str; 3] = ["run.queued", "run.started", "run.succeeded"];

#[tokio::test]
async fn every_owed_notification_arrives_after_a_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(500, None).await;
    let config = config(dir.path(), 50, &[("ci", &receiver.url, "")]);
    let mut s = start(dir.path(), &config);
    s.wait_ready().await;
    let key = s.key.clone();
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(s.create(json!({"prompt": format!("run {i}")})).await);
    }
    for id in &ids {
        s.wait_state(id, "SUCCEEDED").await;
    }
    // Owed and failing: every run's success was tried (and answered 500) at least once.
    eventually(20, "a failed attempt of every run.succeeded", || {
        let tried: BTreeSet<String> = receiver
            .got()
            .into_iter()
            .filter(|r| r.topic == "run.succeeded")
            .map(|r| r.run_id)
            .collect();
        ids.iter().all(|id| tried.contains(id))
    })
    .await;
    let before: BTreeMap<(String, String), String> = receiver
        .got()
        .into_iter()
        .map(|r| ((r.run_id, r.topic), r.id))
        .collect();
    // An attempt is recorded once its answer is read, and without a sync of its own (only the
    // outbox is durable before an event): the failed attempt read back below must be in the
    // record, then made durable by the next durable write (a key's creation syncs the store),
    // before the kill, or the kill can land between the receiver's answer and the record.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let path = format!("/agent/runs/{}/deliveries", ids[0]);
        let (_, body) = s.get(&key, &path).await;
        let recorded = body["deliveries"].as_array().is_some_and(|all| {
            all.iter()
                .any(|d| d["type"] == "run.succeeded" && d["attempts"][0]["status"] == 500)
        });
        if recorded {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failed attempt recorded: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = s.post(&key, "/admin/keys", json!({"name": "sync"})).await;
    assert!((200..300).contains(&status), "{body}");
    s.kill();
    receiver.status.store(200, Ordering::SeqCst);
    let s = restart(dir.path(), &config, &key);
    s.wait_ready().await;
    eventually(30, "every owed notification after the restart", || {
        let delivered = receiver.delivered();
        ids.iter().all(|id| {
            LIFE.iter()
                .all(|t| delivered.contains(&(id.clone(), t.to_string())))
        })
    })
    .await;
    // The same delivery, the same id, before and after the crash.
    for r in receiver.got().into_iter().filter(|r| r.answered == 200) {
        if let Some(id) = before.get(&(r.run_id.clone(), r.topic.clone())) {
            assert_eq!(
                &r.id, id,
                "a retry after the restart changed its webhook-id"
            );
        }
    }
    receiver.assert_signatures();
    // The record shows the failed attempts and the delivery that ended them.
    let (status, body) = s
        .get(&key, &format!("/agent/runs/{}/deliveries", ids[0]))
        .await;
    assert_eq!(status, 200, "{body}");
    let succeeded = body["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .find(|d| d["type"] == "run.succeeded")
        .expect("the run.succeeded delivery")
        .clone();
    assert_eq!(succeeded["state"], "delivered", "{succeeded}");
    assert_eq!(succeeded["subscription"], "ci");
    let attempts = succeeded["attempts"].as_array().expect("attempts");
    assert!(attempts.len() >= 2, "{succeeded}");
    assert_eq!(attempts[0]["status"], 500);
    assert_eq!(attempts.last().expect("last")["status"], 200);
    assert!(attempts[0]["next_retry_at"].is_string());
    let metrics = s.metrics().await;
    assert!(
        metrics.contains(
            "runledger_webhook_attempts_total{subscription=\"ci\",outcome=\"delivered\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("runledger_webhook_deliveries_owed 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn no_run_succeeded_is_lost_across_twenty_kill_cycles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(200, None).await;
    receiver.delay_ms.store(150, Ordering::SeqCst);
    let config = config(
        dir.path(),
        20,
        &[(
            "ci",
            &receiver.url,
            "events = [\"run.succeeded\", \"run.failed\"]\n",
        )],
    );
    let mut s = start(dir.path(), &config);
    s.wait_ready().await;
    let key = s.key.clone();
    let mut created: Vec<String> = Vec::new();
    for cycle in 0..20 {
        if cycle > 0 {
            s = restart(dir.path(), &config, &key);
            s.wait_ready().await;
        }
        // A few runs, then a kill at a random moment while they finish.
        let mut pending = Vec::new();
        for i in 0..3 {
            let body = json!({"prompt": format!("cycle {cycle} run {i}")});
            pending.push(s.post(&key, "/agent/runs", body));
        }
        for answer in futures_util::future::join_all(pending).await {
            if let (200, body) = answer {
                created.push(body["run_id"].as_str().expect("run_id").to_string());
            }
        }
        let pause = rand::thread_rng().gen_range(0..250);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        s.kill();
    }
    let s = restart(dir.path(), &config, &key);
    s.wait_ready().await;
    // Every run ends (a run whose execution a kill cut short is failed at the next start),
    // and its end is announced.
    let mut ends = BTreeMap::new();
    for id in &created {
        let run = s
            .wait_run(id, "a terminal state", |r| {
                matches!(r["state"].as_str(), Some("SUCCEEDED" | "FAILED"))
            })
            .await;
        let topic = match run["state"].as_str() {
            Some("SUCCEEDED") => "run.succeeded",
            _ => "run.failed",
        };
        ends.insert(id.clone(), topic);
    }
    assert!(
        ends.values().any(|t| *t == "run.succeeded"),
        "no run succeeded at all: {ends:?}"
    );
    eventually(30, "every run's end announced", || {
        let delivered = receiver.delivered();
        ends.iter()
            .all(|(id, topic)| delivered.contains(&(id.clone(), topic.to_string())))
    })
    .await;
    receiver.assert_signatures();
    // What a delivery carries is the run as of its event.
    for r in receiver.got() {
        let want = if r.topic == "run.succeeded" {
            "SUCCEEDED"
        } else {
            "FAILED"
        };
        assert_eq!(r.state, want, "{r:?}");
    }
}

#[tokio::test]
async fn a_redirect_is_a_failed_attempt_and_never_followed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let elsewhere = Receiver::start(200, None).await;
    let redirecting = Receiver::start(302, Some(elsewhere.url.clone())).await;
    let config = config(
        dir.path(),
        10,
        &[("hop", &redirecting.url, "events = [\"run.succeeded\"]\n")],
    );
    let s = start(dir.path(), &config);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "go"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    eventually(20, "three attempts at the redirecting receiver", || {
        redirecting.got().len() >= 3
    })
    .await;
    assert!(elsewhere.got().is_empty(), "the redirect was followed");
    let ids: BTreeSet<String> = redirecting.got().into_iter().map(|r| r.id).collect();
    assert_eq!(
        ids.len(),
        1,
        "every retry carries the same webhook-id: {ids:?}"
    );
    let (_, body) = s.get(&s.key, &format!("/agent/runs/{id}/deliveries")).await;
    let delivery = &body["deliveries"][0];
    assert_eq!(delivery["state"], "pending", "{body}");
    assert_eq!(delivery["attempts"][0]["status"], 302, "{body}");
    assert!(s.log_text().contains("webhook delivery attempt failed"));
    redirecting.assert_signatures();
    // A clean stop with deliveries owed and attempts in flight: the dispatcher lets go.
    let mut s = s;
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    assert!(status.success(), "{status:?}: {}", s.log_text());
}

#[tokio::test]
async fn gone_disables_a_subscription_until_its_configuration_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gone = Receiver::start(410, None).await;
    let other = Receiver::start(200, None).await;
    let hooks = [
        ("gone", gone.url.as_str(), "events = [\"run.succeeded\"]\n"),
        (
            "other",
            other.url.as_str(),
            "events = [\"run.succeeded\"]\n",
        ),
    ];
    let config = config(dir.path(), 10, &hooks);
    let mut s = start(dir.path(), &config);
    s.wait_ready().await;
    let key = s.key.clone();
    let first = s.create(json!({"prompt": "one"})).await;
    s.wait_state(&first, "SUCCEEDED").await;
    eventually(20, "the 410", || !gone.got().is_empty()).await;
    eventually(20, "the other subscription's delivery", || {
        other.delivered().len() == 1
    })
    .await;
    // A receiver has its request before the server records the answer: wait for both
    // records (the disable is written after the 410 arrives).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (states, body) = loop {
        let (_, body) = s
            .get(&key, &format!("/agent/runs/{first}/deliveries"))
            .await;
        let states: BTreeMap<String, String> = body["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .map(|d| {
                (
                    d["subscription"].as_str().unwrap_or("").to_string(),
                    d["state"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let settled = states.get("gone").is_some_and(|s| s != "pending")
            && states.get("other").is_some_and(|s| s != "pending");
        if settled || std::time::Instant::now() > deadline {
            break (states, body);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(states["gone"], "disabled", "{body}");
    assert_eq!(states["other"], "delivered", "{body}");
    // The server's stderr reaches the test through a reader thread: a moment later.
    eventually(5, "the log of the disable", || {
        s.log_text().contains("webhook disabled")
    })
    .await;
    // Disabled for good: a restart with the same configuration keeps it so.
    s.kill();
    let s = restart(dir.path(), &config, &key);
    s.wait_ready().await;
    let second = s.create(json!({"prompt": "two"})).await;
    s.wait_state(&second, "SUCCEEDED").await;
    eventually(20, "the other subscription's second delivery", || {
        other.delivered().len() == 2
    })
    .await;
    assert_eq!(
        gone.got().len(),
        1,
        "a disabled subscription was called again"
    );
    // A changed configuration (here its events) enables it again.
    let mut s = s;
    s.kill();
    let changed = config.replacen(
        &format!("url = \"{}\"\nsecret = \"HOOK\"\nallow_private = true\nretry_initial_ms = 100\ntimeout_secs = 5\nevents = [\"run.succeeded\"]", gone.url),
        &format!("url = \"{}\"\nsecret = \"HOOK\"\nallow_private = true\nretry_initial_ms = 100\ntimeout_secs = 5\nevents = [\"run.succeeded\", \"run.failed\"]", gone.url),
        1,
    );
    assert_ne!(changed, config);
    let s = restart(dir.path(), &changed, &key);
    s.wait_ready().await;
    let third = s.create(json!({"prompt": "three"})).await;
    s.wait_state(&third, "SUCCEEDED").await;
    eventually(20, "the re-enabled subscription's call", || {
        gone.got().len() == 2
    })
    .await;
    gone.assert_signatures();
}

/// An HTTPS receiver whose certificate no public root signed: the handshake fails, no request
/// is read, and the attempt's record says why.
#[tokio::test]
async fn https_is_verified_and_a_self_signed_receiver_gets_nothing() {
    use std::io::Read;
    let dir = tempfile::tempdir().expect("tempdir");
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("rcgen");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, generated.cert.pem()).expect("write cert");
    std::fs::write(&key, generated.key_pair.serialize_pem()).expect("write key");
    let tls = Arc::new(runledger::tls::load(&cert, &key).expect("tls"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (handshakes, requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (h, r) = (handshakes.clone(), requests.clone());
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let Ok(conn) = rustls::ServerConnection::new(tls.clone()) else {
                continue;
            };
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            let mut buf = [0u8; 1024];
            if matches!(stream.read(&mut buf), Ok(n) if n > 0) {
                r.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let url = format!("https://localhost:{port}/hook");
    let config = config(
        dir.path(),
        10,
        &[("tls", &url, "events = [\"run.succeeded\"]\n")],
    );
    let s = start(dir.path(), &config);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "go"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let path = format!("/agent/runs/{id}/deliveries");
    let mut record = Value::Null;
    for _ in 0..400 {
        let (_, body) = s.get(&s.key, &path).await;
        if body["deliveries"][0]["attempts"][0].is_object() {
            record = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let attempt = &record["deliveries"][0]["attempts"][0];
    assert!(attempt.is_object(), "no attempt recorded");
    assert!(attempt.get("status").is_none(), "{record}");
    let error = attempt["error"].as_str().unwrap_or("");
    assert!(error.contains("certificate"), "{error}");
    assert!(handshakes.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        requests.load(Ordering::SeqCst),
        0,
        "a request crossed an unverified TLS"
    );
}

#[tokio::test]
async fn a_reported_artifact_is_announced_to_the_subscriptions_that_ask_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(200, None).await;
    let text = config(
        dir.path(),
        0,
        &[(
            "artifacts",
            &receiver.url,
            "events = [\"run.artifact\", \"run.succeeded\"]\n",
        )],
    );
    // The agent (written over the one `config` wrote) reports a pull request, then ends.
    let agent = dir.path().join("agent.sh");
    common::script(
        &agent,
        r#"printf '{"type":"pull_request","url":"https://git.example.com/a/b/pull/7","branch":"fix"}\n' >> "$RUNLEDGER_REPORT""#,
    );
    let s = start(dir.path(), &text);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "open a pull request"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(
        run["artifacts"][0]["artifact_type"], "PULL_REQUEST",
        "{run}"
    );
    eventually(20, "run.artifact and run.succeeded", || {
        let delivered = receiver.delivered();
        delivered.contains(&(id.clone(), "run.artifact".into()))
            && delivered.contains(&(id.clone(), "run.succeeded".into()))
    })
    .await;
    let topics: BTreeSet<String> = receiver.got().into_iter().map(|r| r.topic).collect();
    assert_eq!(
        topics,
        BTreeSet::from(["run.artifact".to_string(), "run.succeeded".to_string()]),
        "only the asked-for topics"
    );
    receiver.assert_signatures();
}
