//! Backup and restore: `runledger export [--with-keys] [--output FILE]` and `runledger import`.
//!
//! A backup is JSON lines. An event line is exactly what `format::events::event_json` writes (the
//! events API shares it), and `event_from_json` reads it back, refusing anything that would not
//! render to the same line, so every event comes back as it was stored, except MCP credential
//! values: they read `***` in every output. A run's sealed credentials come back with it (and
//! open again only with the instance's credential key, which only `--with-keys` carries); a
//! legacy run's plain credential values are not in a backup at all. `--with-keys` frames
//! the events with a `backup` header line and, after them, writes one line per API key record
//! (its SHA-256, never the key), one per instance secret and an `end` line with the counts.
//! Those lines carry a `record` field, which event lines never have; the frame lets an import
//! tell a whole backup from a truncated one. With `--with-keys`, the admin audit log follows
//! the runs' and schedules' events, one `admin` line per record, and is restored only if its
//! hash chain verifies.
//!
//! An import never merges and is all-or-nothing: it restores only into a data directory that
//! holds no runs and no keys, builds the store in a staging directory while it checks each line
//! as the file streams by, and moves the store into place only once every line is in, the read
//! index is rebuilt and everything is durable. This module writes through `Store` and `Index`
//! only; it knows neither sled's layout nor the index's. Like the other offline commands it
//! must not run while a server holds the data directory (the store's lock refuses that).
//!
//! `format` is the lines, `export` writes them; `import` stages a store (`staging`), fills it
//! (`restore`, with `checks` on the order of events, `admin_chain` on the admin audit records'
//! hash chain and `incoming` for contents) and moves it
//! into place durably (`durable`).

mod admin_chain;
mod bundle;
mod checks;
mod durable;
mod export;
mod format;
mod import;
mod incoming;
mod restore;
mod staging;
mod verify_export;

pub use bundle::{export_run, import_run, import_run_into, transcript_path};
pub use export::export;
pub use import::import;
pub(crate) use verify_export::print_report;
pub use verify_export::verify_export;

#[cfg(test)]
mod fixtures;
