//! The claude, codex and gemini presets driven through fake CLIs on PATH: argv, settings, sessions
//! resumed.

use super::support::*;
use crate::common;
use common::{eventually, script, Server};
use serde_json::{json, Value};

#[tokio::test]
async fn the_claude_preset_runs_claude_code_with_its_argv_and_resumes_its_session() {
    let f = Fixture::new();
    let s = preset_server(&f).await;
    let mcp = json!({"fs": {"command": "npx", "args": ["srv"]}});
    let claude = s
        .create(json!({"prompt": "fix it", "config": {"environment_id": "claude", "base_prompt": "be brief", "mcp_servers": mcp}}))
        .await;
    s.wait_state(&claude, "SUCCEEDED").await;
    let claude_argv = argv(&s, &claude, "claude-1");
    let mcp_path = f
        .path("data")
        .join("agent-files")
        .join(&claude)
        .join("mcp.json");
    assert_eq!(
        claude_argv,
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--replay-user-messages",
            "--permission-mode=bypassPermissions",
            "--model=sonnet",
            // The report protocol leads the run's base prompt.
            &format!(
                "--append-system-prompt={}",
                runledger::exec::presets::base_prompt("be brief", "")
            ),
            &format!("--mcp-config={}", mcp_path.display()),
        ]
    );
    // The prompt is the first user message of its streaming input.
    assert_eq!(
        recorded(&s, &claude, "claude-1.stdin"),
        "{\"message\":{\"content\":\"fix it\",\"role\":\"user\"},\"type\":\"user\"}\n"
    );
    // Inside runledger's sandbox Claude Code may skip its permission prompts.
    assert_eq!(recorded(&s, &claude, "claude-1.env").trim(), "IS_SANDBOX=1");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_path).expect("mcp file")).expect("json");
    assert_eq!(written["mcpServers"]["fs"]["command"], "npx");
    assert_eq!(recorded(&s, &claude, "claude-1.run").trim(), claude);

    // A resumed run continues the session the CLI reported, with the follow-up as the prompt.
    let (st, _) = s
        .followup(&claude, json!({"message": "now the tests"}))
        .await;
    assert_eq!(st, 200);
    eventually(10, "second execution recorded", || {
        workspace(&s, &claude).join(".record/claude-2.run").exists()
    })
    .await;
    s.wait_state(&claude, "SUCCEEDED").await;
    let resumed = argv(&s, &claude, "claude-2");
    assert!(
        resumed.contains(&"--resume=sess-claude-1".to_string()),
        "{resumed:?}"
    );
    assert_eq!(
        recorded(&s, &claude, "claude-2.stdin"),
        "{\"message\":{\"content\":\"now the tests\",\"role\":\"user\"},\"type\":\"user\"}\n"
    );
}

#[tokio::test]
async fn the_codex_preset_runs_codex_with_its_argv_and_provider_and_resumes_its_thread() {
    let f = Fixture::new();
    let s = preset_server(&f).await;
    // With an attachment, which the base prompt names.
    let codex = s
        .create(json!({"prompt": "fix it", "config": {"environment_id": "codex", "model_id": "o4", "base_prompt": "be brief"},
                       "attachments": [{"file_name": "spec.md", "mime_type": "text/markdown", "data": "IyBzcGVj"}]}))
        .await;
    s.wait_state(&codex, "SUCCEEDED").await;
    let attached = runledger::exec::presets::attachments_prompt(
        &workspace(&s, &codex)
            .join(".runledger/attachments")
            .display()
            .to_string(),
        &["spec.md"],
    );
    assert_eq!(
        argv(&s, &codex, "codex-1"),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox=danger-full-access",
            "--model=o4",
            "--",
            &format!(
                "{}\n\nfix it",
                runledger::exec::presets::base_prompt("be brief", &attached)
            ),
        ]
    );
    // The endpoint reaches Codex as a provider block in its private home.
    let codex_config: toml::Table = recorded(&s, &codex, "codex-1.config")
        .parse()
        .expect("toml");
    assert_eq!(codex_config["model_provider"].as_str(), Some("runledger"));
    assert_eq!(
        codex_config["model_providers"]["runledger"]["base_url"].as_str(),
        Some("http://127.0.0.1:9/v1")
    );

    // Codex: options before `resume`, the thread id and the prompt after `--`.
    s.followup(&codex, json!({"message": "-v"})).await;
    eventually(10, "codex resumed", || {
        workspace(&s, &codex).join(".record/codex-2.run").exists()
    })
    .await;
    s.wait_state(&codex, "SUCCEEDED").await;
    let resumed = argv(&s, &codex, "codex-2");
    assert_eq!(
        resumed[resumed.len() - 4..],
        ["resume", "--", "thread-codex-1", "-v"],
        "{resumed:?}"
    );
}

