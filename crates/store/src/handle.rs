//! The `Store` handle: what its clones share, and what the handle offers beside the records —
//! the store's condition (writable or refusing), its group-committed durability, the content
//! store and the API keys. Opening one is `open.rs`; each kind of record has its own module,
//! which adds its methods to `Store`. It must not know those records' layout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::health::{self, Writer};
use crate::layout::SLED_DIR;
use crate::{admin_tree, api_keys, content, space, sync, watermark, Error};

/// A cheap-to-clone handle on the open store.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

/// What every clone of a `Store` shares: sled's trees, the syncer and the store's condition.
pub(crate) struct Inner {
    pub(crate) db: sled::Db,
    pub(crate) events: sled::Tree,
    pub(crate) schedules: sled::Tree,
    pub(crate) dirty: sled::Tree,
    pub(crate) idempotency: sled::Tree,
    pub(crate) meta: sled::Tree,
    pub(crate) keys: api_keys::KeyTrees,
    pub(crate) admin: admin_tree::AdminLog,
    pub(crate) syncer: sync::Syncer,
    pub(crate) commits: Arc<watermark::Commits>,
    pub(crate) lost: Option<LostWrites>,
    pub(crate) dir: PathBuf,
    pub(crate) health: Arc<health::Health>,
    pub(crate) space: std::sync::Mutex<Option<space::Monitor>>,
    pub(crate) content: content::ContentStore,
    /// The seals, their leaves and the index run → latest seal (`seals/`).
    pub(crate) seals: crate::seal_trees::SealTrees,
    /// The chain heads of the runs written since the last seal (`chain`).
    pub(crate) heads: crate::heads::Heads,
}

/// A store opened with `accept_lost_writes` that had lost some: the commit numbers recovered
/// and acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostWrites {
    pub recovered: u64,
    pub acknowledged: u64,
}

impl Store {
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
    pub(crate) fn failed(&self, e: &sled::Error) {
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

    /// `(syncs, microseconds spent syncing)` since the store was opened.
    pub fn sync_stats(&self) -> (u64, u64) {
        self.inner.syncer.stats()
    }

    pub fn keys(&self) -> api_keys::Keys<'_> {
        api_keys::Keys::new(&self.inner.keys)
    }
}
