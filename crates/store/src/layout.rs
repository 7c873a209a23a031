//! The sled key layout of the store's own trees: their names, the directory that holds sled's
//! files, and the key of an event record. Only names and keys live here; what is stored under
//! them belongs to the modules that read and write each tree.

use runledger_domain::RunId;

use crate::watermark;

pub(crate) const EVENTS: &str = "events";
/// The schedules' logs (`store/schedules.rs`).
pub(crate) const SCHEDULE_EVENTS: &str = "schedule_events";
/// The admin audit log (`store/admin_log.rs`).
pub(crate) const ADMIN_LOG: &str = "admin_log";
pub(crate) const DIRTY: &str = "dirty";
pub(crate) const IDEMPOTENCY: &str = "idempotency";
pub(crate) const META: &str = "meta";
/// The `meta` record of the index floor (`Store::index_floor`).
pub(crate) const INDEX_FLOOR: &str = "index_floor";
/// The seals, by number (`seals/`).
pub(crate) const SEALS: &str = "seals";
/// Each seal's leaves, under `(seal number, leaf index)`.
pub(crate) const SEAL_LEAVES: &str = "seal_leaves";
/// The latest seal covering each run: run id → `(seal number, leaf index, seq)`.
pub(crate) const SEALED_RUNS: &str = "sealed_runs";
/// The `meta` record present while every write is covered by a seal (`chain`, `seals/`).
pub(crate) const SEALS_CLEAN: &str = "seals_clean";
/// The `meta` record of the instance's seal signing key (a secret never exported).
pub(crate) const SEAL_KEY: &str = "seal_key";
/// The `meta` record that says an import took an export that did not verify.
pub(crate) const IMPORTED_UNVERIFIED: &str = "imported_unverified";
/// The directory under the data directory that holds sled's files.
pub(crate) const SLED_DIR: &str = "sled";
/// The entries of a data directory that make up the store (the rest, such as transcripts and
/// workspaces, lives beside it): what a restore moves into place.
pub const STORE_ENTRIES: [&str; 2] = [SLED_DIR, watermark::FILE_NAME];

pub(crate) fn event_key(run_id: RunId, seq: u64) -> [u8; 24] {
    let mut key = [0u8; 24];
    key[..16].copy_from_slice(&run_id.to_bytes());
    key[16..].copy_from_slice(&seq.to_be_bytes());
    key
}

pub(crate) fn split_event_key(key: &[u8]) -> Option<(RunId, u64)> {
    let id: [u8; 16] = key.get(..16)?.try_into().ok()?;
    let seq: [u8; 8] = key.get(16..24)?.try_into().ok()?;
    Some((RunId::from_bytes(id), u64::from_be_bytes(seq)))
}
