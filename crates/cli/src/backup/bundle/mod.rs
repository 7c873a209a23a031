//! One run's bundle on a stopped store: `runledger export --run ID` writes it (`export`),
//! `runledger import --run FILE` checks it whole before it writes anything (`check`) and then
//! adds the run to an existing store (`import`). The format is `runledger_format::bundle`'s.

mod check;
mod export;
mod import;

pub use export::{export_run, transcript_path};
pub use import::{import_run, import_run_into};