#[tokio::test]
async fn the_gemini_preset_runs_gemini_cli_with_its_argv_and_settings_in_its_home() {
    let f = Fixture::new();
    let s = preset_server(&f).await;
    let mcp = json!({"fs": {"command": "npx", "args": ["srv"]}});
    let gemini = s
        .create(
            json!({"prompt": "fix it", "config": {"environment_id": "gemini", "mcp_servers": mcp}}),
        )
        .await;
    s.wait_state(&gemini, "SUCCEEDED").await;
    assert_eq!(
        argv(&s, &gemini, "gemini-1"),
        [
            "--skip-trust",
            "--output-format",
            "stream-json",
            "--approval-mode=yolo",
            "--model=gemini-pro",
            &format!(
                "--prompt={}\n\nfix it",
                runledger::exec::presets::REPORT_PROMPT
            ),
        ]
    );
    // Gemini's settings live in the run's home, never in the workspace.
    assert!(!workspace(&s, &gemini).join(".gemini").exists());
    let settings: Value =
        serde_json::from_str(&recorded(&s, &gemini, "gemini-1.settings")).expect("json");
    assert_eq!(settings["mcpServers"]["fs"]["args"], json!(["srv"]));
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
}

#[tokio::test]
async fn a_skill_only_preset_run_names_its_skill_as_the_prompt() {
    let f = Fixture::new();
    let s = preset_server(&f).await;
    let skill = s
        .create(json!({"skill": "acme/tools:deploy", "config": {"environment_id": "codex"}}))
        .await;
    s.wait_state(&skill, "SUCCEEDED").await;
    let last = argv(&s, &skill, "codex-1").pop().unwrap_or_default();
    assert!(
        last.ends_with("\n\nRun the skill acme/tools:deploy."),
        "{last}"
    );
}

#[tokio::test]
async fn a_preset_resume_without_a_session_fits_the_largest_task_and_follow_up_in_one_argument() {
    let f = Fixture::new();
    let bin = f.path("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    // A CLI that never reports a session: the follow-up starts a new session with the task.
    script(
        &bin.join("gemini"),
        r#"for a; do last="$a"; done; printf '%s' "$last" > "prompt-$RUNLEDGER_EXECUTION"; exit 0"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"gemini\"\nharness = \"gemini\"\n{}",
        path_to(&bin)
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    // The largest prompt and follow-up the API takes (64 KiB each): together more than one
    // argument may hold.
    let task = "t".repeat(64 * 1024);
    let message = format!("-{}", "f".repeat(64 * 1024 - 1));
    let id = s.create(json!({"prompt": task})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let (st, _) = s.followup(&id, json!({"message": message})).await;
    assert_eq!(st, 200);
    eventually(10, "the resumed execution", || {
        workspace(&s, &id).join("prompt-2").exists()
    })
    .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    let prompt = std::fs::read_to_string(workspace(&s, &id).join("prompt-2")).expect("prompt");
    assert!(prompt.len() < 128 * 1024, "{}", prompt.len());
    let lead = format!(
        "--prompt={}\n\ntttt",
        runledger::exec::presets::REPORT_PROMPT
    );
    assert!(prompt.starts_with(&lead), "{}", &prompt[..lead.len()]);
    assert!(prompt.ends_with(&format!("\n\nFollow-up: {message}")));
}
