//! `sandbox = "bwrap"`: bubblewrap's argv for a plan. The host read-only, the hidden paths
//! under empty mounts, the execution's own paths bound back in, a private `/tmp`, its own
//! namespaces, the seccomp filter, and the drop to the agent user last. It builds the argv;
//! whether bwrap works on this host is checked at start-up (`sandboxes.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::process::Command;

use super::plan::{build, Launcher, Plan};
use crate::agents::AgentUser;

/// `sandbox = "bwrap"`.
pub struct Bubblewrap {
    pub(super) program: PathBuf,
    /// Directories and files hidden under empty mounts, whatever the host's permissions.
    pub(super) hidden: Vec<PathBuf>,
    /// The seccomp filter that refuses nested user namespaces (`seccomp.rs`), which bwrap
    /// reads from descriptor `FILTER_FD`; `None` on an architecture it does not know.
    pub(super) filter: Option<Arc<[u8]>>,
    /// Where the filter is kept for this host's launches (in the data directory); each
    /// launcher on another host (a Slurm node) writes its own copy where that host reads it.
    pub(super) filter_file: Option<PathBuf>,
}

/// The descriptor bwrap reads the seccomp filter from (`--seccomp`): the one after `--args`'s.
pub const FILTER_FD: &str = "4";

/// Opens the filter file named first as `FILTER_FD`, then execs the rest (bwrap).
const OPEN_FILTER: &str = r#"exec 4<"$1" || exit 125; shift; exec "$@""#;

impl Bubblewrap {
    /// The bwrap program found at start-up (the same path is expected on Slurm nodes).
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// A bwrap at its usual path that hides nothing and keeps the user: for tests of what
    /// wraps it.
    #[cfg(test)]
    pub fn for_tests() -> Bubblewrap {
        Bubblewrap {
            program: PathBuf::from("/usr/bin/bwrap"),
            hidden: Vec::new(),
            filter: None,
            filter_file: None,
        }
    }

    /// `for_tests` with a seccomp filter of `bytes`.
    #[cfg(test)]
    pub fn for_tests_with_filter(bytes: &[u8]) -> Bubblewrap {
        Bubblewrap {
            filter: Some(Arc::from(bytes)),
            ..Bubblewrap::for_tests()
        }
    }

    /// The seccomp filter's bytes, for a launcher that writes them where its host reads them.
    pub fn filter(&self) -> Option<&[u8]> {
        self.filter.as_deref()
    }

