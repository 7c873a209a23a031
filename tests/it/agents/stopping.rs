//! Stopping agents: cancel and time limits end whole process trees; a crash leaves no orphan;
//! SIGTERM records every run.

use super::support::*;
use crate::common;
use common::{eventually, processes_of, running, Server};
use serde_json::{json, Value};

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
            // `Provenance` (before each agent) is tests/it/provenance.rs's.
            .filter(|kind| kind != "UsageRecorded" && kind != "Provenance")
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
