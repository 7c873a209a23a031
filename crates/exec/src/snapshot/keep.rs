//! Where an execution's snapshot lives and how it is taken and put back: at the end of each
//! execution the run's workspace, its agent home and the CLI session id it saved are copied
//! (`copy::copy_tree`) into `<run files>/snapshots/<execution>/` (`workspace/`, `home/`,
//! `session`), a directory only the server can read (mode 0700, the server's own files): the
//! agent can neither read another execution's snapshot nor change one. A snapshot is made
//! under a temporary name and renamed into place whole, so one that exists is complete; one
//! over the budget is removed and not kept. A fork's first execution starts from one
//! (`restore`), its copy given to the fork's own agent user.

use std::path::{Path, PathBuf};

use super::copy::{copy_tree, Budget, Copied, Error};
use crate::safe_fs::{self, Dir, Links, Owner};

/// The directory under a run's files that holds its snapshots.
const SNAPSHOTS: &str = "snapshots";

/// Where the snapshot of `execution` is, under a run's files directory.
pub fn path(files: &Path, execution: u32) -> PathBuf {
    files.join(SNAPSHOTS).join(execution.to_string())
}

/// Whether the snapshot of `execution` was kept (a whole one: partial ones have another name).
pub fn exists(files: &Path, execution: u32) -> bool {
    std::fs::symlink_metadata(path(files, execution)).is_ok_and(|m| m.is_dir())
}

/// What a snapshot holds, from the paths of one execution.
pub struct Source<'a> {
    pub files: &'a Path,
    pub workspace: &'a Path,
    pub home: &'a Path,
    /// The session id file the run's preset CLI reported (`<files>/session`).
    pub session: &'a Path,
}

/// Takes the snapshot of `execution`: the workspace and the home of `from` as `reader` (the
/// run's agent user) could read them, at most `max_bytes`. Blocking file I/O.
pub fn take(
    from: &Source<'_>,
    execution: u32,
    reader: Option<Owner>,
    max_bytes: u64,
) -> Result<Copied, Error> {
    let files = Dir::open(from.files)?;
    let snapshots = files.make_dir(SNAPSHOTS, 0o700)?;
    snapshots.set_mode(0o700)?;
    let name = execution.to_string();
    let partial = format!(".{name}.partial");
    snapshots.remove(&partial)?;
    let taken = fill(&snapshots, &partial, from, reader, max_bytes);
    let kept = taken.and_then(|copied| {
        // A snapshot of the same execution taken before (an execution started again after a
        // restart) is replaced.
        snapshots.remove(&name)?;
        let renamed = nix::fcntl::renameat(
            snapshots.fd(),
            partial.as_str(),
            snapshots.fd(),
            name.as_str(),
        );
        renamed.map_err(|e| safe_fs::Error::io(snapshots.path().join(&name), e))?;
        Ok(copied)
    });
    if kept.is_err() {
        let _ = snapshots.remove(&partial);
    }
    kept
}

/// Makes `partial` in `snapshots` and copies the workspace, the home and the session id
/// into it, within `max_bytes` for the two trees together.
fn fill(
    snapshots: &Dir,
    partial: &str,
    from: &Source<'_>,
    reader: Option<Owner>,
    max_bytes: u64,
) -> Result<Copied, Error> {
    let into = snapshots.make_dir(partial, 0o700)?;
    let mut budget = Budget::new(max_bytes);
    let mut copied = Copied::default();
    for (name, tree) in [("workspace", from.workspace), ("home", from.home)] {
        let target = into.make_dir(name, 0o700)?;
        let source = match Dir::open(tree) {
            Err(e) if e.is_not_found() => continue,
            opened => opened?,
        };
        let part = copy_tree(&source, &target, None, reader, &mut budget)?;
        copied.special += part.special;
        copied.unreadable += part.unreadable;
    }
    copied.counted = budget.used();
    if let Some(session) = read_session(from.session)? {
        into.replace("session", &session, 0o600, None)?;
    }
    Ok(copied)
}

/// The session file, the server's own (`files::write_private`), if there is one.
fn read_session(path: &Path) -> Result<Option<Vec<u8>>, safe_fs::Error> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Dir::open(dir)?.read(Path::new(name), Links::Allowed),
        _ => Ok(None),
    }
}

/// Where a fork starts: the snapshot of `execution` under the original run's `files`.
pub struct Restore<'a> {
    pub files: &'a Path,
    pub execution: u32,
    /// The original run's workspace, whose path the CLIs' session stores name.
    pub workspace: &'a Path,
}

/// Fills the fork's empty `workspace` and `home` from the snapshot, given to `owner`, and
/// returns the session id file's bytes. The snapshot is the server's, written by `take`, but
/// its contents came from an agent: the copy is as careful as the first one.
pub fn restore(
    from: &Restore<'_>,
    workspace: &Path,
    home: &Path,
    owner: Option<Owner>,
) -> Result<Option<Vec<u8>>, Error> {
    let snapshot = Dir::open(&path(from.files, from.execution))?;
    // Bounded by what `take` counted; the budget only guards a snapshot changed on disk.
    let mut budget = Budget::new(u64::MAX);
    for (name, tree) in [("workspace", workspace), ("home", home)] {
        let source = snapshot.open_dir(Path::new(name))?;
        copy_tree(&source, &Dir::open(tree)?, owner, None, &mut budget)?;
    }
    super::sessions::relocate(&Dir::open(home)?, from.workspace, workspace, owner)?;
    Ok(snapshot.read(Path::new("session"), Links::Allowed)?)
}
