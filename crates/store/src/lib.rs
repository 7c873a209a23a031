//! The event log on sled, and the other small durable records that live beside it (API keys,
//! idempotency keys, instance secrets, the "dirty runs" marker).
//!
//! It also keeps the data directory private: the umask of every process that opens a store,
//! and the tightening of a directory an earlier version left readable (`tighten`).
//!
//! This module alone knows the sled key layout of these trees and the record codec. It knows
//! nothing of the read index (`projection` owns its own trees) or of HTTP. Writes are plain
//! inserts — no sled transactions or batches, which cap throughput and inflate memory (see
//! `docs/decisions/0001-durability.md`); nothing is acknowledged before `sync()` returns.

#![forbid(unsafe_code)]

mod agent_uids;
pub mod api_keys;
pub mod codec;
pub mod content;
pub mod credentials;
pub mod health;
mod schedules;
pub mod space;
pub mod sync;
pub mod watermark;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use agent_uids::{Taken, MAX_PASSED_OVER};
pub use codec::{Envelope, ScheduleEnvelope};
pub use health::{Refusal, Writer};
use runledger_domain::{Event, Run, RunId, Timestamp};
pub use sync::SyncError;

pub use runledger_config::DEFAULT_CACHE_MB;

const EVENTS: &str = "events";
/// The schedules' logs (`store/schedules.rs`).
const SCHEDULE_EVENTS: &str = "schedule_events";
const DIRTY: &str = "dirty";
const IDEMPOTENCY: &str = "idempotency";
const META: &str = "meta";
/// The `meta` record of the index floor (`Store::index_floor`).
const INDEX_FLOOR: &str = "index_floor";

/// The instance secret that makes `RUNLEDGER_INSTANCE`, the marker of this data directory's
/// agent processes.
pub const INSTANCE_ID: &str = "instance_id";
/// The instance secret that signs session-link tokens.
pub const SESSION_SECRET: &str = "session_secret";
/// The instance secret that seals runs' MCP credentials (`crate::credentials`).
pub const CREDENTIAL_KEY: &str = "credential_key";
/// The directory under the data directory that holds sled's files.
const SLED_DIR: &str = "sled";
/// The entries of a data directory that make up the store (the rest, such as transcripts and
/// workspaces, lives beside it): what a restore moves into place.
pub const STORE_ENTRIES: [&str; 2] = [SLED_DIR, watermark::FILE_NAME];

/// Every instance secret, in the order a backup lists them. The `meta` tree holds other
/// records too (the commit number), so backups name secrets explicitly instead of walking it.
pub const INSTANCE_SECRETS: [&str; 3] = [INSTANCE_ID, SESSION_SECRET, CREDENTIAL_KEY];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the data directory {0} is in use by another runledger process (is the server running?)"
    )]
    Locked(PathBuf),
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt event record of run {run_id} at sequence {seq}: {source}")]
    Corrupt {
        run_id: String,
        seq: u64,
        source: codec::Error,
    },
    #[error("event record of run {run_id} at sequence {seq} cannot be encoded: {source}")]
    Encode {
        run_id: RunId,
        seq: u64,
        source: codec::Error,
    },
    #[error("event {seq} of run {run_id} was already written: concurrent writers on one run")]
    Conflict { run_id: RunId, seq: u64 },
    #[error("corrupt event record of schedule {schedule_id} at sequence {seq}: {source}")]
    ScheduleCorrupt {
        schedule_id: String,
        seq: u64,
        source: codec::Error,
    },
    #[error("event {seq} of schedule {schedule_id} was already written: concurrent writers on one schedule")]
    ScheduleConflict { schedule_id: RunId, seq: u64 },
    #[error("corrupt record in tree {tree}: {detail}")]
    CorruptRecord { tree: &'static str, detail: String },
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error(transparent)]
    Content(#[from] content::Error),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(
        "the store in {dir} lost acknowledged writes: sled recovered up to commit {recovered}, but \
         commit {acknowledged} had been made durable. sled stops recovery at the first damaged \
         log record and drops everything after it, so the data directory is damaged. Stop and \
         copy it before anything else opens it, then see \"Recovering from damage\" in \
         docs/operations.md: restore a backup, or run `runledger replay` to accept the loss and \
         serve what is left"
    )]
    LostWrites {
        dir: PathBuf,
        recovered: u64,
        acknowledged: u64,
    },
    #[error(
        "the store in {dir} is damaged: sled refuses to open it, having found {detail}. Stop \
         and copy the data directory before anything else opens it, then see \"Recovering \
         from damage\" in docs/operations.md: restore a backup, or run `runledger replay`, \
         which sets the snapshot aside, recovers what sled's log still holds and accepts the \
         loss"
    )]
    Damaged { dir: PathBuf, detail: String },
}

