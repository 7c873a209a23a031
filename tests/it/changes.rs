//! What an execution changed (issue #40, items 1, 2, 5, 6): with the real binary, command
//! agents that add, modify, delete, rename and re-mode files in a real git repository made by
//! the test (committed, staged, unstaged and untracked) and in a plain workspace get exactly
//! those changes; the patch applies with `git apply --check` to a fresh clone at the base
//! commit; the agent's index and branches are left as the agent left them. Hostile: a link to
//! `/etc/shadow` is a link, a FIFO does not hang, a secret written to a file is redacted, a
//! `.git/config` with `core.fsmonitor` and a filter driver runs neither, an assume-unchanged
//! mark hides nothing, a file beyond `changes_max_mb` keeps its summary and cuts the diff;
//! another team's key gets 404.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{agent_visible_dir, cli, script, Server};
use serde_json::{json, Value};

const SECRET_VALUE: &str = "rlchg-S3cr3t-Vq7Lp2Xn";

fn git(dir: &Path, args: &[&str]) -> String {
    crate::provenance::git(dir, &[&["-c", "safe.directory=*"][..], args].concat())
}

/// A bare `origin.git` on `main` with `files` committed (a clone, `work`, pushed it);
/// returns the file URL and the commit.
fn repository(dir: &Path, files: &[(&str, &str)]) -> (String, String) {
    let origin = dir.join("origin.git");
    git(dir, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    git(
        dir,
        &["clone", "-q", origin.to_str().expect("utf-8"), "work"],
    );
    let work = dir.join("work");
    git(&work, &["checkout", "-q", "-b", "main"]);
    for (name, text) in files {
        std::fs::write(work.join(name), text).expect("write");
    }
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "base"]);
    git(&work, &["push", "-q", "origin", "main"]);
    (
        format!("file://{}", origin.display()),
        git(&work, &["rev-parse", "HEAD"]),
    )
}

/// The files of the latest execution's first repository: path → (status, +, -, old path).
fn files(changes: &Value) -> BTreeMap<String, (String, u64, u64, Option<String>)> {
    let latest = changes["executions"]
        .as_array()
        .and_then(|e| e.last())
        .expect("an execution's changes");
    latest["repositories"][0]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_string(),
                (
                    f["status"].as_str().expect("status").to_string(),
                    f["additions"].as_u64().expect("additions"),
                    f["deletions"].as_u64().expect("deletions"),
                    f["old_path"].as_str().map(str::to_string),
                ),
            )
        })
        .collect()
}

fn entry(status: &str, add: u64, del: u64) -> (String, u64, u64, Option<String>) {
    (status.to_string(), add, del, None)
}

async fn patch(s: &Server, key: &str, id: &str) -> (u16, Vec<u8>, reqwest::header::HeaderMap) {
    let r = s
        .client
        .get(s.api(&format!("/agent/runs/{id}/changes")))
        .header("accept", "text/x-diff")
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.bytes().await.expect("body").to_vec(), headers)
}

fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

const BASE_FILES: &[(&str, &str)] = &[
    ("a.txt", "one\ntwo\n"),
    ("gone.txt", "bye\n"),
    ("old.txt", "rename me\nwith\nlines\n"),
    ("run.sh", "echo hi\n"),
    ("keep.txt", "kept\n"),
];

/// Adds, modifies, deletes, renames and re-modes, committed, staged, unstaged and untracked.
const EDITS: &str = r#"set -e
if [ -n "$RUNLEDGER_FOLLOWUP" ]; then echo three >> a.txt; exit 0; fi
echo three >> a.txt
rm gone.txt
mv old.txt new.txt
chmod +x run.sh
printf 'n1\nn2\n' > added.txt
if [ -d .git ]; then
  printf 'c\n' > committed.txt
  git add committed.txt
  git -c user.name=a -c user.email=a@example.com commit -q -m agent
  printf 's\n' > staged.txt
  git add staged.txt
fi
echo edited"#;

