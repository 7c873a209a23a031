//! Who agents run as. A server that is not root runs them as itself. A root server runs each
//! run's agents as a uid of the run's own from `server.agent_uids` (taken at the run's first
//! execution, recorded in the store and made durable before anything of the run is made, kept
//! for the run's whole life), or, when the operator set `agent_user`, as that one user
//! (`docs/decisions/0029-agent-uids.md`).
//!
//! This module decides the user; it never changes to it (that is `setpriv` in the launchers of
//! `sandbox/`) and never touches a run's files (`Sandboxes::owner`, for `safe_fs`, and
//! `Sandboxes::hand_over_tree` do).

use runledger_config::Config;
use runledger_domain::uid_range::UidRange;
use runledger_domain::RunId;
use runledger_store::{Store, Taken, MAX_PASSED_OVER};

/// The unprivileged user a run's agents run as when the server is root: a uid of the run's
/// own (no passwd entry; its gid is the same number) or the named `agent_user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    /// What agents see in `USER`.
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl AgentUser {
    /// The user of a uid of a run's own: no supplementary groups, a gid of the same number.
    pub fn of_uid(uid: u32) -> AgentUser {
        AgentUser {
            name: format!("runledger-{uid}"),
            uid,
            gid: uid,
        }
    }
}

/// Who agents run as, server-wide.
#[derive(Clone)]
pub(super) enum Agents {
    /// The server's own user: it is not root (or starts no processes).
    Server,
    /// `agent_user`: the one named user of every run, as the operator chose.
    Named(AgentUser),
    /// A uid of each run's own from `server.agent_uids`, recorded in the store.
    PerRun {
        range: UidRange,
        /// Attached once the store is open (`record_in`).
        store: Option<Store>,
    },
}

impl Agents {
    /// Who agents run as under `config`; `Err` says why a root server cannot run them
    /// (`agent_user` missing or root, no `setpriv`).
    pub(super) fn resolve(config: &Config) -> Result<Agents, String> {
        // Only environments that start processes need a user to run them as: the embedded
        // defaults (the in-process demo) start on a host without one.
        let starts_processes = config.environments.iter().any(|e| e.sandbox.is_some());
        if !starts_processes || !nix::unistd::geteuid().is_root() {
            return Ok(Agents::Server);
        }
        if super::process::find_program("setpriv").is_none() {
            return Err(
                "the server runs as root and drops agents to an unprivileged uid with \
                        setpriv, which is not on its PATH; install util-linux"
                    .into(),
            );
        }
        Ok(match &config.agent_user {
            Some(name) => Agents::Named(
                named_user(name).map_err(|problem| format!("server.agent_user: {problem}"))?,
            ),
            None => Agents::PerRun {
                range: config.agent_uids.clone(),
                store: None,
            },
        })
    }

    /// Agents run as the server's user.
    pub(super) fn server() -> Agents {
        Agents::Server
    }

    pub(super) fn are_the_servers(&self) -> bool {
        matches!(self, Agents::Server)
    }

    /// Who start-up tries the sandbox as: the first uid of the range, or `agent_user`.
    pub(super) fn probe_user(&self) -> Option<AgentUser> {
        match self {
            Agents::Server => None,
            Agents::Named(user) => Some(user.clone()),
            Agents::PerRun { range, .. } => Some(AgentUser::of_uid(*range.uids().start())),
        }
    }

    /// The user of every run, when there is one (`agent_user`).
    pub(super) fn shared_user(&self) -> Option<AgentUser> {
        match self {
            Agents::Named(user) => Some(user.clone()),
            Agents::Server | Agents::PerRun { .. } => None,
        }
    }

    /// Where runs' uids are recorded, once the store is open.
    pub(super) fn record_in(&mut self, store: Store) {
        if let Agents::PerRun { store: slot, .. } = self {
            *slot = Some(store);
        }
    }

