//! The Oz read endpoints beside runs, with the real binary: the agents list (always empty, its
//! query validated), the models the environments declare, a run's conversation (its prompt,
//! follow-ups and output, bounded however much the agent printed), the session and
//! conversation redirect checks, a run's handoff attachments, and the agent identities, which
//! are answered `422 operation_not_supported`. Another team's run is answered like a missing
//! one everywhere.

use crate::common;

use common::{problem, Server};
use serde_json::{json, Value};

const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[limits]
rate_limit = false

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 200
model_id = "demo-model"

[[environments]]
id = "steady"
harness = "demo"
demo_duration_ms = 4000
model_id = "demo-model"

[[environments]]
id = "claude"
harness = "claude"
command = ["true"]
model_id = "claude-sonnet-4-5"

[[environments]]
id = "codex"
harness = "codex"
command = ["true"]
model_id = "gpt-5-codex"

[[environments]]
id = "gemini"
harness = "gemini"
command = ["true"]

[[environments]]
id = "infra-claude"
harness = "claude"
command = ["true"]
model_id = "claude-opus-4-1"
teams = ["infra"]
"#;

/// Team `infra` and a key in it.
async fn infra_key(server: &Server) -> String {
    let (status, team) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201, "{team}");
    let body = json!({ "name": "bob", "team": "infra" });
    let (status, v) = server.post(&server.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

async fn get_raw(server: &Server, key: Option<&str>, path: &str) -> reqwest::Response {
    let mut request = server.client.get(server.api(path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.expect("request")
}

/// A 404 problem for `path`, as for a run that does not exist (not the unknown-route 404).
async fn assert_no_run(server: &Server, key: &str, path: &str) {
    let (status, body) = problem(get_raw(server, Some(key), path).await).await;
    assert_eq!(status, 404, "{path}: {body}");
    assert_eq!(body["detail"], "no run with this id", "{path}");
}

#[tokio::test]
async fn the_agents_list_is_empty_and_its_query_is_validated() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    for query in [
        "",
        "?repo=acme/tools&sort_by=last_run&refresh=true&include_malformed_skills=true",
        "?sort_by=name&refresh=false&include_malformed_skills=false",
    ] {
        let (status, body) = s.get(&s.key, &format!("/agent{query}")).await;
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(body, json!({ "agents": [] }), "{query}");
    }
    for (query, named) in [
        ("repo=acme", "repo"),
        ("repo=acme/tools/extra", "repo"),
        ("repo=%3Cscript%3E/x", "repo"),
        ("sort_by=created_at", "sort_by"),
        ("refresh=maybe", "refresh"),
        ("include_malformed_skills=2", "include_malformed_skills"),
    ] {
        let (status, body) =
            problem(get_raw(&s, Some(&s.key), &format!("/agent?{query}")).await).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(named)),
            "{query}: {body}"
        );
    }
    // A repo far over GitHub's lengths is refused, and the message stays short.
    let long = format!("/agent?repo={}/x", "a".repeat(10_000));
    let (status, body) = problem(get_raw(&s, Some(&s.key), &long).await).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| d.len() < 300),
        "{body}"
    );
    let (status, _) = problem(get_raw(&s, None, "/agent").await).await;
    assert_eq!(status, 401);
    let r = s
        .client
        .post(s.api("/agent"))
        .bearer_auth(&s.key)
        .json(&json!({}))
        .send()
        .await
        .expect("request");
    let (status, _) = problem(r).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn models_are_the_ones_the_teams_environments_declare() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let bob = infra_key(&s).await;
    let (status, body) = s.get(&s.key, "/agent/models").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["default_model_id"], "demo-model");
    let models = body["models"].as_array().expect("models");
    let summary: Vec<(&str, &str)> = models
        .iter()
        .map(|m| {
            assert_eq!(m["display_name"], m["id"]);
            assert_eq!(m["vision_supported"], false);
            (
                m["id"].as_str().expect("id"),
                m["provider"].as_str().expect("provider"),
            )
        })
        .collect();
    // Each declared model once, by id; the gemini environment declares none (its CLI picks);
    // the model of an environment limited to another team is not shown.
    assert_eq!(
        summary,
        [
            ("claude-sonnet-4-5", "ANTHROPIC"),
            ("demo-model", "UNKNOWN"),
            ("gpt-5-codex", "OPENAI"),
        ]
    );
    assert_eq!(
        models[1]["description"],
        "declared by the environments fast, steady"
    );

    let (status, body) = s.get(&bob, "/agent/models").await;
    assert_eq!(status, 200, "{body}");
    let ids: Vec<&str> = body["models"]
        .as_array()
        .expect("models")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"claude-opus-4-1"), "{body}");
    let (status, _) = problem(get_raw(&s, None, "/agent/models").await).await;
    assert_eq!(status, 401);
}

