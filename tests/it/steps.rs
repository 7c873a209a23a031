//! `GET /api/v1/agent/runs/{id}/steps` and the pages that show steps, with the real binary and
//! real agent processes: a `command` agent's lines paged by cursor, a preset whose CLI prints
//! the stream-json Claude Code printed in a captured real run (its command shown with its exit
//! status, in the API, the CLI and the session page, rendered without script), and hostile
//! cursors and limits answered as problems.

use crate::common;

use common::{problem, script, Server};
use serde_json::{json, Value};

/// A server with a `command` agent (`cmd`) printing 500 lines and a line of stderr, and a
/// Claude preset (`claude`) whose CLI replays the stdout of the captured real run
/// `tests/fixtures/transcripts/claude-tool-task`.
async fn server(dir: &std::path::Path) -> Server {
    let cmd = dir.join("agent.sh");
    script(
        &cmd,
        "printf 'line %d <b>\\n' $(seq 1 500)\necho 'to stderr' >&2\n",
    );
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/transcripts/claude-tool-task/stdout"
    );
    let replay = dir.join("replay.jsonl");
    std::fs::copy(fixture, &replay).expect("copy fixture");
    let alternating = dir.join("alternating.sh");
    script(&alternating, "seq -f 'out %g' 1 60000\n");
    let claude = dir.join("claude");
    script(&claude, &format!("cat '{}'", replay.display()));
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{}\"]\n\n\
         [[environments]]\nid = \"alternating\"\nharness = \"command\"\ncommand = [\"{}\"]\n\n\
         [[environments]]\nid = \"claude\"\nharness = \"claude\"\ncommand = [\"{}\"]\n",
        cmd.display(),
        alternating.display(),
        claude.display()
    );
    let s = Server::start_in(dir, &config);
    s.wait_ready().await;
    s
}