    /// The user of `run`: the recorded uid, or at the run's first execution the next free one
    /// of the range, recorded and durable before it is handed out; the one `agent_user`; or
    /// `None` (the server's own). `Err` says why the run cannot have one.
    pub(super) async fn user_of(&self, run: RunId) -> Result<Option<AgentUser>, String> {
        let (range, store) = match self {
            Agents::Server => return Ok(None),
            Agents::Named(user) => return Ok(Some(user.clone())),
            Agents::PerRun { range, store } => (range, store),
        };
        let store = store
            .as_ref()
            .ok_or("no store records the runs' uids (the server was not started with one)")?;
        let recorded = store
            .agent_uid(run)
            .map_err(|e| format!("cannot read the run's agent uid: {e}"))?;
        if let Some(uid) = recorded {
            return Ok(Some(AgentUser::of_uid(uid)));
        }
        let taken = store
            .take_agent_uid(run, range.uids(), &unused_on_host)
            .map_err(|e| format!("cannot record an agent uid for the run: {e}"))?;
        let uid = match taken {
            Taken::Uid(uid) => uid,
            Taken::Exhausted => {
                return Err(format!(
                    "every uid of server.agent_uids ({range}) belongs to a run already, and a \
                     uid is never shared; widen the range or set server.agent_user"
                ))
            }
            Taken::HostUsesRange => {
                return Err(format!(
                    "the next {MAX_PASSED_OVER} uids of server.agent_uids ({range}) belong to \
                     users, groups or processes of this host (or its user database cannot be \
                     read); give runledger a range of its own"
                ))
            }
        };
        // Durable before the uid owns anything: a restart must find the same one.
        store
            .sync()
            .await
            .map_err(|e| format!("cannot record an agent uid for the run: {e}"))?;
        Ok(Some(AgentUser::of_uid(uid)))
    }
}

/// Whether nothing of the host uses `uid`: no user or group has it (the agent would get their
/// files; its gid is the same number), and no process runs as it (another server's agent, on
/// a range that overlaps this one). A uid that fails is never offered again. Files of another
/// server's runs cannot be seen here: ranges of servers on one host must not overlap.
fn unused_on_host(uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let named = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .map_or(true, |u| u.is_some())
        || nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(uid))
            .map_or(true, |g| g.is_some());
    if named {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            && entry
                .metadata()
                .is_ok_and(|m| m.uid() == uid || m.gid() == uid)
    })
}

/// `agent_user`, looked up: it must exist and must not be root.
fn named_user(name: &str) -> Result<AgentUser, String> {
    let found = nix::unistd::User::from_name(name)
        .map_err(|e| format!("cannot look up user {name:?}: {e}"))?
        .ok_or_else(|| {
            format!(
                "the server runs as root and runs agents as {name:?}, which does not exist; \
                 create it, name another unprivileged user, or leave agent_user out to give \
                 each run a uid of its own (server.agent_uids)"
            )
        })?;
    if found.uid.is_root() {
        return Err(format!(
            "{name:?} is root; agents must run as an unprivileged user"
        ));
    }
    Ok(AgentUser {
        name: name.to_string(),
        uid: found.uid.as_raw(),
        gid: found.gid.as_raw(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_run_keeps_its_uid_and_a_used_up_range_fails_the_run_saying_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &Default::default()).expect("open");
        let mut agents = Agents::PerRun {
            range: UidRange::unchecked(1_999_000_000, 1_999_000_001),
            store: None,
        };
        let (a, b, c) = (RunId(1), RunId(2), RunId(3));
        let refused = agents.user_of(a).await.expect_err("no store");
        assert!(refused.contains("no store"), "{refused}");
        agents.record_in(store);
        assert!(!agents.are_the_servers());
        assert_eq!(agents.shared_user(), None);
        assert_eq!(agents.probe_user(), Some(AgentUser::of_uid(1_999_000_000)));
        let first = agents.user_of(a).await.expect("a").expect("a user");
        assert_eq!(first, AgentUser::of_uid(1_999_000_000));
        assert_eq!(
            (first.name.as_str(), first.gid),
            ("runledger-1999000000", 1_999_000_000)
        );
        let second = agents.user_of(b).await.expect("b").expect("a user");
        assert_eq!(second.uid, 1_999_000_001);
        assert_eq!(agents.user_of(a).await.expect("a again"), Some(first));
        let refused = agents.user_of(c).await.expect_err("used up");
        assert!(
            refused.contains("every uid of server.agent_uids (1999000000-1999000001)"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_named_agent_user_serves_every_run_and_must_not_be_root() {
        let nobody = named_user("nobody").expect("nobody exists");
        let agents = Agents::Named(nobody.clone());
        assert_eq!(agents.user_of(RunId(1)).await, Ok(Some(nobody.clone())));
        assert_eq!(agents.user_of(RunId(2)).await, Ok(Some(nobody)));
        assert!(named_user("root").expect_err("root").contains("is root"));
        assert!(named_user("no-such-user-here")
            .expect_err("missing")
            .contains("does not exist"));
        assert_eq!(Agents::server().user_of(RunId(1)).await, Ok(None));
    }
}
