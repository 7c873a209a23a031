//! Finding and stopping an agent's whole process tree.
//!
//! Every agent is started as the leader of a new process group, and its environment carries two
//! markers: `RUNLEDGER_INSTANCE` (this data directory's instance id) and `RUNLEDGER_RUN_ID`.
//! Signalling the group reaches every descendant that stayed in it; scanning `/proc` for the
//! markers also reaches the ones that left it (`setsid`, daemonised background children), since
//! environments are inherited. Both are used, so a tree is gone unless a descendant both left
//! the group and scrubbed its environment. The same scan finds agents orphaned by a server that
//! was killed, so startup can stop them.

use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

pub const INSTANCE_VAR: &str = "RUNLEDGER_INSTANCE";
pub const RUN_VAR: &str = "RUNLEDGER_RUN_ID";

/// Processes whose environment has `INSTANCE_VAR=instance` and, if given, `RUN_VAR=run`.
pub fn marked(instance: &str, run: Option<&str>) -> Vec<i32> {
    let own = std::process::id() as i32;
    let instance_marker = format!("{INSTANCE_VAR}={instance}");
    let run_marker = run.map(|r| format!("{RUN_VAR}={r}"));
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        // Processes of other users, or gone meanwhile, cannot be read: they are not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let mut has_instance = false;
        let mut has_run = run_marker.is_none();
        for var in environ.split(|b| *b == 0) {
            if var == instance_marker.as_bytes() {
                has_instance = true;
            } else if run_marker.as_ref().is_some_and(|m| var == m.as_bytes()) {
                has_run = true;
            }
        }
        if has_instance && has_run {
            pids.push(pid);
        }
    }
    pids
}

fn signal_all(group: Option<i32>, pids: &[i32], signal: Signal) {
    if let Some(group) = group {
        let _ = killpg(Pid::from_raw(group), signal);
    }
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn group_alive(group: i32) -> bool {
    killpg(Pid::from_raw(group), None).is_ok()
}

/// Stops a process tree: SIGTERM to the group and every marked process, then SIGKILL to what
/// is left after `grace`. Returns once nothing of the tree is alive (or after the SIGKILL).
pub async fn stop_tree(group: Option<i32>, instance: &str, run: &str, grace: Duration) {
    let pids = marked(instance, Some(run));
    signal_all(group, &pids, Signal::SIGTERM);
    // SIGCONT so that stopped processes can act on the SIGTERM.
    signal_all(group, &pids, Signal::SIGCONT);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let remaining: Vec<i32> = marked(instance, Some(run))
            .into_iter()
            .filter(|p| alive(*p))
            .collect();
        let group_left = group.is_some_and(|g| group_alive(g) && has_live_member(g));
        if remaining.is_empty() && !group_left {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            signal_all(group, &remaining, Signal::SIGKILL);
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Whether a process group still has a member that is not a zombie.
fn has_live_member(group: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            return false;
        };
        std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // Fields after the command: state, ppid, pgrp, …
            fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
                && fields.first().is_some_and(|s| *s != "Z" && *s != "X")
                && pid != std::process::id() as i32
        })
    })
}

/// Kills every process left by an earlier server of this instance (startup, after a crash).
pub fn kill_orphans(instance: &str) -> usize {
    let pids = marked(instance, None);
    for &pid in &pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    pids.len()
}

/// Raises the soft limit on open files to the hard limit: every live agent holds three pipes,
/// and the common default of 1024 would cap a server at about 300 agents.
pub fn raise_open_file_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    }
    Some(hard)
}
