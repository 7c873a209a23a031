//! What the `agents` tests share: fixtures, servers and helpers.

use crate::common;
use common::{running, script, Server};
use std::path::PathBuf;

pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        Fixture {
            dir: common::agent_visible_dir(),
        }
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(super) fn agent(&self, name: &str, body: &str) -> String {
        let path = self.path(name);
        script(&path, body);
        path.display().to_string()
    }

    pub(super) fn config(&self, environments: &str) -> String {
        format!("[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{environments}\n",)
    }
}

/// An environment's `env` line that puts `bin` (fake CLIs) first on its agents' PATH.
pub(super) fn path_to(bin: &std::path::Path) -> String {
    format!(
        "env = {{ PATH = \"{}:/usr/local/bin:/usr/bin:/bin\" }}\n",
        bin.display()
    )
}

/// The host pids of `sleep 4242421`, which the tree test's sandboxed agent starts without its
/// markers.
pub(super) fn escaped_sleeps() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            running(*pid)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c == b"sleep\x004242421\x00")
        })
        .collect()
}

/// Kills what `escaped_sleeps` finds if the test fails before its tree is stopped, so a
/// failure leaves no process behind.
pub(super) struct KillEscaped;

impl Drop for KillEscaped {
    fn drop(&mut self) {
        for pid in escaped_sleeps() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The run's workspace, where its agent leaves what the test looks at.
pub(super) fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

/// A server whose one-slot `chat` environment runs an agent that echoes each stdin line as
/// `got: <line>` and exits at a line containing "done".
pub(super) async fn chat_server(f: &Fixture) -> Server {
    let agent = f.agent(
        "chat.sh",
        r#"echo "execution=$RUNLEDGER_EXECUTION followup=$RUNLEDGER_FOLLOWUP prompt=$1"
while read -r line; do
  echo "got: $line"
  case "$line" in *done*) exit 0;; esac
done"#,
    );
    let config = f.config(&format!(
        "[[environments]]\nid = \"chat\"\nharness = \"command\"\ncommand = [\"{agent}\", \"{{prompt}}\"]\nmax_concurrent = 1\n"
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    s
}

/// The run's event types, without `UsageRecorded` (host-dependent; tests/it/usage.rs's) and
/// `Provenance` (tests/it/provenance.rs's).
pub(super) async fn types_online(s: &Server, id: &str) -> Vec<String> {
    s.events(id)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .filter(|kind| kind != "UsageRecorded" && kind != "Provenance")
        .collect()
}

/// A server whose `claude`, `codex` and `gemini` environments run fake CLIs from `f`'s `bin`:
/// each records what it got in `.record/<cli>-<execution>.*` of its workspace, and reports a
/// session id the way the real one does.
pub(super) async fn preset_server(f: &Fixture) -> Server {
    let bin = f.path("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    for (cli, session) in [
        (
            "claude",
            r#"{"type":"system","subtype":"init","session_id":"sess-claude-1"}"#,
        ),
        (
            "codex",
            r#"{"type":"thread.started","thread_id":"thread-codex-1"}"#,
        ),
        ("gemini", r#"{"type":"init","session_id":"sess-gemini-1"}"#),
    ] {
        script(
            &bin.join(cli),
            &format!(
                r#"mkdir -p .record; out=.record/{cli}-$RUNLEDGER_EXECUTION; printf '%s\0' "$@" > $out.argv; echo "$RUNLEDGER_RUN_ID" > $out.run
[ -n "$GEMINI_CLI_HOME" ] && cp "$GEMINI_CLI_HOME/.gemini/settings.json" $out.settings
[ -n "$CODEX_HOME" ] && cp "$CODEX_HOME/config.toml" $out.config
echo "IS_SANDBOX=$IS_SANDBOX" > $out.env
{input}
exit 0"#,
                input = if cli == "claude" {
                    // Like Claude Code with streaming input: a user message per line, each
                    // echoed as it is taken, a result per turn, and the end once stdin ends.
                    format!(
                        r#"IFS= read -r line; printf '%s\n' "$line" > $out.stdin
echo '{session}'
echo '{{"type":"user","isReplay":true,"message":{{"role":"user","content":"taken"}}}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"sess-claude-1"}}'
cat >> $out.stdin"#
                    )
                } else {
                    // Like the real CLIs, read a piped stdin to its end before working.
                    format!("cat > $out.stdin\necho '{session}'")
                },
            ),
        );
    }
    let path = path_to(&bin);
    let config = f.config(&format!(
        "[[environments]]\nid = \"claude\"\nharness = \"claude\"\nmodel_id = \"sonnet\"\n{path}\n\
         [[environments]]\nid = \"codex\"\nharness = \"codex\"\nmodel_base_url = \"http://127.0.0.1:9/v1\"\n{path}\n\
         [[environments]]\nid = \"gemini\"\nharness = \"gemini\"\nmodel_id = \"gemini-pro\"\n{path}",
    ));
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    s
}

/// The file `file` (`claude-1.stdin`, say) a fake CLI recorded in run `id`'s workspace.
pub(super) fn recorded(s: &Server, id: &str, file: &str) -> String {
    std::fs::read_to_string(workspace(s, id).join(".record").join(file))
        .unwrap_or_else(|e| panic!("{file} recorded: {e}"))
}

/// The argv the fake CLI of `cli-<execution>` got for run `id`.
pub(super) fn argv(s: &Server, id: &str, cli: &str) -> Vec<String> {
    recorded(s, id, &format!("{cli}.argv"))
        .split_terminator('\0')
        .map(str::to_string)
        .collect()
}
