//! Agent output at the sizes real agents print: long lines of multi-byte characters reach the
//! transcript character for character (through real pipes, and through the real binary with
//! real agent processes), the session page carries no control bytes, a failure message cuts
//! every stderr line the same way, and the events API pages through a long history.

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::Server;
use proptest::prelude::*;
use runledger::exec::lines::{rebuild, Piece, Splitter, ENTRY_BYTES};
use serde_json::{json, Value};

/// Characters of 1 to 4 bytes.
const CHARS: [&str; 7] = ["a", "é", "ж", "€", "中", "😀", "𝄞"];

/// `bytes` written to `cat` in writes of the given sizes and read back in reads of the given
/// sizes, through the splitter.
fn through_pipes(bytes: &[u8], writes: &[usize], reads: &[usize]) -> Vec<Piece> {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    let mut stdin = cat.stdin.take().expect("stdin");
    let mut stdout = cat.stdout.take().expect("stdout");
    let input = bytes.to_vec();
    let writes = writes.to_vec();
    let writer = std::thread::spawn(move || {
        let mut rest = &input[..];
        for size in writes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let n = (*size).clamp(1, rest.len());
            stdin.write_all(&rest[..n]).expect("write");
            rest = &rest[n..];
        }
    });
    let mut splitter = Splitter::default();
    let mut pieces = Vec::new();
    let mut buf = vec![0u8; reads.iter().copied().max().unwrap_or(1)];
    for size in reads.iter().cycle() {
        let n = stdout.read(&mut buf[..*size]).expect("read");
        if n == 0 {
            break;
        }
        splitter.push(&buf[..n], &mut pieces);
    }
    pieces.extend(splitter.finish());
    writer.join().expect("writer");
    cat.wait().expect("cat exits");
    pieces
}

/// A line from `(character, repeat)` runs, with an occasional invalid byte.
fn line() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((0..CHARS.len() + 1, 1usize..150_000), 1..5).prop_map(|runs| {
        let mut line = Vec::new();
        for (c, n) in runs {
            match CHARS.get(c) {
                Some(c) => line.extend(c.repeat(n / c.len()).into_bytes()),
                // Invalid: a stray continuation byte and a truncated 3-byte sequence.
                None => line.extend_from_slice(b"\x80\xe2\x82"),
            }
        }
        line.truncate(1 << 20);
        line
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn output_read_through_pipes_rebuilds_to_the_input(
        lines in proptest::collection::vec(line(), 1..4),
        last_newline in any::<bool>(),
        writes in proptest::collection::vec(1usize..100_000, 1..6),
        reads in proptest::collection::vec(1usize..70_000, 1..6),
    ) {
        let mut input = lines.join(&b'\n');
        if last_newline {
            input.push(b'\n');
        }
        let pieces = through_pipes(&input, &writes, &reads);
        let mut expected = String::from_utf8_lossy(&input).into_owned();
        if !expected.ends_with('\n') {
            expected.push('\n');
        }
        prop_assert_eq!(rebuild(&pieces), expected);
        for p in &pieces {
            prop_assert!(p.text.len() <= 3 * ENTRY_BYTES);
        }
    }
}

fn agent(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    common::script(&path, body);
    path.display().to_string()
}

fn config(environments: &str) -> String {
    format!("[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{environments}\n")
}

/// The text of one stream, rebuilt as `docs/api.md` says: a newline after every entry that is
/// not `continued`.
fn stream_text(entries: &[Value], stream: &str) -> String {
    let mut text = String::new();
    for e in entries.iter().filter(|e| e["stream"] == stream) {
        text.push_str(e["text"].as_str().expect("text"));
        if e["continued"] != true {
            text.push('\n');
        }
    }
    text
}

/// About 1 MB of 2-, 3- and 4-byte characters in an irregular order, so the cuts fall at every
/// position inside a character.
fn mixed_line() -> String {
    let chars = ["é", "€", "😀", "ж", "中", "𝄞"];
    let mut line = String::new();
    let mut x: u32 = 7;
    while line.len() < 1_000_000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        line.push_str(chars[(x >> 16) as usize % chars.len()]);
    }
    line
}