    /// bwrap's arguments for `plan`, after the program.
    pub fn args(&self, plan: &Plan) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        let mut push = |parts: &[&std::ffi::OsStr]| {
            args.extend(parts.iter().map(|p| p.to_os_string()));
        };
        push(&[
            "--ro-bind".as_ref(),
            "/".as_ref(),
            "/".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            // Writable by the agent user, as a /tmp is.
            "--perms".as_ref(),
            "1777".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
        ]);
        self.mounts(plan, &mut push);
        // No user namespace when root: the agent then runs as a real unprivileged user (below),
        // which needs no user namespaces from the host. A non-root server's bwrap makes one.
        push(&[
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
            "--unshare-uts".as_ref(),
            "--unshare-cgroup-try".as_ref(),
            // No controlling terminal to push input into (TIOCSTI).
            "--new-session".as_ref(),
        ]);
        if self.filter.is_some() {
            push(&["--seccomp".as_ref(), FILTER_FD.as_ref()]);
        }
        if !plan.network {
            push(&["--unshare-net".as_ref()]);
        }
        push(&["--chdir".as_ref(), plan.cwd.as_os_str(), "--".as_ref()]);
        if let Some(user) = &plan.user {
            // bwrap run by root keeps root's capabilities for the process it starts; setpriv
            // changes to the agent user (which clears them), drops the rest from the inheritable
            // and bounding sets, and sets no_new_privs so no setuid program gives them back.
            let (uid, gid) = (
                format!("--reuid={}", user.uid),
                format!("--regid={}", user.gid),
            );
            push(&[
                "setpriv".as_ref(),
                uid.as_ref(),
                gid.as_ref(),
                "--clear-groups".as_ref(),
                "--inh-caps=-all".as_ref(),
                "--bounding-set=-all".as_ref(),
                "--no-new-privs".as_ref(),
                "--".as_ref(),
            ]);
        }
        push(&[plan.program.as_ref()]);
        args.extend(plan.args.iter().map(Into::into));
        args
    }

    /// The mounts of an execution, each at the path the agent knows it by: closed host
    /// directories replaced by passable empty ones, hidden paths covered, the workspace and
    /// writable paths bound read-write, the readable ones read-only.
    fn mounts(&self, plan: &Plan, push: &mut impl FnMut(&[&std::ffi::OsStr])) {
        // Every mount below is made at the path the agent knows it by. Its missing parents are
        // made first, passable (not listable) by the agent user: bwrap would make them private
        // to root. Host directories on the way that the agent user cannot pass through (a
        // private home such as /root holding the data directory) are replaced by empty ones
        // it can: what they held was closed to the agent user anyway.
        let own = std::iter::once(&plan.cwd)
            .chain(&plan.writable)
            .chain(&plan.readable);
        let opaque = match &plan.user {
            Some(user) => closed_ancestors(own.clone(), &self.hidden, user),
            None => Vec::new(),
        };
        let mut layout = Layout {
            areas: vec![PathBuf::from("/tmp")],
            made: Vec::new(),
        };
        for dir in &opaque {
            layout.parents(dir, push);
            push(&[
                "--perms".as_ref(),
                "0711".as_ref(),
                "--tmpfs".as_ref(),
                dir.as_os_str(),
            ]);
            layout.areas.push(dir.clone());
        }
        for path in &self.hidden {
            // Checked now rather than at start-up: a workspace root appears with its first run.
            match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => {
                    layout.parents(path, push);
                    push(&["--tmpfs".as_ref(), path.as_os_str()]);
                    layout.areas.push(path.clone());
                }
                Ok(_) => {
                    layout.parents(path, push);
                    push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), path.as_os_str()]);
                }
                Err(_) => {}
            }
        }
        layout.parents(&plan.cwd, push);
        let workspace = if plan.read_only_workspace {
            "--ro-bind"
        } else {
            "--bind"
        };
        push(&[
            workspace.as_ref(),
            plan.cwd.as_os_str(),
            plan.cwd.as_os_str(),
        ]);
        for path in &plan.writable {
            layout.parents(path, push);
            push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        for path in &plan.readable {
            layout.parents(path, push);
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
}

/// The directories the sandbox makes itself (empty mounts, and `/tmp`), and the parents of
/// mount points made in them so far.
struct Layout {
    areas: Vec<PathBuf>,
    made: Vec<PathBuf>,
}

impl Layout {
    /// Makes the missing parents of `path` that lie inside a directory of the sandbox's own,
    /// outermost first, passable by the agent user.
    fn parents(&mut self, path: &Path, push: &mut impl FnMut(&[&std::ffi::OsStr])) {
        let mut missing: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .filter(|p| {
                self.areas
                    .iter()
                    .any(|a| p.starts_with(a) && *p != a.as_path())
                    && !self.made.iter().any(|m| m == p)
            })
            .collect();
        missing.reverse();
        for parent in missing {
            push(&[
                "--perms".as_ref(),
                "0711".as_ref(),
                "--dir".as_ref(),
                parent.as_os_str(),
            ]);
            self.made.push(parent.to_path_buf());
        }
    }
}

/// The outermost host directories on the way to `paths` that `user` cannot pass through, leaving
/// out those inside `/tmp` or a hidden directory (the sandbox makes those itself).
fn closed_ancestors<'a>(
    paths: impl Iterator<Item = &'a PathBuf>,
    hidden: &[PathBuf],
    user: &AgentUser,
) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let passable = |m: &std::fs::Metadata| {
        let mode = m.mode();
        mode & 0o001 != 0
            || (m.uid() == user.uid && mode & 0o100 != 0)
            || (m.gid() == user.gid && mode & 0o010 != 0)
    };
    let mut closed: Vec<PathBuf> = Vec::new();
    for path in paths {
        let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
        ancestors.reverse();
        for dir in ancestors {
            if dir.starts_with("/tmp") || hidden.iter().any(|h| dir.starts_with(h)) {
                break;
            }
            if std::fs::metadata(dir).is_ok_and(|m| !passable(&m)) {
                closed.push(dir.to_path_buf());
                break;
            }
        }
    }
    closed.sort();
    closed.dedup();
    // One inside another is replaced with it.
    let mut outermost: Vec<PathBuf> = Vec::new();
    for dir in closed {
        if !outermost.iter().any(|o| dir.starts_with(o)) {
            outermost.push(dir);
        }
    }
    outermost
}