/// How the store is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// sled's page cache; its default of 1 GiB would dominate the service's memory.
    pub cache_bytes: u64,
    /// Open even if the store recovered fewer commits than were acknowledged (see
    /// `watermark`): for tools that salvage or accept what is left.
    pub accept_lost_writes: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            // The server's default (`server.cache_mb`), for the offline commands.
            cache_bytes: DEFAULT_CACHE_MB << 20,
            accept_lost_writes: false,
        }
    }
}

/// A cheap-to-clone handle on the open store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    db: sled::Db,
    events: sled::Tree,
    schedules: sled::Tree,
    dirty: sled::Tree,
    idempotency: sled::Tree,
    meta: sled::Tree,
    keys: api_keys::KeyTrees,
    syncer: sync::Syncer,
    commits: Arc<watermark::Commits>,
    lost: Option<LostWrites>,
    dir: PathBuf,
    health: Arc<health::Health>,
    space: std::sync::Mutex<Option<space::Monitor>>,
    content: content::ContentStore,
}

/// A store opened with `accept_lost_writes` that had lost some: the commit numbers recovered
/// and acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostWrites {
    pub recovered: u64,
    pub acknowledged: u64,
}

/// What an idempotent create remembers about the first request that used a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub run_id: RunId,
    /// Hash of the request body, to refuse the same key with a different request.
    pub fingerprint: [u8; 32],
    pub at: Timestamp,
}

fn event_key(run_id: RunId, seq: u64) -> [u8; 24] {
    let mut key = [0u8; 24];
    key[..16].copy_from_slice(&run_id.to_bytes());
    key[16..].copy_from_slice(&seq.to_be_bytes());
    key
}

fn split_event_key(key: &[u8]) -> Option<(RunId, u64)> {
    let id: [u8; 16] = key.get(..16)?.try_into().ok()?;
    let seq: [u8; 8] = key.get(16..24)?.try_into().ok()?;
    Some((RunId::from_bytes(id), u64::from_be_bytes(seq)))
}

/// Makes everything this process creates from now on private to its user (umask 0077). sled
/// creates its files with the process umask (0644 under the usual 022), and the store holds
/// the key hashes and the secret that signs session links: whoever can read it can read every
/// run. Called by every process that opens a store, before anything is created.
pub fn private_umask() {
    use nix::sys::stat::{umask, Mode};
    umask(Mode::from_bits_truncate(0o077));
}

/// The entries of a data directory that hold the service's own records, tightened by
/// `tighten`: the store, and the transcripts beside it. The rest (workspaces, agents' files,
/// repository mirrors) belongs to the agents, whose files keep the modes they need (an
/// executable script stays executable); the private data directory keeps other users out.
const PRIVATE_ENTRIES: [&str; 3] = [SLED_DIR, watermark::FILE_NAME, "transcripts"];

/// Takes group and other permissions off what a data directory made before `private_umask`
/// (or copied in by hand) left readable: the directory itself becomes `dir_mode`, the store and
/// the transcripts 0700 (directories) and 0600 (files). A directory found private (0700) is
/// not entered: nobody else reaches what is below it. Returns the paths it changed. Symbolic
/// links are left alone, never followed.
pub fn tighten(data_dir: &Path, dir_mode: u32) -> Result<Vec<PathBuf>, Error> {
    use std::os::unix::fs::PermissionsExt;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let mut changed = Vec::new();
    let set = |path: &Path, mode: u32, changed: &mut Vec<PathBuf>| -> Result<(), Error> {
        let current = std::fs::symlink_metadata(path).map_err(io(path))?;
        if current.permissions().mode() & 0o7777 != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io(path))?;
            changed.push(path.to_path_buf());
        }
        Ok(())
    };
    if !data_dir.is_dir() {
        return Ok(changed);
    }
    set(data_dir, dir_mode, &mut changed)?;
    let mut stack: Vec<PathBuf> = PRIVATE_ENTRIES.iter().map(|e| data_dir.join(e)).collect();
    while let Some(path) = stack.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path)(e)),
        };
        if meta.is_dir() {
            // A directory that is private already keeps others from everything below it, and
            // is what every start after the first finds: its contents are not walked, which at
            // a million transcripts on a cold page cache would take seconds of every start.
            if meta.permissions().mode() & 0o7777 == 0o700 {
                continue;
            }
            set(&path, 0o700, &mut changed)?;
            for entry in std::fs::read_dir(&path).map_err(io(&path))? {
                stack.push(entry.map_err(io(&path))?.path());
            }
        } else if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            // Only what others can reach: the owner's own bits stay as they are.
            let mode = meta.permissions().mode() & 0o700;
            set(&path, mode, &mut changed)?;
        }
    }
    Ok(changed)
}

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

