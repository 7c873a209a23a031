//! The SSE forms of the events and transcript endpoints: history then live messages,
//! resumable with `Last-Event-ID`; the end of a terminal run's stream, or following a finished
//! run that a follow-up resumes (`keep_open=true`); a slow follower never holding up the agent.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{json, Value};

/// An open event stream, parsed into (id, event, data) messages.
struct Stream {
    response: reqwest::Response,
    /// Bytes received and not yet parsed: a chunk may end inside a character.
    buffer: Vec<u8>,
}

/// One SSE message: its id (if any), event name and data.
type Message = (Option<u64>, String, Value);

impl Stream {
    async fn open(server: &Server, id: &str, last_event_id: Option<u64>) -> Stream {
        Stream::at(
            server,
            &format!("/agent/runs/{id}/events?keep_open=true"),
            last_event_id,
        )
        .await
    }

    async fn at(server: &Server, path: &str, last_event_id: Option<u64>) -> Stream {
        let mut req = server
            .client
            .get(server.api(path))
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
            buffer: Vec::new(),
        }
    }

    /// The next message with an id, within 20 s.
    async fn next(&mut self) -> (u64, String, Value) {
        loop {
            match self.message(20).await.expect("stream still open") {
                (Some(id), event, data) => return (id, event, data),
                (None, _, _) => continue,
            }
        }
    }

    /// The next message with an event name (comments and `retry` are skipped), or `None` once
    /// the response has ended; within `secs`.
    async fn message(&mut self, secs: u64) -> Option<Message> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let message: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let message = String::from_utf8(message).expect("a message is UTF-8");
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
                if !event.is_empty() {
                    return Some((id, event, data));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("a message within {secs} s"))
                .expect("stream read")?;
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// Every message until the response ends, within `secs`.
    async fn rest(&mut self, secs: u64) -> Vec<Message> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut all = Vec::new();
        loop {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_secs()
                .max(1);
            match self.message(left).await {
                Some(m) => all.push(m),
                None => return all,
            }
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

#[tokio::test]
async fn a_terminal_runs_event_stream_ends_with_its_state_unless_kept_open() {
    let server = Server::start();
    server.wait_ready().await;
    let id = server.create(json!({"prompt": "finish"})).await;
    server.wait_state(&id, "SUCCEEDED").await;
    let mut stream = Stream::at(&server, &format!("/agent/runs/{id}/events"), None).await;
    let messages = stream.rest(20).await;
    let kinds: Vec<&str> = messages.iter().map(|m| m.1.as_str()).collect();
    assert_eq!(kinds, ["Created", "Started", "Succeeded", "end"]);
    assert_eq!(
        messages[3],
        (None, "end".into(), json!({"state": "SUCCEEDED"}))
    );

    // A live run's stream ends at the terminal state too (a cancel here).
    let id = server
        .create(json!({"prompt": "long", "config": {"environment_id": "slow"}}))
        .await;
    let mut stream = Stream::at(&server, &format!("/agent/runs/{id}/events"), None).await;
    assert_eq!(stream.next().await.1, "Created");
    let (status, body) = server
        .post(&server.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let last = stream.rest(20).await.pop();
    assert_eq!(
        last,
        Some((None, "end".into(), json!({"state": "CANCELLED"})))
    );

    // keep_open takes true or false only, whichever form is asked for.
    for accept in ["text/event-stream", "application/json"] {
        let r = server
            .client
            .get(server.api(&format!("/agent/runs/{id}/events?keep_open=yes")))
            .bearer_auth(&server.key)
            .header("accept", accept)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 400, "{accept}");
    }
}

/// A server whose `cmd` environment runs `body` as its agent, with the directory holding it.
fn command_server(body: &str) -> (tempfile::TempDir, Server) {
    let dir = common::agent_visible_dir();
    let agent = dir.path().join("agent.sh");
    common::script(&agent, body);
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    );
    let server = Server::start_in(dir.path(), &config);
    (dir, server)
}

/// The entries of a stream's messages, checking that each id is its entry's offset.
fn entries(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.1 == "entry")
        .map(|(id, _, data)| {
            assert_eq!(*id, data["offset"].as_u64(), "the id is the entry's offset");
            data.clone()
        })
        .collect()
}

