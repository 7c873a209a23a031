//! The steps of the real CLIs' output captured in `tests/fixtures/transcripts`, and paging
//! through a transcript written by `Transcripts` itself.

use runledger_domain::harness::Harness;
use runledger_domain::{RunId, Timestamp};

use super::*;
use crate::transcript::{Entry, Transcripts};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/transcripts/{name}/stdout",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).expect("fixture")
}

/// A transcript whose entries are `(stream, text)`, one millisecond apart.
fn transcript(entries: &[(&str, &str)]) -> (tempfile::TempDir, Transcripts, RunId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let transcripts = Transcripts::open(dir.path()).expect("open");
    let id = RunId::new(Timestamp(1), 1);
    for (i, (stream, text)) in entries.iter().enumerate() {
        transcripts
            .append(
                id,
                &Entry {
                    at: Timestamp(1000 + i as u64),
                    execution: 1,
                    stream: (*stream).into(),
                    text: (*text).into(),
                    continued: false,
                },
            )
            .expect("append");
    }
    (dir, transcripts, id)
}

fn read_page(t: &Transcripts, id: RunId, harness: Harness, cursor: Cursor, limit: usize) -> Page {
    page(harness, cursor, limit, false, |offset, max| {
        t.read(id, offset, usize::MAX, max)
    })
    .expect("page")
}

/// Every step of a transcript, page by page of `limit`.
fn all_steps(t: &Transcripts, id: RunId, harness: Harness, limit: usize) -> Vec<Step> {
    let (mut steps, mut cursor) = (Vec::new(), Cursor::default());
    for _ in 0..10_000 {
        let p = read_page(t, id, harness, cursor, limit);
        steps.extend(p.steps);
        if !p.more {
            return steps;
        }
        assert!(p.next_cursor > cursor, "a page moves on");
        cursor = p.next_cursor;
    }
    panic!("paging did not end");
}

fn stdout_of(name: &str) -> Vec<(&'static str, String)> {
    fixture(name)
        .lines()
        .map(|l| ("stdout", l.to_string()))
        .collect()
}

fn steps_of(name: &str, harness: Harness) -> Vec<Step> {
    let lines = stdout_of(name);
    let entries: Vec<(&str, &str)> = lines.iter().map(|(s, t)| (*s, t.as_str())).collect();
    let (_dir, t, id) = transcript(&entries);
    let whole = all_steps(&t, id, harness, MAX_LIMIT);
    // Page by page gives the same steps as one page.
    for limit in [1, 2, 3] {
        assert_eq!(
            all_steps(&t, id, harness, limit),
            whole,
            "{name} by {limit}"
        );
    }
    whole
}

fn tool(step: &Step) -> (&str, Option<&str>, ToolStatus, Option<i64>) {
    match &step.kind {
        Kind::Tool {
            name,
            target,
            status,
            exit_code,
            ..
        } => (name, target.as_deref(), *status, *exit_code),
        other => panic!("not a tool step: {other:?}"),
    }
}

#[test]
fn claude_codes_tool_task_shows_the_write_the_command_and_its_exit_status() {
    let steps = steps_of("claude-tool-task", Harness::Claude);
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.name()).collect();
    assert_eq!(kinds, ["tool", "tool", "message", "usage"]);
    let (name, target, status, _) = tool(&steps[0]);
    assert_eq!((name, status), ("Write", ToolStatus::Ok));
    assert!(target.is_some_and(|t| t.ends_with("/hello.txt")));
    assert_eq!(
        tool(&steps[1]),
        (
            "Bash",
            Some("echo shell-ok > second.txt"),
            ToolStatus::Ok,
            Some(0)
        )
    );
    let Kind::Tool {
        duration_ms,
        output,
        ..
    } = &steps[1].kind
    else {
        unreachable!()
    };
    // One entry a millisecond: the result is the next entry.
    assert_eq!(*duration_ms, Some(1));
    assert_eq!(output, "(Bash completed with no output)");
    assert_eq!(
        steps[2].kind,
        Kind::Message {
            text: "Done: wrote both files.".into()
        }
    );
    assert!(matches!(
        steps[3].kind,
        Kind::Usage { input_tokens: Some(1434), output_tokens: Some(96), cost_usd: Some(c), .. } if c > 0.0
    ));
}