/// Every message of a conversation, flattened: (step id, role, texts).
fn messages(conversation: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for step in conversation["steps"].as_array().expect("steps") {
        assert_eq!(step["steps"], json!([]));
        for m in step["messages"].as_array().expect("messages") {
            let texts = m["content"]
                .as_array()
                .expect("content")
                .iter()
                .map(|b| match b["type"].as_str() {
                    Some("text") => b["text"].as_str().expect("text").to_string(),
                    Some("event") => format!("<{}>", b["name"].as_str().expect("name")),
                    other => panic!("block type {other:?}"),
                })
                .collect();
            out.push((
                step["id"].as_str().expect("id").to_string(),
                m["role"].as_str().expect("role").to_string(),
                texts,
            ));
        }
    }
    out
}

#[tokio::test]
async fn a_runs_conversation_holds_its_prompt_followups_and_output() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let bob = infra_key(&s).await;
    let id = s
        .create(json!({ "prompt": "tidy the <docs>", "config": { "environment_id": "steady" } }))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    let (status, body) = s
        .followup(&id, json!({ "message": "and the README too" }))
        .await;
    assert_eq!(status, 200, "{body}");
    s.wait_state(&id, "SUCCEEDED").await;

    let (status, conversation) = s
        .get(&s.key, &format!("/agent/runs/{id}/conversation"))
        .await;
    assert_eq!(status, 200, "{conversation}");
    assert_eq!(conversation["conversation_id"], id.as_str());
    let all = messages(&conversation);
    assert!(
        all.iter().all(|(step, _, _)| step == "execution-1"),
        "{all:?}"
    );
    assert_eq!(all[0].1, "user");
    assert_eq!(all[0].2, ["tidy the <docs>"]);
    let first = &conversation["steps"][0]["messages"][0];
    assert_eq!(first["message_ids"], json!(["prompt"]));
    assert!(first["timestamp"].as_str().is_some());
    let step = &conversation["steps"][0];
    assert!(step["started_at"].as_str() <= step["completed_at"].as_str());
    // The follow-up as the agent received it, between pieces of its output.
    let followup = all
        .iter()
        .position(|(_, role, texts)| role == "user" && texts == &["and the README too"])
        .expect("the follow-up as a user message");
    assert!(followup > 1, "{all:?}");
    assert_eq!(all[followup - 1].1, "assistant");
    let last = all.last().expect("a message");
    assert_eq!(last.1, "assistant");
    assert_eq!(last.2.last().map(String::as_str), Some("done"));
    // Roles alternate: consecutive entries of one role are one message.
    assert!(all.windows(2).all(|w| w[0].1 != w[1].1), "{all:?}");

    // The same by conversation id.
    let (status, same) = s.get(&s.key, &format!("/agent/conversations/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(same, conversation);

    // A resumed run: a step per execution.
    let (status, body) = s.followup(&id, json!({ "message": "once more" })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "QUEUED");
    s.wait_state(&id, "SUCCEEDED").await;
    let (_, conversation) = s
        .get(&s.key, &format!("/agent/runs/{id}/conversation"))
        .await;
    let steps: Vec<&str> = conversation["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(steps, ["execution-1", "execution-2"]);
    // The follow-up that resumed the run opens the new execution's step.
    assert_eq!(conversation["steps"][1]["messages"][0]["role"], "user");
    assert_eq!(
        conversation["steps"][1]["messages"][0]["content"][0]["text"],
        "once more"
    );
    // Each follow-up appears once, however the agent echoed it.
    let all = messages(&conversation);
    let asked = all
        .iter()
        .filter(|(_, role, texts)| {
            role == "user" && texts.iter().any(|t| t == "and the README too")
        })
        .count();
    assert_eq!(asked, 1, "{all:?}");

    // Another team's run, a malformed id and an unknown one are all "no such run".
    for path in [
        format!("/agent/runs/{id}/conversation"),
        format!("/agent/conversations/{id}"),
    ] {
        assert_no_run(&s, &bob, &path).await;
    }
    for bad in ["not-a-ulid", "01M808HFKP3VA5PZ8KKNFW4921", "%00"] {
        let (status, body) =
            problem(get_raw(&s, Some(&s.key), &format!("/agent/runs/{bad}/conversation")).await)
                .await;
        assert_eq!(status, 404, "{bad}: {body}");
        assert_ne!(body["detail"], "no such route");
    }
    let (status, _) =
        problem(get_raw(&s, None, &format!("/agent/runs/{id}/conversation")).await).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_new_runs_conversation_starts_with_its_prompt() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let id = s
        .create(json!({ "prompt": "wait", "config": { "environment_id": "steady" } }))
        .await;
    let (status, conversation) = s
        .get(&s.key, &format!("/agent/runs/{id}/conversation"))
        .await;
    assert_eq!(status, 200, "{conversation}");
    let all = messages(&conversation);
    assert_eq!(
        all[0],
        ("execution-1".into(), "user".into(), vec!["wait".into()])
    );
}

#[tokio::test]
async fn a_huge_transcript_gives_a_bounded_conversation_that_ends_with_the_latest_output() {
    let dir = common::agent_visible_dir();
    let agent = dir.path().join("agent.sh");
    // About 8 MB of output in 80,000 lines, then a last line to find.
    common::script(
        &agent,
        &format!(
            "yes '{}' | head -n 80000\necho 'warning: almost done' >&2\necho FINAL-LINE",
            "x".repeat(99)
        ),
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"cmd\"\nharness = \"command\"\n\
         command = [\"{}\"]\n",
        agent.display()
    );
    let s = Server::start_in(dir.path(), &config);
    s.wait_ready().await;
    let id = s.create(json!({ "prompt": "print a lot" })).await;
    s.wait_state(&id, "SUCCEEDED").await;
    let r = get_raw(&s, Some(&s.key), &format!("/agent/runs/{id}/conversation")).await;
    assert_eq!(r.status().as_u16(), 200);
    let bytes = r.bytes().await.expect("body");
    assert!(bytes.len() < 2 * 1024 * 1024, "{} bytes", bytes.len());
    let conversation: Value = serde_json::from_slice(&bytes).expect("json");
    let all = messages(&conversation);
    // The prompt, then a note that earlier output was left out, then the latest output.
    assert_eq!(all[0].2, ["print a lot"]);
    assert_eq!(all[1].1, "system");
    assert_eq!(all[1].2, ["<transcript_truncated>"]);
    let omitted = conversation["steps"][0]["messages"][1]["content"][0]["data"]["omitted_bytes"]
        .as_u64()
        .expect("omitted_bytes");
    assert!(omitted > 6_000_000, "{omitted}");
    let stderr = all
        .iter()
        .find(|(_, role, texts)| role == "system" && texts.contains(&"<stderr>".to_string()))
        .expect("stderr as an event");
    assert_eq!(stderr.0, "execution-1");
    let last = all
        .iter()
        .rev()
        .find(|(_, role, _)| role == "assistant")
        .expect("assistant output");
    // The stderr line and the last stdout line come from two pipes, in either order: the
    // last assistant text is the output group that holds the final line, alone or at its end.
    assert!(
        last.2
            .last()
            .is_some_and(|t| t == "FINAL-LINE" || t.ends_with("\nFINAL-LINE")),
        "the latest output is last: {:?}",
        last.2.last().map(|t| &t[t.len().saturating_sub(200)..])
    );
}

#[tokio::test]
async fn redirects_follow_the_runs_state_and_reveal_nothing_of_other_runs() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let bob = infra_key(&s).await;
    let id = s
        .create(json!({ "prompt": "work", "config": { "environment_id": "steady" } }))
        .await;
    let run = s.wait_state(&id, "INPROGRESS").await;
    let uuid = run["session_id"].as_str().expect("session_id").to_string();
    let session = format!("/agent/sessions/{uuid}/redirect");
    let conversation = format!("/agent/conversations/{id}/redirect");
    // While the run goes on, the conversation gives way to its live session.
    assert_eq!(s.get(&s.key, &session).await, (200, json!({})));
    assert_eq!(
        s.get(&s.key, &conversation).await,
        (200, json!({ "session_id": uuid }))
    );
    s.wait_state(&id, "SUCCEEDED").await;
    // Once it has finished, the session (named by its UUID or by the run id) gives way to its
    // conversation.
    for path in [&session, &format!("/agent/sessions/{id}/redirect")] {
        assert_eq!(
            s.get(&s.key, path).await,
            (200, json!({ "conversation_id": id })),
            "{path}"
        );
    }
    assert_eq!(s.get(&s.key, &conversation).await, (200, json!({})));
    // Another team's run, malformed ids and an unknown one: no redirect, nothing revealed.
    for (key, raw) in [
        (&bob, id.as_str()),
        (&bob, uuid.as_str()),
        (&s.key, "nope"),
        (&s.key, "01M808HFKP3VA5PZ8KKNFW4921"),
        (&s.key, "00000000-0000-0000-0000-000000000000"),
        (&s.key, "a%20b"),
    ] {
        for path in [
            format!("/agent/sessions/{raw}/redirect"),
            format!("/agent/conversations/{raw}/redirect"),
        ] {
            assert_eq!(s.get(key, &path).await, (200, json!({})), "{path}");
        }
    }
    // The current clients check without a key: the answer is then always `{}`, so an
    // anonymous caller learns nothing, not even that the run exists. A key that is sent must
    // be valid.
    for path in [&session, &conversation] {
        let r = get_raw(&s, None, path).await;
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.json::<Value>().await.expect("json"), json!({}), "{path}");
        let (status, _) = problem(get_raw(&s, Some("rl_not_a_key"), path).await).await;
        assert_eq!(status, 401, "{path}");
    }
}