#[tokio::test]
async fn a_transcript_is_followed_live_resumed_and_ends_once_drained() {
    let (_dir, server) = command_server(
        "for i in $(seq 1 40); do echo \"line $i\"; [ $((i % 10)) = 0 ] && echo \"err $i\" >&2; \
         sleep 0.05; done",
    );
    server.wait_ready().await;
    let id = server
        .create(json!({"prompt": "count", "config": {"environment_id": "cmd"}}))
        .await;
    let path = format!("/agent/runs/{id}/transcript");
    let mut stream = Stream::at(&server, &path, None).await;
    // The first line arrives while the agent is still running: live, not at the end.
    loop {
        let (_, event, data) = stream.message(20).await.expect("open");
        assert_eq!(event, "entry", "{data}");
        if data["text"] == "line 1" {
            assert_eq!(data["stream"], "stdout");
            break;
        }
    }
    assert_ne!(server.run(&id).await["state"], "SUCCEEDED");
    let messages = stream.rest(30).await;
    assert_eq!(
        messages.last(),
        Some(&(None, "end".into(), json!({"state": "SUCCEEDED"})))
    );
    let streamed = entries(&messages);
    let texts: Vec<&str> = streamed.iter().filter_map(|e| e["text"].as_str()).collect();
    assert!(
        texts.contains(&"line 40") && texts.contains(&"err 40"),
        "{texts:?}"
    );

    // From the start, the stream is exactly the JSON pages, then the end.
    let all = Stream::at(&server, &path, None).await.rest(20).await;
    let paged = server.transcript(&id).await;
    assert_eq!(entries(&all), paged);
    assert_eq!(all.last().map(|m| m.1.as_str()), Some("end"));

    // Last-Event-ID resumes after that entry; ?offset starts at one; Last-Event-ID wins.
    let tenth = paged[9]["offset"].as_u64().expect("offset");
    let resumed = Stream::at(&server, &path, Some(tenth)).await.rest(20).await;
    assert_eq!(entries(&resumed), paged[10..]);
    let from = Stream::at(&server, &format!("{path}?offset={tenth}"), None)
        .await
        .rest(20)
        .await;
    assert_eq!(entries(&from), paged[9..]);
    let both = Stream::at(&server, &format!("{path}?offset=0"), Some(tenth))
        .await
        .rest(20)
        .await;
    assert_eq!(entries(&both), paged[10..]);

    // Bad resumption points and unknown runs are errors, not empty streams.
    for (path, last, status) in [
        (path.clone(), Some("soon"), 400),
        (path.clone(), Some("-1"), 400),
        (format!("{path}?offset=x"), None, 400),
        (
            "/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/transcript".to_string(),
            None,
            404,
        ),
    ] {
        let mut req = server
            .client
            .get(server.api(&path))
            .bearer_auth(&server.key)
            .header("accept", "text/event-stream");
        if let Some(last) = last {
            req = req.header("last-event-id", last);
        }
        let r = req.send().await.expect("request");
        assert_eq!(r.status(), status, "{path} {last:?}");
    }
}

#[tokio::test]
async fn a_cancelled_runs_transcript_stream_ends_after_its_agent_is_stopped() {
    let (_dir, server) = command_server(
        "trap 'echo stopping; exit 0' TERM; echo started; while true; do sleep 0.1; done",
    );
    server.wait_ready().await;
    let id = server
        .create(json!({"prompt": "wait", "config": {"environment_id": "cmd"}}))
        .await;
    let mut stream = Stream::at(&server, &format!("/agent/runs/{id}/transcript"), None).await;
    loop {
        let (_, _, data) = stream.message(20).await.expect("open");
        if data["text"] == "started" {
            break;
        }
    }
    let (status, body) = server
        .post(&server.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let messages = stream.rest(30).await;
    assert_eq!(
        messages.last(),
        Some(&(None, "end".into(), json!({"state": "CANCELLED"})))
    );
    // What the agent printed as it was stopped came before the end.
    let texts: Vec<Value> = entries(&messages)
        .iter()
        .map(|e| e["text"].clone())
        .collect();
    assert!(texts.contains(&json!("stopping")), "{texts:?}");
}

/// The server's resident memory, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

#[tokio::test]
async fn a_follower_that_reads_nothing_holds_up_neither_the_agent_nor_memory() {
    // 24 MB of output: 200,000 lines of 100 characters (120 bytes), mixed widths.
    let (_dir, server) = command_server(
        "yes \"$(printf 'é%.0s' $(seq 1 20))$(printf 'x%.0s' $(seq 1 80))\" | head -n 200000",
    );
    server.wait_ready().await;
    let before = rss(server.pid());
    let id = server
        .create(json!({"prompt": "flood", "config": {"environment_id": "cmd"}}))
        .await;
    // Connected, then never read while the agent writes.
    let mut stalled = Stream::at(&server, &format!("/agent/runs/{id}/transcript"), None).await;
    // The agent finishes while the follower has read nothing (a loaded machine can take a while
    // to move 24 MB, hence the long wait).
    let deadline = Instant::now() + Duration::from_secs(180);
    while server.run(&id).await["state"] != "SUCCEEDED" {
        assert!(Instant::now() < deadline, "{}", server.run(&id).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let grown = rss(server.pid()).saturating_sub(before);
    assert!(
        grown < 12 << 20,
        "the server grew by {} MiB with a stalled follower of 24 MB of output",
        grown >> 20
    );
    // The follower then gets every line, and the end.
    let messages = stalled.rest(300).await;
    assert_eq!(
        messages.last(),
        Some(&(None, "end".into(), json!({"state": "SUCCEEDED"})))
    );
    let lines = entries(&messages)
        .iter()
        .filter(|e| e["stream"] == "stdout")
        .map(|e| e["text"].as_str().map_or(0, |t| t.lines().count()))
        .sum::<usize>();
    assert_eq!(lines, 200_000);
}
