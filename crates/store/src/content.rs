//! The content store: the bytes runs carry beside the log (attachments, the files, screenshots
//! and plans agents report), one file per distinct content under `<data_dir>/content/sha256/`,
//! named by its SHA-256.
//!
//! The log records only a `Content` (digest, size, media type); the bytes live here, so an
//! event stays small whatever the size of what it names. A content is written to a temporary
//! file, hashed while it is written, fsynced, and renamed into place, then its directory is
//! fsynced: it is durable before the event that names it is appended, and a crash leaves at
//! most a temporary file (removed by the next open), never a partial content under a digest.
//! Contents are never rewritten or deleted while the log names them; the same bytes reported
//! twice are stored once.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use runledger_domain::Content;

/// The directory under the data directory.
pub const DIR: &str = "content";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// The bytes offered are more than the caller allows.
    #[error("more than {limit} bytes")]
    TooLarge { limit: u64 },
    /// The file under a content's digest is missing or does not hold that content.
    #[error("content {digest} is missing or damaged in the content store")]
    Missing { digest: String },
}

/// A cheap-to-clone handle on the content store of one data directory.
#[derive(Clone, Debug)]
pub struct ContentStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    /// Names temporary files uniquely within this process (the pid tells processes apart).
    next_temp: AtomicU64,
}

/// The lower-case hex of a digest (as `format::time::hex`, which this layer cannot use).
fn hex(sha256: &[u8; 32]) -> String {
    sha256.iter().map(|b| format!("{b:02x}")).collect()
}

