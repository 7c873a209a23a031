//! Group commit: makes sled's writes durable, sharing one disk sync among concurrent writers.
//!
//! sled 0.34's `flush()` writes its buffers with `pwrite` + `sync_file_range` and never calls
//! fsync/fdatasync, so on its own it does not survive power loss (see
//! `docs/decisions/0001-durability.md`). A dedicated thread therefore runs `flush()` followed by
//! `fdatasync` of sled's data file. Writers take a ticket after their inserts and wait until a
//! sync that *started* after the ticket has completed; every writer that arrives while a sync is
//! running is covered by the next one, so under load one fdatasync serves many appends.
//!
//! sled writes log messages larger than a quarter segment (128 KiB; large node pages can get
//! there too) to separate files under `blobs/`, which its flush does not sync either. Blob files
//! are written once and then never changed, so each sync also fsyncs the blob files that are new
//! or still growing since it last looked, and the directory that holds them.
//!
//! Each sync is also a numbered commit (`watermark::Commits`), so a store whose recovery lost
//! acknowledged writes is recognised at the next open.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::watch;

use super::health::{Cause, Condition, Health};
use super::watermark::{CommitError, Commits};

/// A group commit that failed: what was written before it may or may not be on disk.
#[derive(Debug, Clone, thiserror::Error)]
#[error("durable sync failed: {message}")]
pub struct SyncError {
    pub cause: Cause,
    pub message: Arc<str>,
}

impl SyncError {
    fn new(cause: Cause, message: impl Into<Arc<str>>) -> SyncError {
        SyncError {
            cause,
            message: message.into(),
        }
    }
}

struct State {
    requested: u64,
    stop: bool,
    /// The sync thread waits for a ticket: the next one must wake it. While it syncs it needs
    /// no wake-up (it looks for tickets when done), which spares a system call per append.
    idle: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    syncs: AtomicU64,
    sync_micros: AtomicU64,
}

/// What the sync thread publishes: the highest ticket known durable, or the failure that
/// stopped it. After a failed sync nothing is acknowledged again: the disk state is unknown.
type Published = Result<u64, SyncError>;

pub struct Syncer {
    shared: Arc<Shared>,
    health: Arc<Health>,
    done: watch::Receiver<Published>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    pub fn start(
        db: sled::Db,
        data_file: File,
        blobs_dir: PathBuf,
        commits: Arc<Commits>,
        health: Arc<Health>,
    ) -> Syncer {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                requested: 0,
                stop: false,
                idle: false,
            }),
            wake: Condvar::new(),
            syncs: AtomicU64::new(0),
            sync_micros: AtomicU64::new(0),
        });
        let (tx, done) = watch::channel(Ok(0));
        let thread_shared = shared.clone();
        let thread_health = health.clone();
        let thread = std::thread::Builder::new()
            .name("runledger-sync".into())
            .spawn(move || {
                run(
                    thread_shared,
                    db,
                    data_file,
                    blobs_dir,
                    commits,
                    thread_health,
                    tx,
                )
            })
            .ok();
        Syncer {
            shared,
            health,
            done,
            thread,
        }
    }

    fn ticket(&self) -> u64 {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.requested += 1;
        if state.idle {
            state.idle = false;
            self.shared.wake.notify_one();
        }
        state.requested
    }

    /// Returns once everything written before the call is on disk.
    pub async fn sync(&self) -> Result<(), SyncError> {
        if self.thread.is_none() {
            return Err(SyncError::new(
                Cause::Io,
                "the sync thread could not be started",
            ));
        }
        let asked = Instant::now();
        let ticket = self.ticket();
        let mut rx = self.done.clone();
        let mut condition = self.health.subscribe();
        // A write that failed elsewhere (sled's own flusher, an append) ends the wait too: the
        // sync thread may be stuck in a flush that cannot complete.
        let failed = async {
            match condition
                .wait_for(|c| matches!(c, Condition::Failed(_)))
                .await
                .map(|c| *c)
            {
                Ok(Condition::Failed(cause)) => {
                    SyncError::new(cause, "a write to the store failed")
                }
                _ => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = rx.wait_for(|published| match published {
                Ok(done) => *done >= ticket,
                Err(_) => true,
            }) => outcome.map_err(|_| SyncError::new(Cause::Io, "the sync thread stopped"))?,
            e = failed => return Err(e),
        };
        match &*outcome {
            Ok(_) => {
                runledger_base::metrics::METRICS
                    .sync_wait
                    .observe(asked.elapsed());
                Ok(())
            }
            Err(e) => Err(e.clone()),
        }
    }

    /// `(number of syncs, total microseconds spent in them)` since start.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.shared.syncs.load(Ordering::Relaxed),
            self.shared.sync_micros.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        {
            let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
            state.stop = true;
            self.shared.wake.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            // A store that failed may have left the thread in a flush that never returns;
            // the process is about to stop or restart, so it is left behind rather than
            // awaited.
            if !matches!(self.health.condition(), Condition::Failed(_)) {
                let _ = thread.join();
            }
        }
    }
}

