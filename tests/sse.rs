//! The SSE form of the events endpoint: history then live events, resumable with
//! `Last-Event-ID`, and following a finished run that a follow-up resumes.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{json, Value};

/// An open event stream, parsed into (id, event, data) messages.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(server: &Server, id: &str, last_event_id: Option<u64>) -> Stream {
        let mut req = server
            .client
            .get(server.api(&format!("/agent/runs/{id}/events")))
            .bearer_auth(&server.key)
            .header("accept", "text/event-stream");
        if let Some(last) = last_event_id {
            req = req.header("last-event-id", last.to_string());
        }
        let response = req.send().await.expect("stream");
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().ok(),
            Some("text/event-stream")
        );
        Stream {
            response,
            buffer: String::new(),
        }
    }

    /// The next message with an id, within 20 s.
    async fn next(&mut self) -> (u64, String, Value) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let message: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut event = String::new();
                let mut data = Value::Null;
                for line in message.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).expect("data is JSON");
                    }
                }
                if let Some(id) = id {
                    return (id, event, data);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .expect("an event within 20 s")
                .expect("stream read")
                .expect("stream still open");
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }
}

#[tokio::test]
async fn a_run_is_followed_live_and_resumed_where_the_client_left() {
    let server = Server::start();
    server.wait_ready().await;
    let id = server.create(json!({"prompt": "follow me"})).await;
    let mut stream = Stream::open(&server, &id, None).await;
    let mut seen = Vec::new();
    loop {
        let (seq, kind, data) = stream.next().await;
        assert_eq!(
            seq,
            seen.len() as u64,
            "ids are the sequence numbers, in order"
        );
        assert_eq!(data["type"], kind.as_str());
        assert_eq!(data["run_id"], id.as_str());
        seen.push(kind.clone());
        if kind == "Succeeded" {
            break;
        }
    }
    assert_eq!(seen, ["Created", "Started", "Succeeded"]);
    // The stream stays open on a finished run: a follow-up resumes it, live.
    let (status, body) = server.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{body}");
    let (seq, kind, data) = stream.next().await;
    assert_eq!((seq, kind.as_str()), (3, "FollowupReceived"));
    assert_eq!(data["data"]["message"], "again");
    server.wait_state(&id, "SUCCEEDED").await;
    drop(stream);

    // Reconnecting with Last-Event-ID resumes after it, with nothing repeated.
    let mut resumed = Stream::open(&server, &id, Some(3)).await;
    assert_eq!(resumed.next().await.0, 4);
    // The JSON form is unchanged.
    assert_eq!(server.events(&id).await.len() as u64, 6);

    // Unknown runs and bad ids are errors, not empty streams.
    let r = server
        .client
        .get(server.api("/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/events"))
        .bearer_auth(&server.key)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 404);
    let r = server
        .client
        .get(server.api(&format!("/agent/runs/{id}/events")))
        .bearer_auth(&server.key)
        .header("accept", "text/event-stream")
        .header("last-event-id", "soon")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn a_shutdown_ends_live_streams_after_the_interruption() {
    let mut server = Server::start();
    server.wait_ready().await;
    let id = server
        .create(json!({"prompt": "long", "config": {"environment_id": "slow"}}))
        .await;
    server.wait_state(&id, "INPROGRESS").await;
    let mut stream = Stream::open(&server, &id, None).await;
    assert_eq!(stream.next().await.1, "Created");
    assert_eq!(stream.next().await.1, "Started");

    let started = Instant::now();
    server.signal(nix::sys::signal::Signal::SIGTERM);
    // The follower hears how the run ended, then the stream ends ...
    let (_, event, data) = stream.next().await;
    assert_eq!(event, "Failed", "{data}");
    assert_eq!(
        data["data"]["status_message"]["error_code"], "internal_error",
        "{data}"
    );
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.response.chunk())
            .await
            .expect("the stream ends");
        match chunk {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    // ... without holding the server's exit for the 10 s that requests in flight may take.
    let status = server.wait_exit(20).await;
    assert_eq!(status.code(), Some(0), "{}", server.log_text());
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        started.elapsed()
    );
}
