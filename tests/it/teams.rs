//! Teams with the real binary: a key sees, steers and reads only its own team's runs (another
//! team's run is answered exactly like a missing one), environments limited to teams refuse
//! the others with a 403 naming them, the queues' caps answer 429, and teams are managed by
//! admin keys only, through the API and the CLI.

use crate::common;

use common::{cli, Server};
use serde_json::{json, Value};

const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[limits]
rate_limit = false
max_queued_per_team = 3

[[environments]]
id = "shared"
harness = "demo"
demo_duration_ms = 60000
max_concurrent = 1

[[environments]]
id = "infra-only"
harness = "demo"
demo_duration_ms = 60000
max_concurrent = 1
max_queued = 1
teams = ["infra"]
"#;

/// An admin key of `default` makes team `infra`, then one key in each team.
async fn two_teams(server: &Server) -> (String, String) {
    let (status, team) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201, "{team}");
    assert_eq!(team["name"], "infra");
    (
        make_key(server, "alice", "default").await,
        make_key(server, "bob", "infra").await,
    )
}

async fn make_key(server: &Server, name: &str, team: &str) -> String {
    let body = json!({ "name": name, "team": team });
    let (status, v) = server.post(&server.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["team"], team);
    v["key"].as_str().expect("key").to_string()
}

async fn create(server: &Server, key: &str, body: Value) -> (u16, Value) {
    server.post(key, "/agent/runs", body).await
}

async fn status_of(server: &Server, method: &str, key: &str, path: &str) -> (u16, Value) {
    let request = match method {
        "GET" => server.client.get(server.api(path)),
        _ => server
            .client
            .post(server.api(path))
            .json(&json!({ "message": "hi" })),
    };
    let r = request.bearer_auth(key).send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_key_sees_and_steers_only_its_teams_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (alice, bob) = two_teams(&server).await;

    let (status, run) = create(&server, &alice, json!({ "prompt": "alice's secret work" })).await;
    assert_eq!(status, 200, "{run}");
    let id = run["run_id"].as_str().expect("run_id").to_string();
    let (status, own) = create(&server, &bob, json!({ "prompt": "bob's work" })).await;
    assert_eq!(status, 200, "{own}");
    let bobs = own["run_id"].as_str().expect("run_id").to_string();

    // Every way of reaching alice's run answers bob as if it did not exist, and so does a
    // run id that was never used.
    let missing = "01KB0000000000000000000000";
    for run_id in [id.as_str(), missing] {
        for (method, path) in [
            ("GET", format!("/agent/runs/{run_id}")),
            ("GET", format!("/agent/runs/{run_id}/events")),
            ("GET", format!("/agent/runs/{run_id}/transcript")),
            ("POST", format!("/agent/runs/{run_id}/followups")),
            ("POST", format!("/agent/runs/{run_id}/cancel")),
        ] {
            let (status, body) = status_of(&server, method, &bob, &path).await;
            assert_eq!(status, 404, "{method} {path}: {body}");
            assert_eq!(body["detail"], "no run with this id", "{method} {path}");
        }
    }
    for stream in ["events", "transcript"] {
        let stream = server
            .client
            .get(server.api(&format!("/agent/runs/{id}/{stream}")))
            .header("accept", "text/event-stream")
            .bearer_auth(&bob)
            .send()
            .await
            .expect("request");
        assert_eq!(stream.status().as_u16(), 404);
    }

    // Lists hold only the team's runs, whatever the filter or the sort.
    let (_, run) = server.get(&alice, &format!("/agent/runs/{id}")).await;
    for query in [
        "",
        "?sort_by=created_at",
        "?sort_by=title",
        "?state=QUEUED&state=INPROGRESS",
        "?creator=",
        "?q=work",
    ] {
        let query = if query == "?creator=" {
            format!("?creator={}", run["creator"]["uid"].as_str().unwrap_or(""))
        } else {
            query.to_string()
        };
        for (key, own, other) in [(&bob, &bobs, &id), (&alice, &id, &bobs)] {
            let (status, page) = server.get(key, &format!("/agent/runs{query}")).await;
            assert_eq!(status, 200, "{page}");
            let ids: Vec<&str> = page["runs"]
                .as_array()
                .expect("runs")
                .iter()
                .filter_map(|r| r["run_id"].as_str())
                .collect();
            assert!(!ids.contains(&other.as_str()), "{query}: {ids:?}");
            if !query.starts_with("?creator") {
                assert!(ids.contains(&own.as_str()), "{query}: {ids:?}");
            }
        }
    }

    // Alice still steers her own run, and bob's attempt changed nothing.
    let (status, events) = server
        .get(&alice, &format!("/agent/runs/{id}/events"))
        .await;
    assert_eq!(status, 200);
    assert!(
        !events.to_string().contains("FollowupReceived"),
        "bob's follow-up must not reach alice's run: {events}"
    );
    let (status, _) = status_of(&server, "POST", &alice, &format!("/agent/runs/{id}/cancel")).await;
    assert_eq!(status, 200);
    let created = &events["events"][0];
    assert_eq!(created["type"], "Created");
    assert_eq!(created["data"]["team"], "default");
}

