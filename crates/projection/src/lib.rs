//! The read index: a projection of the event log that answers `GET /agent/runs` and
//! `GET /agent/runs/{id}` without folding logs.
//!
//! Two sled trees: `runs` maps a run id to its folded state (a row), and `run_index` holds the
//! secondary keys of `keys.rs`, every one of them scoped by the run's team, so that a list for
//! one team walks that team's runs only. The index is derived data: it is updated after each durable
//! append by the projector thread (`projection/projector.rs`), caught up at startup for runs the
//! store marked dirty, and can be rebuilt from the log at any time — and a rebuild must equal the
//! incrementally maintained index (`verify`, and a property test, check exactly that).
//!
//! A rebuild writes into a fresh pair of trees (the next *generation*: `runs.N`, `run_index.N`;
//! generation 0 is the plain names), switches the generation recorded in sled's default tree,
//! and drops the old pair: dropping a tree frees its pages, where clearing it would remove
//! every key one by one (about as slow as writing them). While it builds, one thread folds
//! the log, a second writes the rows and a third the secondary keys.
//!
//! The index also keeps the number of runs in each state (for `/metrics`) in memory: counted
//! from the state ranges the first time it is asked for, then moved by every write with the
//! exact change each range went through, under the same lock that serialises the writes. A
//! clean stop and a rebuild save it in sled's default tree, and the next open takes it from
//! there instead of walking the ranges again (at 1M runs that walk took 0.7–6 s and left
//! 30–40 MB in the cache). The first write after an open or a save removes the saved copy
//! before it changes anything, so a copy that is there always matches the index.
//!
//! The usage totals per environment (`/metrics`) are kept the same way, from the rows rather
//! than the ranges: every write moves them by the difference between the run's stored row and
//! its new one; the first ask after an open without a saved copy (or after a failed write)
//! sums the rows.
//!//!
//! By concern: `index.rs` holds the `Index` handle and its open; `apply.rs` its incremental
//! writes and the catch-up; `row.rs` the row encoding; `layout.rs` the layout marker;
//! `trees.rs` the generations of trees and the write journal; `rebuild.rs` the rebuild from
//! the log; `verify.rs` the comparison with a fresh rebuild; `tally.rs` the runs-per-state tally
//! and the usage totals, and `counts.rs` the counts the index answers from them; `keys.rs` and
//! `blocks.rs` the key layout; `query.rs` the list queries; `projector.rs` the thread that
//! applies acknowledged commands, and `backlog.rs` the audit entries it has yet to write;
//! `error.rs` the error type; `audit/` the audit index of run events across runs, kept by the
//! same writes and rebuilt with the rest.

#![forbid(unsafe_code)]

mod apply;
pub mod audit;
#[cfg(test)]
mod audit_tests;
mod backlog;
mod blocks;
mod counts;
mod error;
mod index;
pub mod keys;
mod layout;
mod open;
pub mod projector;
pub mod query;
mod rebuild;
mod row;
mod tally;
mod trees;
mod verify;

pub use audit::{AuditItem, AuditPage, AuditQuery, Position};
pub use error::Error;
pub use index::Index;
pub use layout::LAYOUT_VERSION;
pub use open::open;
pub use query::{Cursor, Order, Page, Query, SortBy};
pub use rebuild::Rebuilt;
pub use tally::{UsageByEnvironment, UsageTotals};
pub use verify::{Difference, Dump};