#[test]
fn a_claude_permission_denial_is_a_failed_call_and_a_denial() {
    let steps = steps_of("claude-permission-denied", Harness::Claude);
    let (name, _, status, _) = tool(&steps[0]);
    assert_eq!((name, status), ("Write", ToolStatus::Error));
    assert!(steps.iter().any(|s| matches!(
        &s.kind,
        Kind::Denial { tool, target: Some(t) } if tool == "Write" && t.ends_with("hello.txt")
    )));
}

#[test]
fn codex_items_become_steps_with_the_commands_exit_status() {
    let steps = steps_of("codex-tool-task", Harness::Codex);
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.name()).collect();
    assert_eq!(kinds, ["tool", "tool", "message", "usage"]);
    let (name, target, status, _) = tool(&steps[0]);
    assert_eq!((name, status), ("file_change", ToolStatus::Ok));
    assert!(target.is_some_and(|t| t.starts_with("add /") && t.ends_with("hello.txt")));
    assert_eq!(
        tool(&steps[1]),
        (
            "shell",
            Some("/bin/bash -lc 'echo shell-ok > second.txt'"),
            ToolStatus::Ok,
            Some(0)
        )
    );
    let Kind::Tool { duration_ms, .. } = &steps[1].kind else {
        unreachable!()
    };
    assert_eq!(*duration_ms, Some(1));
}

#[test]
fn gemini_tool_calls_pair_with_their_results_and_deltas_join() {
    let steps = steps_of("gemini-tool-task", Harness::Gemini);
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.name()).collect();
    assert_eq!(kinds, ["tool", "tool", "message", "usage"]);
    assert_eq!(
        tool(&steps[0]),
        ("write_file", Some("hello.txt"), ToolStatus::Ok, None)
    );
    assert_eq!(
        tool(&steps[1]),
        (
            "run_shell_command",
            Some("echo shell-ok > second.txt"),
            ToolStatus::Ok,
            Some(0)
        )
    );
    let (_dir, t, id) = transcript(&[
        (
            "stdout",
            r#"{"type":"message","role":"assistant","content":"Hel","delta":true}"#,
        ),
        ("stderr", "a warning"),
        (
            "stdout",
            r#"{"type":"message","role":"assistant","content":"lo","delta":true}"#,
        ),
        (
            "stdout",
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"false"}}"#,
        ),
        (
            "stdout",
            r#"{"type":"tool_result","tool_id":"t1","status":"error","output":"Exit Code: 1"}"#,
        ),
    ]);
    let steps = all_steps(&t, id, Harness::Gemini, 100);
    assert_eq!(steps[0].kind, Kind::Message { text: "Hel".into() });
    assert_eq!(steps[1].kind.name(), "output");
    assert_eq!(steps[2].kind, Kind::Message { text: "lo".into() });
    assert_eq!(
        tool(&steps[3]),
        (
            "run_shell_command",
            Some("false"),
            ToolStatus::Error,
            Some(1)
        )
    );
}

#[test]
fn every_captured_transcript_pages_the_same_by_any_limit() {
    for (name, harness) in [
        ("claude-resumed", Harness::Claude),
        ("claude-unauthorized", Harness::Claude),
        ("codex-read-only-sandbox", Harness::Codex),
        ("codex-resumed", Harness::Codex),
        ("codex-unauthorized", Harness::Codex),
        ("gemini-approval-denied", Harness::Gemini),
        ("gemini-resumed", Harness::Gemini),
        ("gemini-unauthorized", Harness::Gemini),
    ] {
        let steps = steps_of(name, harness);
        assert!(!steps.is_empty(), "{name}");
    }
    let codex = steps_of("codex-unauthorized", Harness::Codex);
    assert!(codex.iter().any(|s| s.kind.name() == "error"), "{codex:?}");
}

