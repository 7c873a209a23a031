//! The origin recorded beside every event (issue #38, item 1), through the real binary: who
//! asked and through which channel (an API key, a console session, the CLI, a schedule's
//! firing), from which request and address, and, for what the service does itself, the cause.
//! A forwarded address is believed only from a trusted proxy, a cancel carries its reason, and
//! a store written before origins reads as it did.

use crate::common;

use std::time::{Duration, Instant};

use common::{cli, Server, CONFIG};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE, USER_AGENT};
use serde_json::{json, Value};

/// A run's events as `GET …/events` answers them with `key`.
async fn events(server: &Server, key: &str, id: &str) -> Vec<Value> {
    let (status, page) = server
        .get(key, &format!("/agent/runs/{id}/events?limit=10000"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().cloned().unwrap_or_default()
}

/// The first event of `kind` among `events`.
fn first<'e>(events: &'e [Value], kind: &str) -> &'e Value {
    events
        .iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event: {events:?}"))
}

/// A new key of the `default` team: (secret, id).
async fn make_key(server: &Server, name: &str, kind: &str) -> (String, String) {
    let body = json!({ "name": name, "kind": kind });
    let (status, v) = server.post(&server.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    (
        v["key"].as_str().expect("key").to_string(),
        v["id"].as_str().expect("id").to_string(),
    )
}

/// `POST …/cancel` of run `id` with `key` and `body` (none when `None`): status and body.
async fn cancel(server: &Server, key: &str, id: &str, body: Option<&str>) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.api(&format!("/agent/runs/{id}/cancel")))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let r = request.send().await.expect("cancel");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls until the run's events hold one of `kind`; returns them all.
async fn wait_for(server: &Server, id: &str, kind: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = events(server, &server.key, id).await;
        if events.iter().any(|e| e["type"] == kind) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "no {kind} in run {id}: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An API key's create and cancel name the key as it was, the request id the service
/// answered, the peer's address (a forwarded one from an untrusted peer is ignored) and the
/// user agent cut to 256 bytes; what the service does itself names its cause.
#[tokio::test]
async fn a_key_s_requests_and_the_service_s_own_acts_name_their_origin() {
    let server = Server::start();
    server.wait_ready().await;
    let (key, key_id) = make_key(&server, "ops-bot", "agent").await;

    let long_agent = format!("{}é{}", "u".repeat(255), "v".repeat(100));
    let created = server
        .client
        .post(server.api("/agent/runs"))
        .bearer_auth(&key)
        .header(USER_AGENT, long_agent.as_str())
        // Hostile: no proxy is trusted, so the peer is the client whatever this says.
        .header("x-forwarded-for", "203.0.113.9")
        .header("forwarded", "for=198.51.100.7")
        .json(&json!({"prompt": "wait", "config": {"environment_id": "slow"}}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 200);
    let request_id = created.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_string();
    let body: Value = created.json().await.expect("json");
    let id = body["run_id"].as_str().expect("run_id").to_string();

    let history = wait_for(&server, &id, "Started").await;
    let origin = &first(&history, "Created")["origin"];
    assert_eq!(origin["channel"], "api", "{origin}");
    assert_eq!(
        origin["key"],
        json!({"id": key_id, "name": "ops-bot", "kind": "agent", "team": "default", "admin": false})
    );
    assert_eq!(origin["request_id"], request_id.as_str());
    assert_eq!(origin["client_addr"], "127.0.0.1");
    // 255 bytes of `u` and a two-byte `é` that would end past 256: cut before it.
    assert_eq!(origin["user_agent"], "u".repeat(255).as_str());
    assert!(
        origin.get("cause").is_none() && origin.get("reason").is_none(),
        "{origin}"
    );
    let started = &first(&history, "Started")["origin"];
    assert_eq!(
        started,
        &json!({"channel": "system", "cause": "a slot came free in the run's environment"})
    );

    // A cancel's reason is recorded; one over 1 KiB, or a body that is not the JSON, is not.
    let (status, problem) = cancel(
        &server,
        &key,
        &id,
        Some(&json!({"reason": "x".repeat(1025)}).to_string()),
    )
    .await;
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("reason"),
        "{problem}"
    );
    let (status, problem) = cancel(&server, &key, &id, Some("stop it")).await;
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .expect("detail")
            .contains("reason"),
        "{problem}"
    );
    let reason = "é".repeat(512);
    let (status, answer) = cancel(
        &server,
        &key,
        &id,
        Some(&json!({ "reason": reason }).to_string()),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let history = events(&server, &key, &id).await;
    let cancelled = &first(&history, "Cancelled")["origin"];
    assert_eq!(cancelled["channel"], "api");
    assert_eq!(cancelled["key"]["id"], key_id.as_str());
    assert_eq!(cancelled["reason"], reason.as_str());
    assert_ne!(cancelled["request_id"], origin["request_id"]);

    // The official clients' cancel: no body at all, or `{}`.
    for body in [None, Some("{}")] {
        let other = server
            .create(json!({"prompt": "x", "config": {"environment_id": "slow"}}))
            .await;
        let (status, answer) = cancel(&server, &key, &other, body).await;
        assert_eq!(status, 200, "{body:?}: {answer}");
        let history = events(&server, &key, &other).await;
        assert!(first(&history, "Cancelled")["origin"]
            .get("reason")
            .is_none());
    }

    // The end of an execution names how it ended.
    let done = server
        .create(json!({"prompt": "quick", "config": {"environment_id": "fast"}}))
        .await;
    let history = wait_for(&server, &done, "Succeeded").await;
    assert_eq!(
        first(&history, "Succeeded")["origin"],
        json!({"channel": "system", "cause": "execution 1: the agent exited successfully"})
    );
    if let Some(usage) = history.iter().find(|e| e["type"] == "UsageRecorded") {
        assert_eq!(usage["origin"]["channel"], "system", "{usage}");
    }

    // A follow-up and a session-link revoke name their key too.
    let (status, answer) = server
        .post(
            &key,
            &format!("/agent/runs/{done}/followups"),
            json!({"message": "again"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = server
        .post(
            &key,
            &format!("/agent/runs/{done}/session-link/revoke"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let history = events(&server, &key, &done).await;
    for kind in ["FollowupReceived", "SessionLinkRevoked"] {
        let origin = &first(&history, kind)["origin"];
        assert_eq!(origin["channel"], "api", "{kind}: {origin}");
        assert_eq!(origin["key"]["id"], key_id.as_str(), "{kind}: {origin}");
    }
}

/// Behind a trusted proxy, the right-most forwarded address that is not a proxy is the
/// client's: an address the client put in front is not believed, nor a header that does not
/// parse.
#[tokio::test]
async fn a_forwarded_address_is_believed_only_from_a_trusted_proxy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = CONFIG.replacen(
        "[server]\n",
        "[server]\ntrusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n",
        1,
    );
    let server = Server::start_in(dir.path(), &config);
    server.wait_ready().await;
    let cases = [
        // The client claimed 1.1.1.1; the proxies 10.0.0.5 and the peer appended the rest.
        (
            ("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.5"),
            "203.0.113.9",
        ),
        (
            ("forwarded", "for=1.1.1.1, for=\"[2001:db8::7]:443\""),
            "2001:db8::7",
        ),
        // Not an address: the whole header is ignored, and the proxy is recorded.
        (("x-forwarded-for", "1.1.1.1, <script>"), "127.0.0.1"),
    ];
    for ((name, value), want) in cases {
        let r = server
            .client
            .post(server.api("/agent/runs"))
            .bearer_auth(&server.key)
            .header(name, value)
            .json(&json!({"prompt": "x"}))
            .send()
            .await
            .expect("create");
        assert_eq!(r.status(), 200);
        let id = r.json::<Value>().await.expect("json")["run_id"]
            .as_str()
            .expect("id")
            .to_string();
        let history = events(&server, &server.key, &id).await;
        assert_eq!(
            first(&history, "Created")["origin"]["client_addr"],
            want,
            "{name}: {value}"
        );
    }
}

/// The console's session-authenticated cancel is recorded as `console`, with the signed-in
/// key.
#[tokio::test]
async fn a_console_session_s_cancel_names_the_console() {
    let server = Server::start();
    server.wait_ready().await;
    let (key, key_id) = make_key(&server, "reviewer", "personal").await;
    let id = server
        .create(json!({"prompt": "x", "config": {"environment_id": "slow"}}))
        .await;
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let page = c.get(server.url("/signin")).send().await.expect("signin");
    let token = cookie(&page, "runledger_signin");
    let signed_in = c
        .post(server.url("/signin"))
        .header(COOKIE, format!("runledger_signin={token}"))
        .form(&[("token", token.as_str()), ("key", key.as_str())])
        .send()
        .await
        .expect("post signin");
    assert_eq!(signed_in.status(), 303);
    assert_eq!(signed_in.headers()[LOCATION], "/runs");
    let session = format!(
        "runledger_session={}",
        cookie(&signed_in, "runledger_session")
    );
    let html = c
        .get(server.url("/runs"))
        .header(COOKIE, &session)
        .send()
        .await
        .expect("runs page")
        .text()
        .await
        .expect("html");
    let csrf = html
        .split("<meta name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf meta");
    let r = c
        .post(server.api(&format!("/agent/runs/{id}/cancel")))
        .header(COOKIE, &session)
        .header("x-csrf-token", csrf)
        .send()
        .await
        .expect("cancel");
    assert_eq!(r.status(), 200);
    let history = events(&server, &server.key, &id).await;
    let origin = &first(&history, "Cancelled")["origin"];
    assert_eq!(origin["channel"], "console", "{origin}");
    assert_eq!(origin["key"]["id"], key_id.as_str());
    assert_eq!(origin["key"]["name"], "reviewer");
    assert_eq!(origin["client_addr"], "127.0.0.1");
}

/// The value of cookie `name` an answer sets.
fn cookie(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_string()
}

/// The CLI's cancel is recorded as `cli` (its header's claim), and both `runledger runs
/// events` (remote) and `runledger events` (a stopped store) print the origin.
#[tokio::test]
async fn the_cli_s_cancel_names_the_cli_and_the_event_listings_show_origins() {
    let mut server = Server::start();
    server.wait_ready().await;
    let id = server
        .create(json!({"prompt": "x", "config": {"environment_id": "slow"}}))
        .await;
    let home = tempfile::tempdir().expect("config home");
    let home = home.path().to_str().expect("utf-8");
    let env = [
        ("RUNLEDGER_SERVER", server.base.as_str()),
        ("RUNLEDGER_API_KEY", server.key.as_str()),
        ("XDG_CONFIG_HOME", home),
    ];
    let (ok, out, err) = cli(&["runs", "cancel", &id], &env);
    assert!(ok, "{out}{err}");
    let history = events(&server, &server.key, &id).await;
    let origin = &first(&history, "Cancelled")["origin"];
    assert_eq!(origin["channel"], "cli", "{origin}");
    assert!(
        origin["user_agent"]
            .as_str()
            .is_some_and(|a| a.starts_with("runledger-cli/")),
        "{origin}"
    );
    let (ok, shown, err) = cli(&["runs", "events", &id], &env);
    assert!(ok, "{err}");
    assert!(shown.contains("      origin: cli, key "), "{shown}");
    assert!(shown.contains("from 127.0.0.1"), "{shown}");
    assert!(
        shown.contains("origin: system, a slot came free"),
        "{shown}"
    );

    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    let data = server.data_dir.to_str().expect("utf-8").to_string();
    let (ok, shown, err) = cli(&["events", &id, "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    assert!(shown.contains("      origin: api, key "), "{shown}");
    assert!(shown.contains("      origin: cli, key "), "{shown}");
}

/// A schedule's firing names the schedule and its due time on the run it made.
#[tokio::test]
async fn a_schedule_s_run_names_the_firing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(
        dir.path(),
        &format!("{CONFIG}\n[schedules]\nseconds = true\n"),
    );
    server.wait_ready().await;
    let body = json!({ "name": "nightly", "cron_schedule": "*/2 * * * * *", "prompt": "tick",
                       "agent_config": { "environment_id": "fast" } });
    let (status, schedule) = server.post(&server.key, "/agent/schedules", body).await;
    assert_eq!(status, 201, "{schedule}");
    let schedule_id = schedule["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        let (_, page) = server
            .get(
                &server.key,
                &format!("/agent/runs?schedule_id={schedule_id}"),
            )
            .await;
        if let Some(run) = page["runs"].as_array().and_then(|r| r.first()) {
            break run.clone();
        }
        assert!(Instant::now() < deadline, "the schedule never fired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let id = run["run_id"].as_str().expect("run_id");
    let history = events(&server, &server.key, id).await;
    let origin = &first(&history, "Created")["origin"];
    assert_eq!(origin["channel"], "schedule", "{origin}");
    assert!(origin.get("key").is_none(), "{origin}");
    let cause = origin["cause"].as_str().expect("cause");
    let due = run["schedule"]["due"].as_str().unwrap_or_default();
    assert!(
        cause.starts_with(&format!("schedule nightly ({schedule_id}) fired, due ")),
        "{cause}"
    );
    if !due.is_empty() {
        assert!(cause.ends_with(due), "{cause} / {due}");
    }
}

/// A store written before origins (schema version 1 records) reads as it did: its events have
/// no `origin`, on the API and in `runledger events --json`.
#[tokio::test]
async fn events_written_before_origins_read_without_one() {
    let mut server = Server::start();
    server.wait_ready().await;
    let id = server.create(json!({"prompt": "old"})).await;
    server.wait_state(&id, "SUCCEEDED").await;
    let count = events(&server, &server.key, &id).await.len();
    let key = server.key.clone();
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;

    // Rewrite the run's records as version 1 wrote them.
    {
        use runledger::store::codec;
        let store =
            runledger::store::Store::open(&server.data_dir, &runledger::store::Options::default())
                .expect("open");
        let tree = store.db().open_tree("events").expect("events tree");
        let run: runledger::domain::RunId = id.parse().expect("id");
        let mut rewritten = 0;
        for item in tree.scan_prefix(run.to_bytes()) {
            let (k, v) = item.expect("record");
            let e = codec::decode_run(&v).expect("a record");
            assert!(e.origin.is_some(), "written with an origin");
            let old = codec::LegacyEnvelope {
                run_id: e.run_id,
                seq: e.seq,
                at: e.at,
                event: e.event,
            };
            tree.insert(k, codec::encode(&old).expect("encode"))
                .expect("insert");
            rewritten += 1;
        }
        assert_eq!(rewritten, count);
        store.sync_blocking().expect("sync");
    }

    let data = server.data_dir.to_str().expect("utf-8").to_string();
    let (ok, out, err) = cli(&["events", "--json", "--data-dir", &data, &id], &[]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), count);
    assert!(lines.iter().all(|e| e.get("origin").is_none()), "{out}");
    let (ok, shown, err) = cli(&["events", &id, "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    assert!(!shown.contains("origin:"), "{shown}");

    let mut again = Server::start_in(server.data_dir.parent().expect("dir"), CONFIG);
    again.key = key;
    again.wait_ready().await;
    let history = events(&again, &again.key, &id).await;
    assert_eq!(history.len(), count);
    assert!(
        history.iter().all(|e| e.get("origin").is_none()),
        "{history:?}"
    );
}

/// `/openapi.json` describes an event's `origin` and the cancel's optional body.
#[tokio::test]
async fn the_openapi_document_describes_origins_and_the_cancel_body() {
    let server = Server::start();
    let doc: Value = server
        .client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .expect("openapi")
        .json()
        .await
        .expect("json");
    let schemas = &doc["components"]["schemas"];
    // `RunEvent` is its event's fields (`allOf`) and these.
    let event = schemas["RunEvent"]["allOf"][1]["properties"]["origin"].to_string();
    assert!(event.contains("#/components/schemas/OriginData"), "{event}");
    let properties = schemas["OriginData"]["properties"]
        .as_object()
        .expect("OriginData");
    for field in [
        "channel",
        "key",
        "request_id",
        "client_addr",
        "user_agent",
        "cause",
        "reason",
    ] {
        assert!(properties.contains_key(field), "OriginData lacks {field}");
    }
    assert_eq!(schemas["OriginData"]["required"], json!(["channel"]));
    let cancel = &doc["paths"]["/api/v1/agent/runs/{run_id}/cancel"]["post"]["requestBody"];
    assert_ne!(cancel["required"], true, "{cancel}");
    let body = cancel["content"]["application/json"]["schema"].to_string();
    assert!(body.contains("CancelRequest"), "{cancel}");
    assert_eq!(
        schemas["CancelRequest"]["properties"]["reason"]["maxLength"],
        1024
    );
}

/// A `server.trusted_proxies` entry that is no address or block stops start-up naming it.
#[test]
fn a_bad_trusted_proxy_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runledger.toml");
    std::fs::write(
        &path,
        "[server]\nbind = \"127.0.0.1:0\"\ntrusted_proxies = [\"10.0.0.1\", \"10.0.0.0/33\"]\n",
    )
    .expect("write");
    let config = path.display().to_string();
    let data = dir.path().join("data").display().to_string();
    let (ok, _, err) = cli(&["serve", "--config", &config, "--data-dir", &data], &[]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("server.trusted_proxies[1]") && err.contains("10.0.0.0/33"),
        "{err}"
    );
}
