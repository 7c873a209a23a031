//! A hostile agent reports the run's secrets in every field it controls (issue #36, item 3):
//! report lines of every type, its stderr (quoted in the failure's status message), and, as a
//! preset CLI, its session id, its model name and its error result. With the real binary, no
//! secret's value is found, byte for byte, in the run and list answers, the events API, the
//! transcript (nor the value's base64 and hex forms), the console's pages, the session page,
//! webhook bodies, `runledger export`, or any file of the data directory outside the agent's
//! own directories (its workspace and agent files hold what it wrote there).

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{cli, eventually, script, Server};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `[secrets]` entry read from the server's environment.
const ALPHA: &str = "rlalpha-7Qx2Lw9ZkP4mVt8R";
/// A `[secrets]` entry read from a file.
const BETA: &str = "rlbeta-Hn3Jc6Ys1Dq5Wf0Ub";
/// A run's MCP credential (redacted from 8 bytes on).
const MCP: &str = "rlmcp-Ge8Ko2Pa7Xi4Nb9Tz";
const SECRETS: [(&str, &str); 3] = [("ALPHA", ALPHA), ("BETA", BETA), ("mcp", MCP)];

const HOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The base64 (standard, URL-safe, padded or not) and hex (both cases) forms of `value`.
fn encodings(value: &str) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine;
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    vec![
        STANDARD.encode(value),
        STANDARD_NO_PAD.encode(value),
        URL_SAFE.encode(value),
        URL_SAFE_NO_PAD.encode(value),
        hex.to_ascii_uppercase(),
        hex,
    ]
}

/// Every report line an agent can write, with `secret` in each of its string fields.
fn report_lines(secret: &str) -> Vec<Value> {
    vec![
        json!({"type": "plan", "title": format!("plan {secret}"),
               "markdown": format!("# {secret}\n\nsteps")}),
        json!({"type": "file", "path": "notes.txt", "description": format!("about {secret}")}),
        json!({"type": "file", "path": format!("{secret}.txt")}),
        json!({"type": "screenshot", "path": "shot.png", "description": format!("shot {secret}")}),
        json!({"type": "pull_request", "url": format!("https://git.test/{secret}/pull/1"),
               "branch": format!("fix-{secret}"), "title": format!("PR {secret}")}),
    ]
}

/// A local webhook receiver that answers 200 and keeps every body.
async fn receiver() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                let body_at = loop {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                    if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&request[..body_at]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while request.len() < body_at + length {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                kept.lock().expect("lock").push(request[body_at..].to_vec());
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, bodies)
}

/// A signed-in console session's cookie, for `key`.
async fn console_cookie(s: &Server, key: &str) -> String {
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let cookie_of = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with(&format!("{name}=")))
            .and_then(|v| v.split(';').next())
            .expect("cookie")
            .to_string()
    };
    let page = c.get(s.url("/signin")).send().await.expect("signin");
    let signin = cookie_of(&page, "runledger_signin");
    let token = signin.trim_start_matches("runledger_signin=").to_string();
    let r = c
        .post(s.url("/signin"))
        .header(reqwest::header::COOKIE, &signin)
        .form(&[("token", token.as_str()), ("key", key)])
        .send()
        .await
        .expect("post signin");
    assert_eq!(r.status(), 303);
    cookie_of(&r, "runledger_session")
}

async fn page(s: &Server, path: &str, cookie: Option<&str>) -> String {
    let mut request = s.client.get(s.url(path));
    if let Some(cookie) = cookie {
        request = request.header(reqwest::header::COOKIE, cookie);
    }
    let r = request.send().await.expect("page");
    assert_eq!(r.status(), 200, "{path}");
    r.text().await.expect("body")
}

/// Every file under `dir` but those under `skip`, with its bytes.
fn files(dir: &Path, skip: &[&Path], out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if skip.iter().any(|s| path.starts_with(s)) {
            continue;
        }
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            files(&path, skip, out);
        } else if kind.is_file() {
            out.push((path.clone(), std::fs::read(&path).expect("read")));
        }
    }
}

fn assert_absent(where_: &str, haystack: &[u8], needles: &[(&str, String)]) {
    for (name, needle) in needles {
        assert!(
            !haystack
                .windows(needle.len())
                .any(|w| w == needle.as_bytes()),
            "{name} ({needle}) found in {where_}"
        );
    }
}

