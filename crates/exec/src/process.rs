//! Finding and stopping an agent's whole process tree, and finding the host programs the
//! server itself starts around agents (bwrap, setpriv) on the server's own `PATH`.
//!
//! Every agent (and setup command) is started as the leader of a new process group, and its
//! environment carries markers: `RUNLEDGER_INSTANCE` (this data directory's instance id),
//! `RUNLEDGER_RUN_ID` and `RUNLEDGER_EXECUTION`. Signalling the group reaches every descendant
//! that stayed in it; scanning `/proc` for the markers also reaches the ones that left it
//! (`setsid`, daemonised background children), since environments are inherited. Both are
//! used, so a tree is gone unless a descendant both left the group and scrubbed its
//! environment. Markers name the execution, so stopping execution n never touches n + 1 of the
//! same run. The same scan finds agents orphaned by a server that was killed, so startup can
//! stop them. Scans read `/proc` synchronously, so they run on the blocking thread pool.

use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

pub const INSTANCE_VAR: &str = "RUNLEDGER_INSTANCE";
pub const RUN_VAR: &str = "RUNLEDGER_RUN_ID";
pub const EXECUTION_VAR: &str = "RUNLEDGER_EXECUTION";

/// Which marked processes to find.
#[derive(Debug, Clone)]
pub struct Marker {
    pub instance: String,
    /// `(run id, execution)`; `None` matches every process of the instance.
    pub execution: Option<(String, u32)>,
}

impl Marker {
    fn matches(&self, environ: &[u8]) -> bool {
        let instance = format!("{INSTANCE_VAR}={}", self.instance);
        let wanted: Vec<String> = match &self.execution {
            None => vec![instance],
            Some((run, execution)) => vec![
                instance,
                format!("{RUN_VAR}={run}"),
                format!("{EXECUTION_VAR}={execution}"),
            ],
        };
        wanted
            .iter()
            .all(|w| environ.split(|b| *b == 0).any(|var| var == w.as_bytes()))
    }
}

/// `(pid, state, process group)` of every process, from `/proc/<pid>/stat`.
fn processes() -> Vec<(i32, char, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let _ppid = fields.next()?;
            let group = fields.next()?.parse().ok()?;
            Some((pid, state, group))
        })
        .collect()
}

/// What is left of a tree: live (not zombie) processes that carry `marker` or belong to
/// process group `group`, and whether the group itself still has a live member.
#[derive(Debug, Default)]
struct Found {
    pids: Vec<i32>,
    group_alive: bool,
}

fn find(marker: &Marker, group: Option<i32>) -> Found {
    let own = std::process::id() as i32;
    let mut found = Found::default();
    for (pid, state, pgrp) in processes() {
        if pid == own || matches!(state, 'Z' | 'X') {
            continue;
        }
        let in_group = group == Some(pgrp);
        found.group_alive |= in_group;
        // Processes of other users, or gone meanwhile, cannot be read: they are not ours.
        if in_group
            || std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| marker.matches(&env))
        {
            found.pids.push(pid);
        }
    }
    found
}

async fn find_off_thread(marker: &Marker, group: Option<i32>) -> Found {
    let marker = marker.clone();
    tokio::task::spawn_blocking(move || find(&marker, group))
        .await
        .unwrap_or_default()
}

fn signal(found: &Found, group: Option<i32>, signal: Signal) {
    // The group is signalled as a whole (which also reaches processes forked since the scan)
    // only while it has live members: once they are gone its id could be reused.
    if let (Some(group), true) = (group, found.group_alive) {
        let _ = killpg(Pid::from_raw(group), signal);
    }
    for &pid in &found.pids {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Stops a process tree: SIGTERM (and SIGCONT, so stopped processes can act on it) to the group
/// and every marked process, then SIGKILL to what is left after `grace`.
pub async fn stop_tree(group: Option<i32>, marker: &Marker, grace: Duration) {
    let live = find_off_thread(marker, group).await;
    if live.pids.is_empty() {
        return;
    }
    signal(&live, group, Signal::SIGTERM);
    signal(&live, group, Signal::SIGCONT);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        tokio::time::sleep(Duration::from_millis(25)).await;
        let remaining = find_off_thread(marker, group).await;
        if remaining.pids.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            signal(&remaining, group, Signal::SIGKILL);
            return;
        }
    }
}

/// Kills every process of this instance, without grace: at startup, the ones an earlier server
/// left when it died; at a shutdown that ran out of time, the server's own.
pub fn kill_orphans(instance: &str) -> usize {
    let pids = find(
        &Marker {
            instance: instance.to_string(),
            execution: None,
        },
        None,
    )
    .pids;
    for &pid in &pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    pids.len()
}

/// Raises the soft limit on open files to the hard limit: every live agent holds four
/// descriptors (pid handle and three pipes), and the common default of 1024 would cap a server
/// at about 250 agents.
pub fn raise_open_file_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    }
    Some(hard)
}

/// A program on the server's own `PATH` (never an agent's: agents get a fixed one).
pub(super) fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_match_instance_run_and_execution() {
        let env = b"A=1\0RUNLEDGER_INSTANCE=i1\0RUNLEDGER_RUN_ID=r1\0RUNLEDGER_EXECUTION=2\0";
        let m = |instance: &str, execution: Option<(&str, u32)>| Marker {
            instance: instance.into(),
            execution: execution.map(|(r, e)| (r.to_string(), e)),
        };
        assert!(m("i1", None).matches(env));
        assert!(m("i1", Some(("r1", 2))).matches(env));
        assert!(!m("i1", Some(("r1", 1))).matches(env));
        assert!(!m("i1", Some(("r2", 2))).matches(env));
        assert!(!m("i2", None).matches(env));
    }
}
