//! Output and failures of the client: tables or the API JSON, a code of its own for each failure, a
//! server that is not runledger.

use super::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

#[tokio::test]
async fn usage_errors_refused_keys_and_refused_requests_have_codes_of_their_own() {
    let f = Fixture::start().await;
    let usage = f.cli().run(&["run"]).expect(64, "no prompt");
    assert!(usage.stderr.contains("<PROMPT>"), "{}", usage.stderr);
    f.cli()
        .run(&["runs", "list", "--limit", "many"])
        .expect(64, "not a number");
    f.cli()
        .run(&["run", "x", "--follow", "--wait"])
        .expect(64, "--follow with --wait");
    f.cli().run(&["runs", "lisst"]).expect(64, "a typo");
    // Help is no error.
    let help = f.cli().run(&["run", "--help"]).expect(0, "help");
    assert!(
        help.stdout.contains("77  the API key was refused"),
        "{}",
        help.stdout
    );

    let refused = f
        .cli()
        .run(&["runs", "list", "--api-key", "rl_not_a_key"])
        .expect(77, "a wrong key");
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("401") && refused.stderr.contains("not valid"),
        "the server's problem detail: {}",
        refused.stderr
    );

    let unknown = f
        .cli()
        .run(&["runs", "get", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(65, "an unknown run");
    assert!(unknown.stderr.contains("404"), "{}", unknown.stderr);
    let bad = f
        .cli()
        .run(&["runs", "list", "--state", "SLEEPING"])
        .expect(65, "a state that is none");
    assert!(
        bad.stderr.contains("400") && bad.stderr.contains("SLEEPING"),
        "{}",
        bad.stderr
    );
    let env = f
        .cli()
        .run(&["run", "x", "--env", "nowhere"])
        .expect(65, "an unknown environment");
    assert!(env.stderr.contains("nowhere"), "{}", env.stderr);

    // Nothing listens on port 1.
    let down = f
        .cli()
        .run(&["runs", "list", "--server", "http://127.0.0.1:1"])
        .expect(69, "no server");
    assert!(
        down.stderr.contains("cannot reach http://127.0.0.1:1"),
        "{}",
        down.stderr
    );
    let none = f
        .bare()
        .run(&["runs", "list"])
        .expect(78, "no server given");
    assert!(
        none.stderr.contains("--server") && none.stderr.contains("runledger login"),
        "{}",
        none.stderr
    );
    f.bare()
        .run(&["runs", "list", "--server", &f.server.base])
        .expect(78, "no key given");
    f.cli()
        .run(&["runs", "list", "--ca-cert", "/nonexistent.pem"])
        .expect(78, "an unreadable CA file");
}

#[tokio::test]
async fn runs_commands_print_tables_or_the_apis_json() {
    let f = Fixture::start().await;
    let id = f
        .cli()
        .run(&[
            "run",
            "list me",
            "--env",
            "ok",
            "--title",
            "first\ttitle",
            "--wait",
        ])
        .expect(0, "run")
        .id();
    let other = f
        .cli()
        .run(&["run", "and me", "--env", "fails", "--wait"])
        .expect(1, "run")
        .id();

    // Not a terminal: one tab-separated line per run, newest change first.
    let list = f.cli().run(&["runs", "list"]).expect(0, "runs list");
    let lines: Vec<Vec<&str>> = list
        .stdout
        .lines()
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(lines.len(), 2, "{}", list.stdout);
    assert_eq!(lines[0][..2], [other.as_str(), "FAILED"]);
    assert_eq!(lines[1][..3], [id.as_str(), "SUCCEEDED", "first title"]);
    assert_eq!(lines[1][4], "ok");
    let page: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "list", "--json", "--state", "succeeded"])
            .expect(0, "runs list --json")
            .stdout,
    )
    .expect("one JSON document");
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["runs"][0]["run_id"], id.as_str());
    assert_eq!(page["page_info"]["has_next_page"], false);
    for (args, want) in [
        (vec!["--env", "fails"], vec![other.as_str()]),
        (vec!["--search", "LIST"], vec![id.as_str()]),
        (vec!["--since", "1h"], vec![other.as_str(), id.as_str()]),
        (vec!["--until", "1h"], vec![]),
        (vec!["--source", "API", "--model", "nothing"], vec![]),
    ] {
        let mut all = vec!["runs", "list"];
        all.extend(&args);
        let listed = f.cli().run(&all).expect(0, "runs list with filters");
        let ids: Vec<&str> = listed
            .stdout
            .lines()
            .filter_map(|l| l.split('\t').next())
            .collect();
        assert_eq!(ids, want, "{args:?}");
    }
    // Paging: the cursor of a page is on stderr, and names the next page.
    let first = f
        .cli()
        .run(&["runs", "list", "--limit", "1"])
        .expect(0, "page 1");
    let cursor = first
        .stderr
        .trim()
        .strip_prefix("more: --cursor ")
        .expect("a cursor")
        .to_string();
    let second = f
        .cli()
        .run(&["runs", "list", "--limit", "1", "--cursor", &cursor])
        .expect(0, "page 2");
    assert!(second.stdout.starts_with(&id), "{}", second.stdout);

    let get = f.cli().run(&["runs", "get", &id]).expect(0, "runs get");
    for want in [
        format!("id:          {id}"),
        "state:       SUCCEEDED".into(),
        "environment: ok".into(),
        "prompt:      list me".into(),
    ] {
        assert!(get.stdout.contains(&want), "{want:?} in {}", get.stdout);
    }
    let got: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "get", &id, "--json"])
            .expect(0, "get --json")
            .stdout,
    )
    .expect("json");
    assert_eq!(got, f.server.run(&id).await, "the API's JSON as it is");

    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    assert_eq!(logs.stdout, "line one: list me\nline two\n");
    assert!(logs.stderr.contains("to stderr"), "{}", logs.stderr);

    let events = f
        .cli()
        .run(&["runs", "events", &id])
        .expect(0, "runs events");
    let kinds: Vec<&str> = events
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(kinds.first(), Some(&"Created"), "{}", events.stdout);
    assert!(kinds.contains(&"Succeeded"), "{}", events.stdout);
    let history: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "events", &id, "--json"])
            .expect(0, "events --json")
            .stdout,
    )
    .expect("json");
    assert_eq!(
        history["events"].as_array().map(Vec::len),
        Some(f.server.events(&id).await.len())
    );

    // A follow-up resumes a finished run; a cancel of a finished run is refused.
    let sent = f
        .cli()
        .run(&["runs", "followup", &id, "once more", "--mode", "plan"])
        .expect(0, "runs followup");
    assert!(sent.stderr.contains("QUEUED"), "{}", sent.stderr);
    let events = f.server.wait_events(&id, "FollowupReceived", 1).await;
    let followup = events
        .iter()
        .find(|e| e["type"] == "FollowupReceived")
        .expect("follow-up");
    assert_eq!(
        (
            followup["data"]["message"].as_str(),
            followup["data"]["mode"].as_str()
        ),
        (Some("once more"), Some("plan"))
    );
    f.server.wait_state(&id, "SUCCEEDED").await;
    let refused = f
        .cli()
        .run(&["runs", "cancel", &id])
        .expect(65, "cancel a finished run");
    assert!(
        refused.stderr.contains("400") && refused.stderr.contains("already SUCCEEDED"),
        "{}",
        refused.stderr
    );
    f.cli()
        .run(&["runs", "followup", &id, "   "])
        .expect(65, "a blank follow-up");
}

