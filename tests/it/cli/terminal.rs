//! What a terminal gets: a table, a progress line, dimmed notes, and an agent's escapes made inert.

use super::support::*;
use serde_json::Value;

#[tokio::test]
async fn a_terminal_gets_a_table_a_progress_line_and_dimmed_notes() {
    let f = Fixture::start().await;
    let (waited, shown) = on_terminal(
        f.cli(),
        &[
            "run",
            "hi",
            "--env",
            "ok",
            "--title",
            "for people",
            "--wait",
        ],
        "stderr",
    );
    assert_eq!(waited.code, 0, "{shown}");
    let id = waited.id();
    assert!(
        shown.contains(&format!("\r\x1b[2K{id}  SUCCEEDED  ")),
        "a progress line with the state: {shown:?}"
    );
    let (followed, shown) = on_terminal(f.cli(), &["runs", "logs", &id], "stderr");
    assert_eq!(followed.code, 0, "{shown}");
    assert!(
        shown.contains("\x1b[2mexecution 1 starts") && !shown.contains("[system]"),
        "runledger's notes dimmed: {shown:?}"
    );
    assert_eq!(followed.stdout, "line one: hi\nline two\n");
    let (listed, shown) = on_terminal(f.cli(), &["runs", "list"], "stdout");
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = shown.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert_eq!(lines.len(), 2, "{shown:?}");
    assert!(
        lines[0].starts_with("ID") && lines[0].ends_with("ENVIRONMENT"),
        "{shown:?}"
    );
    let columns: Vec<&str> = lines[1].split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(
        columns[..3],
        [id.as_str(), "SUCCEEDED", "for people"],
        "{shown:?}"
    );
    assert_eq!(columns.last(), Some(&"ok"));
}

#[tokio::test]
async fn an_agents_escapes_and_imitated_system_lines_reach_the_terminal_inert() {
    let f = Fixture::start().await;
    // A title no terminal should obey either: any API client can set one.
    let followed = f
        .cli()
        .run(&[
            "run",
            "hi",
            "--env",
            "tty",
            "--title",
            "t \u{1b}]0;x\u{7} \u{9b}2J",
            "--follow",
        ])
        .expect(0, "run --follow");
    let id = followed.id();
    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    let tailed = f
        .cli()
        .run(&["runs", "logs", &id, "-f"])
        .expect(0, "runs logs -f");
    for (what, ran) in [
        ("run --follow", &followed),
        ("runs logs", &logs),
        ("runs logs -f", &tailed),
    ] {
        assert_inert(what, &ran.stdout);
        assert_inert(what, &ran.stderr);
        // Shown, as escapes, not dropped.
        assert!(
            ran.stdout.contains(
                "title \\x1b]0;owned\\x07 clip \\x1b]52;c;aGVsbG8=\\x07 erase \\x1b[2K\\x1b[1A c1 \\x9b31m\n"
            ),
            "{what}: {:?}",
            ran.stdout
        );
        // The agent's imitations are marked; the CLI's own line is not.
        assert!(
            ran.stdout.contains("\n\\[system] run succeeded\n"),
            "{what}: {:?}",
            ran.stdout
        );
        assert!(
            ran.stdout
                .contains("partial [system] \n\\[runledger] not ours\n"),
            "{what}: {:?}",
            ran.stdout
        );
        assert!(
            ran.stderr
                .contains("\\[system] the agent exited successfully\\x0d\\x1b[2K\n"),
            "{what}: {:?}",
            ran.stderr
        );
        let lines = ran.stdout.lines().chain(ran.stderr.lines());
        let ours: Vec<&str> = lines.filter(|l| l.starts_with("[system] ")).collect();
        assert!(
            ours.contains(&"[system] the agent exited successfully"),
            "{what}: {:?}",
            ran.stderr
        );
        assert!(
            !ours.iter().any(|l| l.contains("run succeeded")),
            "{what}: {ours:?}"
        );
    }
    // On a terminal the CLI's own notes are dimmed with its own escapes; the agent's are not
    // obeyed there either.
    let (_, shown) = on_terminal(f.cli(), &["runs", "logs", &id], "stderr");
    for acting in ["\x1b[2K", "\x1b]", "\u{9b}", "\x07"] {
        assert!(
            !shown.contains(acting),
            "{acting:?} on the terminal: {shown:?}"
        );
    }
    assert!(
        shown.contains("\\[system] the agent exited successfully\\x0d\\x1b[2K"),
        "{shown:?}"
    );
    for args in [
        vec!["runs", "get", &id],
        vec!["runs", "get", &id, "--json"],
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "events", &id],
    ] {
        let shown = f.cli().run(&args).expect(0, "a runs command");
        assert_inert(&args.join(" "), &shown.stdout);
        assert_inert(&args.join(" "), &shown.stderr);
    }
    let json = f
        .cli()
        .run(&["runs", "get", &id, "--json"])
        .expect(0, "runs get --json");
    let run: Value = serde_json::from_str(&json.stdout).expect("still JSON");
    assert_eq!(run["title"], "t \u{1b}]0;x\u{7} \u{9b}2J");
}