#[tokio::test]
async fn long_lines_of_multi_byte_characters_reach_the_transcript_whole() {
    let dir = common::agent_visible_dir();
    let euro = "€".repeat(30_000);
    let mixed = mixed_line();
    std::fs::write(dir.path().join("euro.txt"), format!("{euro}\n")).expect("write");
    std::fs::write(dir.path().join("mixed.txt"), format!("{mixed}\n")).expect("write");
    // The last stderr line has no newline and is 1,150 characters long.
    std::fs::write(dir.path().join("last.txt"), "é".repeat(1_150)).expect("write");
    let files = dir.path().display();
    let agent = agent(
        dir.path(),
        "agent.sh",
        &format!(
            "cat {files}/euro.txt; cat {files}/mixed.txt; cat {files}/mixed.txt >&2\n\
             echo short >&2; cat {files}/last.txt >&2; exit 3"
        ),
    );
    let s = Server::start_in(
        dir.path(),
        &config(&format!(
            "[[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n"
        )),
    );
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "print long lines"})).await;
    let run = s.wait_state(&id, "FAILED").await;

    let entries = s.transcript(&id).await;
    assert_eq!(
        stream_text(&entries, "stdout"),
        format!("{euro}\n{mixed}\n")
    );
    let last = "é".repeat(1_150);
    assert_eq!(
        stream_text(&entries, "stderr"),
        format!("{mixed}\nshort\n{last}\n")
    );
    for e in &entries {
        let text = e["text"].as_str().expect("text");
        assert!(!text.contains('\u{FFFD}'), "a replacement character");
        assert!(
            text.len() <= ENTRY_BYTES,
            "an entry of {} bytes",
            text.len()
        );
    }

    // Every line of the failure message is cut by the same rule, the last one included.
    let message = run["status_message"]["message"].as_str().expect("message");
    let lines: Vec<&str> = message.lines().collect();
    let cut_mixed: String = mixed.chars().take(300).chain(['…']).collect();
    assert_eq!(
        lines[1..],
        [
            cut_mixed.as_str(),
            "short",
            &format!("{}…", "é".repeat(300))
        ],
        "{message}"
    );
}

#[tokio::test]
async fn the_session_page_carries_no_control_bytes() {
    let dir = common::agent_visible_dir();
    let agent = agent(
        dir.path(),
        "agent.sh",
        r"printf 'nul\000\000 bell\007 esc\033[31mred\033[0m cr\r del\177 tab\there\n'
head -c 423 /dev/zero; echo",
    );
    let s = Server::start_in(
        dir.path(),
        &config(&format!(
            "[[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n"
        )),
    );
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "print control bytes \u{1}\u{7}"}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let link = run["session_link"].as_str().expect("session_link");
    let html = reqwest::get(link)
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    let controls: Vec<char> = html
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(controls.is_empty(), "control characters {controls:?}");
    // They are shown, as the symbols for control characters.
    assert!(
        html.contains("nul␀␀ bell␇ esc␛[31mred␛[0m cr␍ del␡ tab\there"),
        "{html}"
    );
    assert!(html.contains(&"␀".repeat(423)));
}

/// Events of a run's history as `export` writes them: `Created` and `Started` of a real run,
/// then follow-ups of about 1 KB (multi-byte characters and escapes included) up to `total`
/// events with the real run's `Succeeded` last.
fn long_history(exported: &str, total: u64) -> Vec<String> {
    // What the execution used depends on the host (CPU time where it can be measured); this
    // history is about size, so it is left out.
    let lines: Vec<&str> = exported
        .lines()
        .filter(|l| {
            !l.contains("\"type\":\"UsageRecorded\"")
                && !l.contains("\"type\":\"Provenance\"")
                && !l.contains("\"type\":\"Changes\"")
        })
        .collect();
    assert_eq!(lines.len(), 3, "{exported}");
    // Made up from a real run's lines, the history cannot carry the links of a chain: it is
    // written as an export from before chains (no `link`), which imports as unverified.
    let unlinked = |line: &str| {
        let mut v: Value = serde_json::from_str(line).expect("json");
        if let Some(fields) = v.as_object_mut() {
            fields.remove("link");
        }
        v
    };
    let started = unlinked(lines[1]);
    let run_id = started["run_id"].as_str().expect("run_id");
    let at = started["at"].as_str().expect("at");
    let mut history = vec![unlinked(lines[0]).to_string(), started.to_string()];
    for seq in 2..total - 1 {
        let message = format!("follow-up {seq}: {} \"quoted\"\t€😀", "é".repeat(480));
        history.push(format!(
            "{{\"run_id\":\"{run_id}\",\"seq\":{seq},\"at\":\"{at}\",\"type\":\"FollowupReceived\",\
             \"data\":{{\"message\":{},\"mode\":\"plan\",\"by\":\"01KAKBYKEY0000000000000000\"}}}}",
            Value::String(message)
        ));
    }
    let mut last = unlinked(lines[2]);
    last["seq"] = json!(total - 1);
    history.push(last.to_string());
    history
}

