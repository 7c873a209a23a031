//! What the `fork` tests share: a server with one `command` environment whose agent the test
//! writes, and where a run's snapshots are on disk.

use crate::common;
use common::{script, Server};
use std::path::PathBuf;

/// A directory agents can read, holding the agent script and the server's data.
pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        Fixture {
            dir: common::agent_visible_dir(),
        }
    }

    /// A server with the environment `work` running the script `agent` (`sh`), plus `extra`
    /// lines of its table (`snapshot_max_mb = 1`).
    pub(super) async fn server(&self, agent: &str, extra: &str) -> Server {
        let path = self.dir.path().join("agent.sh");
        script(&path, agent);
        let config = format!(
            "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n[[environments]]\nid = \
             \"work\"\nharness = \"command\"\ncommand = [\"{}\", \"{{prompt}}\"]\n{extra}\n",
            path.display()
        );
        let s = Server::start_with(self.dir.path(), &config, &[]);
        s.wait_ready().await;
        s
    }
}

/// Where the snapshot of `execution` of run `id` is kept.
pub(super) fn snapshot(s: &Server, id: &str, execution: u32) -> PathBuf {
    s.data_dir
        .join("agent-files")
        .join(id)
        .join("snapshots")
        .join(execution.to_string())
}

/// The run's workspace.
pub(super) fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

/// Every path beneath `dir`, links not followed.
pub(super) fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// Polls run `id` as `key` (a key of another team than the server's admin key) until it is in
/// `state`, for 20 s at most.
pub(super) async fn wait_as(s: &Server, key: &str, id: &str, state: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, run) = s.get(key, &format!("/agent/runs/{id}")).await;
        if status == 200 && run["state"] == state {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} never became {state}: {status} {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
