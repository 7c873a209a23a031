//! The store's error type: every way opening, reading or writing the store fails, with the
//! messages an operator reads. It decides nothing; the modules that fail build its variants.

use std::path::PathBuf;

use runledger_domain::RunId;

use crate::health::Refusal;
use crate::sync::SyncError;
use crate::{codec, content};

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