impl Bubblewrap {
    /// The whole argv of `plan` on this host: bwrap, behind the shell that opens its filter.
    pub(super) fn argv(&self, plan: &Plan) -> Vec<std::ffi::OsString> {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let (Some(_), Some(file)) = (&self.filter, &self.filter_file) {
            argv.extend(["/bin/sh", "-c", OPEN_FILTER, "sh"].map(Into::into));
            argv.push(file.clone().into_os_string());
        }
        argv.push(self.program.clone().into_os_string());
        argv.extend(self.args(plan));
        argv
    }
}

impl Launcher for Bubblewrap {
    fn command(&self, plan: &Plan) -> Command {
        build(self.argv(plan), plan)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn plan(network: bool) -> Plan {
        Plan {
            program: "agent".into(),
            args: vec!["--x".into()],
            cwd: PathBuf::from("/data/workspaces/r1"),
            read_only_workspace: false,
            env: BTreeMap::new(),
            writable: vec![PathBuf::from("/data/agent-files/r1/home")],
            readable: vec![PathBuf::from("/data/agent-files/r1/mcp.json")],
            network,
            cgroups: Vec::new(),
            user: Some(AgentUser {
                name: "nobody".into(),
                uid: 65534,
                gid: 65534,
            }),
        }
    }

    fn text(args: Vec<std::ffi::OsString>) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn bwrap_hides_before_it_binds_and_drops_to_the_agent_user_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("key");
        std::fs::write(&secret, "s").expect("write");
        let b = Bubblewrap {
            program: PathBuf::from("/usr/bin/bwrap"),
            hidden: vec![
                dir.path().to_path_buf(),
                secret.clone(),
                "/nonexistent".into(),
            ],
            filter: Some(Arc::from(&[0u8; 8][..])),
            filter_file: Some(PathBuf::from("/data/sandbox/nested-userns.bpf")),
        };
        let args = text(b.args(&plan(false)));
        let hide = format!("--tmpfs {}", dir.path().display());
        let bind = "--bind /data/workspaces/r1 /data/workspaces/r1";
        assert!(args.starts_with("--ro-bind / / --dev /dev --proc /proc --perms 1777 --tmpfs /tmp"));
        assert!(args.find(&hide) < args.find(bind), "{args}");
        assert!(args.contains(&format!("--ro-bind /dev/null {}", secret.display())));
        assert!(!args.contains("absent"), "{args}");
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--new-session --seccomp 4 "), "{args}");
        assert!(args.ends_with(
            "--chdir /data/workspaces/r1 -- setpriv --reuid=65534 --regid=65534 --clear-groups \
             --inh-caps=-all --bounding-set=-all --no-new-privs -- agent --x"
        ));
        assert!(!text(b.args(&plan(true))).contains("--unshare-net"));
    }

    #[test]
    fn a_read_only_workspace_is_bound_read_only_and_the_home_stays_writable() {
        let b = Bubblewrap::for_tests();
        let read_only = Plan {
            read_only_workspace: true,
            ..plan(true)
        };
        let args = text(b.args(&read_only));
        assert!(
            args.contains("--ro-bind /data/workspaces/r1 /data/workspaces/r1"),
            "{args}"
        );
        assert!(!args.contains("--bind /data/workspaces/r1 "), "{args}");
        assert!(
            args.contains("--bind /data/agent-files/r1/home /data/agent-files/r1/home"),
            "{args}"
        );
        let edit = text(b.args(&plan(true)));
        assert!(edit.contains("--bind /data/workspaces/r1 /data/workspaces/r1"));
        assert!(!edit.contains("--ro-bind /data/workspaces/r1"), "{edit}");
    }
}
