//! Resource limits for executions: `memory_mb`, `pids_max` and `cpu_percent`, enforced by
//! cgroups (v2, or the v1 controllers where that is what the host mounts).
//!
//! At start-up `Cgroups::prepare` finds, for every controller a configured limit needs, the
//! hierarchy and the server's own cgroup in it, creates `runledger-<instance>` below it and
//! checks that it can write there; a limit the host cannot enforce stops start-up naming the
//! environment and the field (a silently ignored limit would be worse than none). Each execution
//! then gets `<that>/<run id>-<n>` with its limits, its processes enter it before they exec (see
//! `wrap`), and after the execution the leaf tells whether a limit was hit and is removed.
//!
//! Every execution also gets a leaf for CPU accounting when the host allows it (the `cpuacct`
//! controller of v1, or `cpu.stat`, which every v2 cgroup has): its CPU time is that of every
//! process that ever ran in it, setup included, however the tree forked or daemonized
//! (`docs/decisions/0017-cpu-accounting.md`). Without it (a non-root server without a delegated
//! cgroup), CPU time is not measured, and start-up logs that once.
//!
//! This module owns the cgroup files; it starts no process and signals none.

use std::path::{Path, PathBuf};

use runledger_config::{Config, Environment};
use runledger_domain::harness::Limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
    /// CPU accounting only: no limit, no controller to enable on v2 (`cpu.stat` is always
    /// there).
    Cpuacct,
}

impl Controller {
    fn v1_name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Controller::Memory => "memory_mb",
            Controller::Pids => "pids_max",
            Controller::Cpu => "cpu_percent",
            Controller::Cpuacct => "",
        }
    }
}

/// Where one controller's cgroups of this server are made.
#[derive(Debug, Clone)]
struct Hierarchy {
    controller: Controller,
    /// `<mount>/<server's cgroup>/runledger-<instance>`.
    base: PathBuf,
    v2: bool,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "environments[{index}].{field}: environment {environment:?} sets a limit this host cannot \
     enforce: {problem}. Run the server as root or in a cgroup delegated to its user (see \
     docs/security.md), or remove the limit"
)]
pub struct Error {
    index: usize,
    environment: String,
    field: &'static str,
    problem: String,
}

/// The cgroups of this server's executions.
#[derive(Debug, Clone, Default)]
pub struct Cgroups {
    hierarchies: Vec<Hierarchy>,
}

/// One execution's cgroup (a leaf in each hierarchy it needs).
#[derive(Debug)]
pub struct Leaf {
    dirs: Vec<(Controller, PathBuf, bool)>,
    limits: Limits,
}

impl Cgroups {
    /// Prepares every hierarchy a configured limit needs. Blocking (a few file operations).
    pub fn prepare(config: &Config, instance: &str) -> Result<Cgroups, Error> {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut cgroups = Cgroups::default();
        for (index, env) in config.environments.iter().enumerate() {
            for (controller, wanted) in [
                (Controller::Memory, env.limits.memory_mb.is_some()),
                (Controller::Pids, env.limits.pids_max.is_some()),
                (Controller::Cpu, env.limits.cpu_percent.is_some()),
            ] {
                if !wanted
                    || cgroups
                        .hierarchies
                        .iter()
                        .any(|h| h.controller == controller)
                {
                    continue;
                }
                let hierarchy = find(&own, controller, instance).map_err(|problem| Error {
                    index,
                    environment: env.id.clone(),
                    field: controller.field(),
                    problem,
                })?;
                cgroups.hierarchies.push(hierarchy);
            }
        }
        // Accounting is best effort: a host that does not let the server make cgroups still
        // runs agents, only without a measured CPU time (and so without a compute cost).
        match find(&own, Controller::Cpuacct, instance) {
            Ok(hierarchy) => cgroups.hierarchies.push(hierarchy),
            Err(problem) => tracing::warn!(
                %problem,
                "executions' CPU time cannot be measured on this host; runs get no compute_cost"
            ),
        }
        cgroups.remove_stale();
        Ok(cgroups)
    }