#[test]
fn a_command_agents_lines_are_grouped_per_stream_and_follow_ups_stay_in_place() {
    let (_dir, t, id) = transcript(&[
        ("system", "execution 1 started"),
        ("stdout", "one"),
        ("stdout", "two\nthree"),
        ("stderr", "oops"),
        ("followup", "(queue) and now the tests"),
        ("stdout", "four"),
    ]);
    let steps = all_steps(&t, id, Harness::Command, 100);
    let shown: Vec<(&str, String)> = steps
        .iter()
        .map(|s| match &s.kind {
            Kind::Output { stream, text, .. } => (stream.as_str(), text.clone()),
            Kind::Followup { mode, text } => ("followup", format!("{mode:?} {text}")),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("system", "execution 1 started".to_string()),
            ("stdout", "one\ntwo\nthree".to_string()),
            ("stderr", "oops".to_string()),
            ("followup", "Some(\"queue\") and now the tests".to_string()),
            ("stdout", "four".to_string()),
        ]
    );
    // JSON a command agent prints is its output, not a CLI's events.
    let (_dir, t, id) = transcript(&[(
        "stdout",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#,
    )]);
    assert_eq!(
        all_steps(&t, id, Harness::Command, 10)[0].kind.name(),
        "output"
    );
}

#[test]
fn one_line_with_several_steps_is_paged_inside_the_line() {
    let line = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"tool_use","id":"1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"2","name":"Read","input":{"file_path":"x"}}]}}"#;
    let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"1","content":"Exit code 3","is_error":true},{"type":"tool_result","tool_use_id":"2","content":"text"}]}}"#;
    let (_dir, t, id) = transcript(&[("stdout", line), ("stdout", result), ("stdout", "plain")]);
    let first = read_page(&t, id, Harness::Claude, Cursor::default(), 2);
    assert_eq!(first.steps.len(), 2);
    assert_eq!(first.next_cursor, Cursor { offset: 0, skip: 2 });
    assert_eq!(
        tool(&first.steps[1]),
        ("Bash", Some("ls"), ToolStatus::Error, Some(3))
    );
    let second = read_page(&t, id, Harness::Claude, first.next_cursor, 2);
    assert_eq!(
        tool(&second.steps[0]),
        ("Read", Some("x"), ToolStatus::Ok, None)
    );
    assert_eq!(second.steps[1].kind.name(), "output");
    assert!(!second.more);
}

#[test]
fn a_call_without_its_result_waits_while_the_run_is_live() {
    let (_dir, t, id) = transcript(&[(
        "stdout",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"tool_use","id":"1","name":"Bash","input":{"command":"sleep 100"}}]}}"#,
    )]);
    let live = page(Harness::Claude, Cursor::default(), 10, true, |o, m| {
        t.read(id, o, usize::MAX, m)
    })
    .expect("page");
    assert_eq!(live.steps.len(), 1);
    assert_eq!(live.next_cursor, Cursor { offset: 0, skip: 1 });
    assert!(live.more);
    let ended = read_page(&t, id, Harness::Claude, Cursor::default(), 10);
    assert_eq!(tool(&ended.steps[1]).2, ToolStatus::NoResult);
}

#[test]
fn long_lines_cut_into_pieces_are_joined_and_output_is_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Transcripts::open(dir.path()).expect("open");
    let id = RunId::new(Timestamp(1), 1);
    let output = "x".repeat(100_000);
    let line = serde_json::json!({"type":"item.completed","item":{"id":"i","type":"command_execution","command":"cat big","aggregated_output":output,"exit_code":0,"status":"completed"}}).to_string();
    let mut pieces = crate::lines::Splitter::default();
    let mut all = Vec::new();
    pieces.push(line.as_bytes(), &mut all);
    pieces.push(b"\n", &mut all);
    all.extend(pieces.finish());
    assert!(all.len() > 2, "the line is cut");
    for piece in all {
        t.append(
            id,
            &Entry {
                at: Timestamp(5),
                execution: 2,
                stream: "stdout".into(),
                text: piece.text,
                continued: piece.continued,
            },
        )
        .expect("append");
    }
    let steps = all_steps(&t, id, Harness::Codex, 10);
    assert_eq!(steps.len(), 1);
    let Kind::Tool {
        output,
        output_truncated,
        exit_code,
        ..
    } = &steps[0].kind
    else {
        panic!()
    };
    assert_eq!(
        (output.len(), *output_truncated, *exit_code),
        (OUTPUT_MAX_BYTES, true, Some(0))
    );
    assert_eq!(steps[0].execution, 2);
}