#[tokio::test]
async fn a_command_agent_gets_exactly_its_changes_in_a_repository_and_a_patch_that_applies() {
    let f = agent_visible_dir();
    let dir = f.path();
    let (url, base) = repository(dir, BASE_FILES);
    let agent = dir.join("agent.sh");
    script(&agent, EDITS);
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"repo\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         repos = [{{ url = \"{url}\" }}]\n",
        agent = agent.display(),
    );
    let mut s = Server::start_in(dir, &config);
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "edit", "config": {"environment_id": "repo"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;

    let (status, changes) = s.get(&s.key, &format!("/agent/runs/{id}/changes")).await;
    assert_eq!(status, 200, "{changes}");
    let repo = &changes["executions"][0]["repositories"][0];
    assert_eq!(repo["path"], ".", "{changes}");
    assert_eq!(repo["base"], base.as_str());
    assert!(repo.get("error").is_none(), "{changes}");
    let mut expected = BTreeMap::from([
        ("a.txt".to_string(), entry("modified", 1, 0)),
        ("added.txt".to_string(), entry("added", 2, 0)),
        ("committed.txt".to_string(), entry("added", 1, 0)),
        ("gone.txt".to_string(), entry("deleted", 0, 1)),
        ("run.sh".to_string(), entry("mode_changed", 0, 0)),
        ("staged.txt".to_string(), entry("added", 1, 0)),
    ]);
    expected.insert(
        "new.txt".into(),
        ("renamed".into(), 0, 0, Some("old.txt".into())),
    );
    assert_eq!(files(&changes), expected, "{changes}");
    assert_eq!(
        changes["total"],
        json!({"files": 7, "additions": 5, "deletions": 1})
    );
    assert!(changes["patch_url"]
        .as_str()
        .is_some_and(|u| u.ends_with("changes?format=patch")));

    // The agent's own index and branch are as it left them.
    let ws = workspace(&s, &id);
    let staged = git(&ws, &["diff", "--cached", "--name-only"]);
    assert_eq!(staged, "staged.txt");
    assert_eq!(git(&ws, &["rev-list", "--count", "HEAD"]), "2");
    assert!(git(&ws, &["status", "--porcelain"]).contains("?? added.txt"));

    // The patch applies to a fresh clone at the base commit, and makes the same tree.
    let (status, bytes, headers) = patch(&s, &s.key, &id).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"]
        .to_str()
        .is_ok_and(|t| t.starts_with("text/x-diff")));
    assert!(headers["content-disposition"]
        .to_str()
        .is_ok_and(|d| d.contains(&format!("run-{id}.patch"))));
    let clone = dir.join("check");
    git(dir, &["clone", "-q", &url, "check"]);
    git(&clone, &["checkout", "-q", &base]);
    let patch_file = dir.join("run.patch");
    std::fs::write(&patch_file, &bytes).expect("write");
    git(
        &clone,
        &["apply", "--check", patch_file.to_str().expect("utf-8")],
    );
    git(&clone, &["apply", patch_file.to_str().expect("utf-8")]);
    assert_eq!(
        std::fs::read_to_string(clone.join("a.txt")).expect("a.txt"),
        "one\ntwo\nthree\n"
    );
    assert!(!clone.join("gone.txt").exists() && clone.join("new.txt").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(clone.join("run.sh"))
        .expect("run.sh")
        .permissions()
        .mode();
    assert!(mode & 0o111 != 0, "run.sh is executable");

    // Recorded before the end, once; in the events, the export and the CLI.
    let events = s.events(&id).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).expect(k);
    assert!(at("Changes") < at("Succeeded"), "{kinds:?}");
    let (ok, out, err) = cli(
        &[
            "runs",
            "changes",
            &id,
            "--server",
            &s.base,
            "--api-key",
            &s.key,
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("renamed") && out.contains("old.txt -> new.txt"),
        "{out}"
    );
    assert!(out.contains("7 file(s) changed, +5 -1"), "{out}");
    let (ok, out, err) = cli(
        &[
            "runs",
            "changes",
            &id,
            "--patch",
            "--server",
            &s.base,
            "--api-key",
            &s.key,
        ],
        &[],
    );
    assert!(ok, "{err}");
    assert_eq!(out.as_bytes(), &bytes[..]);

    // Another team's key: the run does not exist for it.
    let (status, team) = s
        .post(&s.key, "/admin/teams", json!({"name": "other"}))
        .await;
    assert_eq!(status, 201, "{team}");
    let (status, key) = s
        .post(&s.key, "/admin/keys", json!({"name": "o", "team": "other"}))
        .await;
    assert_eq!(status, 200, "{key}");
    let other = key["key"].as_str().expect("key");
    let (status, _) = s.get(other, &format!("/agent/runs/{id}/changes")).await;
    assert_eq!(status, 404);
    let (status, _, _) = patch(&s, other, &id).await;
    assert_eq!(status, 404);
    let (status, body) = s
        .get(&s.key, &format!("/agent/runs/{id}/changes?format=zip"))
        .await;
    assert_eq!(status, 400, "{body}");

    // A backup holds the event and the diff's bytes.
    let digest = changes["executions"][0]["diff"]["sha256"]
        .as_str()
        .expect("a diff")
        .to_string();
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    let data_dir = s.data_dir.display().to_string();
    let (ok, backup, err) = cli(&["export", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    assert!(backup.contains("\"Changes\""), "the export holds the event");
    assert!(
        backup.contains(&format!("\"record\":\"content\",\"sha256\":\"{digest}\"")),
        "the export holds the diff"
    );
}

#[tokio::test]
async fn a_plain_workspace_counts_from_its_state_at_the_start() {
    let f = agent_visible_dir();
    let dir = f.path();
    let agent = dir.join("agent.sh");
    script(&agent, EDITS);
    let setup: Vec<String> = BASE_FILES
        .iter()
        .map(|(name, text)| format!("printf '{}' > {name}", text.replace('\n', "\\n")))
        .collect();
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"plain\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         setup = {setup}\n",
        agent = agent.display(),
        setup = serde_json::to_string(&setup).expect("json"),
    );
    let s = Server::start_in(dir, &config);
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "edit", "config": {"environment_id": "plain"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, changes) = s.get(&s.key, &format!("/agent/runs/{id}/changes")).await;
    assert_eq!(status, 200, "{changes}");
    let mut expected = BTreeMap::from([
        ("a.txt".to_string(), entry("modified", 1, 0)),
        ("added.txt".to_string(), entry("added", 2, 0)),
        ("gone.txt".to_string(), entry("deleted", 0, 1)),
        ("run.sh".to_string(), entry("mode_changed", 0, 0)),
    ]);
    expected.insert(
        "new.txt".into(),
        ("renamed".into(), 0, 0, Some("old.txt".into())),
    );
    assert_eq!(files(&changes), expected, "{changes}");
    let repo = &changes["executions"][0]["repositories"][0];
    assert_eq!(repo["path"], ".");
    assert_eq!(repo["base"].as_str().map(str::len), Some(40), "a tree id");
    // No repository appears in the workspace: the base lives outside it.
    assert!(!workspace(&s, &id).join(".git").exists());

    // The patch applies to a copy of the workspace's start.
    let (status, bytes, _) = patch(&s, &s.key, &id).await;
    assert_eq!(status, 200);
    let start = dir.join("start");
    std::fs::create_dir(&start).expect("mkdir");
    for (name, text) in BASE_FILES {
        std::fs::write(start.join(name), text).expect("write");
    }
    git(&start, &["init", "-q"]);
    let patch_file = dir.join("plain.patch");
    std::fs::write(&patch_file, &bytes).expect("write");
    git(
        &start,
        &["apply", "--check", patch_file.to_str().expect("utf-8")],
    );

    // A follow-up's execution counts from the same start: the run's total.
    let (status, body) = s.followup(&id, json!({"message": "again"})).await;
    assert!((200..300).contains(&status), "{body}");
    s.wait_events(&id, "Changes", 2).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (_, again) = s.get(&s.key, &format!("/agent/runs/{id}/changes")).await;
    let second = files(&again);
    assert_eq!(second["a.txt"], entry("modified", 2, 0), "{again}");
    assert_eq!(again["executions"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn a_hostile_workspace_runs_nothing_leaks_nothing_and_hides_nothing() {
    let f = agent_visible_dir();
    let dir = f.path();
    let (url, _) = repository(dir, BASE_FILES);
    let agent = dir.join("agent.sh");
    // The mark and the hostile configuration come last: the agent runs no git after them,
    // so a marker could only come from the service's git.
    script(
        &agent,
        r#"set -e
echo changed >> keep.txt
git update-index --assume-unchanged keep.txt
ln -s /etc/shadow shadow-link
mkfifo pipe
echo "token=$DEPLOY_KEY" > secret.txt
echo '*.txt filter=evil' > .gitattributes
git config filter.evil.clean 'sh -c "touch .git/filter-ran; cat"'
git config filter.evil.required true
printf '#!/bin/sh\ntouch "%s/.git/fsmonitor-ran"\n' "$PWD" > .git/fsmonitor.sh
chmod +x .git/fsmonitor.sh
git config core.fsmonitor "$PWD/.git/fsmonitor.sh"
echo done"#,
    );
    let big = dir.join("big.sh");
    script(
        &big,
        "seq 1 400000 > big.txt\necho small > small.txt\necho done",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [secrets]\nDEPLOY_KEY = {{ env = \"RUNLEDGER_TEST_CHANGES_SECRET\" }}\n\n\
         [[environments]]\nid = \"hostile\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         secrets = [\"DEPLOY_KEY\"]\nrepos = [{{ url = \"{url}\" }}]\n\n\
         [[environments]]\nid = \"big\"\nharness = \"command\"\ncommand = [\"{big}\"]\n\
         changes_max_mb = 1\nrepos = [{{ url = \"{url}\" }}]\n",
        agent = agent.display(),
        big = big.display(),
    );
    let s = Server::start_with(
        dir,
        &config,
        &[("RUNLEDGER_TEST_CHANGES_SECRET", SECRET_VALUE.to_string())],
    );
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "x", "config": {"environment_id": "hostile"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, changes) = s.get(&s.key, &format!("/agent/runs/{id}/changes")).await;
    assert_eq!(status, 200, "{changes}");
    let found = files(&changes);
    // The assume-unchanged mark hides nothing; the link is a link; the FIFO is skipped.
    assert_eq!(found["keep.txt"], entry("modified", 1, 0), "{changes}");
    assert_eq!(found["shadow-link"].0, "symlink", "{changes}");
    assert!(!found.contains_key("pipe"), "{changes}");
    assert!(found.contains_key("secret.txt"), "{changes}");
    let ws = workspace(&s, &id);
    assert!(
        !ws.join(".git/fsmonitor-ran").exists(),
        "core.fsmonitor ran"
    );
    assert!(
        !ws.join(".git/filter-ran").exists(),
        "the filter driver ran"
    );
    let (_, bytes, _) = patch(&s, &s.key, &id).await;
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("+/etc/shadow"),
        "the link's target, as a link: {text}"
    );
    assert!(!text.contains("root:"), "the shadow file's content: {text}");
    assert!(!text.contains(SECRET_VALUE), "{text}");
    assert!(text.contains("token=[secret:DEPLOY_KEY]"), "{text}");

    // Beyond changes_max_mb: the summary whole, the diff cut at a file's start.
    let id = s
        .create(json!({"prompt": "x", "config": {"environment_id": "big"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (_, changes) = s.get(&s.key, &format!("/agent/runs/{id}/changes")).await;
    let found = files(&changes);
    assert_eq!(found["big.txt"], entry("added", 400_000, 0), "{changes}");
    assert_eq!(found["small.txt"], entry("added", 1, 0), "{changes}");
    assert_eq!(changes["executions"][0]["cut"], true, "{changes}");
    let (status, bytes, headers) = patch(&s, &s.key, &id).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-runledger-patch-cut"], "true");
    assert!(bytes.len() <= 1 << 20, "{} bytes", bytes.len());
    assert!(!String::from_utf8_lossy(&bytes).contains("+400000"));
}

/// A receiver of webhook deliveries that keeps each body and answers 200.
async fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = got.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    let body: Value =
                        serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap_or_default();
                    kept.lock().expect("lock").push(body);
                    let _ = conn
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (url, got)
}

#[tokio::test]
async fn run_succeeded_and_run_failed_carry_the_changes_summary() {
    let f = agent_visible_dir();
    let dir = f.path();
    let (url, got) = receiver().await;
    let ok = dir.join("ok.sh");
    script(&ok, "printf 'one\\ntwo\\n' > new.txt\necho done");
    let failing = dir.join("failing.sh");
    script(&failing, "echo one > partial.txt\nexit 3");
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [secrets]\nHOOK = {{ env = \"RUNLEDGER_TEST_CHANGES_HOOK\" }}\n\n\
         [[environments]]\nid = \"ok\"\nharness = \"command\"\ncommand = [\"{ok}\"]\n\n\
         [[environments]]\nid = \"failing\"\nharness = \"command\"\ncommand = [\"{failing}\"]\n\n\
         [[webhooks]]\nname = \"ends\"\nurl = \"{url}\"\nsecret = \"HOOK\"\nallow_private = true\n\
         events = [\"run.succeeded\", \"run.failed\"]\n",
        ok = ok.display(),
        failing = failing.display(),
    );
    let s = Server::start_with(
        dir,
        &config,
        &[(
            "RUNLEDGER_TEST_CHANGES_HOOK",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string(),
        )],
    );
    s.wait_ready().await;
    let good = s
        .create(json!({"prompt": "x", "config": {"environment_id": "ok"}}))
        .await;
    let bad = s
        .create(json!({"prompt": "x", "config": {"environment_id": "failing"}}))
        .await;
    s.wait_state(&good, "SUCCEEDED").await;
    s.wait_state(&bad, "FAILED").await;
    common::eventually(20, "both deliveries", || {
        got.lock().expect("lock").len() >= 2
    })
    .await;
    let bodies = got.lock().expect("lock").clone();
    let of = |id: &str| {
        bodies
            .iter()
            .find(|b| b["data"]["run_id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(of(&good)["type"], "run.succeeded");
    assert_eq!(
        of(&good)["changes"],
        json!({"files": 1, "additions": 2, "deletions": 0}),
        "{bodies:?}"
    );
    assert_eq!(of(&bad)["type"], "run.failed");
    assert_eq!(
        of(&bad)["changes"],
        json!({"files": 1, "additions": 1, "deletions": 0}),
        "{bodies:?}"
    );
}
