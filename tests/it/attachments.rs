//! Attachments on create with the real binary (issue #20, point 2): the files a client attaches
//! are stored, listed on the run and in its history, and written into the workspace (in
//! `$RUNLEDGER_ATTACHMENTS_DIR`) before the agent starts; a later execution puts back what is
//! missing without following links an agent left; every limit is a 400 naming it, and a
//! refused create records nothing.

use crate::common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::{agent_visible_dir, script, Server};
use serde_json::{json, Value};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Bytes that compress badly and are not text.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A command agent that lists its attachments directory into the workspace and, in its first
/// execution, replaces that directory with a link to `elsewhere` (as a hostile agent might).
fn config(dir: &Path, elsewhere: &Path) -> String {
    let agent = dir.join("agent.sh");
    script(
        &agent,
        &format!(
            r#"echo "attachments in [$RUNLEDGER_ATTACHMENTS_DIR]"
[ -n "$RUNLEDGER_ATTACHMENTS_DIR" ] || exit 0
ls -A "$RUNLEDGER_ATTACHMENTS_DIR" > "listing-$RUNLEDGER_EXECUTION.txt"
if [ "$RUNLEDGER_EXECUTION" = 1 ]; then
  rm -rf "$RUNLEDGER_ATTACHMENTS_DIR"
  ln -s "{}" "$RUNLEDGER_ATTACHMENTS_DIR"
fi"#,
            elsewhere.display()
        ),
    );
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    )
}

fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

#[tokio::test]
async fn attachments_reach_the_agent_and_are_listed_on_the_run() {
    let dir = agent_visible_dir();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("elsewhere");
    let s = Server::start_in(dir.path(), &config(dir.path(), &elsewhere));
    let big = noise(3 * 1024 * 1024 + 7, 1);
    let notes = "# Notes\n\nÜber die Schnittstelle: ✓\n".as_bytes().to_vec();
    let id = s
        .create(json!({
            "prompt": "use the files",
            "config": {"environment_id": "cmd"},
            "attachments": [
                {"file_name": "data.bin", "mime_type": "application/octet-stream",
                 "data": b64(&big)},
                {"file_name": "notes é.md", "mime_type": "text/markdown; charset=utf-8",
                 "data": b64(&notes)},
            ],
        }))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(
        run["attachments"],
        json!([
            {"file_name": "data.bin", "mime_type": "application/octet-stream",
             "size_bytes": big.len(), "sha256": sha256_hex(&big)},
            {"file_name": "notes é.md", "mime_type": "text/markdown; charset=utf-8",
             "size_bytes": notes.len(), "sha256": sha256_hex(&notes)},
        ])
    );
    // What the agent saw: both files, whole.
    let ws = workspace(&s, &id);
    let listing = std::fs::read_to_string(ws.join("listing-1.txt")).expect("listing");
    assert_eq!(listing, "data.bin\nnotes é.md\n");
    let transcript = s.transcript_text(&id).await;
    let attachments_dir = ws.join(".runledger").join("attachments");
    assert!(
        transcript.contains(&format!("attachments in [{}]", attachments_dir.display())),
        "{transcript}"
    );
    assert!(
        transcript.contains("attachments written to"),
        "{transcript}"
    );
    // The history records them right after the creation.
    let events = s.events(&id).await;
    assert_eq!(events[1]["type"], "Attached", "{events:?}");
    assert_eq!(
        events[1]["data"]["attachments"][0]["content"]["sha256"],
        sha256_hex(&big)
    );

    // The agent replaced the directory with a link. The next execution puts the files back
    // in a real directory and writes nothing through the link.
    let (status, v) = s.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{v}");
    s.wait_run(&id, "the second execution", |r| {
        r["state"] == "SUCCEEDED" && ws.join("listing-2.txt").exists()
    })
    .await;
    assert!(std::fs::symlink_metadata(&attachments_dir)
        .expect("attachments dir")
        .is_dir());
    assert_eq!(
        std::fs::read_to_string(ws.join("listing-2.txt")).expect("listing"),
        "data.bin\nnotes é.md\n"
    );
    assert_eq!(
        std::fs::read(attachments_dir.join("data.bin")).expect("data.bin"),
        big
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).expect("elsewhere").count(),
        0,
        "nothing may be written through the agent's link"
    );
}