#[tokio::test]
async fn no_secret_an_agent_reports_is_recorded_anywhere() {
    let dir = common::agent_visible_dir();
    let lines: Vec<String> = SECRETS
        .iter()
        .flat_map(|(_, secret)| report_lines(secret))
        .map(|l| l.to_string())
        .collect();
    std::fs::write(dir.path().join("report.jsonl"), lines.join("\n") + "\n").expect("write");
    let mut printed = String::new();
    for (_, secret) in SECRETS {
        printed.push_str(&format!("plain {secret}\n"));
        for form in encodings(secret) {
            printed.push_str(&format!("encoded {form}\n"));
        }
    }
    std::fs::write(dir.path().join("printed.txt"), &printed).expect("write");
    let touch: Vec<String> = SECRETS
        .iter()
        .map(|(_, s)| format!("echo n > {s}.txt"))
        .collect();
    let agent = dir.path().join("agent.sh");
    script(
        &agent,
        &format!(
            "echo notes > notes.txt\nprintf '\\x89PNG\\r\\n\\x1a\\n0000' > shot.png\n{}\n\
             cat {d}/printed.txt\ncat {d}/report.jsonl >> \"$RUNLEDGER_REPORT\"\n\
             printf '%0290d%s\\n' 0 {ALPHA} >&2\n\
             echo \"giving up: {ALPHA} {BETA} {MCP}\" >&2\nexit 1",
            touch.join("\n"),
            d = dir.path().display()
        ),
    );
    // Claude Code as a hostile CLI reports it: its session id and model are a secret, and so
    // is its error result.
    let claude = dir.path().join("claude.sh");
    script(
        &claude,
        &format!(
            "IFS= read -r line\n\
             echo '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"{ALPHA}\",\"model\":\"{BETA}\"}}'\n\
             echo '{{\"type\":\"result\",\"subtype\":\"error\",\"is_error\":true,\"result\":\"cannot: {ALPHA} {MCP}\",\
             \"session_id\":\"{ALPHA}\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":2}}}}'\n\
             exit 1"
        ),
    );
    let beta_file = dir.path().join("beta.key");
    std::fs::write(&beta_file, BETA).expect("write");
    let (hook, bodies) = receiver().await;
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n[limits]\nrate_limit = false\n\n\
         [secrets]\nALPHA = {{ env = \"TEST_ALPHA\" }}\nBETA = {{ file = {beta:?} }}\n\
         HOOK = {{ env = \"TEST_HOOK\" }}\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [{agent:?}]\n\
         sandbox = \"none\"\nsecrets = [\"ALPHA\", \"BETA\"]\n\n\
         [[environments]]\nid = \"claude\"\nharness = \"claude\"\ncommand = [{claude:?}]\n\
         sandbox = \"none\"\nsecrets = [\"ALPHA\", \"BETA\"]\n\n\
         [[webhooks]]\nname = \"all\"\nurl = \"{hook}\"\nsecret = \"HOOK\"\nallow_private = true\n",
        beta = beta_file.display().to_string(),
        agent = agent.display().to_string(),
        claude = claude.display().to_string(),
    );
    let mut s = Server::start_with(
        dir.path(),
        &config,
        &[
            ("TEST_ALPHA", ALPHA.to_string()),
            ("TEST_HOOK", HOOK_SECRET.to_string()),
        ],
    );
    s.wait_ready().await;
    let mcp = json!({"tools": {"command": "/bin/true", "env": {"TOOLS_TOKEN": MCP}}});
    let mut ids = Vec::new();
    for env in ["cmd", "claude"] {
        let id = s
            .create(
                json!({"prompt": "report", "config": {"environment_id": env, "mcp_servers": mcp}}),
            )
            .await;
        s.wait_state(&id, "FAILED").await;
        ids.push(id);
    }
    let needles: Vec<(&str, String)> = SECRETS
        .iter()
        .map(|(name, value)| (*name, value.to_string()))
        .collect();
    let with_encodings: Vec<(&str, String)> = SECRETS
        .iter()
        .flat_map(|(name, value)| {
            std::iter::once(value.to_string())
                .chain(encodings(value))
                .map(move |form| (*name, form))
        })
        .collect();

    // What was reported was recorded, redacted: the test would prove nothing otherwise.
    let cmd = s.run(&ids[0]).await;
    let artifacts = cmd["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 12, "{cmd}");
    assert!(cmd.to_string().contains("fix-[secret:ALPHA]"), "{cmd}");
    let status = cmd["status_message"]["message"].as_str().unwrap_or("");
    assert!(
        status.contains("giving up: [secret:ALPHA] [secret:BETA] [secret:mcp."),
        "{status}"
    );
    // A stderr line cut to the tail's 300 characters inside a secret: redacted before the cut,
    // so no part of the value is left.
    assert!(
        status.contains(&format!("{}[secret:", "0".repeat(290))),
        "{status}"
    );
    assert!(!status.contains(&ALPHA[..6]), "{status}");
    let claude_run = s.run(&ids[1]).await;
    let status = claude_run["status_message"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(status.contains("cannot: [secret:ALPHA]"), "{status}");

    for id in &ids {
        let run = s.run(id).await;
        assert_absent(
            &format!("GET run {id}"),
            run.to_string().as_bytes(),
            &needles,
        );
        let events = Value::Array(s.events(id).await).to_string();
        assert_absent(&format!("the events of {id}"), events.as_bytes(), &needles);
        let transcript = Value::Array(s.transcript(id).await).to_string();
        assert_absent(
            &format!("the transcript of {id}"),
            transcript.as_bytes(),
            &with_encodings,
        );
        let session = run["session_link"].as_str().expect("session link");
        let session_page = s
            .client
            .get(session)
            .send()
            .await
            .expect("session page")
            .text()
            .await
            .expect("body");
        assert_absent("the session page", session_page.as_bytes(), &with_encodings);
    }
    let events = s.events(&ids[1]).await;
    let usage = events
        .iter()
        .find(|e| e["type"] == "UsageRecorded")
        .expect("the CLI's usage recorded");
    assert!(usage.to_string().contains("[secret:BETA]"), "{usage}");
    let (status, list) = s.get(&s.key.clone(), "/agent/runs").await;
    assert_eq!(status, 200);
    assert_absent("the run list", list.to_string().as_bytes(), &needles);

    let cookie = console_cookie(&s, &s.key.clone()).await;
    let mut pages = page(&s, "/runs", Some(&cookie)).await;
    for id in &ids {
        pages.push_str(&page(&s, &format!("/runs/{id}"), Some(&cookie)).await);
    }
    assert!(
        pages.contains("[secret:ALPHA]"),
        "the console shows the artifacts"
    );
    assert_absent("the console's pages", pages.as_bytes(), &needles);

    // Every state change of both runs was delivered (queued, started, failed).
    eventually(30, "the webhook deliveries", || {
        let got = bodies.lock().expect("lock");
        got.iter()
            .filter(|b| String::from_utf8_lossy(b).contains("run.failed"))
            .count()
            >= 2
    })
    .await;
    let delivered = bodies.lock().expect("lock").concat();
    assert_absent("the webhook bodies", &delivered, &needles);

    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;
    let data = s.data_dir.display().to_string();
    let (ok, export, err) = cli(&["export", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    assert!(export.contains(&ids[0]), "the export holds the runs");
    assert_absent("the export", export.as_bytes(), &needles);

    // The agent's own directories hold what it wrote itself (its report file, its files);
    // everything else is the server's.
    let mut stored = Vec::new();
    files(
        &s.data_dir,
        &[
            &s.data_dir.join("workspaces"),
            &s.data_dir.join("agent-files"),
        ],
        &mut stored,
    );
    assert!(stored
        .iter()
        .any(|(p, _)| p.starts_with(s.data_dir.join("transcripts"))));
    for (path, bytes) in &stored {
        assert_absent(&path.display().to_string(), bytes, &needles);
    }
    // The server's own file there: the session id a CLI reported, kept for a follow-up, is not
    // kept when it holds a secret.
    for id in &ids {
        let session = s.data_dir.join("agent-files").join(id).join("session");
        assert!(!session.exists(), "{} was kept", session.display());
    }
}
