//! The replay corpus (`docs/debugging.md`, "Check an upgrade"): recorded run histories under
//! `tests/fixtures/histories/`, each folded by this build and compared field by field with the
//! state recorded with it, and the real agent CLIs' recorded output under
//! `tests/fixtures/transcripts/`, read again by the preset observers and compared with the
//! outcome, usage and session id recorded with it. A change to the fold, to a record decoder
//! or to an observer that alters a past run fails here, naming the history and the field.
//! Histories come from stores the real binary wrote (the agent-CLI suite's, with the real
//! claude, codex and gemini CLIs) and from the rules themselves (`synthetic.rs`: every event
//! variant, records of every schema version); `record.rs` adds new ones and never rewrites
//! one that exists.

mod check;
mod file;
mod histories;
mod record;
mod synthetic;
mod transcripts;
