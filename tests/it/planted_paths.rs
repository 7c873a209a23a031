//! The sandbox suite's attack on the paths an agent controls (`docs/security.md`, "Paths the
//! agent controls"): run as root, as `.ci/run` runs it. Agents of a root server plant, where
//! the server writes or reads next, a symbolic link to a file, one to a directory, a hard link
//! and a FIFO, and swap links and files in a loop while a follow-up starts the next execution:
//! in the home (each CLI's configuration), the workspace (attachments, reported artifacts) and
//! the agent files (the MCP and report files, which the agent cannot write there, so the test
//! plants them itself as a host with looser permissions would let it). Afterwards a root-only
//! canary file and directory elsewhere on the host are unchanged in owner, mode and content,
//! and every run either went on or failed naming the path it refused, never by a server error.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::{agent_visible_dir, script, Server};
use serde_json::{json, Value};

const CANARY_TEXT: &str = "{\"canary\": \"root-only\"}\n";

/// A root-only file and directory the agents name in their links.
struct Canary {
    file: PathBuf,
    dir: PathBuf,
}

impl Canary {
    fn plant(base: &Path) -> Canary {
        use std::os::unix::fs::PermissionsExt;
        let home = base.join("host");
        std::fs::create_dir(&home).expect("mkdir");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let file = home.join("root-only.json");
        std::fs::write(&file, CANARY_TEXT).expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let dir = home.join("root-only.d");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::write(dir.join("inside"), CANARY_TEXT).expect("write");
        std::fs::set_permissions(dir.join("inside"), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        Canary { file, dir }
    }

    /// Owner, mode and content as planted; nothing added to the directory.
    fn assert_intact(&self) {
        let digest = |p: &Path| {
            use sha2::{Digest, Sha256};
            Sha256::digest(std::fs::read(p).expect("read canary")).to_vec()
        };
        let planted = {
            use sha2::{Digest, Sha256};
            Sha256::digest(CANARY_TEXT.as_bytes()).to_vec()
        };
        for (path, mode) in [
            (self.file.clone(), 0o100600),
            (self.dir.clone(), 0o040700),
            (self.dir.join("inside"), 0o100600),
        ] {
            let meta = std::fs::symlink_metadata(&path).expect("canary");
            assert_eq!((meta.uid(), meta.gid()), (0, 0), "{}", path.display());
            assert_eq!(meta.mode(), mode, "{}", path.display());
        }
        assert_eq!(digest(&self.file), planted, "the canary file changed");
        assert_eq!(digest(&self.dir.join("inside")), planted);
        let names: Vec<_> = std::fs::read_dir(&self.dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("inside")]);
    }
}

/// A stub CLI (named `gemini` or `codex` on the environment's PATH: only the server's handling
/// of the files is under test) that plays a prompt-injected agent in its first execution: it
/// plants what the run's prompt names where the server writes the CLI's configuration next.
const CLI: &str = r#"case "$0" in
  *gemini) d="${GEMINI_CLI_HOME:-$HOME}/.gemini"; f=settings.json
           echo '{"type":"init","session_id":"sess-gemini-1"}' ;;
  *codex)  d="$CODEX_HOME"; f=config.toml
           echo '{"type":"thread.started","thread_id":"thread-codex-1"}' ;;
esac
cat > /dev/null
if [ "$RUNLEDGER_EXECUTION" = 1 ]; then
  case "$*" in
    *attack=file-link*) mkdir -p "$d"; rm -f "$d/$f"; ln -s "$CANARY" "$d/$f" ;;
    *attack=dir-link*) rm -rf "$d"; ln -s "$CANARY_DIR" "$d" ;;
    *attack=fifo*) mkdir -p "$d"; rm -f "$d/$f"; mkfifo "$d/$f" ;;
    # The kernel's protected_hardlinks refuses this to the agent user; the test then plants it.
    *attack=hard-link*) mkdir -p "$d"; rm -f "$d/$f"; ln "$CANARY" "$d/$f" 2>/dev/null ;;
  esac
fi
echo "execution $RUNLEDGER_EXECUTION done"
exit 0
"#;

/// A command agent attacking the workspace and the agent files, one step per execution.
const COMMAND: &str = r#"a="$RUNLEDGER_ATTACHMENTS_DIR"; files=$(dirname "$RUNLEDGER_REPORT")
report() { printf '{"type":"file","path":"%s"}\n' "$1" >> "$RUNLEDGER_REPORT"; }
case "$RUNLEDGER_EXECUTION" in
  1)
    # The attachments directory becomes a link to the host's directory.
    rm -rf "$a"; ln -s "$CANARY_DIR" "$a"
    ln -s "$CANARY" link.json; mkfifo pipe
    report link.json; report pipe
    # The agent files are the server's: none of these may succeed.
    ln -sf "$CANARY" "$RUNLEDGER_MCP_CONFIG" 2>/dev/null && echo "planted:mcp"
    ln -s "$CANARY" "$files/report-2.jsonl" 2>/dev/null && echo "planted:report"
    ;;
  2)
    [ -d "$a" ] && [ ! -L "$a" ] && cmp -s "$a/notes.md" - <<EOF && echo "attachments:restored"
