//! What can go wrong opening or starting the webhooks: the outbox or the store failing, a
//! subscription's HTTP client that cannot be built, the dispatcher's thread that cannot start.
//! Only the error type; it decides nothing.

use super::outbox;
use runledger_store as store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Outbox(#[from] outbox::Error),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("cannot build the HTTP client of webhook {name}: {source}")]
    Client {
        name: String,
        source: reqwest::Error,
    },
    #[error("cannot start the webhook dispatcher: {0}")]
    Runtime(std::io::Error),
}