    /// Whether executions' CPU time is measured.
    pub fn accounts_cpu(&self) -> bool {
        self.hierarchies
            .iter()
            .any(|h| h.controller == Controller::Cpuacct)
    }

    /// Removes the leaves an earlier server of this instance left (their processes were killed
    /// as orphans before this runs).
    fn remove_stale(&self) {
        for h in &self.hierarchies {
            if let Ok(entries) = std::fs::read_dir(&h.base) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        let _ = std::fs::remove_dir(entry.path());
                    }
                }
            }
        }
    }

    /// Removes this server's cgroups at a clean shutdown, once every execution has ended (a
    /// directory that still holds a leaf stays, and the next start reuses it).
    pub fn remove(&self) {
        self.remove_stale();
        for h in &self.hierarchies {
            let _ = std::fs::remove_dir(&h.base);
        }
    }

    /// Creates an execution's cgroup with its environment's limits and CPU accounting; `None`
    /// when there is neither.
    pub fn create(&self, env: &Environment, name: &str) -> std::io::Result<Option<Leaf>> {
        let limits = env.limits;
        if !limits.any() && !self.accounts_cpu() {
            return Ok(None);
        }
        let mut leaf = Leaf {
            dirs: Vec::new(),
            limits,
        };
        for h in &self.hierarchies {
            let settings: Vec<(&str, String)> = match (h.controller, h.v2) {
                (Controller::Memory, v2) => match limits.memory_mb {
                    None => continue,
                    Some(mb) if v2 => vec![
                        ("memory.max", (mb << 20).to_string()),
                        ("memory.swap.max", "0".into()),
                    ],
                    // The swap limit (when the kernel accounts swap) is set after the memory
                    // limit, which it may never be below.
                    Some(mb) => vec![
                        ("memory.limit_in_bytes", (mb << 20).to_string()),
                        ("memory.memsw.limit_in_bytes", (mb << 20).to_string()),
                    ],
                },
                (Controller::Pids, _) => match limits.pids_max {
                    None => continue,
                    Some(n) => vec![("pids.max", n.to_string())],
                },
                (Controller::Cpu, v2) => match limits.cpu_percent {
                    None => continue,
                    Some(p) if v2 => vec![("cpu.max", format!("{} 100000", p * 1000))],
                    Some(p) => vec![
                        ("cpu.cfs_period_us", "100000".into()),
                        ("cpu.cfs_quota_us", (p * 1000).to_string()),
                    ],
                },
                (Controller::Cpuacct, _) => vec![],
            };
            let dir = h.base.join(name);
            match std::fs::create_dir(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            leaf.dirs.push((h.controller, dir.clone(), h.v2));
            for (file, value) in settings {
                let path = dir.join(file);
                // Swap accounting is optional in the kernel; without it, memory is the limit.
                if file.contains("swap") || file.contains("memsw") {
                    if path.exists() {
                        std::fs::write(&path, &value)?;
                    }
                    continue;
                }
                std::fs::write(&path, &value)?;
            }
        }
        Ok(Some(leaf))
    }
}

