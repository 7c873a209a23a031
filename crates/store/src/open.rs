//! Opening a store: the options, sled's configuration and what its open failures mean, and the
//! check of the commit watermark that refuses a store which lost acknowledged writes. It owns
//! no record; what it opens is the `Store` handle of `handle.rs`.

use std::path::Path;
use std::sync::Arc;

use crate::handle::{Inner, LostWrites, Store};
use crate::layout::{DIRTY, EVENTS, IDEMPOTENCY, META, SCHEDULE_EVENTS, SLED_DIR};
use crate::privacy::private_umask;
use crate::{admin_tree, api_keys, content, health, sync, watermark, Error, DEFAULT_CACHE_MB};

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

/// Opens sled's database under `data_dir`; a database another process holds is `Locked`.
pub(crate) fn open_sled(data_dir: &Path, cache_bytes: u64) -> Result<sled::Db, Error> {
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
        let seals = crate::seal_trees::SealTrees::open(&db)?;
        Ok(Store {
            inner: Arc::new(Inner {
                events: db.open_tree(EVENTS)?,
                schedules: db.open_tree(SCHEDULE_EVENTS)?,
                dirty: db.open_tree(DIRTY)?,
                idempotency: db.open_tree(IDEMPOTENCY)?,
                meta,
                keys: api_keys::KeyTrees::open(&db)?,
                admin: admin_tree::AdminLog::open(&db)?,
                syncer,
                commits,
                lost,
                dir: data_dir.to_path_buf(),
                db,
                health,
                space: std::sync::Mutex::new(None),
                content,
                seals,
                heads: Default::default(),
            }),
        })
    }

    /// Whether `data_dir` holds a store (without opening, let alone creating, one).
    pub fn exists_in(data_dir: &Path) -> bool {
        data_dir.join(SLED_DIR).exists()
    }

    /// Whether `data_dir` holds a store that can be read: sled's log file is there. For the
    /// commands that only read, which must not create a store where there is none.
    pub fn present_in(data_dir: &Path) -> bool {
        data_dir.join(SLED_DIR).join("db").is_file()
    }
}
