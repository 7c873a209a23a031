//! The live form of `GET /api/v1/audit/events`: a follower receives a new matching event of
//! its team as it is recorded, never another team's, and resumes after `Last-Event-ID`.

use std::time::Duration;

use super::{cancel, create, world};
use crate::common::Server;
use serde_json::Value;

/// An open audit stream, read message by message.
struct Stream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl Stream {
    async fn open(s: &Server, key: &str, query: &str, last_event_id: Option<&str>) -> Stream {
        let mut request = s
            .client
            .get(s.api(&format!("/audit/events?{query}")))
            .bearer_auth(key)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.expect("stream");
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

    /// The next message with an id: (id, event, data), within 20 s.
    async fn next(&mut self) -> (String, String, Value) {
        let read = async {
            loop {
                if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                    let message: Vec<u8> = self.buffer.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&message).into_owned();
                    let (mut id, mut event, mut data) = (None, String::new(), String::new());
                    for line in text.lines() {
                        if let Some(v) = line.strip_prefix("id: ") {
                            id = Some(v.to_string());
                        } else if let Some(v) = line.strip_prefix("event: ") {
                            event = v.to_string();
                        } else if let Some(v) = line.strip_prefix("data: ") {
                            data = v.to_string();
                        }
                    }
                    if let Some(id) = id {
                        let data = serde_json::from_str(&data).expect("data is JSON");
                        return (id, event, data);
                    }
                    continue;
                }
                let chunk = self.response.chunk().await.expect("read").expect("open");
                self.buffer.extend_from_slice(&chunk);
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("a message within 20 s")
    }
}

#[tokio::test]
async fn a_follower_receives_its_teams_new_events_and_resumes_after_its_last() {
    let s = Server::start();
    let w = world(&s).await;
    let mut alice = Stream::open(&s, &w.alice.secret, "type=Cancelled", None).await;
    // Another team's cancel first, then Alice's own: the first message is Alice's.
    let theirs = create(&s, &w.bob, "slow").await;
    cancel(&s, &w.bob, &theirs).await;
    let ours = create(&s, &w.alice, "slow").await;
    cancel(&s, &w.alice, &ours).await;
    let (id, event, data) = alice.next().await;
    assert_eq!(event, "Cancelled");
    assert_eq!(data["run_id"], ours.as_str(), "{data}");
    assert_eq!(data["team"], "default");
    assert_eq!(data["type"], "Cancelled");

    // The admin key follows every team.
    let mut admin = Stream::open(&s, &w.admin.secret, "type=Cancelled", None).await;
    let later = create(&s, &w.bob, "slow").await;
    cancel(&s, &w.bob, &later).await;
    let (_, _, data) = admin.next().await;
    assert_eq!(data["run_id"], later.as_str(), "{data}");
    assert_eq!(data["team"], "b");
    // Resuming after Alice's message, a new Cancelled of her team is the next one.
    let mut resumed = Stream::open(&s, &w.alice.secret, "type=Cancelled", Some(&id)).await;
    let next = create(&s, &w.alice, "slow").await;
    cancel(&s, &w.alice, &next).await;
    let (resumed_id, _, data) = resumed.next().await;
    assert_eq!(
        data["run_id"],
        next.as_str(),
        "nothing of before the id again: {data}"
    );
    assert!(resumed_id > id, "ids grow: {id} then {resumed_id}");

    // A malformed Last-Event-ID is refused.
    let r = s
        .client
        .get(s.api("/audit/events"))
        .bearer_auth(&w.alice.secret)
        .header("accept", "text/event-stream")
        .header("last-event-id", "nope")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 400);
}
