//! A run's life through the API: queued, in progress, succeeded with a transcript; cancel; the capacity queue; follow-ups to queued, running and finished runs.

use super::support::*;
use crate::common;
use common::Server;
use serde_json::{json, Value};

#[tokio::test]
async fn a_run_goes_queued_inprogress_succeeded_with_a_transcript() {
    let s = Server::start();
    s.wait_ready().await;
    let (status, created) = s
        .post(
            &s.key,
            "/agent/run",
            json!({"prompt": "Fix <b>the</b> bug\nin auth.go"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["state"], "QUEUED");
    assert_eq!(created["task_id"], created["run_id"]);
    assert_eq!(created["at_capacity"], false);
    let id = created["run_id"].as_str().expect("id").to_string();

    let run = s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(run["title"], "Fix <b>the</b> bug");
    assert_eq!(run["agent_config"]["environment_id"], "fast");
    assert_eq!(run["agent_config"]["model_id"], "fast-model");
    assert_eq!(run["source"], "API");
    assert_eq!(run["creator"]["type"], "user");
    assert!(
        run["started_at"].is_string() && run["run_time"].is_string(),
        "{run}"
    );
    let link = run["session_link"]
        .as_str()
        .expect("session_link when SUCCEEDED")
        .to_string();

    let kinds: Vec<Value> = s
        .events(&id)
        .await
        .iter()
        .map(|e| e["type"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("Created"), json!("Started"), json!("Succeeded")]
    );

    // A finished run holds no actor.
    assert!(s.metrics().await.contains("runledger_durable_syncs_total"));
    s.wait_live_actors(0).await;

    let (status, transcript) = s.get(&s.key, &format!("/agent/runs/{id}/transcript")).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = transcript["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("Fix <b>the</b> bug")),
        "{texts:?}"
    );
    assert_eq!(texts.last(), Some(&"done"));

    // The capability link works without a key and escapes the transcript; without the token
    // the page does not exist.
    let page = s.client.get(&link).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("Fix &lt;b&gt;the&lt;/b&gt; bug") && !html.contains("<b>the</b>"));
    let no_token = s
        .client
        .get(s.url(&format!("/sessions/{id}")))
        .send()
        .await
        .expect("page");
    assert_eq!(no_token.status(), 404);
    let bad_token = s
        .client
        .get(s.url(&format!("/sessions/{id}?token=00")))
        .send()
        .await
        .expect("page");
    assert_eq!(bad_token.status(), 404);
}

#[tokio::test]
async fn cancel_is_durable_before_the_answer_and_refused_on_finished_runs() {
    let s = Server::start();
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "long job", "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    let (status, body) = s
        .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!(id));
    // No waiting: the answer came after the event was durable and indexed.
    assert_eq!(s.run(&id).await["state"], "CANCELLED");

    let (status, body) = s
        .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_problem(status, &body, 400, "invalid_request");
    let (status, body) = s
        .post(
            &s.key,
            "/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel",
            json!({}),
        )
        .await;
    assert_problem(status, &body, 404, "resource_not_found");
    let (status, body) = s.get(&s.key, "/agent/runs/not-a-run").await;
    assert_problem(status, &body, 404, "resource_not_found");
}

#[tokio::test]
async fn capacity_is_fifo_and_waiting_runs_hold_no_actor() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;
    let second = create_single(&s, "second").await;
    assert_eq!(second["at_capacity"], true, "{second}");
    let second = run_id(&second);
    let third = run_id(&create_single(&s, "third").await);

    // Waiting runs hold no actor; only the run in progress does.
    s.wait_live_actors(1).await;

    // Freeing the slot starts the oldest waiting run, not the newest.
    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&second, "INPROGRESS").await;
    assert_eq!(s.run(&third).await["state"], "QUEUED");
}

#[tokio::test]
async fn a_followup_to_a_queued_run_is_kept_for_its_agent() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;
    let second = run_id(&create_single(&s, "second").await);

    let (status, body) = s
        .followup(&second, json!({"message": "queued note", "mode": "plan"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "QUEUED");

    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&second, "INPROGRESS").await;
    // The agent's introduction, written as it starts, names the follow-ups that waited for it.
    let names_the_note = |lines: &[Value]| {
        lines.iter().any(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.contains("queued follow-up (plan): queued note"))
        })
    };
    let mut second_lines = transcript_entries(&s, &second).await;
    for _ in 0..100 {
        if names_the_note(&second_lines) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        second_lines = transcript_entries(&s, &second).await;
    }
    assert!(names_the_note(&second_lines), "{second_lines:?}");
}

#[tokio::test]
async fn a_followup_reaches_a_running_agent_and_resumes_a_finished_run_as_a_new_execution() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    s.wait_state(&first, "INPROGRESS").await;

    // In progress: delivered to the agent.
    let (status, _) = s.followup(&first, json!({"message": "live note"})).await;
    assert_eq!(status, 200);
    // The agent reports taking it (so the cancel below drops nothing it was owed).
    s.wait_events(&first, "FollowupsDelivered", 1).await;
    s.post(&s.key, &format!("/agent/runs/{first}/cancel"), json!({}))
        .await;
    s.wait_state(&first, "CANCELLED").await;

    // Finished: the run resumes as a new execution.
    let (status, body) = s.followup(&first, json!({"message": "try again"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "QUEUED");
    s.wait_state(&first, "INPROGRESS").await;

    let kinds: Vec<(String, Value)> = s
        .events(&first)
        .await
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["data"].clone(),
            )
        })
        .collect();
    let names: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "Created",
            "Started",
            "FollowupReceived",
            "FollowupsDelivered",
            "Cancelled",
            "FollowupReceived",
            "Started"
        ]
    );
    assert_eq!(kinds[6].1["execution"], 2);

    let first_lines = transcript_entries(&s, &first).await;
    assert!(first_lines.iter().any(|e| e["stream"] == "followup"
        && e["text"].as_str().is_some_and(|t| t.contains("live note"))));
    assert!(first_lines.iter().any(
        |e| e["execution"] == 2 && e["text"].as_str().is_some_and(|t| t.contains("try again"))
    ));
}

#[tokio::test]
async fn an_empty_followup_is_refused() {
    let s = Server::start();
    s.wait_ready().await;
    let first = run_id(&create_single(&s, "first").await);
    let (status, body) = s.followup(&first, json!({"message": ""})).await;
    assert_problem(status, &body, 400, "invalid_request");
}