hello
EOF
    report hard.json
    # Each attachment replaced: by a FIFO, and by a link to the host's file.
    rm -f "$a/notes.md" "$a/data.json"; mkfifo "$a/notes.md"; ln -s "$CANARY" "$a/data.json"
    ;;
  *)
    [ -f "$a/notes.md" ] && [ ! -L "$a/data.json" ] && [ -f "$a/data.json" ] && echo "attachments:regular"
    ;;
esac
echo "execution $RUNLEDGER_EXECUTION done"
"#;

/// Swaps `name` (relative to `cwd`) between a link to `target` and a real file or directory,
/// as fast as it can, as the user that owns `cwd` (the agent's), until dropped.
struct Swap(Child);

impl Swap {
    fn start(cwd: &Path, name: &str, target: &Path, dir: bool) -> Swap {
        let meta = std::fs::metadata(cwd).expect("cwd");
        let child = Command::new("setpriv")
            .arg(format!("--reuid={}", meta.uid()))
            .arg(format!("--regid={}", meta.gid()))
            .arg("--clear-groups")
            .args(["sh", "-c"])
            .arg(
                r#"n=$1; t=$2; kind=$3
while :; do
  ln -sfn "$t" .swap$$ && mv -fT .swap$$ "$n"
  rm -rf "$n"; if [ "$kind" = dir ]; then mkdir "$n"; else echo '{}' > "$n"; fi
done >/dev/null 2>&1"#,
            )
            .arg("swap")
            .arg(name)
            .arg(target)
            .arg(if dir { "dir" } else { "file" })
            .current_dir(cwd)
            .spawn()
            .expect("setpriv");
        Swap(child)
    }
}

impl Drop for Swap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for the run's `n`th finished execution; returns the run.
async fn finished(s: &Server, id: &str, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // A server blocked on a FIFO answers nothing: a failure, not a hang.
        let events = tokio::time::timeout(std::time::Duration::from_secs(10), s.events(id))
            .await
            .unwrap_or_else(|_| panic!("the server stopped answering during run {id}"));
        let ended = events
            .iter()
            .filter(|e| e["type"] == "Succeeded" || e["type"] == "Failed")
            .count();
        if ended >= n {
            return s.run(id).await;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} never finished execution {n}: {events:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The run went on, or failed naming a refused path in `place`; never a server error.
fn went_on_or_refused(run: &Value, place: &str) {
    if run["state"] == "SUCCEEDED" {
        return;
    }
    assert_eq!(run["state"], "FAILED", "{run}");
    let status = &run["status_message"];
    let message = status["message"].as_str().unwrap_or_default();
    assert_ne!(status["error_code"], "internal_error", "{run}");
    assert!(
        message.contains("refused") && message.contains(place),
        "the failure does not name the refused path {place}: {run}"
    );
}

fn setup(base: &Path, canary: &Canary) -> Server {
    let bin = base.join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    for cli in ["gemini", "codex"] {
        script(&bin.join(cli), CLI);
    }
    let command = base.join("hostile.sh");
    script(&command, COMMAND);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let env = format!(
        "env = {{ PATH = {path:?}, CANARY = {file:?}, CANARY_DIR = {dir:?} }}\n",
        file = canary.file.display().to_string(),
        dir = canary.dir.display().to_string(),
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 1\n\n\
         [[environments]]\nid = \"gemini\"\nharness = \"gemini\"\n{env}\n\
         [[environments]]\nid = \"codex\"\nharness = \"codex\"\n{env}\n\
         [[environments]]\nid = \"cmd\"\nharness = \"command\"\ncommand = [\"{command}\"]\n{env}",
        command = command.display(),
    );
    let server_path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Server::start_with(base, &config, &[("PATH", server_path)])
}

fn home(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("agent-files").join(id).join("home")
}

#[tokio::test]
async fn links_fifos_and_hard_links_planted_for_a_cli_config_are_never_followed() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the server must be root for its agents to be another user");
        return;
    }
    let f = agent_visible_dir();
    let canary = Canary::plant(f.path());
    let s = setup(f.path(), &canary);
    s.wait_ready().await;

    let mut runs = Vec::new();
    for (environment, dir, file) in [
        ("gemini", ".gemini", "settings.json"),
        ("codex", ".codex", "config.toml"),
    ] {
        for attack in ["file-link", "dir-link", "fifo", "hard-link"] {
            let id = s
                .create(json!({
                    "prompt": format!("attack={attack}"),
                    "config": {"environment_id": environment}
                }))
                .await;
            runs.push((id, environment, dir, file, attack));
        }
    }
    for (id, environment, dir, file, attack) in &runs {
        let first = finished(&s, id, 1).await;
        assert_eq!(
            first["state"], "SUCCEEDED",
            "{environment} {attack}: {first}"
        );
        let planted = home(&s, id).join(dir).join(file);
        if *attack == "hard-link" && std::fs::metadata(&planted).is_err() {
            // What the kernel refused the agent: planted as a host without
            // protected_hardlinks would have let it.
            std::fs::create_dir_all(planted.parent().expect("dir")).expect("mkdir");
            std::fs::hard_link(&canary.file, &planted).expect("hard link");
        }
        let (status, v) = s.followup(id, json!({"message": "go on"})).await;
        assert_eq!(status, 200, "{v}");
    }
    for (id, environment, dir, file, attack) in &runs {
        let run = finished(&s, id, 2).await;
        // Every planted thing is refused by name.
        assert_eq!(run["state"], "FAILED", "{environment} {attack}: {run}");
        let named = if *attack == "dir-link" {
            dir.to_string()
        } else {
            format!("{dir}/{file}")
        };
        went_on_or_refused(&run, &named);
        canary.assert_intact();
    }
    canary.assert_intact();
}

