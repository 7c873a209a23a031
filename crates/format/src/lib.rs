//! The JSON forms that both the HTTP API and the CLI write and read: times, runs' shared parts
//! (configuration, creator, status message), the admin audit log's records (`admin`), stored
//! events (the events endpoint, `runledger export`, `import` and `events --json`), the run part
//! of an export written from a store (`export`) and API keys, each with its OpenAPI schema. A backup
//! line and an API answer are one format, defined once here; the HTTP layer's own requests and
//! responses (`http::wire`) are built from these parts. Knows nothing of actix or sled.

#![forbid(unsafe_code)]

pub mod admin;
pub mod bundle;
pub mod events;
pub mod export;
pub mod keys;
pub mod run;
pub mod schedules;
pub mod schema;
pub mod seals;
pub mod time;
