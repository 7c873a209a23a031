//! Time travel against the real binary: `GET /agent/runs/{id}?as_of_seq=N` answers the run as it
//! was right after its event N (404 naming N past the end, 400 for a value that is not an
//! integer, another team's run answered like a missing one), `GET …/states` pages through every
//! event with the state after it and the fields it changed, and the CLI's `runs get --at`,
//! `runs events --states` and `runs diff`.

use crate::common::{self, Server};
use serde_json::{json, Value};

/// Given a finished run of the demo agent, its events.
async fn finished_run(server: &Server, env: &str) -> (String, Vec<Value>) {
    let id = server
        .create(json!({ "prompt": "travel", "config": { "environment_id": env } }))
        .await;
    server.wait_state(&id, "SUCCEEDED").await;
    let events = server.events(&id).await;
    (id, events)
}

/// A key of a second team.
async fn other_team_key(server: &Server) -> String {
    let (status, team) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201, "{team}");
    let (status, v) = server
        .post(
            &server.key,
            "/admin/keys",
            json!({ "name": "bob", "team": "infra" }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

#[tokio::test]
async fn as_of_seq_answers_each_past_state_and_names_a_missing_event() {
    // Given a finished run.
    let server = Server::start();
    let (id, events) = finished_run(&server, "fast").await;
    assert!(events.len() >= 3, "{events:?}");
    let now = server.run(&id).await;

    // When each of its events is asked for, then the state after it is answered.
    let mut states = Vec::new();
    for event in &events {
        let seq = event["seq"].as_u64().expect("seq");
        let (status, past) = server
            .get(&server.key, &format!("/agent/runs/{id}?as_of_seq={seq}"))
            .await;
        assert_eq!(status, 200, "{past}");
        assert_eq!(past["run_id"], id.as_str());
        assert_eq!(past["updated_at"], event["at"], "{past}");
        states.push(past["state"].as_str().expect("state").to_string());
    }
    assert_eq!(states.first().map(String::as_str), Some("QUEUED"));
    assert!(states.iter().any(|s| s == "INPROGRESS"), "{states:?}");
    // The state after the last event is the run as it is now.
    let last = events.len() - 1;
    let (_, latest) = server
        .get(&server.key, &format!("/agent/runs/{id}?as_of_seq={last}"))
        .await;
    assert_eq!(latest, now);

    // When an event past the end is asked for, then 404 names it.
    let n = events.len();
    let (status, problem) = server
        .get(&server.key, &format!("/agent/runs/{id}?as_of_seq={n}"))
        .await;
    assert_eq!(status, 404, "{problem}");
    let detail = problem["detail"].as_str().expect("detail");
    assert!(
        detail.contains(&format!("no event {n}")) && detail.contains(&format!("has {n} events")),
        "{detail}"
    );

    // When the value is not an integer, then 400 names the parameter.
    for bad in ["abc", "-1", "1.5", "", "18446744073709551616"] {
        let (status, problem) = server
            .get(&server.key, &format!("/agent/runs/{id}?as_of_seq={bad}"))
            .await;
        assert_eq!(status, 400, "{bad}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("as_of_seq must be")),
            "{problem}"
        );
    }

    // When another team's key asks, then the run is missing, as on the plain get, whatever
    // the parameter says.
    let bob = other_team_key(&server).await;
    for query in ["", "?as_of_seq=0", "?as_of_seq=abc", "?as_of_seq=999"] {
        let (status, problem) = server.get(&bob, &format!("/agent/runs/{id}{query}")).await;
        assert_eq!(status, 404, "{query}: {problem}");
        assert_eq!(problem["detail"], "no run with this id", "{query}");
    }
    let (status, _) = server.get(&bob, &format!("/agent/runs/{id}/states")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn states_page_through_every_event_with_the_fields_it_changed() {
    // Given a finished run.
    let server = Server::start();
    let (id, events) = finished_run(&server, "fast").await;

    // When its states are read two at a time, following `next_cursor`.
    let mut states: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = cursor
            .as_ref()
            .map_or(String::new(), |c| format!("&cursor={c}"));
        let (status, page) = server
            .get(
                &server.key,
                &format!("/agent/runs/{id}/states?limit=2{query}"),
            )
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["run_id"], id.as_str());
        let got = page["states"].as_array().expect("states");
        assert!(got.len() <= 2);
        states.extend(got.iter().cloned());
        pages += 1;
        match page["page_info"]["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(page["page_info"]["has_next_page"], true);
                cursor = Some(next.to_string());
            }
            None => {
                assert_eq!(page["page_info"]["has_next_page"], false);
                break;
            }
        }
    }

    // Then every event is there once, in order, as the events endpoint gives it, with the
    // state `as_of_seq` answers and the fields that moved.
    assert_eq!(pages, events.len().div_ceil(2));
    assert_eq!(states.len(), events.len());
    for (state, event) in states.iter().zip(&events) {
        assert_eq!(state["seq"], event["seq"]);
        assert_eq!(state["at"], event["at"]);
        assert_eq!(state["type"], event["type"]);
        assert_eq!(&state["event"], event);
        let (_, past) = server
            .get(
                &server.key,
                &format!("/agent/runs/{id}?as_of_seq={}", event["seq"]),
            )
            .await;
        assert_eq!(state["state"], past);
    }
    let changed = |i: usize| -> Vec<&str> {
        states[i]["changed"]
            .as_array()
            .expect("changed")
            .iter()
            .filter_map(Value::as_str)
            .collect()
    };
    // The first event makes every field.
    let first_fields = states[0]["state"].as_object().expect("state").len();
    assert_eq!(changed(0).len(), first_fields);
    let started = states
        .iter()
        .position(|s| s["type"] == "Started")
        .expect("a Started event");
    assert!(
        changed(started).contains(&"state"),
        "{:?}",
        changed(started)
    );
    assert!(changed(started).contains(&"started_at"));
    assert!(!changed(started).contains(&"prompt"));

    // When a page starts past the end, then it is empty and names no next page.
    let (status, page) = server
        .get(
            &server.key,
            &format!("/agent/runs/{id}/states?cursor={}", events.len()),
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["states"], json!([]));
    assert_eq!(page["page_info"]["has_next_page"], false);

    // When the query is malformed, then 400 names what is wrong.
    for (query, says) in [
        ("limit=0", "limit must be"),
        ("limit=1001", "limit must be"),
        ("cursor=x", "cursor must be"),
    ] {
        let (status, problem) = server
            .get(&server.key, &format!("/agent/runs/{id}/states?{query}"))
            .await;
        assert_eq!(status, 400, "{query}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(says)),
            "{problem}"
        );
    }
    let (status, _) = server
        .get(&server.key, "/agent/runs/01JD2Q7ZK9X4M3N5P6R7S8T9VW/states")
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_cli_shows_a_past_state_the_states_and_a_diff() {
    // Given a succeeded run and a cancelled one.
    let server = Server::start();
    let (done, events) = finished_run(&server, "fast").await;
    let cancelled = server
        .create(json!({ "prompt": "travel", "config": { "environment_id": "slow" } }))
        .await;
    server.wait_state(&cancelled, "INPROGRESS").await;
    let (status, v) = server
        .post(
            &server.key,
            &format!("/agent/runs/{cancelled}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let env = [
        ("RUNLEDGER_SERVER", server.base.as_str()),
        ("RUNLEDGER_API_KEY", server.key.as_str()),
        ("XDG_CONFIG_HOME", "/nonexistent"),
    ];

    // When `runs get --at 0` runs, then it prints the run as it was created.
    let (ok, out, err) = common::cli(&["runs", "get", &done, "--at", "0", "--json"], &env);
    assert!(ok, "{err}");
    let first: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(first["state"], "QUEUED");
    let (ok, out, err) = common::cli(&["runs", "get", &done, "--at", "0"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("QUEUED"), "{out}");
    assert!(err.contains("right after its event 0"), "{err}");
    // Past the end: the server's 404 naming the event, and a failing exit.
    let n = events.len().to_string();
    let (ok, _, err) = common::cli(&["runs", "get", &done, "--at", &n], &env);
    assert!(!ok);
    assert!(err.contains(&format!("no event {n}")), "{err}");

    // When `runs events --states` runs, then each event is printed with what it changed.
    let (ok, out, err) = common::cli(&["runs", "events", &done, "--states"], &env);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), events.len(), "{out}");
    let started = lines
        .iter()
        .find(|l| l.contains("Started"))
        .expect("a Started line");
    assert!(started.contains("state"), "{started}");
    let (ok, out, err) = common::cli(&["runs", "events", &done, "--states", "--json"], &env);
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["states"].as_array().map(Vec::len), Some(events.len()));

    // When the two runs are compared, then the histories are aligned by seq and the end
    // differs in its type and state.
    let (ok, out, err) = common::cli(&["runs", "diff", &done, &cancelled, "--json"], &env);
    assert!(ok, "{err}");
    let diff: Value = serde_json::from_str(&out).expect("json");
    let rows = diff["events"].as_array().expect("events");
    let cancelled_events = server.events(&cancelled).await;
    assert_eq!(rows.len(), events.len().max(cancelled_events.len()));
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["seq"], i);
    }
    // The first events are alike but for the ids and times.
    assert_eq!(rows[0]["type_a"], rows[0]["type_b"]);
    let first_differs: Vec<&str> = rows[0]["differs"]
        .as_array()
        .expect("differs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!first_differs.contains(&"run_id"), "{first_differs:?}");
    assert!(!first_differs.contains(&"state"), "{first_differs:?}");
    assert!(first_differs.contains(&"agent_config"), "{first_differs:?}");
    let end = cancelled_events.len() - 1;
    assert_eq!(rows[end]["type_b"], "Cancelled");
    assert!(
        rows[end]["differs"]
            .as_array()
            .expect("differs")
            .contains(&json!("state")),
        "{}",
        rows[end]
    );
    let (ok, out, err) = common::cli(&["runs", "diff", &done, &cancelled], &env);
    assert!(ok, "{err}");
    assert!(out.starts_with("SEQ"), "{out}");
    assert!(out.contains("Cancelled"), "{out}");

    // When one run does not exist, then the diff fails naming the answer.
    let (ok, _, err) = common::cli(&["runs", "diff", &done, "01JD2Q7ZK9X4M3N5P6R7S8T9VW"], &env);
    assert!(!ok);
    assert!(err.contains("404"), "{err}");
}
