//! The edges a security review found (issue #18): a private data directory, the secret that
//! signs session links rotated, read-only commands that create nothing, slow bodies timed out,
//! capped transcripts, problem+json for every client error, server-made trace ids, `Accept`
//! qualities, the headers of HTML answers and one-line CLI errors.

use crate::common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{cli, script, Server, BIN, CONFIG};
use serde_json::{json, Value};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("exists")
        .permissions()
        .mode()
        & 0o7777
}

/// Every file under `dir` (not following links), with its mode.
fn modes_under(dir: &Path) -> Vec<(std::path::PathBuf, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).expect("meta");
        out.push((p.clone(), meta.permissions().mode() & 0o7777));
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        }
    }
    out
}

/// A problem+json answer (`common::problem`) whose body names its own status.
async fn problem(r: reqwest::Response) -> (u16, Value) {
    let (status, body) = common::problem(r).await;
    assert_eq!(body["status"], status, "{body}");
    (status, body)
}

/// Runs `serve` with the umask of a careless shell (0000): what it creates is still private.
#[tokio::test]
async fn the_data_directory_is_private_whatever_the_umask_and_an_old_one_is_tightened() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    let mut s = Server::start_in(tmp.path(), CONFIG);
    nix::sys::stat::umask(old);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let data = s.data_dir.clone();
    // Agents of this root server run as another user: the directory is traversable only.
    let own = mode(&data);
    assert!(own == 0o700 || own == 0o711, "{own:o}");
    for (path, m) in modes_under(&data.join("sled"))
        .into_iter()
        .chain(modes_under(&data.join("transcripts")))
    {
        assert_eq!(m & 0o077, 0, "{} is {m:o}", path.display());
    }
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;

    // A directory an earlier version left readable is tightened on start, and says so.
    for (path, _) in modes_under(&data.join("sled")) {
        let m = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).expect("chmod");
    }
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut s = Server::start_in(tmp.path(), CONFIG);
    s.wait_ready().await;
    assert!(mode(&data) & 0o066 == 0, "{:o}", mode(&data));
    assert_eq!(mode(&data.join("sled/db")), 0o600);
    let log = s.log_text();
    assert_eq!(
        log.matches("took group and other permissions off").count(),
        1,
        "{log}"
    );
    s.kill();
}

#[tokio::test]
async fn serve_refuses_an_admin_key_in_its_environment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("runledger.toml");
    std::fs::write(&config, CONFIG).expect("write");
    let data = tmp.path().join("data");
    let out = std::process::Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .env("RUNLEDGER_ADMIN_KEY", "rl_something")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RUNLEDGER_ADMIN_KEY"), "{err}");
    assert!(err.contains("/proc/<pid>/environ"), "{err}");
    assert!(!data.exists(), "nothing was opened");
}

