//! `runledger inspect FILE`: the bundle's run served read-only from a temporary directory with
//! a key made for the session; the API's reads and the console answer, every write is 405
//! naming the read-only mode, and the directory is gone once the server stops.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::BIN;
use serde_json::{json, Value};

use super::support::{path_str, source};

#[tokio::test]
async fn inspect_serves_the_runs_reads_and_console_and_refuses_writes() {
    let src = source().await;
    let out = tempfile::tempdir().expect("tempdir");
    let file = out.path().join("run.bundle");
    let (ok, err) = src.export(&file);
    assert!(ok, "{err}");

    let mut child = Command::new(BIN)
        .args(["inspect", path_str(&file), "--bind", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inspect");
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    let etx = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = etx.send(("err", line));
        }
    });
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(("out", line));
        }
    });
    let (mut base, mut key, mut removes) = (None, None, None);
    let mut said = Vec::new();
    while base.is_none() || key.is_none() || removes.is_none() {
        let Ok((stream, line)) = rx.recv_timeout(Duration::from_secs(30)) else {
            panic!("inspect did not start; it said:\n{}", said.join("\n"));
        };
        said.push(line.clone());
        if stream == "out" {
            key = Some(line);
        } else if let Some(addr) = line.strip_prefix("runledger listening on ") {
            base = Some(addr.to_string());
        } else if let Some((_, dir)) = line.split_once("ends the session and removes ") {
            removes = Some(std::path::PathBuf::from(dir));
        }
    }
    let (base, key, dir) = (
        base.expect("base"),
        key.expect("key"),
        removes.expect("dir"),
    );
    assert!(dir.exists());
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let key = key.clone();
        let base = base.clone();
        async move {
            let r = client
                .get(format!("{base}{path}"))
                .bearer_auth(&key)
                .send()
                .await
                .expect("get");
            let status = r.status().as_u16();
            (status, r.text().await.expect("text"))
        }
    };
    let id = &src.id;
    let (status, body) = get(format!("/api/v1/agent/runs/{id}")).await;
    assert_eq!(status, 200, "{body}");
    let run: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(run["state"], "SUCCEEDED");
    assert_eq!(run["title"], "bundle me");
    let (status, body) = get("/api/v1/agent/runs".into()).await;
    assert_eq!(status, 200);
    assert!(body.contains(id.as_str()), "{body}");
    let (status, body) = get(format!("/api/v1/agent/runs/{id}/events")).await;
    assert_eq!(status, 200);
    let events: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        events["events"].as_array().map(Vec::len),
        Some(src.events.len())
    );
    let (status, _) = get("/signin".into()).await;
    assert_eq!(status, 200, "the console's sign-in page");

    // Every write is refused, whatever it is.
    for (path, body) in [
        ("/api/v1/agent/runs".to_string(), json!({"prompt": "p"})),
        (
            format!("/api/v1/agent/runs/{id}/followups"),
            json!({"message": "m"}),
        ),
        (format!("/api/v1/agent/runs/{id}/cancel"), json!({})),
        ("/api/v1/admin/keys".to_string(), json!({"name": "k"})),
    ] {
        let r = client
            .post(format!("{base}{path}"))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(r.status().as_u16(), 405, "{path}");
        let problem: Value = r.json().await.expect("problem");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains("read-only")),
            "{problem}"
        );
    }
    let r = client
        .delete(format!("{base}/api/v1/agent/runs/{id}"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status().as_u16(), 405);
    // The run is as it was: nothing ran.
    let (_, body) = get(format!("/api/v1/agent/runs/{id}")).await;
    let again: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(again["state"], "SUCCEEDED");
    assert_eq!(again["updated_at"], run["updated_at"]);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("signal");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        assert!(std::time::Instant::now() < deadline, "inspect did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!dir.exists(), "{} is left", dir.display());
}
