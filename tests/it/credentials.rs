//! MCP credentials with the real binary (issue #18, point 2): a run's MCP `env` and `headers`
//! values reach its agent, but never another key's GET, list, events or transcript (where an
//! agent that prints them is redacted), the session page, `runledger events --json`,
//! `runledger export`, or the store's files in plain text. A plain export restored
//! elsewhere cannot open them, and its follow-up fails saying so instead of launching the agent
//! with `***`; an export `--with-keys` restores them.

use crate::common;

use std::path::Path;

use common::{cli, script, Server};
use serde_json::{json, Value};

/// The credential values of the test's run: none of them may appear in any output.
const ENV_SECRET: &str = "ghp_ENVsecret0123456789";
const HEADER_SECRET: &str = "Bearer hdr-SECRET-9876543210";
const CREDENTIALS: [&str; 2] = [ENV_SECRET, HEADER_SECRET];

/// A command agent that copies the MCP config it was handed into its workspace, and prints
/// it too (as a careless agent might).
fn config(dir: &Path) -> String {
    let agent = dir.join("agent.sh");
    script(
        &agent,
        r#"cp "$RUNLEDGER_MCP_CONFIG" "mcp-$RUNLEDGER_EXECUTION.json"
cat "$RUNLEDGER_MCP_CONFIG"; echo"#,
    );
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Panics naming `what` if `bytes` hold any credential value.
fn assert_no_credential(what: &str, bytes: &[u8]) {
    for secret in CREDENTIALS {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{what} holds the credential {secret:?}:\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// The raw body of a GET with `key`.
async fn body(s: &Server, key: &str, path: &str) -> Vec<u8> {
    let r = s
        .client
        .get(s.api(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status().as_u16(), 200, "GET {path}");
    r.bytes().await.expect("body").to_vec()
}

/// The MCP config the agent of execution `execution` of run `id` was handed.
fn handed(s: &Server, id: &str, execution: u32) -> Value {
    let path = s
        .data_dir
        .join("workspaces")
        .join(id)
        .join(format!("mcp-{execution}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
}

fn assert_real_values(mcp: &Value) {
    assert_eq!(
        mcp["mcpServers"]["gh"],
        json!({"type": "http", "url": "https://mcp.example/x",
               "headers": {"Authorization": HEADER_SECRET}})
    );
    assert_eq!(
        mcp["mcpServers"]["fs"]["env"],
        json!({"GITHUB_TOKEN": ENV_SECRET})
    );
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                pending.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Follows run `id` up on a server started on a restored directory and waits for the end of
/// its second execution.
/// Imports the backup at `backup` into `<dir>/data`, which it returns.
fn import(backup: &Path, dir: &Path) -> std::path::PathBuf {
    let target = dir.join("data");
    let (ok, _, err) = cli(
        &["import", path_str(backup), "--data-dir", path_str(&target)],
        &[],
    );
    assert!(ok, "{err}");
    target
}

/// A new admin key in the stopped store at `data_dir`.
fn admin_key_offline(data_dir: &Path) -> String {
    let (ok, key, err) = cli(
        &[
            "keys",
            "create",
            "--name",
            "ops",
            "--admin",
            "--data-dir",
            path_str(data_dir),
        ],
        &[],
    );
    assert!(ok, "{err}");
    key.trim().to_string()
}

async fn follow_up_restored(dir: &Path, config: &str, key: &str, id: &str) -> (Server, Value) {
    let mut s = Server::start_in(dir, config);
    s.key = key.to_string();
    s.wait_ready().await;
    let (status, v) = s.followup(id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{v}");
    let run = s
        .wait_run(id, "the second execution to end", |r| {
            r["state"] == "FAILED" || (r["state"] == "SUCCEEDED" && r["run_time"].is_string())
        })
        .await;
    (s, run)
}

#[tokio::test]
async fn credentials_reach_the_agent_and_no_output() {
    let dir = common::agent_visible_dir();
    let config = config(dir.path());
    let mut s = Server::start_in(dir.path(), &config);
    s.wait_ready().await;
    let admin = s.key.clone();
    let (status, bob) = s.post(&admin, "/admin/keys", json!({"name": "bob"})).await;
    assert_eq!(status, 200, "{bob}");
    let bob = bob["key"].as_str().expect("key").to_string();

    let (status, created) = s
        .post(
            &admin,
            "/agent/runs",
            json!({"prompt": "fix it", "config": {"environment_id": "cmd", "mcp_servers": {
                "gh": {"url": "https://mcp.example/x", "headers": {"Authorization": HEADER_SECRET}},
                "fs": {"command": "npx", "args": ["srv"], "env": {"GITHUB_TOKEN": ENV_SECRET}},
                "open": {"command": "true"}
            }}}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_no_credential("the create answer", created.to_string().as_bytes());
    let id = created["run_id"].as_str().expect("run_id").to_string();
    s.wait_state(&id, "SUCCEEDED").await;

    // The agent got the real values.
    assert_real_values(&handed(&s, &id, 1));

    // Another key of the team sees the names, and `***` for every value.
    let run = body(&s, &bob, &format!("/agent/runs/{id}")).await;
    assert_no_credential("GET", &run);
    let run: Value = serde_json::from_slice(&run).expect("json");
    let servers = &run["agent_config"]["mcp_servers"];
    assert_eq!(servers["gh"]["headers"], json!({"Authorization": "***"}));
    assert_eq!(servers["fs"]["env"], json!({"GITHUB_TOKEN": "***"}));
    assert_eq!(servers["open"], json!({"command": "true"}));
    let list = body(&s, &bob, "/agent/runs").await;
    assert_no_credential("the list", &list);
    let list: Value = serde_json::from_slice(&list).expect("json");
    assert!(
        list.to_string().contains(r#""GITHUB_TOKEN":"***""#),
        "{list}"
    );
    let events = body(&s, &bob, &format!("/agent/runs/{id}/events")).await;
    assert_no_credential("the events", &events);
    let events: Value = serde_json::from_slice(&events).expect("json");
    let data = &events["events"][0]["data"];
    assert_eq!(
        data["config"]["mcp_servers"]["fs"]["env"]["GITHUB_TOKEN"],
        "***"
    );
    assert!(
        data["sealed_credentials"]["ciphertext"].is_string(),
        "{data}"
    );
    // What the agent printed is redacted before its transcript is written.
    let transcript = body(&s, &bob, &format!("/agent/runs/{id}/transcript")).await;
    assert_no_credential("the transcript", &transcript);
    let transcript = String::from_utf8_lossy(&transcript);
    assert!(
        transcript.contains("[secret:mcp.fs.env.GITHUB_TOKEN]")
            && transcript.contains("[secret:mcp.gh.headers.Authorization]"),
        "{transcript}"
    );
    let link = run["session_link"].as_str().expect("session link");
    let page = s.client.get(link).send().await.expect("session page");
    assert_eq!(page.status().as_u16(), 200);
    assert_no_credential("the session page", &page.bytes().await.expect("page"));

    s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    let data_dir = path_str(&s.data_dir).to_string();
    // Nothing of the store holds a value in plain text (the log has the sealed blob).
    for file in files(&s.data_dir.join("sled")) {
        assert_no_credential(
            &file.display().to_string(),
            &std::fs::read(&file).expect("read"),
        );
    }
    let (ok, printed, err) = cli(&["events", "--json", "--data-dir", &data_dir, &id], &[]);
    assert!(ok, "{err}");
    assert_no_credential("runledger events --json", printed.as_bytes());
    assert!(printed.contains(r#""Authorization":"***""#), "{printed}");
    let (ok, plain, err) = cli(&["export", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    assert_no_credential("runledger export", plain.as_bytes());
    let (ok, full, err) = cli(&["export", "--with-keys", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    assert_no_credential("runledger export --with-keys", full.as_bytes());
    assert!(full.contains(r#""name":"credential_key""#), "{full}");

    // A plain export restored elsewhere holds the blob but not the key: the follow-up's
    // execution fails saying why, and no agent is started with `***`.
    let plain_dir = common::agent_visible_dir();
    let backup = plain_dir.path().join("plain.jsonl");
    std::fs::write(&backup, &plain).expect("write backup");
    let target = import(&backup, plain_dir.path());
    // Without its keys the restored store has none: one made for the occasion lets in.
    let key = admin_key_offline(&target);
    let (restored, run) = follow_up_restored(plain_dir.path(), &config, &key, &id).await;
    assert_eq!(run["state"], "FAILED", "{run}");
    let message = run["status_message"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("cannot be decrypted") && message.contains("--with-keys"),
        "{run}"
    );
    assert!(
        !restored
            .data_dir
            .join("workspaces")
            .join(&id)
            .join("mcp-2.json")
            .exists(),
        "the agent was started"
    );
    drop(restored);

    // With its keys it opens, and the agent gets the real values again.
    let full_dir = common::agent_visible_dir();
    let backup = full_dir.path().join("full.jsonl");
    std::fs::write(&backup, &full).expect("write backup");
    import(&backup, full_dir.path());
    let (restored, run) = follow_up_restored(full_dir.path(), &config, &admin, &id).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    assert_real_values(&handed(&restored, &id, 2));
    drop(restored);

    // A run from before credentials were sealed comes out of a backup with `***` in their
    // place (its `Created` has no team and no blob): its follow-up fails naming the missing
    // credential rather than hand the agent `***`.
    let legacy: String = plain
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).expect("json line");
            if v["run_id"] == id.as_str() && v["seq"] == 0 {
                let data = v["data"].as_object_mut().expect("data");
                data.remove("team");
                data.remove("sealed_credentials");
            }
            format!("{v}\n")
        })
        .collect();
    let legacy_dir = common::agent_visible_dir();
    let backup = legacy_dir.path().join("legacy.jsonl");
    std::fs::write(&backup, legacy).expect("write backup");
    let target = import(&backup, legacy_dir.path());
    let key = admin_key_offline(&target);
    let (_restored, run) = follow_up_restored(legacy_dir.path(), &config, &key, &id).await;
    assert_eq!(run["state"], "FAILED", "{run}");
    let message = run["status_message"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("not in this store") && message.contains("MCP server"),
        "{run}"
    );
}
