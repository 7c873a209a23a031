//! Every file operation the server makes inside a directory an agent can write: the run's home
//! and workspace and what is in them (each CLI's configuration, the attachments, checked-out
//! repositories), and the files it hands to the agent in the run's agent files (the MCP file,
//! the report file, the Slurm step files).
//!
//! The server runs as root there and the agent can plant symbolic links, hard links and FIFOs
//! anywhere it can write, and swap them while the server works. So nothing here takes a path
//! from the root of the file system: a `Dir` is an open directory descriptor, and everything
//! is opened relative to one with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (one
//! `O_NOFOLLOW` component at a time where the kernel lacks `openat2`), so no link is followed
//! and no path leaves the directory, whatever is swapped between a check and a use. Owners and
//! modes are changed on open descriptors (`fchown`, `fchmod`, `fchownat` with
//! `AT_SYMLINK_NOFOLLOW`); anything but a regular file or a directory is refused after it is
//! opened `O_NONBLOCK` (a FIFO cannot block the server); a file read or rewritten with more
//! than one hard link is refused (it could be a host file the agent linked); files are
//! replaced by writing a new file beside them and renaming it over the old name.
//!
//! This module must not take any path from outside as trusted except where a caller says so
//! (`Dir::open`, for a directory only the server can write), and it never follows a link.
//! Everything here is blocking file I/O.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, fchownat, unlinkat, Gid, Uid, UnlinkatFlags};

/// Why an operation was refused or failed; both name the path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What is at the path is not what the server may touch (a link, a FIFO, a file with other
    /// hard links, a path that leaves the directory): the agent made it so.
    #[error("refused {}: {why}", path.display())]
    Refused { path: PathBuf, why: &'static str },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: PathBuf, errno: Errno) -> Error {
        match errno {
            // RESOLVE_NO_SYMLINKS, or O_NOFOLLOW on the last component.
            Errno::ELOOP => Error::Refused {
                path,
                why: "it is a symbolic link, or one is on its way",
            },
            Errno::EXDEV => Error::Refused {
                path,
                why: "it leaves its directory",
            },
            // `O_DIRECTORY | O_NOFOLLOW` on a link answers this too.
            Errno::ENOTDIR => Error::Refused {
                path,
                why: "a symbolic link or a file is where a directory should be",
            },
            _ => Error::Io {
                path,
                source: std::io::Error::from(errno),
            },
        }
    }

    /// A not-found error, where the server itself had just made the entry, as a refusal:
    /// something (the agent) removed it meanwhile.
    fn vanished(self, why: &'static str) -> Error {
        match self {
            Error::Io { path, .. } if self.is_not_found() => Error::Refused { path, why },
            other => other,
        }
    }

    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::other(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The user something is handed to: the agent's uid and gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Whether a file read may have other hard links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// The file is in a directory the agent cannot add names to, or only its type is looked at.
    Allowed,
    /// The agent could have linked a host file here.
    Refused,
}

/// Most bytes `Dir::read` takes from a file: a CLI's settings, a session id.
pub const READ_LIMIT: u64 = 4 << 20;

/// Set once `openat2` answered ENOSYS (or a seccomp filter's EPERM): every later open walks
/// one component at a time.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How a path is resolved: `openat2`, or one `O_NOFOLLOW` component at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolve {
    Kernel,
    Walk,
}

fn resolve() -> Resolve {
    if NO_OPENAT2.load(Ordering::Relaxed) {
        Resolve::Walk
    } else {
        Resolve::Kernel
    }
}

/// An open directory and the path it was opened at (for messages only: nothing is opened by
/// that path again).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    resolve: Resolve,
}