#[tokio::test]
async fn a_run_without_attachments_gets_an_empty_variable_and_no_field() {
    let dir = agent_visible_dir();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("elsewhere");
    let s = Server::start_in(dir.path(), &config(dir.path(), &elsewhere));
    let id = s
        .create(json!({"prompt": "nothing attached", "config": {"environment_id": "cmd"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert!(run.get("attachments").is_none(), "{run}");
    assert!(s.transcript_text(&id).await.contains("attachments in []"));
    assert!(!workspace(&s, &id).join(".runledger").exists());
}

/// A create body with `attachments`.
fn with(attachments: Value) -> Value {
    json!({"prompt": "p", "attachments": attachments})
}

fn one(file_name: &str, mime_type: &str, data: &str) -> Value {
    json!({"file_name": file_name, "mime_type": mime_type, "data": data})
}

#[tokio::test]
async fn every_limit_is_a_400_naming_it_and_records_nothing() {
    let s = Server::start();
    let small = b64(b"hello");
    let over_one = b64(&vec![b'a'; 10 * 1024 * 1024 + 1]);
    let ten = b64(&vec![b'c'; 10 * 1024 * 1024]);
    let cases: Vec<(Value, &str)> = vec![
        (
            with(json!((0..6)
                .map(|i| one(&format!("f{i}"), "text/plain", &small))
                .collect::<Vec<_>>())),
            "at most 5 files",
        ),
        (
            with(json!([one("big.txt", "text/plain", &over_one)])),
            "limit of 10485760 bytes per attachment",
        ),
        (
            with(json!([
                one("a", "text/plain", &ten),
                one("b", "text/plain", &ten),
                one("c", "text/plain", "eA=="),
            ])),
            "limit of 20971520 bytes together",
        ),
        (
            with(json!([one("../escape", "text/plain", &small)])),
            "attachments[0].file_name must be a file name",
        ),
        (
            with(json!([one("a/b", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one("a\\b", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one("..", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one(".", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one("", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one("nul\u{0}name", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one("new\nline", "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([one(&"x".repeat(256), "text/plain", &small)])),
            "must be a file name",
        ),
        (
            with(json!([
                one("same.txt", "text/plain", &small),
                one("same.txt", "text/plain", &small),
            ])),
            "attachments[1].file_name \"same.txt\" is attached twice",
        ),
        (
            with(json!([one("a.txt", "text", &small)])),
            "attachments[0].mime_type must be a media type",
        ),
        (
            with(json!([one("a.txt", "text/plain\r\nX: y", &small)])),
            "must be a media type",
        ),
        (
            with(json!([one("a.txt", "text/plain", "not base64!")])),
            "attachments[0].data is not base64",
        ),
        (
            with(json!([{"file_name": "a.txt", "data": small}])),
            "mime_type",
        ),
    ];
    for (body, want) in cases {
        let r = s
            .client
            .post(s.api("/agent/runs"))
            .bearer_auth(&s.key)
            .json(&body)
            .send()
            .await
            .expect("request");
        let (status, problem) = common::problem(r).await;
        let detail = problem["detail"].as_str().unwrap_or_default().to_string();
        assert_eq!(status, 400, "{want}: {problem}");
        assert!(detail.contains(want), "want {want:?} in {detail:?}");
    }
    // A body over the create limit is a 413 naming it.
    let huge = format!(
        "{{\"prompt\":\"p\",\"attachments\":[{{\"file_name\":\"h\",\"mime_type\":\"text/plain\",\"data\":\"{}\"}}]}}",
        "A".repeat(29 * 1024 * 1024)
    );
    let r = s
        .client
        .post(s.api("/agent/runs"))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("request");
    let (status, problem) = common::problem(r).await;
    assert_eq!(status, 413, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&runledger::http::MAX_CREATE_BODY_BYTES.to_string())),
        "{problem}"
    );
    // None of them made a run.
    let (status, list) = s.get(&s.key, "/agent/runs").await;
    assert_eq!(status, 200);
    assert_eq!(list["runs"], json!([]), "{list}");
    // Exactly at the limits is accepted.
    let id = s
        .create(with(json!([
            one("a", "text/plain", &ten),
            one("b", "text/plain", &ten),
        ])))
        .await;
    let run = s.run(&id).await;
    assert_eq!(run["attachments"][1]["size_bytes"], 10 * 1024 * 1024);
}

#[tokio::test]
async fn attachments_travel_in_a_backup_and_a_damaged_one_is_refused() {
    let dir = agent_visible_dir();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("elsewhere");
    let config = config(dir.path(), &elsewhere);
    let mut s = Server::start_in(dir.path(), &config);
    // Over one content line (4 MiB), so it travels in pieces.
    let big = noise(5 * 1024 * 1024 + 3, 2);
    let id = s
        .create(json!({
            "prompt": "p",
            "config": {"environment_id": "cmd"},
            "attachments": [{"file_name": "big.bin", "mime_type": "application/octet-stream",
                             "data": b64(&big)}],
        }))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    let data_dir = s.data_dir.display().to_string();
    let (ok, backup, err) = common::cli(&["export", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    // The attachment's pieces (the execution's diff, `Changes`, is a content of its own).
    let digest: String = {
        use sha2::{Digest, Sha256};
        Sha256::digest(&big)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let pieces: Vec<&str> = backup
        .lines()
        .filter(|l| l.contains(r#""record":"content""#) && l.contains(&digest))
        .collect();
    assert_eq!(pieces.len(), 2, "two pieces of one content");

    let restored = agent_visible_dir();
    let file = restored.path().join("backup.jsonl");
    std::fs::write(&file, &backup).expect("write backup");
    let target = restored.path().join("data");
    let (ok, _, err) = common::cli(
        &[
            "import",
            &file.display().to_string(),
            "--data-dir",
            &target.display().to_string(),
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(
        // The attachment, and the execution's diff (its `Changes`).
        err.contains("imported 2 attachment and artifact contents"),
        "{err}"
    );
    let s = Server::start_in(restored.path(), &config);
    let (status, v) = s.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{v}");
    let ws = workspace(&s, &id);
    s.wait_run(&id, "the restored run's execution", |r| {
        r["state"] == "SUCCEEDED" && ws.join("listing-2.txt").exists()
    })
    .await;
    assert_eq!(
        std::fs::read(ws.join(".runledger/attachments/big.bin")).expect("big.bin"),
        big
    );

    // A flipped byte in a piece, or a missing piece, fails the whole import.
    let import = |text: String, name: &str| {
        let file = restored.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, text).expect("write");
        let target = restored.path().join(name);
        common::cli(
            &[
                "import",
                &file.display().to_string(),
                "--data-dir",
                &target.display().to_string(),
            ],
            &[],
        )
    };
    let first = pieces[0];
    let at = first.find(r#""data":""#).expect("data") + 20;
    let flipped = if &first[at..at + 1] == "A" { "B" } else { "A" };
    let damaged = backup.replacen(
        first,
        &format!("{}{flipped}{}", &first[..at], &first[at + 1..]),
        1,
    );
    let (ok, _, err) = import(damaged, "damaged");
    assert!(!ok);
    assert!(err.contains("do not have that SHA-256"), "{err}");
    let truncated = backup.replacen(&format!("{}\n", pieces[1]), "", 1);
    let (ok, _, err) = import(truncated, "truncated");
    assert!(!ok);
    // A content cut short is refused by name: at the end of the backup as truncated, before
    // another content (the execution's diff follows it) as ending early.
    assert!(
        err.contains("the backup is truncated") || err.contains("ends after 4194304 of its"),
        "{err}"
    );
}
