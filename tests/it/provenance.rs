//! Provenance (issue #39, item 1): before an execution's agent starts, a `Provenance` event
//! records each repository's commit, the environment's definition and digest, the agent CLI's
//! version as the CLI reports it, runledger's version, the containment and the model. With the
//! real binary, a real git repository made by the test and a fake `claude` on the agents'
//! PATH. Hostile: a secret's value and an `env` value never reach the event, the `GET`, the
//! events API, the transcript or `runledger export`.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{agent_visible_dir, cli, script, Server};
use serde_json::{json, Value};

const SECRET_VALUE: &str = "rlprov-S3cr3t-Zq8Lw2Vn";
const ENV_VALUE: &str = "rlprov-EnvValue-Hk4Pt7";

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare `origin.git` with a clone `work` on `main` holding one commit; returns the file URL.
pub(crate) fn repository(dir: &Path) -> String {
    let origin = dir.join("origin.git");
    git(dir, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    git(
        dir,
        &["clone", "-q", origin.to_str().expect("utf-8"), "work"],
    );
    let work = dir.join("work");
    git(&work, &["checkout", "-q", "-b", "main"]);
    commit(&work, "v1");
    format!("file://{}", origin.display())
}

/// Commits `text` as `a.txt` on main, pushes it, and returns the commit.
pub(crate) fn commit(work: &Path, text: &str) -> String {
    std::fs::write(work.join("a.txt"), text).expect("write");
    git(work, &["add", "a.txt"]);
    git(work, &["commit", "-q", "-m", text]);
    git(work, &["push", "-q", "origin", "main"]);
    git(work, &["rev-parse", "HEAD"])
}

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn an_execution_records_its_commits_cli_version_and_environment_before_its_agent() {
    let f = agent_visible_dir();
    let dir = f.path();
    let url = repository(dir);
    let head = git(&dir.join("work"), &["rev-parse", "HEAD"]);
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    // A fake Claude Code: its version on `--version`; otherwise one turn that reads its
    // prompt, prints the commit it sees and a result, and ends.
    script(
        &bin.join("claude"),
        r#"if [ "$1" = "--version" ]; then echo "9.8.7 (Claude Code)"; exit 0; fi
IFS= read -r line
echo "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s-1\"}"
echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"saw $(git rev-parse HEAD)\",\"session_id\":\"s-1\"}"
exit 0"#,
    );
    let command_agent = dir.join("agent.sh");
    script(&command_agent, "echo \"commit=$(git rev-parse HEAD)\"");
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [secrets]\nDEPLOY_KEY = {{ env = \"RUNLEDGER_TEST_PROVENANCE_SECRET\" }}\n\n\
         [[environments]]\nid = \"claude\"\nharness = \"claude\"\nmodel_id = \"sonnet\"\n\
         env = {{ PATH = \"{bin}:/usr/local/bin:/usr/bin:/bin\", PLAIN_VAR = \"{ENV_VALUE}\" }}\n\
         secrets = [\"DEPLOY_KEY\"]\n\
         repos = [{{ url = \"{url}\", ref = \"main\" }}]\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         repos = [{{ url = \"{url}\", path = \"src\" }}]\n",
        bin = bin.display(),
        agent = command_agent.display(),
    );
    let mut s = Server::start_with(
        dir,
        &config,
        &[("RUNLEDGER_TEST_PROVENANCE_SECRET", SECRET_VALUE.to_string())],
    );
    s.wait_ready().await;

    let id = s
        .create(json!({"prompt": "fix it", "config": {"environment_id": "claude"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let run = s.run(&id).await;
    let p = &run["provenance"];
    assert_eq!(p["execution"], 1, "{run}");
    assert_eq!(p["repositories"][0]["url"], url.as_str());
    assert_eq!(p["repositories"][0]["ref"], "main");
    assert_eq!(p["repositories"][0]["path"], ".");
    assert_eq!(p["repositories"][0]["commit"], head.as_str());
    assert_eq!(
        p["agent_cli"],
        json!({"name": "claude", "version": "9.8.7 (Claude Code)"})
    );
    assert_eq!(p["harness"], "claude");
    assert_eq!(p["model_id"], "sonnet");
    assert_eq!(p["runledger_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(p["network"], true);
    let definition = p["environment"]["definition"].as_str().expect("definition");
    assert_eq!(p["environment"]["sha256"], sha256_hex(definition).as_str());
    let parsed: Value = serde_json::from_str(definition).expect("the definition is JSON");
    assert_eq!(parsed["id"], "claude");
    assert_eq!(parsed["secrets"], json!(["DEPLOY_KEY"]));
    assert!(
        parsed["env"]
            .as_array()
            .is_some_and(|names| names.contains(&json!("PLAIN_VAR"))),
        "{parsed}"
    );

    // Recorded after the start and before the agent: the event comes between `Started` and
    // the end, and the transcript says so before the agent's start.
    let events = s.events(&id).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).expect(k);
    assert!(
        at("Started") < at("Provenance") && at("Provenance") < at("Succeeded"),
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "Provenance").count(), 1);
    let text = s.transcript_text(&id).await;
    let recorded = text.find("provenance: ").expect("a provenance line");
    let started = text.find("execution 1 starts").expect("the agent's start");
    assert!(recorded < started, "{text}");
    assert!(text.contains(&format!("saw {head}")), "{text}");

    // A command agent has no CLI version; its repository is at its path.
    let plain = s
        .create(json!({"prompt": "x", "config": {"environment_id": "cmd"}}))
        .await;
    s.wait_state(&plain, "SUCCEEDED").await;
    let p = s.run(&plain).await["provenance"].clone();
    assert!(p.get("agent_cli").is_none(), "{p}");
    assert_eq!(p["harness"], "command");
    assert_eq!(p["repositories"][0]["path"], "src");
    assert_eq!(p["repositories"][0]["commit"], head.as_str());

    // A list leaves it out.
    let (status, list) = s.get(&s.key, "/agent/runs").await;
    assert_eq!(status, 200);
    assert!(list["runs"][0].get("provenance").is_none());

    // No value of a variable or secret anywhere a client or a backup reads.
    let (_, got) = s.get(&s.key, &format!("/agent/runs/{id}")).await;
    let (_, events) = s.get(&s.key, &format!("/agent/runs/{id}/events")).await;
    let transcript = s.transcript_text(&id).await;
    for (what, body) in [
        ("GET", got.to_string()),
        ("events", events.to_string()),
        ("transcript", transcript),
    ] {
        for value in [SECRET_VALUE, ENV_VALUE] {
            assert!(!body.contains(value), "{what} holds {value}");
        }
    }
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    let data_dir = s.data_dir.display().to_string();
    let (ok, backup, err) = cli(&["export", "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    assert!(
        backup.contains("\"Provenance\""),
        "the export holds the event"
    );
    for value in [SECRET_VALUE, ENV_VALUE] {
        assert!(!backup.contains(value), "the export holds {value}");
    }
    let (ok, out, err) = cli(&["events", &id, "--data-dir", &data_dir], &[]);
    assert!(ok, "{err}");
    assert!(out.contains("Provenance") && out.contains(&head), "{out}");
}
