//! The store on a disk that fills or fails (issue #27), with the real binary on real mounts:
//! - the data directory on a small tmpfs filled through the API with 60 KB prompts: every write
//!   is refused with a clear 503 (never a 500), reads go on, `/readyz` and `/metrics` say why,
//!   SIGTERM stops the server, and a restart after the tmpfs is grown serves everything that
//!   was acknowledged, with `replay --verify` clean;
//! - a tmpfs filled from outside below the space reserve: new work is refused as retryable,
//!   and writes resume by themselves once the space is freed;
//! - an ext4 image on a loop device switched read-only mid-load by the kernel's error trigger:
//!   writes are refused as not retryable, reads go on, and after a repair and remount the
//!   restart has every acknowledged run;
//! - a chatty agent filling a tmpfs: its run ends `FAILED` naming the cause, its process is gone;
//! - 2,000 creates with bodies from 1 KB to 200 KB with concurrent follow-ups and lists, all 2xx.
//!
//! Mounting needs root (CI runs as root); where a mount fails the test says so and returns.
//! The mounting tests take a file lock, so they never run at the same time as each other.

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{cli, Server};
use serde_json::{json, Value};

/// A mount made for a test; unmounted (and its loop device detached) when dropped, even when
/// the test fails.
struct Mount {
    dir: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazy: a server that is still being killed may hold files open.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn sh(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One mounting test at a time, across the test processes nextest runs in parallel.
fn mount_lock() -> nix::fcntl::Flock<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("runledger-storage-tests.lock"))
        .expect("lock file");
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("lock: {e}"))
}

/// A tmpfs of `mb` MiB at `dir`, or `None` (with a message) where mounting is not possible.
fn tmpfs(dir: &Path, mb: u64) -> Option<Mount> {
    let lock = mount_lock();
    std::fs::create_dir_all(dir).expect("mkdir");
    if !sh(Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
        .arg(dir))
    {
        eprintln!("SKIPPED: cannot mount a tmpfs (this test needs root)");
        return None;
    }
    Some(Mount {
        dir: dir.to_path_buf(),
        _lock: lock,
    })
}

