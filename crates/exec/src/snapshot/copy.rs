//! Copies a tree the agent controls (a run's workspace or home) into one the server owns, and
//! back, within a byte budget. The agent can have planted anything there: symbolic links to
//! host paths, FIFOs, devices, sockets, hard links to files it may not read, files with holes
//! that claim terabytes, trees a million entries wide. So the walk goes from descriptors only
//! (`safe_fs`: nothing is opened through a link, nothing leaves the tree); a link is copied as a
//! link (its target text, never what it points at); a FIFO, socket or device is left out and
//! counted; a file the agent's user could not read itself is left out (a hard link to a host
//! file gives it nothing through a snapshot); modes keep only the permission bits (no setuid,
//! setgid or sticky bit survives) and everything made is given to `owner`. Every entry counts
//! `SNAPSHOT_ENTRY_BYTES` plus its size (a file's length, a link's target) against the budget,
//! and the copy stops with `Error::Over` as soon as the budget is exceeded, before writing the
//! entry that exceeds it. Nothing here starts a process.

use std::io::Read;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchownat, Gid, Uid};

use crate::safe_fs::{self, Dir, Links, Owner};
use runledger_config::SNAPSHOT_ENTRY_BYTES;

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tree holds more than the budget: nothing of it should be kept.
    #[error("it holds more than {max_mb} MiB (snapshot_max_mb)")]
    Over { max_mb: u64 },
    #[error(transparent)]
    Fs(#[from] safe_fs::Error),
}

/// What a copy left out, and what it took.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Entries and bytes counted against the budget.
    pub counted: u64,
    /// FIFOs, sockets and devices, left out.
    pub special: u64,
    /// Files the agent's user could not read itself, left out.
    pub unreadable: u64,
}

/// What a copy may still take.
#[derive(Debug)]
pub struct Budget {
    max: u64,
    used: u64,
}

impl Budget {
    pub fn new(max: u64) -> Budget {
        Budget { max, used: 0 }
    }

    fn take(&mut self, bytes: u64) -> Result<(), Error> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            return Err(Error::Over {
                max_mb: self.max >> 20,
            });
        }
        Ok(())
    }

    pub fn used(&self) -> u64 {
        self.used
    }
}

/// Copies everything beneath `from` into `to` (a directory the caller made), giving what it
/// makes to `owner`. `reader`: the user whose tree it is; a file it could not read is left out
/// (`None`: every file is copied, as when agents run as the server's own user).
pub fn copy_tree(
    from: &Dir,
    to: &Dir,
    owner: Option<Owner>,
    reader: Option<Owner>,
    budget: &mut Budget,
) -> Result<Copied, Error> {
    let mut copied = Copied::default();
    // Relative paths, each opened from the top when its turn comes, so the walk holds two
    // descriptors however wide the tree.
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let (source, target) = if relative.as_os_str().is_empty() {
            (from.open_dir(Path::new("."))?, to.open_dir(Path::new("."))?)
        } else {
            match from.open_dir(&relative) {
                // Removed meanwhile (the agent still runs a process): nothing to copy.
                Err(e) if e.is_not_found() => continue,
                opened => (opened?, to.open_dir(&relative)?),
            }
        };
        for name in source.names()? {
            let name = name.as_os_str();
            let path = source.path().join(name);
            let stat = match fstatat(source.fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(safe_fs::Error::io(path, e).into()),
            };
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            let mode = stat.st_mode & 0o777;
            if kind == SFlag::S_IFDIR {
                budget.take(SNAPSHOT_ENTRY_BYTES)?;
                // The server writes into it next, whatever the agent's mode said.
                let made = mkdirat(target.fd(), name, Mode::from_bits_truncate(mode | 0o700));
                made.map_err(|e| safe_fs::Error::io(target.path().join(name), e))?;
                give(&target, name, owner)?;
                pending.push(relative.join(name));
            } else if kind == SFlag::S_IFLNK {
                let link = match nix::fcntl::readlinkat(source.fd(), name) {
                    Ok(link) => link,
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(safe_fs::Error::io(path, e).into()),
                };
                budget.take(SNAPSHOT_ENTRY_BYTES + link.len() as u64)?;
                nix::unistd::symlinkat(link.as_os_str(), target.fd(), name)
                    .map_err(|e| safe_fs::Error::io(target.path().join(name), e))?;
                give(&target, name, owner)?;
            } else if kind == SFlag::S_IFREG {
                if !readable_by(&stat, reader) {
                    copied.unreadable += 1;
                    continue;
                }
                let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
                budget.take(SNAPSHOT_ENTRY_BYTES.saturating_add(size))?;
                copy_file(&source, &target, name, mode, size, owner)?;
            } else {
                copied.special += 1;
            }
        }
    }
    copied.counted = budget.used();
    Ok(copied)
}

/// Copies at most `size` bytes (what the budget counted) of the regular file `name`: it is
/// opened `O_NONBLOCK` without following a link and checked to be a regular file after it is
/// open, so a FIFO swapped in since the look is refused and never blocks.
fn copy_file(
    source: &Dir,
    target: &Dir,
    name: &std::ffi::OsStr,
    mode: u32,
    size: u64,
    owner: Option<Owner>,
) -> Result<(), Error> {
    let relative = Path::new(name);
    let file = match source.open_file(relative, Links::Allowed) {
        Err(e) if e.is_not_found() => return Ok(()),
        opened => opened?,
    };
    let utf8 = name.to_str().ok_or_else(|| safe_fs::Error::Refused {
        path: source.path().join(name),
        why: "its name is not UTF-8",
    })?;
    let mut out = target.create_new(utf8, mode, owner)?;
    std::io::copy(&mut file.take(size), &mut out).map_err(|e| safe_fs::Error::Io {
        path: target.path().join(name),
        source: e,
    })?;
    Ok(())
}

