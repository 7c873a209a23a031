//! Backup and restore with the real binary (issue #4): `runledger export --with-keys` and
//! `runledger import` round-trip a data directory whose runs cover every event variant, the
//! restored server answers the old API keys and serves every run exactly as before, an import
//! never merges into a directory that holds runs or keys, and a malformed backup fails naming
//! its line and leaves nothing behind.

use crate::common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{cli, script, Server, BIN, CONFIG};
use serde_json::{json, Value};

/// Every kind of ending: success, a failing agent, a failing setup (with an error code), and a
/// long demo run to cancel. A fixed `public_url`, so session links survive the move.
fn config(failing: &str) -> String {
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\npublic_url = \"http://runledger.example\"\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 200\nmodel_id = \"fast-model\"\n\n\
         [[environments]]\nid = \"slow\"\nharness = \"demo\"\ndemo_duration_ms = 60000\n\n\
         [[environments]]\nid = \"fails\"\nharness = \"command\"\ncommand = [\"{failing}\"]\n\n\
         [[environments]]\nid = \"badsetup\"\nharness = \"command\"\ncommand = [\"true\"]\nsetup = [\"echo no network >&2; exit 7\"]\n"
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Entries of a directory, by name.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Polls a run's event history until it has `n` events.
async fn wait_events(s: &Server, key: &str, id: &str, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, v) = s.get(key, &format!("/agent/runs/{id}/events")).await;
        assert_eq!(status, 200, "{v}");
        let events = v["events"].as_array().cloned().unwrap_or_default();
        if events.len() >= n {
            return events;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} never had {n} events: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_backup_restores_every_run_key_and_secret_exactly() {
    let old = tempfile::tempdir().expect("tempdir");
    let failing = old.path().join("fail.sh");
    script(&failing, "echo 'boom: disk full' >&2; exit 3");
    let config = config(path_str(&failing));
    let mut s = Server::start_in(old.path(), &config);
    s.wait_ready().await;
    let admin = s.key.clone();

    // Keys of both kinds, one of them revoked.
    let (status, agent) = s
        .post(
            &admin,
            "/admin/keys",
            json!({"name": "ci bot", "kind": "agent"}),
        )
        .await;
    assert_eq!(status, 200, "{agent}");
    let agent_key = agent["key"].as_str().expect("key").to_string();
    let (status, gone) = s
        .post(&admin, "/admin/keys", json!({"name": "leaked"}))
        .await;
    assert_eq!(status, 200, "{gone}");
    let gone_key = gone["key"].as_str().expect("key").to_string();
    let gone_id = gone["id"].as_str().expect("id");
    let (status, v) = s
        .post(&admin, &format!("/admin/keys/{gone_id}/revoke"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");

    // Created, Started, Succeeded, then FollowupReceived and a second execution.
    let resumed = s
        .create(json!({
            "prompt": "fix the bug \u{1F41B}",
            "title": "bug fix",
            "metadata": {"team": "core", "ticket": "T-1"},
            "config": {
                "name": "bugfix",
                "base_prompt": "be careful",
                "mcp_servers": {
                    "fs": {"command": "npx", "args": ["srv", "--ro"], "env": {"TOKEN": "t0k"}},
                    "remote": {"url": "https://mcp.example/sse", "headers": {"X-Key": "h"}},
                    "warp": {"warp_id": "w-1"}
                }
            }
        }))
        .await;
    s.wait_state(&resumed, "SUCCEEDED").await;
    let (status, v) = s
        .post(
            &admin,
            &format!("/agent/runs/{resumed}/followups"),
            json!({"message": "also add a test", "mode": "plan"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let events = wait_events(&s, &admin, &resumed, 6).await;
    assert_eq!(events[5]["type"], "Succeeded", "{events:?}");
    // Failed without and with an error code.
    let failed = s
        .create(json!({"prompt": "x", "config": {"environment_id": "fails"}}))
        .await;
    let setup = s
        .create(json!({"prompt": "y", "config": {"environment_id": "badsetup"}}))
        .await;
    // Cancelled while in progress.
    let cancelled = s
        .create(json!({"prompt": "z", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&cancelled, "INPROGRESS").await;
    let (status, v) = s
        .post(
            &admin,
            &format!("/agent/runs/{cancelled}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // Created by the agent key: a service account creator.
    let (status, v) = s
        .post(&agent_key, "/agent/runs", json!({"prompt": "from the bot"}))
        .await;
    assert_eq!(status, 200, "{v}");
    let by_agent = v["run_id"].as_str().expect("run_id").to_string();
    s.wait_state(&failed, "FAILED").await;
    let setup_run = s.wait_state(&setup, "FAILED").await;
    assert_eq!(
        setup_run["status_message"]["error_code"],
        "environment_setup_failed"
    );
    s.wait_state(&cancelled, "CANCELLED").await;
    s.wait_state(&by_agent, "SUCCEEDED").await;

    let ids = [resumed, failed, setup, cancelled, by_agent];
    let mut before = Vec::new();
    for id in &ids {
        before.push((s.run(id).await, s.events(id).await));
    }
    let (status, list_before) = s.get(&admin, "/agent/runs?limit=100").await;
    assert_eq!(status, 200);
    s.kill();
    // 18, and a `UsageRecorded` for each command execution where the host measures CPU time.
    let usage_events = before
        .iter()
        .flat_map(|(_, events)| events)
        .filter(|e| e["type"] == "UsageRecorded")
        .count();
    // And a `Provenance` before each command execution's agent.
    let provenance_events = before
        .iter()
        .flat_map(|(_, events)| events)
        .filter(|e| e["type"] == "Provenance")
        .count();
    // And a `Changes` at the end of each command execution whose workspace was made.
    let changes_events = before
        .iter()
        .flat_map(|(_, events)| events)
        .filter(|e| e["type"] == "Changes")
        .count();
    let events = 18 + usage_events + provenance_events + changes_events;

    let data = path_str(&s.data_dir).to_string();
    let backup = old.path().join("backup.jsonl");
    let (ok, _, err) = cli(
        &[
            "export",
            "--with-keys",
            "--output",
            path_str(&backup),
            "--data-dir",
            &data,
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(err.contains("WARNING") && err.contains("private"), "{err}");
    assert!(
        err.contains(&format!(
            "exported {events} events, 3 API keys and 3 instance secrets"
        )),
        "{err}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&backup)
        .expect("backup")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let written = std::fs::read_to_string(&backup).expect("read backup");
    assert!(!written.contains(&admin) && !written.contains(&agent_key));
    // The MCP credential `TOKEN` is in the backup encrypted only (the third secret opens it).
    assert!(!written.contains("t0k") && written.contains(r#""TOKEN":"***""#));

    let new = tempfile::tempdir().expect("tempdir");
    let restored = new.path().join("data");
    let (ok, _, err) = cli(
        &[
            "import",
            path_str(&backup),
            "--data-dir",
            path_str(&restored),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!(
            "imported {events} events of 5 runs, 3 API keys and 3 instance secrets"
        )),
        "{err}"
    );
    assert!(
        !err.contains("note:"),
        "the service's own log is what it records: {err}"
    );
    assert_eq!(
        entries(new.path()),
        ["data"],
        "no staging directory is left"
    );
    // sled snapshots its page table only when it opens a database: without a snapshot taken
    // after the import, the first start would scan the whole store.
    let snapshot = std::fs::read_dir(restored.join("sled"))
        .expect("sled directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .any(|name| name.starts_with("snap."));
    assert!(
        snapshot,
        "the import leaves no snapshot of sled's page table"
    );

    let (ok, again, err) = cli(
        &["export", "--with-keys", "--data-dir", path_str(&restored)],
        &[],
    );
    assert!(ok, "{err}");
    assert!(again == written, "a second export differs from the backup");
    let (ok, _, err) = cli(
        &["replay", "--verify", "--data-dir", path_str(&restored)],
        &[],
    );
    assert!(ok && err.contains(": 0 differences"), "{err}");

    let mut s = Server::start_in(new.path(), &config);
    assert_eq!(s.key, "", "a restored store has keys: no new admin key");
    s.key = admin.clone();
    s.wait_ready().await;
    for (id, (run, events)) in ids.iter().zip(&before) {
        assert_eq!(&s.run(id).await, run, "run {id}");
        assert_eq!(&s.events(id).await, events, "events of {id}");
    }
    let (status, list_after) = s.get(&admin, "/agent/runs?limit=100").await;
    assert_eq!(status, 200);
    assert_eq!(list_after, list_before);
    let (status, _) = s.get(&agent_key, "/agent/runs").await;
    assert_eq!(status, 200, "the agent key works on the restored server");
    let (status, _) = s.get(&gone_key, "/agent/runs").await;
    assert_eq!(status, 401, "a revoked key stays revoked");
    // The session page's token is signed with the restored secret.
    let link = before[0].0["session_link"].as_str().expect("session_link");
    let page = link.replace("http://runledger.example", &s.base);
    let r = s.client.get(&page).send().await.expect("session page");
    assert_eq!(r.status(), 200);
    s.kill();
}

#[tokio::test]
async fn an_import_never_merges_and_changes_nothing_it_refuses() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(tmp.path(), CONFIG);
    let id = s.create(json!({"prompt": "keep me"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let data = path_str(&s.data_dir).to_string();
    let backup = tmp.path().join("backup.jsonl");
    let (ok, _, err) = cli(
        &[
            "export",
            "--with-keys",
            "-o",
            path_str(&backup),
            "--data-dir",
            &data,
        ],
        &[],
    );
    assert!(
        !ok && err.contains("held by a running runledger server"),
        "{err}"
    );

    // Into the directory a running server holds.
    std::fs::write(&backup, "").expect("write");
    let (ok, _, err) = cli(&["import", path_str(&backup), "--data-dir", &data], &[]);
    assert!(
        !ok && err.contains("held by a running runledger server"),
        "{err}"
    );
    s.kill();

    let (ok, _, err) = cli(
        &[
            "export",
            "--with-keys",
            "-o",
            path_str(&backup),
            "--data-dir",
            &data,
        ],
        &[],
    );
    assert!(ok, "{err}");
    let original = std::fs::read_to_string(&backup).expect("backup");
    let listing = entries(&s.data_dir);

    // Into a directory with runs and keys: refused, and nothing changes.
    let (ok, _, err) = cli(&["import", path_str(&backup), "--data-dir", &data], &[]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("already holds 3 events and 1 API keys") && err.contains("never merges"),
        "{err}"
    );
    assert_eq!(
        entries(&s.data_dir),
        listing,
        "no staging directory is left"
    );
    let (ok, after, err) = cli(&["export", "--with-keys", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    assert!(
        after == original,
        "a refused import changed the data directory"
    );

    // Into a directory with keys but no runs (a server started there once).
    let keys_only = tempfile::tempdir().expect("tempdir");
    let mut k = Server::start_in(keys_only.path(), CONFIG);
    k.kill();
    let (ok, _, err) = cli(
        &[
            "import",
            path_str(&backup),
            "--data-dir",
            path_str(&k.data_dir),
        ],
        &[],
    );
    assert!(!ok && err.contains("0 events and 1 API keys"), "{err}");
}

/// A data directory of two finished runs, exported: `(plain, framed)`, the export without
/// and with keys. Run a is lines 1-3 of the plain export, run b lines 4-6.
async fn two_run_exports(tmp: &tempfile::TempDir) -> (String, String) {
    let mut s = Server::start_in(tmp.path(), CONFIG);
    let a = s.create(json!({"prompt": "first"})).await;
    let b = s.create(json!({"prompt": "second"})).await;
    s.wait_state(&a, "SUCCEEDED").await;
    s.wait_state(&b, "SUCCEEDED").await;
    s.kill();
    let data = path_str(&s.data_dir).to_string();
    let (ok, plain, err) = cli(&["export", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    let (ok, framed, err) = cli(&["export", "--with-keys", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    // Two runs of three events each, in key order.
    assert_eq!(plain.lines().count(), 6, "{plain}");
    (plain, framed)
}

/// `text`'s lines with line `n` (from 1) replaced by `with`.
fn replaced(text: &str, n: usize, with: &str) -> String {
    let mut l: Vec<&str> = text.lines().collect();
    l[n - 1] = with;
    l.join("\n") + "\n"
}

/// `text`'s lines without line `n` (from 1).
fn without(text: &str, n: usize) -> String {
    let mut l: Vec<&str> = text.lines().collect();
    l.remove(n - 1);
    l.join("\n") + "\n"
}

#[tokio::test]
async fn a_malformed_backup_fails_naming_its_line_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (plain, framed) = two_run_exports(&tmp).await;
    let without = |n: usize| without(&plain, n);
    let replaced = |n: usize, with: &str| replaced(&plain, n, with);
    let truncated = {
        let mut l: Vec<&str> = framed.lines().collect();
        l.pop();
        l.join("\n") + "\n"
    };
    let cases = [
        ("bad-json", replaced(2, "{\"run_id\": "), "line 2: not JSON"),
        ("seq-gap", without(2), "line 2: run "),
        (
            "unknown-run",
            without(4),
            "line 4: event 1 (Started) of run ",
        ),
        (
            "truncated",
            truncated,
            "without its end record: the backup is truncated",
        ),
        (
            "no-line-end",
            plain.trim_end().to_string(),
            "line 6: the last line has no line end",
        ),
    ];
    for (name, text, needle) in cases {
        let file = tmp.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, &text).expect("write");
        let parent = tmp.path().join(name);
        std::fs::create_dir(&parent).expect("mkdir");
        let target = parent.join("data");
        let (ok, _, err) = cli(
            &["import", path_str(&file), "--data-dir", path_str(&target)],
            &[],
        );
        assert!(!ok, "{name} was imported");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(err.contains("nothing was imported"), "{name}: {err}");
        assert!(
            entries(&parent).is_empty(),
            "{name} left {:?}",
            entries(&parent)
        );
    }
    let gap = tmp.path().join("seq-gap.jsonl");
    let (_, _, err) = cli(
        &["import", path_str(&gap), "--data-dir", "/nonexistent/x"],
        &[],
    );
    assert!(err.contains("skips from event 0 to event 2"), "{err}");
}

#[tokio::test]
async fn an_event_out_of_turn_is_imported_with_a_note() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (plain, _) = two_run_exports(&tmp).await;
    // A backup of an older version: no hash chain links (an edited export that carries them is
    // refused, `chains::exports`).
    let plain: String = plain
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("a JSON line");
            v.as_object_mut().expect("an object").remove("link");
            format!("{v}\n")
        })
        .collect();
    let lines: Vec<&str> = plain.lines().collect();
    // An event that the service would not have recorded (an execution number out of turn) is
    // imported with a note: backups of older versions, with other rules, must restore.
    let odd = tmp.path().join("odd.jsonl");
    std::fs::write(
        &odd,
        replaced(
            &plain,
            2,
            &lines[1].replace("\"execution\":1", "\"execution\":5"),
        ),
    )
    .expect("write");
    let target = tmp.path().join("odd");
    let (ok, _, err) = cli(
        &["import", path_str(&odd), "--data-dir", path_str(&target)],
        &[],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("note: event 1 (Started) of run ") && err.contains("imported as it is"),
        "{err}"
    );
}

#[tokio::test]
async fn an_existing_empty_directory_stays_empty_when_an_import_fails_and_takes_one_from_stdin() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (plain, framed) = two_run_exports(&tmp).await;
    let bad = tmp.path().join("bad-json.jsonl");
    std::fs::write(&bad, replaced(&plain, 2, "{\"run_id\": ")).expect("write");
    // An existing empty directory (a mount point, say) stays empty when the import fails, and
    // takes the store when it succeeds; `-` reads stdin.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let (ok, _, _) = cli(
        &["import", path_str(&bad), "--data-dir", path_str(&empty)],
        &[],
    );
    assert!(!ok);
    assert!(entries(&empty).is_empty(), "{:?}", entries(&empty));
    let mut child = Command::new(BIN)
        .args(["import", "-", "--data-dir", path_str(&empty)])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(framed.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("import");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("imported 6 events of 2 runs, 1 API keys"),
        "{err}"
    );
    assert_eq!(entries(&empty), ["commit.watermark", "sled"]);
    let (ok, again, err) = cli(
        &["export", "--with-keys", "--data-dir", path_str(&empty)],
        &[],
    );
    assert!(ok && again == framed, "{err}");
}
