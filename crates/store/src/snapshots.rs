//! sled's snapshots of its page table: writing a fresh one after a run of writes, and setting
//! them aside when the store is damaged so that the next open recovers from the log alone. Both
//! need the data directory to themselves: no handle of the store may be open.

use std::path::{Path, PathBuf};

use crate::layout::SLED_DIR;
use crate::open::open_sled;
use crate::Error;

/// Lets sled write a fresh snapshot of its page table, so that the next open reads the
/// snapshot instead of scanning every log segment written since the previous open.
///
/// sled 0.34 writes that snapshot only while opening a database (its `snapshot_after_ops` is a
/// no-op), so this opens the database once more and closes it. Call it only when no handle of
/// the store is left in this process (sled's file lock refuses the open otherwise). The open
/// costs about what the next start would have spent scanning; the page cache is warm now,
/// which makes it cheaper here. See `docs/performance.md`.
pub fn refresh_snapshot(data_dir: &Path) -> Result<(), Error> {
    drop(open_sled(data_dir, 1024 * 1024)?);
    Ok(())
}

/// Moves sled's snapshots of its page table out of the store, into a new directory
/// `damaged-snapshot-<unix seconds>` beside it (kept for whoever investigates the damage), so
/// that the next open recovers from the log alone: it reads the log from its start and stops at
/// the first damaged message, which the commit watermark then reports as `LostWrites`. Returns
/// that directory, or `None` if there was no snapshot. Only for a holder of the data directory
/// who accepts losing writes (`runledger replay`), with no handle of the store open.
pub fn set_aside_snapshots(data_dir: &Path) -> Result<Option<PathBuf>, Error> {
    let dir = data_dir.join(SLED_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let mut snapshots = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let entry = entry.map_err(io(&dir))?;
        if entry.file_name().to_string_lossy().starts_with("snap.") {
            snapshots.push(entry.path());
        }
    }
    if snapshots.is_empty() {
        return Ok(None);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = data_dir.join(format!("damaged-snapshot-{secs}"));
    std::fs::create_dir(&aside).map_err(io(&aside))?;
    for path in snapshots {
        let target = aside.join(path.file_name().unwrap_or_default());
        std::fs::rename(&path, &target).map_err(io(&path))?;
    }
    // The moves must outlive a crash before sled's next open writes a new snapshot.
    for d in [&dir, &aside, &data_dir.to_path_buf()] {
        std::fs::File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(io(d))?;
    }
    Ok(Some(aside))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, Store};

    /// A snapshot whose writing a full disk cut short must not make the store look damaged
    /// (issue #27: sled read the leftover `.generating` file as its newest snapshot).
    #[test]
    fn an_unfinished_snapshot_file_is_not_read_as_a_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(Store::open(dir.path(), &Options::default()).expect("open"));
        // The store's background threads let go of sled's file lock a moment after the drop.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match refresh_snapshot(dir.path()) {
                Err(Error::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                result => break result.expect("snapshot"),
            }
        }
        std::fs::write(
            dir.path()
                .join(SLED_DIR)
                .join("snap.FFFFFFFFFFFFFFFF.generating"),
            b"",
        )
        .expect("write");
        drop(Store::open(dir.path(), &Options::default()).expect("a leftover is no damage"));
    }
}
