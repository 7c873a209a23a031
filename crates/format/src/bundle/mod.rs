//! One run's bundle (`runledger export --run`, `GET /api/v1/agent/runs/{id}/export`,
//! `runledger import --run`, `runledger inspect`): a header line, a manifest line naming every
//! section with its size and SHA-256, then the sections, each behind a `section NAME SIZE` line
//! (docs/backup.md, docs/decisions/0040-run-bundle.md). `manifest` is the names and the
//! manifest, `write` writes a bundle from a store, `read` streams one back, checking each
//! section's size and digest as it goes.

mod error;
pub mod manifest;
pub mod read;
pub mod write;

pub use error::Error;
pub use manifest::{Entry, Manifest, SectionKind, FORMAT, MAGIC};
pub use read::{BundleReader, Section};
pub use write::{write_bundle, Written};
