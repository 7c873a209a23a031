//! Agent output at the sizes real agents print: long lines of multi-byte characters reach the
//! transcript character for character (through real pipes, and through the real binary with
//! real agent processes), the session page carries no control bytes, a failure message cuts
//! every stderr line the same way, and the events API pages through a long history.

mod common;

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

/// Every entry of a run's transcript, paged with `offset` until `has_more` is false.
async fn transcript(s: &Server, id: &str) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut offset = 0;
    loop {
        let (status, page) = s
            .get(
                &s.key,
                &format!("/agent/runs/{id}/transcript?offset={offset}&limit=10000"),
            )
            .await;
        assert_eq!(status, 200, "{page}");
        entries.extend(page["entries"].as_array().cloned().unwrap_or_default());
        offset = page["next_offset"].as_u64().expect("next_offset");
        if page["has_more"] != true {
            return entries;
        }
    }
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
    let dir = tempfile::tempdir().expect("tempdir");
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

    let entries = transcript(&s, &id).await;
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
    let dir = tempfile::tempdir().expect("tempdir");
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
