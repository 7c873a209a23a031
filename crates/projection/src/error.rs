//! The read index's error type. It decides nothing; the modules that fail build its variants.

use runledger_store as store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("index storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("corrupt index row for run {run_id}: {detail}")]
    CorruptRow { run_id: String, detail: String },
    #[error("invalid cursor: {0}")]
    BadCursor(&'static str),
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}
