//! The command harness with real child processes: environment variables, MCP config, stdin
//! follow-ups, exit status, setup, cancellation of whole process trees, time limits, restart
//! recovery of orphans, and the presets driven through fake CLIs on PATH.

use crate::common;

use std::path::PathBuf;

use common::{eventually, processes_of, running, script, Server};
use serde_json::{json, Value};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: common::agent_visible_dir(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn agent(&self, name: &str, body: &str) -> String {
        let path = self.path(name);
        script(&path, body);
        path.display().to_string()
    }

    fn config(&self, environments: &str) -> String {
        format!("[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{environments}\n",)
    }
}

/// An environment's `env` line that puts `bin` (fake CLIs) first on its agents' PATH.
fn path_to(bin: &std::path::Path) -> String {
    format!(
        "env = {{ PATH = \"{}:/usr/local/bin:/usr/bin:/bin\" }}\n",
        bin.display()
    )
}

/// The host pids of `sleep 4242421`, which the tree test's sandboxed agent starts without its
/// markers.
fn escaped_sleeps() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            running(*pid)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c == b"sleep\x004242421\x00")
        })
        .collect()
}

/// Kills what `escaped_sleeps` finds if the test fails before its tree is stopped, so a
/// failure leaves no process behind.
struct KillEscaped;

