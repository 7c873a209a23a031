//! The event log on sled, and the other small durable records that live beside it (API keys,
//! idempotency keys, instance secrets, the "dirty runs" marker).
//!
//! It also keeps the data directory private: the umask of every process that opens a store,
//! and the tightening of a directory an earlier version left readable (`tighten`).
//!
//! This crate alone knows the sled key layout of these trees and the record codec. It knows
//! nothing of the read index (`projection` owns its own trees) or of HTTP. Writes are plain
//! inserts — no sled transactions or batches, which cap throughput and inflate memory (see
//! `docs/decisions/0001-durability.md`); nothing is acknowledged before `sync()` returns.
//!
//! By concern: `handle.rs` holds the `Store` handle, its condition and its durability;
//! `open.rs` opens one; `layout.rs` names the trees and keys; `run_log.rs` appends to and scans
//! the run log; `dirty.rs` the dirty markers and the index floor; `idempotency.rs` the
//! idempotency records; `secrets.rs` the instance secrets; `admin_log.rs` the hash-chained admin
//! audit log (its state in the handle: `admin_tree.rs`); `privacy.rs` the directory's privacy;
//! `snapshots.rs` sled's snapshots; `chain.rs` each run's hash chain and `heads.rs` the heads
//! kept between seals; `seals/` the signed seals over the chains' heads and their verification,
//! in the trees of `seal_trees.rs`; `error.rs` the error type.

#![forbid(unsafe_code)]

pub mod admin_log;
mod admin_tree;
mod agent_index;
mod agent_uids;
pub mod api_keys;
pub mod chain;
pub mod codec;
pub mod content;
pub mod credentials;
mod dirty;
mod error;
mod handle;
mod heads;
pub mod health;
mod idempotency;
mod layout;
mod open;
mod privacy;
mod run_log;
mod schedules;
mod seal_trees;
pub mod seals;
mod secrets;
mod snapshots;
pub mod space;
pub mod sync;
pub mod watermark;

pub use admin_log::{AdminEntry, AdminRecord, ChainCheck};
pub use agent_index::AgentEventEntry;
pub use agent_uids::{Taken, MAX_PASSED_OVER};
pub use codec::{Envelope, ScheduleEnvelope};
pub use error::Error;
pub use handle::{LostWrites, Store};
pub use health::{Refusal, Writer};
pub use idempotency::IdempotencyRecord;
pub use layout::STORE_ENTRIES;
pub use open::Options;
pub use privacy::{private_umask, tighten};
pub use run_log::envelopes;
pub use runledger_config::DEFAULT_CACHE_MB;
pub use secrets::{CREDENTIAL_KEY, INSTANCE_ID, INSTANCE_SECRETS, SESSION_SECRET};
pub use snapshots::{refresh_snapshot, set_aside_snapshots};
pub use sync::SyncError;