/// Gives the entry `name` (a directory or a link, not followed) to `owner`.
fn give(dir: &Dir, name: &std::ffi::OsStr, owner: Option<Owner>) -> Result<(), Error> {
    let Some(owner) = owner else { return Ok(()) };
    fchownat(
        dir.fd(),
        name,
        Some(Uid::from_raw(owner.uid)),
        Some(Gid::from_raw(owner.gid)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| safe_fs::Error::io(dir.path().join(name), e).into())
}

/// Whether `reader` could read the file itself: its own (it can change its mode), or its group's
/// or everyone's with the read bit.
fn readable_by(stat: &FileStat, reader: Option<Owner>) -> bool {
    let Some(reader) = reader else { return true };
    stat.st_uid == reader.uid
        || (stat.st_gid == reader.gid && stat.st_mode & 0o040 != 0)
        || stat.st_mode & 0o004 != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `tree` (the agent's), `copy` (empty, the server's) and `outside/secret` (the host's).
    fn scratch(name: &str) -> (Scratch, PathBuf, PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "runledger-snapshot-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        for dir in ["tree", "copy", "outside"] {
            std::fs::create_dir_all(base.join(dir)).expect("test step");
        }
        std::fs::write(base.join("outside/secret"), b"secret").expect("test step");
        let dirs = (base.join("tree"), base.join("copy"), base.join("outside"));
        (Scratch(base), dirs.0, dirs.1, dirs.2)
    }

    fn copy(tree: &Path, to: &Path, reader: Option<Owner>, max: u64) -> Result<Copied, Error> {
        let (from, to) = (
            Dir::open(tree).expect("test step"),
            Dir::open(to).expect("test step"),
        );
        copy_tree(&from, &to, None, reader, &mut Budget::new(max))
    }

    #[test]
    fn links_are_copied_as_links_and_fifos_and_set_id_bits_are_left_out() {
        let (_s, tree, to, outside) = scratch("links");
        std::fs::create_dir_all(tree.join("a/b")).expect("test step");
        std::fs::write(tree.join("a/b/file"), b"work").expect("test step");
        std::fs::set_permissions(
            tree.join("a/b/file"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .expect("test step");
        std::os::unix::fs::symlink(&outside, tree.join("a/out")).expect("test step");
        std::os::unix::fs::symlink(outside.join("secret"), tree.join("secret")).expect("test step");
        nix::unistd::mkfifo(&tree.join("fifo"), Mode::from_bits_truncate(0o644))
            .expect("test step");
        let copied = copy(&tree, &to, None, 1 << 20).expect("copied");
        assert_eq!(copied.special, 1);
        assert_eq!(
            std::fs::read(to.join("a/b/file")).expect("test step"),
            b"work"
        );
        let mode = std::fs::metadata(to.join("a/b/file"))
            .expect("test step")
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "no setuid bit survives");
        // The links are links, pointing where they pointed; nothing of the host was copied.
        for link in ["a/out", "secret"] {
            let meta = std::fs::symlink_metadata(to.join(link)).expect("test step");
            assert!(meta.file_type().is_symlink(), "{link}");
        }
        assert_eq!(
            std::fs::read_link(to.join("a/out")).expect("test step"),
            outside
        );
        assert!(!to.join("fifo").exists());
        let walked: Vec<_> = walk(&to);
        assert!(
            !walked.iter().any(|p| p.ends_with("a/out/secret")),
            "{walked:?}"
        );
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("test step") {
            let path = entry.expect("test step").path();
            let meta = std::fs::symlink_metadata(&path).expect("test step");
            if meta.is_dir() {
                out.extend(walk(&path));
            }
            out.push(path);
        }
        out
    }

    #[test]
    fn a_sparse_file_that_claims_a_terabyte_stops_the_copy_before_a_byte_of_it() {
        let (_s, tree, to, _) = scratch("sparse");
        let file = std::fs::File::create(tree.join("huge")).expect("test step");
        file.set_len(1 << 40).expect("test step");
        match copy(&tree, &to, None, 1 << 20) {
            Err(Error::Over { max_mb: 1 }) => {}
            other => panic!("not over: {other:?}"),
        }
        assert!(!to.join("huge").exists());
    }

    #[test]
    fn empty_entries_count_against_the_budget_too() {
        let (_s, tree, to, _) = scratch("wide");
        for i in 0..3000 {
            std::fs::write(tree.join(i.to_string()), b"").expect("test step");
        }
        // 3000 entries of 512 bytes are more than 1 MiB.
        assert!(matches!(
            copy(&tree, &to, None, 1 << 20),
            Err(Error::Over { .. })
        ));
    }

    #[test]
    fn a_file_the_agents_user_cannot_read_is_left_out() {
        let (_s, tree, to, _) = scratch("unreadable");
        std::fs::write(tree.join("theirs"), b"host secret").expect("test step");
        std::fs::set_permissions(tree.join("theirs"), std::fs::Permissions::from_mode(0o600))
            .expect("test step");
        std::fs::write(tree.join("shared"), b"readable").expect("test step");
        std::fs::set_permissions(tree.join("shared"), std::fs::Permissions::from_mode(0o644))
            .expect("test step");
        let me = std::fs::metadata(&tree).expect("test step");
        // Another user, of another group: the one the tree's agent would run as.
        let reader = Owner {
            uid: me.uid() + 1,
            gid: me.gid() + 1,
        };
        let copied = copy(&tree, &to, Some(reader), 1 << 20).expect("copied");
        assert_eq!(copied.unreadable, 1);
        assert!(!to.join("theirs").exists());
        assert_eq!(
            std::fs::read(to.join("shared")).expect("test step"),
            b"readable"
        );
    }
}
