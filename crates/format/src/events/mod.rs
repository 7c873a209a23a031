//! Stored events as JSON: `RunEvent` (one line of the events endpoint, of `runledger export`
//! and of `events --json`) and its exact inverse `event_from_json` (`runledger import`), which
//! accepts only what `event_json` writes so that a backup restores every event byte for byte.

mod changes;
mod data;
mod derived;
mod error;
mod line;
mod origin;
mod parse;
mod provenance;

pub use changes::*;
pub use data::*;
pub use derived::{DerivedData, RepoPinData};
pub use error::EventJsonError;
pub use line::{event_json, RunEvent};
pub use origin::{OriginData, OriginKeyData};
pub use parse::event_from_json;
pub use provenance::*;
