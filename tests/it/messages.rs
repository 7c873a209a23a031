//! Messages between runs over raw HTTP (`/api/v1/agent/messages…`), against the real binary
//! with demo agents: a message to a running run reaches its agent as a follow-up and is marked
//! delivered when the agent takes it; the inbox, read and delivered operations; the limits at
//! the sizes the document allows; and the refusals (an ended recipient, another team's runs,
//! unknown and hostile ids, oversized and malformed bodies).

use crate::common;

use common::Server;
use serde_json::{json, Value};

/// A run in the 60-second demo environment, once it is in progress.
async fn running(s: &Server, prompt: &str) -> String {
    let id = s
        .create(json!({"prompt": prompt, "config": {"environment_id": "slow"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    id
}

async fn send(s: &Server, key: &str, body: Value) -> (u16, Value) {
    s.post(key, "/agent/messages", body).await
}

fn ids(v: &Value) -> Vec<String> {
    v["message_ids"]
        .as_array()
        .expect("message_ids")
        .iter()
        .map(|m| m.as_str().expect("id").to_string())
        .collect()
}

/// A key of another team, not an admin.
async fn outsider(s: &Server) -> String {
    let (status, v) = s
        .post(&s.key, "/admin/teams", json!({"name": "infra"}))
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = s
        .post(
            &s.key,
            "/admin/keys",
            json!({"name": "ops", "team": "infra"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

#[tokio::test]
async fn a_message_reaches_a_running_agent_and_is_delivered_read_and_listed() {
    let s = Server::start();
    let parent = running(&s, "parent").await;
    let child = running(&s, "child").await;
    // The largest body and subject the document allows, in multi-byte characters.
    let body: String = "é".repeat(128 * 1024);
    let subject: String = "ß".repeat(1024);
    let (status, v) = send(
        &s,
        &s.key,
        json!({"to": [child, child], "subject": subject, "body": body, "sender_run_id": parent}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let sent = ids(&v);
    assert_eq!(sent.len(), 2, "one id per recipient");
    assert_ne!(sent[0], sent[1]);
    assert!(sent.iter().all(|id| id.len() == 26), "ULIDs: {sent:?}");

    // The child's agent takes both as follow-ups; each taking is the message's delivery.
    let events = s.wait_events(&child, "MessageDelivered", 2).await;
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "MessageReceived")
        .collect();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0]["data"]["message_id"], sent[0].as_str());
    assert_eq!(received[0]["data"]["sender_run_id"], parent.as_str());
    assert_eq!(received[0]["data"]["body"], body.as_str());
    let transcript = s.transcript_text(&child).await;
    assert!(
        transcript.contains(&format!("Message {} from run {parent}", sent[1])),
        "the agent got the message: {}",
        &transcript[..transcript.len().min(500)]
    );
    // The sender's log names each message it sent, to whom.
    let sender_log = s.wait_events(&parent, "MessageSent", 2).await;
    let sent_events: Vec<&Value> = sender_log
        .iter()
        .filter(|e| e["type"] == "MessageSent")
        .collect();
    assert_eq!(sent_events[1]["data"]["message_id"], sent[1].as_str());
    assert_eq!(sent_events[1]["data"]["to"], child.as_str());

    // The inbox: headers in order, without bodies, delivered and not read.
    let (status, inbox) = s.get(&s.key, &format!("/agent/messages/{child}")).await;
    assert_eq!(status, 200, "{inbox}");
    let inbox = inbox.as_array().expect("array").clone();
    assert_eq!(inbox.len(), 2);
    assert_eq!(inbox[0]["message_id"], sent[0].as_str());
    assert_eq!(inbox[0]["subject"], subject.as_str());
    assert!(inbox[0].get("body").is_none());
    assert!(inbox[0]["delivered_at"].is_string(), "{}", inbox[0]);
    assert!(inbox[0]["read_at"].is_null());

    // Read: the body, `read_at` set once.
    let read = format!("/agent/messages/{}/read", sent[0]);
    let (status, first) = s.post(&s.key, &read, json!({})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["body"], body.as_str());
    assert_eq!(first["sender_run_id"], parent.as_str());
    assert!(first["read_at"].is_string());
    let (_, again) = s.post(&s.key, &read, json!({})).await;
    assert_eq!(again["read_at"], first["read_at"], "the first read counts");
    let (_, unread) = s
        .get(
            &s.key,
            &format!("/agent/messages/{child}?unread=true&limit=100"),
        )
        .await;
    let unread: Vec<&str> = unread
        .as_array()
        .expect("array")
        .iter()
        .map(|m| m["message_id"].as_str().expect("id"))
        .collect();
    assert_eq!(unread, [sent[1].as_str()]);
    let (_, limited) = s
        .get(&s.key, &format!("/agent/messages/{child}?limit=1"))
        .await;
    assert_eq!(limited.as_array().map(Vec::len), Some(1));
    let (_, later) = s
        .get(
            &s.key,
            &format!("/agent/messages/{child}?since=2999-01-01T00:00:00Z"),
        )
        .await;
    assert_eq!(later, json!([]));

    // Delivered: 204, idempotent, no second event.
    let delivered = format!("/agent/messages/{}/delivered", sent[1]);
    for _ in 0..2 {
        let r = s
            .client
            .post(s.api(&delivered))
            .bearer_auth(&s.key)
            .send()
            .await
            .expect("delivered");
        assert_eq!(r.status().as_u16(), 204);
    }
    let events = s.events(&child).await;
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(count("MessageDelivered"), 2);
    assert_eq!(count("MessageRead"), 1);
}

#[tokio::test]
async fn a_message_to_a_queued_run_waits_for_its_start() {
    let s = Server::start();
    let sender = running(&s, "sender").await;
    // One slot: the second run waits queued behind the first.
    let busy = s
        .create(json!({"prompt": "busy", "config": {"environment_id": "single"}}))
        .await;
    s.wait_state(&busy, "INPROGRESS").await;
    let queued = s
        .create(json!({"prompt": "queued", "config": {"environment_id": "single"}}))
        .await;
    let (status, v) = send(
        &s,
        &s.key,
        json!({"to": [queued], "subject": "s", "body": "hello later", "sender_run_id": sender}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (_, inbox) = s.get(&s.key, &format!("/agent/messages/{queued}")).await;
    assert!(
        inbox[0]["delivered_at"].is_null(),
        "not delivered while queued"
    );
    // Cancelling the busy run frees the slot; the queued run's agent is handed the message.
    let (status, v) = s
        .post(&s.key, &format!("/agent/runs/{busy}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    s.wait_events(&queued, "MessageDelivered", 1).await;
}

#[tokio::test]
async fn refusals_name_what_is_wrong() {
    let s = Server::start();
    let sender = running(&s, "sender").await;
    let live = running(&s, "live").await;
    let done = s.create(json!({"prompt": "done"})).await;
    s.wait_state(&done, "SUCCEEDED").await;

    // An ended recipient: 422 naming it, and nothing recorded for the ones before it.
    let (status, v) = send(
        &s,
        &s.key,
        json!({"to": [live, done], "subject": "s", "body": "b", "sender_run_id": sender}),
    )
    .await;
    assert_eq!(status, 422, "{v}");
    assert!(
        v["detail"].as_str().expect("detail").contains("to[1]"),
        "{v}"
    );
    let (_, inbox) = s.get(&s.key, &format!("/agent/messages/{live}")).await;
    assert_eq!(inbox, json!([]), "a refused send records nothing");

    let ok = |to: Value, subject: Value, body: Value, sender: Value| json!({"to": to, "subject": subject, "body": body, "sender_run_id": sender});
    let cases = [
        (
            ok(
                json!([live]),
                json!("x".repeat(1025)),
                json!("b"),
                json!(sender),
            ),
            400,
            "subject",
        ),
        (
            ok(
                json!([live]),
                json!("s"),
                json!("x".repeat(128 * 1024 + 1)),
                json!(sender),
            ),
            400,
            "body",
        ),
        (
            ok(json!([]), json!("s"), json!("b"), json!(sender)),
            400,
            "to",
        ),
        (
            ok(
                json!(vec![live.clone(); 101]),
                json!("s"),
                json!("b"),
                json!(sender),
            ),
            400,
            "to",
        ),
        (
            ok(
                json!([live]),
                json!("s"),
                json!("b"),
                json!("01BX5ZZKBKACTAV9WEVGEMMVRZ"),
            ),
            404,
            "sender_run_id",
        ),
        (
            ok(
                json!([live, "../../etc"]),
                json!("s"),
                json!("b"),
                json!(sender),
            ),
            404,
            "to[1]",
        ),
        (
            ok(json!([live]), json!(7), json!("b"), json!(sender)),
            400,
            "wrong type",
        ),
        (
            json!({"to": [live], "subject": "s", "sender_run_id": sender}),
            400,
            "body",
        ),
    ];
    for (body, want, names) in cases {
        let (status, v) = send(&s, &s.key, body).await;
        assert_eq!(status, want, "{v}");
        let detail = v["detail"].as_str().expect("detail");
        assert!(detail.contains(names), "{names}: {detail}");
    }
    let r = s
        .client
        .post(s.api("/agent/messages"))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .body("{\"to\": [")
        .send()
        .await
        .expect("post");
    let (status, _) = common::problem(r).await;
    assert_eq!(status, 400);

    // Unknown and hostile message ids, and bad inbox queries.
    for id in ["01BX5ZZKBKACTAV9WEVGEMMVRZ", "..%2F..%2Fevents", "x"] {
        for op in ["read", "delivered"] {
            let (status, v) = s
                .post(&s.key, &format!("/agent/messages/{id}/{op}"), json!({}))
                .await;
            assert_eq!(status, 404, "{op} {id}: {v}");
        }
    }
    for query in ["limit=0", "limit=101", "unread=yes", "since=yesterday"] {
        let (status, v) = s
            .get(&s.key, &format!("/agent/messages/{live}?{query}"))
            .await;
        assert_eq!(status, 400, "{query}: {v}");
    }

    // Another team's key sees none of this team's runs or messages.
    let (status, v) = send(
        &s,
        &s.key,
        json!({"to": [live], "subject": "s", "body": "b", "sender_run_id": sender}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let message = ids(&v).remove(0);
    let other = outsider(&s).await;
    let theirs = s
        .post(
            &other,
            "/agent/runs",
            json!({"prompt": "theirs", "config": {"environment_id": "slow"}}),
        )
        .await;
    assert_eq!(theirs.0, 200, "{}", theirs.1);
    let theirs = theirs.1["run_id"].as_str().expect("id").to_string();
    let (status, v) = send(
        &s,
        &other,
        json!({"to": [live], "subject": "s", "body": "b", "sender_run_id": theirs}),
    )
    .await;
    assert_eq!(status, 404, "{v}");
    assert!(v["detail"].as_str().expect("detail").contains("to[0]"));
    let (status, _) = s.get(&other, &format!("/agent/messages/{live}")).await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            &other,
            &format!("/agent/messages/{message}/read"),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = s
        .post(
            &other,
            &format!("/agent/messages/{message}/delivered"),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
}

/// A backup restored by `runledger import` finds each message by its id again and lists it
/// in the event poll: the store's message index and event sequence are written by the import's
/// appends, not carried in the file.
#[tokio::test]
async fn an_imported_store_finds_its_messages_again() {
    let old = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(old.path(), common::CONFIG);
    let key = s.key.clone();
    let sender = running(&s, "sender").await;
    let recipient = running(&s, "recipient").await;
    let (status, v) = send(
        &s,
        &key,
        json!({"to": [recipient], "subject": "kept", "body": "survives a restore", "sender_run_id": sender}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let message = ids(&v).remove(0);
    s.wait_events(&recipient, "MessageDelivered", 1).await;
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 20).await;

    let data = old.path().join("data");
    let (ok, backup, err) = common::cli(
        &[
            "export",
            "--with-keys",
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");
    let new = tempfile::tempdir().expect("tempdir");
    let file = new.path().join("backup.jsonl");
    std::fs::write(&file, backup).expect("write");
    let restored = new.path().join("data");
    let (ok, _, err) = common::cli(
        &[
            "import",
            file.to_str().expect("utf-8"),
            "--data-dir",
            restored.to_str().expect("utf-8"),
        ],
        &[],
    );
    assert!(ok, "{err}");

    let mut s = Server::start_in(new.path(), common::CONFIG);
    s.key = key.clone();
    s.wait_ready().await;
    let (status, read) = s
        .post(&key, &format!("/agent/messages/{message}/read"), json!({}))
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["body"], "survives a restore");
    assert!(read["delivered_at"].is_string());
    let (status, polled) = s
        .get(&key, &format!("/agent/events?run_ids={recipient}"))
        .await;
    assert_eq!(status, 200, "{polled}");
    let polled = polled.as_array().expect("array");
    assert!(
        polled
            .iter()
            .any(|e| e["event_type"] == "new_message" && e["ref_id"] == message.as_str()),
        "{polled:?}"
    );
}

/// A command agent (a real child process) reads a message on its standard input as it reads a
/// follow-up, and the message is delivered when it is written there.
#[tokio::test]
async fn a_command_agent_reads_a_message_on_its_input() {
    let scripts = common::agent_visible_dir();
    let agent = scripts.path().join("agent.sh");
    // Echoes each input line; ends once a line says STOP.
    common::script(
        &agent,
        "while IFS= read -r line; do echo \"got: $line\"; \
         case \"$line\" in *STOP*) exit 0;; esac; done; exit 1",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_in(
        dir.path(),
        &format!(
            "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
             [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n\n\
             [[environments]]\nid = \"slow\"\nharness = \"demo\"\ndemo_duration_ms = 60000\n",
            agent.display()
        ),
    );
    s.wait_ready().await;
    let sender = running(&s, "sender").await;
    let child = s
        .create(json!({"prompt": "listen", "config": {"environment_id": "cmd"}}))
        .await;
    s.wait_state(&child, "INPROGRESS").await;
    let (status, v) = send(
        &s,
        &s.key,
        json!({"to": [child], "subject": "orders", "body": "STOP when you read this", "sender_run_id": sender}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let message = ids(&v).remove(0);
    s.wait_state(&child, "SUCCEEDED").await;
    let transcript = s.transcript_text(&child).await;
    assert!(
        transcript.contains(&format!("Message {message} from run {sender}"))
            && transcript.contains("STOP when you read this")
            && transcript.contains("got: "),
        "{transcript}"
    );
    let events = s.events(&child).await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "MessageDelivered" && e["data"]["message_id"] == message.as_str()));
}