impl Leaf {
    /// The files a process writes its pid to, to enter this cgroup.
    pub fn procs(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, dir, _)| dir.join("cgroup.procs"))
            .collect()
    }

    /// The limit that was hit, as a sentence for the run's status message.
    pub fn exceeded(&self) -> Option<String> {
        for (controller, dir, v2) in &self.dirs {
            match controller {
                Controller::Memory => {
                    let file = if *v2 {
                        "memory.events"
                    } else {
                        "memory.oom_control"
                    };
                    if counter(&dir.join(file), "oom_kill") > 0 {
                        return Some(format!(
                            "the agent was killed by the out-of-memory killer at its environment's \
                             memory_mb limit ({} MiB)",
                            self.limits.memory_mb.unwrap_or_default()
                        ));
                    }
                }
                Controller::Pids => {
                    if counter(&dir.join("pids.events"), "max") > 0 {
                        return Some(format!(
                            "the agent reached its environment's pids_max limit ({} processes) \
                             and could not start more",
                            self.limits.pids_max.unwrap_or_default()
                        ));
                    }
                }
                Controller::Cpu | Controller::Cpuacct => {}
            }
        }
        None
    }

    /// The CPU time (user and system) of every process that ran in the cgroup so far; `None`
    /// when the execution has no accounting cgroup or its counter cannot be read. Read once its
    /// processes are gone, it is the execution's whole CPU time.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        let (_, dir, v2) = self
            .dirs
            .iter()
            .find(|(c, _, _)| *c == Controller::Cpuacct)?;
        if *v2 {
            let usec = std::fs::read_to_string(dir.join("cpu.stat"))
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse::<u64>().ok())?;
            Some(std::time::Duration::from_micros(usec))
        } else {
            let nanos = std::fs::read_to_string(dir.join("cpuacct.usage"))
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()?;
            Some(std::time::Duration::from_nanos(nanos))
        }
    }

    /// Removes the cgroup once its processes are gone (a killed process can take a moment to
    /// leave it).
    pub async fn remove(self) {
        for (_, dir, _) in &self.dirs {
            for _ in 0..40 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(25)).await,
                }
            }
        }
    }
}

/// `name N` from a flat keyed file such as `pids.events`.
fn counter(path: &Path, name: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(' ')?;
            (key == name).then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// Finds `controller`'s hierarchy and makes this server's directory in it.
fn find(own: &str, controller: Controller, instance: &str) -> Result<Hierarchy, String> {
    let name = controller.v1_name();
    // v1: a line `N:memory:/path` (or `N:cpu,cpuacct:/path`) names the server's cgroup.
    let v1 = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == name)
            .then(|| (controllers.to_string(), path.to_string()))
    });
    let (mount, path, v2) = match v1 {
        Some((controllers, path)) => {
            let root = Path::new("/sys/fs/cgroup");
            // `cpu,cpuacct` is often mounted under its joint name, with `cpu` a link to it.
            let mount = [root.join(&controllers), root.join(name)]
                .into_iter()
                .find(|p| p.is_dir())
                .ok_or_else(|| {
                    format!("the {name} controller is not mounted under /sys/fs/cgroup")
                })?;
            (mount, path, false)
        }
        None => {
            let path = own
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .ok_or_else(|| format!("the host has no {name} cgroup controller"))?
                .to_string();
            let mount = PathBuf::from("/sys/fs/cgroup");
            let available =
                std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
            if controller != Controller::Cpuacct && !available.split_whitespace().any(|c| c == name)
            {
                return Err(format!(
                    "the cgroup v2 hierarchy offers no {name} controller"
                ));
            }
            (mount, path, true)
        }
    };
    let own_dir = mount.join(path.trim_start_matches('/'));
    let base = own_dir.join(format!("runledger-{instance}"));
    match std::fs::create_dir(&base) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(format!("cannot create {}: {e}", base.display()))
        }
        _ => {}
    }
    if v2 && controller != Controller::Cpuacct {
        // Controllers reach a child only through each parent's subtree_control. (A cgroup
        // with processes of its own cannot delegate them: the server must then be started in
        // a leaf of a delegated subtree, e.g. by systemd with Delegate=yes.)
        for dir in [&own_dir, &base] {
            std::fs::write(dir.join("cgroup.subtree_control"), format!("+{name}")).map_err(
                |e| {
                    format!(
                        "cannot enable the {name} controller in {}: {e}",
                        dir.display()
                    )
                },
            )?;
        }
    }
    // A write that proves the directory is ours to configure.
    let probe = base.join("cgroup.procs");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&probe)
        .map_err(|e| format!("cannot write {}: {e}", probe.display()))?;
    Ok(Hierarchy {
        controller,
        base,
        v2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("memory.oom_control");
        std::fs::write(&path, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").expect("write");
        assert_eq!(counter(&path, "oom_kill"), 2);
        assert_eq!(counter(&path, "under_oom"), 0);
        assert_eq!(counter(&dir.path().join("missing"), "max"), 0);
    }
}