#[tokio::test]
async fn handoff_attachments_are_none_and_scoped_like_the_run() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let bob = infra_key(&s).await;
    let attachment =
        json!({ "file_name": "notes.txt", "mime_type": "text/plain", "data": "aGVsbG8=" });
    let (status, run) = s
        .post(
            &s.key,
            "/agent/runs",
            json!({ "prompt": "p", "attachments": [attachment] }),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let id = run["run_id"].as_str().expect("id").to_string();
    let path = format!("/agent/runs/{id}/handoff/attachments");
    // The files attached at create are the run's input, not an execution's handoff snapshot.
    assert_eq!(
        s.get(&s.key, &path).await,
        (200, json!({ "attachments": [] }))
    );
    s.wait_state(&id, "SUCCEEDED").await;
    assert_eq!(
        s.get(&s.key, &path).await,
        (200, json!({ "attachments": [] }))
    );
    assert_no_run(&s, &bob, &path).await;
    let (status, _) = problem(
        get_raw(
            &s,
            Some(&s.key),
            "/agent/runs/not-a-run/handoff/attachments",
        )
        .await,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn agent_identities_are_not_supported_with_a_422_not_a_missing_route() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Server::start_in(dir.path(), CONFIG);
    s.wait_ready().await;
    let body = json!({ "name": "reviewer" });
    for (method, path) in [
        ("GET", "/agent/identities"),
        ("POST", "/agent/identities"),
        ("GET", "/agent/identities/some-uid"),
        ("PUT", "/agent/identities/some-uid"),
        ("DELETE", "/agent/identities/some-uid"),
    ] {
        let url = s.api(path);
        let request = match method {
            "GET" => s.client.get(url),
            "POST" => s.client.post(url).json(&body),
            "PUT" => s.client.put(url).json(&body),
            _ => s.client.delete(url),
        };
        let (status, problem_body) = problem(
            request
                .try_clone()
                .expect("clone")
                .bearer_auth(&s.key)
                .send()
                .await
                .expect("request"),
        )
        .await;
        assert_eq!(status, 422, "{method} {path}: {problem_body}");
        assert_eq!(
            problem_body["type"],
            "https://docs.warp.dev/reference/api-and-sdk/troubleshooting/errors/operation_not_supported"
        );
        assert_eq!(problem_body["title"], "Operation not supported");
        assert_eq!(problem_body["retryable"], false);
        assert!(
            problem_body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("kind 'agent'")),
            "{problem_body}"
        );
        // Without a key it is a 401 like every other /api/v1 route.
        let (status, _) = problem(request.send().await.expect("request")).await;
        assert_eq!(status, 401, "{method} {path}");
    }
    let r = s
        .client
        .patch(s.api("/agent/identities/x"))
        .bearer_auth(&s.key)
        .send()
        .await
        .expect("request");
    assert_eq!(
        r.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("GET, PUT, DELETE")
    );
    let (status, _) = problem(r).await;
    assert_eq!(status, 405);
}