#[tokio::test]
async fn environments_limited_to_teams_refuse_the_others_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (alice, bob) = two_teams(&server).await;

    let (status, body) = create(
        &server,
        &alice,
        json!({ "prompt": "p", "config": { "environment_id": "infra-only" } }),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("\"infra-only\""), "{detail}");

    let (status, body) = create(
        &server,
        &bob,
        json!({ "prompt": "p", "config": { "environment_id": "infra-only" } }),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let names = |v: &Value| -> Vec<String> {
        v["environments"]
            .as_array()
            .expect("environments")
            .iter()
            .filter_map(|e| e["uid"].as_str().map(str::to_string))
            .collect()
    };
    let (_, listed) = server.get(&alice, "/agent/environments").await;
    assert_eq!(names(&listed), ["shared"]);
    let (_, listed) = server.get(&bob, "/agent/environments").await;
    assert_eq!(names(&listed), ["shared", "infra-only"]);
}

#[tokio::test]
async fn queue_caps_answer_429_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (alice, bob) = two_teams(&server).await;

    // infra-only: one running, one waiting, and the next would wait beyond its `max_queued`.
    let infra = json!({ "prompt": "p", "config": { "environment_id": "infra-only" } });
    for _ in 0..2 {
        let (status, body) = create(&server, &bob, infra.clone()).await;
        assert_eq!(status, 200, "{body}");
    }
    let refused = server
        .client
        .post(server.api("/agent/runs"))
        .bearer_auth(&bob)
        .json(&infra)
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status().as_u16(), 429);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(retry > 0);
    let body: Value = refused.json().await.expect("json");
    assert!(
        body["detail"].as_str().unwrap_or("").contains("infra-only"),
        "{body}"
    );

    // Team default: three may wait in `shared` (one more runs), the fifth is refused naming
    // the team; another team is not held up by it.
    for _ in 0..4 {
        let (status, body) = create(&server, &alice, json!({ "prompt": "p" })).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = create(&server, &alice, json!({ "prompt": "p" })).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or("")
            .contains("\"default\""),
        "{body}"
    );
    let (status, body) = create(&server, &bob, json!({ "prompt": "p" })).await;
    assert_eq!(status, 200, "{body}");

    // Cancelling a waiting run makes room again.
    let (_, page) = server.get(&alice, "/agent/runs?state=QUEUED&limit=1").await;
    let waiting = page["runs"][0]["run_id"].as_str().expect("a queued run");
    let (status, _) = status_of(
        &server,
        "POST",
        &alice,
        &format!("/agent/runs/{waiting}/cancel"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = create(&server, &alice, json!({ "prompt": "p" })).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn teams_are_managed_by_admin_keys_only_and_keys_need_an_existing_team() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (alice, _) = two_teams(&server).await;

    let (status, body) = server
        .post(&alice, "/admin/teams", json!({ "name": "ops" }))
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = server.get(&alice, "/admin/teams").await;
    assert_eq!(status, 403);

    for bad in ["", "Infra", "a b", "../x", "-x", &"x".repeat(64), "é"] {
        let (status, body) = server
            .post(&server.key, "/admin/teams", json!({ "name": bad }))
            .await;
        assert_eq!(status, 400, "{bad:?}: {body}");
    }
    let (status, body) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = server
        .post(
            &server.key,
            "/admin/keys",
            json!({ "name": "x", "team": "nope" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["detail"].as_str().unwrap_or("").contains("\"nope\""));

    let (status, teams) = server.get(&server.key, "/admin/teams").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = teams["teams"]
        .as_array()
        .expect("teams")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["default", "infra"]);

    // The CLI goes through the running server with an admin key.
    let data_dir = server.data_dir.to_string_lossy().to_string();
    let base = [
        "--data-dir",
        data_dir.as_str(),
        "--url",
        server.base.as_str(),
    ];
    let admin = [("RUNLEDGER_ADMIN_KEY", server.key.as_str())];
    let run = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(&base);
        cli(&all, &admin)
    };
    let (ok, _, err) = run(&["teams", "create", "ops"]);
    assert!(ok, "{err}");
    let (ok, out, err) = run(&["teams", "list"]);
    assert!(ok, "{err}");
    assert!(out.contains("ops") && out.contains("infra"), "{out}");
    let (ok, key, err) = run(&["keys", "create", "--name", "carol", "--team", "ops"]);
    assert!(ok, "{err}");
    let (status, own) = create(&server, key.trim(), json!({ "prompt": "p" })).await;
    assert_eq!(status, 200, "{own}");
    let (_, page) = server.get(&alice, "/agent/runs").await;
    assert!(!page
        .to_string()
        .contains(own["run_id"].as_str().expect("id")));
    let (ok, _, err) = run(&["keys", "create", "--name", "dave", "--team", "typo"]);
    assert!(!ok);
    assert!(err.contains("typo"), "{err}");
}

/// A store from before teams: its keys and runs belong to `default` and keep working.
#[tokio::test]
async fn a_store_from_before_teams_joins_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let legacy = dir.path().join("legacy.jsonl");
    // An export as runledger wrote it before teams: a Created event and a key without team.
    let secret = "rl_legacylegacylegacylegacylegacylegacylegacy0";
    let hash = {
        use sha2::Digest;
        sha2::Sha256::digest(secret.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let lines = [
        json!({ "record": "backup", "format": 1 }),
        json!({
            "run_id": "01KAKZ0000000000000000000A", "seq": 0, "at": "2025-11-21T19:41:55.072Z",
            "type": "Created",
            "data": {
                "title": "old", "prompt": "old work",
                "config": { "environment_id": "shared" },
                "creator": { "type": "user", "uid": "01KAKZ0000000000000000000K", "display_name": "old" },
                "source": "API", "metadata": {}
            }
        }),
        json!({
            "record": "key", "id": "01KAKZ0000000000000000000K", "name": "old",
            "kind": "personal", "admin": true, "hash": hash,
            "created_at": "2025-11-21T23:36:04.000Z"
        }),
        json!({ "record": "end", "events": 1, "keys": 1, "secrets": 0 }),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&legacy, text).expect("write");
    let data = dir.path().join("data");
    let data_arg = data.to_string_lossy().to_string();
    let (ok, _, err) = cli(
        &[
            "import",
            legacy.to_str().expect("utf-8"),
            "--data-dir",
            &data_arg,
        ],
        &[],
    );
    assert!(ok, "{err}");

    let server = Server::start_in(dir.path(), CONFIG);
    let (status, run) = server
        .get(secret, "/agent/runs/01KAKZ0000000000000000000A")
        .await;
    assert_eq!(status, 200, "{run}");
    let (status, page) = server.get(secret, "/agent/runs").await;
    assert_eq!(status, 200);
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(1), "{page}");
    let (status, keys) = server.get(secret, "/admin/keys").await;
    assert_eq!(status, 200);
    assert_eq!(keys["keys"][0]["team"], "default");
    // A new team's key does not see the old run.
    let (status, _) = server
        .post(secret, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201);
    let (_, created) = server
        .post(
            secret,
            "/admin/keys",
            json!({ "name": "bob", "team": "infra" }),
        )
        .await;
    let bob = created["key"].as_str().expect("key");
    let (status, _) = server
        .get(bob, "/agent/runs/01KAKZ0000000000000000000A")
        .await;
    assert_eq!(status, 404);
}