#[test]
fn paging_a_large_transcript_reads_only_each_pages_entries() {
    // Entries of 100 lines, as a chatty agent's output is read from its pipe.
    let lines: Vec<String> = (0..200)
        .map(|e| {
            (0..100)
                .map(|i| format!("line {}", e * 100 + i))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let entries: Vec<(&str, &str)> = lines.iter().map(|l| ("stdout", l.as_str())).collect();
    let (_dir, t, id) = transcript(&entries);
    let mut read = 0u64;
    let p = page(Harness::Command, Cursor::default(), 2, false, |o, m| {
        let s = t.read(id, o, usize::MAX, m)?;
        read += s.next_offset - o;
        Ok(s)
    })
    .expect("page");
    // 400 lines in two steps of 200; the read stops at the first 1 MiB slice.
    assert_eq!(p.steps.len(), 2);
    assert!(read <= 1 << 20, "{read}");
    let mut read = 0u64;
    let later = page(Harness::Command, p.next_cursor, 1, false, |o, m| {
        let s = t.read(id, o, usize::MAX, m)?;
        assert!(o >= p.next_cursor.offset, "never reads before the cursor");
        read += s.next_offset - o;
        Ok(s)
    })
    .expect("page");
    assert!(
        matches!(&later.steps[0].kind, Kind::Output { text, lines: 200, .. } if text.starts_with("line 400\n"))
    );
}

#[test]
fn groups_and_streamed_messages_number_their_steps_the_same_from_any_cursor() {
    // Entries of many lines each, so groups fill up inside an entry; deltas across entries
    // with several lines each.
    let big: Vec<String> = (0..6)
        .map(|e| {
            (0..170)
                .map(|i| format!("e{e} l{i}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let mut entries: Vec<(&str, &str)> = big.iter().map(|t| ("stdout", t.as_str())).collect();
    entries.push(("stderr", "x"));
    let (_dir, t, id) = transcript(&entries);
    let whole = all_steps(&t, id, Harness::Command, MAX_LIMIT);
    for limit in [1, 2, 5] {
        assert_eq!(
            all_steps(&t, id, Harness::Command, limit),
            whole,
            "by {limit}"
        );
    }
    let delta = |text: &str| {
        format!(r#"{{"type":"message","role":"assistant","content":"{text}","delta":true}}"#)
    };
    let call = r#"{"type":"tool_use","tool_name":"read_file","tool_id":"r","parameters":{"file_path":"a"}}"#;
    let result = r#"{"type":"tool_result","tool_id":"r","status":"success","output":"ok"}"#;
    let lines = [
        delta("a"),
        format!("{}\n{}", delta("b"), call),
        format!("{}\n{}\n{}", result, delta("c"), delta("d")),
        format!("{}\n{}", delta("e"), call),
        result.to_string(),
    ];
    let entries: Vec<(&str, &str)> = lines.iter().map(|l| ("stdout", l.as_str())).collect();
    let (_dir, t, id) = transcript(&entries);
    let whole = all_steps(&t, id, Harness::Gemini, MAX_LIMIT);
    let kinds: Vec<&str> = whole.iter().map(|s| s.kind.name()).collect();
    assert_eq!(kinds, ["message", "tool", "message", "tool"]);
    assert_eq!(whole[2].kind, Kind::Message { text: "cde".into() });
    for limit in [1, 2, 3] {
        assert_eq!(
            all_steps(&t, id, Harness::Gemini, limit),
            whole,
            "by {limit}"
        );
    }
}
