//! The command harness with real child processes: variables, MCP config, workspace, failures and
//! their codes, setup retried after a failure, a bad config at start-up.

use super::support::*;
use crate::common;
use common::Server;
use serde_json::{json, Value};
use std::path::PathBuf;

#[tokio::test]
async fn an_agent_gets_its_variables_mcp_config_and_workspace_and_succeeds() {
    let f = Fixture::new();
    let agent = f.agent(
        "agent.sh",
        r#"echo "cwd=$PWD"
env | grep '^RUNLEDGER_' | sort
echo "extra=$TEAM_VAR"
cat "$RUNLEDGER_MCP_CONFIG"; echo
echo "setup-file=$(cat setup.txt)"
echo "to stderr" >&2"#,
    );
    let root = f.path("ws");
    let config = f.config(&format!(
        "[[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{agent}\", \"--model={{model_id}}\"]\n\
         setup = [\"echo prepared > setup.txt\"]\nworkspace_root = \"{}\"\nmodel_id = \"m-default\"\n\
         env = {{ TEAM_VAR = \"blue\" }}\n",
        root.display()
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    let id = s
        .create(json!({
            "prompt": "fix it",
            "title": "T",
            "config": {"name": "n", "base_prompt": "be brief", "skill_spec": "acme/tools:deploy",
                       "mcp_servers": {"gh": {"url": "https://mcp.example/x", "headers": {"A": "b"}},
                                       "fs": {"command": "npx", "args": ["srv"]}}}
        }))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert!(
        run["session_link"].is_string()
            && run["started_at"].is_string()
            && run["run_time"].is_string()
    );
    let text = s.transcript_text(&id).await;
    let workspace = root.join(&id);
    for want in [
        format!("cwd={}", workspace.display()),
        format!("RUNLEDGER_RUN_ID={id}"),
        "RUNLEDGER_PROMPT=fix it".into(),
        "RUNLEDGER_TITLE=T".into(),
        "RUNLEDGER_MODEL_ID=m-default".into(),
        "RUNLEDGER_BASE_PROMPT=be brief".into(),
        "RUNLEDGER_SKILL_SPEC=acme/tools:deploy".into(),
        "RUNLEDGER_CONFIG_NAME=n".into(),
        "RUNLEDGER_EXECUTION=1".into(),
        "RUNLEDGER_FOLLOWUP=".into(),
        "extra=blue".into(),
        "setup-file=prepared".into(),
        "to stderr".into(),
    ] {
        assert!(
            text.contains(&want),
            "missing {want:?} in transcript:\n{text}"
        );
    }
    let mcp_line = text
        .lines()
        .find(|l| l.contains("mcpServers"))
        .expect("mcp config printed");
    let mcp: Value = serde_json::from_str(mcp_line).expect("mcp json");
    assert_eq!(
        mcp["mcpServers"]["gh"],
        json!({"type": "http", "url": "https://mcp.example/x", "headers": {"A": "b"}})
    );
    assert_eq!(mcp["mcpServers"]["fs"]["command"], "npx");
    assert_eq!(mcp["mcpServers"]["fs"]["args"], json!(["srv"]));
}

#[tokio::test]
async fn failures_say_why_and_setup_failures_have_their_code() {
    let f = Fixture::new();
    let failing = f.agent(
        "fail.sh",
        "echo working; echo 'first problem' >&2; echo 'boom: disk full' >&2; exit 3",
    );
    let ok = f.agent("ok.sh", "exit 0");
    let config = f.config(&format!(
        "[[environments]]\nid = \"fails\"\nharness = \"command\"\ncommand = [\"{failing}\"]\n\n\
         [[environments]]\nid = \"badsetup\"\nharness = \"command\"\ncommand = [\"{ok}\"]\nsetup = [\"true\", \"echo no network >&2; exit 7\"]\n\n\
         [[environments]]\nid = \"missing\"\nharness = \"command\"\ncommand = [\"/nonexistent/agent\"]\n"
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    let a = s
        .create(json!({"prompt": "x", "config": {"environment_id": "fails"}}))
        .await;
    let b = s
        .create(json!({"prompt": "x", "config": {"environment_id": "badsetup"}}))
        .await;
    let c = s
        .create(json!({"prompt": "x", "config": {"environment_id": "missing"}}))
        .await;
    let a = s.wait_state(&a, "FAILED").await;
    let message = a["status_message"]["message"].as_str().expect("message");
    assert!(
        message.contains("exit code 3") && message.contains("boom: disk full"),
        "{message}"
    );
    let b = s.wait_state(&b, "FAILED").await;
    assert_eq!(
        b["status_message"]["error_code"], "environment_setup_failed",
        "{b}"
    );
    let message = b["status_message"]["message"].as_str().expect("message");
    assert!(
        message.contains("setup command 2")
            && message.contains("exit code 7")
            && message.contains("no network"),
        "{message}"
    );
    let c = s.wait_state(&c, "FAILED").await;
    assert!(
        c["status_message"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/nonexistent/agent")),
        "{c}"
    );
}

#[tokio::test]
async fn a_failed_setup_is_retried_in_a_fresh_workspace_when_the_run_resumes() {
    let f = Fixture::new();
    // The agent's HOME lives as long as the run; its workspace is fresh for every setup.
    let flag = "$HOME/setup-failed-once";
    let agent = f.agent("agent.sh", "cat prepared.txt; ls");
    let config = f.config(&format!(
        "[[environments]]\nid = \"flaky\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         setup = [\"touch leftover\", \"if [ -e {flag} ]; then echo ready > prepared.txt; else touch {flag}; exit 1; fi\"]\n",
    ));
    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    let key = s.key.clone();
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    let failed = s.wait_state(&id, "FAILED").await;
    assert_eq!(
        failed["status_message"]["error_code"],
        "environment_setup_failed"
    );
    let (st, _) = s.followup(&id, json!({"message": "retry"})).await;
    assert_eq!(st, 200);
    s.wait_run(&id, "resumed and finished", |r| r["state"] == "SUCCEEDED")
        .await;
    let text = s.transcript_text(&id).await;
    assert!(text.contains("ready"), "{text}");

    // Files the service writes for and about agents are private to its user.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: PathBuf| std::fs::metadata(&p).expect("exists").permissions().mode() & 0o777;
    let data = f.path("data");
    assert_eq!(
        mode(data.join("agent-files").join(&id).join("mcp.json")),
        0o600
    );
    assert_eq!(
        mode(data.join("transcripts").join(format!("{id}.jsonl"))),
        0o600
    );
    assert_eq!(mode(data.join("transcripts")), 0o700);

    // A run whose environment is removed from the configuration fails instead of running
    // somewhere else.
    let waiting = f.agent("wait.sh", "sleep 1000");
    let busy = format!(
        "[[environments]]\nid = \"keep\"\nharness = \"command\"\ncommand = [\"{waiting}\"]\n\n\
         [[environments]]\nid = \"gone\"\nharness = \"command\"\ncommand = [\"{waiting}\"]\nmax_concurrent = 1\n"
    );
    s.kill();
    let mut s = Server::start_with(f.dir.path(), &busy, &[]);
    s.key = key.clone();
    s.wait_ready().await;
    let first = s
        .create(json!({"prompt": "x", "config": {"environment_id": "gone"}}))
        .await;
    s.wait_state(&first, "INPROGRESS").await;
    let queued = s
        .create(json!({"prompt": "x", "config": {"environment_id": "gone"}}))
        .await;
    s.kill();
    let only_keep = format!(
        "[[environments]]\nid = \"keep\"\nharness = \"command\"\ncommand = [\"{waiting}\"]\n"
    );
    let mut s = Server::start_with(f.dir.path(), &only_keep, &[]);
    s.key = key;
    s.wait_ready().await;
    let run = s.wait_state(&queued, "FAILED").await;
    assert_eq!(
        run["status_message"]["error_code"], "resource_not_found",
        "{run}"
    );
}

#[test]
fn a_bad_config_stops_start_up_naming_file_line_and_field() {
    let f = Fixture::new();
    let path = f.path("runledger.toml");
    std::fs::write(
        &path,
        "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"run.sh\", \"{modle_id}\"]\n",
    )
    .expect("write");
    let config = path.display().to_string();
    let data = f.path("data").display().to_string();
    let (ok, _, err) = common::cli(&["serve", "--config", &config, "--data-dir", &data], &[]);
    assert!(!ok);
    assert!(
        err.contains(&config)
            && err.contains("line 7")
            && err.contains("environments[0].command")
            && err.contains("modle_id"),
        "{err}"
    );
}