async fn steps(s: &Server, id: &str, query: &str) -> Value {
    let (status, body) = s
        .get(&s.key, &format!("/agent/runs/{id}/steps{query}"))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_command_agents_lines_page_by_cursor_and_bad_cursors_are_problems() {
    let dir = common::agent_visible_dir();
    let s = server(dir.path()).await;
    let id = s
        .create(json!({"prompt": "print", "config": {"environment_id": "cmd"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;

    // Page by two: every line once, in order, grouped per stream.
    let (mut cursor, mut stdout, mut streams) = ("0".to_string(), String::new(), Vec::new());
    for _ in 0..100 {
        let page = steps(&s, &id, &format!("?limit=2&cursor={cursor}")).await;
        assert_eq!(page["run_id"], id.as_str());
        let list = page["steps"].as_array().expect("steps");
        assert!(list.len() <= 2, "{page}");
        for step in list {
            assert_eq!(step["type"], "output", "{step}");
            let stream = step["stream"].as_str().expect("stream").to_string();
            if stream == "stdout" {
                stdout.push_str(step["text"].as_str().expect("text"));
                stdout.push('\n');
            }
            if streams.last() != Some(&stream) {
                streams.push(stream);
            }
        }
        cursor = page["next_cursor"].as_str().expect("cursor").to_string();
        if page["has_more"] == false {
            break;
        }
    }
    let expected: String = (1..=500).map(|i| format!("line {i} <b>\n")).collect();
    assert_eq!(stdout, expected);
    assert!(streams.contains(&"stderr".to_string()), "{streams:?}");
    // A step's own cursor pages from it.
    let first = steps(&s, &id, "?limit=3").await;
    let second = first["steps"][1]["cursor"]
        .as_str()
        .expect("cursor")
        .to_string();
    let from = steps(&s, &id, &format!("?cursor={second}&limit=1")).await;
    assert_eq!(from["steps"][0], first["steps"][1]);

    // Hostile and malformed queries are problems; a cursor past the end is an empty page.
    for bad in [
        "?cursor=-1",
        "?cursor=1.2.3",
        "?cursor=abc",
        "?limit=0",
        "?limit=1001",
        "?cursor=99999999999999999999",
    ] {
        let r = s
            .client
            .get(s.api(&format!("/agent/runs/{id}/steps{bad}")))
            .bearer_auth(&s.key)
            .send()
            .await
            .expect("req");
        let (status, body) = problem(r).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let past = steps(&s, &id, "?cursor=9000000000").await;
    assert_eq!(past["steps"], json!([]));
    assert_eq!(past["has_more"], false);
    // A cursor inside a line skips the damaged start rather than failing.
    let inside = steps(&s, &id, "?cursor=5").await;
    assert!(inside["steps"].as_array().is_some_and(|s| !s.is_empty()));
    let (status, _) = s
        .get(&s.key, "/agent/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/steps")
        .await;
    assert_eq!(status, 404);
    let r = s
        .client
        .get(s.api(&format!("/agent/runs/{id}/steps")))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn a_presets_command_shows_with_its_exit_status_in_the_api_and_the_session_page() {
    let dir = common::agent_visible_dir();
    let s = server(dir.path()).await;
    let id = s
        .create(json!({"prompt": "write files", "config": {"environment_id": "claude"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let page = steps(&s, &id, "").await;
    let list = page["steps"].as_array().expect("steps");
    let tools: Vec<&Value> = list.iter().filter(|s| s["type"] == "tool").collect();
    assert_eq!(tools.len(), 2, "{page}");
    assert_eq!(tools[0]["tool"], "Write");
    assert_eq!(tools[1]["tool"], "Bash");
    assert_eq!(tools[1]["target"], "echo shell-ok > second.txt");
    assert_eq!(tools[1]["status"], "ok");
    assert_eq!(tools[1]["exit_code"], 0);
    assert!(tools[1]["duration_ms"].is_u64(), "{}", tools[1]);
    assert!(list
        .iter()
        .any(|s| s["type"] == "message" && s["text"] == "Done: wrote both files."));
    assert!(list
        .iter()
        .any(|s| s["type"] == "usage" && s["input_tokens"] == 1434));

    // The CLI prints the same steps, page after page.
    let home = tempfile::tempdir().expect("config home");
    let env = [
        ("RUNLEDGER_SERVER", s.base.as_str()),
        ("RUNLEDGER_API_KEY", s.key.as_str()),
        ("XDG_CONFIG_HOME", home.path().to_str().expect("utf-8")),
    ];
    let (ok, shown, err) = common::cli(&["runs", "steps", &id], &env);
    assert!(ok, "{err}");
    assert!(
        shown.contains("[1] tool Bash echo shell-ok > second.txt (exit 0, "),
        "{shown}"
    );
    assert!(
        shown.contains("[1] agent: Done: wrote both files."),
        "{shown}"
    );
    let (ok, shown, err) = common::cli(&["runs", "steps", &id, "--json"], &env);
    assert!(ok, "{err}");
    let lines: Vec<Value> = shown
        .lines()
        .map(|l| serde_json::from_str(l).expect("a step a line"))
        .collect();
    assert_eq!(lines, *list);

    // The session page, as a browser without script reads it.
    let link = run["session_link"].as_str().expect("session_link");
    let r = s.client.get(link).send().await.expect("page");
    assert_eq!(r.status(), 200);
    let html = r.text().await.expect("html");
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("<details class=\"tool\"><summary><span class=\"tool-name\">Bash</span> <code class=\"target\">echo shell-ok &gt; second.txt</code> <span class=\"exit ok\">exit 0</span>"), "{html}");
    assert!(
        html.contains("<pre class=\"output\">(Bash completed with no output)</pre>"),
        "{html}"
    );
    assert!(html.contains("Done: wrote both files."), "{html}");
    // The raw transcript is one click away, under the same capability link.
    let raw = html
        .split("id=\"raw-link\" href=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("raw link")
        .replace("&amp;", "&");
    let r = s.client.get(s.url(&raw)).send().await.expect("raw page");
    assert_eq!(r.status(), 200);
    let raw_html = r.text().await.expect("html");
    assert!(
        raw_html.contains("tool call Bash: echo shell-ok &gt; second.txt"),
        "{raw_html}"
    );
    // A cursor the steps endpoint never handed out is a problem, after the token is checked.
    let r = s
        .client
        .get(format!("{link}&cursor=nope"))
        .send()
        .await
        .expect("page");
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn the_session_page_folds_long_output_and_pages_many_steps() {
    let dir = common::agent_visible_dir();
    let s = server(dir.path()).await;
    let id = s
        .create(json!({"prompt": "print", "config": {"environment_id": "cmd"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let link = run["session_link"].as_str().expect("session_link");
    let html = s
        .client
        .get(link)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    // 500 lines in groups of up to 200: the long groups are folded, escaped.
    assert!(
        html.contains("lines of stdout: <code>line 1 &lt;b&gt;</code>"),
        "{html}"
    );
    assert!(!html.contains("<b>"));

    // Over 100 steps (groups of up to 200 lines): 100 a page, the next a link away, under the same
    // capability link.
    let id = s
        .create(json!({"prompt": "print", "config": {"environment_id": "alternating"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let mut url = run["session_link"]
        .as_str()
        .expect("session_link")
        .to_string();
    let (mut shown, mut pages) = (Vec::new(), 0);
    for _ in 0..10 {
        let html = s
            .client
            .get(&url)
            .send()
            .await
            .expect("page")
            .text()
            .await
            .expect("html");
        let items = html.matches("<li class=\"step ").count();
        assert!((1..=100).contains(&items), "{items}");
        pages += 1;
        shown.extend(
            html.split("<pre class=\"stdout\">")
                .skip(1)
                .filter_map(|p| p.split("</pre>").next())
                .flat_map(|p| p.lines().map(str::to_string).collect::<Vec<_>>()),
        );
        match html.split("class=\"next-steps\" href=\"").nth(1) {
            Some(rest) => url = s.url(&rest.split('"').next().expect("href").replace("&amp;", "&")),
            None => break,
        }
    }
    assert!(pages >= 2, "{pages}");
    let expected: Vec<String> = (1..=60000).map(|i| format!("out {i}")).collect();
    assert_eq!(shown, expected);
}

#[tokio::test]
async fn the_session_page_shows_the_files_changed_as_a_coloured_diff_per_file() {
    let f = common::agent_visible_dir();
    let dir = f.path();
    let agent = dir.join("edit.sh");
    script(
        &agent,
        "printf 'one\\ntwo\\n<b>three</b>\\n' > a.txt\nprintf 'new\\n' > added.txt\nrm gone.txt\n",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"plain\"\nharness = \"command\"\ncommand = [\"{}\"]\n\
         setup = [\"printf 'one\\\\ntwo\\\\n' > a.txt\", \"printf 'bye\\\\n' > gone.txt\"]\n",
        agent.display()
    );
    let s = Server::start_in(dir, &config);
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "edit", "config": {"environment_id": "plain"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let link = run["session_link"].as_str().expect("session_link");
    let html = s
        .client
        .get(link)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        html.contains("<h2 id=\"changes-h\">Files changed</h2>"),
        "{html}"
    );
    assert!(html.contains("3 files changed"), "{html}");
    assert!(
        html.contains(
            "<code>a.txt</code> <span class=\"tag\">modified</span> <span class=\"add\">+1</span>"
        ),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"add\">+&lt;b&gt;three&lt;/b&gt;</span>"),
        "{html}"
    );
    assert!(html.contains("<span class=\"del\">-bye</span>"), "{html}");
    assert!(
        html.contains("<code>added.txt</code> <span class=\"tag\">added</span>"),
        "{html}"
    );
    assert_eq!(
        html.matches("<details class=\"diff-file\"").count(),
        3,
        "{html}"
    );
    assert!(!html.contains("<b>"));
    // A later page of steps leaves the diff to the first.
    let later = s
        .client
        .get(format!("{link}&cursor=1"))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(!later.contains("Files changed"), "{later}");
    assert!(later.contains("id=\"first-link\""), "{later}");
}
