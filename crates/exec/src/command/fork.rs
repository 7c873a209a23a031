//! A fork's first execution: instead of a checkout and setup, its workspace, its agent home and
//! its CLI session id start as the snapshot of the original run's execution `K` left them
//! (`snapshot::restore`), given to the fork's own agent user. Then setup counts as done for the
//! fork, and its agent continues the session with the fork's message (`Assignment::resumed_by`,
//! set by the executor). A snapshot that is gone (removed with the original's files) fails the
//! execution naming it.

use std::path::Path;

use super::files::write_private;
use super::finish::{internal, unsafe_path};
use crate::safe_fs;
use crate::snapshot;
use crate::{Assignment, Supervision};
use runledger_domain::StatusMessage;

/// Where a fork starts: the original run's id and the execution after which it forks.
pub(super) fn fork_point(job: &Assignment) -> Option<(String, u32)> {
    match &job.run.derived {
        Some(runledger_domain::RunDerivation {
            from,
            kind:
                runledger_domain::Derivation::Fork {
                    after_execution, ..
                },
        }) => Some((from.clone(), *after_execution)),
        _ => None,
    }
}

/// The paths of one fork start: the fork's and the original's.
pub(super) struct Start<'a> {
    pub(super) workspace: &'a Path,
    pub(super) home: &'a Path,
    pub(super) session: &'a Path,
    pub(super) setup_done: &'a Path,
    /// The original run's files directory and workspace.
    pub(super) original_files: &'a Path,
    pub(super) original_workspace: &'a Path,
}

/// Empties the fork's home (a start interrupted before setup was recorded left part of a
/// copy there); the workspace is emptied by `make_dirs` as every fresh one is.
pub(super) fn clear_home(files: &Path) -> Result<(), StatusMessage> {
    let cleared = safe_fs::Dir::open(files).and_then(|dir| dir.remove("home"));
    match cleared {
        Err(e) if e.is_not_found() => Ok(()),
        other => other.map_err(|e| unsafe_path("cannot empty the fork's home", e)),
    }
}

/// Fills the fork's workspace and home from the snapshot of `execution`, and records its
/// session and that setup is done.
pub(super) fn restore(
    sup: &Supervision,
    execution: u32,
    at: &Start<'_>,
) -> Result<(), StatusMessage> {
    let owner = sup.sandboxes.owner();
    let from = snapshot::Restore {
        files: at.original_files,
        execution,
        workspace: at.original_workspace,
    };
    if !snapshot::exists(at.original_files, execution) {
        return Err(StatusMessage {
            message: format!(
                "the snapshot of execution {execution} of the original run is gone ({})",
                snapshot::path(at.original_files, execution).display()
            ),
            error_code: Some("environment_setup_failed".into()),
            retryable: Some(false),
        });
    }
    let session = snapshot::restore(&from, at.workspace, at.home, owner).map_err(|e| match e {
        snapshot::Error::Fs(e) => unsafe_path("cannot start the fork from its snapshot", e),
        // `restore` sets no bound of its own; a snapshot is bounded when it is taken.
        over @ snapshot::Error::Over { .. } => {
            internal(format!("cannot start the fork from its snapshot: {over}"))
        }
    })?;
    // The workspace stayed the server's while it was filled, as a fresh one does in checkout.
    safe_fs::Dir::open(at.workspace)
        .and_then(|dir| dir.set_owner(owner))
        .map_err(|e| unsafe_path("cannot hand the fork's workspace over", e))?;
    if let Some(session) = session {
        write_private(at.session, &session, None)
            .map_err(|e| unsafe_path("cannot keep the fork's session id", e))?;
    }
    write_private(at.setup_done, b"", None)
        .map_err(|e| unsafe_path("cannot record that the fork's workspace is ready", e))
}
