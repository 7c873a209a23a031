//! Rerun (issue #39, item 4): `POST /agent/runs/{id}/rerun` makes a new run with the
//! original's prompt, configuration, attachments and environment. Pinned (the default), its
//! repositories are checked out at the commits the original's first execution recorded, even
//! after `main` moved on; unpinned, at the refs as they are now. With the real binary, the CLI
//! and a real git repository made by the test.

use crate::common;
use crate::provenance::{commit, git, repository};

use common::{agent_visible_dir, cli, script, Server};
use serde_json::json;

#[tokio::test]
async fn a_pinned_rerun_checks_out_the_recorded_commit_and_an_unpinned_one_the_ref_as_it_is() {
    let f = agent_visible_dir();
    let dir = f.path();
    let url = repository(dir);
    let work = dir.join("work");
    let first_commit = git(&work, &["rev-parse", "HEAD"]);
    let agent = dir.join("agent.sh");
    script(
        &agent,
        "echo \"commit=$(git rev-parse HEAD) text=$(cat a.txt) prompt=$1\"\n\
         echo \"attached=$(cat \"$RUNLEDGER_ATTACHMENTS_DIR/spec.md\")\"",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"repo\"\nharness = \"command\"\ncommand = [\"{agent}\", \"{{prompt}}\"]\n\
         repos = [{{ url = \"{url}\", ref = \"main\" }}]\n\n\
         [[environments]]\nid = \"demo\"\nharness = \"demo\"\ndemo_duration_ms = 10\n",
        agent = agent.display(),
    );
    let s = Server::start_with(dir, &config, &[]);
    s.wait_ready().await;

    let original = s
        .create(json!({"prompt": "fix it", "config": {"environment_id": "repo"},
                       "attachments": [{"file_name": "spec.md", "mime_type": "text/markdown", "data": "c3BlYw=="}]}))
        .await;
    s.wait_state(&original, "SUCCEEDED").await;
    let text = s.transcript_text(&original).await;
    assert!(
        text.contains(&format!("commit={first_commit} text=v1 prompt=fix it")),
        "{text}"
    );

    // `main` moves on.
    let second_commit = commit(&work, "v2");
    assert_ne!(first_commit, second_commit);

    // Pinned (no body): the commit the original ran at, detached.
    let (status, created) = s
        .post(
            &s.key,
            &format!("/agent/runs/{original}/rerun"),
            json!(null),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let pinned = created["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(created["state"], "QUEUED");
    let run = s.wait_state(&pinned, "SUCCEEDED").await;
    assert_eq!(run["rerun_of"], original.as_str());
    assert_eq!(run["prompt"], "fix it");
    assert_eq!(run["agent_config"]["environment_id"], "repo");
    let original_run = s.run(&original).await;
    assert_eq!(
        run["attachments"], original_run["attachments"],
        "the same content"
    );
    assert!(original_run.get("rerun_of").is_none());
    let text = s.transcript_text(&pinned).await;
    assert!(
        text.contains(&format!("commit={first_commit} text=v1 prompt=fix it")),
        "{text}"
    );
    assert!(text.contains("attached=spec"), "{text}");
    assert!(
        text.contains(&format!("(pinned at {first_commit})")),
        "{text}"
    );
    assert_eq!(
        run["provenance"]["repositories"][0]["commit"],
        first_commit.as_str()
    );
    let events = s.events(&pinned).await;
    assert_eq!(events[1]["type"], "Derived", "{events:?}");

    // Unpinned, through the CLI: the ref as it is now.
    let home = tempfile::tempdir().expect("config home");
    let home = home.path().to_str().expect("utf-8");
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", s.key.as_str()),
        ("XDG_CONFIG_HOME", home),
    ];
    let (ok, out, err) = cli(
        &["runs", "rerun", &original, "--unpinned", "--follow"],
        &env,
    );
    assert!(ok, "{out}{err}");
    let unpinned = out
        .lines()
        .next()
        .expect("the new run's id")
        .trim()
        .to_string();
    let run = s.wait_state(&unpinned, "SUCCEEDED").await;
    assert_eq!(run["rerun_of"], original.as_str());
    let text = s.transcript_text(&unpinned).await;
    assert!(
        text.contains(&format!("commit={second_commit} text=v2")),
        "{text}"
    );

    // The list finds a run's reruns (its id in any case the parser takes), and only them.
    let (status, list) = s
        .get(
            &s.key,
            &format!("/agent/runs?rerun_of={}", original.to_ascii_lowercase()),
        )
        .await;
    assert_eq!(status, 200, "{list}");
    let mut found: Vec<&str> = list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    found.sort_unstable();
    let mut want = vec![pinned.as_str(), unpinned.as_str()];
    want.sort_unstable();
    assert_eq!(found, want);
    for other in [pinned.as_str(), "not-a-run-id"] {
        let (status, list) = s
            .get(&s.key, &format!("/agent/runs?rerun_of={other}"))
            .await;
        assert_eq!(status, 200);
        assert_eq!(list["runs"], json!([]), "{other}");
    }

    // A run that recorded no provenance (the demo agent records none) is refused pinned,
    // saying why, and rerun unpinned.
    let demo = s
        .create(json!({"prompt": "x", "config": {"environment_id": "demo"}}))
        .await;
    s.wait_state(&demo, "SUCCEEDED").await;
    let (status, problem) = s
        .post(&s.key, &format!("/agent/runs/{demo}/rerun"), json!({}))
        .await;
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("no recorded provenance") && d.contains("pinned")),
        "{problem}"
    );
    let (status, created) = s
        .post(
            &s.key,
            &format!("/agent/runs/{demo}/rerun"),
            json!({"pinned": false}),
        )
        .await;
    assert_eq!(status, 200, "{created}");

    // Hostile bodies and ids.
    for body in [
        json!({"pinned": "yes"}),
        json!({"pinned": true, "x": 1}),
        json!([1]),
    ] {
        let (status, problem) = s
            .post(&s.key, &format!("/agent/runs/{original}/rerun"), body)
            .await;
        assert_eq!(status, 400, "{problem}");
    }
    for id in ["01M8AQKPTXXN0VNC062RHHB7SD", "--upload-pack=x", "..%2F.."] {
        let (status, _) = s
            .post(&s.key, &format!("/agent/runs/{id}/rerun"), json!({}))
            .await;
        assert_eq!(status, 404, "{id}");
    }
}