fn config(reserve_mb: u64, extra: &str) -> String {
    format!(
        r#"
[server]
bind = "127.0.0.1:0"
disk_reserve_mb = {reserve_mb}
stop_grace_secs = 2

[limits]
rate_limit = false

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 50

[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 600000
{extra}
"#
    )
}

/// 60 KB of pasted log, made unique by `tag`.
fn long_prompt(tag: &str) -> String {
    format!(
        "fix {tag}\n{}",
        "2026-11-25T12:00:00.000Z ERROR worker: request failed: connection reset by peer\n"
            .repeat(60 * 1024 / 80)
    )
}

async fn raw_get(server: &Server, url: &str) -> (u16, Value) {
    let r = server
        .client
        .get(url)
        .bearer_auth(&server.key)
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The problem body of a storage refusal: 503 `resource_unavailable`, words an operator
/// understands, `retryable` as given, the header saying the same.
fn assert_refused(status: u16, body: &Value, words: &[&str]) {
    assert_eq!(status, 503, "{body}");
    assert!(
        body["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("resource_unavailable")),
        "{body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        words.iter().any(|w| detail.contains(w)),
        "the detail names none of {words:?}: {body}"
    );
}

/// Every run in the store, by paging the list.
async fn all_runs(server: &Server) -> Vec<Value> {
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/agent/runs?limit=100".to_string();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, v) = server.get(&server.key.clone(), &path).await;
        assert_eq!(status, 200, "{v}");
        runs.extend(v["runs"].as_array().cloned().unwrap_or_default());
        match v["page_info"]["next_cursor"].as_str() {
            Some(c) if v["page_info"]["has_next_page"] != false => cursor = Some(c.to_string()),
            _ => return runs,
        }
    }
}

/// After a restart: every acknowledged run is there and none is left queued or in progress
/// (the restart records lost executions and re-queues; the fast environment finishes them).
async fn check_recovered(server: &Server, acked: &HashSet<String>, unknown: usize) {
    for id in acked {
        server
            .wait_run(id, "finished", |v| {
                v["state"] != "QUEUED" && v["state"] != "INPROGRESS"
            })
            .await;
    }
    let stored: HashSet<String> = all_runs(server)
        .await
        .iter()
        .filter_map(|r| r["run_id"].as_str().map(str::to_string))
        .collect();
    assert!(stored.is_superset(acked), "acknowledged runs are missing");
    // Nothing a client was told failed is in the store, except the writes whose outcome the
    // server said was unknown.
    assert!(
        stored.len() <= acked.len() + unknown,
        "{} runs stored, {} acknowledged, {unknown} unknown",
        stored.len(),
        acked.len()
    );
}

fn verify(data_dir: &Path) {
    let data = data_dir.to_str().expect("utf-8 path");
    let (ok, out, err) = cli(&["replay", "--verify", "--data-dir", data], &[]);
    assert!(ok, "replay --verify: {out}{err}");
    assert!(
        format!("{out}{err}").contains(" 0 differences"),
        "{out}{err}"
    );
}

/// POSTs with a deadline, so that a server that stops answering fails the test (with its log)
/// instead of hanging it.
async fn post_within(server: &Server, path: &str, body: Value) -> (u16, Value) {
    let sent = server
        .client
        .post(server.api(path))
        .bearer_auth(&server.key)
        .json(&body)
        .timeout(Duration::from_secs(20))
        .send()
        .await;
    match sent {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        }
        Err(e) => panic!("POST {path}: {e}; server log:\n{}", server.log_text()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_through_the_api_is_refused_clearly_and_a_restart_resumes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let Some(mount) = tmpfs(&tmp.path().join("mnt"), 24) else {
        return;
    };
    let dir = mount.dir.clone();
    let cfg = config(2, "");
    let log_level = [("RUST_LOG", "info".to_string())];
    let mut server = Server::start_with(&dir, &cfg, &log_level);
    let key = server.key.clone();
    server.wait_ready().await;
    let slow = server
        .create(json!({"prompt": "wait", "config": {"environment_id": "slow"}}))
        .await;
    let mut acked: HashSet<String> = HashSet::from([slow.clone()]);
    let mut unknown = 0;
    let mut refusal = None;
    for n in 0..2_000 {
        let (status, v) = post_within(
            &server,
            "/agent/runs",
            json!({"prompt": long_prompt(&n.to_string()), "config": {"environment_id": "fast"}}),
        )
        .await;
        if status == 200 {
            acked.insert(v["run_id"].as_str().expect("id").to_string());
            continue;
        }
        assert_refused(status, &v, &["filesystem is full", "almost full"]);
        if v["detail"].as_str().unwrap_or_default().contains("unknown") {
            unknown += 1;
        }
        refusal = Some(v);
        break;
    }
    let refusal = refusal.expect("24 MB never filled up");
    eprintln!("refused after {} creates: {refusal}", acked.len());
    // Every write is refused the same way, and nothing is appended.
    for _ in 0..5 {
        let (status, v) = post_within(
            &server,
            "/agent/runs",
            json!({"prompt": long_prompt("again")}),
        )
        .await;
        assert_refused(status, &v, &["filesystem is full", "almost full"]);
    }
    let (status, v) = post_within(
        &server,
        &format!("/agent/runs/{slow}/followups"),
        json!({"message": "more"}),
    )
    .await;
    assert_refused(status, &v, &["filesystem is full", "almost full"]);
    let (status, v) = post_within(&server, &format!("/agent/runs/{slow}/cancel"), json!({})).await;
    assert_refused(status, &v, &["filesystem is full", "almost full"]);
    let (status, v) = post_within(&server, "/admin/keys", json!({"name": "ci"})).await;
    assert_refused(status, &v, &["filesystem is full", "almost full"]);
    // Not ready, and the metrics say why.
    let (status, v) = raw_get(&server, &server.url("/readyz")).await;
    assert_refused(status, &v, &["filesystem is full", "almost full"]);
    let metrics = server.metrics().await;
    assert!(
        metrics.lines().any(|l| l == "runledger_store_writable 0"),
        "{metrics}"
    );
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("runledger_store_refused_writes_total "))
        .and_then(|n| n.parse().ok())
        .expect("refused counter");
    assert!(refused >= 8, "{refused}");
    // Reads answer from what is stored.
    for id in &acked {
        for what in ["", "/events", "/transcript"] {
            let (status, v) = server.get(&key, &format!("/agent/runs/{id}{what}")).await;
            assert_eq!(
                status,
                200,
                "{what}: {v}\nserver log:\n{}",
                server.log_text()
            );
        }
    }
    let (status, v) = server.get(&key, "/agent/runs?limit=50").await;
    assert_eq!(status, 200, "{v}");

    // SIGTERM stops it on the full disk within the documented bound (`stop_grace_secs` + 20 s).
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 22)
        .await;
    let log = server.log_text();
    assert!(!log.contains("panicked"), "{log}");
    // Each change of state is logged once, never repeated per request. The disk may go from
    // "almost full" to "full" (a write of sled's own, or of the shutdown, that the released
    // reserve did not cover), which is a second change.
    let failed = log.matches("refuses every write").count();
    let low = log.matches("almost full: new work is refused").count();
    assert!(
        failed <= 1 && low <= 1 && failed + low >= 1,
        "one log line per change of state:\n{log}"
    );

    // Space back: the next start serves everything acknowledged, with no manual step.
    assert!(sh(Command::new("mount")
        .args(["-o", "remount,size=96m"])
        .arg(&dir)));
    let mut server = Server::start_with(&dir, &cfg, &log_level);
    server.key = key.clone();
    server.wait_ready().await;
    let created = server
        .create(json!({"prompt": "after", "config": {"environment_id": "fast"}}))
        .await;
    acked.insert(created);
    // The slow run's execution was lost to the stop or the restart: failed, so nothing is stuck.
    check_recovered(&server, &acked, unknown).await;
    let data_dir = server.data_dir.clone();
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    verify(&data_dir);
    drop(mount);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_space_refuses_new_work_until_space_is_freed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let Some(mount) = tmpfs(&tmp.path().join("mnt"), 32) else {
        return;
    };
    let dir = mount.dir.clone();
    let server = Server::start_in(&dir, &config(4, ""));
    let key = server.key.clone();
    server.wait_ready().await;
    let first = server
        .create(json!({"prompt": "before", "config": {"environment_id": "fast"}}))
        .await;
    assert!(dir.join("data/space-reserve").exists(), "no ballast made");
    // Something else on the filesystem takes all but 2 MB.
    let free = {
        let stat = nix::sys::statvfs::statvfs(&dir).expect("statvfs");
        stat.blocks_available() as u64 * stat.fragment_size() as u64
    };
    let filler = dir.join("filler");
    let file = std::fs::File::create(&filler).expect("filler");
    nix::fcntl::posix_fallocate(&file, 0, (free - (2 << 20)) as i64).expect("fallocate");
    drop(file);
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let (status, v) = server
            .post(&key, "/agent/runs", json!({"prompt": "during"}))
            .await;
        if status != 200 {
            break (status, v);
        }
        assert!(Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_refused(refused.0, &refused.1, &["almost full"]);
    assert_eq!(refused.1["retryable"], true, "{}", refused.1);
    assert!(
        !dir.join("data/space-reserve").exists(),
        "the ballast was not released"
    );
    let (status, v) = raw_get(&server, &server.url("/readyz")).await;
    assert_refused(status, &v, &["almost full"]);
    server.run(&first).await;
    // Space freed: writes resume by themselves.
    std::fs::remove_file(&filler).expect("rm filler");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, v) = server
            .post(&key, "/agent/runs", json!({"prompt": "after"}))
            .await;
        if status == 200 {
            break;
        }
        assert_refused(status, &v, &["almost full"]);
        assert!(Instant::now() < deadline, "writes never resumed: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.wait_ready().await;
    drop(server);
    drop(mount);
}

/// An ext4 image on a loop device, mounted with `errors=remount-ro`.
struct Ext4 {
    mount: Mount,
    image: PathBuf,
    device: String,
}

fn ext4(dir: &Path, image: &Path, mb: u64) -> Option<Ext4> {
    let lock = mount_lock();
    std::fs::create_dir_all(dir).expect("mkdir");
    let made = sh(Command::new("truncate")
        .args(["-s", &format!("{mb}M")])
        .arg(image))
        && sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(image))
        && sh(Command::new("mount")
            .args(["-o", "loop,errors=remount-ro"])
            .arg(image)
            .arg(dir));
    if !made {
        eprintln!("SKIPPED: cannot mount an ext4 image on a loop device (needs root, e2fsprogs and a loop device)");
        return None;
    }
    let out = Command::new("findmnt")
        .args(["-n", "-o", "SOURCE"])
        .arg(dir)
        .output()
        .expect("findmnt");
    let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Some(Ext4 {
        mount: Mount {
            dir: dir.to_path_buf(),
            _lock: lock,
        },
        image: image.to_path_buf(),
        device,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filesystem_switched_read_only_mid_load_is_refused_and_a_repaired_restart_resumes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let Some(fs) = ext4(&tmp.path().join("mnt"), &tmp.path().join("fs.img"), 128) else {
        return;
    };
    let dir = fs.mount.dir.clone();
    let loop_name = fs.device.trim_start_matches("/dev/").to_string();
    let trigger = PathBuf::from(format!("/sys/fs/ext4/{loop_name}/trigger_fs_error"));
    if !trigger.exists() {
        eprintln!(
            "SKIPPED: the kernel has no ext4 error trigger ({})",
            trigger.display()
        );
        return;
    }
    let cfg = config(4, "");
    let mut server = Server::start_in(&dir, &cfg);
    let key = server.key.clone();
    server.wait_ready().await;
    let mut acked = HashSet::new();
    let mut unknown = 0;
    let mut refused = None;
    for n in 0..1_000 {
        if n == 40 {
            std::fs::write(&trigger, "runledger test").expect("trigger the error");
        }
        let (status, v) = server
            .post(
                &key,
                "/agent/runs",
                json!({"prompt": long_prompt(&n.to_string()), "config": {"environment_id": "fast"}}),
            )
            .await;
        if status == 200 {
            acked.insert(v["run_id"].as_str().expect("id").to_string());
            continue;
        }
        assert_refused(status, &v, &["read-only", "I/O error"]);
        if v["detail"].as_str().unwrap_or_default().contains("unknown") {
            unknown += 1;
        }
        refused = Some(v);
        break;
    }
    let refused = refused.expect("the read-only filesystem was never noticed");
    assert_eq!(refused["retryable"], false, "{refused}");
    for _ in 0..3 {
        let (status, v) = server
            .post(&key, "/agent/runs", json!({"prompt": "again"}))
            .await;
        assert_refused(status, &v, &["read-only", "I/O error"]);
        assert_eq!(v["retryable"], false, "{v}");
    }
    for id in acked.iter().take(10) {
        server.run(id).await;
        server.events(id).await;
    }
    let (status, v) = raw_get(&server, &server.url("/readyz")).await;
    assert_refused(status, &v, &["read-only", "I/O error"]);
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 22)
        .await;
    // Repair and remount read-write; the restart needs no manual step.
    assert!(sh(Command::new("umount").arg(&dir)), "umount");
    // The loop device is detached asynchronously; checking the image while the old device
    // still holds it would race its last writes.
    common::eventually(20, "the loop device to be detached", || {
        Command::new("losetup")
            .arg("-j")
            .arg(&fs.image)
            .output()
            .is_ok_and(|o| o.stdout.is_empty())
    })
    .await;
    let _ = sh(Command::new("e2fsck").args(["-f", "-y"]).arg(&fs.image));
    assert!(
        sh(Command::new("mount")
            .args(["-o", "loop,errors=remount-ro"])
            .arg(&fs.image)
            .arg(&dir)),
        "remount"
    );
    let options = Command::new("findmnt")
        .args(["-n", "-o", "OPTIONS"])
        .arg(&dir)
        .output()
        .expect("findmnt");
    assert!(
        String::from_utf8_lossy(&options.stdout).starts_with("rw"),
        "the repaired filesystem is not writable: {}",
        String::from_utf8_lossy(&options.stdout)
    );
    let mut server = Server::start_in(&dir, &cfg);
    server.key = key.clone();
    server.wait_ready().await;
    check_recovered(&server, &acked, unknown).await;
    let data_dir = server.data_dir.clone();
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    verify(&data_dir);
    drop(fs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chatty_agent_filling_the_disk_fails_its_run_naming_the_cause() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let Some(mount) = tmpfs(&tmp.path().join("mnt"), 24) else {
        return;
    };
    let dir = mount.dir.clone();
    // The script lives where the sandboxed agent can read it (not the host's /tmp).
    let scripts = common::agent_visible_dir();
    let agent = scripts.path().join("chatty.sh");
    common::script(
        &agent,
        "line=$(head -c 4000 /dev/zero | tr '\\0' x)\nwhile true; do echo \"$line\"; done",
    );
    let extra = format!(
        "\n[[environments]]\nid = \"chatty\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    );
    let server = Server::start_in(&dir, &config(2, &extra));
    server.wait_ready().await;
    let id = server
        .create(json!({"prompt": "talk", "config": {"environment_id": "chatty"}}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let run = loop {
        let run = server.run(&id).await;
        if run["state"] != "QUEUED" && run["state"] != "INPROGRESS" {
            break run;
        }
        assert!(Instant::now() < deadline, "the run never ended: {run}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(run["state"], "FAILED", "{run}");
    let message = run["status_message"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("filesystem is full"),
        "the status names no cause: {run}"
    );
    // Found by their markers, as the server finds them: nothing of the agent is left.
    common::eventually(10, "the agent to be stopped", || {
        common::processes_of(&id).is_empty()
    })
    .await;
    drop(server);
    drop(mount);
}

/// 2,000 creates whose stored event spans sled's blob threshold (a prompt up to 64 KiB plus
/// MCP servers and metadata up to about 200 KB of body), with follow-ups and list reads
/// alongside: every request is answered 2xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_across_the_blob_threshold_never_fail_a_sync() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = config(0, "");
    let server = Server::start_in(tmp.path(), &cfg);
    server.wait_ready().await;
    let key = server.key.clone();
    let http = reqwest::Client::new();
    let base = server.base.clone();
    let mut tasks = Vec::new();
    for client in 0..4usize {
        let (http, base, key) = (http.clone(), base.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..500usize {
                let i = client * 500 + n;
                // 1 KB to 200 KB, spread evenly.
                let size = 1024 + (i * 7919 % 2000) * 100;
                let body = sized_body(i, size);
                let r = http
                    .post(format!("{base}/api/v1/agent/runs"))
                    .bearer_auth(&key)
                    .json(&body)
                    .send()
                    .await
                    .expect("create");
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                assert_eq!(status, 200, "create {i} of {size} bytes: {v}");
                let id = v["run_id"].as_str().expect("id").to_string();
                if n % 5 == 0 {
                    let r = http
                        .post(format!("{base}/api/v1/agent/runs/{id}/followups"))
                        .bearer_auth(&key)
                        .json(&json!({"message": "x".repeat(size.min(60_000))}))
                        .send()
                        .await
                        .expect("follow-up");
                    let status = r.status().as_u16();
                    assert!(
                        status == 200 || status == 400,
                        "follow-up: {status} {}",
                        r.text().await.unwrap_or_default()
                    );
                }
                if n % 10 == 0 {
                    let r = http
                        .get(format!("{base}/api/v1/agent/runs?limit=20"))
                        .bearer_auth(&key)
                        .send()
                        .await
                        .expect("list");
                    assert_eq!(r.status().as_u16(), 200);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
    let log = server.log_text();
    assert!(!log.contains("refuses every write"), "{log}");
}

/// A create body of about `size` bytes: the prompt up to 60 KB, `base_prompt` up to 16 KB, the
/// rest in MCP servers' headers (16 servers of 4 values of 2,000 bytes, within the limits).
fn sized_body(i: usize, size: usize) -> Value {
    let prompt_len = size.min(60 * 1024);
    let mut rest = size - prompt_len;
    let base_len = rest.min(16_000);
    rest -= base_len;
    let mut servers = serde_json::Map::new();
    let mut s = 0;
    while rest > 0 && s < 16 {
        let mut headers = serde_json::Map::new();
        for h in 0..4 {
            if rest == 0 {
                break;
            }
            let n = rest.min(2000);
            headers.insert(format!("h{h}"), Value::String("v".repeat(n)));
            rest -= n;
        }
        servers.insert(
            format!("s{s}"),
            json!({"url": "https://mcp.example/", "headers": headers}),
        );
        s += 1;
    }
    let mut prompt = format!("task {i}\n");
    prompt.push_str(&"p".repeat(prompt_len.saturating_sub(prompt.len())));
    let mut config = json!({"environment_id": "fast", "mcp_servers": servers});
    if base_len > 0 {
        config["base_prompt"] = Value::String("b".repeat(base_len));
    }
    json!({"prompt": prompt, "config": config})
}
