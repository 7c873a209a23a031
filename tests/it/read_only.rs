//! Read-only preset runs in the default sandbox, with a hostile fake CLI in place of Codex: it
//! reads its workspace, writes through a command and reports the refusal as Codex does, then
//! tries to change the workspace quietly (overwrite, delete, rename, a link from its home, a
//! hard link, a mode change) and checks that its home and `/tmp` stay writable. The run must
//! fail naming the reported write and the workspace must be exactly what setup left. The same
//! script in an `"edit"` environment changes the workspace and succeeds, which shows each probe
//! can tell. The real CLIs are tested the same way in `tests/models/test_read_only.py`.

use crate::common;

use common::{agent_visible_dir, script, Server};
use serde_json::json;

/// Reads, then a reported write, then quiet attempts, each printing `ok:<name>` or `no:<name>`.
const FAKE_CODEX: &str = r#"
[ "$1" = "--version" ] && { echo "codex-cli 0.0.0-fake"; exit 0; }
echo '{"type":"thread.started","thread_id":"thread-ro-1"}'
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "ok:$name"; else echo "no:$name"; fi; }
try read grep -q original README
out=$(sh -c 'echo x > written.txt' 2>&1); rc=$?
printf '{"type":"item.completed","item":{"type":"command_execution","command":"echo x > written.txt","aggregated_output":"%s","exit_code":%d,"status":"%s"}}\n' \
  "$out" "$rc" "$([ "$rc" = 0 ] && echo completed || echo failed)"
try overwrite sh -c 'echo hostile > README'
try remove rm -f .keep
try rename mv notes.md moved.md
try through-home-link sh -c 'ln -s "$PWD/notes.md" "$HOME/link" && echo hostile > "$HOME/link"'
try hard-link ln README "$HOME/hard"
try chmod chmod 777 .
try write-home touch "$HOME/mine"
try write-tmp touch /tmp/mine
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'
"#;

fn probes(text: &str) -> std::collections::BTreeMap<String, bool> {
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("ok:")
                .map(|n| (n.to_string(), true))
                .or_else(|| l.strip_prefix("no:").map(|n| (n.to_string(), false)))
        })
        .collect()
}

/// The workspace's entries and their contents, sorted.
fn contents(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("workspace")
        .flatten()
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_read_only_run_cannot_change_its_workspace_and_fails_naming_the_refused_write() {
    use std::os::unix::fs::PermissionsExt;
    let f = agent_visible_dir();
    let codex = f.path().join("fake-codex");
    script(&codex, FAKE_CODEX);
    let setup = "echo original > README && echo notes > notes.md && touch .keep && chmod 755 .";
    let environment = |id: &str, permissions: &str| {
        format!(
            "[[environments]]\nid = \"{id}\"\nharness = \"codex\"\ncommand = [\"{}\"]\n\
             setup = [\"{setup}\"]\nagent_permissions = \"{permissions}\"\n",
            codex.display()
        )
    };
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{}\n{}",
        environment("review", "read-only"),
        environment("edit", "edit")
    );
    let s = Server::start_in(f.path(), &config);
    s.wait_ready().await;

    let id = s
        .create(json!({"prompt": "review it", "config": {"environment_id": "review"}}))
        .await;
    let run = s.wait_state(&id, "FAILED").await;
    let text = s.transcript_text(&id).await;
    let message = run["status_message"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("command (echo x > written.txt)") && message.contains("denied"),
        "{run}\n{text}"
    );
    assert_eq!(
        run["status_message"]["error_code"], "not_authorized",
        "{run}"
    );
    let did = probes(&text);
    assert_eq!(did.get("read"), Some(&true), "{text}");
    for quiet in [
        "overwrite",
        "remove",
        "rename",
        "through-home-link",
        "hard-link",
        "chmod",
    ] {
        assert_eq!(did.get(quiet), Some(&false), "{quiet}: {text}");
    }
    assert_eq!(did.get("write-home"), Some(&true), "{text}");
    assert_eq!(did.get("write-tmp"), Some(&true), "{text}");
    let ws = s.data_dir.join("workspaces").join(&id);
    assert_eq!(
        contents(&ws),
        [
            (".keep".to_string(), String::new()),
            ("README".to_string(), "original\n".to_string()),
            ("notes.md".to_string(), "notes\n".to_string()),
        ]
    );
    let mode = std::fs::metadata(&ws)
        .expect("workspace")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);

    // The same agent where it may edit: every probe changes the workspace, and nothing is denied.
    let id = s
        .create(json!({"prompt": "edit it", "config": {"environment_id": "edit"}}))
        .await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let text = s.transcript_text(&id).await;
    let did = probes(&text);
    for probe in [
        "read",
        "overwrite",
        "remove",
        "rename",
        "through-home-link",
        "chmod",
    ] {
        assert_eq!(did.get(probe), Some(&true), "{probe}: {run}\n{text}");
    }
    let ws = s.data_dir.join("workspaces").join(&id);
    assert_eq!(
        std::fs::read_to_string(ws.join("README")).expect("README"),
        "hostile\n"
    );
    assert!(ws.join("written.txt").exists());
}
