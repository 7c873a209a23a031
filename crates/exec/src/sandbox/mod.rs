//! The launcher seam: turns an execution's plan (argv, environment, the paths it may use, its
//! network) into a process that the command harness then supervises.
//!
//! Two launchers exist. `Bubblewrap` starts every process inside bubblewrap: the host read-only,
//! the data directory, every workspace root, the configuration file and the secret files hidden
//! under empty mounts, the execution's own paths bound back in, a private `/tmp`, its own PID,
//! IPC and UTS namespaces, and an empty network namespace when the environment has
//! `network = false`. `Unconfined` starts the process as it is (`sandbox = "none"`). Both run
//! the process as the plan's user: when the server is root, a uid of the run's own from
//! `server.agent_uids` (or the one `agent_user`), so no agent holds more privilege than the
//! server and none can reach another run's processes or files. Neither decides what an agent
//! may see: the plan says that, and a container or remote backend would be one more
//! implementation of `Launcher`.
//!
//! This module only builds commands and checks the host at start-up; it never waits for or
//! signals a process (that is `command/` and `process.rs`).
//!
//! `plan.rs` is the seam (`Plan`, `Launcher`) and the unconfined launcher, `bubblewrap.rs` the
//! sandboxed one, `sandboxes.rs` the launchers of the configured environments. This file is
//! their table of contents.

mod bubblewrap;
mod plan;
mod sandboxes;

pub use crate::agents::AgentUser;
pub use bubblewrap::{Bubblewrap, FILTER_FD};
pub use plan::{Launcher, Plan, Unconfined};
pub use sandboxes::{Error, Sandboxes};