#[tokio::test]
async fn rotating_the_session_secret_revokes_every_link_and_is_offline_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), CONFIG);
    let key = s.key.clone();
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let old_link = run["session_link"].as_str().expect("link").to_string();
    let page = |link: String| {
        let client = s.client.clone();
        async move { client.get(link).send().await.expect("req").status() }
    };
    assert_eq!(page(old_link.clone()).await, 200);
    let data = s.data_dir.display().to_string();
    // While the server holds the store: refused, saying what to do.
    let (ok, _, err) = cli(&["secrets", "rotate-session", "--data-dir", &data], &[]);
    assert!(!ok);
    assert!(err.contains("stop it"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;

    let (ok, _, err) = cli(&["secrets", "rotate-session", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    assert!(err.contains("rotated"), "{err}");
    let mut s = Server::start_in(tmp.path(), CONFIG);
    s.key = key;
    s.wait_ready().await;
    let base_of = |link: &str| link.split("/sessions/").nth(1).unwrap_or("").to_string();
    let old = format!("{}/sessions/{}", s.base, base_of(&old_link));
    let new_link = s.run(&id).await["session_link"]
        .as_str()
        .expect("link")
        .to_string();
    assert_ne!(base_of(&new_link), base_of(&old_link));
    let (st, _) = problem(s.client.get(&old).send().await.expect("req")).await;
    assert_eq!(st, 404);
    let new = format!("{}/sessions/{}", s.base, base_of(&new_link));
    assert_eq!(s.client.get(&new).send().await.expect("req").status(), 200);
    s.kill();
}

#[test]
fn read_only_commands_on_a_directory_without_a_store_fail_and_create_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("typo").join("data");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    for dir in [&missing, &empty] {
        let d = dir.display().to_string();
        for args in [
            vec!["export", "--data-dir", &d],
            vec!["export", "--with-keys", "--data-dir", &d],
            vec!["events", "01JAAAAAAAAAAAAAAAAAAAAAAA", "--data-dir", &d],
            vec!["replay", "--verify", "--data-dir", &d],
            vec!["keys", "list", "--data-dir", &d],
            vec!["secrets", "rotate-session", "--data-dir", &d],
        ] {
            let (ok, out, err) = cli(&args, &[]);
            assert!(!ok, "{args:?} succeeded: {out}");
            assert!(out.is_empty(), "{args:?}: {out}");
            assert!(err.contains("holds no runledger store"), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert!(!missing.exists() && !tmp.path().join("typo").exists());
    assert_eq!(std::fs::read_dir(&empty).expect("read").count(), 0);
    // An export to a file leaves no file either.
    let out = tmp.path().join("backup.jsonl");
    let (ok, _, _) = cli(
        &[
            "export",
            "--output",
            &out.display().to_string(),
            "--data-dir",
            &missing.display().to_string(),
        ],
        &[],
    );
    assert!(!ok);
    assert!(!out.exists());
}

#[test]
fn cli_errors_are_one_line_even_with_rust_backtrace_and_a_backtrace_only_with_debug() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path().join("none").display().to_string();
    let (ok, _, err) = cli(
        &["events", "x", "--data-dir", &d],
        &[("RUST_BACKTRACE", "1")],
    );
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("runledger: error: "), "{err}");
    assert!(!err.contains("Stack backtrace"), "{err}");
    let (ok, _, err) = cli(
        &["events", "x", "--data-dir", &d, "--debug"],
        &[("RUST_BACKTRACE", "1")],
    );
    assert!(!ok);
    assert!(err.contains("Stack backtrace"), "{err}");
}

/// Sends `request` as is to the server at `base` and reads until the server closes.
async fn raw_exchange(base: &str, request: &str) -> String {
    let addr = base.trim_start_matches("http://").to_string();
    let request = request.to_string();
    tokio::task::spawn_blocking(move || {
        let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        // The server may answer (and close) before it has read everything.
        let _ = conn.write_all(request.as_bytes());
        let mut raw = Vec::new();
        let _ = conn.read_to_end(&mut raw);
        String::from_utf8_lossy(&raw).into_owned()
    })
    .await
    .expect("join")
}

fn short_timeout_config() -> String {
    CONFIG.replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\nbody_timeout_secs = 2",
    )
}

/// A raw request whose body arrives one byte every 3 s, against a 2 s body timeout.
#[tokio::test]
async fn a_body_that_trickles_in_is_answered_408_and_its_connection_closed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), &short_timeout_config());
    s.wait_ready().await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let key = s.key.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        write!(
            conn,
            "POST /api/v1/agent/runs HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        .expect("head");
        let started = Instant::now();
        let mut writer = conn.try_clone().expect("clone");
        let trickle = std::thread::spawn(move || {
            for b in b"{\"prompt\":\"x\"" {
                if writer.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(3));
            }
        });
        // Read until the server closes the connection: the answer, then EOF.
        let mut raw = Vec::new();
        let read = conn.read_to_end(&mut raw);
        let took = started.elapsed();
        drop(conn);
        let _ = trickle.join();
        (
            read.map(|_| ()),
            String::from_utf8_lossy(&raw).into_owned(),
            took,
        )
    })
    .await
    .expect("join");
    let (read, raw, took) = answer;
    assert!(
        read.is_ok(),
        "the connection was not closed: {read:?} after {raw:?}"
    );
    assert!(raw.starts_with("HTTP/1.1 408"), "{raw}");
    assert!(raw.contains("application/problem+json"), "{raw}");
    assert!(raw.contains("body_timeout_secs"), "{raw}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A request refused before its body is read (no key) is answered at once, not timed out.
    let started = Instant::now();
    let raw = raw_exchange(
        &s.base,
        "POST /api/v1/agent/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{",
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 401"), "{raw}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A body that arrives in time is served as before.
    let (st, v) = s.post(&s.key, "/agent/runs", json!({"prompt": "x"})).await;
    assert_eq!(st, 200, "{v}");
    s.kill();
}

#[tokio::test]
async fn a_transcript_over_its_cap_drops_output_with_one_note_and_the_agent_finishes() {
    let dir = common::agent_visible_dir();
    // About 3 MiB of output in 3,000 lines, against a 1 MiB cap.
    let agent = dir.path().join("loud.sh");
    script(
        &agent,
        "i=0; while [ $i -lt 3000 ]; do printf '%01000d\\n' $i; i=$((i+1)); done; echo done",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\ntranscript_max_mb = 1\n\n[[environments]]\n\
         id = \"loud\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    );
    let mut s = Server::start_in(dir.path(), &config);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    let run = s
        .wait_run(&id, "finished", |r| {
            ["SUCCEEDED", "FAILED"].contains(&r["state"].as_str().unwrap_or(""))
        })
        .await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    let file = s.data_dir.join("transcripts").join(format!("{id}.jsonl"));
    let size = std::fs::metadata(&file).expect("transcript").len();
    assert!(size <= (1 << 20) + 4096, "{size}");
    let text = std::fs::read_to_string(&file).expect("read");
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("output dropped"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note: Value = serde_json::from_str(notes[0]).expect("json");
    assert_eq!(note["stream"], "system");
    assert!(
        note["text"].as_str().unwrap_or("").contains("more bytes"),
        "{note}"
    );
    // The note is the agent's output's last word; "done" came after the cap.
    assert!(
        !text.contains("\"done"),
        "the agent's last line was dropped"
    );
    s.kill();
}

#[tokio::test]
async fn session_page_query_errors_are_404_and_html_answers_carry_the_security_headers() {
    let s = Server::start();
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let link = run["session_link"].as_str().expect("link").to_string();
    let token = link.split("token=").nth(1).expect("token").to_string();
    let page = s.url(&format!("/sessions/{id}"));
    for query in [
        String::new(),
        "?".into(),
        format!("?token={token}&token={token}"),
        format!("?token={token}&token=other"),
        "?token=%ZZ".into(),
        "?token".into(),
        "?token=a&token".into(),
        format!("?token[]={token}"),
    ] {
        let r = s
            .client
            .get(format!("{page}{query}"))
            .send()
            .await
            .expect("req");
        let (st, b) = problem(r).await;
        assert_eq!(st, 404, "{query}: {b}");
    }
    let r = s.client.get(&link).send().await.expect("req");
    assert_eq!(r.status(), 200);
    let h = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let csp = h("content-security-policy");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(h("x-frame-options"), "DENY");
    assert_eq!(h("x-content-type-options"), "nosniff");
    assert_eq!(h("referrer-policy"), "no-referrer");
    // The one inline stylesheet is the one the policy allows by its hash.
    let hash = csp
        .split("'sha256-")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .expect("style hash")
        .to_string();
    let html = r.text().await.expect("html");
    let style = html
        .split("<style>")
        .nth(1)
        .and_then(|r| r.split("</style>").next())
        .expect("style");
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(style.as_bytes());
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(digest),
        hash
    );
    assert!(!html.contains("<script"));
}

#[tokio::test]
async fn every_client_error_is_problem_json_with_a_server_made_trace_id() {
    let s = Server::start();
    s.wait_ready().await;
    let c = &s.client;
    let key = &s.key;
    let long_id = "a".repeat(60 * 1024);
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (
            c.get(s.api(&format!("/agent/runs/{long_id}")))
                .bearer_auth(key),
            0,
        ),
        (c.get(s.api("/agent/runs/not-a-run")).bearer_auth(key), 0),
        (c.get(s.url("/nope")), 404),
        (c.delete(s.api("/agent/runs")).bearer_auth(key), 405),
        (
            c.post(s.api("/agent/runs"))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body("{not json"),
            400,
        ),
        (
            c.post(s.api("/agent/runs"))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(vec![b' '; runledger::http::MAX_CREATE_BODY_BYTES + 1]),
            413,
        ),
        (c.get(s.api("/agent/runs?limit=nope")).bearer_auth(key), 400),
        (
            c.get(s.api("/agent/runs?limit=%FF%FE")).bearer_auth(key),
            400,
        ),
        (c.get(s.api("/agent/runs")), 401),
    ];
    for (i, (request, want)) in cases.into_iter().enumerate() {
        let r = request
            .header("x-request-id", "<script>alert(1)</script>")
            .send()
            .await
            .expect("req");
        let header_id = r
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let (st, b) = problem(r).await;
        assert!((400..500).contains(&st), "case {i}: {st}");
        if want != 0 {
            assert_eq!(st, want, "case {i}: {b}");
        }
        let trace = b["trace_id"].as_str().expect("trace_id");
        assert_eq!(trace.len(), 26, "case {i}: {trace}");
        assert!(trace.chars().all(|c| c.is_ascii_alphanumeric()), "{trace}");
        assert_eq!(trace, header_id, "case {i}");
    }
    // Requests actix-http answers by itself: a request line of 100 KB (a URI no client library
    // sends), a head of 200 KB, a malformed request line.
    for (request, want) in [
        (
            format!(
                "GET /api/v1/agent/runs/{} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
                 Connection: close\r\n\r\n",
                "a".repeat(100 * 1024)
            ),
            "HTTP/1.1 400",
        ),
        (
            format!(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                "b".repeat(200 * 1024)
            ),
            "HTTP/1.1 431",
        ),
        (
            "GET /healthz HTTP/1.1 nonsense\r\n\r\n".to_string(),
            "HTTP/1.1 400",
        ),
    ] {
        let raw = raw_exchange(&s.base, &request).await;
        let head: String = raw.chars().take(600).collect();
        assert!(head.starts_with(want), "{head}");
        let lower = raw.to_ascii_lowercase();
        assert!(
            lower.contains("content-type: application/problem+json"),
            "{head}"
        );
        assert!(lower.contains("x-content-type-options: nosniff"), "{head}");
        let body: Value = serde_json::from_str(raw.split("\r\n\r\n").nth(1).unwrap_or(""))
            .unwrap_or_else(|e| panic!("{e}: {head}"));
        let trace = body["trace_id"].as_str().unwrap_or("");
        assert_eq!(trace.len(), 26, "{body}");
        assert!(
            lower.contains(&format!("x-request-id: {}", trace.to_ascii_lowercase())),
            "{head}"
        );
        assert_eq!(
            body["status"].as_u64(),
            want[9..].parse::<u64>().ok(),
            "{body}"
        );
    }
    // A harmless client id is not echoed either: the id is always the server's.
    let r = c
        .get(s.url("/nope"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .expect("req");
    let (_, b) = problem(r).await;
    assert_ne!(b["trace_id"], "abc-123");
}

#[tokio::test]
async fn accept_qualities_choose_between_the_event_stream_and_json() {
    let s = Server::start();
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let events = s.api(&format!("/agent/runs/{id}/events"));
    for (accept, stream) in [
        ("text/event-stream;q=0, application/json", false),
        ("application/json", false),
        ("text/event-stream;q=0.5, application/json", false),
        ("application/json;q=0.5, text/event-stream", true),
        ("text/event-stream", true),
    ] {
        let r = s
            .client
            .get(&events)
            .bearer_auth(&s.key)
            .header("accept", accept)
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 200, "{accept}");
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert_eq!(
            ct.starts_with("text/event-stream"),
            stream,
            "{accept}: {ct}"
        );
        if !stream {
            let v: Value = r.json().await.expect("json");
            assert!(v["events"].is_array(), "{v}");
        }
    }
}