impl ContentStore {
    /// Opens (creating if needed) the content store under `data_dir`, and removes temporary
    /// files a crash left behind.
    pub fn open(data_dir: &Path) -> Result<ContentStore, Error> {
        let root = data_dir.join(DIR);
        let temp = root.join("tmp");
        for dir in [&root, &root.join("sha256"), &temp] {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        }
        if let Ok(entries) = std::fs::read_dir(&temp) {
            for entry in entries.flatten() {
                // Left by a writer that crashed before its rename: never named by the log.
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(ContentStore {
            inner: Arc::new(Inner {
                root,
                next_temp: AtomicU64::new(0),
            }),
        })
    }

    /// Where the bytes of `sha256` are (or would be) kept.
    pub fn path_of(&self, sha256: &[u8; 32]) -> PathBuf {
        let hex = hex(sha256);
        self.inner
            .root
            .join("sha256")
            .join(&hex[..2])
            .join(&hex[2..])
    }

    /// Stores `bytes` and returns their content, served as `mime_type`.
    pub fn put_bytes(&self, bytes: &[u8], mime_type: &str) -> Result<Content, Error> {
        self.put_reader(bytes, u64::MAX, mime_type)
    }

    /// Stores what `reader` gives, at most `limit` bytes (more is `TooLarge`, and nothing is
    /// stored), and returns its content, served as `mime_type`. Blocking: call it off the
    /// async executor for anything large.
    pub fn put_reader(
        &self,
        mut reader: impl Read,
        limit: u64,
        mime_type: &str,
    ) -> Result<Content, Error> {
        let temp = self.inner.root.join("tmp").join(format!(
            "{}-{}",
            std::process::id(),
            self.inner.next_temp.fetch_add(1, Ordering::Relaxed)
        ));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map_err(io(&temp))?;
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(source) => {
                        return Err(Error::Io {
                            path: PathBuf::from("<input>"),
                            source,
                        })
                    }
                };
                size += n as u64;
                if size > limit {
                    return Err(Error::TooLarge { limit });
                }
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n]).map_err(io(&temp))?;
            }
            file.sync_all().map_err(io(&temp))?;
            Ok((<[u8; 32]>::from(hasher.finalize()), size))
        })();
        let (sha256, size) = match written {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        };
        let target = self.path_of(&sha256);
        let stored = std::fs::metadata(&target).is_ok_and(|m| m.len() == size);
        if stored {
            let _ = std::fs::remove_file(&temp);
        } else {
            let dir = target
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| self.inner.root.clone());
            let placed = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::rename(&temp, &target))
                .and_then(|()| File::open(&dir)?.sync_all());
            if let Err(source) = placed {
                let _ = std::fs::remove_file(&temp);
                return Err(Error::Io {
                    path: target,
                    source,
                });
            }
        }
        Ok(Content {
            sha256,
            size,
            mime_type: mime_type.to_string(),
        })
    }

    /// Opens the bytes of `content` for reading. A file of another size than the content's is
    /// `Missing`: it is not the content the log names.
    pub fn open_content(&self, content: &Content) -> Result<File, Error> {
        let path = self.path_of(&content.sha256);
        let missing = || Error::Missing {
            digest: hex(&content.sha256),
        };
        let file = File::open(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => missing(),
            _ => Error::Io {
                path: path.clone(),
                source,
            },
        })?;
        let len = file
            .metadata()
            .map_err(|source| Error::Io { path, source })?
            .len();
        if len != content.size {
            return Err(missing());
        }
        Ok(file)
    }

    /// Reads the whole of `content` (for small contents such as plans).
    pub fn read(&self, content: &Content) -> Result<Vec<u8>, Error> {
        let mut file = self.open_content(content)?;
        let mut bytes = Vec::with_capacity(usize::try_from(content.size).unwrap_or(0));
        file.read_to_end(&mut bytes).map_err(|source| Error::Io {
            path: self.path_of(&content.sha256),
            source,
        })?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "runledger-content-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn bytes_are_stored_once_under_their_digest_and_read_back() {
        let dir = temp_dir("once");
        let store = ContentStore::open(&dir).expect("open");
        let a = store.put_bytes(b"hello", "text/plain").expect("put");
        let b = store
            .put_bytes(b"hello", "text/markdown")
            .expect("put again");
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(a.size, 5);
        assert_eq!(b.mime_type, "text/markdown");
        assert_eq!(
            hex(&a.sha256),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(store.read(&a).expect("read"), b"hello");
        let files = std::fs::read_dir(dir.join(DIR).join("tmp"))
            .expect("tmp")
            .count();
        assert_eq!(files, 0, "no temporary file is left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn more_than_the_limit_stores_nothing() {
        let dir = temp_dir("limit");
        let store = ContentStore::open(&dir).expect("open");
        let big = vec![b'x'; 200_000];
        match store.put_reader(&big[..], 199_999, "text/plain") {
            Err(Error::TooLarge { limit: 199_999 }) => {}
            other => panic!("expected TooLarge, got {other:?}"),
        }
        let exact = store
            .put_reader(&big[..], 200_000, "text/plain")
            .expect("at the limit");
        assert_eq!(exact.size, 200_000);
        let files = std::fs::read_dir(dir.join(DIR).join("tmp"))
            .expect("tmp")
            .count();
        assert_eq!(files, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_or_missing_content_is_reported_not_served() {
        let dir = temp_dir("damaged");
        let store = ContentStore::open(&dir).expect("open");
        let content = store.put_bytes(b"abcdef", "text/plain").expect("put");
        std::fs::write(store.path_of(&content.sha256), b"abc").expect("truncate");
        assert!(matches!(
            store.open_content(&content),
            Err(Error::Missing { .. })
        ));
        std::fs::remove_file(store.path_of(&content.sha256)).expect("remove");
        assert!(matches!(store.read(&content), Err(Error::Missing { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn opening_removes_what_a_crashed_writer_left() {
        let dir = temp_dir("crash");
        ContentStore::open(&dir).expect("open");
        let stale = dir.join(DIR).join("tmp").join("123-0");
        std::fs::write(&stale, b"partial").expect("write");
        ContentStore::open(&dir).expect("reopen");
        assert!(!stale.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
