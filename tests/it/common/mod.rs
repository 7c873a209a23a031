//! Test harness: runs the real `runledger` binary on port 0 with a temporary data directory,
//! and a few helpers to talk to it. Waiting is always polling against a deadline.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_runledger");

/// A config with a fast environment (default), a slow one, and a single-slot one.
pub const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 200
model_id = "fast-model"

[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 60000

[[environments]]
id = "single"
harness = "demo"
demo_duration_ms = 60000
max_concurrent = 1
"#;

pub struct Server {
    child: Child,
    pub base: String,
    pub data_dir: PathBuf,
    pub config: PathBuf,
    /// The admin key printed on first start (empty on restarts).
    pub key: String,
    pub client: reqwest::Client,
    /// Everything the server has written to stderr so far.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    pub fn start() -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut server = Server::start_in(tmp.path(), CONFIG);
        server._tmp = Some(tmp);
        server
    }

    /// Starts a server on `dir` (kept by the caller), writing `config` there.
    pub fn start_in(dir: &Path, config: &str) -> Server {
        Server::start_with(dir, config, &[])
    }

    /// Like `start_in`, with extra environment variables for the server process.
    pub fn start_with(dir: &Path, config: &str, env: &[(&str, String)]) -> Server {
        Server::start_as(dir, config, env, None)
    }

    /// Like `start_with`, with the server running as `uid` (through `setpriv`; the test must be
    /// root).
    pub fn start_as(dir: &Path, config: &str, env: &[(&str, String)], uid: Option<u32>) -> Server {
        let config_path = dir.join("runledger.toml");
        std::fs::write(&config_path, config).expect("write config");
        let data_dir = dir.join("data");
        let mut command = match uid {
            None => Command::new(BIN),
            Some(uid) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .arg("--clear-groups")
                    .arg(BIN);
                c
            }
        };
        let mut child = command
            .args(["serve", "--config"])
            .arg(&config_path)
            .arg("--data-dir")
            .arg(&data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .spawn()
            .expect("spawn runledger");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let thread_log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("runledger listening on ") {
                    let _ = tx.send(addr.to_string());
                }
                if let Ok(mut log) = thread_log.lock() {
                    log.push(line);
                }
            }
        });
        let (ktx, krx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = ktx.send(line);
            }
        });
        let base = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(base) => base,
            Err(e) => {
                std::thread::sleep(Duration::from_millis(200));
                let log = log.lock().map(|l| l.join("\n")).unwrap_or_default();
                panic!("server did not start listening ({e}); its stderr:\n{log}");
            }
        };
        let key = krx
            .recv_timeout(Duration::from_millis(300))
            .unwrap_or_default();
        Server {
            child,
            base,
            data_dir,
            config: config_path,
            key,
            client: reqwest::Client::new(),
            log,
            _tmp: None,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's stderr so far, one string.
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Sends `signal` and waits for the server to exit; panics (with its stderr) if it does not
    /// within `secs` seconds.
    pub async fn stop_with(&mut self, signal: nix::sys::signal::Signal, secs: u64) -> ExitStatus {
        self.signal(signal);
        self.wait_exit(secs).await
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the server");
    }

    /// Waits for the server to exit; panics (with its stderr) if it does not within `secs`.
    pub async fn wait_exit(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {secs} s; stderr:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(r) = self.client.get(self.url("/readyz")).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("server never became ready");
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(self.api(path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The texts of a run's first 10,000 transcript entries, one per line.
    pub async fn transcript_text(&self, id: &str) -> String {
        let (status, t) = self
            .get(
                &self.key,
                &format!("/agent/runs/{id}/transcript?limit=10000"),
            )
            .await;
        assert_eq!(status, 200, "{t}");
        t["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every entry of a run's transcript, paged with `offset` until `has_more` is false.
    pub async fn transcript(&self, id: &str) -> Vec<Value> {
        let mut entries = Vec::new();
        let mut offset = 0;
        loop {
            let (status, page) = self
                .get(
                    &self.key,
                    &format!("/agent/runs/{id}/transcript?offset={offset}&limit=10000"),
                )
                .await;
            assert_eq!(status, 200, "{page}");
            entries.extend(page["entries"].as_array().cloned().unwrap_or_default());
            offset = page["next_offset"].as_u64().expect("next_offset");
            if page["has_more"] != true {
                return entries;
            }
        }
    }

    pub async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        let r = self
            .client
            .get(self.api(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Sends a follow-up to run `id` with this server's admin key: (status, body).
    pub async fn followup(&self, id: &str, body: Value) -> (u16, Value) {
        self.post(&self.key, &format!("/agent/runs/{id}/followups"), body)
            .await
    }

    pub async fn create(&self, body: Value) -> String {
        let (status, v) = self.post(&self.key.clone(), "/agent/runs", body).await;
        assert_eq!(status, 200, "{v}");
        v["run_id"].as_str().expect("run_id").to_string()
    }

    pub async fn run(&self, id: &str) -> Value {
        let (status, v) = self
            .get(&self.key.clone(), &format!("/agent/runs/{id}"))
            .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// Polls a run until `pred` holds (or panics after 20 s).
    pub async fn wait_run(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.run(id).await;
            if pred(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} never became {what}: {v}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_state(&self, id: &str, state: &str) -> Value {
        self.wait_run(id, state, |v| v["state"] == state).await
    }

    /// The Prometheus text of `/metrics`, read with the admin key (`key`, which a test that
    /// restarts the server carries over).
    pub async fn metrics(&self) -> String {
        let r = self
            .client
            .get(self.url("/metrics"))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("metrics");
        r.text().await.expect("text")
    }

    /// Polls `/metrics` until exactly `n` run actors are alive.
    pub async fn wait_live_actors(&self, n: usize) {
        let want = format!("runledger_live_run_actors {n}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let metrics = self.metrics().await;
            if metrics.lines().any(|l| l == want) {
                return;
            }
            assert!(Instant::now() < deadline, "never {want}: {metrics}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the run's log holds `n` events of type `kind`; returns every event.
    pub async fn wait_events(&self, id: &str, kind: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let events = self.events(id).await;
            if events.iter().filter(|e| e["type"] == kind).count() >= n {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "never {n} {kind} events in run {id}: {events:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every event of a run, paged with `after_seq` until a page has no `next`.
    pub async fn events(&self, id: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut after = String::new();
        loop {
            let (status, v) = self
                .get(
                    &self.key.clone(),
                    &format!("/agent/runs/{id}/events{after}"),
                )
                .await;
            assert_eq!(status, 200, "{v}");
            events.extend(v["events"].as_array().cloned().unwrap_or_default());
            match v["next"].as_u64() {
                Some(next) => after = format!("?after_seq={next}"),
                None => return events,
            }
        }
    }
}

impl Drop for Server {
    /// A graceful stop (SIGTERM), so that agents a test leaves running do not outlive it; SIGKILL
    /// if that takes more than 10 s. A server that was `kill`ed is already gone.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.kill();
    }
}

/// Runs the CLI; returns (exit success, stdout, stderr).
pub fn cli(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run cli");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether a process exists and has not exited (a zombie has exited).
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Polls until `f` holds, or panics with `what` after `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Writes an executable script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/usr/bin/env bash\n{body}\n")).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The live processes (as the host sees them) whose environment carries `run_id`'s marker:
/// every process of the run's agent, inside a sandbox or not. Process ids an agent writes down
/// itself are useless in a sandbox, whose PID namespace numbers them differently.
pub fn processes_of(run_id: &str) -> Vec<i32> {
    let marker = format!("RUNLEDGER_RUN_ID={run_id}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| running(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == marker.as_bytes()))
        })
        .collect()
}

/// A temporary directory that agents can read: not under the host's `/tmp` (a sandboxed agent
/// gets a private one, so a script there is not there for it), on a path every user can
/// traverse (agents of a root server run as uids of their runs' own, and the checkout may live
/// under a private home), and open to every user itself. `/var/tmp` is that on Debian and most
/// systems; the target directory is the fall-back. The sandbox hides the data directory and the
/// configuration file inside it all the same.
pub fn agent_visible_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let base = if Path::new("/var/tmp").is_dir() {
        PathBuf::from("/var/tmp")
    } else {
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
    };
    let dir = tempfile::Builder::new()
        .prefix("runledger-agents-")
        .tempdir_in(base)
        .expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// The status and body of a failure, which must be `application/problem+json`.
pub async fn problem(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert_eq!(ct, "application/problem+json");
    (status, r.json::<Value>().await.expect("json"))
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written to `dir`: the paths of the
/// certificate and the key, and the certificate's PEM.
pub fn self_signed(dir: &Path) -> (String, String, String) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("rcgen");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).expect("write cert");
    std::fs::write(&key, generated.key_pair.serialize_pem()).expect("write key");
    (cert.display().to_string(), key.display().to_string(), pem)
}

/// Every `.rs` file under `dir`, recursively (the source checks of `layers` and
/// `architecture`).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
