//! `run` and `runs logs` following a run: output streamed and exit by outcome, a cancel while
//! waiting, a 200 KB transcript whole, a dropped stream resumed, polling a server without the
//! stream, follow-ups typed on a terminal.

use super::support::*;
use serde_json::json;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::Stdio;

#[tokio::test]
async fn run_follow_streams_the_agents_output_and_exits_by_the_runs_outcome() {
    let f = Fixture::start().await;
    let ok = f
        .cli()
        .run(&[
            "run", "hello", "--env", "ok", "--title", "greeting", "--follow",
        ])
        .expect(0, "a run that succeeds");
    let id = ok.id();
    assert_eq!(
        ok.stdout,
        format!("{id}\nline one: hello\nline two\n"),
        "stdout holds the id and the agent's stdout, nothing else"
    );
    assert!(ok.stderr.contains("to stderr\n"), "{}", ok.stderr);
    assert!(ok.stderr.contains("session: http"), "{}", ok.stderr);
    // runledger's own notes go to stderr, marked, when stderr is not a terminal.
    assert!(ok.stderr.contains("[system] "), "{}", ok.stderr);
    let run = f.server.run(&id).await;
    assert_eq!(
        (run["state"].as_str(), run["title"].as_str()),
        (Some("SUCCEEDED"), Some("greeting"))
    );

    let failed = f
        .cli()
        .run(&["run", "break", "--env", "fails", "--follow"])
        .expect(1, "a run that fails");
    assert!(
        failed.stdout.contains("about to fail\n"),
        "{}",
        failed.stdout
    );
    assert!(failed.stderr.contains("FAILED"), "{}", failed.stderr);
    f.cli()
        .run(&["run", "break", "--env", "fails", "--wait"])
        .expect(1, "waiting for a run that fails");
    let waited = f
        .cli()
        .run(&["run", "hi", "--env", "ok", "--wait"])
        .expect(0, "waiting for a run that succeeds");
    assert_eq!(
        waited.stdout.lines().count(),
        1,
        "--wait prints only the id"
    );
}

#[tokio::test]
async fn a_run_cancelled_while_run_waits_exits_2() {
    let f = Fixture::start().await;
    for mode in ["--wait", "--follow"] {
        let mut child = f.cli().spawn(&["run", "long", "--env", "slow", mode]);
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut id = String::new();
        stdout.read_line(&mut id).expect("the run id");
        let id = id.trim().to_string();
        if mode == "--follow" {
            // The agent's first line, followed live.
            let mut started = String::new();
            stdout.read_line(&mut started).expect("read");
            assert_eq!(started, "started\n");
        } else {
            f.server.wait_state(&id, "INPROGRESS").await;
        }
        let cancel = f
            .cli()
            .run(&["runs", "cancel", &id])
            .expect(0, "runs cancel");
        assert!(
            cancel.stderr.contains(&format!("cancelled run {id}")),
            "{}",
            cancel.stderr
        );
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).expect("read");
        assert_eq!(rest, "", "{mode}: nothing more on stdout");
        let waited = wait(child, 30);
        assert_eq!(waited.code, 2, "{mode}: {}", waited.stderr);
        assert!(waited.stderr.contains("CANCELLED"), "{}", waited.stderr);
    }
}

#[tokio::test]
async fn a_200_kb_transcript_comes_out_byte_for_byte() {
    let f = Fixture::start().await;
    let followed = f
        .cli()
        .run(&["run", "big", "--env", "big", "--follow"])
        .expect(0, "run --follow");
    let id = followed.id();
    let want = big_output();
    assert_eq!(want.len(), 2000 * 101 + 40_001);
    assert!(
        followed.stdout == format!("{id}\n{want}"),
        "run --follow: {} bytes of stdout, want {}",
        followed.stdout.len(),
        id.len() + 1 + want.len()
    );
    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    assert!(
        logs.stdout == want,
        "runs logs: {} bytes",
        logs.stdout.len()
    );
    let logs = f
        .cli()
        .run(&["runs", "logs", &id, "-f"])
        .expect(0, "runs logs -f");
    assert!(
        logs.stdout == want,
        "runs logs -f: {} bytes",
        logs.stdout.len()
    );
    // A reader that stops early (`| head`) ends the client with an error, not a panic.
    let mut child = f.cli().spawn(&["runs", "logs", &id]);
    let mut head = [0; 10];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut head)
        .expect("read");
    let cut = wait(child, 30).expect(70, "a closed stdout");
    assert!(cut.stderr.contains("Broken pipe"), "{}", cut.stderr);
}