/// What a blob file looked like when it was last synced.
type BlobState = (u64, Option<std::time::SystemTime>);

/// Fsyncs blob files that are new or have changed since they were last synced (sled may still
/// be writing a blob a sync sees first), and the directory if any file was new.
///
/// sled removes a blob file once the value in it has been superseded (rewritten, or merged
/// into a newer page) and its segment reclaimed, and it does so from its own threads while a
/// sync runs. A blob that disappears between the listing and its fsync is therefore no failure:
/// sled removes a blob only after the message that replaced it is in its log, so the removed
/// file holds nothing any recovery will read, and nothing in it needs to be durable. Such a
/// blob is simply not synced (and forgotten). Every other error is a real failure.
pub fn sync_new_blobs(
    dir: &Path,
    synced: &mut HashMap<OsString, BlobState>,
) -> std::io::Result<()> {
    let names = match list_blobs(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    sync_listed(dir, names, synced)
}

/// The names in the blob directory.
fn list_blobs(dir: &Path) -> std::io::Result<Vec<OsString>> {
    std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect()
}

/// Fsyncs, of the `names` listed in `dir`, those new or changed since `synced` saw them; a
/// name whose file is gone by the time it is looked at is skipped (see `sync_new_blobs`).
fn sync_listed(
    dir: &Path,
    names: Vec<OsString>,
    synced: &mut HashMap<OsString, BlobState>,
) -> std::io::Result<()> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut present = HashMap::new();
    let mut new = false;
    for name in names {
        let path = dir.join(&name);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let state = (meta.len(), meta.modified().ok());
        match synced.get(&name) {
            Some(seen) if *seen == state => {}
            seen => {
                // Once open, the file can be synced even if sled unlinks it meanwhile.
                match File::open(&path) {
                    Ok(file) => file.sync_all()?,
                    Err(e) if gone(&e) => continue,
                    Err(e) => return Err(e),
                }
                new |= seen.is_none();
            }
        }
        present.insert(name, state);
    }
    if new {
        File::open(dir)?.sync_all()?;
    }
    // Forget blobs sled has removed, so the map stays as small as the directory.
    *synced = present;
    Ok(())
}

