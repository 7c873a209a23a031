//! `POST /agent/runs/{id}/fork` and `runledger runs fork` with a `command` agent: the fork's
//! workspace and home are the original's as execution K left them (not what came after), its
//! agent gets the message as `RUNLEDGER_FOLLOWUP`, it runs as its own user, `GET` shows
//! `forked_from`; and every refusal names its reason.

use super::support::*;
use crate::common;
use serde_json::json;
use std::os::unix::fs::MetadataExt;

/// Says what it finds, then adds to `log` in its workspace and a file in its home.
const AGENT: &str = r#"echo "execution=$RUNLEDGER_EXECUTION followup=$RUNLEDGER_FOLLOWUP"
echo "log: $(tr '\n' ' ' < log 2>/dev/null)"
echo "home: $(ls "$HOME" | tr '\n' ' ')"
echo "$RUNLEDGER_EXECUTION:${RUNLEDGER_FOLLOWUP:-$1}" >> log
touch "$HOME/home-$RUNLEDGER_EXECUTION-${RUNLEDGER_FOLLOWUP:-$1}"
[ "$1" = wait ] && [ -z "$RUNLEDGER_FOLLOWUP" ] && while [ ! -e go ]; do sleep 0.05; done
exit 0"#;

/// A run with executions 1 (its prompt) and 2 (the follow-up `second`).
async fn two_executions(s: &common::Server) -> String {
    let id = s.create(json!({"prompt": "first"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, body) = s.followup(&id, json!({"message": "second"})).await;
    assert_eq!(status, 200, "{body}");
    s.wait_events(&id, "Succeeded", 2).await;
    id
}

#[tokio::test]
async fn a_fork_starts_where_execution_k_ended_and_continues_with_its_message() {
    let f = Fixture::new();
    let s = f.server(AGENT, "").await;
    let original = two_executions(&s).await;
    let (status, body) = s
        .post(
            &s.key,
            &format!("/agent/runs/{original}/fork"),
            json!({"after_execution": 1, "message": "branch"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let fork = body["run_id"].as_str().expect("run_id").to_string();
    assert_ne!(fork, original);
    let run = s.wait_state(&fork, "SUCCEEDED").await;
    assert_eq!(
        run["forked_from"],
        json!({"run_id": original, "execution": 1})
    );
    assert_eq!(run["prompt"], "first");
    assert!(s.run(&original).await.get("forked_from").is_none());

    let text = s.transcript_text(&fork).await;
    // The workspace and the home as execution 1 left them, nothing of execution 2.
    assert!(text.contains("execution=1 followup=branch\n"), "{text}");
    assert!(text.contains("log: 1:first \n"), "{text}");
    assert!(text.contains("home: home-1-first \n"), "{text}");
    assert!(!text.contains("second"), "{text}");
    assert!(
        text.contains(&format!(
            "the fork starts from the snapshot of execution 1 of run {original}"
        )),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace(&s, &fork).join("log")).expect("log"),
        "1:first\n1:branch\n"
    );
    // The original is untouched.
    assert_eq!(
        std::fs::read_to_string(workspace(&s, &original).join("log")).expect("log"),
        "1:first\n2:second\n"
    );
    // The fork's files are its own user's, not the original's.
    let uid = |id: &str| {
        std::fs::metadata(workspace(&s, id).join("log"))
            .expect("log")
            .uid()
    };
    if nix::unistd::geteuid().is_root() {
        assert_ne!(uid(&fork), uid(&original));
    }
    let events = s.events(&fork).await;
    let derived = events
        .iter()
        .find(|e| e["type"] == "Derived")
        .expect("a Derived event");
    assert_eq!(derived["data"]["from"], original.as_str(), "{derived}");
    // A follow-up to the fork is a follow-up like any other.
    s.followup(&fork, json!({"message": "onwards"})).await;
    s.wait_events(&fork, "Succeeded", 2).await;
    let text = s.transcript_text(&fork).await;
    assert!(text.contains("log: 1:first 1:branch \n"), "{text}");
}

#[tokio::test]
async fn runs_fork_on_the_command_line_prints_the_new_run_and_follows_it() {
    let f = Fixture::new();
    let s = f.server(AGENT, "").await;
    let original = two_executions(&s).await;
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", s.key.as_str()),
        ("HOME", f.dir.path().to_str().expect("utf-8")),
    ];
    let (ok, out, err) = common::cli(
        &[
            "runs",
            "fork",
            &original,
            "--after",
            "2",
            "--message",
            "cli",
            "--follow",
        ],
        &env,
    );
    assert!(ok, "{out}\n{err}");
    let fork = out.lines().next().expect("the fork's id").to_string();
    assert!(out.contains("execution=1 followup=cli"), "{out}");
    assert!(out.contains("log: 1:first 2:second \n"), "{out}");
    let run = s.run(&fork).await;
    assert_eq!(run["forked_from"]["execution"], 2);
    // A refusal is the CLI's error, naming the reason.
    let (ok, _, err) = common::cli(
        &["runs", "fork", &original, "--after", "9", "--message", "x"],
        &env,
    );
    assert!(!ok);
    assert!(err.contains("has no execution 9"), "{err}");
}

#[tokio::test]
async fn a_fork_is_refused_with_the_reason() {
    let f = Fixture::new();
    let s = f.server(AGENT, "").await;
    let original = two_executions(&s).await;
    let path = format!("/agent/runs/{original}/fork");
    let long = "x".repeat(64 * 1024 + 1);
    for (body, status, says) in [
        (
            json!({"after_execution": 3, "message": "m"}),
            422,
            "has no execution 3",
        ),
        (
            json!({"after_execution": 0, "message": "m"}),
            400,
            "after_execution",
        ),
        (json!({"after_execution": 1}), 400, "message is required"),
        (
            json!({"after_execution": 1, "message": "  "}),
            400,
            "message is required",
        ),
        (
            json!({"after_execution": 1, "message": long}),
            400,
            "longer than 65536",
        ),
        (json!({"message": "m"}), 400, "after_execution is required"),
        (
            json!({"after_execution": 1, "message": "m", "extra": 1}),
            400,
            "unknown field",
        ),
        (
            json!({"after_execution": "1", "message": "m"}),
            400,
            "wrong type",
        ),
    ] {
        let (got, problem) = s.post(&s.key, &path, body.clone()).await;
        assert_eq!(got, status, "{body}: {problem}");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{body}: {problem}");
    }
    let (got, _) = s
        .post(
            &s.key,
            "/agent/runs/01M8AQKPTXXN0VNC062RHHB7SD/fork",
            json!({"after_execution": 1, "message": "m"}),
        )
        .await;
    assert_eq!(got, 404);
    // Another team's key sees no such run.
    let (status, _) = s
        .post(&s.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201);
    let (status, key) = s
        .post(
            &s.key,
            "/admin/keys",
            json!({ "name": "bob", "team": "infra" }),
        )
        .await;
    assert_eq!(status, 200, "{key}");
    let bob = key["key"].as_str().expect("key");
    let (got, _) = s
        .post(bob, &path, json!({"after_execution": 1, "message": "m"}))
        .await;
    assert_eq!(got, 404);
    // An admin key forks another team's run, into that team.
    let (status, created) = s.post(bob, "/agent/runs", json!({"prompt": "first"})).await;
    assert_eq!(status, 200, "{created}");
    let bobs = created["run_id"].as_str().expect("run_id").to_string();
    wait_as(&s, bob, &bobs, "SUCCEEDED").await;
    let (got, forked) = s
        .post(
            &s.key,
            &format!("/agent/runs/{bobs}/fork"),
            json!({"after_execution": 1, "message": "admin"}),
        )
        .await;
    assert_eq!(got, 200, "{forked}");
    let fork = forked["run_id"].as_str().expect("run_id").to_string();
    let seen = wait_as(&s, bob, &fork, "SUCCEEDED").await;
    assert_eq!(seen["forked_from"]["run_id"], bobs.as_str(), "{seen}");

    // An execution still running has no snapshot yet.
    let waiting = s.create(json!({"prompt": "wait"})).await;
    s.wait_state(&waiting, "INPROGRESS").await;
    let (got, problem) = s
        .post(
            &s.key,
            &format!("/agent/runs/{waiting}/fork"),
            json!({"after_execution": 1, "message": "m"}),
        )
        .await;
    assert_eq!(got, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("has not ended"),
        "{problem}"
    );
    // INPROGRESS comes with `Started`, before the workspace is made: wait for it.
    let dir = workspace(&s, &waiting);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !dir.is_dir() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    std::fs::write(dir.join("go"), "").expect("go");
    s.wait_state(&waiting, "SUCCEEDED").await;
}

#[tokio::test]
async fn a_fork_after_an_execution_whose_snapshot_was_not_kept_is_refused() {
    let f = Fixture::new();
    let s = f.server(AGENT, "snapshots = false").await;
    let id = s.create(json!({"prompt": "first"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (got, problem) = s
        .post(
            &s.key,
            &format!("/agent/runs/{id}/fork"),
            json!({"after_execution": 1, "message": "m"}),
        )
        .await;
    assert_eq!(got, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("no snapshot of execution 1"),
        "{problem}"
    );
}

#[tokio::test]
async fn a_fork_whose_snapshot_holds_planted_links_and_fifos_restores_them_as_links() {
    let f = Fixture::new();
    let s = f
        .server(
            r#"if [ -z "$RUNLEDGER_FOLLOWUP" ]; then
  ln -s /etc etc; ln -s /etc/shadow shadow; mkfifo fifo; echo ok > kept
else
  for p in etc shadow fifo kept; do
    if [ -L "$p" ]; then echo "$p: link to $(readlink "$p")"
    elif [ -p "$p" ]; then echo "$p: fifo"
    elif [ -f "$p" ]; then echo "$p: file $(cat "$p")"
    else echo "$p: absent"; fi
  done
fi"#,
            "",
        )
        .await;
    let id = s.create(json!({"prompt": "plant"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (status, body) = s
        .post(
            &s.key,
            &format!("/agent/runs/{id}/fork"),
            json!({"after_execution": 1, "message": "look"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let fork = body["run_id"].as_str().expect("run_id").to_string();
    s.wait_state(&fork, "SUCCEEDED").await;
    let text = s.transcript_text(&fork).await;
    for line in [
        "etc: link to /etc",
        "shadow: link to /etc/shadow",
        "fifo: absent",
        "kept: file ok",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    // The restored links are the fork's own, and nothing of /etc was copied beside them.
    let all = walk(&workspace(&s, &fork));
    assert!(all.len() < 10, "{all:?}");
}
