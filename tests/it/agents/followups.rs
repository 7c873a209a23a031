//! Follow-ups: handed over when a waiting run starts, written to the agent's stdin, resuming a
//! finished or interrupted run.

use super::support::*;
use crate::common;
use common::{eventually, script, Server};
use serde_json::{json, Value};

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
        // `Provenance` (before each agent) is tests/it/provenance.rs's.
        // `Changes` (after each agent) is tests/it/changes.rs's.
        .filter(|k| {
            *k != "FollowupsDelivered"
                && *k != "UsageRecorded"
                && *k != "Provenance"
                && *k != "Changes"
        })
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
    // The second is sent once the first was taken: the agent starts after its workspace's
    // base is taken (tests/it/changes.rs), and both would otherwise wait for its start.
    for name in ["first", "second"] {
        let message = format!("{name}.{}", "x".repeat(60 * 1024));
        let (status, body) = s.followup(&id, json!({ "message": message })).await;
        assert_eq!(status, 200, "{body}");
        if name == "first" {
            s.wait_events(&id, "FollowupsDelivered", 1).await;
        }
    }
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
        .filter(|kind| kind != "UsageRecorded" && kind != "Provenance" && kind != "Changes")
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
        r#"[ "$1" = "--version" ] && { echo "codex-cli 0.0.0-fake"; exit 0; }
printf '%s\0' "$@" > "argv-$RUNLEDGER_EXECUTION"
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
        .filter(|e| {
            e["type"] != "UsageRecorded" && e["type"] != "Provenance" && e["type"] != "Changes"
        })
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
