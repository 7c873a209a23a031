//! A content restored from its lines: the pieces appended in order to a temporary file of
//! the staging store, hashed as they come, and moved into the content store once whole and
//! verified. It trusts no size or hash the lines claim until the bytes agree.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use runledger_format::time::hex;
use runledger_store::Store;

/// A content being restored from its lines: written to a temporary file of the staging
/// store, hashed as it grows, and moved into the content store once whole and verified.
pub(super) struct Incoming {
    pub(super) sha256: [u8; 32],
    pub(super) size: u64,
    pub(super) next: u64,
    path: PathBuf,
    file: fs::File,
    hasher: sha2::Sha256,
}

impl Incoming {
    /// Begins a content of `size` bytes with SHA-256 `sha256`, in a temporary file of `store`.
    fn start(store: &Store, sha256: [u8; 32], size: u64) -> Result<Incoming, String> {
        let path = store.data_dir().join("content-import.part");
        let file = fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Incoming {
            sha256,
            size,
            next: 0,
            path,
            file,
            hasher: sha2::Digest::new(),
        })
    }

    /// Appends the piece at `offset`, which must be the next one and fit in the size.
    fn add(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        let named = hex(&self.sha256);
        if offset != self.next {
            return Err(format!(
                "content {named}: a piece at byte {offset} where byte {} was due",
                self.next
            ));
        }
        if offset + data.len() as u64 > self.size || (data.is_empty() && self.size > 0) {
            return Err(format!(
                "content {named}: the pieces do not add up to its {} bytes",
                self.size
            ));
        }
        sha2::Digest::update(&mut self.hasher, data);
        self.file
            .write_all(data)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.next += data.len() as u64;
        Ok(())
    }

    fn whole(&self) -> bool {
        self.next == self.size
    }

    /// Verifies the content and moves it into the store's content store.
    fn finish(self, store: &Store) -> Result<(), String> {
        let named = hex(&self.sha256);
        let digest: [u8; 32] = sha2::Digest::finalize(self.hasher).into();
        if digest != self.sha256 {
            return Err(format!(
                "content {named}: its bytes do not have that SHA-256; the backup is damaged"
            ));
        }
        drop(self.file);
        let stored = fs::File::open(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                store
                    .content()
                    .put_reader(f, self.size, "application/octet-stream")
                    .map_err(|e| e.to_string())
            });
        let _ = fs::remove_file(&self.path);
        stored.map(|_| ())
    }
}

/// Adds a content line's piece to the content being restored in `slot`, beginning one when
/// there is none: `true` once the content is whole, verified and in the content store. A
/// piece of another content while one is unfinished means the first was cut short.
pub(super) fn content_piece(
    store: &Store,
    slot: &mut Option<Incoming>,
    sha256: [u8; 32],
    size: u64,
    offset: u64,
    data: &[u8],
) -> Result<bool, String> {
    let mut part = match slot.take() {
        Some(part) if part.sha256 == sha256 => part,
        Some(part) => {
            return Err(format!(
                "content {} ends after {} of its {} bytes",
                hex(&part.sha256),
                part.next,
                part.size
            ))
        }
        None => Incoming::start(store, sha256, size)?,
    };
    part.add(offset, data)?;
    if part.whole() {
        part.finish(store)?;
        Ok(true)
    } else {
        *slot = Some(part);
        Ok(false)
    }
}
