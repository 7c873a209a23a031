//! The commit watermark: makes a store that lost acknowledged writes refuse to pass for whole.
//!
//! sled 0.34 checks a CRC on every log message, but when recovery meets a damaged one it takes
//! it for a torn write at the end of the log and silently drops it *and everything after it*
//! (`pagecache/iterator.rs`: "found a tear"). One flipped byte in an old segment would lose
//! every later write without a word. So every group commit numbers itself: it stores its
//! number in sled (meta key `commit`) before the flush, and once the flush and fdatasync have
//! returned, writes the same number to `<data_dir>/commit.watermark`, outside sled. The file is
//! written only after the number is durable in sled, so a healthy store always recovers a
//! number at least as high as the file's. A lower one means sled dropped acknowledged writes,
//! and `Store::open` says so instead of serving what is left.
//!
//! The file is not fsynced per commit: losing its latest update in a power cut only makes it
//! lag, which is the safe direction. It holds one fixed-size line with a CRC, so a torn write
//! is recognised (and reported as unknown, never as a loss).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The name of the file under the data directory.
pub const FILE_NAME: &str = "commit.watermark";
/// The meta-tree key holding the number of the last commit sled made durable.
pub const META_KEY: &[u8] = b"commit";

const MAGIC: &str = "runledger-commit-watermark v1";

/// The watermark file's line for commit `n`: fixed length, so an overwrite never leaves a tail.
fn line(n: u64) -> String {
    let body = format!("{MAGIC} {n:020}");
    format!("{body} {:08x}\n", crc32fast::hash(body.as_bytes()))
}

/// What the watermark file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// No file (a new data directory, or one from before the watermark existed).
    Absent,
    /// The file is torn or not ours; nothing can be concluded.
    Unreadable,
    Acknowledged(u64),
}

fn parse(text: &str) -> Reading {
    let Some(text) = text.strip_suffix('\n') else {
        return Reading::Unreadable;
    };
    let Some((body, crc)) = text.rsplit_once(' ') else {
        return Reading::Unreadable;
    };
    if u32::from_str_radix(crc, 16).ok() != Some(crc32fast::hash(body.as_bytes())) {
        return Reading::Unreadable;
    }
    body.strip_prefix(MAGIC)
        .and_then(|n| n.trim_start().parse().ok())
        .map_or(Reading::Unreadable, Reading::Acknowledged)
}

/// Reads the watermark under `data_dir`.
pub fn read(data_dir: &Path) -> std::io::Result<Reading> {
    let mut text = String::new();
    match File::open(data_dir.join(FILE_NAME)) {
        Ok(file) => {
            // Bounded: the file is one short line; anything longer is not ours.
            file.take(256).read_to_string(&mut text).or_else(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    Ok(0)
                } else {
                    Err(e)
                }
            })?;
            Ok(parse(&text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Reading::Absent),
        Err(e) => Err(e),
    }
}

/// The number recovered from sled's meta tree (0 if none was ever written).
pub fn recovered(meta: &sled::Tree) -> Result<u64, sled::Error> {
    Ok(meta
        .get(META_KEY)?
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map_or(0, u64::from_be_bytes))
}

/// Numbers commits and records them on both sides. One per open store, shared by the sync
/// thread and the blocking sync of the command line.
pub struct Commits {
    meta: sled::Tree,
    file: File,
    path: PathBuf,
    /// The last number handed out; the mutex also keeps number order equal to commit order.
    last: Mutex<u64>,
}

impl Commits {
    /// Opens (creating) the watermark file; numbering continues after `start`.
    pub fn open(data_dir: &Path, meta: sled::Tree, start: u64) -> std::io::Result<Commits> {
        let path = data_dir.join(FILE_NAME);
        let existed = path.exists();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        if !existed {
            File::open(data_dir)?.sync_all()?;
        }
        Ok(Commits {
            meta,
            file,
            path,
            last: Mutex::new(start),
        })
    }

    /// Runs one durable commit: numbers it in sled, calls `sync` (flush + fdatasync), and on
    /// success records the number in the watermark file.
    pub fn commit<E>(&self, sync: impl FnOnce() -> Result<(), E>) -> Result<(), CommitError<E>> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let n = *last + 1;
        self.meta
            .insert(META_KEY, &n.to_be_bytes())
            .map_err(CommitError::Sled)?;
        sync().map_err(CommitError::Sync)?;
        *last = n;
        // A failed watermark write costs detection, not data: the commit itself is durable.
        if let Err(e) = self.file.write_all_at(line(n).as_bytes(), 0) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot update the commit watermark");
        }
        Ok(())
    }

    /// Makes the watermark file itself durable (at shutdown; never needed for correctness).
    pub fn persist(&self) {
        let _ = self.file.sync_data();
    }
}

#[derive(Debug)]
pub enum CommitError<E> {
    Sled(sled::Error),
    Sync(E),
}

impl<E: std::fmt::Display> std::fmt::Display for CommitError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitError::Sled(e) => write!(f, "cannot number the commit: {e}"),
            CommitError::Sync(e) => e.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_damage_is_unreadable() {
        for n in [0, 1, 42, u64::MAX] {
            assert_eq!(parse(&line(n)), Reading::Acknowledged(n));
            assert_eq!(line(n).len(), line(0).len());
        }
        let good = line(7);
        let mut torn = good.clone().into_bytes();
        torn[40] ^= 1;
        assert_eq!(parse(&String::from_utf8_lossy(&torn)), Reading::Unreadable);
        assert_eq!(parse(&good[..good.len() - 1]), Reading::Unreadable);
        assert_eq!(parse(""), Reading::Unreadable);
    }

    #[test]
    fn commits_are_numbered_in_sled_and_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().temporary(true).open().expect("sled");
        let meta = db.open_tree("meta").expect("tree");
        assert_eq!(read(dir.path()).expect("read"), Reading::Absent);
        let commits = Commits::open(dir.path(), meta.clone(), 5).expect("open");
        commits.commit(|| Ok::<(), ()>(())).expect("commit");
        commits.commit(|| Ok::<(), ()>(())).expect("commit");
        assert_eq!(recovered(&meta).expect("meta"), 7);
        assert_eq!(read(dir.path()).expect("read"), Reading::Acknowledged(7));
        // A failed sync records nothing in the file.
        assert!(commits.commit(|| Err("disk on fire")).is_err());
        assert_eq!(read(dir.path()).expect("read"), Reading::Acknowledged(7));
    }
}