fn run(
    shared: Arc<Shared>,
    db: sled::Db,
    data_file: File,
    blobs_dir: PathBuf,
    commits: Arc<Commits>,
    health: Arc<Health>,
    tx: watch::Sender<Published>,
) {
    let mut done = 0u64;
    let mut synced_blobs = HashMap::new();
    loop {
        let target = {
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            while state.requested == done && !state.stop {
                state.idle = true;
                state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            state.idle = false;
            if state.requested == done && state.stop {
                commits.persist();
                return;
            }
            state.requested
        };
        let started = Instant::now();
        let outcome = commits
            .commit(|| {
                db.flush()
                    .map_err(|e| (Cause::of_sled(&e), e.to_string()))?;
                data_file
                    .sync_data()
                    .map_err(|e| (Cause::of_io(&e), e.to_string()))?;
                sync_new_blobs(&blobs_dir, &mut synced_blobs)
                    .map_err(|e| (Cause::of_io(&e), e.to_string()))
            })
            .map_err(|e| match e {
                CommitError::Sled(e) => (Cause::of_sled(&e), e.to_string()),
                CommitError::Sync(e) => e,
            });
        let took = started.elapsed();
        runledger_base::metrics::METRICS.sync.observe(took);
        shared.syncs.fetch_add(1, Ordering::Relaxed);
        shared
            .sync_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        match outcome {
            Ok(()) => {
                done = target;
                let _previous = tx.send_replace(Ok(done));
            }
            Err((cause, e)) => {
                // Never retried: after a failed fsync the kernel may have dropped the pages it
                // could not write, and a second fsync would report success without them.
                health.fail(cause, &format_args!("durable sync failed: {e}"));
                let _previous = tx.send_replace(Err(SyncError::new(cause, e)));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_growing_blob_files_are_synced_and_removed_ones_forgotten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = dir.path().join("blobs");
        let mut synced = HashMap::new();
        sync_new_blobs(&blobs, &mut synced).expect("a missing directory is fine");
        std::fs::create_dir(&blobs).expect("mkdir");
        std::fs::write(blobs.join("100"), b"blob").expect("write");
        std::fs::write(blobs.join("200"), b"blob").expect("write");
        sync_new_blobs(&blobs, &mut synced).expect("sync");
        assert_eq!(synced.len(), 2);
        std::fs::remove_file(blobs.join("100")).expect("rm");
        sync_new_blobs(&blobs, &mut synced).expect("sync");
        assert_eq!(synced.keys().collect::<Vec<_>>(), [&OsString::from("200")]);
        // A blob that grew after it was first seen is synced again.
        std::fs::write(blobs.join("200"), b"blob, now complete").expect("write");
        sync_new_blobs(&blobs, &mut synced).expect("sync");
        assert_eq!(synced.get(&OsString::from("200")).map(|s| s.0), Some(18));
    }

    /// sled removes superseded blobs from its own threads: one listed and then removed before
    /// its fsync is skipped, not a failed sync (issue #27: this bricked the store).
    #[test]
    fn a_blob_removed_between_listing_and_sync_is_not_a_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = dir.path().join("blobs");
        std::fs::create_dir(&blobs).expect("mkdir");
        for name in ["1", "2", "3"] {
            std::fs::write(blobs.join(name), b"blob").expect("write");
        }
        let mut synced = HashMap::new();
        let names = list_blobs(&blobs).expect("list");
        assert_eq!(names.len(), 3);
        std::fs::remove_file(blobs.join("2")).expect("rm");
        sync_listed(&blobs, names, &mut synced).expect("a removed blob is no failure");
        let mut kept: Vec<_> = synced.keys().cloned().collect();
        kept.sort();
        assert_eq!(kept, [OsString::from("1"), OsString::from("3")]);
    }

    /// The same race, unstaged: one thread keeps writing and removing blob files the way sled
    /// does while syncs run; no sync may fail.
    #[test]
    fn syncs_racing_blob_removal_never_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = dir.path().join("blobs");
        std::fs::create_dir(&blobs).expect("mkdir");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let blobs = blobs.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::fs::write(blobs.join(n.to_string()), [7u8; 4096]).expect("write");
                    if n >= 2 {
                        std::fs::remove_file(blobs.join((n - 2).to_string())).expect("rm");
                    }
                    n += 1;
                }
            })
        };
        let mut synced = HashMap::new();
        for _ in 0..2_000 {
            sync_new_blobs(&blobs, &mut synced).expect("no false sync failure");
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().expect("churn thread");
    }
}
