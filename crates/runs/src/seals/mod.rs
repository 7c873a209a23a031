//! Seals of the hash chains while the service runs: `sealer.rs` the task that seals the
//! chains' heads at most every `server.seal_interval_secs` (and at start and shutdown),
//! `proofs.rs` the narrow handle the HTTP edge reads a run's proof and the public key through,
//! `webhook.rs` the sending of each seal to `server.seal_webhook`.

mod proofs;
mod sealer;
mod webhook;

pub use proofs::Proofs;
pub use runledger_store::seals::{Proof, ProofSeal};
pub use sealer::{NamedHeads, Sealer};
pub use webhook::SealWebhook;