impl Drop for KillEscaped {
    fn drop(&mut self) {
        for pid in escaped_sleeps() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The run's workspace, where its agent leaves what the test looks at.
fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

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

/// A server whose one-slot `chat` environment runs an agent that echoes each stdin line as
/// `got: <line>` and exits at a line containing "done".
async fn chat_server(f: &Fixture) -> Server {
    let agent = f.agent(
        "chat.sh",
        r#"echo "execution=$RUNLEDGER_EXECUTION followup=$RUNLEDGER_FOLLOWUP prompt=$1"
while read -r line; do
  echo "got: $line"
  case "$line" in *done*) exit 0;; esac
done"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"chat\"\nharness = \"command\"\ncommand = [\"{agent}\", \"{{prompt}}\"]\nmax_concurrent = 1\n"
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    s
}

#[tokio::test]
async fn a_followup_sent_while_a_run_waits_for_its_slot_is_handed_over_when_it_starts() {
    let f = Fixture::new();
    let s = chat_server(&f).await;
    let first = s.create(json!({"prompt": "talk"})).await;
    s.wait_state(&first, "INPROGRESS").await;
    // A second run waits for the slot; its follow-up is handed over when it starts.
    let second = s.create(json!({"prompt": "later"})).await;
    s.followup(&second, json!({"message": "queued hello"}))
        .await;
    s.followup(&first, json!({"message": "done now"})).await;
    s.wait_state(&first, "SUCCEEDED").await;

    s.wait_state(&second, "INPROGRESS").await;
    s.followup(&second, json!({"message": "done"})).await;
    s.wait_state(&second, "SUCCEEDED").await;
    let text = s.transcript_text(&second).await;
    assert!(
        text.contains(r#"got: {"type":"followup","message":"queued hello","mode":"normal"}"#),
        "{text}"
    );
}

#[tokio::test]
async fn followups_reach_stdin_and_a_finished_run_resumes_as_a_new_execution() {
    let f = Fixture::new();
    let s = chat_server(&f).await;
    let first = s.create(json!({"prompt": "talk"})).await;
    s.wait_state(&first, "INPROGRESS").await;
    let (st, _) = s
        .followup(&first, json!({"message": "hello", "mode": "plan"}))
        .await;
    assert_eq!(st, 200);
    s.followup(&first, json!({"message": "done now"})).await;
    s.wait_state(&first, "SUCCEEDED").await;
    let text = s.transcript_text(&first).await;
    assert!(
        text.contains(r#"got: {"type":"followup","message":"hello","mode":"plan"}"#),
        "{text}"
    );

    // Resume the finished first run.
    let (st, body) = s.followup(&first, json!({"message": "again"})).await;
    assert_eq!(st, 200, "{body}");
    s.wait_run(&first, "resumed", |r| r["state"] == "INPROGRESS")
        .await;
    s.followup(&first, json!({"message": "done"})).await;
    s.wait_state(&first, "SUCCEEDED").await;
    let text = s.transcript_text(&first).await;
    // A command agent's argv is the run's as before: the follow-up is in RUNLEDGER_FOLLOWUP.
    assert!(
        text.contains("execution=2 followup=again prompt=talk\n"),
        "{text}"
    );
    assert!(!text.contains("Follow-up: again"), "{text}");
    // `UsageRecorded` (before each end, where the host measures CPU time) is tests/it/usage.rs's.
    let events = s.events(&first).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .filter(|k| *k != "FollowupsDelivered" && *k != "UsageRecorded")
        .collect();
    assert_eq!(
        kinds,
        [
            "Created",
            "Started",
            "FollowupReceived",
            "FollowupReceived",
            "Succeeded",
            "FollowupReceived",
            "Started",
            "FollowupReceived",
            "Succeeded"
        ]
    );
    // Each execution reported taking what it was sent (in one report or several) before its
    // end was recorded.
    let mut taken = [0, 0];
    for e in &events {
        match e["type"].as_str() {
            Some("FollowupsDelivered") => {
                let execution = e["data"]["execution"].as_u64().unwrap_or(0) as usize;
                taken[execution - 1] += e["data"]["count"].as_u64().unwrap_or(0);
            }
            Some("Succeeded") => {
                let execution = e["data"]["execution"].as_u64().unwrap_or(0) as usize;
                assert_eq!(taken[execution - 1], [2, 1][execution - 1], "{events:?}");
            }
            _ => {}
        }
    }
}

/// A follow-up the agent could not take (it never reads its stdin, and the pipe is full) is
/// not lost: when the execution ends, the run is queued again and the next execution gets it.
#[tokio::test]
async fn a_followup_the_agent_could_not_take_resumes_the_run_when_it_ends() {
    let f = Fixture::new();
    let agent = f.agent(
        "deaf.sh",
        r#"echo "execution=$RUNLEDGER_EXECUTION followup=${RUNLEDGER_FOLLOWUP%%.*} bytes=${#RUNLEDGER_FOLLOWUP}"
if [ "$RUNLEDGER_EXECUTION" = 1 ]; then
  while [ ! -e go ]; do sleep 0.05; done
fi"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"deaf\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n"
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "work"})).await;
    s.wait_state(&id, "INPROGRESS").await;
    // The first fills most of the pipe (64 KiB); the second cannot be written.
    for name in ["first", "second"] {
        let message = format!("{name}.{}", "x".repeat(60 * 1024));
        let (status, body) = s.followup(&id, json!({ "message": message })).await;
        assert_eq!(status, 200, "{body}");
    }
    s.wait_events(&id, "FollowupsDelivered", 1).await;
    // The harness gives up writing after 5 s; until then the agent keeps running.
    // (With a margin for a loaded machine, where the write starts late.)
    tokio::time::sleep(std::time::Duration::from_secs(9)).await;
    std::fs::write(workspace(&s, &id).join("go"), "").expect("go");
    s.wait_events(&id, "Succeeded", 2).await;
    let run = s.run(&id).await;
    assert_eq!(run["state"], "SUCCEEDED");
    let text = s.transcript_text(&id).await;
    assert!(
        text.contains("1 follow-up(s) did not reach the"),
        "the transcript says what happened: {text}"
    );
    assert!(
        text.contains(&format!(
            "execution=2 followup=second bytes={}",
            7 + 60 * 1024
        )),
        "{text}"
    );
    let kinds: Vec<String> = s
        .events(&id)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .filter(|kind| kind != "UsageRecorded")
        .collect();
    assert_eq!(
        kinds,
        [
            "Created",
            "Started",
            "FollowupReceived",
            "FollowupsDelivered",
            "FollowupReceived",
            "Succeeded",
            "Requeued",
            "Started",
            "Succeeded"
        ]
    );
}

/// A follow-up sent during a preset's turn waits for the turn to end; if the server dies
/// first, the next start fails the lost execution and queues the run again for the follow-up,
/// which resumes the CLI's session.
#[tokio::test]
async fn a_followup_sent_before_a_crash_resumes_the_session_after_the_restart() {
    let f = Fixture::new();
    let bin = f.path("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    script(
        &bin.join("codex"),
        r#"printf '%s\0' "$@" > "argv-$RUNLEDGER_EXECUTION"
echo '{"type":"thread.started","thread_id":"thread-crash-1"}'
[ "$RUNLEDGER_EXECUTION" = 1 ] && exec sleep 1000
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#,
    );
    // Agents get the environment's PATH, never the server's.
    let config = f.config(&format!(
        "[[environments]]\nid = \"codex\"\nharness = \"codex\"\n{}",
        path_to(&bin)
    ));
    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    let key = s.key.clone();
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "work", "config": {"environment_id": "codex"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    let ws = workspace(&s, &id);
    eventually(10, "the CLI to report its session", || {
        f.path("data")
            .join("agent-files")
            .join(&id)
            .join("session")
            .exists()
    })
    .await;
    let (status, body) = s
        .followup(&id, json!({"message": "--before the crash"}))
        .await;
    assert_eq!(status, 200, "{body}");
    s.kill();

    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    s.key = key;
    s.wait_ready().await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(run["status_message"], Value::Null, "{run}");
    let argv = std::fs::read_to_string(ws.join("argv-2")).expect("a second execution");
    let argv: Vec<&str> = argv.split_terminator('\0').collect();
    assert_eq!(
        argv[argv.len() - 4..],
        ["resume", "--", "thread-crash-1", "--before the crash"],
        "{argv:?}"
    );
    let events: Vec<Value> = s
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["type"] != "UsageRecorded")
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "Created",
            "Started",
            "FollowupReceived",
            "Failed",
            "Requeued",
            "Started",
            "Succeeded"
        ]
    );
    assert_eq!(
        events[3]["data"]["status_message"]["error_code"],
        "internal_error"
    );
}