impl Dir {
    /// Opens `path`, a directory only the server can write (its last component is still not
    /// followed if it is a link).
    pub fn open(path: &Path) -> Result<Dir> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(path.to_path_buf(), e))?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
            resolve: resolve(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory, for a walk that works from descriptors (`snapshot::copy`).
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Opens `relative` beneath this directory with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`).
    fn open_beneath(&self, relative: &Path, flags: OFlag, mode: Mode) -> Result<OwnedFd> {
        let path = self.path.join(relative);
        let parts = parts(relative).ok_or_else(|| Error::Refused {
            path: path.clone(),
            why: "it leaves its directory",
        })?;
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if self.resolve == Resolve::Kernel {
            let how = OpenHow::new()
                .flags(flags)
                .mode(mode)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            match openat2(&self.fd, relative, how) {
                Err(Errno::ENOSYS | Errno::EPERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
                opened => return opened.map_err(|e| Error::io(path, e)),
            }
        }
        // Each directory on the way is opened without following a link, from the one before.
        let Some((last, dirs)) = parts.split_last() else {
            return nix::fcntl::openat(&self.fd, ".", flags, mode).map_err(|e| Error::io(path, e));
        };
        let mut at: Option<OwnedFd> = None;
        for part in dirs {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let next = match &at {
                Some(fd) => openat(fd, *part, flags, Mode::empty()),
                None => openat(&self.fd, *part, flags, Mode::empty()),
            };
            at = Some(next.map_err(|e| Error::io(path.clone(), e))?);
        }
        match &at {
            Some(fd) => openat(fd, *last, flags, mode),
            None => openat(&self.fd, *last, flags, mode),
        }
        .map_err(|e| Error::io(path, e))
    }

    /// The directory `relative` beneath this one.
    pub fn open_dir(&self, relative: &Path) -> Result<Dir> {
        let fd = self.open_beneath(
            relative,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )?;
        Ok(Dir {
            fd,
            path: self.path.join(relative),
            resolve: self.resolve,
        })
    }

    /// The directory `name` in this one, made with `mode` if it is not there. A directory
    /// already there is kept as it is (the agent's own, with what it put in it).
    pub fn make_dir(&self, name: &str, mode: u32) -> Result<Dir> {
        let path = self.path.join(name);
        one_name(name, &path)?;
        match mkdirat(&self.fd, name, Mode::from_bits_truncate(mode)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => {
                return Err(Error::io(path, e).vanished("its directory was removed meanwhile"))
            }
        }
        // Removed between the two by something changing it: the agent's doing.
        self.open_dir(Path::new(name))
            .map_err(|e| e.vanished("it was removed while it was made"))
    }

    /// Gives this directory to `owner` (nothing to do without one).
    pub fn set_owner(&self, owner: Option<Owner>) -> Result<()> {
        let Some(owner) = owner else { return Ok(()) };
        fchown(
            &self.fd,
            Some(Uid::from_raw(owner.uid)),
            Some(Gid::from_raw(owner.gid)),
        )
        .map_err(|e| Error::io(self.path.clone(), e))
    }

    pub fn set_mode(&self, mode: u32) -> Result<()> {
        fchmod(&self.fd, Mode::from_bits_truncate(mode))
            .map_err(|e| Error::io(self.path.clone(), e))
    }

    /// Opens the regular file `relative` for reading; a FIFO, a device, a socket or a
    /// directory is refused (opened `O_NONBLOCK` first, so nothing blocks), and so is a file
    /// with other hard links unless `links` allows them.
    pub fn open_file(&self, relative: &Path, links: Links) -> Result<File> {
        let path = self.path.join(relative);
        let fd = self.open_beneath(
            relative,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            Mode::empty(),
        )?;
        let stat = fstat(&fd).map_err(|e| Error::io(path.clone(), e))?;
        regular(&stat, &path, links)?;
        Ok(File::from(fd))
    }

    /// The bytes of the regular file `relative` (at most `READ_LIMIT`), or `None` if there is
    /// nothing there; see `open_file` for what is refused.
    pub fn read(&self, relative: &Path, links: Links) -> Result<Option<Vec<u8>>> {
        let mut file = match self.open_file(relative, links) {
            Err(e) if e.is_not_found() => return Ok(None),
            opened => opened?,
        };
        let path = self.path.join(relative);
        let mut bytes = Vec::new();
        (&mut file)
            .take(READ_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > READ_LIMIT {
            return Err(Error::Refused {
                path,
                why: "it is larger than 4 MiB",
            });
        }
        Ok(Some(bytes))
    }

    /// Creates the file `name` with `mode`, given to `owner`: whatever was at the name (a
    /// link, a FIFO, an old file) is unlinked first, never opened.
    pub fn create_file(&self, name: &str, mode: u32, owner: Option<Owner>) -> Result<File> {
        let path = self.path.join(name);
        one_name(name, &path)?;
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(Errno::EISDIR) => {
                return Err(Error::Refused {
                    path,
                    why: "it is a directory",
                })
            }
            Err(e) => return Err(Error::io(path, e)),
        }
        let file = self.create_new(name, mode, owner)?;
        Ok(file)
    }

    /// A new file `name` (`O_EXCL`: never one that is there), with `mode` exactly and given to
    /// `owner`.
    pub fn create_new(&self, name: &str, mode: u32, owner: Option<Owner>) -> Result<File> {
        let path = self.path.join(name);
        one_name(name, &path)?;
        let mode = Mode::from_bits_truncate(mode);
        let fd = self
            .open_beneath(
                Path::new(name),
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
                mode,
            )
            // Only a directory removed since it was opened has no room for a new name.
            .map_err(|e| e.vanished("its directory was removed meanwhile"))?;
        // The umask may have taken bits away.
        fchmod(&fd, mode).map_err(|e| Error::io(path.clone(), e))?;
        if let Some(owner) = owner {
            fchown(
                &fd,
                Some(Uid::from_raw(owner.uid)),
                Some(Gid::from_raw(owner.gid)),
            )
            .map_err(|e| Error::io(path, e))?;
        }
        Ok(File::from(fd))
    }

    /// Replaces the file `name` with `contents` (a new file with `mode`, given to `owner`,
    /// renamed over the name): a link at the name is replaced, never written through, and a
    /// reader never sees half a file.
    pub fn replace(
        &self,
        name: &str,
        contents: &[u8],
        mode: u32,
        owner: Option<Owner>,
    ) -> Result<()> {
        let path = self.path.join(name);
        one_name(name, &path)?;
        let temporary = format!(".{name}.runledger-{:016x}", rand::random::<u64>());
        let written = self
            .create_new(&temporary, mode, owner)
            .and_then(|mut file| {
                file.write_all(contents)
                    .and_then(|()| file.sync_all())
                    .map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })
            })
            .and_then(|()| {
                nix::fcntl::renameat(&self.fd, temporary.as_str(), &self.fd, name).map_err(|e| {
                    match e {
                        Errno::EISDIR | Errno::ENOTEMPTY | Errno::EEXIST => Error::Refused {
                            path: path.clone(),
                            why: "it is a directory",
                        },
                        e => Error::io(path.clone(), e),
                    }
                    .vanished("it was changed while it was written")
                })
            });
        if written.is_err() {
            let _ = unlinkat(&self.fd, temporary.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        written
    }

    /// Removes what is at `name` in this directory: a link or a file is unlinked (never
    /// followed), a directory emptied from its descriptor and removed; nothing there is fine.
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.path.join(name);
        one_name(name, &path)?;
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::EISDIR | Errno::EPERM) => {}
            Err(e) => return Err(Error::io(path, e)),
        }
        let dir = self.open_dir(Path::new(name))?;
        for entry in dir.names()? {
            let entry = entry.to_str().ok_or_else(|| Error::Refused {
                path: dir.path.join(&entry),
                why: "its name is not UTF-8",
            })?;
            dir.remove(entry)?;
        }
        match unlinkat(&self.fd, name, UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// The names in this directory (`.` and `..` left out).
    pub(crate) fn names(&self) -> Result<Vec<std::ffi::OsString>> {
        let listing = self
            .fd
            .try_clone()
            .and_then(|fd| nix::dir::Dir::from_fd(fd).map_err(std::io::Error::from))
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?;
        let mut names = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| Error::io(self.path.clone(), e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name != "." && name != ".." {
                names.push(name.to_os_string());
            }
        }
        Ok(names)
    }

    /// Gives this directory and everything beneath it to `owner`, without following a link:
    /// links themselves are given (`AT_SYMLINK_NOFOLLOW`), directories are opened without
    /// following one, and a file with other hard links keeps its owner (handing it over would
    /// hand over every other name of it; a local clone's objects shared with a mirror are
    /// such files, and stay readable).
    pub fn hand_over_tree(&self, owner: Option<Owner>) -> Result<()> {
        let Some(owner) = owner else { return Ok(()) };
        let (uid, gid) = (
            Some(Uid::from_raw(owner.uid)),
            Some(Gid::from_raw(owner.gid)),
        );
        self.set_owner(Some(owner))?;
        // Relative paths, each opened from this directory when its turn comes, so the walk
        // holds one descriptor however wide the tree.
        let mut pending = vec![PathBuf::new()];
        while let Some(relative) = pending.pop() {
            let dir = if relative.as_os_str().is_empty() {
                self.open_dir(Path::new("."))?
            } else {
                let dir = match self.open_dir(&relative) {
                    // Removed meanwhile: nothing to hand over.
                    Err(e) if e.is_not_found() => continue,
                    opened => opened?,
                };
                dir.set_owner(Some(owner))?;
                dir
            };
            for name in dir.names()? {
                let name = name.as_os_str();
                let path = dir.path.join(name);
                let stat = match fstatat(&dir.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(stat) => stat,
                    // Removed meanwhile (by git, or the agent): nothing to hand over.
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(Error::io(path, e)),
                };
                let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
                if kind == SFlag::S_IFDIR {
                    pending.push(relative.join(name));
                } else if kind == SFlag::S_IFREG && stat.st_nlink > 1 {
                    continue;
                } else {
                    match fchownat(&dir.fd, name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW) {
                        Ok(()) | Err(Errno::ENOENT) => {}
                        Err(e) => return Err(Error::io(path, e)),
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `stat` is a regular file the server may read or rewrite.
fn regular(stat: &FileStat, path: &Path, links: Links) -> Result<()> {
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFREG {
        return Err(Error::Refused {
            path: path.to_path_buf(),
            why: if kind == SFlag::S_IFDIR {
                "it is a directory"
            } else {
                "it is not a regular file (a FIFO, a socket or a device)"
            },
        });
    }
    if links == Links::Refused && stat.st_nlink > 1 {
        return Err(Error::Refused {
            path: path.to_path_buf(),
            why: "it has other hard links",
        });
    }
    Ok(())
}

/// The names of `relative`, or `None` if it is absolute or climbs out with `..`.
fn parts(relative: &Path) -> Option<Vec<&OsStr>> {
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => parts.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts)
}

/// `name` must be one name in the directory: not empty, no `/`, not `.` or `..`.
fn one_name(name: &str, path: &Path) -> Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::Refused {
            path: path.to_path_buf(),
            why: "it is not a name in its directory",
        });
    }
    Ok(())
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

    /// A directory holding `inside` (the one the server works in) and `outside/secret` (the
    /// host's file the agent wants).
    fn scratch(name: &str) -> (Scratch, PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "runledger-safefs-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(base.join("inside")).expect("test step");
        std::fs::create_dir_all(base.join("outside")).expect("test step");
        std::fs::write(base.join("outside/secret"), b"secret").expect("test step");
        let (inside, outside) = (base.join("inside"), base.join("outside"));
        (Scratch(base), inside, outside)
    }

    /// Every test runs with `openat2` and with the walk `openat2`'s absence falls back to.
    fn both(inside: &Path) -> [Dir; 2] {
        let kernel = Dir::open(inside).expect("test step");
        let mut walk = Dir::open(inside).expect("test step");
        walk.resolve = Resolve::Walk;
        [kernel, walk]
    }

    fn refused(r: Result<impl std::fmt::Debug>) -> String {
        match r {
            Err(e @ Error::Refused { .. }) => e.to_string(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_file_link_is_never_read_or_written_through() {
        let (_s, inside, outside) = scratch("filelink");
        std::os::unix::fs::symlink(outside.join("secret"), inside.join("settings.json"))
            .expect("test step");
        for dir in both(&inside) {
            let message = refused(dir.read(Path::new("settings.json"), Links::Refused));
            assert!(message.contains("settings.json"), "{message}");
            assert!(message.contains("symbolic link"), "{message}");
        }
        let dir = Dir::open(&inside).expect("test step");
        dir.replace("settings.json", b"{}", 0o600, None)
            .expect("test step");
        assert_eq!(
            std::fs::read(outside.join("secret")).expect("test step"),
            b"secret"
        );
        let meta = std::fs::symlink_metadata(inside.join("settings.json")).expect("test step");
        assert!(meta.is_file());
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read(inside.join("settings.json")).expect("test step"),
            b"{}"
        );
    }

    #[test]
    fn a_directory_link_on_the_way_is_refused_and_not_made_or_handed_over() {
        let (_s, inside, outside) = scratch("dirlink");
        std::os::unix::fs::symlink(&outside, inside.join(".gemini")).expect("test step");
        for dir in both(&inside) {
            refused(dir.read(Path::new(".gemini/secret"), Links::Refused));
            refused(dir.make_dir(".gemini", 0o700));
            refused(dir.open_dir(Path::new(".gemini")));
        }
        let before = std::fs::metadata(&outside).expect("test step");
        let dir = Dir::open(&inside).expect("test step");
        dir.hand_over_tree(Some(Owner {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
        }))
        .expect("test step");
        assert_eq!(
            std::fs::metadata(&outside).expect("test step").mode(),
            before.mode()
        );
    }

    #[test]
    fn a_hard_link_is_refused_where_the_agent_could_have_made_it() {
        let (_s, inside, outside) = scratch("hardlink");
        std::fs::hard_link(outside.join("secret"), inside.join("config.toml")).expect("test step");
        for dir in both(&inside) {
            let message = refused(dir.read(Path::new("config.toml"), Links::Refused));
            assert!(message.contains("hard links"), "{message}");
            assert!(dir
                .read(Path::new("config.toml"), Links::Allowed)
                .expect("test step")
                .is_some());
        }
        Dir::open(&inside)
            .expect("test step")
            .replace("config.toml", b"x = 1", 0o600, None)
            .expect("test step");
        assert_eq!(
            std::fs::read(outside.join("secret")).expect("test step"),
            b"secret"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_s, inside, _) = scratch("fifo");
        nix::unistd::mkfifo(&inside.join("session"), Mode::from_bits_truncate(0o600))
            .expect("test step");
        for dir in both(&inside) {
            let message = refused(dir.read(Path::new("session"), Links::Allowed));
            assert!(message.contains("FIFO"), "{message}");
        }
        let dir = Dir::open(&inside).expect("test step");
        let mut file = dir.create_file("session", 0o600, None).expect("test step");
        file.write_all(b"id").expect("test step");
        assert!(std::fs::symlink_metadata(inside.join("session"))
            .expect("test step")
            .is_file());
    }

    #[test]
    fn dot_dot_and_absolute_paths_never_leave_the_directory() {
        let (_s, inside, outside) = scratch("escape");
        std::fs::create_dir(inside.join("d")).expect("test step");
        for dir in both(&inside) {
            refused(dir.read(Path::new("../outside/secret"), Links::Allowed));
            refused(dir.read(Path::new("d/../../outside/secret"), Links::Allowed));
            refused(dir.read(&outside.join("secret"), Links::Allowed));
            refused(dir.make_dir("..", 0o700));
            refused(dir.replace("../x", b"", 0o600, None));
        }
        assert!(!inside.parent().expect("test step").join("x").exists());
    }

    #[test]
    fn a_regular_file_and_a_nested_directory_are_read_and_made() {
        let (_s, inside, _) = scratch("plain");
        for dir in both(&inside) {
            let sub = dir.make_dir(".codex", 0o700).expect("test step");
            assert_eq!(sub.path(), inside.join(".codex"));
            sub.replace("config.toml", b"a = 1", 0o600, None)
                .expect("test step");
            assert_eq!(
                dir.read(Path::new(".codex/config.toml"), Links::Refused)
                    .expect("test step"),
                Some(b"a = 1".to_vec())
            );
            assert_eq!(
                dir.read(Path::new("missing"), Links::Refused)
                    .expect("test step"),
                None
            );
        }
        let mode = std::fs::metadata(inside.join(".codex"))
            .expect("test step")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        // Nothing of the replaced files' temporaries is left.
        assert_eq!(
            std::fs::read_dir(inside.join(".codex"))
                .expect("test step")
                .count(),
            1
        );
    }

    #[test]
    fn removing_a_tree_unlinks_its_links_and_never_enters_them() {
        let (_s, inside, outside) = scratch("remove");
        std::fs::create_dir_all(inside.join("t/d/e")).expect("test step");
        std::fs::write(inside.join("t/d/e/f"), b"f").expect("test step");
        std::os::unix::fs::symlink(&outside, inside.join("t/d/out")).expect("test step");
        std::os::unix::fs::symlink(outside.join("secret"), inside.join("t/s")).expect("test step");
        nix::unistd::mkfifo(&inside.join("t/p"), Mode::from_bits_truncate(0o600))
            .expect("test step");
        std::os::unix::fs::symlink(&outside, inside.join("l")).expect("test step");
        let dir = Dir::open(&inside).expect("test step");
        dir.remove("t").expect("test step");
        dir.remove("l").expect("test step");
        dir.remove("missing").expect("test step");
        assert_eq!(std::fs::read_dir(&inside).expect("test step").count(), 0);
        assert_eq!(
            std::fs::read(outside.join("secret")).expect("test step"),
            b"secret"
        );
        refused(dir.remove("../outside"));
    }

    #[test]
    fn a_file_too_large_is_refused() {
        let (_s, inside, _) = scratch("large");
        let file = File::create(inside.join("big")).expect("test step");
        file.set_len(READ_LIMIT + 1).expect("test step");
        let message = refused(
            Dir::open(&inside)
                .expect("test step")
                .read(Path::new("big"), Links::Allowed),
        );
        assert!(message.contains("4 MiB"), "{message}");
    }

    #[test]
    fn handing_over_a_tree_gives_links_themselves_and_keeps_shared_files() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let (_s, inside, outside) = scratch("tree");
        std::fs::create_dir_all(inside.join("a/b")).expect("test step");
        std::fs::write(inside.join("a/b/f"), b"f").expect("test step");
        std::os::unix::fs::symlink(&outside, inside.join("a/out")).expect("test step");
        std::os::unix::fs::symlink(outside.join("secret"), inside.join("a/b/s"))
            .expect("test step");
        std::fs::hard_link(outside.join("secret"), inside.join("a/h")).expect("test step");
        let owner = Owner {
            uid: 4242,
            gid: 4243,
        };
        Dir::open(&inside)
            .expect("test step")
            .hand_over_tree(Some(owner))
            .expect("test step");
        for p in ["", "a", "a/b", "a/b/f"] {
            let meta = std::fs::symlink_metadata(inside.join(p)).expect("test step");
            assert_eq!((meta.uid(), meta.gid()), (4242, 4243), "{p}");
        }
        for p in ["a/out", "a/b/s"] {
            assert_eq!(
                std::fs::symlink_metadata(inside.join(p))
                    .expect("test step")
                    .uid(),
                4242
            );
        }
        for p in [outside.clone(), outside.join("secret")] {
            assert_eq!(
                std::fs::metadata(&p).expect("test step").uid(),
                0,
                "{}",
                p.display()
            );
        }
    }

    #[test]
    fn a_directory_opened_from_one_without_openat2_walks_too() {
        let (_s, inside, _) = scratch("walk");
        let mut dir = Dir::open(&inside).expect("test step");
        dir.resolve = Resolve::Walk;
        let sub = dir.make_dir("x", 0o700).expect("test step");
        assert_eq!(sub.resolve, Resolve::Walk);
    }
}