/// Opens sled's database under `data_dir`; a database another process holds is `Locked`.
fn open_sled(data_dir: &Path, cache_bytes: u64) -> Result<sled::Db, Error> {
    sled::Config::new()
        .path(data_dir.join(SLED_DIR))
        .cache_capacity(cache_bytes)
        .mode(sled::Mode::HighThroughput)
        .open()
        .map_err(|e| match e {
            sled::Error::Io(ref io)
                if io.kind() == std::io::ErrorKind::WouldBlock
                    || io.to_string().contains("lock") =>
            {
                Error::Locked(data_dir.to_path_buf())
            }
            // sled checks a CRC on every message it reads. At open it reads the messages its
            // snapshot points at, so a damaged one there fails the open (where a damaged
            // message met while scanning the log after the snapshot silently ends recovery:
            // `LostWrites`).
            sled::Error::Corruption { at, .. } => Error::Damaged {
                dir: data_dir.to_path_buf(),
                detail: match at {
                    Some(at) => format!(
                        "a damaged message at byte {} of its log, {}",
                        at.lid(),
                        data_dir.join(SLED_DIR).join("db").display()
                    ),
                    // Its log ends before the point its snapshot records (the scan from there
                    // stopped at a damaged message), or the snapshot's own CRC failed.
                    None => "its log cut short before the point its snapshot of the page table \
                             records (a damaged message ends it), or that snapshot damaged"
                        .to_string(),
                },
            },
            other => Error::Sled(other),
        })
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

impl Store {
    /// Opens (creating if needed) the store under `data_dir`.
    /// Sets the process umask to 0077 first (`private_umask`).
    pub fn open(data_dir: &Path, options: &Options) -> Result<Store, Error> {
        private_umask();
        let dir = data_dir.join(SLED_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        let db = open_sled(data_dir, options.cache_bytes)?;
        // sled 0.34 keeps its log in this one file, plus write-once blob files for messages over
        // 128 KiB; fdatasync of the file and fsync of new blobs make flushed writes durable.
        let data_path = dir.join("db");
        let data_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&data_path)
            .map_err(|source| Error::Io {
                path: data_path,
                source,
            })?;
        // The directory entries sled created (db, conf, blobs/) must survive a crash too.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        let meta = db.open_tree(META)?;
        // Opened under sled's lock: no other process writes the content store meanwhile.
        let content = content::ContentStore::open(data_dir)?;
        let recovered = watermark::recovered(&meta)?;
        let io = |source| Error::Io {
            path: data_dir.join(watermark::FILE_NAME),
            source,
        };
        let mut lost = None;
        let start = match watermark::read(data_dir).map_err(io)? {
            watermark::Reading::Acknowledged(acknowledged) if acknowledged > recovered => {
                if !options.accept_lost_writes {
                    return Err(Error::LostWrites {
                        dir: data_dir.to_path_buf(),
                        recovered,
                        acknowledged,
                    });
                }
                lost = Some(LostWrites {
                    recovered,
                    acknowledged,
                });
                acknowledged
            }
            watermark::Reading::Unreadable => {
                tracing::warn!(
                    "the commit watermark is unreadable (torn or foreign); it is rewritten at the next commit"
                );
                recovered
            }
            _ => recovered,
        };
        let commits =
            Arc::new(watermark::Commits::open(data_dir, meta.clone(), start).map_err(io)?);
        let health = Arc::new(health::Health::default());
        let syncer = sync::Syncer::start(
            db.clone(),
            data_file,
            dir.join("blobs"),
            commits.clone(),
            health.clone(),
        );
        Ok(Store {
            inner: Arc::new(Inner {
                events: db.open_tree(EVENTS)?,
                schedules: db.open_tree(SCHEDULE_EVENTS)?,
                dirty: db.open_tree(DIRTY)?,
                idempotency: db.open_tree(IDEMPOTENCY)?,
                meta,
                keys: api_keys::KeyTrees::open(&db)?,
                syncer,
                commits,
                lost,
                dir: data_dir.to_path_buf(),
                db,
                health,
                space: std::sync::Mutex::new(None),
                content,
            }),
        })
    }

    /// Whether `data_dir` holds a store (without opening, let alone creating, one).
    pub fn exists_in(data_dir: &Path) -> bool {
        data_dir.join(SLED_DIR).exists()
    }

    /// The content store beside the log (attachments, artifacts' bytes).
    pub fn content(&self) -> &content::ContentStore {
        &self.inner.content
    }

    pub fn db(&self) -> &sled::Db {
        &self.inner.db
    }

    /// Whether this store was opened although it had lost acknowledged writes.
    pub fn lost_writes(&self) -> Option<LostWrites> {
        self.inner.lost
    }

    pub fn data_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Whether the store can write now (see `health`).
    pub fn condition(&self) -> health::Condition {
        self.inner.health.condition()
    }

    /// Refuses a write the store's condition does not admit, before anything is written: one
    /// atomic load while the store is writable.
    pub fn admit(&self, writer: Writer) -> Result<(), Error> {
        Ok(self.inner.health.admit(writer)?)
    }

    /// Writes refused since the store was opened (for `/metrics`).
    pub fn refused_writes(&self) -> u64 {
        self.inner.health.refused()
    }

    /// Wakes on every change of the store's condition.
    pub fn watch_condition(&self) -> tokio::sync::watch::Receiver<health::Condition> {
        self.inner.health.subscribe()
    }

    /// Starts the space monitor with a reserve of `reserve` bytes (the server does; the
    /// command line does not). See `space`.
    pub fn watch_space(&self, reserve: u64) {
        let monitor = space::Monitor::start(&self.inner.dir, reserve, self.inner.health.clone());
        *self.inner.space.lock().unwrap_or_else(|p| p.into_inner()) = monitor;
    }

    /// Records a failed write to sled: the store refuses every write from now on.
    fn failed(&self, e: &sled::Error) {
        self.inner.health.fail(
            health::Cause::of_sled(e),
            &format_args!("storage write failed: {e}"),
        );
    }

    /// Waits until every write made before the call is durable (group commit).
    pub async fn sync(&self) -> Result<(), Error> {
        Ok(self.inner.syncer.sync().await?)
    }

    /// Blocking variant of `sync` for the command line.
    pub fn sync_blocking(&self) -> Result<(), Error> {
        let result = self.inner.commits.commit(|| {
            self.inner.db.flush()?;
            let dir = self.inner.dir.join(SLED_DIR);
            let path = dir.join("db");
            std::fs::File::open(&path)
                .and_then(|f| f.sync_data())
                .map_err(|source| Error::Io { path, source })?;
            let blobs = dir.join("blobs");
            sync::sync_new_blobs(&blobs, &mut Default::default()).map_err(|source| Error::Io {
                path: blobs,
                source,
            })
        });
        let error = match result {
            Ok(()) => return Ok(()),
            Err(watermark::CommitError::Sled(e)) => Error::Sled(e),
            Err(watermark::CommitError::Sync(e)) => e,
        };
        let cause = match &error {
            Error::Sled(e) => health::Cause::of_sled(e),
            Error::Io { source, .. } => health::Cause::of_io(source),
            _ => health::Cause::Io,
        };
        self.inner
            .health
            .fail(cause, &format_args!("durable sync failed: {error}"));
        Err(error)
    }

    /// Whether a run is marked dirty (its index entry may lag its log).
    pub fn is_dirty(&self, run_id: RunId) -> Result<bool, Error> {
        Ok(self.inner.dirty.contains_key(run_id.to_bytes())?)
    }

    /// `(syncs, microseconds spent syncing)` since the store was opened.
    pub fn sync_stats(&self) -> (u64, u64) {
        self.inner.syncer.stats()
    }

    /// Appends envelopes to the log. Each `(run_id, seq)` may be written once only; a second
    /// write of the same position is a bug in the caller and is refused loudly.
    pub fn append(&self, envelopes: &[Envelope]) -> Result<(), Error> {
        let started = std::time::Instant::now();
        self.append_inner(envelopes)?;
        runledger_base::metrics::METRICS
            .append
            .observe(started.elapsed());
        Ok(())
    }

    fn append_inner(&self, envelopes: &[Envelope]) -> Result<(), Error> {
        // Once a write or sync has failed, nothing more reaches the log: a later request must
        // not leave events behind that its client is told failed.
        self.inner.health.admit(Writer::Internal)?;
        for envelope in envelopes {
            let record = codec::encode(envelope).map_err(|source| Error::Encode {
                run_id: envelope.run_id,
                seq: envelope.seq,
                source,
            })?;
            let key = event_key(envelope.run_id, envelope.seq);
            let swapped = self
                .inner
                .events
                .compare_and_swap(key, None as Option<&[u8]>, Some(record))
                .inspect_err(|e| self.failed(e))?;
            if swapped.is_err() {
                return Err(Error::Conflict {
                    run_id: envelope.run_id,
                    seq: envelope.seq,
                });
            }
        }
        Ok(())
    }

    /// The log of one run from sequence `from` on, read one record at a time as the iterator
    /// is advanced: what reads a long history (the events API, its stream, `runledger
    /// events`) holds is what it keeps of the iterator's output, never the whole log. Every
    /// record is verified.
    pub fn run_events(
        &self,
        run_id: RunId,
        from: u64,
    ) -> impl Iterator<Item = Result<Envelope, Error>> + Send + 'static {
        let start = event_key(run_id, from);
        let end = event_key(run_id, u64::MAX);
        self.inner.events.range(start..=end).map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// The state of one run, folded from its log one event at a time (`None` if it has no
    /// events), so activating a run with a long history does not hold the history.
    pub fn load_run(&self, run_id: RunId) -> Result<Option<Run>, Error> {
        let mut run = None;
        for e in self.run_events(run_id, 0) {
            let e = e?;
            run = runledger_domain::evolve(run, run_id, &e.event, e.at);
        }
        Ok(run)
    }

    /// Every record of the log in key order; a damaged record yields an error and the scan
    /// goes on with the next one.
    pub fn scan(&self) -> impl Iterator<Item = Result<Envelope, Error>> + '_ {
        self.inner.events.iter().map(|item| {
            let (key, value) = item?;
            decode_checked(&key, &value)
        })
    }

    /// Number of records in the log (walks the tree; for tools, not hot paths).
    pub fn event_count(&self) -> usize {
        self.inner.events.len()
    }

    /// Marks a run whose log is about to grow ahead of its read-index entry. Cleared by
    /// `clear_dirty` once the index has caught up; startup re-projects what is still marked.
    pub fn mark_dirty(&self, run_id: RunId) -> Result<(), Error> {
        self.inner.dirty.insert(run_id.to_bytes(), &[])?;
        Ok(())
    }

    /// `mark_dirty` with a generation number as the marker's value, for `clear_dirty_if`.
    pub fn mark_dirty_generation(&self, run_id: RunId, generation: u64) -> Result<(), Error> {
        self.inner
            .dirty
            .insert(run_id.to_bytes(), &generation.to_be_bytes())?;
        Ok(())
    }

    pub fn clear_dirty(&self, run_id: RunId) -> Result<(), Error> {
        self.inner.dirty.remove(run_id.to_bytes())?;
        Ok(())
    }

    /// Clears the marker only if it still holds `generation`: a marker set again meanwhile (by
    /// a newer command) stays, whichever of the two writes reaches sled first.
    pub fn clear_dirty_generation(&self, run_id: RunId, generation: u64) -> Result<(), Error> {
        // `Err` from the inner result only says the marker was set again: nothing to do.
        let _ = self.inner.dirty.compare_and_swap(
            run_id.to_bytes(),
            Some(&generation.to_be_bytes()[..]),
            None::<&[u8]>,
        )?;
        Ok(())
    }

    /// The index floor: a run created at or after it may have durable commands the read index
    /// lacks without being marked dirty, and the next start catches every such run up
    /// (`projection::projector` keeps the floor behind every run it has not marked). `None` on a
    /// store that never had one: every run that needs catching up is marked.
    pub fn index_floor(&self) -> Result<Option<Timestamp>, Error> {
        self.inner
            .meta
            .get(INDEX_FLOOR)?
            .map(|v| {
                let bytes: [u8; 8] = v.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: META,
                    detail: format!("{INDEX_FLOOR} of {} bytes", v.len()),
                })?;
                Ok(Timestamp(u64::from_be_bytes(bytes)))
            })
            .transpose()
    }

    /// Moves the index floor. Written after the index writes it vouches for, so that sled's
    /// ordered log never recovers the floor without them.
    pub fn set_index_floor(&self, at: Timestamp) -> Result<(), Error> {
        self.inner.meta.insert(INDEX_FLOOR, &at.0.to_be_bytes())?;
        Ok(())
    }

    /// The runs created at or after `at`, in id order: a range scan of the log from the
    /// smallest id a run created at `at` can have.
    pub fn runs_created_since(&self, at: Timestamp) -> Result<Vec<RunId>, Error> {
        let mut runs: Vec<RunId> = Vec::new();
        let from = RunId::lower_bound(at).to_bytes();
        for key in self.inner.events.range(from..).keys() {
            let key = key?;
            let (run_id, _) = split_event_key(&key).ok_or_else(|| Error::CorruptRecord {
                tree: EVENTS,
                detail: format!("key of {} bytes", key.len()),
            })?;
            if runs.last() != Some(&run_id) {
                runs.push(run_id);
            }
        }
        Ok(runs)
    }

    pub fn dirty_runs(&self) -> Result<Vec<RunId>, Error> {
        self.inner
            .dirty
            .iter()
            .keys()
            .map(|k| {
                let k = k?;
                let bytes: [u8; 16] = k.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: DIRTY,
                    detail: format!("key of {} bytes", k.len()),
                })?;
                Ok(RunId::from_bytes(bytes))
            })
            .collect()
    }

    pub fn idempotency_get(&self, key: &[u8; 32]) -> Result<Option<IdempotencyRecord>, Error> {
        match self.inner.idempotency.get(key)? {
            None => Ok(None),
            Some(bytes) => {
                postcard::from_bytes(&bytes)
                    .map(Some)
                    .map_err(|e| Error::CorruptRecord {
                        tree: IDEMPOTENCY,
                        detail: e.to_string(),
                    })
            }
        }
    }

    pub fn idempotency_put(&self, key: &[u8; 32], record: &IdempotencyRecord) -> Result<(), Error> {
        self.admit(Writer::Client)?;
        let bytes = postcard::to_allocvec(record).map_err(|e| Error::CorruptRecord {
            tree: IDEMPOTENCY,
            detail: e.to_string(),
        })?;
        self.inner
            .idempotency
            .insert(key, bytes)
            .inspect_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Replaces an instance secret with a fresh random one (not yet durable: `sync` after).
    /// For the session-link secret, every link signed with the old one stops working.
    pub fn rotate_secret(&self, name: &str) -> Result<[u8; 32], Error> {
        use rand::RngCore;
        let mut fresh = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut fresh);
        self.inner.meta.insert(name, &fresh[..])?;
        Ok(fresh)
    }

    /// Whether `data_dir` holds a store that can be read: sled's log file is there. For the
    /// commands that only read, which must not create a store where there is none.
    pub fn present_in(data_dir: &Path) -> bool {
        data_dir.join(SLED_DIR).join("db").is_file()
    }

    /// A secret of this instance, created on first use (e.g. for session-link tokens).
    pub fn instance_secret(&self, name: &str) -> Result<[u8; 32], Error> {
        use rand::RngCore;
        let mut fresh = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut fresh);
        let stored =
            match self
                .inner
                .meta
                .compare_and_swap(name, None as Option<&[u8]>, Some(&fresh[..]))?
            {
                Ok(()) => fresh.to_vec(),
                Err(existing) => existing.current.map(|v| v.to_vec()).unwrap_or_default(),
            };
        stored.try_into().map_err(|_| Error::CorruptRecord {
            tree: META,
            detail: format!("secret {name} has the wrong length"),
        })
    }

    /// An instance secret if it exists; unlike `instance_secret`, never creates one (for
    /// `export`, which must not write to the store it reads).
    pub fn existing_secret(&self, name: &str) -> Result<Option<[u8; 32]>, Error> {
        self.inner
            .meta
            .get(name)?
            .map(|v| {
                v.as_ref().try_into().map_err(|_| Error::CorruptRecord {
                    tree: META,
                    detail: format!("secret {name} has the wrong length"),
                })
            })
            .transpose()
    }

    /// Stores an instance secret taken from a backup. Returns false, storing nothing, if the
    /// secret already exists: a restore never replaces one.
    pub fn restore_secret(&self, name: &str, value: &[u8; 32]) -> Result<bool, Error> {
        Ok(self
            .inner
            .meta
            .compare_and_swap(name, None as Option<&[u8]>, Some(&value[..]))?
            .is_ok())
    }

    pub fn keys(&self) -> api_keys::Keys<'_> {
        api_keys::Keys::new(&self.inner.keys)
    }
}