#[tokio::test]
async fn cancel_and_time_limits_stop_the_whole_process_tree() {
    let f = Fixture::new();
    // Children in the group, out of it (setsid) and one level down; the agent ignores SIGTERM.
    let agent = f.agent(
        "tree.sh",
        r#"sleep 1000 & echo $! > background
setsid sleep 1000 & echo $! > session
bash -c 'sleep 1000 & echo $! > grandchild; wait' &
# Sandboxed only: one that leaves the group and scrubs its environment (so its markers).
if [ "$ESCAPE" = yes ]; then setsid env -i sleep 4242421 & fi
trap '' TERM
echo $$ > agent
wait"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"tree\"\nharness = \"command\"\ncommand = [\"{agent}\"]\nenv = {{ ESCAPE = \"yes\" }}\n\n\
         [[environments]]\nid = \"unconfined\"\nharness = \"command\"\ncommand = [\"{agent}\"]\nsandbox = \"none\"\n\n\
         [[environments]]\nid = \"short\"\nharness = \"command\"\ncommand = [\"{agent}\"]\nmax_runtime_secs = 1\n"
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;

    for environment in ["tree", "unconfined"] {
        let id = s
            .create(json!({"prompt": "x", "config": {"environment_id": environment}}))
            .await;
        s.wait_state(&id, "INPROGRESS").await;
        let ws = workspace(&s, &id);
        eventually(10, "the agent wrote its pids", || {
            ["agent", "background", "session", "grandchild"]
                .iter()
                .all(|n| ws.join(n).exists())
        })
        .await;
        // The agent, its three sleeps and the bash between (and, sandboxed, bwrap's two).
        let tree = processes_of(&id);
        assert!(tree.len() >= 5, "{environment}: {tree:?}");
        let escaped = if environment == "tree" {
            let mut found = Vec::new();
            eventually(10, "the escaped process to start", || {
                found = escaped_sleeps();
                !found.is_empty()
            })
            .await;
            found
        } else {
            Vec::new()
        };
        let _cleanup = KillEscaped;
        let (st, _) = s
            .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
            .await;
        assert_eq!(st, 200);
        assert_eq!(s.run(&id).await["state"], "CANCELLED");
        // The agent ignores SIGTERM, so this takes the 2 s grace and then SIGKILL.
        eventually(10, "the whole tree to be gone", || {
            tree.iter().all(|p| !running(*p))
        })
        .await;
        // Sandboxed, the process without markers goes with its PID namespace.
        eventually(10, "the escaped process to be gone", || {
            escaped.iter().all(|p| !running(*p))
        })
        .await;
    }

    let id = s
        .create(json!({"prompt": "x", "config": {"environment_id": "short"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    let ws = workspace(&s, &id);
    eventually(10, "the agent wrote its pids", || {
        ws.join("grandchild").exists()
    })
    .await;
    let tree = processes_of(&id);
    let failed = s.wait_state(&id, "FAILED").await;
    assert!(
        failed["status_message"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_runtime_secs")),
        "{failed}"
    );
    eventually(10, "the timed-out tree to be gone", || {
        tree.iter().all(|p| !running(*p))
    })
    .await;
}

#[tokio::test]
async fn after_a_crash_orphaned_agents_are_killed_and_their_runs_failed() {
    let f = Fixture::new();
    let agent = f.agent("forever.sh", "echo $$ > started; sleep 1000 & wait");
    let config = f.config(&format!(
        "[[environments]]\nid = \"long\"\nharness = \"command\"\ncommand = [\"{agent}\"]\nmax_concurrent = 2\n"
    ));
    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    let key = s.key.clone();
    s.wait_ready().await;
    let in_progress: Vec<String> = vec![
        s.create(json!({"prompt": "a"})).await,
        s.create(json!({"prompt": "b"})).await,
    ];
    let queued: Vec<String> = vec![
        s.create(json!({"prompt": "c"})).await,
        s.create(json!({"prompt": "d"})).await,
    ];
    for id in &in_progress {
        s.wait_state(id, "INPROGRESS").await;
        let started = workspace(&s, id).join("started");
        eventually(10, "the agent to start", || started.exists()).await;
    }
    for id in &queued {
        assert_eq!(s.run(id).await["state"], "QUEUED");
    }
    let orphans: Vec<i32> = in_progress.iter().flat_map(|id| processes_of(id)).collect();
    assert!(orphans.len() >= 4, "{orphans:?}");
    s.kill();
    assert!(
        orphans.iter().all(|p| running(*p)),
        "the agents outlive the killed server"
    );

    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    s.key = key;
    s.wait_ready().await;
    eventually(10, "the orphans to be killed", || {
        orphans.iter().all(|p| !running(*p))
    })
    .await;
    for id in &in_progress {
        let run = s.wait_state(id, "FAILED").await;
        assert_eq!(run["status_message"]["error_code"], "internal_error");
        assert_eq!(run["status_message"]["retryable"], true);
    }
    // The runs that were waiting start, in their own new processes.
    for id in &queued {
        s.wait_state(id, "INPROGRESS").await;
        let started = workspace(&s, id).join("started");
        eventually(10, "the queued run's agent to start", || started.exists()).await;
        assert!(!processes_of(id).is_empty());
    }
}

#[tokio::test]
async fn sigterm_stops_agents_records_their_runs_and_exits_cleanly() {
    let f = Fixture::new();
    // An agent with children in and out of its process group, which ignores SIGTERM (and so do
    // the children it starts after the trap).
    let agent = f.agent(
        "stubborn.sh",
        r#"sleep 1000 & echo $! > background
setsid sleep 1000 & echo $! > session
trap '' TERM
echo $$ > agent
while true; do sleep 0.1; done"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"one\"\nharness = \"command\"\ncommand = [\"{agent}\"]\nmax_concurrent = 1\n"
    ));
    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    let key = s.key.clone();
    s.wait_ready().await;
    let running_id = s.create(json!({"prompt": "long job"})).await;
    s.wait_state(&running_id, "INPROGRESS").await;
    let dir = workspace(&s, &running_id);
    eventually(10, "the agent wrote its pids", || {
        ["agent", "background", "session"]
            .iter()
            .all(|n| dir.join(n).exists())
    })
    .await;
    let tree = processes_of(&running_id);
    assert!(tree.len() >= 3, "{tree:?}");
    let waiting_id = s.create(json!({"prompt": "next job"})).await;
    assert_eq!(s.run(&waiting_id).await["state"], "QUEUED");

    // The agent ignores SIGTERM, so the server waits out the 2 s grace before SIGKILL. Exiting
    // well within 15 s shows that nothing else (keep-alive connections, say) holds it up.
    let started = std::time::Instant::now();
    let status = s.stop_with(nix::sys::signal::Signal::SIGTERM, 15).await;
    assert_eq!(
        status.code(),
        Some(0),
        "{status}; stderr:\n{}",
        s.log_text()
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "the agent got no grace: {:?}",
        started.elapsed()
    );
    eventually(5, "the agent's tree to be gone", || {
        tree.iter().all(|p| !running(*p))
    })
    .await;

    // Offline, before anything restarts: the interruption is in the log, the waiting run is
    // still only queued, and the index agrees with the log.
    let data = s.data_dir.display().to_string();
    let types = |id: &str| -> Vec<String> {
        let (ok, out, err) = common::cli(&["--data-dir", &data, "events", id, "--json"], &[]);
        assert!(ok, "{err}");
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|e| e["type"].as_str().unwrap_or("").to_string())
            .filter(|kind| kind != "UsageRecorded")
            .collect()
    };
    assert_eq!(types(&running_id), ["Created", "Started", "Failed"]);
    assert_eq!(types(&waiting_id), ["Created"]);
    let (ok, out, err) = common::cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(
        ok && out.is_empty() && err.contains("0 differences"),
        "{out}{err}"
    );

    let mut s = Server::start_with(f.dir.path(), &config, &[]);
    s.key = key;
    s.wait_ready().await;
    let interrupted = s.run(&running_id).await;
    assert_eq!(interrupted["state"], "FAILED", "{interrupted}");
    let status = &interrupted["status_message"];
    assert_eq!(status["error_code"], "internal_error", "{interrupted}");
    assert_eq!(status["retryable"], true, "{interrupted}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("shut down")),
        "{interrupted}"
    );
    // Recovery found nothing left in progress to fail a second time.
    assert_eq!(
        types_online(&s, &running_id).await,
        ["Created", "Started", "Failed"]
    );
    // The run that was waiting starts after the restart.
    s.wait_state(&waiting_id, "INPROGRESS").await;
    let text = s.transcript_text(&running_id).await;
    assert!(text.lines().any(|l| l == "stopped"), "{text}");

    // SIGINT shuts down the same way.
    let dir = workspace(&s, &waiting_id);
    eventually(10, "the second agent to start", || {
        dir.join("agent").exists()
    })
    .await;
    let status = s.stop_with(nix::sys::signal::Signal::SIGINT, 15).await;
    assert_eq!(
        status.code(),
        Some(0),
        "{status}; stderr:\n{}",
        s.log_text()
    );
    assert_eq!(types(&waiting_id), ["Created", "Started", "Failed"]);
    let (ok, out, err) = common::cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(
        ok && out.is_empty() && err.contains("0 differences"),
        "{out}{err}"
    );
}

/// The run's event types, without `UsageRecorded` (host-dependent; tests/it/usage.rs's).
async fn types_online(s: &Server, id: &str) -> Vec<String> {
    s.events(id)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .filter(|kind| kind != "UsageRecorded")
        .collect()
}

/// A server whose `claude`, `codex` and `gemini` environments run fake CLIs from `f`'s `bin`:
/// each records what it got in `.record/<cli>-<execution>.*` of its workspace, and reports a
/// session id the way the real one does.
async fn preset_server(f: &Fixture) -> Server {
    let bin = f.path("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    for (cli, session) in [
        (
            "claude",
            r#"{"type":"system","subtype":"init","session_id":"sess-claude-1"}"#,
        ),
        (
            "codex",
            r#"{"type":"thread.started","thread_id":"thread-codex-1"}"#,
        ),
        ("gemini", r#"{"type":"init","session_id":"sess-gemini-1"}"#),
    ] {
        script(
            &bin.join(cli),
            &format!(
                r#"mkdir -p .record; out=.record/{cli}-$RUNLEDGER_EXECUTION; printf '%s\0' "$@" > $out.argv; echo "$RUNLEDGER_RUN_ID" > $out.run
[ -n "$GEMINI_CLI_HOME" ] && cp "$GEMINI_CLI_HOME/.gemini/settings.json" $out.settings
[ -n "$CODEX_HOME" ] && cp "$CODEX_HOME/config.toml" $out.config
echo "IS_SANDBOX=$IS_SANDBOX" > $out.env
{input}
exit 0"#,
                input = if cli == "claude" {
                    // Like Claude Code with streaming input: a user message per line, each
                    // echoed as it is taken, a result per turn, and the end once stdin ends.
                    format!(
                        r#"IFS= read -r line; printf '%s\n' "$line" > $out.stdin
echo '{session}'
echo '{{"type":"user","isReplay":true,"message":{{"role":"user","content":"taken"}}}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"sess-claude-1"}}'
cat >> $out.stdin"#
                    )
                } else {
                    // Like the real CLIs, read a piped stdin to its end before working.
                    format!("cat > $out.stdin\necho '{session}'")
                },
            ),
        );
    }
    let path = path_to(&bin);
    let config = f.config(&format!(
        "[[environments]]\nid = \"claude\"\nharness = \"claude\"\nmodel_id = \"sonnet\"\n{path}\n\
         [[environments]]\nid = \"codex\"\nharness = \"codex\"\nmodel_base_url = \"http://127.0.0.1:9/v1\"\n{path}\n\
         [[environments]]\nid = \"gemini\"\nharness = \"gemini\"\nmodel_id = \"gemini-pro\"\n{path}",
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    s
}

/// The file `file` (`claude-1.stdin`, say) a fake CLI recorded in run `id`'s workspace.
fn recorded(s: &Server, id: &str, file: &str) -> String {
    std::fs::read_to_string(workspace(s, id).join(".record").join(file))
        .unwrap_or_else(|e| panic!("{file} recorded: {e}"))
}

/// The argv the fake CLI of `cli-<execution>` got for run `id`.
fn argv(s: &Server, id: &str, cli: &str) -> Vec<String> {
    recorded(s, id, &format!("{cli}.argv"))
        .split_terminator('\0')
        .map(str::to_string)
        .collect()
}

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
