//! Webhook notifications of runs' changes, delivered at least once from the durable log
//! (`docs/webhooks.md`).
//!
//! The run actor asks `owed` which deliveries a decision owes (the pure mapping is
//! `domain::topics`), writes them to the outbox (`outbox`, a sled tree) *before* the decision's
//! events, and hands them over in memory only once the events are durable. sled recovers a
//! prefix of its writes, so a durable event always has its outbox entries; an entry without
//! its event was never acknowledged and is dropped at start-up, before anything is served. The
//! dispatcher (its own thread and runtime, so a slow receiver never slows the actors or the API)
//! signs each delivery the Standard Webhooks way (`sign`), connects only to addresses the SSRF
//! rule allows (`address`), retries on the schedule of `backoff`, and removes the entry once
//! the delivery ends (2xx, 410 Gone, or the schedule exhausted). What it holds in memory is
//! bounded; the outbox is the truth it rescans when it had to let go.
//!
//! The files: `handle` (the `Webhooks` handle: open and settle, start, stop, a run's
//! deliveries), `owed` (what a decision owes, the outbox write), `tracking` (what the
//! dispatcher holds in memory, the settle and rescan passes), `payload` (the delivery's body),
//! `dispatch` (the dispatcher and what an attempt's outcome means), `client` (the HTTP client
//! and one signed attempt), `error`.

pub mod address;
pub mod backoff;
pub(crate) mod client;
mod dispatch;
mod error;
mod handle;
pub mod outbox;
mod owed;
mod payload;
pub mod sign;
mod tracking;

pub use error::Error;
pub use handle::Webhooks;
pub use outbox::{Attempt, Delivery, Ending, Owed};
pub use payload::Render;

#[cfg(test)]
mod test_support;