#[tokio::test]
async fn a_dropped_transcript_stream_is_resumed_after_the_last_entry() {
    let home = tempfile::tempdir().expect("tempdir");
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    // The first connection sends two entries (the second a line's first piece) and drops;
    // the second must ask for what follows the second entry.
    let server = hostile(move |request| {
        let mut seen = seen.lock().expect("lock");
        seen.push(request.to_ascii_lowercase());
        let entry = |offset: u64, stream: &str, text: &str, continued: bool| {
            format!(
                "id: {offset}\nevent: entry\ndata: {}\n\n",
                json!({"offset": offset, "at": "2026-11-26T00:00:00.000Z", "execution": 1,
                       "stream": stream, "text": text, "continued": continued})
            )
        };
        let body = if seen.len() == 1 {
            format!(
                "retry: 10\n\n{}{}",
                entry(0, "stdout", "first", false),
                entry(90, "stdout", "sec", true)
            )
        } else {
            format!(
                "retry: 10\n\n: keep-alive\n\n{}{}{}event: end\ndata: {{\"state\":\"FAILED\"}}\n\n",
                entry(180, "stdout", "ond", false),
                entry(270, "system", "the agent exited with status 3", false),
                entry(360, "followup", "(normal) go on", false),
            )
        };
        http("200 OK", "text/event-stream", body.as_bytes())
    });
    let followed = Client::new(home.path())
        .env("RUNLEDGER_SERVER", &server)
        .env("RUNLEDGER_API_KEY", "rl_k")
        .run(&["runs", "logs", "--follow", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(1, "a followed run that failed");
    assert_eq!(followed.stdout, "first\nsecond\n(normal) go on\n");
    assert!(
        followed
            .stderr
            .contains("[system] the agent exited with status 3\n"),
        "{}",
        followed.stderr
    );
    let requests = requests.lock().expect("lock");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[0].contains("accept: text/event-stream"),
        "{}",
        requests[0]
    );
    assert!(!requests[0].contains("last-event-id"), "{}", requests[0]);
    assert!(
        requests[1].contains("last-event-id: 90\r\n"),
        "{}",
        requests[1]
    );
}

#[tokio::test]
async fn lines_typed_on_a_terminal_while_following_are_sent_as_follow_ups() {
    let f = Fixture::start().await;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut child = f
        .cli()
        .stdin(Stdio::from(pty.slave))
        .spawn(&["run", "talk", "--env", "echo", "--follow"]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the run id");
    let id = line.trim().to_string();
    line.clear();
    stdout.read_line(&mut line).expect("ready");
    assert_eq!(line, "ready\n");
    let mut master = std::fs::File::from(pty.master);
    master.write_all(b"also add tests\n").expect("type");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    let followed = wait(child, 30).expect(0, "run --follow with follow-ups");
    assert!(
        rest.contains("(normal) also add tests\n") && rest.contains("agent got: {"),
        "{rest}"
    );
    assert!(
        followed.stderr.contains("follow-up sent"),
        "{}",
        followed.stderr
    );
    let events = f.server.events(&id).await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "FollowupReceived" && e["data"]["message"] == "also add tests"));
}

#[tokio::test]
async fn a_server_without_the_transcript_stream_is_followed_by_polling_its_pages() {
    let home = tempfile::tempdir().expect("tempdir");
    // The transcript as JSON pages only, as servers before the stream answer it: the run ends
    // while the follower polls, with one more entry after the state changed.
    let polls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = polls.clone();
    let server = hostile(move |request| {
        let entry = |offset: u64, text: &str| {
            json!({"offset": offset, "at": "2026-11-26T00:00:00.000Z", "execution": 1,
                   "stream": "stdout", "text": text, "continued": false})
        };
        let first_line = request.lines().next().unwrap_or("");
        let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let page = if first_line.contains("offset=0") {
            json!({"run_id": "r", "state": "INPROGRESS", "entries": [entry(0, "one")],
                   "next_offset": 10, "has_more": false})
        } else if first_line.contains("offset=10") && n < 4 {
            json!({"run_id": "r", "state": "INPROGRESS", "entries": [], "next_offset": 10,
                   "has_more": false})
        } else if first_line.contains("offset=10") {
            json!({"run_id": "r", "state": "SUCCEEDED", "entries": [entry(10, "two")],
                   "next_offset": 20, "has_more": false})
        } else {
            json!({"run_id": "r", "state": "SUCCEEDED", "entries": [], "next_offset": 20,
                   "has_more": false})
        };
        http("200 OK", "application/json", page.to_string().as_bytes())
    });
    let followed = Client::new(home.path())
        .env("RUNLEDGER_SERVER", &server)
        .env("RUNLEDGER_API_KEY", "rl_k")
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(0, "a polled run that succeeded");
    assert_eq!(followed.stdout, "one\ntwo\n");
    assert!(polls.load(std::sync::atomic::Ordering::SeqCst) >= 6);
}