#[tokio::test]
async fn a_history_of_20000_events_is_paged_streamed_and_exported_whole() {
    const TOTAL: u64 = 20_000;
    let dir = common::agent_visible_dir();
    let agent = agent(dir.path(), "agent.sh", "echo done");
    let config = config(&format!(
        "[[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n"
    ));
    // A real run, exported, grown to 20,000 events and imported into a new data directory.
    let first = dir.path().join("first");
    std::fs::create_dir(&first).expect("mkdir");
    let mut s = Server::start_in(&first, &config);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "a long history"})).await;
    s.wait_state(&id, "SUCCEEDED").await;
    s.kill();
    let data = s.data_dir.display().to_string();
    let (ok, exported, err) = common::cli(&["export", "--data-dir", &data], &[]);
    assert!(ok, "{err}");
    let history = long_history(&exported, TOTAL);
    let backup = dir.path().join("history.jsonl");
    std::fs::write(&backup, history.join("\n") + "\n").expect("write");
    let second = dir.path().join("second");
    std::fs::create_dir(&second).expect("mkdir");
    let data = second.join("data").display().to_string();
    let (ok, _, err) = common::cli(
        &["import", &backup.display().to_string(), "--data-dir", &data],
        &[],
    );
    assert!(ok, "{err}");
    let expected: Vec<Value> = history
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();

    // The CLI prints every event once, in order.
    let (ok, printed, err) = common::cli(&["events", "--json", "--data-dir", &data, &id], &[]);
    assert!(ok, "{err}");
    let printed: Vec<Value> = printed
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(printed.len(), expected.len());
    assert!(printed == expected, "the CLI printed another history");

    let s = Server::start_in(&second, &config);
    s.wait_ready().await;
    // Without parameters: the first page, of at most 1,000 events, and where to go on.
    let (status, first_page) = s.get(&s.key, &format!("/agent/runs/{id}/events")).await;
    assert_eq!(status, 200, "{first_page}");
    let n = first_page["events"].as_array().expect("events").len();
    assert!(n > 0 && n <= 1000, "{n} events");
    assert_eq!(first_page["next"], json!(n - 1));

    // Paged to the end with the largest limit: pages end at 1 MiB, nothing missing or repeated.
    let mut events = Vec::new();
    let mut pages = 0;
    let mut after = None;
    loop {
        let query = after.map_or(String::new(), |a| format!("&after_seq={a}"));
        let url = s.api(&format!("/agent/runs/{id}/events?limit=10000{query}"));
        let body = s
            .client
            .get(url)
            .bearer_auth(&s.key)
            .send()
            .await
            .expect("page")
            .bytes()
            .await
            .expect("body");
        assert!(
            body.len() < (1 << 20) + 8192,
            "a page of {} bytes",
            body.len()
        );
        let page: Value = serde_json::from_slice(&body).expect("json");
        pages += 1;
        let got = page["events"].as_array().expect("events");
        assert!(got.len() < 10_000);
        events.extend(got.iter().cloned());
        match page["next"].as_u64() {
            Some(next) => {
                assert_eq!(Some(next), got.last().and_then(|e| e["seq"].as_u64()));
                after = Some(next);
            }
            None => break,
        }
    }
    assert!(pages >= 20, "{pages} pages");
    assert_eq!(events.len(), expected.len());
    assert!(events == expected, "the pages differ from the history");

    // The end, and bad cursors.
    let (_, last) = s
        .get(
            &s.key,
            &format!("/agent/runs/{id}/events?after_seq={}", TOTAL - 2),
        )
        .await;
    assert_eq!(last["events"].as_array().map(Vec::len), Some(1));
    assert!(last.get("next").is_none(), "{last}");
    let (status, past) = s
        .get(
            &s.key,
            &format!("/agent/runs/{id}/events?after_seq={TOTAL}"),
        )
        .await;
    assert_eq!((status, past["events"].clone()), (200, json!([])));
    for bad in ["after_seq=-1", "after_seq=x", "limit=0", "limit=10001"] {
        let (status, problem) = s
            .get(&s.key, &format!("/agent/runs/{id}/events?{bad}"))
            .await;
        assert_eq!(status, 400, "{bad}: {problem}");
    }

    // The stream sends the same history, then a follow-up's events as a real agent runs.
    let mut stream = s
        .client
        .get(s.api(&format!("/agent/runs/{id}/events?keep_open=true")))
        .bearer_auth(&s.key)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    let mut buffer = Vec::new();
    let mut streamed: Vec<Value> = Vec::new();
    let mut followed = false;
    // Until the follow-up's execution has ended (its `UsageRecorded`, where the host measures
    // CPU time, comes just before).
    let ended = |streamed: &[Value]| {
        streamed
            .get(TOTAL as usize..)
            .is_some_and(|new| new.iter().any(|e| e["type"] == "Succeeded"))
    };
    while !ended(&streamed) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), stream.chunk())
            .await
            .expect("an event within 30 s")
            .expect("stream read")
            .expect("stream open");
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let message: Vec<u8> = buffer.drain(..end + 2).collect();
            let message = String::from_utf8(message).expect("utf-8");
            if let Some(data) = message.lines().find_map(|l| l.strip_prefix("data: ")) {
                streamed.push(serde_json::from_str(data).expect("json"));
            }
        }
        if !followed && streamed.len() >= TOTAL as usize {
            followed = true;
            let (status, v) = s.followup(&id, json!({"message": "once more"})).await;
            assert_eq!(status, 200, "{v}");
        }
    }
    assert!(
        streamed[..TOTAL as usize] == expected[..],
        "the stream differs"
    );
    let kinds: Vec<&str> = streamed[TOTAL as usize..]
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|kind| *kind != "UsageRecorded")
        .collect();
    assert_eq!(
        kinds,
        [
            "FollowupReceived",
            "Started",
            "Provenance",
            "Changes",
            "Succeeded"
        ]
    );
    assert_eq!(s.events(&id).await.len(), streamed.len());
}