/// Decodes a record and checks that it sits under the key it names.
fn decode_checked(key: &[u8], value: &[u8]) -> Result<Envelope, Error> {
    let (run_id, seq) = split_event_key(key).ok_or_else(|| Error::CorruptRecord {
        tree: EVENTS,
        detail: format!("key of {} bytes", key.len()),
    })?;
    let envelope: Envelope = codec::decode(value).map_err(|source| Error::Corrupt {
        run_id: run_id.to_string(),
        seq,
        source,
    })?;
    if envelope.run_id != run_id || envelope.seq != seq {
        return Err(Error::Corrupt {
            run_id: run_id.to_string(),
            seq,
            source: codec::Error::Body(format!(
                "record names run {} sequence {}",
                envelope.run_id, envelope.seq
            )),
        });
    }
    Ok(envelope)
}

/// Convenience for building the envelopes of a decision.
pub fn envelopes(
    run_id: RunId,
    first_seq: u64,
    at: Timestamp,
    events: Vec<Event>,
) -> Vec<Envelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Envelope {
            run_id,
            seq: first_seq + i as u64,
            at,
            event,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tighten_takes_others_off_the_store_and_transcripts_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        drop(Store::open(&data, &Options::default()).expect("open"));
        let mode = |p: &Path| {
            std::fs::symlink_metadata(p)
                .expect("exists")
                .permissions()
                .mode()
                & 0o7777
        };
        let chmod = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        // A directory made before the umask was private, as the earlier versions left it.
        std::fs::create_dir_all(data.join("transcripts")).expect("mkdir");
        std::fs::create_dir_all(data.join("workspaces/r1")).expect("mkdir");
        std::fs::write(data.join("transcripts/r1.jsonl"), b"{}\n").expect("write");
        std::fs::write(data.join("workspaces/r1/run.sh"), b"true").expect("write");
        for p in [
            "",
            "sled",
            "sled/db",
            "sled/conf",
            "transcripts",
            "transcripts/r1.jsonl",
        ] {
            chmod(
                &data.join(p),
                if p.ends_with("db") || p.contains('.') || p.ends_with("conf") {
                    0o644
                } else {
                    0o755
                },
            );
        }
        chmod(&data.join("workspaces/r1/run.sh"), 0o755);
        std::os::unix::fs::symlink("/etc/passwd", data.join("transcripts/link")).expect("link");
        let changed = tighten(&data, 0o700).expect("tighten");
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("sled")), 0o700);
        assert_eq!(mode(&data.join("sled/db")), 0o600);
        assert_eq!(mode(&data.join("sled/conf")), 0o600);
        assert_eq!(mode(&data.join("transcripts")), 0o700);
        assert_eq!(mode(&data.join("transcripts/r1.jsonl")), 0o600);
        assert!(changed.contains(&data.join("sled/db")), "{changed:?}");
        // An agent's script stays executable; a link is not followed.
        assert_eq!(mode(&data.join("workspaces/r1/run.sh")), 0o755);
        assert_eq!(mode(Path::new("/etc/passwd")) & 0o044, 0o044);
        // Nothing left to do the second time.
        assert!(tighten(&data, 0o700).expect("again").is_empty());
        // A private directory is not walked (a start must not stat every transcript): what is
        // below it is out of others' reach whatever its mode.
        std::fs::write(data.join("transcripts/r2.jsonl"), b"{}\n").expect("write");
        chmod(&data.join("transcripts/r2.jsonl"), 0o644);
        assert!(tighten(&data, 0o700).expect("private dir").is_empty());
        // What the umask makes is private already.
        let fresh = dir.path().join("fresh");
        drop(Store::open(&fresh, &Options::default()).expect("open"));
        assert_eq!(mode(&fresh) & 0o077, 0);
        assert_eq!(mode(&fresh.join("sled/db")) & 0o077, 0);
        assert!(Store::present_in(&fresh));
        assert!(!Store::present_in(&dir.path().join("nothing")));
    }

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