#[tokio::test]
async fn a_server_that_is_not_runledger_gives_a_clear_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let client = |server: &str| {
        Client::new(home.path())
            .env("RUNLEDGER_SERVER", server)
            .env("RUNLEDGER_API_KEY", "rl_k")
    };
    let html = hostile(|_| {
        http(
            "200 OK",
            "text/html",
            b"<html><body>Welcome to nginx</body></html>",
        )
    });
    let e = client(&html).run(&["runs", "list"]).expect(76, "HTML");
    assert!(
        e.stderr.contains("not JSON") && e.stderr.contains("<html>"),
        "{}",
        e.stderr
    );
    assert_eq!(e.stderr.lines().count(), 1);

    // 100 MiB announced, and then sent without a length: both refused at 16 MiB.
    let huge = hostile(|_| http("200 OK", "application/json", &vec![b' '; 100 << 20]));
    let started = Instant::now();
    let e = client(&huge)
        .run(&["runs", "get", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "huge");
    assert!(e.stderr.contains("larger than 16 MiB"), "{}", e.stderr);
    let unbounded = hostile(|_| {
        let mut out =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n["
                .to_vec();
        out.extend(std::iter::repeat_n(b'1', 40 << 20));
        out
    });
    let e = client(&unbounded)
        .run(&["runs", "list", "--json"])
        .expect(76, "unbounded");
    assert!(e.stderr.contains("larger than 16 MiB"), "{}", e.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));

    let gateway = hostile(|_| {
        http(
            "502 Bad Gateway",
            "text/html",
            b"<h1>502 Bad Gateway</h1>\n",
        )
    });
    let e = client(&gateway)
        .run(&["runs", "list"])
        .expect(69, "a gateway's error");
    assert!(
        e.stderr.contains("502") && e.stderr.contains("Bad Gateway"),
        "{}",
        e.stderr
    );

    // A transcript stream whose entry is not JSON.
    let stream = hostile(|_| {
        http(
            "200 OK",
            "text/event-stream",
            b"retry: 10\n\nid: 0\nevent: entry\ndata: {nope\n\n",
        )
    });
    let e = client(&stream)
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "a broken stream");
    assert!(e.stderr.contains("not JSON"), "{}", e.stderr);
    // An event stream whose line never ends: refused at 1 MiB, not buffered whole.
    let endless = hostile(|_| {
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nretry: 10\n\ndata: ".to_vec();
        out.extend(std::iter::repeat_n(b'a', 64 << 20));
        out
    });
    let e = client(&endless)
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "an endless line");
    assert!(e.stderr.contains("longer than 1024 KiB"), "{}", e.stderr);
}