#[tokio::test]
async fn a_swap_loop_during_follow_ups_never_reaches_the_host() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the server must be root for its agents to be another user");
        return;
    }
    let f = agent_visible_dir();
    let canary = Canary::plant(f.path());
    let s = setup(f.path(), &canary);
    s.wait_ready().await;
    for (environment, dir, file) in [
        ("gemini", ".gemini", "settings.json"),
        ("codex", ".codex", "config.toml"),
    ] {
        let id = s
            .create(json!({"prompt": "work", "config": {"environment_id": environment}}))
            .await;
        assert_eq!(finished(&s, &id, 1).await["state"], "SUCCEEDED");
        let home = home(&s, &id);
        // One loop swaps the CLI's directory, one its file, while follow-ups start executions.
        let _dir = Swap::start(&home, dir, &canary.dir, true);
        let _file = Swap::start(&home, &format!("{dir}/{file}"), &canary.file, false);
        for n in 2..=6 {
            let (status, v) = s.followup(&id, json!({"message": "again"})).await;
            assert_eq!(status, 200, "{v}");
            let run = finished(&s, &id, n).await;
            went_on_or_refused(&run, dir);
            canary.assert_intact();
        }
    }
    canary.assert_intact();
}

#[tokio::test]
async fn the_workspace_and_agent_files_are_never_followed() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the server must be root for its agents to be another user");
        return;
    }
    use base64::Engine;
    let f = agent_visible_dir();
    let canary = Canary::plant(f.path());
    let s = setup(f.path(), &canary);
    s.wait_ready().await;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let id = s
        .create(json!({
            "prompt": "work",
            "config": {"environment_id": "cmd"},
            "attachments": [
                {"file_name": "notes.md", "mime_type": "text/markdown", "data": b64("hello\n")},
                {"file_name": "data.json", "mime_type": "application/json", "data": b64("{}")},
            ]
        }))
        .await;
    let first = finished(&s, &id, 1).await;
    assert_eq!(first["state"], "SUCCEEDED", "{first}");
    let text = s.transcript_text(&id).await;
    assert!(
        !text.contains("planted:"),
        "the agent wrote the agent files: {text}"
    );
    assert!(text.contains("path \"link.json\""), "{text}");
    assert!(text.contains("not a regular file"), "{text}");

    // What the agent could not plant in the server's agent files, planted as a looser host
    // would let it: a link as the MCP file, a FIFO as the next report file; and a hard link
    // to the host's file in the workspace, which the agent reports next.
    let files = s.data_dir.join("agent-files").join(&id);
    let workspace = s.data_dir.join("workspaces").join(&id);
    std::fs::remove_file(files.join("mcp.json")).expect("remove");
    std::os::unix::fs::symlink(&canary.file, files.join("mcp.json")).expect("link");
    nix::unistd::mkfifo(
        &files.join("report-2.jsonl"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .expect("fifo");
    std::fs::hard_link(&canary.file, workspace.join("hard.json")).expect("hard link");

    let (status, v) = s.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200, "{v}");
    let second = finished(&s, &id, 2).await;
    assert_eq!(second["state"], "SUCCEEDED", "{second}");
    let text = s.transcript_text(&id).await;
    assert!(text.contains("attachments:restored"), "{text}");
    assert!(text.contains("hard links"), "{text}");
    assert!(std::fs::symlink_metadata(files.join("mcp.json"))
        .expect("mcp")
        .is_file());
    canary.assert_intact();

    // The attachments directory swapped with a link while the next executions place them.
    let dot = workspace.join(".runledger");
    let _swap = Swap::start(&dot, "attachments", &canary.dir, true);
    for n in 3..=6 {
        let (status, v) = s.followup(&id, json!({"message": "again"})).await;
        assert_eq!(status, 200, "{v}");
        let run = finished(&s, &id, n).await;
        went_on_or_refused(&run, "attachments");
        canary.assert_intact();
    }
    drop(_swap);
    let (status, v) = s.followup(&id, json!({"message": "last"})).await;
    assert_eq!(status, 200, "{v}");
    let last = finished(&s, &id, 7).await;
    assert_eq!(last["state"], "SUCCEEDED", "{last}");
    assert!(s.transcript_text(&id).await.contains("attachments:regular"));
    // No artifact was taken from any of it.
    assert!(
        last["artifacts"].as_array().is_none_or(Vec::is_empty),
        "{last}"
    );
    canary.assert_intact();
}
